//! Backward through a segment's steps layer by layer, each block over all steps at once: every
//! linear map's weight and gradient is then read once per segment instead of once per byte
//! (kernels::steps). Only the parts that carry state — the scan and the convolution — walk the
//! steps one by one, last first, as they must.
//!
//! Why the bits equal the step-by-step backward: a block's output at a step reaches later
//! steps only through its own state, so the gradients reaching block `l` at step `t` come from
//! the blocks above at step `t` and from block `l` at step `t + 1`. Walking the blocks top down
//! and each block's recurrent parts last step first computes the same values, and every
//! parameter gradient receives its per-step terms in the same order (last step first).

use super::conv::{conv_backward, conv_param_grads};
use super::scan::{ScanGrads, ScanTrace, gate_backward, scan_backward, softplus_backward};
use super::{
    Config, EMBED, HEAD, LAYER_NORM, MIXER_CONV, MIXER_PROJ, MIXER_SSM, Mamba1, NORM_EPS,
    scan_input,
};
use crate::flat_group;
use crate::kernels::{self, math, steps};
use crate::model::VOCAB;
use crate::model::layers::{Linear, rms_norm_backward, two_mut};
use crate::model::layout::Layout;
use crate::params::{ParamSet, Scope, Slot};

/// Most steps one call walks back (a TBPTT chunk).
pub const MAX_STEPS: usize = 64;

flat_group! {
    /// The gradient buffers of a segment's steps (dL/d of each activation), each `[steps, ·]`.
    pub struct StepGradSlots, view StepGrad, view_mut StepGradMut, dims (n, h, i, s, r) {
        /// Residual stream, and the stream entering the block being walked back `[n, H]`.
        h: [n, h],
        h_in: [n, h],
        norm: [n, h],
        y: [n, i],
        y_pre: [n, i],
        /// SSM input, then the convolution's output `[n, I]`.
        u: [n, i],
        dt_pre: [n, i],
        sig: [n, i],
        xz: [n, 2 * i],
        proj: [n, r + 2 * s],
    }
}

/// The gradient buffers of up to [`MAX_STEPS`] steps.
pub struct StepGrads {
    slots: StepGradSlots,
    steps: usize,
    data: Vec<f32>,
    /// One channel's `[S]` scratch for the scan.
    ssm: Vec<f32>,
    dt_a: Vec<f32>,
}

impl StepGrads {
    /// Floats of the buffers for `steps` steps.
    pub fn floats(cfg: &Config, steps: usize) -> usize {
        Self::layout(cfg, steps).0.len() + 2 * cfg.state
    }

    fn layout(cfg: &Config, steps: usize) -> (Layout, StepGradSlots) {
        let mut layout = Layout::new();
        let (h, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
        let slots = StepGradSlots::register(&mut layout, "", steps, h, i, s, r);
        (layout, slots)
    }

    pub fn new(cfg: &Config, steps: usize) -> Self {
        let (layout, slots) = Self::layout(cfg, steps);
        StepGrads {
            slots,
            steps,
            data: layout.zeros(),
            ssm: vec![0.0; cfg.state],
            dt_a: vec![0.0; cfg.state],
        }
    }
}

/// Row `t` of a step-major buffer whose rows are `w` wide.
#[inline(always)]
fn at(buf: &mut [f32], t: usize, w: usize) -> &mut [f32] {
    &mut buf[t * w..(t + 1) * w]
}

/// Per-step slices of the traces, without allocating.
fn per_step<'a>(
    traces: &'a [Vec<f32>],
    pick: impl Fn(&'a [f32]) -> &'a [f32],
) -> [&'a [f32]; MAX_STEPS] {
    let mut out: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
    for (o, tr) in out.iter_mut().zip(traces) {
        *o = pick(tr);
    }
    out
}

/// [`Linear::backward`] over the steps, from the gradient rows `g` to the rows `g_x` (which
/// may be wider than the map's input: `gx_stride` apart), with the inputs `x` of each step; the
/// weight and bias gradients go into `grads` when given.
fn linear_steps(
    lin: &Linear,
    params: &ParamSet,
    grads: Option<&mut [f32]>,
    x: &[&[f32]],
    g: &[f32],
    (g_x, gx_stride): (&mut [f32], usize),
    accumulate: bool,
) {
    let (g_w, g_b) = match (grads, lin.b) {
        (Some(grads), Some(b)) => {
            let (g_w, g_b) = two_mut(grads, lin.w, b);
            (Some(g_w), Some(g_b))
        }
        (Some(grads), None) => (Some(lin.w.of_mut(grads)), None),
        (None, _) => (None, None),
    };
    let (rows, cols) = (lin.rows, lin.cols);
    if let Some(g_b) = g_b {
        for t in (0..x.len()).rev() {
            kernels::add_assign(g_b, &g[t * rows..(t + 1) * rows]);
        }
    }
    let g = steps::Rows {
        data: g,
        stride: rows,
    };
    let w = params.get(lin.w);
    steps::linear_backward_steps(w, x, g, g_x, gx_stride, g_w, (rows, cols), accumulate);
}

impl Mamba1 {
    /// [`crate::model::Network::backward_steps`] for Mamba-1, layer by layer.
    pub(super) fn backward_steps_impl(
        &mut self,
        params: &ParamSet,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: &mut [f32],
    ) {
        let n = traces.len();
        let below = [EMBED, LAYER_NORM, MIXER_CONV, MIXER_SSM, MIXER_PROJ];
        if n == 0 || n > MAX_STEPS || !below.iter().any(|&gr| scope.has(gr)) {
            // Nothing below the head trains (or too many steps): step by step.
            for (j, tr) in traces.iter().enumerate().rev() {
                let g = &grad_logits[j * VOCAB..(j + 1) * VOCAB];
                self.backward_one(params, tr, g, scope, grads, Some(carry));
            }
            return;
        }
        let mut sg = match self.step_grads.take() {
            Some(sg) if sg.steps >= n => sg,
            _ => StepGrads::new(&self.cfg, n),
        };
        let (mut ssm, mut dt_a) = (std::mem::take(&mut sg.ssm), std::mem::take(&mut sg.dt_a));
        let mut g = sg.slots.view_mut(&mut sg.data);
        self.head_backward_steps(params, traces, grad_logits, scope, grads, &mut g);
        for l in (0..self.cfg.layers).rev() {
            let carry_l = self.state_layout.layers[l].view_mut(carry);
            let scratch = (&mut ssm[..], &mut dt_a[..]);
            let out = (&mut *grads, carry_l.conv, carry_l.ssm);
            self.block_backward_steps(l, params, traces, scope, &mut g, out, scratch);
        }
        // 1. h = embed[token]
        if scope.has(EMBED) {
            let hid = self.cfg.hidden;
            for (t, tr) in traces.iter().enumerate().rev() {
                let token = self.trace_layout.outer.view(tr).token[0] as usize;
                let row = self.slots.embed.row(token, hid);
                kernels::add_assign(row.of_mut(grads), at(g.h, t, hid));
            }
        }
        sg.ssm = ssm;
        sg.dt_a = dt_a;
        self.step_grads = Some(sg);
    }

    /// Step 11, logits = lm_head · rms(h_final) · final_norm_w, over the steps: leaves dL/dh_final
    /// in `g.h`.
    fn head_backward_steps(
        &self,
        params: &ParamSet,
        traces: &[Vec<f32>],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        g: &mut StepGradMut,
    ) {
        let (sl, outer, hid) = (&self.slots, &self.trace_layout.outer, self.cfg.hidden);
        let norm_f = per_step(traces, |tr| outer.view(tr).norm_f);
        let n = traces.len();
        let g_head = scope.has(HEAD).then_some(&mut *grads);
        linear_steps(
            &sl.lm_head,
            params,
            g_head,
            &norm_f[..n],
            grad_logits,
            (g.norm, hid),
            false,
        );
        let w_norm = params.get(sl.final_norm_w);
        for (t, tr) in traces.iter().enumerate().rev() {
            let gw = scope.has(LAYER_NORM).then(|| sl.final_norm_w.of_mut(grads));
            let h_final = outer.view(tr).h_final;
            let g_norm = &g.norm[t * hid..(t + 1) * hid];
            rms_norm_backward(h_final, w_norm, NORM_EPS, g_norm, at(g.h, t, hid), gw);
        }
    }

    /// One block backward over the steps: on entry `g.h` is dL/d(block output) of each step,
    /// on return dL/d(block input). `carry_*` are the block's parts of the state gradient.
    #[allow(clippy::too_many_arguments)]
    fn block_backward_steps(
        &self,
        l: usize,
        params: &ParamSet,
        traces: &[Vec<f32>],
        scope: Scope,
        g: &mut StepGradMut,
        (grads, carry_conv, carry_ssm): (&mut [f32], &mut [f32], &mut [f32]),
        (ssm, dt_a): (&mut [f32], &mut [f32]),
    ) {
        let (cfg, ls, n) = (&self.cfg, &self.slots.layers[l], traces.len());
        let (hid, i, s, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.dt_rank);
        let tl = &self.trace_layout.layers[l];
        let view = |t: usize| tl.view(&traces[t]);
        let proj = scope.has(MIXER_PROJ);
        let p = |slot: Slot| slot.of(&params.data);
        // 10. h_out = h_in + out_proj_w · y + out_proj_b
        let y = per_step(traces, |tr| tl.view(tr).y);
        let g_out = proj.then_some(&mut *grads);
        linear_steps(&ls.out_proj, params, g_out, &y[..n], g.h, (g.y, i), false);
        // 9. y = y_pre · silu(z), then the scan, last step first
        self.scan_backward_steps(l, params, traces, scope, g, grads, carry_ssm, (ssm, dt_a));
        //    dt_pre = dt_proj_w · δ + dt_proj_b:  writes δ's gradient into each step's proj
        let delta = per_step(traces, |tr| &tl.view(tr).proj[..r]);
        let g_dt = proj.then_some(&mut *grads);
        let g_delta = (&mut *g.proj, r + 2 * s);
        linear_steps(
            &ls.dt_proj,
            params,
            g_dt,
            &delta[..n],
            g.dt_pre,
            g_delta,
            false,
        );
        // 6. proj = x_proj_w · u   (adds into u)
        let u = per_step(traces, |tr| tl.view(tr).u);
        let g_x = proj.then_some(&mut *grads);
        linear_steps(&ls.x_proj, params, g_x, &u[..n], g.proj, (g.u, i), true);
        // 5. u = silu(conv_pre);  4. the convolution, last step first
        self.conv_backward_steps(l, params, traces, scope, g, grads, carry_conv);
        // 3. xz = in_proj_w · norm + in_proj_b
        let norm = per_step(traces, |tr| tl.view(tr).norm);
        let g_in = proj.then_some(&mut *grads);
        linear_steps(
            &ls.in_proj,
            params,
            g_in,
            &norm[..n],
            g.xz,
            (g.norm, hid),
            false,
        );
        // 2. norm = rms(h_in) · norm_w; the residual passes h through unchanged.
        for t in (0..n).rev() {
            let lt = view(t);
            let g_w = scope.has(LAYER_NORM).then(|| ls.norm_w.of_mut(grads));
            let g_norm = &g.norm[t * hid..(t + 1) * hid];
            let g_h_in = at(g.h_in, t, hid);
            rms_norm_backward(lt.h_in, p(ls.norm_w), NORM_EPS, g_norm, g_h_in, g_w);
            kernels::add_assign(g_h_in, &g.h[t * hid..(t + 1) * hid]);
        }
        g.h[..n * hid].swap_with_slice(&mut g.h_in[..n * hid]);
    }

    /// Steps 9 to 7 of a block over the segment, last step first: the gate, the selective scan
    /// (carrying the state gradient across steps) and the softplus of Δ.
    #[allow(clippy::too_many_arguments)]
    fn scan_backward_steps(
        &self,
        l: usize,
        params: &ParamSet,
        traces: &[Vec<f32>],
        scope: Scope,
        g: &mut StepGradMut,
        grads: &mut [f32],
        carry_ssm: &mut [f32],
        (ssm, dt_a): (&mut [f32], &mut [f32]),
    ) {
        let (cfg, ls, n) = (&self.cfg, &self.slots.layers[l], traces.len());
        let (i, s, r) = (cfg.inner, cfg.state, cfg.dt_rank);
        let tl = &self.trace_layout.layers[l];
        let view = |t: usize| tl.view(&traces[t]);
        for t in (0..n).rev() {
            let lt = view(t);
            let gate = (lt.y_pre, &lt.xz[i..], lt.gate, lt.gate_sig);
            let (g_y, g_y_pre) = (&g.y[t * i..(t + 1) * i], at(g.y_pre, t, i));
            gate_backward(gate, g_y, g_y_pre, &mut at(g.xz, t, 2 * i)[i..]);
            let g_proj = at(g.proj, t, r + 2 * s);
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
                input: scan_input(cfg, ls, params, &self.a[l], lt.u, lt.dt, lt.proj),
                da: lt.da,
                ssm_prev: lt.ssm_prev,
                ssm_new: lt.ssm_new,
            };
            let scan_grads = ScanGrads {
                u: at(g.u, t, i),
                dt: at(g.dt_pre, t, i),
                b: g_b,
                c: g_c,
                d: g_d,
                a_log: g_a_log,
                s_scratch: &mut *ssm,
                dt_a_scratch: &mut *dt_a,
            };
            let g_y_pre = &g.y_pre[t * i..(t + 1) * i];
            scan_backward(&trace, g_y_pre, scan_grads, Some(&mut *carry_ssm));
            // 7. Δ = softplus(dt_pre)
            softplus_backward(lt.dt_pre, at(g.dt_pre, t, i), at(g.sig, t, i));
        }
    }

    /// Steps 5 and 4 of a block over the segment, last step first: the SiLU after the
    /// convolution and the convolution itself (carrying its window's gradient across steps).
    #[allow(clippy::too_many_arguments)]
    fn conv_backward_steps(
        &self,
        l: usize,
        params: &ParamSet,
        traces: &[Vec<f32>],
        scope: Scope,
        g: &mut StepGradMut,
        grads: &mut [f32],
        carry_conv: &mut [f32],
    ) {
        let (cfg, ls, n) = (&self.cfg, &self.slots.layers[l], traces.len());
        let (i, k) = (cfg.inner, cfg.conv);
        let tl = &self.trace_layout.layers[l];
        let view = |t: usize| tl.view(&traces[t]);
        let p = |slot: Slot| slot.of(&params.data);
        for t in (0..n).rev() {
            let lt = view(t);
            let g_u = at(g.u, t, i);
            for ((g_u, &pre), &sig) in g_u.iter_mut().zip(lt.conv_pre).zip(lt.conv_sig) {
                *g_u *= math::silu_grad(pre, sig);
            }
            if scope.has(MIXER_CONV) {
                let (g_w, g_b) = two_mut(grads, ls.conv_w, ls.conv_b);
                conv_param_grads(g_u, &lt.xz[..i], lt.conv_prev, g_w, g_b, k);
            }
            let g_x = &mut at(g.xz, t, 2 * i)[..i];
            conv_backward(p(ls.conv_w), g_u, g_x, Some(&mut *carry_conv), k);
        }
    }
}
