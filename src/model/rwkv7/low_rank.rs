//! The low-rank path, `out = Up · act(Down · x) (+ bias)`, that computes the decay `w`, the
//! in-context learning rate `a`, the value-residual mix `ν` and the gate `g` (one [`LowRank`]
//! each), and the outer activations that turn its output into `w`, `a` and `ν`.

use crate::kernels::math;
use crate::model::layers::{Linear, row_mut};
use crate::params::ParamSet;

/// `e^{−1/2}`: the decay is `w = exp(−e^{−1/2} · sigmoid(·))`, so `w ∈ (0.545, 1)`.
pub const DECAY_SCALE: f32 = 0.606_530_66;

/// The activation between the two matrices of a low-rank path.
#[derive(Clone, Copy, Debug)]
pub enum Inner {
    Identity,
    Tanh,
    Sigmoid,
}

/// The weights of one low-rank path of rank `D` on width `C`.
pub struct LowRank {
    /// `[D, C]`, no bias.
    pub down: Linear,
    /// `[C, D]`, with the bias `[C]` when the path has one.
    pub up: Linear,
    pub inner: Inner,
}

/// `hidden = act(Down · x)`, `out = Up · hidden + bias` for `n` steps: the rows of `x` and
/// `out` are `C` wide, those of `hidden` `D`.
pub fn low_rank_forward(
    lr: &LowRank,
    params: &ParamSet,
    (x, hidden, out): (&[f32], &mut [f32], &mut [f32]),
    n: usize,
) {
    let (d, c) = (lr.down.rows, lr.down.cols);
    lr.down.forward_steps(params, (x, c), hidden, n);
    let hidden_rows = &mut hidden[..n * d];
    match lr.inner {
        Inner::Identity => {}
        Inner::Tanh => hidden_rows.iter_mut().for_each(|v| *v = math::tanh(*v)),
        Inner::Sigmoid => hidden_rows.iter_mut().for_each(|v| *v = math::sigmoid(*v)),
    }
    lr.up.forward_steps(params, (hidden, d), out, n);
}

/// Backward of [`low_rank_forward`] over `n = x.len()` steps, last first, from the rows of
/// `g_out = dL/d out` (`[n, C]`), with `x` and `hidden` each step's input and hidden: writes
/// the rows of `g_x` (`[n, C]`; `g_hidden` is scratch of at least `[n, D]`) and, with `grads`,
/// adds the gradients of the path's weights, each receiving its steps' terms last step first.
pub fn low_rank_backward(
    lr: &LowRank,
    params: &ParamSet,
    (x, hidden): (&[&[f32]], &[&[f32]]),
    g_out: &[f32],
    (g_hidden, g_x): (&mut [f32], &mut [f32]),
    mut grads: Option<&mut [f32]>,
) {
    let (d, c) = (lr.down.rows, lr.down.cols);
    let gr = grads.as_deref_mut();
    lr.up
        .backward_steps(params, gr, hidden, g_out, (g_hidden, d), false);
    for (t, &h) in hidden.iter().enumerate() {
        let g_h = row_mut(g_hidden, t, d);
        match lr.inner {
            Inner::Identity => {}
            // tanh' = 1 − tanh²
            Inner::Tanh => {
                for (g, &t) in g_h.iter_mut().zip(h) {
                    *g *= 1.0 - t * t;
                }
            }
            // σ' = σ·(1 − σ)
            Inner::Sigmoid => {
                for (g, &s) in g_h.iter_mut().zip(h) {
                    *g *= s * (1.0 - s);
                }
            }
        }
    }
    lr.down
        .backward_steps(params, grads, x, g_hidden, (g_x, c), false);
}

/// The decay from its low-rank pre-activation, in place: `s = σ(pre)` (kept for backward),
/// `w = exp(−e^{−½}·s)`.
pub fn decay_forward(pre_then_s: &mut [f32], w: &mut [f32]) {
    for (s, wd) in pre_then_s.iter_mut().zip(w.iter_mut()) {
        *s = math::sigmoid(*s);
        *wd = math::exp(-DECAY_SCALE * *s);
    }
}

/// Backward of [`decay_forward`]: `dw/dpre = −e^{−½}·w·s(1 − s)`. Writes `g_pre`.
pub fn decay_backward(s: &[f32], w: &[f32], g_w: &[f32], g_pre: &mut [f32]) {
    for (((gp, &gw), &wi), &si) in g_pre.iter_mut().zip(g_w).zip(w).zip(s) {
        *gp = gw * (-DECAY_SCALE * wi) * (si * (1.0 - si));
    }
}

/// `y = σ(pre)`, in place.
pub fn sigmoid_forward(pre_then_y: &mut [f32]) {
    for v in pre_then_y.iter_mut() {
        *v = math::sigmoid(*v);
    }
}

/// Backward of [`sigmoid_forward`] from `g_y`: writes `g_pre = g_y·y(1 − y)`.
pub fn sigmoid_backward(y: &[f32], g_y: &[f32], g_pre: &mut [f32]) {
    for ((gp, &gy), &yi) in g_pre.iter_mut().zip(g_y).zip(y) {
        *gp = gy * (yi * (1.0 - yi));
    }
}

/// The value residual of blocks after the first, from the mix's low-rank pre-activation:
/// `ν = σ(pre)` (in place), `v = ṽ + (v_first − ṽ) ⊙ ν`.
pub fn value_residual_forward(pre_then_nu: &mut [f32], vt: &[f32], v_first: &[f32], v: &mut [f32]) {
    for (((v, nu), &vt), &vf) in v
        .iter_mut()
        .zip(pre_then_nu.iter_mut())
        .zip(vt)
        .zip(v_first)
    {
        *nu = math::sigmoid(*nu);
        *v = vt + (vf - vt) * *nu;
    }
}

/// Backward of [`value_residual_forward`] from `g_v`: writes `g_vt` and `g_pre`, adds into
/// `g_v_first`.
pub fn value_residual_backward(
    nu: &[f32],
    vt: &[f32],
    v_first: &[f32],
    g_v: &[f32],
    (g_vt, g_v_first, g_pre): (&mut [f32], &mut [f32], &mut [f32]),
) {
    for i in 0..g_v.len() {
        let n = nu[i];
        g_vt[i] = g_v[i] * (1.0 - n);
        g_v_first[i] += g_v[i] * n;
        g_pre[i] = g_v[i] * (v_first[i] - vt[i]) * (n * (1.0 - n));
    }
}
