//! `lmzip bench` (zstd's `-b`): every file at every level of a range, compressed and
//! decompressed in memory, with bytes, bits per byte, speed and peak memory per run; a round
//! trip that does not give the input back fails the run (exit status 1).
//!
//! Peak memory is the process's resident high-water mark (`VmHWM` of /proc/self/status),
//! reset before each compression and each decompression by writing 5 to
//! /proc/self/clear_refs (Linux): so each figure is that run's peak, the input and output
//! buffers included. Where the reset is not possible, no figure is given.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::args::{BenchArgs, BenchFormat};
use super::progress::{Meter, say};
use super::settings::Verbosity;
use super::{FAILURE_STATUS, USAGE_STATUS, signals};
use crate::codec;
use crate::levels;
use crate::recipe::ModelKind;

/// How the memory column is measured, as the output says it.
const MEMORY_NOTE: &str = "peak memory: VmHWM of /proc/self/status, reset before each \
                           compression and decompression (/proc/self/clear_refs), input and \
                           output buffers included";

/// One file at one level.
struct Row {
    file: String,
    level: u8,
    raw: u64,
    lmz: u64,
    compress: Duration,
    decompress: Duration,
    /// Peak resident kB of the compression and of the decompression.
    peaks: (Option<u64>, Option<u64>),
    round_trip: bool,
}

impl Row {
    fn bits_per_byte(&self) -> f64 {
        if self.raw == 0 {
            0.0
        } else {
            8.0 * self.lmz as f64 / self.raw as f64
        }
    }
}

/// Decimal kB per second.
fn speed(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / 1000.0 / took.as_secs_f64().max(1e-9)
}

/// Runs the benchmark; returns the exit status.
pub fn run(args: &BenchArgs, quiet: bool) -> u8 {
    let begin = args.begin.unwrap_or(levels::DEFAULT_LEVEL);
    let end = args.end.unwrap_or(begin);
    if end < begin {
        say(format_args!(
            "lmzip: bench: the last level (-e {end}) is below the first (-b {begin})"
        ));
        return USAGE_STATUS;
    }
    let kind = args.model.unwrap_or(levels::DEFAULT_MODEL);
    let verbosity = if quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let mut status = 0;
    let mut rows = Vec::new();
    if args.format == BenchFormat::Text {
        println!("{}", text_header());
    }
    for path in &args.files {
        let label = path.display().to_string();
        let data = match std::fs::read(path).context("cannot read") {
            Ok(data) => data,
            Err(e) => {
                say(format_args!("lmzip: {label}: {e:#}"));
                status = FAILURE_STATUS;
                continue;
            }
        };
        for level in begin..=end {
            match measure(path, &data, kind, level, verbosity) {
                Ok(row) => {
                    if !row.round_trip {
                        say(format_args!(
                            "lmzip: {label}: level {level}: the round trip gave other bytes"
                        ));
                        status = FAILURE_STATUS;
                    }
                    if args.format == BenchFormat::Text {
                        println!("{}", text_row(&row));
                    }
                    rows.push(row);
                }
                Err(e) if e.downcast_ref::<signals::Interrupted>().is_some() => {
                    return signals::interrupted_status();
                }
                Err(e) => {
                    say(format_args!("lmzip: {label}: level {level}: {e:#}"));
                    status = FAILURE_STATUS;
                }
            }
        }
    }
    match args.format {
        BenchFormat::Text => println!("({MEMORY_NOTE})"),
        BenchFormat::Tsv => print!("{}", tsv(&rows)),
        BenchFormat::Json => println!("{}", json(&rows)),
    }
    status
}

/// Compresses and decompresses `data` at `level`, timing and measuring each.
fn measure(path: &Path, data: &[u8], kind: ModelKind, level: u8, v: Verbosity) -> Result<Row> {
    let label = path.display().to_string();
    let options = crate::Options::new()
        .level(level)
        .model(kind)
        .size(data.len() as u64);
    let (recipe, weights) = options.prepare()?;
    let seeded = options.prepare_seeded()?;
    let codec_options = codec::Options {
        weights: weights.as_deref(),
        save_model: false,
        expected_len: Some(data.len() as u64),
        known_len: None,
        memory_limit: None,
        choose_prior: true,
        seeded: seeded.as_ref(),
        choose_warm: true,
        choose_x86: true,
        choose_training: true,
    };
    let total = Some(data.len() as u64);

    let reset = reset_peak();
    let mut meter = Meter::new(v, &format!("{label} -{level}"), total);
    let started = Instant::now();
    let mut packed = Vec::new();
    codec::compress(&recipe, &codec_options, data, &mut packed, &mut |p| {
        meter.update(p)
    })?;
    let compress = started.elapsed();
    meter.finish();
    let compress_peak = peak_kb().filter(|_| reset);

    let reset = reset_peak();
    let mut meter = Meter::new(v, &format!("{label} -{level} (decompress)"), total);
    let started = Instant::now();
    let mut back = Vec::with_capacity(data.len());
    codec::decompress(&codec_options, &packed[..], &mut back, &mut |p| {
        meter.update(p)
    })?;
    let decompress = started.elapsed();
    meter.finish();
    let decompress_peak = peak_kb().filter(|_| reset);
    Ok(Row {
        file: label,
        level,
        raw: data.len() as u64,
        lmz: packed.len() as u64,
        compress,
        decompress,
        peaks: (compress_peak, decompress_peak),
        round_trip: back == data,
    })
}

/// Resets the process's resident high-water mark; whether that worked.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's resident high-water mark in kB.
fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A peak in MB for the table, or `-`.
fn mb(kb: Option<u64>) -> String {
    kb.map_or("-".into(), |k| format!("{:.1}", k as f64 / 1000.0))
}

fn text_header() -> String {
    format!(
        "{:<24} {:>5} {:>12} {:>12} {:>7} {:>10} {:>10} {:>9} {:>9} {:>5}",
        "file", "level", "bytes", "compressed", "bpb", "c kB/s", "d kB/s", "c MB", "d MB", "check"
    )
}

fn text_row(r: &Row) -> String {
    format!(
        "{:<24} {:>5} {:>12} {:>12} {:>7.3} {:>10.2} {:>10.2} {:>9} {:>9} {:>5}",
        r.file,
        r.level,
        r.raw,
        r.lmz,
        r.bits_per_byte(),
        speed(r.raw, r.compress),
        speed(r.raw, r.decompress),
        mb(r.peaks.0),
        mb(r.peaks.1),
        if r.round_trip { "ok" } else { "FAIL" }
    )
}

/// Tab-separated: a header line, then a row per run; memory in kB (VmHWM), empty when not
/// measured.
fn tsv(rows: &[Row]) -> String {
    let mut out = "file\tlevel\tbytes\tcompressed\tbpb\tcompress_kB_s\tdecompress_kB_s\t\
                   compress_peak_vmhwm_kB\tdecompress_peak_vmhwm_kB\tround_trip\n"
        .to_string();
    let kb = |k: Option<u64>| k.map_or(String::new(), |k| k.to_string());
    for r in rows {
        out += &format!(
            "{}\t{}\t{}\t{}\t{:.4}\t{:.3}\t{:.3}\t{}\t{}\t{}\n",
            r.file,
            r.level,
            r.raw,
            r.lmz,
            r.bits_per_byte(),
            speed(r.raw, r.compress),
            speed(r.raw, r.decompress),
            kb(r.peaks.0),
            kb(r.peaks.1),
            if r.round_trip { "ok" } else { "FAIL" }
        );
    }
    out
}

/// JSON: the memory note, and one object per run (times in seconds, memory in kB).
fn json(rows: &[Row]) -> String {
    let runs: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "file": r.file,
                "level": r.level,
                "bytes": r.raw,
                "compressed": r.lmz,
                "bits_per_byte": r.bits_per_byte(),
                "compress_seconds": r.compress.as_secs_f64(),
                "decompress_seconds": r.decompress.as_secs_f64(),
                "compress_kB_per_s": speed(r.raw, r.compress),
                "decompress_kB_per_s": speed(r.raw, r.decompress),
                "compress_peak_kB": r.peaks.0,
                "decompress_peak_kB": r.peaks.1,
                "round_trip": r.round_trip,
            })
        })
        .collect();
    serde_json::json!({ "memory": MEMORY_NOTE, "runs": runs }).to_string()
}
