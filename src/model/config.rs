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

    /// The built-in prior the weights start from (src/prior), 0 for none.
    pub fn prior(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.prior,
            ModelConfig::Rwkv7(_) => 0,
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
            ModelConfig::Rwkv7(c) => c.step_grad_floats(steps),
        }
    }

    /// Floats of the buffers the network keeps to replay known bytes several at once
    /// ([`crate::model::Network::advance_steps`]).
    pub fn replay_floats(&self) -> usize {
        match self {
            ModelConfig::Mamba1(c) => c.replay_floats(),
            ModelConfig::Rwkv7(c) => c.replay_floats(),
        }
    }

    /// The shared bounds of the sizes ([`ModelConfig::check_sizes`]), then the model's own.
    pub fn validate(&self) -> Result<()> {
        if let Err((_, message)) = self.check_sizes() {
            bail!(message);
        }
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

    /// The sizes as the recipe language names them, in canonical order ([`SizeKey`]).
    pub fn keys(&self) -> Vec<(&'static str, usize)> {
        match self {
            ModelConfig::Mamba1(c) => MAMBA1_SIZES.iter().map(|k| (k.name, (k.get)(c))).collect(),
            ModelConfig::Rwkv7(c) => RWKV7_SIZES.iter().map(|k| (k.name, (k.get)(c))).collect(),
        }
    }

    /// The sizes a recipe states: [`ModelConfig::keys`] less those at their implicit value,
    /// which a recipe leaves out so that it reads (and hashes) as before they existed.
    pub fn stated_keys(&self) -> Vec<(&'static str, usize)> {
        fn stated<C>(table: &[SizeKey<C>], c: &C) -> Vec<(&'static str, usize)> {
            let keys = table.iter().map(|k| (k, (k.get)(c)));
            keys.filter(|(k, v)| k.implicit != Some(*v))
                .map(|(k, v)| (k.name, v))
                .collect()
        }
        match self {
            ModelConfig::Mamba1(c) => stated(&MAMBA1_SIZES, c),
            ModelConfig::Rwkv7(c) => stated(&RWKV7_SIZES, c),
        }
    }

    /// The sizes a complete recipe must give (those without an implicit value).
    pub fn required_key_names(kind: ModelKind) -> Vec<&'static str> {
        fn required<C>(table: &[SizeKey<C>]) -> Vec<&'static str> {
            let keys = table.iter().filter(|k| k.implicit.is_none());
            keys.map(|k| k.name).collect()
        }
        match kind {
            ModelKind::Mamba1 => required(&MAMBA1_SIZES),
            ModelKind::Rwkv7 => required(&RWKV7_SIZES),
        }
    }

    /// The size keys of a model kind, in canonical order.
    pub fn key_names(kind: ModelKind) -> Vec<&'static str> {
        match kind {
            ModelKind::Mamba1 => MAMBA1_SIZES.iter().map(|k| k.name).collect(),
            ModelKind::Rwkv7 => RWKV7_SIZES.iter().map(|k| k.name).collect(),
        }
    }

    /// Sets one size by its recipe name; false if the model has no such size.
    pub fn set_key(&mut self, key: &str, v: usize) -> bool {
        fn set<C>(table: &[SizeKey<C>], c: &mut C, key: &str, v: usize) -> bool {
            let found = table.iter().find(|k| k.name == key);
            found.map(|k| (k.set)(c, v)).is_some()
        }
        match self {
            ModelConfig::Mamba1(c) => set(&MAMBA1_SIZES, c, key, v),
            ModelConfig::Rwkv7(c) => set(&RWKV7_SIZES, c, key, v),
        }
    }

    /// The bounds every size shares (1 to [`MAX_DIM`]): the first size out of them, by its
    /// recipe name, with the message. [`ModelConfig::validate`] checks them first, and the
    /// recipe parser points at the size's value with it.
    pub fn check_sizes(&self) -> Result<(), (&'static str, String)> {
        let required = Self::required_key_names(self.kind());
        for (key, v) in self.keys() {
            // A size with an implicit value has bounds of its own (the model's `validate`).
            if required.contains(&key) && !(1..=MAX_DIM).contains(&v) {
                let kind = self.kind().name();
                let message = format!("{kind} {key} = {v} is out of range (1..={MAX_DIM})");
                return Err((key, message));
            }
        }
        Ok(())
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

/// One size of a model as the recipe's `cfg:` item names it (docs/recipes.md, "Base"): the
/// tables below give the recipe's keys, their canonical order and where each is stored.
struct SizeKey<C> {
    name: &'static str,
    /// The value a recipe means when it leaves the key out (a size added after recipes were
    /// first stored: older headers do not name it); `None` for a size every recipe gives.
    implicit: Option<usize>,
    get: fn(&C) -> usize,
    set: fn(&mut C, usize),
}

/// The [`SizeKey`]s of a config: each `"name" => field` reads and writes that field.
macro_rules! size_keys {
    ($($name:literal => $field:ident $(= $implicit:literal)?),* $(,)?) => {
        [$(SizeKey {
            name: $name,
            implicit: size_keys!(@implicit $($implicit)?),
            get: |c| c.$field,
            set: |c, v| c.$field = v,
        }),*]
    };
    (@implicit) => { None };
    (@implicit $v:literal) => { Some($v) };
}

static MAMBA1_SIZES: [SizeKey<mamba1::Config>; 8] = size_keys![
    "hidden" => hidden,
    "layers" => layers,
    "intermediate" => inner,
    "state" => state,
    "conv" => conv,
    "dt_rank" => dt_rank,
    // Context inputs (src/model/context.rs): none unless a recipe names them.
    "ctx" => ctx = 0,
    // The built-in prior the weights start from (src/prior): none unless a recipe names one.
    "prior" => prior = 0,
];

static RWKV7_SIZES: [SizeKey<rwkv7::Config>; 7] = size_keys![
    "hidden" => hidden,
    "layers" => layers,
    "intermediate" => intermediate,
    "decay_rank" => decay_rank,
    "a_rank" => a_rank,
    "v_rank" => v_rank,
    "g_rank" => g_rank,
];

/// Largest prior number a recipe may name (src/prior): the numbers of built-in priors.
pub const MAX_PRIOR: usize = 255;

/// Largest accepted size of any one dimension: a header that claims more is rejected before
/// anything is allocated.
pub const MAX_DIM: usize = 1 << 14;

/// Most parameters a model may have in this build (2^25, about 33.5 million): 46 to 80 times
/// the defaults (0.42–0.72 million), and already far too slow to train byte by byte. Dimensions up
/// to [`MAX_DIM`] alone would allow billions; this keeps a header from asking for gigabytes.
pub const MAX_PARAMS: usize = 1 << 25;
