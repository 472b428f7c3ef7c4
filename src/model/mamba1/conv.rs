//! The causal depthwise convolution over time: each inner channel mixes its newest input with
//! its `K − 1` previous ones. Tap 0 multiplies the newest input (native layout); the window in
//! the state holds the previous inputs, newest first: `[I, K−1]`.

/// `out[c] = Σ_t w[c,t] · x[c, now − t] + b[c]`, then shifts `x_now` into the window.
pub fn conv_forward(
    w: &[f32],
    b: &[f32],
    x_now: &[f32],
    window: &mut [f32],
    out: &mut [f32],
    k: usize,
) {
    let taps = k - 1;
    for (c, ((pre, &x), &bias)) in out.iter_mut().zip(x_now).zip(b).enumerate() {
        let hist = &mut window[c * taps..(c + 1) * taps];
        let wc = &w[c * k..(c + 1) * k];
        let mut acc = wc[0] * x;
        for (&wt, &xt) in wc[1..].iter().zip(hist.iter()) {
            acc += wt * xt;
        }
        *pre = acc + bias;
        for t in (1..taps).rev() {
            hist[t] = hist[t - 1];
        }
        if let Some(newest) = hist.first_mut() {
            *newest = x;
        }
    }
}

/// The parameter gradients of [`conv_forward`] from `g_out = dL/dout`: `g_b += g_out`,
/// `g_w[c,0] += g_out[c]·x_now[c]`, `g_w[c,t] += g_out[c]·window_before[c,t−1]`.
pub fn conv_param_grads(
    g_out: &[f32],
    x_now: &[f32],
    window_before: &[f32],
    g_w: &mut [f32],
    g_b: &mut [f32],
    k: usize,
) {
    let taps = k - 1;
    crate::kernels::add_assign(g_b, g_out);
    for (c, (&g_pre, &x)) in g_out.iter().zip(x_now).enumerate() {
        let gw = &mut g_w[c * k..(c + 1) * k];
        gw[0] += g_pre * x;
        let hist = &window_before[c * taps..(c + 1) * taps];
        for (gwt, &xt) in gw[1..].iter_mut().zip(hist) {
            *gwt += g_pre * xt;
        }
    }
}

/// The input gradients of [`conv_forward`]: writes `g_x = dL/dx_now`, and with `carry` (the
/// gradient of the window after the step) adds its share and leaves in it the gradient of the
/// window before the step.
pub fn conv_backward(
    w: &[f32],
    g_out: &[f32],
    g_x: &mut [f32],
    mut carry: Option<&mut [f32]>,
    k: usize,
) {
    let taps = k - 1;
    for (c, (g_x, &g_pre)) in g_x.iter_mut().zip(g_out).enumerate() {
        let wc = &w[c * k..(c + 1) * k];
        *g_x = g_pre * wc[0];
        if let Some(carry) = carry.as_deref_mut() {
            // The window after this step was [x_now, hist[0..K−2]]; before it, hist.
            // Ascending t reads cc[t] before overwriting it.
            let cc = &mut carry[c * taps..(c + 1) * taps];
            if taps > 0 {
                *g_x += cc[0];
                for t in 1..k {
                    let from_shift = if t < taps { cc[t] } else { 0.0 };
                    cc[t - 1] = g_pre * wc[t] + from_shift;
                }
            }
        }
    }
}
