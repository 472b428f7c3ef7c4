//! The stage's warm start (`mix:warm`, src/mix/warm.rs): every level starts its mixer from the
//! built-in weights, the CLI leaves them out where the x86 transform is on (the header records
//! it), a recipe that names the key keeps what it says, files round-trip either way, and the
//! start pays on small text.

mod common;

use std::fs;

use common::cli::{assert_usage_error, ok, run};
use common::recipe_of;
use lmzip::codec;
use lmzip::levels;
use lmzip::recipe::ModelKind;
use tempfile::TempDir;

fn warm_of(lmz: &[u8]) -> u32 {
    recipe_of(lmz).mix.unwrap().warm
}

#[test]
fn every_level_starts_warm_but_those_of_numerics_6() {
    for kind in ModelKind::ALL {
        for level in 1..=levels::MAX_LEVEL {
            let warm = levels::recipe(kind, level).mix.unwrap().warm;
            assert_eq!(warm, 1, "{kind:?} level {level}");
            // Files of numerics 6 and older mean the levels without it.
            let older = levels::recipe_of(6, kind, level);
            assert_eq!(
                older.mix.unwrap().warm,
                0,
                "numerics 6 {kind:?} level {level}"
            );
        }
    }
}

/// A level's start comes with its stage: an edit to the stage's components that changes its
/// mixer starts cold, unless it names the start, which must then fit.
#[test]
fn an_edited_stage_starts_cold_unless_the_edit_names_the_start() {
    let level = levels::default_recipe(ModelKind::Mamba1);
    for edit in ["mix:orders=4", "mix:ext=0", "mix:select=0"] {
        let edited = level.edit(edit, None).unwrap();
        assert_eq!(edited.mix.unwrap().warm, 0, "{edit}");
        let err = level.edit(&format!("{edit},warm=1"), None).unwrap_err();
        assert!(format!("{err:#}").contains("warm start is for"), "{err:#}");
    }
    // Sizes leave the mixer as it is.
    for edit in ["mix:table=16", "mix:cap=18", "mix:match=18", "mix:x86=1"] {
        assert_eq!(
            level.edit(edit, None).unwrap().mix.unwrap().warm,
            1,
            "{edit}"
        );
    }
}

/// The first bytes of this test's executable: x86 machine code with an ELF header on the
/// machines CI runs on (detection turns the x86 transform on).
fn executable(n: usize) -> Vec<u8> {
    let mut exe = fs::read(std::env::current_exe().unwrap()).unwrap();
    exe.truncate(n);
    exe
}

#[test]
fn the_start_stays_on_text_and_binaries_and_is_left_out_with_the_x86_transform() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let x86 = cfg!(target_arch = "x86_64") as u32;
    let inputs = [
        ("text", common::related_text(6000, 3), 1),
        ("binary", common::binary(6000, 4), 1),
        ("exe", executable(30_000), 1 - x86),
    ];
    for (name, data, warm) in &inputs {
        fs::write(d.join(name), data).unwrap();
        for level in ["-1", "-3"] {
            let lmz = ok(run(d, &[level, "-c", name], b"")).stdout;
            assert_eq!(warm_of(&lmz), *warm, "{name} {level}");
            assert_eq!(
                &ok(run(d, &["-d", "-c"], &lmz)).stdout,
                data,
                "{name} {level}"
            );
        }
        // `--x86 on` leaves it out too.
        let lmz = ok(run(d, &["-c", "--x86", "on", name], b"")).stdout;
        assert_eq!(warm_of(&lmz), 0, "{name} --x86 on");
        // A recipe that names the key keeps it, whatever the input; with the x86 transform,
        // whose tables are mixer inputs after the start's, too.
        for forced in [0, 1] {
            let edit = format!("mix:warm={forced}");
            for x86_flag in ["auto", "on"] {
                let args = ["-c", "--recipe", &edit, "--x86", x86_flag, name];
                let lmz = ok(run(d, &args, b"")).stdout;
                assert_eq!(warm_of(&lmz), forced, "{name} {edit} --x86 {x86_flag}");
                let back = ok(run(d, &["-d", "-c"], &lmz)).stdout;
                assert_eq!(&back, data, "{name} {edit} --x86 {x86_flag}");
            }
        }
    }
}

/// What the start is for: on a few kilobytes of text, the mixer that starts knowing whom to
/// trust codes fewer bytes than the one that learns it from the components' starting weights.
#[test]
fn the_start_codes_small_text_in_fewer_bytes() {
    let data = common::related_text(5000, 11);
    let level = levels::default_recipe(ModelKind::Mamba1);
    let sized = lmzip::fit::fitted(&level, data.len() as u64);
    let cold = sized.edit("mix:warm=0", None).unwrap();
    let warm_bytes = codec::compress_bytes(&sized, &data).unwrap();
    let cold_bytes = codec::compress_bytes(&cold, &data).unwrap();
    assert!(
        warm_bytes.len() * 100 < cold_bytes.len() * 99,
        "warm {} bytes, cold {}",
        warm_bytes.len(),
        cold_bytes.len()
    );
    assert_eq!(codec::decompress_bytes(&warm_bytes).unwrap(), data);
}

#[test]
fn the_library_and_the_stage_refuse_what_does_not_fit() {
    let level = levels::default_recipe(ModelKind::Mamba1);
    // A stage with other components has a mixer of another shape.
    let err = level.edit("mix:ext=0,warm=1", None).unwrap_err();
    assert!(format!("{err:#}").contains("warm start is for"), "{err:#}");
    let err = level.edit("mix:warm=9", None).unwrap_err();
    assert!(format!("{err:#}").contains("does not carry"), "{err:#}");
    // The weights of one stage's mixer do not go into another's.
    let other = levels::recipe(ModelKind::Mamba1, 1)
        .edit("mix:orders=5,warm=0", None)
        .unwrap();
    let start = lmzip::mix::warm::by_number(1).unwrap().weights().unwrap();
    match codec::mixer_after(&other, &Default::default(), b"abc", Some(&start)) {
        Ok(_) => panic!("weights of another shape were taken"),
        Err(err) => assert!(format!("{err:#}").contains("warm start is for"), "{err:#}"),
    }
}

#[test]
fn the_cli_names_the_key_and_refuses_unknown_starts() {
    let dir = TempDir::new().unwrap();
    let out = run(dir.path(), &["-c", "--recipe", "mix:warm=2"], b"abc");
    assert_usage_error(&out, "warm");
}

/// Learning a start carries the mixer's weights from one document to the next: the weights
/// after two documents differ from those after the second alone, and the same documents give
/// the same weights.
#[test]
fn learning_a_start_carries_weights_and_is_repeatable() {
    let recipe = levels::recipe(ModelKind::Mamba1, 1)
        .edit("mix:warm=0", None)
        .unwrap();
    let a = common::related_text(1500, 1);
    let b = common::related_text(1500, 2);
    let recipe = lmzip::fit::fitted(&recipe, 1500);
    let options = codec::Options::default();
    let after_a = codec::mixer_after(&recipe, &options, &a, None).unwrap();
    let after_ab = codec::mixer_after(&recipe, &options, &b, Some(&after_a)).unwrap();
    let after_b = codec::mixer_after(&recipe, &options, &b, None).unwrap();
    // (Compared with `==`: a failing `assert_eq!` would print 700,000 weights.)
    assert!(after_ab != after_b, "the first document left no trace");
    let again = codec::mixer_after(&recipe, &options, &b, Some(&after_a)).unwrap();
    assert!(again == after_ab, "the same documents gave other weights");
    let stored = lmzip::mix::warm::MixerWeights::from_bytes(&after_ab.to_bytes()).unwrap();
    assert!(stored.shape == after_ab.shape);
}
