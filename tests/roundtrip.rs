//! Every compressed stream decodes to exactly its input: round trips through the library for
//! each model and training mode on the inputs that break compressors (empty, one byte, all byte
//! values, long runs, random data, text), and golden hashes that pin the compressed bytes.

mod common;

use common::{assert_round_trip, modes, random, samples, text, tiny_with};
use lmzip::codec::compress_bytes;
use lmzip::recipe::{ModelKind, Recipe};

#[test]
fn mamba1_round_trips_every_input_in_every_mode() {
    for recipe in modes(ModelKind::Mamba1) {
        for (name, data) in samples() {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

#[test]
fn rwkv7_round_trips_every_input_in_every_mode() {
    for recipe in modes(ModelKind::Rwkv7) {
        for (name, data) in samples() {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

/// Mamba-1 with context inputs (tables of 2^8 rows, so that the inputs collide in them) in
/// every training mode, on every input, and under the switching schedule (a segment cut short,
/// one-step updates, inference) with its state carried on.
#[test]
fn mamba1_with_context_inputs_round_trips_every_input_in_every_mode() {
    let with_ctx = |r: &Recipe| r.edit("cfg:ctx=8", None).unwrap();
    for recipe in modes(ModelKind::Mamba1).iter().map(with_ctx) {
        assert!(recipe.to_text().contains(",ctx=8,"), "{recipe}");
        let inputs = samples()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("random"))
            .chain([("random 8 KiB", random(8 * 1024, 0x5eed))]);
        for (name, data) in inputs {
            assert_round_trip(&recipe, name, &data);
        }
    }
    for schedule in [SWITCHING, CARRY] {
        let recipe = with_ctx(&tiny_with(ModelKind::Mamba1, schedule));
        assert_round_trip(&recipe, "text", &text(4000));
    }
}

/// TBPTT with the live state carried on after each update instead of rebuilt.
const CARRY: &str = "0..:train(opt=adam,lr=0.003,bptt=8,state=carry)";

#[test]
fn both_models_round_trip_every_input_with_a_carried_state() {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, CARRY);
        // Random data shorter than in the other modes' matrix, to keep the suite fast.
        let inputs = samples()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("random"))
            .chain([("random 8 KiB", random(8 * 1024, 0x9e37_79b9))]);
        for (name, data) in inputs {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

/// Every key of Adam's constants, the rate schedule and growing windows, in two rules that differ
/// in them (RMSprop-like with β2 warm-up and a `1/sqrt` decay, then Adam with a warm-up, a power
/// decay and windows growing from 2 to 8 bytes).
const TUNED: &str = "0..1500:train(opt=adam,lr=0.004,bptt=8,b1=0,b2=0.9995,eps=1e-6,b2warm=1,\
    decay=0.01,floor=0.3) 1500..:train(opt=adam,lr=0.003,bptt=8,bptt0=2,grow=3,b1=0.5,warmup=50,decay=0.002,\
    power=0.75)";

#[test]
fn both_models_round_trip_with_the_optimizer_and_rate_keys() {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, TUNED);
        assert!(
            recipe.to_text().contains("b2warm=1"),
            "{}",
            recipe.to_text()
        );
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

/// The tuned schedule pinned like the other modes.
#[test]
fn golden_optimizer_and_rate_keys() {
    assert_pinned(TUNED, GOLDEN_TUNED);
}

const GOLDEN_TUNED: &[(usize, &str)] = &[(1498, "bdacfda2b2d36cb3"), (1068, "aac2bd382eb9dec5")];

#[test]
fn training_compresses_text_and_runs_better_than_no_training() {
    let data = text(6000);
    let sizes: Vec<usize> = modes(ModelKind::Mamba1)
        .iter()
        .map(|r| assert_round_trip(r, "text", &data).len())
        .collect();
    // Untrained, the network is near uniform (≈ 8 bits per byte); every trained mode learns.
    assert!(sizes[0] > data.len() * 7 / 8, "untrained: {sizes:?}");
    for &trained in &sizes[1..] {
        assert!(trained < data.len() / 2, "trained modes: {sizes:?}");
    }
}

#[test]
fn a_long_run_costs_almost_nothing() {
    let recipe = tiny_with(ModelKind::Mamba1, "0..:train(opt=adam,lr=0.003)");
    let packed = assert_round_trip(&recipe, "run", &vec![7u8; 20_000]);
    assert!(
        packed.len() < 600,
        "{} bytes for a run of 20000",
        packed.len()
    );
}

#[test]
fn inputs_longer_than_a_frame_round_trip() {
    // Two frames and a bit, with a model that only predicts (fast).
    let recipe = tiny_with(ModelKind::Mamba1, "0..:infer");
    let data = random(lmzip::format::FRAME_MAX * 2 + 1000, 99);
    assert_round_trip(&recipe, "three frames", &data);
}

/// Length and SHA-256 (first 16 hex digits) of the compressed bytes of a fixed input under
/// fixed recipes. A change here means the encoder computes something else: update on purpose,
/// with a numerics version bump if old files no longer decode (docs/determinism.md). The bytes
/// are the coder's words in the container of format version 1 ([`common::as_version_1`]), so
/// that these pins of the computation hold across container changes; tests/golden/v2 pins the
/// container this build writes.
#[test]
fn golden_compressed_bytes() {
    let data = text(4000);
    // Both models in every mode, and two networks whose widths are not multiples of the SIMD
    // lane count (so every kernel's tail path is pinned too).
    let odd_mamba = lmzip::levels::default_recipe(ModelKind::Mamba1)
        .edit(
            "cfg:hidden=20,layers=1,intermediate=44,state=5,conv=3,dt_rank=3,ctx=0 mix:off \
             0..:train(opt=adam,lr=0.003,bptt=8)",
            None,
        )
        .unwrap();
    let odd_rwkv = lmzip::levels::default_recipe(ModelKind::Rwkv7)
        .edit(
            "cfg:hidden=64,layers=2,intermediate=100,decay_rank=5,a_rank=6,v_rank=7,g_rank=9 \
             mix:off 0..:train(opt=adam,lr=0.003,bptt=8)",
            None,
        )
        .unwrap();
    let got: Vec<(String, usize, String)> = modes(ModelKind::Mamba1)
        .iter()
        .chain(&modes(ModelKind::Rwkv7))
        .chain([
            &odd_mamba,
            &odd_rwkv,
            &odd_mamba.edit("cfg:ctx=8", None).unwrap(),
        ])
        .map(|r| {
            let packed = common::as_version_1(r, &data);
            (common::mode_name(r), packed.len(), sha256_prefix(&packed))
        })
        .collect();
    let want: Vec<(String, usize, String)> = GOLDEN
        .iter()
        .map(|&(n, l, c)| (n.to_string(), l, c.to_string()))
        .collect();
    assert_eq!(
        got, want,
        "compressed bytes changed; see the comment on this test"
    );
}

fn sha256_prefix(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const GOLDEN: &[(&str, usize, &str)] = &[
    ("mamba1/none/bptt1", 4132, "8174ad32874bbe2b"),
    ("mamba1/sgd/bptt1", 1718, "63f9606095e2f9b8"),
    ("mamba1/adam/bptt1", 988, "8ba78e48217e1846"),
    ("mamba1/adam/bptt8", 1228, "a7c4f9e4f86cbc15"),
    ("rwkv7/none/bptt1", 4142, "700684669adcfee1"),
    ("rwkv7/sgd/bptt1", 1508, "0820d7fb530c4875"),
    ("rwkv7/adam/bptt1", 914, "10485bf5a50820c3"),
    ("rwkv7/adam/bptt8", 898, "2b949d4fdb3e152b"),
    ("mamba1/adam/bptt8", 1091, "f4e295a523d3d2fb"), // hidden 20, inner 44, state 5, conv 3, Δ-rank 3
    ("rwkv7/adam/bptt8", 862, "e98cddb7e83bc1c6"),   // 2 blocks, FFN 100, ranks 5/6/7/9
    ("mamba1/adam/bptt8", 817, "878fc263f6ab7757"),  // the same with context inputs (ctx 8)
];

/// A schedule that switches between inference, one-step and TBPTT training (with a segment cut
/// short at a boundary, a stride with gaps, and a repeat) in one stream.
const SWITCHING: &str = "0..700:train(opt=adam,lr=0.003,bptt=8) 700..1300:infer \
    1300..2500:repeat(300:train(opt=sgd,lr=0.05),200:infer) \
    2500..:train(opt=adam,lr=0.003,bptt=3,stride=5)";

#[test]
fn schedules_switching_between_infer_and_train_round_trip() {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, SWITCHING);
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

/// [`SWITCHING`] with the live state carried on after every TBPTT update, segments cut short at
/// the boundaries included.
fn switching_carried() -> String {
    SWITCHING
        .replace("bptt=8)", "bptt=8,state=carry)")
        .replace("stride=5)", "stride=5,state=carry)")
}

#[test]
fn a_carried_state_round_trips_a_switching_schedule() {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, &switching_carried());
        assert_eq!(recipe.to_text().matches("state=carry").count(), 2);
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

#[test]
fn percent_schedules_round_trip_once_resolved() {
    let recipe = tiny_with(ModelKind::Mamba1, "0..33.3%:train(lr=0.003) 33.3%..:infer");
    let data = text(3000);
    common::assert_err_contains(
        compress_bytes(&recipe, &data),
        "the recipe has positions in percent, which need the input's length",
    );
    let resolved = recipe.resolve(Some(data.len() as u64)).unwrap();
    assert_eq!(
        resolved.to_text().split(' ').nth(2),
        Some("0..999:train(scope=all,opt=adam,lr=0.003,stride=1,bptt=1,clip=0)")
    );
    assert_round_trip(&resolved, "percent", &data);
}

/// The carried state pinned like the other modes (its own list, so the older pins stay as
/// they are).
#[test]
fn golden_carried_state() {
    assert_pinned(CARRY, GOLDEN_CARRY);
}

const GOLDEN_CARRY: &[(usize, &str)] = &[(1240, "28c4092a061a7c02"), (930, "5bedc7a3b9c8c247")];

/// The switching schedule pinned like the single-rule ones.
#[test]
fn golden_switching_schedule() {
    assert_pinned(SWITCHING, GOLDEN_SWITCHING);
}

const GOLDEN_SWITCHING: &[(usize, &str)] =
    &[(1969, "07a518c5122924d0"), (1575, "d45ea0e2c2944db3")];

/// Per-group learning-rate multipliers, with SGD one-step updates then Adam over segments (the
/// groups both models have).
const LRMUL: &str = "0..1500:train(opt=sgd,lr=0.05,lrmul=head*2+bias*0.5) \
    1500..:train(opt=adam,lr=0.003,bptt=8,lrmul=embed*3+head*2+bias*2)";

#[test]
fn both_models_round_trip_with_learning_rate_multipliers() {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, LRMUL);
        let stored = recipe.to_text();
        assert!(
            stored.contains(",lrmul=head*2+bias*0.5)")
                && stored.contains(",lrmul=embed*3+head*2+bias*2)"),
            "{stored}"
        );
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
        }
    }
}

#[test]
fn multipliers_change_the_output_and_factors_of_one_do_not() {
    let data = text(4000);
    let rule = "0..:train(opt=adam,lr=0.003,bptt=8";
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let packed = |extra: &str| {
            compress_bytes(&tiny_with(kind, &format!("{rule}{extra})")), &data).unwrap()
        };
        let plain = packed("");
        assert_eq!(packed(",lrmul=1"), plain);
        assert_eq!(packed(",lrmul=embed*1+head*1+bias*1"), plain);
        // Each multiplied group alone changes what the encoder computes.
        for group in ["embed", "head", "bias"] {
            assert_ne!(packed(&format!(",lrmul={group}*2")), plain, "{group}");
        }
    }
}

/// A piecewise-linear rate curve (`curve`), with Adam over segments then SGD (which it leaves
/// alone: SGD steps take `lr` as given).
const CURVE: &str = "0..2500:train(opt=adam,lr=0.003,bptt=8,curve=0*3+40*1+200*0.5) \
    2500..:train(opt=sgd,lr=0.05,curve=0*2)";

#[test]
fn both_models_round_trip_with_a_rate_curve_and_a_flat_one_changes_nothing() {
    let data = text(4000);
    let rule = "0..:train(opt=adam,lr=0.003,bptt=8";
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, CURVE);
        assert!(
            recipe.to_text().contains(",curve=0*3+40*1+200*0.5)"),
            "{}",
            recipe.to_text()
        );
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
        }
        let packed = |extra: &str| {
            compress_bytes(&tiny_with(kind, &format!("{rule}{extra})")), &data).unwrap()
        };
        let plain = packed("");
        assert_eq!(packed(",curve=1"), plain);
        assert_eq!(packed(",curve=0*1+100*1"), plain);
        assert_ne!(packed(",curve=0*2+100*1"), plain);
    }
}

/// The multipliers pinned like the other modes.
#[test]
fn golden_learning_rate_multipliers() {
    assert_pinned(LRMUL, GOLDEN_LRMUL);
}

const GOLDEN_LRMUL: &[(usize, &str)] = &[(1369, "951306c81ffd07a2"), (1283, "c060aeae25c5e56b")];

/// Both models' tiny recipes with `schedule` compress 4,000 bytes of text to `pins`: the
/// length and the start of the SHA-256 of each (Mamba-1 first).
fn assert_pinned(schedule: &str, pins: &[(usize, &str)]) {
    let data = text(4000);
    let got: Vec<(usize, String)> = [ModelKind::Mamba1, ModelKind::Rwkv7]
        .iter()
        .map(|&kind| {
            let packed = common::as_version_1(&tiny_with(kind, schedule), &data);
            (packed.len(), sha256_prefix(&packed))
        })
        .collect();
    let want: Vec<(usize, String)> = pins.iter().map(|&(l, c)| (l, c.to_string())).collect();
    assert_eq!(
        got, want,
        "compressed bytes changed; see golden_compressed_bytes"
    );
}

/// Losses weighed by the bits the coder spent (`focus`): one-step Adam then Adam over segments,
/// without the mixing stage (the network's own coded cost) and with it (the stage's).
const FOCUS: &str = "0..1500:train(opt=adam,lr=0.003,focus=1) \
    1500..:train(opt=adam,lr=0.003,bptt=8,state=carry,focus=2)";

#[test]
fn both_models_round_trip_with_focus_and_focus_zero_changes_nothing() {
    let data = text(4000);
    let rule = "0..:train(opt=adam,lr=0.003,bptt=8";
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = tiny_with(kind, FOCUS);
        assert!(
            recipe.to_text().contains(",focus=1)") && recipe.to_text().contains(",focus=2)"),
            "{}",
            recipe.to_text()
        );
        let staged = common::with_mix(&recipe);
        for (name, data) in [("text", text(4000)), ("short", text(650))] {
            assert_round_trip(&recipe, name, &data);
            assert_round_trip(&staged, name, &data);
        }
        for (name, data) in samples() {
            assert_round_trip(&staged, name, &data);
        }
        let packed = |extra: &str| {
            compress_bytes(&tiny_with(kind, &format!("{rule}{extra})")), &data).unwrap()
        };
        let plain = packed("");
        assert_eq!(packed(",focus=0"), plain);
        assert_ne!(packed(",focus=1"), plain);
    }
}

/// The focused schedule pinned like the other modes.
#[test]
fn golden_focus() {
    assert_pinned(FOCUS, GOLDEN_FOCUS);
}

const GOLDEN_FOCUS: &[(usize, &str)] = &[(1041, "80eebd14d0c84c0d"), (947, "528f5e01f8e8ebc0")];
