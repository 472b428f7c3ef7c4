//! SGD and Adam over a [`ParamSet`]: one loop over the tensor table.
//!
//! Gradients are ascent directions of the log-likelihood (`one_hot − p` at the logits), so both
//! optimizers move parameters by `+ lr · step`. Each step consumes the gradient buffer: it applies
//! the tensors in scope and leaves the whole buffer zeroed for the next accumulation.
//!
//! Every update is element-wise (`+ - * /`, `sqrt` and compare-and-select, exact or correctly
//! rounded in IEEE 754), so every build and SIMD path computes the same bits; the loops are the
//! kernels [`kernels::sgd_update`] and [`kernels::adam_update`].
//!
//! **No subnormal numbers.** An x86 core takes a microcode assist, on the order of a hundred
//! cycles, for every operation that reads or produces a subnormal float, and training makes them
//! in bulk: gradients of bytes the model all but rules out are ~1e-20, their squares underflow,
//! and moments of parameters with no gradient decay through the subnormal range for thousands of
//! steps. Both optimizers therefore read a gradient element below [`TINY_GRAD`] in magnitude as
//! zero, and Adam stores a moment below [`TINY_MOMENT`] as zero. Neither can move a parameter
//! measurably (Adam divides by at least ε = 1e-8), and with them the moments and the sums here
//! stay normal or zero (an update below 1e-38 can still occur, rarely: a first moment near the
//! floor against a second moment kept large by a huge old gradient). One-step RWKV-7 training
//! runs 4.4 times faster for it (docs/determinism.md).

use anyhow::{Result, bail};

use crate::kernels::{self, AdamCoefs};
use crate::params::{Group, ParamSet, Scope, TensorInfo};
use crate::train::rate::RateSchedule;

/// How the parameters move on a trained byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    Sgd,
    Adam,
}

impl OptimizerKind {
    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::Sgd => "sgd",
            OptimizerKind::Adam => "adam",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "sgd" => Ok(OptimizerKind::Sgd),
            "adam" => Ok(OptimizerKind::Adam),
            other => bail!("unknown optimizer '{other}' (optimizers: sgd, adam)"),
        }
    }
}

// Adam's default constants (Kingma & Ba, 2015), as in the reference system.
const BETA1: f32 = 0.9;
const BETA2: f32 = 0.999;
const EPS: f32 = 1e-8;

/// Adam's settings (docs/recipes.md, keys `b1`, `b2`, `eps`, `b2warm`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamSettings {
    /// Decay of the first moment; 0 makes Adam RMSprop-like (the step follows the gradient).
    pub beta1: f32,
    /// Decay of the second moment (its cap under warm-up).
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// β2 warm-up: step t decays the second moment by `min((t − 1)/(t + 1), beta2)`, so early
    /// on it is the plain mean of the squared gradients seen (β2 of step 1 is 0, which makes
    /// the bias correction of the second moment 1 from then on).
    pub beta2_warmup: bool,
}

impl AdamSettings {
    /// The constants files written before these keys existed used.
    pub const DEFAULT: AdamSettings = AdamSettings {
        beta1: BETA1,
        beta2: BETA2,
        eps: EPS,
        beta2_warmup: false,
    };

    /// β2 of step `t` (the first step is 1).
    pub fn beta2_at(&self, t: u64) -> f32 {
        if !self.beta2_warmup {
            return self.beta2;
        }
        let warm = (t.saturating_sub(1) as f64 / (t as f64 + 1.0)) as f32;
        if warm < self.beta2 { warm } else { self.beta2 }
    }
}

/// Most training groups a model may have, the output bias included (mamba1 has 7, rwkv7 8).
pub const MAX_GROUPS: usize = 16;

/// Per-group multipliers of the learning rate (docs/recipes.md, key `lrmul`), indexed by
/// [`Group`]: a step moves the tensors of group g with the rate `lr · mul[g]` (Adam: the rate of
/// the schedule, times `mul[g]`). 1 leaves a group's rate as it is: the step then skips the
/// multiplication, so a rule without multipliers computes exactly what it did before the key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrMul(pub [f32; MAX_GROUPS]);

impl LrMul {
    /// Every group at the rate of the rule.
    pub const ONE: LrMul = LrMul([1.0; MAX_GROUPS]);

    /// The multiplier of `group` (1 for a group beyond the table).
    #[inline]
    pub fn of(&self, group: Group) -> f32 {
        self.0.get(group as usize).copied().unwrap_or(1.0)
    }

    /// `rate` scaled for `group`: `rate` itself, untouched, when the multiplier is 1.
    #[inline]
    pub fn scale(&self, rate: f32, group: Group) -> f32 {
        let mul = self.of(group);
        if mul == 1.0 { rate } else { rate * mul }
    }
}

/// Gradient elements smaller than this in magnitude count as zero: large enough that
/// `(1 − β2) · g²` stays a normal float, far below anything that moves a parameter.
pub const TINY_GRAD: f32 = 1e-17;
/// Adam's moments smaller than this (in magnitude) are stored as zero, so that their decay
/// (`β · m`) never reaches the subnormal range.
pub const TINY_MOMENT: f32 = 1e-30;

/// Which rows of the sparse (embedding) tensors the gradient touches: one flag per row of
/// every sparse tensor, the tensors' rows end to end in the order they were registered (the
/// byte embedding's 256 first; [`crate::model::Network::sparse_rows`]).
pub type TouchedRows = [bool];

/// The settings of one step, from the training rule in force.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    pub kind: OptimizerKind,
    pub lr: f32,
    /// Element-wise gradient clip; 0 means none.
    pub clip: f32,
    /// Adam's constants.
    pub adam: AdamSettings,
    /// How Adam's learning rate moves with its step count.
    pub rate: RateSchedule,
    /// Per-group multipliers of the learning rate.
    pub lrmul: LrMul,
}

impl Hyper {
    /// Settings with Adam's default constants and no rate schedule.
    pub fn plain(kind: OptimizerKind, lr: f32, clip: f32) -> Self {
        Hyper {
            kind,
            lr,
            clip,
            adam: AdamSettings::DEFAULT,
            rate: RateSchedule::NONE,
            lrmul: LrMul::ONE,
        }
    }
}

/// The optimizer's state, kept across rules: Adam's moments and step count. Each step takes
/// its settings ([`Hyper`]) from the rule in force, so a schedule may switch learning rate or
/// optimizer without losing the moments.
#[derive(Clone, Debug, Default)]
pub struct Optimizer {
    /// Adam's first and second moments, laid out like the parameters; empty until the first
    /// Adam step, and `m` empty throughout a run that keeps no first moment.
    m: Vec<f32>,
    v: Vec<f32>,
    /// Whether `m` is kept: a run whose every Adam rule has β1 = 0 needs none
    /// ([`kernels::adam_update`]).
    first_moment: bool,
    /// Adam steps taken, and β1^t, β2^t kept as running f64 products (no `powi`, whose
    /// implementation is not pinned).
    steps: u64,
    beta1_pow: f64,
    beta2_pow: f64,
}

impl Optimizer {
    /// An optimizer that keeps Adam's first moment.
    pub fn new() -> Self {
        Self::keeping_first_moment(true)
    }

    /// An optimizer that keeps Adam's first moment only if `first_moment` (false: every Adam
    /// step it takes has β1 = 0; a step with another β1 starts a first moment at zero).
    pub fn keeping_first_moment(first_moment: bool) -> Self {
        Self {
            beta1_pow: 1.0,
            beta2_pow: 1.0,
            first_moment,
            ..Self::default()
        }
    }

    /// Adam steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Adam's moments `(m, v)`, once an Adam step has been taken (or restored); `m` is `None`
    /// where no first moment is kept.
    pub fn moments(&self) -> Option<(Option<&[f32]>, &[f32])> {
        let m = (!self.m.is_empty()).then_some(&self.m[..]);
        (!self.v.is_empty()).then_some((m, &self.v[..]))
    }

    /// Restores a saved state: the moments (laid out like the parameters) and the step count.
    /// β1^t and β2^t are recomputed by the same running products the steps took with the
    /// constants `adam` (those of the saved action), so they are bit-identical when the stream
    /// kept one set of constants. The products are 0 from below 2^-64 on ([`vanish`]), within
    /// about 90,000 steps at the levels' β2, which bounds the loop whatever count a file claims.
    pub fn restore(
        &mut self,
        moments: Option<(Option<Vec<f32>>, Vec<f32>)>,
        steps: u64,
        adam: &AdamSettings,
    ) {
        let (m, v) = moments.unwrap_or_default();
        // A first moment the run does not keep is dropped; one it keeps but the file lacks
        // (saved by a run that kept none) starts at zero. The saved action's β1 counts too: a
        // pending segment is replayed with it.
        self.first_moment |= adam.beta1 != 0.0;
        self.m = match (self.first_moment, m) {
            (false, _) => Vec::new(),
            (true, Some(m)) => m,
            (true, None) => vec![0.0; v.len()],
        };
        self.v = v;
        self.steps = 0;
        self.beta1_pow = 1.0;
        self.beta2_pow = 1.0;
        while self.steps < steps && (self.beta1_pow != 0.0 || self.beta2_pow != 0.0) {
            self.advance(adam);
        }
        self.steps = steps;
    }

    /// Counts one more Adam step and multiplies its β1 and β2 into the running products;
    /// returns the step's β2.
    fn advance(&mut self, adam: &AdamSettings) -> f32 {
        self.steps += 1;
        let beta2 = adam.beta2_at(self.steps);
        self.beta1_pow = vanish(self.beta1_pow * adam.beta1 as f64);
        self.beta2_pow = vanish(self.beta2_pow * beta2 as f64);
        beta2
    }

    /// Applies `grads` to the tensors in `scope` and leaves `grads` zeroed (backward writes
    /// nothing outside the scope). Rows of sparse tensors are
    /// updated only where `touched` is set: a row whose byte was not seen has no gradient, and
    /// Adam leaves its moments and value as they are (lazy Adam, as the reference does for the
    /// embedding).
    pub fn step(
        &mut self,
        params: &mut ParamSet,
        grads: &mut [f32],
        hyper: &Hyper,
        scope: Scope,
        touched: &TouchedRows,
    ) {
        let mut adam = None;
        if hyper.kind == OptimizerKind::Adam {
            if self.v.len() != params.len() {
                self.v = params.zeros_like();
                self.m = Vec::new();
            }
            // β1 ≠ 0 in a run that was to keep no first moment: from here it keeps one.
            self.first_moment |= hyper.adam.beta1 != 0.0;
            if self.first_moment && self.m.len() != params.len() {
                self.m = params.zeros_like();
            }
            let beta2 = self.advance(&hyper.adam);
            adam = Some(AdamCoefs {
                lr: hyper.rate.lr_at(hyper.lr, self.steps),
                beta1: hyper.adam.beta1,
                beta2,
                inv_bc1: (1.0 / (1.0 - self.beta1_pow)) as f32,
                inv_bc2: (1.0 / (1.0 - self.beta2_pow)) as f32,
                eps: hyper.adam.eps,
                tiny_grad: TINY_GRAD,
                tiny_moment: TINY_MOMENT,
            });
        }
        let mut first_row = 0;
        for t in &params.tensors {
            // This tensor's row flags, if it has sparse rows.
            let flags = if t.sparse_rows {
                let rows = t.shape[0];
                first_row += rows;
                touched.get(first_row - rows..first_row).unwrap_or(&[])
            } else {
                &[]
            };
            // Backward writes no gradient outside the scope, so those tensors are left alone.
            if !scope.has(t.group) {
                continue;
            }
            // The group's rate (the rule's own where its multiplier is 1).
            let sgd_lr = hyper.lrmul.scale(hyper.lr, t.group);
            let coefs = adam.map(|c| AdamCoefs {
                lr: hyper.lrmul.scale(c.lr, t.group),
                ..c
            });
            for range in row_ranges(t, flags) {
                let (p, g) = (&mut params.data[range.clone()], &mut grads[range.clone()]);
                clip_in_place(g, hyper.clip);
                match &coefs {
                    None => kernels::sgd_update(p, g, sgd_lr, TINY_GRAD),
                    Some(c) => {
                        let m = match self.m.is_empty() {
                            true => &mut [][..],
                            false => &mut self.m[range.clone()],
                        };
                        kernels::adam_update(c, p, g, m, &mut self.v[range]);
                    }
                }
            }
        }
    }
}

/// A running product β^t, taken as 0 once below 2^-64: its bias correction `1 / (1 − β^t)` is
/// then exactly 1 in f32 either way (below 2^-25 it rounds to 1), and in the subnormal range a
/// product by β can round back to itself forever, which would keep [`Optimizer::restore`]'s
/// loop from ending.
fn vanish(pow: f64) -> f64 {
    if pow < POW_FLOOR { 0.0 } else { pow }
}

const POW_FLOOR: f64 = 1.0 / 18_446_744_073_709_551_616.0; // 2^-64

/// The index ranges of a tensor that a step updates: all of it, or the touched rows (`touched`
/// holds the flags of its own rows).
fn row_ranges<'a>(
    t: &'a TensorInfo,
    touched: &'a [bool],
) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
    let (rows, cols) = if t.sparse_rows {
        (t.shape[0], t.slot.len / t.shape[0].max(1))
    } else {
        (1, t.slot.len)
    };
    (0..rows)
        .filter(move |&r| !t.sparse_rows || touched.get(r).copied().unwrap_or(false))
        .map(move |r| t.slot.offset + r * cols..t.slot.offset + (r + 1) * cols)
}

fn clip_in_place(g: &mut [f32], clip: f32) {
    if clip > 0.0 {
        for x in g {
            // Compare-and-select, so NaN stays NaN on every build.
            *x = if *x > clip {
                clip
            } else if *x < -clip {
                -clip
            } else {
                *x
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (ParamSet, Vec<f32>) {
        let mut p = ParamSet::new();
        let emb = p.add_sparse_rows("emb", &[4, 2], 0);
        let w = p.add("w", &[3], 1);
        p.get_mut(emb).fill(1.0);
        p.get_mut(w).fill(1.0);
        let g = vec![0.5; p.len()];
        (p, g)
    }

    /// The row flags run over every sparse tensor in turn, whatever dense tensors lie between.
    #[test]
    fn each_sparse_tensor_reads_its_own_row_flags() {
        let mut p = ParamSet::new();
        let a = p.add_sparse_rows("a", &[3, 1], 0);
        let w = p.add("w", &[2], 0);
        let b = p.add_sparse_rows("b", &[4, 1], 0);
        let mut g = vec![1.0; p.len()];
        let sgd = Hyper::plain(OptimizerKind::Sgd, 1.0, 0.0);
        // Row 1 of `a`, rows 0 and 3 of `b`.
        let touched = [false, true, false, true, false, false, true];
        Optimizer::new().step(&mut p, &mut g, &sgd, Scope::ALL, &touched);
        assert_eq!(p.get(a), [0.0, 1.0, 0.0]);
        assert_eq!(p.get(w), [1.0, 1.0]);
        assert_eq!(p.get(b), [1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn sgd_moves_scoped_tensors_and_touched_rows_only() {
        let (mut p, mut g) = setup();
        let mut opt = Optimizer::new();
        let sgd = Hyper::plain(OptimizerKind::Sgd, 0.1, 0.0);
        let mut touched = [false; 256];
        touched[2] = true;
        // As from backward: only the touched row of the sparse tensor has a gradient.
        for (i, x) in g.iter_mut().enumerate().take(8) {
            *x = if i / 2 == 2 { 0.5 } else { 0.0 };
        }
        opt.step(&mut p, &mut g, &sgd, Scope::ALL, &touched);
        assert_eq!(
            p.data,
            vec![1.0, 1.0, 1.0, 1.0, 1.05, 1.05, 1.0, 1.0, 1.05, 1.05, 1.05]
        );
        assert!(g.iter().all(|&x| x == 0.0));
        let mut g = vec![0.0; p.len()];
        g[4] = 0.5;
        opt.step(&mut p, &mut g, &sgd, Scope::NONE.with(0), &touched);
        assert!((p.data[4] - 1.1).abs() < 1e-6);
        assert_eq!(p.data[8..], [1.05, 1.05, 1.05]);
    }

    #[test]
    fn adam_first_step_moves_by_lr_in_the_gradient_sign() {
        let (mut p, _) = setup();
        let mut g: Vec<f32> = (0..p.len())
            .map(|i| if i % 2 == 0 { 0.3 } else { -2.0 })
            .collect();
        let mut opt = Optimizer::new();
        let adam = Hyper::plain(OptimizerKind::Adam, 0.01, 0.0);
        opt.step(&mut p, &mut g, &adam, Scope::ALL, &[true; 256]);
        // With bias correction, the first step is lr · g/|g| (up to ε).
        for (i, x) in p.data.iter().enumerate() {
            let want = if i % 2 == 0 { 1.01 } else { 0.99 };
            assert!((x - want).abs() < 1e-6, "{i}: {x}");
        }
        assert_eq!(opt.steps(), 1);
    }

    #[test]
    fn restored_state_steps_bit_identically() {
        let (mut p, _) = setup();
        let adam = Hyper::plain(OptimizerKind::Adam, 0.01, 0.0);
        let grad = |i: usize, t: usize| ((i * 7 + t * 3) % 5) as f32 - 2.0;
        let mut opt = Optimizer::new();
        for t in 0..3 {
            let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, t)).collect();
            opt.step(&mut p, &mut g, &adam, Scope::ALL, &[true; 256]);
        }
        let mut resumed = Optimizer::new();
        let (m, v) = opt.moments().unwrap();
        resumed.restore(
            Some((m.map(<[f32]>::to_vec), v.to_vec())),
            opt.steps(),
            &adam.adam,
        );
        let mut q = p.clone();
        let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, 3)).collect();
        let mut h = g.clone();
        opt.step(&mut p, &mut g, &adam, Scope::ALL, &[true; 256]);
        resumed.step(&mut q, &mut h, &adam, Scope::ALL, &[true; 256]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&p.data), bits(&q.data));
        // A hostile step count ends the recomputation early.
        resumed.restore(None, u64::MAX, &adam.adam);
        assert_eq!(resumed.steps(), u64::MAX);
    }

    fn adam_hyper() -> Hyper {
        Hyper::plain(OptimizerKind::Adam, 0.01, 0.0)
    }

    fn is_normal_or_zero(x: f32) -> bool {
        x == 0.0 || x.is_normal()
    }

    #[test]
    fn moments_never_go_subnormal_and_tiny_gradients_count_as_zero() {
        let mut p = ParamSet::new();
        let w = p.add("w", &[19], 0);
        p.get_mut(w).fill(0.5);
        let mut opt = Optimizer::new();
        let mut g: Vec<f32> = (0..p.len()).map(|i| (i as f32 - 9.5) * 0.1).collect();
        opt.step(&mut p, &mut g, &adam_hyper(), Scope::ALL, &[true; 256]);
        // Zero and tiny gradients from here on: unflushed, m would pass through the subnormal
        // range after ~800 steps, and squares of 1e-20 would be subnormal at once.
        for t in 0..3000 {
            let mut g: Vec<f32> = (0..p.len())
                .map(|i| match (i + t) % 3 {
                    0 => 0.0,
                    1 => 1e-20,
                    _ => -3e-18,
                })
                .collect();
            opt.step(&mut p, &mut g, &adam_hyper(), Scope::ALL, &[true; 256]);
            let (m, v) = opt.moments().unwrap();
            let m = m.unwrap();
            assert!(m.iter().chain(v).all(|&x| is_normal_or_zero(x)), "step {t}");
            assert!(p.data.iter().all(|&x| is_normal_or_zero(x)));
        }
        let m = opt.moments().unwrap().0.unwrap();
        assert!(m.iter().all(|&x| x == 0.0), "first moments decayed to zero");

        // Moments that decay below TINY_MOMENT are stored as zero; those just above stay.
        let mut q = ParamSet::new();
        q.add("w", &[4], 0);
        let mut opt = Optimizer::new();
        let m = vec![1.05e-30, -1.05e-30, 2e-30, 0.0];
        let v = vec![1.0005e-30, 1.0005e-30, 0.0, 2e-30];
        opt.restore(Some((Some(m), v)), 5, &AdamSettings::DEFAULT);
        let mut g = vec![0.0; 4];
        opt.step(&mut q, &mut g, &adam_hyper(), Scope::ALL, &[true; 256]);
        let (m, v) = opt.moments().unwrap();
        assert_eq!(m.unwrap(), [0.0, 0.0, BETA1 * 2e-30, 0.0]);
        assert_eq!(v, [0.0, 0.0, 0.0, BETA2 * 2e-30]);

        // A gradient below TINY_GRAD is read as zero; one at it is kept.
        let mut q = ParamSet::new();
        let w = q.add("w", &[2], 0);
        q.get_mut(w).fill(1.0);
        let mut g = vec![TINY_GRAD * 0.99, TINY_GRAD];
        let mut opt = Optimizer::new();
        opt.step(&mut q, &mut g, &adam_hyper(), Scope::ALL, &[true; 256]);
        let m = opt.moments().unwrap().0.unwrap();
        assert_eq!(m[0], 0.0);
        assert_eq!(m[1], (1.0 - BETA1) * TINY_GRAD);
    }

    #[test]
    fn beta2_warmup_follows_the_mean_of_the_squares_seen() {
        let warm = AdamSettings {
            beta2: 1.0 - 1.0 / 2048.0,
            beta2_warmup: true,
            ..AdamSettings::DEFAULT
        };
        // (t − 1)/(t + 1): 0, 1/3, 1/2, 3/5, ... capped at β2.
        assert_eq!(warm.beta2_at(1), 0.0);
        assert_eq!(warm.beta2_at(2), 1.0 / 3.0);
        assert_eq!(warm.beta2_at(3), 0.5);
        assert_eq!(warm.beta2_at(4), 0.6);
        assert_eq!(warm.beta2_at(4095), 4094.0 / 4096.0);
        assert_eq!(warm.beta2_at(5000), warm.beta2);
        assert_eq!(AdamSettings::DEFAULT.beta2_at(1), BETA2);
    }

    #[test]
    fn rmsprop_like_steps_with_warmup_and_schedule_resume_bit_identically() {
        let (mut p, _) = setup();
        let hyper = Hyper {
            adam: AdamSettings {
                beta1: 0.0,
                beta2: 0.9995,
                eps: 1e-6,
                beta2_warmup: true,
            },
            rate: RateSchedule {
                warmup: 3,
                decay: 0.1,
                power: 0.5,
                floor: 0.0,
                curve: crate::train::rate::Curve::FLAT,
            },
            ..adam_hyper()
        };
        let grad = |i: usize, t: usize| ((i * 5 + t * 3) % 7) as f32 - 3.0;
        let mut opt = Optimizer::new();
        let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, 0)).collect();
        let before = p.data.clone();
        opt.step(&mut p, &mut g, &hyper, Scope::ALL, &[true; 256]);
        // Step 1: m = g, v = g² with both corrections 1, so each parameter moves by
        // lr · (1/3 of the warm-up) / sqrt(1.1) · g/(|g| + ε).
        let lr = (0.01f64 / 3.0 / (1.0 + 0.1f32 as f64).sqrt()) as f32;
        for (i, (&x, &x0)) in p.data.iter().zip(&before).enumerate() {
            let g = grad(i, 0);
            let want = x0 + lr * (g / (g.abs() + 1e-6));
            assert_eq!(x, want, "{i}");
        }
        for t in 1..4 {
            let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, t)).collect();
            opt.step(&mut p, &mut g, &hyper, Scope::ALL, &[true; 256]);
        }
        let mut resumed = Optimizer::new();
        let (m, v) = opt.moments().unwrap();
        resumed.restore(
            Some((m.map(<[f32]>::to_vec), v.to_vec())),
            opt.steps(),
            &hyper.adam,
        );
        let mut q = p.clone();
        let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, 9)).collect();
        let mut h = g.clone();
        opt.step(&mut p, &mut g, &hyper, Scope::ALL, &[true; 256]);
        resumed.step(&mut q, &mut h, &hyper, Scope::ALL, &[true; 256]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&p.data), bits(&q.data));
    }

    /// At β1 = 0 an optimizer that keeps no first moment takes the same steps as one that
    /// does, on sparse rows too, and resumes from the moments either saved.
    #[test]
    fn without_a_first_moment_beta1_zero_steps_are_the_same_bits() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let hyper = Hyper {
            adam: AdamSettings {
                beta1: 0.0,
                beta2_warmup: true,
                ..AdamSettings::DEFAULT
            },
            ..adam_hyper()
        };
        let grad = |i: usize, t: usize| ((i * 5 + t * 3) % 7) as f32 * 0.4 - 1.1;
        let mut touched = [true; 256];
        let mut run = |opt: &mut Optimizer, p: &mut ParamSet, steps: std::ops::Range<usize>| {
            for t in steps {
                touched[1] = t % 2 == 0;
                let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, t)).collect();
                opt.step(p, &mut g, &hyper, Scope::ALL, &touched);
            }
        };
        let (mut p_kept, _) = setup();
        let (mut p_free, _) = setup();
        let mut kept = Optimizer::new();
        let mut free = Optimizer::keeping_first_moment(false);
        run(&mut kept, &mut p_kept, 0..6);
        run(&mut free, &mut p_free, 0..6);
        assert_eq!(bits(&p_kept.data), bits(&p_free.data));
        let (m, v) = free.moments().unwrap();
        assert!(m.is_none());
        assert_eq!(bits(v), bits(kept.moments().unwrap().1));
        // Resumed from either optimizer's moments, with or without a first moment.
        for from in [&kept, &free] {
            let (m, v) = from.moments().unwrap();
            let saved = || Some((m.map(<[f32]>::to_vec), v.to_vec()));
            let mut a = Optimizer::keeping_first_moment(false);
            a.restore(saved(), from.steps(), &hyper.adam);
            let mut b = Optimizer::new();
            b.restore(saved(), from.steps(), &hyper.adam);
            let (mut pa, mut pb) = (p_kept.clone(), p_kept.clone());
            run(&mut a, &mut pa, 6..9);
            run(&mut b, &mut pb, 6..9);
            let mut reference = (kept.clone(), p_kept.clone());
            run(&mut reference.0, &mut reference.1, 6..9);
            assert_eq!(bits(&pa.data), bits(&reference.1.data));
            assert_eq!(bits(&pb.data), bits(&reference.1.data));
        }
        // A step with β1 ≠ 0 starts a first moment at zero.
        let mut g = vec![1.0; p_free.len()];
        free.step(&mut p_free, &mut g, &adam_hyper(), Scope::ALL, &[true; 256]);
        let m = free.moments().unwrap().0.unwrap();
        assert!(m.iter().all(|&x| x == (1.0 - BETA1)));
    }

    #[test]
    fn lrmul_scales_each_group_and_ones_change_nothing() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let grad = |i: usize, t: usize| ((i * 7 + t * 3) % 5) as f32 * 0.3 - 0.5;
        // Group 0 (the sparse tensor) at three times the rate, group 1 at the rule's.
        let mut mul = LrMul::ONE;
        mul.0[0] = 3.0;
        let rmsprop = Hyper {
            adam: AdamSettings {
                beta1: 0.0,
                ..AdamSettings::DEFAULT
            },
            rate: RateSchedule {
                decay: 0.01,
                floor: 0.3,
                ..RateSchedule::NONE
            },
            ..adam_hyper()
        };
        for hyper in [
            Hyper::plain(OptimizerKind::Sgd, 0.1, 0.0),
            adam_hyper(),
            rmsprop,
        ] {
            let run = |lrmul: LrMul| {
                let (mut p, _) = setup();
                let mut opt = Optimizer::new();
                let hyper = Hyper { lrmul, ..hyper };
                for t in 0..4 {
                    let mut g: Vec<f32> = (0..p.len()).map(|i| grad(i, t)).collect();
                    opt.step(&mut p, &mut g, &hyper, Scope::ALL, &[true; 256]);
                }
                p.data
            };
            let (plain, scaled) = (run(LrMul::ONE), run(mul));
            let start = setup().0.data;
            // Group 1 computes the same bits; group 0 moves three times as far (SGD exactly;
            // Adam's step is the rate times a factor independent of it).
            assert_eq!(bits(&plain[8..]), bits(&scaled[8..]), "{hyper:?}");
            for i in 0..8 {
                let (a, b) = (plain[i] - start[i], scaled[i] - start[i]);
                assert!((b - 3.0 * a).abs() <= 1e-6, "{i}: {a} {b} {hyper:?}");
                assert!(a != 0.0);
            }
            // Factors of 1 written out, or set for groups the tensors do not use, are no change.
            let mut ones = LrMul::ONE;
            ones.0[1] = 1.0;
            ones.0[9] = 5.0;
            assert_eq!(bits(&run(ones)), bits(&plain));
        }
        // A factor of 1 returns the rate itself (not a product); others one f32 product.
        let mut mul = LrMul::ONE;
        mul.0[2] = 0.5;
        assert_eq!(mul.scale(0.3, 0).to_bits(), 0.3f32.to_bits());
        assert_eq!(mul.scale(0.3, 2), 0.3f32 * 0.5);
        assert_eq!(mul.of(200), 1.0);
    }

    #[test]
    fn clip_bounds_each_element() {
        let mut g = vec![3.0, -3.0, 0.2];
        clip_in_place(&mut g, 1.0);
        assert_eq!(g, vec![1.0, -1.0, 0.2]);
    }
}
