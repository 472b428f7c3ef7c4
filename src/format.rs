//! The `.lmz` container (docs/format.md): a stream is a sequence of members; each member is a
//! header that carries the recipe, the coded data in frames of at most [`FRAME_MAX`] input bytes,
//! and a trailer with the member's length and CRC32. Members are independent, so concatenated
//! `.lmz` files form a valid stream that decodes to the concatenated inputs.
//!
//! Every length read from a file is checked against a bound before anything is allocated, and
//! every part carries a CRC32, so a damaged file fails with a [`FormatError`] that says where.

use std::fmt;
use std::io::{self, Read, Seek, Write};

/// First bytes of every `.lmz` file.
pub const MAGIC: [u8; 4] = *b"LMZ\x1a";
/// Version of the container layout.
pub const FORMAT_VERSION: u8 = 1;
/// Version of the computation: bumped whenever the bytes the encoder produces for a recipe
/// change (model math, quantisation, training order). A file decodes only with the same version.
pub const NUMERICS_VERSION: u8 = 2;
/// Input bytes per frame. A frame is coded as a whole, so this bounds memory on both sides.
pub const FRAME_MAX: usize = 1 << 20;
/// Largest accepted recipe text.
pub const RECIPE_MAX: usize = 1 << 16;

/// Largest number of 32-bit words a frame of `raw_len` bytes can take: every byte costs at most
/// 24 bits (its frequency is at least 1 in 2^24), and the coder flushes at most two words.
pub fn max_words(raw_len: usize) -> usize {
    (raw_len * 24).div_ceil(32) + 2
}

/// What is wrong with a file that does not decode.
#[derive(Debug)]
pub enum FormatError {
    NotLmz,
    UnsupportedFormat(u8),
    NumericsMismatch {
        file: u8,
        build: u8,
    },
    Truncated(&'static str),
    BadHeader(String),
    BadFrame {
        index: u64,
        why: String,
    },
    LengthMismatch {
        trailer: u64,
        decoded: u64,
    },
    ChecksumMismatch {
        expected: u32,
        actual: u32,
    },
    /// Bytes after a member that do not start another member.
    TrailingData,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::NotLmz => write!(f, "not an lmzip file (bad magic number)"),
            FormatError::UnsupportedFormat(v) => write!(
                f,
                "unsupported format version {v} (this build reads version {FORMAT_VERSION})"
            ),
            FormatError::NumericsMismatch { file, build } => write!(
                f,
                "file was made with numerics version {file}; this build computes version {build} \
                 and cannot reproduce its model ({})",
                which_release_decodes(*file)
            ),
            FormatError::Truncated(what) => write!(f, "file is truncated (in the {what})"),
            FormatError::BadHeader(why) => write!(f, "corrupt header: {why}"),
            FormatError::BadFrame { index, why } => write!(f, "corrupt frame {index}: {why}"),
            FormatError::LengthMismatch { trailer, decoded } => write!(
                f,
                "corrupt file: trailer says {trailer} bytes but {decoded} were decoded"
            ),
            FormatError::ChecksumMismatch { expected, actual } => write!(
                f,
                "checksum mismatch: the decoded data has CRC32 {actual:08x} but the trailer stores \
                 {expected:08x}; the data or the stored checksum is damaged"
            ),
            FormatError::TrailingData => write!(
                f,
                "corrupt file: data after the end of a member that is not another lmzip member"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Which builds decode files of a numerics version (docs/determinism.md keeps the history).
pub fn which_release_decodes(numerics: u8) -> String {
    let history = "docs/determinism.md, \"Numerics versions\"";
    if numerics < NUMERICS_VERSION {
        format!(
            "an earlier lmzip build, one whose `lmzip --version` shows numerics version \
             {numerics}, decodes it; see {history}"
        )
    } else {
        format!(
            "a newer lmzip build, one whose `lmzip --version` shows numerics version \
             {numerics}, decodes it"
        )
    }
}

/// Reads exactly `buf.len()` bytes, turning an early end into [`FormatError::Truncated`].
fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> anyhow::Result<()> {
    match r.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(FormatError::Truncated(what).into())
        }
        Err(e) => Err(e.into()),
    }
}

fn read_u32(r: &mut impl Read, what: &'static str) -> anyhow::Result<u32> {
    let mut b = [0u8; 4];
    read_exact_or(r, &mut b, what)?;
    Ok(u32::from_le_bytes(b))
}

/// The parsed header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub numerics_version: u8,
    /// The recipe's canonical text (see [`crate::recipe::Recipe::parse`]).
    pub recipe: String,
}

/// Header layout: magic (4), format version (1), numerics version (1), flags (2, zero),
/// recipe length (u32 LE), recipe (UTF-8 text), CRC32 of all the preceding header bytes.
pub fn write_header(w: &mut impl Write, recipe_text: &str) -> io::Result<()> {
    if recipe_text.len() > RECIPE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the recipe is longer than {RECIPE_MAX} bytes"),
        ));
    }
    let mut buf = Vec::with_capacity(16 + recipe_text.len());
    buf.extend_from_slice(&MAGIC);
    buf.push(FORMAT_VERSION);
    buf.push(NUMERICS_VERSION);
    buf.extend_from_slice(&0u16.to_le_bytes());
    buf.extend_from_slice(&(recipe_text.len() as u32).to_le_bytes());
    buf.extend_from_slice(recipe_text.as_bytes());
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)
}

/// Reads and checks a header. The numerics version is returned, not judged: `info` shows it
/// for any file, and [`check_numerics`] refuses to decode a foreign one.
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

fn read_header_after_magic(r: &mut impl Read) -> anyhow::Result<Header> {
    let mut fixed = [0u8; 12];
    fixed[..4].copy_from_slice(&MAGIC);
    read_exact_or(r, &mut fixed[4..], "header")?;
    if fixed[4] != FORMAT_VERSION {
        return Err(FormatError::UnsupportedFormat(fixed[4]).into());
    }
    let numerics_version = fixed[5];
    if fixed[6] != 0 || fixed[7] != 0 {
        return Err(FormatError::BadHeader("unknown flags are set".into()).into());
    }
    let len = u32::from_le_bytes(fixed[8..12].try_into().unwrap()) as usize;
    if len > RECIPE_MAX {
        return Err(
            FormatError::BadHeader(format!("recipe length {len} exceeds {RECIPE_MAX}")).into(),
        );
    }
    let mut recipe = vec![0u8; len];
    read_exact_or(r, &mut recipe, "header")?;
    let stored_crc = read_u32(r, "header")?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&fixed);
    hasher.update(&recipe);
    if hasher.finalize() != stored_crc {
        return Err(FormatError::BadHeader("header checksum mismatch".into()).into());
    }
    let recipe = String::from_utf8(recipe)
        .map_err(|_| FormatError::BadHeader("recipe is not UTF-8".into()))?;
    Ok(Header {
        numerics_version,
        recipe,
    })
}

/// Refuses a file whose numerics this build does not compute.
pub fn check_numerics(header: &Header) -> Result<(), FormatError> {
    if header.numerics_version != NUMERICS_VERSION {
        return Err(FormatError::NumericsMismatch {
            file: header.numerics_version,
            build: NUMERICS_VERSION,
        });
    }
    Ok(())
}

/// Frame layout: input length (u32 LE, 1..=FRAME_MAX), word count (u32 LE), the coder's words
/// (u32 LE each), CRC32 of the frame's preceding bytes. An input length of 0 ends the frames.
pub fn write_frame(w: &mut impl Write, raw_len: usize, words: &[u32]) -> io::Result<()> {
    debug_assert!(raw_len > 0 && raw_len <= FRAME_MAX && words.len() <= max_words(raw_len));
    let mut buf = Vec::with_capacity(12 + 4 * words.len());
    buf.extend_from_slice(&(raw_len as u32).to_le_bytes());
    buf.extend_from_slice(&(words.len() as u32).to_le_bytes());
    for word in words {
        buf.extend_from_slice(&word.to_le_bytes());
    }
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)
}

/// One frame as read: how many bytes it decodes to and the coder's words.
pub struct Frame {
    pub raw_len: usize,
    pub words: Vec<u32>,
}

/// Reads a frame's two length fields and checks them against their bounds: `(raw_len, n_words)`,
/// or `None` at the end marker.
fn read_frame_lengths(r: &mut impl Read, index: u64) -> anyhow::Result<Option<(usize, usize)>> {
    let raw_len = read_u32(r, "frame list")? as usize;
    if raw_len == 0 {
        return Ok(None);
    }
    let bad = |why: String| FormatError::BadFrame { index, why };
    if raw_len > FRAME_MAX {
        return Err(bad(format!("length {raw_len} exceeds {FRAME_MAX}")).into());
    }
    let n_words = read_u32(r, "frame")? as usize;
    if n_words > max_words(raw_len) {
        return Err(bad(format!("{n_words} words cannot code {raw_len} bytes")).into());
    }
    Ok(Some((raw_len, n_words)))
}

/// Reads the next frame, or `None` at the end marker.
pub fn read_frame(r: &mut impl Read, index: u64) -> anyhow::Result<Option<Frame>> {
    let Some((raw_len, n_words)) = read_frame_lengths(r, index)? else {
        return Ok(None);
    };
    let bad = |why: String| FormatError::BadFrame { index, why };
    let mut bytes = vec![0u8; 4 * n_words];
    read_exact_or(r, &mut bytes, "frame")?;
    let stored_crc = read_u32(r, "frame")?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&(raw_len as u32).to_le_bytes());
    hasher.update(&(n_words as u32).to_le_bytes());
    hasher.update(&bytes);
    if hasher.finalize() != stored_crc {
        return Err(bad("frame checksum mismatch".into()).into());
    }
    let words = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    Ok(Some(Frame { raw_len, words }))
}

/// End marker and trailer: a zero frame length, then the input's length (u64 LE) and CRC32.
pub fn write_end(w: &mut impl Write, total_len: u64, crc: u32) -> io::Result<()> {
    let mut buf = [0u8; 16];
    buf[4..12].copy_from_slice(&total_len.to_le_bytes());
    buf[12..16].copy_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)
}

/// The trailer after the end marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    pub total_len: u64,
    pub crc: u32,
}

/// Reads a member's trailer (the end marker is already consumed). Another member may follow.
pub fn read_trailer(r: &mut impl Read) -> anyhow::Result<Trailer> {
    let mut buf = [0u8; 12];
    read_exact_or(r, &mut buf, "trailer")?;
    Ok(Trailer {
        total_len: u64::from_le_bytes(buf[..8].try_into().unwrap()),
        crc: u32::from_le_bytes(buf[8..].try_into().unwrap()),
    })
}

/// Checks that nothing follows: the end of a stream of exactly one member.
fn expect_end(r: &mut impl Read) -> anyhow::Result<()> {
    let mut extra = [0u8; 1];
    loop {
        match r.read(&mut extra) {
            Ok(0) => return Ok(()),
            Ok(_) => return Err(FormatError::TrailingData.into()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The structure of one member, found without decoding it (see [`scan_members`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub header: Header,
    pub frames: u64,
    /// The trailer's uncompressed length; it equals the sum of the frames' lengths.
    pub raw_len: u64,
    /// Length of the whole member, header to trailer.
    pub stream_len: u64,
    pub trailer: Trailer,
}

/// Walks the header, frame lengths and trailer of a stream of exactly one member (nothing may
/// follow it), seeking over the coded words; see [`scan_members`] for any stream.
pub fn scan<R: Read + Seek>(r: &mut R) -> anyhow::Result<Layout> {
    let header = read_header(r)?;
    let layout = scan_member(r, header)?;
    expect_end(r)?;
    Ok(layout)
}

/// Walks every member of a stream, seeking over the coded words, so that a file can be
/// described (`lmzip info`, `lmzip -l`) without running its model. Headers are checked; the
/// frames' checksums are not (their words are never read): only decoding proves a file intact.
/// An error names the member (counted from 1) it was found in.
pub fn scan_members<R: Read + Seek>(r: &mut R) -> anyhow::Result<Vec<Layout>> {
    use anyhow::Context;
    let mut members = Vec::new();
    loop {
        let number = members.len() + 1;
        // The first member is not named: most streams have only that one.
        let header = if number == 1 {
            Some(read_header(r)?)
        } else {
            read_next_header(r).with_context(|| format!("member {number}"))?
        };
        let Some(header) = header else {
            return Ok(members);
        };
        let layout = if number == 1 {
            scan_member(r, header)?
        } else {
            scan_member(r, header).with_context(|| format!("member {number}"))?
        };
        members.push(layout);
    }
}

/// Walks one member's frames and trailer; its header is read already.
fn scan_member<R: Read + Seek>(r: &mut R, header: Header) -> anyhow::Result<Layout> {
    let header_len = 16 + header.recipe.len() as u64;
    let start = r.stream_position()? - header_len;
    let mut frames = 0u64;
    let mut raw_len = 0u64;
    while let Some((len, n_words)) = read_frame_lengths(r, frames)? {
        // The words, then the frame's CRC32. Seeking past the end is allowed by the OS; the
        // next read then finds the truncation.
        r.seek_relative(4 * n_words as i64 + 4)?;
        raw_len += len as u64;
        frames += 1;
    }
    let trailer = read_trailer(r)?;
    if trailer.total_len != raw_len {
        return Err(FormatError::LengthMismatch {
            trailer: trailer.total_len,
            decoded: raw_len,
        }
        .into());
    }
    let stream_len = r.stream_position()? - start;
    Ok(Layout {
        header,
        frames,
        raw_len,
        stream_len,
        trailer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut f = Vec::new();
        write_header(&mut f, "{\"x\":1}").unwrap();
        write_frame(&mut f, 3, &[1, 2]).unwrap();
        write_end(&mut f, 3, 0xDEAD_BEEF).unwrap();
        f
    }

    #[test]
    fn parts_read_back() {
        let f = sample();
        let mut r = &f[..];
        let h = read_header(&mut r).unwrap();
        assert_eq!(h.recipe, "{\"x\":1}");
        let frame = read_frame(&mut r, 0).unwrap().unwrap();
        assert_eq!((frame.raw_len, frame.words), (3, vec![1, 2]));
        assert!(read_frame(&mut r, 1).unwrap().is_none());
        let t = read_trailer(&mut r).unwrap();
        assert_eq!((t.total_len, t.crc), (3, 0xDEAD_BEEF));
    }

    #[test]
    fn every_truncation_and_flip_is_an_error() {
        let f = sample();
        let parse = |b: &[u8]| -> anyhow::Result<()> {
            let mut r = b;
            read_header(&mut r)?;
            let mut i = 0;
            while read_frame(&mut r, i)?.is_some() {
                i += 1;
            }
            let t = read_trailer(&mut r)?;
            anyhow::ensure!(t.total_len == 3 && t.crc == 0xDEAD_BEEF, "trailer changed");
            Ok(())
        };
        parse(&f).unwrap();
        for n in 0..f.len() {
            assert!(parse(&f[..n]).is_err(), "truncated to {n}");
        }
        for bit in 0..f.len() * 8 {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            assert!(parse(&g).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn scan_describes_a_stream_and_refuses_truncations() {
        let f = sample();
        let layout = scan(&mut io::Cursor::new(&f)).unwrap();
        assert_eq!(layout.header.recipe, "{\"x\":1}");
        assert_eq!((layout.frames, layout.raw_len), (1, 3));
        assert_eq!(layout.stream_len, f.len() as u64);
        assert_eq!(layout.trailer.crc, 0xDEAD_BEEF);
        for n in 0..f.len() {
            assert!(
                scan(&mut io::Cursor::new(&f[..n])).is_err(),
                "truncated to {n}"
            );
        }
        let mut longer = f.clone();
        longer.push(0);
        assert!(scan(&mut io::Cursor::new(&longer)).is_err());
    }

    #[test]
    fn members_follow_one_another_and_junk_after_one_is_refused() {
        let f = sample();
        let two = [&f[..], &f[..]].concat();
        let layouts = scan_members(&mut io::Cursor::new(&two)).unwrap();
        assert_eq!(layouts.len(), 2);
        assert_eq!(layouts[1].stream_len, f.len() as u64);
        assert!(
            scan(&mut io::Cursor::new(&two)).is_err(),
            "scan takes one member"
        );
        let mut r = &two[f.len()..];
        assert!(read_next_header(&mut r).unwrap().is_some());
        assert!(read_next_header(&mut &[][..]).unwrap().is_none());
        for junk in [&b"L"[..], b"LMZ", b"\0\0\0\0", b"LMZ\x1b"] {
            let err = scan_members(&mut io::Cursor::new([&f[..], junk].concat())).unwrap_err();
            assert!(format!("{err:#}").starts_with("member 2: "), "{err:#}");
        }
    }

    #[test]
    fn a_foreign_numerics_version_names_the_build_that_decodes_it() {
        let old = FormatError::NumericsMismatch {
            file: NUMERICS_VERSION - 1,
            build: NUMERICS_VERSION,
        }
        .to_string();
        assert!(
            old.contains(&format!(
                "`lmzip --version` shows numerics version {}",
                NUMERICS_VERSION - 1
            )),
            "{old}"
        );
        let new = which_release_decodes(NUMERICS_VERSION + 1);
        assert!(new.starts_with("a newer lmzip build"), "{new}");
    }

    #[test]
    fn lying_lengths_are_refused_before_allocating() {
        let mut f = Vec::new();
        write_header(&mut f, "{}").unwrap();
        f.extend_from_slice(&(FRAME_MAX as u32).to_le_bytes());
        f.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut r = &f[..];
        read_header(&mut r).unwrap();
        let err = read_frame(&mut r, 0).err().unwrap().to_string();
        assert!(err.contains("cannot code"), "{err}");
    }
}
