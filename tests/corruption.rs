//! A damaged `.lmz` file never panics the decoder and never decodes to wrong bytes: every case
//! either fails with an error or gives back exactly the original.
//!
//! For small files of both models in several training modes, the sweep tries every truncation,
//! every single-bit flip, a few extensions, and flips in the coded words behind a recomputed
//! frame checksum (which reach the range decoder and the model instead of stopping at the
//! checksum). A panic is caught and reported as a failure naming the case. A summary of the
//! outcomes per class is printed (`-- --nocapture` to see it).
//!
//! Most cases fail early and cheaply (a checksum or a length before anything is decoded); the
//! ones that damage only the end marker or trailer, and the resealed ones, decode the whole file
//! before the mismatch shows, which is why the inputs are small.
//! The last test takes a few damaged files through the `lmzip` binary.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Cursor;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::format;
use lmzip::recipe::{ModelKind, OptimizerKind, Recipe};

use common::cli::{assert_fails_with, listing, run, stderr};
use common::{binary, mode_name, text, tiny};

/// The parts of a stream, as byte ranges.
struct Regions {
    header: Range<usize>,
    frames: Range<usize>,
    end_marker: Range<usize>,
    trailer: Range<usize>,
}

impl Regions {
    fn of(packed: &[u8]) -> Regions {
        let layout = format::scan(&mut Cursor::new(packed)).expect("a valid stream");
        assert_eq!(layout.header.format_version, format::FORMAT_VERSION);
        let header_len = layout.header.len as usize;
        let len = packed.len();
        assert_eq!(layout.stream_len as usize, len);
        // The end marker is one zero byte; the trailer a LEB128 length and a CRC32.
        let trailer_len = layout.trailer.len as usize;
        Regions {
            header: 0..header_len,
            frames: header_len..len - trailer_len - 1,
            end_marker: len - trailer_len - 1..len - trailer_len,
            trailer: len - trailer_len..len,
        }
    }

    /// The payload of the stream's one frame (the inputs here are shorter than a frame): the
    /// coded words, or the input when the frame stores it.
    fn words(&self, packed: &[u8]) -> Range<usize> {
        let mut r = &packed[self.frames.start..];
        let mut seen = Vec::new();
        let raw_len = format::varint::read(&mut r, &mut seen, "frame")
            .unwrap()
            .unwrap();
        let mode = r[0];
        r = &r[1..];
        if mode == 0 {
            format::varint::read(&mut r, &mut seen, "frame")
                .unwrap()
                .unwrap();
        }
        let head = seen.len() + 1;
        let payload = self.frames.len() - head - 4;
        match mode {
            0 => assert_eq!(payload % 4, 0, "whole words"),
            _ => assert_eq!(payload, raw_len as usize, "the stored input"),
        }
        self.frames.start + head..self.frames.end - 4
    }

    /// Recomputes the frame's CRC32 after its words were changed.
    fn reseal(&self, packed: &mut [u8]) {
        let crc = crc32fast::hash(&packed[self.frames.start..self.frames.end - 4]);
        packed[self.frames.end - 4..self.frames.end].copy_from_slice(&crc.to_le_bytes());
    }

    fn name_of(&self, byte: usize) -> &'static str {
        if self.header.contains(&byte) {
            "flip in header"
        } else if self.frames.contains(&byte) {
            "flip in frames"
        } else if self.end_marker.contains(&byte) {
            "flip in end marker"
        } else {
            debug_assert!(self.trailer.contains(&byte));
            "flip in trailer"
        }
    }
}

/// Flips per file that reach the decoder behind a recomputed frame checksum.
const RESEALED_FLIPS: usize = 128;

/// What decoding a damaged file did.
enum Outcome {
    Error,
    Original,
    /// `Ok` with bytes other than the original: data silently lost.
    WrongBytes,
    Panic(String),
}

fn decode(damaged: &[u8], original: &[u8]) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| decompress_bytes(damaged))) {
        Ok(Err(_)) => Outcome::Error,
        Ok(Ok(bytes)) if bytes == original => Outcome::Original,
        Ok(Ok(_)) => Outcome::WrongBytes,
        Err(payload) => Outcome::Panic(
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

/// Outcomes per class of damage, and every case that broke the rule.
#[derive(Default)]
struct Tally {
    /// class -> (errors, decoded to the original, time spent)
    classes: BTreeMap<&'static str, (usize, usize, Duration)>,
    failures: Vec<String>,
}

impl Tally {
    /// Decodes `damaged` and files the outcome under `class`.
    fn run(&mut self, class: &'static str, case: String, damaged: &[u8], original: &[u8]) {
        let start = Instant::now();
        let outcome = decode(damaged, original);
        let counts = self.classes.entry(class).or_default();
        counts.2 += start.elapsed();
        match outcome {
            Outcome::Error => counts.0 += 1,
            Outcome::Original => counts.1 += 1,
            Outcome::WrongBytes => self
                .failures
                .push(format!("{case}: decoded to wrong bytes")),
            Outcome::Panic(msg) => self.failures.push(format!("{case}: panicked: {msg}")),
        }
    }

    fn summary(&self, name: &str, packed_len: usize) -> String {
        let cases: usize = self.classes.values().map(|(e, o, _)| e + o).sum();
        let mut s = format!("{name}: {packed_len}-byte file, {cases} cases\n");
        for (class, (errors, originals, time)) in &self.classes {
            s += &format!(
                "  {class:<22} {errors:>6} errors {originals:>4} decoded to the original \
                 {:>7.2} s\n",
                time.as_secs_f64()
            );
        }
        s
    }
}

/// Compresses `data` with `recipe` and runs every damage class on the result.
fn sweep(recipe: &Recipe, data: &[u8]) {
    let name = mode_name(recipe);
    let packed = compress_bytes(recipe, data).unwrap();
    assert_eq!(
        decompress_bytes(&packed).unwrap(),
        data,
        "{name}: round trip"
    );
    let regions = Regions::of(&packed);
    let mut resealed = packed.clone();
    regions.reseal(&mut resealed);
    assert_eq!(
        resealed, packed,
        "{name}: one frame, resealed as the encoder sealed it"
    );
    let mut tally = Tally::default();

    for len in 0..packed.len() {
        let case = format!("{name}: truncated to {len}");
        tally.run("truncation", case, &packed[..len], data);
    }

    for bit in 0..packed.len() * 8 {
        let (byte, shift) = (bit / 8, bit % 8);
        let mut damaged = packed.clone();
        damaged[byte] ^= 1 << shift;
        let case = format!("{name}: bit {shift} of byte {byte} flipped");
        tally.run(regions.name_of(byte), case, &damaged, data);
    }

    // Flips in the coded words (or the stored input) whose frame checksum is recomputed, so
    // that the damage reaches the range decoder and the model: evenly spread bits (an odd step, so every bit position
    // of a byte is hit), each a whole decode of garbage until the trailer's checks.
    let words = regions.words(&packed);
    let bits = words.len() * 8;
    let step = (bits / RESEALED_FLIPS).max(1) | 1;
    for bit in (0..bits).step_by(step).take(RESEALED_FLIPS) {
        let (byte, shift) = (words.start + bit / 8, bit % 8);
        let mut damaged = packed.clone();
        damaged[byte] ^= 1 << shift;
        regions.reseal(&mut damaged);
        let case = format!("{name}: bit {shift} of byte {byte} flipped, frame checksum resealed");
        tally.run("resealed flip in payload", case, &damaged, data);
    }

    for (what, extended) in [
        ("a zero byte appended", [&packed[..], &[0]].concat()),
        ("the end marker appended", [&packed[..], &[0; 4]].concat()),
        (
            "the magic number appended",
            [&packed[..], &format::MAGIC].concat(),
        ),
    ] {
        tally.run("extension", format!("{name}: {what}"), &extended, data);
    }
    // A stream is a sequence of members: the file twice is the data twice.
    let doubled = [&packed[..], &packed[..]].concat();
    assert_eq!(
        decompress_bytes(&doubled).unwrap(),
        [data, data].concat(),
        "{name}: two members"
    );

    eprint!("{}", tally.summary(&name, packed.len()));
    assert!(
        tally.failures.is_empty(),
        "{} damaged files broke the rule:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
}

#[test]
fn mamba1_without_training_survives_every_damage() {
    sweep(&tiny(ModelKind::Mamba1, None, 1), &text(2000));
}

#[test]
fn mamba1_with_adam_survives_every_damage() {
    sweep(
        &tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1),
        &binary(1200, 7),
    );
}

#[test]
fn rwkv7_with_sgd_survives_every_damage() {
    sweep(
        &tiny(ModelKind::Rwkv7, Some(OptimizerKind::Sgd), 1),
        &binary(500, 11),
    );
}

#[test]
fn rwkv7_with_adam_over_segments_survives_every_damage() {
    sweep(
        &tiny(ModelKind::Rwkv7, Some(OptimizerKind::Adam), 8),
        &text(600),
    );
}

#[test]
fn mamba1_with_the_mixing_stage_survives_every_damage() {
    sweep(
        &common::with_mix(&tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1)),
        &text(600),
    );
}

/// Through the binary: a damaged file ends with status 1 and one line naming the file, and
/// leaves no output (not even after the trailer check, when all bytes were already written).
#[test]
fn the_binary_reports_damage_in_one_line_and_leaves_nothing() {
    let dir = tempfile::TempDir::new().unwrap();
    let d = dir.path();
    let data = text(1500);
    let packed = compress_bytes(
        &tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1),
        &data,
    )
    .unwrap();
    let regions = Regions::of(&packed);
    let flip = |byte: usize| {
        let mut damaged = packed.clone();
        damaged[byte] ^= 0x10;
        damaged
    };
    let cases = [
        (
            "truncated in the header",
            packed[..regions.header.end / 2].to_vec(),
        ),
        (
            "truncated in the frames",
            packed[..regions.frames.end - 5].to_vec(),
        ),
        (
            "truncated in the trailer",
            packed[..packed.len() - 3].to_vec(),
        ),
        ("flip in the recipe", flip(regions.header.start + 20)),
        ("flip in the frames", flip(regions.frames.start + 40)),
        ("flip in the stored length", flip(regions.trailer.start)),
        ("flip in the stored checksum", flip(regions.trailer.end - 1)),
        ("byte appended", [&packed[..], &[7]].concat()),
    ];
    for (what, damaged) in cases {
        fs::write(d.join("x.lmz"), &damaged).unwrap();
        for command in ["decompress", "test"] {
            let out = run(d, &[command, "x.lmz"], b"");
            let err = stderr(&out);
            assert_fails_with(&out, "lmzip: x.lmz: ");
            assert_eq!(err.lines().count(), 1, "{what}, {command}: {err}");
            let left = listing(d);
            assert_eq!(left, ["x.lmz"], "{what}, {command}: nothing else is left");
        }
    }
}
