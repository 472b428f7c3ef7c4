//! Model files in whole runs: a model saved after compressing one text primes the compression
//! of a related one; a run resumed from a saved model computes exactly what the uninterrupted
//! run computes; decompression refuses a missing or different model file; half-precision files
//! and the official Mamba layout load to the models they describe.

mod common;

use std::collections::BTreeMap;

use common::{related_text, tiny_with};
use lmzip::codec::{Options, compress_bytes_with, decompress_bytes_with};
use lmzip::model::mamba1::{self, Mamba1};
use lmzip::model::rwkv7::Rwkv7;
use lmzip::modelfile::{ModelFile, Weights, WeightsError, load, to_bytes};
use lmzip::params::{Group, ParamSet};
use lmzip::predictor;
use lmzip::recipe::{ModelKind, Recipe};

fn save(model: bool) -> Options<'static> {
    Options {
        save_model: model,
        ..Options::default()
    }
}

/// Compresses `data` (from `weights` if given); returns the stream and the saved model.
fn compress(recipe: &Recipe, weights: Option<&Weights>, data: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let options = Options {
        weights,
        ..save(true)
    };
    let (lmz, summary) = compress_bytes_with(recipe, &options, data).unwrap();
    (lmz, summary.model.unwrap())
}

/// The recipe `recipe` with its base replaced by the model file `w`.
fn from_file(recipe: &Recipe, w: &Weights) -> Recipe {
    recipe.edit("", Some(&w.base().unwrap())).unwrap()
}

fn weights(bytes: &[u8], name: &str) -> Weights {
    Weights::from_bytes(bytes, Some(name.to_string())).unwrap()
}

#[test]
fn a_saved_model_primes_a_related_text() {
    let recipe = tiny_with(ModelKind::Mamba1, "0..:train(lr=0.003)");
    let (a, b) = (related_text(8000, 1), related_text(3000, 2));
    let (_, model) = compress(&recipe, None, &a);
    let w = weights(&model, "primed.safetensors");
    let primed = from_file(&recipe, &w);
    let (fresh_lmz, _) = compress(&recipe, None, &b);
    let (primed_lmz, _) = compress(&primed, Some(&w), &b);
    assert!(
        primed_lmz.len() * 10 < fresh_lmz.len() * 9,
        "primed {} bytes, fresh {} bytes",
        primed_lmz.len(),
        fresh_lmz.len()
    );
    let options = Options {
        weights: Some(&w),
        ..save(false)
    };
    let (back, _) = decompress_bytes_with(&options, &primed_lmz).unwrap();
    assert_eq!(back, b);
}

/// The tensors of a model file, and its metadata but for the recipe (which names how each run
/// started).
fn contents(bytes: &[u8]) -> (BTreeMap<String, Vec<u32>>, BTreeMap<String, String>) {
    let f = ModelFile::from_bytes(bytes).unwrap();
    let tensors = f
        .tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.data.iter().map(|x| x.to_bits()).collect()))
        .collect();
    let mut meta = f.metadata.clone();
    meta.remove("lmzip.recipe");
    (tensors, meta)
}

/// Compresses `a` then `b` in one run, and `a`, save, then `b` from the saved model with the
/// schedule `continuation` (positions count from the start of each input, so a schedule that
/// depends on positions continues shifted): the models both end with must be the same bit for
/// bit, and so are the predictions of every byte of `b`.
fn assert_resume_is_exact(recipe: &Recipe, continuation: &str, a: &[u8], b: &[u8]) {
    let whole: Vec<u8> = [a, b].concat();
    let (_, uninterrupted) = compress(recipe, None, &whole);
    let (_, first) = compress(recipe, None, a);
    let w = weights(&first, "first.safetensors");
    let resumed_recipe = recipe.edit(continuation, Some(&w.base().unwrap())).unwrap();
    let (lmz, resumed) = compress(&resumed_recipe, Some(&w), b);
    let (t1, m1) = contents(&uninterrupted);
    let (t2, m2) = contents(&resumed);
    assert_eq!(t1.keys().collect::<Vec<_>>(), t2.keys().collect::<Vec<_>>());
    for (name, bits) in &t1 {
        assert!(
            bits == &t2[name],
            "{recipe}: tensor {name} differs after resuming"
        );
    }
    if continuation.is_empty() {
        assert_eq!(m1, m2, "{recipe}");
    }
    // Same predictions: the resumed stream costs what the uninterrupted one spent on `b`. (With
    // `focus` a byte's loss weighs by what the coder spent on it, which this loop without a
    // coder does not know; the models above and the decoder below compare those runs.)
    if !recipe.to_text().contains("focus=") {
        assert_same_predictions(recipe, &resumed_recipe, &w, a, &whole);
    } else if !a.is_empty() {
        let (_, saved) = contents(&first);
        assert!(
            saved.contains_key("lmzip.replay_weights"),
            "{recipe}: the pending segment's weights are saved"
        );
    }
    // The decoder resumes the same way and ends with the same file.
    let options = Options {
        weights: Some(&w),
        ..save(true)
    };
    let (back, summary) = decompress_bytes_with(&options, &lmz).unwrap();
    assert_eq!(back, b);
    assert_eq!(summary.model.unwrap(), resumed, "decoder's model file");
}

/// The predictions of every byte after `a` in `whole` are the same from the start and from
/// the model saved after `a`.
fn assert_same_predictions(
    recipe: &Recipe,
    resumed_recipe: &Recipe,
    w: &Weights,
    a: &[u8],
    whole: &[u8],
) {
    let b = &whole[a.len()..];
    let cost = |p: &mut dyn lmzip::predictor::BytePredictor, data: &[u8]| -> Vec<u64> {
        data.iter()
            .map(|&x| {
                let bits = p.pdf()[x as usize].to_bits();
                p.learn(x);
                bits
            })
            .collect()
    };
    let whole_recipe = recipe.resolve(Some(whole.len() as u64)).unwrap();
    let mut p = predictor::build(&whole_recipe, None).unwrap();
    let mut q = predictor::build(resumed_recipe, Some(w)).unwrap();
    let all = cost(p.as_mut(), whole);
    assert!(
        all[a.len()..] == cost(q.as_mut(), b)[..],
        "{recipe}: predictions differ"
    );
}

#[test]
fn resuming_from_a_saved_model_equals_the_uninterrupted_run() {
    let (a, b) = (related_text(1001, 3), related_text(700, 4));
    for (kind, rules, continuation) in [
        (ModelKind::Mamba1, "0..:train(lr=0.003)", ""),
        (ModelKind::Mamba1, "0..:train(opt=sgd,lr=0.05,stride=3)", ""),
        // 1001 bytes leave a segment of 1001 % 8 = 1 byte pending at the save: it is replayed.
        (ModelKind::Mamba1, "0..:train(lr=0.003,bptt=8)", ""),
        (
            ModelKind::Mamba1,
            "0..:train(lr=0.003,bptt=6,stride=10)",
            "",
        ),
        // 1001 = 3 cycles of 300 and 101 bytes into the training part: 99 more, then the cycle
        // from its infer part.
        (
            ModelKind::Mamba1,
            "0..:repeat(200:train(lr=0.003,bptt=8),100:infer)",
            "0..99:train(lr=0.003,bptt=8) 99..:repeat(100:infer,200:train(lr=0.003,bptt=8))",
        ),
        (ModelKind::Rwkv7, "0..:train(lr=0.003,bptt=5)", ""),
        // A carried state: the saved start state of the pending segment is the carried one.
        (
            ModelKind::Mamba1,
            "0..:train(lr=0.003,bptt=8,state=carry)",
            "",
        ),
        (
            ModelKind::Rwkv7,
            "0..:train(lr=0.003,bptt=5,state=carry)",
            "",
        ),
        (ModelKind::Rwkv7, "0..:infer", ""),
        // Growing windows (2, 3, ... 7 take 166 bytes; 835 more leave 3 of a window of 8
        // pending) with RMSprop-like steps, β2 warm-up and a rate schedule.
        (
            ModelKind::Mamba1,
            "0..:train(lr=0.003,bptt=8,bptt0=2,grow=2,b1=0,b2warm=1,warmup=5,decay=0.01,floor=0.3)",
            "",
        ),
        // Other βs: the restored bias corrections take the saved action's.
        (
            ModelKind::Rwkv7,
            "0..:train(lr=0.003,bptt=5,b1=0.5,b2=0.99,eps=1e-6,decay=0.001,power=1)",
            "",
        ),
        // Losses weighed by the coded bits: the pending segment's weights are saved with it.
        (
            ModelKind::Mamba1,
            "0..:train(lr=0.003,bptt=8,state=carry,focus=8)",
            "",
        ),
    ] {
        let recipe = tiny_with(kind, rules);
        assert_resume_is_exact(&recipe, continuation, &a, &b);
    }
    // With the mixing stage the coded bits that weigh the losses are the stage's, and a model
    // file does not carry the stage: the resumed run starts a fresh one, so it trains otherwise
    // than the uninterrupted run. It is still one computation both ways: the decoder resumes
    // the same way and ends with the same model.
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = common::with_mix(&tiny_with(kind, "0..:train(lr=0.003,bptt=8,focus=4)"));
        let (_, first) = compress(&recipe, None, &a);
        let w = weights(&first, "first.safetensors");
        let resumed_recipe = recipe.edit("", Some(&w.base().unwrap())).unwrap();
        let (lmz, resumed) = compress(&resumed_recipe, Some(&w), &b);
        let options = Options {
            weights: Some(&w),
            ..save(true)
        };
        let (back, summary) = decompress_bytes_with(&options, &lmz).unwrap();
        assert_eq!(back, b, "{recipe}");
        assert_eq!(
            summary.model.unwrap(),
            resumed,
            "{recipe}: decoder's model file"
        );
    }
    // An empty first part saves a model that resumes like a fresh start.
    let recipe = tiny_with(ModelKind::Mamba1, "0..:train(lr=0.003,bptt=4)");
    assert_resume_is_exact(&recipe, "", b"", &b);
}

#[test]
fn a_new_action_after_resuming_trains_on_the_pending_segment_first() {
    // Saved mid-segment, resumed with another learning rate: the segment is cut and trained,
    // and the run round-trips.
    let recipe = tiny_with(ModelKind::Mamba1, "0..:train(lr=0.003,bptt=8)");
    let (_, first) = compress(&recipe, None, &related_text(1001, 5));
    let w = weights(&first, "m");
    let other = from_file(&recipe, &w)
        .edit("0..:train(lr=0.001,bptt=8)", Some(&w.base().unwrap()))
        .unwrap();
    let data = related_text(500, 6);
    let (lmz, _) = compress(&other, Some(&w), &data);
    let options = Options {
        weights: Some(&w),
        ..save(false)
    };
    assert_eq!(decompress_bytes_with(&options, &lmz).unwrap().0, data);
}

/// The tensors of the model a run ends with, by name: the training group each belongs to and
/// its values as bits. The run is checked too: it round-trips, and the decoder ends with the
/// encoder's model file byte for byte.
fn tensors_after(recipe: &Recipe, data: &[u8]) -> BTreeMap<String, (&'static str, Vec<u32>)> {
    let (lmz, model) = compress(recipe, None, data);
    let (back, summary) = decompress_bytes_with(&save(true), &lmz).unwrap();
    assert!(back == data, "{recipe}: round trip");
    assert!(
        summary.model.unwrap() == model,
        "{recipe}: the decoder ends with another model"
    );
    let file = ModelFile::from_bytes(&model).unwrap();
    // The output bias is the predictor's, in the group after the network's.
    let groups = lmzip::train::trained_groups(recipe.kind());
    let bias = [(
        predictor::OUTPUT_BIAS,
        &[256][..],
        (groups.len() - 1) as Group,
    )];
    let params = match recipe.kind() {
        ModelKind::Mamba1 => load::<Mamba1>(&file, &bias).unwrap().1,
        ModelKind::Rwkv7 => load::<Rwkv7>(&file, &bias).unwrap().1,
    };
    params
        .tensors
        .iter()
        .map(|t| {
            let bits = t
                .slot
                .of(&params.data)
                .iter()
                .map(|x| x.to_bits())
                .collect();
            (t.name.clone(), (groups[t.group as usize], bits))
        })
        .collect()
}

/// Training with a scope changes exactly the tensors of the groups it names: each one in scope
/// moves, each other one ends bit for bit as it started (read back from the saved model files).
/// Every group alone with one-step Adam, and two groups over TBPTT segments with SGD (the
/// gradient then crosses the groups left out on its way back through time).
#[test]
fn scoped_training_changes_only_the_tensors_in_scope() {
    let data = related_text(800, 10);
    for kind in ModelKind::ALL {
        let groups = lmzip::train::trained_groups(kind);
        let start = tensors_after(&tiny_with(kind, "0..:infer"), &data);
        let mut cases: Vec<(String, Vec<&str>)> = groups
            .iter()
            .map(|&g| (format!("train(lr=0.003,scope={g})"), vec![g]))
            .collect();
        let pair = vec![groups[0], groups[groups.len() - 2]];
        cases.push((
            format!(
                "train(opt=sgd,lr=0.05,bptt=5,clip=0.01,scope={})",
                pair.join("+")
            ),
            pair,
        ));
        for (rule, in_scope) in cases {
            let end = tensors_after(&tiny_with(kind, &format!("0..:{rule}")), &data);
            assert_eq!(
                start.keys().collect::<Vec<_>>(),
                end.keys().collect::<Vec<_>>()
            );
            for (name, (group, before)) in &start {
                let after = &end[name].1;
                if in_scope.contains(group) {
                    assert!(
                        after != before,
                        "{kind:?} {rule}: {name} ({group}) did not train"
                    );
                } else {
                    assert!(
                        after == before,
                        "{kind:?} {rule}: {name} ({group}) is out of scope but changed"
                    );
                }
            }
        }
    }
}

#[test]
fn decompression_refuses_a_missing_or_different_model_file() {
    let recipe = tiny_with(ModelKind::Mamba1, "0..:train(lr=0.003)");
    let (_, model) = compress(&recipe, None, &related_text(500, 7));
    let (_, other_model) = compress(&recipe, None, &related_text(500, 8));
    let w = weights(&model, "right.safetensors");
    let other = weights(&other_model, "other.safetensors");
    let (lmz, _) = compress(&from_file(&recipe, &w), Some(&w), &related_text(300, 9));

    let err = decompress_bytes_with(&save(false), &lmz).unwrap_err();
    assert_eq!(
        err.downcast_ref::<WeightsError>(),
        Some(&WeightsError::Missing {
            sha256: w.sha256,
            name: Some("right.safetensors".into())
        }),
        "{err:#}"
    );
    let message = format!("{err:#}");
    assert!(
        message.contains(&lmzip::recipe::hex(&w.sha256)),
        "{message}"
    );
    assert!(message.contains("right.safetensors"), "{message}");

    let options = Options {
        weights: Some(&other),
        ..save(false)
    };
    let err = decompress_bytes_with(&options, &lmz).unwrap_err();
    assert!(
        matches!(err.downcast_ref::<WeightsError>(), Some(WeightsError::Wrong { expected, .. })
            if *expected == w.sha256),
        "{err:#}"
    );
    // Compression refuses a model file other than the one the recipe names, too.
    let options = Options {
        weights: Some(&other),
        ..save(false)
    };
    common::assert_err_contains(
        compress_bytes_with(&from_file(&recipe, &w), &options, b"x"),
        &format!(
            "wrong model file: this stream needs the one with SHA-256 {}",
            lmzip::recipe::hex(&w.sha256)
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// Loading: half precision and the official Mamba layout
// ---------------------------------------------------------------------------------------------

fn small_mamba() -> (mamba1::Config, ParamSet) {
    let cfg = mamba1::Config {
        hidden: 12,
        layers: 2,
        inner: 20,
        state: 4,
        conv: 3,
        dt_rank: 3,
        ctx: 0,
        prior: 0,
    };
    let (_, params) = Mamba1::new_random(cfg.clone(), 11).unwrap();
    (cfg, params)
}

/// The distributions a model file gives over `text`, as bits, with the model only predicting.
fn predictions(bytes: &[u8]) -> Vec<u64> {
    let w = weights(bytes, "m");
    let recipe = Recipe {
        base: w.base().unwrap(),
        mix: None,
        schedule: vec![],
    };
    let mut p = predictor::build(&recipe, Some(&w)).unwrap();
    let mut out = Vec::new();
    for &b in b"the official layout predicts alike" {
        out.extend(p.pdf().iter().map(|x| x.to_bits()));
        p.learn(b);
    }
    out
}

/// A safetensors file of `params` with every tensor stored as `dtype` (F16 or BF16).
fn half_file(params: &ParamSet, dtype: safetensors::Dtype) -> Vec<u8> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = params
        .tensors
        .iter()
        .map(|t| {
            let data: Vec<u8> = t
                .slot
                .of(&params.data)
                .iter()
                .flat_map(|&x| match dtype {
                    safetensors::Dtype::F16 => half::f16::from_f32(x).to_le_bytes(),
                    _ => half::bf16::from_f32(x).to_le_bytes(),
                })
                .collect();
            (t.name.clone(), t.shape.clone(), data)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(n, s, d)| {
            let view = safetensors::tensor::TensorView::new(dtype, s.clone(), d).unwrap();
            (n.clone(), view)
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn half_precision_files_load_exactly() {
    let (_, params) = small_mamba();
    for dtype in [safetensors::Dtype::F16, safetensors::Dtype::BF16] {
        // The same values, rounded to the half format, saved as F32.
        let mut rounded = params.clone();
        for x in &mut rounded.data {
            *x = match dtype {
                safetensors::Dtype::F16 => half::f16::from_f32(*x).to_f32(),
                _ => half::bf16::from_f32(*x).to_f32(),
            };
        }
        let f32_file = to_bytes(&rounded, &[], &BTreeMap::new()).unwrap();
        let half = half_file(&params, dtype);
        assert!(half.len() < f32_file.len(), "{dtype:?} is stored in half");
        assert_eq!(predictions(&half), predictions(&f32_file), "{dtype:?}");
    }
}

/// `params` (native) in the official Mamba layout: `backbone.*` names, convolution taps in
/// PyTorch's order (newest input last), no in/out projection biases, and — when `tied` — no
/// `lm_head.weight`.
fn official_file(params: &ParamSet, cfg: &mamba1::Config, tied: bool) -> Vec<u8> {
    let mut out = ParamSet::new();
    for t in &params.tensors {
        let name = t.name.as_str();
        let official = match name {
            "model.embeddings.weight" => "backbone.embedding.weight".to_string(),
            "model.norm.weight" => "backbone.norm_f.weight".to_string(),
            "lm_head.weight" if tied => continue,
            n if n.ends_with("in_proj.bias") || n.ends_with("out_proj.bias") => continue,
            n => n.replace("model.layers.", "backbone.layers."),
        };
        let slot = out.add(official.clone(), &t.shape, t.group);
        let data = out.get_mut(slot);
        data.copy_from_slice(t.slot.of(&params.data));
        if official.ends_with("conv1d.weight") {
            for channel in data.chunks_exact_mut(cfg.conv) {
                channel.reverse();
            }
        }
    }
    to_bytes(&out, &[], &BTreeMap::new()).unwrap()
}

#[test]
fn official_mamba_layout_loads_with_reversed_taps_and_a_tied_head() {
    let (cfg, mut params) = small_mamba();
    // What the official layout can express: zero projection biases...
    for t in params.tensors.clone() {
        if t.name.ends_with("in_proj.bias") || t.name.ends_with("out_proj.bias") {
            t.slot.of_mut(&mut params.data).fill(0.0);
        }
    }
    // ... and a conv bias that is not zero, so that it is seen to load.
    let conv_b = params
        .find("model.layers.1.mixer.conv1d.bias")
        .unwrap()
        .slot;
    params.get_mut(conv_b)[3] = 0.25;
    let native = to_bytes(&params, &[], &BTreeMap::new()).unwrap();
    let untied = official_file(&params, &cfg, false);
    assert_eq!(predictions(&untied), predictions(&native), "untied head");

    // A tied head is the embedding.
    let emb = params.find("model.embeddings.weight").unwrap().slot;
    let head = params.find("lm_head.weight").unwrap().slot;
    let e = params.get(emb).to_vec();
    params.get_mut(head).copy_from_slice(&e);
    let native = to_bytes(&params, &[], &BTreeMap::new()).unwrap();
    let tied = official_file(&params, &cfg, true);
    assert_eq!(predictions(&tied), predictions(&native), "tied head");
    assert_eq!(
        weights(&tied, "m").base().unwrap().config(),
        &lmzip::recipe::ModelConfig::Mamba1(cfg.clone())
    );

    // Taps left in lmzip's order are a different model: the orientation matters.
    let mut wrong = ModelFile::from_bytes(&tied).unwrap();
    let conv = wrong
        .tensors
        .get_mut("backbone.layers.0.mixer.conv1d.weight")
        .unwrap();
    for channel in conv.data.chunks_exact_mut(cfg.conv) {
        channel.reverse();
    }
    let native_file = ModelFile::from_bytes(&native).unwrap();
    let converted = wrong.official_mamba_to_native().unwrap();
    assert_ne!(
        converted.tensors["model.layers.0.mixer.conv1d.weight"],
        native_file.tensors["model.layers.0.mixer.conv1d.weight"]
    );
}

#[test]
fn unknown_official_tensors_are_named() {
    let (cfg, params) = small_mamba();
    let mut file = ModelFile::from_bytes(&official_file(&params, &cfg, true)).unwrap();
    let extra = file.tensors["backbone.norm_f.weight"].clone();
    file.tensors.insert("backbone.mystery.weight".into(), extra);
    let err = file.official_mamba_to_native().unwrap_err().to_string();
    assert!(err.contains("backbone.mystery.weight"), "{err}");
}
