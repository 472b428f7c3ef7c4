//! The recipe: everything the decoder must know to repeat the encoder's computation — which
//! network and where its weights come from (the *base*), and when and how it trains (the
//! *schedule*). Every `.lmz` header carries the recipe as canonical text (docs/recipes.md), so
//! `lmzip decompress` needs no flags.
//!
//! The recipe language, one role per file:
//! - [`syntax`]: byte spans, the error that points at one, the cursor and `key=value` lists;
//! - [`parse`]: the items of a text, each with its span, and complete (header) recipes;
//! - `edit`: a text applied onto a template, as the command line does;
//! - `diff`: the shortest such text that makes a given recipe of a template (compact headers);
//! - [`print`](mod@print): the canonical text;
//! - [`train`]: [`TrainSpec`] and the one table of its keys, with their bounds;
//! - `tests`: the language's tests and the whole recipe's.
//!
//! The other key families have their tables where their values live: the `cfg:` sizes in
//! src/model/config.rs, the `mix:` keys in src/mix/mod.rs ([`crate::mix::KEYS`]).
//!
//! And the rest: [`schedule`], which rule governs which byte; `memory`, the working memory a
//! recipe needs.

mod diff;
mod edit;
mod memory;
pub mod parse;
pub mod print;
pub mod schedule;
pub mod syntax;
pub mod train;

use std::fmt;

use anyhow::{Result, bail};

use crate::mix::MixSpec;

pub use crate::model::{MAX_DIM, MAX_PARAMS, ModelConfig, ModelKind};
pub use crate::train::optim::{AdamSettings, LrMul, OptimizerKind};
pub use crate::train::rate::{Curve, RateSchedule};
pub use crate::train::tbptt::LiveState;

pub use memory::working_floats;
pub use parse::{declared_kind, file_path, names_rules, names_stage_sizes};
pub use print::print_action;
pub use syntax::{RecipeError, hex};
pub use train::{
    FOCUS_FLOOR, MAX_BETA, MAX_BPTT, MAX_FOCUS, MAX_LRMUL, MAX_STRIDE, MAX_WARMUP, TRAIN_KEYS,
    TrainKey, TrainSpec,
};

/// Most working memory a recipe may need in this build, as [`working_floats`]
/// counts it over every action of the schedule: 2 GiB. A model at [`MAX_PARAMS`] trained with
/// Adam needs a quarter of it; a TBPTT segment keeps up to 64 traces, which for a wide SSM state
/// can outgrow the parameters.
pub const MAX_WORKING_BYTES: usize = 2 << 30;

/// What happens to the bytes of a span. (A recipe holds a handful of actions, read once per
/// piece of the schedule, so `Train` stays inline rather than boxed.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// The model only predicts.
    Infer,
    Train(TrainSpec),
}

/// A position in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    Bytes(u64),
    /// Millionths of the input's length (100% = 1 000 000); resolved to bytes by
    /// [`Recipe::resolve`] once the length is known.
    Percent(u32),
    /// The end of the input.
    End,
}

/// 100% in [`Pos::Percent`] units.
pub const PERCENT_ONE: u32 = 1_000_000;

impl Pos {
    /// Bytes of an input `len` bytes long; `End` is `u64::MAX` (open).
    fn resolve(self, len: u64) -> Pos {
        match self {
            Pos::Percent(ppm) => {
                Pos::Bytes((len as u128 * ppm as u128 / PERCENT_ONE as u128) as u64)
            }
            other => other,
        }
    }

    /// The byte position of a resolved position (`End` → `u64::MAX`).
    pub fn bytes(self) -> Option<u64> {
        match self {
            Pos::Bytes(b) => Some(b),
            Pos::End => Some(u64::MAX),
            Pos::Percent(_) => None,
        }
    }
}

/// A half-open range of positions, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: Pos,
    pub end: Pos,
}

impl Span {
    /// The whole input.
    pub const ALL: Span = Span {
        start: Pos::Bytes(0),
        end: Pos::End,
    };

    /// Refuses spans that are empty whatever the input's length (`start` not before `end`,
    /// compared where both are in the same unit), and a start at the end.
    pub fn validate(&self) -> Result<()> {
        for p in [self.start, self.end] {
            if let Pos::Percent(p) = p
                && p > PERCENT_ONE
            {
                bail!("a position beyond 100% is not in the input");
            }
        }
        let empty = match (self.start, self.end) {
            (Pos::End, _) => true,
            (Pos::Bytes(a), Pos::Bytes(b)) => a >= b,
            (Pos::Percent(a), Pos::Percent(b)) => a >= b,
            _ => false,
        };
        if empty {
            bail!("the span is empty (its start is not before its end)");
        }
        Ok(())
    }
}

/// One part of a repeat cycle: `len` bytes of `action`.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub len: u64,
    pub action: Action,
}

/// What a rule does over its span.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Action(Action),
    /// The parts, one after the other, over and over from the span's start.
    Repeat(Vec<Part>),
}

/// One rule of a schedule: `span:body`. The first rule whose span holds a byte decides it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub span: Span,
    pub body: Body,
}

impl Rule {
    /// Every action the rule can take.
    pub fn actions(&self) -> Vec<&Action> {
        match &self.body {
            Body::Action(a) => vec![a],
            Body::Repeat(parts) => parts.iter().map(|p| &p.action).collect(),
        }
    }

    fn actions_mut(&mut self) -> Vec<&mut Action> {
        match &mut self.body {
            Body::Action(a) => vec![a],
            Body::Repeat(parts) => parts.iter_mut().map(|p| &mut p.action).collect(),
        }
    }
}

/// Most rules a schedule may have; most parts a repeat may have.
pub const MAX_RULES: usize = 256;
pub const MAX_PARTS: usize = 64;

/// The bound on the number of rules, shared by the parser and [`Recipe::validate`].
pub fn check_rule_count(rules: usize) -> Result<(), String> {
    match rules <= MAX_RULES {
        true => Ok(()),
        false => Err(format!("the schedule has more than {MAX_RULES} rules")),
    }
}

/// The bounds of a repeat, shared by the parser and [`Recipe::validate`]: 1 to [`MAX_PARTS`]
/// parts, each at least a byte long, and a cycle whose length fits a `u64`. On error, the part
/// at fault when one is, and the message.
pub fn check_parts(parts: &[Part]) -> Result<(), (Option<usize>, String)> {
    if parts.is_empty() || parts.len() > MAX_PARTS {
        let extra = (!parts.is_empty()).then_some(MAX_PARTS);
        return Err((extra, format!("a repeat has 1 to {MAX_PARTS} parts")));
    }
    if let Some(i) = parts.iter().position(|p| p.len == 0) {
        let message = "a repeat part's length is a number of bytes above 0".to_string();
        return Err((Some(i), message));
    }
    let cycle = parts.iter().try_fold(0u64, |sum, p| sum.checked_add(p.len));
    match cycle {
        Some(_) => Ok(()),
        None => Err((None, "the repeat's cycle is too long".to_string())),
    }
}

/// Where the initial weights come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Base {
    /// Seeded random weights of the given sizes.
    Fresh { config: ModelConfig, seed: u64 },
    /// A model file, known by its SHA-256; `config` is what its tensor shapes say, `name` the
    /// file's name when it was used (a hint for whoever must find it again).
    File {
        config: ModelConfig,
        sha256: [u8; 32],
        name: Option<String>,
    },
}

impl Base {
    pub fn config(&self) -> &ModelConfig {
        match self {
            Base::Fresh { config, .. } | Base::File { config, .. } => config,
        }
    }

    /// The model file's hash when the base is one.
    pub fn sha256(&self) -> Option<[u8; 32]> {
        match self {
            Base::File { sha256, .. } => Some(*sha256),
            Base::Fresh { .. } => None,
        }
    }
}

/// Everything the decoder needs to repeat the encoder's computation.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub base: Base,
    /// The mixing stage between the network and the coder (src/mix), if any: the item
    /// `mix:KEY=N,...` after the base.
    pub mix: Option<MixSpec>,
    /// Bytes no rule holds are only predicted.
    pub schedule: Vec<Rule>,
}

impl Recipe {
    /// A fresh model trained on every byte by one rule.
    pub fn fresh(config: ModelConfig, seed: u64, action: Action) -> Self {
        Recipe {
            base: Base::Fresh { config, seed },
            mix: None,
            schedule: vec![Rule {
                span: Span::ALL,
                body: Body::Action(action),
            }],
        }
    }

    pub fn kind(&self) -> ModelKind {
        self.base.config().kind()
    }

    pub fn config(&self) -> &ModelConfig {
        self.base.config()
    }

    /// The model file's hash when the recipe starts from one.
    pub fn model_file(&self) -> Option<[u8; 32]> {
        self.base.sha256()
    }

    /// Every action of the schedule.
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.schedule.iter().flat_map(Rule::actions)
    }

    /// Every action of the schedule, to edit in place.
    pub fn actions_mut(&mut self) -> impl Iterator<Item = &mut Action> {
        self.schedule.iter_mut().flat_map(Rule::actions_mut)
    }

    /// Whether a run keeps Adam's first moment: only where some Adam rule has β1 ≠ 0 (at
    /// β1 = 0 it is the gradient itself, [`crate::kernels::adam_update`]).
    pub fn keeps_first_moment(&self) -> bool {
        self.actions().any(|a| {
            matches!(a, Action::Train(t)
                if t.optimizer == OptimizerKind::Adam && t.adam.beta1 != 0.0)
        })
    }

    /// Every training action of the schedule, to edit in place.
    pub fn train_specs_mut(&mut self) -> impl Iterator<Item = &mut TrainSpec> {
        self.actions_mut().filter_map(|a| match a {
            Action::Train(t) => Some(t),
            Action::Infer => None,
        })
    }

    pub fn validate(&self) -> Result<()> {
        let kind = self.kind();
        self.config().validate()?;
        if let Base::File { config, .. } = &self.base
            && config.prior() != 0
        {
            bail!("a model file's network starts from the file, not from a built-in prior");
        }
        crate::prior::check(self.config())?;
        check_rule_count(self.schedule.len()).map_err(anyhow::Error::msg)?;
        for (i, rule) in self.schedule.iter().enumerate() {
            let at = |e: anyhow::Error| e.context(format!("rule {}", i + 1));
            rule.span.validate().map_err(at)?;
            if let Body::Repeat(parts) = &rule.body {
                check_parts(parts).map_err(|(_, m)| at(anyhow::Error::msg(m)))?;
            }
            for action in rule.actions() {
                if let Action::Train(t) = action {
                    t.validate(kind).map_err(at)?;
                }
            }
        }
        if let Some(mix) = &self.mix {
            mix.validate()?;
        }
        let bytes = self.working_bytes();
        if bytes > MAX_WORKING_BYTES {
            bail!(
                "this model and schedule need about {} MiB of working memory; this build \
                 accepts at most {} MiB",
                bytes >> 20,
                MAX_WORKING_BYTES >> 20
            );
        }
        Ok(())
    }

    /// The memory a run of this recipe needs, estimated from its sizes alone: the predictor's
    /// working floats ([`working_floats`]) and the mixing stage's tables.
    pub fn working_bytes(&self) -> usize {
        working_floats(self)
            .saturating_mul(4)
            .saturating_add(self.mix.as_ref().map_or(0, MixSpec::bytes))
    }

    /// Whether every position is in bytes (as the header requires).
    pub fn is_resolved(&self) -> bool {
        self.schedule.iter().all(|r| {
            !matches!(r.span.start, Pos::Percent(_)) && !matches!(r.span.end, Pos::Percent(_))
        })
    }

    /// The recipe with percent positions turned into bytes of an input `len` bytes long (rounded
    /// down); `None` when the length is unknown, which is refused if a percent position needs it.
    pub fn resolve(&self, len: Option<u64>) -> Result<Recipe, UnresolvedPercent> {
        if self.is_resolved() {
            return Ok(self.clone());
        }
        let Some(len) = len else {
            return Err(UnresolvedPercent);
        };
        let mut out = self.clone();
        for rule in &mut out.schedule {
            rule.span.start = rule.span.start.resolve(len);
            rule.span.end = rule.span.end.resolve(len);
        }
        Ok(out)
    }

    /// Canonical text (docs/recipes.md): what headers store and `lmzip info` prints.
    pub fn to_text(&self) -> String {
        print::print(self)
    }

    /// Parses a complete recipe in canonical form (every key given), as a header holds it.
    pub fn parse(text: &str) -> Result<Recipe, RecipeError> {
        parse::parse_complete(text)
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// A recipe with percent positions met an input of unknown length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnresolvedPercent;

impl fmt::Display for UnresolvedPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the recipe has positions in percent, which need the input's length; \
             for standard input give it with --size BYTES (or use byte positions)",
        )
    }
}

impl std::error::Error for UnresolvedPercent {}

#[cfg(test)]
mod tests;
