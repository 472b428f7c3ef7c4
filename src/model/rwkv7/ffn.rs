//! The channel-mixing FFN: `out = W_value · relu(W_key · x)²`.

use crate::model::layers::{Linear, row_mut};
use crate::params::ParamSet;

/// The FFN's weights: `key` is `[F, C]`, `value` is `[C, F]`, neither with a bias.
pub struct FfnWeights {
    pub key: Linear,
    pub value: Linear,
}

/// `pre = W_key x`, `h = relu(pre)²` (both kept for backward), `out = W_value h` for `n`
/// steps: the rows of `x` and `out` are `C` wide, those of `pre` and `h` `F`.
pub fn ffn_forward(
    ffn: &FfnWeights,
    params: &ParamSet,
    (x, pre, h): (&[f32], &mut [f32], &mut [f32]),
    out: &mut [f32],
    n: usize,
) {
    let (c, f) = (ffn.key.cols, ffn.key.rows);
    ffn.key.forward_steps(params, (x, c), pre, n);
    for (hv, &p) in h[..n * f].iter_mut().zip(&*pre) {
        let r = if p > 0.0 { p } else { 0.0 };
        *hv = r * r;
    }
    ffn.value.forward_steps(params, (h, f), out, n);
}

/// Each step's input, pre-activation and hidden, as the backward over steps reads them.
type StepInputs<'a, 'b> = (&'a [&'b [f32]], &'a [&'b [f32]], &'a [&'b [f32]]);

/// Backward of [`ffn_forward`] over `n = x.len()` steps, last first, from the rows of `g_out`
/// (`[n, C]`) and each step's `x`, `pre` and `h`: writes the rows of `g_x` (`[n, C]`; `g_h`
/// is scratch of `[n, F]`) and, with `grads`, adds the weights' gradients.
pub fn ffn_backward(
    ffn: &FfnWeights,
    params: &ParamSet,
    (x, pre, h): StepInputs,
    g_out: &[f32],
    (g_h, g_x): (&mut [f32], &mut [f32]),
    mut grads: Option<&mut [f32]>,
) {
    let (c, f) = (ffn.key.cols, ffn.key.rows);
    let gr = grads.as_deref_mut();
    ffn.value
        .backward_steps(params, gr, h, g_out, (g_h, f), false);
    // h = relu(pre)²:   dh/dpre = 2·pre where pre > 0
    for (t, &pre) in pre.iter().enumerate() {
        for (g, &p) in row_mut(g_h, t, f).iter_mut().zip(pre) {
            *g = if p > 0.0 { *g * (2.0 * p) } else { 0.0 };
        }
    }
    ffn.key
        .backward_steps(params, grads, x, g_h, (g_x, c), false);
}
