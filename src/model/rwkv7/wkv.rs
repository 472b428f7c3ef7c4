//! The WKV state: per head an `N × N` matrix `S` (row = value channel, column = key channel),
//! updated by the delta rule `S' = S·diag(w) − (S·kk)·bᵀ + v·kᵀ` and read as `y = S'·r`.

use super::N;
use crate::kernels;

/// One cell of the delta-rule update, `S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j`. Forward and the
/// recomputation in backward both go through here, so they agree bit for bit.
#[inline(always)]
fn wkv_cell(s: f32, w: f32, sa: f32, b: f32, v: f32, k: f32) -> f32 {
    s * w - sa * b + v * k
}

/// The per-channel inputs of one WKV step, each `[C]`.
pub struct WkvInputs<'a> {
    /// Decay.
    pub w: &'a [f32],
    /// Removal direction `kk ⊙ a`.
    pub b: &'a [f32],
    /// Key written into the state.
    pub k: &'a [f32],
    /// Value.
    pub v: &'a [f32],
    /// Receptance: what the readout reads.
    pub r: &'a [f32],
    /// Normalised removal key.
    pub kk: &'a [f32],
}

impl<'a> WkvInputs<'a> {
    /// Head `hd`'s part of `w`, `b`, `k`, `r` and `kk`, each `[N]`.
    fn head(&self, hd: usize) -> [&'a [f32]; 5] {
        let hs = hd * N..(hd + 1) * N;
        [self.w, self.b, self.k, self.r, self.kk].map(|v| &v[hs.clone()])
    }
}

/// One step of every head, in place on `state` (`[H, N, N]`): per row `i`, `sa_i = S_i·kk`,
/// `S'_i = S_i ⊙ w − sa_i·b + v_i·k`, `y_i = S'_i·r`. Keeps `sa` (`[C]`) for backward.
pub fn wkv_forward(state: &mut [f32], x: &WkvInputs, sa: &mut [f32], y: &mut [f32]) {
    for (hd, head) in state.chunks_exact_mut(N * N).enumerate() {
        let [w, b, k, r, kk] = x.head(hd);
        for (i, row) in head.chunks_exact_mut(N).enumerate() {
            let ci = hd * N + i;
            let s_kk = kernels::dot(row, kk);
            sa[ci] = s_kk;
            let vi = x.v[ci];
            for (((s, &wj), &bj), &kj) in row.iter_mut().zip(w).zip(b).zip(k) {
                *s = wkv_cell(*s, wj, s_kk, bj, vi, kj);
            }
            y[ci] = kernels::dot(row, r);
        }
    }
}

/// Gradients of the WKV inputs, each `[C]`. `r`, `k` and `v` already hold what other uses of
/// these vectors passed back and are added to; `w`, `b` and `kk` are written.
pub struct WkvGrads<'a> {
    pub w: &'a mut [f32],
    pub b: &'a mut [f32],
    pub k: &'a mut [f32],
    pub v: &'a mut [f32],
    pub r: &'a mut [f32],
    pub kk: &'a mut [f32],
}

/// Backward of [`wkv_forward`] from `g_y`. `prev` is the state the step started from and `sa`
/// the forward's; the state after the step is recomputed row by row from `prev` (same cell
/// function, same bits) instead of being kept in the trace. With `carry` (`[H, N, N]`), reads
/// it as dL/dS' and leaves dL/dS in it. `scratch` is two rows of `N`.
pub fn wkv_backward(
    prev: &[f32],
    x: &WkvInputs,
    sa: &[f32],
    g_y: &[f32],
    g: WkvGrads,
    mut carry: Option<&mut [f32]>,
    (g_row, s_new): (&mut [f32], &mut [f32]),
) {
    g.w.fill(0.0);
    g.b.fill(0.0);
    g.kk.fill(0.0);
    for (hd, head_prev) in prev.chunks_exact(N * N).enumerate() {
        let hs = hd * N..(hd + 1) * N;
        let [w, b, k, r, kk] = x.head(hd);
        for (i, s_prev) in head_prev.chunks_exact(N).enumerate() {
            let ci = hd * N + i;
            let row = ci * N..(ci + 1) * N;
            let (sa, vi, gy) = (sa[ci], x.v[ci], g_y[ci]);
            // dL/dS'_i: what later bytes pass back, plus y_i = S'_i·r.
            match carry.as_deref() {
                Some(c) => g_row.copy_from_slice(&c[row.clone()]),
                None => g_row.fill(0.0),
            }
            kernels::axpy(g_row, gy, r);
            for j in 0..N {
                s_new[j] = wkv_cell(s_prev[j], w[j], sa, b[j], vi, k[j]);
            }
            kernels::axpy(&mut g.r[hs.clone()], gy, s_new);
            // S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j
            for ((gw, &gs), &sp) in g.w[hs.clone()].iter_mut().zip(&*g_row).zip(s_prev) {
                *gw += gs * sp;
            }
            kernels::axpy(&mut g.k[hs.clone()], vi, g_row);
            kernels::axpy(&mut g.b[hs.clone()], -sa, g_row);
            g.v[ci] += kernels::dot(g_row, k);
            let g_sa = -kernels::dot(g_row, b);
            // sa_i = S_i·kk
            kernels::axpy(&mut g.kk[hs.clone()], g_sa, s_prev);
            if let Some(c) = carry.as_deref_mut() {
                let out = &mut c[row];
                for j in 0..N {
                    out[j] = g_row[j] * w[j] + g_sa * kk[j];
                }
            }
        }
    }
}
