//! Editing a recipe with recipe text, as the command line does (docs/recipes.md, "The command
//! line"): the parsed items of the text replace or edit the parts of a template (a level's
//! recipe); what the text leaves out stays as the template has it.

use super::parse::{BaseItem, Fragment, MixItem, Parser, declared_kind};
use super::syntax::{Loc, RecipeError, hex};
use super::{Action, Base, ModelConfig, ModelKind, Recipe};
use crate::mix::MixSpec;

impl Recipe {
    /// Applies a recipe text onto this recipe (the level's): a base in the text replaces the
    /// base (`cfg:` keys edit this recipe's sizes; keys left out keep their values), rules
    /// replace the schedule, and `train` keys left out take their defaults
    /// ([`super::TrainSpec::defaults`]). `file` is the loaded model file's base when the text
    /// (or the caller) names one.
    pub fn edit(&self, text: &str, file: Option<&Base>) -> Result<Recipe, RecipeError> {
        self.edit_with(text, file, false)
    }

    /// [`Recipe::edit`], except that `train` keys left out take the values of this recipe's
    /// first `train` (a level's window and rate), as `--recipe` promises; the defaults only
    /// when it has none.
    pub fn edit_from_level(&self, text: &str, file: Option<&Base>) -> Result<Recipe, RecipeError> {
        self.edit_with(text, file, true)
    }

    fn edit_with(
        &self,
        text: &str,
        file: Option<&Base>,
        keys_from_self: bool,
    ) -> Result<Recipe, RecipeError> {
        let kind = file.map_or(self.kind(), |b| b.config().kind());
        let mut p = Parser::new(text, false);
        if keys_from_self && kind == self.kind() {
            p.train_defaults = self.actions().find_map(|a| match a {
                Action::Train(t) => Some(*t),
                _ => None,
            });
        }
        let frag = p.parse(declared_kind(text).unwrap_or(kind))?;
        check_kind(&p, &frag, kind)?;
        let base = match frag.base {
            None => file.unwrap_or(&self.base).clone(),
            Some((item, loc)) => self.edited_base(&p, item, loc, file, kind)?,
        };
        let mix = match frag.mix {
            None => self.mix,
            Some((MixItem::Off, _)) => None,
            Some((MixItem::Keys(keys), loc)) => {
                Some(p.mix_spec(self.mix.unwrap_or(MixSpec::DEFAULT), &keys, loc)?)
            }
        };
        let recipe = Recipe {
            base,
            mix,
            schedule: frag.rules.unwrap_or_else(|| self.schedule.clone()),
        };
        p.check(&recipe)?;
        Ok(recipe)
    }

    /// The base a text's base item makes of this recipe's, given the loaded model file.
    fn edited_base(
        &self,
        p: &Parser<'_>,
        item: BaseItem,
        loc: Loc,
        file: Option<&Base>,
        kind: ModelKind,
    ) -> Result<Base, RecipeError> {
        let fail = |m: String| Err(p.error(loc, m));
        match (item, file) {
            (BaseItem::Cfg { .. }, Some(_)) => {
                fail("cfg: makes a fresh model, but a model file is given too".into())
            }
            (BaseItem::Cfg { sizes, seed }, None) => {
                let (config, old_seed) = match &self.base {
                    Base::Fresh { config, seed } => (config.clone(), *seed),
                    Base::File { .. } => (ModelConfig::default_for(kind), 0),
                };
                let mut config = p.config(config, &sizes, loc)?;
                // A level's prior comes with its network: other sizes start from seeded
                // weights, unless the text names a prior itself.
                if !sizes.iter().any(|(key, ..)| *key == "prior") {
                    crate::prior::keep_if_it_fits(&mut config);
                }
                Ok(Base::Fresh {
                    config,
                    seed: seed.unwrap_or(old_seed),
                })
            }
            (BaseItem::Path, Some(f)) => Ok(f.clone()),
            (BaseItem::File { sha256, .. }, Some(f)) => {
                if f.sha256() != Some(sha256) {
                    return fail(format!(
                        "the recipe names the model file with SHA-256 {}, but the given file's \
                         is {}",
                        hex(&sha256),
                        f.sha256().map_or(String::new(), |h| hex(&h))
                    ));
                }
                Ok(f.clone())
            }
            (BaseItem::Path | BaseItem::File { .. }, None) => {
                fail("this model file is not loaded".into())
            }
        }
    }
}

/// A model named in the text must be the model being edited.
fn check_kind(p: &Parser<'_>, frag: &Fragment, kind: ModelKind) -> Result<(), RecipeError> {
    match frag.kind {
        Some((named, loc)) if named != kind => Err(p.error(
            loc,
            format!(
                "the recipe names {}, but the model is {}",
                named.name(),
                kind.name()
            ),
        )),
        _ => Ok(()),
    }
}
