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

pub use crate::kernels::{ScanGrads, ScanInput, ScanTrace};

/// Advances the `[I, S]` state `ssm` in place, writing `dA` (`[I, S]`) and `y_pre` (`[I]`)
/// ([`kernels::scan_forward`]).
pub fn scan_forward(x: &ScanInput, ssm: &mut [f32], da: &mut [f32], y_pre: &mut [f32]) {
    kernels::scan_forward(x, ssm, da, y_pre)
}

/// Walks one scan step back from `g_y_pre = dL/dy_pre`. With `carry` (the gradient of the
/// state after the step) adds it in and leaves there the gradient of the state before it
/// ([`kernels::scan_backward`]).
pub fn scan_backward(tr: &ScanTrace, g_y_pre: &[f32], g: ScanGrads, carry: Option<&mut [f32]>) {
    kernels::scan_backward(tr, g_y_pre, g, carry)
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
