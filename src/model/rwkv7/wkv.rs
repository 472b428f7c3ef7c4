//! The WKV state: per head an `N × N` matrix `S` (row = value channel, column = key channel),
//! updated by the delta rule `S' = S·diag(w) − (S·kk)·bᵀ + v·kᵀ` and read as `y = S'·r`.
//!
//! The arithmetic is one kernel per step for every head ([`kernels::wkv_forward`],
//! [`kernels::wkv_backward`], src/kernels/wkv.rs, with scalar twins): two state rows in
//! lockstep, each row's sums [`kernels::dot`]s, every gradient element receiving its rows' terms
//! in ascending row order.

use crate::kernels::{self, WkvOut, WkvTrace};

pub use crate::kernels::{WkvGrads, WkvInput};

/// One step of every head (`x.n` is [`super::N`]), in place on `state` (`[H, N, N]`): per row
/// `i`, `sa_i = S_i·kk`, `S'_i = S_i ⊙ w − sa_i·b + v_i·k`, `y_i = S'_i·r`. Keeps `sa` (`[C]`)
/// for backward and, when given, the state before the step in `prev` (the trace).
pub fn wkv_forward(
    state: &mut [f32],
    x: &WkvInput,
    (sa, y): (&mut [f32], &mut [f32]),
    prev: Option<&mut [f32]>,
) {
    kernels::wkv_forward(x, state, WkvOut { sa, y, prev });
}

/// Backward of [`wkv_forward`] from `g_y`. `prev` is the state the step started from and `sa`
/// the forward's; the state after the step is recomputed row by row from `prev` (same cell,
/// same bits) instead of being kept in the trace. With `carry` (`[H, N, N]`), reads it as
/// dL/dS' and leaves dL/dS in it. `g_rows` is scratch of `2N`.
pub fn wkv_backward(
    (prev, sa, g_y): (&[f32], &[f32], &[f32]),
    x: &WkvInput,
    g: WkvGrads,
    carry: Option<&mut [f32]>,
    g_rows: &mut [f32],
) {
    let tr = WkvTrace { prev, sa, g_y };
    kernels::wkv_backward(x, tr, g, carry, g_rows);
}
