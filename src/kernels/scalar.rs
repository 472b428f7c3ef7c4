//! Scalar twins of the SIMD kernels: slow, obviously ordered, and bit-identical to them.
//!
//! Each function spells out, one element at a time, the order its SIMD forms keep with eight
//! lanes, so a test can compare every SIMD path with it on lengths that are not multiples of the
//! lane width.

use super::{
    AdamCoefs, LANES, ScanGrads, ScanInput, ScanTrace, WkvGrads, WkvInput, WkvOut, WkvTrace,
    fold_lanes, math,
};

/// Twin of [`super::dot`].
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let blocks32 = n / 32;
    let mut acc = [[0.0f32; LANES]; 4];
    for k in 0..blocks32 {
        for q in 0..4 {
            for l in 0..LANES {
                let i = 32 * k + 8 * q + l;
                acc[q][l] += a[i] * b[i];
            }
        }
    }
    let mut total = [0.0f32; LANES];
    for l in 0..LANES {
        total[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    }
    let full = n - n % LANES;
    for i in 32 * blocks32..full {
        total[i % LANES] += a[i] * b[i];
    }
    let mut sum = fold_lanes(total);
    for i in full..n {
        sum += a[i] * b[i];
    }
    sum
}

/// Twin of [`super::gemv`].
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        y[r] = dot(&w[r * cols..(r + 1) * cols], &x[..cols]);
    }
}

/// Twin of [`super::gemv_t_acc`].
pub fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        if g[r] == 0.0 {
            continue;
        }
        for c in 0..cols {
            out[c] += g[r] * w[r * cols + c];
        }
    }
}

/// Twin of [`super::axpy`].
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * *xi;
    }
}

/// Twin of [`super::add_outer`].
pub fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
    for r in 0..rows {
        if left[r] == 0.0 {
            continue;
        }
        for c in 0..cols {
            dst[r * cols + c] += left[r] * right[c];
        }
    }
}

/// Twin of [`super::linear_backward_acc`]: the weight gradient as [`add_outer`], then the input
/// gradient as [`gemv_t_acc`] (they write different buffers).
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_acc(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    rows: usize,
    cols: usize,
) {
    if let Some(g_w) = g_w {
        add_outer(g_w, rows, cols, g, x);
    }
    gemv_t_acc(w, g, g_x, rows, cols);
}

/// Twin of [`super::add_assign`].
pub fn add_assign(y: &mut [f32], x: &[f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += *xi;
    }
}

/// Twin of [`super::exp_into`].
pub fn exp_into(x: &[f32], out: &mut [f32]) {
    for (o, &xi) in out.iter_mut().zip(x) {
        *o = math::exp(xi);
    }
}

/// Twin of [`super::exp_scaled_into`].
pub fn exp_scaled_into(a: f32, x: &[f32], out: &mut [f32]) {
    for (o, &xi) in out.iter_mut().zip(x) {
        *o = math::exp(a * xi);
    }
}

/// Twin of [`super::sigmoid_into`].
pub fn sigmoid_into(x: &[f32], out: &mut [f32]) {
    for (o, &xi) in out.iter_mut().zip(x) {
        *o = math::sigmoid(xi);
    }
}

/// Twin of [`super::silu_into`].
pub fn silu_into(x: &[f32], out: &mut [f32], sig: &mut [f32]) {
    for ((o, s), &xi) in out.iter_mut().zip(sig.iter_mut()).zip(x) {
        (*o, *s) = math::silu_with_sigmoid(xi);
    }
}

/// `x`, or +0 where `|x| < tiny` (NaN compares false and stays).
fn flush(x: f32, tiny: f32) -> f32 {
    if x.abs() < tiny { 0.0 } else { x }
}

/// Twin of [`super::sgd_update`].
pub fn sgd_update(p: &mut [f32], g: &mut [f32], lr: f32, tiny_grad: f32) {
    for (pi, gi) in p.iter_mut().zip(g.iter_mut()) {
        *pi += lr * flush(*gi, tiny_grad);
        *gi = 0.0;
    }
}

/// Twin of [`super::adam_update`].
pub fn adam_update(c: &AdamCoefs, p: &mut [f32], g: &mut [f32], m: &mut [f32], v: &mut [f32]) {
    let kept = !m.is_empty();
    let n = p.len().min(g.len()).min(v.len());
    let n = if kept { n.min(m.len()) } else { n };
    for i in 0..n {
        let gi = flush(g[i], c.tiny_grad);
        // Without a first moment (β1 = 0) it is the flushed gradient.
        let m_old = if kept { m[i] } else { 0.0 };
        let mm = flush(c.beta1 * m_old + (1.0 - c.beta1) * gi, c.tiny_moment);
        let vv = flush(c.beta2 * v[i] + (1.0 - c.beta2) * (gi * gi), c.tiny_moment);
        if kept {
            m[i] = mm;
        }
        v[i] = vv;
        p[i] += c.lr * ((mm * c.inv_bc1) / ((vv * c.inv_bc2).sqrt() + c.eps));
        g[i] = 0.0;
    }
}

/// Twin of [`super::scan_forward`].
pub fn scan_forward(x: &ScanInput, ssm: &mut [f32], da: &mut [f32], y_pre: &mut [f32]) {
    let s = x.b.len();
    for c in 0..y_pre.len() {
        let (u, dt) = (x.u[c], x.dt[c]);
        let u_dt = u * dt;
        for j in 0..s {
            let i = c * s + j;
            da[i] = math::exp(dt * x.a[i]);
            ssm[i] = ssm[i] * da[i] + u_dt * x.b[j];
        }
        y_pre[c] = dot(&ssm[c * s..(c + 1) * s], &x.c[..s]) + x.d[c] * u;
    }
}

/// `sum += a[j]·b[j]` in index order (the order of [`super::dot_in_order`]).
fn sum_in_order(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for j in 0..a.len().min(b.len()) {
        sum += a[j] * b[j];
    }
    sum
}

/// Twin of [`super::scan_backward`]: channel by channel, each step of the chain rule over the
/// whole state row before the next.
pub fn scan_backward(tr: &ScanTrace, g_y_pre: &[f32], g: ScanGrads, mut carry: Option<&mut [f32]>) {
    let x = &tr.input;
    let s = x.b.len();
    if let Some(g_d) = g.d {
        for c in 0..g_y_pre.len() {
            g_d[c] += g_y_pre[c] * x.u[c];
        }
    }
    let (g_s, g_dt_a) = (&mut g.s_scratch[..s], &mut g.dt_a_scratch[..s]);
    let mut g_a_log = g.a_log;
    for c in 0..g_y_pre.len() {
        let row = c * s..(c + 1) * s;
        let (g_y, u, dt) = (g_y_pre[c], x.u[c], x.dt[c]);
        let u_dt = u * dt;
        // dL/ds' = g_y · C (+ what later bytes pass back)
        for j in 0..s {
            g_s[j] = g_y * x.c[j];
        }
        if let Some(cc) = carry.as_deref() {
            add_assign(g_s, &cc[row.clone()]);
        }
        // y_pre = Σ_j C_j s'_j
        axpy(g.c, g_y, &tr.ssm_new[row.clone()]);
        // s'_j = s_j · dA_j + (u·Δ) · B_j
        let g_u_dt = sum_in_order(g_s, x.b);
        axpy(g.b, u_dt, g_s);
        // dA_j = exp(Δ · A_j):  dL/d(Δ·A_j) = g_s_j · s_j · dA_j
        for j in 0..s {
            g_dt_a[j] = g_s[j] * tr.ssm_prev[c * s + j] * tr.da[c * s + j];
        }
        let g_dt = sum_in_order(g_dt_a, &x.a[row.clone()]);
        if let Some(g_a_log) = g_a_log.as_deref_mut() {
            // A = −exp(A_log):  dL/dA_log = (g_dt_a · Δ) · A
            for j in 0..s {
                g_a_log[c * s + j] += g_dt_a[j] * dt * x.a[c * s + j];
            }
        }
        if let Some(cc) = carry.as_deref_mut() {
            for j in 0..s {
                cc[c * s + j] = g_s[j] * tr.da[c * s + j];
            }
        }
        g.u[c] = g_y * x.d[c] + g_u_dt * dt;
        g.dt[c] = g_dt + g_u_dt * u;
    }
}

/// Twin of [`super::Kernels::linear_backward_steps`] (`g_x` not zeroed): for each row of `W`
/// in ascending order and each step in descending order, skipping zero coefficients,
/// `g_w[r] += g_t[r]·x_t` and `g_x[t] += g_t[r]·W[r]`, element by element.
pub fn linear_backward_steps(
    w: &[f32],
    x: &[&[f32]],
    g: super::rows::Rows,
    (g_x, gx_stride): (&mut [f32], usize),
    mut g_w: Option<&mut [f32]>,
    (rows, cols): (usize, usize),
) {
    for r in 0..rows {
        for t in (0..x.len()).rev() {
            let a = g.data[t * g.stride + r];
            if a == 0.0 {
                continue;
            }
            for c in 0..cols {
                if let Some(gw) = g_w.as_deref_mut() {
                    gw[r * cols + c] += a * x[t][c];
                }
                g_x[t * gx_stride + c] += a * w[r * cols + c];
            }
        }
    }
}

/// Twin of [`super::Kernels::gemv_steps`]: `y_t = W x_t` as [`gemv`] per step.
pub fn gemv_steps(
    w: &[f32],
    x: &[&[f32]],
    (y, y_stride): (&mut [f32], usize),
    (rows, cols): (usize, usize),
) {
    for (t, xt) in x.iter().enumerate() {
        gemv(w, xt, &mut y[t * y_stride..], rows, cols);
    }
}

/// The delta rule's cell, `S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j`.
fn wkv_cell(s: f32, w: f32, sa: f32, b: f32, v: f32, k: f32) -> f32 {
    s * w - sa * b + v * k
}

/// Twin of [`super::wkv_forward`]: row after row, `sa_i` a [`dot`] of the old row with `kk`,
/// the cells, `y_i` a [`dot`] of the new row with `r`.
pub fn wkv_forward(x: &WkvInput, state: &mut [f32], out: WkvOut) {
    let (n, c) = (x.n, x.w.len());
    let WkvOut { sa, y, mut prev } = out;
    for ci in 0..c {
        let hs = (ci / n) * n..(ci / n + 1) * n;
        let cells = ci * n..(ci + 1) * n;
        if let Some(p) = prev.as_deref_mut() {
            p[cells.clone()].copy_from_slice(&state[cells.clone()]);
        }
        let row = &mut state[cells];
        sa[ci] = dot(row, &x.kk[hs.clone()]);
        for j in 0..n {
            let h = hs.start + j;
            row[j] = wkv_cell(row[j], x.w[h], sa[ci], x.b[h], x.v[ci], x.k[h]);
        }
        y[ci] = dot(row, &x.r[hs]);
    }
}

/// Twin of [`super::wkv_backward`]: row after row, each step of the chain rule over the whole
/// row before the next (the per-row [`axpy`] and [`dot`] calls the kernel replaced).
pub fn wkv_backward(
    x: &WkvInput,
    tr: WkvTrace,
    g: WkvGrads,
    mut carry: Option<&mut [f32]>,
    g_rows: &mut [f32],
) {
    let (n, c) = (x.n, x.w.len());
    g.w[..c].fill(0.0);
    g.b[..c].fill(0.0);
    g.kk[..c].fill(0.0);
    let mut s_new = vec![0.0f32; n];
    let g_row = &mut g_rows[..n];
    for ci in 0..c {
        let hs = (ci / n) * n..(ci / n + 1) * n;
        let cells = ci * n..(ci + 1) * n;
        let s_prev = &tr.prev[cells.clone()];
        let (sa, vi, gy) = (tr.sa[ci], x.v[ci], tr.g_y[ci]);
        match carry.as_deref() {
            Some(cc) => g_row.copy_from_slice(&cc[cells.clone()]),
            None => g_row.fill(0.0),
        }
        axpy(g_row, gy, &x.r[hs.clone()]);
        for j in 0..n {
            let h = hs.start + j;
            s_new[j] = wkv_cell(s_prev[j], x.w[h], sa, x.b[h], vi, x.k[h]);
        }
        axpy(&mut g.r[hs.clone()], gy, &s_new);
        for j in 0..n {
            g.w[hs.start + j] += g_row[j] * s_prev[j];
        }
        axpy(&mut g.k[hs.clone()], vi, g_row);
        axpy(&mut g.b[hs.clone()], -sa, g_row);
        g.v[ci] += dot(g_row, &x.k[hs.clone()]);
        let g_sa = -dot(g_row, &x.b[hs.clone()]);
        axpy(&mut g.kk[hs.clone()], g_sa, s_prev);
        if let Some(cc) = carry.as_deref_mut() {
            for j in 0..n {
                let h = hs.start + j;
                cc[ci * n + j] = g_row[j] * x.w[h] + g_sa * x.kk[h];
            }
        }
    }
}
