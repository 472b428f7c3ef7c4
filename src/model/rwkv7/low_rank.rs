//! The low-rank path, `out = Up · act(Down · x) (+ bias)`, that computes the decay `w`, the
//! in-context learning rate `a`, the value-residual mix `ν` and the gate `g` (one [`LowRank`]
//! each), and the outer activations that turn its output into `w`, `a` and `ν`.

use crate::kernels::{self, math};
use crate::model::layers::{linear, linear_backward};
use crate::params::Slot;

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
    pub down: Slot,         // [D, C]
    pub up: Slot,           // [C, D]
    pub bias: Option<Slot>, // [C]
    pub inner: Inner,
    /// `D`
    pub rank: usize,
    /// `C`
    pub width: usize,
}

/// `hidden = act(Down · x)`, `out = Up · hidden + bias`.
pub fn low_rank_forward(
    lr: &LowRank,
    params: &[f32],
    x: &[f32],
    hidden: &mut [f32],
    out: &mut [f32],
) {
    let (d, c) = (lr.rank, lr.width);
    kernels::gemv(lr.down.of(params), x, hidden, d, c);
    match lr.inner {
        Inner::Identity => {}
        Inner::Tanh => hidden.iter_mut().for_each(|v| *v = math::tanh(*v)),
        Inner::Sigmoid => hidden.iter_mut().for_each(|v| *v = math::sigmoid(*v)),
    }
    let bias = lr.bias.map(|b| b.of(params));
    linear(lr.up.of(params), bias, hidden, out, c, d);
}

/// Backward of [`low_rank_forward`] from `g_out = dL/d out`: writes `g_x` (`g_hidden` is
/// scratch of at least `D`) and, with `grads`, adds the gradients of the path's weights.
#[allow(clippy::too_many_arguments)]
pub fn low_rank_backward(
    lr: &LowRank,
    params: &[f32],
    x: &[f32],
    hidden: &[f32],
    g_out: &[f32],
    g_hidden: &mut [f32],
    g_x: &mut [f32],
    mut grads: Option<&mut [f32]>,
) {
    let (d, c) = (lr.rank, lr.width);
    let g_hidden = &mut g_hidden[..d];
    if let (Some(grads), Some(bias)) = (grads.as_deref_mut(), lr.bias) {
        kernels::add_assign(bias.of_mut(grads), g_out);
    }
    let g_up = grads.as_deref_mut().map(|g| lr.up.of_mut(g));
    linear_backward(
        lr.up.of(params),
        hidden,
        g_out,
        g_hidden,
        g_up,
        None,
        (c, d),
        false,
    );
    match lr.inner {
        Inner::Identity => {}
        // tanh' = 1 − tanh²
        Inner::Tanh => {
            for (g, &t) in g_hidden.iter_mut().zip(hidden) {
                *g *= 1.0 - t * t;
            }
        }
        // σ' = σ·(1 − σ)
        Inner::Sigmoid => {
            for (g, &s) in g_hidden.iter_mut().zip(hidden) {
                *g *= s * (1.0 - s);
            }
        }
    }
    let g_down = grads.map(|g| lr.down.of_mut(g));
    let down = lr.down.of(params);
    linear_backward(down, x, g_hidden, g_x, g_down, None, (d, c), false);
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
