//! The shortest recipe text that edits a template (a level's recipe) into a recipe: what a
//! compact header stores instead of the whole recipe (docs/format.md). It is the command
//! line's language read by [`Recipe::edit_from_level`], and every text is checked by applying
//! it, so a text is returned only when it gives the recipe back exactly.

use super::print::print_rule_with;
use super::{Action, Base, Recipe, TRAIN_KEYS, TrainSpec};
use crate::mix::{self, MixSpec};

impl Recipe {
    /// Text that [`Recipe::edit_from_level`] turns `template` into `self` with, as short as
    /// this printer can make it (empty when they are equal); `None` when no text does (a
    /// model-file base, another model).
    pub fn edits_from(&self, template: &Recipe) -> Option<String> {
        if self.kind() != template.kind() || matches!(self.base, Base::File { .. }) {
            return None;
        }
        let head: Vec<String> = base_edits(&self.base, &template.base)
            .into_iter()
            .chain(mix_edits(self.mix.as_ref(), template.mix.as_ref()))
            .collect();
        // Train keys left out take the template's first training's values; when that does
        // not give the recipe back (a window whose stride follows it, say), every key is given.
        let first = template.actions().find_map(|a| match a {
            Action::Train(t) => Some(*t),
            Action::Infer => None,
        });
        for all_keys in [false, true] {
            let mut items = head.clone();
            if self.schedule != template.schedule {
                let kind = self.kind();
                let action = |a: &Action| match (a, first.filter(|_| !all_keys)) {
                    (Action::Infer, _) => "infer".to_string(),
                    (Action::Train(t), Some(f)) => train_edits(t, &f, kind),
                    (Action::Train(t), None) => train_all(t, kind),
                };
                items.extend(self.schedule.iter().map(|r| print_rule_with(r, &action)));
            }
            let text = items.join(" ");
            if template.edit_from_level(&text, None).ok().as_ref() == Some(self) {
                return Some(text);
            }
        }
        None
    }
}

/// A `cfg:` item with the sizes and seed that differ, or nothing.
fn base_edits(base: &Base, template: &Base) -> Option<String> {
    if base == template {
        return None;
    }
    // Levels start fresh; another template's text fails the check in `edits_from`.
    let (
        Base::Fresh { config, seed },
        Base::Fresh {
            config: c0,
            seed: s0,
        },
    ) = (base, template)
    else {
        return None;
    };
    let mut keys: Vec<String> = config
        .keys()
        .iter()
        .zip(c0.keys())
        .filter(|((_, v), (_, v0))| v != v0)
        .map(|((k, v), _)| format!("{k}={v}"))
        .collect();
    if seed != s0 {
        keys.push(format!("seed={seed}"));
    }
    Some(format!("cfg:{}", keys.join(",")))
}

/// A `mix:` item with the keys that differ, `mix:off`, or nothing.
fn mix_edits(mix: Option<&MixSpec>, template: Option<&MixSpec>) -> Option<String> {
    let mix = match (mix, template) {
        (None, None) => return None,
        (None, Some(_)) => return Some("mix:off".into()),
        (Some(m), t) => (m, t.unwrap_or(&MixSpec::DEFAULT)),
    };
    if mix.0 == mix.1 && template.is_some() {
        return None;
    }
    let keys: Vec<String> = mix::KEYS
        .iter()
        .filter(|k| (k.get)(mix.0) != (k.get)(mix.1))
        .map(|k| format!("{}={}", k.name, (k.get)(mix.0)))
        .collect();
    Some(format!("mix:{}", keys.join(",")))
}

/// `train` with the keys whose values differ from `template`'s.
fn train_edits(t: &TrainSpec, template: &TrainSpec, kind: super::ModelKind) -> String {
    let keys: Vec<String> = TRAIN_KEYS
        .iter()
        .map(|k| (k.name, (k.print)(t, kind), (k.print)(template, kind)))
        .filter(|(_, v, v0)| v != v0)
        .map(|(name, v, _)| format!("{name}={v}"))
        .collect();
    match keys.is_empty() {
        true => "train".into(),
        false => format!("train({})", keys.join(",")),
    }
}

/// `train` with every key, the implicit ones too.
fn train_all(t: &TrainSpec, kind: super::ModelKind) -> String {
    let keys: Vec<String> = TRAIN_KEYS
        .iter()
        .map(|k| format!("{}={}", k.name, (k.print)(t, kind)))
        .collect();
    format!("train({})", keys.join(","))
}
