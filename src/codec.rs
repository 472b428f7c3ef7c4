//! The per-byte loop, shared by compression and decompression.
//!
//! For every byte: the predictor's distribution is quantised, the coder encodes (or decodes) the
//! byte with it, and the predictor learns the byte. Both directions run [`code_frame`] and differ
//! only in the [`Direction`] they pass, so they compute the same thing by construction.

use std::borrow::Cow;
use std::io::{Read, Write};

use anyhow::{Context, Result};

use crate::coder::{BitModel, ByteShares, Decoder, Encoder, QuantizedPdf};
use crate::compact;
use crate::format::{self, Body, FRAME_MAX, FormatError};
use crate::mix::Stage;
use crate::modelfile::Weights;
use crate::predictor::{self, BytePredictor};
use crate::recipe::{Pos, Recipe};

/// How far a compression or decompression has come, reported every [`PROGRESS_EVERY`] bytes and
/// at the end of every frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Uncompressed bytes done.
    pub bytes: u64,
    /// Bits the coder has spent on them (the model's cost), 8 a byte for frames stored as
    /// they are.
    pub bits: f64,
    /// Bytes of the stream besides the coded words: headers, frame lengths and checksums, end
    /// markers and trailers, counted from the start of each member.
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
    /// The input's length when known before it is read (a file's size, a block's), unchecked:
    /// for choices that depend on it, where `expected_len` does not say it. Without either
    /// (standard input), only an input that ends within the first bytes the choices read has
    /// a known length.
    pub known_len: Option<u64>,
    /// Most memory a member's decoding may need, in bytes ([`memory_needed`]): a member that
    /// needs more is refused before anything is built for it ([`MemoryLimit`]), in either
    /// direction (compression refuses to write what could not be decoded within it).
    pub memory_limit: Option<u64>,
    /// Compression: keep the recipe's built-in prior only if the input's first bytes suit it
    /// ([`crate::prior::suits`]); the header records the choice. Off, the recipe is as given.
    pub choose_prior: bool,
    /// Compression, with `choose_prior`: the recipe for an input the prior does not suit (the
    /// level's seeded network, [`crate::levels::seeded_recipe`]), made for the input as the
    /// recipe given to [`compress`] was (positions resolved, stage sized: callers that size
    /// one size both). Without it, the recipe without its prior.
    pub seeded: Option<&'a Recipe>,
    /// Compression: leave the stage's warm start (`mix:warm`, [`crate::mix::warm`]) out when
    /// the x86 transform is on (chosen or in the recipe); the header records the choice. Off,
    /// the recipe is as given.
    pub choose_warm: bool,
    /// Compression: with a mixing stage, set the x86 transform (`mix:x86`) by whether the
    /// input's first bytes are x86 code ([`crate::transform::x86::detect`]); the header
    /// records the choice. Off, the recipe is as given.
    pub choose_x86: bool,
    /// Compression: where the x86 transform is chosen by detection for a program or shared
    /// library ([`crate::transform::x86::is_program`]) and the level's seeded network is its
    /// prior's (levels 1-3), unless the model is saved (`save_model`), leave a fresh network
    /// untrained over the input's first [`MACHINE_CODE_UNTRAINED`] bytes (an
    /// `infer` rule ahead of the recipe's rules, or in their place for an input known to be no
    /// longer); the header records the choice. Off, the recipe is as given.
    pub choose_training: bool,
}

/// The memory decoding a member of `recipe` needs, in bytes (and encoding it, within a frame's
/// input): the predictor's working memory and the mixing stage ([`Recipe::working_bytes`]),
/// the buffers of one frame (its bytes, and its coded words at their bound) and the program
/// itself ([`PROGRAM_BYTES`]). An estimate from the recipe alone, made before anything is
/// allocated; a run's peak resident memory stays below it by what the run leaves untouched.
/// A member without frames (an empty input) builds no model, and needs none of it.
pub fn memory_needed(recipe: &Recipe) -> u64 {
    let frame = FRAME_MAX + 4 * format::max_words(FRAME_MAX);
    recipe
        .working_bytes()
        .saturating_add(frame)
        .saturating_add(PROGRAM_BYTES) as u64
}

/// The program's own resident memory beside a run's buffers: its code, the libraries', the
/// stacks and small allocations (measured: 2 MB for `lmzip --version`, 6 MB for an empty
/// input without the stage, whose network and buffers take 1–2 MB).
pub const PROGRAM_BYTES: usize = 4 << 20;

/// A member whose decoding needs more memory than the limit allows
/// ([`Options::memory_limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// What the member needs, in bytes ([`memory_needed`]).
    pub needed: u64,
    /// The limit, in bytes.
    pub limit: u64,
}

impl std::fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "decoding needs {} of memory, more than the limit of {}",
            mebibytes(self.needed),
            mebibytes(self.limit)
        )
    }
}

impl std::error::Error for MemoryLimit {}

/// `bytes` in MiB, rounded up, for messages (`24 MiB`).
pub fn mebibytes(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

/// Refuses `recipe` when its member would need more memory than `options` allow.
fn check_memory(recipe: &Recipe, options: &Options<'_>) -> Result<(), MemoryLimit> {
    let needed = memory_needed(recipe);
    match options.memory_limit {
        Some(limit) if needed > limit => Err(MemoryLimit { needed, limit }),
        _ => Ok(()),
    }
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
                let model = BitModel::with_precision(stage.p(), stage.precision() as usize);
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

/// Most bytes [`MemberEncoder::read_from`] reads at once: the pending frame grows by this
/// much rather than being zeroed whole, so a small input does not touch a frame's megabyte
/// (1 MiB of a 64 KiB input's 32 MiB peak).
const READ_STEP: usize = 64 << 10;

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

/// One member being written, fed in pieces: the model, the pending input of the frame being
/// filled, and the checks of the trailer. [`compress`] (the CLI) and [`crate::Encoder`] (the
/// library) both drive it, so they write the same bytes: frames are cut every [`FRAME_MAX`]
/// input bytes whatever the pieces were.
pub struct MemberEncoder {
    recipe: Recipe,
    /// `None` for a member known to stay empty ([`MemberEncoder::start_empty`]).
    model: Option<Model>,
    quantized: QuantizedPdf,
    /// Input of the frame being filled (fewer than [`FRAME_MAX`] bytes between calls).
    pending: Vec<u8>,
    crc: crc32fast::Hasher,
    progress: Progress,
    /// Bytes written so far, header included.
    written: u64,
    expected_len: Option<u64>,
    save_model: bool,
}

impl MemberEncoder {
    /// Checks the recipe, builds its model and writes the member's header. The recipe's
    /// positions must be in bytes ([`Recipe::resolve`] turns percent into bytes once the
    /// input's length is known).
    pub fn start(recipe: &Recipe, options: &Options<'_>, output: &mut impl Write) -> Result<Self> {
        Self::begin(recipe, options, output, true)
    }

    /// [`MemberEncoder::start`] for an input known to be empty: a member without frames, whose
    /// decoding builds no model ([`memory_needed`] does not apply), so this one builds none
    /// either and no memory limit refuses it. Given any input, it fails.
    fn start_empty(
        recipe: &Recipe,
        options: &Options<'_>,
        output: &mut impl Write,
    ) -> Result<Self> {
        Self::begin(recipe, options, output, false)
    }

    fn begin(
        recipe: &Recipe,
        options: &Options<'_>,
        output: &mut impl Write,
        with_model: bool,
    ) -> Result<Self> {
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
        let model = with_model
            .then(|| Model::build(recipe, options))
            .transpose()?;
        let mut out = Counting {
            inner: output,
            count: 0,
        };
        let header_len = format::write_header(&mut out, &stored).context("cannot write output")?;
        Ok(MemberEncoder {
            recipe: recipe.clone(),
            model,
            quantized: QuantizedPdf::new(),
            pending: Vec::with_capacity(FRAME_MAX),
            crc: crc32fast::Hasher::new(),
            progress: Progress {
                container_bytes: header_len,
                ..Progress::default()
            },
            written: out.count,
            expected_len: options.expected_len,
            save_model: options.save_model,
        })
    }

    /// Takes the next input bytes; codes and writes every frame they complete.
    pub fn push(
        &mut self,
        mut data: &[u8],
        output: &mut impl Write,
        report: ProgressFn<'_>,
    ) -> Result<()> {
        while !data.is_empty() {
            let n = (FRAME_MAX - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.pending.len() == FRAME_MAX {
                self.code_pending(output, report)?;
            }
        }
        Ok(())
    }

    /// Reads up to [`READ_STEP`] bytes from `input` into the pending frame (coding and writing
    /// it once it is full); returns the bytes read, 0 at the end. What
    /// [`MemberEncoder::push`] does, without a buffer of the caller's.
    pub fn read_from(
        &mut self,
        input: &mut impl Read,
        output: &mut impl Write,
        report: ProgressFn<'_>,
    ) -> Result<usize> {
        let have = self.pending.len();
        self.pending.resize((have + READ_STEP).min(FRAME_MAX), 0);
        let read = read_full(input, &mut self.pending[have..]);
        let n = *read.as_ref().unwrap_or(&0);
        self.pending.truncate(have + n);
        read.context("cannot read input")?;
        if self.pending.len() == FRAME_MAX {
            self.code_pending(output, report)?;
        }
        Ok(n)
    }

    /// Codes the pending input as one frame and writes it.
    fn code_pending(&mut self, output: &mut impl Write, report: ProgressFn<'_>) -> Result<()> {
        let Some(model) = self.model.as_mut() else {
            anyhow::bail!("a member started as empty was given input");
        };
        let n = self.pending.len();
        self.crc.update(&self.pending);
        if let Some(region) = x86(&self.recipe) {
            // The frame's start in the member: the bytes coded before it.
            crate::transform::x86::encode_frame(region, &mut self.pending, self.progress.bytes);
        }
        let bits_before = self.progress.bits;
        let mut enc = Encoder::new();
        code_frame(
            model.predictor.as_mut(),
            &mut self.quantized,
            model.stage.as_mut(),
            Direction::Encode(&mut enc),
            &mut self.pending,
            &mut self.progress,
            report,
        )?;
        let mut out = Counting {
            inner: output,
            count: 0,
        };
        let body = frame_body(enc.finish(), &self.pending);
        if matches!(body, Body::Stored(_)) {
            self.progress.bits = bits_before + 8.0 * n as f64;
        }
        let len = format::write_frame(&mut out, n, &body).context("cannot write output")?;
        self.progress.container_bytes += len - body.payload_len() as u64;
        self.written += out.count;
        self.pending.clear();
        report(self.progress)
    }

    /// Codes what is pending, writes the end marker and the trailer, and flushes.
    pub fn finish(mut self, output: &mut impl Write, report: ProgressFn<'_>) -> Result<Summary> {
        if !self.pending.is_empty() {
            self.code_pending(output, report)?;
        }
        let len = self.progress.bytes;
        if let Some(expected) = self.expected_len
            && expected != len
        {
            anyhow::bail!("the input was {len} bytes long, not the {expected} announced");
        }
        let mut out = Counting {
            inner: output,
            count: 0,
        };
        self.progress.container_bytes +=
            format::write_end(&mut out, len, self.crc.clone().finalize())
                .context("cannot write output")?;
        out.flush().context("cannot write output")?;
        // The last report counts the whole stream, as the decoder's does.
        report(self.progress)?;
        self.written += out.count;
        let model = match &self.model {
            Some(model) => saved_model(model.predictor.as_ref(), self.save_model)?,
            None => None,
        };
        Ok(Summary {
            raw_bytes: len,
            lmz_bytes: self.written,
            model,
            members: vec![Member {
                raw_bytes: len,
                lmz_bytes: self.written,
                starts_from_file: matches!(self.recipe.base, crate::recipe::Base::File { .. }),
            }],
            recipe: self.recipe,
        })
    }
}

/// The longest x86 machine code that takes the prior ([`compress`]): below it the prior saves
/// 0.5-0.8%; from 600 KB on it costs 1% (docs/experiments.md, "The prior for machine code").
const MACHINE_CODE_PRIOR_MAX: u64 = 256 << 10;

/// The first bytes of machine code on which the network does not train at levels 1-3 (where
/// lmzip chooses, [`Options::choose_training`]). At the default level, training there cost
/// bytes on seven x86-64 executables and libraries of 56-151 KB (0.18% in all, up to 0.4% on
/// one) for 1.6-1.9x the time; over ten of 400 KB to 1.4 MB, training from here on wrote what
/// training throughout wrote (+0.01% in all, −0.5% to +0.5% by file), and much less than no
/// training (a 1 MB executable 1.2%). At levels 4-9, whose larger seeded networks start from
/// nothing on machine code, training from the first byte pays (0.3-0.8% on four of those
/// files), so they keep it; so do archives of object files, whose symbols and relocations pay
/// for training (0.1-1.2% on six), which is why the rule asks for a program's or shared
/// library's header (docs/experiments.md, "Machine code trains from 128 KiB on").
pub const MACHINE_CODE_UNTRAINED: u64 = 128 << 10;

/// `recipe` as the input's first bytes `sample` choose it (with `ended`, they are the whole
/// input), where `options` allow: the level's prior or its seeded network, the x86 transform
/// and its stage, the warm start, and for machine code the bytes the network does not train on.
/// The header records what was chosen.
fn recipe_for_input<'r>(
    recipe: &'r Recipe,
    options: &Options<'_>,
    sample: &[u8],
    ended: bool,
) -> Cow<'r, Recipe> {
    let mut recipe = Cow::Borrowed(recipe);
    let choose_prior = options.choose_prior && recipe.config().prior() != 0;
    let choose_x86 = options.choose_x86 && recipe.mix.is_some();
    let head = &sample[..sample.len().min(crate::prior::SAMPLE)];
    let x86 = choose_x86
        .then(|| {
            crate::transform::x86::detect(
                &sample[..sample.len().min(crate::transform::x86::SAMPLE)],
            )
        })
        .flatten();
    // Whether the level's seeded network is the network of its prior (levels 1-3).
    let same_network = options.seeded.is_some_and(|seeded| {
        crate::prior::without(seeded).base == crate::prior::without(&recipe).base
    });
    // Machine code up to MACHINE_CODE_PRIOR_MAX takes the level's recipe for text, its prior and
    // training, where the network is the same: with the x86 stage, 0.6-0.8% less on
    // executables and libraries than the seeded network, and 0.2-0.3% less than the prior with
    // the seeded network's training (docs/experiments.md, "The prior for machine code").
    let len = options
        .expected_len
        .or(options.known_len)
        .or(ended.then_some(sample.len() as u64));
    let machine_code =
        x86.is_some() && same_network && len.is_some_and(|n| n <= MACHINE_CODE_PRIOR_MAX);
    if choose_prior && !(crate::prior::suits(head) || machine_code) {
        recipe = Cow::Owned(match options.seeded {
            Some(seeded) => seeded.clone(),
            None => crate::prior::without(&recipe),
        });
    } else if choose_prior
        && !crate::prior::is_text(head)
        && !machine_code
        && same_network
        && let Some(seeded) = options.seeded
    {
        // Binary data with strings: the prior, with the training of the level's seeded
        // network ([`crate::prior::is_text`]).
        recipe = Cow::Owned(crate::prior::with_number(seeded, recipe.config().prior()));
    }
    if choose_x86 && let Some(mix) = recipe.to_mut().mix.as_mut() {
        let region = x86.unwrap_or(crate::transform::x86::Region::ALL);
        (mix.x86, mix.x86_from, mix.x86_to) = (x86.is_some(), region.start, region.end);
        // With the stage for machine code (`x86=2`, src/mix/x86ops.rs).
        mix.x86_ops = x86.is_some();
    }
    // A run that saves its model is there to train it.
    if options.choose_training
        && !options.save_model
        && x86.is_some()
        && crate::transform::x86::is_program(sample)
        && same_network
        && matches!(recipe.base, crate::recipe::Base::Fresh { .. })
    {
        let schedule = &mut recipe.to_mut().schedule;
        match len {
            // All of a shorter input is untrained: one rule, the header's shortest.
            Some(n) if n <= MACHINE_CODE_UNTRAINED => *schedule = vec![untrained_rule(Pos::End)],
            _ => schedule.insert(0, untrained_rule(Pos::Bytes(MACHINE_CODE_UNTRAINED))),
        }
    }
    // The warm start was learned on text and code; on most binaries it helps too (sum −1.1%,
    // geo.protodata −0.8%, ptt5 +0.2%), but x86 executables lose by it (/usr/bin/ls +1.3%).
    if options.choose_warm
        && recipe.mix.is_some_and(|m| m.warm != 0 && m.x86)
        && let Some(mix) = recipe.to_mut().mix.as_mut()
    {
        mix.warm = 0;
    }
    if recipe.mix.is_some_and(|m| m.x86_ops && m.warm != 0)
        && let Some(mix) = recipe.to_mut().mix.as_mut()
    {
        crate::mix::warm::settle_with_x86(mix, !options.choose_warm);
    }
    recipe
}

/// The rule that leaves machine code's first bytes untrained: `infer` up to `end`.
fn untrained_rule(end: Pos) -> crate::recipe::Rule {
    use crate::recipe::{Action, Body, Rule, Span};
    Rule {
        span: Span {
            start: Pos::Bytes(0),
            end,
        },
        body: Body::Action(Action::Infer),
    }
}

/// Compresses all of `input` into `output` as one `.lmz` stream, through a [`MemberEncoder`].
/// The recipe's positions must be in bytes.
pub fn compress(
    recipe: &Recipe,
    options: &Options<'_>,
    mut input: impl Read,
    mut output: impl Write,
    report: ProgressFn<'_>,
) -> Result<Summary> {
    // The prior's and the transform's choices look at the input's first bytes, then code them
    // as any others. They are read whether or not a choice needs them: an empty sample is an
    // empty input.
    let want = crate::prior::SAMPLE.max(crate::transform::x86::SAMPLE);
    let mut sample = Vec::new();
    (&mut input)
        .take(want as u64)
        .read_to_end(&mut sample)
        .context("cannot read input")?;
    let ended = sample.len() < want;
    let recipe = recipe_for_input(recipe, options, &sample, ended);
    if sample.is_empty() && !options.save_model {
        // Decoding an empty member builds no model, so no memory limit refuses it: neither
        // does encoding one. The input has ended; it is not read again.
        let encoder = MemberEncoder::start_empty(&recipe, options, &mut output)?;
        return encoder.finish(&mut output, report);
    }
    let mut input = (&sample[..]).chain(input);
    let mut encoder = MemberEncoder::start(&recipe, options, &mut output)?;
    while encoder.read_from(&mut input, &mut output, report)? > 0 {}
    encoder.finish(&mut output, report)
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
    for (i, chunk) in data.chunks(FRAME_MAX).enumerate() {
        let mut bytes = chunk.to_vec();
        if let Some(region) = x86(recipe) {
            crate::transform::x86::encode_frame(region, &mut bytes, (i * FRAME_MAX) as u64);
        }
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

/// Codes `data` as one member of `recipe` would (without the container) with the stage's mixer
/// starting from `start`, and returns the weights the mixer ends with: one step of learning a
/// warm start ([`crate::mix::warm`]), which carries them from document to document.
pub fn mixer_after(
    recipe: &Recipe,
    options: &Options<'_>,
    data: &[u8],
    start: Option<&crate::mix::warm::MixerWeights>,
) -> Result<crate::mix::warm::MixerWeights> {
    recipe.validate()?;
    let Some(spec) = &recipe.mix else {
        anyhow::bail!("a warm start is for the mixing stage, which this recipe has off");
    };
    let mut predictor = predictor::build(recipe, options.weights)?;
    let mut stage = Stage::new(spec)?;
    if let Some(weights) = start {
        stage.start_mixer_from(weights)?;
    }
    let mut quantized = QuantizedPdf::new();
    let mut progress = Progress::default();
    for (i, chunk) in data.chunks(FRAME_MAX).enumerate() {
        let mut bytes = chunk.to_vec();
        if let Some(region) = x86(recipe) {
            crate::transform::x86::encode_frame(region, &mut bytes, (i * FRAME_MAX) as u64);
        }
        code_frame(
            predictor.as_mut(),
            &mut quantized,
            Some(&mut stage),
            Direction::Encode(&mut Encoder::new()),
            &mut bytes,
            &mut progress,
            &mut |_| Ok(()),
        )?;
    }
    Ok(stage.mixer_weights())
}

/// Whether the recipe transforms x86 code ([`crate::transform::x86`]): each frame's bytes
/// before they are coded, and back after they are decoded.
fn x86(recipe: &Recipe) -> Option<crate::transform::x86::Region> {
    recipe.mix.as_ref().and_then(|m| m.x86_region())
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

fn saved_model(predictor: &dyn BytePredictor, save: bool) -> Result<Option<Vec<u8>>> {
    save.then(|| predictor.save().context("cannot save the model"))
        .transpose()
}

/// A `.lmz` stream being read — one member or several, one after another — a frame at a
/// time, checking every member's length and CRC32. [`decompress`] (the CLI) and
/// [`crate::Decoder`] (the library) both drive it.
pub struct StreamDecoder<R> {
    input: CountingReader<R>,
    progress: Progress,
    members: Vec<Member>,
    first: Option<Recipe>,
    model: Option<Vec<u8>>,
    /// The member being decoded, between its header and its trailer.
    member: Option<MemberDecoder>,
    /// The last frame decoded, at its start ([`FRAME_MAX`] bytes, allocated once the first
    /// header has passed its checks: a lying header is refused before anything large).
    buf: Vec<u8>,
    ended: bool,
}

/// A member whose header is read.
struct MemberDecoder {
    recipe: Recipe,
    /// Its model, built (after the memory check) when its first frame arrives: a member
    /// without frames (an empty input) needs neither memory nor time for it.
    model: Option<Model>,
    quantized: QuantizedPdf,
    crc: crc32fast::Hasher,
    /// Its next frame's index.
    frame: u64,
    /// The format version of its header, which its frames and trailer follow.
    version: u8,
    /// Where it starts: in the stream, and in the output.
    start: (u64, u64),
}

/// A member's predictor and mixing stage.
struct Model {
    predictor: Box<dyn BytePredictor>,
    stage: Option<Stage>,
}

impl Model {
    /// The model of `recipe`, once the memory it needs is within `options`' limit.
    fn build(recipe: &Recipe, options: &Options<'_>) -> Result<Self> {
        check_memory(recipe, options)?;
        Ok(Model {
            predictor: predictor::build(recipe, options.weights)?,
            stage: recipe.mix.as_ref().map(Stage::new).transpose()?,
        })
    }
}

impl<R: Read> StreamDecoder<R> {
    /// A decoder that has read nothing yet.
    pub fn new(input: R) -> Self {
        StreamDecoder {
            input: CountingReader {
                inner: input,
                count: 0,
            },
            progress: Progress::default(),
            members: Vec::new(),
            first: None,
            model: None,
            member: None,
            buf: Vec::new(),
            ended: false,
        }
    }

    /// Decodes the stream's next frame and returns its bytes; `None` once the last member's
    /// trailer is checked and the input ends. A frame's bytes come before its member's checks:
    /// on an error, what was returned before must be discarded. An error in a member after the
    /// first names it (counted from 1).
    pub fn next_frame(
        &mut self,
        options: &Options<'_>,
        report: ProgressFn<'_>,
    ) -> Result<Option<&[u8]>> {
        while !self.ended {
            let number = self.members.len() + 1;
            let at = self.member.as_ref().map_or(self.input.count, |m| m.start.0);
            let in_member = || format!("member {number} (at byte {at})");
            let step = if number == 1 {
                self.step(options, report)
            } else {
                self.step(options, report).with_context(in_member)
            };
            if let Some(len) = step? {
                return Ok(Some(&self.buf[..len]));
            }
        }
        Ok(None)
    }

    /// One step of the stream: a member's header, one of its frames (returning its length), or
    /// its trailer.
    fn step(&mut self, options: &Options<'_>, report: ProgressFn<'_>) -> Result<Option<usize>> {
        let Some(member) = self.member.as_mut() else {
            let start = (self.input.count, self.progress.bytes);
            let header = if self.members.is_empty() {
                format::read_header(&mut self.input)?
            } else {
                let Some(header) = format::read_next_header(&mut self.input)? else {
                    self.ended = true;
                    return Ok(None);
                };
                header
            };
            self.member = Some(MemberDecoder::start(header, start, &mut self.progress)?);
            if self.buf.is_empty() {
                self.buf = vec![0u8; FRAME_MAX];
            }
            return Ok(None);
        };
        let index = member.frame;
        let Some(frame) = format::read_frame(&mut self.input, member.version, index)? else {
            let member = self.member.take().expect("a member is open");
            let start = member.start;
            let (recipe, model) = member.finish(options, &mut self.input, &mut self.progress)?;
            report(self.progress)?;
            self.members.push(Member {
                raw_bytes: self.progress.bytes - start.1,
                lmz_bytes: self.input.count - start.0,
                starts_from_file: matches!(recipe.base, crate::recipe::Base::File { .. }),
            });
            self.first.get_or_insert(recipe);
            self.model = model;
            return Ok(None);
        };
        let model = match &mut member.model {
            Some(model) => model,
            empty => empty.insert(Model::build(&member.recipe, options)?),
        };
        let bytes = &mut self.buf[..frame.raw_len];
        let bits_before = self.progress.bits;
        let mut dec = None;
        let direction = match frame.body {
            Body::Coded(words) => {
                self.progress.container_bytes += format::coded_frame_len(bytes.len(), words.len())
                    as u64
                    - 4 * words.len() as u64;
                let d = Decoder::new(words).map_err(|e| FormatError::BadFrame {
                    index,
                    why: format!("{e:#}"),
                })?;
                Direction::Decode(dec.insert(d))
            }
            Body::Stored(stored) => {
                self.progress.container_bytes +=
                    (format::stored_frame_len(bytes.len()) - bytes.len()) as u64;
                bytes.copy_from_slice(&stored);
                Direction::Replay
            }
        };
        let replay = matches!(direction, Direction::Replay);
        code_frame(
            model.predictor.as_mut(),
            &mut member.quantized,
            model.stage.as_mut(),
            direction,
            bytes,
            &mut self.progress,
            report,
        )
        .with_context(|| format!("in frame {index}"))?;
        if replay {
            self.progress.bits = bits_before + 8.0 * bytes.len() as f64;
        }
        if let Some(region) = x86(&member.recipe) {
            let start = self.progress.bytes - bytes.len() as u64 - member.start.1;
            crate::transform::x86::decode_frame(region, bytes, start);
        }
        member.crc.update(bytes);
        member.frame += 1;
        report(self.progress)?;
        Ok(Some(frame.raw_len))
    }

    /// What the stream held, once [`StreamDecoder::next_frame`] has returned `None`.
    pub fn finish(self) -> Summary {
        Summary {
            recipe: self
                .first
                .expect("the first member is decoded or its error returned"),
            raw_bytes: self.progress.bytes,
            lmz_bytes: self.input.count,
            model: self.model,
            members: self.members,
        }
    }
}

impl MemberDecoder {
    /// Checks a member's header (its model waits for its first frame).
    fn start(header: format::Header, start: (u64, u64), progress: &mut Progress) -> Result<Self> {
        format::check_numerics(&header)?;
        let recipe = read_recipe(&header)?;
        progress.container_bytes += header.len;
        let version = header.format_version;
        Ok(MemberDecoder {
            recipe,
            model: None,
            quantized: QuantizedPdf::new(),
            crc: crc32fast::Hasher::new(),
            frame: 0,
            version,
            start,
        })
    }

    /// Reads and checks the trailer after the end marker; returns the member's recipe and,
    /// when asked for, the model it ended with.
    fn finish(
        self,
        options: &Options<'_>,
        input: &mut impl Read,
        progress: &mut Progress,
    ) -> Result<(Recipe, Option<Vec<u8>>)> {
        let trailer = format::read_trailer(input, self.version)?;
        progress.container_bytes += 1 + trailer.len;
        let decoded = progress.bytes - self.start.1;
        if trailer.total_len != decoded {
            return Err(FormatError::LengthMismatch {
                trailer: trailer.total_len,
                decoded,
            }
            .into());
        }
        let actual = self.crc.finalize();
        if actual != trailer.crc {
            return Err(FormatError::ChecksumMismatch {
                expected: trailer.crc,
                actual,
            }
            .into());
        }
        let saved = match self.model {
            Some(model) => saved_model(model.predictor.as_ref(), options.save_model)?,
            // A member without frames ends with the model it starts with.
            None if options.save_model => saved_model(
                Model::build(&self.recipe, options)?.predictor.as_ref(),
                true,
            )?,
            None => None,
        };
        Ok((self.recipe, saved))
    }
}

/// Decompresses a `.lmz` stream — one member or several, one after another — from `input` into
/// `output` through a [`StreamDecoder`]. Output is written frame by frame; on error, what was
/// written must be discarded (the CLI writes to a temporary file and removes it).
pub fn decompress(
    options: &Options<'_>,
    input: impl Read,
    mut output: impl Write,
    report: ProgressFn<'_>,
) -> Result<Summary> {
    let mut decoder = StreamDecoder::new(input);
    while let Some(bytes) = decoder.next_frame(options, report)? {
        output.write_all(bytes).context("cannot write output")?;
    }
    output.flush().context("cannot write output")?;
    Ok(decoder.finish())
}

/// The recipe of a header: complete, canonical, in bytes (expanded from its level when the
/// header stores one).
pub fn read_recipe(header: &format::Header) -> Result<Recipe, FormatError> {
    compact::expand(&header.recipe, header.numerics_version)
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
