//! The network's threads never change a bit (docs/determinism.md): with 1, 2 and 3 threads
//! the kernels split rows, steps and channels differently, and every count writes the same
//! compressed bytes and decodes the others' — for both models, one-step training and 16-byte
//! TBPTT segments, through the library (pools that split even the tiny models' products) and
//! through the binary's `-T`.

mod common;

use common::cli::{BIN, ok, output};
use common::{text, tiny_with};
use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::pool::Pool;
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

/// Runs the binary with `args`, feeding `stdin`; it must succeed.
fn lmzip(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.args(args);
    ok(output(cmd, stdin)).stdout
}

/// Models wide enough that the default pool splits their products, scan and segments (Mamba-1
/// 128 wide: a 512-row input projection; RWKV-7 128 wide).
#[test]
fn the_binary_writes_the_same_bytes_for_every_thread_count() {
    let input = text(600);
    for model in ["mamba1", "rwkv7"] {
        for bptt in [1, 16] {
            let recipe = format!("cfg:hidden=128,layers=1 mix:off 0..:train(lr=0.003,bptt={bptt})");
            let name = format!("{model}/bptt{bptt}");
            let packed: Vec<Vec<u8>> = ["1", "2", "3"]
                .into_iter()
                .map(|t| {
                    let args = [
                        "compress", "-c", "-T", t, "--model", model, "--recipe", &recipe,
                    ];
                    lmzip(&args, &input)
                })
                .collect();
            assert!(packed[1] == packed[0], "{name}: -T 2 wrote other bytes");
            assert!(packed[2] == packed[0], "{name}: -T 3 wrote other bytes");
            for (t, other) in [("1", &packed[2]), ("2", &packed[0]), ("3", &packed[1])] {
                let back = lmzip(&["decompress", "-c", "-T", t], other);
                assert!(back == input, "{name}: -T {t} does not decode");
            }
        }
    }
}
