//! Streams of several members through the binary: concatenated files, `compress -c a b`, an
//! empty member, a damaged second member, and `--block-size` with any number of threads.
//!
//! Every run uses the tiny Mamba-1 (`--hidden 16 --layers 1`) so that the suite stays fast.

mod common;

use std::fs;
use std::path::Path;

use common::cli::{assert_fails_with, listing, ok, run, stderr, stdout};
use tempfile::TempDir;

/// The tiny model at level 1, as flags.
const TINY: &[&str] = &["-1", "--hidden", "16", "--layers", "1"];

/// Compresses `data` with the tiny model (and `extra` flags) to a stream in memory.
fn packed(dir: &Path, data: &[u8], extra: &[&str]) -> Vec<u8> {
    // With its length announced, as a file's is (the stage is then sized for it); blocks are
    // sized each for its own.
    let len = data.len().to_string();
    let size: &[&str] = match extra.contains(&"--block-size") {
        true => &[],
        false => &["--size", &len],
    };
    let args: Vec<&str> = TINY
        .iter()
        .chain(extra)
        .chain(size)
        .chain(&["-c"])
        .copied()
        .collect();
    ok(run(dir, &args, data)).stdout
}

/// Text that differs with `seed`, so that members differ.
fn text(n: usize, seed: u64) -> Vec<u8> {
    common::related_text(n, seed)
}

#[test]
fn concatenated_files_decode_to_the_concatenated_inputs() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let (a, b) = (text(1500, 1), text(700, 2));
    let (pa, pb, pe) = (packed(d, &a, &[]), packed(d, &b, &[]), packed(d, b"", &[]));
    // cat a.lmz empty.lmz b.lmz | lmzip -d
    let cat = [&pa[..], &pe[..], &pb[..]].concat();
    let out = ok(run(d, &["-d"], &cat));
    assert_eq!(out.stdout, [&a[..], &b[..]].concat());
    // A stream of only an empty member is the empty input.
    assert!(ok(run(d, &["-d"], &pe)).stdout.is_empty());

    // compress -c a b writes one decodable stream of two members.
    fs::write(d.join("a"), &a).unwrap();
    fs::write(d.join("b"), &b).unwrap();
    let args: Vec<&str> = ["compress"]
        .iter()
        .chain(TINY)
        .chain(&["-c", "a", "b"])
        .copied()
        .collect();
    let both = ok(run(d, &args, b"")).stdout;
    assert_eq!(both, [&pa[..], &pb[..]].concat(), "members are independent");
    fs::write(d.join("ab.lmz"), &both).unwrap();
    ok(run(d, &["decompress", "ab.lmz"], b""));
    assert_eq!(fs::read(d.join("ab")).unwrap(), [&a[..], &b[..]].concat());

    // test, info and -l report per member and in total.
    let out = ok(run(d, &["-t", "-vv", "ab.lmz"], b""));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ok (2 members)"), "{err}");
    assert!(err.contains("member 2: 700 bytes"), "{err}");
    let info = stdout(&ok(run(d, &["info", "ab.lmz"], b"")));
    let total = a.len() + b.len();
    assert!(
        info.contains(&format!("original size:    {total} bytes")),
        "{info}"
    );
    assert!(
        info.contains(&format!("compressed size:  {} bytes", both.len())),
        "{info}"
    );
    assert!(info.contains("members:          2"), "{info}");
    assert!(
        info.contains(&format!("member 1: 1500 -> {} bytes", pa.len())),
        "{info}"
    );
    assert!(
        info.contains(&format!("member 2: 700 -> {} bytes", pb.len())),
        "{info}"
    );
    let list = stdout(&ok(run(d, &["-l", "-v", "ab.lmz"], b"")));
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][0], "members", "{list}");
    assert_eq!(
        rows[1][..3],
        ["2", &both.len().to_string(), &total.to_string()],
        "{list}"
    );
    assert_eq!(
        rows[2][..3],
        ["#1", &pa.len().to_string(), "1500"],
        "{list}"
    );
    assert_eq!(rows[3][..3], ["#2", &pb.len().to_string(), "700"], "{list}");
    // info and -l read standard input too.
    let info = stdout(&ok(run(d, &["info", "-"], &both)));
    assert!(info.contains("members:          2"), "{info}");
}

#[test]
fn a_damaged_second_member_is_named_and_nothing_wrong_is_written() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let (a, b) = (text(1200, 3), text(900, 4));
    let (pa, mut pb) = (packed(d, &a, &[]), packed(d, &b, &[]));
    let mid = pb.len() / 2;
    pb[mid] ^= 0x20;
    let damaged = [&pa[..], &pb[..]].concat();
    fs::write(d.join("x.lmz"), &damaged).unwrap();
    for args in [
        &["-d", "x.lmz"][..],
        &["-t", "x.lmz"],
        &["decompress", "x.lmz"],
    ] {
        let out = run(d, args, b"");
        let err = stderr(&out);
        assert_fails_with(&out, "lmzip: x.lmz: member 2 ");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(listing(d), ["x.lmz"], "{args:?}: no output file");
    }
    // To standard output, what is written is the first member's data, checked, and no more.
    let out = run(d, &["-d", "-c", "x.lmz"], b"");
    assert_fails_with(&out, "lmzip: x.lmz: member 2 ");
    assert_eq!(out.stdout, a);
    // info finds the damage in the second member's lengths, or not at all (it reads no words),
    // but never misreports the first.
    let mut lying = [&pa[..], &pb[..]].concat();
    lying.truncate(pa.len() + 10);
    fs::write(d.join("y.lmz"), &lying).unwrap();
    assert_fails_with(&run(d, &["info", "y.lmz"], b""), "member 2");
    // Bytes after a member that start no member are an error, not ignored.
    fs::write(d.join("z.lmz"), [&pa[..], b"junk"].concat()).unwrap();
    assert_fails_with(
        &run(d, &["-d", "-c", "z.lmz"], b""),
        "not another lmzip member",
    );
}

#[test]
fn blocks_are_independent_members_and_threads_change_nothing() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    // Five blocks of 4 KiB and a short sixth one.
    let data = text(5 * 4096 + 1000, 5);
    let one = packed(d, &data, &["--block-size", "4K", "-T", "1"]);
    for threads in ["2", "3", "0"] {
        let other = packed(d, &data, &["--block-size", "4K", "-T", threads]);
        assert!(one == other, "-T {threads} changed the output");
    }
    // Every member is exactly the single-member stream of its block.
    let blocks: Vec<u8> = data
        .chunks(4096)
        .flat_map(|block| packed(d, block, &[]))
        .collect();
    assert!(one == blocks, "members are the blocks' own streams");
    assert_eq!(ok(run(d, &["-d"], &one)).stdout, data);
    let list = stdout(&ok(run(d, &["-l"], &one)));
    assert!(
        list.lines().nth(1).unwrap().trim_start().starts_with("6 "),
        "{list}"
    );
    // Files, percent positions resolved per block, and an empty input (one empty member).
    fs::write(d.join("f"), &data).unwrap();
    let args: Vec<&str> = TINY
        .iter()
        .chain(&["--block-size", "8K", "-T", "2", "--verify", "--recipe"])
        .chain(&["0..50%:train() 50%..:infer", "f"])
        .copied()
        .collect();
    ok(run(d, &args, b""));
    fs::remove_file(d.join("f")).unwrap();
    ok(run(d, &["-d", "f.lmz"], b""));
    assert_eq!(fs::read(d.join("f")).unwrap(), data);
    let empty = packed(d, b"", &["--block-size", "1K", "-T", "4"]);
    assert_eq!(empty, packed(d, b"", &[]));
}
