//! The fixtures the integration tests share: tiny recipes per model and training mode
//! (here), sample inputs ([`inputs`]) and helpers that run the `lmzip` binary ([`cli`]).
//! Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

pub mod cli;
pub mod inputs;

#[allow(unused_imports)] // each test binary uses some of them
pub use inputs::{binary, random, related_text, samples, short_samples, text};

use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::recipe::{Action, ModelConfig, ModelKind, OptimizerKind, Recipe, TrainSpec};

/// A small network, so that whole sweeps run in seconds: Mamba-1 16 wide, RWKV-7 one head
/// (64 wide), one block each, without the mixing stage, following `schedule` (recipe rules
/// such as `0..:train(lr=0.003,bptt=8)`). The other sizes are the model's base sizes, not a
/// level's, so that the pinned outputs do not move with the levels table.
pub fn tiny_with(kind: ModelKind, schedule: &str) -> Recipe {
    let hidden = match kind {
        ModelKind::Mamba1 => 16,
        ModelKind::Rwkv7 => 64,
    };
    let base = Recipe::fresh(
        ModelConfig::default_for(kind),
        0,
        Action::Train(TrainSpec::defaults(kind)),
    );
    base.edit(
        &format!("cfg:hidden={hidden},layers=1 mix:off {schedule}"),
        None,
    )
    .unwrap()
}

/// The tiny network trained on every byte by one rule. `optimizer` `None` only predicts;
/// learning rates as the golden files use them (0.05 for SGD, 0.003 for Adam).
pub fn tiny(kind: ModelKind, optimizer: Option<OptimizerKind>, bptt: usize) -> Recipe {
    let action = match optimizer {
        None => "infer".to_string(),
        Some(opt) => {
            let lr = if opt == OptimizerKind::Sgd {
                "0.05"
            } else {
                "0.003"
            };
            format!(
                "train(opt={},lr={lr},bptt={bptt},stride={bptt})",
                opt.name()
            )
        }
    };
    tiny_with(kind, &format!("0..:{action}"))
}

/// The mixing stage with small tables (64K counters, a 64 KiB match window), so that tests
/// allocate little; the other settings are the default stage's.
pub const SMALL_MIX: &str = "mix:table=16,match=16";

/// `recipe` with the small mixing stage.
pub fn with_mix(recipe: &Recipe) -> Recipe {
    recipe.edit(SMALL_MIX, None).unwrap()
}

/// The training modes every model is checked in: prediction only, one-step SGD and Adam, and
/// Adam over TBPTT segments of 8 bytes.
pub fn modes(kind: ModelKind) -> Vec<Recipe> {
    vec![
        tiny(kind, None, 1),
        tiny(kind, Some(OptimizerKind::Sgd), 1),
        tiny(kind, Some(OptimizerKind::Adam), 1),
        tiny(kind, Some(OptimizerKind::Adam), 8),
    ]
}

/// `model/optimizer/bptt` of a one-rule recipe, e.g. `rwkv7/adam/bptt8` or `mamba1/none/bptt1`,
/// with `/mix` after it when the recipe has the mixing stage: how messages and file names name
/// a recipe.
pub fn mode_name(r: &Recipe) -> String {
    let (opt, bptt) = match r.actions().next() {
        Some(Action::Train(t)) => (t.optimizer.name(), t.bptt),
        Some(Action::Infer) | None => ("none", 1),
    };
    let mix = if r.mix.is_some() { "/mix" } else { "" };
    format!("{}/{opt}/bptt{bptt}{mix}", r.kind().name())
}

/// Compresses `data` with `recipe` through the library, checks that it decodes to exactly
/// `data`, and returns the compressed bytes. `name` (with the recipe's mode) names a failure.
#[track_caller]
pub fn assert_round_trip(recipe: &Recipe, name: &str, data: &[u8]) -> Vec<u8> {
    let name = format!("{} {name}", mode_name(recipe));
    let packed = compress_bytes(recipe, data).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    let back = decompress_bytes(&packed).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert!(back == data, "{name}: decoded bytes differ ({recipe})");
    packed
}

/// The error of `result` with its causes (`{:#}`), or a failure naming `what` if it is `Ok`.
#[track_caller]
pub fn error_text<T>(result: anyhow::Result<T>, what: &str) -> String {
    match result {
        Ok(_) => panic!("{what}: expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

/// Asserts that `result` failed with a message containing `needle`.
#[track_caller]
pub fn assert_err_contains<T>(result: anyhow::Result<T>, needle: &str) {
    let err = error_text(result, needle);
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

/// The recipe a stream's first member was written with, as its header stores it.
pub fn recipe_of(lmz: &[u8]) -> Recipe {
    let layout = lmzip::format::scan_members(&mut std::io::Cursor::new(lmz)).unwrap();
    lmzip::codec::read_recipe(&layout[0].header).unwrap()
}

/// The file a build of format version 1 wrote for `data`: the whole recipe as text and the
/// coder's words of every frame, in the old container. The coder's words do not depend on the
/// container, so pins made before format version 2 still hold of this (tests/roundtrip.rs).
/// The header's numerics byte stays the one the pins were made with (2): what the pins hold
/// is the words, which a numerics version that changes only what the levels mean leaves alone.
pub fn as_version_1(recipe: &Recipe, data: &[u8]) -> Vec<u8> {
    use lmzip::format;
    let mut f = Vec::new();
    format::write_v1_header(&mut f, 2, &recipe.to_text()).unwrap();
    let options = lmzip::codec::Options::default();
    let words = lmzip::codec::frame_words(recipe, &options, data).unwrap();
    for (chunk, words) in data.chunks(format::FRAME_MAX).zip(&words) {
        format::write_v1_frame(&mut f, chunk.len(), words).unwrap();
    }
    format::write_v1_end(&mut f, data.len() as u64, crc32fast::hash(data)).unwrap();
    f
}
