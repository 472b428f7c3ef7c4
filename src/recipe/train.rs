//! How a span of bytes trains ([`TrainSpec`], docs/recipes.md "Actions"), and the one table of
//! its keys ([`TRAIN_KEYS`]): each key's name, how its value is read and printed, its bounds
//! and the value of a bare `train`. Parsing, the canonical printing, the error messages that
//! list the keys, the defaults and [`TrainSpec::validate`] all follow this table, so a new key
//! is one more row (and one more field).

use anyhow::{Result, bail};

use super::{LiveState, ModelKind, OptimizerKind};
use crate::params::Scope;
use crate::train::optim::{AdamSettings, LrMul};
use crate::train::rate::{Curve, MAX_KNOTS, RateSchedule};
use crate::train::tbptt::grown_window;
use crate::train::trained_groups;

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
    /// Adam's constants (`b1`, `b2`, `eps`, `b2warm`).
    pub adam: AdamSettings,
    /// How Adam's learning rate moves with its step count (`warmup`, `decay`, `power`,
    /// `floor`).
    pub rate: RateSchedule,
    /// Growing TBPTT windows: the first window, or 0 for windows of `bptt` throughout
    /// ([`TrainSpec::window_at`]).
    pub bptt0: usize,
    /// With `bptt0`: a window of w bytes serves `grow + w − 1` optimizer steps.
    pub grow: usize,
    /// Per-group multipliers of the learning rate (1 for every group: none).
    pub lrmul: LrMul,
    /// Bits at which a byte's loss takes its full weight, 0 for none: a byte the coder spent
    /// `c` bits on weighs `clamp(c / focus, FOCUS_FLOOR, 1)` ([`TrainSpec::loss_weight`]), so
    /// the network learns most where the mix predicted worst.
    pub focus: f32,
}

/// The least weight of a byte's loss with `focus` (measured against 0, 0.05 and 0.35 with the
/// mixing stage, docs/experiments.md).
pub const FOCUS_FLOOR: f64 = 0.2;
/// Largest accepted `focus`, in bits (a byte costs at most a few dozen).
pub const MAX_FOCUS: f32 = 64.0;

/// Largest accepted TBPTT window.
pub const MAX_BPTT: usize = 4096;
/// Largest accepted stride.
pub const MAX_STRIDE: usize = 1 << 30;
/// Largest accepted β1 and β2: restoring a saved step count recomputes β^t by running
/// products, which must reach 0 within a bounded number of steps (~75 million at this bound).
pub const MAX_BETA: f32 = 0.99999;
/// Largest accepted `grow`.
pub const MAX_GROW: usize = 1 << 20;
/// Largest accepted warm-up, in Adam steps.
pub const MAX_WARMUP: u32 = 1 << 30;
/// Largest accepted multiplier of a group's learning rate.
pub const MAX_LRMUL: f32 = 100.0;

/// One key of `train(...)`.
pub struct TrainKey {
    pub name: &'static str,
    /// Reads the value's text into the spec: its form only (a number, known names); the
    /// bounds are `check`'s. The message says what the value should look like.
    pub read: fn(&mut TrainSpec, &str, ModelKind) -> Result<(), String>,
    /// The value's canonical text.
    pub print: fn(&TrainSpec, ModelKind) -> String,
    /// The bounds of the value within the whole spec (the stride's depend on the window); the
    /// message names the key.
    pub check: fn(&TrainSpec, ModelKind) -> Result<(), String>,
    /// The value of a bare `train`, as text.
    pub default: &'static str,
    /// For a key added after files were written: the value those files meant. A stored recipe
    /// may leave the key out, and the canonical text leaves it out at this value, so old
    /// recipes print and store as they always did.
    pub implicit: Option<&'static str>,
}

/// The keys of `train(...)` in canonical order.
pub static TRAIN_KEYS: [TrainKey; 20] = [
    TrainKey {
        name: "scope",
        read: |t, v, kind| {
            t.scope = Scope::parse(v, trained_groups(kind)).map_err(|e| e.to_string())?;
            Ok(())
        },
        print: |t, kind| t.scope.to_text(trained_groups(kind)),
        check: check_scope,
        default: "all",
        implicit: None,
    },
    TrainKey {
        name: "opt",
        read: |t, v, _| {
            t.optimizer = OptimizerKind::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
        print: |t, _| t.optimizer.name().into(),
        check: |_, _| Ok(()),
        default: "adam",
        implicit: None,
    },
    TrainKey {
        name: "lr",
        read: |t, v, _| {
            t.lr = decimal(v, "lr")?;
            Ok(())
        },
        // f32 Display is the shortest decimal that parses back to the same f32.
        print: |t, _| t.lr.to_string(),
        check: |t, _| match t.lr.is_finite() && t.lr >= 0.0 && t.lr <= 10.0 {
            true => Ok(()),
            false => Err(format!("lr {} is out of range (0..=10)", t.lr)),
        },
        default: "0.002",
        implicit: None,
    },
    TrainKey {
        name: "stride",
        read: |t, v, _| {
            t.stride = whole(v, "stride")?;
            Ok(())
        },
        print: |t, _| t.stride.to_string(),
        check: |t, _| match t.stride >= t.bptt && t.stride <= MAX_STRIDE {
            true => Ok(()),
            false => Err(format!(
                "stride {} is out of range ({}..={MAX_STRIDE}): segments do not overlap, so \
                 the stride is at least the bptt window",
                t.stride, t.bptt
            )),
        },
        default: "1",
        implicit: None,
    },
    TrainKey {
        name: "bptt",
        read: |t, v, _| {
            t.bptt = whole(v, "bptt")?;
            Ok(())
        },
        print: |t, _| t.bptt.to_string(),
        check: |t, _| match (1..=MAX_BPTT).contains(&t.bptt) {
            true => Ok(()),
            false => Err(format!("bptt {} is out of range (1..={MAX_BPTT})", t.bptt)),
        },
        default: "1",
        implicit: None,
    },
    TrainKey {
        name: "clip",
        read: |t, v, _| {
            t.clip = decimal(v, "clip")?;
            Ok(())
        },
        print: |t, _| t.clip.to_string(),
        check: |t, _| match t.clip.is_finite() && t.clip >= 0.0 {
            true => Ok(()),
            false => Err(format!("clip {} must be a finite number >= 0", t.clip)),
        },
        default: "0",
        implicit: None,
    },
    TrainKey {
        name: "state",
        read: |t, v, _| {
            t.state = LiveState::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
        print: |t, _| t.state.name().into(),
        check: |_, _| Ok(()),
        default: "rebuild",
        implicit: Some("rebuild"),
    },
    TrainKey {
        name: "b1",
        read: |t, v, _| {
            t.adam.beta1 = decimal(v, "b1")?;
            Ok(())
        },
        print: |t, _| t.adam.beta1.to_string(),
        check: |t, _| beta("b1", t.adam.beta1),
        default: "0.9",
        implicit: Some("0.9"),
    },
    TrainKey {
        name: "b2",
        read: |t, v, _| {
            t.adam.beta2 = decimal(v, "b2")?;
            Ok(())
        },
        print: |t, _| t.adam.beta2.to_string(),
        check: |t, _| beta("b2", t.adam.beta2),
        default: "0.999",
        implicit: Some("0.999"),
    },
    TrainKey {
        name: "eps",
        read: |t, v, _| {
            t.adam.eps = decimal(v, "eps")?;
            Ok(())
        },
        // Shortest exact form in scientific notation: 1e-8 rather than 0.00000001.
        print: |t, _| format!("{:e}", t.adam.eps),
        check: |t, _| match t.adam.eps >= 1e-30 && t.adam.eps <= 1.0 {
            true => Ok(()),
            false => Err(format!("eps {:e} is out of range (1e-30..=1)", t.adam.eps)),
        },
        default: "1e-8",
        implicit: Some("1e-8"),
    },
    TrainKey {
        name: "b2warm",
        read: |t, v, _| {
            t.adam.beta2_warmup = flag(v, "b2warm")?;
            Ok(())
        },
        print: |t, _| (t.adam.beta2_warmup as u8).to_string(),
        check: |_, _| Ok(()),
        default: "0",
        implicit: Some("0"),
    },
    TrainKey {
        name: "warmup",
        read: |t, v, _| {
            let w = whole(v, "warmup")?;
            t.rate.warmup = w.min(u32::MAX as usize) as u32;
            Ok(())
        },
        print: |t, _| t.rate.warmup.to_string(),
        check: |t, _| match t.rate.warmup <= MAX_WARMUP {
            true => Ok(()),
            false => Err(format!(
                "warmup {} is out of range (0..={MAX_WARMUP})",
                t.rate.warmup
            )),
        },
        default: "0",
        implicit: Some("0"),
    },
    TrainKey {
        name: "decay",
        read: |t, v, _| {
            t.rate.decay = decimal(v, "decay")?;
            Ok(())
        },
        print: |t, _| t.rate.decay.to_string(),
        check: |t, _| in_range("decay", t.rate.decay, 0.0, 1.0),
        default: "0",
        implicit: Some("0"),
    },
    TrainKey {
        name: "power",
        read: |t, v, _| {
            t.rate.power = decimal(v, "power")?;
            Ok(())
        },
        print: |t, _| t.rate.power.to_string(),
        check: |t, _| in_range("power", t.rate.power, 0.0, 4.0),
        default: "0.5",
        implicit: Some("0.5"),
    },
    TrainKey {
        name: "floor",
        read: |t, v, _| {
            t.rate.floor = decimal(v, "floor")?;
            Ok(())
        },
        print: |t, _| t.rate.floor.to_string(),
        check: |t, _| in_range("floor", t.rate.floor, 0.0, 1.0),
        default: "0",
        implicit: Some("0"),
    },
    TrainKey {
        name: "curve",
        read: |t, v, _| {
            t.rate.curve = read_curve(v)?;
            Ok(())
        },
        print: |t, _| print_curve(&t.rate.curve),
        check: check_curve,
        default: "1",
        implicit: Some("1"),
    },
    TrainKey {
        name: "bptt0",
        read: |t, v, _| {
            t.bptt0 = whole(v, "bptt0")?;
            Ok(())
        },
        print: |t, _| t.bptt0.to_string(),
        check: check_growth,
        default: "0",
        implicit: Some("0"),
    },
    TrainKey {
        name: "grow",
        read: |t, v, _| {
            t.grow = whole(v, "grow")?;
            Ok(())
        },
        print: |t, _| t.grow.to_string(),
        check: |t, _| match t.grow <= MAX_GROW {
            true => Ok(()),
            false => Err(format!("grow {} is out of range (0..={MAX_GROW})", t.grow)),
        },
        default: "12",
        implicit: Some("12"),
    },
    TrainKey {
        name: "lrmul",
        read: |t, v, kind| {
            t.lrmul = read_lrmul(v, trained_groups(kind))?;
            Ok(())
        },
        print: |t, kind| print_lrmul(&t.lrmul, trained_groups(kind)),
        check: check_lrmul,
        default: "1",
        implicit: Some("1"),
    },
    TrainKey {
        name: "focus",
        read: |t, v, _| {
            let x = decimal(v, "focus")?;
            // -0 reads as 0, so that "off" has one text.
            t.focus = if x == 0.0 { 0.0 } else { x };
            Ok(())
        },
        print: |t, _| t.focus.to_string(),
        check: |t, _| match (0.0..=MAX_FOCUS).contains(&t.focus) {
            true => Ok(()),
            false => Err(format!(
                "focus {} is out of range (0 for none, or up to {MAX_FOCUS} bits)",
                t.focus
            )),
        },
        default: "0",
        implicit: Some("0"),
    },
];

/// The key named `name`.
pub fn train_key(name: &str) -> Option<&'static TrainKey> {
    TRAIN_KEYS.iter().find(|k| k.name == name)
}

/// The key names in canonical order, joined by `sep`.
pub fn train_key_names(sep: &str) -> String {
    let names: Vec<&str> = TRAIN_KEYS.iter().map(|k| k.name).collect();
    names.join(sep)
}

fn check_scope(t: &TrainSpec, kind: ModelKind) -> Result<(), String> {
    let all = Scope::all_of(trained_groups(kind));
    if t.scope == Scope::NONE {
        return Err("scope is empty (to train nothing, use infer)".into());
    }
    if t.scope.0 & !all.0 != 0 {
        return Err(format!(
            "scope names groups that {} does not have",
            kind.name()
        ));
    }
    Ok(())
}

/// The first window of growing windows: at most [`MAX_BPTT`] (above `bptt`, windows are `bptt`).
fn check_growth(t: &TrainSpec, _: ModelKind) -> Result<(), String> {
    match t.bptt0 <= MAX_BPTT {
        true => Ok(()),
        false => Err(format!(
            "bptt0 {} is out of range (0..={MAX_BPTT})",
            t.bptt0
        )),
    }
}

/// The form of `curve`.
const CURVE_FORM: &str =
    "curve is STEP*FACTOR points joined by + (like 0*2+5000*1), steps increasing, or 1";

/// Largest factor of a `curve` point.
pub const MAX_CURVE_FACTOR: f32 = 10.0;

/// `STEP*FACTOR` points joined by `+` (`0*2+5000*1`), or `1`: no curve, as are points whose
/// factors are all 1. The form only; the order of the steps and the factors' bounds are
/// [`check_curve`]'s.
fn read_curve(value: &str) -> Result<Curve, String> {
    if value == "1" {
        return Ok(Curve::FLAT);
    }
    let mut points = Vec::new();
    for term in value.split('+') {
        let Some((step, factor)) = term.split_once('*') else {
            return Err(CURVE_FORM.into());
        };
        let step = step
            .parse::<u32>()
            .map_err(|_| format!("a curve point's step is a whole number below 2^32 ('{step}')"))?;
        let f = decimal(factor, "a curve point's factor")?;
        // -0 reads as 0, so that every factor has one text.
        points.push((step, if f == 0.0 { 0.0 } else { f }));
    }
    if points.len() > MAX_KNOTS {
        return Err(format!("a curve has at most {MAX_KNOTS} points"));
    }
    // Factors all 1 are no curve, so that they have one text (and the old files' meaning).
    match points.iter().all(|&(_, f)| f == 1.0) {
        true => Ok(Curve::FLAT),
        false => Ok(Curve::through(&points).expect("at most MAX_KNOTS points")),
    }
}

/// The canonical text of `curve`: its points, or `1` for none.
fn print_curve(curve: &Curve) -> String {
    match curve.is_flat() {
        true => "1".into(),
        false => {
            let terms: Vec<String> = curve.points().map(|(s, f)| format!("{s}*{f}")).collect();
            terms.join("+")
        }
    }
}

/// Steps strictly increasing, factors within `0..=`[`MAX_CURVE_FACTOR`].
fn check_curve(t: &TrainSpec, _: ModelKind) -> Result<(), String> {
    let mut last: Option<u32> = None;
    for (step, f) in t.rate.curve.points() {
        if !(0.0..=MAX_CURVE_FACTOR).contains(&f) {
            return Err(format!(
                "curve point {step}*{f}: the factor is out of range (0..={MAX_CURVE_FACTOR})"
            ));
        }
        if last.is_some_and(|l| step <= l) {
            return Err(format!(
                "curve steps must increase ({step} after {})",
                last.unwrap()
            ));
        }
        last = Some(step);
    }
    Ok(())
}

/// The form of `lrmul`.
const LRMUL_FORM: &str = "lrmul is GROUP*FACTOR terms joined by + (like head*2+bias*2), or 1";

/// `GROUP*FACTOR` terms joined by `+` (`head*2+bias*2`), each group at most once, or `1`: every
/// group at the rule's rate. Groups left out keep factor 1.
fn read_lrmul(value: &str, groups: &[&str]) -> Result<LrMul, String> {
    let mut mul = LrMul::ONE;
    if value == "1" {
        return Ok(mul);
    }
    let mut named = Scope::NONE;
    for term in value.split('+') {
        let Some((name, factor)) = term.split_once('*') else {
            return Err(LRMUL_FORM.into());
        };
        let Some(g) = groups.iter().position(|x| *x == name) else {
            return Err(format!(
                "unknown training group '{name}' in lrmul (groups of this model: {})",
                groups.join(", ")
            ));
        };
        if named.has(g as u8) {
            return Err(format!("lrmul names '{name}' twice"));
        }
        named = named.with(g as u8);
        let x = decimal(factor, "the factor of an lrmul group")?;
        // -0 reads as 0, so that every factor has one text.
        let slot = mul.0.get_mut(g).ok_or("lrmul: too many groups")?;
        *slot = if x == 0.0 { 0.0 } else { x };
    }
    Ok(mul)
}

/// The canonical text of `lrmul`: the groups whose factor is not 1, in the model's order, or
/// `1` when there are none.
fn print_lrmul(mul: &LrMul, groups: &[&str]) -> String {
    let terms: Vec<String> = groups
        .iter()
        .enumerate()
        .filter(|&(g, _)| mul.of(g as u8) != 1.0)
        .map(|(g, name)| format!("{name}*{}", mul.of(g as u8)))
        .collect();
    match terms.is_empty() {
        true => "1".into(),
        false => terms.join("+"),
    }
}

/// Each factor finite and within `0..=`[`MAX_LRMUL`]; groups the model lacks at 1.
fn check_lrmul(t: &TrainSpec, kind: ModelKind) -> Result<(), String> {
    let groups = trained_groups(kind);
    for (g, &x) in t.lrmul.0.iter().enumerate() {
        match groups.get(g) {
            Some(name) if !(x.is_finite() && (0.0..=MAX_LRMUL).contains(&x)) => {
                return Err(format!(
                    "lrmul {name}*{x} is out of range (0..={MAX_LRMUL})"
                ));
            }
            None if x != 1.0 => {
                return Err(format!(
                    "lrmul sets groups that {} does not have",
                    kind.name()
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A β of Adam: 0 to [`MAX_BETA`].
fn beta(key: &str, x: f32) -> Result<(), String> {
    in_range(key, x, 0.0, MAX_BETA)
}

/// `x` within `lo..=hi`; the message names the key.
fn in_range(key: &str, x: f32, lo: f32, hi: f32) -> Result<(), String> {
    match x >= lo && x <= hi {
        true => Ok(()),
        false => Err(format!("{key} {x} is out of range ({lo}..={hi})")),
    }
}

/// `0` or `1`.
fn flag(value: &str, key: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{key} is 0 or 1")),
    }
}

/// A whole number.
fn whole(value: &str, key: &str) -> Result<usize, String> {
    value
        .parse::<usize>()
        .map_err(|_| format!("{key} is a whole number"))
}

/// A finite decimal (`0.001`, `1e-3`) as an f32.
fn decimal(value: &str, key: &str) -> Result<f32, String> {
    // f32's parser also takes "inf" and "NaN": only digits, dots, signs and exponents pass.
    let plain = value
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
    match value.parse::<f32>() {
        Ok(x) if plain && x.is_finite() => Ok(x),
        _ => Err(format!("{key} is a decimal number (like 0.002 or 2e-3)")),
    }
}

impl TrainSpec {
    /// The values `train(...)` takes for keys a recipe leaves out (docs/recipes.md): the
    /// table's defaults. lmzip's measured settings are the level table's (src/levels.rs),
    /// which spells them out.
    pub fn defaults(kind: ModelKind) -> Self {
        let mut spec = TrainSpec {
            scope: Scope::NONE,
            optimizer: OptimizerKind::Adam,
            lr: 0.0,
            stride: 1,
            bptt: 1,
            clip: 0.0,
            state: LiveState::Rebuild,
            adam: AdamSettings::DEFAULT,
            rate: RateSchedule::NONE,
            bptt0: 0,
            grow: 12,
            lrmul: LrMul::ONE,
            focus: 0.0,
        };
        for key in &TRAIN_KEYS {
            // A test reads every default of every model.
            (key.read)(&mut spec, key.default, kind).expect("the table's defaults read");
        }
        spec
    }

    /// The first key whose value is out of bounds, with the message naming it.
    pub fn check(&self, kind: ModelKind) -> Result<(), (&'static TrainKey, String)> {
        for key in &TRAIN_KEYS {
            (key.check)(self, kind).map_err(|m| (key, m))?;
        }
        Ok(())
    }

    /// Checks each setting; the message names the offending key.
    pub fn validate(&self, kind: ModelKind) -> Result<()> {
        if let Err((_, message)) = self.check(kind) {
            bail!(message);
        }
        Ok(())
    }

    /// The canonical text of the settings, `key=value,...` in table order.
    pub fn to_text(&self, kind: ModelKind) -> String {
        let pairs: Vec<String> = TRAIN_KEYS
            .iter()
            .map(|k| (k, (k.print)(self, kind)))
            .filter(|(k, value)| k.implicit != Some(value.as_str()))
            .map(|(k, value)| format!("{}={value}", k.name))
            .collect();
        pairs.join(",")
    }

    /// Whether TBPTT windows grow: `bptt0` set, below `bptt`, and segments contiguous (with
    /// gaps, or from `bptt0` = `bptt` on, every window is `bptt`).
    pub fn grows(&self) -> bool {
        self.bptt0 > 0 && self.bptt0 < self.bptt && self.stride == self.bptt
    }

    /// The window of a segment that starts after `steps` optimizer steps.
    pub fn window_at(&self, steps: u64) -> usize {
        match self.grows() {
            true => grown_window(self.bptt0, self.grow, self.bptt, steps),
            false => self.bptt,
        }
    }

    /// The weight of the loss of a byte that cost `coded_bits` to code (`None`: not known, full
    /// weight). Computed in f64 from the coder's own numbers, so both sides agree.
    pub fn loss_weight(&self, coded_bits: Option<f64>) -> f32 {
        match coded_bits {
            Some(bits) if self.focus > 0.0 => {
                (bits / self.focus as f64).clamp(FOCUS_FLOOR, 1.0) as f32
            }
            _ => 1.0,
        }
    }

    /// Whether the byte at `phase` bytes into a span of this action is trained.
    pub fn trains(&self, phase: u64) -> bool {
        phase % (self.stride as u64) < self.bptt as u64
    }
}
