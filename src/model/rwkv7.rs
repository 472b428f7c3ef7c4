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

use anyhow::{Result, bail};

use crate::kernels::{self, math};
use crate::model::layers::{
    layer_norm, layer_norm_backward, layer_norm_param_grads, token_shift, token_shift_backward,
};
use crate::model::{Build, Network, StateTensor, VOCAB};
use crate::params::{Group, InitRng, ParamSet, Scope, Slot, TensorSource};

/// Training groups of RWKV-7, indexed by [`crate::params::Group`].
pub const GROUPS: &[&str] = &[
    "embed",
    "pre_norm",
    "attn_norm",
    "ffn_norm",
    "attn",
    "ffn",
    "head",
];
const EMBED: Group = 0;
const PRE_NORM: Group = 1;
const ATTN_NORM: Group = 2;
const FFN_NORM: Group = 3;
const ATTN: Group = 4;
const FFN: Group = 5;
/// The LM head and the final LayerNorm, trained together as in the reference.
const HEAD: Group = 6;
// Group 7, "bias", is the predictor's output bias: no tensor of the network belongs to it.

/// Width of one head; the WKV state of a head is `N × N`.
const N: usize = 64;
/// LayerNorm epsilon of the residual-stream norms.
const LN_EPS: f32 = 1e-5;
/// GroupNorm epsilon of the attention output (per head).
const GN_EPS: f32 = 64e-5;
/// Smallest norm the per-head key normalisation divides by: `kk = x / max(‖x‖, ε)`.
const KK_EPS: f32 = 1e-12;
/// `e^{−1/2}`: the decay is `w = exp(−e^{−1/2} · sigmoid(·))`, so `w ∈ (0.545, 1)`.
const DECAY_SCALE: f32 = 0.606_530_66;

/// Indices of the six token-shifted inputs of the attention, in the order of their mixes
/// (`x_r, x_w, x_k, x_v, x_a, x_g`).
const R: usize = 0;
const W: usize = 1;
const K: usize = 2;
const VAL: usize = 3;
const A: usize = 4;
const G: usize = 5;
const SHIFTS: usize = 6;

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

    /// Floats of one [`State`]: per layer the two token shifts and the WKV state.
    pub fn state_floats(&self) -> usize {
        let c = self.hidden;
        self.layers * (2 * c + self.heads() * N * N)
    }

    /// Floats of one [`Trace`]: per layer vectors of the stream's width, the low-rank hiddens,
    /// the FFN's two `[F]` vectors and the WKV state the step started from.
    pub fn trace_floats(&self) -> usize {
        let (c, f, h) = (self.hidden, self.intermediate, self.heads());
        let (dw, da, dg) = (self.decay_rank, self.a_rank, self.g_rank);
        // Vectors of width C: x_in, xn, att_prev, six shifts, r, kt, vt, w_sig, w, a, g, v, kk,
        // b, k, sa, y_wkv, y_head, y_gate, x_mid, xf, ffn_prev, ffn_x.
        let layer = 28 * c + dw + da + dg + 2 * h + h * N * N + 2 * f;
        // Blocks after the first also keep the value-residual path's hidden and mix.
        let v_residual = (self.layers - 1) * (self.v_rank + c);
        4 * c + self.layers * layer + v_residual
    }
}

// ---------------------------------------------------------------------------------------------
// Weights: slots into the ParamSet
// ---------------------------------------------------------------------------------------------

/// The value-residual path of blocks after the first.
struct VLoraSlots {
    v1: Slot, // [Dv, C]
    v2: Slot, // [C, Dv]
    v0: Slot, // [C]
}

struct LayerSlots {
    attn_norm_w: Slot, // [C]
    attn_norm_b: Slot, // [C]
    ffn_norm_w: Slot,  // [C]
    ffn_norm_b: Slot,  // [C]
    r_proj: Slot,      // [C, C]
    k_proj: Slot,      // [C, C]
    v_proj: Slot,      // [C, C]
    o_proj: Slot,      // [C, C]
    /// Token-shift mixes `x_r, x_w, x_k, x_v, x_a, x_g`, each `[C]` (indexed by R, W, …).
    mix: [Slot; SHIFTS],
    w1: Slot, // [Dw, C]
    w2: Slot, // [C, Dw]
    w0: Slot, // [C]
    a1: Slot, // [Da, C]
    a2: Slot, // [C, Da]
    a0: Slot, // [C]
    v_lora: Option<VLoraSlots>,
    g1: Slot,        // [Dg, C]
    g2: Slot,        // [C, Dg]
    k_k: Slot,       // [C]
    k_a: Slot,       // [C]
    r_k: Slot,       // [C] (H rows of N)
    gn_w: Slot,      // [C]
    gn_b: Slot,      // [C]
    ffn_mix: Slot,   // [C]
    ffn_key: Slot,   // [F, C]
    ffn_value: Slot, // [C, F]
}

struct Slots {
    embed: Slot,        // [V, C]
    final_norm_w: Slot, // [C]
    final_norm_b: Slot, // [C]
    lm_head: Slot,      // [V, C]
    pre_norm_w: Slot,   // [C] (block 0)
    pre_norm_b: Slot,   // [C] (block 0)
    layers: Vec<LayerSlots>,
}

/// Registers every tensor, in the order (and with the names and shapes) the reference writes
/// model files.
fn register(cfg: &Config, p: &mut ParamSet) -> Slots {
    let (c, f) = (cfg.hidden, cfg.intermediate);
    let (dw, da, dv, dg) = (cfg.decay_rank, cfg.a_rank, cfg.v_rank, cfg.g_rank);
    let embed = p.add_sparse_rows("model.embeddings.weight", &[VOCAB, c], EMBED);
    let final_norm_w = p.add("model.norm.weight", &[c], HEAD);
    let final_norm_b = p.add("model.norm.bias", &[c], HEAD);
    let lm_head = p.add("lm_head.weight", &[VOCAB, c], HEAD);
    let pre_norm_w = p.add("model.layers.0.pre_norm.weight", &[c], PRE_NORM);
    let pre_norm_b = p.add("model.layers.0.pre_norm.bias", &[c], PRE_NORM);
    let layers = (0..cfg.layers)
        .map(|l| {
            let b = format!("model.layers.{l}");
            let at = format!("{b}.attn");
            let attn_norm_w = p.add(format!("{b}.attn_norm.weight"), &[c], ATTN_NORM);
            let attn_norm_b = p.add(format!("{b}.attn_norm.bias"), &[c], ATTN_NORM);
            let ffn_norm_w = p.add(format!("{b}.ffn_norm.weight"), &[c], FFN_NORM);
            let ffn_norm_b = p.add(format!("{b}.ffn_norm.bias"), &[c], FFN_NORM);
            let r_proj = p.add(format!("{at}.r_proj.weight"), &[c, c], ATTN);
            let k_proj = p.add(format!("{at}.k_proj.weight"), &[c, c], ATTN);
            let v_proj = p.add(format!("{at}.v_proj.weight"), &[c, c], ATTN);
            let o_proj = p.add(format!("{at}.o_proj.weight"), &[c, c], ATTN);
            let mix = ["x_r", "x_w", "x_k", "x_v", "x_a", "x_g"]
                .map(|m| p.add(format!("{at}.{m}"), &[c], ATTN));
            let w1 = p.add(format!("{at}.w_lora.lora.0.weight"), &[dw, c], ATTN);
            let w2 = p.add(format!("{at}.w_lora.lora.2.weight"), &[c, dw], ATTN);
            let w0 = p.add(format!("{at}.w_lora.lora.2.bias"), &[c], ATTN);
            let a1 = p.add(format!("{at}.a_lora.lora.0.weight"), &[da, c], ATTN);
            let a2 = p.add(format!("{at}.a_lora.lora.2.weight"), &[c, da], ATTN);
            let a0 = p.add(format!("{at}.a_lora.lora.2.bias"), &[c], ATTN);
            let v_lora = (l > 0).then(|| VLoraSlots {
                v1: p.add(format!("{at}.v_lora.lora.0.weight"), &[dv, c], ATTN),
                v2: p.add(format!("{at}.v_lora.lora.2.weight"), &[c, dv], ATTN),
                v0: p.add(format!("{at}.v_lora.lora.2.bias"), &[c], ATTN),
            });
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
                w1,
                w2,
                w0,
                a1,
                a2,
                a0,
                v_lora,
                g1: p.add(format!("{at}.g_lora.lora.0.weight"), &[dg, c], ATTN),
                g2: p.add(format!("{at}.g_lora.lora.2.weight"), &[c, dg], ATTN),
                k_k: p.add(format!("{at}.k_k"), &[c], ATTN),
                k_a: p.add(format!("{at}.k_a"), &[c], ATTN),
                r_k: p.add(format!("{at}.r_k"), &[c], ATTN),
                gn_w: p.add(format!("{at}.g_norm.weight"), &[c], ATTN),
                gn_b: p.add(format!("{at}.g_norm.bias"), &[c], ATTN),
                ffn_mix: p.add(format!("{b}.ffn.x_k"), &[c], FFN),
                ffn_key: p.add(format!("{b}.ffn.key.weight"), &[f, c], FFN),
                ffn_value: p.add(format!("{b}.ffn.value.weight"), &[c, f], FFN),
            }
        })
        .collect();
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
    rng.fill_uniform(p.get_mut(slots.lm_head), 0.02);
    p.get_mut(slots.pre_norm_w).fill(1.0);
    for l in &slots.layers {
        p.get_mut(l.attn_norm_w).fill(1.0);
        p.get_mut(l.ffn_norm_w).fill(1.0);
        // r, k and v are drawn as one block, then o.
        for s in [l.r_proj, l.k_proj, l.v_proj, l.o_proj] {
            rng.fill_uniform(p.get_mut(s), 0.02);
        }
        rng.fill_uniform(p.get_mut(l.w1), 0.02);
        rng.fill_uniform(p.get_mut(l.w2), 0.02);
        rng.fill_uniform(p.get_mut(l.a1), 0.02);
        rng.fill_uniform(p.get_mut(l.a2), 0.02);
        if let Some(v) = &l.v_lora {
            rng.fill_uniform(p.get_mut(v.v1), 0.02);
            rng.fill_uniform(p.get_mut(v.v2), 0.02);
        }
        rng.fill_uniform(p.get_mut(l.g1), 0.02);
        rng.fill_uniform(p.get_mut(l.g2), 0.02);
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
        rng.fill_uniform(p.get_mut(l.ffn_key), 0.02);
        rng.fill_uniform(p.get_mut(l.ffn_value), 0.02);
    }
}

// ---------------------------------------------------------------------------------------------
// State: what carries from byte to byte
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
pub struct LayerState {
    /// The previous byte's attention-norm output (token shift of the attention), `[C]`.
    att_prev: Vec<f32>,
    /// WKV state `[H, N, N]`: per head, row = value channel, column = key channel.
    wkv: Vec<f32>,
    /// The previous byte's FFN-norm output (token shift of the FFN), `[C]`.
    ffn_prev: Vec<f32>,
}

/// The recurrent state. The value residual (`v_first`, block 0's value) is not part of it: every
/// step sets it in block 0 before a later block reads it, so nothing of it outlives the step.
#[derive(Clone)]
pub struct State {
    layers: Vec<LayerState>,
}

/// Gradient with respect to a [`State`].
pub type Carry = State;

// ---------------------------------------------------------------------------------------------
// Trace: what backward needs from one forward step
// ---------------------------------------------------------------------------------------------

struct LayerTrace {
    x_in: Vec<f32>,            // [C] residual stream entering the block
    xn: Vec<f32>,              // [C] attn_norm(x_in): base of the attention's token shift
    att_prev: Vec<f32>,        // [C] shift state before this step
    shift: [Vec<f32>; SHIFTS], // [6][C] token-shifted inputs x_r, x_w, x_k, x_v, x_a, x_g
    r: Vec<f32>,               // [C] receptance
    kt: Vec<f32>,              // [C] k̃ = W_k x_k, the key before the `a` scaling
    vt: Vec<f32>,              // [C] ṽ = W_v x_v, the value before the residual mix
    w_hidden: Vec<f32>,        // [Dw] tanh(W1 x_w)
    w_sig: Vec<f32>,           // [C] sigmoid of the decay pre-activation
    w: Vec<f32>,               // [C] decay
    a_hidden: Vec<f32>,        // [Da] A1 x_a
    a: Vec<f32>,               // [C] in-context learning rate
    g_hidden: Vec<f32>,        // [Dg] sigmoid(G1 x_g)
    g: Vec<f32>,               // [C] output gate
    v_hidden: Vec<f32>,        // [Dv] V1 x_v (blocks after the first; empty in block 0)
    nu: Vec<f32>,              // [C] value-residual mix (blocks after the first; empty in block 0)
    v: Vec<f32>,               // [C] value
    kk: Vec<f32>,              // [C] per-head normalised k̃ ⊙ k_k
    kk_norm: Vec<f32>,         // [H] per-head norm of k̃ ⊙ k_k before normalisation
    b: Vec<f32>,               // [C] kk ⊙ a: the removal direction of the delta rule
    k: Vec<f32>,               // [C] key written into the state
    wkv_prev: Vec<f32>,        // [H, N, N] state before this step
    sa: Vec<f32>,              // [C] S·kk per head and row (state before this step)
    y_wkv: Vec<f32>,           // [C] S'·r
    alpha: Vec<f32>,           // [H] Σ r ⊙ k ⊙ r_k per head: weight of the bonus term
    y_head: Vec<f32>,          // [C] group norm plus the r·k bonus: the gate's input
    y_gate: Vec<f32>,          // [C] gated output: W_o's input
    x_mid: Vec<f32>,           // [C] residual stream after the attention
    xf: Vec<f32>,              // [C] ffn_norm(x_mid): base of the FFN's token shift
    ffn_prev: Vec<f32>,        // [C] FFN shift state before this step
    ffn_x: Vec<f32>,           // [C] token-shifted FFN input
    ffn_pre: Vec<f32>,         // [F] W_key ffn_x
    ffn_h: Vec<f32>,           // [F] relu(ffn_pre)²
}

pub struct Trace {
    token: u8,
    x0: Vec<f32>,      // [C] embedding row: the pre-norm's input
    v_first: Vec<f32>, // [C] block 0's value, mixed into later blocks' values
    layers: Vec<LayerTrace>,
    x_final: Vec<f32>, // [C] residual stream after the last block
    xo: Vec<f32>,      // [C] final norm: the LM head's input
}

impl Trace {
    fn new(cfg: &Config) -> Self {
        let (c, f, h) = (cfg.hidden, cfg.intermediate, cfg.heads());
        let z = |n: usize| vec![0.0f32; n];
        Trace {
            token: 0,
            x0: z(c),
            v_first: z(c),
            layers: (0..cfg.layers)
                .map(|l| {
                    let dv = if l > 0 { cfg.v_rank } else { 0 };
                    let nu = if l > 0 { c } else { 0 };
                    LayerTrace {
                        x_in: z(c),
                        xn: z(c),
                        att_prev: z(c),
                        shift: std::array::from_fn(|_| z(c)),
                        r: z(c),
                        kt: z(c),
                        vt: z(c),
                        w_hidden: z(cfg.decay_rank),
                        w_sig: z(c),
                        w: z(c),
                        a_hidden: z(cfg.a_rank),
                        a: z(c),
                        g_hidden: z(cfg.g_rank),
                        g: z(c),
                        v_hidden: z(dv),
                        nu: z(nu),
                        v: z(c),
                        kk: z(c),
                        kk_norm: z(h),
                        b: z(c),
                        k: z(c),
                        wkv_prev: z(h * N * N),
                        sa: z(c),
                        y_wkv: z(c),
                        alpha: z(h),
                        y_head: z(c),
                        y_gate: z(c),
                        x_mid: z(c),
                        xf: z(c),
                        ffn_prev: z(c),
                        ffn_x: z(c),
                        ffn_pre: z(f),
                        ffn_h: z(f),
                    }
                })
                .collect(),
            x_final: z(c),
            xo: z(c),
        }
    }
}

/// Gradient buffers of one backward step (all dL/d of the named forward value).
struct GradScratch {
    x: Vec<f32>,               // [C] residual stream
    xn: Vec<f32>,              // [C] a norm's output (the token-shift base)
    tmp: Vec<f32>,             // [C] a norm's input, before joining the residual gradient
    f: Vec<f32>,               // [F] FFN hidden, then its pre-activation
    y: Vec<f32>,               // [C] gated attention output
    yh: Vec<f32>,              // [C] gate input, and so also the group norm's output
    y_wkv: Vec<f32>,           // [C]
    g: Vec<f32>,               // [C] gate
    r: Vec<f32>,               // [C]
    k: Vec<f32>,               // [C] key written into the state
    v: Vec<f32>,               // [C] value
    w: Vec<f32>,               // [C] decay
    b: Vec<f32>,               // [C] kk ⊙ a
    kk: Vec<f32>,              // [C] normalised kk
    a: Vec<f32>,               // [C]
    kt: Vec<f32>,              // [C] k̃
    vt: Vec<f32>,              // [C] ṽ
    v_first: Vec<f32>,         // [C] block 0's value, summed over later blocks
    pre: Vec<f32>,             // [C] a low-rank path's pre-activation
    rank: Vec<f32>,            // [max(Dw, Da, Dv, Dg)] a low-rank path's hidden
    shift: [Vec<f32>; SHIFTS], // [6][C] the six token-shifted inputs
    s_row: Vec<f32>,           // [N] dL/dS' of one state row
    s_new: Vec<f32>,           // [N] one row of the state after the step, recomputed
}

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

pub struct Rwkv7 {
    cfg: Config,
    slots: Slots,
    /// The trace an untraced forward writes into: traced and untraced forward run one code path.
    scratch: Trace,
    /// Residual stream of the step being computed, `[C]`.
    x: Vec<f32>,
    /// The FFN's output before it joins the residual stream, `[C]`.
    block_out: Vec<f32>,
    logits: Vec<f32>,
    g: GradScratch,
}

impl Rwkv7 {
    /// A network and its parameters, all zero: the layout that [`Rwkv7::new_random`] fills
    /// with seeded values and the model-file loader fills by name.
    pub fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        cfg.validate()?;
        let mut params = ParamSet::new();
        let slots = register(&cfg, &mut params);
        let net = Self::with_slots(cfg, slots, &params);
        Ok((net, params))
    }

    /// A freshly initialised network and its parameters.
    pub fn new_random(cfg: Config, seed: u64) -> Result<(Self, ParamSet)> {
        let (mut net, mut params) = Self::new(cfg)?;
        init_random(&net.slots, &mut params, seed);
        net.refresh(&params);
        Ok((net, params))
    }

    fn with_slots(cfg: Config, slots: Slots, params: &ParamSet) -> Self {
        let (c, f) = (cfg.hidden, cfg.intermediate);
        let rank = cfg
            .decay_rank
            .max(cfg.a_rank)
            .max(cfg.v_rank)
            .max(cfg.g_rank);
        let z = |n: usize| vec![0.0f32; n];
        let mut net = Rwkv7 {
            scratch: Trace::new(&cfg),
            x: z(c),
            block_out: z(c),
            logits: z(VOCAB),
            g: GradScratch {
                x: z(c),
                xn: z(c),
                tmp: z(c),
                f: z(f),
                y: z(c),
                yh: z(c),
                y_wkv: z(c),
                g: z(c),
                r: z(c),
                k: z(c),
                v: z(c),
                w: z(c),
                b: z(c),
                kk: z(c),
                a: z(c),
                kt: z(c),
                vt: z(c),
                v_first: z(c),
                pre: z(c),
                rank: z(rank),
                shift: std::array::from_fn(|_| z(c)),
                s_row: z(N),
                s_new: z(N),
            },
            cfg,
            slots,
        };
        net.refresh(params);
        net
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// One forward step: reads `token` and advances `state`. Without a trace it skips the
    /// copies that only backward reads, and without `logits` the LM head: neither changes a
    /// bit of the state or of the logits.
    fn step(
        &mut self,
        params: &ParamSet,
        state: &mut State,
        token: u8,
        trace: Option<&mut Trace>,
        logits: bool,
    ) {
        let traced = trace.is_some();
        let tr = match trace {
            Some(t) => t,
            None => &mut self.scratch,
        };
        let (c, f, h) = (self.cfg.hidden, self.cfg.intermediate, self.cfg.heads());
        let (dw, da, dv, dg) = (
            self.cfg.decay_rank,
            self.cfg.a_rank,
            self.cfg.v_rank,
            self.cfg.g_rank,
        );
        let p = |slot: Slot| slot.of(&params.data);
        let sl = &self.slots;
        let x = &mut self.x;
        tr.token = token;

        // 1. x = embed[token]   (a byte is always a valid row: no clamping, unlike the
        //    reference, which silently clamps out-of-range token ids)
        tr.x0.copy_from_slice(p(sl.embed.row(token as usize, c)));
        // 2. x = LN_pre(x)   (block 0's pre-norm)
        layer_norm(&tr.x0, p(sl.pre_norm_w), p(sl.pre_norm_b), LN_EPS, x);

        for ((ls, st), lt) in sl
            .layers
            .iter()
            .zip(state.layers.iter_mut())
            .zip(tr.layers.iter_mut())
        {
            if traced {
                lt.x_in.copy_from_slice(x);
            }
            // 3. xn = LN_attn(x)
            layer_norm(x, p(ls.attn_norm_w), p(ls.attn_norm_b), LN_EPS, &mut lt.xn);
            // 4. x_m = xn + μ_m ⊙ (prev − xn) for m ∈ {r, w, k, v, a, g};   prev ← xn
            lt.att_prev.copy_from_slice(&st.att_prev);
            for (out, &mix) in lt.shift.iter_mut().zip(&ls.mix) {
                token_shift(&lt.xn, &lt.att_prev, p(mix), out);
            }
            st.att_prev.copy_from_slice(&lt.xn);
            // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v
            kernels::gemv(p(ls.r_proj), &lt.shift[R], &mut lt.r, c, c);
            kernels::gemv(p(ls.k_proj), &lt.shift[K], &mut lt.kt, c, c);
            kernels::gemv(p(ls.v_proj), &lt.shift[VAL], &mut lt.vt, c, c);
            // 6. w = exp(−e^{−½} · σ(W2 tanh(W1 x_w) + w0))
            kernels::gemv(p(ls.w1), &lt.shift[W], &mut lt.w_hidden, dw, c);
            for v in lt.w_hidden.iter_mut() {
                *v = math::tanh(*v);
            }
            kernels::gemv(p(ls.w2), &lt.w_hidden, &mut lt.w_sig, c, dw);
            kernels::add_assign(&mut lt.w_sig, p(ls.w0));
            for (s, wd) in lt.w_sig.iter_mut().zip(lt.w.iter_mut()) {
                *s = math::sigmoid(*s);
                *wd = math::exp(-DECAY_SCALE * *s);
            }
            // 7. a = σ(A2 A1 x_a + a0)
            kernels::gemv(p(ls.a1), &lt.shift[A], &mut lt.a_hidden, da, c);
            kernels::gemv(p(ls.a2), &lt.a_hidden, &mut lt.a, c, da);
            kernels::add_assign(&mut lt.a, p(ls.a0));
            for v in lt.a.iter_mut() {
                *v = math::sigmoid(*v);
            }
            // 8. g = G2 σ(G1 x_g)
            kernels::gemv(p(ls.g1), &lt.shift[G], &mut lt.g_hidden, dg, c);
            for v in lt.g_hidden.iter_mut() {
                *v = math::sigmoid(*v);
            }
            kernels::gemv(p(ls.g2), &lt.g_hidden, &mut lt.g, c, dg);
            // 9. block 0: v = ṽ and v_first = ṽ;
            //    later blocks: ν = σ(V2 V1 x_v + v0),  v = ṽ + (v_first − ṽ) ⊙ ν
            match &ls.v_lora {
                None => {
                    lt.v.copy_from_slice(&lt.vt);
                    tr.v_first.copy_from_slice(&lt.vt);
                }
                Some(vl) => {
                    kernels::gemv(p(vl.v1), &lt.shift[VAL], &mut lt.v_hidden, dv, c);
                    kernels::gemv(p(vl.v2), &lt.v_hidden, &mut lt.nu, c, dv);
                    kernels::add_assign(&mut lt.nu, p(vl.v0));
                    for (((v, nu), &vt), &vf) in
                        lt.v.iter_mut()
                            .zip(lt.nu.iter_mut())
                            .zip(&lt.vt)
                            .zip(&tr.v_first)
                    {
                        *nu = math::sigmoid(*nu);
                        *v = vt + (vf - vt) * *nu;
                    }
                }
            }
            // 10. kk = (k̃ ⊙ k_k) / max(‖k̃ ⊙ k_k‖, ε)   per head
            for ((kk, &kt), &kkp) in lt.kk.iter_mut().zip(&lt.kt).zip(p(ls.k_k)) {
                *kk = kt * kkp;
            }
            for hd in 0..h {
                let head = &mut lt.kk[hd * N..(hd + 1) * N];
                let norm = kernels::dot(head, head).sqrt();
                lt.kk_norm[hd] = norm;
                let den = if norm > KK_EPS { norm } else { KK_EPS };
                for v in head.iter_mut() {
                    *v /= den;
                }
            }
            // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a)
            for (((k, &kt), &a), &ka) in lt.k.iter_mut().zip(&lt.kt).zip(&lt.a).zip(p(ls.k_a)) {
                *k = kt * (1.0 + (a - 1.0) * ka);
            }
            // 12. per head, b = kk ⊙ a,  sa = S·kk,  S' = S·diag(w) − sa·bᵀ + v·kᵀ,  y = S'·r
            for ((b, &kk), &a) in lt.b.iter_mut().zip(&lt.kk).zip(&lt.a) {
                *b = kk * a;
            }
            if traced {
                lt.wkv_prev.copy_from_slice(&st.wkv);
            }
            for hd in 0..h {
                let hs = hd * N..(hd + 1) * N;
                let (w, b, k, r, kk) = (
                    &lt.w[hs.clone()],
                    &lt.b[hs.clone()],
                    &lt.k[hs.clone()],
                    &lt.r[hs.clone()],
                    &lt.kk[hs.clone()],
                );
                for i in 0..N {
                    let ci = hd * N + i;
                    let row = &mut st.wkv[ci * N..(ci + 1) * N];
                    let sa = kernels::dot(row, kk);
                    lt.sa[ci] = sa;
                    let vi = lt.v[ci];
                    for (((s, &wj), &bj), &kj) in row.iter_mut().zip(w).zip(b).zip(k) {
                        *s = wkv_cell(*s, wj, sa, bj, vi, kj);
                    }
                    lt.y_wkv[ci] = kernels::dot(row, r);
                }
            }
            // 13. y = GroupNorm(y)   (a LayerNorm per head, ε = 64e-5)
            // 14. y += (Σ_head r ⊙ k ⊙ r_k) · v   (the current byte's own r·k bonus)
            let (gn_w, gn_b, r_k) = (p(ls.gn_w), p(ls.gn_b), p(ls.r_k));
            for hd in 0..h {
                let hs = hd * N..(hd + 1) * N;
                let yh = &mut lt.y_head[hs.clone()];
                layer_norm(
                    &lt.y_wkv[hs.clone()],
                    &gn_w[hs.clone()],
                    &gn_b[hs.clone()],
                    GN_EPS,
                    yh,
                );
                let mut alpha = 0.0f32;
                for ((&r, &k), &rk) in lt.r[hs.clone()]
                    .iter()
                    .zip(&lt.k[hs.clone()])
                    .zip(&r_k[hs.clone()])
                {
                    alpha += r * k * rk;
                }
                lt.alpha[hd] = alpha;
                for (y, &v) in yh.iter_mut().zip(&lt.v[hs]) {
                    *y += alpha * v;
                }
            }
            // 15. y = y ⊙ g
            for ((yg, &yh), &g) in lt.y_gate.iter_mut().zip(&lt.y_head).zip(&lt.g) {
                *yg = yh * g;
            }
            // 16. x += W_o y
            kernels::gemv(p(ls.o_proj), &lt.y_gate, &mut lt.x_mid, c, c);
            for (m, &xi) in lt.x_mid.iter_mut().zip(x.iter()) {
                *m += xi;
            }
            x.copy_from_slice(&lt.x_mid);

            // 17. xf = LN_ffn(x)
            layer_norm(x, p(ls.ffn_norm_w), p(ls.ffn_norm_b), LN_EPS, &mut lt.xf);
            // 18. x_f = xf + μ ⊙ (prev − xf);   prev ← xf
            lt.ffn_prev.copy_from_slice(&st.ffn_prev);
            token_shift(&lt.xf, &lt.ffn_prev, p(ls.ffn_mix), &mut lt.ffn_x);
            st.ffn_prev.copy_from_slice(&lt.xf);
            // 19. h = relu(W_key x_f)²
            kernels::gemv(p(ls.ffn_key), &lt.ffn_x, &mut lt.ffn_pre, f, c);
            for (hv, &pre) in lt.ffn_h.iter_mut().zip(&lt.ffn_pre) {
                let r = if pre > 0.0 { pre } else { 0.0 };
                *hv = r * r;
            }
            // 20. x += W_value h
            kernels::gemv(p(ls.ffn_value), &lt.ffn_h, &mut self.block_out, c, f);
            kernels::add_assign(x, &self.block_out);
        }

        // 21. logits = lm_head · LN_out(x)
        if logits {
            tr.x_final.copy_from_slice(x);
            let (norm_w, norm_b) = (p(sl.final_norm_w), p(sl.final_norm_b));
            layer_norm(x, norm_w, norm_b, LN_EPS, &mut tr.xo);
            kernels::gemv(p(sl.lm_head), &tr.xo, &mut self.logits, VOCAB, c);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Building blocks shared by forward and backward
// ---------------------------------------------------------------------------------------------

/// One cell of the delta-rule update, `S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j`. Forward and the
/// recomputation in backward both go through here, so they agree bit for bit.
#[inline(always)]
fn wkv_cell(s: f32, w: f32, sa: f32, b: f32, v: f32, k: f32) -> f32 {
    s * w - sa * b + v * k
}

fn zero_state(s: &mut State) {
    for l in &mut s.layers {
        l.att_prev.fill(0.0);
        l.wkv.fill(0.0);
        l.ffn_prev.fill(0.0);
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
    type State = State;
    type Trace = Trace;
    type Carry = Carry;

    fn groups(&self) -> &'static [&'static str] {
        GROUPS
    }

    fn new_state(&self) -> State {
        let (c, h) = (self.cfg.hidden, self.cfg.heads());
        State {
            layers: (0..self.cfg.layers)
                .map(|_| LayerState {
                    att_prev: vec![0.0; c],
                    wkv: vec![0.0; h * N * N],
                    ffn_prev: vec![0.0; c],
                })
                .collect(),
        }
    }

    fn new_trace(&self) -> Trace {
        Trace::new(&self.cfg)
    }

    fn new_carry(&self) -> Carry {
        self.new_state()
    }

    fn clear_carry(&self, carry: &mut Carry) {
        zero_state(carry);
    }

    /// RWKV-7 reads every weight as it is stored: no cache depends on the parameters.
    fn refresh(&mut self, _params: &ParamSet) {}

    fn state_tensors<'s>(&self, state: &'s State) -> Vec<StateTensor<&'s [f32]>> {
        let (c, h) = (self.cfg.hidden, self.cfg.heads());
        let mut out = Vec::new();
        for (l, ls) in state.layers.iter().enumerate() {
            out.push(StateTensor {
                name: format!("layers.{l}.att_prev"),
                shape: vec![c],
                data: ls.att_prev.as_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.wkv"),
                shape: vec![h, N, N],
                data: ls.wkv.as_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.ffn_prev"),
                shape: vec![c],
                data: ls.ffn_prev.as_slice(),
            });
        }
        out
    }

    fn state_tensors_mut<'s>(&self, state: &'s mut State) -> Vec<StateTensor<&'s mut [f32]>> {
        let (c, h) = (self.cfg.hidden, self.cfg.heads());
        let mut out = Vec::new();
        for (l, ls) in state.layers.iter_mut().enumerate() {
            out.push(StateTensor {
                name: format!("layers.{l}.att_prev"),
                shape: vec![c],
                data: ls.att_prev.as_mut_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.wkv"),
                shape: vec![h, N, N],
                data: ls.wkv.as_mut_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.ffn_prev"),
                shape: vec![c],
                data: ls.ffn_prev.as_mut_slice(),
            });
        }
        out
    }

    fn forward(
        &mut self,
        params: &ParamSet,
        state: &mut State,
        token: u8,
        trace: Option<&mut Trace>,
    ) -> &[f32] {
        self.step(params, state, token, trace, true);
        &self.logits
    }

    fn advance(&mut self, params: &ParamSet, state: &mut State, token: u8) {
        self.step(params, state, token, None, false);
    }

    fn backward(
        &mut self,
        params: &ParamSet,
        tr: &Trace,
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        mut carry: Option<&mut Carry>,
    ) {
        let (c, f, h) = (self.cfg.hidden, self.cfg.intermediate, self.cfg.heads());
        let (dw, da, dv, dg) = (
            self.cfg.decay_rank,
            self.cfg.a_rank,
            self.cfg.v_rank,
            self.cfg.g_rank,
        );
        let p = |slot: Slot| slot.of(&params.data);
        let sl = &self.slots;
        let g = &mut self.g;
        let (train_head, train_attn, train_ffn) =
            (scope.has(HEAD), scope.has(ATTN), scope.has(FFN));
        let below = [EMBED, PRE_NORM, ATTN_NORM, FFN_NORM, ATTN, FFN]
            .iter()
            .any(|&gr| scope.has(gr));
        if !below {
            // No parameter in scope depends on the state, so its gradient is not computed; the
            // carry is left zero rather than stale.
            if let Some(cr) = carry.as_deref_mut() {
                zero_state(cr);
            }
        }

        // 21. logits = lm_head · xo,   xo = LN_out(x_final)
        if !train_head && !below {
            return;
        }
        let g_w = train_head.then(|| sl.lm_head.of_mut(grads));
        kernels::linear_backward(p(sl.lm_head), grad_logits, &tr.xo, &mut g.xn, g_w, VOCAB, c);
        if train_head {
            layer_norm_param_grads(
                &tr.x_final,
                LN_EPS,
                &g.xn,
                grads,
                sl.final_norm_w,
                sl.final_norm_b,
            );
        }
        if !below {
            return;
        }
        layer_norm_backward(&tr.x_final, p(sl.final_norm_w), LN_EPS, &g.xn, &mut g.x);
        g.v_first.fill(0.0);

        for l in (0..self.cfg.layers).rev() {
            let (ls, lt) = (&sl.layers[l], &tr.layers[l]);
            let mut lc = carry.as_deref_mut().map(|cr| &mut cr.layers[l]);

            // 20. x_out = x_mid + W_value h   (g.x = dL/dx_out, and the residual passes it on)
            let g_w = train_ffn.then(|| ls.ffn_value.of_mut(grads));
            kernels::linear_backward(p(ls.ffn_value), &g.x, &lt.ffn_h, &mut g.f, g_w, c, f);
            // 19. h = relu(pre)²:   dh/dpre = 2·pre where pre > 0
            for (gf, &pre) in g.f.iter_mut().zip(&lt.ffn_pre) {
                *gf = if pre > 0.0 { *gf * (2.0 * pre) } else { 0.0 };
            }
            let g_w = train_ffn.then(|| ls.ffn_key.of_mut(grads));
            kernels::linear_backward(p(ls.ffn_key), &g.f, &lt.ffn_x, &mut g.tmp, g_w, f, c);
            // 18. ffn_x = xf + μ ⊙ (prev − xf), and xf became the next byte's prev: what later
            //     bytes pass back for it joins g.xn; the carry then holds dL/d(prev).
            match lc.as_deref_mut() {
                Some(lc) => {
                    g.xn.copy_from_slice(&lc.ffn_prev);
                    lc.ffn_prev.fill(0.0);
                }
                None => g.xn.fill(0.0),
            }
            token_shift_backward(
                &g.tmp,
                &lt.xf,
                &lt.ffn_prev,
                p(ls.ffn_mix),
                &mut g.xn,
                lc.as_deref_mut().map(|lc| &mut lc.ffn_prev[..]),
                train_ffn.then(|| ls.ffn_mix.of_mut(grads)),
            );
            // 17. xf = LN_ffn(x_mid)
            if scope.has(FFN_NORM) {
                layer_norm_param_grads(
                    &lt.x_mid,
                    LN_EPS,
                    &g.xn,
                    grads,
                    ls.ffn_norm_w,
                    ls.ffn_norm_b,
                );
            }
            layer_norm_backward(&lt.x_mid, p(ls.ffn_norm_w), LN_EPS, &g.xn, &mut g.tmp);
            kernels::add_assign(&mut g.x, &g.tmp);

            // 16. x_mid = x_in + W_o y_gate   (g.x = dL/dx_mid)
            let g_w = train_attn.then(|| ls.o_proj.of_mut(grads));
            kernels::linear_backward(p(ls.o_proj), &g.x, &lt.y_gate, &mut g.y, g_w, c, c);
            // 15. y_gate = y_head ⊙ g
            for i in 0..c {
                g.g[i] = g.y[i] * lt.y_head[i];
                g.yh[i] = g.y[i] * lt.g[i];
            }
            // 14. y_head = GN(y_wkv) + α·v,   α = Σ r ⊙ k ⊙ r_k per head
            // 13. GN: a LayerNorm per head
            let r_k = p(ls.r_k);
            for hd in 0..h {
                let hs = hd * N..(hd + 1) * N;
                let alpha = lt.alpha[hd];
                let g_alpha = kernels::dot(&g.yh[hs.clone()], &lt.v[hs.clone()]);
                for j in hs.clone() {
                    g.v[j] = g.yh[j] * alpha;
                    g.r[j] = g_alpha * r_k[j] * lt.k[j];
                    g.k[j] = g_alpha * r_k[j] * lt.r[j];
                }
                if train_attn {
                    let gr = &mut ls.r_k.of_mut(grads)[hs.clone()];
                    for (j, grk) in hs.clone().zip(gr.iter_mut()) {
                        *grk += g_alpha * lt.r[j] * lt.k[j];
                    }
                    let (gn_w, gn_b) = (ls.gn_w.row(hd, N), ls.gn_b.row(hd, N));
                    layer_norm_param_grads(
                        &lt.y_wkv[hs.clone()],
                        GN_EPS,
                        &g.yh[hs.clone()],
                        grads,
                        gn_w,
                        gn_b,
                    );
                }
                let gn_w = &p(ls.gn_w)[hs.clone()];
                layer_norm_backward(
                    &lt.y_wkv[hs.clone()],
                    gn_w,
                    GN_EPS,
                    &g.yh[hs.clone()],
                    &mut g.y_wkv[hs],
                );
            }

            // 12. per head and row i: sa_i = S_i·kk,  S'_i = S_i ⊙ w − sa_i·b + v_i·k,
            //     y_i = S'_i·r. The state after the step is recomputed row by row from the one
            //     before (same cell function, same bits) instead of being kept in the trace.
            g.w.fill(0.0);
            g.b.fill(0.0);
            g.kk.fill(0.0);
            for hd in 0..h {
                let hs = hd * N..(hd + 1) * N;
                let (w, b, k, r, kk) = (
                    &lt.w[hs.clone()],
                    &lt.b[hs.clone()],
                    &lt.k[hs.clone()],
                    &lt.r[hs.clone()],
                    &lt.kk[hs.clone()],
                );
                for i in 0..N {
                    let ci = hd * N + i;
                    let row = ci * N..(ci + 1) * N;
                    let s_prev = &lt.wkv_prev[row.clone()];
                    let (sa, vi, gy) = (lt.sa[ci], lt.v[ci], g.y_wkv[ci]);
                    // dL/dS'_i: what later bytes pass back, plus y_i = S'_i·r.
                    match lc.as_deref() {
                        Some(lc) => g.s_row.copy_from_slice(&lc.wkv[row.clone()]),
                        None => g.s_row.fill(0.0),
                    }
                    kernels::axpy(&mut g.s_row, gy, r);
                    for j in 0..N {
                        g.s_new[j] = wkv_cell(s_prev[j], w[j], sa, b[j], vi, k[j]);
                    }
                    kernels::axpy(&mut g.r[hs.clone()], gy, &g.s_new);
                    // S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j
                    for ((gw, &gs), &sp) in g.w[hs.clone()].iter_mut().zip(&g.s_row).zip(s_prev) {
                        *gw += gs * sp;
                    }
                    kernels::axpy(&mut g.k[hs.clone()], vi, &g.s_row);
                    kernels::axpy(&mut g.b[hs.clone()], -sa, &g.s_row);
                    g.v[ci] += kernels::dot(&g.s_row, k);
                    let g_sa = -kernels::dot(&g.s_row, b);
                    // sa_i = S_i·kk
                    kernels::axpy(&mut g.kk[hs.clone()], g_sa, s_prev);
                    if let Some(lc) = lc.as_deref_mut() {
                        let out = &mut lc.wkv[row];
                        for j in 0..N {
                            out[j] = g.s_row[j] * w[j] + g_sa * kk[j];
                        }
                    }
                }
            }
            //     b = kk ⊙ a
            for i in 0..c {
                g.a[i] = g.b[i] * lt.kk[i];
                g.kk[i] += g.b[i] * lt.a[i];
            }
            // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a)
            for (i, &ka) in p(ls.k_a).iter().enumerate() {
                g.kt[i] = g.k[i] * (1.0 + (lt.a[i] - 1.0) * ka);
                g.a[i] += g.k[i] * lt.kt[i] * ka;
            }
            if train_attn {
                for (i, gka) in ls.k_a.of_mut(grads).iter_mut().enumerate() {
                    *gka += g.k[i] * lt.kt[i] * (lt.a[i] - 1.0);
                }
            }
            // 10. kk = q / max(‖q‖, ε) per head, q = k̃ ⊙ k_k:
            //     dL/dq = (g − kk·(g·kk)) / ‖q‖, or g / ε where the floor was taken
            for hd in 0..h {
                let hs = hd * N..(hd + 1) * N;
                let norm = lt.kk_norm[hd];
                if norm > KK_EPS {
                    let d = kernels::dot(&g.kk[hs.clone()], &lt.kk[hs.clone()]);
                    for j in hs {
                        g.tmp[j] = (g.kk[j] - lt.kk[j] * d) / norm;
                    }
                } else {
                    for j in hs {
                        g.tmp[j] = g.kk[j] / KK_EPS;
                    }
                }
            }
            for ((gkt, &gq), &kkp) in g.kt.iter_mut().zip(&g.tmp).zip(p(ls.k_k)) {
                *gkt += gq * kkp;
            }
            if train_attn {
                for (i, gkk) in ls.k_k.of_mut(grads).iter_mut().enumerate() {
                    *gkk += g.tmp[i] * lt.kt[i];
                }
            }
            // 9. block 0: v = ṽ = v_first, which every later block also read;
            //    later blocks: v = ṽ + (v_first − ṽ) ⊙ ν,  ν = σ(V2 V1 x_v + v0)
            match &ls.v_lora {
                None => {
                    for i in 0..c {
                        g.vt[i] = g.v[i] + g.v_first[i];
                    }
                    g.shift[VAL].fill(0.0);
                }
                Some(vl) => {
                    for i in 0..c {
                        let nu = lt.nu[i];
                        g.vt[i] = g.v[i] * (1.0 - nu);
                        g.v_first[i] += g.v[i] * nu;
                        g.pre[i] = g.v[i] * (tr.v_first[i] - lt.vt[i]) * (nu * (1.0 - nu));
                    }
                    if train_attn {
                        kernels::add_assign(vl.v0.of_mut(grads), &g.pre);
                    }
                    let g_w = train_attn.then(|| vl.v2.of_mut(grads));
                    let v_hidden = &lt.v_hidden;
                    kernels::linear_backward(p(vl.v2), &g.pre, v_hidden, &mut g.rank, g_w, c, dv);
                    // x_v also feeds ṽ: step 5 adds W_vᵀ·dL/dṽ to this.
                    let g_w = train_attn.then(|| vl.v1.of_mut(grads));
                    let (x_v, g_x_v) = (&lt.shift[VAL], &mut g.shift[VAL]);
                    kernels::linear_backward(p(vl.v1), &g.rank, x_v, g_x_v, g_w, dv, c);
                }
            }
            // 8. g = G2 σ(G1 x_g)
            let g_w = train_attn.then(|| ls.g2.of_mut(grads));
            kernels::linear_backward(p(ls.g2), &g.g, &lt.g_hidden, &mut g.rank, g_w, c, dg);
            for (gr, &s) in g.rank[..dg].iter_mut().zip(&lt.g_hidden) {
                *gr *= s * (1.0 - s);
            }
            let g_w = train_attn.then(|| ls.g1.of_mut(grads));
            let (x_g, g_x_g) = (&lt.shift[G], &mut g.shift[G]);
            kernels::linear_backward(p(ls.g1), &g.rank, x_g, g_x_g, g_w, dg, c);
            // 7. a = σ(A2 A1 x_a + a0)
            for i in 0..c {
                let a = lt.a[i];
                g.pre[i] = g.a[i] * (a * (1.0 - a));
            }
            if train_attn {
                kernels::add_assign(ls.a0.of_mut(grads), &g.pre);
            }
            let g_w = train_attn.then(|| ls.a2.of_mut(grads));
            kernels::linear_backward(p(ls.a2), &g.pre, &lt.a_hidden, &mut g.rank, g_w, c, da);
            let g_w = train_attn.then(|| ls.a1.of_mut(grads));
            let (x_a, g_x_a) = (&lt.shift[A], &mut g.shift[A]);
            kernels::linear_backward(p(ls.a1), &g.rank, x_a, g_x_a, g_w, da, c);
            // 6. w = exp(−e^{−½} s),  s = σ(W2 tanh(W1 x_w) + w0):  dw/dpre = −e^{−½}·w·s(1 − s)
            for i in 0..c {
                let s = lt.w_sig[i];
                g.pre[i] = g.w[i] * (-DECAY_SCALE * lt.w[i]) * (s * (1.0 - s));
            }
            if train_attn {
                kernels::add_assign(ls.w0.of_mut(grads), &g.pre);
            }
            let g_w = train_attn.then(|| ls.w2.of_mut(grads));
            kernels::linear_backward(p(ls.w2), &g.pre, &lt.w_hidden, &mut g.rank, g_w, c, dw);
            for (gr, &t) in g.rank[..dw].iter_mut().zip(&lt.w_hidden) {
                *gr *= 1.0 - t * t;
            }
            let g_w = train_attn.then(|| ls.w1.of_mut(grads));
            let (x_w, g_x_w) = (&lt.shift[W], &mut g.shift[W]);
            kernels::linear_backward(p(ls.w1), &g.rank, x_w, g_x_w, g_w, dw, c);
            // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v
            let g_w = train_attn.then(|| ls.r_proj.of_mut(grads));
            let (x_r, g_x_r) = (&lt.shift[R], &mut g.shift[R]);
            kernels::linear_backward(p(ls.r_proj), &g.r, x_r, g_x_r, g_w, c, c);
            let g_w = train_attn.then(|| ls.k_proj.of_mut(grads));
            let (x_k, g_x_k) = (&lt.shift[K], &mut g.shift[K]);
            kernels::linear_backward(p(ls.k_proj), &g.kt, x_k, g_x_k, g_w, c, c);
            let g_w = train_attn.then(|| ls.v_proj.of_mut(grads));
            let (x_v, g_x_v) = (&lt.shift[VAL], &mut g.shift[VAL]);
            kernels::linear_backward_acc(p(ls.v_proj), &g.vt, x_v, g_x_v, g_w, c, c);
            // 4. x_m = xn + μ_m ⊙ (prev − xn), and xn became the next byte's prev
            match lc.as_deref_mut() {
                Some(lc) => {
                    g.xn.copy_from_slice(&lc.att_prev);
                    lc.att_prev.fill(0.0);
                }
                None => g.xn.fill(0.0),
            }
            for m in 0..SHIFTS {
                token_shift_backward(
                    &g.shift[m],
                    &lt.xn,
                    &lt.att_prev,
                    p(ls.mix[m]),
                    &mut g.xn,
                    lc.as_deref_mut().map(|lc| &mut lc.att_prev[..]),
                    train_attn.then(|| ls.mix[m].of_mut(grads)),
                );
            }
            // 3. xn = LN_attn(x_in); the residual passes g.x through
            if scope.has(ATTN_NORM) {
                layer_norm_param_grads(
                    &lt.x_in,
                    LN_EPS,
                    &g.xn,
                    grads,
                    ls.attn_norm_w,
                    ls.attn_norm_b,
                );
            }
            layer_norm_backward(&lt.x_in, p(ls.attn_norm_w), LN_EPS, &g.xn, &mut g.tmp);
            kernels::add_assign(&mut g.x, &g.tmp);
        }

        // 2. x = LN_pre(x0)
        if scope.has(PRE_NORM) {
            layer_norm_param_grads(&tr.x0, LN_EPS, &g.x, grads, sl.pre_norm_w, sl.pre_norm_b);
        }
        if scope.has(EMBED) {
            layer_norm_backward(&tr.x0, p(sl.pre_norm_w), LN_EPS, &g.x, &mut g.tmp);
            // 1. x0 = embed[token]
            let row = sl.embed.row(tr.token as usize, c);
            kernels::add_assign(row.of_mut(grads), &g.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two blocks (so the value residual is exercised), one head, and widths and ranks that are
    /// not multiples of the SIMD lane count.
    fn small_cfg() -> Config {
        Config {
            hidden: 64,
            layers: 2,
            intermediate: 48,
            decay_rank: 8,
            a_rank: 6,
            v_rank: 5,
            g_rank: 7,
        }
    }

    /// Moves every weight by uniform noise of `scale`: the initial weights are tiny (±0.02) and
    /// many are equal (k_k, k_a, r_k, norms), which leaves most gradients too small for finite
    /// differences to check; after spreading, every path carries signal.
    fn spread(params: &mut ParamSet, seed: u64, scale: f32) {
        let mut rng = InitRng::new(seed);
        for v in params.data.iter_mut() {
            *v += (rng.next_f32() - 0.5) * 2.0 * scale;
        }
    }

    fn spread_net(seed: u64) -> (Rwkv7, ParamSet) {
        let (net, mut params) = Rwkv7::new_random(small_cfg(), seed).unwrap();
        spread(&mut params, seed ^ 0x5eed, 0.3);
        (net, params)
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn state_bits(s: &State) -> Vec<u32> {
        s.layers
            .iter()
            .flat_map(|l| {
                bits(&l.att_prev)
                    .into_iter()
                    .chain(bits(&l.wkv))
                    .chain(bits(&l.ffn_prev))
            })
            .collect()
    }

    /// −ln softmax(logits)[target], in f64 (tests are outside the determinism contract).
    fn nll(logits: &[f32], target: u8) -> f64 {
        let max = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &z| m.max(z as f64));
        let sum: f64 = logits.iter().map(|&z| (z as f64 - max).exp()).sum();
        sum.ln() - (logits[target as usize] as f64 - max)
    }

    /// `(one_hot(target) − p) · scale`: the ascent direction of `scale · ln p(target)`.
    fn grad_logits(logits: &[f32], target: u8, scale: f32) -> Vec<f32> {
        let max = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &z| m.max(z as f64));
        let e: Vec<f64> = logits.iter().map(|&z| (z as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter()
            .enumerate()
            .map(|(i, &ei)| {
                ((if i == target as usize { 1.0 } else { 0.0 }) - ei / sum) as f32 * scale
            })
            .collect()
    }

    fn run(net: &mut Rwkv7, params: &ParamSet, bytes: &[u8]) -> State {
        let mut state = net.new_state();
        for &b in bytes {
            net.forward(params, &mut state, b, None);
        }
        state
    }

    /// Mean over the segment of −ln p(target), run from `start` (each pair is input, target).
    fn segment_loss(net: &mut Rwkv7, params: &ParamSet, start: &State, seg: &[(u8, u8)]) -> f64 {
        let mut state = start.clone();
        let mut loss = 0.0f64;
        for &(input, target) in seg {
            loss += nll(net.forward(params, &mut state, input, None), target);
        }
        loss / seg.len() as f64
    }

    /// The analytic ascent gradient of the segment's mean log-likelihood: TBPTT with a carry
    /// across the segment (returned: dL/d(start state)), or, for a single step, the one-step
    /// update without a carry.
    fn segment_grads(
        net: &mut Rwkv7,
        params: &ParamSet,
        start: &State,
        seg: &[(u8, u8)],
        scope: Scope,
        with_carry: bool,
    ) -> (Vec<f32>, Carry) {
        assert!(with_carry || seg.len() == 1);
        let mut state = start.clone();
        let mut traces = Vec::new();
        let mut gls = Vec::new();
        for &(input, target) in seg {
            let mut tr = net.new_trace();
            let logits = net.forward(params, &mut state, input, Some(&mut tr));
            gls.push(grad_logits(logits, target, 1.0 / seg.len() as f32));
            traces.push(tr);
        }
        let mut grads = params.zeros_like();
        let mut carry = net.new_carry();
        for j in (0..seg.len()).rev() {
            let c = with_carry.then_some(&mut carry);
            net.backward(params, &traces[j], &gls[j], scope, &mut grads, c);
        }
        (grads, carry)
    }

    /// Finite-difference derivative of the segment loss along `dir` in the parameters of `slot`,
    /// as an ascent direction. Richardson extrapolation of central differences at steps `h` and
    /// `h/2` cancels the `h²` error term, which allows a step large enough that f32 rounding in
    /// the forward pass (about 1e-7 of the loss) stays far below the gradients checked.
    fn numeric_grad(
        net: &mut Rwkv7,
        params: &mut ParamSet,
        start: &State,
        seg: &[(u8, u8)],
        slot: Slot,
        dir: &[f32],
    ) -> f64 {
        let base = slot.of(&params.data).to_vec();
        let mut loss_at = |t: f32| {
            for ((p, &b), &d) in slot.of_mut(&mut params.data).iter_mut().zip(&base).zip(dir) {
                *p = b + t * d;
            }
            segment_loss(net, params, start, seg)
        };
        let h = 2e-2f32;
        let central = |plus: f64, minus: f64, step: f32| -(plus - minus) / (2.0 * step as f64);
        let d_h = central(loss_at(h), loss_at(-h), h);
        let d_half = central(loss_at(h / 2.0), loss_at(-h / 2.0), h / 2.0);
        slot.of_mut(&mut params.data).copy_from_slice(&base);
        (4.0 * d_half - d_h) / 3.0
    }

    fn close(analytic: f64, numeric: f64) -> bool {
        let scale = analytic.abs().max(numeric.abs());
        (analytic - numeric).abs() <= 1e-2 * scale + 1e-4
    }

    /// Checks every tensor (so every group) against finite differences: the derivative along
    /// the tensor's own analytic gradient (which must not vanish), the element with the
    /// largest gradient, and one more fixed element.
    fn check_every_tensor(
        net: &mut Rwkv7,
        params: &mut ParamSet,
        start: &State,
        seg: &[(u8, u8)],
        grads: &[f32],
    ) {
        let tensors = params.tensors.clone();
        let mut groups_seen = [false; 8];
        for t in &tensors {
            let g = t.slot.of(grads);
            let norm = g
                .iter()
                .map(|&v| (v as f64) * (v as f64))
                .sum::<f64>()
                .sqrt();
            assert!(
                norm > 1e-3,
                "{}: gradient norm {norm} is too small to test",
                t.name
            );
            groups_seen[t.group as usize] = true;
            let unit: Vec<f32> = g.iter().map(|&v| (v as f64 / norm) as f32).collect();
            let along = numeric_grad(net, params, start, seg, t.slot, &unit);
            assert!(
                close(norm, along),
                "{}: |g| = {norm} but the loss moves by {along} along g",
                t.name
            );

            let imax = (0..g.len())
                .max_by(|&i, &j| g[i].abs().total_cmp(&g[j].abs()))
                .unwrap();
            for idx in [imax, t.slot.len * 7 / 13] {
                let mut one_hot = vec![0.0f32; g.len()];
                one_hot[idx] = 1.0;
                let numeric = numeric_grad(net, params, start, seg, t.slot, &one_hot);
                assert!(
                    close(g[idx] as f64, numeric),
                    "{}[{idx}]: analytic {} vs numeric {numeric}",
                    t.name,
                    g[idx]
                );
            }
        }
        // Every group but the output bias (which the network does not own) was probed.
        assert_eq!(
            groups_seen,
            [true, true, true, true, true, true, true, false]
        );
    }

    const TEXT: &[u8] = b"lmzip: the quick brown fox";

    #[test]
    fn config_validation() {
        let cfg = Config::default();
        cfg.validate().unwrap();
        assert_eq!(cfg.heads(), 2);
        assert!(small_cfg().validate().is_ok());
        let bad = [
            Config {
                hidden: 96,
                ..small_cfg()
            },
            Config {
                hidden: 0,
                ..small_cfg()
            },
            Config {
                hidden: 1 << 15,
                ..small_cfg()
            },
            Config {
                layers: 0,
                ..small_cfg()
            },
            Config {
                layers: 65,
                ..small_cfg()
            },
            Config {
                intermediate: 0,
                ..small_cfg()
            },
            Config {
                decay_rank: 0,
                ..small_cfg()
            },
            Config {
                a_rank: 0,
                ..small_cfg()
            },
            Config {
                v_rank: 0,
                ..small_cfg()
            },
            Config {
                g_rank: 0,
                ..small_cfg()
            },
        ];
        for cfg in bad {
            assert!(cfg.validate().is_err(), "{cfg:?} should be rejected");
            assert!(Rwkv7::new_random(cfg, 1).is_err());
        }
    }

    /// Floats a trace holds. The patterns name every field, so a new field fails to compile
    /// here until it is counted (and [`Config::trace_floats`] learns of it).
    fn trace_len(t: &Trace) -> usize {
        let Trace {
            token: _,
            x0,
            v_first,
            layers,
            x_final,
            xo,
        } = t;
        let per_layer = layers.iter().map(|l| {
            let LayerTrace {
                x_in,
                xn,
                att_prev,
                shift,
                r,
                kt,
                vt,
                w_hidden,
                w_sig,
                w,
                a_hidden,
                a,
                g_hidden,
                g,
                v_hidden,
                nu,
                v,
                kk,
                kk_norm,
                b,
                k,
                wkv_prev,
                sa,
                y_wkv,
                alpha,
                y_head,
                y_gate,
                x_mid,
                xf,
                ffn_prev,
                ffn_x,
                ffn_pre,
                ffn_h,
            } = l;
            let vectors = [
                x_in, xn, att_prev, r, kt, vt, w_hidden, w_sig, w, a_hidden, a, g_hidden, g,
                v_hidden, nu, v, kk, kk_norm, b, k, wkv_prev, sa, y_wkv, alpha, y_head, y_gate,
                x_mid, xf, ffn_prev, ffn_x, ffn_pre, ffn_h,
            ];
            vectors
                .into_iter()
                .chain(shift)
                .map(|v| v.len())
                .sum::<usize>()
        });
        per_layer.sum::<usize>() + x0.len() + v_first.len() + x_final.len() + xo.len()
    }

    fn state_len(s: &State) -> usize {
        s.layers
            .iter()
            .map(|l| {
                let LayerState {
                    att_prev,
                    wkv,
                    ffn_prev,
                } = l;
                att_prev.len() + wkv.len() + ffn_prev.len()
            })
            .sum()
    }

    /// The configurations whose size formulas are checked against what the network allocates:
    /// the default, a small one, and one block (no value-residual path).
    fn size_cases() -> [Config; 3] {
        [
            Config::default(),
            small_cfg(),
            Config {
                layers: 1,
                ..small_cfg()
            },
        ]
    }

    /// The sizes the recipe's limits are computed from are the sizes the network allocates.
    #[test]
    fn state_and_trace_match_their_size_formulas() {
        for cfg in size_cases() {
            let (net, _) = Rwkv7::new_random(cfg.clone(), 3).unwrap();
            assert_eq!(state_len(&net.new_state()), cfg.state_floats(), "{cfg:?}");
            assert_eq!(trace_len(&net.new_trace()), cfg.trace_floats(), "{cfg:?}");
        }
    }

    #[test]
    fn registry_matches_param_count_and_layout() {
        for cfg in size_cases() {
            let (_, params) = Rwkv7::new_random(cfg.clone(), 3).unwrap();
            assert_eq!(params.len(), cfg.param_count(), "{cfg:?}");
        }
        let (_, params) = Rwkv7::new_random(small_cfg(), 3).unwrap();
        assert!(
            params
                .find("model.layers.0.attn.v_lora.lora.0.weight")
                .is_none()
        );
        assert_eq!(
            params
                .find("model.layers.1.attn.v_lora.lora.0.weight")
                .unwrap()
                .shape,
            vec![5, 64]
        );
        assert_eq!(
            params
                .find("model.layers.1.attn.w_lora.lora.2.weight")
                .unwrap()
                .shape,
            vec![64, 8]
        );
        assert_eq!(
            params.find("model.layers.1.ffn.key.weight").unwrap().shape,
            vec![48, 64]
        );
        assert!(params.find("model.layers.1.pre_norm.weight").is_none());
        assert!(params.find("model.embeddings.weight").unwrap().sparse_rows);
        assert_eq!(params.find("model.norm.bias").unwrap().group, HEAD);
    }

    #[test]
    fn init_follows_the_seeded_draw_order() {
        let cfg = small_cfg();
        let (c, vc) = (cfg.hidden, VOCAB * cfg.hidden);
        let (_, params) = Rwkv7::new_random(cfg.clone(), 42).unwrap();
        let (_, again) = Rwkv7::new_random(cfg.clone(), 42).unwrap();
        let (_, other) = Rwkv7::new_random(cfg.clone(), 43).unwrap();
        assert_eq!(bits(&params.data), bits(&again.data));
        assert_ne!(bits(&params.data), bits(&other.data));

        // The k-th uniform draw of the generator, as the initialisation scales it.
        let draw = |k: usize, centre: f32| {
            let mut rng = InitRng::new(42);
            let mut v = [0.0f32];
            for _ in 0..k {
                rng.fill_uniform(&mut v, 0.02);
            }
            rng.fill_centered(&mut v, centre, 0.02);
            v[0]
        };
        let first = |name: &str| params.get(params.find(name).unwrap().slot)[0];
        assert_eq!(first("model.embeddings.weight"), draw(0, 0.0));
        assert_eq!(first("lm_head.weight"), draw(vc, 0.0));
        assert_eq!(
            first("model.layers.0.attn.r_proj.weight"),
            draw(2 * vc, 0.0)
        );
        assert_eq!(
            first("model.layers.0.attn.k_proj.weight"),
            draw(2 * vc + c * c, 0.0)
        );
        // Layer 0 draws r, k, v, o, w1, w2, a1, a2, g1, g2 (no value-residual path), then the mixes.
        let l0 = 4 * c * c + 2 * 8 * c + 2 * 6 * c + 2 * 7 * c;
        assert_eq!(first("model.layers.0.attn.x_r"), draw(2 * vc + l0, 0.5));
        let l0_all = l0 + 7 * c + 2 * 48 * c;
        let l1_v1 = 2 * vc + l0_all + 4 * c * c + 2 * 8 * c + 2 * 6 * c;
        assert_eq!(
            first("model.layers.1.attn.v_lora.lora.0.weight"),
            draw(l1_v1, 0.0)
        );

        let all = |name: &str, pred: &dyn Fn(f32) -> bool| {
            params
                .get(params.find(name).unwrap().slot)
                .iter()
                .all(|&v| pred(v))
        };
        assert!(all("model.layers.1.attn.x_g", &|v| (0.48..=0.52).contains(&v)));
        assert!(all("model.layers.0.ffn.x_k", &|v| (0.48..=0.52).contains(&v)));
        for name in ["k_k", "k_a", "r_k", "g_norm.weight"] {
            assert!(all(&format!("model.layers.1.attn.{name}"), &|v| v == 1.0));
        }
        for name in [
            "w_lora.lora.2.bias",
            "a_lora.lora.2.bias",
            "v_lora.lora.2.bias",
            "g_norm.bias",
        ] {
            assert!(all(&format!("model.layers.1.attn.{name}"), &|v| v == 0.0));
        }
        assert!(all("model.layers.0.pre_norm.weight", &|v| v == 1.0));
    }

    #[test]
    fn forward_is_deterministic() {
        let (mut a, params) = Rwkv7::new_random(Config::default(), 7).unwrap();
        let (mut b, params_b) = Rwkv7::new_random(Config::default(), 7).unwrap();
        let (mut sa, mut sb) = (a.new_state(), b.new_state());
        for &t in TEXT {
            let la = bits(a.forward(&params, &mut sa, t, None));
            let lb = bits(b.forward(&params_b, &mut sb, t, None));
            assert_eq!(la, lb);
        }
        assert_eq!(state_bits(&sa), state_bits(&sb));
        // The state moved: the test compares something.
        assert!(sa.layers[1].wkv.iter().any(|&v| v != 0.0));
    }

    #[test]
    fn traced_untraced_and_advance_steps_are_identical() {
        let (mut net, params) = spread_net(11);
        let mut traced = net.new_state();
        let mut plain = net.new_state();
        let mut advanced = net.new_state();
        let mut tr = net.new_trace();
        for &t in TEXT {
            let lt = bits(net.forward(&params, &mut traced, t, Some(&mut tr)));
            let lp = bits(net.forward(&params, &mut plain, t, None));
            assert_eq!(lt, lp, "logits differ at byte {t}");
            assert_eq!(state_bits(&traced), state_bits(&plain));
            net.advance(&params, &mut advanced, t);
            assert_eq!(state_bits(&advanced), state_bits(&plain));
        }
    }

    #[test]
    fn one_step_gradients_match_finite_differences() {
        let (mut net, mut params) = spread_net(21);
        // Start from a state built by earlier bytes, held fixed: a one-step update treats the
        // state the step started from as a constant.
        let start = run(&mut net, &params, b"abracadab");
        let seg = [(b'r', b'a')];
        let (grads, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, false);
        check_every_tensor(&mut net, &mut params, &start, &seg, &grads);
    }

    #[test]
    fn tbptt_gradients_match_finite_differences() {
        let (mut net, mut params) = spread_net(31);
        let start = run(&mut net, &params, b"hello ");
        let seg = [(b'w', b'o'), (b'o', b'r'), (b'r', b'l'), (b'l', b'd')];
        let (grads, carry) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
        check_every_tensor(&mut net, &mut params, &start, &seg, &grads);

        // The carry left by the first byte is dL/d(start state): check its largest entries.
        for l in 0..net.cfg.layers {
            for part in 0..3 {
                let pick = |s: &State| -> Vec<f32> {
                    match part {
                        0 => s.layers[l].att_prev.clone(),
                        1 => s.layers[l].wkv.clone(),
                        _ => s.layers[l].ffn_prev.clone(),
                    }
                };
                let g = pick(&carry);
                let (imax, gmax) = g.iter().enumerate().fold((0, 0.0f32), |(bi, bv), (i, &v)| {
                    if v.abs() > bv { (i, v.abs()) } else { (bi, bv) }
                });
                assert!(gmax > 1e-3, "layer {l} part {part}: carry vanishes");
                let mut shifted = |d: f32| {
                    let mut s = start.clone();
                    let buf = match part {
                        0 => &mut s.layers[l].att_prev,
                        1 => &mut s.layers[l].wkv,
                        _ => &mut s.layers[l].ffn_prev,
                    };
                    buf[imax] += d;
                    segment_loss(&mut net, &params, &s, &seg)
                };
                let h = 2e-2f32;
                let d_h = -(shifted(h) - shifted(-h)) / (2.0 * h as f64);
                let d_half = -(shifted(h / 2.0) - shifted(-h / 2.0)) / h as f64;
                let numeric = (4.0 * d_half - d_h) / 3.0;
                assert!(
                    close(g[imax] as f64, numeric),
                    "carry layer {l} part {part}[{imax}]: analytic {} vs numeric {numeric}",
                    g[imax]
                );
            }
        }
    }

    #[test]
    fn scope_limits_which_gradients_are_written() {
        let (mut net, params) = spread_net(41);
        let start = run(&mut net, &params, b"scope");
        let seg = [(b' ', b't'), (b't', b'e')];
        let (all, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
        for group in 0..GROUPS.len() as Group {
            let (only, _) = segment_grads(
                &mut net,
                &params,
                &start,
                &seg,
                Scope::NONE.with(group),
                true,
            );
            for t in &params.tensors {
                let got = t.slot.of(&only);
                if t.group == group {
                    assert_eq!(
                        bits(got),
                        bits(t.slot.of(&all)),
                        "{} in its own scope",
                        t.name
                    );
                } else {
                    assert!(
                        got.iter().all(|&v| v == 0.0),
                        "{} written outside its scope",
                        t.name
                    );
                }
            }
        }
    }

    #[test]
    fn sgd_tbptt_step_lowers_the_segment_loss() {
        let (mut net, mut params) = Rwkv7::new_random(small_cfg(), 51).unwrap();
        let start = run(&mut net, &params, b"the cat sat on ");
        let seg = [(b't', b'h'), (b'h', b'e'), (b'e', b' '), (b' ', b'm')];
        let before = segment_loss(&mut net, &params, &start, &seg);
        let (grads, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
        let lr = 1e-2f32;
        let norm_sq: f64 = grads.iter().map(|&g| (g as f64) * (g as f64)).sum();
        for (p, &g) in params.data.iter_mut().zip(&grads) {
            *p += lr * g;
        }
        net.refresh(&params);
        let after = segment_loss(&mut net, &params, &start, &seg);
        // To first order the loss falls by lr·‖g‖² along the ascent direction of ln p.
        let predicted = lr as f64 * norm_sq;
        assert!(
            before - after > 0.5 * predicted && before - after < 1.5 * predicted,
            "before {before} after {after} predicted drop {predicted}"
        );
    }
}
