//! Reading the recipe language (docs/recipes.md, "The language") into a [`Fragment`]: the items
//! as written, each with its span, so that every error points at the text it is about.
//!
//! ```text
//! recipe := item (' ' item)*              kind first, then the base, then rules
//! kind   := mamba1 | rwkv7
//! base   := cfg:[KEY=N,...]               fresh seeded model (sizes and seed)
//!         | file:PATH                     a model file (PATH runs to the next space)
//!         | file:sha256=HEX[,name=N][,KEY=N...]   canonical form of a model-file base
//! mix    := mix:[KEY=N,...] | mix:off     the mixing stage
//! rule   := [POS]..[POS]:body             start defaults to 0, end to the end of the input
//! POS    := INT[K|M|G] | DEC%             bytes (K = 1024) or percent of the input
//! body   := action | repeat(LEN:action,...)
//! action := infer | train[(KEY=VALUE,...)]  keys: src/recipe/train.rs
//! ```
//!
//! The same parser reads complete recipes ([`parse_complete`]: headers give every key, nothing
//! comes from defaults that a later build might change) and fragments that edit a template
//! (src/recipe/edit.rs: left-out parts come from the level's recipe). The parser reads the form
//! of values; their bounds live with what they bound ([`super::train::TRAIN_KEYS`],
//! [`ModelConfig::check_sizes`], [`crate::mix::KEYS`], [`Span::validate`], [`check_parts`],
//! [`check_rule_count`]), which [`Recipe::validate`] calls too; the parser calls the same
//! checks and maps their errors back to the span of the offending text.

use super::syntax::{Cursor, KeyValue, Loc, RecipeError, Word, decode_name, parse_sha};
use super::train::{TrainKey, train_key, train_key_names};
use super::{
    Action, Base, Body, ModelConfig, ModelKind, PERCENT_ONE, Part, Pos, Recipe, Rule, Span,
    TrainSpec, check_parts, check_rule_count,
};
use crate::mix::{self, MixKey, MixSpec};

/// A base as written.
pub(super) enum BaseItem {
    /// `cfg:` keys (sizes) and the seed.
    Cfg { sizes: Sizes, seed: Option<u64> },
    /// `file:PATH` (the caller loads the file: [`file_path`]).
    Path,
    /// `file:sha256=...`.
    File {
        sha256: [u8; 32],
        name: Option<String>,
        sizes: Sizes,
    },
}

/// Model sizes as written: each key, its value and the value's span.
pub(super) type Sizes = Vec<(&'static str, usize, Loc)>;

/// A `mix:` item as written.
pub(super) enum MixItem {
    /// `mix:off`: no mixing stage.
    Off,
    /// `mix:KEY=N,...`, with each value's span.
    Keys(Vec<(&'static MixKey, u32, Loc)>),
}

/// A parsed text before it is completed into a [`Recipe`]: each item with its span.
#[derive(Default)]
pub(super) struct Fragment {
    pub kind: Option<(ModelKind, Loc)>,
    pub base: Option<(BaseItem, Loc)>,
    pub mix: Option<(MixItem, Loc)>,
    pub rules: Option<Vec<Rule>>,
}

/// The model a text names in its first word, if it does.
pub fn declared_kind(text: &str) -> Option<ModelKind> {
    ModelKind::parse(text.split_whitespace().next()?).ok()
}

/// The path of a `file:PATH` base, if the text has one (the caller loads the file, then
/// completes the recipe with it).
pub fn file_path(text: &str) -> Option<&str> {
    text.split_whitespace()
        .take(2)
        .find_map(|w| w.strip_prefix("file:"))
        .filter(|rest| !rest.is_empty() && !rest.starts_with("sha256="))
}

/// Whether a text's `mix:` item gives one of the stage's sizes (`table`, `match`, `fit` or `cap`):
/// a run then keeps the sizes it has rather than fitting the stage to its input
/// (src/fit.rs). A text that does not parse gives none (its error comes where it is applied).
pub fn names_stage_sizes(text: &str) -> bool {
    match fragment(text) {
        Some(Fragment {
            mix: Some((MixItem::Keys(keys), _)),
            ..
        }) => keys
            .iter()
            .any(|(key, _, _)| matches!(key.name, "table" | "match" | "fit" | "cap")),
        _ => false,
    }
}

/// Whether a text gives rules of its own (a schedule: `0..:train(...)`, `0..:infer`): a run
/// then trains as they say rather than as lmzip chooses for its input. A text that does not
/// parse gives none (its error comes where it is applied).
pub fn names_rules(text: &str) -> bool {
    matches!(fragment(text), Some(Fragment { rules: Some(_), .. }))
}

/// What an edit text gives, for the questions above; `None` when it does not parse.
fn fragment(text: &str) -> Option<Fragment> {
    let kind = declared_kind(text).unwrap_or(ModelKind::Mamba1);
    Parser::new(text, false).parse(kind).ok()
}

/// Parses a complete recipe (every key given), as headers store it.
pub fn parse_complete(text: &str) -> Result<Recipe, RecipeError> {
    let p = Parser::new(text, true);
    let Some(kind) = declared_kind(text) else {
        let message = "a recipe starts with its model: mamba1 or rwkv7".into();
        return Err(p.error(p.first_word(), message));
    };
    let frag = p.parse(kind)?;
    let Some((base, loc)) = frag.base else {
        let message = "the recipe has no base (cfg:... or file:...)".into();
        return Err(p.error(Loc::new(text.len(), 0), message));
    };
    let recipe = Recipe {
        base: p.complete_base(kind, base, loc)?,
        mix: p.complete_mix(frag.mix)?,
        schedule: frag.rules.unwrap_or_default(),
    };
    p.check(&recipe)?;
    Ok(recipe)
}

/// Reads the text; holds what the items of a text are read against.
pub(super) struct Parser<'a> {
    text: &'a str,
    /// Complete recipes must give every key.
    strict: bool,
    /// What `train` keys left out take: the level's training when a recipe edits a level,
    /// else [`TrainSpec::defaults`].
    pub train_defaults: Option<TrainSpec>,
}

impl<'a> Parser<'a> {
    pub fn new(text: &'a str, strict: bool) -> Self {
        Parser {
            text,
            strict,
            train_defaults: None,
        }
    }

    pub fn error(&self, loc: Loc, message: String) -> RecipeError {
        RecipeError::new(self.text, loc, message)
    }

    /// The whole text.
    fn all(&self) -> Loc {
        Loc::new(0, self.text.len())
    }

    fn first_word(&self) -> Loc {
        let start = self.text.len() - self.text.trim_start().len();
        let len = self.text[start..]
            .find(char::is_whitespace)
            .unwrap_or(self.text.len() - start);
        Loc::new(start, len)
    }

    /// Parses the items of the text for a model of kind `kind`.
    pub fn parse(&self, kind: ModelKind) -> Result<Fragment, RecipeError> {
        let mut frag = Fragment::default();
        let mut c = Cursor::new(self.text);
        let mut items = 0usize;
        loop {
            c.skip_spaces();
            if c.peek().is_none() {
                return Ok(frag);
            }
            self.item(&mut c, kind, &mut frag, items)?;
            if !c.at_end_of_item() {
                let extra = c.take_item();
                return Err(self.error(extra.loc, "unexpected text".into()));
            }
            items += 1;
        }
    }

    /// One item; `items` came before it.
    fn item(
        &self,
        c: &mut Cursor<'a>,
        kind: ModelKind,
        frag: &mut Fragment,
        items: usize,
    ) -> Result<(), RecipeError> {
        let start = c.pos;
        let rest = c.rest();
        let first = rest.split(|ch: char| ch.is_whitespace()).next();
        let first = Loc::new(start, first.unwrap_or("").len());
        let fail = |m: &str| Err(self.error(first, m.into()));
        if let Ok(named) = ModelKind::parse(&rest[..first.len]) {
            if items > 0 {
                return fail("the model is named first, before the base and the rules");
            }
            c.pos += first.len;
            frag.kind = Some((named, first));
        } else if rest.starts_with("cfg:") || rest.starts_with("file:") {
            let misplaced = [
                (frag.base.is_some(), "a second base"),
                (frag.rules.is_some(), "the base comes before the rules"),
                (frag.mix.is_some(), "the base comes before mix:"),
            ];
            if let Some((_, m)) = misplaced.iter().find(|(bad, _)| *bad) {
                return fail(m);
            }
            let item = self.base(c, kind)?;
            frag.base = Some((item, c.since(start)));
        } else if rest.starts_with("mix:") {
            let misplaced = [
                (frag.mix.is_some(), "a second mix:"),
                (frag.rules.is_some(), "mix: comes before the rules"),
            ];
            if let Some((_, m)) = misplaced.iter().find(|(bad, _)| *bad) {
                return fail(m);
            }
            let item = self.mix(c)?;
            frag.mix = Some((item, c.since(start)));
        } else {
            let rule = self.rule(c, kind)?;
            let rules = frag.rules.get_or_insert_with(Vec::new);
            rules.push(rule);
            check_rule_count(rules.len()).map_err(|m| self.error(Loc::new(start, 1), m))?;
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // The base
    // -----------------------------------------------------------------------------------------

    fn base(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<BaseItem, RecipeError> {
        if c.eat("file:") {
            return self.file_base(c, kind);
        }
        // The caller saw "cfg:" here.
        c.eat("cfg:");
        let mut sizes = Vec::new();
        let mut seed = None;
        if !c.at_end_of_item() {
            c.key_values(false, |kv| {
                if kv.key.text == "seed" {
                    let message = "the seed is a whole number";
                    let v = kv.value.text.parse::<u64>();
                    seed = Some(v.map_err(|_| self.error(kv.value.loc, message.into()))?);
                } else {
                    sizes.push(self.size(kind, kv)?);
                }
                Ok(())
            })?;
        }
        Ok(BaseItem::Cfg { sizes, seed })
    }

    /// After `file:`: a path, or the hash form.
    fn file_base(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<BaseItem, RecipeError> {
        if !c.rest().starts_with("sha256=") {
            let path = c.take_item();
            if path.text.is_empty() {
                return Err(self.error(path.loc, "file: needs a path".into()));
            }
            return Ok(BaseItem::Path);
        }
        let (mut sha256, mut name, mut sizes) = (None, None, Vec::new());
        c.key_values(false, |kv| {
            let bad = |m: &str| self.error(kv.value.loc, m.into());
            match kv.key.text {
                "sha256" => {
                    let hash = parse_sha(kv.value.text);
                    sha256 = Some(hash.ok_or_else(|| bad("a SHA-256 is 64 hexadecimal digits"))?)
                }
                "name" => {
                    let decoded = decode_name(kv.value.text);
                    name = Some(decoded.ok_or_else(|| bad("a bad %-escape in the name"))?)
                }
                _ => sizes.push(self.size(kind, kv)?),
            }
            Ok(())
        })?;
        let end = Loc::new(c.pos, 1);
        let sha256 = sha256.ok_or_else(|| self.error(end, "file: lacks sha256=".into()))?;
        Ok(BaseItem::File {
            sha256,
            name,
            sizes,
        })
    }

    /// One size of the model: `key=N` with a key the model has. Its bounds are the model's
    /// ([`ModelConfig::validate`], mapped back by [`Parser::config`]).
    fn size(
        &self,
        kind: ModelKind,
        kv: KeyValue<'a>,
    ) -> Result<(&'static str, usize, Loc), RecipeError> {
        let (key, value) = (kv.key.text, kv.value);
        let names = ModelConfig::key_names(kind);
        let Some(&name) = names.iter().find(|k| **k == key) else {
            let message = format!(
                "{} has no size '{key}' (sizes: {}, and seed)",
                kind.name(),
                names.join(", ")
            );
            return Err(self.error(kv.key.loc, message));
        };
        match value.text.parse::<usize>() {
            Ok(v) => Ok((name, v, value.loc)),
            Err(_) => Err(self.error(value.loc, format!("{key} is a whole number"))),
        }
    }

    /// `sizes` applied onto `config` and validated; an error about one size points at it.
    pub fn config(
        &self,
        mut config: ModelConfig,
        sizes: &Sizes,
        loc: Loc,
    ) -> Result<ModelConfig, RecipeError> {
        let keys: Vec<(&str, usize)> = sizes.iter().map(|&(k, v, _)| (k, v)).collect();
        config
            .apply_keys(&keys)
            .map_err(|e| self.error(loc, e.to_string()))?;
        if let Err((key, message)) = config.check_sizes() {
            let at = sizes.iter().find(|s| s.0 == key).map_or(loc, |s| s.2);
            return Err(self.error(at, message));
        }
        config
            .validate()
            .map_err(|e| self.error(loc, e.to_string()))?;
        Ok(config)
    }

    /// The full configuration of a complete recipe: every size given.
    fn full_config(
        &self,
        kind: ModelKind,
        sizes: &Sizes,
        loc: Loc,
    ) -> Result<ModelConfig, RecipeError> {
        let missing: Vec<&str> = ModelConfig::required_key_names(kind)
            .into_iter()
            .filter(|n| !sizes.iter().any(|s| s.0 == *n))
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "a stored recipe gives every size; missing: {}",
                missing.join(", ")
            );
            return Err(self.error(loc, message));
        }
        self.config(ModelConfig::default_for(kind), sizes, loc)
    }

    /// The base of a complete recipe.
    fn complete_base(
        &self,
        kind: ModelKind,
        base: BaseItem,
        loc: Loc,
    ) -> Result<Base, RecipeError> {
        match base {
            BaseItem::Cfg { sizes, seed } => {
                let message = "cfg: lacks the seed".into();
                let seed = seed.ok_or_else(|| self.error(loc, message))?;
                let config = self.full_config(kind, &sizes, loc)?;
                Ok(Base::Fresh { config, seed })
            }
            BaseItem::File {
                sha256,
                name,
                sizes,
            } => Ok(Base::File {
                config: self.full_config(kind, &sizes, loc)?,
                sha256,
                name,
            }),
            BaseItem::Path => Err(self.error(
                loc,
                "a stored recipe names its model file by hash (file:sha256=...)".into(),
            )),
        }
    }

    // -----------------------------------------------------------------------------------------
    // The mixing stage
    // -----------------------------------------------------------------------------------------

    /// `mix:off` or `mix:KEY=N,...` (the caller saw `mix:`).
    fn mix(&self, c: &mut Cursor<'a>) -> Result<MixItem, RecipeError> {
        c.eat("mix:");
        let keys_at = c.pos;
        if c.eat("off") {
            if c.at_end_of_item() {
                return Ok(MixItem::Off);
            }
            c.pos = keys_at;
        }
        let mut keys = Vec::new();
        if !c.at_end_of_item() {
            c.key_values(false, |kv| {
                let name = kv.key.text;
                let Some(key) = mix::key(name) else {
                    let names = mix::key_names(", ");
                    let message = format!("mix has no key '{name}' (keys: {names}; or mix:off)");
                    return Err(self.error(kv.key.loc, message));
                };
                let message = format!("mix {name} is a whole number");
                let v = kv.value.text.parse::<u32>();
                let v = v.map_err(|_| self.error(kv.value.loc, message))?;
                keys.push((key, v, kv.value.loc));
                Ok(())
            })?;
        }
        Ok(MixItem::Keys(keys))
    }

    /// `keys` applied onto `spec`, each checked where it is written; then the whole stage
    /// (its memory) is checked against the item `loc`.
    pub fn mix_spec(
        &self,
        mut spec: MixSpec,
        keys: &[(&'static MixKey, u32, Loc)],
        loc: Loc,
    ) -> Result<MixSpec, RecipeError> {
        for &(key, v, vloc) in keys {
            (key.check)(v).map_err(|m| self.error(vloc, m))?;
            (key.set)(&mut spec, v);
        }
        // A level's warm start comes with its stage: an edit to other components starts the
        // mixer cold, unless it names the start itself.
        if !keys.iter().any(|(key, ..)| key.name == "warm") {
            mix::warm::keep_if_it_fits(&mut spec);
        }
        spec.validate()
            .map_err(|e| self.error(loc, e.to_string()))?;
        Ok(spec)
    }

    /// The mixing stage of a complete recipe: none, or every key given.
    fn complete_mix(&self, mix: Option<(MixItem, Loc)>) -> Result<Option<MixSpec>, RecipeError> {
        match mix {
            None => Ok(None),
            Some((MixItem::Off, loc)) => Err(self.error(
                loc,
                "a stored recipe without a mixing stage has no mix: item".into(),
            )),
            Some((MixItem::Keys(keys), loc)) => {
                // Every key without an implicit value must be there; the others default to it.
                let required = mix::KEYS.iter().filter(|k| k.implicit.is_none());
                if required
                    .clone()
                    .any(|k| !keys.iter().any(|(given, _, _)| given.name == k.name))
                {
                    let names: Vec<&str> = required.map(|k| k.name).collect();
                    let message = format!("a stored mix: gives every key of {}", names.join(", "));
                    return Err(self.error(loc, message));
                }
                let base = MixSpec::DEFAULT.with_implicit_keys();
                Ok(Some(self.mix_spec(base, &keys, loc)?))
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Rules
    // -----------------------------------------------------------------------------------------

    fn rule(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<Rule, RecipeError> {
        let span = self.span(c)?;
        if !c.eat(":") {
            let message = "expected ':' and an action after the span".into();
            return Err(self.error(Loc::new(c.pos, 1), message));
        }
        let body = if c.eat("repeat(") {
            self.repeat(c, kind)?
        } else {
            Body::Action(self.action(c, kind)?)
        };
        Ok(Rule { span, body })
    }

    /// `[POS]..[POS]`, checked by [`Span::validate`].
    fn span(&self, c: &mut Cursor<'a>) -> Result<Span, RecipeError> {
        let start_at = c.pos;
        let start = if c.rest().starts_with("..") {
            Pos::Bytes(0)
        } else {
            self.pos(c)?
        };
        if !c.eat("..") {
            let message =
                "expected a rule, start..end:action (or a base, cfg:... or file:...)".into();
            return Err(self.error(Loc::new(c.pos, 1), message));
        }
        let end = if c.peek() == Some(b':') {
            Pos::End
        } else {
            self.pos(c)?
        };
        let span = Span { start, end };
        span.validate()
            .map_err(|e| self.error(c.since(start_at), e.to_string()))?;
        Ok(span)
    }

    /// The parts of `repeat(...)` (the caller ate `repeat(`), checked by [`check_parts`].
    fn repeat(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<Body, RecipeError> {
        let body_at = c.pos - "repeat(".len();
        let (mut parts, mut locs) = (Vec::new(), Vec::new());
        loop {
            c.skip_spaces();
            let (part, loc) = self.part(c, kind)?;
            parts.push(part);
            locs.push(loc);
            c.skip_spaces();
            if c.eat(")") {
                break;
            }
            if !c.eat(",") {
                return Err(self.error(Loc::new(c.pos, 1), "expected ',' or ')'".into()));
            }
        }
        if let Err((part, message)) = check_parts(&parts) {
            let at = part.map_or(c.since(body_at), |i| locs[i]);
            return Err(self.error(at, message));
        }
        Ok(Body::Repeat(parts))
    }

    /// `LEN:action`, and the span of the length.
    fn part(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<(Part, Loc), RecipeError> {
        let len_at = c.pos;
        let Pos::Bytes(len) = self.pos(c)? else {
            let message = "a repeat part's length is a number of bytes above 0".into();
            return Err(self.error(c.since(len_at), message));
        };
        let loc = c.since(len_at);
        if !c.eat(":") {
            let message = "expected ':' after the part's length".into();
            return Err(self.error(Loc::new(c.pos, 1), message));
        }
        let action = self.action(c, kind)?;
        Ok((Part { len, action }, loc))
    }

    /// A position: `INT[K|M|G]` bytes or `DEC%`.
    fn pos(&self, c: &mut Cursor<'a>) -> Result<Pos, RecipeError> {
        let at = c.pos;
        let int = c.take_while(|ch| ch.is_ascii_digit()).text;
        let mut frac = "";
        if c.peek() == Some(b'.') && c.peek_second().is_some_and(|b| b.is_ascii_digit()) {
            c.pos += 1;
            frac = c.take_while(|ch| ch.is_ascii_digit()).text;
        }
        let bad =
            |c: &Cursor<'_>, m: &str| self.error(Loc::new(at, (c.pos - at).max(1)), m.to_string());
        if int.is_empty() {
            let message = "expected a position: bytes (like 4096 or 64K) or percent (50%)";
            return Err(bad(c, message));
        }
        if c.eat("%") {
            return percent(int, frac).map_err(|m| bad(c, m));
        }
        if !frac.is_empty() {
            return Err(bad(c, "byte positions are whole numbers"));
        }
        let unit = match c.peek() {
            Some(b'K') => 1u64 << 10,
            Some(b'M') => 1 << 20,
            Some(b'G') => 1 << 30,
            _ => 1,
        };
        if unit > 1 {
            c.pos += 1;
        }
        int.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .map(Pos::Bytes)
            .ok_or_else(|| bad(c, "position out of range"))
    }

    // -----------------------------------------------------------------------------------------
    // Actions
    // -----------------------------------------------------------------------------------------

    fn action(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<Action, RecipeError> {
        let at = c.pos;
        let word = c.take_while(|ch| ch.is_ascii_alphabetic());
        match word.text {
            "infer" => Ok(Action::Infer),
            "train" => Ok(Action::Train(self.train_spec(c, kind, at)?)),
            _ => Err(self.error(
                Loc::new(word.loc.at, word.loc.len.max(1)),
                "expected an action: infer, train(...) or repeat(...)".into(),
            )),
        }
    }

    /// `(key=value,...)` after `train`; `at` is where `train` starts. Keys left out take the
    /// defaults; the bounds are checked on the whole spec, and an error points at the key's
    /// value when it is written (else at the whole action).
    fn train_spec(
        &self,
        c: &mut Cursor<'a>,
        kind: ModelKind,
        at: usize,
    ) -> Result<TrainSpec, RecipeError> {
        let defaults = self
            .train_defaults
            .unwrap_or_else(|| TrainSpec::defaults(kind));
        let mut spec = defaults;
        let given = self.train_keys(c, kind, &mut spec)?;
        let whole = c.since(at);
        let written = |name: &str| given.iter().find(|(k, _)| k.name == name).map(|g| g.1);
        if self.strict {
            self.all_train_keys(&given, whole)?;
        }
        // Without a stride, contiguous segments stay contiguous and a stride with gaps keeps
        // its gaps (as the --bptt knob does).
        if written("stride").is_none() {
            spec.stride = if defaults.stride == defaults.bptt {
                spec.bptt
            } else {
                defaults.stride.max(spec.bptt)
            };
        }
        if let Err((key, message)) = spec.check(kind) {
            return Err(self.error(written(key.name).unwrap_or(whole), message));
        }
        Ok(spec)
    }

    /// Reads the optional `(key=value,...)` into `spec`: the keys given, with their values'
    /// spans.
    fn train_keys(
        &self,
        c: &mut Cursor<'a>,
        kind: ModelKind,
        spec: &mut TrainSpec,
    ) -> Result<Vec<(&'static TrainKey, Loc)>, RecipeError> {
        let mut given = Vec::new();
        if !c.eat("(") {
            return Ok(given);
        }
        c.skip_spaces();
        if c.eat(")") {
            return Ok(given);
        }
        c.key_values(true, |kv| {
            let key = self.train_key(kv.key)?;
            (key.read)(spec, kv.value.text, kind).map_err(|m| self.error(kv.value.loc, m))?;
            given.push((key, kv.value.loc));
            Ok(())
        })?;
        if !c.eat(")") {
            return Err(self.error(Loc::new(c.pos, 1), "expected ',' or ')'".into()));
        }
        Ok(given)
    }

    fn train_key(&self, word: Word<'_>) -> Result<&'static TrainKey, RecipeError> {
        train_key(word.text).ok_or_else(|| {
            let message = format!(
                "train has no key '{}' (keys: {})",
                word.text,
                train_key_names(", ")
            );
            self.error(word.loc, message)
        })
    }

    /// A stored recipe gives every key of `train` but those with an implicit value.
    fn all_train_keys(
        &self,
        given: &[(&'static TrainKey, Loc)],
        whole: Loc,
    ) -> Result<(), RecipeError> {
        let missing: Vec<&str> = super::train::TRAIN_KEYS
            .iter()
            .filter(|k| k.implicit.is_none() && !given.iter().any(|g| g.0.name == k.name))
            .map(|k| k.name)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let message = format!(
            "a stored recipe gives every train key; missing: {}",
            missing.join(", ")
        );
        Err(self.error(whole, message))
    }

    /// The last check of a whole recipe (what the parts could not see alone).
    pub fn check(&self, recipe: &Recipe) -> Result<(), RecipeError> {
        recipe
            .validate()
            .map_err(|e| self.error(self.all(), format!("{e:#}")))
    }
}

/// `INT[.FRAC]` percent in [`Pos::Percent`] units.
fn percent(int: &str, frac: &str) -> Result<Pos, &'static str> {
    if frac.len() > 4 {
        return Err("percent positions have at most 4 decimals");
    }
    let whole: u64 = int.parse().map_err(|_| "percent out of range")?;
    let frac_ppm: u64 = format!("{frac:0<4}").parse().unwrap_or(0);
    let ppm = whole
        .checked_mul(10_000)
        .and_then(|w| w.checked_add(frac_ppm))
        .filter(|&p| p <= PERCENT_ONE as u64)
        .ok_or("a position beyond 100% is not in the input")?;
    Ok(Pos::Percent(ppm as u32))
}
