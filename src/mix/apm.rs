//! Adaptive probability maps (SSE): refine a probability given a small context. Each context
//! has 33 points over the stretch domain; the output interpolates the two points around the
//! input, and the nearer point moves toward each coded bit. A map starts as the identity.

use super::logistic::{squash, stretch};

pub struct Apm {
    /// 16-bit probabilities, 33 per context.
    table: Vec<u16>,
    /// The point to update after the bit.
    index: usize,
    /// Adaptation shift: each update moves a point by 1/2^rate of its error.
    rate: u32,
}

impl Apm {
    pub fn new(contexts: usize, rate: u32) -> Self {
        let mut table = Vec::with_capacity(contexts * 33);
        for _ in 0..contexts {
            for j in 0..33 {
                table.push((squash((j - 16) * 128) * 16) as u16);
            }
        }
        Apm {
            table,
            index: 0,
            rate,
        }
    }

    pub fn bytes(contexts: usize) -> usize {
        2 * 33 * contexts
    }

    /// The refined 12-bit probability of `p` in context `cx`.
    pub fn refine(&mut self, p: i32, cx: usize) -> i32 {
        let pos = (stretch(p) + 2048) * 32; // 0..=131040
        let lo = (pos >> 12) as usize; // 0..=31
        let w = pos & 4095;
        let base = cx * 33 + lo;
        self.index = base + (w >> 11) as usize;
        let a = self.table[base] as i32;
        let b = self.table[base + 1] as i32;
        ((a * (4096 - w) + b * w) >> 16).clamp(1, 4095)
    }

    pub fn update(&mut self, bit: u32) {
        let target = if bit == 1 { 65535 } else { 0 };
        let t = self.table[self.index] as i32;
        self.table[self.index] = (t + ((target - t) >> self.rate)) as u16;
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
}
