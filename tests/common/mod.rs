//! What several integration tests share: tiny recipes that run fast, and deterministic inputs.
//! Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use lmzip::recipe::{Action, ModelKind, OptimizerKind, Recipe};

/// A small network, so that whole sweeps run in seconds: Mamba-1 16 wide, RWKV-7 one head
/// (64 wide), one block each, trained on every byte by one rule, without the mixing stage.
/// `optimizer` `None` only predicts; learning rates as the round-trip tests use them.
pub fn tiny(kind: ModelKind, optimizer: Option<OptimizerKind>, bptt: usize) -> Recipe {
    let hidden = match kind {
        ModelKind::Mamba1 => 16,
        ModelKind::Rwkv7 => 64,
    };
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
    lmzip::levels::default_recipe(kind)
        .edit(
            &format!("cfg:hidden={hidden},layers=1 mix:off 0..:{action}"),
            None,
        )
        .unwrap()
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

/// English-like text with a small vocabulary, so that a model has something to learn.
pub fn text(n: usize) -> Vec<u8> {
    let words = [
        "the",
        "model",
        "learns",
        "each",
        "byte",
        "as",
        "it",
        "comes,",
        "and",
        "a",
        "range",
        "coder",
        "spends",
        "few",
        "bits",
        "on",
        "what",
        "it",
        "expected.\n",
    ];
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0usize;
    while out.len() < n {
        out.extend_from_slice(words[(i * 7 + i / 19) % words.len()].as_bytes());
        out.push(b' ');
        i += 1;
    }
    out.truncate(n);
    out
}

/// Binary records like those of a file format: a counter, a slowly moving value, a flag byte
/// and a noisy byte (xorshift), little-endian.
pub fn binary(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0u32;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&i.to_le_bytes());
        out.extend_from_slice(&((1000 + i * 3) as u16).to_le_bytes());
        out.push(if i.is_multiple_of(5) { 0xff } else { 0 });
        out.push((x >> 56) as u8);
        i += 1;
    }
    out.truncate(n);
    out
}
