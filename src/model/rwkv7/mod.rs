//! RWKV-7 byte model: time-mixing blocks with a delta-rule WKV state and squared-ReLU channel
//! mixing over a LayerNorm residual stream, one byte at a time.
//!
//! Dimensions:
//! - `V` = 256 byte values
//! - `C` = hidden width (residual stream)
//! - `H` = heads = C / 64
//! - `N` = 64, the width of one head
//! - `F` = FFN (channel-mixing) width
//! - `Dw`, `Da`, `Dv`, `Dg` = ranks of the decay, in-context learning rate (`a`), value-residual
//!   and gate low-rank paths
//!
//! One block: `x += W_o · attn(LN(x))`, then `x += W_value · relu(W_key · shift(LN(x)))²`. The
//! attention keeps, per head, an `N × N` state `S` (row = value channel, column = key channel)
//! updated by the delta rule `S' = S·diag(w) − (S·kk)(kk⊙a)ᵀ + v·kᵀ` and read as `y = S'·r`.
//! Both halves of a block mix the current byte's normalised input with the previous byte's
//! (token shift), so the state also carries one `[C]` vector per half.
//!
//! Weight names are the safetensors keys of the model family (`model.layers.N.attn.*`,
//! `model.layers.N.ffn.*`); block 0 alone has a pre-norm, and blocks after the first alone have
//! the value-residual low-rank path.
//!
//! Files: this one holds the config, the weights' slots, the state and trace layouts and the
//! step and backward sequences; [`block`] the two halves of a block as call sequences of the
//! layers, each layer a `*_forward` beside its `*_backward`: [`wkv`] (delta-rule state update
//! and readout, every head of a step in one kernel: [`crate::kernels::wkv_forward`]), [`group_norm`] (per-head norm with the `r·k` bonus, and the gate), [`key`]
//! (kk normalisation, the written key), [`low_rank`] (the four low-rank paths) and [`ffn`];
//! the norms, token shift and linear maps are [`crate::model::layers`]. Each layout is one
//! declaration read as slots, counts and views ([`crate::model::layout`]).
//!
//! Steps: the forward and the backward are each written once for any number of steps `T`
//! (the docs of [`block`] say why `T = n` computes the bits of `n` single steps). The live byte
//! is `T = 1`; a TBPTT chunk's backward ([`Network::backward_steps`]) and the rebuild after an
//! update ([`Network::advance_steps`]) are `T ≤` [`MAX_STEPS`], whose linear maps read each
//! weight once for all steps (the segment kernels of [`crate::kernels::steps`]).

mod block;
mod ffn;
mod group_norm;
mod key;
mod low_rank;
#[cfg(test)]
mod tests;
mod wkv;

use anyhow::{Result, bail};

use crate::kernels;
use crate::model::layers::{
    Linear, MAX_STEPS, layer_norm, layer_norm_backward, layer_norm_param_grads, ln_stats, row,
    row_mut, step_rows,
};
use crate::model::layout::{Blocks, Layout, carve_mut, register};
use crate::model::{Build, Layouts, Network, VOCAB};
use crate::params::{InitRng, ParamSet, Scope, Slot, TensorSource};

use block::{Grads, Seg};
use ffn::FfnWeights;
use low_rank::{Inner, LowRank};

training_groups! {
    EMBED = "embed",
    PRE_NORM = "pre_norm",
    ATTN_NORM = "attn_norm",
    FFN_NORM = "ffn_norm",
    ATTN = "attn",
    FFN = "ffn",
    /// The LM head and the final LayerNorm, trained together as in the reference.
    HEAD = "head",
}
// Group 7, "bias", is the predictor's output bias: no tensor of the network belongs to it.

/// Width of one head; the WKV state of a head is `N × N`.
const N: usize = 64;
/// LayerNorm epsilon of the residual-stream norms.
const LN_EPS: f32 = 1e-5;

/// Indices of the six token-shifted inputs of the attention, in the order of their mixes
/// (`x_r, x_w, x_k, x_v, x_a, x_g`).
const R: usize = 0;
const W: usize = 1;
const K: usize = 2;
const VAL: usize = 3;
const A: usize = 4;
const G: usize = 5;
const SHIFTS: usize = 6;
const SHIFT_NAMES: [&str; SHIFTS] = ["x_r", "x_w", "x_k", "x_v", "x_a", "x_g"];

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/// Sizes of an RWKV-7 network. Heads are 64 wide, so `hidden` is a multiple of 64.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `C`
    pub hidden: usize,
    pub layers: usize,
    /// `F`
    pub intermediate: usize,
    /// `Dw`
    pub decay_rank: usize,
    /// `Da`
    pub a_rank: usize,
    /// `Dv` (blocks after the first)
    pub v_rank: usize,
    /// `Dg`
    pub g_rank: usize,
}

impl Default for Config {
    /// Two heads, two blocks, FFN four times as wide: about half a million parameters, small
    /// enough to train byte by byte. Levels edit these sizes (src/levels.rs).
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
        for (name, v) in [
            ("hidden", self.hidden),
            ("layers", self.layers),
            ("intermediate", self.intermediate),
            ("decay_rank", self.decay_rank),
            ("a_rank", self.a_rank),
            ("v_rank", self.v_rank),
            ("g_rank", self.g_rank),
        ] {
            if v == 0 || v > crate::model::MAX_DIM {
                bail!(
                    "rwkv7 {name} = {v} is out of range (1..={})",
                    crate::model::MAX_DIM
                );
            }
        }
        if !self.hidden.is_multiple_of(N) {
            bail!(
                "rwkv7 hidden size {} must be a positive multiple of the head size {N}",
                self.hidden
            );
        }
        if self.layers > 64 {
            bail!("rwkv7 config is too large (at most 64 layers)");
        }
        let params = self.param_count();
        if params > crate::model::MAX_PARAMS {
            bail!(
                "rwkv7 config has {params} parameters; this build accepts at most {}",
                crate::model::MAX_PARAMS
            );
        }
        Ok(())
    }

    /// The sizes of the network stored in a model file. With a single block the value-residual
    /// rank cannot be read off (only later blocks have that path) and keeps its default.
    pub fn infer(file: &dyn TensorSource) -> Result<Config> {
        let at = "model.layers.0.attn";
        let vocab = file.dim("model.embeddings.weight", 2, 0)?;
        if vocab != VOCAB {
            bail!("model file has a vocabulary of {vocab}; lmzip's models read bytes ({VOCAB})");
        }
        let layers = file.count_layers("model.layers.", ".attn.r_proj.weight");
        let v_rank = if layers > 1 {
            file.dim("model.layers.1.attn.v_lora.lora.0.weight", 2, 0)?
        } else {
            Config::default().v_rank
        };
        let cfg = Config {
            hidden: file.dim("model.embeddings.weight", 2, 1)?,
            layers,
            intermediate: file.dim("model.layers.0.ffn.key.weight", 2, 0)?,
            decay_rank: file.dim(&format!("{at}.w_lora.lora.0.weight"), 2, 0)?,
            a_rank: file.dim(&format!("{at}.a_lora.lora.0.weight"), 2, 0)?,
            v_rank,
            g_rank: file.dim(&format!("{at}.g_lora.lora.0.weight"), 2, 0)?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// `H`
    pub fn heads(&self) -> usize {
        self.hidden / N
    }

    /// Number of parameters (without the output bias).
    pub fn param_count(&self) -> usize {
        let (c, f) = (self.hidden, self.intermediate);
        let (dw, da, dv, dg) = (self.decay_rank, self.a_rank, self.v_rank, self.g_rank);
        // norms, r/k/v/o, shift mixes, decay, a, gate, k_k/k_a/r_k, group norm, FFN
        let block = 4 * c
            + 4 * c * c
            + SHIFTS * c
            + (2 * dw * c + c)
            + (2 * da * c + c)
            + 2 * dg * c
            + 3 * c
            + 2 * c
            + (c + 2 * f * c);
        let v_lora = 2 * dv * c + c;
        2 * VOCAB * c + 2 * c + 2 * c + self.layers * block + (self.layers - 1) * v_lora
    }

    /// Floats of one state (and of one carry): the state layout's length.
    pub fn state_floats(&self) -> usize {
        self.state_blocks().layout.len()
    }

    /// Floats of one trace: the trace layout's length.
    pub fn trace_floats(&self) -> usize {
        self.trace_blocks().layout.len()
    }
}

// ---------------------------------------------------------------------------------------------
// Weights: slots into the ParamSet
// ---------------------------------------------------------------------------------------------

struct LayerSlots {
    attn_norm_w: Slot, // [C]
    attn_norm_b: Slot, // [C]
    ffn_norm_w: Slot,  // [C]
    ffn_norm_b: Slot,  // [C]
    r_proj: Linear,    // [C, C]
    k_proj: Linear,    // [C, C]
    v_proj: Linear,    // [C, C]
    o_proj: Linear,    // [C, C]
    /// Token-shift mixes `x_r, x_w, x_k, x_v, x_a, x_g`, each `[C]` (indexed by R, W, …).
    mix: [Slot; SHIFTS],
    /// Decay: `w_lora`, rank `Dw`, tanh inside, bias `w0`.
    w_lora: LowRank,
    /// In-context learning rate: `a_lora`, rank `Da`, bias `a0`.
    a_lora: LowRank,
    /// Value residual (blocks after the first): `v_lora`, rank `Dv`, bias `v0`.
    v_lora: Option<LowRank>,
    /// Gate: `g_lora`, rank `Dg`, sigmoid inside, no bias.
    g_lora: LowRank,
    k_k: Slot,     // [C]
    k_a: Slot,     // [C]
    r_k: Slot,     // [C] (H rows of N)
    gn_w: Slot,    // [C]
    gn_b: Slot,    // [C]
    ffn_mix: Slot, // [C]
    ffn: FfnWeights,
}

struct Slots {
    embed: Slot,        // [V, C]
    final_norm_w: Slot, // [C]
    final_norm_b: Slot, // [C]
    lm_head: Linear,    // [V, C]
    pre_norm_w: Slot,   // [C] (block 0)
    pre_norm_b: Slot,   // [C] (block 0)
    layers: Vec<LayerSlots>,
}

/// Registers a low-rank path `{at}.{name}.lora.{0,2}.*`: down `[rank, C]`, up `[C, rank]`
/// and, when `bias`, `[C]`.
fn add_low_rank(
    p: &mut ParamSet,
    at: &str,
    name: &str,
    shape: (usize, usize),
    inner: Inner,
    bias: bool,
) -> LowRank {
    let (rank, width) = shape;
    let lora = format!("{at}.{name}.lora");
    LowRank {
        down: Linear::register(p, &format!("{lora}.0"), (rank, width), false, ATTN),
        up: Linear::register(p, &format!("{lora}.2"), (width, rank), bias, ATTN),
        inner,
    }
}

/// Registers the tensors of block `l`, in the order of the reference's model files.
fn register_layer(cfg: &Config, p: &mut ParamSet, l: usize) -> LayerSlots {
    let (c, f) = (cfg.hidden, cfg.intermediate);
    let b = format!("model.layers.{l}");
    let at = format!("{b}.attn");
    let attn_norm_w = p.add(format!("{b}.attn_norm.weight"), &[c], ATTN_NORM);
    let attn_norm_b = p.add(format!("{b}.attn_norm.bias"), &[c], ATTN_NORM);
    let ffn_norm_w = p.add(format!("{b}.ffn_norm.weight"), &[c], FFN_NORM);
    let ffn_norm_b = p.add(format!("{b}.ffn_norm.bias"), &[c], FFN_NORM);
    let proj = |p: &mut ParamSet, name: &str| {
        Linear::register(p, &format!("{at}.{name}"), (c, c), false, ATTN)
    };
    let r_proj = proj(p, "r_proj");
    let k_proj = proj(p, "k_proj");
    let v_proj = proj(p, "v_proj");
    let o_proj = proj(p, "o_proj");
    let mix = SHIFT_NAMES.map(|m| p.add(format!("{at}.{m}"), &[c], ATTN));
    let w_lora = add_low_rank(p, &at, "w_lora", (cfg.decay_rank, c), Inner::Tanh, true);
    let a_lora = add_low_rank(p, &at, "a_lora", (cfg.a_rank, c), Inner::Identity, true);
    let v_lora =
        (l > 0).then(|| add_low_rank(p, &at, "v_lora", (cfg.v_rank, c), Inner::Identity, true));
    LayerSlots {
        attn_norm_w,
        attn_norm_b,
        ffn_norm_w,
        ffn_norm_b,
        r_proj,
        k_proj,
        v_proj,
        o_proj,
        mix,
        w_lora,
        a_lora,
        v_lora,
        g_lora: add_low_rank(p, &at, "g_lora", (cfg.g_rank, c), Inner::Sigmoid, false),
        k_k: p.add(format!("{at}.k_k"), &[c], ATTN),
        k_a: p.add(format!("{at}.k_a"), &[c], ATTN),
        r_k: p.add(format!("{at}.r_k"), &[c], ATTN),
        gn_w: p.add(format!("{at}.g_norm.weight"), &[c], ATTN),
        gn_b: p.add(format!("{at}.g_norm.bias"), &[c], ATTN),
        ffn_mix: p.add(format!("{b}.ffn.x_k"), &[c], FFN),
        ffn: FfnWeights {
            key: Linear::register(p, &format!("{b}.ffn.key"), (f, c), false, FFN),
            value: Linear::register(p, &format!("{b}.ffn.value"), (c, f), false, FFN),
        },
    }
}

/// Registers every tensor, in the order (and with the names and shapes) the reference writes
/// model files.
fn register_params(cfg: &Config, p: &mut ParamSet) -> Slots {
    let c = cfg.hidden;
    let embed = p.add_sparse_rows("model.embeddings.weight", &[VOCAB, c], EMBED);
    let final_norm_w = p.add("model.norm.weight", &[c], HEAD);
    let final_norm_b = p.add("model.norm.bias", &[c], HEAD);
    let lm_head = Linear::register(p, "lm_head", (VOCAB, c), false, HEAD);
    let pre_norm_w = p.add("model.layers.0.pre_norm.weight", &[c], PRE_NORM);
    let pre_norm_b = p.add("model.layers.0.pre_norm.bias", &[c], PRE_NORM);
    let layers = (0..cfg.layers).map(|l| register_layer(cfg, p, l)).collect();
    Slots {
        embed,
        final_norm_w,
        final_norm_b,
        lm_head,
        pre_norm_w,
        pre_norm_b,
        layers,
    }
}

/// Seeded initialisation of the reference system: the same generator, scales, centres and
/// order of draws, so a seed gives the same starting weights. Tensors registered as zero and
/// not named here (biases w0, a0, v0, the norm biases) stay zero.
fn init_random(slots: &Slots, p: &mut ParamSet, seed: u64) {
    let mut rng = InitRng::new(seed);
    rng.fill_uniform(p.get_mut(slots.embed), 0.02);
    p.get_mut(slots.final_norm_w).fill(1.0);
    rng.fill_uniform(p.get_mut(slots.lm_head.w), 0.02);
    p.get_mut(slots.pre_norm_w).fill(1.0);
    for l in &slots.layers {
        p.get_mut(l.attn_norm_w).fill(1.0);
        p.get_mut(l.ffn_norm_w).fill(1.0);
        // r, k and v are drawn as one block, then o.
        for s in [l.r_proj, l.k_proj, l.v_proj, l.o_proj] {
            rng.fill_uniform(p.get_mut(s.w), 0.02);
        }
        // The low-rank matrices: decay, a, value residual (blocks after the first), gate.
        for lr in [
            Some(&l.w_lora),
            Some(&l.a_lora),
            l.v_lora.as_ref(),
            Some(&l.g_lora),
        ]
        .into_iter()
        .flatten()
        {
            rng.fill_uniform(p.get_mut(lr.down.w), 0.02);
            rng.fill_uniform(p.get_mut(lr.up.w), 0.02);
        }
        // Mixes around ½: each shifted input starts as the mean of this byte and the last.
        for &m in &l.mix {
            rng.fill_centered(p.get_mut(m), 0.5, 0.02);
        }
        // k_k = 1: kk is the plain normalised key; k_a = 1: k = k̃·a; r_k = 1.
        p.get_mut(l.k_k).fill(1.0);
        p.get_mut(l.k_a).fill(1.0);
        p.get_mut(l.r_k).fill(1.0);
        p.get_mut(l.gn_w).fill(1.0);
        rng.fill_centered(p.get_mut(l.ffn_mix), 0.5, 0.02);
        rng.fill_uniform(p.get_mut(l.ffn.key.w), 0.02);
        rng.fill_uniform(p.get_mut(l.ffn.value.w), 0.02);
    }
}

// ---------------------------------------------------------------------------------------------
// State and trace: flat buffers, each declared once (see `table`)
// ---------------------------------------------------------------------------------------------

/// What one block carries from byte to byte. The value residual (`v_first`, block 0's value) is
/// not part of the state: every step sets it in block 0 before a later block reads it. A carry
/// (the gradient with respect to a state) has the same layout.
struct LayerState<T> {
    /// The previous byte's attention-norm output (token shift of the attention), `[C]`.
    att_prev: T,
    /// WKV state `[H, N, N]`: per head, row = value channel, column = key channel.
    wkv: T,
    /// The previous byte's FFN-norm output (token shift of the FFN), `[C]`.
    ffn_prev: T,
}

/// The state layout of one block. The entry names (prefixed `layers.{l}.`) are the keys of the
/// state in model files.
fn layer_state<T>(cfg: &Config, add: &mut impl FnMut(&str, &[usize]) -> T) -> LayerState<T> {
    let (c, h) = (cfg.hidden, cfg.heads());
    LayerState {
        att_prev: add("att_prev", &[c]),
        wkv: add("wkv", &[h, N, N]),
        ffn_prev: add("ffn_prev", &[c]),
    }
}

/// What backward needs from the steps outside the blocks, each `[n, ·]`: a trace is one step
/// (`n = 1`), a replay's buffers [`MAX_STEPS`] steps.
struct StepTrace<T> {
    token: T,   // [n, 1] the byte read, as a float
    x0: T,      // [n, C] embedding row: the pre-norm's input
    v_first: T, // [n, C] block 0's value, mixed into later blocks' values
    x_final: T, // [n, C] residual stream after the last block
    xo: T,      // [n, C] final norm: the LM head's input
}

fn step_trace<T>(
    cfg: &Config,
    n: usize,
    add: &mut impl FnMut(&str, &[usize]) -> T,
) -> StepTrace<T> {
    let c = cfg.hidden;
    StepTrace {
        token: add("token", &[n, 1]),
        x0: add("x0", &[n, c]),
        v_first: add("v_first", &[n, c]),
        x_final: add("x_final", &[n, c]),
        xo: add("xo", &[n, c]),
    }
}

/// What backward needs from one block over `n` steps, each `[n, ·]`; the copies that only
/// backward reads (the stream entering the block, the WKV state before the step) for `kept`
/// steps: a trace is `(1, 1)`, a replay's buffers `(MAX_STEPS, 0)`.
struct LayerTrace<T> {
    x_in: T,            // [kept, C] residual stream entering the block
    xn: T,              // [n, C] attn_norm(x_in): base of the attention's token shift
    att_prev: T,        // [n, C] shift state before this step
    shift: [T; SHIFTS], // [6][n, C] token-shifted inputs x_r, x_w, x_k, x_v, x_a, x_g
    r: T,               // [n, C] receptance
    kt: T,              // [n, C] k̃ = W_k x_k, the key before the `a` scaling
    vt: T,              // [n, C] ṽ = W_v x_v, the value before the residual mix
    w_hidden: T,        // [n, Dw] tanh(W1 x_w)
    w_sig: T,           // [n, C] sigmoid of the decay pre-activation
    w: T,               // [n, C] decay
    a_hidden: T,        // [n, Da] A1 x_a
    a: T,               // [n, C] in-context learning rate
    g_hidden: T,        // [n, Dg] sigmoid(G1 x_g)
    g: T,               // [n, C] output gate
    v_hidden: T,        // [n, Dv] V1 x_v (blocks after the first; empty in block 0)
    nu: T,              // [n, C] value-residual mix (blocks after the first; empty in block 0)
    v: T,               // [n, C] value
    kk: T,              // [n, C] per-head normalised k̃ ⊙ k_k
    kk_norm: T,         // [n, H] per-head norm of k̃ ⊙ k_k before normalisation
    b: T,               // [n, C] kk ⊙ a: the removal direction of the delta rule
    k: T,               // [n, C] key written into the state
    wkv_prev: T,        // [kept, H, N, N] state before this step
    sa: T,              // [n, C] S·kk per head and row (state before this step)
    y_wkv: T,           // [n, C] S'·r
    alpha: T,           // [n, H] Σ r ⊙ k ⊙ r_k per head: weight of the bonus term
    y_head: T,          // [n, C] group norm plus the r·k bonus: the gate's input
    y_gate: T,          // [n, C] gated output: W_o's input
    x_mid: T,           // [n, C] residual stream after the attention
    xf: T,              // [n, C] ffn_norm(x_mid): base of the FFN's token shift
    ffn_prev: T,        // [n, C] FFN shift state before this step
    ffn_x: T,           // [n, C] token-shifted FFN input
    ffn_pre: T,         // [n, F] W_key ffn_x
    ffn_h: T,           // [n, F] relu(ffn_pre)²
}

fn layer_trace<T>(
    cfg: &Config,
    l: usize,
    (n, kept): (usize, usize),
    add: &mut impl FnMut(&str, &[usize]) -> T,
) -> LayerTrace<T> {
    let (c, f, h) = (cfg.hidden, cfg.intermediate, cfg.heads());
    // Only blocks after the first have the value-residual path.
    let (dv, nu) = if l > 0 { (cfg.v_rank, c) } else { (0, 0) };
    LayerTrace {
        x_in: add("x_in", &[kept, c]),
        xn: add("xn", &[n, c]),
        att_prev: add("att_prev", &[n, c]),
        shift: SHIFT_NAMES.map(|name| add(name, &[n, c])),
        r: add("r", &[n, c]),
        kt: add("kt", &[n, c]),
        vt: add("vt", &[n, c]),
        w_hidden: add("w_hidden", &[n, cfg.decay_rank]),
        w_sig: add("w_sig", &[n, c]),
        w: add("w", &[n, c]),
        a_hidden: add("a_hidden", &[n, cfg.a_rank]),
        a: add("a", &[n, c]),
        g_hidden: add("g_hidden", &[n, cfg.g_rank]),
        g: add("g", &[n, c]),
        v_hidden: add("v_hidden", &[n, dv]),
        nu: add("nu", &[n, nu]),
        v: add("v", &[n, c]),
        kk: add("kk", &[n, c]),
        kk_norm: add("kk_norm", &[n, h]),
        b: add("b", &[n, c]),
        k: add("k", &[n, c]),
        wkv_prev: add("wkv_prev", &[kept, h, N, N]),
        sa: add("sa", &[n, c]),
        y_wkv: add("y_wkv", &[n, c]),
        alpha: add("alpha", &[n, h]),
        y_head: add("y_head", &[n, c]),
        y_gate: add("y_gate", &[n, c]),
        x_mid: add("x_mid", &[n, c]),
        xf: add("xf", &[n, c]),
        ffn_prev: add("ffn_prev", &[n, c]),
        ffn_x: add("ffn_x", &[n, c]),
        ffn_pre: add("ffn_pre", &[n, f]),
        ffn_h: add("ffn_h", &[n, f]),
    }
}

impl Config {
    fn state_blocks(&self) -> Blocks {
        Blocks::new(
            self.layers,
            |_| {},
            |layout, prefix, _| {
                layer_state(self, &mut register(layout, prefix));
            },
        )
    }

    /// One step's trace (`(1, 1)`) or a replay's buffers (`(MAX_STEPS, 0)`), see
    /// [`LayerTrace`].
    fn trace_blocks_of(&self, (n, kept): (usize, usize)) -> Blocks {
        let top = |layout: &mut Layout| {
            step_trace(self, n, &mut register(layout, ""));
        };
        Blocks::new(self.layers, top, |layout, prefix, l| {
            layer_trace(self, l, (n, kept), &mut register(layout, prefix));
        })
    }

    fn trace_blocks(&self) -> Blocks {
        self.trace_blocks_of(ONE_STEP)
    }

    /// Floats of the buffers a replay of known bytes over several steps at once keeps: its
    /// activations, and the residual stream and a block's output over the steps.
    pub fn replay_floats(&self) -> usize {
        self.trace_blocks_of(REPLAY).layout.len() + 2 * MAX_STEPS * self.hidden
    }
}

/// The rows and kept rows of a trace (one step) and of a replay's buffers.
const ONE_STEP: (usize, usize) = (1, 1);
const REPLAY: (usize, usize) = (MAX_STEPS, 0);

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

/// The [`Model`] of a [`Rwkv7`], borrowing only the fields it names (so the buffers can be
/// borrowed mutably beside it).
macro_rules! model {
    ($net:expr) => {
        Model {
            cfg: &$net.cfg,
            slots: &$net.slots,
            state_layout: &$net.state_layout,
        }
    };
}

pub struct Rwkv7 {
    cfg: Config,
    slots: Slots,
    state_layout: Blocks,
    trace_layout: Blocks,
    /// The layout of a replay's buffers: the trace's entries over [`MAX_STEPS`] steps, without
    /// the copies only backward reads.
    replay_layout: Blocks,
    /// The trace an untraced forward writes into: traced and untraced forward run one code path.
    scratch: Vec<f32>,
    /// A replay's buffers, made on the first replay.
    replay: Option<Vec<f32>>,
    /// Residual stream of the steps being computed, `[MAX_STEPS, C]`.
    x: Vec<f32>,
    /// The FFN's output before it joins the residual stream, `[MAX_STEPS, C]`.
    block_out: Vec<f32>,
    logits: Vec<f32>,
    /// Gradient buffers ([`Grads`]) of `grad_steps` steps, grown by a longer segment.
    grads: Vec<f32>,
    grad_steps: usize,
}

impl Rwkv7 {
    /// A network and its parameters, all zero: the layout that [`Rwkv7::new_random`] fills
    /// with seeded values and the model-file loader fills by name.
    pub fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        cfg.validate()?;
        let mut params = ParamSet::new();
        let slots = register_params(&cfg, &mut params);
        let trace_layout = cfg.trace_blocks();
        let net = Rwkv7 {
            scratch: trace_layout.layout.zeros(),
            state_layout: cfg.state_blocks(),
            trace_layout,
            replay_layout: cfg.trace_blocks_of(REPLAY),
            replay: None,
            x: vec![0.0; MAX_STEPS * cfg.hidden],
            block_out: vec![0.0; MAX_STEPS * cfg.hidden],
            logits: vec![0.0; VOCAB],
            grads: cfg.grad_layout(1).zeros(),
            grad_steps: 1,
            cfg,
            slots,
        };
        Ok((net, params))
    }

    /// A freshly initialised network and its parameters.
    pub fn new_random(cfg: Config, seed: u64) -> Result<(Self, ParamSet)> {
        let (mut net, mut params) = Self::new(cfg)?;
        init_random(&net.slots, &mut params, seed);
        net.refresh(&params);
        Ok((net, params))
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The forward of the live byte (T = 1): reads `token` and advances `state`. Untraced, it
    /// writes its trace into scratch and skips the copies only backward reads; without logits
    /// it skips the LM head. Neither changes a bit of the state or of the logits.
    fn step(
        &mut self,
        params: &ParamSet,
        state: &mut [f32],
        token: u8,
        trace: Option<&mut Vec<f32>>,
        logits: bool,
    ) {
        let traced = trace.is_some();
        let model = model!(self);
        let tr = trace.unwrap_or(&mut self.scratch);
        let acts = (&mut tr[..], &self.trace_layout, ONE_STEP);
        let bufs = (&mut self.x[..], &mut self.block_out[..]);
        model.forward(params, state, &[token], acts, bufs, traced);
        if logits {
            let top = step_trace(
                &self.cfg,
                1,
                &mut carve_mut(&mut tr[..self.trace_layout.top]),
            );
            // 21. logits = lm_head · LN_out(x)
            let (sl, x) = (&self.slots, &self.x[..self.cfg.hidden]);
            top.x_final.copy_from_slice(x);
            let (norm_w, norm_b) = (params.get(sl.final_norm_w), params.get(sl.final_norm_b));
            layer_norm(x, norm_w, norm_b, LN_EPS, top.xo);
            sl.lm_head.forward(params, top.xo, &mut self.logits);
        }
    }

    /// The forward of known bytes ([`MAX_STEPS`] at a time), untraced and without logits: the
    /// bits of [`Network::advance`] byte after byte.
    fn replay(&mut self, params: &ParamSet, state: &mut [f32], tokens: &[u8]) {
        let layout = &self.replay_layout;
        let mut buf = self.replay.take().unwrap_or_else(|| layout.layout.zeros());
        let model = model!(self);
        for part in tokens.chunks(MAX_STEPS) {
            let acts = (&mut buf[..], layout, REPLAY);
            let bufs = (&mut self.x[..], &mut self.block_out[..]);
            model.forward(params, state, part, acts, bufs, false);
        }
        self.replay = Some(buf);
    }

    /// Walks the traced steps `traces` back (T ≤ [`MAX_STEPS`]), last first, with
    /// `grad_logits` one row of [`VOCAB`] per step (see [`Network::backward_steps`]), each
    /// step of the forward over all the steps at once: the head (21), the blocks last first
    /// (20–3), the pre-norm and the embedding (2–1). Without `carry`, the one step is the only
    /// one (a one-step update).
    fn backward_segment(
        &mut self,
        params: &ParamSet,
        (traces, grad_logits): (&[Vec<f32>], &[f32]),
        (scope, grads): (Scope, &mut [f32]),
        mut carry: Option<&mut [f32]>,
    ) {
        let n = traces.len();
        if self.grad_steps < n {
            self.grads = self.cfg.grad_layout(n).zeros();
            self.grad_steps = n;
        }
        let below = [EMBED, PRE_NORM, ATTN_NORM, FFN_NORM, ATTN, FFN]
            .iter()
            .any(|&gr| scope.has(gr));
        if !below {
            // No parameter in scope depends on the state, so its gradient is not computed; the
            // carry is left zero rather than stale.
            if let Some(cr) = carry.as_deref_mut() {
                cr.fill(0.0);
            }
            if !scope.has(HEAD) {
                return;
            }
        }
        let (cfg, sl) = (&self.cfg, &self.slots);
        let mut g = block::grads(cfg, self.grad_steps, &mut carve_mut(&mut self.grads));
        let seg = |l| Seg {
            cfg,
            layout: &self.trace_layout,
            traces,
            l,
        };
        head_backward(
            sl,
            params,
            (&seg(0), grad_logits),
            &mut g,
            (scope, grads),
            below,
        );
        if !below {
            return;
        }
        g.v_first[..n * cfg.hidden].fill(0.0);
        for (l, ls) in sl.layers.iter().enumerate().rev() {
            let range = self.state_layout.layers[l].clone();
            let mut lc = carry
                .as_deref_mut()
                .map(|cr| layer_state(cfg, &mut carve_mut(&mut cr[range])));
            let walk = (ls, params, &seg(l));
            // 20.–17.
            block::channel_mix_backward(walk, lc.as_mut(), &mut g, grads, scope);
            // 16.–3.
            block::time_mix_backward(walk, lc.as_mut(), &mut g, grads, scope);
        }
        input_backward(sl, params, &seg(0), &g, (scope, grads));
    }
}

/// What the forward reads besides the parameters: the sizes, the weights' slots, the state's
/// layout.
struct Model<'a> {
    cfg: &'a Config,
    slots: &'a Slots,
    state_layout: &'a Blocks,
}

impl Model<'_> {
    /// Steps 1–20 over the `n = tokens.len()` steps: reads the bytes and advances `state`,
    /// leaving the residual stream after the last block in the rows of `x`. The activations go
    /// to `acts`, laid out by `layout` for `(rows, kept)` ([`LayerTrace`]); with `traced`, also
    /// the copies only backward reads. `x` and `out` are `[n, C]`.
    fn forward(
        &self,
        params: &ParamSet,
        state: &mut [f32],
        tokens: &[u8],
        (acts, layout, dims): (&mut [f32], &Blocks, (usize, usize)),
        (x, out): (&mut [f32], &mut [f32]),
        traced: bool,
    ) {
        let (cfg, sl, n, c) = (self.cfg, self.slots, tokens.len(), self.cfg.hidden);
        let (top, layers) = acts.split_at_mut(layout.top);
        let top = step_trace(cfg, dims.0, &mut carve_mut(top));
        let p = |slot: Slot| params.get(slot);
        for (s, &token) in tokens.iter().enumerate() {
            top.token[s] = token as f32;
            // 1. x0 = embed[token]   (a byte is always a valid row: no clamping, unlike the
            //    reference, which silently clamps out-of-range token ids)
            let x0 = row_mut(top.x0, s, c);
            x0.copy_from_slice(p(sl.embed.row(token as usize, c)));
            // 2. x = LN_pre(x0)   (block 0's pre-norm)
            let (w, b) = (p(sl.pre_norm_w), p(sl.pre_norm_b));
            layer_norm(x0, w, b, LN_EPS, row_mut(x, s, c));
        }
        for (l, ls) in sl.layers.iter().enumerate() {
            let lt = &mut layers[layout.after_top(l)];
            let mut lt = layer_trace(cfg, l, dims, &mut carve_mut(lt));
            let st = &mut state[self.state_layout.layers[l].clone()];
            let mut st = layer_state(cfg, &mut carve_mut(st));
            if traced {
                lt.x_in[..n * c].copy_from_slice(&x[..n * c]);
            }
            // 3.–16. x += W_o · attention(LN_attn(x))
            let v_x = (&mut *top.v_first, &mut *x);
            block::time_mix_forward((ls, params), &mut st, &mut lt, v_x, (n, traced));
            // 17.–20. x += W_value · relu(W_key · shift(LN_ffn(x)))²
            let x_out = (&mut *x, &mut *out);
            block::channel_mix_forward((ls, params), &mut st, &mut lt, x_out, n);
        }
    }
}

/// Step 21 walked back over the segment's steps: `logits = lm_head · xo`, `xo =
/// LN_out(x_final)`. Writes the rows of `g.xn` and, when the blocks below train (`below`), of
/// `g.x`.
fn head_backward(
    sl: &Slots,
    params: &ParamSet,
    (seg, grad_logits): (&Seg, &[f32]),
    g: &mut Grads<&mut [f32]>,
    (scope, grads): (Scope, &mut [f32]),
    below: bool,
) {
    let (c, n) = (seg.cfg.hidden, seg.n());
    let train = scope.has(HEAD);
    let xo = step_rows(n, |t| seg.top(t).xo);
    let g_head = train.then_some(&mut *grads);
    sl.lm_head
        .backward_steps(params, g_head, &xo[..n], grad_logits, (g.xn, c), false);
    let (w, b) = (sl.final_norm_w, sl.final_norm_b);
    for t in (0..n).rev() {
        let x_final = seg.top(t).x_final;
        let stats = ln_stats(x_final, LN_EPS);
        if train {
            layer_norm_param_grads(x_final, stats, row(g.xn, t, c), grads, w, b);
        }
        if below {
            let (g_xn, g_x) = (row(g.xn, t, c), row_mut(g.x, t, c));
            layer_norm_backward(x_final, params.get(w), stats, g_xn, g_x);
        }
    }
}

/// Steps 2 and 1 walked back over the segment's steps, from the rows of `g.x`: `x =
/// LN_pre(x0)`, `x0 = embed[token]`.
fn input_backward(
    sl: &Slots,
    params: &ParamSet,
    seg: &Seg,
    g: &Grads<&mut [f32]>,
    (scope, grads): (Scope, &mut [f32]),
) {
    let c = seg.cfg.hidden;
    let mut g_x0 = [0.0f32; crate::model::MAX_DIM];
    for t in (0..seg.n()).rev() {
        let top = seg.top(t);
        let (g_x, stats) = (row(g.x, t, c), ln_stats(top.x0, LN_EPS));
        // 2. x = LN_pre(x0)
        if scope.has(PRE_NORM) {
            let (w, b) = (sl.pre_norm_w, sl.pre_norm_b);
            layer_norm_param_grads(top.x0, stats, g_x, grads, w, b);
        }
        // 1. x0 = embed[token]
        if scope.has(EMBED) {
            let g_x0 = &mut g_x0[..c];
            layer_norm_backward(top.x0, params.get(sl.pre_norm_w), stats, g_x, g_x0);
            let row = sl.embed.row(top.token[0] as usize, c);
            kernels::add_assign(row.of_mut(grads), g_x0);
        }
    }
}

impl Config {
    /// The layout of the gradient buffers of a backward over `steps` steps.
    fn grad_layout(&self, steps: usize) -> Layout {
        let mut layout = Layout::new();
        block::grads(self, steps, &mut register(&mut layout, ""));
        layout
    }

    /// Floats of the gradient buffers a backward over `steps` steps at once keeps.
    pub fn step_grad_floats(&self, steps: usize) -> usize {
        self.grad_layout(steps).len()
    }
}

impl Build for Rwkv7 {
    type Config = Config;

    fn infer(src: &dyn TensorSource) -> Result<Config> {
        Config::infer(src)
    }

    fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        Rwkv7::new(cfg)
    }
}

impl Network for Rwkv7 {
    /// Laid out by [`Config::state_blocks`].
    type State = Vec<f32>;
    /// Laid out by [`Config::trace_blocks`].
    type Trace = Vec<f32>;
    /// Laid out like the state.
    type Carry = Vec<f32>;

    fn groups(&self) -> &'static [&'static str] {
        GROUPS
    }

    fn layouts(&self) -> Layouts<'_> {
        Layouts {
            state: &self.state_layout.layout,
            trace: &self.trace_layout.layout,
        }
    }

    /// RWKV-7 reads every weight as it is stored: no cache depends on the parameters.
    fn refresh(&mut self, _params: &ParamSet) {}

    fn forward(
        &mut self,
        params: &ParamSet,
        state: &mut Vec<f32>,
        token: u8,
        trace: Option<&mut Vec<f32>>,
    ) -> &[f32] {
        self.step(params, state, token, trace, true);
        &self.logits
    }

    fn advance(&mut self, params: &ParamSet, state: &mut Vec<f32>, token: u8) {
        self.step(params, state, token, None, false);
    }

    fn backward(
        &mut self,
        params: &ParamSet,
        tr: &Vec<f32>,
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: Option<&mut Vec<f32>>,
    ) {
        let (traces, carry) = (std::slice::from_ref(tr), carry.map(|c| c.as_mut_slice()));
        self.backward_segment(params, (traces, grad_logits), (scope, grads), carry);
    }

    fn advance_steps(&mut self, params: &ParamSet, state: &mut Vec<f32>, tokens: &[u8]) {
        self.replay(params, state, tokens);
    }

    /// Layer by layer over up to [`MAX_STEPS`] steps at once, the last of them first.
    fn backward_steps(
        &mut self,
        params: &ParamSet,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: &mut Vec<f32>,
    ) {
        let mut end = traces.len();
        while end > 0 {
            let start = end.saturating_sub(MAX_STEPS);
            let g = &grad_logits[start * VOCAB..end * VOCAB];
            let part = &traces[start..end];
            self.backward_segment(params, (part, g), (scope, &mut *grads), Some(carry));
            end = start;
        }
    }
}
