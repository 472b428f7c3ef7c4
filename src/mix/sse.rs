//! The SSE stage after the mixer (`mix:sse=1`): two adaptive probability maps
//! ([`super::apm`]) refine the mixed probability, one by the bits of the byte so far (order 0),
//! one by those and the last byte (order 1); the output is `(p + o0 + 2·o1) / 4`.
//!
//! With `mix:fin=1`, two more maps refine the same probability, one by the last two bytes
//! (hashed) and one by the match state (length bucket and expected bit), both with the bits
//! so far; their points learn by interpolation ([`Apm::update_both`]), and the output is a
//! fixed average of all five
//! (`FIN_WEIGHTS`).
//!
//! The output has 12 bits, or with `mix:fine` 16: the maps' outputs keep the 16 bits of their
//! points and `p` is scaled to them ([`Sse::refine`]).

use super::apm::Apm;
use super::spec::{MixSpec, Part};

/// Contexts of the order-2 map, log2: a hash of the last two bytes with the bits so far;
/// under `mix:fit`, at most `fit − 4` (1/16 of the largest table's counters, measured
/// against 1/8 and 1/32 on small inputs, docs/experiments.md).
const ORDER2_BITS: u32 = 18;

/// Log2 contexts of the maps by the last byte and the bits so far (the order-1 map here, and
/// the network's map by the last byte, src/mix/netmaps.rs): 16, one per pair; under
/// `mix:fit`, at most `fit − 4` (under `mix:cap`, `cap − 6`), the last byte then hashed to fewer values (on binaries every
/// byte value comes round, and the two maps alone would fill 8.6 MB).
pub(super) fn order1_bits(spec: &MixSpec) -> u32 {
    spec.part_bits(Part::Map1, 16, 4)
}

/// The context of the last byte `c1` and the bits so far `c0` in a map of `2^bits` contexts
/// ([`order1_bits`]).
#[inline]
pub(super) fn order1_context(c1: u32, c0: usize, bits: u32) -> usize {
    match bits {
        16 => (c1 as usize) << 8 | c0,
        _ => ((c1.wrapping_mul(0x9E37_79B1) >> (32 - (bits - 8))) as usize) << 8 | c0,
    }
}

/// Log2 contexts of the order-2 map of a stage of `spec`.
fn order2_bits(spec: &MixSpec) -> u32 {
    spec.part_bits(Part::Map2, ORDER2_BITS, 4)
}
/// Match states: none, or (length bucket 0..31, expected bit).
const MATCH_STATES: usize = 65;
/// Adaptation shift of the two `fin` maps: faster than the first two (7), as their contexts
/// are many and each is seen less often (measured 5 against 6 and 7 on book1 and enwik6).
const FIN_RATE: u32 = 5;
/// Weights of the mixer's output and of the order-0, order-1, order-2 and match maps in the
/// `fin` average (measured against 2:2:4:4:4 and 1:1:2:2:2 on book1 and enwik6 prefixes).
const FIN_WEIGHTS: [i32; 5] = [1, 1, 4, 2, 1];

/// Bits of the refined probability with `mix:fine`.
pub const FINE_BITS: u32 = 16;

pub struct Sse {
    order0: Apm,
    order1: Apm,
    /// With `fin`: the maps by the last two bytes and by the match state.
    fin: Option<[Apm; 2]>,
    /// Log2 contexts of the order-1 and order-2 maps.
    order1_bits: u32,
    order2_bits: u32,
    /// Bits of the refined probability ([`Sse::precision`]).
    bits: u32,
}

/// What the maps read beside the probability: the bits of the byte so far after a leading 1
/// (`c0`), the last byte (`c1`), the last two bytes (`c2`, 16 bits) and the match state
/// (0 for none, else 1 + 2 × length bucket + expected bit).
pub struct SseContext {
    pub c0: u32,
    pub c1: u32,
    pub c2: u32,
    pub match_state: usize,
}

impl Sse {
    /// The maps of a stage of `spec` (`fin`, and `fit` or `cap` for the sizes of the maps by the last bytes).
    pub fn new(spec: &MixSpec) -> Self {
        let (order1_bits, order2_bits) = (order1_bits(spec), order2_bits(spec));
        Sse {
            order0: Apm::new(256, 7),
            order1: Apm::new(1 << order1_bits, 7),
            fin: spec.fin.then(|| {
                [
                    Apm::new(1 << order2_bits, FIN_RATE),
                    Apm::new(MATCH_STATES * 256, FIN_RATE),
                ]
            }),
            order1_bits,
            order2_bits,
            bits: match spec.fine {
                true => FINE_BITS,
                false => 12,
            },
        }
    }

    /// Bytes of memory the maps of a stage of `spec` take.
    pub fn bytes(spec: &MixSpec) -> usize {
        Apm::bytes(256)
            + Apm::bytes(1 << order1_bits(spec))
            + if spec.fin {
                Apm::bytes(1 << order2_bits(spec)) + Apm::bytes(MATCH_STATES * 256)
            } else {
                0
            }
    }

    /// Bits of the probability [`Sse::refine`] gives: 12, or with `mix:fine` 16.
    pub fn precision(&self) -> u32 {
        self.bits
    }

    /// The refined probability of the mixer's 12-bit `p`, in [`Sse::precision`] bits. With
    /// `fine` the maps' outputs keep the 16 bits of their points instead of rounding them
    /// down to 12, and the mixer's `p` is scaled to them. Rounding down costs most where the
    /// maps are all but sure of a 1 (a spreadsheet's empty cells, a listing's repeated
    /// columns): 4094.9/4096 coded as 4094/4096 pays for the lost fraction on every such bit.
    pub fn refine(&mut self, p: i32, cx: &SseContext) -> i32 {
        let bits = self.bits;
        let c0 = cx.c0 as usize;
        let r0 = self.order0.refine_to(p, c0, bits);
        let r1 = self
            .order1
            .refine_to(p, order1_context(cx.c1, c0, self.order1_bits), bits);
        let scaled = p << (bits - 12);
        let Some([order2, matched]) = &mut self.fin else {
            return (scaled + r0 + 2 * r1 + 2) >> 2;
        };
        let r2 = order2.refine_to(p, order2_context(cx.c2, c0, self.order2_bits), bits);
        let r3 = matched.refine_to(p, (cx.match_state << 8) | c0, bits);
        let [a, b, c, d, e] = FIN_WEIGHTS;
        let sum = a * scaled + b * r0 + c * r1 + d * r2 + e * r3;
        let total = a + b + c + d + e;
        (sum + total / 2) / total
    }

    /// Starts loading the points the large maps (by the last byte, and by the last two) will
    /// read for the bits `c0` after the last bytes `c1` and `c2` (see [`SseContext`]).
    pub fn prefetch(&self, c0: u32, c1: u32, c2: u32) {
        let c0 = c0 as usize;
        self.order1
            .prefetch(order1_context(c1, c0, self.order1_bits));
        if let Some([order2, _]) = &self.fin {
            order2.prefetch(order2_context(c2, c0, self.order2_bits));
        }
    }

    /// Moves the maps' points toward the coded bit.
    pub fn update(&mut self, bit: u32) {
        self.order0.update(bit);
        self.order1.update(bit);
        if let Some([order2, matched]) = &mut self.fin {
            order2.update_both(bit);
            matched.update_both(bit);
        }
    }
}

/// The order-2 map's context: the last two bytes hashed to `bits − 8` bits, with the bits so
/// far.
fn order2_context(c2: u32, c0: usize, bits: u32) -> usize {
    let h = (c2.wrapping_mul(0x9E37_79B1) >> (32 - (bits - 8))) as usize;
    (h << 8) | c0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_match_map_learns_that_a_long_match_is_sure() {
        // In 12 bits, as the margin below was set.
        let spec = |fin| MixSpec {
            fin,
            fine: false,
            ..MixSpec::DEFAULT
        };
        let mut plain = Sse::new(&spec(false));
        let mut fin = Sse::new(&spec(true));
        let cx = SseContext {
            c0: 5,
            c1: b'e' as u32,
            c2: 0x2065,
            match_state: 1 + 2 * 20 + 1,
        };
        // The mixer says 0.7, but in this match state the bit is 1 every time.
        for _ in 0..400 {
            plain.refine(2867, &cx);
            plain.update(1);
            fin.refine(2867, &cx);
            fin.update(1);
        }
        let (a, b) = (plain.refine(2867, &cx), fin.refine(2867, &cx));
        assert!(b > a + 150, "{a} {b}");
        assert_eq!(
            Sse::bytes(&spec(true)) - Sse::bytes(&spec(false)),
            Apm::bytes((1 << 18) + 65 * 256)
        );
        let fitted = MixSpec {
            fit: 18,
            ..spec(true)
        };
        assert_eq!(
            Sse::bytes(&fitted) - Sse::bytes(&spec(false)),
            Apm::bytes((1 << 14) + 65 * 256) - Apm::bytes((1 << 16) - (1 << 14))
        );
    }
}
