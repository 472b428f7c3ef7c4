//! Running the `lmzip` binary: in a folder, with arguments and standard input, never
//! panicking; what it exits with and says; what it leaves in a folder.

use std::fs;
use std::path::Path;
use std::process::Output;

use lmzip::recipe::ModelKind;

pub const BIN: &str = env!("CARGO_BIN_EXE_lmzip");

/// The tiny Mamba-1 (16 wide, one block) as flags: what most runs of the binary use, so that
/// they take milliseconds.
pub const TINY: &[&str] = &["--hidden", "16", "--layers", "1"];

/// The tiny network of each model (as [`crate::common::tiny`] makes it) as flags: RWKV-7's
/// smallest is one head, 64 wide.
pub fn tiny_flags(kind: ModelKind) -> &'static [&'static str] {
    match kind {
        ModelKind::Mamba1 => &["--model", "mamba1", "--hidden", "16", "--layers", "1"],
        ModelKind::Rwkv7 => &["--model", "rwkv7", "--hidden", "64", "--layers", "1"],
    }
}

/// The binary, to be run in `dir` (environment and arguments still to be added).
pub fn command(dir: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.current_dir(dir);
    cmd
}

/// Runs `cmd` with `stdin` and checks that it did not panic.
pub fn output(mut cmd: assert_cmd::Command, stdin: &[u8]) -> Output {
    let out = cmd
        .write_stdin(stdin.to_vec())
        .output()
        .expect("lmzip runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "lmzip panicked: {err}");
    out
}

/// Runs lmzip in `dir` with `args`, feeding `stdin`.
pub fn run(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = command(dir);
    cmd.args(args);
    output(cmd, stdin)
}

/// Runs `program` (lmzip under another name) in `dir`.
pub fn run_as(program: &Path, dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = assert_cmd::Command::new(program);
    cmd.current_dir(dir).args(args);
    output(cmd, stdin)
}

/// `lmzip compress` with the tiny model, then `extra` arguments.
pub fn compress(dir: &Path, extra: &[&str], stdin: &[u8]) -> Output {
    let args: Vec<&str> = ["compress"]
        .iter()
        .chain(TINY)
        .chain(extra)
        .copied()
        .collect();
    run(dir, &args, stdin)
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
pub fn assert_ok(out: &Output) {
    assert_eq!(code(out), 0, "stderr: {}", stderr(out));
}

/// [`assert_ok`], passing the output on.
#[track_caller]
pub fn ok(out: Output) -> Output {
    assert_ok(&out);
    out
}

/// Asserts exit status 1 (a runtime error) and an `lmzip: ...` message containing `needle`.
#[track_caller]
pub fn assert_fails_with(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(code(out), 1, "stderr: {err}");
    assert!(err.starts_with("lmzip: "), "message format: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

/// Asserts exit status 2 (a usage error), a message containing `needle`, and nothing written
/// to standard output.
#[track_caller]
pub fn assert_usage_error(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(code(out), 2, "stderr: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(out.stdout.is_empty(), "usage errors write no data");
}

/// The sorted names in `dir`, hidden ones (temporary files) included.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `list` sorted, to compare with [`listing`].
pub fn names(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Runs the shell `command` under a pseudo-terminal (util-linux `script`) in `dir`, returning
/// what it showed (standard output and error), or `None` where `script` is not available.
#[cfg(target_os = "linux")]
pub fn under_terminal(dir: &Path, command: &str) -> Option<String> {
    let out = std::process::Command::new("script")
        .current_dir(dir)
        .args(["-qec", command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    Some(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
