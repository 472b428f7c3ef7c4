//! The keys of the delta rule: the per-head normalised removal key `kk`, the key `k` written
//! into the state and the removal direction `b = kk ⊙ a`.

use super::N;
use crate::kernels;

/// Smallest norm the per-head key normalisation divides by: `kk = q / max(‖q‖, ε)`.
pub const KK_EPS: f32 = 1e-12;

/// `kk = q / max(‖q‖, ε)` per head, with `q = k̃ ⊙ k_k`; keeps each head's `‖q‖` in `norms`.
pub fn kk_norm_forward(kt: &[f32], k_k: &[f32], kk: &mut [f32], norms: &mut [f32]) {
    for ((q, &kt), &kkp) in kk.iter_mut().zip(kt).zip(k_k) {
        *q = kt * kkp;
    }
    for (head, norm) in kk.chunks_exact_mut(N).zip(norms.iter_mut()) {
        *norm = kernels::dot(head, head).sqrt();
        let den = if *norm > KK_EPS { *norm } else { KK_EPS };
        for v in head.iter_mut() {
            *v /= den;
        }
    }
}

/// Backward of [`kk_norm_forward`] from `g_kk`: `dL/dq = (g − kk·(g·kk)) / ‖q‖`, or `g / ε`
/// where the floor was taken (written to the scratch `g_q`); then adds `dL/dq ⊙ k_k` to `g_kt`
/// and, when given, `dL/dq ⊙ k̃` to `g_k_k`.
pub fn kk_norm_backward(
    (kt, k_k, kk): (&[f32], &[f32], &[f32]),
    norms: &[f32],
    g_kk: &[f32],
    g_q: &mut [f32],
    g_kt: &mut [f32],
    g_k_k: Option<&mut [f32]>,
) {
    for (hd, &norm) in norms.iter().enumerate() {
        let hs = hd * N..(hd + 1) * N;
        if norm > KK_EPS {
            let d = kernels::dot(&g_kk[hs.clone()], &kk[hs.clone()]);
            for j in hs {
                g_q[j] = (g_kk[j] - kk[j] * d) / norm;
            }
        } else {
            for j in hs {
                g_q[j] = g_kk[j] / KK_EPS;
            }
        }
    }
    for ((gkt, &gq), &kkp) in g_kt.iter_mut().zip(&*g_q).zip(k_k) {
        *gkt += gq * kkp;
    }
    if let Some(g_k_k) = g_k_k {
        for ((gkk, &gq), &kt) in g_k_k.iter_mut().zip(&*g_q).zip(kt) {
            *gkk += gq * kt;
        }
    }
}

/// `k = k̃ ⊙ (1 + (a − 1) ⊙ k_a)` and `b = kk ⊙ a`.
pub fn key_forward(kt: &[f32], a: &[f32], k_a: &[f32], kk: &[f32], k: &mut [f32], b: &mut [f32]) {
    for (((k, &kt), &a), &ka) in k.iter_mut().zip(kt).zip(a).zip(k_a) {
        *k = kt * (1.0 + (a - 1.0) * ka);
    }
    for ((b, &kk), &a) in b.iter_mut().zip(kk).zip(a) {
        *b = kk * a;
    }
}

/// The inputs of [`key_forward`], for its backward.
pub struct KeyInputs<'a> {
    pub kt: &'a [f32],
    pub a: &'a [f32],
    pub k_a: &'a [f32],
    pub kk: &'a [f32],
}

/// Backward of [`key_forward`] from `g_k` and `g_b`: writes `g_a` and `g_kt`, adds into `g_kk`
/// and, when given, into `g_k_a`.
pub fn key_backward(
    x: &KeyInputs,
    g_k: &[f32],
    g_b: &[f32],
    (g_a, g_kt, g_kk): (&mut [f32], &mut [f32], &mut [f32]),
    g_k_a: Option<&mut [f32]>,
) {
    // b = kk ⊙ a
    for i in 0..g_b.len() {
        g_a[i] = g_b[i] * x.kk[i];
        g_kk[i] += g_b[i] * x.a[i];
    }
    // k = k̃ ⊙ (1 + (a − 1) ⊙ k_a)
    for (i, &ka) in x.k_a.iter().enumerate() {
        g_kt[i] = g_k[i] * (1.0 + (x.a[i] - 1.0) * ka);
        g_a[i] += g_k[i] * x.kt[i] * ka;
    }
    if let Some(g_k_a) = g_k_a {
        for (i, gka) in g_k_a.iter_mut().enumerate() {
            *gka += g_k[i] * x.kt[i] * (x.a[i] - 1.0);
        }
    }
}
