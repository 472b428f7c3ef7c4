//! The selective state-space part of a Mamba-1 block: the step size Δ, the scan over each
//! inner channel's `S` states, and the output gate, each forward beside its backward.
//!
//! Per channel `c` with input `u`, step `Δ`, and the shared `B`, `C` of this byte:
//! `dA_j = exp(Δ·A_j)`, `s'_j = s_j·dA_j + (u·Δ)·B_j`, `y_pre = Σ_j C_j·s'_j + D·u`.

use crate::kernels::{self, math};

/// `Δ = softplus(dt_pre)`, its exponentials eight lanes at a time.
pub fn softplus_forward(dt_pre: &[f32], dt: &mut [f32]) {
    kernels::exp_into(dt_pre, dt);
    for (dt, &x) in dt.iter_mut().zip(dt_pre) {
        *dt = math::softplus_with_exp(x, *dt);
    }
}

/// Backward of [`softplus_forward`]: `g *= sigmoid(dt_pre)`, in place (`sig` is scratch).
pub fn softplus_backward(dt_pre: &[f32], g: &mut [f32], sig: &mut [f32]) {
    kernels::sigmoid_into(dt_pre, sig);
    for (gd, &s) in g.iter_mut().zip(&*sig) {
        *gd *= s;
    }
}

/// What the scan of one byte reads besides the state: per channel `u`, `Δ`, `D` and the rows
/// of `A = −exp(A_log)`; shared `B` and `C` of length `S`.
pub struct ScanInput<'a> {
    pub u: &'a [f32],
    pub dt: &'a [f32],
    pub b: &'a [f32],
    pub c: &'a [f32],
    pub d: &'a [f32],
    pub a: &'a [f32],
}

/// Advances the `[I, S]` state `ssm` in place, writing `dA` (`[I, S]`) and `y_pre` (`[I]`).
pub fn scan_forward(x: &ScanInput, ssm: &mut [f32], da: &mut [f32], y_pre: &mut [f32]) {
    let s = x.b.len();
    let channels = ssm
        .chunks_exact_mut(s)
        .zip(da.chunks_exact_mut(s))
        .zip(x.a.chunks_exact(s))
        .zip(y_pre.iter_mut())
        .zip(x.u.iter().zip(x.dt).zip(x.d));
    for ((((ssm, da), a), y_pre), ((&u, &dt), &d)) in channels {
        kernels::exp_scaled_into(dt, a, da);
        let u_dt = u * dt;
        for ((sj, &da), &bj) in ssm.iter_mut().zip(&*da).zip(x.b) {
            *sj = *sj * da + u_dt * bj;
        }
        *y_pre = kernels::dot(ssm, x.c) + d * u;
    }
}

/// What backward of the scan reads of its forward step.
pub struct ScanTrace<'a> {
    pub input: ScanInput<'a>,
    pub da: &'a [f32],
    pub ssm_prev: &'a [f32],
    pub ssm_new: &'a [f32],
}

/// The gradients [`scan_backward`] writes and adds.
pub struct ScanGrads<'a> {
    /// Written: `dL/du` (`[I]`).
    pub u: &'a mut [f32],
    /// Written: `dL/dΔ` (`[I]`).
    pub dt: &'a mut [f32],
    /// Added: `dL/dB`, `dL/dC` (`[S]` each).
    pub b: &'a mut [f32],
    pub c: &'a mut [f32],
    /// Added when trained: `dL/dD` (`[I]`) and `dL/dA_log` (`[I, S]`).
    pub d: Option<&'a mut [f32]>,
    pub a_log: Option<&'a mut [f32]>,
    /// Scratch of length `S`.
    pub s_scratch: &'a mut [f32],
    pub dt_a_scratch: &'a mut [f32],
}

/// Walks one scan step back from `g_y_pre = dL/dy_pre`. With `carry` (the gradient of the
/// state after the step) adds it in and leaves there the gradient of the state before it.
pub fn scan_backward(tr: &ScanTrace, g_y_pre: &[f32], g: ScanGrads, mut carry: Option<&mut [f32]>) {
    let x = &tr.input;
    let s = x.b.len();
    if let Some(g_d) = g.d {
        for ((gd, &g_y), &u) in g_d.iter_mut().zip(g_y_pre).zip(x.u) {
            *gd += g_y * u;
        }
    }
    let (g_s, g_dt_a) = (&mut g.s_scratch[..s], &mut g.dt_a_scratch[..s]);
    let mut g_a_log = g.a_log;
    for c in 0..g_y_pre.len() {
        let row = c * s..(c + 1) * s;
        let (s_prev, s_new) = (&tr.ssm_prev[row.clone()], &tr.ssm_new[row.clone()]);
        let (da, a_row) = (&tr.da[row.clone()], &x.a[row.clone()]);
        let (g_y, u, dt) = (g_y_pre[c], x.u[c], x.dt[c]);
        let u_dt = u * dt;
        // dL/ds' = g_y · C (+ what later bytes pass back)
        for (gs, &cj) in g_s.iter_mut().zip(x.c) {
            *gs = g_y * cj;
        }
        if let Some(cc) = carry.as_deref() {
            kernels::add_assign(g_s, &cc[row.clone()]);
        }
        // C gradient: y_pre = Σ_j C_j s'_j
        kernels::axpy(g.c, g_y, s_new);
        // s'_j = s_j · dA_j + (u·Δ) · B_j
        let g_u_dt = kernels::dot_in_order(g_s, x.b);
        kernels::axpy(g.b, u_dt, g_s);
        // dA_j = exp(Δ · A_j), A_j = −exp(A_log_j):  dL/d(Δ·A_j) = g_s_j · s_j · dA_j
        for (((t, &gs), &sp), &daj) in g_dt_a.iter_mut().zip(&*g_s).zip(s_prev).zip(da) {
            *t = gs * sp * daj;
        }
        let g_dt = kernels::dot_in_order(g_dt_a, a_row);
        if let Some(g_a_log) = g_a_log.as_deref_mut() {
            // dL/dA_log = dL/dA · dA/dA_log = (g_dt_a · Δ) · A
            for (ga, (&t, &aj)) in g_a_log[row.clone()]
                .iter_mut()
                .zip(g_dt_a.iter().zip(a_row))
            {
                *ga += t * dt * aj;
            }
        }
        if let Some(cc) = carry.as_deref_mut() {
            for ((out, &gs), &daj) in cc[row].iter_mut().zip(&*g_s).zip(da) {
                *out = gs * daj;
            }
        }
        g.u[c] = g_y * x.d[c] + g_u_dt * dt;
        // dL/dΔ; the caller multiplies in softplus'.
        g.dt[c] = g_dt + g_u_dt * u;
    }
}

/// The output gate: `gate = silu(z)`, `y = y_pre · gate` (`gate_sig = sigmoid(z)` is kept for
/// backward).
pub fn gate_forward(
    y_pre: &[f32],
    z: &[f32],
    gate: &mut [f32],
    gate_sig: &mut [f32],
    y: &mut [f32],
) {
    kernels::silu_into(z, gate, gate_sig);
    for ((y, &y_pre), &gate) in y.iter_mut().zip(y_pre).zip(&*gate) {
        *y = y_pre * gate;
    }
}

/// Backward of [`gate_forward`] from `g_y`: writes `g_y_pre` and `g_z`.
pub fn gate_backward(
    (y_pre, z, gate, gate_sig): (&[f32], &[f32], &[f32], &[f32]),
    g_y: &[f32],
    g_y_pre: &mut [f32],
    g_z: &mut [f32],
) {
    let terms = y_pre.iter().zip(z).zip(gate_sig);
    for ((((g_y_pre, g_z), &gy), &gate), ((&y_pre, &z), &z_sig)) in g_y_pre
        .iter_mut()
        .zip(g_z.iter_mut())
        .zip(g_y)
        .zip(gate)
        .zip(terms)
    {
        *g_y_pre = gy * gate;
        *g_z = (gy * y_pre) * math::silu_grad(z, z_sig);
    }
}
