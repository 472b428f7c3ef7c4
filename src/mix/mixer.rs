//! The online mixer: a logistic regression over stretched probabilities, trained on each coded
//! bit to minimise its code length. Weight sets are chosen by small contexts (the bits of the
//! byte so far, the match state, which orders have seen their context), as in the PAQ family;
//! a second layer mixes what the sets predict.
//!
//! Fixed point: inputs are stretch units (1/256, see [`super::logistic`]), weights have 16
//! fractional bits, sums are `i64`. The gradient step is `w += x · err · rate / 16384` with
//! `err = 4096·bit − p`, rounded down, so both sides compute the same weights.

use super::logistic::{ST_MAX, squash};

/// Largest weight magnitude (64.0): keeps a run of surprises from pushing weights anywhere.
const W_MAX: i32 = 64 << 16;

/// One layer with selectable weight sets.
pub struct Mixer {
    inputs: usize,
    weights: Vec<i32>,
    /// Offset of the selected set in `weights`.
    selected: usize,
    /// Learning rate, in 1/16384 per (stretch unit × 12-bit error).
    rate: i32,
    /// What the selected set predicted: stretch units and 12-bit probability.
    dot: i32,
    p: i32,
}

impl Mixer {
    /// `sets` weight sets over `inputs` inputs, each starting as `init`.
    pub fn new(inputs: usize, sets: usize, rate: i32, init: &[i32]) -> Self {
        debug_assert_eq!(init.len(), inputs);
        let mut weights = Vec::with_capacity(inputs * sets);
        for _ in 0..sets {
            weights.extend_from_slice(init);
        }
        Mixer {
            inputs,
            weights,
            selected: 0,
            rate,
            dot: 0,
            p: 2048,
        }
    }

    /// Bytes of memory a mixer of these sizes takes.
    pub fn bytes(inputs: usize, sets: usize) -> usize {
        4 * inputs * sets
    }

    /// Mixes `x` with weight set `set`; returns the prediction in stretch units.
    pub fn mix(&mut self, x: &[i32], set: usize) -> i32 {
        debug_assert_eq!(x.len(), self.inputs);
        self.selected = set * self.inputs;
        let w = &self.weights[self.selected..self.selected + self.inputs];
        let sum = dot(x, w);
        self.dot = (sum >> 16).clamp(-(ST_MAX as i64), ST_MAX as i64) as i32;
        self.p = squash(self.dot);
        self.dot
    }

    /// The last prediction as a 12-bit probability.
    pub fn p(&self) -> i32 {
        self.p
    }

    /// One gradient step of the selected set on the coded bit.
    pub fn update(&mut self, x: &[i32], bit: u32) {
        self.update_boosted(x, bit, 256);
    }

    /// One gradient step at `boost / 256` times the mixer's rate.
    pub fn update_boosted(&mut self, x: &[i32], bit: u32, boost: i32) {
        let err = ((bit as i32) << 12) - self.p;
        let scaled = (err as i64 * self.rate as i64 * boost as i64) >> 8;
        let w = &mut self.weights[self.selected..self.selected + self.inputs];
        train(x, w, scaled);
    }
}

// The two loops every bit runs per weight set, in integers: their results do not depend on
// the order of the additions, so a vectorised copy computes exactly the same. The baseline
// x86-64 build has no signed 64-bit vector multiply, and left alone they ran one input at a
// time; where the kernels run their AVX2 path (`LMZIP_SIMD`, src/kernels/dispatch.rs), the
// same code compiled for AVX2 runs instead, so forcing the portable path tests this one too.

/// Whether the kernels' AVX2 path is in force (it is only ever chosen where the CPU has it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn uses_avx2() -> bool {
    crate::kernels::dispatch::active() == crate::kernels::SimdPath::Avx2
}

/// `Σ x[i] · w[i]` (no overflow: |x| < 2^11, |w| ≤ 2^22, a few hundred inputs at most).
fn dot(x: &[i32], w: &[i32]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    if uses_avx2() {
        // SAFETY: the AVX2 path is only chosen on a CPU that has AVX2.
        return unsafe { avx2::dot(x, w) };
    }
    dot_body(x, w)
}

/// One gradient step: `w[i] += x[i] · scaled / 2^14` (rounded down), within `±W_MAX`.
fn train(x: &[i32], w: &mut [i32], scaled: i64) {
    // With |x| ≤ 2048 (stretch units, ±2047 at most) and |scaled| below 2^20, every product
    // fits an i32, and so does w + step (|w| ≤ 2^22): the 32-bit loop then computes the same
    // bits with twice the lanes. That holds at every valid rate (4095 · 64 · 1024 / 2^8 =
    // 1048320 ≤ i32::MAX / 2048); the 64-bit loop stays for anything else.
    let narrow = i32::try_from(scaled)
        .ok()
        .filter(|s| s.unsigned_abs() <= (i32::MAX / 2048) as u32);
    #[cfg(target_arch = "x86_64")]
    if uses_avx2() {
        // SAFETY: the AVX2 path is only chosen on a CPU that has AVX2.
        return unsafe {
            match narrow {
                Some(s) => avx2::train_narrow(x, w, s),
                None => avx2::train(x, w, scaled),
            }
        };
    }
    match narrow {
        Some(s) => train_narrow_body(x, w, s),
        None => train_body(x, w, scaled),
    }
}

#[inline(always)]
fn dot_body(x: &[i32], w: &[i32]) -> i64 {
    debug_assert_eq!(x.len(), w.len());
    x.iter().zip(w).map(|(&a, &b)| a as i64 * b as i64).sum()
}

#[inline(always)]
fn train_body(x: &[i32], w: &mut [i32], scaled: i64) {
    debug_assert_eq!(x.len(), w.len());
    for (w, &x) in w.iter_mut().zip(x) {
        let step = (x as i64 * scaled) >> 14;
        *w = (*w as i64 + step).clamp(-(W_MAX as i64), W_MAX as i64) as i32;
    }
}

/// [`train_body`] in 32 bits, for `|scaled| ≤ i32::MAX / 2048` (see [`train`]).
#[inline(always)]
fn train_narrow_body(x: &[i32], w: &mut [i32], scaled: i32) {
    debug_assert_eq!(x.len(), w.len());
    for (w, &x) in w.iter_mut().zip(x) {
        debug_assert!(x.abs() <= 2048);
        let step = (x * scaled) >> 14;
        *w = (*w + step).clamp(-W_MAX, W_MAX);
    }
}

/// The same loops compiled for AVX2.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    #[target_feature(enable = "avx2")]
    pub(super) fn dot(x: &[i32], w: &[i32]) -> i64 {
        super::dot_body(x, w)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn train(x: &[i32], w: &mut [i32], scaled: i64) {
        super::train_body(x, w, scaled)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn train_narrow(x: &[i32], w: &mut [i32], scaled: i32) {
        super::train_narrow_body(x, w, scaled)
    }
}

/// Two layers: one [`Mixer`] per selector context, then a final mixer over their outputs.
pub struct Mixer2 {
    first: Vec<Mixer>,
    last: Mixer,
    outputs: Vec<i32>,
    /// With a decaying rate: bits learned so far.
    decay: Option<u32>,
}

/// With a decaying rate (`mix:decay=1`), the rate after `n` bits is
/// `rate · (1 + DECAY_BOOST · DECAY_HALF / (n + DECAY_HALF))`: four times the final rate at the
/// start, the boost halved after 1 KB, a tenth of it left after 9 KB. Measured against boosts
/// of 1, 4 and 5 and halves of 2^12..2^16 bits on book1, enwik6 and small files.
const DECAY_BOOST: i64 = 3;
const DECAY_HALF: i64 = 1 << 13;

impl Mixer2 {
    /// `sets[k]` weight sets for selector `k`; every first-layer set starts as `init`.
    pub fn new(inputs: usize, sets: &[usize], rate: i32, init: &[i32]) -> Self {
        let k = sets.len();
        let even = vec![(1 << 16) / k as i32; k];
        Mixer2 {
            first: sets
                .iter()
                .map(|&s| Mixer::new(inputs, s, rate, init))
                .collect(),
            last: Mixer::new(k, 8, rate, &even),
            outputs: vec![0; k],
            decay: None,
        }
    }

    pub fn bytes(inputs: usize, sets: &[usize]) -> usize {
        sets.iter().map(|&s| Mixer::bytes(inputs, s)).sum::<usize>() + Mixer::bytes(sets.len(), 8)
    }

    /// Mixes `x` with the first layer's sets chosen by `select` (one per selector) and the last
    /// layer's set `last_set` (0..8); returns a 12-bit probability.
    pub fn mix(&mut self, x: &[i32], select: &[usize], last_set: usize) -> i32 {
        for (k, m) in self.first.iter_mut().enumerate() {
            self.outputs[k] = m.mix(x, select[k]);
        }
        self.last.mix(&self.outputs, last_set);
        self.last.p()
    }

    /// Lets the learning rate start higher and decay to the mixer's rate.
    pub fn with_decay(mut self) -> Self {
        self.decay = Some(0);
        self
    }

    pub fn update(&mut self, x: &[i32], bit: u32) {
        let boost = match &mut self.decay {
            None => 256,
            Some(n) => {
                let b = 256 + (256 * DECAY_BOOST * DECAY_HALF) / (*n as i64 + DECAY_HALF);
                *n = n.saturating_add(1);
                b as i32
            }
        };
        for m in &mut self.first {
            m.update_boosted(x, bit, boost);
        }
        self.last.update_boosted(&self.outputs, bit, boost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::logistic::stretch;

    /// Two inputs, one right and one noise: the mixer learns to trust the right one.
    #[test]
    fn the_mixer_learns_which_input_to_trust() {
        let mut m = Mixer::new(2, 1, 64, &[1 << 14, 1 << 14]);
        let mut x = 0x1234_5678u32;
        let mut cost_early = 0.0;
        let mut cost_late = 0.0;
        for t in 0..4000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let bit = x & 1;
            let good = if bit == 1 {
                stretch(3900)
            } else {
                stretch(196)
            };
            let noise = if (x >> 8) & 1 == 1 { 1000 } else { -1000 };
            let inputs = [good, noise];
            m.mix(&inputs, 0);
            let p = m.p() as f64 / 4096.0;
            let c = -(if bit == 1 { p } else { 1.0 - p }).log2();
            if t < 200 {
                cost_early += c;
            } else if t >= 3800 {
                cost_late += c;
            }
            m.update(&inputs, bit);
        }
        assert!(cost_late < cost_early / 2.0, "{cost_late} vs {cost_early}");
        assert!(cost_late / 200.0 < 0.2, "{cost_late}");
        let w = &m.weights;
        assert!(w[0] > 4 * w[1].abs(), "{w:?}");
    }

    /// A decaying rate learns a new input faster at the start and ends at the plain rate.
    #[test]
    fn a_decaying_rate_learns_faster_at_the_start() {
        let run = |decay: bool, bits: usize| {
            let m = Mixer2::new(2, &[1], 3, &[0, 0]);
            let mut m = if decay { m.with_decay() } else { m };
            let x = [256, stretch(3600)];
            let mut cost = 0.0;
            for _ in 0..bits {
                let p = m.mix(&x, &[0], 0) as f64 / 4096.0;
                cost -= p.log2();
                m.update(&x, 1);
            }
            (cost, m)
        };
        let (plain, _) = run(false, 300);
        let (decaying, _) = run(true, 300);
        assert!(decaying < 0.8 * plain, "{decaying} vs {plain}");
        let (_, m) = run(true, 200_000);
        let boosted = 256 + 256 * DECAY_BOOST * DECAY_HALF / (200_000 + DECAY_HALF);
        assert_eq!(m.decay, Some(200_000));
        assert!(boosted < 256 + 256 * DECAY_BOOST / 20, "{boosted}");
    }
}
