//! Mamba-1 byte model: selective state-space blocks over a residual stream, one byte at a time.
//!
//! Dimensions:
//! - `V` = 256 byte values
//! - `H` = hidden width (residual stream)
//! - `I` = inner width of a mixer (usually 2·H)
//! - `S` = SSM state size per inner channel
//! - `K` = depthwise convolution width
//! - `R` = rank of the step-size (Δ) projection
//!
//! One block: `h += out_proj( ssm( silu(conv(x)) ) · silu(z) )` with `[x; z] = in_proj(rms(h))`.
//! Weight names are the native safetensors keys (`model.layers.N.mixer.*`). The convolution's
//! tap 0 multiplies the newest input (native layout).

mod conv;
mod replay;
mod scan;
mod steps;
#[cfg(test)]
mod tests;

use anyhow::Result;

use self::conv::{conv_backward, conv_forward, conv_param_grads};
use self::scan::{
    ScanGrads, ScanInput, ScanTrace, gate_backward, gate_forward, scan_backward, scan_forward,
    softplus_backward, softplus_forward,
};
use crate::flat_group;
use crate::kernels;
use crate::model::layers::{Linear, rms_norm, rms_norm_backward, two_mut};
use crate::model::layout::Layout;
use crate::model::{Build, Layouts, Network, VOCAB};
use crate::params::{Group, InitRng, ParamSet, Scope, Slot, TensorSource};

/// Training groups, indexed by [`Group`].
pub const GROUPS: &[&str] = &[
    "embed",
    "layer_norm",
    "mixer_conv",
    "mixer_ssm",
    "mixer_proj",
    "head",
];
const EMBED: Group = 0;
const LAYER_NORM: Group = 1;
const MIXER_CONV: Group = 2;
const MIXER_SSM: Group = 3;
const MIXER_PROJ: Group = 4;
const HEAD: Group = 5;

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
        2 * VOCAB * h + h + self.layers * layer
    }

    /// Floats of one state (and of its gradient): per layer the convolution window and the
    /// SSM state, as [`StateLayout`] lays them out.
    pub fn state_floats(&self) -> usize {
        StateLayout::new(self).layout.len()
    }

    /// Floats of one byte's trace, as [`TraceLayout`] lays it out: the SSM's `[I, S]` tensors
    /// dominate.
    pub fn trace_floats(&self) -> usize {
        TraceLayout::new(self).layout.len()
    }

    /// Floats of the gradient buffers a backward over `steps` steps at once keeps.
    pub fn step_grad_floats(&self, steps: usize) -> usize {
        steps::StepGrads::floats(self, steps)
    }

    /// Floats of the buffers a replay of known bytes over several steps at once keeps.
    pub fn replay_floats(&self) -> usize {
        replay::ReplayBuffers::floats(self)
    }
}

// ---------------------------------------------------------------------------------------------
// Weights: slots into the ParamSet
// ---------------------------------------------------------------------------------------------

struct LayerSlots {
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
    final_norm_w: Slot, // [H]
    lm_head: Linear,    // [V, H], no bias
    layers: Vec<LayerSlots>,
}

/// Registers every tensor, in the order (and with the names) of model files.
fn register(cfg: &Config, p: &mut ParamSet) -> Slots {
    let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
    let embed = p.add_sparse_rows("model.embeddings.weight", &[VOCAB, h], EMBED);
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

flat_group! {
    /// One block's part of the state (named `layers.N.*` in model files that resume a stream).
    pub struct LayerStateSlots, view LayerState, view_mut LayerStateMut, dims (i, s, k) {
        /// The convolution's previous K−1 inputs per channel, newest first: `[I, K−1]`.
        conv: [i, k - 1],
        /// SSM state `[I, S]`.
        ssm: [i, s],
    }
}

/// The state's layout; its gradient (the carry) has the same one.
pub struct StateLayout {
    pub layout: Layout,
    layers: Vec<LayerStateSlots>,
}

impl StateLayout {
    fn new(cfg: &Config) -> Self {
        let mut layout = Layout::new();
        let layers = (0..cfg.layers)
            .map(|l| {
                let prefix = format!("layers.{l}.");
                LayerStateSlots::register(&mut layout, &prefix, cfg.inner, cfg.state, cfg.conv)
            })
            .collect();
        StateLayout { layout, layers }
    }
}

// ---------------------------------------------------------------------------------------------
// Trace: what backward needs from one forward step, one flat buffer
// ---------------------------------------------------------------------------------------------

flat_group! {
    /// The trace's parts outside the blocks.
    pub struct OuterTraceSlots, view OuterTrace, view_mut OuterTraceMut, dims (h) {
        /// The input byte, as a float.
        token: [1],
        /// Residual stream after the last block `[H]`.
        h_final: [h],
        /// Final norm: the LM head's input `[H]`.
        norm_f: [h],
    }
}

flat_group! {
    /// One block's trace.
    pub struct LayerTraceSlots, view LayerTrace, view_mut LayerTraceMut, dims (h, i, s, k, r) {
        /// Residual stream entering the block `[H]`.
        h_in: [h],
        /// rms(h_in)·w `[H]`.
        norm: [h],
        /// in_proj output: x (conv input) then z (gate input) `[2I]`.
        xz: [2 * i],
        /// Convolution inputs before this step `[I, K−1]`.
        conv_prev: [i, k - 1],
        /// Convolution output `[I]` and its sigmoid.
        conv_pre: [i],
        conv_sig: [i],
        /// silu(conv_pre): the SSM input `[I]`.
        u: [i],
        /// x_proj output: Δ-rank part, B, C `[R + 2S]`.
        proj: [r + 2 * s],
        /// dt_proj output + bias, and its softplus Δ `[I]`.
        dt_pre: [i],
        dt: [i],
        /// silu(z) and sigmoid(z) `[I]`.
        gate: [i],
        gate_sig: [i],
        /// SSM output before the gate, and gated `[I]`.
        y_pre: [i],
        y: [i],
        /// exp(Δ·A), the state before and after this step `[I, S]`.
        da: [i, s],
        ssm_prev: [i, s],
        ssm_new: [i, s],
    }
}

/// One byte's trace layout.
pub struct TraceLayout {
    pub layout: Layout,
    outer: OuterTraceSlots,
    layers: Vec<LayerTraceSlots>,
}

impl TraceLayout {
    fn new(cfg: &Config) -> Self {
        let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
        let mut layout = Layout::new();
        let outer = OuterTraceSlots::register(&mut layout, "", h);
        let layers = (0..cfg.layers)
            .map(|l| LayerTraceSlots::register(&mut layout, &format!("layers.{l}."), h, i, s, k, r))
            .collect();
        TraceLayout {
            layout,
            outer,
            layers,
        }
    }
}

/// Gradient buffers of one backward step.
struct GradScratch {
    h: Vec<f32>,      // [H] dL/d(residual stream)
    h_in: Vec<f32>,   // [H] dL/d(residual stream entering the block being walked back)
    norm: Vec<f32>,   // [H]
    y: Vec<f32>,      // [I]
    xz: Vec<f32>,     // [2I]
    u: Vec<f32>,      // [I] dL/d(SSM input u)
    dt_pre: Vec<f32>, // [I]
    proj: Vec<f32>,   // [R + 2S]
    y_pre: Vec<f32>,  // [I] dL/d(SSM output before the gate)
    ssm: Vec<f32>,    // [S] dL/d(new state) of one channel
    dt_a: Vec<f32>,   // [S] dL/d(Δ·A) of one channel
    sig: Vec<f32>,    // [I] sigmoid(dt_pre)
}

impl GradScratch {
    fn new(cfg: &Config) -> Self {
        let (h, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
        let z = |n: usize| vec![0.0f32; n];
        GradScratch {
            h: z(h),
            h_in: z(h),
            norm: z(h),
            y: z(i),
            xz: z(2 * i),
            u: z(i),
            dt_pre: z(i),
            proj: z(r + 2 * s),
            y_pre: z(i),
            ssm: z(s),
            dt_a: z(s),
            sig: z(i),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

pub struct Mamba1 {
    cfg: Config,
    slots: Slots,
    state_layout: StateLayout,
    trace_layout: TraceLayout,
    /// A = −exp(A_log) per layer, refreshed whenever the parameters change.
    a: Vec<Vec<f32>>,
    /// The trace an untraced forward writes into: traced and untraced forward run one code path.
    scratch: Vec<f32>,
    /// The residual stream `[H]` and one block's output before it joins it.
    h: Vec<f32>,
    block_out: Vec<f32>,
    logits: Vec<f32>,
    g: GradScratch,
    /// Gradient buffers of a segment's steps, made on the first segment backward.
    step_grads: Option<steps::StepGrads>,
    /// Activation buffers of a replay, made on the first replay.
    replay: Option<replay::ReplayBuffers>,
}

/// Whether a forward step keeps what backward needs, and whether it computes the logits.
#[derive(Clone, Copy)]
struct StepMode {
    traced: bool,
    logits: bool,
}

impl Mamba1 {
    /// A network and its parameters, all zero: the layout that [`Mamba1::new_random`] fills
    /// with seeded values and the model-file loader fills by name.
    pub fn new(cfg: Config) -> Result<(Self, ParamSet)> {
        cfg.validate()?;
        let mut params = ParamSet::new();
        let slots = register(&cfg, &mut params);
        let (h, i, s) = (cfg.hidden, cfg.inner, cfg.state);
        let trace_layout = TraceLayout::new(&cfg);
        let mut net = Mamba1 {
            a: vec![vec![0.0; i * s]; cfg.layers],
            scratch: trace_layout.layout.zeros(),
            state_layout: StateLayout::new(&cfg),
            trace_layout,
            h: vec![0.0; h],
            block_out: vec![0.0; h],
            logits: vec![0.0; VOCAB],
            g: GradScratch::new(&cfg),
            step_grads: None,
            replay: None,
            cfg,
            slots,
        };
        net.refresh(&params);
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

    /// One step walked back ([`Network::backward`]).
    fn backward_one(
        &mut self,
        params: &ParamSet,
        tr: &[f32],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        mut carry: Option<&mut [f32]>,
    ) {
        let hid = self.cfg.hidden;
        let p = |slot: Slot| slot.of(&params.data);
        let (sl, tl, g) = (&self.slots, &self.trace_layout, &mut self.g);
        let outer = tl.outer.view(tr);
        // 11. logits = lm_head · norm_f
        let below = [EMBED, LAYER_NORM, MIXER_CONV, MIXER_SSM, MIXER_PROJ];
        if !below.iter().any(|&gr| scope.has(gr)) {
            // Nothing below the head trains: no gradient flows into the state either.
            if scope.has(HEAD) {
                let g_head = sl.lm_head.w.of_mut(grads);
                kernels::add_outer(g_head, VOCAB, hid, grad_logits, outer.norm_f);
            }
            if let Some(c) = carry {
                c.fill(0.0);
            }
            return;
        }
        let g_head = scope.has(HEAD).then_some(&mut *grads);
        sl.lm_head.backward(
            params,
            g_head,
            outer.norm_f,
            grad_logits,
            &mut g.norm,
            false,
        );
        //     norm_f = rms(h_final) · final_norm_w
        let gw = scope.has(LAYER_NORM).then(|| sl.final_norm_w.of_mut(grads));
        rms_norm_backward(
            outer.h_final,
            p(sl.final_norm_w),
            NORM_EPS,
            &g.norm,
            &mut g.h,
            gw,
        );
        // 10–2. the blocks, last first
        for l in (0..self.cfg.layers).rev() {
            let lt = tl.layers[l].view(tr);
            let block_carry = carry
                .as_deref_mut()
                .map(|c| self.state_layout.layers[l].view_mut(c));
            let out = BlockGrads {
                grads,
                scope,
                carry: block_carry,
            };
            block_backward(&self.cfg, &sl.layers[l], params, &self.a[l], &lt, g, out);
        }
        // 1. h = embed[token]
        if scope.has(EMBED) {
            let row = sl.embed.row(outer.token[0] as usize, hid);
            kernels::add_assign(row.of_mut(grads), &g.h);
        }
    }

    /// One forward step: reads `token` and advances `state`. Untraced, it writes its trace
    /// into scratch and skips the copies only backward reads; without logits it skips the LM
    /// head. Neither changes a bit of the state or of the logits.
    fn step(
        &mut self,
        params: &ParamSet,
        state: &mut [f32],
        token: u8,
        trace: Option<&mut [f32]>,
        mode: StepMode,
    ) {
        let Mamba1 {
            cfg,
            slots: sl,
            state_layout,
            trace_layout: tl,
            a,
            scratch,
            h,
            block_out,
            logits,
            ..
        } = self;
        let tr = trace.unwrap_or(scratch);
        let p = |slot: Slot| slot.of(&params.data);
        // 1. h = embed[token]
        h.copy_from_slice(p(sl.embed.row(token as usize, cfg.hidden)));
        // 2–10. the blocks, each h += block(h)
        for (l, ls) in sl.layers.iter().enumerate() {
            let lt = tl.layers[l].view_mut(tr);
            let st = state_layout.layers[l].view_mut(state);
            block_forward(cfg, ls, params, &a[l], h, lt, st, block_out, mode.traced);
        }
        // 11. logits = lm_head · rms(h) · final_norm_w
        let outer = tl.outer.view_mut(tr);
        outer.token[0] = token as f32;
        if mode.logits {
            rms_norm(h, p(sl.final_norm_w), NORM_EPS, outer.norm_f);
            sl.lm_head.forward(params, outer.norm_f, logits);
        }
        outer.h_final.copy_from_slice(h);
    }
}

/// One block forward: `h += out_proj( ssm( silu(conv(x)) ) · silu(z) )`, `[x; z] =
/// in_proj(rms(h))`, writing the block's trace and advancing its state.
#[allow(clippy::too_many_arguments)]
fn block_forward(
    cfg: &Config,
    ls: &LayerSlots,
    params: &ParamSet,
    a: &[f32],
    h: &mut [f32],
    lt: LayerTraceMut,
    st: LayerStateMut,
    block_out: &mut [f32],
    traced: bool,
) {
    let (i, k, r) = (cfg.inner, cfg.conv, cfg.dt_rank);
    let p = |slot: Slot| slot.of(&params.data);
    if traced {
        lt.h_in.copy_from_slice(h);
        lt.conv_prev.copy_from_slice(st.conv);
        lt.ssm_prev.copy_from_slice(st.ssm);
    }
    // 2. norm = rms(h) · norm_w
    rms_norm(h, p(ls.norm_w), NORM_EPS, lt.norm);
    // 3. [x; z] = in_proj_w · norm + in_proj_b
    ls.in_proj.forward(params, lt.norm, lt.xz);
    // 4. conv_pre[c] = Σ_t conv_w[c,t] · x[c, now − t] + conv_b[c]   (tap 0 = newest)
    conv_forward(
        p(ls.conv_w),
        p(ls.conv_b),
        &lt.xz[..i],
        st.conv,
        lt.conv_pre,
        k,
    );
    // 5. u = silu(conv_pre)
    kernels::silu_into(lt.conv_pre, lt.u, lt.conv_sig);
    // 6. [δ; B; C] = x_proj_w · u
    ls.x_proj.forward(params, lt.u, lt.proj);
    // 7. Δ = softplus(dt_proj_w · δ + dt_proj_b)
    ls.dt_proj.forward(params, &lt.proj[..r], lt.dt_pre);
    softplus_forward(lt.dt_pre, lt.dt);
    // 8. dA = exp(Δ · A);  9. s' = s · dA + (u·Δ) · B,  y_pre = C · s' + D · u
    let input = scan_input(cfg, ls, params, a, lt.u, lt.dt, lt.proj);
    scan_forward(&input, st.ssm, lt.da, lt.y_pre);
    //    y = y_pre · silu(z)
    gate_forward(lt.y_pre, &lt.xz[i..], lt.gate, lt.gate_sig, lt.y);
    if traced {
        lt.ssm_new.copy_from_slice(st.ssm);
    }
    // 10. h += out_proj_w · y + out_proj_b
    ls.out_proj.forward(params, lt.y, block_out);
    kernels::add_assign(h, block_out);
}

/// What the scan reads of a block's parameters and of this byte's activations.
fn scan_input<'a>(
    cfg: &Config,
    ls: &LayerSlots,
    params: &'a ParamSet,
    a: &'a [f32],
    u: &'a [f32],
    dt: &'a [f32],
    proj: &'a [f32],
) -> ScanInput<'a> {
    let (s, r) = (cfg.state, cfg.dt_rank);
    ScanInput {
        u,
        dt,
        b: &proj[r..r + s],
        c: &proj[r + s..r + 2 * s],
        d: params.get(ls.d),
        a,
    }
}

/// What one block's backward step writes into: the flat gradient buffer, the trained groups,
/// and the block's part of the carried state gradient.
struct BlockGrads<'a> {
    grads: &'a mut [f32],
    scope: Scope,
    carry: Option<LayerStateMut<'a>>,
}

/// One block backward, the steps of [`block_forward`] in reverse. On entry `g.h` is the
/// gradient of the block's output stream; on return it is that of its input stream.
fn block_backward(
    cfg: &Config,
    ls: &LayerSlots,
    params: &ParamSet,
    a: &[f32],
    lt: &LayerTrace,
    g: &mut GradScratch,
    out: BlockGrads,
) {
    let (i, k) = (cfg.inner, cfg.conv);
    let p = |slot: Slot| slot.of(&params.data);
    let BlockGrads {
        grads,
        scope,
        carry,
    } = out;
    let (carry_conv, carry_ssm) = match carry {
        Some(c) => (Some(c.conv), Some(c.ssm)),
        None => (None, None),
    };
    let proj = scope.has(MIXER_PROJ);
    // 10. h_out = h_in + out_proj_w · y + out_proj_b   (g.h is dL/dh_out = dL/dout)
    let g_out = proj.then_some(&mut *grads);
    ls.out_proj
        .backward(params, g_out, lt.y, &g.h, &mut g.y, false);
    // 9–6. the gate, the scan, Δ and x_proj: g.u becomes dL/du, g.xz[i..] dL/dz
    ssm_backward(cfg, ls, params, a, lt, g, grads, scope, carry_ssm);
    // 5. u = silu(conv_pre): g.u becomes dL/dconv_pre
    for ((g_u, &pre), &sig) in g.u.iter_mut().zip(lt.conv_pre).zip(lt.conv_sig) {
        *g_u *= kernels::math::silu_grad(pre, sig);
    }
    // 4. conv_pre = Σ_t w_t · x_{now−t} + b
    if scope.has(MIXER_CONV) {
        let (g_w, g_b) = two_mut(grads, ls.conv_w, ls.conv_b);
        conv_param_grads(&g.u, &lt.xz[..i], lt.conv_prev, g_w, g_b, k);
    }
    conv_backward(p(ls.conv_w), &g.u, &mut g.xz[..i], carry_conv, k);
    // 3. xz = in_proj_w · norm + in_proj_b
    let g_in = proj.then_some(&mut *grads);
    ls.in_proj
        .backward(params, g_in, lt.norm, &g.xz, &mut g.norm, false);
    // 2. norm = rms(h_in) · norm_w; the residual passes g.h through unchanged.
    let g_w = scope.has(LAYER_NORM).then(|| ls.norm_w.of_mut(grads));
    rms_norm_backward(lt.h_in, p(ls.norm_w), NORM_EPS, &g.norm, &mut g.h_in, g_w);
    kernels::add_assign(&mut g.h_in, &g.h);
    std::mem::swap(&mut g.h, &mut g.h_in);
}

/// Steps 9 to 6 of a block backward, from `g.y = dL/dy`: the gate (writes `g.xz[i..]`), the
/// scan channel by channel (through `carry`, the block's SSM state gradient), softplus and
/// `dt_proj`, and `x_proj`, leaving `dL/du` in `g.u`.
#[allow(clippy::too_many_arguments)]
fn ssm_backward(
    cfg: &Config,
    ls: &LayerSlots,
    params: &ParamSet,
    a: &[f32],
    lt: &LayerTrace,
    g: &mut GradScratch,
    grads: &mut [f32],
    scope: Scope,
    carry: Option<&mut [f32]>,
) {
    let (i, s, r) = (cfg.inner, cfg.state, cfg.dt_rank);
    let proj = scope.has(MIXER_PROJ);
    // 9. y = y_pre · silu(z)
    let gate = (lt.y_pre, &lt.xz[i..], lt.gate, lt.gate_sig);
    gate_backward(gate, &g.y, &mut g.y_pre, &mut g.xz[i..]);
    //    s' = s · dA + (u·Δ) · B,  y_pre = C · s' + D · u
    g.proj.fill(0.0);
    let (g_b, g_c) = g.proj[r..].split_at_mut(s);
    let (g_d, g_a_log) = match scope.has(MIXER_SSM) {
        true => {
            let (d, a_log) = two_mut(grads, ls.d, ls.a_log);
            (Some(d), Some(a_log))
        }
        false => (None, None),
    };
    let trace = ScanTrace {
        input: scan_input(cfg, ls, params, a, lt.u, lt.dt, lt.proj),
        da: lt.da,
        ssm_prev: lt.ssm_prev,
        ssm_new: lt.ssm_new,
    };
    let scan_grads = ScanGrads {
        u: &mut g.u,
        dt: &mut g.dt_pre,
        b: g_b,
        c: g_c,
        d: g_d,
        a_log: g_a_log,
        s_scratch: &mut g.ssm,
        dt_a_scratch: &mut g.dt_a,
    };
    scan_backward(&trace, &g.y_pre, scan_grads, carry);
    // 7. Δ = softplus(dt_pre),  dt_pre = dt_proj_w · δ + dt_proj_b
    softplus_backward(lt.dt_pre, &mut g.dt_pre, &mut g.sig);
    let g_dt = proj.then_some(&mut *grads);
    let (g_delta, delta) = (&mut g.proj[..r], &lt.proj[..r]);
    ls.dt_proj
        .backward(params, g_dt, delta, &g.dt_pre, g_delta, false);
    // 6. proj = x_proj_w · u   (adds into g.u)
    let g_x = proj.then_some(&mut *grads);
    ls.x_proj
        .backward(params, g_x, lt.u, &g.proj, &mut g.u, true);
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
    type State = Vec<f32>;
    type Trace = Vec<f32>;
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

    fn refresh(&mut self, params: &ParamSet) {
        for (a, l) in self.a.iter_mut().zip(&self.slots.layers) {
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
        let mode = StepMode {
            traced: trace.is_some(),
            logits: true,
        };
        self.step(params, state, token, trace.map(|t| t.as_mut_slice()), mode);
        &self.logits
    }

    fn advance(&mut self, params: &ParamSet, state: &mut Vec<f32>, token: u8) {
        let mode = StepMode {
            traced: false,
            logits: false,
        };
        self.step(params, state, token, None, mode);
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
        let carry = carry.map(|c| c.as_mut_slice());
        self.backward_one(params, tr, grad_logits, scope, grads, carry);
    }

    fn advance_steps(&mut self, params: &ParamSet, state: &mut Vec<f32>, tokens: &[u8]) {
        self.advance_steps_impl(params, state, tokens);
    }

    fn backward_steps(
        &mut self,
        params: &ParamSet,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: &mut Vec<f32>,
    ) {
        self.backward_steps_impl(params, traces, grad_logits, scope, grads, carry);
    }
}
