//! [`Decoder`]: decompression as a [`Read`]er, and [`decompress`], the one call over a slice.

use std::io::{self, BufReader, Read};
use std::sync::Arc;

use super::encoder::in_pool;
use super::error::{Error, Otherwise, classify};
use super::options::Options;
use crate::codec::{self, StreamDecoder};
use crate::modelfile::Weights;
use crate::pool::Pool;

/// Decompresses an lmzip stream read from `R`: every member, in order (concatenated `.lmz`
/// files decode to the concatenated inputs), each checked against its trailer's length and
/// CRC32.
///
/// A frame's bytes are returned before its member's checks: a read that fails (damage, a
/// wrong checksum) means that the bytes read before must be discarded, as with gzip. The
/// end of the data (a read of 0 bytes) comes only after the last member is checked.
///
/// ```
/// use std::io::Read;
///
/// let options = lmzip::Options::new().level(1);
/// let mut stream = lmzip::compress(b"one,", &options)?;
/// stream.extend(lmzip::compress(b"two", &options)?);
/// let mut text = String::new();
/// lmzip::Decoder::new(&stream[..]).read_to_string(&mut text)?;
/// assert_eq!(text, "one,two");
/// # Ok::<(), lmzip::Error>(())
/// ```
pub struct Decoder<R: Read> {
    stream: StreamDecoder<BufReader<R>>,
    weights: Option<Arc<Weights>>,
    pool: Option<Pool>,
    /// The unread part of the last frame: `frame[at..]`.
    frame: Vec<u8>,
    at: usize,
    state: State,
    /// Most memory a member may need to be decoded ([`Options::memory_limit`]).
    memory_limit: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Ended,
    Failed,
}

impl<R: Read> Decoder<R> {
    /// A decoder with the default options: one thread, no model file. Reads nothing yet.
    pub fn new(input: R) -> Self {
        Decoder {
            stream: StreamDecoder::new(BufReader::new(input)),
            weights: None,
            pool: None,
            frame: Vec::new(),
            at: 0,
            state: State::Running,
            memory_limit: None,
        }
    }

    /// A decoder with the model file, the threads and the memory limit of `options` (level,
    /// recipe and size are the stream's own: they are ignored).
    pub fn with_options(input: R, options: &Options) -> Result<Self, Error> {
        let mut decoder = Decoder::new(input);
        decoder.weights = options.weights();
        decoder.pool = options.pool()?;
        decoder.memory_limit = options.memory();
        Ok(decoder)
    }

    /// Decodes the next frame into the buffer; `false` at the end of the stream.
    fn fill(&mut self) -> Result<bool, Error> {
        match self.state {
            State::Ended => return Ok(false),
            State::Failed => {
                return Err(Error::Corrupt(
                    "an earlier error stopped this decoder".into(),
                ));
            }
            State::Running => {}
        }
        let options = codec::Options {
            weights: self.weights.as_deref(),
            save_model: false,
            expected_len: None,
            known_len: None,
            memory_limit: self.memory_limit,
            choose_prior: false,
            seeded: None,
            choose_warm: false,
            choose_x86: false,
            choose_training: false,
        };
        let stream = &mut self.stream;
        let frame = &mut self.frame;
        let next = in_pool(&self.pool, || {
            stream.next_frame(&options, &mut |_| Ok(())).map(|bytes| {
                bytes.map(|b| {
                    frame.clear();
                    frame.extend_from_slice(b);
                })
            })
        });
        self.at = 0;
        match next {
            Ok(Some(())) => Ok(true),
            Ok(None) => {
                self.frame.clear();
                self.state = State::Ended;
                Ok(false)
            }
            Err(e) => {
                self.state = State::Failed;
                Err(classify(e, Otherwise::Corrupt))
            }
        }
    }

    /// Reads into `buf`; what [`Read::read`] does, with the error typed.
    fn read_typed(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.at == self.frame.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.frame.len() - self.at);
        buf[..n].copy_from_slice(&self.frame[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl<R: Read> Read for Decoder<R> {
    /// Errors carry an [`Error`] (`lmzip::Error::from` recovers it).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.read_typed(buf)?)
    }
}

/// Decompresses a whole stream (one member or several) in one call.
///
/// ```
/// let packed = lmzip::compress(b"", &lmzip::Options::new().level(1))?;
/// assert!(lmzip::decompress(&packed)?.is_empty());
/// assert!(matches!(lmzip::decompress(&packed[..10]), Err(lmzip::Error::Truncated(_))));
/// # Ok::<(), lmzip::Error>(())
/// ```
pub fn decompress(data: &[u8]) -> Result<Vec<u8>, Error> {
    decompress_with(data, &Options::new())
}

/// [`decompress`] with the model file, threads and memory limit of `options` (for streams
/// that start from a model file, or to refuse streams that need too much memory).
pub fn decompress_with(data: &[u8], options: &Options) -> Result<Vec<u8>, Error> {
    let mut decoder = Decoder::with_options(data, options)?;
    let mut out = Vec::new();
    while decoder.fill()? {
        out.extend_from_slice(&decoder.frame);
    }
    Ok(out)
}
