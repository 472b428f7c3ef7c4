//! Context families of the last bytes ([`super::tables::Family`]): the orders (the last 0..=N
//! bytes, `mix:orders`) and the sparse contexts (`mix:sparse`, for binary data).

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part, SMALL_TABLE_BITS, SPARSE};
use super::tables::{BinaryClock, Family};

/// Orders 0 to N: the last `order` bytes (`mix:orders=N`; none for 0). Orders 0 and 1 fit
/// tables of [`SMALL_TABLE_BITS`].
pub struct Orders {
    orders: u32,
}

impl Family for Orders {
    fn wanted(spec: &MixSpec) -> bool {
        spec.orders > 0
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        (0..=spec.orders)
            .map(|order| match order {
                0 | 1 => SMALL_TABLE_BITS,
                2 => spec.part_bits(Part::Order2, spec.table, 0),
                _ => spec.part_bits(Part::Table, spec.table, 0),
            })
            .collect()
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Orders {
            orders: spec.orders,
        })
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        for order in 0..=self.orders {
            let mask = if order >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * order)) - 1
            };
            out[order as usize] = hash(s.history & mask, order + 1);
        }
    }
}

/// The sparse contexts ([`SPARSE`]): bytes 2 and 4 back alone, bytes 2–3, and bytes 1 and 3.
pub struct Sparse;

impl Family for Sparse {
    fn wanted(spec: &MixSpec) -> bool {
        spec.sparse
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        (0..SPARSE.len())
            .map(|i| match i < 2 {
                true => SMALL_TABLE_BITS,
                false => spec.part_bits(Part::Sparse, spec.table, 0),
            })
            .collect()
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Sparse)
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        for (i, mask) in SPARSE.iter().enumerate() {
            out[i] = hash(s.history & mask, 0x100 + i as u32);
        }
    }
}

/// More sparse and aligned contexts for binaries (`ext` 1024): single bytes and pairs further
/// back, high nibbles, and contexts by the position in a 4-byte word with the word before.
pub struct Sparse2 {
    /// Bytes seen (for the position in the 4-byte word) and the last binary byte.
    clock: BinaryClock,
}

const SPARSE2: [u64; 8] = [
    0xff_0000,
    0xf0f0,
    0xffff_0000,
    0xff00_00ff,
    0xffff_ffff_0000_0000,
    0xff00_0000_ff00_0000,
    0xffff_0000_ffff,
    0xff00_ff00,
];

impl Family for Sparse2 {
    fn wanted(spec: &MixSpec) -> bool {
        spec.sparse2
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Sparse2, spec.quarter_table(), 0); SPARSE2.len() + 3]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Sparse2 {
            clock: BinaryClock::default(),
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.clock.learn(byte);
    }

    fn active(&self) -> bool {
        self.clock.near_binary()
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        for (i, mask) in SPARSE2.iter().enumerate() {
            out[i] = hash(s.history & mask, 0x300 + i as u32);
        }
        let k = self.clock.pos & 3;
        let so_far = s.history & ((1u64 << (8 * k)) - 1);
        let word_before = (s.history >> (8 * k)) & 0xffff_ffff;
        let n = SPARSE2.len();
        out[n] = hash(k << 8 | (s.history & 0xff), 0x310);
        out[n + 1] = hash(k << 56 | so_far << 24 | word_before >> 24, 0x311);
        out[n + 2] = hash(k << 62 | so_far << 32 | word_before, 0x312);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Binary records of 4 bytes of 8 values each, whose last byte is the byte before it xor
    /// the byte four back: a context of bytes 1 and 4 together, which the first sparse
    /// contexts do not have.
    fn xor_records(records: usize) -> Vec<u8> {
        let mut next = lcg(21);
        let mut data: Vec<u8> = vec![0x80, 1, 2, 3];
        for _ in 0..records {
            let i = data.len();
            let mut byte = || 0x80 | (next() % 8) as u8;
            let (a, b, c) = (byte(), byte(), byte());
            data.extend_from_slice(&[a, b, c, 0x80 | (c ^ data[i - 1])]);
        }
        data
    }

    #[test]
    fn the_second_sparse_contexts_find_bytes_one_and_four_back() {
        let data = xor_records(6000);
        let (with, without) = with_and_without(&data, |m| m.sparse2 = true);
        // (The first sparse contexts gain as much on bytes one and three back.)
        assert!(with < 0.96 * without, "{with} vs {without}");
    }

    #[test]
    fn text_sits_the_second_sparse_contexts_out() {
        let mut next = lcg(5);
        let text: Vec<u8> = (0..4000)
            .map(|_| match next() % 7 {
                0 => b' ',
                k => b'a' + (next() % 4 * 6 + k) as u8,
            })
            .collect();
        let (with, without) = with_and_without(&text, |m| m.sparse2 = true);
        assert_eq!(with, without, "bytes of text push nothing but zeros");
    }
}
