//! Counters by the byte the match model expects (with `mix:follow=1`), for binary data: how
//! often its guess is right, and which byte comes instead, depends on the byte and the context.
//! In a table of records a field that changes row by row keeps missing, the fields around it
//! hold; the match model's confidence by length alone cannot tell them apart. Text sits them
//! out (they cost a little on text, measured on prose, source and markup), as the second sparse
//! contexts do ([`BinaryClock::near_binary`]).

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::{BinaryClock, Family};

/// Log2 counters of each table at most: the contexts are few (measured against 2^30, the
/// quarter tables' size, on 21 binaries: 0.01% apart).
const EXPECTED_BITS: u32 = 15;

pub struct Expected {
    clock: BinaryClock,
}

impl Family for Expected {
    fn wanted(spec: &MixSpec) -> bool {
        spec.follow && spec.matcher > 0
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Expected, EXPECTED_BITS, 5); 2]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Expected {
            clock: BinaryClock::default(),
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.clock.learn(byte);
    }

    fn active(&self) -> bool {
        self.clock.near_binary()
    }

    /// The expected byte (0x100 + byte; 0 for none) with the match length in four classes,
    /// and with the last byte.
    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let length = match s.match_len {
            0 => 0,
            1..=15 => 1,
            16..=31 => 2,
            _ => 3,
        };
        let expected = s.match_byte.map_or(0, |b| 0x100 | b as u64);
        out[0] = hash(expected << 2 | length, 0x3b0);
        out[1] = hash(expected << 8 | (s.history & 0xff), 0x3b1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{cost, plain};
    use super::*;

    /// Binary records with a field that counts up row by row: the match model expects the
    /// row above's value, and the tables learn which byte follows that expectation.
    fn counting_records(rows: u32) -> Vec<u8> {
        let mut data = Vec::new();
        for row in 0..rows {
            data.extend_from_slice(&[0x00, 0x01, 0xfe, (row * 3) as u8, 0x7f, 0x00, 0x10, 0x20]);
        }
        data
    }

    #[test]
    fn the_expected_byte_pays_on_records_that_change() {
        let data = counting_records(600);
        let with_match = |follow| MixSpec {
            matcher: 16,
            follow,
            ..plain()
        };
        let (without, with) = (
            cost(&with_match(false), &data),
            cost(&with_match(true), &data),
        );
        assert!(with < 0.9 * without, "{with} {without}");
        // Text sits the tables out.
        let text = b"a line of text that comes back, and back again. ".repeat(40);
        let mut family = Expected::new(&with_match(true)).unwrap();
        let s = Shared::new();
        for &b in &text {
            family.learn_byte(&s, b);
            assert!(!family.active());
        }
        family.learn_byte(&s, 0x01);
        assert!(family.active());
    }
}
