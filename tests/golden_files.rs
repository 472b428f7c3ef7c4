//! Golden files: small `.lmz` files committed under `tests/golden/`, one per model and training
//! mode, beside the input they were made from. Each must decode to that input, and compressing
//! the input again with the recipe stored in its header must give the file byte for byte. So
//! files written by an earlier build still decode, and the encoder still writes what it wrote.
//!
//! Changing these files is a numerics or format version decision (docs/determinism.md). If a
//! change makes them fail, either it altered what the encoder computes by accident (fix it), or
//! on purpose: then bump `format::NUMERICS_VERSION` (or `FORMAT_VERSION` for a layout change)
//! in the same commit, and regenerate the files with
//!
//! ```sh
//! cargo test --release --test golden_files -- --ignored regenerate_golden_files
//! ```
//!
//! The input is regenerated too, from the same deterministic generators.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::format;
use lmzip::recipe::{ModelKind, OptimizerKind, Recipe};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The input of every golden file: text, then binary records.
const INPUT: &str = "input.bin";

fn input() -> Vec<u8> {
    let mut data = common::text(2048);
    data.extend(common::binary(1024, 0x601d));
    data
}

/// The stage as files were written before the keys `conf`, `pword`, `select` and `record`
/// existed (small tables, as `common::SMALL_MIX`).
const CLASSIC_MIX: &str = "mix:table=16,match=16,rate=12,conf=0,pword=0,select=0,record=0,ext=0";

/// The default stage of the second round, before the key `ext` existed (small tables, as `common::SMALL_MIX`), at the mixer rate it had then.
const SECOND_MIX: &str = "mix:table=16,match=16,rate=6,record=1,ext=0";
/// The default stage of the third round, before `record=2` (small tables, as `common::SMALL_MIX`).
const THIRD_MIX: &str = "mix:table=16,match=16,record=1,ext=31";
/// The default stage of the fourth round, before the fifth round's `ext` bits (indirect, columns,
/// the second byte's selector, runs) (small tables, as `common::SMALL_MIX`).
const FOURTH_MIX: &str = "mix:table=16,match=16,ext=31";

/// Every golden recipe with its file name, e.g. `rwkv7-adam-bptt8.lmz`: every model and mode,
/// and with the mixing stage prediction only and Adam over segments — as first written
/// (`-mix.lmz`), with the second round's components (`-mix2.lmz`, Adam only), with the third
/// round's (`-mix3.lmz`, Adam only) and with the fourth's, the default stage (`-mix4.lmz`,
/// Adam only).
fn golden_recipes() -> Vec<(String, Recipe)> {
    let kinds = [ModelKind::Mamba1, ModelKind::Rwkv7];
    let classic = kinds.into_iter().flat_map(|kind| {
        [
            common::tiny(kind, None, 1),
            common::tiny(kind, Some(OptimizerKind::Adam), 8),
        ]
        .map(|r| r.edit(CLASSIC_MIX, None).unwrap())
    });
    let adam8 = |kind| common::tiny(kind, Some(OptimizerKind::Adam), 8);
    let second = kinds.map(|kind| adam8(kind).edit(SECOND_MIX, None).unwrap());
    let third = kinds.map(|kind| adam8(kind).edit(THIRD_MIX, None).unwrap());
    let fourth = kinds.map(|kind| adam8(kind).edit(FOURTH_MIX, None).unwrap());
    let current = kinds.map(|kind| common::with_mix(&adam8(kind)));
    // Losses weighed by the coded bits: with the stage over segments, and alone one step at a
    // time.
    let focus = |kind, bptt| {
        let rule = format!("0..:train(opt=adam,lr=0.003,bptt={bptt},stride={bptt},focus=1)");
        common::tiny_with(kind, &rule)
    };
    let focused = kinds.into_iter().flat_map(|kind| {
        [
            focus(kind, 8).edit(FOURTH_MIX, None).unwrap(),
            focus(kind, 1),
        ]
    });
    kinds
        .into_iter()
        .flat_map(common::modes)
        .chain(classic)
        .chain(second)
        .chain(third)
        .chain(fourth)
        .chain(current)
        .chain(focused)
        .map(|r| (golden_name(&r), r))
        .collect()
}

/// The file name of a golden recipe: its mode, with `2` after `-mix` when the stage uses a key
/// of the second round, `3` when it uses one of the third, `4` with the fourth's `record=2`;
/// `-focus` at the end when training weighs losses by the coded bits.
fn golden_name(r: &Recipe) -> String {
    let later = r.mix.is_some_and(|m| m != m.with_implicit_keys());
    let third = r
        .mix
        .is_some_and(|m| m.fin || m.words || m.decay || m.nmap || m.ways);
    let fourth = r.mix.is_some_and(|m| m.record >= 2);
    let fifth = r
        .mix
        .is_some_and(|m| m.indirect || m.columns || m.second || m.runs);
    let suffix = match (later, third, fourth) {
        _ if fifth => "5",
        (_, _, true) => "4",
        (_, true, false) => "3",
        (true, false, false) => "2",
        _ => "",
    };
    let focus = match r.to_text().contains("focus=") {
        true => "-focus",
        false => "",
    };
    format!(
        "{}{suffix}{focus}.lmz",
        common::mode_name(r).replace('/', "-")
    )
}

#[test]
fn golden_files_decode_and_are_reproduced_byte_for_byte() {
    let dir = golden_dir();
    let original = fs::read(dir.join(INPUT)).expect("the golden input is committed");
    let mut present: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".lmz"))
        .collect();
    present.sort();
    let mut expected: Vec<String> = golden_recipes().into_iter().map(|(name, _)| name).collect();
    expected.sort();
    assert_eq!(
        present, expected,
        "the golden files are one per model and mode"
    );

    for name in expected {
        let file = fs::read(dir.join(&name)).unwrap();
        let header = format::read_header(&mut &file[..]).unwrap();
        assert_eq!(
            header.numerics_version,
            format::NUMERICS_VERSION,
            "{name}: made with another numerics version; see this test's comment"
        );
        let decoded = decompress_bytes(&file).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(decoded == original, "{name}: decodes to other bytes");

        let recipe = Recipe::parse(&header.recipe).unwrap();
        assert_eq!(
            golden_name(&recipe),
            name,
            "{name}: the header's recipe is another model or mode"
        );
        let again = compress_bytes(&recipe, &original).unwrap();
        assert!(
            again == file,
            "{name}: compressing the input again gives other bytes ({} instead of {}); see \
             this test's comment",
            again.len(),
            file.len()
        );
    }
}

/// Writes the input and every golden file. Run on purpose only (see the module comment).
#[test]
#[ignore = "rewrites tests/golden/; a numerics or format version decision"]
fn regenerate_golden_files() {
    let dir = golden_dir();
    fs::create_dir_all(&dir).unwrap();
    let data = input();
    fs::write(dir.join(INPUT), &data).unwrap();
    for (name, recipe) in golden_recipes() {
        let packed = compress_bytes(&recipe, &data).unwrap();
        fs::write(dir.join(&name), &packed).unwrap();
        eprintln!("{name}: {} bytes", packed.len());
    }
}
