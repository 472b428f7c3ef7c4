//! The selective scan of a Mamba-1 block, one byte of one layer per call, in eight lanes.
//!
//! Per channel `c` with input `u`, step `Δ`, and the shared `B`, `C` of this byte:
//! `dA_j = exp(Δ·A_j)`, `s'_j = s_j·dA_j + (u·Δ)·B_j`, `y_pre = Σ_j C_j·s'_j + D·u`.
//!
//! **Which index the lanes run over.** The lanes run over the state index `j` of one channel,
//! where the work is element-wise: the exponentials, the state update, and in backward the
//! gradients of `B`, `C`, `A_log` and of the carried state (`g_b` and `g_c` receive their
//! channels' terms in ascending channel order, one channel after the other, as before). The
//! sums over `j` keep their orders: `y_pre` is a [`super::dot`] of the state row with `C`
//! (the eight-lane order), and backward's two sums (`dL/d(u·Δ)` and `dL/dΔ`) add their terms
//! one by one in index order, as [`super::dot_in_order`] does. The scalar twins
//! ([`super::scalar::scan_forward`], [`super::scalar::scan_backward`]) spell this out.

use super::lanes::{Lanes8, exp_lanes};
use super::math::exp;
use super::simd::dot;
use super::{LANES, dot_in_order};

/// Defines a path's two scan entry points over its eight-lane type `$V` (beside
/// `entry_points!` of src/kernels/simd.rs), with the attributes given.
macro_rules! scan_entry_points {
    (narrow: $V:ty, $(#[$attr:meta])*) => {
        $(#[$attr])*
        pub(super) fn scan_forward(
            x: &super::ScanInput,
            ssm: &mut [f32],
            da: &mut [f32],
            y_pre: &mut [f32],
        ) {
            super::scan::forward::<$V>(x, ssm, da, y_pre)
        }
        $(#[$attr])*
        pub(super) fn scan_backward(
            tr: &super::ScanTrace,
            g_y_pre: &[f32],
            g: super::ScanGrads,
            carry: Option<&mut [f32]>,
        ) {
            super::scan::backward::<$V>(tr, g_y_pre, g, carry)
        }
    };
}

/// What the scan of one byte reads besides the state: per channel `u`, `Δ`, `D` and the rows
/// of `A = −exp(A_log)`; shared `B` and `C` of length `S`.
pub struct ScanInput<'a> {
    pub u: &'a [f32],
    pub dt: &'a [f32],
    pub b: &'a [f32],
    pub c: &'a [f32],
    pub d: &'a [f32],
    pub a: &'a [f32],
}

/// What backward of the scan reads of its forward step.
pub struct ScanTrace<'a> {
    pub input: ScanInput<'a>,
    pub da: &'a [f32],
    pub ssm_prev: &'a [f32],
    pub ssm_new: &'a [f32],
}

/// The gradients [`super::scan_backward`] writes and adds.
pub struct ScanGrads<'a> {
    /// Written: `dL/du` (`[I]`).
    pub u: &'a mut [f32],
    /// Written: `dL/dΔ` (`[I]`).
    pub dt: &'a mut [f32],
    /// Added: `dL/dB`, `dL/dC` (`[S]` each).
    pub b: &'a mut [f32],
    pub c: &'a mut [f32],
    /// Added when trained: `dL/dD` (`[I]`) and `dL/dA_log` (`[I, S]`).
    pub d: Option<&'a mut [f32]>,
    pub a_log: Option<&'a mut [f32]>,
    /// Scratch of length `S`.
    pub s_scratch: &'a mut [f32],
    pub dt_a_scratch: &'a mut [f32],
}

/// See [`super::scan_forward`].
#[inline(always)]
pub(super) fn forward<V: Lanes8>(
    x: &ScanInput,
    ssm: &mut [f32],
    da: &mut [f32],
    y_pre: &mut [f32],
) {
    let s = x.b.len();
    let (b, c) = (&x.b[..s], &x.c[..s]);
    let (b8, b_tail) = b.as_chunks::<LANES>();
    let channels = ssm
        .chunks_exact_mut(s)
        .zip(da.chunks_exact_mut(s))
        .zip(x.a.chunks_exact(s))
        .zip(y_pre.iter_mut())
        .zip(x.u.iter().zip(x.dt).zip(x.d));
    for ((((row, da), a), y_pre), ((&u, &dt), &d)) in channels {
        let u_dt = u * dt;
        let (dtv, u_dtv) = (V::splat(dt), V::splat(u_dt));
        let (s8, s_tail) = row.as_chunks_mut::<LANES>();
        let (da8, da_tail) = da.as_chunks_mut::<LANES>();
        let (a8, a_tail) = a.as_chunks::<LANES>();
        for (((sc, dac), ac), bc) in s8.iter_mut().zip(da8).zip(a8).zip(b8) {
            let dav = exp_lanes::<LANES, V>(dtv.mul(V::load(ac)));
            dav.store(dac);
            V::load(sc).mul(dav).add(u_dtv.mul(V::load(bc))).store(sc);
        }
        let tails = s_tail.iter_mut().zip(da_tail).zip(a_tail).zip(b_tail);
        for (((sj, daj), &aj), &bj) in tails {
            *daj = exp(dt * aj);
            *sj = *sj * *daj + u_dt * bj;
        }
        *y_pre = dot::<V>(row, c) + d * u;
    }
}

/// See [`super::scan_backward`].
#[inline(always)]
pub(super) fn backward<V: Lanes8>(
    tr: &ScanTrace,
    g_y_pre: &[f32],
    g: ScanGrads,
    mut carry: Option<&mut [f32]>,
) {
    let x = &tr.input;
    let s = x.b.len();
    if let Some(g_d) = g.d {
        for ((gd, &g_y), &u) in g_d.iter_mut().zip(g_y_pre).zip(x.u) {
            *gd += g_y * u;
        }
    }
    let (b, c) = (&x.b[..s], &x.c[..s]);
    let (g_b, g_c) = (&mut g.b[..s], &mut g.c[..s]);
    let (g_s, g_dt_a) = (&mut g.s_scratch[..s], &mut g.dt_a_scratch[..s]);
    let mut g_a_log = g.a_log;
    for ch in 0..g_y_pre.len() {
        let row = ch * s..(ch + 1) * s;
        let (s_prev, s_new) = (&tr.ssm_prev[row.clone()], &tr.ssm_new[row.clone()]);
        let (da, a_row) = (&tr.da[row.clone()], &x.a[row.clone()]);
        let (g_y, u, dt) = (g_y_pre[ch], x.u[ch], x.dt[ch]);
        let u_dt = u * dt;
        let lanes = ChannelLanes {
            g_y,
            u_dt,
            dt,
            c,
            s_new,
            s_prev,
            da,
            a: a_row,
        };
        let cc = carry.as_deref_mut().map(|cc| &mut cc[row.clone()]);
        let ga = g_a_log.as_deref_mut().map(|ga| &mut ga[row]);
        channel_backward::<V>(&lanes, (g_s, g_dt_a), (g_b, g_c), ga, cc);
        // s'_j = s_j · dA_j + (u·Δ) · B_j;  dA_j = exp(Δ · A_j): the sums over j, in order.
        let g_u_dt = dot_in_order(g_s, b);
        let g_dt = dot_in_order(g_dt_a, a_row);
        g.u[ch] = g_y * x.d[ch] + g_u_dt * dt;
        // dL/dΔ; the caller multiplies in softplus'.
        g.dt[ch] = g_dt + g_u_dt * u;
    }
}

/// What the element-wise part of one channel's backward reads.
struct ChannelLanes<'a> {
    g_y: f32,
    u_dt: f32,
    dt: f32,
    c: &'a [f32],
    s_new: &'a [f32],
    s_prev: &'a [f32],
    da: &'a [f32],
    a: &'a [f32],
}

/// The element-wise part of one channel's backward, for each `j` (eight at a time):
/// `g_s = g_y·C_j (+ carry_j)`, `g_c_j += g_y·s'_j`, `g_b_j += (u·Δ)·g_s`,
/// `g_dt_a = (g_s·s_j)·dA_j`, `g_a_log_j += (g_dt_a·Δ)·A_j`, `carry_j = g_s·dA_j`; `g_s` and
/// `g_dt_a` are left in the scratch rows for the sums over `j`.
#[inline(always)]
fn channel_backward<V: Lanes8>(
    x: &ChannelLanes,
    (g_s, g_dt_a): (&mut [f32], &mut [f32]),
    (g_b, g_c): (&mut [f32], &mut [f32]),
    mut g_a_log: Option<&mut [f32]>,
    mut carry: Option<&mut [f32]>,
) {
    let (gyv, u_dtv, dtv) = (V::splat(x.g_y), V::splat(x.u_dt), V::splat(x.dt));
    let n = g_s.len();
    let blocks = n / LANES;
    for k in 0..blocks {
        let lanes = k * LANES..(k + 1) * LANES;
        let at = |v: &[f32]| V::load(v[lanes.clone()].try_into().expect("a block of eight"));
        let mut gs = gyv.mul(at(x.c));
        if let Some(cc) = carry.as_deref() {
            gs = gs.add(at(cc));
        }
        store(g_c, k, at(g_c).add(gyv.mul(at(x.s_new))));
        store(g_b, k, at(g_b).add(u_dtv.mul(gs)));
        let da = at(x.da);
        let t = gs.mul(at(x.s_prev)).mul(da);
        if let Some(ga) = g_a_log.as_deref_mut() {
            let v = at(ga).add(t.mul(dtv).mul(at(x.a)));
            store(ga, k, v);
        }
        if let Some(cc) = carry.as_deref_mut() {
            store(cc, k, gs.mul(da));
        }
        store(g_s, k, gs);
        store(g_dt_a, k, t);
    }
    for j in blocks * LANES..n {
        let mut gs = x.g_y * x.c[j];
        if let Some(cc) = carry.as_deref() {
            gs += cc[j];
        }
        g_c[j] += x.g_y * x.s_new[j];
        g_b[j] += x.u_dt * gs;
        let t = gs * x.s_prev[j] * x.da[j];
        if let Some(ga) = g_a_log.as_deref_mut() {
            ga[j] += t * x.dt * x.a[j];
        }
        if let Some(cc) = carry.as_deref_mut() {
            cc[j] = gs * x.da[j];
        }
        g_s[j] = gs;
        g_dt_a[j] = t;
    }
}

/// Stores `v` into the `k`-th block of eight of `dst`.
#[inline(always)]
fn store<V: Lanes8>(dst: &mut [f32], k: usize, v: V) {
    v.store(
        (&mut dst[k * LANES..(k + 1) * LANES])
            .try_into()
            .expect("a block of eight"),
    );
}
