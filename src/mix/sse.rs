//! The SSE stage after the mixer: adaptive probability maps ([`super::apm`]) that refine the
//! mixed probability given small contexts, averaged with it.
//!
//! - `sse=1`: order 0 (the bits of the byte so far) and order 1 (with the last byte), averaged
//!   as `(p + o0 + 2·o1) / 4`, as files written before `sse2` existed use;
//! - `sse2=1` adds a map by the match state (no match, or the match length bucket and the bit it
//!   predicts: a long match that has been right is trusted more than the mixer alone learns) and
//!   one by the last two bytes, hashed; all maps are then averaged.

use super::apm::Apm;
use super::counters::{hash, with_partial};
use super::spec::{MATCH_APM_CONTEXTS, ORDER2_APM_BITS};

/// What the maps are indexed by, for one bit.
pub struct SseContext {
    /// The bits of the byte so far, after a leading 1.
    pub c0: u32,
    /// The last two bytes, newest in the low byte.
    pub c2: u32,
    /// 0 without a match, else 1 + length bucket × 2 + expected bit.
    pub match_state: usize,
}

pub struct Sse {
    order0: Option<Apm>,
    order1: Option<Apm>,
    by_match: Option<Apm>,
    order2: Option<Apm>,
}

impl Sse {
    pub fn new(sse: bool, sse2: bool) -> Self {
        Sse {
            order0: sse.then(|| Apm::new(256, 7)),
            order1: sse.then(|| Apm::new(1 << 16, 7)),
            by_match: sse2.then(|| Apm::new(MATCH_APM_CONTEXTS, 7)),
            order2: sse2.then(|| Apm::new(1 << ORDER2_APM_BITS, 7)),
        }
    }

    /// The refined 12-bit probability of the mixer's `p`.
    pub fn refine(&mut self, p: i32, cx: &SseContext) -> i32 {
        let c0 = cx.c0 as usize;
        let c1 = (cx.c2 & 0xff) as usize;
        // Weights in eighths: the mixer, order 0, order 1, by match, order 2.
        let mut sum = 0;
        let mut weight = 0;
        let mut add = |r: i32, w: i32| {
            sum += r * w;
            weight += w;
        };
        add(p, 2);
        if let (Some(a0), Some(a1)) = (&mut self.order0, &mut self.order1) {
            add(a0.refine(p, c0), 2);
            add(a1.refine(p, (c1 << 8) | c0), 4);
        }
        if let (Some(am), Some(a2)) = (&mut self.by_match, &mut self.order2) {
            let slot = with_partial(hash(cx.c2 as u64, 0x55e2), cx.c0) >> (32 - ORDER2_APM_BITS);
            add(am.refine(p, cx.match_state), 4);
            add(a2.refine(p, slot as usize), 4);
        }
        // With the first two maps only, this is exactly `(p + o0 + 2·o1 + 2) >> 2`.
        (sum + weight / 2) / weight
    }

    /// Moves every map's point toward the coded bit.
    pub fn update(&mut self, bit: u32) {
        for a in [
            &mut self.order0,
            &mut self.order1,
            &mut self.by_match,
            &mut self.order2,
        ]
        .into_iter()
        .flatten()
        {
            a.update(bit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long match whose predicted bit always comes: the map by match state learns to trust it
    /// beyond what the mixer says, and the order-0/1 maps alone (which mix matched and unmatched
    /// bits) learn less.
    #[test]
    fn the_match_state_map_learns_that_long_matches_are_right() {
        let mut plain = Sse::new(true, false);
        let mut extended = Sse::new(true, true);
        let mut x = 1u32;
        let mut last = [0; 2];
        for _ in 0..3000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let matched = (x >> 16) & 1 == 1;
            // A long match predicting 1 is right; without a match the bit is a coin flip.
            let bit = if matched { 1 } else { (x >> 20) & 1 };
            let cx = SseContext {
                c0: 1,
                c2: 0x2020,
                match_state: if matched { 1 + 20 * 2 + 1 } else { 0 },
            };
            for (k, s) in [&mut plain, &mut extended].into_iter().enumerate() {
                let p = s.refine(3000, &cx);
                if matched {
                    last[k] = p;
                }
                s.update(bit);
            }
        }
        assert!(last[1] > last[0] + 150, "{last:?}");
        assert!(last[1] > 3600, "{last:?}");
    }

    #[test]
    fn without_the_new_maps_the_average_is_the_classic_one() {
        let mut s = Sse::new(true, false);
        let mut a0 = Apm::new(256, 7);
        let mut a1 = Apm::new(1 << 16, 7);
        for (i, p) in [100, 900, 2048, 3500, 4000].into_iter().enumerate() {
            let cx = SseContext {
                c0: 1 + i as u32,
                c2: 0x41,
                match_state: 0,
            };
            let classic = (p
                + a0.refine(p, cx.c0 as usize)
                + 2 * a1.refine(p, 0x41 << 8 | cx.c0 as usize)
                + 2)
                >> 2;
            assert_eq!(s.refine(p, &cx), classic);
            s.update(1);
            a0.update(1);
            a1.update(1);
        }
    }
}
