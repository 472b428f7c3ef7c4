//! Golden files: small `.lmz` files committed under `tests/golden/`, beside the input they were
//! made from.
//!
//! - `tests/golden/*.lmz`, one per model and training mode, were written in format version 1
//!   (the whole recipe as text in every header) by builds before version 2. No build writes
//!   them again: each must decode to the input, and the coder's words of each of its frames
//!   must be the ones this build's encoder computes for the recipe in its header
//!   ([`lmzip::codec::frame_words`]). So old files still decode, and the computation is the
//!   one they were written with.
//! - `tests/golden/v2/*.lmz` are this build's format (version 2: a level and its edits in the
//!   header, stored frames) as builds of numerics version 2 wrote it: level recipes as they
//!   are and edited, a frame stored as it is, and the empty input at every level of both
//!   models (which pins what each level means). Each must decode to its input, with the level
//!   as numerics version 2 meant it, and compressing it again must give the same frames.
//! - `tests/golden/v2-n3/*.lmz` are the same files as builds of numerics version 3 wrote them
//!   (the levels before the network's context inputs): each must decode, and its frames be
//!   recomputed, as for `v2/`.
//! - `tests/golden/v2-n4/*.lmz` are the same files as builds of numerics version 4 wrote them
//!   (the levels before the built-in prior): each must decode, and its frames be recomputed.
//! - `tests/golden/v2-n5/*.lmz` are the same files as this build (numerics version 5) writes
//!   them, and the default level from its prior on text: each must decode and be reproduced
//!   byte for byte.
//! - From numerics version 3 on, the sets hold a stage sized for its input by each of the two
//!   keys that do it (`fit`, written by the builds before `cap`, and `cap`).
//!
//! Changing these files is a numerics or format version decision (docs/determinism.md). If a
//! change makes them fail, either it altered what the encoder computes by accident (fix it), or
//! on purpose: then bump `format::NUMERICS_VERSION` (or `FORMAT_VERSION` for a layout change)
//! in the same commit, and regenerate the files of the format this build writes with
//!
//! ```sh
//! cargo test --release --test golden_files -- --ignored regenerate_golden_files
//! ```

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use lmzip::codec::{Options, compress_bytes, decompress_bytes, frame_words};
use lmzip::format;
use lmzip::levels;
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
const CLASSIC_MIX: &str = "mix:table=16,match=16,rate=12,conf=0,pword=0,select=0,record=0,ext=0,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0";

/// The default stage of the second round, before the key `ext` existed (small tables, as `common::SMALL_MIX`), at the mixer rate it had then.
const SECOND_MIX: &str = "mix:table=16,match=16,rate=6,record=1,ext=0,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0";
/// The default stage of the third round, before `record=2` (small tables, as `common::SMALL_MIX`).
const THIRD_MIX: &str = "mix:table=16,match=16,record=1,ext=31,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0";
/// The default stage of the fourth round, before the fifth round's `ext` bits (indirect, columns,
/// the second byte's selector, runs) (small tables, as `common::SMALL_MIX`).
const FOURTH_MIX: &str = "mix:table=16,match=16,ext=31,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0";
/// The default stage of the fifth round, before the recent bits and the second sparse contexts
/// (small tables, as `common::SMALL_MIX`).
const FIFTH_MIX: &str = "mix:table=16,match=16,ext=511,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0";

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
    let fifth = kinds.map(|kind| adam8(kind).edit(FIFTH_MIX, None).unwrap());
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
        .chain(fifth)
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

/// The golden files present in `dir` (`.lmz`), sorted.
fn present(dir: &Path) -> Vec<String> {
    let mut present: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".lmz"))
        .collect();
    present.sort();
    present
}

#[test]
fn version_1_golden_files_decode_and_their_words_are_recomputed() {
    let dir = golden_dir();
    let original = fs::read(dir.join(INPUT)).expect("the golden input is committed");
    assert!(
        original == input(),
        "the generators no longer make the golden input"
    );
    let mut expected: Vec<String> = golden_recipes().into_iter().map(|(name, _)| name).collect();
    expected.sort();
    assert_eq!(
        present(&dir),
        expected,
        "the golden files are one per model and mode"
    );

    for name in expected {
        let file = fs::read(dir.join(&name)).unwrap();
        let header = format::read_header(&mut &file[..]).unwrap();
        assert_eq!(
            header.format_version, 1,
            "{name}: written in format version 1"
        );
        assert_eq!(
            header.numerics_version,
            format::OLDEST_NUMERICS_VERSION,
            "{name}: made with another numerics version; see this test's comment"
        );
        let decoded = decompress_bytes(&file).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(decoded == original, "{name}: decodes to other bytes");

        let recipe = lmzip::codec::read_recipe(&header).unwrap();
        assert_eq!(
            golden_name(&recipe),
            name,
            "{name}: the header's recipe is another model or mode"
        );
        let mut r = &file[header.len as usize..];
        let mut stored_words = Vec::new();
        while let Some(frame) = format::read_frame(&mut r, 1, stored_words.len() as u64).unwrap() {
            let format::Body::Coded(words) = frame.body else {
                panic!("{name}: version 1 frames are coded");
            };
            stored_words.push(words);
        }
        let again = frame_words(&recipe, &Options::default(), &original).unwrap();
        assert!(
            again == stored_words,
            "{name}: the encoder computes other words for this recipe; see this test's comment"
        );
    }
}

/// Every golden file of format version 2 as a build of numerics version `numerics` writes it:
/// its name, recipe and input.
fn v2_golden(numerics: u8) -> Vec<(String, Recipe, Vec<u8>)> {
    let text = input();
    let mut random = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2048 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        random.push((x >> 56) as u8);
    }
    let level = |kind, level| levels::recipe_of(numerics, kind, level);
    let mut out = Vec::new();
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let model = kind.name();
        let level1 = level(kind, 1);
        let edited = level(kind, 2)
            .edit_from_level(
                "cfg:layers=2,seed=5 mix:table=16 0..:train(lr=0.003,bptt=8)",
                None,
            )
            .unwrap();
        let scheduled = level(kind, 1)
            .edit_from_level("mix:off 0..1K:infer 1K..:repeat(512:train,512:infer)", None)
            .unwrap();
        out.push((format!("{model}-level1.lmz"), level1.clone(), text.clone()));
        out.push((format!("{model}-level2-edited.lmz"), edited, text.clone()));
        out.push((
            format!("{model}-level1-schedule.lmz"),
            scheduled,
            text.clone(),
        ));
        out.push((
            format!("{model}-level1-random.lmz"),
            level1.clone(),
            random.clone(),
        ));
        if numerics >= 3 {
            // The stage sized for the input: `fit` as the first builds that sized it wrote it
            // (numerics 3's two files were written by such a build, commit cb6e521), and
            // `cap`. What either key computes never changes.
            for key in ["fit", "cap"] {
                let sized = level1
                    .edit_from_level(&format!("mix:{key}=16"), None)
                    .unwrap();
                out.push((format!("{model}-level1-{key}.lmz"), sized, text.clone()));
            }
        }
        if numerics >= 5 && kind == ModelKind::Mamba1 {
            // The default level starts from the built-in prior: its weights, fitted to the
            // input's context tables, pin what the prior's number means (and from numerics 7,
            // the stage's warm start what its number means).
            let prior = level(kind, 3)
                .edit_from_level("cfg:ctx=9 mix:cap=16", None)
                .unwrap();
            out.push((format!("{model}-level3-prior.lmz"), prior, text.clone()));
        }
        for l in 1..=levels::MAX_LEVEL {
            out.push((
                format!("{model}-level{l}-empty.lmz"),
                level(kind, l),
                Vec::new(),
            ));
        }
        if numerics >= 9 && kind == ModelKind::Mamba1 {
            // Each level's seeded network, for inputs its prior does not suit, is stored under
            // its own number: the empty input pins what each means, and level 4's on the
            // binary half of the input its weights.
            let seeded = |l| levels::stored_base(numerics, kind, levels::SEEDED_BASE + l).unwrap();
            for l in 1..=levels::MAX_LEVEL {
                out.push((
                    format!("{model}-level{l}-seeded-empty.lmz"),
                    seeded(l),
                    Vec::new(),
                ));
            }
            let small = seeded(4)
                .edit_from_level("cfg:ctx=9 mix:cap=16", None)
                .unwrap();
            out.push((
                format!("{model}-level4-seeded.lmz"),
                small,
                text[2048..].to_vec(),
            ));
        }
    }
    out
}

/// The directory of the format version 2 golden files of a numerics version: `v2/` for
/// version 2, `v2-n3/` for 3, and so on.
fn v2_dir(numerics: u8) -> PathBuf {
    match numerics {
        2 => golden_dir().join("v2"),
        n => golden_dir().join(format!("v2-n{n}")),
    }
}

/// Checks the golden files of a numerics version: the set, that each is stored as a level
/// and decodes to its input, and that compressing the input again with the recipe gives the
/// same frames and trailer (`whole`: and the same header, for the version this build writes).
fn check_v2_golden(numerics: u8, whole: bool) {
    let dir = v2_dir(numerics);
    let golden = v2_golden(numerics);
    let mut expected: Vec<String> = golden.iter().map(|(name, ..)| name.clone()).collect();
    expected.sort();
    assert_eq!(
        present(&dir),
        expected,
        "the golden files of {}",
        dir.display()
    );
    for (name, recipe, data) in golden {
        let file = fs::read(dir.join(&name)).unwrap();
        let header = format::read_header(&mut &file[..]).unwrap();
        assert_eq!(
            (header.format_version, header.numerics_version),
            (2, numerics),
            "{name}"
        );
        assert!(
            matches!(header.recipe, format::StoredRecipe::Level { .. }),
            "{name}: a level's recipe is stored as a level"
        );
        assert_eq!(
            lmzip::codec::read_recipe(&header).unwrap(),
            recipe,
            "{name}"
        );
        let decoded = decompress_bytes(&file).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(decoded == data, "{name}: decodes to other bytes");
        let again = compress_bytes(&recipe, &data).unwrap();
        let again_header = format::read_header(&mut &again[..]).unwrap();
        let (body, again_body) = (
            &file[header.len as usize..],
            &again[again_header.len as usize..],
        );
        assert!(
            body == again_body && (!whole || again == file),
            "{name}: compressing the input again gives other bytes ({} instead of {}); see \
             this test's comment",
            again.len(),
            file.len()
        );
    }
    let stored = fs::read(dir.join("mamba1-level1-random.lmz")).unwrap();
    let layout = format::scan(&mut std::io::Cursor::new(&stored)).unwrap();
    assert_eq!(
        layout.stored_frames, 1,
        "random bytes are stored as they are"
    );
}

/// Files of the older numerics versions decode, and their frames are recomputed from the
/// levels as each version meant them: 2 (before the stage's recent bits, second sparse and
/// nesting contexts) and 3 (before the network's context inputs).
#[test]
fn version_2_golden_files_of_older_numerics_versions_decode_and_their_frames_are_recomputed() {
    for numerics in format::OLDEST_NUMERICS_VERSION..format::NUMERICS_VERSION {
        check_v2_golden(numerics, false);
    }
}

#[test]
fn version_2_golden_files_of_this_numerics_version_are_reproduced_byte_for_byte() {
    check_v2_golden(format::NUMERICS_VERSION, true);
}

/// Writes every golden file of the format and numerics version this build writes. Run on
/// purpose only (see the module comment); the files of older versions and the input stay as
/// they were written.
#[test]
#[ignore = "rewrites tests/golden/v2-nN/; a numerics or format version decision"]
fn regenerate_golden_files() {
    let dir = v2_dir(format::NUMERICS_VERSION);
    fs::create_dir_all(&dir).unwrap();
    for (name, recipe, data) in v2_golden(format::NUMERICS_VERSION) {
        let packed = compress_bytes(&recipe, &data).unwrap();
        fs::write(dir.join(&name), &packed).unwrap();
        eprintln!("{name}: {} bytes", packed.len());
    }
}
