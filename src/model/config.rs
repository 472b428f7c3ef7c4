//! Which network, and its sizes: the model layer's own description of a network, which the
//! recipe stores and the predictor builds from.

use anyhow::{Result, bail};

use crate::model::{mamba1, rwkv7};

/// Which network predicts the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    Mamba1,
    Rwkv7,
}

impl ModelKind {
    pub const ALL: [ModelKind; 2] = [ModelKind::Mamba1, ModelKind::Rwkv7];

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

    /// The network's training groups, in the order [`crate::params::Scope`] bits refer to
    /// (the trainer adds its output bias after them: [`crate::train::trained_groups`]).
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            ModelKind::Mamba1 => mamba1::GROUPS,
            ModelKind::Rwkv7 => rwkv7::GROUPS,
        }
    }
}

/// The sizes of a network.
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

    /// The model's base sizes; levels edit them (the default level adds a third block).
    pub fn default_for(kind: ModelKind) -> Self {
        match kind {
            ModelKind::Mamba1 => ModelConfig::Mamba1(mamba1::Config::default()),
            ModelKind::Rwkv7 => ModelConfig::Rwkv7(rwkv7::Config::default()),
        }
    }

    /// Number of parameters (without the output bias).
    pub fn param_count(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.param_count(),
            ModelConfig::Rwkv7(c) => c.param_count(),
        }
    }

    /// Floats of the network's recurrent state.
    pub fn state_floats(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.state_floats(),
            ModelConfig::Rwkv7(c) => c.state_floats(),
        }
    }

    /// Floats of one byte's trace (what backward needs of the forward step).
    pub fn trace_floats(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.trace_floats(),
            ModelConfig::Rwkv7(c) => c.trace_floats(),
        }
    }

    /// Floats of the gradient buffers the network keeps to walk back `steps` steps at once
    /// ([`crate::model::Network::backward_steps`]).
    pub fn step_grad_floats(&self, steps: usize) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.step_grad_floats(steps),
            ModelConfig::Rwkv7(_) => 0,
        }
    }

    /// Floats of the buffers the network keeps to replay known bytes several at once
    /// ([`crate::model::Network::advance_steps`]).
    pub fn replay_floats(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.replay_floats(),
            ModelConfig::Rwkv7(_) => 0,
        }
    }

    pub fn validate(&self) -> Result<()> {
        match self {
            ModelConfig::Mamba1(c) => c.validate(),
            ModelConfig::Rwkv7(c) => c.validate(),
        }
    }

    /// Sets `hidden` and `layers`, the two sizes every model has. The inner (FFN) width follows
    /// the hidden width as in the model families (Mamba: expand 2; RWKV: 4×).
    pub fn set_size(&mut self, hidden: Option<usize>, layers: Option<usize>) {
        if let Some(h) = hidden {
            self.set_hidden(h);
        }
        if let Some(l) = layers {
            match self {
                ModelConfig::Mamba1(c) => c.layers = l,
                ModelConfig::Rwkv7(c) => c.layers = l,
            }
        }
    }

    fn set_hidden(&mut self, h: usize) {
        match self {
            ModelConfig::Mamba1(c) => {
                c.hidden = h;
                c.inner = 2 * h;
            }
            ModelConfig::Rwkv7(c) => {
                c.hidden = h;
                c.intermediate = 4 * h;
            }
        }
    }

    /// The sizes as the recipe language names them, in canonical order.
    pub fn keys(&self) -> Vec<(&'static str, usize)> {
        match self {
            ModelConfig::Mamba1(c) => vec![
                ("hidden", c.hidden),
                ("layers", c.layers),
                ("intermediate", c.inner),
                ("state", c.state),
                ("conv", c.conv),
                ("dt_rank", c.dt_rank),
            ],
            ModelConfig::Rwkv7(c) => vec![
                ("hidden", c.hidden),
                ("layers", c.layers),
                ("intermediate", c.intermediate),
                ("decay_rank", c.decay_rank),
                ("a_rank", c.a_rank),
                ("v_rank", c.v_rank),
                ("g_rank", c.g_rank),
            ],
        }
    }

    /// The size keys of a model kind, in canonical order.
    pub fn key_names(kind: ModelKind) -> Vec<&'static str> {
        Self::default_for(kind)
            .keys()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// Sets one size by its recipe name; false if the model has no such size.
    pub fn set_key(&mut self, key: &str, v: usize) -> bool {
        let slot = match self {
            ModelConfig::Mamba1(c) => match key {
                "hidden" => &mut c.hidden,
                "layers" => &mut c.layers,
                "intermediate" => &mut c.inner,
                "state" => &mut c.state,
                "conv" => &mut c.conv,
                "dt_rank" => &mut c.dt_rank,
                _ => return false,
            },
            ModelConfig::Rwkv7(c) => match key {
                "hidden" => &mut c.hidden,
                "layers" => &mut c.layers,
                "intermediate" => &mut c.intermediate,
                "decay_rank" => &mut c.decay_rank,
                "a_rank" => &mut c.a_rank,
                "v_rank" => &mut c.v_rank,
                "g_rank" => &mut c.g_rank,
                _ => return false,
            },
        };
        *slot = v;
        true
    }

    /// Applies recipe keys onto these sizes. Giving `hidden` without `intermediate` derives the
    /// intermediate width from it, as `--hidden` does.
    pub fn apply_keys(&mut self, keys: &[(&str, usize)]) -> Result<()> {
        let has = |k: &str| keys.iter().any(|(key, _)| *key == k);
        if let Some(&(_, h)) = keys.iter().find(|(k, _)| *k == "hidden")
            && !has("intermediate")
        {
            self.set_hidden(h);
        }
        for &(k, v) in keys {
            if !self.set_key(k, v) {
                bail!("{} has no size '{k}'", self.kind().name());
            }
        }
        Ok(())
    }
}

/// Largest accepted size of any one dimension: a header that claims more is rejected before
/// anything is allocated.
pub const MAX_DIM: usize = 1 << 14;

/// Most parameters a model may have in this build (2^25, about 33.5 million): 46 to 80 times
/// the defaults (0.42–0.72 million), and already far too slow to train byte by byte. Dimensions up
/// to [`MAX_DIM`] alone would allow billions; this keeps a header from asking for gigabytes.
pub const MAX_PARAMS: usize = 1 << 25;
