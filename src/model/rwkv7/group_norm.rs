//! The attention's readout: a group norm per head of the WKV output plus the current byte's
//! own `r·k` bonus, then the output gate.

use super::N;
use crate::kernels;
use crate::model::layers::{layer_norm, layer_norm_backward, layer_norm_param_grads, ln_stats};
use crate::params::Slot;

/// GroupNorm epsilon of the attention output (per head).
pub const GN_EPS: f32 = 64e-5;

/// The per-channel inputs of the readout, each `[C]`.
pub struct ReadoutInputs<'a> {
    /// WKV output `S'·r`: the group norm's input.
    pub y_wkv: &'a [f32],
    pub r: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
}

/// The readout's weights (`[C]` each, `H` rows of `N`).
pub struct ReadoutWeights<'a> {
    pub gn_w: &'a [f32],
    pub gn_b: &'a [f32],
    pub r_k: &'a [f32],
}

/// Per head: `y = GN(y_wkv) + α·v` with `α = Σ r ⊙ k ⊙ r_k` (kept in `alpha`, `[H]`).
pub fn group_norm_bonus_forward(
    x: &ReadoutInputs,
    p: &ReadoutWeights,
    alpha: &mut [f32],
    y: &mut [f32],
) {
    for (hd, (yh, al)) in y.chunks_exact_mut(N).zip(alpha.iter_mut()).enumerate() {
        let hs = hd * N..(hd + 1) * N;
        layer_norm(
            &x.y_wkv[hs.clone()],
            &p.gn_w[hs.clone()],
            &p.gn_b[hs.clone()],
            GN_EPS,
            yh,
        );
        let mut a = 0.0f32;
        for ((&r, &k), &rk) in x.r[hs.clone()]
            .iter()
            .zip(&x.k[hs.clone()])
            .zip(&p.r_k[hs.clone()])
        {
            a += r * k * rk;
        }
        *al = a;
        for (y, &v) in yh.iter_mut().zip(&x.v[hs]) {
            *y += a * v;
        }
    }
}

/// Where [`group_norm_bonus_backward`] adds the gradients of the readout's weights.
pub struct ReadoutGrads<'a> {
    pub grads: &'a mut [f32],
    pub gn_w: Slot,
    pub gn_b: Slot,
    pub r_k: Slot,
}

/// Backward of [`group_norm_bonus_forward`] from `g_y`: writes `g_v`, `g_r`, `g_k` (the bonus
/// term's share) and `g_y_wkv`; with `params`, adds the weights' gradients.
pub fn group_norm_bonus_backward(
    x: &ReadoutInputs,
    p: &ReadoutWeights,
    alpha: &[f32],
    g_y: &[f32],
    (g_v, g_r, g_k, g_y_wkv): (&mut [f32], &mut [f32], &mut [f32], &mut [f32]),
    mut params: Option<ReadoutGrads>,
) {
    for (hd, &al) in alpha.iter().enumerate() {
        let hs = hd * N..(hd + 1) * N;
        let g_alpha = kernels::dot(&g_y[hs.clone()], &x.v[hs.clone()]);
        for j in hs.clone() {
            g_v[j] = g_y[j] * al;
            g_r[j] = g_alpha * p.r_k[j] * x.k[j];
            g_k[j] = g_alpha * p.r_k[j] * x.r[j];
        }
        let stats = ln_stats(&x.y_wkv[hs.clone()], GN_EPS);
        if let Some(pg) = params.as_mut() {
            let gr = &mut pg.r_k.of_mut(pg.grads)[hs.clone()];
            for (j, grk) in hs.clone().zip(gr.iter_mut()) {
                *grk += g_alpha * x.r[j] * x.k[j];
            }
            let (gn_w, gn_b) = (pg.gn_w.row(hd, N), pg.gn_b.row(hd, N));
            let (y_wkv, g_yh) = (&x.y_wkv[hs.clone()], &g_y[hs.clone()]);
            layer_norm_param_grads(y_wkv, stats, g_yh, pg.grads, gn_w, gn_b);
        }
        let gn_w = &p.gn_w[hs.clone()];
        layer_norm_backward(
            &x.y_wkv[hs.clone()],
            gn_w,
            stats,
            &g_y[hs.clone()],
            &mut g_y_wkv[hs],
        );
    }
}

/// The output gate: `out = y ⊙ g`.
pub fn gate_forward(y: &[f32], g: &[f32], out: &mut [f32]) {
    for ((o, &yi), &gi) in out.iter_mut().zip(y).zip(g) {
        *o = yi * gi;
    }
}

/// Backward of [`gate_forward`] from `g_out`: writes `g_y` and `g_g`.
pub fn gate_backward(y: &[f32], g: &[f32], g_out: &[f32], g_y: &mut [f32], g_g: &mut [f32]) {
    for i in 0..g_out.len() {
        g_g[i] = g_out[i] * y[i];
        g_y[i] = g_out[i] * g[i];
    }
}
