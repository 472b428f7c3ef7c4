//! RWKV-7 byte model (placeholder: the model lands with its own change).

use anyhow::{Result, bail};

/// Training groups of RWKV-7, indexed by [`crate::params::Group`].
pub const GROUPS: &[&str] = &[
    "embed", "pre_norm", "attn_norm", "ffn_norm", "attn", "ffn", "head", "bias",
];

/// Sizes of an RWKV-7 network. Heads are 64 wide, so `hidden` is a multiple of 64.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub hidden: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub decay_rank: usize,
    pub a_rank: usize,
    pub v_rank: usize,
    pub g_rank: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            hidden: 128,
            layers: 2,
            intermediate: 512,
            decay_rank: 16,
            a_rank: 16,
            v_rank: 16,
            g_rank: 32,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        if self.hidden == 0 || self.hidden % 64 != 0 {
            bail!("rwkv7 hidden size {} must be a positive multiple of the head size 64", self.hidden);
        }
        Ok(())
    }
}

/// Placeholder until the RWKV-7 network lands: building one fails with a clear message.
pub struct Rwkv7;

impl Rwkv7 {
    pub fn new_random(cfg: Config, _seed: u64) -> Result<(Self, crate::params::ParamSet)> {
        cfg.validate()?;
        bail!("the rwkv7 model is not available in this build yet")
    }
}

impl crate::model::Network for Rwkv7 {
    type State = ();
    type Trace = ();
    type Carry = ();
    fn groups(&self) -> &'static [&'static str] {
        GROUPS
    }
    fn new_state(&self) {}
    fn new_trace(&self) {}
    fn new_carry(&self) {}
    fn clear_carry(&self, _: &mut ()) {}
    fn forward(&mut self, _: &crate::params::ParamSet, _: &mut (), _: u8, _: Option<&mut ()>) -> &[f32] {
        unreachable!("no Rwkv7 value can be built")
    }
    fn backward(&mut self, _: &crate::params::ParamSet, _: &(), _: &[f32], _: crate::params::Scope, _: &mut [f32], _: Option<&mut ()>) {
        unreachable!("no Rwkv7 value can be built")
    }
    fn refresh(&mut self, _: &crate::params::ParamSet) {}
}
