//! Layers both networks share, each a forward function with its backward next to it: the
//! norms, the token shift, and a linear map with a bias. The backward of a step writes the
//! gradient of its input and adds the gradients of its parameters (when given) into the flat
//! gradient buffer.
//!
//! [`Linear`] takes `T` step-major rows at once ([`Linear::forward_steps`],
//! [`Linear::backward_steps`]): the live byte is `T = 1`, a segment or a replay `T ≤`
//! [`MAX_STEPS`]. One step calls the per-step kernels, more the segment kernels
//! ([`kernels::steps`]), which read each weight row once for all steps and give the same bits.

use crate::kernels::{self, steps};
use crate::params::{Group, ParamSet, Slot};

/// Most steps a step-batched layer takes in one call (a TBPTT chunk, a part of a replay).
pub const MAX_STEPS: usize = 64;

/// Row `t` of a step-major buffer whose rows are `w` wide.
#[inline(always)]
pub fn row(buf: &[f32], t: usize, w: usize) -> &[f32] {
    &buf[t * w..(t + 1) * w]
}

/// Row `t` of a step-major buffer whose rows are `w` wide, mutably.
#[inline(always)]
pub fn row_mut(buf: &mut [f32], t: usize, w: usize) -> &mut [f32] {
    &mut buf[t * w..(t + 1) * w]
}

/// One slice per step `t < n`, `at(t)`, without allocating: the inputs of a step-batched
/// layer's backward, read from the steps' traces.
pub fn step_rows<'a>(n: usize, at: impl Fn(usize) -> &'a [f32]) -> [&'a [f32]; MAX_STEPS] {
    let mut out: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
    for (t, o) in out.iter_mut().take(n).enumerate() {
        *o = at(t);
    }
    out
}

/// `y = W x + b` for a row-major `W` of `rows × cols` and an optional bias `b` of `rows`.
pub fn linear(w: &[f32], b: Option<&[f32]>, x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    kernels::gemv(w, x, y, rows, cols);
    if let Some(b) = b {
        kernels::add_assign(&mut y[..rows], b);
    }
}

/// Backward of [`linear`] from `g = dL/dy`: writes `g_x = Wᵀ g` (adds it with `accumulate`),
/// and adds `g xᵀ` to `g_w` and `g` to `g_b` when given.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward(
    w: &[f32],
    x: &[f32],
    g: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    g_b: Option<&mut [f32]>,
    (rows, cols): (usize, usize),
    accumulate: bool,
) {
    if let Some(g_b) = g_b {
        kernels::add_assign(g_b, &g[..rows]);
    }
    if accumulate {
        kernels::linear_backward_acc(w, g, x, g_x, g_w, rows, cols);
    } else {
        kernels::linear_backward(w, g, x, g_x, g_w, rows, cols);
    }
}

/// A linear map `y = W x (+ b)` whose row-major weight `W` (`rows × cols`) and optional bias
/// live in the flat parameter buffer.
#[derive(Clone, Copy, Debug)]
pub struct Linear {
    pub w: Slot,
    pub b: Option<Slot>,
    pub rows: usize,
    pub cols: usize,
}

impl Linear {
    /// Registers `{name}.weight` `[rows, cols]` and, with `bias`, `{name}.bias` `[rows]`.
    pub fn register(
        p: &mut ParamSet,
        name: &str,
        (rows, cols): (usize, usize),
        bias: bool,
        group: Group,
    ) -> Self {
        let w = p.add(format!("{name}.weight"), &[rows, cols], group);
        let b = bias.then(|| p.add(format!("{name}.bias"), &[rows], group));
        Linear { w, b, rows, cols }
    }

    /// `y = W x + b`.
    pub fn forward(&self, params: &ParamSet, x: &[f32], y: &mut [f32]) {
        let b = self.b.map(|b| params.get(b));
        linear(params.get(self.w), b, x, y, self.rows, self.cols);
    }

    /// Backward from `g = dL/dy`: writes `g_x = Wᵀ g` (adds it with `accumulate`) and, when
    /// `grads` is given (the layer trains), adds the weight and bias gradients into it.
    pub fn backward(
        &self,
        params: &ParamSet,
        grads: Option<&mut [f32]>,
        x: &[f32],
        g: &[f32],
        g_x: &mut [f32],
        accumulate: bool,
    ) {
        let (g_w, g_b) = self.grad_slices(grads);
        let w = params.get(self.w);
        let dims = (self.rows, self.cols);
        linear_backward(w, x, g, g_x, g_w, g_b, dims, accumulate);
    }
}

impl Linear {
    /// `y_t = W x_t + b` for the steps `t < n`: the rows of `x` are `x_stride` apart (the map
    /// reads the first `cols` of each), those of `y` `rows` apart.
    pub fn forward_steps(
        &self,
        params: &ParamSet,
        (x, x_stride): (&[f32], usize),
        y: &mut [f32],
        n: usize,
    ) {
        let (rows, cols) = (self.rows, self.cols);
        if n == 1 {
            return self.forward(params, &x[..cols], &mut y[..rows]);
        }
        let mut xs: [&[f32]; MAX_STEPS] = [&[]; MAX_STEPS];
        for (t, xt) in xs.iter_mut().take(n).enumerate() {
            *xt = &x[t * x_stride..t * x_stride + cols];
        }
        steps::gemv_steps(params.get(self.w), &xs[..n], y, rows, (rows, cols));
        if let Some(b) = self.b {
            for t in 0..n {
                kernels::add_assign(&mut y[t * rows..(t + 1) * rows], params.get(b));
            }
        }
    }

    /// Backward of [`Linear::forward_steps`], last step first, from the gradient rows `g`
    /// (`rows` apart) and the inputs `x` of each step: writes `g_x[t] = Wᵀ g_t` into rows
    /// `gx_stride` apart (adds it with `accumulate`) and, when `grads` is given, adds the
    /// weight and bias gradients into it.
    pub fn backward_steps(
        &self,
        params: &ParamSet,
        grads: Option<&mut [f32]>,
        x: &[&[f32]],
        g: &[f32],
        (g_x, gx_stride): (&mut [f32], usize),
        accumulate: bool,
    ) {
        let (rows, cols) = (self.rows, self.cols);
        if x.len() == 1 {
            let (g, g_x) = (&g[..rows], &mut g_x[..cols]);
            return self.backward(params, grads, x[0], g, g_x, accumulate);
        }
        let (g_w, g_b) = self.grad_slices(grads);
        if let Some(g_b) = g_b {
            for t in (0..x.len()).rev() {
                kernels::add_assign(g_b, &g[t * rows..(t + 1) * rows]);
            }
        }
        let g = steps::Rows {
            data: g,
            stride: rows,
        };
        let w = params.get(self.w);
        steps::linear_backward_steps(w, x, g, g_x, gx_stride, g_w, (rows, cols), accumulate);
    }

    /// The weight and bias gradients in `grads`, when given.
    fn grad_slices<'g>(
        &self,
        grads: Option<&'g mut [f32]>,
    ) -> (Option<&'g mut [f32]>, Option<&'g mut [f32]>) {
        match (grads, self.b) {
            (Some(grads), Some(b)) => {
                let (g_w, g_b) = two_mut(grads, self.w, b);
                (Some(g_w), Some(g_b))
            }
            (Some(grads), None) => (Some(self.w.of_mut(grads)), None),
            (None, _) => (None, None),
        }
    }
}

/// Two distinct tensors of one flat buffer, borrowed mutably at once.
pub fn two_mut(buf: &mut [f32], first: Slot, second: Slot) -> (&mut [f32], &mut [f32]) {
    if first.offset < second.offset {
        let (lo, hi) = buf.split_at_mut(second.offset);
        (first.of_mut(lo), &mut hi[..second.len])
    } else {
        let (lo, hi) = buf.split_at_mut(first.offset);
        let b = second.of_mut(lo);
        (&mut hi[..first.len], b)
    }
}

/// RMSNorm: `out = x / sqrt(mean(x²) + ε) · w`.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let inv = rms_inv(x, eps);
    for ((o, &xi), &wi) in out.iter_mut().zip(x).zip(w) {
        *o = xi * inv * wi;
    }
}

/// [`rms_norm`] of the `n` step-major rows of `x`, each as wide as `w`.
pub fn rms_norm_steps(x: &[f32], w: &[f32], eps: f32, out: &mut [f32], n: usize) {
    let width = w.len();
    for (xt, ot) in x
        .chunks_exact(width)
        .zip(out.chunks_exact_mut(width))
        .take(n)
    {
        rms_norm(xt, w, eps, ot);
    }
}

/// Backward of [`rms_norm_steps`], last step first, with `x[t]` the input of step `t` and the
/// rows of `g_out` and `g_x` as wide as `w`: [`rms_norm_backward`] per step, the weight
/// gradient receiving the steps' terms last step first.
pub fn rms_norm_backward_steps(
    x: &[&[f32]],
    w: &[f32],
    eps: f32,
    g_out: &[f32],
    g_x: &mut [f32],
    mut g_w: Option<&mut [f32]>,
) {
    let width = w.len();
    for t in (0..x.len()).rev() {
        let (go, gx) = (&g_out[t * width..][..width], &mut g_x[t * width..][..width]);
        rms_norm_backward(x[t], w, eps, go, gx, g_w.as_deref_mut());
    }
}

fn rms_inv(x: &[f32], eps: f32) -> f32 {
    let mean_sq = kernels::dot(x, x) / x.len() as f32;
    1.0 / (mean_sq + eps).sqrt()
}

/// Backward of [`rms_norm`]: from `g_out` writes `g_x` and adds the weight gradient to `g_w`
/// when given. With `r = 1/sqrt(mean(x²)+ε)`: `g_x = g_out·w·r − x · r³/n · Σ g_out·w·x`.
pub fn rms_norm_backward(
    x: &[f32],
    w: &[f32],
    eps: f32,
    g_out: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
) {
    let n = x.len() as f32;
    let inv = rms_inv(x, eps);
    if let Some(g_w) = g_w {
        for ((gw, &go), &xi) in g_w.iter_mut().zip(g_out).zip(x) {
            *gw += go * xi * inv;
        }
    }
    let mut s = 0.0f32;
    for ((&go, &wi), &xi) in g_out.iter().zip(w).zip(x) {
        s += go * wi * xi;
    }
    let coeff = -s * inv * inv * inv / n;
    for (((gx, &go), &wi), &xi) in g_x.iter_mut().zip(g_out).zip(w).zip(x) {
        *gx = go * wi * inv + xi * coeff;
    }
}

/// Mean and `1/sqrt(var + ε)` of `x`, each sum in index order.
pub fn ln_stats(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f32;
    let mut sum = 0.0f32;
    for &v in x {
        sum += v;
    }
    let mean = sum / n;
    let mut sq = 0.0f32;
    for &v in x {
        let d = v - mean;
        sq += d * d;
    }
    (mean, 1.0 / (sq / n + eps).sqrt())
}

/// `out = (x − mean)/sqrt(var + ε) · w + b`.
pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let (mean, inv) = ln_stats(x, eps);
    for (((o, &xi), &wi), &bi) in out.iter_mut().zip(x).zip(w).zip(b) {
        *o = (xi - mean) * inv * wi + bi;
    }
}

/// Backward of [`layer_norm`] to its input: with `x̂ = (x − mean)·inv` and `ĝ = g_out·w`,
/// `g_x = inv · (ĝ − mean(ĝ) − x̂ · mean(ĝ·x̂))`. Writes `g_x`. `stats` is [`ln_stats`] of `x`
/// (which the weight gradients of the same norm read too: computed once for both).
pub fn layer_norm_backward(
    x: &[f32],
    w: &[f32],
    (mean, inv): (f32, f32),
    g_out: &[f32],
    g_x: &mut [f32],
) {
    let n = x.len() as f32;
    let (mut s1, mut s2) = (0.0f32, 0.0f32);
    for ((&go, &wi), &xi) in g_out.iter().zip(w).zip(x) {
        let gh = go * wi;
        s1 += gh;
        s2 += gh * ((xi - mean) * inv);
    }
    let (m1, m2) = (s1 / n, s2 / n);
    for (((gx, &go), &wi), &xi) in g_x.iter_mut().zip(g_out).zip(w).zip(x) {
        *gx = (go * wi - m1 - (xi - mean) * inv * m2) * inv;
    }
}

/// Adds the gradients of a [`layer_norm`]'s weight (`g_out · x̂`) and bias (`g_out`), with
/// `stats` [`ln_stats`] of `x`. The weight and bias are two tensors of the flat gradient
/// buffer, hence two slots.
pub fn layer_norm_param_grads(
    x: &[f32],
    (mean, inv): (f32, f32),
    g_out: &[f32],
    grads: &mut [f32],
    w: Slot,
    b: Slot,
) {
    for ((gw, &go), &xi) in w.of_mut(grads).iter_mut().zip(g_out).zip(x) {
        *gw += go * ((xi - mean) * inv);
    }
    kernels::add_assign(b.of_mut(grads), g_out);
}

/// Token shift: `out = base + mix ⊙ (prev − base)`.
pub fn token_shift(base: &[f32], prev: &[f32], mix: &[f32], out: &mut [f32]) {
    for (((o, &x), &p), &m) in out.iter_mut().zip(base).zip(prev).zip(mix) {
        *o = x + m * (p - x);
    }
}

/// Backward of [`token_shift`] from `g`: `g_base += g·(1 − mix)`, `g_prev += g·mix` and
/// `g_mix += g·(prev − base)`, the last two when given.
pub fn token_shift_backward(
    g: &[f32],
    base: &[f32],
    prev: &[f32],
    mix: &[f32],
    g_base: &mut [f32],
    g_prev: Option<&mut [f32]>,
    g_mix: Option<&mut [f32]>,
) {
    for ((gb, &gi), &m) in g_base.iter_mut().zip(g).zip(mix) {
        *gb += gi * (1.0 - m);
    }
    if let Some(gp) = g_prev {
        for ((gpi, &gi), &m) in gp.iter_mut().zip(g).zip(mix) {
            *gpi += gi * m;
        }
    }
    if let Some(gm) = g_mix {
        for (((gmi, &gi), &p), &x) in gm.iter_mut().zip(g).zip(prev).zip(base) {
            *gmi += gi * (p - x);
        }
    }
}
