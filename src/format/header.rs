//! Member headers of both format versions (docs/format.md). Version 1 stores the whole recipe
//! as text behind fixed-width fields; version 2, which this build writes, stores a level and
//! the edits that make the recipe of it (or the whole text when no level is near), behind
//! LEB128 lengths: an empty member at a level takes 24 bytes instead of 350.

use std::io::{self, Read, Write};

use super::{
    FORMAT_VERSION, FormatError, MAGIC, OLDEST_FORMAT_VERSION, RECIPE_MAX, read_exact_or, read_u32,
    varint,
};

/// How a header holds the recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredRecipe {
    /// The recipe's canonical text (see [`crate::recipe::Recipe::parse`]).
    Text(String),
    /// A level of the table of the header's numerics version, and recipe text that edits it
    /// into the recipe (empty when the recipe is the level's). `crc` is the CRC32 of the
    /// resulting recipe's canonical text: a build whose level means something else refuses
    /// the file instead of decoding it with another model.
    Level {
        model: u8,
        level: u8,
        edits: String,
        crc: u32,
    },
}

impl StoredRecipe {
    /// The text the header holds: the whole recipe or the edits.
    pub fn text(&self) -> &str {
        match self {
            StoredRecipe::Text(t) => t,
            StoredRecipe::Level { edits, .. } => edits,
        }
    }
}

/// Form bytes of a version 2 header.
const FORM_TEXT: u8 = 0;
const FORM_LEVEL: u8 = 1;

/// The parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The layout of this member (1 or 2): its frames and trailer follow it.
    pub format_version: u8,
    pub numerics_version: u8,
    pub recipe: StoredRecipe,
    /// Bytes the header takes in the stream, magic to checksum.
    pub len: u64,
}

/// Writes a version 2 header; returns its length. Layout: magic (4), format version (1),
/// numerics version (1), form (1: 0 text, 1 level); for a level the model and level bytes;
/// the text's length (LEB128) and the text; for a level the recipe's CRC32; then the CRC32 of
/// all the header's bytes before it.
pub fn write_header(w: &mut impl Write, recipe: &StoredRecipe) -> io::Result<u64> {
    let text = recipe.text();
    if text.len() > RECIPE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the recipe is longer than {RECIPE_MAX} bytes"),
        ));
    }
    let mut buf = Vec::with_capacity(24 + text.len());
    buf.extend_from_slice(&MAGIC);
    buf.push(FORMAT_VERSION);
    buf.push(super::NUMERICS_VERSION);
    match recipe {
        StoredRecipe::Text(_) => buf.push(FORM_TEXT),
        StoredRecipe::Level { model, level, .. } => {
            buf.extend_from_slice(&[FORM_LEVEL, *model, *level])
        }
    }
    varint::put(&mut buf, text.len() as u64);
    buf.extend_from_slice(text.as_bytes());
    if let StoredRecipe::Level { crc, .. } = recipe {
        buf.extend_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(buf.len() as u64)
}

/// Writes a version 1 header, as builds before version 2 did, with the numerics version byte
/// given: kept so that tests can make the old files this build must go on reading.
pub fn write_v1_header(w: &mut impl Write, numerics: u8, recipe_text: &str) -> io::Result<u64> {
    let mut buf = Vec::with_capacity(16 + recipe_text.len());
    buf.extend_from_slice(&MAGIC);
    buf.push(1);
    buf.push(numerics);
    buf.extend_from_slice(&0u16.to_le_bytes());
    buf.extend_from_slice(&(recipe_text.len() as u32).to_le_bytes());
    buf.extend_from_slice(recipe_text.as_bytes());
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(buf.len() as u64)
}

/// Reads and checks a header. The numerics version is returned, not judged: `info` shows it
/// for any file, and [`super::check_numerics`] refuses to decode a foreign one.
pub fn read_header(r: &mut impl Read) -> anyhow::Result<Header> {
    let mut first = [0u8; 4];
    read_exact_or(r, &mut first, "header")?;
    if first != MAGIC {
        return Err(FormatError::NotLmz.into());
    }
    read_header_after_magic(r)
}

/// Reads the header of the next member, or `None` when the stream ends cleanly (no byte
/// left). Bytes that do not start a member are [`FormatError::TrailingData`].
pub fn read_next_header(r: &mut impl Read) -> anyhow::Result<Option<Header>> {
    let mut first = [0u8; 4];
    let mut filled = 0;
    while filled < first.len() {
        match r.read(&mut first[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    match filled {
        0 => Ok(None),
        4 if first == MAGIC => read_header_after_magic(r).map(Some),
        _ => Err(FormatError::TrailingData.into()),
    }
}

fn bad(why: impl Into<String>) -> anyhow::Error {
    FormatError::BadHeader(why.into()).into()
}

fn read_header_after_magic(r: &mut impl Read) -> anyhow::Result<Header> {
    let mut seen = MAGIC.to_vec();
    let mut two = [0u8; 2];
    read_exact_or(r, &mut two, "header")?;
    seen.extend_from_slice(&two);
    let [format_version, numerics_version] = two;
    let (recipe, text_bytes) = match format_version {
        1 => read_v1_body(r, &mut seen)?,
        2 => read_v2_body(r, &mut seen)?,
        v => return Err(FormatError::UnsupportedFormat(v).into()),
    };
    debug_assert!((OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format_version));
    let stored_crc = read_u32(r, "header")?;
    if crc32fast::hash(&seen) != stored_crc {
        return Err(bad("header checksum mismatch"));
    }
    let text = String::from_utf8(text_bytes).map_err(|_| bad("recipe is not UTF-8"))?;
    let recipe = match recipe {
        Form::Text => StoredRecipe::Text(text),
        Form::Level { model, level, crc } => StoredRecipe::Level {
            model,
            level,
            edits: text,
            crc,
        },
    };
    Ok(Header {
        format_version,
        numerics_version,
        recipe,
        len: seen.len() as u64 + 4,
    })
}

/// A header's form before its text is checked as UTF-8.
enum Form {
    Text,
    Level { model: u8, level: u8, crc: u32 },
}

/// Reads a text of `len` bytes (bounded before allocating) into `seen` and returns it.
fn read_text(r: &mut impl Read, seen: &mut Vec<u8>, len: u64) -> anyhow::Result<Vec<u8>> {
    if len > RECIPE_MAX as u64 {
        return Err(bad(format!("recipe length {len} exceeds {RECIPE_MAX}")));
    }
    let mut text = vec![0u8; len as usize];
    read_exact_or(r, &mut text, "header")?;
    seen.extend_from_slice(&text);
    Ok(text)
}

/// Version 1 after the versions: flags (2, zero), recipe length (u32 LE), recipe text.
fn read_v1_body(r: &mut impl Read, seen: &mut Vec<u8>) -> anyhow::Result<(Form, Vec<u8>)> {
    let mut fixed = [0u8; 6];
    read_exact_or(r, &mut fixed, "header")?;
    seen.extend_from_slice(&fixed);
    if fixed[0] != 0 || fixed[1] != 0 {
        return Err(bad("unknown flags are set"));
    }
    let len = u32::from_le_bytes(fixed[2..6].try_into().unwrap());
    Ok((Form::Text, read_text(r, seen, len as u64)?))
}

/// Version 2 after the versions: form, (model, level), text length and text, (recipe CRC32).
fn read_v2_body(r: &mut impl Read, seen: &mut Vec<u8>) -> anyhow::Result<(Form, Vec<u8>)> {
    let mut form = [0u8; 1];
    read_exact_or(r, &mut form, "header")?;
    seen.push(form[0]);
    let level = match form[0] {
        FORM_TEXT => None,
        FORM_LEVEL => {
            let mut ml = [0u8; 2];
            read_exact_or(r, &mut ml, "header")?;
            seen.extend_from_slice(&ml);
            Some(ml)
        }
        other => return Err(bad(format!("unknown recipe form {other}"))),
    };
    let len = varint::read(r, seen, "header")?.map_err(bad)?;
    let text = read_text(r, seen, len)?;
    let form = match level {
        None => Form::Text,
        Some([model, level]) => {
            let crc = read_u32(r, "header")?;
            seen.extend_from_slice(&crc.to_le_bytes());
            Form::Level { model, level, crc }
        }
    };
    Ok((form, text))
}
