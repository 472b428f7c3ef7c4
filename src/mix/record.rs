//! The record model, for tables and binaries made of fixed-length records (spreadsheets, arrays
//! of structs, images): it finds the record length from the distances between equal bytes and
//! gives the context tables contexts a byte-oriented model lacks — the byte one record above
//! with the byte to the left, the bytes one and two records above with the column, and (with
//! `record=2`) the bytes one record above under the two latest lengths, for data with two
//! periods at once.
//!
//! Detection: when a byte value recurs at the same distance four times in a row, that distance
//! is a candidate; a candidate seen twice becomes the record length (so one regular run of a
//! single byte does not switch it). Lengths from 2 to [`MAX_RECORD`] bytes are found.

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;

/// Longest record length found.
pub const MAX_RECORD: usize = 2047;
/// The window of recent bytes: two records back must fit.
const WINDOW: usize = 4096;

pub struct RecordModel {
    window: Vec<u8>,
    /// Bytes seen.
    pos: usize,
    /// Per byte value: where it last occurred (position + 1; 0 for never), the distance from
    /// its occurrence before, and how many times in a row that distance repeated.
    last: Vec<u32>,
    distance: Vec<u32>,
    repeats: Vec<u8>,
    /// The record length (0 while none is found), the length confirmed before it (0: none),
    /// and the candidate waiting for confirmation.
    length: usize,
    previous: usize,
    candidate: usize,
    candidate_hits: u32,
}

impl Default for RecordModel {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordModel {
    pub fn new() -> Self {
        RecordModel {
            window: vec![0; WINDOW],
            pos: 0,
            last: vec![0; 256],
            distance: vec![0; 256],
            repeats: vec![0; 256],
            length: 0,
            previous: 0,
            candidate: 0,
            candidate_hits: 0,
        }
    }

    /// The memory a model takes, in bytes.
    pub fn bytes() -> usize {
        WINDOW + 256 * 9 + 64
    }

    /// Bytes seen.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The record length found so far (0: none).
    pub fn length(&self) -> usize {
        self.length
    }

    /// Learns a byte: files it in the window and checks its distance from its last occurrence.
    pub fn update_byte(&mut self, byte: u8) {
        let b = byte as usize;
        self.window[self.pos % WINDOW] = byte;
        self.pos += 1;
        let here = self.pos as u32;
        if self.last[b] > 0 {
            let d = here - self.last[b];
            if d == self.distance[b] {
                self.repeats[b] = self.repeats[b].saturating_add(1);
            } else {
                self.distance[b] = d;
                self.repeats[b] = 0;
            }
            if self.repeats[b] >= 2 && (2..=MAX_RECORD as u32).contains(&d) {
                self.propose(d as usize);
            }
        }
        self.last[b] = here;
    }

    /// A distance seen four times in a row: confirm the length, or count toward a new one.
    fn propose(&mut self, d: usize) {
        if d == self.length {
            self.candidate_hits = 0;
        } else if d == self.candidate {
            self.candidate_hits += 1;
            if self.candidate_hits >= 2 {
                if self.length != 0 {
                    self.previous = self.length;
                }
                self.length = d;
                self.candidate_hits = 0;
            }
        } else {
            self.candidate = d;
            self.candidate_hits = 1;
        }
    }

    /// The byte `back` bytes before the next one (`back` ≥ 1), or 0 before the start.
    pub fn back(&self, back: usize) -> u8 {
        if back > self.pos || back > WINDOW {
            0
        } else {
            self.window[(self.pos - back) % WINDOW]
        }
    }

    /// The context hashes of the next byte: (byte above, byte to the left); (bytes one and two
    /// records above, column); and (the byte above under each of the two latest lengths,
    /// shorter first, so that a detector switching between two periods keeps the context) or,
    /// with one length so far, (the bytes above-left, above and above-right). Without a record
    /// length all are fixed contexts.
    pub fn contexts(&self) -> [u32; 3] {
        let r = self.length;
        if r == 0 {
            return [hash(0, 0x2ec0), hash(0, 0x2ec1), hash(0, 0x2ec2)];
        }
        let above = self.back(r) as u64;
        let left = self.back(1) as u64;
        let above2 = self.back(2 * r) as u64;
        let column = (self.pos % r) as u64;
        let third = match self.previous {
            0 => {
                let (above_left, above_right) = (self.back(r + 1), self.back(r - 1));
                (r as u64) << 32 | (above_left as u64) << 16 | above << 8 | above_right as u64
            }
            p => {
                let (short, long) = (r.min(p), r.max(p));
                let (a, b) = (self.back(short) as u64, self.back(long) as u64);
                1 << 63 | (short as u64) << 40 | (long as u64) << 16 | a << 8 | b
            }
        };
        [
            hash((r as u64) << 16 | above << 8 | left, 0x2ec0),
            hash(
                (r as u64) << 32 | column << 16 | above << 8 | above2,
                0x2ec1,
            ),
            hash(third, 0x2ec2),
        ]
    }
}

/// The record model's context tables (`mix:record`): two by the bytes one and two records
/// above ([`RecordModel::contexts`]), and with `record=2` a third by the two latest lengths.
pub struct RecordTables {
    model: RecordModel,
    tables: usize,
}

impl Family for RecordTables {
    fn wanted(spec: &MixSpec) -> bool {
        spec.record > 0
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        let n = if spec.record == 1 { 2 } else { 3 };
        vec![spec.part_bits(Part::Record, spec.table, 0); n]
    }

    fn bytes(_spec: &MixSpec) -> usize {
        RecordModel::bytes()
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(RecordTables {
            model: RecordModel::new(),
            tables: Self::table_bits(spec).len(),
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.model.update_byte(byte);
    }

    fn contexts(&self, _s: &Shared, out: &mut [u32]) {
        out.copy_from_slice(&self.model.contexts()[..self.tables]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of 13 bytes: a counter, a constant field, noise.
    fn records(n: usize) -> Vec<u8> {
        let mut x = 99u32;
        let mut out = Vec::new();
        for i in 0..n {
            out.extend_from_slice(&[(i & 0xff) as u8, 0xAA, 0x55, b'|']);
            for _ in 0..9 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                out.push((x >> 16) as u8);
            }
        }
        out
    }

    #[test]
    fn the_record_model_finds_the_record_length() {
        let mut m = RecordModel::new();
        for b in records(12) {
            m.update_byte(b);
        }
        assert_eq!(m.length(), 13);
    }

    #[test]
    fn a_new_length_keeps_the_one_before() {
        let mut m = RecordModel::new();
        for b in records(12) {
            m.update_byte(b);
        }
        // Records of 5 bytes: a counter and four constant bytes.
        for i in 0..12u8 {
            for b in [i, 1, 2, 3, 4] {
                m.update_byte(b);
            }
        }
        assert_eq!((m.length(), m.previous), (5, 13));
    }

    /// The third context reads the two lengths in the same order whichever is the newer, so a
    /// detector switching between two periods keeps it; the first two follow the newer one.
    #[test]
    fn the_third_context_does_not_depend_on_which_length_came_last() {
        let mut m = RecordModel::new();
        for b in records(40) {
            m.update_byte(b);
        }
        (m.length, m.previous) = (13, 5);
        let a = m.contexts();
        (m.length, m.previous) = (5, 13);
        let b = m.contexts();
        assert_eq!(a[2], b[2]);
        assert_ne!(a[0], b[0]);
        assert_ne!(a[1], b[1]);
        // With one length it is the neighbourhood above, another context.
        m.previous = 0;
        assert_ne!(m.contexts()[2], b[2]);
    }

    #[test]
    fn no_length_in_text_without_records() {
        let mut m = RecordModel::new();
        for &b in b"no fixed length here, just words of all kinds and sizes.".iter() {
            m.update_byte(b);
        }
        assert_eq!(m.length(), 0);
    }
}
