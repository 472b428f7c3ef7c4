//! The channel-mixing FFN: `out = W_value · relu(W_key · x)²`.

use crate::model::layers::{linear, linear_backward};
use crate::params::Slot;

/// The FFN's weights: `key` is `[F, C]`, `value` is `[C, F]`.
pub struct FfnWeights {
    pub key: Slot,
    pub value: Slot,
    /// `C`
    pub width: usize,
    /// `F`
    pub inner: usize,
}

/// `pre = W_key x`, `h = relu(pre)²` (both kept for backward), `out = W_value h`.
pub fn ffn_forward(
    ffn: &FfnWeights,
    params: &[f32],
    x: &[f32],
    pre: &mut [f32],
    h: &mut [f32],
    out: &mut [f32],
) {
    let (c, f) = (ffn.width, ffn.inner);
    linear(ffn.key.of(params), None, x, pre, f, c);
    for (hv, &p) in h.iter_mut().zip(&*pre) {
        let r = if p > 0.0 { p } else { 0.0 };
        *hv = r * r;
    }
    linear(ffn.value.of(params), None, h, out, c, f);
}

/// Backward of [`ffn_forward`] from `g_out`: writes `g_x` (`g_h` is scratch of `F`) and, with
/// `grads`, adds the weights' gradients.
pub fn ffn_backward(
    ffn: &FfnWeights,
    params: &[f32],
    (x, pre, h): (&[f32], &[f32], &[f32]),
    g_out: &[f32],
    g_h: &mut [f32],
    g_x: &mut [f32],
    mut grads: Option<&mut [f32]>,
) {
    let (c, f) = (ffn.width, ffn.inner);
    let g_w = grads.as_deref_mut().map(|g| ffn.value.of_mut(g));
    linear_backward(
        ffn.value.of(params),
        h,
        g_out,
        g_h,
        g_w,
        None,
        (c, f),
        false,
    );
    // h = relu(pre)²:   dh/dpre = 2·pre where pre > 0
    for (g, &p) in g_h.iter_mut().zip(pre) {
        *g = if p > 0.0 { *g * (2.0 * p) } else { 0.0 };
    }
    let g_w = grads.map(|g| ffn.key.of_mut(g));
    linear_backward(ffn.key.of(params), x, g_h, g_x, g_w, None, (f, c), false);
}
