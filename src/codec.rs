//! The per-byte loop, shared by compression and decompression.
//!
//! For every byte: the predictor's distribution is quantised, the coder encodes (or decodes) the
//! byte with it, and the predictor learns the byte. Both directions run [`code_frame`] and differ
//! only in the [`Direction`] they pass, so they compute the same thing by construction.

use std::io::{Read, Write};

use anyhow::{Context, Result};

use crate::coder::{BitModel, ByteShares, Decoder, Encoder, QuantizedPdf};
use crate::compact;
use crate::format::{self, Body, FRAME_MAX, FormatError};
use crate::mix::Stage;
use crate::modelfile::Weights;
use crate::predictor::{self, BytePredictor};
use crate::recipe::Recipe;

/// How far a compression or decompression has come, reported every [`PROGRESS_EVERY`] bytes and
/// at the end of every frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Uncompressed bytes done.
    pub bytes: u64,
    /// Bits the coder has spent on them (the model's cost), 8 a byte for frames stored as
    /// they are.
    pub bits: f64,
    /// Bytes of the stream besides the coded words and stored bytes: headers, frame lengths and
    /// checksums, end markers and trailers, counted as each is written or read.
    pub container_bytes: u64,
}

impl Progress {
    /// The model's cost per byte.
    pub fn bits_per_byte(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.bits / self.bytes as f64
        }
    }

    /// The stream's cost per byte, container included (what the finished file shows).
    pub fn stream_bits_per_byte(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            (self.bits + 8.0 * self.container_bytes as f64) / self.bytes as f64
        }
    }
}

/// Bytes between progress reports.
pub const PROGRESS_EVERY: u64 = 4096;

/// One member of a decoded stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    /// Bytes it decoded to.
    pub raw_bytes: u64,
    /// Its length in the stream, header to trailer.
    pub lmz_bytes: u64,
    /// Whether its recipe starts from a model file.
    pub starts_from_file: bool,
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The recipe (of the first member, when a stream has several).
    pub recipe: Recipe,
    /// Uncompressed length.
    pub raw_bytes: u64,
    /// Length of the `.lmz` stream.
    pub lmz_bytes: u64,
    /// The model the run ended with (of the last member), as a model file, when
    /// [`Options::save_model`] asked for it.
    pub model: Option<Vec<u8>>,
    /// Decompression: every member of the stream, in order (compression writes one).
    pub members: Vec<Member>,
}

/// What a run starts from and keeps besides the stream.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// The model file a recipe with a `file:` base starts from (compression: the one the recipe
    /// names; decompression: checked against the hash in the header).
    pub weights: Option<&'a Weights>,
    /// Keep the model the run ends with ([`Summary::model`]). Encoder and decoder end with the
    /// same model, so both save the same bytes.
    pub save_model: bool,
    /// The input's length, when known in advance: compression checks that the input had it
    /// (the recipe's percent positions were resolved with it).
    pub expected_len: Option<u64>,
}

/// A progress callback; returning an error (say, on Ctrl-C) stops the run with that error.
pub type ProgressFn<'a> = &'a mut dyn FnMut(Progress) -> Result<()>;

/// A writer that counts what passes through it.
struct Counting<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that counts what passes through it.
struct CountingReader<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

enum Direction<'a> {
    Encode(&'a mut Encoder),
    Decode(&'a mut Decoder),
    /// The bytes of a stored frame: the model sees and learns them as the encoder's did, and
    /// nothing is coded.
    Replay,
}

/// Codes the bytes of one frame: `bytes` is read when encoding and filled when decoding.
/// With a mixing stage (src/mix), each byte is coded as 8 binary decisions, most significant
/// bit first, with the stage's probabilities; the stage reads the network's quantised table.
fn code_frame(
    predictor: &mut dyn BytePredictor,
    quantized: &mut QuantizedPdf,
    mut stage: Option<&mut Stage>,
    mut direction: Direction<'_>,
    bytes: &mut [u8],
    progress: &mut Progress,
    report: ProgressFn<'_>,
) -> Result<()> {
    for slot in bytes.iter_mut() {
        quantized.set(predictor.pdf());
        if let Some(stage) = stage.as_deref_mut() {
            stage.set_network(quantized.cdf());
            let mut byte = 0u8;
            let mut shares = ByteShares::new();
            for k in 0..8 {
                let model = BitModel::new(stage.p());
                let bit = match &mut direction {
                    Direction::Encode(enc) => {
                        let bit = (*slot >> (7 - k)) & 1 == 1;
                        enc.encode_bit(bit, &model)?;
                        bit
                    }
                    Direction::Decode(dec) => dec.decode_bit(&model)?,
                    Direction::Replay => (*slot >> (7 - k)) & 1 == 1,
                };
                shares.push(&model, bit);
                stage.update(bit as u32);
                byte = (byte << 1) | bit as u8;
            }
            *slot = byte;
            let coded_bits = shares.bits();
            progress.bits += coded_bits;
            progress.bytes += 1;
            predictor.learn_coded(byte, coded_bits);
            if progress.bytes.is_multiple_of(PROGRESS_EVERY) {
                report(*progress)?;
            }
            continue;
        }
        let byte = match &mut direction {
            Direction::Encode(enc) => {
                enc.encode(*slot, quantized)?;
                *slot
            }
            Direction::Decode(dec) => {
                *slot = dec.decode(quantized)?;
                *slot
            }
            Direction::Replay => *slot,
        };
        let coded_bits = quantized.cost_bits(byte);
        progress.bits += coded_bits;
        progress.bytes += 1;
        predictor.learn_coded(byte, coded_bits);
        if progress.bytes.is_multiple_of(PROGRESS_EVERY) {
            report(*progress)?;
        }
    }
    Ok(())
}

/// Fills `buf` from `r` until it is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Compresses all of `input` into `output` as one `.lmz` stream. The recipe's positions must be
/// in bytes ([`Recipe::resolve`] turns percent into bytes once the input's length is known).
pub fn compress(
    recipe: &Recipe,
    options: &Options<'_>,
    mut input: impl Read,
    output: impl Write,
    report: ProgressFn<'_>,
) -> Result<Summary> {
    recipe.validate()?;
    if !recipe.is_resolved() {
        return Err(crate::recipe::UnresolvedPercent.into());
    }
    let stored = compact::store(recipe);
    if stored.text().len() > format::RECIPE_MAX {
        anyhow::bail!(
            "the recipe's text is {} bytes long; a header holds at most {}",
            stored.text().len(),
            format::RECIPE_MAX
        );
    }
    let mut out = Counting {
        inner: output,
        count: 0,
    };
    let mut predictor = predictor::build(recipe, options.weights)?;
    let mut stage = recipe.mix.as_ref().map(Stage::new).transpose()?;
    let header_len = format::write_header(&mut out, &stored).context("cannot write output")?;
    let mut quantized = QuantizedPdf::new();
    let mut buf = vec![0u8; FRAME_MAX];
    let mut crc = crc32fast::Hasher::new();
    let mut progress = Progress {
        container_bytes: header_len,
        ..Progress::default()
    };
    loop {
        let n = read_full(&mut input, &mut buf).context("cannot read input")?;
        if n == 0 {
            break;
        }
        crc.update(&buf[..n]);
        let bits_before = progress.bits;
        let mut enc = Encoder::new();
        code_frame(
            predictor.as_mut(),
            &mut quantized,
            stage.as_mut(),
            Direction::Encode(&mut enc),
            &mut buf[..n],
            &mut progress,
            report,
        )?;
        let body = frame_body(enc.finish(), &buf[..n]);
        if matches!(body, Body::Stored(_)) {
            progress.bits = bits_before + 8.0 * n as f64;
        }
        let len = format::write_frame(&mut out, n, &body).context("cannot write output")?;
        progress.container_bytes += len - body.payload_len() as u64;
        report(progress)?;
    }
    if let Some(expected) = options.expected_len
        && expected != progress.bytes
    {
        anyhow::bail!(
            "the input was {} bytes long, not the {expected} announced",
            progress.bytes
        );
    }
    progress.container_bytes += format::write_end(&mut out, progress.bytes, crc.finalize())
        .context("cannot write output")?;
    // The last report counts the whole stream, as the decoder's does.
    report(progress)?;
    out.flush().context("cannot write output")?;
    let model = saved_model(predictor.as_ref(), options)?;
    Ok(Summary {
        recipe: recipe.clone(),
        raw_bytes: progress.bytes,
        lmz_bytes: out.count,
        model,
        members: vec![Member {
            raw_bytes: progress.bytes,
            lmz_bytes: out.count,
            starts_from_file: matches!(recipe.base, crate::recipe::Base::File { .. }),
        }],
    })
}

/// The range coder's words of every frame of `data`, whether or not the container would store
/// the frame as it is: the encoder's computation without its container, which stays the same
/// across format versions for one numerics version (tests/golden_files.rs compares it with
/// files of format version 1).
pub fn frame_words(recipe: &Recipe, options: &Options<'_>, data: &[u8]) -> Result<Vec<Vec<u32>>> {
    recipe.validate()?;
    let mut predictor = predictor::build(recipe, options.weights)?;
    let mut stage = recipe.mix.as_ref().map(Stage::new).transpose()?;
    let mut quantized = QuantizedPdf::new();
    let mut progress = Progress::default();
    let mut frames = Vec::new();
    for chunk in data.chunks(FRAME_MAX) {
        let mut bytes = chunk.to_vec();
        let mut enc = Encoder::new();
        code_frame(
            predictor.as_mut(),
            &mut quantized,
            stage.as_mut(),
            Direction::Encode(&mut enc),
            &mut bytes,
            &mut progress,
            &mut |_| Ok(()),
        )?;
        frames.push(enc.finish());
    }
    Ok(frames)
}

/// What a frame holds: the coder's words, or the input itself when the words would take more
/// bytes (incompressible data, or a model that has not learnt yet). The model has learnt the
/// bytes either way, and the decoder replays a stored frame through it, so both stay in step.
fn frame_body(words: Vec<u32>, bytes: &[u8]) -> Body {
    let coded = format::coded_frame_len(bytes.len(), words.len());
    match coded > format::stored_frame_len(bytes.len()) {
        true => Body::Stored(bytes.to_vec()),
        false => Body::Coded(words),
    }
}

fn saved_model(predictor: &dyn BytePredictor, options: &Options<'_>) -> Result<Option<Vec<u8>>> {
    options
        .save_model
        .then(|| predictor.save().context("cannot save the model"))
        .transpose()
}

/// Decompresses a `.lmz` stream — one member or several, one after another — from `input` into
/// `output`, checking every member's length and CRC32. Output is written frame by frame; on
/// error, what was written must be discarded (the CLI writes to a temporary file and removes
/// it). An error in a member after the first names it (counted from 1).
pub fn decompress(
    options: &Options<'_>,
    input: impl Read,
    output: impl Write,
    report: ProgressFn<'_>,
) -> Result<Summary> {
    let mut input = CountingReader {
        inner: input,
        count: 0,
    };
    let mut output = output;
    let mut progress = Progress::default();
    let mut members: Vec<Member> = Vec::new();
    let mut first: Option<Recipe> = None;
    let mut model = None;
    loop {
        let number = members.len() + 1;
        let start = (input.count, progress.bytes);
        let decoded = if number == 1 {
            let header = format::read_header(&mut input)?;
            decompress_member(
                options,
                header,
                &mut input,
                &mut output,
                &mut progress,
                report,
            )?
        } else {
            let in_member = || format!("member {number} (at byte {})", start.0);
            let Some(header) = format::read_next_header(&mut input).with_context(in_member)? else {
                break;
            };
            decompress_member(
                options,
                header,
                &mut input,
                &mut output,
                &mut progress,
                report,
            )
            .with_context(in_member)?
        };
        let (recipe, member_model) = decoded;
        members.push(Member {
            raw_bytes: progress.bytes - start.1,
            lmz_bytes: input.count - start.0,
            starts_from_file: matches!(recipe.base, crate::recipe::Base::File { .. }),
        });
        first.get_or_insert(recipe);
        model = member_model;
    }
    output.flush().context("cannot write output")?;
    Ok(Summary {
        recipe: first.expect("the first member is decoded or its error returned"),
        raw_bytes: progress.bytes,
        lmz_bytes: input.count,
        model,
        members,
    })
}

/// Decodes one member whose header is read: its frames into `output`, then its trailer's
/// checks. Returns the member's recipe and, when asked for, the model it ended with.
fn decompress_member(
    options: &Options<'_>,
    header: format::Header,
    input: &mut impl Read,
    output: &mut impl Write,
    progress: &mut Progress,
    report: ProgressFn<'_>,
) -> Result<(Recipe, Option<Vec<u8>>)> {
    format::check_numerics(&header)?;
    let recipe = read_recipe(&header)?;
    let version = header.format_version;
    let mut predictor = predictor::build(&recipe, options.weights)?;
    let mut stage = recipe.mix.as_ref().map(Stage::new).transpose()?;
    let mut quantized = QuantizedPdf::new();
    let mut buf = vec![0u8; FRAME_MAX];
    let mut crc = crc32fast::Hasher::new();
    let member_start = progress.bytes;
    progress.container_bytes += header.len;
    let mut index = 0u64;
    while let Some(frame) = format::read_frame(input, version, index)? {
        let bytes = &mut buf[..frame.raw_len];
        let bits_before = progress.bits;
        let mut dec = None;
        let direction = match frame.body {
            Body::Coded(words) => {
                progress.container_bytes += format::coded_frame_len(bytes.len(), words.len())
                    as u64
                    - 4 * words.len() as u64;
                let d = Decoder::new(words).map_err(|e| FormatError::BadFrame {
                    index,
                    why: format!("{e:#}"),
                })?;
                Direction::Decode(dec.insert(d))
            }
            Body::Stored(stored) => {
                progress.container_bytes +=
                    (format::stored_frame_len(bytes.len()) - bytes.len()) as u64;
                bytes.copy_from_slice(&stored);
                Direction::Replay
            }
        };
        let replay = matches!(direction, Direction::Replay);
        code_frame(
            predictor.as_mut(),
            &mut quantized,
            stage.as_mut(),
            direction,
            bytes,
            progress,
            report,
        )
        .with_context(|| format!("in frame {index}"))?;
        if replay {
            progress.bits = bits_before + 8.0 * bytes.len() as f64;
        }
        crc.update(bytes);
        output.write_all(bytes).context("cannot write output")?;
        report(*progress)?;
        index += 1;
    }
    let trailer = format::read_trailer(input, version)?;
    progress.container_bytes += 1 + trailer.len;
    report(*progress)?;
    let decoded = progress.bytes - member_start;
    if trailer.total_len != decoded {
        return Err(FormatError::LengthMismatch {
            trailer: trailer.total_len,
            decoded,
        }
        .into());
    }
    let actual = crc.finalize();
    if actual != trailer.crc {
        return Err(FormatError::ChecksumMismatch {
            expected: trailer.crc,
            actual,
        }
        .into());
    }
    let model = saved_model(predictor.as_ref(), options)?;
    Ok((recipe, model))
}

/// The recipe of a header: complete, canonical, in bytes (expanded from its level when the
/// header stores one).
pub fn read_recipe(header: &format::Header) -> Result<Recipe, FormatError> {
    compact::expand(&header.recipe)
}

/// Compresses a byte slice in memory (tests, benchmarks).
pub fn compress_bytes(recipe: &Recipe, data: &[u8]) -> Result<Vec<u8>> {
    Ok(compress_bytes_with(recipe, &Options::default(), data)?.0)
}

/// Decompresses a byte slice in memory (tests, benchmarks).
pub fn decompress_bytes(lmz: &[u8]) -> Result<Vec<u8>> {
    Ok(decompress_bytes_with(&Options::default(), lmz)?.0)
}

/// Compresses a byte slice in memory; returns the stream and the summary.
pub fn compress_bytes_with(
    recipe: &Recipe,
    options: &Options<'_>,
    data: &[u8],
) -> Result<(Vec<u8>, Summary)> {
    let mut out = Vec::new();
    let s = compress(recipe, options, data, &mut out, &mut |_| Ok(()))?;
    Ok((out, s))
}

/// Decompresses a byte slice in memory; returns the data and the summary.
pub fn decompress_bytes_with(options: &Options<'_>, lmz: &[u8]) -> Result<(Vec<u8>, Summary)> {
    let mut out = Vec::new();
    let s = decompress(options, lmz, &mut out, &mut |_| Ok(()))?;
    Ok((out, s))
}
