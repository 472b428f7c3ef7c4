//! The online mixer: a logistic regression over stretched probabilities, trained on each coded
//! bit to minimise its code length. Weight sets are chosen by small contexts (the bits of the
//! byte so far, the match state, which orders have seen their context), as in the PAQ family;
//! a second layer mixes what the sets predict.
//!
//! Fixed point: inputs are stretch units (1/256, see [`super::logistic`]), weights have 16
//! fractional bits, sums are `i64`. The gradient step is `w += x · err · rate / 16384` with
//! `err = 4096·bit − p`, rounded down, so both sides compute the same weights.

use super::logistic::{ST_MAX, squash};
use crate::kernels;

/// Largest weight magnitude (64.0): keeps a run of surprises from pushing weights anywhere.
const W_MAX: i32 = 64 << 16;

/// One layer with selectable weight sets. A set takes its starting weights when it is first
/// chosen, not before: its memory is zeroed pages until then, which the system hands out only
/// when written, so the sets an input never chooses (most of the sets by the last byte, on
/// text) cost nothing. No value depends on it: a set is read and written only once chosen.
pub struct Mixer {
    inputs: usize,
    weights: Vec<i32>,
    /// The starting weights of every set.
    init: Vec<i32>,
    /// Per set: whether it has its starting weights (it has been chosen, or set).
    ready: Vec<bool>,
    /// Offset of the selected set in `weights`.
    selected: usize,
    /// Learning rate, in 1/16384 per (stretch unit × 12-bit error).
    rate: i32,
    /// Taken from every step's boost (in 256ths of `rate`) after the young or decaying boost:
    /// with [`Mixer2::with_settled_last`], the last layer settles at three eighths of the rate.
    boost_cut: i32,
    /// What the selected set predicted: stretch units and 12-bit probability.
    dot: i32,
    p: i32,
    /// With young sets (`mix:young=1`): per set, the updates it has had.
    updates: Option<Vec<u32>>,
}

/// With young sets (`mix:young=1`), a set's rate after `n` updates of its own is
/// `rate · (1 + YOUNG_BOOST · YOUNG_HALF / (n + YOUNG_HALF))`: eight times the final rate at
/// its first update, the boost halved after 64. Most sets of the large selectors are seen a few
/// times only; a global decay (`ext` 4) has ended before they come round. Measured against
/// boosts of 3–31 and halves of 16–1024, and against the larger of this and the global decay,
/// on text, code and binaries (docs/experiments.md, "Young weight sets").
const YOUNG_BOOST: u32 = 7;
const YOUNG_HALF: u32 = 64;

/// The boost (in 1/256) of a set that has had `n` updates.
#[inline]
fn young_boost(n: u32) -> i32 {
    (256 + 256 * YOUNG_BOOST * YOUNG_HALF / n.saturating_add(YOUNG_HALF)) as i32
}

impl Mixer {
    /// `sets` weight sets over `inputs` inputs, each starting as `init`.
    pub fn new(inputs: usize, sets: usize, rate: i32, init: &[i32]) -> Self {
        debug_assert_eq!(init.len(), inputs);
        Mixer {
            inputs,
            weights: vec![0; inputs * sets],
            init: init.to_vec(),
            ready: vec![false; sets],
            selected: 0,
            rate,
            boost_cut: 0,
            dot: 0,
            p: 2048,
            updates: None,
        }
    }

    /// Each set's rate starts higher and decays with its own updates ([`YOUNG_BOOST`]).
    pub fn with_young_sets(mut self) -> Self {
        self.updates = Some(vec![0; self.weights.len() / self.inputs]);
        self
    }

    /// Its number of weight sets.
    pub fn sets(&self) -> usize {
        self.ready.len()
    }

    /// Every set's weights, set after set (a set not yet chosen has its starting weights).
    pub fn weights(&self) -> Vec<i32> {
        let mut all = self.weights.clone();
        for (set, _) in self.ready.iter().enumerate().filter(|(_, ready)| !**ready) {
            all[set * self.inputs..(set + 1) * self.inputs].copy_from_slice(&self.init);
        }
        all
    }

    /// Set `set`'s weights, to start from others than `init` (src/mix/warm.rs).
    pub fn set_mut(&mut self, set: usize) -> &mut [i32] {
        self.prepare(set);
        &mut self.weights[set * self.inputs..(set + 1) * self.inputs]
    }

    /// Gives set `set` its starting weights when it has none yet.
    #[inline]
    fn prepare(&mut self, set: usize) {
        if !self.ready[set] {
            self.ready[set] = true;
            let at = set * self.inputs;
            self.weights[at..at + self.inputs].copy_from_slice(&self.init);
        }
    }

    /// Bytes of memory a mixer of these sizes takes (with young sets, a count per set).
    pub fn bytes(inputs: usize, sets: usize, young: bool) -> usize {
        4 * inputs * sets + if young { 4 * sets } else { 0 }
    }

    /// Mixes `x` with weight set `set`; returns the prediction in stretch units.
    pub fn mix(&mut self, x: &[i32], set: usize) -> i32 {
        debug_assert_eq!(x.len(), self.inputs);
        self.prepare(set);
        self.selected = set * self.inputs;
        let w = &self.weights[self.selected..self.selected + self.inputs];
        let sum = kernels::mixing::dot(x, w);
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

    /// One gradient step at `boost / 256` times the mixer's rate; with young sets, at the
    /// selected set's own boost instead.
    pub fn update_boosted(&mut self, x: &[i32], bit: u32, boost: i32) {
        let boost = match &mut self.updates {
            None => boost,
            Some(updates) => {
                let n = &mut updates[self.selected / self.inputs];
                let boost = young_boost(*n);
                *n = n.saturating_add(1);
                boost
            }
        };
        let boost = boost - self.boost_cut;
        let err = ((bit as i32) << 12) - self.p;
        let scaled = (err as i64 * self.rate as i64 * boost as i64) >> 8;
        let w = &mut self.weights[self.selected..self.selected + self.inputs];
        kernels::mixing::train(x, w, scaled, W_MAX);
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

/// What [`Mixer2::with_settled_last`] takes from the last layer's boost, in 256ths of the rate:
/// it settles at three eighths of the rate (an eighth, a quarter and a half were measured too:
/// a quarter gave text a little more and lost more on a spreadsheet, a JPEG and a PDF;
/// docs/experiments.md).
const SETTLE_CUT: i32 = 160;

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

    pub fn bytes(inputs: usize, sets: &[usize], young: bool) -> usize {
        sets.iter()
            .map(|&s| Mixer::bytes(inputs, s, young))
            .sum::<usize>()
            + Mixer::bytes(sets.len(), 8, young)
    }

    /// Mixes `x` with the first layer's sets chosen by `select` (one per selector) and the last
    /// layer's set `last_set` (0..8); returns a 12-bit probability.
    pub fn mix(&mut self, x: &[i32], select: &[usize], last_set: usize) -> i32 {
        debug_assert_eq!(select.len(), self.first.len());
        for (k, m) in self.first.iter_mut().enumerate() {
            self.outputs[k] = m.mix(x, select[k]);
        }
        self.last.mix(&self.outputs, last_set);
        self.last.p()
    }

    /// The first layer's mixers, one per selector.
    pub fn first(&self) -> &[Mixer] {
        &self.first
    }

    pub fn first_mut(&mut self) -> &mut [Mixer] {
        &mut self.first
    }

    /// The last layer's mixer (8 sets over one input per selector).
    pub fn last(&self) -> &Mixer {
        &self.last
    }

    pub fn last_mut(&mut self) -> &mut Mixer {
        &mut self.last
    }

    /// Lets the learning rate start higher and decay to the mixer's rate.
    pub fn with_decay(mut self) -> Self {
        self.decay = Some(0);
        self
    }

    /// Lets each weight set's rate start higher and decay with its own updates, in both layers
    /// (in place of [`Mixer2::with_decay`]).
    pub fn with_young_sets(mut self) -> Self {
        self.first = self.first.into_iter().map(Mixer::with_young_sets).collect();
        self.last = self.last.with_young_sets();
        self.decay = None;
        self
    }

    /// Lets the last layer settle at three eighths of the first layer's rate: its every step is
    /// five eighths of `rate` smaller (`mix:settle`), so a young set still starts fast. The
    /// last layer mixes a few outputs that every bit trains; at the first layer's rate it
    /// follows each bit's noise (0.1–0.3% fewer bytes on text, source and binaries).
    pub fn with_settled_last(mut self) -> Self {
        self.last.boost_cut = SETTLE_CUT;
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

    /// A set takes its starting weights when first chosen or set; until then it reads as
    /// them and its memory is untouched zeros.
    #[test]
    fn a_set_starts_when_first_chosen() {
        let init = [100, -200];
        let mut m = Mixer::new(2, 4, 3, &init);
        assert_eq!(m.weights(), init.repeat(4));
        assert!(m.weights.iter().all(|&w| w == 0));
        m.mix(&[512, 512], 2);
        m.update(&[512, 512], 1);
        m.set_mut(0)[1] = 7;
        let w = m.weights();
        assert_eq!(w[..2], [100, 7]);
        assert!(w[4..6] != init && w[4..6].iter().all(|&x| x > -200));
        assert_eq!((&w[2..4], &w[6..]), (&init[..], &init[..]));
        assert_eq!(m.weights[2..4], [0, 0], "set 1 untouched");
        assert_eq!(m.ready, [true, false, true, false]);
    }

    /// With young sets, a set seen for the first time learns fast even after others have had
    /// many updates (a global decay has ended by then), and each set's boost ends at 1.
    #[test]
    fn a_young_set_learns_fast_whenever_it_first_comes() {
        let run = |young: bool| {
            let m = Mixer2::new(2, &[2], 3, &[0, 0]);
            let mut m = if young {
                m.with_young_sets()
            } else {
                m.with_decay()
            };
            let x = [256, stretch(3600)];
            // Set 0 learns for long; then set 1 comes for the first time.
            for _ in 0..100_000 {
                m.mix(&x, &[0], 0);
                m.update(&x, 1);
            }
            let mut cost = 0.0;
            for _ in 0..300 {
                let p = m.mix(&x, &[1], 0) as f64 / 4096.0;
                cost -= p.log2();
                m.update(&x, 1);
            }
            (cost, m)
        };
        let (decaying, _) = run(false);
        let (young, m) = run(true);
        assert!(young < 0.8 * decaying, "{young} vs {decaying}");
        assert_eq!(m.first()[0].updates.as_ref().unwrap()[..2], [100_000, 300]);
        assert_eq!(young_boost(0), 256 * (1 + YOUNG_BOOST as i32));
        assert_eq!(young_boost(YOUNG_HALF), 256 + 128 * YOUNG_BOOST as i32);
        assert_eq!(young_boost(u32::MAX), 256);
    }

    /// With a settled last layer (`mix:settle`), the last layer's every step is five eighths
    /// of the rate smaller: three eighths of the plain step once its set is old, most of it
    /// while young. The first layer learns as without it.
    #[test]
    fn a_settled_last_layer_steps_three_eighths_of_the_rate_once_old() {
        let step = |settled: bool, age: u32| {
            let m = Mixer2::new(2, &[1, 1], 64, &[1 << 14, 1 << 14]).with_young_sets();
            let mut m = if settled { m.with_settled_last() } else { m };
            for mixer in m.first.iter_mut().chain([&mut m.last]) {
                mixer.updates.as_mut().unwrap().fill(age);
            }
            let x = [stretch(3000), stretch(1500)];
            // The first mix readies the sets (their starting weights), the second is stepped.
            m.mix(&x, &[0, 0], 0);
            let before = m.last.weights[..2].to_vec();
            m.mix(&x, &[0, 0], 0);
            m.update(&x, 0);
            // The last layer's set 0: one weight per first-layer mixer.
            let delta: Vec<i64> = (m.last.weights[..2].iter().zip(&before))
                .map(|(&after, &before)| (after - before) as i64)
                .collect();
            (delta, m.first[0].weights.clone())
        };
        for (age, boost) in [(u32::MAX, 256), (0, young_boost(0))] {
            let ((plain, first_plain), (settled, first_settled)) =
                (step(false, age), step(true, age));
            assert_eq!(first_plain, first_settled);
            for (&p, &s) in plain.iter().zip(&settled) {
                assert!(p.abs() > 100, "{p}");
                let expected = p * (boost - SETTLE_CUT) as i64 / boost as i64;
                assert!(
                    (s - expected).abs() <= 2,
                    "age {age}: {s} against {expected} ({p})"
                );
            }
        }
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
