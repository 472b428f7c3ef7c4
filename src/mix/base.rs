//! The stage's own inputs and selectors, as components: [`Base`] — the bias, the network, and
//! the four selectors every stage has had since the first format — and [`LastByte`], the
//! selector of `mix:select`, and the selectors by the bytes before ([`SecondByte`],
//! [`LastBytePartial`]).

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::logistic::ST_MAX;
use super::spec::MixSpec;

/// Bias input of the mixer (a constant, in stretch units).
const BIAS: i32 = 256;

/// The bias and the network's prediction as the first two inputs (starting at weights 0 and
/// 1: the network alone), and four selectors: the bits of the byte so far; the match state
/// ([`Push::match_state`]; 0 without a match model); how many context tables have seen their
/// context, up to the orders + 1, with the bit position; and the network's confidence (its
/// stretched prediction in 16 buckets). Every stage has these four, with or without a match
/// model or tables, so it comes first in the list.
pub struct Base {
    orders: usize,
}

/// Weight sets of the match-state selector: none, or (length bucket up to 15, expected bit).
const MATCH_SETS: usize = 33;

impl Component for Base {
    fn wanted(_spec: &MixSpec) -> bool {
        true
    }

    fn declare(spec: &MixSpec, d: &mut Declare) {
        d.input_weighted(0);
        d.input_weighted(1 << 16); // the network alone, to begin with
        d.selector(256);
        d.selector(MATCH_SETS);
        d.selector((spec.orders as usize + 2) * 8);
        d.selector(16);
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Base {
            orders: spec.orders as usize,
        })
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        m.add(BIAS);
        m.add(s.net);
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        let match_set = match m.match_state {
            0 => 0,
            s => 1 + (((s - 1) >> 1).min(15) << 1 | ((s - 1) & 1)),
        };
        let seen = m.seen.min(self.orders + 1);
        let net_bucket = ((s.net + ST_MAX + 1) >> 8).clamp(0, 15) as usize;
        m.select(s.c0 as usize);
        m.select(match_set);
        m.select(seen * 8 + s.bit_index as usize);
        m.select(net_bucket);
    }
}

/// A selector by the last byte and the bit position (`mix:select`): how much to trust each
/// input depends on what came just before, e.g. in a word or after it.
pub struct LastByte;

impl Component for LastByte {
    fn wanted(spec: &MixSpec) -> bool {
        spec.select
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.selector(256 * 8);
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(LastByte)
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        m.select(s.c1() as usize * 8 + s.bit_index as usize);
    }
}

/// A selector by the byte two back and the bit position (`ext` 128): with [`LastByte`], the
/// weights follow the last two bytes (in binaries a field's position, in text the shape of
/// the last word's end).
pub struct SecondByte;

impl Component for SecondByte {
    fn wanted(spec: &MixSpec) -> bool {
        spec.second
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.selector(256 * 8);
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(SecondByte)
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        m.select(((s.history >> 8) & 0xff) as usize * 8 + s.bit_index as usize);
    }
}

/// A selector by the last byte and the bits of this byte so far (`mix:partial`): 65,536
/// weight sets, one per (last byte, node of the byte's tree), so the weights follow the
/// order-1 context to the bit, where [`LastByte`] has its bit position only. A megabyte of
/// text touches about 12,000 of them; the memory estimate counts them all.
pub struct LastBytePartial;

impl Component for LastBytePartial {
    fn wanted(spec: &MixSpec) -> bool {
        spec.partial
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.selector(256 * 256);
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(LastBytePartial)
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        m.select(s.c1() as usize * 256 + s.c0 as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Records of 4 bytes: a random tag byte that says which of two columns is predictable, a
    /// random byte, and two bytes of which only the one the tag names is fixed. What to trust
    /// for the last two bytes depends on the byte two back, through the weights only.
    fn tagged(records: usize) -> Vec<u8> {
        let mut bits = lcg(13);
        let mut next = move || bits() as u8;
        let mut data = Vec::new();
        for _ in 0..records {
            let tag = next() & 1;
            let (a, b) = match tag {
                0 => (0x55, next()),
                _ => (next(), 0xaa),
            };
            data.extend_from_slice(&[tag, next(), a, b]);
        }
        data
    }

    #[test]
    fn the_second_byte_selector_chooses_weights_by_the_byte_two_back() {
        let data = tagged(3000);
        let (with, without) = with_and_without(&data, |m| m.second = true);
        assert!(with < 0.97 * without, "{with} vs {without}");
    }
}
