//! The recipe: everything the decoder must know to repeat the encoder's computation — which
//! network and where its weights come from (the *base*), and when and how it trains (the
//! *schedule*). Every `.lmz` header carries the recipe as canonical text (docs/recipes.md), so
//! `lmzip decompress` needs no flags.
//!
//! - [`text`]: the recipe language — parsing (with errors that point at the bad part) and the
//!   canonical printing.
//! - [`schedule`]: which rule governs which byte.

mod memory;
pub mod schedule;
pub mod text;

use std::fmt;

use anyhow::{Result, bail};

use crate::params::Scope;

pub use crate::model::{MAX_DIM, MAX_PARAMS, ModelConfig, ModelKind};
pub use crate::train::optim::OptimizerKind;
pub use crate::train::tbptt::LiveState;

pub use memory::working_floats;
pub use text::RecipeError;

/// Most working memory a recipe may need in this build, as [`working_floats`]
/// counts it over every action of the schedule: 2 GiB. A model at [`MAX_PARAMS`] trained with
/// Adam needs a quarter of it; a TBPTT segment keeps up to 64 traces, which for a wide SSM state
/// can outgrow the parameters.
pub const MAX_WORKING_BYTES: usize = 2 << 30;

/// How a span of bytes trains (docs/recipes.md, "train").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainSpec {
    /// The trained groups (never empty).
    pub scope: Scope,
    pub optimizer: OptimizerKind,
    /// Learning rate (step size of SGD, or Adam's α).
    pub lr: f32,
    /// Bytes from the start of one update window to the next: with `bptt` 1 every `stride`-th
    /// byte takes a one-step update; with `bptt` W > 1 a W-byte segment starts every `stride`
    /// bytes. The bytes in between are only predicted. At least `bptt`.
    pub stride: usize,
    /// 1: one-step update; W > 1: truncated BPTT over segments of W bytes.
    pub bptt: usize,
    /// Element-wise gradient clip; 0 means none.
    pub clip: f32,
    /// The live state after a TBPTT segment's update: rebuilt with the new weights, or carried
    /// on from the live pass. No effect with `bptt` 1.
    pub state: LiveState,
}

/// Largest accepted TBPTT window.
pub const MAX_BPTT: usize = 4096;
/// Largest accepted stride.
pub const MAX_STRIDE: usize = 1 << 30;

impl TrainSpec {
    /// The values `train(...)` takes for keys a recipe leaves out (docs/recipes.md).
    pub fn defaults(kind: ModelKind) -> Self {
        TrainSpec {
            scope: Scope::all_of(crate::train::trained_groups(kind)),
            // The values of a bare `train`; lmzip's measured defaults are the level table's
            // (src/levels.rs), which spells its settings out.
            optimizer: OptimizerKind::Adam,
            lr: 0.002,
            stride: 1,
            bptt: 1,
            clip: 0.0,
            state: LiveState::Rebuild,
        }
    }

    /// Checks each setting; the message names the offending key.
    pub fn validate(&self, kind: ModelKind) -> Result<()> {
        if !(self.lr.is_finite() && self.lr >= 0.0 && self.lr <= 10.0) {
            bail!("lr {} is out of range (0..=10)", self.lr);
        }
        if !(self.clip.is_finite() && self.clip >= 0.0) {
            bail!("clip {} must be a finite number >= 0", self.clip);
        }
        if self.bptt == 0 || self.bptt > MAX_BPTT {
            bail!("bptt {} is out of range (1..={MAX_BPTT})", self.bptt);
        }
        if self.stride < self.bptt || self.stride > MAX_STRIDE {
            bail!(
                "stride {} is out of range ({}..={MAX_STRIDE}): segments do not overlap, so the \
                 stride is at least the bptt window",
                self.stride,
                self.bptt
            );
        }
        let all = Scope::all_of(crate::train::trained_groups(kind));
        if self.scope == Scope::NONE {
            bail!("scope is empty (to train nothing, use infer)");
        }
        if self.scope.0 & !all.0 != 0 {
            bail!("scope names groups that {} does not have", kind.name());
        }
        Ok(())
    }

    /// Whether the byte at `phase` bytes into a span of this action is trained.
    pub fn trains(&self, phase: u64) -> bool {
        phase % (self.stride as u64) < self.bptt as u64
    }
}

/// What happens to the bytes of a span.
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
    /// Bytes no rule holds are only predicted.
    pub schedule: Vec<Rule>,
}

impl Recipe {
    /// A fresh model trained on every byte by one rule.
    pub fn fresh(config: ModelConfig, seed: u64, action: Action) -> Self {
        Recipe {
            base: Base::Fresh { config, seed },
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
        if self.schedule.len() > MAX_RULES {
            bail!("the schedule has more than {MAX_RULES} rules");
        }
        for (i, rule) in self.schedule.iter().enumerate() {
            let at = |e: anyhow::Error| e.context(format!("rule {}", i + 1));
            rule.span.validate().map_err(at)?;
            if let Body::Repeat(parts) = &rule.body {
                if parts.is_empty() || parts.len() > MAX_PARTS {
                    return Err(at(anyhow::anyhow!("a repeat has 1 to {MAX_PARTS} parts")));
                }
                let mut period = 0u64;
                for p in parts {
                    if p.len == 0 {
                        return Err(at(anyhow::anyhow!("a repeat part of 0 bytes")));
                    }
                    period = period
                        .checked_add(p.len)
                        .ok_or_else(|| at(anyhow::anyhow!("the repeat's cycle is too long")))?;
                }
            }
            for action in rule.actions() {
                if let Action::Train(t) = action {
                    t.validate(kind).map_err(at)?;
                }
            }
        }
        let bytes = working_floats(self).saturating_mul(4);
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
        text::print(self)
    }

    /// Parses a complete recipe in canonical form (every key given), as a header holds it.
    pub fn parse(text: &str) -> Result<Recipe, RecipeError> {
        text::parse_complete(text)
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

/// Lowercase hexadecimal of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_positions_resolve_by_rounding_down() {
        let r = crate::levels::default_recipe(ModelKind::Mamba1)
            .edit("0..50%:train() 50%..99.5%:infer", None)
            .unwrap();
        assert!(!r.is_resolved());
        assert_eq!(r.resolve(None), Err(UnresolvedPercent));
        let resolved = r.resolve(Some(1001)).unwrap();
        assert!(resolved.is_resolved());
        assert_eq!(resolved.schedule[0].span.end, Pos::Bytes(500));
        assert_eq!(resolved.schedule[1].span.start, Pos::Bytes(500));
        assert_eq!(resolved.schedule[1].span.end, Pos::Bytes(995));
    }

    #[test]
    fn stride_below_bptt_and_empty_scope_are_refused() {
        let kind = ModelKind::Mamba1;
        let mut t = TrainSpec::defaults(kind);
        t.bptt = 8;
        t.stride = 4;
        assert!(t.validate(kind).is_err());
        t.stride = 8;
        t.validate(kind).unwrap();
        t.scope = Scope::NONE;
        assert!(t.validate(kind).is_err());
    }

    /// The default recipe edited by `text` (sizes, schedule).
    fn edited(kind: ModelKind, text: &str) -> Recipe {
        crate::levels::default_recipe(kind)
            .edit(text, None)
            .unwrap()
    }

    /// The limits leave the defaults far behind and stop what would need gigabytes.
    #[test]
    fn size_limits_are_far_above_the_defaults() {
        for kind in ModelKind::ALL {
            let longest = format!("0..:train(bptt={MAX_BPTT},stride={MAX_BPTT})");
            let r = edited(kind, &longest);
            r.validate().unwrap();
            assert!(working_floats(&r) * 4 < MAX_WORKING_BYTES / 16, "{kind:?}");
        }
        let mut wide = crate::levels::default_recipe(ModelKind::Mamba1);
        if let Base::Fresh { config, .. } = &mut wide.base {
            config.set_size(Some(4096), Some(4));
        }
        let err = wide.validate().unwrap_err().to_string();
        assert!(
            err.contains("parameters") && err.contains("at most"),
            "{err}"
        );
    }

    /// Few parameters, but a TBPTT window whose 64 traces of a wide SSM state each weigh as
    /// much as the model: refused whichever rule of the schedule asks for it.
    #[test]
    fn working_memory_counts_every_action_of_the_schedule() {
        let deep_state =
            "cfg:hidden=1,layers=1,intermediate=16384,state=256,conv=64,dt_rank=1,seed=0";
        let kind = ModelKind::Mamba1;
        edited(kind, &format!("{deep_state} 0..:infer"))
            .validate()
            .unwrap();
        edited(kind, &format!("{deep_state} 0..:train(opt=sgd,bptt=1)"))
            .validate()
            .unwrap();
        let long = format!("train(opt=sgd,bptt={MAX_BPTT},stride={MAX_BPTT})");
        for schedule in [
            format!("0..:{long}"),
            format!("0..1000:infer 1000..:{long}"),
            format!("0..:repeat(100:infer,{MAX_BPTT}:{long})"),
        ] {
            // The same schedule on a small model passes; on this one, it is refused.
            let r = Recipe {
                schedule: edited(kind, &format!("cfg:hidden=16 {schedule}")).schedule,
                ..edited(kind, &format!("{deep_state} 0..:infer"))
            };
            let err = r.validate().unwrap_err().to_string();
            assert!(err.contains("working memory"), "{schedule}: {err}");
            let err = crate::levels::default_recipe(kind)
                .edit(&format!("{deep_state} {schedule}"), None)
                .unwrap_err()
                .to_string();
            assert!(err.contains("working memory"), "{schedule}: {err}");
        }

        // What rules keep side by side is summed (moments once any rule steps Adam, the
        // one-step trace once any rule takes one-step updates); segments, one at a time, count
        // as the largest.
        let floats = |rules: &str| working_floats(&edited(kind, &format!("cfg:hidden=64 {rules}")));
        let infer = floats("0..:infer");
        let sgd1 = floats("0..:train(opt=sgd,bptt=1)");
        let adam1 = floats("0..:train(opt=adam,bptt=1)");
        let sgd8 = floats("0..:train(opt=sgd,bptt=8,stride=8)");
        let sgd64 = floats("0..:train(opt=sgd,bptt=64,stride=64)");
        assert!(infer < sgd1 && sgd1 < adam1 && sgd8 < sgd64);
        assert_eq!(
            floats("0..10:train(opt=sgd,bptt=1) 10..:train(opt=adam,bptt=8,stride=8)"),
            adam1 + (sgd8 - infer),
        );
        assert_eq!(
            floats("0..10:train(opt=sgd,bptt=64,stride=64) 10..:train(opt=sgd,bptt=8,stride=8)"),
            sgd64,
        );
    }

    #[test]
    fn trained_phases_follow_stride_and_window() {
        let mut t = TrainSpec::defaults(ModelKind::Mamba1);
        t.stride = 3;
        let one: Vec<bool> = (0..7).map(|p| t.trains(p)).collect();
        assert_eq!(one, [true, false, false, true, false, false, true]);
        t.bptt = 2;
        t.stride = 5;
        let seg: Vec<bool> = (0..7).map(|p| t.trains(p)).collect();
        assert_eq!(seg, [true, true, false, false, false, true, true]);
    }
}
