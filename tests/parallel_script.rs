//! scripts/parallel.sh on this machine (GNU parallel's `:` login): a file cut into blocks,
//! compressed by separate lmzip runs, comes back as one stream that decodes to the file.
//!
//! Needs GNU parallel (Debian/Ubuntu: `apt-get install parallel`), so it is ignored by default:
//! `cargo test --release --test parallel_script -- --ignored` runs it (.ci/run installs parallel
//! and does). Where parallel is missing the test fails, saying so.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::cli::{BIN, ok, run, stdout};

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/parallel.sh")
}

#[test]
#[ignore = "needs GNU parallel; .ci/run installs it and runs this test by name"]
fn the_parallel_script_round_trips_on_localhost() {
    let found = Command::new("parallel").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "GNU parallel is needed for this test (Debian/Ubuntu: apt-get install parallel)"
    );
    let dir = tempfile::TempDir::new().unwrap();
    let d = dir.path();
    // Text with a binary stretch: about three and a half blocks of 8 KiB.
    let mut data = common::text(22_000);
    data.extend(common::random(7000, 3));
    fs::write(d.join("in"), &data).unwrap();
    let out = Command::new(script())
        .current_dir(d)
        .env("LMZIP", BIN)
        .args(["-b", "8k", "-S", "2/:", "in", "--", "-1", "--hidden", "16"])
        .args(["--layers", "1"])
        .stdout(fs::File::create(d.join("in.lmz")).unwrap())
        .output()
        .expect("the script runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = stdout(&ok(run(d, &["-l", "in.lmz"], b"")));
    let members: usize = list
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(members >= 3, "one member per block: {list}");
    let back = ok(run(d, &["-d", "-c", "in.lmz"], b""));
    assert!(back.stdout == data, "the stream decodes to the file");
}
