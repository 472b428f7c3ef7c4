//! `lmzip train`: offline training lowers the validation bits per byte, gives the same weights
//! whatever the number of threads and when resumed from a checkpoint, writes a model file that
//! compression starts from, and refuses bad arguments with clear messages.
//!
//! Every run trains a tiny Mamba-1 (16 wide, one block, context tables of 2^8 rows, so that the
//! sparse rows are exercised) on a few tens of kilobytes of generated text.

mod common;

use std::fs;
use std::path::Path;

use anyhow::{Result, bail};
use lmzip::levels;
use lmzip::modelfile::ModelFile;
use lmzip::recipe::{ModelConfig, ModelKind};
use lmzip::train::offline::{
    self, Budget, CurveRow, Decay, LrSchedule, Observer, Plan, Status, Trained,
};

use common::cli::{BIN, command, output};
use common::related_text;

const TINY: &str = "cfg:hidden=16,ctx=8";

fn tiny_config() -> ModelConfig {
    levels::recipe(ModelKind::Mamba1, 3)
        .edit(TINY, None)
        .unwrap()
        .config()
        .clone()
}

fn plan(streams: usize, bptt: usize, threads: usize, bytes: u64) -> Plan {
    Plan {
        config: tiny_config(),
        seed: 0,
        streams,
        bptt,
        threads,
        schedule: LrSchedule {
            peak: 0.01,
            warmup: 20,
            decay: Decay::Cosine,
            floor: 0.1,
        },
        clip: 0.0,
        budget: Budget {
            bytes: Some(bytes),
            seconds: None,
        },
        valid_every: bytes / 4,
        report_every: bytes / 8,
        checkpoint_every: 0,
    }
}

/// Collects the curve, keeps the last checkpoint, and stops the run (as a signal does) once
/// `stop_at` bytes are behind.
#[derive(Default)]
struct Record {
    rows: Vec<CurveRow>,
    checkpoint: Option<Vec<u8>>,
    keep: bool,
    stop_at: Option<u64>,
}

impl Observer for Record {
    fn status(&mut self, s: &Status) -> Result<()> {
        match self.stop_at {
            Some(at) if s.bytes >= at => bail!("stopped"),
            _ => Ok(()),
        }
    }
    fn curve(&mut self, row: &CurveRow) -> Result<()> {
        self.rows.push(*row);
        Ok(())
    }
    fn keeps_checkpoints(&self) -> bool {
        self.keep
    }
    fn checkpoint(&mut self, bytes: &[u8]) -> Result<()> {
        self.checkpoint = Some(bytes.to_vec());
        Ok(())
    }
}

fn run(plan: &Plan, data: &[u8], valid: &[u8]) -> (Trained, Record) {
    let mut rec = Record::default();
    let t = offline::train(plan, data, valid, None, &mut rec).unwrap();
    (t, rec)
}

#[test]
fn training_lowers_the_validation_bits_per_byte() {
    let (data, valid) = (related_text(40_000, 1), related_text(4000, 2));
    let (trained, rec) = run(&plan(4, 32, 2, 64 * 1024), &data, &valid);
    let measured: Vec<f64> = rec.rows.iter().filter_map(|r| r.valid_bpb).collect();
    let (first, last) = (measured[0], *measured.last().unwrap());
    assert!(measured.len() >= 5, "{measured:?}");
    assert!(
        first > 7.0 && last < first - 3.0,
        "validation went {measured:?}"
    );
    assert_eq!(trained.valid_bpb, last);
    assert_eq!(trained.steps, 512);
    // The output holds the network's weights and nothing that resumes a run.
    let file = ModelFile::from_bytes(&trained.weights).unwrap();
    assert!(file.tensors.keys().all(|k| !k.starts_with("lmzip.")));
    assert!(file.metadata["lmzip.trained"].contains("65536 bytes"));
}

#[test]
fn two_threads_give_the_weights_of_one() {
    let data = related_text(20_000, 3);
    let valid = related_text(1000, 4);
    for streams in [2, 3] {
        let (one, _) = run(&plan(streams, 16, 1, 8 * 1024), &data, &valid);
        let (two, _) = run(&plan(streams, 16, 2, 8 * 1024), &data, &valid);
        assert!(one.weights == two.weights, "{streams} streams");
    }
}

#[test]
fn a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one() {
    let (data, valid) = (related_text(20_000, 5), related_text(1000, 6));
    let p = plan(2, 24, 2, 12 * 1024);
    let (whole, _) = run(&p, &data, &valid);
    // Stopped part way, as a signal stops it: the checkpoint is written on the way out.
    let mut first = Record {
        keep: true,
        stop_at: Some(5000),
        ..Record::default()
    };
    assert!(offline::train(&p, &data, &valid, None, &mut first).is_err());
    let saved = ModelFile::from_bytes(first.checkpoint.as_ref().unwrap()).unwrap();
    assert_eq!(saved.metadata["lmzip.train.steps"], "105");
    // Resumed with another thread count: the same weights, byte for byte.
    let one_thread = Plan {
        threads: 1,
        ..p.clone()
    };
    let mut second = Record::default();
    let resumed = offline::train(&one_thread, &data, &valid, Some(&saved), &mut second).unwrap();
    assert!(resumed.weights == whole.weights);
    // Another plan or other data is refused.
    let other = Plan {
        bptt: 16,
        ..p.clone()
    };
    let e = offline::train(&other, &data, &valid, Some(&saved), &mut Record::default());
    assert!(e.err().unwrap().to_string().contains("another run"));
    let e = offline::train(&p, &data[1..], &valid, Some(&saved), &mut Record::default());
    assert!(e.err().unwrap().to_string().contains("another run"));
}

/// The default level's network with its tables at the size the built-in prior was trained at
/// trains on from the prior (whose output bias the offline network, which has none, leaves
/// out): its first validation is far below a seeded network's ~8 bits per byte.
#[test]
fn the_default_level_trains_on_from_its_prior() {
    let config = levels::recipe(ModelKind::Mamba1, 3)
        .edit("cfg:ctx=9", None)
        .unwrap()
        .config()
        .clone();
    assert_ne!(config.prior(), 0, "the level's prior is kept at ctx 9");
    let p = Plan {
        config,
        ..plan(2, 16, 1, 1024)
    };
    let (data, valid) = (related_text(4000, 7), related_text(2000, 8));
    let (trained, rec) = run(&p, &data, &valid);
    let first = rec.rows.iter().find_map(|r| r.valid_bpb).unwrap();
    assert!(first < 6.0, "the prior's start measured {first} bits per byte");
    assert!(trained.valid_bpb < 6.0, "{}", trained.valid_bpb);
    let file = ModelFile::from_bytes(&trained.weights).unwrap();
    assert!(!file.tensors.contains_key("output_bias"));
}

fn lmzip(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = command(dir);
    cmd.args(args);
    let out = output(cmd, b"");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_line_trains_writes_a_curve_and_compression_starts_from_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("data"), related_text(30_000, 7)).unwrap();
    fs::write(dir.path().join("valid"), related_text(2000, 8)).unwrap();
    fs::write(dir.path().join("input"), related_text(3000, 9)).unwrap();
    let train = [
        "train",
        "--data",
        "data",
        "--valid",
        "valid",
        "--out",
        "prior.safetensors",
        "--recipe",
        TINY,
        "--streams",
        "2",
        "--bptt",
        "16",
        "--bytes",
        "16K",
        "--lr",
        "0.01",
        "--curve",
        "curve.tsv",
        "--checkpoint",
        "ck.safetensors",
        "-T",
        "2",
    ];
    let (ok, err) = lmzip(dir.path(), &train);
    assert!(ok, "{err}");
    let curve = fs::read_to_string(dir.path().join("curve.tsv")).unwrap();
    let mut lines = curve.lines();
    assert_eq!(
        lines.next(),
        Some("bytes\ttrain_bpb\tvalid_bpb\tlr\tseconds")
    );
    assert!(lines.count() >= 9, "{curve}");
    // A second run does not overwrite the output without -f.
    let (ok, err) = lmzip(dir.path(), &train);
    assert!(!ok && err.contains("exists"), "{err}");
    // Compression starts from the weights, and decompression needs them.
    let (ok, err) = lmzip(
        dir.path(),
        &[
            "compress",
            "--weights",
            "prior.safetensors",
            "input",
            "-o",
            "input.lmz",
        ],
    );
    assert!(ok, "{err}");
    let (ok, err) = lmzip(
        dir.path(),
        &["test", "--weights", "prior.safetensors", "input.lmz"],
    );
    assert!(ok, "{err}");
    // The checkpoint loads as weights too.
    let (ok, err) = lmzip(
        dir.path(),
        &[
            "compress",
            "--weights",
            "ck.safetensors",
            "input",
            "-o",
            "input2.lmz",
        ],
    );
    assert!(ok, "{err}");
}

#[test]
fn bad_arguments_are_refused_with_clear_messages() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("data"), related_text(3000, 1)).unwrap();
    fs::write(dir.path().join("empty"), b"").unwrap();
    let base = ["train", "--recipe", TINY, "--out", "o.safetensors"];
    let cases: &[(&[&str], &str)] = &[
        (&["--data", "missing"], "cannot read --data missing"),
        (&["--data", "empty"], "--data empty is empty"),
        (
            &["--data", "data", "--valid", "missing"],
            "cannot read --valid missing",
        ),
        (
            &["--data", "data", "--valid", "empty"],
            "--valid empty is empty",
        ),
        (
            &["--data", "data", "--bptt", "0"],
            "--bptt 0 is out of range",
        ),
        (
            &["--data", "data", "--streams", "0"],
            "--streams 0 is out of range",
        ),
        (
            &["--data", "data", "--lr", "0"],
            "learning rate 0 is out of range",
        ),
        (&["--data", "data", "--time", "0"], "not a time above 0"),
        (&["--data", "data", "--time", "3d"], "not a time"),
        (
            &["--data", "data", "--epochs", "0"],
            "--epochs 0 is out of range",
        ),
        (
            &["--data", "data", "--resume", "missing"],
            "--resume missing: no such file",
        ),
        (&["--data", "data", "--recipe", "cfg:hidden=0"], "hidden"),
        (&["--data", "data", "--resume", "data"], "--resume data"),
    ];
    for (args, want) in cases {
        let mut all = base.to_vec();
        all.extend_from_slice(args);
        let (ok, err) = lmzip(dir.path(), &all);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!dir.path().join("o.safetensors").exists(), "{args:?}");
    }
    let out = std::process::Command::new(BIN)
        .args(["train"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--data"));
}
