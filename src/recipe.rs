//! The recipe: everything the decoder must know to repeat the encoder's computation — model kind
//! and sizes, seed, and training policy. It is written into every `.lmz` header in a canonical
//! JSON form, so `lmzip decompress` needs no flags.

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::model::{mamba1, rwkv7};
use crate::params::Scope;

/// Which network predicts the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    Mamba1,
    Rwkv7,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Mamba1 => "mamba1",
            ModelKind::Rwkv7 => "rwkv7",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "mamba1" => Ok(ModelKind::Mamba1),
            "rwkv7" => Ok(ModelKind::Rwkv7),
            other => bail!("unknown model '{other}' (models: mamba1, rwkv7)"),
        }
    }

    /// The model's training groups, in the order [`Scope`] bits refer to.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            ModelKind::Mamba1 => mamba1::GROUPS,
            ModelKind::Rwkv7 => rwkv7::GROUPS,
        }
    }
}

/// The sizes of a fresh network.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelConfig {
    Mamba1(mamba1::Config),
    Rwkv7(rwkv7::Config),
}

impl ModelConfig {
    pub fn kind(&self) -> ModelKind {
        match self {
            ModelConfig::Mamba1(_) => ModelKind::Mamba1,
            ModelConfig::Rwkv7(_) => ModelKind::Rwkv7,
        }
    }

    /// The measured default sizes of a model kind (README, "Defaults").
    pub fn default_for(kind: ModelKind) -> Self {
        match kind {
            ModelKind::Mamba1 => ModelConfig::Mamba1(mamba1::Config::default()),
            ModelKind::Rwkv7 => ModelConfig::Rwkv7(rwkv7::Config::default()),
        }
    }

    pub fn validate(&self) -> Result<()> {
        match self {
            ModelConfig::Mamba1(c) => c.validate(),
            ModelConfig::Rwkv7(c) => c.validate(),
        }
    }

    /// Sets `hidden` and `layers`, the two sizes every model has.
    pub fn set_size(&mut self, hidden: Option<usize>, layers: Option<usize>) {
        match self {
            ModelConfig::Mamba1(c) => {
                if let Some(h) = hidden {
                    // Mamba's inner width follows the hidden width (expand = 2) unless set apart.
                    c.inner = 2 * h;
                    c.hidden = h;
                }
                if let Some(l) = layers {
                    c.layers = l;
                }
            }
            ModelConfig::Rwkv7(c) => {
                if let Some(h) = hidden {
                    c.intermediate = 4 * h;
                    c.hidden = h;
                }
                if let Some(l) = layers {
                    c.layers = l;
                }
            }
        }
    }

    fn to_json(&self) -> Value {
        match self {
            ModelConfig::Mamba1(c) => json!({
                "hidden": c.hidden, "layers": c.layers, "inner": c.inner,
                "state": c.state, "conv": c.conv, "dt_rank": c.dt_rank,
            }),
            ModelConfig::Rwkv7(c) => json!({
                "hidden": c.hidden, "layers": c.layers, "intermediate": c.intermediate,
                "decay_rank": c.decay_rank, "a_rank": c.a_rank, "v_rank": c.v_rank,
                "g_rank": c.g_rank,
            }),
        }
    }

    fn from_json(kind: ModelKind, v: &Value) -> Result<Self> {
        let obj = v.as_object().context("model config is not an object")?;
        let cfg = match kind {
            ModelKind::Mamba1 => ModelConfig::Mamba1(mamba1::Config {
                hidden: size(obj, "hidden")?,
                layers: size(obj, "layers")?,
                inner: size(obj, "inner")?,
                state: size(obj, "state")?,
                conv: size(obj, "conv")?,
                dt_rank: size(obj, "dt_rank")?,
            }),
            ModelKind::Rwkv7 => ModelConfig::Rwkv7(rwkv7::Config {
                hidden: size(obj, "hidden")?,
                layers: size(obj, "layers")?,
                intermediate: size(obj, "intermediate")?,
                decay_rank: size(obj, "decay_rank")?,
                a_rank: size(obj, "a_rank")?,
                v_rank: size(obj, "v_rank")?,
                g_rank: size(obj, "g_rank")?,
            }),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Largest accepted size of any one dimension: a header that claims more is rejected before
/// anything is allocated.
pub const MAX_DIM: usize = 1 << 14;

fn size(obj: &Map<String, Value>, key: &str) -> Result<usize> {
    let v = obj
        .get(key)
        .and_then(Value::as_u64)
        .with_context(|| format!("model config lacks a whole number '{key}'"))?;
    if v == 0 || v as usize > MAX_DIM {
        bail!("model config '{key}' = {v} is out of range (1..={MAX_DIM})");
    }
    Ok(v as usize)
}

/// How the parameters move after each byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    /// The model only predicts; its weights stay as initialised.
    None,
    Sgd,
    Adam,
}

impl OptimizerKind {
    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::None => "none",
            OptimizerKind::Sgd => "sgd",
            OptimizerKind::Adam => "adam",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "none" => Ok(OptimizerKind::None),
            "sgd" => Ok(OptimizerKind::Sgd),
            "adam" => Ok(OptimizerKind::Adam),
            other => bail!("unknown optimizer '{other}' (optimizers: none, sgd, adam)"),
        }
    }
}

/// The training policy applied to every byte.
#[derive(Clone, Debug, PartialEq)]
pub struct Training {
    pub optimizer: OptimizerKind,
    /// Learning rate (step size of SGD, or Adam's α).
    pub lr: f32,
    /// The trained groups.
    pub scope: Scope,
    /// 1: a one-step update after every byte; W > 1: truncated BPTT over segments of W bytes.
    pub bptt: usize,
    /// Element-wise gradient clip; 0 means none.
    pub clip: f32,
}

/// Largest accepted TBPTT window.
pub const MAX_BPTT: usize = 4096;

/// Everything the decoder needs to repeat the encoder's computation.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub model: ModelConfig,
    pub seed: u64,
    pub training: Training,
}

impl Recipe {
    /// The default recipe of a model kind (measured; see README.md).
    pub fn default_for(kind: ModelKind) -> Self {
        let groups = kind.groups();
        // Measured on calgary/book1 and enwik/enwik6 (README.md, "Defaults"): Adam at 1e-3 over
        // TBPTT segments of 16 bytes beat shorter windows (4, 8), the one-step update and larger
        // rates (2e-3, 5e-3) on both files.
        let (optimizer, lr, bptt) = match kind {
            ModelKind::Mamba1 => (OptimizerKind::Adam, 1e-3, 16),
            ModelKind::Rwkv7 => (OptimizerKind::Adam, 1e-3, 16),
        };
        Recipe {
            model: ModelConfig::default_for(kind),
            seed: 0,
            training: Training {
                optimizer,
                lr,
                scope: Scope::all_of(groups),
                bptt,
                clip: 0.0,
            },
        }
    }

    pub fn kind(&self) -> ModelKind {
        self.model.kind()
    }

    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        let t = &self.training;
        if !(t.lr.is_finite() && t.lr >= 0.0 && t.lr <= 10.0) {
            bail!("learning rate {} is out of range (0..=10)", t.lr);
        }
        if !(t.clip.is_finite() && t.clip >= 0.0) {
            bail!("gradient clip {} must be a finite number >= 0", t.clip);
        }
        if t.bptt == 0 || t.bptt > MAX_BPTT {
            bail!("bptt window {} is out of range (1..={MAX_BPTT})", t.bptt);
        }
        let all = Scope::all_of(self.kind().groups());
        if t.scope.0 & !all.0 != 0 {
            bail!(
                "training scope names groups that {} does not have",
                self.kind().name()
            );
        }
        Ok(())
    }

    /// Canonical JSON text, as stored in the header.
    pub fn to_json(&self) -> String {
        let kind = self.kind();
        let t = &self.training;
        let v = json!({
            "model": kind.name(),
            "config": self.model.to_json(),
            "seed": self.seed,
            "train": {
                "optimizer": t.optimizer.name(),
                // f32 as its shortest decimal, which parses back to the same f32.
                "lr": t.lr.to_string(),
                "scope": t.scope.to_text(kind.groups()),
                "bptt": t.bptt,
                "clip": t.clip.to_string(),
            },
        });
        v.to_string()
    }

    /// Parses and validates the header's JSON form.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text).context("recipe is not valid JSON")?;
        let kind = ModelKind::parse(v["model"].as_str().context("recipe lacks 'model'")?)?;
        let model = ModelConfig::from_json(kind, &v["config"])?;
        let seed = v["seed"]
            .as_u64()
            .context("recipe lacks a whole-number 'seed'")?;
        let t = &v["train"];
        let number = |key: &str| -> Result<f32> {
            let text = t[key]
                .as_str()
                .with_context(|| format!("recipe lacks a decimal string 'train.{key}'"))?;
            text.parse::<f32>()
                .with_context(|| format!("recipe's 'train.{key}' = '{text}' is not a number"))
        };
        let bptt = t["bptt"].as_u64().context("recipe lacks 'train.bptt'")?;
        let recipe = Recipe {
            model,
            seed,
            training: Training {
                optimizer: OptimizerKind::parse(
                    t["optimizer"]
                        .as_str()
                        .context("recipe lacks 'train.optimizer'")?,
                )?,
                lr: number("lr")?,
                scope: Scope::parse(
                    t["scope"].as_str().context("recipe lacks 'train.scope'")?,
                    kind.groups(),
                )?,
                bptt: usize::try_from(bptt).unwrap_or(usize::MAX),
                clip: number("clip")?,
            },
        };
        recipe.validate()?;
        Ok(recipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_for_both_models() {
        for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
            let mut r = Recipe::default_for(kind);
            r.seed = 1234;
            r.training.lr = 0.0037;
            r.training.bptt = 8;
            r.training.clip = 0.5;
            r.training.scope = Scope::parse("embed+head", kind.groups()).unwrap();
            let text = r.to_json();
            assert_eq!(Recipe::from_json(&text).unwrap(), r, "{text}");
        }
    }

    #[test]
    fn lying_recipes_are_rejected() {
        let good = Recipe::default_for(ModelKind::Mamba1).to_json();
        for (from, to) in [
            ("\"mamba1\"", "\"gpt9\""),
            ("\"hidden\":", "\"hidden\":99999999,\"x\":"),
            ("\"bptt\":1", "\"bptt\":0"),
            ("\"optimizer\":\"adam\"", "\"optimizer\":\"lbfgs\""),
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, good, "replacement {from} did not apply");
            assert!(Recipe::from_json(&bad).is_err(), "{bad}");
        }
        assert!(Recipe::from_json("not json").is_err());
    }
}
