//! RWKV-7's WKV state, one step of every head per call: the delta rule
//! `S'_i = S_i ⊙ w − sa_i·b + v_i·k` with `sa_i = S_i·kk`, read as `y_i = S'_i·r`, for each row
//! `i` of each head's `n × n` state (row = value channel, column = key channel), and its
//! backward.
//!
//! **Orders.** The lanes run over the column `j` of a state row, where the work is
//! element-wise: each cell is `((s·w) − (sa·b)) + (v·k)`, and in backward each gradient element
//! receives one term per row, rows in ascending order. The three sums per row — `sa_i`, `y_i`
//! and in backward `dL/dv_i` and `dL/dsa_i` — are [`super::dot`]s (its eight-lane order). Two
//! rows go in lockstep: their dot products are [`super::simd::Dots::dot2`] (two independent
//! sums, each in [`super::dot`]'s order), and a gradient element that both rows add to receives
//! the first row's term, then the second's, as one row after the other would add them. So the
//! bits are those of a row at a time, which the scalar twins
//! ([`super::scalar::wkv_forward`], [`super::scalar::wkv_backward`]) spell out, and those of
//! the per-row `dot` and `axpy` calls these kernels replaced.

use super::lanes::Lanes;
use super::simd::Dots;

/// Defines a path's WKV entry points over its `wide` lane type `$W` of `$N` lanes (beside
/// `entry_points!` of src/kernels/simd.rs), with the attributes given.
macro_rules! wkv_entry_points {
    (wide: $W:ty = $N:literal, $(#[$attr:meta])*) => {
        $(#[$attr])*
        pub(super) fn wkv_forward(
            x: &super::WkvInput,
            state: &mut [f32],
            out: super::WkvOut,
        ) {
            super::wkv::forward::<$N, $W>(x, state, out)
        }
        $(#[$attr])*
        pub(super) fn wkv_backward(
            x: &super::WkvInput,
            tr: super::WkvTrace,
            g: super::WkvGrads,
            carry: Option<&mut [f32]>,
            g_rows: &mut [f32],
        ) {
            super::wkv::backward::<$N, $W>(x, tr, g, carry, g_rows)
        }
    };
}

/// The inputs of one WKV step, for `H` heads of width `n`: `w`, `b`, `k`, `r`, `kk` and `v`
/// are `[C]` with `C = H·n` (head `h` is `h·n .. (h+1)·n`).
pub struct WkvInput<'a> {
    /// The head width `n`.
    pub n: usize,
    /// Decay.
    pub w: &'a [f32],
    /// Removal direction `kk ⊙ a`.
    pub b: &'a [f32],
    /// Key written into the state.
    pub k: &'a [f32],
    /// Value: one per state row.
    pub v: &'a [f32],
    /// Receptance: what the readout reads.
    pub r: &'a [f32],
    /// Normalised removal key.
    pub kk: &'a [f32],
}

/// What [`super::wkv_forward`] writes besides the state: `sa` and `y` (`[C]`, one per state
/// row) and, when given, a copy of the state before the step (`[H, n, n]`, the trace).
pub struct WkvOut<'a> {
    pub sa: &'a mut [f32],
    pub y: &'a mut [f32],
    pub prev: Option<&'a mut [f32]>,
}

/// What [`super::wkv_backward`] reads of its forward step: the state before it (`[H, n, n]`),
/// `sa` (`[C]`) and `dL/dy` (`[C]`).
pub struct WkvTrace<'a> {
    pub prev: &'a [f32],
    pub sa: &'a [f32],
    pub g_y: &'a [f32],
}

/// The gradients of the WKV inputs, each `[C]`. `k`, `v` and `r` already hold what other uses
/// of these vectors passed back and are added to; `w`, `b` and `kk` are written.
pub struct WkvGrads<'a> {
    pub w: &'a mut [f32],
    pub b: &'a mut [f32],
    pub k: &'a mut [f32],
    pub v: &'a mut [f32],
    pub r: &'a mut [f32],
    pub kk: &'a mut [f32],
}

/// One head's part of the `[C]` inputs, each `[n]`.
struct Head<'a> {
    w: &'a [f32],
    b: &'a [f32],
    k: &'a [f32],
    r: &'a [f32],
    kk: &'a [f32],
}

impl<'a> WkvInput<'a> {
    fn heads(&self) -> usize {
        self.w.len().checked_div(self.n).unwrap_or(0)
    }

    fn head(&self, hd: usize) -> Head<'a> {
        let hs = hd * self.n..(hd + 1) * self.n;
        Head {
            w: &self.w[hs.clone()],
            b: &self.b[hs.clone()],
            k: &self.k[hs.clone()],
            r: &self.r[hs.clone()],
            kk: &self.kk[hs],
        }
    }
}

/// The whole blocks of `W` lanes of `v[..n]`: exactly `n / W` of them (so that indexing them
/// below `n / W` needs no check).
#[inline(always)]
fn blocks<const W: usize>(v: &[f32], n: usize) -> &[[f32; W]] {
    &v[..n].as_chunks::<W>().0[..n / W]
}

/// [`blocks`], mutably.
#[inline(always)]
fn blocks_mut<const W: usize>(v: &mut [f32], n: usize) -> &mut [[f32; W]] {
    &mut v[..n].as_chunks_mut::<W>().0[..n / W]
}

/// The blocks of `R` consecutive rows of `n` in `v`, row by row ([`blocks`]).
#[inline(always)]
fn row_blocks<const W: usize, const R: usize>(v: &[f32], n: usize) -> [&[[f32; W]]; R] {
    std::array::from_fn(|q| blocks(&v[q * n..], n))
}

/// [`row_blocks`], mutably.
#[inline(always)]
fn row_blocks_mut<const W: usize, const R: usize>(v: &mut [f32], n: usize) -> [&mut [[f32; W]]; R] {
    let mut rows = v[..R * n].chunks_exact_mut(n.max(1));
    std::array::from_fn(|_| blocks_mut(rows.next().unwrap_or_default(), n))
}

/// The dot products of each of `R` (1 or 2) rows of `n` in `rows` with `with`, in
/// [`super::dot`]'s order; two rows in lockstep.
#[inline(always)]
fn row_dots<D: Dots, const R: usize>(rows: &[f32], n: usize, with: &[f32]) -> [f32; R] {
    if R == 2 {
        let (d0, d1) = D::dot2(&rows[..n], with, &rows[n..2 * n], with);
        std::array::from_fn(|q| if q == 0 { d0 } else { d1 })
    } else {
        std::array::from_fn(|q| D::dot(&rows[q * n..(q + 1) * n], with))
    }
}

/// See [`super::wkv_forward`].
#[inline(always)]
pub(super) fn forward<const W: usize, V: Lanes<W> + Dots>(
    x: &WkvInput,
    state: &mut [f32],
    out: WkvOut,
) {
    let (n, heads) = (x.n, x.heads());
    let WkvOut { sa, y, mut prev } = out;
    for hd in 0..heads {
        let head = x.head(hd);
        let mut i = 0;
        while i < n {
            let rr = if i + 2 <= n { 2 } else { 1 };
            let ci = hd * n + i;
            let cells = ci * n..(ci + rr) * n;
            let rows = &mut state[cells.clone()];
            let copy = prev.as_deref_mut().map(|p| &mut p[cells]);
            let (v, sa, y) = (&x.v[ci..], &mut sa[ci..ci + rr], &mut y[ci..ci + rr]);
            let out = (sa, y);
            match (rr, copy.is_some()) {
                (2, true) => forward_rows::<W, V, 2, true>(&head, rows, copy, v, out),
                (2, false) => forward_rows::<W, V, 2, false>(&head, rows, copy, v, out),
                (_, true) => forward_rows::<W, V, 1, true>(&head, rows, copy, v, out),
                (_, false) => forward_rows::<W, V, 1, false>(&head, rows, copy, v, out),
            }
            i += rr;
        }
    }
}

/// [`forward`] for `R` consecutive rows of one head (`rows` and `copy` are `R·n`, `v` starts
/// at the first row's value); `copy` is written when `TRACED` (and given).
#[inline(always)]
fn forward_rows<const W: usize, V: Lanes<W> + Dots, const R: usize, const TRACED: bool>(
    head: &Head,
    rows: &mut [f32],
    mut copy: Option<&mut [f32]>,
    v: &[f32],
    (sa_out, y_out): (&mut [f32], &mut [f32]),
) {
    let n = head.w.len();
    // sa_i = S_i·kk
    let sa: [f32; R] = row_dots::<V, R>(rows, n, head.kk);
    let vs: [f32; R] = std::array::from_fn(|q| v[q]);
    let (sav, vv) = (sa.map(V::splat), vs.map(V::splat));
    // S'_ij = S_ij·w_j − sa_i·b_j + v_i·k_j, the old row kept when traced
    let (nb, full) = (n / W, n - n % W);
    let (hw, hb, hk) = (blocks::<W>(head.w, n), blocks(head.b, n), blocks(head.k, n));
    {
        let cells = row_blocks_mut::<W, R>(rows, n);
        let kept: [&mut [[f32; W]]; R] = match copy.as_deref_mut() {
            Some(c) if TRACED => row_blocks_mut::<W, R>(c, n),
            _ => std::array::from_fn(|_| &mut [][..]),
        };
        for m in 0..nb {
            let (wv, bv, kv) = (V::load(&hw[m]), V::load(&hb[m]), V::load(&hk[m]));
            for q in 0..R {
                let s = V::load(&cells[q][m]);
                if TRACED {
                    s.store(&mut kept[q][m]);
                }
                let s_new = s.mul(wv).sub(sav[q].mul(bv)).add(vv[q].mul(kv));
                s_new.store(&mut cells[q][m]);
            }
        }
    }
    for j in full..n {
        for q in 0..R {
            let o = q * n + j;
            let s = rows[o];
            if let Some(c) = copy.as_deref_mut() {
                c[o] = s;
            }
            rows[o] = s * head.w[j] - sa[q] * head.b[j] + vs[q] * head.k[j];
        }
    }
    // y_i = S'_i·r
    let y: [f32; R] = row_dots::<V, R>(rows, n, head.r);
    sa_out.copy_from_slice(&sa);
    y_out.copy_from_slice(&y);
}

/// See [`super::wkv_backward`].
#[inline(always)]
pub(super) fn backward<const W: usize, V: Lanes<W> + Dots>(
    x: &WkvInput,
    tr: WkvTrace,
    g: WkvGrads,
    mut carry: Option<&mut [f32]>,
    g_rows: &mut [f32],
) {
    let (n, heads, c) = (x.n, x.heads(), x.w.len());
    g.w[..c].fill(0.0);
    g.b[..c].fill(0.0);
    g.kk[..c].fill(0.0);
    for hd in 0..heads {
        let head = x.head(hd);
        let hs = hd * n..(hd + 1) * n;
        let mut acc = HeadGrads {
            w: &mut g.w[hs.clone()],
            b: &mut g.b[hs.clone()],
            k: &mut g.k[hs.clone()],
            r: &mut g.r[hs.clone()],
            kk: &mut g.kk[hs],
        };
        let mut i = 0;
        while i < n {
            let rr = if i + 2 <= n { 2 } else { 1 };
            let ci = hd * n + i;
            let cells = ci * n..(ci + rr) * n;
            let rows = RowsIn {
                prev: &tr.prev[cells.clone()],
                sa: &tr.sa[ci..ci + rr],
                v: &x.v[ci..ci + rr],
                g_y: &tr.g_y[ci..ci + rr],
            };
            let (g_v, scratch) = (&mut g.v[ci..ci + rr], &mut g_rows[..rr * n]);
            let out = (g_v, scratch);
            match (rr, carry.as_deref_mut()) {
                (2, Some(cr)) => {
                    let cc = &mut cr[cells];
                    backward_rows::<W, V, 2, true>(&head, &rows, &mut acc, cc, out)
                }
                (2, None) => backward_rows::<W, V, 2, false>(&head, &rows, &mut acc, &mut [], out),
                (_, Some(cr)) => {
                    let cc = &mut cr[cells];
                    backward_rows::<W, V, 1, true>(&head, &rows, &mut acc, cc, out)
                }
                (_, None) => backward_rows::<W, V, 1, false>(&head, &rows, &mut acc, &mut [], out),
            }
            i += rr;
        }
    }
}

/// One head's part of the gradients that every row of the head adds to, each `[n]`.
struct HeadGrads<'a> {
    w: &'a mut [f32],
    b: &'a mut [f32],
    k: &'a mut [f32],
    r: &'a mut [f32],
    kk: &'a mut [f32],
}

/// What [`backward_rows`] reads of `R` consecutive rows: their states before the step
/// (`R·n`) and their `sa`, `v` and `dL/dy` (`R` each).
struct RowsIn<'a> {
    prev: &'a [f32],
    sa: &'a [f32],
    v: &'a [f32],
    g_y: &'a [f32],
}

/// [`backward`] for `R` consecutive rows of one head: per row `i`, `g = dL/dS'_i` (what later
/// bytes passed back in `carry` when `CARRY`, else 0) `+ dL/dy_i·r`; `S'_i` recomputed from
/// `S_i` (the forward's cell, the same bits); then `g_r += dL/dy_i·S'_i`, `g_w += g ⊙ S_i`,
/// `g_k += v_i·g`, `g_b += (−sa_i)·g`, `g_v_i += g·k`, `dL/dsa_i = −(g·b)`,
/// `g_kk += dL/dsa_i·S_i`, and (when `CARRY`) `carry_i = g ⊙ w + dL/dsa_i·kk` (= dL/dS_i).
/// `carry` is `R·n` when `CARRY` (else unread); `g_rows` is scratch of `R·n`.
#[inline(always)]
fn backward_rows<const W: usize, V: Lanes<W> + Dots, const R: usize, const CARRY: bool>(
    head: &Head,
    x: &RowsIn,
    acc: &mut HeadGrads,
    carry: &mut [f32],
    (g_v, g_rows): (&mut [f32], &mut [f32]),
) {
    let n = head.w.len();
    rows_first_pass::<W, V, R, CARRY>(head, x, acc, carry, g_rows);
    // dL/dv_i = g·k;   dL/dsa_i = −(g·b)
    let mut g_sa = [0.0f32; R];
    for q in 0..R {
        let g = &g_rows[q * n..(q + 1) * n];
        let (gk, gb) = V::dot2(g, head.k, g, head.b);
        g_v[q] += gk;
        g_sa[q] = -gb;
    }
    rows_second_pass::<W, V, R, CARRY>(head, x, (&mut *acc.kk, g_sa), carry, g_rows);
}

/// The first pass of [`backward_rows`] over the columns: `g` into `g_rows`, `S'` recomputed,
/// and the terms of `g_r`, `g_w`, `g_k` and `g_b`.
#[inline(always)]
fn rows_first_pass<const W: usize, V: Lanes<W> + Dots, const R: usize, const CARRY: bool>(
    head: &Head,
    x: &RowsIn,
    acc: &mut HeadGrads,
    carry: &[f32],
    g_rows: &mut [f32],
) {
    let n = head.w.len();
    let (sa, vs, gy): ([f32; R], [f32; R], [f32; R]) = (
        std::array::from_fn(|q| x.sa[q]),
        std::array::from_fn(|q| x.v[q]),
        std::array::from_fn(|q| x.g_y[q]),
    );
    let neg_sa = sa.map(|s| -s);
    let (sav, vv, gyv, nsav) = (
        sa.map(V::splat),
        vs.map(V::splat),
        gy.map(V::splat),
        neg_sa.map(V::splat),
    );
    let (nb, full) = (n / W, n - n % W);
    let (hw, hb) = (blocks::<W>(head.w, n), blocks::<W>(head.b, n));
    let (hk, hr) = (blocks::<W>(head.k, n), blocks::<W>(head.r, n));
    let sp = row_blocks::<W, R>(x.prev, n);
    {
        let (ar, aw) = (blocks_mut::<W>(acc.r, n), blocks_mut::<W>(acc.w, n));
        let (ak, ab) = (blocks_mut::<W>(acc.k, n), blocks_mut::<W>(acc.b, n));
        let cr: [&[[f32; W]]; R] = if CARRY {
            row_blocks::<W, R>(carry, n)
        } else {
            [&[]; R]
        };
        let gr = row_blocks_mut::<W, R>(g_rows, n);
        for m in 0..nb {
            let (wv, bv, kv, rv) = (
                V::load(&hw[m]),
                V::load(&hb[m]),
                V::load(&hk[m]),
                V::load(&hr[m]),
            );
            let (mut a_r, mut a_w) = (V::load(&ar[m]), V::load(&aw[m]));
            let (mut a_k, mut a_b) = (V::load(&ak[m]), V::load(&ab[m]));
            for q in 0..R {
                let start = if CARRY {
                    V::load(&cr[q][m])
                } else {
                    V::splat(0.0)
                };
                let g = start.add(gyv[q].mul(rv));
                let s = V::load(&sp[q][m]);
                let s_new = s.mul(wv).sub(sav[q].mul(bv)).add(vv[q].mul(kv));
                a_r = a_r.add(gyv[q].mul(s_new));
                a_w = a_w.add(g.mul(s));
                a_k = a_k.add(vv[q].mul(g));
                a_b = a_b.add(nsav[q].mul(g));
                g.store(&mut gr[q][m]);
            }
            a_r.store(&mut ar[m]);
            a_w.store(&mut aw[m]);
            a_k.store(&mut ak[m]);
            a_b.store(&mut ab[m]);
        }
    }
    for j in full..n {
        for q in 0..R {
            let o = q * n + j;
            let start = if CARRY { carry[o] } else { 0.0 };
            let g = start + gy[q] * head.r[j];
            let sp = x.prev[o];
            let s_new = sp * head.w[j] - sa[q] * head.b[j] + vs[q] * head.k[j];
            acc.r[j] += gy[q] * s_new;
            acc.w[j] += g * sp;
            acc.k[j] += vs[q] * g;
            acc.b[j] += neg_sa[q] * g;
            g_rows[o] = g;
        }
    }
}

/// The second pass of [`backward_rows`], once `dL/dsa_i` is known: the terms of `g_kk`, and
/// (when `CARRY`) `carry_i = g ⊙ w + dL/dsa_i·kk`.
#[inline(always)]
fn rows_second_pass<const W: usize, V: Lanes<W> + Dots, const R: usize, const CARRY: bool>(
    head: &Head,
    x: &RowsIn,
    (g_kk, g_sa): (&mut [f32], [f32; R]),
    carry: &mut [f32],
    g_rows: &[f32],
) {
    let n = head.w.len();
    let (nb, full) = (n / W, n - n % W);
    let (hw, hkk) = (blocks::<W>(head.w, n), blocks::<W>(head.kk, n));
    let sp = row_blocks::<W, R>(x.prev, n);
    let g_sav = g_sa.map(V::splat);
    {
        let akk = blocks_mut::<W>(g_kk, n);
        let gr = row_blocks::<W, R>(g_rows, n);
        let cr: [&mut [[f32; W]]; R] = if CARRY {
            row_blocks_mut::<W, R>(carry, n)
        } else {
            std::array::from_fn(|_| &mut [][..])
        };
        for m in 0..nb {
            let (wv, kkv) = (V::load(&hw[m]), V::load(&hkk[m]));
            let mut a_kk = V::load(&akk[m]);
            for q in 0..R {
                a_kk = a_kk.add(g_sav[q].mul(V::load(&sp[q][m])));
                if CARRY {
                    let g = V::load(&gr[q][m]);
                    g.mul(wv).add(g_sav[q].mul(kkv)).store(&mut cr[q][m]);
                }
            }
            a_kk.store(&mut akk[m]);
        }
    }
    for j in full..n {
        for q in 0..R {
            let o = q * n + j;
            g_kk[j] += g_sa[q] * x.prev[o];
            if CARRY {
                carry[o] = g_rows[o] * head.w[j] + g_sa[q] * head.kk[j];
            }
        }
    }
}
