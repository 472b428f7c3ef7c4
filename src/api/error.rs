//! The library's one error type, and its translation from the codec's errors (which carry a
//! typed cause somewhere in an `anyhow` chain, with context around it).

use std::fmt;
use std::io;

use crate::format::FormatError;
use crate::modelfile::WeightsError;
use crate::recipe::{RecipeError, UnresolvedPercent};

/// What went wrong in a compression or a decompression.
///
/// Every variant but [`Error::Io`] carries the whole message, context included (for a stream
/// of several members, which member and frame), as the command-line tool prints it.
///
/// ```
/// let err = lmzip::decompress(b"not an lmzip stream").unwrap_err();
/// assert!(matches!(err, lmzip::Error::NotLmzip));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading the input or writing the output failed.
    Io(io::Error),
    /// The data does not begin as an lmzip stream does (its magic number is wrong).
    NotLmzip,
    /// The stream ends before one of its parts does.
    Truncated(String),
    /// The stream is damaged: a header, a frame or a trailer fails its checks, or bytes
    /// that are not another member follow a member.
    Corrupt(String),
    /// The data decoded, but its CRC32 is not the one the trailer stores: the data or the
    /// stored checksum is damaged.
    ChecksumMismatch {
        /// The CRC32 the trailer stores.
        expected: u32,
        /// The CRC32 of the decoded data.
        actual: u32,
    },
    /// The stream was written by a build with another format or numerics version; the
    /// message says which build decodes it.
    Unsupported(String),
    /// A model file is needed and missing, is not the one the stream names, or does not load.
    ModelFile(String),
    /// Decoding a member needs more memory than [`crate::Options::memory_limit`] allows;
    /// nothing was allocated for it.
    MemoryLimit {
        /// What the member needs, in bytes (its model, its stage and one frame's buffers).
        needed: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The options do not describe a compression this build can run (a level out of range,
    /// a recipe that does not parse, sizes too large, an announced length that was wrong…).
    InvalidOptions(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::NotLmzip => f.write_str(&FormatError::NotLmz.to_string()),
            Error::ChecksumMismatch { expected, actual } => write!(
                f,
                "{}",
                FormatError::ChecksumMismatch {
                    expected: *expected,
                    actual: *actual
                }
            ),
            Error::MemoryLimit { needed, limit } => write!(
                f,
                "{}",
                crate::codec::MemoryLimit {
                    needed: *needed,
                    limit: *limit
                }
            ),
            Error::Truncated(m)
            | Error::Corrupt(m)
            | Error::Unsupported(m)
            | Error::ModelFile(m)
            | Error::InvalidOptions(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// An `Error` goes through `Read` and `Write` as the payload of an [`io::Error`] (kind
/// `InvalidData`, or `InvalidInput` for options); [`Error::Io`] as its own I/O error.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            Error::InvalidOptions(_) => io::Error::new(io::ErrorKind::InvalidInput, e),
            e => io::Error::new(io::ErrorKind::InvalidData, e),
        }
    }
}

/// Recovers the [`Error`] an [`io::Error`] from a [`crate::Decoder`] or [`crate::Encoder`]
/// carries; any other I/O error becomes [`Error::Io`].
///
/// ```
/// use std::io::Read;
///
/// let mut out = Vec::new();
/// let io_err = lmzip::Decoder::new(&b"LMZ"[..]).read_to_end(&mut out).unwrap_err();
/// assert!(matches!(lmzip::Error::from(io_err), lmzip::Error::Truncated(_)));
/// ```
impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            let inner = e.into_inner().expect("checked above");
            return *inner.downcast::<Error>().expect("checked above");
        }
        Error::Io(e)
    }
}

/// What an error of the codec is when its chain holds no typed cause: in decoding, damage
/// the checks did not name (the coder refusing its words); in encoding, options this build
/// cannot run.
#[derive(Clone, Copy)]
pub(crate) enum Otherwise {
    Corrupt,
    InvalidOptions,
}

/// The [`Error`] of a codec error: the first typed cause in its chain decides the variant,
/// the whole chain makes the message.
pub(crate) fn classify(err: anyhow::Error, otherwise: Otherwise) -> Error {
    let message = format!("{err:#}");
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<FormatError>() {
            return match f {
                FormatError::NotLmz => Error::NotLmzip,
                FormatError::ChecksumMismatch { expected, actual } => Error::ChecksumMismatch {
                    expected: *expected,
                    actual: *actual,
                },
                FormatError::Truncated(_) => Error::Truncated(message),
                FormatError::UnsupportedFormat(_) | FormatError::NumericsMismatch { .. } => {
                    Error::Unsupported(message)
                }
                FormatError::BadHeader(_)
                | FormatError::BadTrailer(_)
                | FormatError::BadFrame { .. }
                | FormatError::LengthMismatch { .. }
                | FormatError::TrailingData => Error::Corrupt(message),
            };
        }
        if let Some(m) = cause.downcast_ref::<crate::codec::MemoryLimit>() {
            return Error::MemoryLimit {
                needed: m.needed,
                limit: m.limit,
            };
        }
        if cause.is::<WeightsError>() {
            return Error::ModelFile(message);
        }
        if cause.is::<RecipeError>() || cause.is::<UnresolvedPercent>() {
            return Error::InvalidOptions(message);
        }
        if cause.is::<io::Error>() {
            return match err.downcast::<io::Error>() {
                Ok(io) => Error::Io(io),
                Err(_) => Error::Io(io::Error::other(message)),
            };
        }
    }
    match otherwise {
        Otherwise::Corrupt => Error::Corrupt(message),
        Otherwise::InvalidOptions => Error::InvalidOptions(message),
    }
}
