//! The lexical level of the recipe language: byte spans of the text ([`Loc`]), the error that
//! points at one ([`RecipeError`]), a cursor that reads spanned words ([`Word`]) and
//! `key=value` lists ([`KeyValue`]), and the escaped forms of model-file names and hashes.
//! What the words mean is the parser's business (src/recipe/parse.rs).

use std::fmt;

/// Where a part of the text is: byte offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub at: usize,
    pub len: usize,
}

impl Loc {
    pub fn new(at: usize, len: usize) -> Self {
        Loc { at, len }
    }

    /// From `at` up to (not including) `end`.
    pub fn between(at: usize, end: usize) -> Self {
        Loc { at, len: end - at }
    }
}

/// A recipe that does not parse, with the place of the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeError {
    pub text: String,
    /// Byte offset and length of the bad part.
    pub at: usize,
    pub len: usize,
    pub message: String,
}

impl RecipeError {
    pub fn new(text: &str, loc: Loc, message: String) -> Self {
        RecipeError {
            text: text.to_string(),
            at: loc.at,
            len: loc.len,
            message,
        }
    }
}

impl fmt::Display for RecipeError {
    /// `message`, then the recipe with the bad part underlined.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let col = self.text[..self.at.min(self.text.len())].chars().count();
        let width = self
            .text
            .get(self.at..self.at + self.len)
            .map_or(1, |s| s.chars().count().max(1));
        write!(
            f,
            "{} (in the recipe at column {}):\n    {}\n    {}{}",
            self.message,
            col + 1,
            self.text,
            " ".repeat(col),
            "^".repeat(width)
        )
    }
}

impl std::error::Error for RecipeError {}

/// A run of the text and where it is.
#[derive(Clone, Copy, Debug)]
pub struct Word<'a> {
    pub text: &'a str,
    pub loc: Loc,
}

/// One `key=value` of a list.
#[derive(Clone, Copy, Debug)]
pub struct KeyValue<'a> {
    pub key: Word<'a>,
    pub value: Word<'a>,
}

/// A cursor over the text.
pub struct Cursor<'a> {
    pub text: &'a str,
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { text, pos: 0 }
    }

    /// The text from the cursor on.
    pub fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    pub fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// The byte after the next one.
    pub fn peek_second(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos + 1).copied()
    }

    /// Items end at a space or at the end of the text.
    pub fn at_end_of_item(&self) -> bool {
        self.peek().is_none_or(|c| c.is_ascii_whitespace())
    }

    pub fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    pub fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// The span from `start` to the cursor.
    pub fn since(&self, start: usize) -> Loc {
        Loc::between(start, self.pos)
    }

    /// The longest run of characters satisfying `ok` from here.
    pub fn take_while(&mut self, ok: impl Fn(u8) -> bool) -> Word<'a> {
        let start = self.pos;
        while self.peek().is_some_and(&ok) {
            self.pos += 1;
        }
        Word {
            text: &self.text[start..self.pos],
            loc: self.since(start),
        }
    }

    /// The rest of the item (up to the next space).
    pub fn take_item(&mut self) -> Word<'a> {
        self.take_while(|ch| !ch.is_ascii_whitespace())
    }

    /// A key or value: letters, digits and `_ . + - % *`.
    pub fn word(&mut self) -> Word<'a> {
        self.take_while(|c| c.is_ascii_alphanumeric() || b"_.+-%*".contains(&c))
    }

    pub fn error(&self, loc: Loc, message: String) -> RecipeError {
        RecipeError::new(self.text, loc, message)
    }

    /// `key=value,key=value...` up to the end of the item or a `)` (`in_parens`: spaces allowed
    /// around keys, `=` and commas). Each pair is handed to `each` as it is read; a key given
    /// twice is refused.
    pub fn key_values(
        &mut self,
        in_parens: bool,
        mut each: impl FnMut(KeyValue<'a>) -> Result<(), RecipeError>,
    ) -> Result<(), RecipeError> {
        let mut seen: Vec<&str> = Vec::new();
        loop {
            let pair = self.key_value(in_parens)?;
            let key = pair.key;
            if seen.contains(&key.text) {
                let message = format!("'{}' is given twice", key.text);
                return Err(self.error(key.loc, message));
            }
            seen.push(key.text);
            each(pair)?;
            if in_parens {
                self.skip_spaces();
            }
            if !self.eat(",") {
                return Ok(());
            }
        }
    }

    /// One `key=value`.
    fn key_value(&mut self, in_parens: bool) -> Result<KeyValue<'a>, RecipeError> {
        let space = |c: &mut Self| {
            if in_parens {
                c.skip_spaces();
            }
        };
        space(self);
        let key = self.word();
        if key.text.is_empty() {
            return Err(self.error(Loc::new(key.loc.at, 1), "expected key=value".into()));
        }
        space(self);
        if !self.eat("=") {
            return Err(self.error(key.loc, format!("'{}' needs =value", key.text)));
        }
        space(self);
        let value = self.word();
        if value.text.is_empty() {
            let message = format!("'{}' needs a value", key.text);
            return Err(self.error(Loc::new(value.loc.at, 1), message));
        }
        Ok(KeyValue { key, value })
    }
}

/// Lowercase hexadecimal of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A SHA-256 written as 64 hexadecimal digits.
pub fn parse_sha(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Characters a model file's name keeps as they are; others are written `%XX` (UTF-8 bytes).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// A model file's name as the recipe writes it.
pub fn encode_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if name_char(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out += &format!("%{b:02X}");
            }
        }
    }
    out
}

/// The name [`encode_name`] wrote; `None` for a bad escape.
pub fn decode_name(text: &str) -> Option<String> {
    let mut bytes = Vec::new();
    let mut it = text.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hi = (it.next()? as char).to_digit(16)?;
            let lo = (it.next()? as char).to_digit(16)?;
            bytes.push((hi * 16 + lo) as u8);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}
