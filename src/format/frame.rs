//! Frames, end marker and trailer of both format versions (docs/format.md). Version 2 gives
//! lengths as LEB128 and lets a frame hold its input as it is ("stored") when coding would
//! make it longer, so incompressible data grows by a few bytes per frame, not by the model's
//! excess over 8 bits a byte.

use std::io::{self, Read, Write};

use super::{FRAME_MAX, FormatError, max_words, read_exact_or, read_u32, varint};

/// Mode bytes of a version 2 frame.
const MODE_CODED: u8 = 0;
const MODE_STORED: u8 = 1;

/// What a frame holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The range coder's words.
    Coded(Vec<u32>),
    /// The input bytes themselves (format version 2 only). The decoder still runs the model
    /// over them, so that it learns what the encoder learnt.
    Stored(Vec<u8>),
}

impl Body {
    /// Bytes of the frame besides its length, mode, word count and checksum.
    pub fn payload_len(&self) -> usize {
        match self {
            Body::Coded(words) => 4 * words.len(),
            Body::Stored(bytes) => bytes.len(),
        }
    }
}

/// One frame as read: how many bytes it decodes to, and what it holds.
pub struct Frame {
    pub raw_len: usize,
    pub body: Body,
}

/// Writes a version 2 frame; returns its length. Layout: input length (LEB128, 1..=FRAME_MAX),
/// mode (0 coded, 1 stored); coded: word count (LEB128) and the words (u32 LE each); stored:
/// the input bytes; then the CRC32 of the frame's preceding bytes.
pub fn write_frame(w: &mut impl Write, raw_len: usize, body: &Body) -> io::Result<u64> {
    debug_assert!(raw_len > 0 && raw_len <= FRAME_MAX);
    let mut buf = Vec::with_capacity(16 + body.payload_len());
    varint::put(&mut buf, raw_len as u64);
    match body {
        Body::Coded(words) => {
            debug_assert!(words.len() <= max_words(raw_len));
            buf.push(MODE_CODED);
            varint::put(&mut buf, words.len() as u64);
            for word in words {
                buf.extend_from_slice(&word.to_le_bytes());
            }
        }
        Body::Stored(bytes) => {
            debug_assert_eq!(bytes.len(), raw_len);
            buf.push(MODE_STORED);
            buf.extend_from_slice(bytes);
        }
    }
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(buf.len() as u64)
}

/// Bytes a version 2 frame of `raw_len` input bytes and `words` coded words takes.
pub fn coded_frame_len(raw_len: usize, words: usize) -> usize {
    varint::len(raw_len as u64) + 1 + varint::len(words as u64) + 4 * words + 4
}

/// Bytes a version 2 frame storing `raw_len` input bytes takes.
pub fn stored_frame_len(raw_len: usize) -> usize {
    varint::len(raw_len as u64) + 1 + raw_len + 4
}

/// Writes a version 1 frame (coded words only), for tests that make old files.
pub fn write_v1_frame(w: &mut impl Write, raw_len: usize, words: &[u32]) -> io::Result<u64> {
    let mut buf = Vec::with_capacity(12 + 4 * words.len());
    buf.extend_from_slice(&(raw_len as u32).to_le_bytes());
    buf.extend_from_slice(&(words.len() as u32).to_le_bytes());
    for word in words {
        buf.extend_from_slice(&word.to_le_bytes());
    }
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(buf.len() as u64)
}

/// A frame's fields before its payload, checked against their bounds.
pub(super) struct FrameHead {
    pub raw_len: usize,
    /// `Some(n)`: coded in `n` words; `None`: stored.
    pub words: Option<usize>,
    /// The bytes read so far, for the frame's checksum.
    pub seen: Vec<u8>,
}

impl FrameHead {
    /// Bytes of payload and checksum after the head.
    pub fn rest_len(&self) -> u64 {
        self.words.map_or(self.raw_len, |n| 4 * n) as u64 + 4
    }
}

/// Reads a frame's head in the layout of `version`, or `None` at the end marker.
pub(super) fn read_head(
    r: &mut impl Read,
    version: u8,
    index: u64,
) -> anyhow::Result<Option<FrameHead>> {
    let bad = |why: String| FormatError::BadFrame { index, why };
    let mut seen = Vec::with_capacity(16);
    let (raw_len, words) = if version == 1 {
        let raw_len = read_u32(r, "frame list")? as u64;
        seen.extend_from_slice(&(raw_len as u32).to_le_bytes());
        if raw_len == 0 {
            return Ok(None);
        }
        check_len(raw_len).map_err(bad)?;
        let n = read_u32(r, "frame")?;
        seen.extend_from_slice(&n.to_le_bytes());
        (raw_len as usize, Some(n as u64))
    } else {
        let raw_len = varint::read(r, &mut seen, "frame list")?.map_err(|e| bad(e.into()))?;
        if raw_len == 0 {
            return Ok(None);
        }
        check_len(raw_len).map_err(bad)?;
        let mut mode = [0u8; 1];
        read_exact_or(r, &mut mode, "frame")?;
        seen.push(mode[0]);
        let words = match mode[0] {
            MODE_CODED => Some(varint::read(r, &mut seen, "frame")?.map_err(|e| bad(e.into()))?),
            MODE_STORED => None,
            other => return Err(bad(format!("unknown frame mode {other}")).into()),
        };
        (raw_len as usize, words)
    };
    if let Some(n) = words
        && n > max_words(raw_len) as u64
    {
        return Err(bad(format!("{n} words cannot code {raw_len} bytes")).into());
    }
    Ok(Some(FrameHead {
        raw_len,
        words: words.map(|n| n as usize),
        seen,
    }))
}

fn check_len(raw_len: u64) -> Result<(), String> {
    match raw_len > FRAME_MAX as u64 {
        true => Err(format!("length {raw_len} exceeds {FRAME_MAX}")),
        false => Ok(()),
    }
}

/// Reads the next frame in the layout of `version`, or `None` at the end marker.
pub fn read_frame(r: &mut impl Read, version: u8, index: u64) -> anyhow::Result<Option<Frame>> {
    let Some(head) = read_head(r, version, index)? else {
        return Ok(None);
    };
    let mut payload = vec![0u8; head.rest_len() as usize - 4];
    read_exact_or(r, &mut payload, "frame")?;
    let stored_crc = read_u32(r, "frame")?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&head.seen);
    hasher.update(&payload);
    if hasher.finalize() != stored_crc {
        let why = "frame checksum mismatch".to_string();
        return Err(FormatError::BadFrame { index, why }.into());
    }
    let body = match head.words {
        Some(_) => Body::Coded(
            payload
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        None => Body::Stored(payload),
    };
    Ok(Some(Frame {
        raw_len: head.raw_len,
        body,
    }))
}

/// Writes the version 2 end marker and trailer; returns their length: a zero frame length
/// (one byte), the input's length (LEB128) and its CRC32.
pub fn write_end(w: &mut impl Write, total_len: u64, crc: u32) -> io::Result<u64> {
    let mut buf = vec![0u8];
    varint::put(&mut buf, total_len);
    buf.extend_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(buf.len() as u64)
}

/// Writes the version 1 end marker and trailer (u32 zero, u64 length, CRC32), for tests.
pub fn write_v1_end(w: &mut impl Write, total_len: u64, crc: u32) -> io::Result<u64> {
    let mut buf = [0u8; 16];
    buf[4..12].copy_from_slice(&total_len.to_le_bytes());
    buf[12..16].copy_from_slice(&crc.to_le_bytes());
    w.write_all(&buf)?;
    Ok(16)
}

/// The trailer after the end marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    pub total_len: u64,
    pub crc: u32,
    /// Bytes it took (the end marker not counted).
    pub len: u64,
}

/// Reads a member's trailer in the layout of `version` (the end marker is already consumed).
/// Another member may follow.
pub fn read_trailer(r: &mut impl Read, version: u8) -> anyhow::Result<Trailer> {
    if version == 1 {
        let mut buf = [0u8; 12];
        read_exact_or(r, &mut buf, "trailer")?;
        return Ok(Trailer {
            total_len: u64::from_le_bytes(buf[..8].try_into().unwrap()),
            crc: u32::from_le_bytes(buf[8..].try_into().unwrap()),
            len: 12,
        });
    }
    let mut seen = Vec::new();
    let total_len =
        varint::read(r, &mut seen, "trailer")?.map_err(|e| FormatError::BadTrailer(e.into()))?;
    let crc = read_u32(r, "trailer")?;
    Ok(Trailer {
        total_len,
        crc,
        len: seen.len() as u64 + 4,
    })
}
