//! What a run says while it works and when it is done: a progress bar on a terminal's stderr,
//! and the one-line summary of `-v`.
//!
//! The progress callback is also where a signal is noticed ([`super::signals::check`]): the
//! codec calls it every few thousand bytes, whether or not a bar is shown.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::settings::Verbosity;
use super::signals;
use crate::codec::Progress;

// Decimal units (kB = 1000 bytes), as in the `-v` summary.
const BAR_KNOWN_TOTAL: &str = "{prefix} {wide_bar} {decimal_bytes}/{decimal_total_bytes} \
                               {decimal_bytes_per_sec} {msg} ETA {eta}";
const BAR_UNKNOWN_TOTAL: &str =
    "{prefix} {spinner} {decimal_bytes} {decimal_bytes_per_sec} {msg} {elapsed}";

/// Whether bars may be shown at all (`--no-progress` turns them off for the whole run).
static BARS: AtomicBool = AtomicBool::new(true);

/// Allows or forbids progress bars for the rest of the run.
pub fn set_bars(allowed: bool) {
    BARS.store(allowed, Ordering::Relaxed);
}

/// Whether bars may be shown (not after `--no-progress`).
pub fn bars_allowed() -> bool {
    BARS.load(Ordering::Relaxed)
}

/// Whether the one-line summary of a file is said: always with `-v`, and by default when
/// stderr is a terminal (someone watches), as zstd does.
pub fn wants_summary(verbosity: Verbosity) -> bool {
    verbosity >= Verbosity::Verbose
        || (verbosity == Verbosity::Normal && std::io::stderr().is_terminal())
}

/// Progress of one file (or one phase of it, such as `--verify`).
pub struct Meter {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Meter {
    /// A meter whose bar shows only when stderr is a terminal and the run is not quiet.
    pub fn new(verbosity: Verbosity, label: &str, total: Option<u64>) -> Self {
        let show = verbosity > Verbosity::Quiet
            && BARS.load(Ordering::Relaxed)
            && std::io::stderr().is_terminal();
        let bar = show.then(|| {
            let (bar, template) = match total {
                Some(n) => (ProgressBar::new(n), BAR_KNOWN_TOTAL),
                None => (ProgressBar::new_spinner(), BAR_UNKNOWN_TOTAL),
            };
            // The templates are constants: a bad one is a bug that the fallback style hides.
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_prefix(label.to_string());
            bar
        });
        Meter {
            bar,
            started: Instant::now(),
        }
    }

    /// The progress callback: stops the run after a signal, else moves the bar.
    pub fn update(&mut self, p: Progress) -> Result<()> {
        signals::check()?;
        if let Some(bar) = &self.bar {
            // The message first: moving the position redraws.
            // The container included, as in the summary line.
            bar.set_message(format!("{:.3} bpb", p.stream_bits_per_byte()));
            bar.set_position(p.bytes);
        }
        Ok(())
    }

    /// Clears the bar (so that a summary line or the next phase's bar has the terminal line)
    /// and returns the time taken.
    pub fn finish(&mut self) -> Duration {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.started.elapsed()
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes one line to stderr. A failing stderr is no reason to fail (or panic, as `eprintln!`
/// would): the line is dropped.
pub fn say(line: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(line);
    let _ = err.write_all(b"\n");
}

/// Bits per byte of `compressed` bytes standing for `raw` bytes.
pub fn bits_per_byte(compressed: u64, raw: u64) -> f64 {
    if raw == 0 {
        0.0
    } else {
        8.0 * compressed as f64 / raw as f64
    }
}

/// Speed in kilobytes (1000 bytes) per second.
pub fn kb_per_second(bytes: u64, took: Duration) -> f64 {
    let secs = took.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 / 1000.0 / secs
    } else {
        0.0
    }
}

/// The summary line: `NAME: IN -> OUT bytes, BPB bpb, KB/s KB/s, TARGET`.
pub fn summary(
    label: &str,
    bytes_in: u64,
    bytes_out: u64,
    (compressed, raw): (u64, u64),
    took: Duration,
    target: &str,
) {
    say(format_args!(
        "{label}: {bytes_in} -> {bytes_out} bytes, {:.3} bpb, {:.1} KB/s, {:.1} s{}{target}",
        bits_per_byte(compressed, raw),
        kb_per_second(raw, took),
        took.as_secs_f64(),
        if target.is_empty() { "" } else { " -> " },
    ));
}
