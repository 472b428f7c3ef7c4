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

use anyhow::Result;

use crate::kernels::{self, math};
use crate::model::layers::{rms_norm, rms_norm_backward};
use crate::model::{Build, Network, StateTensor, VOCAB};
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

    /// Floats of one [`State`]: per layer the convolution window and the SSM state.
    pub fn state_floats(&self) -> usize {
        let (i, s, k) = (self.inner, self.state, self.conv);
        self.layers * (i * (k - 1) + i * s)
    }

    /// Floats of one [`Trace`]: the SSM's `[I, S]` tensors dominate.
    pub fn trace_floats(&self) -> usize {
        let (h, i, s, k, r) = (self.hidden, self.inner, self.state, self.conv, self.dt_rank);
        let layer = 2 * h + 11 * i + i * (k - 1) + (r + 2 * s) + 3 * i * s;
        self.layers * layer + 2 * h
    }
}

// ---------------------------------------------------------------------------------------------
// Weights: slots into the ParamSet
// ---------------------------------------------------------------------------------------------

struct LayerSlots {
    norm_w: Slot,     // [H]
    in_proj_w: Slot,  // [2I, H]
    in_proj_b: Slot,  // [2I]
    conv_w: Slot,     // [I, 1, K]
    conv_b: Slot,     // [I]
    x_proj_w: Slot,   // [R + 2S, I]
    dt_proj_w: Slot,  // [I, R]
    dt_proj_b: Slot,  // [I]
    a_log: Slot,      // [I, S]; A = −exp(A_log)
    d: Slot,          // [I]
    out_proj_w: Slot, // [H, I]
    out_proj_b: Slot, // [H]
}

struct Slots {
    embed: Slot,        // [V, H]
    final_norm_w: Slot, // [H]
    lm_head: Slot,      // [V, H]
    layers: Vec<LayerSlots>,
}

/// Registers every tensor, in the order (and with the names) of model files.
fn register(cfg: &Config, p: &mut ParamSet) -> Slots {
    let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
    let embed = p.add_sparse_rows("model.embeddings.weight", &[VOCAB, h], EMBED);
    let final_norm_w = p.add("model.norm.weight", &[h], LAYER_NORM);
    let lm_head = p.add("lm_head.weight", &[VOCAB, h], HEAD);
    let layers = (0..cfg.layers)
        .map(|l| {
            let m = format!("model.layers.{l}.mixer");
            LayerSlots {
                norm_w: p.add(format!("model.layers.{l}.norm.weight"), &[h], LAYER_NORM),
                in_proj_w: p.add(format!("{m}.in_proj.weight"), &[2 * i, h], MIXER_PROJ),
                in_proj_b: p.add(format!("{m}.in_proj.bias"), &[2 * i], MIXER_PROJ),
                conv_w: p.add(format!("{m}.conv1d.weight"), &[i, 1, k], MIXER_CONV),
                conv_b: p.add(format!("{m}.conv1d.bias"), &[i], MIXER_CONV),
                x_proj_w: p.add(format!("{m}.x_proj.weight"), &[r + 2 * s, i], MIXER_PROJ),
                dt_proj_w: p.add(format!("{m}.dt_proj.weight"), &[i, r], MIXER_PROJ),
                dt_proj_b: p.add(format!("{m}.dt_proj.bias"), &[i], MIXER_PROJ),
                a_log: p.add(format!("{m}.A_log"), &[i, s], MIXER_SSM),
                d: p.add(format!("{m}.D"), &[i], MIXER_SSM),
                out_proj_w: p.add(format!("{m}.out_proj.weight"), &[h, i], MIXER_PROJ),
                out_proj_b: p.add(format!("{m}.out_proj.bias"), &[h], MIXER_PROJ),
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
    rng.fill_uniform(p.get_mut(slots.lm_head), 0.02);
    for l in &slots.layers {
        p.get_mut(l.norm_w).fill(1.0);
        rng.fill_uniform(p.get_mut(l.in_proj_w), 0.02);
        rng.fill_uniform(p.get_mut(l.conv_w), 0.05);
        rng.fill_uniform(p.get_mut(l.x_proj_w), 0.02);
        rng.fill_uniform(p.get_mut(l.dt_proj_w), 0.02);
        // softplus(−2) ≈ 0.13: a moderate initial step size.
        p.get_mut(l.dt_proj_b).fill(-2.0);
        // A_log = 0, so A = −1 for every channel and state.
        p.get_mut(l.a_log).fill(0.0);
        p.get_mut(l.d).fill(1.0);
        rng.fill_uniform(p.get_mut(l.out_proj_w), 0.02);
    }
}

// ---------------------------------------------------------------------------------------------
// State: what carries from byte to byte
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
pub struct LayerState {
    /// The convolution's previous K−1 inputs per channel, newest first: `[I, K−1]`.
    conv: Vec<f32>,
    /// SSM state `[I, S]`.
    ssm: Vec<f32>,
}

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
    h_in: Vec<f32>,      // [H] residual stream entering the block
    norm: Vec<f32>,      // [H] rms(h_in)·w
    xz: Vec<f32>,        // [2I] in_proj output: x (conv input) then z (gate input)
    conv_prev: Vec<f32>, // [I, K−1] convolution inputs before this step
    conv_pre: Vec<f32>,  // [I] convolution output
    conv_sig: Vec<f32>,  // [I] sigmoid(conv_pre)
    u: Vec<f32>,         // [I] silu(conv_pre): the SSM input
    proj: Vec<f32>,      // [R + 2S] x_proj output: Δ-rank part, B, C
    dt_pre: Vec<f32>,    // [I] dt_proj output + bias
    dt: Vec<f32>,        // [I] softplus(dt_pre)
    gate: Vec<f32>,      // [I] silu(z)
    gate_sig: Vec<f32>,  // [I] sigmoid(z)
    y_pre: Vec<f32>,     // [I] SSM output before the gate
    y: Vec<f32>,         // [I] gated output
    da: Vec<f32>,        // [I, S] exp(Δ·A)
    ssm_prev: Vec<f32>,  // [I, S] state before this step
    ssm_new: Vec<f32>,   // [I, S] state after this step
}

pub struct Trace {
    token: u8,
    layers: Vec<LayerTrace>,
    h_final: Vec<f32>, // [H] residual stream after the last block
    norm_f: Vec<f32>,  // [H] final norm: the LM head's input
}

impl Trace {
    fn new(cfg: &Config) -> Self {
        let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
        let z = |n: usize| vec![0.0f32; n];
        Trace {
            token: 0,
            layers: (0..cfg.layers)
                .map(|_| LayerTrace {
                    h_in: z(h),
                    norm: z(h),
                    xz: z(2 * i),
                    conv_prev: z(i * (k - 1)),
                    conv_pre: z(i),
                    conv_sig: z(i),
                    u: z(i),
                    proj: z(r + 2 * s),
                    dt_pre: z(i),
                    dt: z(i),
                    gate: z(i),
                    gate_sig: z(i),
                    y_pre: z(i),
                    y: z(i),
                    da: z(i * s),
                    ssm_prev: z(i * s),
                    ssm_new: z(i * s),
                })
                .collect(),
            h_final: z(h),
            norm_f: z(h),
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

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

pub struct Mamba1 {
    cfg: Config,
    slots: Slots,
    /// A = −exp(A_log) per layer, refreshed whenever the parameters change.
    a: Vec<Vec<f32>>,
    /// The trace an untraced forward writes into: traced and untraced forward run one code path.
    scratch: Trace,
    logits: Vec<f32>,
    /// One block's output before it joins the residual stream, `[H]`.
    block_out: Vec<f32>,
    g: GradScratch,
}

impl Mamba1 {
    /// A network and its parameters, all zero: the layout that [`Mamba1::new_random`] fills
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
        let (h, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
        let mut net = Mamba1 {
            a: vec![vec![0.0; i * s]; cfg.layers],
            scratch: Trace::new(&cfg),
            logits: vec![0.0; VOCAB],
            block_out: vec![0.0; h],
            g: GradScratch {
                h: vec![0.0; h],
                h_in: vec![0.0; h],
                norm: vec![0.0; h],
                y: vec![0.0; i],
                xz: vec![0.0; 2 * i],
                u: vec![0.0; i],
                dt_pre: vec![0.0; i],
                proj: vec![0.0; r + 2 * s],
                y_pre: vec![0.0; i],
                ssm: vec![0.0; s],
                dt_a: vec![0.0; s],
                sig: vec![0.0; i],
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
        let (h, i, s, k, r) = (
            self.cfg.hidden,
            self.cfg.inner,
            self.cfg.state,
            self.cfg.conv,
            self.cfg.dt_rank,
        );
        let p = |slot: Slot| slot.of(&params.data);
        tr.token = token;

        // 1. h = embed[token]
        let mut h_buf = std::mem::take(&mut tr.h_final);
        h_buf.copy_from_slice(p(self.slots.embed.row(token as usize, h)));

        for (l, ((ls, st), lt)) in self
            .slots
            .layers
            .iter()
            .zip(state.layers.iter_mut())
            .zip(tr.layers.iter_mut())
            .enumerate()
        {
            if traced {
                lt.h_in.copy_from_slice(&h_buf);
            }
            // 2. norm = rms(h) · norm_w
            rms_norm(&h_buf, p(ls.norm_w), NORM_EPS, &mut lt.norm);
            // 3. [x; z] = in_proj_w · norm + in_proj_b
            kernels::gemv(p(ls.in_proj_w), &lt.norm, &mut lt.xz, 2 * i, h);
            kernels::add_assign(&mut lt.xz, p(ls.in_proj_b));
            // 4. conv_pre[c] = Σ_t conv_w[c,t] · x[c, now − t] + conv_b[c]   (tap 0 = newest)
            //    then shift x into the window.
            if traced {
                lt.conv_prev.copy_from_slice(&st.conv);
            }
            let (cw, cb) = (p(ls.conv_w), p(ls.conv_b));
            let taps = k - 1;
            for (c, ((pre, &x_now), &b)) in lt.conv_pre.iter_mut().zip(&lt.xz).zip(cb).enumerate() {
                let hist = &mut st.conv[c * taps..(c + 1) * taps];
                let w = &cw[c * k..(c + 1) * k];
                let mut acc = w[0] * x_now;
                for (&wt, &xt) in w[1..].iter().zip(hist.iter()) {
                    acc += wt * xt;
                }
                *pre = acc + b;
                for t in (1..taps).rev() {
                    hist[t] = hist[t - 1];
                }
                if let Some(newest) = hist.first_mut() {
                    *newest = x_now;
                }
            }
            // 5. u = silu(conv_pre)
            kernels::silu_into(&lt.conv_pre, &mut lt.u, &mut lt.conv_sig);
            // 6. [δ; B; C] = x_proj_w · u
            kernels::gemv(p(ls.x_proj_w), &lt.u, &mut lt.proj, r + 2 * s, i);
            // 7. Δ = softplus(dt_proj_w · δ + dt_proj_b), its exponentials eight lanes at a time
            kernels::gemv(p(ls.dt_proj_w), &lt.proj[..r], &mut lt.dt_pre, i, r);
            kernels::add_assign(&mut lt.dt_pre, p(ls.dt_proj_b));
            kernels::exp_into(&lt.dt_pre, &mut lt.dt);
            for (dt, &x) in lt.dt.iter_mut().zip(&lt.dt_pre) {
                *dt = math::softplus_with_exp(x, *dt);
            }
            // 8. dA = exp(Δ · A)
            // 9. s' = s · dA + (u·Δ) · B;   y_pre = C · s' + D · u;   y = y_pre · silu(z)
            //    (updated in place; a trace keeps the state before and after the step)
            if traced {
                lt.ssm_prev.copy_from_slice(&st.ssm);
            }
            let (b_vec, c_vec) = (&lt.proj[r..r + s], &lt.proj[r + s..r + 2 * s]);
            let channels = st
                .ssm
                .chunks_exact_mut(s)
                .zip(lt.da.chunks_exact_mut(s))
                .zip(self.a[l].chunks_exact(s))
                .zip(lt.y_pre.iter_mut())
                .zip(lt.u.iter().zip(&lt.dt).zip(p(ls.d)));
            for ((((ssm, da), a), y_pre), ((&u, &dt), &d)) in channels {
                kernels::exp_scaled_into(dt, a, da);
                let u_dt = u * dt;
                for ((sj, &da), &bj) in ssm.iter_mut().zip(&*da).zip(b_vec) {
                    *sj = *sj * da + u_dt * bj;
                }
                *y_pre = kernels::dot(ssm, c_vec) + d * u;
            }
            kernels::silu_into(&lt.xz[i..], &mut lt.gate, &mut lt.gate_sig);
            for ((y, &y_pre), &gate) in lt.y.iter_mut().zip(&lt.y_pre).zip(&lt.gate) {
                *y = y_pre * gate;
            }
            if traced {
                lt.ssm_new.copy_from_slice(&st.ssm);
            }
            // 10. h += out_proj_w · y + out_proj_b
            let out = &mut self.block_out;
            kernels::gemv(p(ls.out_proj_w), &lt.y, out, h, i);
            kernels::add_assign(out, p(ls.out_proj_b));
            kernels::add_assign(&mut h_buf, out);
        }

        // 11. logits = lm_head · rms(h) · final_norm_w
        if logits {
            rms_norm(&h_buf, p(self.slots.final_norm_w), NORM_EPS, &mut tr.norm_f);
            let lm_head = p(self.slots.lm_head);
            kernels::gemv(lm_head, &tr.norm_f, &mut self.logits, VOCAB, h);
        }
        tr.h_final = h_buf;
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
    type State = State;
    type Trace = Trace;
    type Carry = Carry;

    fn groups(&self) -> &'static [&'static str] {
        GROUPS
    }

    fn new_state(&self) -> State {
        let (i, s, k) = (self.cfg.inner, self.cfg.state, self.cfg.conv);
        State {
            layers: (0..self.cfg.layers)
                .map(|_| LayerState {
                    conv: vec![0.0; i * (k - 1)],
                    ssm: vec![0.0; i * s],
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
        for l in &mut carry.layers {
            l.conv.fill(0.0);
            l.ssm.fill(0.0);
        }
    }

    fn state_tensors<'s>(&self, state: &'s State) -> Vec<StateTensor<&'s [f32]>> {
        let (i, s, k) = (self.cfg.inner, self.cfg.state, self.cfg.conv);
        let mut out = Vec::new();
        for (l, ls) in state.layers.iter().enumerate() {
            out.push(StateTensor {
                name: format!("layers.{l}.conv"),
                shape: vec![i, k - 1],
                data: ls.conv.as_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.ssm"),
                shape: vec![i, s],
                data: ls.ssm.as_slice(),
            });
        }
        out
    }

    fn state_tensors_mut<'s>(&self, state: &'s mut State) -> Vec<StateTensor<&'s mut [f32]>> {
        let (i, s, k) = (self.cfg.inner, self.cfg.state, self.cfg.conv);
        let mut out = Vec::new();
        for (l, ls) in state.layers.iter_mut().enumerate() {
            out.push(StateTensor {
                name: format!("layers.{l}.conv"),
                shape: vec![i, k - 1],
                data: ls.conv.as_mut_slice(),
            });
            out.push(StateTensor {
                name: format!("layers.{l}.ssm"),
                shape: vec![i, s],
                data: ls.ssm.as_mut_slice(),
            });
        }
        out
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
        let (h, i, s, k, r) = (
            self.cfg.hidden,
            self.cfg.inner,
            self.cfg.state,
            self.cfg.conv,
            self.cfg.dt_rank,
        );
        let p = |slot: Slot| slot.of(&params.data);
        let g = &mut self.g;
        let sl = &self.slots;

        // 11. logits = lm_head · norm_f
        let g_head = scope.has(HEAD).then(|| sl.lm_head.of_mut(grads));
        let below = [EMBED, LAYER_NORM, MIXER_CONV, MIXER_SSM, MIXER_PROJ];
        if !below.iter().any(|&gr| scope.has(gr)) {
            // Nothing below the head trains: no gradient flows into the state either.
            if let Some(g_head) = g_head {
                kernels::add_outer(g_head, VOCAB, h, grad_logits, &tr.norm_f);
            }
            if let Some(c) = carry {
                for l in &mut c.layers {
                    l.conv.fill(0.0);
                    l.ssm.fill(0.0);
                }
            }
            return;
        }
        kernels::linear_backward(
            p(sl.lm_head),
            grad_logits,
            &tr.norm_f,
            &mut g.norm,
            g_head,
            VOCAB,
            h,
        );
        //     norm_f = rms(h_final) · final_norm_w
        let gw = scope.has(LAYER_NORM).then(|| sl.final_norm_w.of_mut(grads));
        rms_norm_backward(
            &tr.h_final,
            p(sl.final_norm_w),
            NORM_EPS,
            &g.norm,
            &mut g.h,
            gw,
        );

        let train_proj = scope.has(MIXER_PROJ);
        for l in (0..self.cfg.layers).rev() {
            let (ls, lt) = (&sl.layers[l], &tr.layers[l]);
            let a = &self.a[l];
            // 10. h_out = h_in + out_proj_w · y + out_proj_b   (g.h is dL/dh_out = dL/dout)
            if train_proj {
                kernels::add_assign(ls.out_proj_b.of_mut(grads), &g.h);
            }
            let g_w = train_proj.then(|| ls.out_proj_w.of_mut(grads));
            kernels::linear_backward(p(ls.out_proj_w), &g.h, &lt.y, &mut g.y, g_w, h, i);

            // 9. back through the gate and the selective scan: the element-wise parts over all
            //    channels at once, the scan channel by channel.
            //    y = y_pre · silu(z)
            let gate_terms = lt.y_pre.iter().zip(&lt.xz[i..]).zip(&lt.gate_sig);
            for ((((g_y_pre, g_z), &gy), &gate), ((&y_pre, &z), &z_sig)) in g
                .y_pre
                .iter_mut()
                .zip(&mut g.xz[i..])
                .zip(&g.y)
                .zip(&lt.gate)
                .zip(gate_terms)
            {
                *g_y_pre = gy * gate;
                *g_z = (gy * y_pre) * math::silu_grad(z, z_sig);
            }
            //    y_pre = C · s' + D · u
            if scope.has(MIXER_SSM) {
                for ((gd, &g_y_pre), &u) in ls.d.of_mut(grads).iter_mut().zip(&g.y_pre).zip(&lt.u) {
                    *gd += g_y_pre * u;
                }
            }
            let (b_vec, c_vec) = (&lt.proj[r..r + s], &lt.proj[r + s..r + 2 * s]);
            g.proj.fill(0.0);
            let (g_b, g_c) = g.proj[r..].split_at_mut(s);
            let (g_s, g_dt_a) = (&mut g.ssm[..s], &mut g.dt_a[..s]);
            let d = p(ls.d);
            let mut g_a_log = scope.has(MIXER_SSM).then(|| ls.a_log.of_mut(grads));
            let mut layer_carry = carry.as_deref_mut().map(|c| &mut c.layers[l]);
            for c in 0..i {
                let row = c * s..(c + 1) * s;
                let (s_prev, s_new) = (&lt.ssm_prev[row.clone()], &lt.ssm_new[row.clone()]);
                let (da, a_row) = (&lt.da[row.clone()], &a[row.clone()]);
                let (g_y_pre, u, dt) = (g.y_pre[c], lt.u[c], lt.dt[c]);
                let u_dt = u * dt;
                // dL/ds' = g_y_pre · C (+ what later bytes pass back)
                for (gs, &cj) in g_s.iter_mut().zip(c_vec) {
                    *gs = g_y_pre * cj;
                }
                if let Some(lc) = layer_carry.as_deref() {
                    kernels::add_assign(g_s, &lc.ssm[row.clone()]);
                }
                // C gradient: y_pre = Σ_j C_j s'_j
                kernels::axpy(g_c, g_y_pre, s_new);
                // s'_j = s_j · dA_j + (u·Δ) · B_j
                let g_u_dt = kernels::dot_in_order(g_s, b_vec);
                kernels::axpy(g_b, u_dt, g_s);
                // dA_j = exp(Δ · A_j), A_j = −exp(A_log_j):  dL/d(Δ·A_j) = g_s_j · s_j · dA_j
                for (((t, &gs), &sp), &daj) in g_dt_a.iter_mut().zip(&*g_s).zip(s_prev).zip(da) {
                    *t = gs * sp * daj;
                }
                let g_dt = kernels::dot_in_order(g_dt_a, a_row);
                if let Some(g_a_log) = g_a_log.as_deref_mut() {
                    // dL/dA_log = dL/dA · dA/dA_log = (g_dt_a · Δ) · A
                    let terms = g_dt_a.iter().zip(a_row);
                    for (ga, (&t, &aj)) in g_a_log[row.clone()].iter_mut().zip(terms) {
                        *ga += t * dt * aj;
                    }
                }
                if let Some(lc) = layer_carry.as_deref_mut() {
                    for ((out, &gs), &daj) in lc.ssm[row].iter_mut().zip(&*g_s).zip(da) {
                        *out = gs * daj;
                    }
                }
                g.u[c] = g_y_pre * d[c] + g_u_dt * dt;
                // dL/dΔ; step 7 below multiplies in softplus'.
                g.dt_pre[c] = g_dt + g_u_dt * u;
            }
            // 7. Δ = softplus(dt_pre):  dΔ/d dt_pre = sigmoid(dt_pre)
            kernels::sigmoid_into(&lt.dt_pre, &mut g.sig);
            for (gd, &sig) in g.dt_pre.iter_mut().zip(&g.sig) {
                *gd *= sig;
            }

            // 7. dt_pre = dt_proj_w · δ + dt_proj_b
            if train_proj {
                kernels::add_assign(ls.dt_proj_b.of_mut(grads), &g.dt_pre);
            }
            let g_w = train_proj.then(|| ls.dt_proj_w.of_mut(grads));
            let (g_delta, delta) = (&mut g.proj[..r], &lt.proj[..r]);
            kernels::linear_backward(p(ls.dt_proj_w), &g.dt_pre, delta, g_delta, g_w, i, r);
            // 6. proj = x_proj_w · u
            let g_w = train_proj.then(|| ls.x_proj_w.of_mut(grads));
            kernels::linear_backward_acc(
                p(ls.x_proj_w),
                &g.proj,
                &lt.u,
                &mut g.u,
                g_w,
                r + 2 * s,
                i,
            );

            // 5. u = silu(conv_pre): g.u becomes dL/dconv_pre
            for ((g_u, &pre), &sig) in g.u.iter_mut().zip(&lt.conv_pre).zip(&lt.conv_sig) {
                *g_u *= math::silu_grad(pre, sig);
            }
            // 4. conv_pre = Σ_t w_t · x_{now−t} + b
            let taps = k - 1;
            if scope.has(MIXER_CONV) {
                kernels::add_assign(ls.conv_b.of_mut(grads), &g.u);
                let g_conv_w = ls.conv_w.of_mut(grads);
                for (c, (&g_pre, &x_now)) in g.u.iter().zip(&lt.xz).enumerate() {
                    let gw = &mut g_conv_w[c * k..(c + 1) * k];
                    gw[0] += g_pre * x_now;
                    let hist = &lt.conv_prev[c * taps..(c + 1) * taps];
                    for (gwt, &xt) in gw[1..].iter_mut().zip(hist) {
                        *gwt += g_pre * xt;
                    }
                }
            }
            let cw = p(ls.conv_w);
            for (c, (g_x, &g_pre)) in g.xz[..i].iter_mut().zip(&g.u).enumerate() {
                let w = &cw[c * k..(c + 1) * k];
                *g_x = g_pre * w[0];
                if let Some(lc) = layer_carry.as_deref_mut() {
                    // The window after this step was [x_now, hist[0..K−2]]; before it, hist.
                    // Ascending t reads cc[t] before overwriting it.
                    let cc = &mut lc.conv[c * taps..(c + 1) * taps];
                    if taps > 0 {
                        *g_x += cc[0];
                        for t in 1..k {
                            let from_shift = if t < taps { cc[t] } else { 0.0 };
                            cc[t - 1] = g_pre * w[t] + from_shift;
                        }
                    }
                }
            }

            // 3. xz = in_proj_w · norm + in_proj_b
            if train_proj {
                kernels::add_assign(ls.in_proj_b.of_mut(grads), &g.xz);
            }
            let g_w = train_proj.then(|| ls.in_proj_w.of_mut(grads));
            kernels::linear_backward(p(ls.in_proj_w), &g.xz, &lt.norm, &mut g.norm, g_w, 2 * i, h);
            // 2. norm = rms(h_in) · norm_w; the residual passes g.h through unchanged.
            let gw = scope.has(LAYER_NORM).then(|| ls.norm_w.of_mut(grads));
            rms_norm_backward(&lt.h_in, p(ls.norm_w), NORM_EPS, &g.norm, &mut g.h_in, gw);
            kernels::add_assign(&mut g.h_in, &g.h);
            std::mem::swap(&mut g.h, &mut g.h_in);
        }

        // 1. h = embed[token]
        if scope.has(EMBED) {
            let row = sl.embed.row(tr.token as usize, h);
            kernels::add_assign(row.of_mut(grads), &g.h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gradcheck::{self, check_probe};

    fn small() -> Config {
        Config {
            hidden: 16,
            layers: 2,
            inner: 24,
            state: 4,
            conv: 3,
            dt_rank: 4,
        }
    }

    /// A small network whose weights are pushed away from their tidy initial values, so that
    /// every gradient is clearly non-zero and a wrong term shows.
    fn busy_net() -> (Mamba1, ParamSet) {
        let (mut net, mut params) = Mamba1::new_random(small(), 7).unwrap();
        let mut rng = InitRng::new(99);
        for t in &params.tensors {
            // Projections large enough that the SSM input, B, C and Δ are of order one.
            let spread = if t.name.contains("proj") { 1.5 } else { 0.5 };
            for v in t.slot.of_mut(&mut params.data) {
                *v += (rng.next_f32() - 0.5) * spread;
            }
        }
        net.refresh(&params);
        (net, params)
    }

    /// Floats a trace holds. The patterns name every field, so a new field fails to compile
    /// here until it is counted (and [`Config::trace_floats`] learns of it).
    fn trace_len(t: &Trace) -> usize {
        let Trace {
            token: _,
            layers,
            h_final,
            norm_f,
        } = t;
        let per_layer = layers.iter().map(|l| {
            let LayerTrace {
                h_in,
                norm,
                xz,
                conv_prev,
                conv_pre,
                conv_sig,
                u,
                proj,
                dt_pre,
                dt,
                gate,
                gate_sig,
                y_pre,
                y,
                da,
                ssm_prev,
                ssm_new,
            } = l;
            [
                h_in, norm, xz, conv_prev, conv_pre, conv_sig, u, proj, dt_pre, dt, gate, gate_sig,
                y_pre, y, da, ssm_prev, ssm_new,
            ]
            .iter()
            .map(|v| v.len())
            .sum::<usize>()
        });
        per_layer.sum::<usize>() + h_final.len() + norm_f.len()
    }

    fn state_len(s: &State) -> usize {
        s.layers
            .iter()
            .map(|l| {
                let LayerState { conv, ssm } = l;
                conv.len() + ssm.len()
            })
            .sum()
    }

    /// The sizes the recipe's limits are computed from are the sizes the network allocates.
    #[test]
    fn registry_state_and_trace_match_their_size_formulas() {
        let odd = Config {
            hidden: 5,
            layers: 3,
            inner: 7,
            state: 2,
            conv: 5,
            dt_rank: 3,
        };
        for cfg in [Config::default(), small(), odd] {
            let (net, params) = Mamba1::new_random(cfg.clone(), 1).unwrap();
            assert_eq!(params.len(), cfg.param_count(), "{cfg:?}");
            assert_eq!(state_len(&net.new_state()), cfg.state_floats(), "{cfg:?}");
            assert_eq!(trace_len(&net.new_trace()), cfg.trace_floats(), "{cfg:?}");
        }
    }

    fn logits_bits(
        net: &mut Mamba1,
        params: &ParamSet,
        state: &mut State,
        t: u8,
        tr: Option<&mut Trace>,
    ) -> Vec<u32> {
        net.forward(params, state, t, tr)
            .iter()
            .map(|x| x.to_bits())
            .collect()
    }

    #[test]
    fn config_default_validates_and_bad_sizes_are_refused() {
        Config::default().validate().unwrap();
        let mut c = small();
        c.state = 0;
        assert!(c.validate().is_err());
        c = small();
        c.hidden = crate::model::MAX_DIM + 1;
        assert!(c.validate().is_err());
    }

    #[test]
    fn forward_is_deterministic_and_traced_equals_untraced() {
        let (mut net, params) = busy_net();
        let (mut s1, mut s2, mut s3) = (net.new_state(), net.new_state(), net.new_state());
        let mut s4 = net.new_state();
        let mut tr = net.new_trace();
        for &t in b"deterministic mamba, traced or not" {
            let a = logits_bits(&mut net, &params, &mut s1, t, None);
            let b = logits_bits(&mut net, &params, &mut s2, t, None);
            let c = logits_bits(&mut net, &params, &mut s3, t, Some(&mut tr));
            net.advance(&params, &mut s4, t);
            assert_eq!(a, b);
            assert_eq!(a, c);
        }
        for s in [&s3, &s4] {
            for (x, y) in s1.layers.iter().zip(&s.layers) {
                assert_eq!(x.conv, y.conv);
                assert_eq!(x.ssm, y.ssm);
            }
        }
    }

    /// One probe per tensor kind, in both layers, including the token's embedding row.
    fn probes(token: u8) -> Vec<(String, usize)> {
        let mut v = vec![
            (
                "model.embeddings.weight".to_string(),
                token as usize * 16 + 5,
            ),
            ("model.norm.weight".to_string(), 3),
            ("lm_head.weight".to_string(), 98 * 16 + 7),
        ];
        for l in 0..2 {
            let m = format!("model.layers.{l}.mixer");
            v.push((format!("model.layers.{l}.norm.weight"), 9));
            for (t, i) in [
                ("in_proj.weight", 13),
                ("in_proj.weight", 24 * 16 + 40), // a z (gate) row
                ("in_proj.bias", 5),
                ("conv1d.weight", 4),
                ("conv1d.weight", 8), // the oldest tap
                ("conv1d.bias", 2),
                ("x_proj.weight", 11),         // δ row
                ("x_proj.weight", 4 * 24 + 3), // B row
                ("x_proj.weight", 8 * 24 + 6), // C row
                ("dt_proj.weight", 6),
                ("dt_proj.bias", 1),
                ("A_log", 11),
                ("D", 7),
                ("out_proj.weight", 17),
                ("out_proj.bias", 3),
            ] {
                v.push((format!("{m}.{t}"), i));
            }
        }
        v
    }

    #[test]
    fn one_step_gradients_match_finite_differences() {
        let (mut net, params) = busy_net();
        // A prefix gives a non-zero convolution window and SSM state, held fixed by the
        // one-step update.
        let mut start = net.new_state();
        for &t in b"ab" {
            net.forward(&params, &mut start, t, None);
        }
        let step = (b'c', b'd');
        let analytic = gradcheck::one_step_grads(&mut net, &params, &start, step);
        for (name, index) in probes(step.0) {
            gradcheck::assert_nonzero(&analytic, &params, &name);
            check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
                gradcheck::segment_loss(n, p, &start, &[step])
            });
        }
    }

    #[test]
    fn segment_gradients_through_the_state_match_finite_differences() {
        let (mut net, params) = busy_net();
        let start = net.new_state();
        let steps = [(b'x', b'y'), (b'y', b'z'), (b'z', b'x'), (b'x', b'y')];
        let analytic = gradcheck::segment_grads(&mut net, &params, &start, &steps);
        for (name, index) in probes(b'x') {
            check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
                gradcheck::segment_loss(n, p, &start, &steps)
            });
        }
    }

    #[test]
    fn one_sgd_tbptt_step_lowers_the_segment_loss() {
        use crate::recipe::OptimizerKind;
        use crate::train::optim::{Hyper, Optimizer};
        let (mut net, mut params) = busy_net();
        let start = net.new_state();
        let steps = [(0u8, 1u8), (1, 2), (2, 3), (3, 4)];
        let before = gradcheck::segment_loss(&mut net, &params, &start, &steps);
        let mut grads = gradcheck::segment_grads(&mut net, &params, &start, &steps);
        let sgd = Hyper {
            kind: OptimizerKind::Sgd,
            lr: 0.05,
            clip: 0.0,
        };
        Optimizer::new().step(&mut params, &mut grads, &sgd, Scope::ALL, &[true; 256]);
        net.refresh(&params);
        let after = gradcheck::segment_loss(&mut net, &params, &start, &steps);
        assert!(after < before, "loss went from {before} to {after}");
    }
}
