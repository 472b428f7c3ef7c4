//! Context families of words, for text ([`super::tables::Family`]): the current word
//! (`mix:word`), the word before with the current one (`mix:pword`), and two more (`ext` 2,
//! `words`). The word hashes themselves are kept by the stage ([`Shared::word`]).

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;

/// The current word, or between words the last byte.
fn current(s: &Shared) -> u64 {
    match s.word {
        0 => s.history & 0xff,
        w => w as u64,
    }
}

/// The current word so far (`mix:word`); between words, the last byte.
pub struct Word;

impl Family for Word {
    fn wanted(spec: &MixSpec) -> bool {
        spec.word
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Table, spec.table, 0)]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Word)
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let value = match s.word {
            0 => s.history & 0xff,
            w => (w as u64) << 8,
        };
        out[0] = hash(value, 0x77);
    }
}

/// The word before with the current word (or, between words, the last byte) (`mix:pword`).
pub struct PrevWord;

impl Family for PrevWord {
    fn wanted(spec: &MixSpec) -> bool {
        spec.pword
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Table, spec.table, 0)]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(PrevWord)
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        out[0] = hash((s.prev_word as u64) << 32 | current(s), 0x78);
    }
}

/// With `words` (`ext` 2): the current word (or, between words, the last byte) with the two
/// words before it, and the word before with the last two bytes.
pub struct TwoWords;

impl Family for TwoWords {
    fn wanted(spec: &MixSpec) -> bool {
        spec.words
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Table, spec.table, 0); 2]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(TwoWords)
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let two = (s.prev_word2 as u64) << 32 | s.prev_word as u64;
        out[0] = hash(current(s) ^ two.wrapping_mul(0x9E37_79B9_7F4A_7C15), 0x79);
        out[1] = hash((s.prev_word as u64) << 32 | (s.history & 0xffff), 0x7a);
    }
}
