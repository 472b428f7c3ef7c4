//! The delta model (`mix:delta=1`), for tables of numbers: in records of a found length (the
//! record model's, [`RecordModel`]), a byte is often the byte one record above plus a small
//! step that differs from row to row (a counter, an offset into a string table, a line number,
//! an address, the next pixel of an image). Context tables by the byte above learn each value
//! apart and never see most of them twice. This model learns, per column, how far a byte lies
//! from a base — whatever the base's value — and predicts each bit from that distribution of
//! steps moved onto the current base: the share of the steps that agree with the bits so far
//! and give a 1 next.
//!
//! Each column has two distributions, after a byte equal to the one above it and after one
//! that moved ([`DISTRIBUTIONS`]). The bases ([`Deltas::start_byte`]): the byte above; its
//! extrapolation from the two records above; above + left − above-left (the plane through the
//! three neighbours); the byte two records above. Without a record length, or where the steps
//! from the byte above have lately been spread wide (text, whose record lengths are
//! spurious), the model says nothing ([`Deltas::speaks`]): its inputs are 0, and the mixer
//! gives them no weight to begin with.

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::logistic::stretch;
use super::record::RecordModel;
use super::spec::MixSpec;

/// Columns given distributions of their own (records up to this length); the columns of
/// longer records (image rows, long structs) share one, as their steps are alike.
const COLUMNS: usize = 32;
/// Each column has two distributions: after a byte equal to the one above it, and after one
/// that moved. In a number of several bytes one byte's step carries into the next (a low
/// byte that wraps moves the byte after it, in either byte order), and in an image the left
/// pixel's change foretells this one's.
const DISTRIBUTIONS: usize = 2 * (COLUMNS + 1);
/// What a coded byte adds to its step's count.
const STEP: u32 = 32;
/// The total count at which a distribution's counts are halved, so that it follows the data:
/// about the last 500 bytes of a column count (measured against 2^12 and 2^13: better on
/// kennedy.xls, worse on sum and on 8–100 KB binaries).
const LIMIT: u32 = 1 << 14;
/// Added to both halves of a bit's share: a step seen once is not taken for sure (measured
/// against 0, 4 and 32: 8 cost text least, 4–16 bytes a file with spurious record lengths).
const PRIOR: u32 = 8;
/// The running share of common steps ([`Deltas::speaks`]) moves by 1/64 of the difference a
/// byte, and the model speaks from 1/16 on (measured against 1/8, 1/12, 1/32 and 1/64: the
/// best over text, tables and binaries).
const COMMON_RATE: u32 = 6;
const COMMON_FLOOR: u32 = (1 << 16) / 16;
/// The bases a byte's step is measured from.
const BASES: usize = 4;

/// One base's distributions of steps, and the current byte's.
struct Steps {
    /// Per distribution (two a column, [`DISTRIBUTIONS`]): per step (byte − base, mod 256),
    /// its count; and their total.
    counts: Vec<[u16; 256]>,
    totals: Vec<u32>,
    /// The current byte's base, and (while the model speaks) the cumulative counts of the
    /// bytes it could be under its distribution: `cumulative[v]` sums the counts of the bytes
    /// below `v`.
    base: u8,
    cumulative: [u32; 257],
}

impl Steps {
    fn new() -> Self {
        Steps {
            counts: vec![[0; 256]; DISTRIBUTIONS],
            totals: vec![0; DISTRIBUTIONS],
            base: 0,
            cumulative: [0; 257],
        }
    }

    fn bytes() -> usize {
        DISTRIBUTIONS * (512 + 4) + 257 * 4
    }

    /// Moves `column`'s distribution onto the current base, for [`Steps::input`].
    fn spread(&mut self, column: usize) {
        let counts = &self.counts[column];
        let mut sum = 0u32;
        for v in 0..=255u8 {
            self.cumulative[v as usize] = sum;
            sum += counts[v.wrapping_sub(self.base) as usize] as u32;
        }
        self.cumulative[256] = sum;
    }

    /// Counts the step of the coded `byte` in `column`'s distribution; whether the step had
    /// at least an eighth of the counts before.
    fn learn(&mut self, column: usize, byte: u8) -> bool {
        let counts = &mut self.counts[column];
        let step = byte.wrapping_sub(self.base) as usize;
        let common = counts[step] as u32 * 8 >= self.totals[column].max(1);
        counts[step] += STEP as u16;
        self.totals[column] += STEP;
        if self.totals[column] > LIMIT {
            let mut total = 0;
            for count in counts.iter_mut() {
                *count >>= 1;
                total += *count as u32;
            }
            self.totals[column] = total;
        }
        common
    }

    /// The stretched probability that the next bit is 1: the share of the counted bytes that
    /// agree with the bits so far and have a 1 next.
    fn input(&self, s: &Shared) -> i32 {
        let (n0, n1) = s.halves(&self.cumulative);
        let (n0, n1) = (n0 + PRIOR as u64, n1 + PRIOR as u64);
        let p = ((n1 << 12) + (n0 + n1) / 2) / (n0 + n1);
        stretch((p as i32).clamp(1, 4095))
    }
}

pub struct Deltas {
    /// Finds the record length (a detector of its own: the record tables' is inside them).
    record: RecordModel,
    steps: [Steps; BASES],
    /// The current byte's distribution: twice its column ([`COLUMNS`] for the shared one),
    /// plus 1 after a byte that moved from the one above it; none without a record length.
    column: Option<usize>,
    /// How often of late the step from the byte above was a common one (an eighth of its
    /// column's counts or more), in 1/65536: [`Deltas::speaks`].
    common: u32,
}

impl Deltas {
    /// Whether the model says anything for the next byte: with a record length, where the
    /// steps from the byte above have lately been common ones. In text the record lengths
    /// found are spurious (3–6 bytes, nearly always one) and a step from the byte above is
    /// common for 0–1% of the bytes; in tables and binaries, for 30–80%. Silent in text, the
    /// model costs it nothing (it cost 0.06–0.1% on book1 and enwik6 speaking everywhere).
    fn speaks(&self) -> bool {
        self.column.is_some() && self.common >= COMMON_FLOOR
    }
}

impl Component for Deltas {
    fn wanted(spec: &MixSpec) -> bool {
        spec.delta
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        // Starting with no say: where records are spurious (text) the mixer never gives the
        // inputs one, which cost 4–8 bytes a text file at the usual starting weight
        // (binaries lost as much as they gained by it).
        for _ in 0..BASES {
            d.input_weighted(0);
        }
        d.memory(RecordModel::bytes() + BASES * Steps::bytes());
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Deltas {
            record: RecordModel::new(),
            steps: std::array::from_fn(|_| Steps::new()),
            column: None,
            common: 0,
        })
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        for steps in &self.steps {
            m.add(match self.speaks() {
                true => steps.input(s),
                false => 0,
            });
        }
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        if let Some(column) = self.column {
            let [above, others @ ..] = &mut self.steps;
            let common = above.learn(column, byte);
            for steps in others {
                steps.learn(column, byte);
            }
            self.common = match common {
                true => self.common + (((1 << 16) - self.common) >> COMMON_RATE),
                false => self.common - (self.common >> COMMON_RATE),
            };
        }
        self.record.update_byte(byte);
    }

    fn start_byte(&mut self, _s: &Shared) {
        let r = self.record.length();
        if r == 0 {
            self.column = None;
            return;
        }
        let back = |n| self.record.back(n);
        let (above, above2, left, above_left) = (back(r), back(2 * r), back(1), back(r + 1));
        let column = match r {
            ..=COLUMNS => self.record.position() % r,
            _ => COLUMNS,
        };
        let column = 2 * column + (left != above_left) as usize;
        self.column = Some(column);
        let bases = [
            above,
            above.wrapping_mul(2).wrapping_sub(above2),
            above.wrapping_add(left).wrapping_sub(above_left),
            above2,
        ];
        for (steps, base) in self.steps.iter_mut().zip(bases) {
            steps.base = base;
        }
        // The distributions are spread only where they are read: text nearly always has a
        // record length, and the model keeps silent there.
        if self.speaks() {
            for steps in &mut self.steps {
                steps.spread(column);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};
    use super::*;

    /// Records of 8 bytes: a 16-bit big-endian offset that grows by 3–10 a row, a constant,
    /// a line number that grows by 1, and noise. Each offset is new, so tables by the bytes
    /// above see it once; its step from the byte above is one of eight.
    fn offsets(rows: usize) -> Vec<u8> {
        let mut next = lcg(3);
        let (mut offset, mut line) = (0u16, 0u8);
        let mut data = Vec::new();
        for _ in 0..rows {
            offset = offset.wrapping_add(3 + (next() % 8) as u16);
            line = line.wrapping_add(1);
            data.extend_from_slice(&offset.to_be_bytes());
            data.extend_from_slice(&[0x80, 0x00, line, 0x24]);
            data.extend_from_slice(&[next() as u8, next() as u8]);
        }
        data
    }

    #[test]
    fn the_steps_pay_on_fields_that_grow_row_by_row() {
        let data = offsets(1500);
        let (with, without) = with_and_without(&data, |m| {
            m.record = 1;
            m.delta = true;
        });
        let (records_alone, _) = with_and_without(&data, |m| m.record = 1);
        assert!(with < 0.85 * records_alone, "{with} vs {records_alone}");
        assert!(records_alone < without, "{records_alone} vs {without}");
    }

    #[test]
    fn text_without_records_gets_no_say() {
        let spec = MixSpec::DEFAULT;
        let mut deltas = Deltas::new(&spec).unwrap();
        let mut s = Shared::new();
        let mut push = Push::new(&spec.declare());
        for &b in b"plain words, no fixed length at all in them. " {
            deltas.start_byte(&s);
            push.clear();
            deltas.predict(&s, &mut push);
            assert_eq!(push.inputs(), [0; BASES]);
            deltas.learn_byte(&s, b);
            s.history = s.history << 8 | b as u64;
        }
        // Records of 5 bytes: found, and then the model speaks.
        for i in 0..12u8 {
            for b in [i, 1, 2, 3, 4] {
                deltas.start_byte(&s);
                deltas.learn_byte(&s, b);
            }
        }
        deltas.start_byte(&s);
        assert_eq!(deltas.column, Some(0));
        push.clear();
        deltas.predict(&s, &mut push);
        assert!(push.inputs().iter().any(|&x| x != 0));
    }

    /// The delta model's room: the second sparse tables are an eighth of `cap` with it, at
    /// every size (above 64 KiB the split made them so already), and the stage's estimate at
    /// 64 KiB is lower than without either.
    #[test]
    fn the_second_sparse_tables_make_room_for_the_delta_model() {
        use super::super::spec::Part;
        let at = |cap, delta| MixSpec {
            cap,
            delta,
            ..MixSpec::DEFAULT
        };
        let sparse2 = |spec: &MixSpec| spec.part_bits(Part::Sparse2, spec.table, 0);
        for cap in [16, 17, 18] {
            assert_eq!(
                sparse2(&at(cap, true)) + 1,
                sparse2(&at(cap, false)),
                "{cap}"
            );
            assert!(at(cap, true).bytes() < at(cap, false).bytes(), "{cap}");
        }
        for cap in [19, 20, 21] {
            assert_eq!(sparse2(&at(cap, true)), sparse2(&at(cap, false)), "{cap}");
            assert!(at(cap, true).bytes() > at(cap, false).bytes(), "{cap}");
        }
    }

    /// Text has record lengths, spurious ones, nearly everywhere; the steps from the byte above
    /// are spread wide there, and the model keeps silent.
    #[test]
    fn spurious_records_in_text_get_no_say() {
        let mut next = lcg(8);
        let mut text = Vec::new();
        while text.len() < 20_000 {
            for _ in 0..2 + next() % 6 {
                text.push(b"etaoinshrdlucmfw"[(next() % 16) as usize]);
            }
            text.push(if next().is_multiple_of(9) {
                b'\n'
            } else {
                b' '
            });
        }
        let spec = MixSpec::DEFAULT;
        let mut deltas = Deltas::new(&spec).unwrap();
        let s = Shared::new();
        let (mut with_length, mut speaking) = (0, 0);
        for &b in &text {
            deltas.start_byte(&s);
            with_length += deltas.column.is_some() as usize;
            speaking += deltas.speaks() as usize;
            deltas.learn_byte(&s, b);
        }
        assert!(with_length > text.len() / 2, "{with_length}");
        assert_eq!(speaking, 0);
    }

    /// The byte above plus the step most often seen: the first base predicts it surely, bit
    /// by bit, whatever the value above.
    #[test]
    fn a_distribution_moves_onto_its_base() {
        let mut steps = Steps::new();
        for above in [10u8, 200, 77, 255, 3, 140] {
            steps.base = above;
            steps.learn(2, above.wrapping_add(5));
        }
        let above = 99u8;
        steps.base = above;
        steps.spread(2);
        let target = above + 5;
        let mut s = Shared::new();
        for k in 0..8 {
            let bit = (target >> (7 - k)) as u32 & 1;
            let x = steps.input(&s);
            assert!(if bit == 1 { x > 500 } else { x < -500 }, "bit {k}: {x}");
            s.c0 = s.c0 << 1 | bit;
            s.bit_index += 1;
        }
    }
}
