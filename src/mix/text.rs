//! Text contexts and a selector for text (`ext` 4096, `text`), for prose and wiki markup.
//!
//! [`Text`], six tables: the word before last with the current word (a skip); the column
//! with the length of the word so far and the last byte, and the column
//! against the length of the line before (prose wrapped at a width breaks lines where the line
//! above broke); the markup the byte is in (open `[` and `{`, inside a tag, the kind of line by
//! its first byte: heading, table cell, list, indent…) with the current word and with the last
//! two bytes; and the word that followed the previous word last time (a word-level indirect
//! context).
//!
//! [`TextSelect`], a weight-set selector: in text, the bit position, the class of the last
//! byte, the letters of the current word so far and its case; in binary data, the bit
//! position and the position modulo 4 (4-byte fields). The case of the current word is read
//! here, not by tables (a table of the word with its case and the word before's gained 0.03%
//! on text, beside the selector, for memory the goals do not leave).
//!
//! Both read the data's kind from a [`TextClock`]: the tables sit out binary data (within
//! [`TEXT_SPAN`] bytes of a byte text does not have), pushing zeros; bytes of well-formed
//! UTF-8 are text. With `mix:strings=1` the strings inside binary data are text too: a NUL
//! that ends a printable string ([`ends_string`]) does not break it but ends a line, as a
//! newline does, and text resumes [`STRING_SPAN`] bytes after a byte text does not have (the
//! string tables of executables, message catalogues and compiled Python, the symbol strings of
//! debugging sections).

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;

/// Text bytes in a row before the tables come on (and the selector reads text).
const TEXT_SPAN: u64 = 256;
/// The same with `mix:strings=1`: the strings of binary data are short (measured against 8,
/// 32, 64 and 256 on small binaries, message catalogues and code, docs/experiments.md).
const STRING_SPAN: u64 = 16;
/// Log2 of the entries of the word-level history (the word that followed each word).
const AFTER_BITS: u32 = 14;
/// Tables of [`Text`].
const TABLES: usize = 6;

/// Bytes seen and where the last byte came that text does not have: a control byte other
/// than tab, newline and return, or a byte that breaks UTF-8 (text in other scripts is text,
/// unlike for [`super::tables::BinaryClock`]); with `strings`, not a NUL that ends a
/// printable string.
pub struct TextClock {
    /// Bytes seen.
    pub pos: u64,
    /// `pos` after the last byte that text does not have (0: none yet).
    last_binary: u64,
    /// Continuation bytes still due in a UTF-8 sequence.
    pending: u32,
    /// With `strings`, a NUL that ends a string ([`ends_string`]) is text, and text comes on
    /// after [`STRING_SPAN`] text bytes in a row instead of [`TEXT_SPAN`].
    strings: bool,
    /// The last two bytes (the last in the low byte), and whether the last ended a string
    /// (with `strings`).
    last: u16,
    ended_string: bool,
}

/// Whether `byte` after `before` (the last two bytes, the last in the low byte) ends a string
/// of binary data: a NUL right after printable ASCII that did not itself follow a NUL. With
/// `mix:strings`, such a NUL is text, and it ends a line for the text and column contexts.
/// (Without the second condition it would end every character of UTF-16 text, whose ASCII
/// alternates with NULs.)
pub fn ends_string(before: u16, byte: u8) -> bool {
    byte == 0 && (0x20..=0x7e).contains(&(before & 0xff)) && before >> 8 != 0
}

impl TextClock {
    /// The clock of a stage with `mix:strings` or without.
    pub fn new(strings: bool) -> Self {
        TextClock {
            pos: 0,
            last_binary: 0,
            pending: 0,
            strings,
            last: 0,
            ended_string: false,
        }
    }

    pub fn learn(&mut self, byte: u8) {
        self.pos += 1;
        self.ended_string = self.strings && ends_string(self.last, byte);
        self.last = self.last << 8 | byte as u16;
        let text = match byte {
            b'\t' | b'\n' | b'\r' | b' '..=b'~' | 0xc2..=0xf4 => self.pending == 0,
            0x80..=0xbf => self.pending > 0,
            _ => self.ended_string,
        };
        self.pending = match byte {
            0x80..=0xbf => self.pending.saturating_sub(1),
            0xc2..=0xdf => 1,
            0xe0..=0xef => 2,
            0xf0..=0xf4 => 3,
            _ => 0,
        };
        if !text {
            self.last_binary = self.pos;
        }
    }

    /// Whether the last byte ended a string (always false without `strings`).
    pub fn ended_string(&self) -> bool {
        self.ended_string
    }

    /// Whether the bytes since the last one text does not have are the clock's span or more.
    pub fn in_text(&self) -> bool {
        let span = if self.strings { STRING_SPAN } else { TEXT_SPAN };
        self.last_binary == 0 || self.pos - self.last_binary >= span
    }
}

/// What the text contexts follow (see the module's docs).
pub struct Text {
    clock: TextClock,
    /// Letters of the current word so far.
    letters: u32,
    /// Bytes since the line began, and the length of the line before.
    column: u32,
    above_len: u32,
    /// The markup the byte is in: open `[` (to 3, closed by a newline), open `{` (to 3),
    /// inside a tag, the kind of line (by its first byte, [`line_kind`]).
    square: u32,
    curly: u32,
    tag: bool,
    line_kind: u32,
    /// By a hash of each word, the word that followed it last time; the one after the last
    /// word.
    after: Vec<u32>,
    predicted: u32,
}

/// The kind of a line by its first byte (0 before it).
fn line_kind(byte: u8) -> u32 {
    match byte {
        b'=' => 1,
        b'|' | b'!' => 2,
        b'*' | b'#' => 3,
        b':' | b';' => 4,
        b' ' | b'\t' => 5,
        b'<' => 6,
        b'{' | b'}' => 7,
        b'[' => 8,
        b'a'..=b'z' => 9,
        b'A'..=b'Z' => 10,
        b'0'..=b'9' => 11,
        b'\n' => 12,
        _ => 13,
    }
}

impl Text {
    fn markup(&self) -> u64 {
        (self.square | self.curly << 2 | (self.tag as u32) << 4 | self.line_kind << 5) as u64
    }

    fn slot(word: u32) -> usize {
        (hash(word as u64, 0x4f0) >> (32 - AFTER_BITS)) as usize
    }
}

/// Two values hashed together.
fn two(a: u64, b: u64, salt: u32) -> u32 {
    hash((hash(a, salt) as u64) << 32 ^ b, salt)
}

/// The current word, or between words the last byte.
fn current(s: &Shared) -> u64 {
    match s.word {
        0 => s.history & 0xff,
        w => (w as u64) << 8,
    }
}

impl Family for Text {
    fn wanted(spec: &MixSpec) -> bool {
        spec.text
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Text, spec.quarter_table(), 0); TABLES]
    }

    fn bytes(_spec: &MixSpec) -> usize {
        4 << AFTER_BITS
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Text {
            clock: TextClock::new(spec.strings),
            letters: 0,
            column: 0,
            above_len: 0,
            square: 0,
            curly: 0,
            tag: false,
            line_kind: 0,
            after: vec![0; 1 << AFTER_BITS],
            predicted: 0,
        })
    }

    fn learn_byte(&mut self, s: &Shared, byte: u8) {
        self.clock.learn(byte);
        if byte.is_ascii_alphabetic() {
            self.letters += 1;
        } else if self.letters > 0 {
            // A word ended: the stage's `prev_word` is it, `prev_word2` the one before.
            self.letters = 0;
            self.after[Self::slot(s.prev_word2)] = s.prev_word;
            self.predicted = self.after[Self::slot(s.prev_word)];
        }
        match byte {
            b'[' => self.square = (self.square + 1).min(3),
            b']' => self.square = self.square.saturating_sub(1),
            b'{' => self.curly = (self.curly + 1).min(3),
            b'}' => self.curly = self.curly.saturating_sub(1),
            b'<' => self.tag = true,
            b'>' => self.tag = false,
            _ => {}
        }
        if byte == b'\n' || self.clock.ended_string() {
            self.above_len = self.column;
            self.column = 0;
            self.square = 0;
            self.line_kind = 0;
        } else {
            if self.column == 0 {
                self.line_kind = line_kind(byte);
            }
            self.column = self.column.saturating_add(1);
        }
    }

    fn active(&self) -> bool {
        self.clock.in_text()
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let cur = current(s);
        let c1 = s.history & 0xff;
        let letters = self.letters.min(15) as u64;
        let column = self.column.min(255) as u64;
        let against_above = (self.column as i64 - self.above_len as i64).clamp(-16, 48) as u64;
        out[0] = two(cur, s.prev_word2 as u64, 0x400);
        out[1] = hash(column << 16 | letters << 8 | c1, 0x407);
        out[2] = two(cur, self.markup(), 0x408);
        out[3] = two(s.history & 0xffff, self.markup(), 0x409);
        out[4] = two(cur, self.predicted as u64, 0x40a);
        out[5] = hash((against_above & 0xff) << 16 | letters << 8 | c1, 0x40e);
    }
}

/// Weight sets of [`TextSelect`]: in text, case (3) × letters (4) × class of the last byte
/// (8) × bit (8); in binary data, position modulo 4 × bit.
const TEXT_SETS: usize = 3 * 4 * 8 * 8;
const SELECT_SETS: usize = TEXT_SETS + 4 * 8;

/// The selector for text (see the module's docs).
pub struct TextSelect {
    clock: TextClock,
    /// Letters of the current word so far.
    letters: u32,
    /// Its case: 0 lower, 1 first letter a capital, 3 every letter a capital (two or more).
    case: u32,
}

/// Classes of the last byte.
fn class(byte: u8) -> usize {
    match byte {
        b'a'..=b'z' | b'A'..=b'Z' => 0,
        b' ' => 1,
        b'\n' => 2,
        b'.' | b',' | b';' | b':' | b'!' | b'?' => 3,
        b'0'..=b'9' => 4,
        b'[' | b']' | b'{' | b'}' | b'<' | b'>' | b'|' | b'=' => 5,
        0x80..=0xff => 6,
        _ => 7,
    }
}

impl Component for TextSelect {
    fn wanted(spec: &MixSpec) -> bool {
        spec.text
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.selector(SELECT_SETS);
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(TextSelect {
            clock: TextClock::new(spec.strings),
            letters: 0,
            case: 0,
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.clock.learn(byte);
        if byte.is_ascii_alphabetic() {
            let upper = byte.is_ascii_uppercase() as u32;
            self.case = match self.letters {
                0 => upper,
                1 => self.case | (self.case & upper) << 1,
                _ => self.case & (1 | upper << 1),
            };
            self.letters += 1;
        } else {
            self.letters = 0;
            self.case = 0;
        }
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        let bit = s.bit_index as usize;
        if !self.clock.in_text() {
            m.select(TEXT_SETS + (((self.clock.pos & 3) as usize) << 3 | bit));
            return;
        }
        let letters = match self.letters {
            0 => 0,
            1..=2 => 1,
            3..=5 => 2,
            _ => 3,
        };
        let case = match self.case {
            0 => 0,
            1 => 1,
            _ => 2,
        };
        m.select(((case * 4 + letters) * 8 + class(s.c1() as u8)) * 8 + bit);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};
    use super::{STRING_SPAN, TEXT_SPAN, TextClock};

    /// Words from a small vocabulary, some capitalised, in lines wrapped before 60 columns,
    /// with a link now and then: the column and the markup tell what the last bytes do not.
    fn wrapped_prose(words: usize) -> Vec<u8> {
        const VOCABULARY: [&str; 10] = [
            "the",
            "river",
            "Stone",
            "of",
            "night",
            "[[Paper]]",
            "glass",
            "and",
            "a",
            "music",
        ];
        let mut next = lcg(17);
        let mut data = Vec::new();
        let mut column = 0;
        for _ in 0..words {
            let word = VOCABULARY[next() as usize % VOCABULARY.len()].as_bytes();
            if column + word.len() >= 60 {
                data.push(b'\n');
                column = 0;
            } else if column > 0 {
                data.push(b' ');
                column += 1;
            }
            data.extend_from_slice(word);
            column += word.len();
        }
        data
    }

    #[test]
    fn the_text_contexts_pay_on_wrapped_prose() {
        let data = wrapped_prose(3000);
        let (with, without) = with_and_without(&data, |m| m.text = true);
        assert!(with < 0.97 * without, "{with} vs {without}");
    }

    fn clock_after(bytes: &[u8], strings: bool) -> TextClock {
        let mut clock = TextClock::new(strings);
        for &b in bytes {
            clock.learn(b);
        }
        clock
    }

    fn in_text_after(bytes: &[u8]) -> bool {
        clock_after(bytes, false).in_text()
    }

    #[test]
    fn well_formed_utf8_is_text_and_other_bytes_are_not() {
        let span = TEXT_SPAN as usize;
        assert!(in_text_after(b""));
        assert!(in_text_after(&b"plain text\tand lines\r\n".repeat(20)));
        assert!(in_text_after(
            &"Zürich, İstanbul, 東京, 😀 ".repeat(40).into_bytes()
        ));
        for bad in [
            &[0u8][..],
            &[0x7f],
            &[0xff],
            &[0xc3, b'a'],
            &[0x80],
            &[0xc0, 0x80],
        ] {
            let mut data = b"text ".repeat(10);
            data.extend_from_slice(bad);
            assert!(!in_text_after(&data), "{bad:?}");
            data.extend(std::iter::repeat_n(b'a', span - 1));
            assert!(!in_text_after(&data), "{bad:?}");
            data.push(b'a');
            assert!(in_text_after(&data), "{bad:?}");
        }
    }

    /// With `strings`, the NUL that ends each printable string keeps the text contexts on and
    /// a byte text does not have keeps them off for [`STRING_SPAN`] bytes only; NULs in a row,
    /// after a byte that is not printable, or between the characters of UTF-16 text are
    /// binary.
    #[test]
    fn with_strings_a_nul_ends_a_string_of_text() {
        let table = b"main:F(0,1)\0argc:p(0,1)\0int:t(0,1)=r(0,1);\0".repeat(8);
        assert!(!clock_after(&table, false).in_text());
        assert!(clock_after(&table, true).in_text());
        assert!(clock_after(&table, true).ended_string());
        assert!(!clock_after(&table, false).ended_string());
        assert!(!clock_after(&table[..table.len() - 1], true).ended_string());
        let span = STRING_SPAN as usize;
        // UTF-16 text: each NUL follows a printable byte that follows a NUL.
        let utf16: Vec<u8> = "plain text, "
            .repeat(40)
            .bytes()
            .flat_map(|b| [b, 0])
            .collect();
        assert!(!clock_after(&utf16, true).in_text());
        assert!(!clock_after(&utf16, true).ended_string());
        let one_letter = b"\x01x\0\x02ab\0".repeat(8);
        assert!(clock_after(&one_letter, true).ended_string());
        for bad in [
            &[0u8, 0][..],
            &[b'\n', 0],
            &[0x93],
            &[0xc3, b'a'],
            &[0, b'a', 0],
        ] {
            let mut data = table.clone();
            data.extend_from_slice(bad);
            assert!(!clock_after(&data, true).in_text(), "{bad:?}");
            data.extend(std::iter::repeat_n(b'a', span - 1));
            assert!(!clock_after(&data, true).in_text(), "{bad:?}");
            data.push(b'a');
            assert!(clock_after(&data, true).in_text(), "{bad:?}");
        }
    }

    #[test]
    fn the_text_contexts_pay_on_the_strings_of_binary_data() {
        // Messages of a catalogue, three after each 2-byte binary header: the word before
        // last tells the current one (a skip context of the text tables).
        let mut next = lcg(29);
        let subjects = ["count", "buffer", "index", "stream", "length", "value"];
        let objects = [
            "overflows",
            "is empty",
            "is negative",
            "ended",
            "is zero",
            "is stale",
        ];
        let mut data = Vec::new();
        for _ in 0..500 {
            data.extend_from_slice(&[0x80 | (next() % 16) as u8, 0x91]);
            for _ in 0..3 {
                let k = next() as usize % subjects.len();
                let line = format!("the {} {}", subjects[k], objects[k]);
                data.extend_from_slice(line.as_bytes());
                data.push(0);
            }
        }
        let (with, without) = with_and_without(&data, |m| {
            m.text = true;
            m.strings = true;
        });
        let (plain, _) = with_and_without(&data, |m| m.text = true);
        assert!(
            with < 0.9 * plain,
            "{with} vs {plain} ({without} without text)"
        );
    }

    /// UTF-16 text (ASCII alternating with NULs) has no strings to end: with `strings` it is
    /// coded to the bit as without.
    #[test]
    fn utf16_text_is_coded_as_without_strings() {
        let data: Vec<u8> = wrapped_prose(600)
            .into_iter()
            .flat_map(|b| [b, 0])
            .collect();
        let (with, _) = with_and_without(&data, |m| {
            m.text = true;
            m.columns = true;
            m.strings = true;
        });
        let (without, _) = with_and_without(&data, |m| {
            m.text = true;
            m.columns = true;
        });
        assert_eq!(with, without);
    }
}
