//! `--stats FILE.tsv`: the learning curve of a run, one line per [`STATS_BLOCK`] bytes of
//! input, for plotting (scripts/plot.sh).
//!
//! Columns, tab-separated after a header line: `position` (input bytes at the end of the
//! block), `block_bpb` (the model's bits per byte over the block), `total_bpb` (over the input
//! so far), `kb_per_s` (speed over the block, 1000 bytes per second). Bits are the model's
//! cost; the container adds some 30 bytes per member on top.

use std::fmt::Write as _;
use std::time::Instant;

use crate::codec::{PROGRESS_EVERY, Progress};

/// Input bytes per line. A multiple of the codec's report interval, so that every line ends at
/// an exact report.
pub const STATS_BLOCK: u64 = 16 * 1024;
const _: () = assert!(STATS_BLOCK.is_multiple_of(PROGRESS_EVERY));

pub const HEADER: &str = "position\tblock_bpb\ttotal_bpb\tkb_per_s\n";

/// The curve being recorded.
pub struct Curve {
    text: String,
    started: Instant,
    last: Progress,
    /// Progress and time at the end of the last line written.
    mark: (Progress, f64),
}

impl Default for Curve {
    fn default() -> Self {
        Curve {
            text: HEADER.to_string(),
            started: Instant::now(),
            last: Progress::default(),
            mark: (Progress::default(), 0.0),
        }
    }
}

impl Curve {
    /// Takes one progress report.
    pub fn record(&mut self, p: Progress) {
        self.last = p;
        if p.bytes >= self.mark.0.bytes + STATS_BLOCK {
            self.line(p);
        }
    }

    fn line(&mut self, p: Progress) {
        let now = self.started.elapsed().as_secs_f64();
        let (m, t) = self.mark;
        let bytes = p.bytes - m.bytes;
        let block_bpb = (p.bits - m.bits) / bytes as f64;
        let speed = if now > t {
            bytes as f64 / 1000.0 / (now - t)
        } else {
            0.0
        };
        let _ = writeln!(
            self.text,
            "{}\t{block_bpb:.4}\t{:.4}\t{speed:.2}",
            p.bytes,
            p.bits_per_byte()
        );
        self.mark = (p, now);
    }

    /// The whole table, with the last (partial) block.
    pub fn finish(mut self) -> String {
        if self.last.bytes > self.mark.0.bytes {
            self.line(self.last);
        }
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_block_and_one_for_the_rest() {
        let mut curve = Curve::default();
        let mut p = Progress::default();
        for _ in 0..9 {
            p.bytes += PROGRESS_EVERY;
            p.bits += 2.0 * PROGRESS_EVERY as f64;
            curve.record(p);
        }
        p.bytes += 10;
        p.bits += 80.0;
        curve.record(p);
        let text = curve.finish();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0], ["position", "block_bpb", "total_bpb", "kb_per_s"]);
        assert_eq!(lines[1][..3], ["16384", "2.0000", "2.0000"]);
        assert_eq!(lines[2][..3], ["32768", "2.0000", "2.0000"]);
        let total = (2.0 * 9.0 * 4096.0 + 80.0) / (9.0 * 4096.0 + 10.0);
        assert_eq!(lines[3][0], "36874");
        assert_eq!(lines[3][1], format!("{:.4}", (8192.0 + 80.0) / 4106.0));
        assert_eq!(lines[3][2], format!("{total:.4}"));
    }
}
