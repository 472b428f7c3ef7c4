//! The network's threads never change a bit (docs/determinism.md): with 1, 2 and 3 threads
//! the kernels split rows, steps and channels differently, and every count writes the same
//! compressed bytes and decodes the others' — for both models, one-step training and 16-byte
//! TBPTT segments, through the library (pools that split even the tiny models' products) and
//! through the binary's `-T`.

mod common;

use common::cli::{BIN, assert_usage_error, ok, output, tiny_flags};
use common::{text, tiny_with};
use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::pool::{MIN_PART_WORK_ENV_VAR, Pool};
use lmzip::recipe::{ModelKind, Recipe};

const THREADS: [usize; 3] = [1, 2, 3];

/// A pool of `threads` that gives every part, however small, a thread of its own.
fn eager_pool(threads: usize) -> Pool {
    Pool::new(threads).unwrap().with_min_part_work(1)
}

fn recipes() -> Vec<(String, Recipe)> {
    let mut out = Vec::new();
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        for bptt in [1, 16] {
            let schedule = format!("0..:train(lr=0.003,bptt={bptt})");
            out.push((
                format!("{}/bptt{bptt}", kind.name()),
                tiny_with(kind, &schedule),
            ));
        }
    }
    out
}

#[test]
fn every_thread_count_writes_the_same_bytes_and_decodes_the_others() {
    let input = text(1200);
    for (name, recipe) in recipes() {
        let packed: Vec<Vec<u8>> = THREADS
            .iter()
            .map(|&n| eager_pool(n).install(|| compress_bytes(&recipe, &input).unwrap()))
            .collect();
        for (n, bytes) in THREADS.iter().zip(&packed) {
            assert!(bytes == &packed[0], "{name}: {n} threads wrote other bytes");
        }
        // Each count decodes the file another count wrote.
        for (k, &n) in THREADS.iter().enumerate() {
            let other = &packed[(k + 1) % THREADS.len()];
            let back = eager_pool(n).install(|| decompress_bytes(other).unwrap());
            assert!(back == input, "{name}: {n} threads do not decode");
        }
        // Without any pool: the bytes of one thread.
        assert!(
            compress_bytes(&recipe, &input).unwrap() == packed[0],
            "{name}: no pool"
        );
    }
}

/// Runs the binary with `args`, feeding `stdin`, with pools that split every kernel however
/// small; it must succeed.
fn lmzip(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.env(MIN_PART_WORK_ENV_VAR, "1").args(args);
    ok(output(cmd, stdin)).stdout
}

#[test]
fn the_binary_writes_the_same_bytes_for_every_thread_count() {
    let input = text(800);
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        for bptt in ["1", "16"] {
            let name = format!("{}/bptt{bptt}", kind.name());
            let packed: Vec<Vec<u8>> = ["1", "2", "3"]
                .into_iter()
                .map(|t| {
                    let mut args = vec!["compress", "-c", "-T", t, "--bptt", bptt];
                    args.extend(tiny_flags(kind));
                    lmzip(&args, &input)
                })
                .collect();
            assert!(packed[1] == packed[0], "{name}: -T 2 wrote other bytes");
            assert!(packed[2] == packed[0], "{name}: -T 3 wrote other bytes");
            for (t, other) in [("1", &packed[2]), ("2", &packed[0]), ("3", &packed[1])] {
                let back = lmzip(&["decompress", "-c", "-T", t], other);
                assert!(back == input, "{name}: -T {t} does not decode");
                let tested = lmzip(&["test", "-T", t], other);
                assert!(tested.is_empty(), "{name}: test -T {t} writes nothing");
            }
        }
    }
    // The default level's width with the default pool (no environment): the products of a
    // 128-wide Mamba-1 split as they do in real runs.
    let args = ["-c", "-T", "2", "--hidden", "128", "--layers", "1"];
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.args(args);
    let two = ok(output(cmd, &input)).stdout;
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.args(["-c", "-T", "1", "--hidden", "128", "--layers", "1"]);
    assert!(
        ok(output(cmd, &input)).stdout == two,
        "128 wide: -T 2 wrote other bytes"
    );
}

#[test]
fn a_bad_least_work_per_part_is_a_usage_error() {
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.env(MIN_PART_WORK_ENV_VAR, "lots")
        .args(["-c", "-T", "2"]);
    assert_usage_error(&output(cmd, b"abc"), "LMZIP_THREAD_MIN_WORK=\"lots\"");
}
