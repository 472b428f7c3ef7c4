//! One block as call sequences of its layers: the time mixing (attention, steps 3–16) and the
//! channel mixing (FFN, steps 17–20), each forward beside its backward, which calls the
//! layers' backwards in reverse order. Step numbers are those of [`super::Rwkv7`]'s forward.
//!
//! Both are written once for any number of steps `T`: the live byte's forward and a one-step
//! update's backward are `T = 1`, a replay of known bytes and a TBPTT chunk's backward ([`Seg`])
//! `T = n`. The linear maps (`W_r`, `W_k`, `W_v`, `W_o`, the low-rank paths, the FFN) take all
//! `T` rows at once ([`crate::model::layers::Linear`]), reading each weight once per chunk; the
//! element-wise steps run row by row, and only what carries state (the WKV state, the two token
//! shifts) walks the steps in order (forward) or last first (backward). Why that computes the
//! bits of `T` single steps: every activation at step `t` gets the same operations from the
//! block below (or above) at `t` and from this block at `t − 1` (or `t + 1`), and every
//! parameter's gradient still receives its per-step terms last step first (see
//! src/model/mamba1/block.rs, where the same holds).

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
use super::wkv::{WkvGrads, WkvInput, wkv_backward, wkv_forward};
use super::{
    A, ATTN, ATTN_NORM, Config, FFN, FFN_NORM, G, K, LN_EPS, LayerSlots, LayerState, LayerTrace, N,
    ONE_STEP, R, SHIFT_NAMES, SHIFTS, StepTrace, VAL, W, layer_trace, step_trace,
};
use crate::kernels;
use crate::model::layers::{
    MAX_STEPS, layer_norm, layer_norm_backward, layer_norm_param_grads, ln_stats, row, row_mut,
    step_rows, token_shift, token_shift_backward,
};
use crate::model::layout::{Blocks, carve};
use crate::params::{ParamSet, Scope, Slot};

/// A block's trace, written by its forward.
type TraceMut<'a, 'b> = &'a mut LayerTrace<&'b mut [f32]>;
/// A block's part of the state, or of the carry.
type StateMut<'a, 'b> = &'a mut LayerState<&'b mut [f32]>;
/// The gradient buffers of a backward, over its steps.
type GradsMut<'a, 'b> = &'a mut Grads<&'b mut [f32]>;
/// What the parts of a block's backward read: its weights' slots, the parameters and the
/// segment's traces.
type Walk<'a, 'b> = (&'a LayerSlots, &'a ParamSet, &'a Seg<'b>);

/// Steps 3–16, the time mixing, over `n` steps: `x += W_o · attention(LN_attn(x))` with the
/// rows of `x` (`[n, C]`) the residual stream, advancing the block's attention shift and WKV
/// state step after step. Block 0 writes the rows of `v_first`, later blocks read them. With
/// `traced`, also keeps the WKV state before each step.
pub fn time_mix_forward(
    (ls, params): (&LayerSlots, &ParamSet),
    st: StateMut,
    t: TraceMut,
    (v_first, x): (&mut [f32], &mut [f32]),
    (n, traced): (usize, bool),
) {
    let (c, p) = (st.att_prev.len(), |slot: Slot| params.get(slot));
    // 3. xn = LN_attn(x)
    for s in 0..n {
        let (w, b) = (p(ls.attn_norm_w), p(ls.attn_norm_b));
        layer_norm(row(x, s, c), w, b, LN_EPS, row_mut(t.xn, s, c));
    }
    // 4. x_m = xn + μ_m ⊙ (prev − xn) for m ∈ {r, w, k, v, a, g};   prev ← xn
    let shifted = (&mut t.shift[..], &ls.mix[..]);
    token_shifts_forward(params, (t.xn, t.att_prev, st.att_prev), shifted, n);
    // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v
    ls.r_proj.forward_steps(params, (t.shift[R], c), t.r, n);
    ls.k_proj.forward_steps(params, (t.shift[K], c), t.kt, n);
    ls.v_proj.forward_steps(params, (t.shift[VAL], c), t.vt, n);
    // 6. w = exp(−e^{−½} · σ(W2 tanh(W1 x_w) + w0))
    low_rank_forward(&ls.w_lora, params, (t.shift[W], t.w_hidden, t.w_sig), n);
    decay_forward(&mut t.w_sig[..n * c], t.w);
    // 7. a = σ(A2 A1 x_a + a0)
    low_rank_forward(&ls.a_lora, params, (t.shift[A], t.a_hidden, t.a), n);
    sigmoid_forward(&mut t.a[..n * c]);
    // 8. g = G2 σ(G1 x_g)
    low_rank_forward(&ls.g_lora, params, (t.shift[G], t.g_hidden, t.g), n);
    // 9. block 0: v = ṽ and v_first = ṽ;
    //    later blocks: ν = σ(V2 V1 x_v + v0),  v = ṽ + (v_first − ṽ) ⊙ ν
    match &ls.v_lora {
        None => {
            t.v[..n * c].copy_from_slice(&t.vt[..n * c]);
            v_first[..n * c].copy_from_slice(&t.vt[..n * c]);
        }
        Some(vl) => {
            low_rank_forward(vl, params, (t.shift[VAL], t.v_hidden, t.nu), n);
            let (nu, vt) = (&mut t.nu[..n * c], &t.vt[..n * c]);
            value_residual_forward(nu, vt, &v_first[..n * c], t.v);
        }
    }
    // 10.–12. the keys and the WKV state, step after step
    for s in 0..n {
        wkv_step_forward((ls, params), st.wkv, t, s, traced);
    }
    // 13.–15. the readout: group norm, the r·k bonus, the gate
    for s in 0..n {
        readout_forward((ls, params), t, s, c);
    }
    // 16. x += W_o y
    ls.o_proj.forward_steps(params, (t.y_gate, c), t.x_mid, n);
    kernels::add_assign(&mut t.x_mid[..n * c], &x[..n * c]);
    x[..n * c].copy_from_slice(&t.x_mid[..n * c]);
}

/// Steps 10–12 of step `s`: the keys, then the WKV state's update and readout.
fn wkv_step_forward(
    (ls, params): (&LayerSlots, &ParamSet),
    wkv: &mut [f32],
    t: TraceMut,
    s: usize,
    traced: bool,
) {
    let (c, h) = (ls.k_k.len, ls.k_k.len / N);
    // 10. kk = (k̃ ⊙ k_k) / max(‖k̃ ⊙ k_k‖, ε)   per head
    let (kt, kk) = (row(t.kt, s, c), row_mut(t.kk, s, c));
    kk_norm_forward(kt, params.get(ls.k_k), kk, row_mut(t.kk_norm, s, h));
    // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a);   b = kk ⊙ a
    let (a, k_a) = (row(t.a, s, c), params.get(ls.k_a));
    key_forward(
        kt,
        a,
        k_a,
        row(t.kk, s, c),
        row_mut(t.k, s, c),
        row_mut(t.b, s, c),
    );
    // 12. per head, sa = S·kk,  S' = S·diag(w) − sa·bᵀ + v·kᵀ,  y = S'·r  (the state before
    //     the step kept in the trace when traced)
    let wkv_in = WkvInput {
        n: N,
        w: row(t.w, s, c),
        b: row(t.b, s, c),
        k: row(t.k, s, c),
        v: row(t.v, s, c),
        r: row(t.r, s, c),
        kk: row(t.kk, s, c),
    };
    let prev = traced.then(|| row_mut(t.wkv_prev, s, wkv.len()));
    let out = (row_mut(t.sa, s, c), row_mut(t.y_wkv, s, c));
    wkv_forward(wkv, &wkv_in, out, prev);
}

/// Steps 13–15 of step `s`: `y = GroupNorm(y_wkv) + (Σ_head r ⊙ k ⊙ r_k) · v` (a LayerNorm per
/// head, ε = 64e-5, plus the current byte's own r·k bonus), then `y ⊙ g`.
fn readout_forward((ls, params): (&LayerSlots, &ParamSet), t: TraceMut, s: usize, c: usize) {
    let h = c / N;
    let readout_in = ReadoutInputs {
        y_wkv: row(t.y_wkv, s, c),
        r: row(t.r, s, c),
        k: row(t.k, s, c),
        v: row(t.v, s, c),
    };
    let (alpha, y_head) = (row_mut(t.alpha, s, h), row_mut(t.y_head, s, c));
    group_norm_bonus_forward(&readout_in, &readout_weights(ls, params), alpha, y_head);
    let (y_head, gate) = (row(t.y_head, s, c), row(t.g, s, c));
    gate_forward(y_head, gate, row_mut(t.y_gate, s, c));
}

/// Token shifts over `n` steps: each step's `prev` (a row of `prev`) is the state's `last`
/// for the first step and `base` of the step before for the others; each output `x_m =
/// base + μ_m ⊙ (prev − base)` with its mix. `last` is left as the last step's `base`.
fn token_shifts_forward(
    params: &ParamSet,
    (base, prev, last): (&[f32], &mut [f32], &mut [f32]),
    (outs, mixes): (&mut [&mut [f32]], &[Slot]),
    n: usize,
) {
    let c = last.len();
    for s in 0..n {
        let prev_t = row_mut(prev, s, c);
        prev_t.copy_from_slice(last);
        let base_t = row(base, s, c);
        for (out, &mix) in outs.iter_mut().zip(mixes) {
            token_shift(base_t, prev_t, params.get(mix), row_mut(out, s, c));
        }
        last.copy_from_slice(base_t);
    }
}

/// Backward of [`time_mix_forward`] over the segment's steps: reads the rows of
/// `g.x = dL/dx_mid` and leaves `dL/dx_in` in them; adds into the rows of `g.v_first` what
/// this block's value passes back to block 0's.
pub fn time_mix_backward(
    walk: Walk,
    mut carry: Option<StateMut>,
    g: GradsMut,
    grads: &mut [f32],
    scope: Scope,
) {
    let (ls, params, seg) = walk;
    let train = scope.has(ATTN);
    // 16.–13. x_mid = x_in + W_o (y_head ⊙ g),  y_head = GN(y_wkv) + α·v
    readout_backward(walk, g, train.then_some(&mut *grads));
    // 12. per head and row i: sa_i = S_i·kk,  S'_i = S_i ⊙ w − sa_i·b + v_i·k,  y_i = S'_i·r
    wkv_steps_backward(seg, g, carry.as_deref_mut().map(|lc| &mut *lc.wkv));
    // 11.–10. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a),  b = kk ⊙ a,  kk = q / max(‖q‖, ε), q = k̃ ⊙ k_k
    keys_backward(walk, g, train.then_some(&mut *grads));
    // 9. v = ṽ (block 0), or ṽ + (v_first − ṽ) ⊙ ν
    value_backward(walk, g, train.then_some(&mut *grads));
    // 8.–6. g, a and w, each through its low-rank path
    low_rank_paths_backward(walk, g, train.then_some(&mut *grads));
    // 5. r = W_r x_r;   k̃ = W_k x_k;   ṽ = W_v x_v   (x_v's gradient adds to the value path's)
    projections_backward(walk, g, train.then_some(&mut *grads));
    // 4. x_m = xn + μ_m ⊙ (prev − xn), and xn became the next byte's prev
    let inputs = (seg.rows(|t| t.xn), seg.rows(|t| t.att_prev));
    let shifts: [(&[f32], Slot); SHIFTS] = std::array::from_fn(|m| (&*g.shift[m], ls.mix[m]));
    let g_prev = carry.map(|lc| &mut *lc.att_prev);
    let g_mix = train.then_some(&mut *grads);
    let base_prev = (&inputs.0[..seg.n()], &inputs.1[..seg.n()]);
    token_shifts_backward(params, base_prev, &shifts, g_prev, g.xn, g_mix);
    // 3. xn = LN_attn(x_in); the residual passes g.x through
    let norm = (ls.attn_norm_w, ls.attn_norm_b, scope.has(ATTN_NORM));
    norm_backward(&seg.rows(|t| t.x_in)[..seg.n()], params, norm, g, grads);
}

/// Steps 16–13 backward: the output projection, the gate and the group norm with its bonus.
/// Writes `g.y_wkv` and the bonus term's share of `g.v`, `g.r` and `g.k`.
fn readout_backward((ls, params, seg): Walk, g: GradsMut, mut grads: Option<&mut [f32]>) {
    let (c, n) = (seg.cfg.hidden, seg.n());
    // 16. x_mid = x_in + W_o y_gate   (g.x = dL/dx_mid; the residual passes it on)
    let y_gate = seg.rows(|t| t.y_gate);
    let gr = grads.as_deref_mut();
    ls.o_proj
        .backward_steps(params, gr, &y_gate[..n], g.x, (g.y, c), false);
    let w = readout_weights(ls, params);
    for t in (0..n).rev() {
        let tr = seg.at(t);
        // 15. y_gate = y_head ⊙ g
        let (g_yh, g_g) = (row_mut(g.yh, t, c), row_mut(g.g, t, c));
        gate_backward(tr.y_head, tr.g, row(g.y, t, c), g_yh, g_g);
        // 14.–13. y_head = GN(y_wkv) + α·v,   α = Σ r ⊙ k ⊙ r_k per head
        let param_grads = grads.as_deref_mut().map(|grads| ReadoutGrads {
            grads,
            gn_w: ls.gn_w,
            gn_b: ls.gn_b,
            r_k: ls.r_k,
        });
        let (g_v, g_r) = (row_mut(g.v, t, c), row_mut(g.r, t, c));
        let g_in = (g_v, g_r, row_mut(g.k, t, c), row_mut(g.y_wkv, t, c));
        let x = readout_inputs(&tr);
        group_norm_bonus_backward(&x, &w, tr.alpha, row(g.yh, t, c), g_in, param_grads);
    }
}

/// Step 12 backward, last step first, through `carry` (the block's WKV state gradient):
/// writes the rows of `g.w`, `g.b` and `g.kk`, and adds to those of `g.k`, `g.v` and `g.r`.
fn wkv_steps_backward(seg: &Seg, g: GradsMut, mut carry: Option<&mut [f32]>) {
    let c = seg.cfg.hidden;
    for t in (0..seg.n()).rev() {
        let tr = seg.at(t);
        let g_wkv = WkvGrads {
            w: row_mut(g.w, t, c),
            b: row_mut(g.b, t, c),
            k: row_mut(g.k, t, c),
            v: row_mut(g.v, t, c),
            r: row_mut(g.r, t, c),
            kk: row_mut(g.kk, t, c),
        };
        let (x, g_y) = (wkv_inputs(&tr), row(g.y_wkv, t, c));
        let step = (tr.wkv_prev, tr.sa, g_y);
        wkv_backward(step, &x, g_wkv, carry.as_deref_mut(), g.s_rows);
    }
}

/// Steps 11–10 backward: the written key `k`, the removal direction `b` and the normalised
/// key `kk`. Writes the rows of `g.a` and `g.kt`.
fn keys_backward((ls, params, seg): Walk, g: GradsMut, mut grads: Option<&mut [f32]>) {
    let (k_a, k_k, c) = (params.get(ls.k_a), params.get(ls.k_k), seg.cfg.hidden);
    for t in (0..seg.n()).rev() {
        let tr = seg.at(t);
        // 11. k = k̃ ⊙ (1 + (a − 1) ⊙ k_a);   b = kk ⊙ a
        let x = KeyInputs {
            kt: tr.kt,
            a: tr.a,
            k_a,
            kk: tr.kk,
        };
        let g_k_a = grads.as_deref_mut().map(|gr| ls.k_a.of_mut(gr));
        let g_out = (row_mut(g.a, t, c), row_mut(g.kt, t, c), row_mut(g.kk, t, c));
        key_backward(&x, row(g.k, t, c), row(g.b, t, c), g_out, g_k_a);
        // 10. kk = q / max(‖q‖, ε) per head, q = k̃ ⊙ k_k
        let g_k_k = grads.as_deref_mut().map(|gr| ls.k_k.of_mut(gr));
        let (x, g_q) = ((tr.kt, k_k, tr.kk), row_mut(g.tmp, t, c));
        let g_kt = row_mut(g.kt, t, c);
        kk_norm_backward(x, tr.kk_norm, row(g.kk, t, c), g_q, g_kt, g_k_k);
    }
}

/// Step 5 backward: `r = W_r x_r`, `k̃ = W_k x_k`, `ṽ = W_v x_v`. Writes the gradients of `x_r`
/// and `x_k` and adds to that of `x_v` (which the value-residual path wrote).
fn projections_backward((ls, params, seg): Walk, g: GradsMut, mut grads: Option<&mut [f32]>) {
    let (c, n) = (seg.cfg.hidden, seg.n());
    let paths = [
        (ls.r_proj, R, &*g.r, false),
        (ls.k_proj, K, &*g.kt, false),
        (ls.v_proj, VAL, &*g.vt, true),
    ];
    for (lin, m, g_y, accumulate) in paths {
        let x = seg.rows(|t| t.shift[m]);
        let (gr, g_x) = (grads.as_deref_mut(), (&mut *g.shift[m], c));
        lin.backward_steps(params, gr, &x[..n], g_y, g_x, accumulate);
    }
}

/// Step 9 backward. Block 0: `v = ṽ = v_first`, which every later block also read; later
/// blocks: `v = ṽ + (v_first − ṽ) ⊙ ν`, `ν = σ(V2 V1 x_v + v0)`. Writes `g.vt` and `x_v`'s
/// gradient.
fn value_backward((ls, params, seg): Walk, g: GradsMut, grads: Option<&mut [f32]>) {
    let (c, n) = (seg.cfg.hidden, seg.n());
    let Some(vl) = &ls.v_lora else {
        for i in 0..n * c {
            g.vt[i] = g.v[i] + g.v_first[i];
        }
        g.shift[VAL][..n * c].fill(0.0);
        return;
    };
    for t in (0..n).rev() {
        let (tr, v_first) = (seg.at(t), seg.top(t).v_first);
        let g_out = (
            row_mut(g.vt, t, c),
            row_mut(g.v_first, t, c),
            row_mut(g.pre, t, c),
        );
        value_residual_backward(tr.nu, tr.vt, v_first, row(g.v, t, c), g_out);
    }
    let x = (seg.rows(|t| t.shift[VAL]), seg.rows(|t| t.v_hidden));
    let g_out = (&mut *g.rank, &mut *g.shift[VAL]);
    low_rank_backward(vl, params, (&x.0[..n], &x.1[..n]), g.pre, g_out, grads);
}

/// Steps 8–6 backward: the gate, `a` and the decay, each through its low-rank path. Writes the
/// gradients of `x_g`, `x_a` and `x_w`.
fn low_rank_paths_backward((ls, params, seg): Walk, g: GradsMut, mut grads: Option<&mut [f32]>) {
    let (c, n) = (seg.cfg.hidden, seg.n());
    // 8. g = G2 σ(G1 x_g)
    let x = (seg.rows(|t| t.shift[G]), seg.rows(|t| t.g_hidden));
    let (gr, g_out) = (grads.as_deref_mut(), (&mut *g.rank, &mut *g.shift[G]));
    low_rank_backward(&ls.g_lora, params, (&x.0[..n], &x.1[..n]), g.g, g_out, gr);
    // 7. a = σ(A2 A1 x_a + a0)
    for t in 0..n {
        sigmoid_backward(seg.at(t).a, row(g.a, t, c), row_mut(g.pre, t, c));
    }
    let x = (seg.rows(|t| t.shift[A]), seg.rows(|t| t.a_hidden));
    let (gr, g_out) = (grads.as_deref_mut(), (&mut *g.rank, &mut *g.shift[A]));
    low_rank_backward(&ls.a_lora, params, (&x.0[..n], &x.1[..n]), g.pre, g_out, gr);
    // 6. w = exp(−e^{−½} s),  s = σ(W2 tanh(W1 x_w) + w0)
    for t in 0..n {
        let tr = seg.at(t);
        decay_backward(tr.w_sig, tr.w, row(g.w, t, c), row_mut(g.pre, t, c));
    }
    let x = (seg.rows(|t| t.shift[W]), seg.rows(|t| t.w_hidden));
    let g_out = (&mut *g.rank, &mut *g.shift[W]);
    low_rank_backward(
        &ls.w_lora,
        params,
        (&x.0[..n], &x.1[..n]),
        g.pre,
        g_out,
        grads,
    );
}

/// Steps 17–20, the channel mixing, over `n` steps: `x += W_value · relu(W_key ·
/// shift(LN_ffn(x)))²` with the rows of `x` (`[n, C]`) the residual stream, advancing the
/// block's FFN shift. `out` is scratch of `[n, C]`.
pub fn channel_mix_forward(
    (ls, params): (&LayerSlots, &ParamSet),
    st: StateMut,
    t: TraceMut,
    (x, out): (&mut [f32], &mut [f32]),
    n: usize,
) {
    let (c, p) = (st.ffn_prev.len(), |slot: Slot| params.get(slot));
    // 17. xf = LN_ffn(x)
    for s in 0..n {
        let (w, b) = (p(ls.ffn_norm_w), p(ls.ffn_norm_b));
        layer_norm(row(x, s, c), w, b, LN_EPS, row_mut(t.xf, s, c));
    }
    // 18. x_f = xf + μ ⊙ (prev − xf);   prev ← xf
    let shifted = (
        std::slice::from_mut(&mut t.ffn_x),
        std::slice::from_ref(&ls.ffn_mix),
    );
    token_shifts_forward(params, (t.xf, t.ffn_prev, st.ffn_prev), shifted, n);
    // 19. h = relu(W_key x_f)²;   out = W_value h
    ffn_forward(&ls.ffn, params, (t.ffn_x, t.ffn_pre, t.ffn_h), out, n);
    // 20. x += out
    kernels::add_assign(&mut x[..n * c], &out[..n * c]);
}

/// Backward of [`channel_mix_forward`] over the segment's steps: reads the rows of
/// `g.x = dL/dx_out` and leaves `dL/dx_mid` in them.
pub fn channel_mix_backward(
    (ls, params, seg): Walk,
    carry: Option<StateMut>,
    g: GradsMut,
    grads: &mut [f32],
    scope: Scope,
) {
    let (train, n) = (scope.has(FFN), seg.n());
    // 20.–19. x_out = x_mid + FFN(x_f)   (the residual passes g.x on)
    let x = (seg.rows(|t| t.ffn_x), seg.rows(|t| t.ffn_pre));
    let h = seg.rows(|t| t.ffn_h);
    let trace = (&x.0[..n], &x.1[..n], &h[..n]);
    let gr = train.then_some(&mut *grads);
    ffn_backward(&ls.ffn, params, trace, g.x, (&mut *g.f, &mut *g.tmp), gr);
    // 18. x_f = xf + μ ⊙ (prev − xf), and xf became the next byte's prev: what later bytes
    //     pass back for it joins g.xn; the carry then holds dL/d(prev).
    let inputs = (seg.rows(|t| t.xf), seg.rows(|t| t.ffn_prev));
    let g_prev = carry.map(|lc| &mut *lc.ffn_prev);
    let g_mix = train.then_some(&mut *grads);
    let shifts = [(&*g.tmp, ls.ffn_mix)];
    token_shifts_backward(
        params,
        (&inputs.0[..n], &inputs.1[..n]),
        &shifts,
        g_prev,
        g.xn,
        g_mix,
    );
    // 17. xf = LN_ffn(x_mid)
    let norm = (ls.ffn_norm_w, ls.ffn_norm_b, scope.has(FFN_NORM));
    norm_backward(&seg.rows(|t| t.x_mid)[..n], params, norm, g, grads);
}

/// Token shifts `x_m = base + μ_m ⊙ (prev − base)` walked back, last step first, where `base`
/// became the next step's `prev`: for each step, the gradient of `base` (a row of `g_base`)
/// starts from what the step after passed back through `carry` (which then holds dL/d(prev)),
/// and each shift, from its gradient rows and its mix, adds its terms. With `grads`, the mixes
/// receive their gradients.
fn token_shifts_backward(
    params: &ParamSet,
    (base, prev): (&[&[f32]], &[&[f32]]),
    shifts: &[(&[f32], Slot)],
    mut carry: Option<&mut [f32]>,
    g_base: &mut [f32],
    mut grads: Option<&mut [f32]>,
) {
    let (n, c) = (base.len(), base[0].len());
    for t in (0..n).rev() {
        let g_b = row_mut(g_base, t, c);
        match carry.as_deref_mut() {
            Some(prev) => {
                g_b.copy_from_slice(prev);
                prev.fill(0.0);
            }
            None => g_b.fill(0.0),
        }
        for &(g_shift, mix) in shifts {
            let g_mix = grads.as_deref_mut().map(|gr| mix.of_mut(gr));
            let (g_x, mix) = (row(g_shift, t, c), params.get(mix));
            token_shift_backward(g_x, base[t], prev[t], mix, g_b, carry.as_deref_mut(), g_mix);
        }
    }
}

/// Backward of a residual-stream LayerNorm `xn = LN(x)` over the steps of `x`, last first,
/// from the rows of `g.xn`: adds `dL/dx` to those of `g.x` and, when `train`, the weight and bias
/// gradients.
fn norm_backward(
    x: &[&[f32]],
    params: &ParamSet,
    (w, b, train): (Slot, Slot, bool),
    g: GradsMut,
    grads: &mut [f32],
) {
    let c = x[0].len();
    for t in (0..x.len()).rev() {
        let (g_xn, stats) = (row(g.xn, t, c), ln_stats(x[t], LN_EPS));
        if train {
            layer_norm_param_grads(x[t], stats, g_xn, grads, w, b);
        }
        let tmp = row_mut(g.tmp, t, c);
        layer_norm_backward(x[t], params.get(w), stats, g_xn, tmp);
        kernels::add_assign(row_mut(g.x, t, c), tmp);
    }
}

fn wkv_inputs<'a>(t: &LayerTrace<&'a [f32]>) -> WkvInput<'a> {
    WkvInput {
        n: N,
        w: t.w,
        b: t.b,
        k: t.k,
        v: t.v,
        r: t.r,
        kk: t.kk,
    }
}

fn readout_inputs<'a>(t: &LayerTrace<&'a [f32]>) -> ReadoutInputs<'a> {
    ReadoutInputs {
        y_wkv: t.y_wkv,
        r: t.r,
        k: t.k,
        v: t.v,
    }
}

fn readout_weights<'a>(ls: &LayerSlots, params: &'a ParamSet) -> ReadoutWeights<'a> {
    ReadoutWeights {
        gn_w: params.get(ls.gn_w),
        gn_b: params.get(ls.gn_b),
        r_k: params.get(ls.r_k),
    }
}

/// The traced steps of a segment as block `l` sees them: step `t`'s trace is `traces[t]`,
/// laid out by `layout`.
pub struct Seg<'a> {
    pub cfg: &'a Config,
    pub layout: &'a Blocks,
    pub traces: &'a [Vec<f32>],
    pub l: usize,
}

impl<'a> Seg<'a> {
    pub fn n(&self) -> usize {
        self.traces.len()
    }

    /// The block's trace of step `t`.
    fn at(&self, t: usize) -> LayerTrace<&'a [f32]> {
        let part = &self.traces[t][self.layout.layers[self.l].clone()];
        layer_trace(self.cfg, self.l, ONE_STEP, &mut carve(part))
    }

    /// The trace of step `t` outside the blocks.
    pub fn top(&self, t: usize) -> StepTrace<&'a [f32]> {
        step_trace(self.cfg, 1, &mut carve(&self.traces[t][..self.layout.top]))
    }

    /// One activation of the block at every step, without allocating.
    fn rows(&self, pick: impl Fn(LayerTrace<&'a [f32]>) -> &'a [f32]) -> [&'a [f32]; MAX_STEPS] {
        step_rows(self.n(), |t| pick(self.at(t)))
    }
}

/// Gradient buffers of a backward over up to `n` steps (all dL/d of the named forward value),
/// each `[n, ·]` but the scratch of two state rows.
pub struct Grads<T> {
    pub x: T,               // [n, C] residual stream
    pub xn: T,              // [n, C] a norm's output (the token-shift base)
    pub tmp: T,             // [n, C] a norm's input, before joining the residual gradient
    pub f: T,               // [n, F] FFN hidden, then its pre-activation
    pub y: T,               // [n, C] gated attention output
    pub yh: T,              // [n, C] gate input, and so also the group norm's output
    pub y_wkv: T,           // [n, C]
    pub g: T,               // [n, C] gate
    pub r: T,               // [n, C]
    pub k: T,               // [n, C] key written into the state
    pub v: T,               // [n, C] value
    pub w: T,               // [n, C] decay
    pub b: T,               // [n, C] kk ⊙ a
    pub kk: T,              // [n, C] normalised kk
    pub a: T,               // [n, C]
    pub kt: T,              // [n, C] k̃
    pub vt: T,              // [n, C] ṽ
    pub v_first: T,         // [n, C] block 0's value, summed over later blocks
    pub pre: T,             // [n, C] a low-rank path's pre-activation
    pub rank: T,            // [n, max(Dw, Da, Dv, Dg)] a low-rank path's hidden
    pub shift: [T; SHIFTS], // [6][n, C] the six token-shifted inputs
    pub s_rows: T,          // [2, N] dL/dS' of two state rows
}

/// The layout of [`Grads`] for `n` steps.
pub fn grads<T>(cfg: &Config, n: usize, add: &mut impl FnMut(&str, &[usize]) -> T) -> Grads<T> {
    let (c, f) = (cfg.hidden, cfg.intermediate);
    let rank = [cfg.decay_rank, cfg.a_rank, cfg.v_rank, cfg.g_rank];
    let rank = rank.into_iter().max().unwrap_or(0);
    Grads {
        x: add("x", &[n, c]),
        xn: add("xn", &[n, c]),
        tmp: add("tmp", &[n, c]),
        f: add("f", &[n, f]),
        y: add("y", &[n, c]),
        yh: add("yh", &[n, c]),
        y_wkv: add("y_wkv", &[n, c]),
        g: add("g", &[n, c]),
        r: add("r", &[n, c]),
        k: add("k", &[n, c]),
        v: add("v", &[n, c]),
        w: add("w", &[n, c]),
        b: add("b", &[n, c]),
        kk: add("kk", &[n, c]),
        a: add("a", &[n, c]),
        kt: add("kt", &[n, c]),
        vt: add("vt", &[n, c]),
        v_first: add("v_first", &[n, c]),
        pre: add("pre", &[n, c]),
        rank: add("rank", &[n, rank]),
        shift: SHIFT_NAMES.map(|name| add(name, &[n, c])),
        s_rows: add("s_rows", &[2, N]),
    }
}
