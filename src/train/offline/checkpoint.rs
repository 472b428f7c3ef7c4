//! The files of offline training: checkpoints, which resume a run exactly, and the output
//! model file, which holds the weights only.
//!
//! Both are safetensors in lmzip's native layout (src/modelfile.rs), so either loads with
//! `--weights`. A checkpoint adds, under `lmzip.train.`:
//!
//! | name | kind | what |
//! |---|---|---|
//! | `lmzip.train.adam.m.<tensor>`, `lmzip.train.adam.v.<tensor>` | tensor | Adam's moments |
//! | `lmzip.train.stream.<b>.<part>` | tensor | stream b's recurrent state |
//! | `lmzip.train.plan` | metadata | what decides the weights (sizes, seed, streams, window, schedule, budget, the data's length and SHA-256): a resumed run must have the same |
//! | `lmzip.train.steps` | metadata | steps taken (one Adam step each) |
//! | `lmzip.train.next` | metadata | per stream, the index of its next byte in the data |
//! | `lmzip.train.tokens` | metadata | hex, per stream, the byte it feeds next |
//! | `lmzip.train.seconds` | metadata | seconds of training so far (for the curve and a time budget) |
//!
//! These names differ from those with which `--save-weights` resumes a compressed stream
//! (src/resume.rs), so a checkpoint given to `--weights` starts the online run from its weights
//! with a fresh optimizer, as the output file does. The run needs no random numbers beyond the
//! seeded initial weights (the streams' offsets are fixed), so there is no generator to save.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

use super::{ADAM, Trainer};
use crate::model::{Build, Network};
use crate::modelfile::{FileTensor, ModelFile, fill_params, to_bytes};
use crate::params::ParamSet;
use crate::recipe::hex;

const ADAM_M: &str = "lmzip.train.adam.m.";
const ADAM_V: &str = "lmzip.train.adam.v.";
const STREAM: &str = "lmzip.train.stream.";

/// The metadata every file of a run carries.
fn common<N: Network>(t: &Trainer<'_, N>) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("lmzip.format".into(), crate::resume::FORMAT.into()),
        (
            "lmzip.numerics".into(),
            crate::format::NUMERICS_VERSION.to_string(),
        ),
        ("lmzip.model".into(), t.plan.config.kind().name().into()),
    ])
}

/// The output model file: the weights, and a line saying how they were trained. No optimizer
/// state, no position and no recurrent state, so a run that starts from it starts its
/// optimizer, its learning-rate schedule and its state afresh.
pub(super) fn weights_only<N: Network>(t: &Trainer<'_, N>) -> Result<Vec<u8>> {
    let mut meta = common(t);
    let valid = t.last_valid.map_or("none".into(), |v| format!("{v:.4}"));
    meta.insert(
        "lmzip.trained".into(),
        format!(
            "lmzip train: {} bytes in {} steps; validation {valid} bits per byte; {}",
            t.bytes(),
            t.steps,
            t.plan.identity(&t.data_id)
        ),
    );
    to_bytes(&t.params, &[], &meta)
}

/// A checkpoint of the run as it stands between steps.
pub(super) fn save<N: Network>(t: &Trainer<'_, N>) -> Result<Vec<u8>> {
    let mut extra: Vec<(String, Vec<usize>, &[f32])> = Vec::new();
    if let Some((m, v)) = t.optimizer.moments() {
        for tensor in &t.params.tensors {
            if let Some(m) = m {
                let name = format!("{ADAM_M}{}", tensor.name);
                extra.push((name, tensor.shape.clone(), tensor.slot.of(m)));
            }
            let name = format!("{ADAM_V}{}", tensor.name);
            extra.push((name, tensor.shape.clone(), tensor.slot.of(v)));
        }
    }
    let net = &t.workers[0].net;
    for (b, s) in t.streams().enumerate() {
        for part in net.state_tensors(&s.state) {
            extra.push((format!("{STREAM}{b}.{}", part.name), part.shape, part.data));
        }
    }
    let next: Vec<String> = t.streams().map(|s| s.next.to_string()).collect();
    let tokens: Vec<u8> = t.streams().map(|s| s.token).collect();
    let mut meta = common(t);
    for (key, value) in [
        ("plan", t.plan.identity(&t.data_id)),
        ("steps", t.steps.to_string()),
        ("next", next.join(",")),
        ("tokens", hex(&tokens)),
        ("seconds", format!("{}", t.seconds())),
    ] {
        meta.insert(format!("lmzip.train.{key}"), value);
    }
    to_bytes(&t.params, &extra, &meta)
}

/// Restores the run a checkpoint saved: weights, Adam's moments and step count, every stream's
/// place and state, the steps and the time taken.
pub(super) fn restore<N: Network + Build>(t: &mut Trainer<'_, N>, file: &ModelFile) -> Result<()> {
    let meta = |key: &str| {
        file.metadata
            .get(&format!("lmzip.train.{key}"))
            .with_context(|| format!("not a checkpoint of lmzip train (no lmzip.train.{key})"))
    };
    let saved_plan = meta("plan")?;
    let plan = t.plan.identity(&t.data_id);
    if *saved_plan != plan {
        bail!(
            "the checkpoint is of another run: it says\n  {saved_plan}\nbut this run is\n  {plan}\n\
             (the network, seed, --streams, --bptt, the rate schedule, the budget and the \
             training data must be the same)"
        );
    }
    let steps: u64 = meta("steps")?.parse().context("lmzip.train.steps")?;
    let seconds: f64 = meta("seconds")?.parse().context("lmzip.train.seconds")?;
    let next: Vec<usize> = meta("next")?
        .split(',')
        .map(|n| n.parse::<usize>().ok().filter(|&n| n < t.data.len()))
        .collect::<Option<_>>()
        .context("lmzip.train.next is not a list of places in the data")?;
    let tokens = unhex(meta("tokens")?).context("lmzip.train.tokens is not hexadecimal")?;
    let streams = t.plan.streams;
    if next.len() != streams || tokens.len() != streams {
        bail!(
            "the checkpoint has {} streams, this run {streams}",
            next.len()
        );
    }

    fill_params(&mut t.params, file, &[]).context("the checkpoint's weights")?;
    let moments = read_moments(file, &t.params)?;
    t.optimizer.restore(moments, steps, &ADAM);
    let (workers, groups) = (&t.workers, &mut t.groups);
    let net = &workers[0].net;
    for (b, s) in groups.iter_mut().flat_map(|g| &mut g.streams).enumerate() {
        for part in net.state_tensors_mut(&mut s.state) {
            let name = format!("{STREAM}{b}.{}", part.name);
            part.data
                .copy_from_slice(&tensor(file, &name, &part.shape)?.data);
        }
        s.next = next[b];
        s.token = tokens[b];
    }
    for w in &mut t.workers {
        w.net.refresh(&t.params);
    }
    t.steps = steps;
    t.seconds_before = seconds;
    Ok(())
}

/// Adam's moments, laid out like the parameters (none before the first step).
fn read_moments(file: &ModelFile, params: &ParamSet) -> Result<Option<crate::resume::Moments>> {
    if !file.tensors.keys().any(|k| k.starts_with(ADAM_V)) {
        return Ok(None);
    }
    let read = |prefix: &str| file.laid_out_like(params, prefix, "the checkpoint");
    Ok(Some((Some(read(ADAM_M)?), read(ADAM_V)?)))
}

fn tensor<'f>(file: &'f ModelFile, name: &str, shape: &[usize]) -> Result<&'f FileTensor> {
    file.shaped(name, shape, "the checkpoint")
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}
