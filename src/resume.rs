//! What a saved model holds besides its weights, so that a run can resume exactly where the
//! saving run stopped (docs/guide.md, "Model files"). All of it lives under the `lmzip.`
//! prefix, beside the weights in their native layout:
//!
//! | name | kind | what |
//! |---|---|---|
//! | `lmzip.adam.m.<tensor>`, `lmzip.adam.v.<tensor>` | tensor | Adam's moments of every parameter tensor (absent before the first Adam step; the first moment absent where the run keeps none: every rule at β1 = 0) |
//! | `lmzip.state.<part>` | tensor | the recurrent state the replay starts from |
//! | `lmzip.format` | metadata | `1`: the version of this layout |
//! | `lmzip.numerics` | metadata | the numerics version of the build that saved it |
//! | `lmzip.model` | metadata | `mamba1` or `rwkv7` |
//! | `lmzip.recipe` | metadata | the recipe of the run that saved it |
//! | `lmzip.position` | metadata | bytes the model has learned from, over all runs |
//! | `lmzip.adam_steps` | metadata | Adam steps taken |
//! | `lmzip.action` | metadata | the action in force at the end (`infer` or `train(...)`) |
//! | `lmzip.phase` | metadata | bytes into that action's current run (where its stride and segments stand) |
//! | `lmzip.replay` | metadata | hex bytes: the token to feed from the saved state, then the bytes to learn again |
//! | `lmzip.replay_weights` | metadata | with `train(focus=...)`: the weight of each byte to learn again, as f32 bit patterns (8 hex digits each, joined by `,`); absent when every weight is 1 |
//!
//! The replay rebuilds what cannot be saved as plain numbers: the pending TBPTT segment (its
//! traces and the probabilities its bytes were coded with) is recomputed by feeding its bytes
//! again from the state the segment started in, with the same weights, which gives the same bits.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

use crate::model::Network;
use crate::modelfile::{FileTensor, ModelFile};
use crate::params::ParamSet;
use crate::recipe::{Action, ModelKind, Recipe};

pub const FORMAT: &str = "1";
const ADAM_M: &str = "lmzip.adam.m.";
const ADAM_V: &str = "lmzip.adam.v.";
const STATE: &str = "lmzip.state.";

/// Longest replay a file may ask for: a pending segment is shorter than the longest window.
const MAX_REPLAY: usize = crate::recipe::MAX_BPTT + 1;

/// Resume data read from a model file.
pub struct Resume {
    /// Adam's moments laid out like the parameters, when the file has them.
    pub moments: Option<Moments>,
    pub adam_steps: u64,
    /// Bytes learned before this run.
    pub position: u64,
    /// The action in force when the file was saved, and how far into its run it was.
    pub action: Action,
    pub phase: u64,
    /// The token to feed first, then the bytes to learn again (see the module doc).
    pub replay: Vec<u8>,
    /// The weight of each byte to learn again (one fewer than `replay`).
    pub replay_weights: Vec<f32>,
}

/// What a saving run hands over.
pub struct Saved<'a, N: Network> {
    pub kind: ModelKind,
    pub recipe: &'a Recipe,
    pub params: &'a ParamSet,
    pub moments: Option<(Option<&'a [f32]>, &'a [f32])>,
    pub adam_steps: u64,
    pub position: u64,
    pub net: &'a N,
    pub state: &'a N::State,
    pub action: &'a Action,
    pub phase: u64,
    pub replay: Vec<u8>,
    /// The weights of the pending segment's losses (one per byte to learn again).
    pub replay_weights: &'a [f32],
}

/// The model file of a saving run.
pub fn save<N: Network>(s: &Saved<'_, N>) -> Result<Vec<u8>> {
    let mut extra: Vec<(String, Vec<usize>, &[f32])> = Vec::new();
    if let Some((m, v)) = s.moments {
        for t in &s.params.tensors {
            if let Some(m) = m {
                extra.push((format!("{ADAM_M}{}", t.name), t.shape.clone(), t.slot.of(m)));
            }
            extra.push((format!("{ADAM_V}{}", t.name), t.shape.clone(), t.slot.of(v)));
        }
    }
    for t in s.net.state_tensors(s.state) {
        extra.push((format!("{STATE}{}", t.name), t.shape, t.data));
    }
    let meta: BTreeMap<String, String> = [
        ("format", FORMAT.to_string()),
        ("numerics", crate::format::NUMERICS_VERSION.to_string()),
        ("model", s.kind.name().to_string()),
        ("recipe", s.recipe.to_text()),
        ("position", s.position.to_string()),
        ("adam_steps", s.adam_steps.to_string()),
        ("action", crate::recipe::print_action(s.action, s.kind)),
        ("phase", s.phase.to_string()),
        ("replay", crate::recipe::hex(&s.replay)),
    ]
    .into_iter()
    .map(|(k, v)| (format!("lmzip.{k}"), v))
    .collect();
    let mut meta = meta;
    if s.replay_weights.iter().any(|&w| w != 1.0) {
        let words: Vec<String> = s
            .replay_weights
            .iter()
            .map(|w| format!("{:08x}", w.to_bits()))
            .collect();
        meta.insert("lmzip.replay_weights".into(), words.join(","));
    }
    crate::modelfile::to_bytes(s.params, &extra, &meta)
}

/// Reads the resume data of a model file for a network with parameters `params` (the weights
/// already filled). A file without resume data (trained elsewhere) starts from the zero state,
/// fresh optimizer and the stream's usual first token, 0.
pub fn read<N: Network>(
    file: &ModelFile,
    kind: ModelKind,
    params: &ParamSet,
    net: &N,
    state: &mut N::State,
) -> Result<Resume> {
    let meta = |key: &str| file.metadata.get(&format!("lmzip.{key}"));
    let number = |key: &str| -> Result<u64> {
        meta(key).map_or(Ok(0), |v| {
            v.parse()
                .with_context(|| format!("metadata lmzip.{key} = '{v}' is not a whole number"))
        })
    };
    if let Some(model) = meta("model")
        && model != kind.name()
    {
        bail!(
            "the file says it holds a {model} model, but its tensors are {}",
            kind.name()
        );
    }
    let moments = read_moments(file, params)?;
    read_state(file, net, state)?;
    let action = match meta("action") {
        None => Action::Infer,
        Some(text) => {
            parse_action(text, kind).with_context(|| format!("metadata lmzip.action = '{text}'"))?
        }
    };
    let replay = match meta("replay") {
        None => vec![0],
        Some(h) => unhex(h).context("metadata lmzip.replay is not hexadecimal")?,
    };
    if replay.is_empty() || replay.len() > MAX_REPLAY {
        bail!(
            "metadata lmzip.replay has {} bytes (1 to {MAX_REPLAY})",
            replay.len()
        );
    }
    let replay_weights = match meta("replay_weights") {
        None => vec![1.0; replay.len() - 1],
        Some(text) => read_weights(text, replay.len() - 1)?,
    };
    Ok(Resume {
        replay_weights,
        moments,
        adam_steps: number("adam_steps")?,
        position: number("position")?,
        action,
        phase: number("phase")?,
        replay,
    })
}

/// `lmzip.replay_weights`: `n` f32 bit patterns, each finite and within 0..=1.
fn read_weights(text: &str, n: usize) -> Result<Vec<f32>> {
    let weights = text
        .split(',')
        .map(|w| {
            let bits = u32::from_str_radix(w, 16).ok().filter(|_| w.len() == 8);
            bits.map(f32::from_bits)
                .filter(|x| (0.0..=1.0).contains(x))
                .with_context(|| format!("metadata lmzip.replay_weights: '{w}' is not a weight"))
        })
        .collect::<Result<Vec<f32>>>()?;
    if weights.len() != n {
        bail!(
            "metadata lmzip.replay_weights has {} weights for {n} bytes to learn again",
            weights.len()
        );
    }
    Ok(weights)
}

/// Adam's moments: the second of every tensor, and the first unless the saving run kept none
/// (every rule at β1 = 0).
fn read_moments(file: &ModelFile, params: &ParamSet) -> Result<Option<Moments>> {
    let count = |prefix: &str| {
        file.tensors
            .keys()
            .filter(|k| k.starts_with(prefix))
            .count()
    };
    let (firsts, seconds) = (count(ADAM_M), count(ADAM_V));
    if firsts + seconds == 0 {
        return Ok(None);
    }
    let read = |prefix: &str| file.laid_out_like(params, prefix, "model file");
    let v = read(ADAM_V)?;
    let m = if firsts > 0 {
        Some(read(ADAM_M)?)
    } else {
        None
    };
    let n = params.tensors.len();
    if seconds != n || (firsts != 0 && firsts != n) {
        bail!("the file has Adam moments for tensors this model does not have");
    }
    Ok(Some((m, v)))
}

/// Adam's first moment (when kept) and second moment, laid out like the parameters.
pub type Moments = (Option<Vec<f32>>, Vec<f32>);

fn read_state<N: Network>(file: &ModelFile, net: &N, state: &mut N::State) -> Result<()> {
    let present = file.tensors.keys().filter(|k| k.starts_with(STATE)).count();
    if present == 0 {
        return Ok(());
    }
    let parts = net.state_tensors_mut(state);
    if present != parts.len() {
        bail!(
            "the file's recurrent state has {present} parts; this model's has {}",
            parts.len()
        );
    }
    for part in parts {
        let saved = tensor(file, &format!("{STATE}{}", part.name), &part.shape)?;
        part.data.copy_from_slice(&saved.data);
    }
    Ok(())
}

fn tensor<'f>(file: &'f ModelFile, name: &str, shape: &[usize]) -> Result<&'f FileTensor> {
    file.shaped(name, shape, "model file")
}

/// An action in its canonical text, for a model of kind `kind`.
fn parse_action(text: &str, kind: ModelKind) -> Result<Action> {
    // The recipe parser reads actions inside rules: parse a one-rule fragment.
    let template = crate::levels::default_recipe(kind);
    let r = template
        .edit(&format!("0..:{text}"), None)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    match r.schedule.first().map(|rule| &rule.body) {
        Some(crate::recipe::Body::Action(a)) => Ok(a.clone()),
        _ => bail!("not an action"),
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}
