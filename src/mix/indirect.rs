//! Indirect contexts (`ext` 32, `ind`): what followed a context the last times it came round,
//! used as a context itself. Where the orders ask "what comes after these bytes", an indirect
//! context asks "what comes after the bytes that came after them last time": in text it finds
//! a word's usual continuations after a short context, in binaries a field's usual successor.
//!
//! Three histories, each the last two bytes seen after its context: after the last byte, after
//! the last two bytes, and after the last three (hashed). Four counter tables read them.

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;

/// Log2 of the entries of the history after the last three bytes (under `mix:fit`, at most
/// `fit`; under `mix:cap`, [`Part::After3`]).
const AFTER3_BITS: u32 = 20;

fn after3_bits(spec: &MixSpec) -> u32 {
    spec.part_bits(Part::After3, AFTER3_BITS, 0)
}

/// The histories of what followed each context (see the module's docs).
pub struct Indirect {
    /// By the last byte: the two bytes that followed it last (newest low).
    after1: Vec<u16>,
    /// By the last two bytes.
    after2: Vec<u16>,
    /// By a hash of the last three bytes.
    after3: Vec<u16>,
    /// Log2 of `after3`'s entries.
    after3_bits: u32,
}

impl Indirect {
    fn slot3(&self, history: u64) -> usize {
        (hash(history & 0xff_ffff, 0x1d3) >> (32 - self.after3_bits)) as usize
    }
}

impl Family for Indirect {
    fn wanted(spec: &MixSpec) -> bool {
        spec.indirect
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Quarter, spec.quarter_table(), 0); 4]
    }

    fn bytes(spec: &MixSpec) -> usize {
        2 * ((1 << 8) + (1 << 16) + (1 << after3_bits(spec)))
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Indirect {
            after1: vec![0; 1 << 8],
            after2: vec![0; 1 << 16],
            after3: vec![0; 1 << after3_bits(spec)],
            after3_bits: after3_bits(spec),
        })
    }

    fn learn_byte(&mut self, s: &Shared, byte: u8) {
        let before = s.history >> 8;
        let push = |h: &mut u16| *h = *h << 8 | byte as u16;
        push(&mut self.after1[(before & 0xff) as usize]);
        push(&mut self.after2[(before & 0xffff) as usize]);
        let at = self.slot3(before);
        push(&mut self.after3[at]);
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let h = s.history;
        let a1 = self.after1[(h & 0xff) as usize] as u64;
        let a2 = self.after2[(h & 0xffff) as usize] as u64;
        let a3 = self.after3[self.slot3(h)] as u64;
        out[0] = hash(a1 << 8 | (h & 0xff), 0x1d0);
        out[1] = hash((a2 & 0xff) << 16 | (h & 0xffff), 0x1d1);
        out[2] = hash(a2 << 8 | (h & 0xff), 0x1d2);
        out[3] = hash(a3 << 16 | (h & 0xffff), 0x1d4);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Pairs of a key and its value, where each key's value switches between two of its own
    /// every few hundred pairs: the last values after a key say which one holds now, sooner than
    /// the key's counters forget the other.
    fn switching_pairs(pairs: usize) -> Vec<u8> {
        let mut next = lcg(7);
        let mut data = Vec::new();
        for i in 0..pairs {
            let key = next() as u8 & 15;
            let epoch = (i / 400) as u8 & 1;
            data.push(b'a' + key);
            data.push(b'0' + (key * 7 + epoch * 5) % 10 + epoch * 10);
        }
        data
    }

    #[test]
    fn indirect_contexts_follow_what_came_after_a_context_last_time() {
        let data = switching_pairs(3000);
        let (with, without) = with_and_without(&data, |m| m.indirect = true);
        // The keys are random (4 bits each, for any model); the values are what is judged.
        let keys = 4.0 * 3000.0;
        assert!(without > keys, "{without}");
        assert!(with - keys < 0.8 * (without - keys), "{with} vs {without}");
    }
}
