//! The SSE stage after the mixer (`mix:sse=1`): two adaptive probability maps
//! ([`super::apm`]) refine the mixed probability, one by the bits of the byte so far (order 0),
//! one by those and the last byte (order 1); the output is `(p + o0 + 2·o1) / 4`.
//!
//! Measured and left out: a third map by the match state (length bucket and expected bit) and
//! a fourth by the last two bytes, hashed; averaged in, they cost text more than they saved
//! on binaries (README, "The mixing stage").

use super::apm::Apm;

pub struct Sse {
    order0: Apm,
    order1: Apm,
}

impl Sse {
    pub fn new() -> Self {
        Sse {
            order0: Apm::new(256, 7),
            order1: Apm::new(1 << 16, 7),
        }
    }

    /// Bytes of memory the maps take.
    pub fn bytes() -> usize {
        Apm::bytes(256) + Apm::bytes(1 << 16)
    }

    /// The refined 12-bit probability of the mixer's `p`, given the bits of the byte so far
    /// after a leading 1 (`c0`) and the last byte (`c1`).
    pub fn refine(&mut self, p: i32, c0: u32, c1: u32) -> i32 {
        let c0 = c0 as usize;
        let r0 = self.order0.refine(p, c0);
        let r1 = self.order1.refine(p, ((c1 as usize) << 8) | c0);
        (p + r0 + 2 * r1 + 2) >> 2
    }

    /// Moves both maps' points toward the coded bit.
    pub fn update(&mut self, bit: u32) {
        self.order0.update(bit);
        self.order1.update(bit);
    }
}

impl Default for Sse {
    fn default() -> Self {
        Self::new()
    }
}
