//! Defects a new user met (issue 25, item 6), each pinned by a run of the binary: outputs
//! checked before the long run, negative values, bounds that name themselves, threads that
//! say what they do, the help and the manual page, and `-l` on tiny and several files.

mod common;

use std::fs;

use common::cli::{
    TINY, assert_fails_with, assert_ok, assert_usage_error, compress, listing, names, ok, run,
    stderr, stdout,
};
use common::text;
use tempfile::TempDir;

/// `--stats` and `--save-weights` into a directory that does not exist fail before coding
/// starts: nothing is written, not even the good `.lmz`.
#[test]
fn side_outputs_into_a_missing_directory_fail_before_coding() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("f"), text(2000)).unwrap();
    for flag in ["--stats", "--save-weights"] {
        let out = compress(d, &[flag, "nodir/side", "f"], b"");
        assert_fails_with(&out, "nodir");
        assert_eq!(listing(d), names(&["f"]), "{flag}: nothing written");
    }
    // To standard output too: nothing is coded, so nothing reaches it.
    let out = compress(d, &["-c", "--save-weights", "nodir/w", "f"], b"");
    assert_fails_with(&out, "nodir");
    assert!(out.stdout.is_empty(), "no data before the check");
    // Decompression's --save-weights: checked before decoding, no output left.
    assert_ok(&compress(d, &["--rm", "f"], b""));
    let out = run(d, &["-d", "--save-weights", "nodir/w", "f.lmz"], b"");
    assert_fails_with(&out, "nodir");
    assert_eq!(listing(d), names(&["f.lmz"]));
}

/// A negative number after a space is the option's value (then refused by its range), not a
/// level or an unknown flag.
#[test]
fn negative_values_after_a_space_are_values() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    for (args, needle) in [
        (&["--lr", "-1"][..], "lr -1 is out of range"),
        (&["--clip", "-5"], "clip -5"),
        (&["--seed", "-1"], "seeds are whole numbers from 0"),
        (&["--hidden", "-3"], "-3 is negative"),
        (&["-T", "-2"], "is not a thread count"),
    ] {
        let out = compress(d, args, b"x");
        assert_usage_error(&out, needle);
        let err = stderr(&out);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

/// `--hidden` out of range names the largest width that fits (not the per-size bound that the
/// derived width breaks first), and the same bound for every width above it.
#[test]
fn hidden_out_of_range_names_the_real_bound() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let bound = |h: &str| {
        let out = run(d, &["compress", "--hidden", h, "--layers", "1"], b"");
        assert_usage_error(&out, &format!("--hidden {h} is out of range"));
        let err = stderr(&out);
        assert!(!err.contains("intermediate"), "{err}");
        let tail = err.split("--hidden takes 1 to ").nth(1).expect("a bound");
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<usize>().unwrap()
    };
    let max = bound("100000");
    assert!(max > 16 && max < 16384, "{max}");
    assert_eq!(bound("16384"), max);
    assert_eq!(bound(&(max + 1).to_string()), max);
}

/// `-T` above a sane bound is refused; above the cores, it runs with a warning.
#[test]
fn thread_counts_are_bounded_and_excess_is_said() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    assert_usage_error(
        &compress(d, &["-T", "1000"], b"x"),
        "0 (one per core) to 256",
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let many = (cores + 1).to_string();
    let out = ok(compress(d, &["-c", "-f", "-T", &many], b"some text"));
    assert!(
        stderr(&out).contains("more threads than the"),
        "{}",
        stderr(&out)
    );
    let out = ok(compress(d, &["-q", "-c", "-f", "-T", &many], b"some text"));
    assert!(stderr(&out).is_empty(), "-q: {}", stderr(&out));
}

/// Decoding a stream of several members with `-T 2` says that the members are decoded one
/// after another.
#[test]
fn threads_on_members_say_they_do_not_apply() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(3000);
    let packed = ok(compress(d, &["-c", "-f", "--block-size", "1K"], &data)).stdout;
    let out = ok(run(d, &["-d", "-c", "-T", "2"], &packed));
    assert_eq!(out.stdout, data);
    assert!(
        stderr(&out).contains("does not apply to members"),
        "{}",
        stderr(&out)
    );
    // One member, or one thread: nothing to say (on a machine of one core, only that two
    // threads are more than its cores).
    let single = ok(compress(d, &["-c", "-f"], &data)).stdout;
    let said = stderr(&ok(run(d, &["-d", "-c", "-T", "2"], &single)));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match cores {
        1 => assert!(
            said.trim_end()
                .lines()
                .all(|l| l.contains("more threads than the")),
            "{said}"
        ),
        _ => assert!(said.is_empty(), "{said}"),
    }
    assert!(stderr(&ok(run(d, &["-d", "-c"], &packed))).is_empty());
}

/// A flipped bit in the stored CRC32: the data decodes, and the message says that either the
/// data or the stored checksum is damaged.
#[test]
fn a_damaged_stored_checksum_is_named_as_a_possibility() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let mut packed = ok(compress(d, &["-c", "-f"], &text(500))).stdout;
    let last = packed.len() - 1;
    packed[last] ^= 0x10;
    fs::write(d.join("x.lmz"), &packed).unwrap();
    let out = run(d, &["-t", "x.lmz"], b"");
    assert_fails_with(&out, "the data or the stored checksum is damaged");
}

/// The help lists -q, -v and --no-progress under a heading of their own; the manual page has
/// no pages it cannot point to, an exit status and the environment; bash completes `--model`.
#[test]
fn help_manual_and_completions_say_the_right_things() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let help = stdout(&ok(run(d, &["--help"], b"")));
    let model_files = help.split("Model files:").nth(1).unwrap();
    let model_files = model_files.split("\n\n").next().unwrap();
    assert!(!model_files.contains("--quiet"), "{model_files}");
    let messages = help.split("Messages:").nth(1).expect("a Messages heading");
    for flag in ["--quiet", "--verbose", "--no-progress"] {
        assert!(messages.contains(flag), "{flag} under Messages");
    }
    let page = stdout(&ok(run(d, &["man"], b"")));
    assert!(!page.contains("lmzip\\-compress(1)"), "no such page");
    for needle in [
        ".SH \"EXIT STATUS\"",
        "LMZIP_SIMD",
        ".SH COMMANDS",
        "lmzip compress",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    let bash = stdout(&ok(run(d, &["completions", "bash"], b"")));
    let after_model = bash.split("--model)").nth(1).unwrap();
    let first_line = after_model.lines().nth(1).unwrap();
    assert!(first_line.contains("mamba1 rwkv7"), "{first_line}");
}

/// `-l` on a 1-byte member shows no thousands of bits per byte, and several files end with a
/// totals line.
#[test]
fn list_handles_tiny_members_and_totals_several_files() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("one"), b"x").unwrap();
    fs::write(d.join("two"), text(5000)).unwrap();
    let args: Vec<&str> = ["compress"]
        .iter()
        .chain(TINY)
        .chain(&["one", "two"])
        .copied()
        .collect();
    ok(run(d, &args, b""));
    let single = stdout(&ok(run(d, &["-l", "one.lmz"], b"")));
    assert_eq!(single.lines().count(), 2, "a header and a row: {single}");
    let row = single.lines().nth(1).unwrap();
    let bpb = row.split_whitespace().nth(4).unwrap();
    assert_eq!(bpb, "-", "{row}");
    let both = stdout(&ok(run(d, &["-l", "one.lmz", "two.lmz"], b"")));
    let last = both.lines().last().unwrap();
    assert!(last.ends_with("2 files"), "{both}");
    assert!(last.trim_start().starts_with("2 "), "two members: {last}");
    let sizes = |name: &str| fs::metadata(d.join(name)).unwrap().len();
    let total = sizes("one.lmz") + sizes("two.lmz");
    assert!(last.contains(&format!(" {total} ")), "{last}");
}
