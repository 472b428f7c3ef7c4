//! The kernels' algorithms, written once over a lane type ([`Lanes`]) and instantiated by each
//! SIMD path ([`super::portable`] with `wide::f32x8`, [`super::avx2`] with `__m256`,
//! [`super::avx512`] with `__m512` for element-wise work and `__m256` for the eight-lane sums).
//!
//! This is what keeps the paths bit-identical by construction: a path supplies only the
//! lane-wise operations (each one IEEE 754 operation per lane, or a bit operation), and every
//! order of operations — the accumulators, the folds, the tails, the rows — is written here
//! once. Everything is `#[inline(always)]`, so each path's entry points (AVX2's inside
//! `#[target_feature]` functions) compile these loops with their own instructions.

use super::lanes::{Lanes, Lanes8, exp_lanes, sigmoid_lanes};
use super::math::{exp, sigmoid, silu_with_sigmoid};
use super::rows::Rows;
use super::{AdamCoefs, LANES, fold_lanes};

/// Defines a path's entry points — the functions [`super::Kernels`] dispatches to — as the
/// algorithms of this module over the path's `wide` lane type of `$N` lanes, for the
/// element-wise work and (through [`Dots`]) the dot products; each entry point with the
/// attributes given (`#[target_feature]` for a path that needs CPU features). The scan's entry
/// points, over eight `narrow` lanes, are `scan_entry_points!` (src/kernels/scan.rs): each path
/// invokes both, and this module, below the scan, does not read it.
macro_rules! entry_points {
    (wide: $W:ty = $N:literal, $(#[$attr:meta])*) => {
        $(#[$attr])*
        pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
            <$W as super::simd::Dots>::dot(a, b)
        }
        $(#[$attr])*
        pub(super) fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
            super::simd::gemv::<$W>(w, x, y, rows, cols)
        }
        $(#[$attr])*
        pub(super) fn gemv_steps(
            w: &[f32],
            x: &[&[f32]],
            y: (&mut [f32], usize),
            dims: (usize, usize),
        ) {
            super::simd::gemv_steps::<$W>(w, x, y, dims)
        }
        $(#[$attr])*
        pub(super) fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
            super::simd::gemv_t_acc::<$N, $W>(w, g, out, rows, cols)
        }
        $(#[$attr])*
        pub(super) fn linear_backward_acc(
            w: &[f32],
            g: &[f32],
            x: &[f32],
            g_x: &mut [f32],
            g_w: &mut [f32],
            rows: usize,
            cols: usize,
        ) {
            super::simd::linear_backward_acc::<$N, $W>(w, g, x, g_x, g_w, rows, cols)
        }
        $(#[$attr])*
        pub(super) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
            super::simd::axpy::<$N, $W>(y, a, x)
        }
        $(#[$attr])*
        pub(super) fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
            super::simd::add_outer::<$N, $W>(dst, rows, cols, left, right)
        }
        $(#[$attr])*
        pub(super) fn add_assign(y: &mut [f32], x: &[f32]) {
            super::simd::add_assign(y, x)
        }
        $(#[$attr])*
        pub(super) fn exp_into(x: &[f32], out: &mut [f32]) {
            super::simd::exp_into::<$N, $W>(x, out)
        }
        $(#[$attr])*
        pub(super) fn exp_scaled_into(a: f32, x: &[f32], out: &mut [f32]) {
            super::simd::exp_scaled_into::<$N, $W>(a, x, out)
        }
        $(#[$attr])*
        pub(super) fn sigmoid_into(x: &[f32], out: &mut [f32]) {
            super::simd::sigmoid_into::<$N, $W>(x, out)
        }
        $(#[$attr])*
        pub(super) fn silu_into(x: &[f32], out: &mut [f32], sig: &mut [f32]) {
            super::simd::silu_into::<$N, $W>(x, out, sig)
        }
        $(#[$attr])*
        pub(super) fn linear_backward_steps(
            w: &[f32],
            x: &[&[f32]],
            g: super::rows::Rows,
            (g_x, gx_stride): (&mut [f32], usize),
            g_w: Option<&mut [f32]>,
            (rows, cols): (usize, usize),
        ) {
            super::simd::linear_backward_steps::<$N, $W>(w, x, g, (g_x, gx_stride), g_w, (rows, cols))
        }
        $(#[$attr])*
        pub(super) fn weight_grad_steps(
            x: &[&[f32]],
            g: super::rows::Rows,
            g_w: &mut [f32],
            cols: usize,
        ) {
            super::simd::weight_grad_steps::<$N, $W>(x, g, g_w, cols)
        }
        $(#[$attr])*
        pub(super) fn input_grad_steps(
            w: &[f32],
            g: super::rows::Rows,
            g_x: (&mut [f32], usize),
            n: usize,
            dims: (usize, usize),
        ) {
            super::simd::input_grad_steps::<$N, $W>(w, g, g_x, n, dims)
        }
        $(#[$attr])*
        pub(super) fn sgd_update(p: &mut [f32], g: &mut [f32], lr: f32, tiny_grad: f32) {
            super::simd::sgd_update::<$N, $W>(p, g, lr, tiny_grad)
        }
        $(#[$attr])*
        pub(super) fn adam_update(
            c: &super::AdamCoefs,
            p: &mut [f32],
            g: &mut [f32],
            m: &mut [f32],
            v: &mut [f32],
        ) {
            super::simd::adam_update::<$N, $W>(c, p, g, m, v)
        }
    };
}

/// A path's dot products, in [`dot`]'s order: the eight-lane algorithms themselves
/// ([`dots_in_eight_lanes!`]), or [`dot_paired`] on a 16-lane path.
pub(super) trait Dots {
    fn dot(a: &[f32], b: &[f32]) -> f32;
    fn dot2(a0: &[f32], b0: &[f32], a1: &[f32], b1: &[f32]) -> (f32, f32);
}

/// Implements [`Dots`] for an eight-lane type with [`dot`] and [`dot2`].
macro_rules! dots_in_eight_lanes {
    ($V:ty) => {
        impl super::simd::Dots for $V {
            #[inline(always)]
            fn dot(a: &[f32], b: &[f32]) -> f32 {
                super::simd::dot::<$V>(a, b)
            }
            #[inline(always)]
            fn dot2(a0: &[f32], b0: &[f32], a1: &[f32], b1: &[f32]) -> (f32, f32) {
                super::simd::dot2::<$V>(a0, b0, a1, b1)
            }
        }
    };
}

/// Sixteen lanes that split into two eight-lane halves: lanes 0–7 and 8–15.
pub(super) trait Halves: Lanes<16> {
    type Half: Lanes8;
    fn halves(self) -> (Self::Half, Self::Half);
}

/// [`dot`] with its four eight-lane accumulators held as two 16-lane ones, `[acc0 | acc1]` and
/// `[acc2 | acc3]` ([`dot_blocks`] at 16 lanes): a block of 32 products is two 16-lane
/// multiply-adds, each lane of each accumulator sees exactly [`dot`]'s operations, and the
/// halves are then combined in [`dot`]'s order `(acc0 + acc1) + (acc2 + acc3)` and finished in
/// eight lanes. The same bits, half the instructions.
#[inline(always)]
pub(super) fn dot_paired<V: Halves>(a: &[f32], b: &[f32]) -> f32 {
    dot_by::<16, V, 2, PairedTotal>(a, b)
}

/// Two [`dot_paired`]s in lockstep, as [`dot2`] is two [`dot`]s.
#[inline(always)]
pub(super) fn dot2_paired<V: Halves>(a0: &[f32], b0: &[f32], a1: &[f32], b1: &[f32]) -> (f32, f32) {
    dot2_by::<16, V, 2, PairedTotal>((a0, b0), (a1, b1))
}

/// How a dot product's `Q` accumulators of `V` become [`dot`]'s eight lanes
/// `(acc0 + acc1) + (acc2 + acc3)`. A trait rather than a function passed by value: such a
/// function is called through a shim compiled without the entry point's target features, into
/// which the intrinsics it calls cannot be inlined (the AVX-512 path then called them one by
/// one, at a third of AVX2's speed).
trait Fold<V, const Q: usize> {
    type Out: Lanes8;
    fn fold(acc: [V; Q]) -> Self::Out;
}

/// [`dot`]'s four eight-lane accumulators.
struct FourTotal;

impl<V: Lanes8> Fold<V, 4> for FourTotal {
    type Out = V;
    #[inline(always)]
    fn fold(acc: [V; 4]) -> V {
        (acc[0].add(acc[1])).add(acc[2].add(acc[3]))
    }
}

/// Accumulators held as `[acc0 | acc1]` and `[acc2 | acc3]` ([`dot_paired`]).
struct PairedTotal;

impl<V: Halves> Fold<V, 2> for PairedTotal {
    type Out = V::Half;
    #[inline(always)]
    fn fold(acc: [V; 2]) -> V::Half {
        let ((q0, q1), (q2, q3)) = (acc[0].halves(), acc[1].halves());
        q0.add(q1).add(q2.add(q3))
    }
}

/// The end of [`dot`] after its blocks of 32: the remaining blocks of eight added into `total`,
/// the lanes folded, then the last products one by one.
#[inline(always)]
fn finish_dot<V: Lanes8>(mut total: V, a: &[f32], b: &[f32]) -> f32 {
    let (a8, a_tail) = a.as_chunks::<LANES>();
    let (b8, b_tail) = b.as_chunks::<LANES>();
    for (x, y) in a8.iter().zip(b8) {
        total = total.add(V::load(x).mul(V::load(y)));
    }
    let mut folded = [0.0; LANES];
    total.store(&mut folded);
    let mut sum = fold_lanes(folded);
    for (x, y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

/// `c += v`, lane by lane.
#[inline(always)]
fn add_to<const W: usize, V: Lanes<W>>(c: &mut [f32; W], v: V) {
    V::load(c).add(v).store(c);
}

/// See [`super::dot`].
#[inline(always)]
pub(super) fn dot<V: Lanes8>(a: &[f32], b: &[f32]) -> f32 {
    dot_by::<LANES, V, 4, FourTotal>(a, b)
}

/// [`dot`] with its blocks of 32 in `Q` accumulators of `W` lanes ([`dot_blocks`]), which
/// `F` combines into [`dot`]'s eight lanes: [`dot`] itself at eight lanes, [`dot_paired`] at
/// sixteen.
#[inline(always)]
fn dot_by<const W: usize, V: Lanes<W>, const Q: usize, F: Fold<V, Q>>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let [acc] = dot_blocks::<W, V, Q, 1>([(blocks_of_32(a, n), blocks_of_32(b, n))]);
    let done = n - n % 32;
    finish_dot(F::fold(acc), &a[done..n], &b[done..n])
}

/// Two [`dot_by`]s in lockstep, each with its own accumulators in exactly [`dot`]'s order:
/// twice the independent additions in flight, the same bits.
#[inline(always)]
fn dot2_by<const W: usize, V: Lanes<W>, const Q: usize, F: Fold<V, Q>>(
    (a0, b0): (&[f32], &[f32]),
    (a1, b1): (&[f32], &[f32]),
) -> (f32, f32) {
    let n = a0.len().min(b0.len());
    if a1.len().min(b1.len()) != n {
        return (dot_by::<W, V, Q, F>(a0, b0), dot_by::<W, V, Q, F>(a1, b1));
    }
    let [acc0, acc1] = dot_blocks::<W, V, Q, 2>([
        (blocks_of_32(a0, n), blocks_of_32(b0, n)),
        (blocks_of_32(a1, n), blocks_of_32(b1, n)),
    ]);
    let done = n - n % 32;
    (
        finish_dot(F::fold(acc0), &a0[done..n], &b0[done..n]),
        finish_dot(F::fold(acc1), &a1[done..n], &b1[done..n]),
    )
}

/// Blocks of 32 elements.
type Blocks<'a> = &'a [[f32; 32]];

/// The whole blocks of 32 of `v[..n]`.
#[inline(always)]
fn blocks_of_32(v: &[f32], n: usize) -> Blocks<'_> {
    v[..n].as_chunks::<32>().0
}

/// [`dot`]'s blocks of 32 products for `K` dot products in lockstep (as many blocks each),
/// each in `Q = 32 / W` accumulators of `W` lanes: accumulator `q` adds the products of
/// elements `W·q .. W·(q + 1)` of every block. With `W = 8` these are [`dot`]'s four
/// accumulators; with `W = 16` the same four, two to a register. More dot products in lockstep
/// put more independent additions in flight; each accumulator's additions stay in order.
#[inline(always)]
fn dot_blocks<const W: usize, V: Lanes<W>, const Q: usize, const K: usize>(
    pairs: [(Blocks, Blocks); K],
) -> [[V; Q]; K] {
    let mut acc = [[V::splat(0.0); Q]; K];
    for k in 0..pairs[0].0.len() {
        for (acc, (a, b)) in acc.iter_mut().zip(&pairs) {
            let (x, _) = a[k].as_chunks::<W>();
            let (y, _) = b[k].as_chunks::<W>();
            for q in 0..Q {
                acc[q] = acc[q].add(V::load(&x[q]).mul(V::load(&y[q])));
            }
        }
    }
    acc
}

/// Two [`dot`]s in lockstep, `(dot(a0, b0), dot(a1, b1))` ([`dot2_by`]).
#[inline(always)]
pub(super) fn dot2<V: Lanes8>(a0: &[f32], b0: &[f32], a1: &[f32], b1: &[f32]) -> (f32, f32) {
    dot2_by::<LANES, V, 4, FourTotal>((a0, b0), (a1, b1))
}

/// See [`super::gemv`]: one [`dot`] per row, two rows in lockstep.
#[inline(always)]
pub(super) fn gemv<D: Dots>(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    assert!(w.len() >= rows * cols && x.len() >= cols && y.len() >= rows);
    if cols == 0 {
        y[..rows].fill(0.0);
        return;
    }
    let x = &x[..cols];
    let (y2, y_last) = y[..rows].as_chunks_mut::<2>();
    for (out, rows2) in y2.iter_mut().zip(w.chunks_exact(2 * cols)) {
        let (r0, r1) = rows2.split_at(cols);
        (out[0], out[1]) = D::dot2(r0, x, r1, x);
    }
    if let Some(out) = y_last.first_mut() {
        *out = D::dot(&w[(rows - 1) * cols..rows * cols], x);
    }
}

/// See [`super::steps::gemv_steps`] (for `cols > 0`): row by row of `W`, one [`dot`] per step,
/// two steps in lockstep.
#[inline(always)]
pub(super) fn gemv_steps<D: Dots>(
    w: &[f32],
    x: &[&[f32]],
    (y, y_stride): (&mut [f32], usize),
    (rows, cols): (usize, usize),
) {
    let n = x.len();
    for (r, w_row) in w.chunks_exact(cols).take(rows).enumerate() {
        let (x2, x_last) = x.as_chunks::<2>();
        for (p, xs) in x2.iter().enumerate() {
            let (d0, d1) = D::dot2(w_row, &xs[0][..cols], w_row, &xs[1][..cols]);
            y[2 * p * y_stride + r] = d0;
            y[(2 * p + 1) * y_stride + r] = d1;
        }
        if let Some(xt) = x_last.first() {
            y[(n - 1) * y_stride + r] = D::dot(w_row, &xt[..cols]);
        }
    }
}

/// See [`super::gemv_t_acc`].
#[inline(always)]
pub(super) fn gemv_t_acc<const W: usize, V: Lanes<W>>(
    w: &[f32],
    g: &[f32],
    out: &mut [f32],
    rows: usize,
    cols: usize,
) {
    assert!(w.len() >= rows * cols && g.len() >= rows && out.len() >= cols);
    if cols == 0 {
        return;
    }
    let out = &mut out[..cols];
    let mut batch: [(f32, &[f32]); 4] = [(0.0, &[]); 4];
    let mut pending = 0;
    for (&gr, row) in g[..rows].iter().zip(w.chunks_exact(cols)) {
        if gr == 0.0 {
            continue;
        }
        batch[pending] = (gr, row);
        pending += 1;
        if pending == batch.len() {
            axpy4::<W, V>(out, &batch);
            pending = 0;
        }
    }
    for &(gr, row) in &batch[..pending] {
        axpy::<W, V>(out, gr, row);
    }
}

/// See [`super::linear_backward_acc`] (with a weight gradient).
#[inline(always)]
pub(super) fn linear_backward_acc<const W: usize, V: Lanes<W>>(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: &mut [f32],
    rows: usize,
    cols: usize,
) {
    assert!(w.len() >= rows * cols && g_w.len() >= rows * cols && g.len() >= rows);
    assert!(x.len() >= cols && g_x.len() >= cols);
    if cols == 0 {
        return;
    }
    let (x, g_x) = (&x[..cols], &mut g_x[..cols]);
    let mut batch: [(f32, &[f32], &mut [f32]); 4] =
        std::array::from_fn(|_| (0.0, &[][..], Default::default()));
    let mut pending = 0;
    let rows_of = g[..rows]
        .iter()
        .zip(w.chunks_exact(cols))
        .zip(g_w.chunks_exact_mut(cols));
    for ((&gr, row), g_row) in rows_of {
        if gr == 0.0 {
            continue;
        }
        batch[pending] = (gr, row, g_row);
        pending += 1;
        if pending == batch.len() {
            linear_backward4::<W, V>(x, g_x, &mut batch);
            pending = 0;
        }
    }
    for (gr, row, g_row) in &mut batch[..pending] {
        axpy::<W, V>(g_row, *gr, x);
        axpy::<W, V>(g_x, *gr, row);
    }
}

/// Blocks of eight columns of a weight gradient's row that [`linear_backward_steps`] keeps in
/// registers over the steps: eight independent chains of additions keep the adder busy.
const GW_BLOCKS: usize = 8;

/// See [`super::steps::linear_backward_steps`] (after its zeroing of `g_x`): the weight
/// gradient ([`weight_grad_steps`]) and then the input gradients ([`input_grad_steps`]), which
/// write different buffers.
#[inline(always)]
pub(super) fn linear_backward_steps<const W: usize, V: Lanes<W>>(
    w: &[f32],
    x: &[&[f32]],
    g: Rows,
    (g_x, gx_stride): (&mut [f32], usize),
    g_w: Option<&mut [f32]>,
    (rows, cols): (usize, usize),
) {
    if cols == 0 {
        return;
    }
    if let Some(gw) = g_w {
        weight_grad_steps::<W, V>(x, g, &mut gw[..rows * cols], cols);
    }
    input_grad_steps::<W, V>(w, g, (g_x, gx_stride), x.len(), (rows, cols));
}

/// The weight gradient of a segment's linear backward, for the rows `g_w` holds (`g_w.len() /
/// cols` of them; `g` starts at the first's coefficient): row by row, the gradient's row
/// receives its steps' products in descending step order, 64 columns at a time held in
/// registers over the steps. Steps whose `g_t[r]` is zero are skipped. The steps' inputs are
/// first copied side by side, so a step's row is found by arithmetic rather than through a
/// pointer and a bounds check per step. Rows are independent, so any split of them computes
/// the same bits.
#[inline(always)]
pub(super) fn weight_grad_steps<const W: usize, V: Lanes<W>>(
    x: &[&[f32]],
    g: Rows,
    g_w: &mut [f32],
    cols: usize,
) {
    let n = x.len();
    if cols == 0 {
        return;
    }
    let mut xs = Vec::with_capacity(n * cols);
    for xt in x {
        xs.extend_from_slice(&xt[..cols]);
    }
    let mut terms = vec![(0.0f32, 0usize); n];
    for (r, gw_row) in g_w.chunks_exact_mut(cols).enumerate() {
        let m = row_terms(g, r, cols, &mut terms);
        let terms = &terms[..m];
        let (blocks, gw_tail) = gw_row.as_chunks_mut::<W>();
        // As many blocks at once as there are (eight, then four, two, one): the element-wise
        // work is the same whichever, but more independent chains keep the adder busier.
        let mut done = weight_grad_blocks::<W, V, GW_BLOCKS>(&xs, terms, blocks, 0);
        done += weight_grad_blocks::<W, V, 4>(&xs, terms, &mut blocks[done..], done * W);
        done += weight_grad_blocks::<W, V, 2>(&xs, terms, &mut blocks[done..], done * W);
        done += weight_grad_blocks::<W, V, 1>(&xs, terms, &mut blocks[done..], done * W);
        let full = done * W;
        for (j, gwj) in gw_tail.iter_mut().enumerate() {
            let mut v = *gwj;
            for &(a, at) in terms {
                v += a * xs[at + full + j];
            }
            *gwj = v;
        }
    }
}

/// Row `r`'s non-zero coefficients with the offsets of their steps' inputs (`t · cols`), last
/// step first, into `terms`; returns how many. A row without a zero (most rows but where a
/// ReLU cut) is written at fixed places; otherwise the pairs are gathered without a branch,
/// so the loops over the steps have none to mispredict where a ReLU zeroes half of them.
#[inline(always)]
fn row_terms(g: Rows, r: usize, cols: usize, terms: &mut [(f32, usize)]) -> usize {
    let n = terms.len();
    let coef = |t: usize| g.data[t * g.stride + r];
    let live = (0..n).map(|t| (coef(t) != 0.0) as usize).sum::<usize>();
    if live == n {
        for (term, t) in terms.iter_mut().zip((0..n).rev()) {
            *term = (coef(t), t * cols);
        }
        return n;
    }
    let mut m = 0;
    for t in (0..n).rev() {
        let a = coef(t);
        terms[m] = (a, t * cols);
        m += (a != 0.0) as usize;
    }
    m
}

/// [`weight_grad_steps`] for one row's blocks of `W` columns, starting at column `first`, in
/// groups of `B` blocks held in registers over the steps (the non-zero `terms`: coefficient
/// and offset of the step's row in `xs`, in their order); returns how many blocks it did (the
/// whole groups').
#[inline(always)]
fn weight_grad_blocks<const W: usize, V: Lanes<W>, const B: usize>(
    xs: &[f32],
    terms: &[(f32, usize)],
    blocks: &mut [[f32; W]],
    first: usize,
) -> usize {
    let (groups, _) = blocks.as_chunks_mut::<B>();
    for (b, group) in groups.iter_mut().enumerate() {
        let at = first + b * B * W;
        let mut acc: [V; B] = std::array::from_fn(|q| V::load(&group[q]));
        for &(a, row) in terms {
            let av = V::splat(a);
            let (xw, _) = xs[row + at..row + at + B * W].as_chunks::<W>();
            for q in 0..B {
                acc[q] = acc[q].add(av.mul(V::load(&xw[q])));
            }
        }
        for q in 0..B {
            acc[q].store(&mut group[q]);
        }
    }
    groups.len() * B
}

/// Most rows of `W` that [`input_grad_steps`] adds into every step before moving on: a band of
/// about 16 KiB, which stays in the first-level cache for all steps, and at most this many.
const GX_BAND: usize = 64;

/// The input gradients of a segment's linear backward for `n` steps (`g` and `g_x` start at the
/// first): `g_x[t] += g_t[r]·W[r]` for the rows in ascending order, as one [`axpy`] per row
/// (four rows in one pass, [`axpy4`]); rows whose `g_t[r]` is zero are skipped. The rows go in
/// bands (of 16 KiB, at most [`GX_BAND`] rows), and in each band a step's non-zero rows are gathered first (without a
/// branch) and added four at a time, so that a ReLU's zeros neither break the passes of four
/// nor cost mispredicted branches. Steps are independent, so any split of them computes the
/// same bits.
#[inline(always)]
pub(super) fn input_grad_steps<const W: usize, V: Lanes<W>>(
    w: &[f32],
    g: Rows,
    (g_x, gx_stride): (&mut [f32], usize),
    n: usize,
    (rows, cols): (usize, usize),
) {
    if cols == 0 {
        return;
    }
    let w_rows: Vec<&[f32]> = w.chunks_exact(cols).take(rows).collect();
    let band_rows = (4096 / cols).clamp(4, GX_BAND);
    let mut live = [0usize; GX_BAND];
    for (q, band) in w_rows.chunks(band_rows).enumerate() {
        for t in (0..n).rev() {
            let g_xt = &mut g_x[t * gx_stride..t * gx_stride + cols];
            let g_t = &g.data[t * g.stride + band_rows * q..][..band.len()];
            let m = live_rows(g_t, &mut live);
            let (fours, rest) = live[..m].as_chunks::<4>();
            for &[i0, i1, i2, i3] in fours {
                let terms = [
                    (g_t[i0], band[i0]),
                    (g_t[i1], band[i1]),
                    (g_t[i2], band[i2]),
                    (g_t[i3], band[i3]),
                ];
                axpy4::<W, V>(g_xt, &terms);
            }
            for &i in rest {
                axpy::<W, V>(g_xt, g_t[i], band[i]);
            }
        }
    }
}

/// The indices of `g_t`'s non-zero coefficients, in ascending order, into `live`; returns how
/// many. Without a zero they are written at fixed places; otherwise gathered without a branch.
#[inline(always)]
fn live_rows(g_t: &[f32], live: &mut [usize]) -> usize {
    let n = g_t.len();
    if g_t.iter().map(|&a| (a != 0.0) as usize).sum::<usize>() == n {
        for (i, l) in live[..n].iter_mut().enumerate() {
            *l = i;
        }
        return n;
    }
    let mut m = 0;
    for (i, &a) in g_t.iter().enumerate() {
        live[m] = i;
        m += (a != 0.0) as usize;
    }
    m
}

/// Four rows of [`linear_backward_acc`]: `g_w[k] += g[k]·x` for each row `k`, and `g_x += g[k]·W[k]`
/// for `k` = 0, 1, 2, 3 in this order, element by element.
#[inline(always)]
fn linear_backward4<const W: usize, V: Lanes<W>>(
    x: &[f32],
    g_x: &mut [f32],
    rows: &mut [(f32, &[f32], &mut [f32]); 4],
) {
    let n = rows.iter().fold(x.len().min(g_x.len()), |n, r| {
        n.min(r.1.len()).min(r.2.len())
    });
    let a = [rows[0].0, rows[1].0, rows[2].0, rows[3].0];
    let av = a.map(V::splat);
    let [(_, w0, gw0), (_, w1, gw1), (_, w2, gw2), (_, w3, gw3)] = rows;
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let (gx8, gx_tail) = g_x[..n].as_chunks_mut::<W>();
    let (w0, w0_tail) = w0[..n].as_chunks::<W>();
    let (w1, w1_tail) = w1[..n].as_chunks::<W>();
    let (w2, w2_tail) = w2[..n].as_chunks::<W>();
    let (w3, w3_tail) = w3[..n].as_chunks::<W>();
    let (gw0, gw0_tail) = gw0[..n].as_chunks_mut::<W>();
    let (gw1, gw1_tail) = gw1[..n].as_chunks_mut::<W>();
    let (gw2, gw2_tail) = gw2[..n].as_chunks_mut::<W>();
    let (gw3, gw3_tail) = gw3[..n].as_chunks_mut::<W>();
    for (i, gxc) in gx8.iter_mut().enumerate() {
        let xv = V::load(&x8[i]);
        add_to(&mut gw0[i], av[0].mul(xv));
        add_to(&mut gw1[i], av[1].mul(xv));
        add_to(&mut gw2[i], av[2].mul(xv));
        add_to(&mut gw3[i], av[3].mul(xv));
        let mut v = V::load(gxc);
        v = v.add(av[0].mul(V::load(&w0[i])));
        v = v.add(av[1].mul(V::load(&w1[i])));
        v = v.add(av[2].mul(V::load(&w2[i])));
        v = v.add(av[3].mul(V::load(&w3[i])));
        v.store(gxc);
    }
    for (j, gxj) in gx_tail.iter_mut().enumerate() {
        let xj = x_tail[j];
        gw0_tail[j] += a[0] * xj;
        gw1_tail[j] += a[1] * xj;
        gw2_tail[j] += a[2] * xj;
        gw3_tail[j] += a[3] * xj;
        let mut v = *gxj;
        v += a[0] * w0_tail[j];
        v += a[1] * w1_tail[j];
        v += a[2] * w2_tail[j];
        v += a[3] * w3_tail[j];
        *gxj = v;
    }
}

/// See [`super::axpy`].
#[inline(always)]
pub(super) fn axpy<const W: usize, V: Lanes<W>>(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let (y8, y_tail) = y[..n].as_chunks_mut::<W>();
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let av = V::splat(a);
    for (yc, xc) in y8.iter_mut().zip(x8) {
        add_to(yc, av.mul(V::load(xc)));
    }
    for (yi, xi) in y_tail.iter_mut().zip(x_tail) {
        *yi += a * xi;
    }
}

/// `y += a0·x0`, then `y += a1·x1`, `y += a2·x2`, `y += a3·x3`, in one pass over `y`: each
/// element gets its four products added in this order, so the bits equal four [`axpy`] calls.
#[inline(always)]
fn axpy4<const W: usize, V: Lanes<W>>(y: &mut [f32], terms: &[(f32, &[f32]); 4]) {
    let n = terms.iter().fold(y.len(), |n, (_, x)| n.min(x.len()));
    let a = terms.map(|(a, _)| a);
    let av = a.map(V::splat);
    let x = terms.map(|(_, x)| x[..n].as_chunks::<W>());
    let (y8, y_tail) = y[..n].as_chunks_mut::<W>();
    let blocks = y8
        .iter_mut()
        .zip(x[0].0)
        .zip(x[1].0)
        .zip(x[2].0)
        .zip(x[3].0);
    for ((((yc, x0), x1), x2), x3) in blocks {
        let mut v = V::load(yc);
        v = v.add(av[0].mul(V::load(x0)));
        v = v.add(av[1].mul(V::load(x1)));
        v = v.add(av[2].mul(V::load(x2)));
        v = v.add(av[3].mul(V::load(x3)));
        v.store(yc);
    }
    let tails = y_tail
        .iter_mut()
        .zip(x[0].1)
        .zip(x[1].1)
        .zip(x[2].1)
        .zip(x[3].1);
    for ((((yi, x0), x1), x2), x3) in tails {
        let mut v = *yi;
        v += a[0] * x0;
        v += a[1] * x1;
        v += a[2] * x2;
        v += a[3] * x3;
        *yi = v;
    }
}

/// See [`super::add_outer`].
#[inline(always)]
pub(super) fn add_outer<const W: usize, V: Lanes<W>>(
    dst: &mut [f32],
    rows: usize,
    cols: usize,
    left: &[f32],
    right: &[f32],
) {
    assert!(dst.len() >= rows * cols && left.len() >= rows && right.len() >= cols);
    if cols == 0 {
        return;
    }
    let right = &right[..cols];
    for (&g, row) in left[..rows].iter().zip(dst.chunks_exact_mut(cols)) {
        if g == 0.0 {
            continue;
        }
        axpy::<W, V>(row, g, right);
    }
}

/// See [`super::add_assign`]: element-wise, so left to the compiler's vectoriser (which then
/// uses the instructions of the path it is compiled in).
#[inline(always)]
pub(super) fn add_assign(y: &mut [f32], x: &[f32]) {
    for (a, b) in y.iter_mut().zip(x) {
        *a += *b;
    }
}

/// See [`super::exp_into`].
#[inline(always)]
pub(super) fn exp_into<const W: usize, V: Lanes<W>>(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<W>();
    for (o, xc) in o8.iter_mut().zip(x8) {
        exp_lanes::<W, V>(V::load(xc)).store(o);
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = exp(xi);
    }
}

/// See [`super::exp_scaled_into`].
#[inline(always)]
pub(super) fn exp_scaled_into<const W: usize, V: Lanes<W>>(a: f32, x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<W>();
    let av = V::splat(a);
    for (o, xc) in o8.iter_mut().zip(x8) {
        exp_lanes::<W, V>(av.mul(V::load(xc))).store(o);
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = exp(a * xi);
    }
}

/// See [`super::sigmoid_into`].
#[inline(always)]
pub(super) fn sigmoid_into<const W: usize, V: Lanes<W>>(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<W>();
    for (o, xc) in o8.iter_mut().zip(x8) {
        sigmoid_lanes::<W, V>(V::load(xc)).store(o);
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = sigmoid(xi);
    }
}

/// See [`super::silu_into`].
#[inline(always)]
pub(super) fn silu_into<const W: usize, V: Lanes<W>>(x: &[f32], out: &mut [f32], sig: &mut [f32]) {
    let n = x.len().min(out.len()).min(sig.len());
    let (x8, x_tail) = x[..n].as_chunks::<W>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<W>();
    let (s8, s_tail) = sig[..n].as_chunks_mut::<W>();
    for ((o, sg), xc) in o8.iter_mut().zip(s8).zip(x8) {
        let xv = V::load(xc);
        let sv = sigmoid_lanes::<W, V>(xv);
        sv.store(sg);
        xv.mul(sv).store(o);
    }
    for ((o, sg), &xi) in o_tail.iter_mut().zip(s_tail).zip(x_tail) {
        (*o, *sg) = silu_with_sigmoid(xi);
    }
}

/// The scalar form of [`Lanes::flush_below`].
#[inline(always)]
fn flush(x: f32, tiny: f32) -> f32 {
    if x.abs() < tiny { 0.0 } else { x }
}

/// See [`super::sgd_update`].
#[inline(always)]
pub(super) fn sgd_update<const W: usize, V: Lanes<W>>(
    p: &mut [f32],
    g: &mut [f32],
    lr: f32,
    tiny_grad: f32,
) {
    let n = p.len().min(g.len());
    let (p8, p_tail) = p[..n].as_chunks_mut::<W>();
    let (g8, g_tail) = g[..n].as_chunks_mut::<W>();
    let (lr8, tiny_g) = (V::splat(lr), V::splat(tiny_grad));
    for (pc, gc) in p8.iter_mut().zip(g8) {
        add_to(pc, lr8.mul(V::load(gc).flush_below(tiny_g)));
        *gc = [0.0; W];
    }
    for (pi, gi) in p_tail.iter_mut().zip(g_tail) {
        *pi += lr * flush(*gi, tiny_grad);
        *gi = 0.0;
    }
}

/// See [`super::adam_update`].
#[inline(always)]
pub(super) fn adam_update<const W: usize, V: Lanes<W>>(
    c: &AdamCoefs,
    p: &mut [f32],
    g: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
) {
    // An empty `m` is no first moment (β1 = 0): read as zero, which makes it the flushed
    // gradient, and not stored.
    let kept = !m.is_empty();
    debug_assert!(kept || c.beta1 == 0.0);
    let n = p.len().min(g.len()).min(v.len());
    let n = if kept { n.min(m.len()) } else { n };
    let (p8, p_tail) = p[..n].as_chunks_mut::<W>();
    let (g8, g_tail) = g[..n].as_chunks_mut::<W>();
    let (m8, m_tail) = m[..if kept { n } else { 0 }].as_chunks_mut::<W>();
    let (v8, v_tail) = v[..n].as_chunks_mut::<W>();
    let (c1s, c2s) = (1.0 - c.beta1, 1.0 - c.beta2);
    let (b1, b2) = (V::splat(c.beta1), V::splat(c.beta2));
    let (c1, c2) = (V::splat(c1s), V::splat(c2s));
    let (bc1, bc2) = (V::splat(c.inv_bc1), V::splat(c.inv_bc2));
    let (lr, eps) = (V::splat(c.lr), V::splat(c.eps));
    let (tiny_g, tiny_m) = (V::splat(c.tiny_grad), V::splat(c.tiny_moment));
    for (i, ((pc, gc), vc)) in p8.iter_mut().zip(g8).zip(v8).enumerate() {
        let gi = V::load(gc).flush_below(tiny_g);
        let m_old = m8.get(i).map_or(V::splat(0.0), |mc| V::load(mc));
        let mm = (b1.mul(m_old).add(c1.mul(gi))).flush_below(tiny_m);
        let vv = (b2.mul(V::load(vc)).add(c2.mul(gi.mul(gi)))).flush_below(tiny_m);
        if let Some(mc) = m8.get_mut(i) {
            mm.store(mc);
        }
        vv.store(vc);
        let step = (mm.mul(bc1)).div((vv.mul(bc2)).sqrt().add(eps));
        add_to(pc, lr.mul(step));
        *gc = [0.0; W];
    }
    let tails = p_tail.iter_mut().zip(g_tail).zip(v_tail).enumerate();
    for (i, ((pi, gi), vi)) in tails {
        let g = flush(*gi, c.tiny_grad);
        let m_old = m_tail.get(i).copied().unwrap_or(0.0);
        let mm = flush(c.beta1 * m_old + c1s * g, c.tiny_moment);
        let vv = flush(c.beta2 * *vi + c2s * (g * g), c.tiny_moment);
        if let Some(mi) = m_tail.get_mut(i) {
            *mi = mm;
        }
        *vi = vv;
        *pi += c.lr * ((mm * c.inv_bc1) / ((vv * c.inv_bc2).sqrt() + c.eps));
        *gi = 0.0;
    }
}
