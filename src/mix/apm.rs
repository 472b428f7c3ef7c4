//! Adaptive probability maps (SSE): refine a probability given a small context. Each context
//! has 33 points over the stretch domain; the output interpolates the two points around the
//! input, and the nearer point moves toward each coded bit. A map starts as the identity.
//!
//! Each point is stored as its difference from the identity's point (modulo 2^16), so a map
//! starts as zeros: the system hands out zeroed pages only when they are first written, and
//! a short input pays only for the contexts it meets (the largest maps have 2^16 and 2^18
//! contexts, 4 and 17 MB). The values, and so every output, are the same as if each context
//! had been filled with the identity.

use super::counters::prefetch;
use super::logistic::{squash, stretch};

pub struct Apm {
    /// 16-bit probabilities, 33 per context, each as its difference from `row` (wrapping).
    table: Vec<u16>,
    /// The points every context starts with: the identity.
    row: [u16; 33],
    /// The point to update after the bit, and its place in the row.
    index: usize,
    index_j: usize,
    /// Adaptation shift: each update moves a point by 1/2^rate of its error.
    rate: u32,
    /// The lower point of the last input, its place in the row, and its interpolation weight
    /// (0..4096) toward the upper one, for [`Apm::update_both`].
    base: usize,
    lo: usize,
    weight: i32,
}

impl Apm {
    pub fn new(contexts: usize, rate: u32) -> Self {
        Apm {
            table: vec![0; contexts * 33],
            row: std::array::from_fn(|j| (squash((j as i32 - 16) * 128) * 16) as u16),
            index: 0,
            index_j: 0,
            rate,
            base: 0,
            lo: 0,
            weight: 0,
        }
    }

    /// The point at `i`, the `j`th of its context.
    #[inline]
    fn point(&self, i: usize, j: usize) -> i32 {
        self.table[i].wrapping_add(self.row[j]) as i32
    }

    /// Sets the point at `i`, the `j`th of its context, to `value` (0..=65535).
    #[inline]
    fn set_point(&mut self, i: usize, j: usize, value: i32) {
        self.table[i] = (value as u16).wrapping_sub(self.row[j]);
    }

    pub fn bytes(contexts: usize) -> usize {
        2 * 33 * contexts
    }

    /// Starts loading the points of context `cx` (66 bytes, two cache lines at most) before
    /// [`Apm::refine`] reads them; only a hint (see [`prefetch`]).
    pub fn prefetch(&self, cx: usize) {
        let row = cx * 33;
        prefetch(&self.table[row]);
        prefetch(&self.table[row + 32]);
    }

    /// The refined 12-bit probability of `p` in context `cx`.
    pub fn refine(&mut self, p: i32, cx: usize) -> i32 {
        self.refine_to(p, cx, 12)
    }

    /// The refined probability of `p` (12-bit) in context `cx`, in `bits` bits (12 to 16):
    /// the points keep 16, and at 12 the interpolation is rounded down, by up to 1/4096.
    pub fn refine_to(&mut self, p: i32, cx: usize, bits: u32) -> i32 {
        let pos = (stretch(p) + 2048) * 32; // 0..=131040
        let lo = (pos >> 12) as usize; // 0..=31
        let w = pos & 4095;
        let base = cx * 33 + lo;
        let up = (w >> 11) as usize;
        self.index = base + up;
        self.index_j = lo + up;
        self.base = base;
        self.lo = lo;
        self.weight = w;
        let a = self.point(base, lo);
        let b = self.point(base + 1, lo + 1);
        // At most 65535 · 4096 < 2^31.
        ((a * (4096 - w) + b * w) >> (28 - bits)).clamp(1, (1 << bits) - 1)
    }

    /// Moves both points around the last input toward the coded bit, each by its share of the
    /// interpolation (the nearer point moves more), at `1/2^rate` of its error.
    pub fn update_both(&mut self, bit: u32) {
        let target = if bit == 1 { 65535 } else { 0 };
        let (base, lo, w) = (self.base, self.lo, self.weight);
        for (i, j, share) in [(base, lo, 4096 - w), (base + 1, lo + 1, w)] {
            let t = self.point(i, j);
            let step = ((target - t) as i64 * share as i64) >> (12 + self.rate);
            self.set_point(i, j, t + step as i32);
        }
    }

    pub fn update(&mut self, bit: u32) {
        let target = if bit == 1 { 65535 } else { 0 };
        let (i, j) = (self.index, self.index_j);
        let t = self.point(i, j);
        self.set_point(i, j, t + ((target - t) >> self.rate));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apm_starts_near_the_identity_and_corrects_a_biased_input() {
        let mut a = Apm::new(2, 6);
        for p in [100, 1000, 2048, 3000, 4000] {
            let r = a.refine(p, 1);
            assert!((r - p).abs() <= p / 16 + 8, "{p} -> {r}");
        }
        // The input says 0.5, but context 0 sees 1 nine times in ten.
        for t in 0..2000 {
            a.refine(2048, 0);
            a.update((t % 10 != 0) as u32);
        }
        let r = a.refine(2048, 0);
        assert!((3500..3900).contains(&r), "{r}");
        assert!(
            (a.refine(2048, 1) - 2048).abs() < 64,
            "context 1 is untouched"
        );
    }

    /// At 16 bits a map gives what it gives at 12 with four more bits (the same points and
    /// interpolation, shifted less), and those bits are not all zero.
    #[test]
    fn sixteen_bits_are_twelve_with_four_more() {
        let mut a = Apm::new(4, 5);
        let mut low_bits = [0u32; 16];
        for t in 0..3000u32 {
            let (p, cx) = ((t * 1237 % 4095 + 1) as i32, (t % 4) as usize);
            let (coarse, fine) = (a.refine_to(p, cx, 12), a.refine_to(p, cx, 16));
            assert_eq!(coarse, a.refine(p, cx));
            assert_eq!((fine >> 4).clamp(1, 4095), coarse, "{p} in {cx}");
            low_bits[(fine & 15) as usize] += 1;
            a.update_both((cx != 0 && t % 7 != 0) as u32 | (cx == 3) as u32);
        }
        assert!(low_bits.iter().all(|&n| n > 100), "{low_bits:?}");
    }

    #[test]
    fn interpolated_updates_move_both_points_toward_the_bits() {
        let mut a = Apm::new(1, 5);
        // An input between two points: both learn, the nearer one more.
        let p = crate::mix::logistic::squash(-1000);
        let before = a.refine(p, 0);
        let points = |a: &Apm| (a.point(a.base, a.lo), a.point(a.base + 1, a.lo + 1));
        let (lo, hi) = points(&a);
        for _ in 0..300 {
            a.refine(p, 0);
            a.update_both(1);
        }
        assert!(points(&a).0 > lo && points(&a).1 > hi);
        let after = a.refine(p, 0);
        assert!(after > before + 1500, "{before} -> {after}");
        for _ in 0..600 {
            a.refine(p, 0);
            a.update_both(0);
        }
        assert!(a.refine(p, 0) < 300, "{}", a.refine(p, 0));
    }
}
