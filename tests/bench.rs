//! `lmzip bench`: a tiny input at level 1, in each output format; the figures must agree with
//! the input and with what `lmzip -1` writes for it.

mod common;

use std::fs;

use common::cli::{assert_usage_error, ok, run};
use tempfile::TempDir;

#[test]
fn bench_reports_what_compress_writes_in_every_format() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = common::related_text(1500, 4);
    fs::write(d.join("a.txt"), &data).unwrap();
    let lmz = ok(run(d, &["-1", "-c", "a.txt"], b"")).stdout.len() as u64;

    let tsv = String::from_utf8(
        ok(run(
            d,
            &["bench", "-b", "1", "-e", "1", "--format", "tsv", "a.txt"],
            b"",
        ))
        .stdout,
    )
    .unwrap();
    let lines: Vec<&str> = tsv.lines().collect();
    assert_eq!(lines.len(), 2, "{tsv}");
    let head: Vec<&str> = lines[0].split('\t').collect();
    let row: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(head.len(), row.len(), "{tsv}");
    let col = |name: &str| row[head.iter().position(|h| *h == name).expect(name)];
    assert_eq!(col("file"), "a.txt");
    assert_eq!(col("level"), "1");
    assert_eq!(col("bytes"), data.len().to_string());
    assert_eq!(col("compressed"), lmz.to_string());
    let bpb: f64 = col("bpb").parse().unwrap();
    assert!(
        (bpb - 8.0 * lmz as f64 / data.len() as f64).abs() < 1e-3,
        "{bpb}"
    );
    assert!(col("compress_kB_s").parse::<f64>().unwrap() > 0.0);
    assert_eq!(col("round_trip"), "ok");
    if cfg!(target_os = "linux") {
        let peak: u64 = col("compress_peak_vmhwm_kB").parse().unwrap();
        assert!(peak > 1000, "a process takes more than 1 MB: {peak}");
    }

    let json = ok(run(d, &["bench", "-b1", "--format", "json", "a.txt"], b"")).stdout;
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["compressed"], lmz);
    assert_eq!(runs[0]["round_trip"], true);
    assert!(v["memory"].as_str().unwrap().contains("VmHWM"));

    let text = String::from_utf8(ok(run(d, &["bench", "-b", "1", "a.txt"], b"")).stdout).unwrap();
    assert!(
        text.contains(&lmz.to_string()) && text.contains(" ok"),
        "{text}"
    );
    assert!(
        text.contains("VmHWM"),
        "the table says how memory is measured: {text}"
    );
}

#[test]
fn bench_refuses_a_backward_range_and_fails_on_a_missing_file() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    assert_usage_error(
        &run(d, &["bench", "-b", "3", "-e", "2", "x"], b""),
        "below the first",
    );
    let out = run(d, &["bench", "-b", "1", "missing"], b"");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bench_is_in_the_help_the_manual_and_the_completions() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let help = String::from_utf8(ok(run(d, &["--help"], b"")).stdout).unwrap();
    assert!(help.contains("bench"), "{help}");
    let man = String::from_utf8(ok(run(d, &["man"], b"")).stdout).unwrap();
    assert!(man.contains("lmzip bench"), "{man}");
    let bash = String::from_utf8(ok(run(d, &["completions", "bash"], b"")).stdout).unwrap();
    assert!(bash.contains("--format"), "the bench options complete");
}
