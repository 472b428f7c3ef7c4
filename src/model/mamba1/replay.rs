//! Replays of bytes already known — the rebuild of the live state after a TBPTT update — layer
//! by layer over all steps at once: each linear map's weight is read once per replay instead of
//! once per byte (kernels::steps). The convolution and the scan still walk the steps in order.
//!
//! The bits equal those of [`Mamba1::advance`] byte after byte: a block's input at a step
//! depends only on the blocks below at that step and on its own state, and every step runs the
//! same operations on the same operands.

use super::conv::conv_forward;
use super::scan::{gate_forward, scan_forward, softplus_forward};
use super::steps::MAX_STEPS;
use super::{Config, Mamba1, NORM_EPS, scan_input};
use crate::flat_group;
use crate::kernels::{self, steps};
use crate::model::layers::{Linear, rms_norm};
use crate::model::layout::Layout;
use crate::params::ParamSet;

flat_group! {
    /// The activations of a replay's steps, each `[steps, ·]`.
    pub struct ReplaySlots, view Replay, view_mut ReplayMut, dims (n, h, i, s, r) {
        /// Residual stream, its norm and one block's output `[n, H]`.
        h: [n, h],
        norm: [n, h],
        out: [n, h],
        xz: [n, 2 * i],
        conv_pre: [n, i],
        conv_sig: [n, i],
        u: [n, i],
        proj: [n, r + 2 * s],
        dt_pre: [n, i],
        dt: [n, i],
        y_pre: [n, i],
        gate: [n, i],
        gate_sig: [n, i],
        y: [n, i],
        /// One step's exp(Δ·A) `[I, S]`, not kept across steps.
        da: [i, s],
    }
}

/// The buffers of a replay of up to [`MAX_STEPS`] steps.
pub struct ReplayBuffers {
    slots: ReplaySlots,
    data: Vec<f32>,
}

impl ReplayBuffers {
    /// Floats of the buffers (for the memory estimate).
    pub fn floats(cfg: &Config) -> usize {
        Self::layout(cfg).0.len()
    }

    fn layout(cfg: &Config) -> (Layout, ReplaySlots) {
        let mut layout = Layout::new();
        let (h, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
        let slots = ReplaySlots::register(&mut layout, "", MAX_STEPS, h, i, s, r);
        (layout, slots)
    }

    pub fn new(cfg: &Config) -> Self {
        let (layout, slots) = Self::layout(cfg);
        ReplayBuffers {
            slots,
            data: layout.zeros(),
        }
    }
}

/// `y_t = W x_t + b` over the steps, rows of `x` `lin.cols` wide (or `x_stride` apart).
fn linear_steps(
    lin: &Linear,
    params: &ParamSet,
    x: &[f32],
    x_stride: usize,
    y: &mut [f32],
    n: usize,
) {
    let mut xs: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
    for (t, xt) in xs.iter_mut().take(n).enumerate() {
        *xt = &x[t * x_stride..t * x_stride + lin.cols];
    }
    let (rows, cols) = (lin.rows, lin.cols);
    steps::gemv_steps(params.get(lin.w), &xs[..n], y, rows, (rows, cols));
    if let Some(b) = lin.b {
        for t in 0..n {
            kernels::add_assign(&mut y[t * rows..(t + 1) * rows], params.get(b));
        }
    }
}

impl Mamba1 {
    /// [`crate::model::Network::advance_steps`] for Mamba-1, layer by layer.
    pub(super) fn advance_steps_impl(
        &mut self,
        params: &ParamSet,
        state: &mut [f32],
        tokens: &[u8],
    ) {
        let mut buf = self
            .replay
            .take()
            .unwrap_or_else(|| ReplayBuffers::new(&self.cfg));
        for part in tokens.chunks(MAX_STEPS) {
            let mut v = buf.slots.view_mut(&mut buf.data);
            self.replay_part(params, state, part, &mut v);
        }
        self.replay = Some(buf);
    }

    fn replay_part(&self, params: &ParamSet, state: &mut [f32], tokens: &[u8], v: &mut ReplayMut) {
        let (cfg, sl, n) = (&self.cfg, &self.slots, tokens.len());
        let hid = cfg.hidden;
        // 1. h = embed[token]
        for (t, &token) in tokens.iter().enumerate() {
            let row = params.get(sl.embed.row(token as usize, hid));
            v.h[t * hid..(t + 1) * hid].copy_from_slice(row);
        }
        for l in 0..cfg.layers {
            let st = self.state_layout.layers[l].view_mut(state);
            self.block_replay(l, params, (st.conv, st.ssm), v, n);
        }
    }

    /// One block over the steps (steps 2–10 of [`super::block_forward`]).
    fn block_replay(
        &self,
        l: usize,
        params: &ParamSet,
        (conv, ssm): (&mut [f32], &mut [f32]),
        v: &mut ReplayMut,
        n: usize,
    ) {
        let (cfg, ls) = (&self.cfg, &self.slots.layers[l]);
        let (hid, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
        let p = |slot| params.get(slot);
        // 2. norm = rms(h) · norm_w
        for t in 0..n {
            let (h, norm) = (
                &v.h[t * hid..(t + 1) * hid],
                &mut v.norm[t * hid..(t + 1) * hid],
            );
            rms_norm(h, p(ls.norm_w), NORM_EPS, norm);
        }
        // 3. [x; z] = in_proj_w · norm + in_proj_b
        linear_steps(&ls.in_proj, params, v.norm, hid, v.xz, n);
        for t in 0..n {
            let (xz, row) = (&v.xz[t * 2 * i..(t + 1) * 2 * i], t * i..(t + 1) * i);
            // 4. the convolution, in order;  5. u = silu(conv_pre)
            let pre = &mut v.conv_pre[row.clone()];
            conv_forward(p(ls.conv_w), p(ls.conv_b), &xz[..i], conv, pre, k);
            kernels::silu_into(pre, &mut v.u[row.clone()], &mut v.conv_sig[row]);
        }
        // 6. [δ; B; C] = x_proj_w · u;  7. Δ = softplus(dt_proj_w · δ + dt_proj_b)
        linear_steps(&ls.x_proj, params, v.u, i, v.proj, n);
        linear_steps(&ls.dt_proj, params, v.proj, r + 2 * s, v.dt_pre, n);
        for t in 0..n {
            let row = t * i..(t + 1) * i;
            softplus_forward(&v.dt_pre[row.clone()], &mut v.dt[row.clone()]);
            // 8–9. the scan, in order, and the gate
            let proj = &v.proj[t * (r + 2 * s)..(t + 1) * (r + 2 * s)];
            let input = scan_input(
                cfg,
                ls,
                params,
                &self.a[l],
                &v.u[row.clone()],
                &v.dt[row.clone()],
                proj,
            );
            scan_forward(&input, ssm, v.da, &mut v.y_pre[row.clone()]);
            let z = &v.xz[t * 2 * i + i..(t + 1) * 2 * i];
            let (gate, sig) = (&mut v.gate[row.clone()], &mut v.gate_sig[row.clone()]);
            gate_forward(&v.y_pre[row.clone()], z, gate, sig, &mut v.y[row]);
        }
        // 10. h += out_proj_w · y + out_proj_b
        linear_steps(&ls.out_proj, params, v.y, i, v.out, n);
        for t in 0..n {
            let row = t * hid..(t + 1) * hid;
            kernels::add_assign(&mut v.h[row.clone()], &v.out[row]);
        }
    }
}
