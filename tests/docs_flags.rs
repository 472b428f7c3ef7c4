//! Every long flag that `--help` lists (top level, `compress`, `decompress`) is documented in
//! README.md or docs/guide.md, so the user docs cannot fall behind the command line.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The `--xxx` words of a text: two dashes, then a lowercase letter, then letters, digits and
/// single dashes, not preceded by a word character or a dash (so `a--b` and `---x` are not flags).
fn long_flags(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-';
    let mut flags = BTreeSet::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_lowercase()
            && (i == 0 || !(word(b[i - 1]) || b[i - 1].is_ascii_alphanumeric()));
        if starts {
            let mut j = i + 2;
            while j < b.len() && word(b[j]) {
                j += 1;
            }
            let flag = text[i..j].trim_end_matches('-');
            flags.insert(flag.to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    flags
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lmzip"))
        .args(args)
        .output()
        .expect("run lmzip");
    assert!(out.status.success(), "lmzip {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_flag_reader_finds_flags_and_only_flags() {
    let found = long_flags("use --block-size 4M, --rm; not a--b, ---x or --Big; `--lr`.\n--v");
    let want: BTreeSet<String> = ["--block-size", "--rm", "--lr", "--v"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(found, want);
}

#[test]
fn every_long_flag_in_help_is_documented() {
    let mut listed = BTreeSet::new();
    for args in [
        &["--help"][..],
        &["compress", "--help"][..],
        &["decompress", "--help"][..],
    ] {
        let flags = long_flags(&help(args));
        assert!(
            flags.len() >= 10,
            "lmzip {args:?} lists only {} long flags: {flags:?}",
            flags.len()
        );
        listed.extend(flags);
    }
    // The flags of every part of the help: a reader that finds fewer has stopped reading it.
    for flag in [
        "--decompress",
        "--block-size",
        "--recipe",
        "--save-weights",
        "--no-progress",
    ] {
        assert!(
            listed.contains(flag),
            "{flag} not found in --help: {listed:?}"
        );
    }
    assert!(
        listed.len() >= 30,
        "only {} long flags: {listed:?}",
        listed.len()
    );

    let docs = long_flags(&(read("README.md") + "\n" + &read("docs/guide.md")));
    let missing: Vec<&String> = listed.difference(&docs).collect();
    assert!(
        missing.is_empty(),
        "flags in --help but in neither README.md nor docs/guide.md: {missing:?}"
    );
}
