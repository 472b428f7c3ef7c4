//! Bracket and quote nesting (`ext` 2048, `nest`), for source code and structured text
//! (JSON, XML, Lisp): what comes next depends on where the byte sits in the structure — inside
//! which bracket, how deep, inside a string or not — more than on the bytes just before it.
//! The tables are on only where such structure is in use: within [`STRUCTURE_SPAN`] bytes of a
//! brace, a semicolon or an angle bracket, or inside an open bracket; prose sits them out, and
//! so do binaries (within [`TEXT_SPAN`] bytes of a byte text does not have), whose bracket
//! bytes are numbers.

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::{BinaryClock, Family};

/// Open brackets kept (deeper ones are counted, not remembered).
const STACK: usize = 16;
/// Bytes after the last structural byte (`{`, `}`, `;`, `<`, `>`) during which the tables stay
/// on with no bracket open.
const STRUCTURE_SPAN: u64 = 256;
/// Text bytes in a row (tab, newline, return, space to `~`) before the tables come on.
const TEXT_SPAN: u64 = 64;

/// The innermost open brackets and the quote the current byte is in.
pub struct Nesting {
    /// Open brackets, innermost last (`(`, `[` or `{`; angle brackets are comparisons as
    /// often as they are brackets, so they only mark structure).
    stack: [u8; STACK],
    /// Brackets open (may exceed [`STACK`]).
    depth: usize,
    /// The quote byte of the string the current byte is in, or 0.
    quote: u8,
    /// Whether the byte before was a backslash inside a string (the next quote is escaped).
    escaped: bool,
    /// Bytes seen and the last binary byte; `clock.pos` after the last structural byte.
    clock: BinaryClock,
    last_structure: u64,
}

impl Nesting {
    fn innermost(&self) -> u8 {
        match self.depth {
            0 => 0,
            d => self.stack[d.min(STACK) - 1],
        }
    }

    /// The innermost bracket, the depth (capped at 15) and the quote, in 24 bits.
    fn place(&self) -> u64 {
        (self.innermost() as u64) << 16 | (self.depth.min(15) as u64) << 8 | self.quote as u64
    }

    fn close(&mut self, open: u8) {
        if self.depth > 0 && (self.depth > STACK || self.stack[self.depth - 1] == open) {
            self.depth -= 1;
        }
    }
}

impl Family for Nesting {
    fn wanted(spec: &MixSpec) -> bool {
        spec.nest
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Quarter, spec.quarter_table(), 0); 2]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Nesting {
            stack: [0; STACK],
            depth: 0,
            quote: 0,
            escaped: false,
            clock: BinaryClock::default(),
            last_structure: 0,
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.clock.learn(byte);
        if self.quote != 0 {
            match byte {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'\n' => self.quote = 0,
                b if b == self.quote => self.quote = 0,
                _ => {}
            }
            return;
        }
        match byte {
            b'"' | b'\'' | b'`' => self.quote = byte,
            b'(' | b'[' | b'{' => {
                if self.depth < STACK {
                    self.stack[self.depth] = byte;
                }
                self.depth += 1;
            }
            b')' => self.close(b'('),
            b']' => self.close(b'['),
            b'}' => self.close(b'{'),
            _ => {}
        }
        if matches!(byte, b'{' | b'}' | b';' | b'<' | b'>') {
            self.last_structure = self.clock.pos;
        }
    }

    fn active(&self) -> bool {
        let text = self.clock.since_binary().is_none_or(|d| d >= TEXT_SPAN);
        let structure = self.depth > 0
            || (self.last_structure > 0 && self.clock.pos - self.last_structure < STRUCTURE_SPAN);
        text && structure
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let place = self.place();
        out[0] = hash(place << 8 | (s.history & 0xff), 0x3a0);
        out[1] = hash(place << 32 | s.word as u64, 0x3a1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Nested lists whose items depend on their depth and not on the bytes before them: the
    /// nesting contexts find the depth, short contexts see only the brackets.
    fn nested_lists(items: usize) -> Vec<u8> {
        let mut next = lcg(11);
        let words: [&[u8]; 4] = [b"alpha", b"beta", b"gamma", b"delta"];
        let mut data = Vec::new();
        let mut depth = 0usize;
        for _ in 0..items {
            match next() % 4 {
                0 if depth < 4 => {
                    data.push(b'{');
                    depth += 1;
                }
                1 if depth > 0 => {
                    data.push(b'}');
                    depth -= 1;
                }
                _ => {
                    data.push(b' ');
                    data.extend_from_slice(words[depth % 4]);
                    data.push(b';');
                }
            }
        }
        data
    }

    #[test]
    fn the_depth_predicts_the_items_of_nested_lists() {
        let data = nested_lists(1500);
        let (with, without) = with_and_without(&data, |m| m.nest = true);
        assert!(with < 0.9 * without, "{with} vs {without}");
    }
}
