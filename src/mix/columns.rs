//! Line and column contexts (`ext` 64, `columns`), for text and source code: the byte above
//! (at the same column of the line before), the column, and the line's indentation. Prose
//! wrapped at a width, tables of text and indented code repeat by line, not by byte distance;
//! the record model finds fixed periods, these follow lines of any length. With `mix:strings`,
//! the NUL that ends a string of binary data ends a line too (a table of strings is a list of
//! lines).

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;
use super::text::ends_string;

/// Bytes of the line before kept (a longer line's tail is read as unknown).
const LINE: usize = 256;

/// The current line and the one before it.
pub struct Columns {
    /// The line before, byte by byte from its start (up to [`LINE`] bytes).
    above: Vec<u8>,
    /// Its length (bytes kept).
    above_len: usize,
    /// The current line so far.
    line: Vec<u8>,
    /// Bytes since the line started (not capped).
    column: u32,
    /// Leading spaces and tabs of the current line (tabs count 4), up to the first other byte.
    indent: u32,
    /// Whether the current line has had a byte other than a space or tab.
    indented: bool,
    /// A NUL that ends a string ends a line (`mix:strings`).
    strings: bool,
}

impl Columns {
    fn byte_above(&self, column: usize) -> u64 {
        match column < self.above_len {
            true => self.above[column] as u64,
            false => 0x100,
        }
    }
}

impl Family for Columns {
    fn wanted(spec: &MixSpec) -> bool {
        spec.columns
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Quarter, spec.quarter_table(), 0); 3]
    }

    fn bytes(_spec: &MixSpec) -> usize {
        2 * LINE
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Columns {
            above: vec![0; LINE],
            above_len: 0,
            line: Vec::with_capacity(LINE),
            column: 0,
            indent: 0,
            indented: false,
            strings: spec.strings,
        })
    }

    fn learn_byte(&mut self, s: &Shared, byte: u8) {
        // (`history` has the byte already: the two before it are next.)
        let ends_line = byte == b'\n' || self.strings && ends_string((s.history >> 8) as u16, byte);
        if ends_line {
            self.above[..self.line.len()].copy_from_slice(&self.line);
            self.above_len = self.line.len();
            self.line.clear();
            self.column = 0;
            self.indent = 0;
            self.indented = false;
            return;
        }
        if self.line.len() < LINE {
            self.line.push(byte);
        }
        self.column = self.column.saturating_add(1);
        if !self.indented {
            match byte {
                b' ' => self.indent += 1,
                b'\t' => self.indent += 4,
                _ => self.indented = true,
            }
        }
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let column = self.column as usize;
        let above = self.byte_above(column);
        let col = self.column.min(255) as u64;
        out[0] = hash(above << 8 | (s.history & 0xff), 0x2c0);
        out[1] = hash(above << 16 | self.byte_above(column + 1) << 8 | col, 0x2c1);
        let indent = self.indent.min(63) as u64 | (self.indented as u64) << 6;
        out[2] = hash(indent << 16 | (s.history & 0xffff), 0x2c2);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Lines of changing lengths, each the line before with one byte changed and one byte
    /// added or dropped at its end: the byte above predicts each byte, no fixed period does.
    fn drifting_lines(lines: usize) -> Vec<u8> {
        let mut next = lcg(3);
        let mut line: Vec<u8> = (0..40).map(|_| b'a' + (next() % 26) as u8).collect();
        let mut data = Vec::new();
        for _ in 0..lines {
            data.extend_from_slice(&line);
            data.push(b'\n');
            let at = next() as usize % line.len();
            line[at] = b'a' + (next() % 26) as u8;
            match next().is_multiple_of(2) && line.len() < 60 || line.len() < 20 {
                true => line.push(b'a' + (next() % 26) as u8),
                false => _ = line.pop(),
            }
        }
        data
    }

    #[test]
    fn the_byte_above_predicts_lines_of_changing_lengths() {
        let data = drifting_lines(150);
        let (with, without) = with_and_without(&data, |m| m.columns = true);
        assert!(with < 0.7 * without, "{with} vs {without}");
    }

    /// With `strings`, the same lines as NUL-terminated strings (a table of strings in binary
    /// data) are lines too; without it they are one long line.
    #[test]
    fn with_strings_a_nul_that_ends_a_string_ends_a_line() {
        let data: Vec<u8> = drifting_lines(150)
            .into_iter()
            .map(|b| if b == b'\n' { 0 } else { b })
            .collect();
        let (strings, _) = with_and_without(&data, |m| {
            m.columns = true;
            m.strings = true;
        });
        let (plain, _) = with_and_without(&data, |m| m.columns = true);
        assert!(strings < 0.8 * plain, "{strings} vs {plain}");
    }
}
