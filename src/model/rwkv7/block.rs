//! One block as call sequences of its layers: the time mixing (attention, steps 3–16) and the
//! channel mixing (FFN, steps 17–20), each forward beside its backward, which calls the
//! layers' backwards in reverse order. Step numbers are those of [`super::Rwkv7`]'s step.

use super::ffn::{ffn_backward, ffn_forward};
use super::group_norm::{
    ReadoutGrads, ReadoutInputs, ReadoutWeights, gate_backward, gate_forward,
    group_norm_bonus_backward, group_norm_bonus_forward,
};
use super::key::{KeyInputs, key_backward, key_forward, kk_norm_backward, kk_norm_forward};
use super::low_rank::{
    decay_backward, decay_forward, low_rank_backward, low_rank_forward, sigmoid_backward,
    sigmoid_forward, value_residual_backward, value_residual_forward,
};
use super::wkv::{WkvGrads, WkvInputs, wkv_backward, wkv_forward};
use super::{
    A, ATTN, ATTN_NORM, Config, FFN, FFN_NORM, G, K, LN_EPS, LayerSlots, LayerState, LayerTrace, N,
    R, SHIFTS, VAL, W,
};
use crate::kernels;
use crate::model::layers::{
    layer_norm, layer_norm_backward, layer_norm_param_grads, linear, linear_backward, token_shift,
    token_shift_backward,
};
use crate::params::{Scope, Slot};

/// A block's trace, written by its forward.
type TraceMut<'a, 'b> = &'a mut LayerTrace<&'b mut [f32]>;
/// A block's trace, read by its backward.
type TraceRef<'a, 'b> = &'a LayerTrace<&'b [f32]>;
/// A block's part of the state, or of the carry.
type StateMut<'a, 'b> = &'a mut LayerState<&'b mut [f32]>;
/// What the parts of a block's backward read: its weights' slots, the parameters and its trace.
type Walk<'a, 'b, 'c> = (&'a LayerSlots, &'a [f32], TraceRef<'b, 'c>);

/// Steps 3–16, the time mixing: `x += W_o · attention(LN_attn(x))`, advancing the block's
/// attention shift and WKV state. Block 0 writes `v_first`, later blocks read it.
pub fn time_mix_forward(
    (ls, params): (&LayerSlots, &[f32]),
    st: StateMut,
    t: TraceMut,
    v_first: &mut [f32],
    x: &mut [f32],
    traced: bool,
) {
    let (c, p) = (x.len(), |slot: Slot| slot.of(params));
    // 3. xn = LN_attn(x)
    layer_norm(x, p(ls.attn_norm_w), p(ls.attn_norm_b), LN_EPS, t.xn);
    // 4. x_m = xn + μ_m ⊙ (prev − xn) for m ∈ {r, w, k, v, a, g};   prev ← xn
    t.att_prev.copy_from_slice(st.att_prev);
    for (out, &mix) in t.shift.iter_mut().zip(&ls.mix) {
        token_shift(t.xn, t.att_prev, p(mix), out);
    }
    st.att_prev.copy_from_slice(t.xn);
    // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v
    linear(p(ls.r_proj), None, t.shift[R], t.r, c, c);
    linear(p(ls.k_proj), None, t.shift[K], t.kt, c, c);
    linear(p(ls.v_proj), None, t.shift[VAL], t.vt, c, c);
    // 6. w = exp(−e^{−½} · σ(W2 tanh(W1 x_w) + w0))
    low_rank_forward(&ls.w_lora, params, t.shift[W], t.w_hidden, t.w_sig);
    decay_forward(t.w_sig, t.w);
    // 7. a = σ(A2 A1 x_a + a0)
    low_rank_forward(&ls.a_lora, params, t.shift[A], t.a_hidden, t.a);
    sigmoid_forward(t.a);
    // 8. g = G2 σ(G1 x_g)
    low_rank_forward(&ls.g_lora, params, t.shift[G], t.g_hidden, t.g);
    // 9. block 0: v = ṽ and v_first = ṽ;
    //    later blocks: ν = σ(V2 V1 x_v + v0),  v = ṽ + (v_first − ṽ) ⊙ ν
    match &ls.v_lora {
        None => {
            t.v.copy_from_slice(t.vt);
            v_first.copy_from_slice(t.vt);
        }
        Some(vl) => {
            low_rank_forward(vl, params, t.shift[VAL], t.v_hidden, t.nu);
            value_residual_forward(t.nu, t.vt, v_first, t.v);
        }
    }
    // 10. kk = (k̃ ⊙ k_k) / max(‖k̃ ⊙ k_k‖, ε)   per head
    kk_norm_forward(t.kt, p(ls.k_k), t.kk, t.kk_norm);
    // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a);   b = kk ⊙ a
    key_forward(t.kt, t.a, p(ls.k_a), t.kk, t.k, t.b);
    // 12. per head, sa = S·kk,  S' = S·diag(w) − sa·bᵀ + v·kᵀ,  y = S'·r
    if traced {
        t.wkv_prev.copy_from_slice(st.wkv);
    }
    let wkv_in = WkvInputs {
        w: t.w,
        b: t.b,
        k: t.k,
        v: t.v,
        r: t.r,
        kk: t.kk,
    };
    wkv_forward(st.wkv, &wkv_in, t.sa, t.y_wkv);
    // 13. y = GroupNorm(y)   (a LayerNorm per head, ε = 64e-5)
    // 14. y += (Σ_head r ⊙ k ⊙ r_k) · v   (the current byte's own r·k bonus)
    let readout_in = ReadoutInputs {
        y_wkv: t.y_wkv,
        r: t.r,
        k: t.k,
        v: t.v,
    };
    group_norm_bonus_forward(&readout_in, &readout_weights(ls, params), t.alpha, t.y_head);
    // 15. y = y ⊙ g
    gate_forward(t.y_head, t.g, t.y_gate);
    // 16. x += W_o y
    linear(p(ls.o_proj), None, t.y_gate, t.x_mid, c, c);
    kernels::add_assign(t.x_mid, x);
    x.copy_from_slice(t.x_mid);
}

/// Backward of [`time_mix_forward`]: reads `g.x = dL/dx_mid` and leaves `dL/dx_in` in it;
/// adds into `g.v_first` what this block's value passes back to block 0's.
#[allow(clippy::too_many_arguments)]
pub fn time_mix_backward(
    ls: &LayerSlots,
    params: &[f32],
    t: TraceRef,
    v_first: &[f32],
    mut carry: Option<StateMut>,
    g: &mut GradScratch,
    grads: &mut [f32],
    scope: Scope,
) {
    let train = scope.has(ATTN);
    // 16.–13. x_mid = x_in + W_o (y_head ⊙ g),  y_head = GN(y_wkv) + α·v
    readout_backward((ls, params, t), g, train.then_some(&mut *grads));
    // 12. per head and row i: sa_i = S_i·kk,  S'_i = S_i ⊙ w − sa_i·b + v_i·k,  y_i = S'_i·r
    let g_wkv = WkvGrads {
        w: &mut g.w,
        b: &mut g.b,
        k: &mut g.k,
        v: &mut g.v,
        r: &mut g.r,
        kk: &mut g.kk,
    };
    let g_state = carry.as_deref_mut().map(|lc| &mut *lc.wkv);
    let scratch = (&mut g.s_row[..], &mut g.s_new[..]);
    let (prev, sa) = (t.wkv_prev, t.sa);
    wkv_backward(prev, &wkv_inputs(t), sa, &g.y_wkv, g_wkv, g_state, scratch);
    // 11.–10. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a),  b = kk ⊙ a,  kk = q / max(‖q‖, ε), q = k̃ ⊙ k_k
    keys_backward((ls, params, t), g, train.then_some(&mut *grads));
    // 9. v = ṽ (block 0), or ṽ + (v_first − ṽ) ⊙ ν
    value_backward(ls, params, t, v_first, g, train.then_some(&mut *grads));
    // 8.–6. g, a and w, each through its low-rank path
    low_rank_paths_backward((ls, params, t), g, train.then_some(&mut *grads));
    // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v   (x_v's gradient adds to the value path's)
    projections_backward((ls, params, t), g, train.then_some(&mut *grads));
    // 4. x_m = xn + μ_m ⊙ (prev − xn), and xn became the next byte's prev
    take_carry(carry.as_deref_mut().map(|lc| &mut *lc.att_prev), &mut g.xn);
    for m in 0..SHIFTS {
        let g_prev = carry.as_deref_mut().map(|lc| &mut *lc.att_prev);
        let g_mix = train.then(|| ls.mix[m].of_mut(grads));
        let (mix, g_shift) = (ls.mix[m].of(params), &g.shift[m]);
        token_shift_backward(g_shift, t.xn, t.att_prev, mix, &mut g.xn, g_prev, g_mix);
    }
    // 3. xn = LN_attn(x_in); the residual passes g.x through
    let norm = (ls.attn_norm_w, ls.attn_norm_b, scope.has(ATTN_NORM));
    norm_backward(t.x_in, params, norm, g, grads);
}

/// Steps 16–13 backward: the output projection, the gate and the group norm with its bonus.
/// Writes `g.y_wkv` and the bonus term's share of `g.v`, `g.r` and `g.k`.
fn readout_backward((ls, params, t): Walk, g: &mut GradScratch, mut grads: Option<&mut [f32]>) {
    let c = g.x.len();
    // 16. x_mid = x_in + W_o y_gate   (g.x = dL/dx_mid; the residual passes it on)
    let g_w = grads.as_deref_mut().map(|gr| ls.o_proj.of_mut(gr));
    let w_o = ls.o_proj.of(params);
    linear_backward(w_o, t.y_gate, &g.x, &mut g.y, g_w, None, (c, c), false);
    // 15. y_gate = y_head ⊙ g
    gate_backward(t.y_head, t.g, &g.y, &mut g.yh, &mut g.g);
    // 14.–13. y_head = GN(y_wkv) + α·v,   α = Σ r ⊙ k ⊙ r_k per head
    let param_grads = grads.map(|grads| ReadoutGrads {
        grads,
        gn_w: ls.gn_w,
        gn_b: ls.gn_b,
        r_k: ls.r_k,
    });
    let g_in = (&mut g.v[..], &mut g.r[..], &mut g.k[..], &mut g.y_wkv[..]);
    let (x, w) = (readout_inputs(t), readout_weights(ls, params));
    group_norm_bonus_backward(&x, &w, t.alpha, &g.yh, g_in, param_grads);
}

/// Steps 11–10 backward: the written key `k`, the removal direction `b` and the normalised
/// key `kk`. Writes `g.a` and `g.kt`.
fn keys_backward((ls, params, t): Walk, g: &mut GradScratch, mut grads: Option<&mut [f32]>) {
    let (k_a, k_k) = (ls.k_a.of(params), ls.k_k.of(params));
    // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a);   b = kk ⊙ a
    let x = KeyInputs {
        kt: t.kt,
        a: t.a,
        k_a,
        kk: t.kk,
    };
    let g_k_a = grads.as_deref_mut().map(|gr| ls.k_a.of_mut(gr));
    key_backward(&x, &g.k, &g.b, (&mut g.a, &mut g.kt, &mut g.kk), g_k_a);
    // 10. kk = q / max(‖q‖, ε) per head, q = k̃ ⊙ k_k
    let g_k_k = grads.map(|gr| ls.k_k.of_mut(gr));
    let (x, norms) = ((t.kt, k_k, t.kk), t.kk_norm);
    kk_norm_backward(x, norms, &g.kk, &mut g.tmp, &mut g.kt, g_k_k);
}

/// Step 5 backward: `r = W_r x_r`, `k̃ = W_k x_k`, `ṽ = W_v x_v`. Writes the gradients of `x_r`
/// and `x_k` and adds to that of `x_v` (which the value-residual path wrote).
fn projections_backward((ls, params, t): Walk, g: &mut GradScratch, mut grads: Option<&mut [f32]>) {
    let c = g.x.len();
    let paths = [
        (ls.r_proj, R, &g.r, false),
        (ls.k_proj, K, &g.kt, false),
        (ls.v_proj, VAL, &g.vt, true),
    ];
    for (w, m, g_y, accumulate) in paths {
        let g_w = grads.as_deref_mut().map(|gr| w.of_mut(gr));
        let (x, g_x) = (t.shift[m], &mut g.shift[m]);
        linear_backward(w.of(params), x, g_y, g_x, g_w, None, (c, c), accumulate);
    }
}

/// Step 9 backward. Block 0: `v = ṽ = v_first`, which every later block also read; later
/// blocks: `v = ṽ + (v_first − ṽ) ⊙ ν`, `ν = σ(V2 V1 x_v + v0)`. Writes `g.vt` and `x_v`'s
/// gradient.
fn value_backward(
    ls: &LayerSlots,
    params: &[f32],
    t: TraceRef,
    v_first: &[f32],
    g: &mut GradScratch,
    grads: Option<&mut [f32]>,
) {
    match &ls.v_lora {
        None => {
            for i in 0..g.vt.len() {
                g.vt[i] = g.v[i] + g.v_first[i];
            }
            g.shift[VAL].fill(0.0);
        }
        Some(vl) => {
            let g_out = (&mut g.vt[..], &mut g.v_first[..], &mut g.pre[..]);
            value_residual_backward(t.nu, t.vt, v_first, &g.v, g_out);
            let (x_v, g_x_v) = (t.shift[VAL], &mut g.shift[VAL]);
            low_rank_backward(
                vl,
                params,
                x_v,
                t.v_hidden,
                &g.pre,
                &mut g.rank,
                g_x_v,
                grads,
            );
        }
    }
}

/// Steps 8–6 backward: the gate, `a` and the decay, each through its low-rank path. Writes the
/// gradients of `x_g`, `x_a` and `x_w`.
fn low_rank_paths_backward(
    (ls, params, t): Walk,
    g: &mut GradScratch,
    mut grads: Option<&mut [f32]>,
) {
    // 8. g = G2 σ(G1 x_g)
    let (x_g, g_x_g) = (t.shift[G], &mut g.shift[G]);
    let gr = grads.as_deref_mut();
    low_rank_backward(
        &ls.g_lora,
        params,
        x_g,
        t.g_hidden,
        &g.g,
        &mut g.rank,
        g_x_g,
        gr,
    );
    // 7. a = σ(A2 A1 x_a + a0)
    sigmoid_backward(t.a, &g.a, &mut g.pre);
    let (x_a, g_x_a) = (t.shift[A], &mut g.shift[A]);
    let gr = grads.as_deref_mut();
    low_rank_backward(
        &ls.a_lora,
        params,
        x_a,
        t.a_hidden,
        &g.pre,
        &mut g.rank,
        g_x_a,
        gr,
    );
    // 6. w = exp(−e^{−½} s),  s = σ(W2 tanh(W1 x_w) + w0)
    decay_backward(t.w_sig, t.w, &g.w, &mut g.pre);
    let (x_w, g_x_w) = (t.shift[W], &mut g.shift[W]);
    low_rank_backward(
        &ls.w_lora,
        params,
        x_w,
        t.w_hidden,
        &g.pre,
        &mut g.rank,
        g_x_w,
        grads,
    );
}

/// Steps 17–20, the channel mixing: `x += W_value · relu(W_key · shift(LN_ffn(x)))²`,
/// advancing the block's FFN shift. `out` is scratch of `C`.
pub fn channel_mix_forward(
    (ls, params): (&LayerSlots, &[f32]),
    st: StateMut,
    t: TraceMut,
    x: &mut [f32],
    out: &mut [f32],
) {
    let p = |slot: Slot| slot.of(params);
    // 17. xf = LN_ffn(x)
    layer_norm(x, p(ls.ffn_norm_w), p(ls.ffn_norm_b), LN_EPS, t.xf);
    // 18. x_f = xf + μ ⊙ (prev − xf);   prev ← xf
    t.ffn_prev.copy_from_slice(st.ffn_prev);
    token_shift(t.xf, t.ffn_prev, p(ls.ffn_mix), t.ffn_x);
    st.ffn_prev.copy_from_slice(t.xf);
    // 19. h = relu(W_key x_f)²;   out = W_value h
    ffn_forward(&ls.ffn, params, t.ffn_x, t.ffn_pre, t.ffn_h, out);
    // 20. x += out
    kernels::add_assign(x, out);
}

/// Backward of [`channel_mix_forward`]: reads `g.x = dL/dx_out` and leaves `dL/dx_mid` in it.
pub fn channel_mix_backward(
    ls: &LayerSlots,
    params: &[f32],
    t: TraceRef,
    mut carry: Option<StateMut>,
    g: &mut GradScratch,
    grads: &mut [f32],
    scope: Scope,
) {
    let train = scope.has(FFN);
    // 20.–19. x_out = x_mid + FFN(x_f)   (the residual passes g.x on)
    let trace = (t.ffn_x, t.ffn_pre, t.ffn_h);
    let gr = train.then_some(&mut *grads);
    ffn_backward(&ls.ffn, params, trace, &g.x, &mut g.f, &mut g.tmp, gr);
    // 18. x_f = xf + μ ⊙ (prev − xf), and xf became the next byte's prev: what later bytes
    //     pass back for it joins g.xn; the carry then holds dL/d(prev).
    take_carry(carry.as_deref_mut().map(|lc| &mut *lc.ffn_prev), &mut g.xn);
    let g_prev = carry.map(|lc| &mut *lc.ffn_prev);
    let g_mix = train.then(|| ls.ffn_mix.of_mut(grads));
    let mix = ls.ffn_mix.of(params);
    token_shift_backward(&g.tmp, t.xf, t.ffn_prev, mix, &mut g.xn, g_prev, g_mix);
    // 17. xf = LN_ffn(x_mid)
    let norm = (ls.ffn_norm_w, ls.ffn_norm_b, scope.has(FFN_NORM));
    norm_backward(t.x_mid, params, norm, g, grads);
}

/// Starts the gradient of a token-shift base (`g_base`) from what later bytes passed back for
/// it through the carry, and clears that carry entry for the shift's backward to fill.
fn take_carry(carry: Option<&mut [f32]>, g_base: &mut [f32]) {
    match carry {
        Some(prev) => {
            g_base.copy_from_slice(prev);
            prev.fill(0.0);
        }
        None => g_base.fill(0.0),
    }
}

/// Backward of a residual-stream LayerNorm `xn = LN(x)` from `g.xn`: adds `dL/dx` to `g.x` and,
/// when `train`, the weight and bias gradients.
fn norm_backward(
    x: &[f32],
    params: &[f32],
    (w, b, train): (Slot, Slot, bool),
    g: &mut GradScratch,
    grads: &mut [f32],
) {
    if train {
        layer_norm_param_grads(x, LN_EPS, &g.xn, grads, w, b);
    }
    layer_norm_backward(x, w.of(params), LN_EPS, &g.xn, &mut g.tmp);
    kernels::add_assign(&mut g.x, &g.tmp);
}

fn wkv_inputs<'a>(t: TraceRef<'_, 'a>) -> WkvInputs<'a> {
    WkvInputs {
        w: t.w,
        b: t.b,
        k: t.k,
        v: t.v,
        r: t.r,
        kk: t.kk,
    }
}

fn readout_inputs<'a>(t: TraceRef<'_, 'a>) -> ReadoutInputs<'a> {
    ReadoutInputs {
        y_wkv: t.y_wkv,
        r: t.r,
        k: t.k,
        v: t.v,
    }
}

fn readout_weights<'a>(ls: &LayerSlots, params: &'a [f32]) -> ReadoutWeights<'a> {
    ReadoutWeights {
        gn_w: ls.gn_w.of(params),
        gn_b: ls.gn_b.of(params),
        r_k: ls.r_k.of(params),
    }
}

/// Gradient buffers of one backward step (all dL/d of the named forward value).
pub struct GradScratch {
    pub x: Vec<f32>,               // [C] residual stream
    pub xn: Vec<f32>,              // [C] a norm's output (the token-shift base)
    pub tmp: Vec<f32>,             // [C] a norm's input, before joining the residual gradient
    pub f: Vec<f32>,               // [F] FFN hidden, then its pre-activation
    pub y: Vec<f32>,               // [C] gated attention output
    pub yh: Vec<f32>,              // [C] gate input, and so also the group norm's output
    pub y_wkv: Vec<f32>,           // [C]
    pub g: Vec<f32>,               // [C] gate
    pub r: Vec<f32>,               // [C]
    pub k: Vec<f32>,               // [C] key written into the state
    pub v: Vec<f32>,               // [C] value
    pub w: Vec<f32>,               // [C] decay
    pub b: Vec<f32>,               // [C] kk ⊙ a
    pub kk: Vec<f32>,              // [C] normalised kk
    pub a: Vec<f32>,               // [C]
    pub kt: Vec<f32>,              // [C] k̃
    pub vt: Vec<f32>,              // [C] ṽ
    pub v_first: Vec<f32>,         // [C] block 0's value, summed over later blocks
    pub pre: Vec<f32>,             // [C] a low-rank path's pre-activation
    pub rank: Vec<f32>,            // [max(Dw, Da, Dv, Dg)] a low-rank path's hidden
    pub shift: [Vec<f32>; SHIFTS], // [6][C] the six token-shifted inputs
    pub s_row: Vec<f32>,           // [N] dL/dS' of one state row
    pub s_new: Vec<f32>,           // [N] one row of the state after the step, recomputed
}

impl GradScratch {
    pub fn new(cfg: &Config) -> Self {
        let (c, f) = (cfg.hidden, cfg.intermediate);
        let rank = [cfg.decay_rank, cfg.a_rank, cfg.v_rank, cfg.g_rank];
        let z = |n: usize| vec![0.0f32; n];
        GradScratch {
            x: z(c),
            xn: z(c),
            tmp: z(c),
            f: z(f),
            y: z(c),
            yh: z(c),
            y_wkv: z(c),
            g: z(c),
            r: z(c),
            k: z(c),
            v: z(c),
            w: z(c),
            b: z(c),
            kk: z(c),
            a: z(c),
            kt: z(c),
            vt: z(c),
            v_first: z(c),
            pre: z(c),
            rank: z(rank.into_iter().max().unwrap_or(0)),
            shift: std::array::from_fn(|_| z(c)),
            s_row: z(N),
            s_new: z(N),
        }
    }
}
