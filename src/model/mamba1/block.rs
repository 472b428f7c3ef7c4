//! One Mamba-1 block, written once for any number of steps `T`: [`forward`] and [`backward`].
//! The live byte is `T = 1`; a replay of known bytes (the rebuild after a TBPTT update) and a
//! segment's backward are `T = n`. The step-batched layers ([`crate::model::layers::Linear`], the norm) take all `T`
//! rows at once, so a segment reads each weight once instead of once per byte; only the layers
//! that carry state — the convolution and the scan — walk the steps one by one inside.
//!
//! Why `T = n` computes the bits of `n` single steps: a block's input at a step depends only
//! on the blocks below at that step and on its own state, and the gradients reaching block `l`
//! at step `t` come from the blocks above at step `t` and from block `l` at step `t + 1`. So
//! walking the blocks in order (forward) or top down (backward), each block's recurrent parts
//! in step order (forward) or last step first (backward), computes the same values, and every
//! parameter gradient receives its per-step terms in the same order (last step first). The
//! segment kernels give the per-step kernels' bits (kernels::steps).

use std::ops::Range;

use super::conv::{self, conv_forward, conv_param_grads};
use super::scan::{
    ScanGrads, ScanInput, ScanTrace, gate_backward, gate_forward, scan_backward, scan_forward,
    softplus_backward, softplus_forward,
};
use super::{
    Config, LAYER_NORM, LayerSlots, LayerState, MIXER_CONV, MIXER_PROJ, MIXER_SSM, NORM_EPS,
};
use crate::kernels::{self, math};
use crate::model::layers::{
    MAX_STEPS, rms_norm_backward_steps, rms_norm_steps, row, row_mut, step_rows, two_mut,
};
use crate::model::layout::carve;
use crate::params::{ParamSet, Scope};

/// One block's activations over `n` steps, each `[n, ·]`: a step's trace is `n = 1`, a
/// replay's buffers `n = MAX_STEPS`. The copies only backward reads (the stream entering the
/// block and the states around the step) are kept for `kept` steps: `n` in a trace, none in a
/// replay, which also keeps a single row of `dA`.
pub(super) struct BlockActs<T> {
    /// Residual stream entering the block `[kept, H]`.
    pub h_in: T,
    /// rms(h_in)·w `[n, H]`.
    pub norm: T,
    /// in_proj output: x (conv input) then z (gate input) `[n, 2I]`.
    pub xz: T,
    /// Convolution inputs before the step `[kept, I, K−1]`.
    pub conv_prev: T,
    /// Convolution output and its sigmoid `[n, I]`.
    pub conv_pre: T,
    pub conv_sig: T,
    /// silu(conv_pre): the SSM input `[n, I]`.
    pub u: T,
    /// x_proj output: Δ-rank part, B, C `[n, R + 2S]`.
    pub proj: T,
    /// dt_proj output + bias, and its softplus Δ `[n, I]`.
    pub dt_pre: T,
    pub dt: T,
    /// silu(z) and sigmoid(z) `[n, I]`.
    pub gate: T,
    pub gate_sig: T,
    /// SSM output before the gate, and gated `[n, I]`.
    pub y_pre: T,
    pub y: T,
    /// exp(Δ·A) `[max(kept, 1), I, S]`.
    pub da: T,
    /// The SSM state before and after the step `[kept, I, S]`.
    pub ssm_prev: T,
    pub ssm_new: T,
}

/// The layout of [`BlockActs`] for `n` steps, `kept` of them traced.
pub(super) fn block_acts<T>(
    cfg: &Config,
    (n, kept): (usize, usize),
    add: &mut impl FnMut(&str, &[usize]) -> T,
) -> BlockActs<T> {
    let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
    BlockActs {
        h_in: add("h_in", &[kept, h]),
        norm: add("norm", &[n, h]),
        xz: add("xz", &[n, 2 * i]),
        conv_prev: add("conv_prev", &[kept, i, k - 1]),
        conv_pre: add("conv_pre", &[n, i]),
        conv_sig: add("conv_sig", &[n, i]),
        u: add("u", &[n, i]),
        proj: add("proj", &[n, r + 2 * s]),
        dt_pre: add("dt_pre", &[n, i]),
        dt: add("dt", &[n, i]),
        gate: add("gate", &[n, i]),
        gate_sig: add("gate_sig", &[n, i]),
        y_pre: add("y_pre", &[n, i]),
        y: add("y", &[n, i]),
        da: add("da", &[kept.max(1), i, s]),
        ssm_prev: add("ssm_prev", &[kept, i, s]),
        ssm_new: add("ssm_new", &[kept, i, s]),
    }
}

/// The gradient buffers of a backward over up to `n` steps (dL/d of each activation), each
/// `[n, ·]`, and one channel's scratch for the scan.
pub(super) struct StepGrads<T> {
    /// Residual stream, and the stream entering the block being walked back `[n, H]`.
    pub h: T,
    pub h_in: T,
    pub norm: T,
    pub y: T,
    pub y_pre: T,
    /// SSM input, then the convolution's output `[n, I]`.
    pub u: T,
    pub dt_pre: T,
    pub sig: T,
    pub xz: T,
    pub proj: T,
    /// dL/d(new state) and dL/d(Δ·A) of one channel `[S]`.
    pub ssm: T,
    pub dt_a: T,
}

/// The layout of [`StepGrads`] for `n` steps.
pub(super) fn step_grads<T>(
    cfg: &Config,
    n: usize,
    add: &mut impl FnMut(&str, &[usize]) -> T,
) -> StepGrads<T> {
    let (h, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
    StepGrads {
        h: add("h", &[n, h]),
        h_in: add("h_in", &[n, h]),
        norm: add("norm", &[n, h]),
        y: add("y", &[n, i]),
        y_pre: add("y_pre", &[n, i]),
        u: add("u", &[n, i]),
        dt_pre: add("dt_pre", &[n, i]),
        sig: add("sig", &[n, i]),
        xz: add("xz", &[n, 2 * i]),
        proj: add("proj", &[n, r + 2 * s]),
        ssm: add("ssm", &[s]),
        dt_a: add("dt_a", &[s]),
    }
}

/// One block as its steps see it: the sizes, the weights' slots, `A = −exp(A_log)`.
pub(super) struct Block<'a> {
    pub cfg: &'a Config,
    pub ls: &'a LayerSlots,
    pub a: &'a [f32],
}

/// What the scan reads of a block's parameters and of one step's activations.
fn scan_input<'a>(
    b: &Block<'a>,
    params: &'a ParamSet,
    u: &'a [f32],
    dt: &'a [f32],
    proj: &'a [f32],
) -> ScanInput<'a> {
    let (s, r) = (b.cfg.state, b.cfg.dt_rank);
    ScanInput {
        u,
        dt,
        b: &proj[r..r + s],
        c: &proj[r + s..r + 2 * s],
        d: params.get(b.ls.d),
        a: b.a,
    }
}

/// The block over `n` steps: `h += out_proj( ssm( silu(conv(x)) ) · silu(z) )`, `[x; z] =
/// in_proj(rms(h))`, with `h` and `out` (the block's output before it joins the stream)
/// `[n, H]`, writing the activations and advancing the block's state step after step. With
/// `traced`, also keeps the copies only backward reads.
#[allow(clippy::too_many_arguments)]
pub(super) fn forward(
    b: &Block,
    params: &ParamSet,
    (h, out): (&mut [f32], &mut [f32]),
    v: &mut BlockActs<&mut [f32]>,
    st: LayerState<&mut [f32]>,
    n: usize,
    traced: bool,
) {
    let (cfg, ls) = (b.cfg, b.ls);
    let (hid, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
    let p = |slot| params.get(slot);
    if traced {
        v.h_in[..n * hid].copy_from_slice(&h[..n * hid]);
    }
    // 2. norm = rms(h) · norm_w
    rms_norm_steps(h, p(ls.norm_w), NORM_EPS, v.norm, n);
    // 3. [x; z] = in_proj_w · norm + in_proj_b
    ls.in_proj.forward_steps(params, (v.norm, hid), v.xz, n);
    for t in 0..n {
        if traced {
            row_mut(v.conv_prev, t, i * (k - 1)).copy_from_slice(st.conv);
        }
        // 4. conv_pre[c] = Σ_j conv_w[c,j] · x[c, now − j] + conv_b[c]   (tap 0 = newest)
        let (x, pre) = (&row(v.xz, t, 2 * i)[..i], row_mut(v.conv_pre, t, i));
        conv_forward(p(ls.conv_w), p(ls.conv_b), x, st.conv, pre, k);
        // 5. u = silu(conv_pre)
        kernels::silu_into(pre, row_mut(v.u, t, i), row_mut(v.conv_sig, t, i));
    }
    // 6. [δ; B; C] = x_proj_w · u
    ls.x_proj.forward_steps(params, (v.u, i), v.proj, n);
    // 7. Δ = softplus(dt_proj_w · δ + dt_proj_b)
    ls.dt_proj
        .forward_steps(params, (v.proj, r + 2 * s), v.dt_pre, n);
    let da_rows = v.da.len() / (i * s);
    for t in 0..n {
        softplus_forward(row(v.dt_pre, t, i), row_mut(v.dt, t, i));
        if traced {
            row_mut(v.ssm_prev, t, i * s).copy_from_slice(st.ssm);
        }
        // 8. dA = exp(Δ · A);  9. s' = s · dA + (u·Δ) · B,  y_pre = C · s' + D · u
        let (u, dt) = (row(v.u, t, i), row(v.dt, t, i));
        let input = scan_input(b, params, u, dt, row(v.proj, t, r + 2 * s));
        // A replay keeps one row of dA, reused by every step.
        let da = row_mut(v.da, t.min(da_rows - 1), i * s);
        scan_forward(&input, st.ssm, da, row_mut(v.y_pre, t, i));
        //    y = y_pre · silu(z)
        let (gate, gate_sig) = (row_mut(v.gate, t, i), row_mut(v.gate_sig, t, i));
        let z = &row(v.xz, t, 2 * i)[i..];
        gate_forward(row(v.y_pre, t, i), z, gate, gate_sig, row_mut(v.y, t, i));
        if traced {
            row_mut(v.ssm_new, t, i * s).copy_from_slice(st.ssm);
        }
    }
    // 10. h += out_proj_w · y + out_proj_b
    ls.out_proj.forward_steps(params, (v.y, i), out, n);
    for t in 0..n {
        kernels::add_assign(row_mut(h, t, hid), row(out, t, hid));
    }
}

/// The traced steps of a segment as one block sees them: step `t`'s trace is `traces[t]`, the
/// block's part of it `range`.
pub(super) struct Seg<'a> {
    pub cfg: &'a Config,
    pub traces: &'a [Vec<f32>],
    pub range: Range<usize>,
}

impl<'a> Seg<'a> {
    fn n(&self) -> usize {
        self.traces.len()
    }

    /// The block's trace of step `t`.
    fn at(&self, t: usize) -> BlockActs<&'a [f32]> {
        block_acts(
            self.cfg,
            (1, 1),
            &mut carve(&self.traces[t][self.range.clone()]),
        )
    }

    /// One activation of every step, without allocating.
    fn rows(&self, pick: impl Fn(BlockActs<&'a [f32]>) -> &'a [f32]) -> [&'a [f32]; MAX_STEPS] {
        step_rows(self.n(), |t| pick(self.at(t)))
    }
}

/// What the stateful parts of a block's backward read: the block, the parameters and the
/// segment's traces.
type Walk<'w, 'a> = (&'w Block<'a>, &'w ParamSet, &'w Seg<'a>);

/// What a block's backward writes into: the flat gradient buffer, the trained groups, and the
/// block's part of the carried state gradient (none for a one-step update).
pub(super) struct BlockGrads<'a> {
    pub grads: &'a mut [f32],
    pub scope: Scope,
    pub carry: Option<LayerState<&'a mut [f32]>>,
}

/// The block over a segment's steps walked back, the steps of [`forward`] in reverse. On
/// entry the rows of `g.h` are dL/d(block output) at each step; on return dL/d(block input).
pub(super) fn backward(
    b: &Block,
    params: &ParamSet,
    seg: &Seg,
    g: &mut StepGrads<&mut [f32]>,
    out: BlockGrads,
) {
    let (cfg, ls, n) = (b.cfg, b.ls, seg.n());
    let (hid, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
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
    let y = seg.rows(|v| v.y);
    let g_out = proj.then_some(&mut *grads);
    ls.out_proj
        .backward_steps(params, g_out, &y[..n], g.h, (g.y, i), false);
    // 9–7. the gate, the scan (through the SSM state's gradient), softplus
    ssm_backward((b, params, seg), g, (&mut *grads, scope), carry_ssm);
    //      dt_pre = dt_proj_w · δ + dt_proj_b:  writes δ's gradient into each step's proj
    let delta = seg.rows(|v| &v.proj[..r]);
    let g_dt = proj.then_some(&mut *grads);
    let g_delta = (&mut *g.proj, r + 2 * s);
    ls.dt_proj
        .backward_steps(params, g_dt, &delta[..n], g.dt_pre, g_delta, false);
    // 6. proj = x_proj_w · u   (adds into g.u)
    let u = seg.rows(|v| v.u);
    let g_x = proj.then_some(&mut *grads);
    ls.x_proj
        .backward_steps(params, g_x, &u[..n], g.proj, (g.u, i), true);
    // 5. u = silu(conv_pre);  4. the convolution (through its window's gradient)
    conv_backward((b, params, seg), g, (&mut *grads, scope), carry_conv);
    // 3. xz = in_proj_w · norm + in_proj_b
    let norm = seg.rows(|v| v.norm);
    let g_in = proj.then_some(&mut *grads);
    ls.in_proj
        .backward_steps(params, g_in, &norm[..n], g.xz, (g.norm, hid), false);
    // 2. norm = rms(h_in) · norm_w; the residual passes g.h through unchanged.
    let h_in = seg.rows(|v| v.h_in);
    let g_w = scope.has(LAYER_NORM).then(|| ls.norm_w.of_mut(grads));
    let w = params.get(ls.norm_w);
    rms_norm_backward_steps(&h_in[..n], w, NORM_EPS, g.norm, g.h_in, g_w);
    kernels::add_assign(&mut g.h_in[..n * hid], &g.h[..n * hid]);
    g.h[..n * hid].swap_with_slice(&mut g.h_in[..n * hid]);
}

/// Steps 9 to 7 of a block walked back, last step first, from `g.y = dL/dy`: the gate (writes
/// the z half of `g.xz`), the scan channel by channel (through `carry`, the block's SSM state
/// gradient) and the softplus of Δ, leaving dL/du in `g.u` and dL/d(dt_pre) in `g.dt_pre`.
fn ssm_backward(
    (b, params, seg): Walk,
    g: &mut StepGrads<&mut [f32]>,
    (grads, scope): (&mut [f32], Scope),
    mut carry: Option<&mut [f32]>,
) {
    let (cfg, ls) = (b.cfg, b.ls);
    let (i, s, r) = (cfg.inner, cfg.state, cfg.dt_rank);
    for t in (0..seg.n()).rev() {
        let v = seg.at(t);
        // 9. y = y_pre · silu(z)
        let gate = (v.y_pre, &v.xz[i..], v.gate, v.gate_sig);
        let (g_y, g_y_pre) = (row(g.y, t, i), row_mut(g.y_pre, t, i));
        gate_backward(gate, g_y, g_y_pre, &mut row_mut(g.xz, t, 2 * i)[i..]);
        //    s' = s · dA + (u·Δ) · B,  y_pre = C · s' + D · u
        let g_proj = row_mut(g.proj, t, r + 2 * s);
        g_proj.fill(0.0);
        let (g_b, g_c) = g_proj[r..].split_at_mut(s);
        let (g_d, g_a_log) = match scope.has(MIXER_SSM) {
            true => {
                let (d, a_log) = two_mut(grads, ls.d, ls.a_log);
                (Some(d), Some(a_log))
            }
            false => (None, None),
        };
        let trace = ScanTrace {
            input: scan_input(b, params, v.u, v.dt, v.proj),
            da: v.da,
            ssm_prev: v.ssm_prev,
            ssm_new: v.ssm_new,
        };
        let scan_grads = ScanGrads {
            u: row_mut(g.u, t, i),
            dt: row_mut(g.dt_pre, t, i),
            b: g_b,
            c: g_c,
            d: g_d,
            a_log: g_a_log,
            s_scratch: &mut *g.ssm,
            dt_a_scratch: &mut *g.dt_a,
        };
        scan_backward(&trace, row(g.y_pre, t, i), scan_grads, carry.as_deref_mut());
        // 7. Δ = softplus(dt_pre)
        softplus_backward(v.dt_pre, row_mut(g.dt_pre, t, i), row_mut(g.sig, t, i));
    }
}

/// Steps 5 and 4 of a block walked back, last step first: the SiLU after the convolution and
/// the convolution itself (through `carry`, its window's gradient), from dL/du in `g.u`
/// (left as dL/dconv_pre) to dL/dx in the x half of `g.xz`.
fn conv_backward(
    (b, params, seg): Walk,
    g: &mut StepGrads<&mut [f32]>,
    (grads, scope): (&mut [f32], Scope),
    mut carry: Option<&mut [f32]>,
) {
    let (ls, i, k) = (b.ls, b.cfg.inner, b.cfg.conv);
    for t in (0..seg.n()).rev() {
        let v = seg.at(t);
        let g_u = row_mut(g.u, t, i);
        for ((g_u, &pre), &sig) in g_u.iter_mut().zip(v.conv_pre).zip(v.conv_sig) {
            *g_u *= math::silu_grad(pre, sig);
        }
        if scope.has(MIXER_CONV) {
            let (g_w, g_b) = two_mut(grads, ls.conv_w, ls.conv_b);
            conv_param_grads(g_u, &v.xz[..i], v.conv_prev, g_w, g_b, k);
        }
        let g_x = &mut row_mut(g.xz, t, 2 * i)[..i];
        conv::conv_backward(params.get(ls.conv_w), g_u, g_x, carry.as_deref_mut(), k);
    }
}
