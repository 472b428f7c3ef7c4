//! Mamba-1 byte model: selective state-space blocks over a residual stream, one byte at a time.
//!
//! Dimensions:
//! - `V` = 256 byte values
//! - `H` = hidden width (residual stream)
//! - `I` = inner width of a mixer (usually 2·H)
//! - `S` = SSM state size per inner channel
//! - `K` = depthwise convolution width
//! - `R` = rank of the step-size (Δ) projection
//! - `C` = rows of the context embeddings (3 tables of 2^ctx rows; none when `ctx` = 0)
//!
//! One block: `h += out_proj( ssm( silu(conv(x)) ) · silu(z) )` with `[x; z] = in_proj(rms(h))`.
//! The residual stream starts as the byte's embedding, plus with `ctx` the rows of its three
//! hashed contexts (src/model/context.rs).
//! Weight names are the native safetensors keys (`model.layers.N.mixer.*`). The convolution's
//! tap 0 multiplies the newest input (native layout).

mod block;
mod conv;
mod scan;
#[cfg(test)]
mod tests;

use anyhow::Result;

use self::block::{Block, BlockActs, BlockGrads, Seg, StepGrads, block_acts, step_grads};
use crate::kernels;
use crate::model::context::{self, ContextInputs};
use crate::model::layers::{Linear, MAX_STEPS, rms_norm, rms_norm_backward_steps};
use crate::model::layout::{Blocks, Layout, carve, carve_mut, register};
use crate::model::{Build, Layouts, Network, VOCAB};
use crate::params::{InitRng, ParamSet, Scope, Slot, TensorSource};

training_groups! {
    EMBED = "embed",
    LAYER_NORM = "layer_norm",
    MIXER_CONV = "mixer_conv",
    MIXER_SSM = "mixer_ssm",
    MIXER_PROJ = "mixer_proj",
    HEAD = "head",
}

/// RMSNorm epsilon of the reference implementation.
const NORM_EPS: f32 = 1e-5;

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/// Sizes of a Mamba-1 network.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `H`
    pub hidden: usize,
    pub layers: usize,
    /// `I`
    pub inner: usize,
    /// `S`
    pub state: usize,
    /// `K`
    pub conv: usize,
    /// `R`
    pub dt_rank: usize,
    /// Log2 rows of each context embedding table; 0 for none (the model's own layout).
    pub ctx: usize,
    /// The built-in prior whose weights the network starts from (src/prior), by its number;
    /// 0 for seeded random weights. Not a size: it does not change the layout.
    pub prior: usize,
}

impl Default for Config {
    /// The base sizes that levels edit (src/levels.rs; the default level is three blocks of
    /// these): small enough that weights and Adam moments stay near the core's cache.
    fn default() -> Self {
        Self {
            hidden: 128,
            layers: 2,
            inner: 256,
            state: 16,
            conv: 4,
            dt_rank: 8,
            ctx: 0,
            prior: 0,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("hidden", self.hidden),
            ("layers", self.layers),
            ("inner", self.inner),
            ("state", self.state),
            ("conv", self.conv),
            ("dt_rank", self.dt_rank),
        ] {
            if v == 0 || v > crate::model::MAX_DIM {
                anyhow::bail!(
                    "mamba1 {name} = {v} is out of range (1..={})",
                    crate::model::MAX_DIM
                );
            }
        }
        if self.ctx != 0 && !(context::MIN_BITS..=context::MAX_BITS).contains(&self.ctx) {
            anyhow::bail!(
                "mamba1 ctx = {} is out of range (0, or {}..={})",
                self.ctx,
                context::MIN_BITS,
                context::MAX_BITS
            );
        }
        if self.prior > crate::model::MAX_PRIOR {
            anyhow::bail!(
                "mamba1 prior = {} is out of range (0..={})",
                self.prior,
                crate::model::MAX_PRIOR
            );
        }
        if self.layers > 64 || self.conv > 64 || self.state > 256 {
            anyhow::bail!("mamba1 config is too large (at most 64 layers, conv 64, state 256)");
        }
        let params = self.param_count();
        if params > crate::model::MAX_PARAMS {
            anyhow::bail!(
                "mamba1 config has {params} parameters; this build accepts at most {}",
                crate::model::MAX_PARAMS
            );
        }
        Ok(())
    }

    /// The sizes of the network stored in a model file (native layout).
    pub fn infer(file: &dyn TensorSource) -> Result<Config> {
        let m = "model.layers.0.mixer";
        let vocab = file.dim("model.embeddings.weight", 2, 0)?;
        if vocab != VOCAB {
            anyhow::bail!(
                "model file has a vocabulary of {vocab}; lmzip's models read bytes ({VOCAB})"
            );
        }
        let inner = file.dim(&format!("{m}.in_proj.weight"), 2, 0)? / 2;
        let cfg = Config {
            hidden: file.dim("model.embeddings.weight", 2, 1)?,
            layers: file.count_layers("model.layers.", ".mixer.in_proj.weight"),
            inner,
            state: file.dim(&format!("{m}.A_log"), 2, 1)?,
            conv: file.dim(&format!("{m}.conv1d.weight"), 3, 2)?,
            dt_rank: file.dim(&format!("{m}.dt_proj.weight"), 2, 1)?,
            ctx: match file.tensor_shape(CONTEXT_EMBED).is_some() {
                true => {
                    let rows = file.dim(CONTEXT_EMBED, 2, 0)?;
                    let per_table = rows / context::TABLES;
                    if per_table * context::TABLES != rows || !per_table.is_power_of_two() {
                        anyhow::bail!("model file's {CONTEXT_EMBED} has {rows} rows");
                    }
                    per_table.trailing_zeros() as usize
                }
                false => 0,
            },
            prior: 0,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Number of parameters (without the output bias).
    pub fn param_count(&self) -> usize {
        let (h, i, s, k, r) = (self.hidden, self.inner, self.state, self.conv, self.dt_rank);
        // norm, in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj (weights and biases)
        let layer = h
            + (2 * i * h + 2 * i)
            + (i * k + i)
            + (r + 2 * s) * i
            + (i * r + i)
            + i * s
            + i
            + (h * i + h);
        let context = self.context().map_or(0, |c| c.rows() * h);
        2 * VOCAB * h + context + h + self.layers * layer
    }

    /// The context inputs the size `ctx` asks for.
    pub fn context(&self) -> Option<ContextInputs> {
        ContextInputs::new(self.ctx)
    }

    /// Floats of one state (and of its gradient): per layer the convolution window and the
    /// SSM state, as [`Config::state_blocks`] lays them out.
    pub fn state_floats(&self) -> usize {
        self.state_blocks().layout.len()
    }

    /// Floats of one byte's trace, as [`Config::trace_blocks`] lays it out: the SSM's `[I, S]`
    /// tensors dominate.
    pub fn trace_floats(&self) -> usize {
        self.trace_blocks().layout.len()
    }

    /// Floats of the gradient buffers a backward over `steps` steps at once keeps.
    pub fn step_grad_floats(&self, steps: usize) -> usize {
        self.step_grad_layout(steps).len()
    }

    /// Floats of the buffers a replay of known bytes over several steps at once keeps.
    pub fn replay_floats(&self) -> usize {
        self.replay_layout().len()
    }
}

// ---------------------------------------------------------------------------------------------
// Weights: slots into the ParamSet
// ---------------------------------------------------------------------------------------------

pub(super) struct LayerSlots {
    norm_w: Slot,     // [H]
    in_proj: Linear,  // [2I, H] + [2I]
    conv_w: Slot,     // [I, 1, K]
    conv_b: Slot,     // [I]
    x_proj: Linear,   // [R + 2S, I], no bias
    dt_proj: Linear,  // [I, R] + [I]
    a_log: Slot,      // [I, S]; A = −exp(A_log)
    d: Slot,          // [I]
    out_proj: Linear, // [H, I] + [H]
}

struct Slots {
    embed: Slot,        // [V, H]
    context: Slot,      // [C, H], empty without context inputs
    final_norm_w: Slot, // [H]
    lm_head: Linear,    // [V, H], no bias
    layers: Vec<LayerSlots>,
}

/// Name of the context embeddings (lmzip's own tensor: the model family has none).
pub(crate) const CONTEXT_EMBED: &str = "model.context_embeddings.weight";

/// Registers every tensor, in the order (and with the names) of model files.
fn register_params(cfg: &Config, p: &mut ParamSet) -> Slots {
    let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
    let embed = p.add_sparse_rows("model.embeddings.weight", &[VOCAB, h], EMBED);
    // Sparse rows after the byte embedding's (the order of the optimizer's row flags).
    let context = match cfg.context() {
        Some(c) => p.add_sparse_rows(CONTEXT_EMBED, &[c.rows(), h], EMBED),
        None => Slot { offset: 0, len: 0 },
    };
    let final_norm_w = p.add("model.norm.weight", &[h], LAYER_NORM);
    let lm_head = Linear::register(p, "lm_head", (VOCAB, h), false, HEAD);
    let layers = (0..cfg.layers)
        .map(|l| {
            let m = format!("model.layers.{l}.mixer");
            LayerSlots {
                norm_w: p.add(format!("model.layers.{l}.norm.weight"), &[h], LAYER_NORM),
                in_proj: Linear::register(p, &format!("{m}.in_proj"), (2 * i, h), true, MIXER_PROJ),
                conv_w: p.add(format!("{m}.conv1d.weight"), &[i, 1, k], MIXER_CONV),
                conv_b: p.add(format!("{m}.conv1d.bias"), &[i], MIXER_CONV),
                x_proj: Linear::register(
                    p,
                    &format!("{m}.x_proj"),
                    (r + 2 * s, i),
                    false,
                    MIXER_PROJ,
                ),
                dt_proj: Linear::register(p, &format!("{m}.dt_proj"), (i, r), true, MIXER_PROJ),
                a_log: p.add(format!("{m}.A_log"), &[i, s], MIXER_SSM),
                d: p.add(format!("{m}.D"), &[i], MIXER_SSM),
                out_proj: Linear::register(p, &format!("{m}.out_proj"), (h, i), true, MIXER_PROJ),
            }
        })
        .collect();
    Slots {
        embed,
        context,
        final_norm_w,
        lm_head,
        layers,
    }
}

/// Seeded initialisation of the reference system: the same generator, scales and order, so a
/// seed gives the same starting weights.
fn init_random(slots: &Slots, p: &mut ParamSet, seed: u64) {
    let mut rng = InitRng::new(seed);
    rng.fill_uniform(p.get_mut(slots.embed), 0.02);
    // The context embeddings start at zero and draw nothing from the generator: the network
    // starts as the one without them, with the same seeded weights.
    p.get_mut(slots.final_norm_w).fill(1.0);
    rng.fill_uniform(p.get_mut(slots.lm_head.w), 0.02);
    for l in &slots.layers {
        p.get_mut(l.norm_w).fill(1.0);
        rng.fill_uniform(p.get_mut(l.in_proj.w), 0.02);
        rng.fill_uniform(p.get_mut(l.conv_w), 0.05);
        rng.fill_uniform(p.get_mut(l.x_proj.w), 0.02);
        rng.fill_uniform(p.get_mut(l.dt_proj.w), 0.02);
        // softplus(−2) ≈ 0.13: a moderate initial step size.
        p.get_mut(l.dt_proj.b.expect("dt_proj has a bias"))
            .fill(-2.0);
        // A_log = 0, so A = −1 for every channel and state.
        p.get_mut(l.a_log).fill(0.0);
        p.get_mut(l.d).fill(1.0);
        rng.fill_uniform(p.get_mut(l.out_proj.w), 0.02);
    }
}

// ---------------------------------------------------------------------------------------------
// State: what carries from byte to byte, one flat buffer
// ---------------------------------------------------------------------------------------------

/// One block's part of the state (named `layers.N.*` in model files that resume a stream); a
/// carry (the gradient with respect to a state) has the same layout.
pub(super) struct LayerState<T> {
    /// The convolution's previous K−1 inputs per channel, newest first: `[I, K−1]`.
    pub conv: T,
    /// SSM state `[I, S]`.
    pub ssm: T,
}

fn layer_state<T>(cfg: &Config, add: &mut impl FnMut(&str, &[usize]) -> T) -> LayerState<T> {
    let (i, s, k) = (cfg.inner, cfg.state, cfg.conv);
    LayerState {
        conv: add("conv", &[i, k - 1]),
        ssm: add("ssm", &[i, s]),
    }
}

// ---------------------------------------------------------------------------------------------
// Trace: what backward needs from one forward step, one flat buffer
// ---------------------------------------------------------------------------------------------

/// The trace's parts outside the blocks; each block's part is a [`BlockActs`] of one step.
struct StepTrace<T> {
    /// The input byte, as a float `[1]`.
    token: T,
    /// The rows of its contexts, as floats `[3]` (`[0]` without context inputs).
    context_rows: T,
    /// Residual stream after the last block `[H]`.
    h_final: T,
    /// Final norm: the LM head's input `[H]`.
    norm_f: T,
}

fn step_trace<T>(cfg: &Config, add: &mut impl FnMut(&str, &[usize]) -> T) -> StepTrace<T> {
    StepTrace {
        token: add("token", &[1]),
        context_rows: add(
            "context_rows",
            &[cfg.context().map_or(0, |_| context::TABLES)],
        ),
        h_final: add("h_final", &[cfg.hidden]),
        norm_f: add("norm_f", &[cfg.hidden]),
    }
}

impl Config {
    fn state_blocks(&self) -> Blocks {
        Blocks::new(
            self.layers,
            // The bytes and word before the input that the context inputs hash.
            |layout| {
                if self.context().is_some() {
                    layout.add("context_history", &[context::HISTORY]);
                }
            },
            |layout, prefix, _| {
                layer_state(self, &mut register(layout, prefix));
            },
        )
    }

    fn trace_blocks(&self) -> Blocks {
        let top = |layout: &mut Layout| {
            step_trace(self, &mut register(layout, ""));
        };
        Blocks::new(self.layers, top, |layout, prefix, _| {
            block_acts(self, (1, 1), &mut register(layout, prefix));
        })
    }

    /// The layout of the gradient buffers of a backward over `steps` steps.
    fn step_grad_layout(&self, steps: usize) -> Layout {
        let mut layout = Layout::new();
        step_grads(self, steps, &mut register(&mut layout, ""));
        layout
    }

    /// The layout of a replay's buffers: the residual stream, one block's output and one
    /// block's activations, each over [`MAX_STEPS`] steps (no copies for backward).
    fn replay_layout(&self) -> Layout {
        let mut layout = Layout::new();
        replay_bufs(self, &mut register(&mut layout, ""));
        layout
    }
}

/// A replay's buffers (see [`Config::replay_layout`]).
struct ReplayBufs<T> {
    /// Residual stream and one block's output `[MAX_STEPS, H]`.
    h: T,
    out: T,
    acts: BlockActs<T>,
}

fn replay_bufs<T>(cfg: &Config, add: &mut impl FnMut(&str, &[usize]) -> T) -> ReplayBufs<T> {
    ReplayBufs {
        h: add("h", &[MAX_STEPS, cfg.hidden]),
        out: add("out", &[MAX_STEPS, cfg.hidden]),
        acts: block_acts(cfg, (MAX_STEPS, 0), add),
    }
}

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

/// What the steps read: the sizes, the weights' slots, the layouts and `A = −exp(A_log)`.
struct Model {
    cfg: Config,
    slots: Slots,
    state_layout: Blocks,
    trace_layout: Blocks,
    /// A = −exp(A_log) per layer, refreshed whenever the parameters change.
    a: Vec<Vec<f32>>,
    context: Option<ContextInputs>,
}

/// What the steps write besides states, traces and gradients.
struct Buffers {
    /// The trace an untraced forward writes into: traced and untraced forward run one code path.
    scratch: Vec<f32>,
    /// The residual stream `[H]` and one block's output before it joins it.
    h: Vec<f32>,
    block_out: Vec<f32>,
    logits: Vec<f32>,
    /// Gradient buffers ([`StepGrads`]) of `grad_steps` steps, grown by a longer segment.
    grads: Vec<f32>,
    grad_steps: usize,
    /// A replay's buffers ([`ReplayBufs`]), made on the first replay.
    replay: Option<Vec<f32>>,
}

pub struct Mamba1 {
    model: Model,
    bufs: Buffers,
}

impl Mamba1 {
    /// A network and its parameters, all zero: the layout that [`Mamba1::new_random`] fills
    /// with seeded values and the model-file loader fills by name.
    pub fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        cfg.validate()?;
        let mut params = ParamSet::new();
        let slots = register_params(&cfg, &mut params);
        let trace_layout = cfg.trace_blocks();
        let bufs = Buffers {
            scratch: trace_layout.layout.zeros(),
            h: vec![0.0; cfg.hidden],
            block_out: vec![0.0; cfg.hidden],
            logits: vec![0.0; VOCAB],
            grads: cfg.step_grad_layout(1).zeros(),
            grad_steps: 1,
            replay: None,
        };
        let model = Model {
            a: vec![vec![0.0; cfg.inner * cfg.state]; cfg.layers],
            state_layout: cfg.state_blocks(),
            trace_layout,
            context: cfg.context(),
            cfg,
            slots,
        };
        let mut net = Mamba1 { model, bufs };
        net.refresh(&params);
        Ok((net, params))
    }

    /// A freshly initialised network and its parameters.
    pub fn new_random(cfg: Config, seed: u64) -> Result<(Self, ParamSet)> {
        let (mut net, mut params) = Self::new(cfg)?;
        init_random(&net.model.slots, &mut params, seed);
        net.refresh(&params);
        Ok((net, params))
    }

    pub fn config(&self) -> &Config {
        &self.model.cfg
    }

    /// The forward of the live byte (T = 1): reads `token` and advances `state`. Untraced, it
    /// writes its trace into scratch and skips the copies only backward reads; without logits
    /// it skips the LM head. Neither changes a bit of the state or of the logits.
    fn step(
        &mut self,
        params: &ParamSet,
        state: &mut [f32],
        token: u8,
        trace: Option<&mut [f32]>,
        logits: bool,
    ) {
        let (m, b) = (&self.model, &mut self.bufs);
        let traced = trace.is_some();
        let tr = trace.unwrap_or(&mut b.scratch);
        let (top, layers) = tr.split_at_mut(m.trace_layout.top);
        let top = step_trace(&m.cfg, &mut carve_mut(top));
        // 1. h = embed[token] (+ Σ context[row] over the token's contexts)
        b.h.copy_from_slice(params.get(m.slots.embed.row(token as usize, m.cfg.hidden)));
        top.token[0] = token as f32;
        if let Some(rows) = m.context_rows(state, token) {
            for (slot, &row) in top.context_rows.iter_mut().zip(&rows) {
                *slot = row as f32;
                kernels::add_assign(&mut b.h, params.get(m.slots.context.row(row, m.cfg.hidden)));
            }
        }
        // 2–10. the blocks, each h += block(h)
        for l in 0..m.cfg.layers {
            let range = m.trace_layout.after_top(l);
            let mut acts = block_acts(&m.cfg, (1, 1), &mut carve_mut(&mut layers[range]));
            let st = m.layer_state(state, l);
            let bufs = (&mut b.h[..], &mut b.block_out[..]);
            block::forward(&m.block(l), params, bufs, &mut acts, st, 1, traced);
        }
        // 11. logits = lm_head · rms(h) · final_norm_w
        if logits {
            rms_norm(&b.h, params.get(m.slots.final_norm_w), NORM_EPS, top.norm_f);
            m.slots.lm_head.forward(params, top.norm_f, &mut b.logits);
        }
        top.h_final.copy_from_slice(&b.h);
    }

    /// The forward of known bytes (T ≤ [`MAX_STEPS`] at a time), untraced and without logits:
    /// the bits of [`Network::advance`] byte after byte.
    fn replay(&mut self, params: &ParamSet, state: &mut [f32], tokens: &[u8]) {
        let (m, hid) = (&self.model, self.model.cfg.hidden);
        let mut buf = self
            .bufs
            .replay
            .take()
            .unwrap_or_else(|| m.cfg.replay_layout().zeros());
        for part in tokens.chunks(MAX_STEPS) {
            let (n, v) = (part.len(), replay_bufs(&m.cfg, &mut carve_mut(&mut buf)));
            let ReplayBufs { h, out, mut acts } = v;
            // 1. h = embed[token] (+ Σ context[row] over the token's contexts)
            for (t, &token) in part.iter().enumerate() {
                let row = params.get(m.slots.embed.row(token as usize, hid));
                let h_t = &mut h[t * hid..(t + 1) * hid];
                h_t.copy_from_slice(row);
                for row in m.context_rows(state, token).into_iter().flatten() {
                    kernels::add_assign(h_t, params.get(m.slots.context.row(row, hid)));
                }
            }
            // 2–10. the blocks over the steps
            for l in 0..m.cfg.layers {
                let st = m.layer_state(state, l);
                let bufs = (&mut h[..], &mut out[..]);
                block::forward(&m.block(l), params, bufs, &mut acts, st, n, false);
            }
        }
        self.bufs.replay = Some(buf);
    }

    /// Walks the traced steps `traces` back (T ≤ [`MAX_STEPS`]), last first, with
    /// `grad_logits` one row of [`VOCAB`] per step (see [`Network::backward_steps`]).
    /// The gradients go to `out`: the trained groups and the flat gradient buffer.
    fn backward_segment(
        &mut self,
        params: &ParamSet,
        (traces, grad_logits): (&[Vec<f32>], &[f32]),
        out: (Scope, &mut [f32]),
        carry: Option<&mut [f32]>,
    ) {
        let (m, b, n) = (&self.model, &mut self.bufs, traces.len());
        if b.grad_steps < n {
            b.grads = m.cfg.step_grad_layout(n).zeros();
            b.grad_steps = n;
        }
        let mut g = step_grads(&m.cfg, b.grad_steps, &mut carve_mut(&mut b.grads));
        m.backward(params, traces, grad_logits, out, carry, &mut g);
    }
}

impl Model {
    /// With context inputs, the rows of `token`'s contexts, read from and advancing the
    /// history in `state`.
    fn context_rows(&self, state: &mut [f32], token: u8) -> Option<[usize; context::TABLES]> {
        let history = &mut state[..self.state_layout.top];
        self.context.map(|c| c.rows_of(history, token))
    }

    fn block(&self, l: usize) -> Block<'_> {
        Block {
            cfg: &self.cfg,
            ls: &self.slots.layers[l],
            a: &self.a[l],
        }
    }

    /// Block `l`'s part of a state (or carry).
    fn layer_state<'s>(&self, state: &'s mut [f32], l: usize) -> LayerState<&'s mut [f32]> {
        let range = self.state_layout.layers[l].clone();
        layer_state(&self.cfg, &mut carve_mut(&mut state[range]))
    }

    fn step_trace<'t>(&self, tr: &'t [f32]) -> StepTrace<&'t [f32]> {
        step_trace(&self.cfg, &mut carve(&tr[..self.trace_layout.top]))
    }

    /// The steps of a segment walked back, each over all its steps: the head (11), the blocks
    /// last first (10–2), the embedding (1).
    fn backward(
        &self,
        params: &ParamSet,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        (scope, grads): (Scope, &mut [f32]),
        mut carry: Option<&mut [f32]>,
        g: &mut StepGrads<&mut [f32]>,
    ) {
        let below = [EMBED, LAYER_NORM, MIXER_CONV, MIXER_SSM, MIXER_PROJ];
        if !below.iter().any(|&gr| scope.has(gr)) {
            return self.head_only_backward(traces, grad_logits, scope, grads, carry);
        }
        // 11. logits = lm_head · norm_f,  norm_f = rms(h_final) · final_norm_w
        let (sl, hid, n) = (&self.slots, self.cfg.hidden, traces.len());
        let mut norm_f: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
        let mut h_final: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
        for (t, tr) in traces.iter().enumerate() {
            let top = self.step_trace(tr);
            (norm_f[t], h_final[t]) = (top.norm_f, top.h_final);
        }
        let g_head = scope.has(HEAD).then_some(&mut *grads);
        let g_norm = (&mut *g.norm, hid);
        sl.lm_head
            .backward_steps(params, g_head, &norm_f[..n], grad_logits, g_norm, false);
        let gw = scope.has(LAYER_NORM).then(|| sl.final_norm_w.of_mut(grads));
        let w = params.get(sl.final_norm_w);
        rms_norm_backward_steps(&h_final[..n], w, NORM_EPS, g.norm, g.h, gw);
        // 10–2. the blocks, last first
        for l in (0..self.cfg.layers).rev() {
            let range = self.trace_layout.layers[l].clone();
            let seg = Seg {
                cfg: &self.cfg,
                traces,
                range,
            };
            let out = BlockGrads {
                grads: &mut *grads,
                scope,
                carry: carry.as_deref_mut().map(|c| self.layer_state(c, l)),
            };
            block::backward(&self.block(l), params, &seg, g, out);
        }
        // 1. h = embed[token] + Σ context[row]
        if scope.has(EMBED) {
            for (t, tr) in traces.iter().enumerate().rev() {
                let top = self.step_trace(tr);
                let g_h = &g.h[t * hid..(t + 1) * hid];
                let row = self.slots.embed.row(top.token[0] as usize, hid);
                kernels::add_assign(row.of_mut(grads), g_h);
                for &row in top.context_rows {
                    let row = self.slots.context.row(row as usize, hid);
                    kernels::add_assign(row.of_mut(grads), g_h);
                }
            }
        }
    }

    /// The backward when nothing below the head trains: no gradient flows into the state, so
    /// the carry is left zero rather than stale.
    fn head_only_backward(
        &self,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: Option<&mut [f32]>,
    ) {
        let hid = self.cfg.hidden;
        for (t, tr) in traces.iter().enumerate().rev() {
            if scope.has(HEAD) {
                let g_head = self.slots.lm_head.w.of_mut(grads);
                let g_t = &grad_logits[t * VOCAB..(t + 1) * VOCAB];
                kernels::add_outer(g_head, VOCAB, hid, g_t, self.step_trace(tr).norm_f);
            }
        }
        if let Some(c) = carry {
            c.fill(0.0);
        }
    }
}

impl Build for Mamba1 {
    type Config = Config;

    fn infer(src: &dyn TensorSource) -> Result<Config> {
        Config::infer(src)
    }

    fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        Mamba1::new(cfg)
    }
}

impl Network for Mamba1 {
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
            state: &self.model.state_layout.layout,
            trace: &self.model.trace_layout.layout,
        }
    }

    fn refresh(&mut self, params: &ParamSet) {
        for (a, l) in self.model.a.iter_mut().zip(&self.model.slots.layers) {
            kernels::exp_into(params.get(l.a_log), a);
            for v in a.iter_mut() {
                *v = -*v;
            }
        }
    }

    fn forward(
        &mut self,
        params: &ParamSet,
        state: &mut Vec<f32>,
        token: u8,
        trace: Option<&mut Vec<f32>>,
    ) -> &[f32] {
        self.step(params, state, token, trace.map(|t| t.as_mut_slice()), true);
        &self.bufs.logits
    }

    fn advance(&mut self, params: &ParamSet, state: &mut Vec<f32>, token: u8) {
        self.step(params, state, token, None, false);
    }

    fn sparse_rows(&self) -> usize {
        VOCAB + self.model.context.map_or(0, |c| c.rows())
    }

    fn mark_rows(&self, trace: &Vec<f32>, touched: &mut [bool]) {
        for &row in self.model.step_trace(trace).context_rows {
            touched[VOCAB + row as usize] = true;
        }
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
            let out = (scope, &mut *grads);
            self.backward_segment(params, (part, g), out, Some(carry));
            end = start;
        }
    }
}
