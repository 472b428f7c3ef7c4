//! The command line people know from gzip and zstd: `lmzip` without a command, `tar -I lmzip`,
//! the `unlmzip` and `lmzcat` names, `-N` levels, `-S`, `-r`, `-q/-v/-vv`, `--no-progress`,
//! symbolic links, `--version`, completions and the manual page, `--stats`.
//!
//! Every run uses the tiny Mamba-1 (`--hidden 16 --layers 1`) so that the suite stays fast.

mod common;

use std::fs;
use std::path::Path;
use std::process::Output;

#[cfg(target_os = "linux")]
use common::cli::under_terminal;
use common::cli::{BIN, TINY, assert_fails_with, assert_usage_error, listing, ok, run, stderr};
use common::text;
use tempfile::TempDir;

/// `lmzip` (no command) with the tiny model, then `args`.
fn tiny(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let all: Vec<&str> = TINY.iter().chain(args).copied().collect();
    run(dir, &all, stdin)
}

#[test]
fn without_a_command_lmzip_compresses_and_dzt_choose_the_operation() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(900);
    // Standard input to standard output (of a known length, as a file's: the stage is sized
    // for it).
    let packed = ok(tiny(d, &["--size", "900"], &data)).stdout;
    assert!(packed.starts_with(b"LMZ\x1a"));
    assert_eq!(ok(run(d, &["-d"], &packed)).stdout, data);
    assert_eq!(ok(run(d, &["--decompress"], &packed)).stdout, data);
    // -z is the default; the last of -z/-d/-t/-l wins; files work as with the commands.
    fs::write(d.join("f"), &data).unwrap();
    ok(tiny(d, &["-d", "-z", "f"], b""));
    assert_eq!(fs::read(d.join("f.lmz")).unwrap(), packed);
    let out = ok(run(d, &["-t", "f.lmz"], b""));
    assert_eq!(stderr(&out), "f.lmz: ok\n");
    fs::remove_file(d.join("f")).unwrap();
    ok(run(d, &["-d", "f.lmz"], b""));
    assert_eq!(fs::read(d.join("f")).unwrap(), data, "-k is the default");
    assert!(d.join("f.lmz").exists());
    // --rm removes the source; -c writes to standard output.
    ok(run(d, &["-d", "-f", "--rm", "f.lmz"], b""));
    assert_eq!(listing(d), ["f"]);
    let out = ok(tiny(d, &["-c", "f"], b""));
    assert_eq!(out.stdout, packed);
    // Compression options are ignored with -d (the file holds its recipe).
    assert_eq!(ok(tiny(d, &["-9", "-d"], &packed)).stdout, data);
}

#[test]
fn tar_runs_lmzip_both_ways() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("tree/sub")).unwrap();
    fs::write(d.join("tree/a.txt"), text(700)).unwrap();
    fs::write(d.join("tree/sub/b.bin"), [0u8, 1, 2, 3, 255]).unwrap();
    let program = format!("{BIN} -1 --hidden 16 --layers 1");
    let tar = |args: &[&str], cwd: &Path| {
        let out = std::process::Command::new("tar")
            .current_dir(cwd)
            .args(args)
            .output()
            .expect("tar runs (GNU tar is needed for this test)");
        assert!(
            out.status.success(),
            "tar {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    tar(&["-I", &program, "-cf", "x.tar.lmz", "tree"], d);
    let packed = fs::read(d.join("x.tar.lmz")).unwrap();
    assert!(packed.starts_with(b"LMZ\x1a"), "tar wrote an lmzip stream");
    fs::create_dir(d.join("out")).unwrap();
    // tar calls `lmzip -d`; plain `-I lmzip` must do.
    tar(&["-I", BIN, "-xf", "../x.tar.lmz"], &d.join("out"));
    assert_eq!(
        fs::read(d.join("out/tree/a.txt")).unwrap(),
        fs::read(d.join("tree/a.txt")).unwrap()
    );
    assert_eq!(
        fs::read(d.join("out/tree/sub/b.bin")).unwrap(),
        [0u8, 1, 2, 3, 255]
    );
}

#[cfg(unix)]
#[test]
fn unlmzip_decompresses_and_lmzcat_writes_standard_output() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let bin = TempDir::new().unwrap();
    for name in ["unlmzip", "lmzcat"] {
        std::os::unix::fs::symlink(BIN, bin.path().join(name)).unwrap();
    }
    let data = text(500);
    fs::write(d.join("n"), &data).unwrap();
    ok(tiny(d, &["--rm", "n"], b""));
    let lmzcat = bin.path().join("lmzcat");
    let out = ok(common::cli::run_as(&lmzcat, d, &["n.lmz"], b""));
    assert_eq!(out.stdout, data);
    assert_eq!(listing(d), ["n.lmz"], "lmzcat writes no file");
    let unlmzip = bin.path().join("unlmzip");
    ok(common::cli::run_as(&unlmzip, d, &["n.lmz"], b""));
    assert_eq!(fs::read(d.join("n")).unwrap(), data);
}

#[test]
fn the_last_level_wins_and_levels_outside_1_to_9_are_refused() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(300);
    let at = |args: &[&str]| ok(tiny(d, args, &data)).stdout;
    // With the sizes fixed, levels 2 and 3 differ in their learning rate.
    let (two, three) = (at(&["-2"]), at(&["-3"]));
    assert_ne!(two, three);
    assert_eq!(at(&["-3", "-2"]), two);
    assert_eq!(at(&["-2", "--level", "3"]), three);
    assert_eq!(at(&["--level", "3", "-2"]), two);
    assert_eq!(at(&["-9", "--level=2"]), two);
    for bad in [
        &["-19"][..],
        &["-0"],
        &["--level", "10"],
        &["-2", "--level", "0"],
    ] {
        let out = tiny(d, bad, &data);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert_eq!(
            stderr(&out),
            "lmzip: there is no level 19: levels go from 1 (fastest) to 9 (best ratio)\n"
                .replace("19", bad.last().unwrap().trim_start_matches("-")),
            "{bad:?}"
        );
    }
}

#[test]
fn suffix_and_recursion() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("t/deep")).unwrap();
    fs::write(d.join("t/one"), text(200)).unwrap();
    fs::write(d.join("t/deep/two"), text(300)).unwrap();
    ok(tiny(d, &["-r", "--rm", "t"], b""));
    assert_eq!(listing(&d.join("t")), ["deep", "one.lmz"]);
    assert_eq!(listing(&d.join("t/deep")), ["two.lmz"]);
    // Compressed files are left alone by a second -r run; -d -r takes only them.
    fs::write(d.join("t/three"), text(100)).unwrap();
    ok(tiny(d, &["-r", "t"], b""));
    assert_eq!(
        listing(&d.join("t")),
        ["deep", "one.lmz", "three", "three.lmz"]
    );
    fs::remove_file(d.join("t/three")).unwrap();
    ok(run(d, &["-d", "-r", "--rm", "t"], b""));
    assert_eq!(listing(&d.join("t")), ["deep", "one", "three"]);
    assert_eq!(fs::read(d.join("t/deep/two")).unwrap(), text(300));
    // A directory without -r is refused by name.
    assert_fails_with(&run(d, &["-d", "t"], b""), "t: is a directory");

    // -S: another suffix both ways.
    fs::write(d.join("s"), text(100)).unwrap();
    ok(tiny(d, &["-S", ".nnz", "s"], b""));
    assert!(d.join("s.nnz").exists());
    assert_fails_with(&run(d, &["-d", "s.nnz"], b""), "has no .lmz suffix");
    fs::remove_file(d.join("s")).unwrap();
    ok(run(d, &["-d", "--suffix=.nnz", "s.nnz"], b""));
    assert_eq!(fs::read(d.join("s")).unwrap(), text(100));
    assert_fails_with(
        &tiny(d, &["-S", ".nnz", "s.nnz"], b""),
        "already has the .nnz suffix",
    );
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_skipped_unless_forced() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("real"), text(100)).unwrap();
    std::os::unix::fs::symlink("real", d.join("link")).unwrap();
    let out = ok(tiny(d, &["link"], b""));
    assert!(
        stderr(&out).contains("link: is a symbolic link; skipped"),
        "{}",
        stderr(&out)
    );
    assert_eq!(listing(d), ["link", "real"]);
    assert!(ok(tiny(d, &["-q", "link"], b"")).stderr.is_empty());
    ok(tiny(d, &["-f", "link"], b""));
    assert_eq!(listing(d), ["link", "link.lmz", "real"]);
}

#[test]
fn verbosity_levels_say_what_they_promise() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("v"), text(5000)).unwrap();
    // Not a terminal: quiet by default.
    assert!(ok(tiny(d, &["v"], b"")).stderr.is_empty());
    let out = ok(tiny(d, &["-v", "-f", "--verify", "v"], b""));
    let err = stderr(&out);
    assert!(err.contains("v: verified"), "{err}");
    assert!(err.contains("v: 5000 -> "), "{err}");
    let out = ok(tiny(d, &["-vv", "-f", "--block-size", "2K", "v"], b""));
    let err = stderr(&out);
    assert!(err.contains("v: member 3: 904 bytes"), "{err}");
    assert!(
        err.contains("v: recipe mamba1 cfg:hidden=16,layers=1"),
        "{err}"
    );
    assert!(ok(tiny(d, &["-q", "-f", "v"], b"")).stderr.is_empty());
    let out = ok(run(d, &["info", "-v", "v.lmz"], b""));
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        info.contains("member 1: 5000 -> "),
        "info -v shows the member: {info}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_terminal_run_ends_with_a_summary_line_and_no_progress_hides_the_bar() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    fs::write(d.join("p"), text(40_000)).unwrap();
    let shown = under_terminal(
        d,
        &format!("{BIN} --hidden 16 --layers 1 --no-progress p; echo status=$?"),
    )
    .expect("util-linux `script` runs (needed for this test)");
    assert!(shown.contains("status=0"), "{shown}");
    assert!(shown.contains("p: 40000 -> "), "summary line: {shown}");
    assert!(shown.contains("-> p.lmz"), "{shown}");
    assert!(!shown.contains("ETA"), "no bar: {shown}");
    let shown = under_terminal(d, &format!("{BIN} -q -t p.lmz; echo status=$?")).unwrap();
    assert_eq!(shown.trim(), "status=0");
}

/// `--prior none` starts from seeded weights and says so in no header byte more than needed;
/// an unknown prior is a usage error that lists the ones the build carries.
#[test]
fn prior_none_and_an_unknown_prior() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(700);
    let packed = ok(run(
        d,
        &["-c", "--prior", "none", "--hidden", "16", "--size", "700"],
        &data,
    ))
    .stdout;
    assert_eq!(ok(run(d, &["-d"], &packed)).stdout, data);
    let info = {
        fs::write(d.join("p.lmz"), &packed).unwrap();
        String::from_utf8_lossy(&ok(run(d, &["info", "p.lmz"], b"")).stdout).into_owned()
    };
    assert!(!info.contains("prior:"), "{info}");
    assert_usage_error(
        &run(d, &["-c", "--prior", "no-such-prior"], &data),
        "carries no such prior",
    );
}

/// A level of Mamba-1 takes its prior's network for text and its seeded network for binary
/// data, each block of `--block-size` for itself; the header names which (a level's seeded
/// network by its own number, with no edits), and every choice decodes.
#[test]
fn a_level_takes_its_seeded_network_for_binary_data() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let text_data = text(3000);
    let binary: Vec<u8> = (0u32..3000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let stored_as = |name: &str, data: &[u8], args: &[&str]| {
        fs::write(d.join(name), data).unwrap();
        let mut all = vec!["-f", "-4"];
        all.extend_from_slice(args);
        all.push(name);
        ok(run(d, &all, b""));
        let lmz = format!("{name}.lmz");
        assert_eq!(ok(run(d, &["-d", "-c", &lmz], b"")).stdout, data, "{name}");
        String::from_utf8_lossy(&ok(run(d, &["info", &lmz], b"")).stdout).into_owned()
    };
    // Levels 4–9 share the prior's network and their larger tables: the lowest number names
    // them.
    let info = stored_as("t", &text_data, &[]);
    assert!(info.contains("stored as level 4 with"), "{info}");
    assert!(info.contains(",table=23,"), "{info}");
    assert!(info.contains("prior:"), "{info}");
    let info = stored_as("b", &binary, &[]);
    assert!(
        info.contains("stored as level 4's seeded network"),
        "{info}"
    );
    assert!(info.contains("cfg:hidden=96,layers=2"), "{info}");
    assert!(!info.contains("prior:"), "{info}");
    // --prior none: the seeded network for text too.
    let info = stored_as("n", &text_data, &["--prior", "none"]);
    assert!(info.contains("cfg:hidden=96,layers=2"), "{info}");
    // Blocks choose one by one.
    let mut mixed = text_data.clone();
    mixed.extend(&binary);
    let _ = stored_as("m", &mixed, &["--block-size", "3000"]);
    let members =
        String::from_utf8_lossy(&ok(run(d, &["info", "-v", "m.lmz"], b"")).stdout).into_owned();
    let (first, second) = members.split_once("member 2:").expect("two members");
    assert!(first.contains("cfg:hidden=64,layers=1"), "{members}");
    assert!(first.contains("prior=2"), "{members}");
    assert!(second.contains("cfg:hidden=96,layers=2"), "{members}");
    assert!(!second.contains("prior=2"), "{members}");
}

#[test]
fn version_completions_and_manual_page() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let out = ok(run(d, &["--version"], b""));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains("format version 2, numerics version"),
        "{version}"
    );
    // --version lists the built-in priors by name, number and SHA-256.
    assert!(version.contains("built-in priors:"), "{version}");
    for p in lmzip::prior::all() {
        assert!(
            version.contains(p.name) && version.contains(p.sha256()),
            "{version}"
        );
    }
    // And the stage's warm starts.
    for w in lmzip::mix::warm::all() {
        assert!(
            version.contains(&format!(
                "{} (mix:warm={}, SHA-256 {})",
                w.name,
                w.number,
                w.sha256()
            )),
            "{version}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = ok(run(d, &["completions", shell], b""));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("lmzip") && script.contains("block-size"),
            "{shell}"
        );
    }
    let out = ok(run(d, &["man"], b""));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains(".TH lmzip") && page.contains("block\\-size"),
        "{page}"
    );
    assert_usage_error(
        &run(d, &["completions", "tcsh"], b""),
        "invalid value 'tcsh'",
    );
}

#[test]
fn stats_write_a_learning_curve() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = text(40_000);
    fs::write(d.join("c"), &data).unwrap();
    ok(tiny(d, &["--stats", "c.tsv", "c"], b""));
    let tsv = fs::read_to_string(d.join("c.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows[0], ["position", "block_bpb", "total_bpb", "kb_per_s"]);
    let positions: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    assert_eq!(positions, ["16384", "32768", "40000"]);
    // The curve falls as the model learns the text.
    let bpb = |r: &Vec<&str>| r[1].parse::<f64>().unwrap();
    assert!(bpb(&rows[3]) < bpb(&rows[1]), "{tsv}");
    // An existing file is kept unless -f.
    let out = tiny(d, &["--stats", "c.tsv", "-c", "c"], b"");
    assert_fails_with(&out, "c.tsv already exists");
    assert!(out.stdout.is_empty(), "nothing compressed");
}

#[test]
fn small_things_of_the_command_line() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    // decompress --help describes -f for decompression.
    let help =
        String::from_utf8_lossy(&ok(run(d, &["decompress", "--help"], b"")).stdout).into_owned();
    let force = help.lines().find(|l| l.contains("--force")).unwrap();
    assert!(!force.contains("suffix"), "{force}");
    assert!(
        force.contains("read compressed data from a terminal"),
        "{force}"
    );
    // Errors name the target, never the temporary file.
    fs::write(d.join("f"), b"data").unwrap();
    let out = tiny(d, &["-o", "no/such/dir/f.lmz", "f"], b"");
    assert_fails_with(&out, "cannot create a temporary file in no/such/dir");
    assert!(!stderr(&out).contains(".tmp"), "{}", stderr(&out));
    // scripts/priming.sh needs the corpus folder and says so.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/priming.sh");
    let out = std::process::Command::new(&script).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("usage: scripts/priming.sh CORPUS_DIR"),
        "{}",
        stderr(&out)
    );
    let out = std::process::Command::new(&script)
        .arg(d.join("nothing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no such file"), "{}", stderr(&out));
}

/// The progress bar's bits per byte count the container, as the summary line does.
#[test]
fn progress_counts_the_container() {
    let recipe = lmzip::levels::default_recipe(lmzip::recipe::ModelKind::Mamba1)
        .edit("cfg:hidden=16,layers=1", None)
        .unwrap();
    let data = text(3000);
    let mut last = lmzip::codec::Progress::default();
    let mut lmz = Vec::new();
    lmzip::codec::compress(
        &recipe,
        &lmzip::codec::Options::default(),
        &data[..],
        &mut lmz,
        &mut |p| {
            last = p;
            Ok(())
        },
    )
    .unwrap();
    let estimate = last.stream_bits_per_byte() * data.len() as f64 / 8.0;
    assert!(
        (estimate - lmz.len() as f64).abs() < 12.0,
        "{estimate} bytes estimated, {} written",
        lmz.len()
    );
    let mut decoded_last = lmzip::codec::Progress::default();
    lmzip::codec::decompress(
        &lmzip::codec::Options::default(),
        &lmz[..],
        std::io::sink(),
        &mut |p| {
            decoded_last = p;
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(decoded_last.container_bytes, last.container_bytes);
}
