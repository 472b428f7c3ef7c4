//! The `lmzip` binary end to end: round trips through files, pipes, `-c` and `-o`, and the
//! behaviour that keeps data safe — refusals, `--rm`, damaged input, signals, broken pipes.
//!
//! Every run uses a tiny model (Mamba-1 `--hidden 16 --layers 1`; RWKV-7 one head of 64) so
//! that the suite stays fast.

mod common;

use std::fs;
use std::path::Path;

#[cfg(target_os = "linux")]
use common::cli::under_terminal;
use common::cli::{
    BIN, assert_fails_with, assert_ok, assert_usage_error, compress, listing, names, run, stderr,
    tiny_flags,
};
use common::{random, short_samples, text};
use lmzip::recipe::ModelKind;
use tempfile::TempDir;

/// The text most runs here compress: a few kilobytes, so that a run takes milliseconds.
fn some_text() -> Vec<u8> {
    text(3000)
}

/// A small compressed file in `dir`: `name` holding `data`, compressed to `name.lmz`, with the
/// source removed.
fn lmz_file(dir: &Path, name: &str, data: &[u8]) -> Vec<u8> {
    fs::write(dir.join(name), data).unwrap();
    assert_ok(&compress(dir, &["--rm", name], b""));
    fs::read(dir.join(format!("{name}.lmz"))).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------
//
// Every model and training mode round-trips every kind of input through the library
// (tests/roundtrip.rs, tests/mix.rs); here a few real recipes take the inputs through what only
// the binary does: files and their names, pipes, -c and -o.

/// The short sample inputs, named so that the names serve as file names.
fn cases() -> Vec<(String, Vec<u8>)> {
    short_samples()
        .into_iter()
        .map(|(name, data)| (name.replace(' ', "_"), data))
        .collect()
}

/// The recipes the round trips through files use, as flags: the tiny Mamba-1 at the default
/// level (TBPTT with Adam, and the mixing stage), as a user gets it, and the tiny RWKV-7
/// trained by one-step SGD without the stage.
fn representative_recipes() -> [Vec<&'static str>; 2] {
    let rwkv7_sgd = ["--recipe", "mix:off", "--optimizer", "sgd", "--bptt", "1"];
    [
        tiny_flags(ModelKind::Mamba1).to_vec(),
        [tiny_flags(ModelKind::Rwkv7), &rwkv7_sgd].concat(),
    ]
}

/// Every case through files: `FILE` -> `FILE.lmz` -> `FILE`, sources kept by default.
#[test]
fn round_trip_through_files() {
    for flags in representative_recipes() {
        let dir = TempDir::new().unwrap();
        let d = dir.path();
        for (name, data) in cases() {
            fs::write(d.join(&name), &data).unwrap();
            let lmz = format!("{name}.lmz");
            let args: Vec<&str> = ["compress"]
                .iter()
                .copied()
                .chain(flags.iter().copied())
                .chain([name.as_str()])
                .collect();
            assert_ok(&run(d, &args, b""));
            assert_eq!(
                fs::read(d.join(&name)).unwrap(),
                data,
                "{flags:?} {name}: source kept and unchanged"
            );
            let packed = fs::read(d.join(&lmz)).unwrap();
            assert!(
                packed.starts_with(b"LMZ\x1a"),
                "{name}: output is an lmzip file"
            );

            fs::remove_file(d.join(&name)).unwrap();
            assert_ok(&run(d, &["decompress", &lmz], b""));
            assert_eq!(
                fs::read(d.join(&name)).unwrap(),
                data,
                "{flags:?} {name}: round trip"
            );
            assert!(d.join(&lmz).exists(), "{name}: compressed file kept");
        }
        let expected: Vec<String> = cases()
            .iter()
            .flat_map(|(n, _)| [n.clone(), format!("{n}.lmz")])
            .collect();
        assert_eq!(
            listing(d),
            names(&expected.iter().map(String::as_str).collect::<Vec<_>>())
        );
    }
}

/// The training modes of the golden files (`tests/golden`) as flags, `(name, flags)`:
/// prediction only, one-step SGD and Adam, and Adam over TBPTT segments of 8 bytes.
const MODES: [(&str, &[&str]); 4] = [
    ("none-bptt1", &["--optimizer", "none"]),
    (
        "sgd-bptt1",
        &[
            "--optimizer",
            "sgd",
            "--lr",
            "0.05",
            "--bptt",
            "1",
            "--stride",
            "1",
        ],
    ),
    (
        "adam-bptt1",
        &[
            "--optimizer",
            "adam",
            "--lr",
            "0.003",
            "--bptt",
            "1",
            "--stride",
            "1",
        ],
    ),
    (
        "adam-bptt8",
        &[
            "--optimizer",
            "adam",
            "--lr",
            "0.003",
            "--bptt",
            "8",
            "--stride",
            "8",
        ],
    ),
];

/// The settings of the golden files that the size and mode flags do not set, over the default
/// level's: Mamba-1's full SSM state and the model's convolution width, no mixing stage, Adam's first constants, no rate
/// schedule, fixed windows, the state rebuilt after each update, every byte's loss at full weight.
fn golden_training(kind: ModelKind) -> &'static str {
    match kind {
        ModelKind::Mamba1 => {
            "cfg:state=16,conv=4,ctx=0 mix:off 0..:train(state=rebuild,b1=0.9,b2=0.999,\
             eps=1e-8,b2warm=0,warmup=0,decay=0,floor=0,bptt0=0,focus=0)"
        }
        ModelKind::Rwkv7 => {
            "mix:off 0..:train(state=rebuild,b1=0.9,b2=0.999,eps=1e-8,b2warm=0,\
             warmup=0,decay=0,floor=0,bptt0=0,focus=0)"
        }
    }
}

/// The binary, given the flags that spell a golden file's recipe, writes that file byte for
/// byte from the golden input: the model and training flags mean what the library codes, for
/// every model and training mode. (tests/golden_files.rs decodes the same files.)
#[test]
fn the_cli_reproduces_every_golden_file() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let input = fs::read(golden.join("input.bin")).expect("the golden input is committed");
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    for kind in ModelKind::ALL {
        for (mode_name, mode) in MODES {
            let file = format!("{}-{mode_name}.lmz", kind.name());
            let expected = fs::read(golden.join(&file)).expect("a golden file per model and mode");
            // The golden files of the network alone (the default level's stage off), written
            // with Adam's first constants and no schedule, whatever the level trains with.
            let args: Vec<&str> = ["compress", "-c", "--recipe", golden_training(kind)]
                .iter()
                .chain(tiny_flags(kind))
                .chain(mode)
                .copied()
                .collect();
            let packed = run(d, &args, &input);
            assert_ok(&packed);
            // The golden files are of format version 1, which no build writes any more: the
            // CLI must write what the library writes for their recipe (whose words
            // tests/golden_files.rs checks against the files).
            let header = lmzip::format::read_header(&mut &expected[..]).unwrap();
            let recipe = lmzip::codec::read_recipe(&header).unwrap();
            let library = lmzip::codec::compress_bytes(&recipe, &input).unwrap();
            assert!(
                packed.stdout == library,
                "{file}: the CLI wrote other bytes ({} bytes, the library {})",
                packed.stdout.len(),
                library.len()
            );
        }
    }
}

#[test]
fn round_trip_through_pipes() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    for (name, data) in cases() {
        // No file means stdin -> stdout; so does "-".
        let packed = compress(d, &[], &data);
        assert_ok(&packed);
        assert!(packed.stdout.starts_with(b"LMZ\x1a"), "{name}");
        let unpacked = run(d, &["decompress", "-"], &packed.stdout);
        assert_ok(&unpacked);
        assert_eq!(unpacked.stdout, data, "{name}: round trip");
    }
    // More than a pipe holds at once (64 KiB on Linux), each way; the model only predicts.
    let big = random(200 * 1024, 17);
    let packed = compress(d, &["--optimizer", "none"], &big);
    assert_ok(&packed);
    let unpacked = run(d, &["decompress"], &packed.stdout);
    assert_ok(&unpacked);
    assert!(unpacked.stdout == big, "a large input through pipes");
    assert!(
        listing(d).is_empty(),
        "pipes write no files: {:?}",
        listing(d)
    );
}

#[test]
fn round_trip_with_stdout_and_output_flags() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    for (name, data) in cases() {
        let name = name.as_str();
        fs::write(d.join(name), &data).unwrap();
        // -c: compressed bytes to stdout, no file written.
        let packed = compress(d, &["--optimizer", "sgd", "-c", name], b"");
        assert_ok(&packed);
        assert!(
            !d.join(format!("{name}.lmz")).exists(),
            "{name}: -c writes no file"
        );
        // -o: a chosen name, which needs no .lmz suffix.
        let chosen = format!("{name}.packed");
        assert_ok(&compress(
            d,
            &["--optimizer", "sgd", "-o", &chosen, name],
            b"",
        ));
        assert_eq!(
            fs::read(d.join(&chosen)).unwrap(),
            packed.stdout,
            "{name}: -c and -o agree"
        );

        let out = format!("{name}.out");
        assert_ok(&run(d, &["decompress", "-o", &out, &chosen], b""));
        assert_eq!(
            fs::read(d.join(&out)).unwrap(),
            data,
            "{name}: -o round trip"
        );
        let to_stdout = run(d, &["decompress", "-c", &chosen], b"");
        assert_ok(&to_stdout);
        assert_eq!(to_stdout.stdout, data, "{name}: -c round trip");
    }
}

#[test]
fn compression_is_deterministic_and_follows_the_recipe() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    let a = compress(d, &["--seed", "7"], &data);
    let b = compress(d, &["--seed", "7"], &data);
    let other_seed = compress(d, &["--seed", "8"], &data);
    assert_ok(&a);
    assert_eq!(a.stdout, b.stdout, "same recipe, same bytes");
    assert_ne!(a.stdout, other_seed.stdout, "the seed reaches the model");
    let back = run(d, &["d"], &other_seed.stdout);
    assert_ok(&back);
    assert_eq!(back.stdout, data, "decompression needs no model flags");
}

#[test]
fn every_model_knob_is_accepted_and_stored() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    let args = [
        "--model",
        "mamba1",
        "--lr",
        "0.01",
        "--optimizer",
        "adam",
        "--scope",
        "embed+head",
        "--seed",
        "3",
        "--bptt",
        "4",
        "--clip",
        "0.5",
    ];
    let packed = compress(d, &args, &data);
    assert_ok(&packed);
    fs::write(d.join("k.lmz"), &packed.stdout).unwrap();
    let info = run(d, &["info", "k.lmz"], b"");
    assert_ok(&info);
    let info = String::from_utf8_lossy(&info.stdout);
    for needle in [
        "mamba1 cfg:",
        "hidden=16",
        "layers=1",
        "seed=3",
        "opt=adam",
        "lr=0.01",
        "scope=embed+head",
        "bptt=4",
        "clip=0.5",
    ] {
        assert!(info.contains(needle), "'{needle}' not in:\n{info}");
    }
    let back = run(d, &["d"], &packed.stdout);
    assert_ok(&back);
    assert_eq!(back.stdout, data);
}

#[test]
fn verify_checks_before_keeping_and_removing() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = random(10_000, 99);
    fs::write(d.join("v"), &data).unwrap();
    assert_ok(&compress(d, &["--verify", "--rm", "v"], b""));
    assert_eq!(listing(d), names(&["v.lmz"]));
    // Standard input of the file's length codes as the file (the stage sized for it).
    let to_stdout = compress(d, &["--verify", "--size", "10000"], &data);
    assert_ok(&to_stdout);
    assert_eq!(to_stdout.stdout, fs::read(d.join("v.lmz")).unwrap());
}

#[test]
fn several_files_in_one_run() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("a"), b"first file").unwrap();
    fs::write(d.join("b"), b"second file").unwrap();
    assert_ok(&compress(d, &["--rm", "a", "b"], b""));
    assert_eq!(listing(d), names(&["a.lmz", "b.lmz"]));
    assert_ok(&run(d, &["d", "--rm", "a.lmz", "b.lmz"], b""));
    assert_eq!(listing(d), names(&["a", "b"]));
    assert_eq!(fs::read(d.join("a")).unwrap(), b"first file");
    assert_eq!(fs::read(d.join("b")).unwrap(), b"second file");
}

// ---------------------------------------------------------------------------------------------
// Refusals and what they leave untouched
// ---------------------------------------------------------------------------------------------

#[test]
fn existing_output_is_kept_unless_forced() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("f"), b"new contents").unwrap();
    fs::write(d.join("f.lmz"), b"old contents").unwrap();
    assert_fails_with(&compress(d, &["f"], b""), "already exists");
    assert_eq!(fs::read(d.join("f.lmz")).unwrap(), b"old contents");
    assert_eq!(listing(d), names(&["f", "f.lmz"]), "no temporary file left");

    assert_ok(&compress(d, &["-f", "f"], b""));
    let out = run(d, &["d", "-c", "f.lmz"], b"");
    assert_ok(&out);
    assert_eq!(out.stdout, b"new contents");

    // The same on the way back.
    fs::write(d.join("f"), b"precious").unwrap();
    assert_fails_with(&run(d, &["d", "f.lmz"], b""), "already exists");
    assert_eq!(fs::read(d.join("f")).unwrap(), b"precious");
    assert_ok(&run(d, &["d", "-f", "f.lmz"], b""));
    assert_eq!(fs::read(d.join("f")).unwrap(), b"new contents");
}

#[test]
fn rm_removes_the_source_only_on_success() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let packed = lmz_file(d, "r", b"remove me later");
    assert_eq!(listing(d), names(&["r.lmz"]), "--rm removed the source");

    // A damaged file fails, and --rm keeps it.
    let mut bad = packed.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    fs::write(d.join("bad.lmz"), &bad).unwrap();
    assert_fails_with(&run(d, &["d", "--rm", "bad.lmz"], b""), "bad.lmz");
    assert_eq!(fs::read(d.join("bad.lmz")).unwrap(), bad);

    // A refused target keeps the source too.
    fs::write(d.join("r"), b"in the way").unwrap();
    assert_fails_with(&run(d, &["d", "--rm", "r.lmz"], b""), "already exists");
    assert!(d.join("r.lmz").exists());
    assert_eq!(listing(d), names(&["bad.lmz", "r", "r.lmz"]));

    // --keep after --rm wins (the last one counts).
    fs::remove_file(d.join("r")).unwrap();
    assert_ok(&run(d, &["d", "--rm", "--keep", "r.lmz"], b""));
    assert_eq!(listing(d), names(&["bad.lmz", "r", "r.lmz"]));
    assert_eq!(fs::read(d.join("r")).unwrap(), b"remove me later");
}

#[test]
fn missing_input_fails_and_the_others_still_run() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("here"), b"present").unwrap();
    let out = compress(d, &["no_such_file", "here"], b"");
    assert_fails_with(&out, "no_such_file");
    assert_eq!(
        stderr(&out).lines().count(),
        1,
        "one line: {}",
        stderr(&out)
    );
    assert!(
        d.join("here.lmz").exists(),
        "the next file was still compressed"
    );
    assert_fails_with(&run(d, &["d", "absent.lmz"], b""), "absent.lmz");
    assert_fails_with(&run(d, &["test", "absent.lmz"], b""), "absent.lmz");
    assert_fails_with(&run(d, &["info", "absent.lmz"], b""), "absent.lmz");
}

#[test]
fn damaged_files_fail_cleanly() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    let good = lmz_file(d, "g", &data);
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    let mut damaged = vec![("flipped", flipped)];
    for n in [0, 3, 10, good.len() / 2, good.len() - 1] {
        damaged.push(("truncated", good[..n].to_vec()));
    }
    let mut extended = good.clone();
    extended.push(0);
    damaged.push(("extended", extended));
    damaged.push(("not lmz", b"plain text, not compressed".to_vec()));

    for (what, bytes) in damaged {
        fs::write(d.join("x.lmz"), &bytes).unwrap();
        let out = run(d, &["d", "x.lmz"], b"");
        assert_fails_with(&out, "x.lmz: ");
        assert_eq!(stderr(&out).lines().count(), 1, "{what}: {}", stderr(&out));
        assert!(!d.join("x").exists(), "{what}: no output left behind");
        assert_fails_with(&run(d, &["test", "x.lmz"], b""), "x.lmz");
        let piped = run(d, &["d"], &bytes);
        assert_fails_with(&piped, "stdin: ");
    }
    assert_eq!(
        listing(d),
        names(&["g.lmz", "x.lmz"]),
        "no temporary file left"
    );

    // The message says what is wrong.
    fs::write(d.join("x.lmz"), &good[..good.len() - 1]).unwrap();
    assert_fails_with(&run(d, &["d", "x.lmz"], b""), "truncated");
    fs::write(d.join("x.lmz"), b"plain text").unwrap();
    assert_fails_with(&run(d, &["d", "x.lmz"], b""), "not an lmzip file");
}

#[test]
fn decompress_refuses_a_name_without_lmz() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let packed = lmz_file(d, "n", b"named");
    fs::write(d.join("n.bin"), &packed).unwrap();
    assert_fails_with(&run(d, &["d", "n.bin"], b""), "no .lmz suffix");
    assert!(!d.join("n").exists());
    assert_ok(&run(d, &["d", "-o", "n.out", "n.bin"], b""));
    assert_eq!(fs::read(d.join("n.out")).unwrap(), b"named");
    let out = run(d, &["d", "-c", "n.bin"], b"");
    assert_ok(&out);
    assert_eq!(out.stdout, b"named");
}

#[test]
fn compress_refuses_an_lmz_input_unless_forced() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    lmz_file(d, "twice", b"once is enough");
    assert_fails_with(&compress(d, &["twice.lmz"], b""), ".lmz suffix");
    assert_eq!(listing(d), names(&["twice.lmz"]));
    assert_ok(&compress(d, &["-f", "twice.lmz"], b""));
    assert!(d.join("twice.lmz.lmz").exists());
}

#[test]
fn output_equal_to_input_is_refused() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("same"), b"do not eat me").unwrap();
    for args in [
        &["-o", "same", "same"][..],
        &["-f", "-o", "same", "same"],
        &["-f", "-o", "./same", "same"],
    ] {
        assert_fails_with(&compress(d, args, b""), "same file");
        assert_eq!(
            fs::read(d.join("same")).unwrap(),
            b"do not eat me",
            "{args:?}"
        );
    }
    // A hard link is the same file under another name.
    fs::hard_link(d.join("same"), d.join("alias")).unwrap();
    assert_fails_with(
        &compress(d, &["-f", "-o", "alias", "same"], b""),
        "same file",
    );
    assert_eq!(fs::read(d.join("same")).unwrap(), b"do not eat me");
    assert_eq!(listing(d), names(&["alias", "same"]));
}

#[test]
fn directory_input_is_refused() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::create_dir(d.join("sub")).unwrap();
    fs::create_dir(d.join("sub.lmz")).unwrap();
    assert_fails_with(&compress(d, &["sub"], b""), "is a directory");
    assert_fails_with(&run(d, &["d", "sub.lmz"], b""), "is a directory");
    assert_fails_with(&run(d, &["info", "sub.lmz"], b""), "is a directory");
    // A directory in the way of the output is refused even with -f.
    fs::write(d.join("file"), b"data").unwrap();
    assert_fails_with(
        &compress(d, &["-f", "-o", "sub", "file"], b""),
        "is a directory",
    );
    assert_eq!(listing(d), names(&["file", "sub", "sub.lmz"]));
}

#[test]
fn usage_errors_exit_2_and_touch_nothing() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("u"), b"usage").unwrap();
    fs::write(d.join("w"), b"usage").unwrap();
    for (args, says) in [
        (
            &["--no-such-flag", "u"][..],
            "unexpected argument '--no-such-flag'",
        ),
        (
            &["compress", "--no-such-flag", "u"],
            "unexpected argument '--no-such-flag'",
        ),
        (&["compress", "--bptt", "0", "u"], "bptt 0 is out of range"),
        (&["compress", "--lr", "nan", "u"], "lr NaN is out of range"),
        (
            &["compress", "--hidden", "0", "u"],
            "--hidden 0 is out of range: with this recipe (mamba1, 1 layer) --hidden takes 1 to ",
        ),
        (
            &["compress", "--scope", "embed+nonsense", "u"],
            "unknown training group 'nonsense'",
        ),
        (
            &["compress", "--optimizer", "lbfgs", "u"],
            "invalid value 'lbfgs' for '--optimizer",
        ),
        (
            &["compress", "--model", "gpt9", "u"],
            "invalid value 'gpt9' for '--model <KIND>'\n  [possible values: mamba1, rwkv7]",
        ),
        (
            &["compress", "--model", "rwkv7", "--hidden", "16", "u"],
            "must be a positive multiple of the head size 64",
        ),
        (
            &["compress", "-o", "x.lmz", "u", "w"],
            "-o/--output takes a single input, but 2 were given",
        ),
        (
            &["compress", "-o", "x.lmz", "-c", "u"],
            "'--output <FILE>' cannot be used with '--stdout'",
        ),
        (
            &["decompress", "--hidden", "16", "u.lmz"],
            "unexpected argument '--hidden'",
        ),
        (
            &["decompress", "--recipe", "0..:infer", "u.lmz"],
            "unexpected argument '--recipe'",
        ),
        (&["compress", "-19", "u"], "there is no level 19"),
        (&["-0", "u"], "there is no level 0"),
        (&["compress", "u", "--level", "10"], "there is no level 10"),
        (
            &["compress", "--recipe", "0..:fly", "u"],
            "expected an action",
        ),
        (
            &["compress", "--save-weights", "m", "u", "w"],
            "--save-weights takes a single input, but 2 were given",
        ),
        (&["info"], "required arguments were not provided"),
    ] {
        let out = run(d, args, b"");
        assert!(
            stderr(&out).starts_with("lmzip: "),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_usage_error(&out, says);
    }
    assert_eq!(listing(d), names(&["u", "w"]));
    // Without a command, words are files to compress, as with gzip: a misspelled command is a
    // missing file.
    assert_fails_with(&run(d, &["frobnicate"], b""), "frobnicate: cannot open");
    let out = run(d, &["-19", "u"], b"");
    assert_eq!(
        stderr(&out),
        "lmzip: there is no level 19: levels go from 1 (fastest) to 9 (best ratio)\n"
    );
    assert_ok(&run(d, &["--help"], b""));
    assert_ok(&run(d, &["compress", "--help"], b""));
}

// ---------------------------------------------------------------------------------------------
// test and info
// ---------------------------------------------------------------------------------------------

#[test]
fn test_command_accepts_good_files_and_rejects_bad_ones() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let good = lmz_file(d, "t", &some_text());
    let ok = run(d, &["test", "t.lmz"], b"");
    assert_ok(&ok);
    assert!(ok.stdout.is_empty(), "test writes no data");
    assert_eq!(stderr(&ok), "t.lmz: ok\n");
    assert_ok(&run(d, &["test"], &good));

    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x80;
    fs::write(d.join("bad.lmz"), &bad).unwrap();
    // Quiet: only the error is said.
    let out = run(d, &["test", "-q", "t.lmz", "bad.lmz"], b"");
    assert_fails_with(&out, "bad.lmz");
    assert!(
        !stderr(&out).contains("t.lmz"),
        "the good file passed: {}",
        stderr(&out)
    );
    assert_eq!(
        listing(d),
        names(&["bad.lmz", "t.lmz"]),
        "test writes no files"
    );
}

#[test]
fn info_describes_without_decoding() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    let packed = lmz_file(d, "i", &data);
    let out = run(d, &["info", "i.lmz"], b"");
    assert_ok(&out);
    let info = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "format version:   2".to_string(),
        format!("numerics version: {}", lmzip::format::NUMERICS_VERSION),
        "recipe:           mamba1 cfg:hidden=16,".to_string(),
        "header:           ".to_string(),
        " bytes, stored as level ".to_string(),
        format!("original size:    {} bytes", data.len()),
        format!("compressed size:  {} bytes", packed.len()),
        format!(
            "bits per byte:    {:.3}",
            8.0 * packed.len() as f64 / data.len() as f64
        ),
    ] {
        assert!(info.contains(&needle), "'{needle}' not in:\n{info}");
    }
    fs::write(d.join("short.lmz"), &packed[..packed.len() - 2]).unwrap();
    assert_fails_with(&run(d, &["info", "short.lmz"], b""), "truncated");
}

// ---------------------------------------------------------------------------------------------
// Recipes, levels and model files
// ---------------------------------------------------------------------------------------------

/// The `recipe:` line of `lmzip info`.
fn info_recipe(dir: &Path, lmz: &str) -> String {
    let out = run(dir, &["info", lmz], b"");
    assert_ok(&out);
    let info = String::from_utf8_lossy(&out.stdout).into_owned();
    info.lines()
        .find_map(|l| l.trim().strip_prefix("recipe:"))
        .unwrap_or_else(|| panic!("no recipe line in:\n{info}"))
        .trim()
        .to_string()
}

/// A file made at a level with a flag stores the level and the flag's edit, and `info` shows
/// the whole recipe expanded from them; `decompress` needs no flag.
#[test]
fn info_expands_a_compact_header_to_the_whole_recipe() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(500);
    fs::write(d.join("e"), &data).unwrap();
    assert_ok(&run(d, &["compress", "-2", "--lr", "0.001", "e"], b""));
    let out = run(d, &["info", "e.lmz"], b"");
    assert_ok(&out);
    let info = String::from_utf8_lossy(&out.stdout);
    // 18 bytes of a level's header (docs/format.md) and the edits' text: the flag's, and the
    // network's context tables and the stage sized for the file (src/fit.rs).
    let edit = "cfg:ctx=9 mix:cap=17 0..:train(lr=0.001)";
    let line = format!(
        "header:           {} bytes, stored as level 2 with {edit}",
        18 + edit.len()
    );
    assert!(info.contains(&line), "'{line}' not in:\n{info}");
    let mut expected = lmzip::fit::fitted(&lmzip::levels::recipe(ModelKind::Mamba1, 2), 500);
    for t in expected.train_specs_mut() {
        t.lr = 0.001;
    }
    assert_eq!(info_recipe(d, "e.lmz"), expected.to_text());
    fs::remove_file(d.join("e")).unwrap();
    assert_ok(&run(d, &["decompress", "e.lmz"], b""));
    assert!(fs::read(d.join("e")).unwrap() == data);
}

#[test]
fn levels_and_recipes_are_stored_and_decode_without_flags() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    fs::write(d.join("l"), &data).unwrap();
    for (args, needles) in [
        (
            &["-3", "l"][..],
            &[
                "cfg:hidden=64,layers=1,intermediate=128,state=8,conv=8,",
                "lr=0.0014,stride=32,bptt=32,clip=0,state=carry,",
                "b1=0,",
                "mix:",
            ][..],
        ),
        (
            &["-9", "--hidden", "16", "--layers", "1", "l"],
            &[
                "hidden=16",
                "bptt=16",
                "lr=0.0007,",
                "bptt0=4,lrmul=embed*4+head*4+bias*4",
            ],
        ),
        (
            &[
                "--level",
                "4",
                "--recipe",
                "cfg:hidden=16 0..1K:train(bptt=4) 1K..:infer",
                "l",
            ],
            &[
                "hidden=16,layers=2,",
                "0..1K:train(",
                "bptt=4",
                "1K..:infer",
            ],
        ),
        (
            &[
                "--recipe",
                "cfg:hidden=16,layers=1 0..50%:train() 50%..:infer",
                "l",
            ],
            &["0..1500:train(", "1500..:infer"],
        ),
    ] {
        let all: Vec<&str> = ["compress", "-f"].iter().chain(args).copied().collect();
        assert_ok(&run(d, &all, b""));
        let recipe = info_recipe(d, "l.lmz");
        for needle in needles {
            assert!(
                recipe.contains(needle),
                "{args:?}: '{needle}' not in {recipe}"
            );
        }
        let back = run(d, &["d", "-c", "l.lmz"], b"");
        assert_ok(&back);
        assert_eq!(back.stdout, data, "{args:?}");
    }
}

#[test]
fn percent_positions_need_the_length_of_standard_input() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = some_text();
    let half = ["--recipe", "0..50%:train() 50%..:infer"];
    let out = compress(d, &half, &data);
    assert_fails_with(&out, "--size");
    assert!(out.stdout.is_empty());
    let size = data.len().to_string();
    let out = compress(d, &[&half[..], &["--size", &size]].concat(), &data);
    assert_ok(&out);
    let back = run(d, &["d"], &out.stdout);
    assert_eq!(back.stdout, data);
    // A wrong length is an error, and nothing is kept.
    let out = compress(
        d,
        &[&half[..], &["--size", "10", "-o", "x.lmz"]].concat(),
        &data,
    );
    assert_fails_with(&out, "not the 10 announced");
    assert_eq!(listing(d), Vec::<String>::new());
}

#[test]
fn bad_recipes_are_usage_errors_that_point_at_the_problem() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let out = compress(d, &["--recipe", "0..:train(lr=0.001,bppt=8)"], b"x");
    assert_usage_error(&out, "train has no key 'bppt'");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "    0..:train(lr=0.001,bppt=8)\n    {}^^^^\n",
            " ".repeat("0..:train(lr=0.001,".len())
        )),
        "{err}"
    );
}

#[test]
fn a_saved_model_primes_and_decompression_needs_the_same_file() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let (a, b) = (some_text(), some_text().repeat(2));
    fs::write(d.join("a"), &a).unwrap();
    fs::write(d.join("b"), &b).unwrap();
    assert_ok(&compress(d, &["--save-weights", "a.st", "a"], b""));
    // Not overwritten without -f.
    let out = compress(d, &["--save-weights", "a.st", "-c", "a"], b"");
    assert_fails_with(&out, "a.st already exists");
    assert!(out.stdout.is_empty());
    assert_ok(&compress(d, &["-f", "--save-weights", "a.st", "a"], b""));
    assert_ok(&run(
        d,
        &[
            "compress",
            "--weights",
            "a.st",
            "--save-weights",
            "b.st",
            "b",
        ],
        b"",
    ));
    let sha = {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(fs::read(d.join("a.st")).unwrap());
        digest
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    let out = run(d, &["info", "b.lmz"], b"");
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        info.contains(&format!("model file:       sha256 {sha} (a.st)")),
        "{info}"
    );
    assert!(
        info.contains(&format!("file:sha256={sha},name=a.st,hidden=16")),
        "{info}"
    );

    fs::remove_file(d.join("b")).unwrap();
    assert_fails_with(&run(d, &["d", "b.lmz"], b""), &sha);
    assert_fails_with(
        &run(d, &["d", "--weights", "b.st", "b.lmz"], b""),
        "wrong model file",
    );
    assert_fails_with(&run(d, &["test", "b.lmz"], b""), "--weights");
    assert_eq!(listing(d), names(&["a", "a.lmz", "a.st", "b.lmz", "b.st"]));
    assert_ok(&run(d, &["test", "--weights", "a.st", "b.lmz"], b""));
    assert_ok(&run(
        d,
        &["d", "--weights", "a.st", "--save-weights", "b2.st", "b.lmz"],
        b"",
    ));
    assert_eq!(fs::read(d.join("b")).unwrap(), b);
    // A stream that starts fresh does not use --weights, and the user is told so.
    let out = run(d, &["test", "--weights", "a.st", "a.lmz"], b"");
    assert_ok(&out);
    assert!(
        stderr(&out).contains("--weights was not used"),
        "{}",
        stderr(&out)
    );
    // The decoder ends with the encoder's model, byte for byte.
    assert_eq!(
        fs::read(d.join("b2.st")).unwrap(),
        fs::read(d.join("b.st")).unwrap()
    );
    // A recipe may name the file instead; sizes come from the file.
    assert_ok(&run(
        d,
        &[
            "compress",
            "-f",
            "--recipe",
            "file:a.st 0..:train(lr=0.001)",
            "--verify",
            "b",
        ],
        b"",
    ));
    assert_usage_error(
        &run(
            d,
            &["compress", "-f", "--weights", "a.st", "--hidden", "8", "b"],
            b"",
        ),
        "a model file has its own sizes and weights",
    );
    assert_fails_with(
        &run(d, &["compress", "-f", "--weights", "missing.st", "b"], b""),
        "cannot open model file missing.st",
    );
}

// ---------------------------------------------------------------------------------------------
// Files, signals, pipes
// ---------------------------------------------------------------------------------------------

#[cfg(unix)]
#[test]
fn permissions_and_modification_time_follow_the_source() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let src = d.join("p");
    fs::write(&src, b"permissions").unwrap();
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let f = fs::File::options().write(true).open(&src).unwrap();
    f.set_modified(mtime).unwrap();
    f.set_permissions(fs::Permissions::from_mode(0o640))
        .unwrap();
    drop(f);
    assert_ok(&compress(d, &["p"], b""));
    let meta = fs::metadata(d.join("p.lmz")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(meta.modified().unwrap(), mtime);
    fs::remove_file(&src).unwrap();
    assert_ok(&run(d, &["d", "p.lmz"], b""));
    let meta = fs::metadata(&src).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(meta.modified().unwrap(), mtime);
}

/// Sends `signal` to `pid` with the system's `kill`.
#[cfg(unix)]
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Waits until a temporary output appears in `dir` (the run has started, handler installed).
#[cfg(unix)]
fn wait_for_temporary_file(dir: &Path, child: &mut std::process::Child) {
    let started = std::time::Instant::now();
    while !listing(dir).iter().any(|n| n.contains(".tmp")) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the signal"
        );
        assert!(
            started.elapsed().as_secs() < 30,
            "no temporary file appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(unix)]
#[test]
fn a_signal_stops_the_run_and_leaves_nothing_behind() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    // Big enough to take seconds with the tiny model, so the signal lands mid-run.
    let data = random(512 * 1024, 5);
    fs::write(d.join("big"), &data).unwrap();
    let mut child = std::process::Command::new(BIN)
        .current_dir(d)
        .args(["compress", "--hidden", "16", "--layers", "1", "--rm", "big"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_temporary_file(d, &mut child);
    send_signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        listing(d),
        names(&["big"]),
        "source kept, no partial output"
    );
    assert_eq!(fs::read(d.join("big")).unwrap(), data);
}

#[cfg(unix)]
#[test]
fn a_signal_ends_a_run_blocked_on_its_input() {
    use std::io::Write;
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let mut child = std::process::Command::new(BIN)
        .current_dir(d)
        .args([
            "compress", "--hidden", "16", "--layers", "1", "-o", "out.lmz",
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Some input, then silence: the run waits for more and never reaches a progress check.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"a little").unwrap();
    wait_for_temporary_file(d, &mut child);
    send_signal(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listing(d).is_empty(), "no partial output: {:?}", listing(d));
}

#[test]
fn a_closed_pipe_ends_quietly_with_141() {
    use std::io::Write;
    let dir = TempDir::new().unwrap();
    let mut child = std::process::Command::new(BIN)
        .current_dir(dir.path())
        .args(["compress", "--hidden", "16", "--layers", "1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody will read: close our end before lmzip writes anything.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    // lmzip may stop reading early; a failed write here is expected.
    let _ = stdin.write_all(&random(64 * 1024, 3));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
    assert!(
        out.stderr.is_empty(),
        "quiet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn compressed_data_never_meets_a_terminal() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("tty"), b"for the terminal").unwrap();
    let Some(shown) = under_terminal(d, &format!("{BIN} compress -c tty; echo status=$?")) else {
        eprintln!("skipped: no `script` to make a pseudo-terminal");
        return;
    };
    assert!(
        shown.contains("refusing to write compressed data to a terminal"),
        "{shown}"
    );
    assert!(shown.contains("status=1"), "{shown}");
    let shown = under_terminal(d, &format!("{BIN} decompress; echo status=$?")).unwrap();
    assert!(
        shown.contains("refusing to read compressed data from a terminal"),
        "{shown}"
    );
    assert!(shown.contains("status=1"), "{shown}");
}
