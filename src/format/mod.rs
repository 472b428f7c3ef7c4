//! The `.lmz` container (docs/format.md): a stream is a sequence of members; each member is a
//! header that carries the recipe, the coded data in frames of at most [`FRAME_MAX`] input bytes,
//! and a trailer with the member's length and CRC32. Members are independent, so concatenated
//! `.lmz` files form a valid stream that decodes to the concatenated inputs.
//!
//! Every length read from a file is checked against a bound before anything is allocated, and
//! every part carries a CRC32, so a damaged file fails with a [`FormatError`] that says where.
//!
//! Each member says its layout's version in its header: this build writes version 2 (compact
//! header, LEB128 lengths, stored frames) and reads versions 1 and 2, member by member.
//! [`header`] holds the headers, [`frame`] the frames and trailers, [`varint`] the lengths.

pub mod frame;
pub mod header;
pub mod varint;

use std::fmt;
use std::io::{self, Read, Seek};

pub use frame::{
    Body, Frame, Trailer, coded_frame_len, read_frame, read_trailer, stored_frame_len, write_end,
    write_frame, write_v1_end, write_v1_frame,
};
pub use header::{
    Header, StoredRecipe, read_header, read_next_header, write_header, write_v1_header,
};

/// First bytes of every `.lmz` file.
pub const MAGIC: [u8; 4] = *b"LMZ\x1a";
/// Version of the container layout this build writes.
pub const FORMAT_VERSION: u8 = 2;
/// The oldest layout this build reads.
pub const OLDEST_FORMAT_VERSION: u8 = 1;
/// Version of the computation: bumped whenever the bytes the encoder produces for a recipe
/// change (model math, quantisation, training order, what a level means).
pub const NUMERICS_VERSION: u8 = 18;
/// The oldest numerics version this build still computes. Versions 2 to 17 differ from 18 only
/// in what the levels mean (src/levels.rs, [`crate::levels::recipe_of`]: 17 without the
/// stage's 16-bit probability (`mix:fine`), 16 also without the
/// counters' long memory (`mix:long`) and levels 4–9's selector by the bits so far
/// (`mix:partial`), 15 also with the default's
/// tables at levels 4–9, 14 also without the
/// strings of binary data as text (`mix:strings`), 13 also without the
/// delta model (`mix:delta`), 12 also without the
/// stage's memory split above 64 KiB (`mix:split`), 11 also without the
/// mixer's settled last layer (`mix:settle`), 10 also without the
/// counters of a nibble in one cache line (`mix:nibble`), 9 also without the match
/// model's following of a broken match (`mix:follow`), 8 also with one network
/// for every input at levels 4–9 and no header numbers for seeded networks, 7 also without the mixer's
/// young weight sets, 6 also without the stage's warm start, 5 also without its text contexts, 4 also without the built-in prior, 3 also
/// without the network's context inputs, 2 also without three of the stage's components), so
/// their files decode.
pub const OLDEST_NUMERICS_VERSION: u8 = 2;
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
    BadTrailer(String),
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
                "unsupported format version {v} (this build reads versions \
                 {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
            FormatError::NumericsMismatch { file, build } => write!(
                f,
                "file was made with numerics version {file}; this build computes versions \
                 {OLDEST_NUMERICS_VERSION} to {build} and cannot reproduce its model ({})",
                which_release_decodes(*file)
            ),
            FormatError::Truncated(what) => write!(f, "file is truncated (in the {what})"),
            FormatError::BadHeader(why) => write!(f, "corrupt header: {why}"),
            FormatError::BadTrailer(why) => write!(f, "corrupt trailer: {why}"),
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
    if numerics < OLDEST_NUMERICS_VERSION {
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
pub(crate) fn read_exact_or(
    r: &mut impl Read,
    buf: &mut [u8],
    what: &'static str,
) -> anyhow::Result<()> {
    match r.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(FormatError::Truncated(what).into())
        }
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn read_u32(r: &mut impl Read, what: &'static str) -> anyhow::Result<u32> {
    let mut b = [0u8; 4];
    read_exact_or(r, &mut b, what)?;
    Ok(u32::from_le_bytes(b))
}

/// Refuses a file whose numerics this build does not compute.
pub fn check_numerics(header: &Header) -> Result<(), FormatError> {
    if !(OLDEST_NUMERICS_VERSION..=NUMERICS_VERSION).contains(&header.numerics_version) {
        return Err(FormatError::NumericsMismatch {
            file: header.numerics_version,
            build: NUMERICS_VERSION,
        });
    }
    Ok(())
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
    /// Frames that hold their input as it is.
    pub stored_frames: u64,
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
    let start = r.stream_position()? - header.len;
    let mut frames = 0u64;
    let mut stored = 0u64;
    let mut raw_len = 0u64;
    while let Some(head) = frame::read_head(r, header.format_version, frames)? {
        // The payload, then the frame's CRC32. Seeking past the end is allowed by the OS; the
        // next read then finds the truncation.
        r.seek_relative(head.rest_len() as i64)?;
        raw_len += head.raw_len as u64;
        stored += head.words.is_none() as u64;
        frames += 1;
    }
    let trailer = read_trailer(r, header.format_version)?;
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
        stored_frames: stored,
        raw_len,
        stream_len,
        trailer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_recipe() -> StoredRecipe {
        StoredRecipe::Text("{\"x\":1}".into())
    }

    fn level_recipe() -> StoredRecipe {
        StoredRecipe::Level {
            model: 1,
            level: 3,
            edits: "mix:table=18".into(),
            crc: 0x1234_5678,
        }
    }

    /// A member of version 2 with a coded and a stored frame.
    fn sample_with(recipe: &StoredRecipe) -> Vec<u8> {
        let mut f = Vec::new();
        write_header(&mut f, recipe).unwrap();
        write_frame(&mut f, 3, &Body::Coded(vec![1, 2])).unwrap();
        write_frame(&mut f, 2, &Body::Stored(vec![7, 8])).unwrap();
        write_end(&mut f, 5, 0xDEAD_BEEF).unwrap();
        f
    }

    fn sample() -> Vec<u8> {
        sample_with(&level_recipe())
    }

    /// A member of version 1, as earlier builds wrote it.
    fn sample_v1() -> Vec<u8> {
        let mut f = Vec::new();
        write_v1_header(&mut f, NUMERICS_VERSION, "{\"x\":1}").unwrap();
        write_v1_frame(&mut f, 3, &[1, 2]).unwrap();
        write_v1_end(&mut f, 3, 0xDEAD_BEEF).unwrap();
        f
    }

    /// Reads a whole member; the trailer must be the one written.
    fn parse(b: &[u8], total: u64) -> anyhow::Result<(Header, Vec<Frame>)> {
        let mut r = b;
        let h = read_header(&mut r)?;
        let mut frames = Vec::new();
        while let Some(f) = read_frame(&mut r, h.format_version, frames.len() as u64)? {
            frames.push(f);
        }
        let t = read_trailer(&mut r, h.format_version)?;
        anyhow::ensure!(
            t.total_len == total && t.crc == 0xDEAD_BEEF,
            "trailer changed"
        );
        anyhow::ensure!(r.is_empty(), "bytes left");
        Ok((h, frames))
    }

    #[test]
    fn parts_read_back_in_both_versions() {
        for recipe in [text_recipe(), level_recipe()] {
            let f = sample_with(&recipe);
            let (h, frames) = parse(&f, 5).unwrap();
            assert_eq!((h.format_version, &h.recipe), (2, &recipe));
            let bodies: Vec<_> = frames.iter().map(|f| (f.raw_len, f.body.clone())).collect();
            assert_eq!(
                bodies,
                vec![(3, Body::Coded(vec![1, 2])), (2, Body::Stored(vec![7, 8]))]
            );
        }
        let (h, frames) = parse(&sample_v1(), 3).unwrap();
        assert_eq!((h.format_version, h.recipe), (1, text_recipe()));
        assert_eq!(h.len, 16 + 7);
        assert_eq!(frames[0].body, Body::Coded(vec![1, 2]));
    }

    #[test]
    fn a_version_2_member_is_small() {
        let mut f = Vec::new();
        let empty_level = StoredRecipe::Level {
            model: 1,
            level: 3,
            edits: String::new(),
            crc: 0,
        };
        let header = write_header(&mut f, &empty_level).unwrap();
        let end = write_end(&mut f, 0, 0).unwrap();
        assert_eq!((header, end, f.len()), (18, 6, 24));
        assert_eq!(read_header(&mut &f[..]).unwrap().len, header);
        assert_eq!(coded_frame_len(100, 20), 1 + 1 + 1 + 80 + 4);
        assert_eq!(stored_frame_len(FRAME_MAX), 3 + 1 + FRAME_MAX + 4);
    }

    #[test]
    fn every_truncation_and_flip_is_an_error() {
        for (f, total) in [
            (sample(), 5),
            (sample_with(&text_recipe()), 5),
            (sample_v1(), 3),
        ] {
            parse(&f, total).unwrap();
            for n in 0..f.len() {
                assert!(parse(&f[..n], total).is_err(), "truncated to {n}");
            }
            for bit in 0..f.len() * 8 {
                let mut g = f.clone();
                g[bit / 8] ^= 1 << (bit % 8);
                assert!(parse(&g, total).is_err(), "bit {bit}");
            }
        }
    }

    #[test]
    fn unknown_versions_forms_and_modes_are_named() {
        let f = sample();
        let mut g = f.clone();
        g[4] = 3;
        let err = read_header(&mut &g[..]).unwrap_err().to_string();
        assert!(err.contains("unsupported format version 3"), "{err}");
        let mut g = f.clone();
        g[6] = 9;
        let err = read_header(&mut &g[..]).unwrap_err().to_string();
        assert!(err.contains("unknown recipe form 9"), "{err}");
        let mut frame = Vec::new();
        write_frame(&mut frame, 2, &Body::Stored(vec![7, 8])).unwrap();
        frame[1] = 5;
        let err = read_frame(&mut &frame[..], 2, 0).err().unwrap().to_string();
        assert!(err.contains("unknown frame mode 5"), "{err}");
    }

    #[test]
    fn scan_describes_a_stream_and_refuses_truncations() {
        for f in [sample(), sample_v1()] {
            let layout = scan(&mut io::Cursor::new(&f)).unwrap();
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
        let layout = scan(&mut io::Cursor::new(&sample())).unwrap();
        assert_eq!(layout.header.recipe, level_recipe());
        assert_eq!(
            (layout.frames, layout.stored_frames, layout.raw_len),
            (2, 1, 5)
        );
    }

    #[test]
    fn members_of_either_version_follow_one_another_and_junk_after_one_is_refused() {
        let (f, old) = (sample(), sample_v1());
        let two = [&f[..], &old[..], &f[..]].concat();
        let layouts = scan_members(&mut io::Cursor::new(&two)).unwrap();
        assert_eq!(layouts.len(), 3);
        assert_eq!(layouts[1].stream_len, old.len() as u64);
        assert_eq!(layouts[1].header.format_version, 1);
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
    fn the_numerics_versions_this_build_computes_are_accepted() {
        let mut f = Vec::new();
        write_header(&mut f, &text_recipe()).unwrap();
        let mut header = read_header(&mut &f[..]).unwrap();
        for (numerics, ok) in [
            (OLDEST_NUMERICS_VERSION - 1, false),
            (OLDEST_NUMERICS_VERSION, true),
            (NUMERICS_VERSION, true),
            (NUMERICS_VERSION + 1, false),
        ] {
            header.numerics_version = numerics;
            assert_eq!(check_numerics(&header).is_ok(), ok, "{numerics}");
        }
    }

    #[test]
    fn a_foreign_numerics_version_names_the_build_that_decodes_it() {
        let old = FormatError::NumericsMismatch {
            file: OLDEST_NUMERICS_VERSION - 1,
            build: NUMERICS_VERSION,
        }
        .to_string();
        assert!(
            old.contains(&format!(
                "`lmzip --version` shows numerics version {}",
                OLDEST_NUMERICS_VERSION - 1
            )),
            "{old}"
        );
        let new = which_release_decodes(NUMERICS_VERSION + 1);
        assert!(new.starts_with("a newer lmzip build"), "{new}");
    }

    #[test]
    fn lying_lengths_are_refused_before_allocating() {
        let mut f = Vec::new();
        write_header(&mut f, &text_recipe()).unwrap();
        varint::put(&mut f, FRAME_MAX as u64);
        f.push(0);
        varint::put(&mut f, u32::MAX as u64);
        let mut r = &f[..];
        read_header(&mut r).unwrap();
        let err = read_frame(&mut r, 2, 0).err().unwrap().to_string();
        assert!(err.contains("cannot code"), "{err}");
        let mut f = Vec::new();
        varint::put(&mut f, FRAME_MAX as u64 + 1);
        let err = read_frame(&mut &f[..], 2, 0).err().unwrap().to_string();
        assert!(err.contains("exceeds"), "{err}");
    }
}
