//! Every hot numeric routine of the models, each in a SIMD form (`wide::f32x8`) and a scalar
//! twin that computes the very same bits.
//!
//! The determinism contract (docs/determinism.md) rules this module: only `+ - * /` and `sqrt`,
//! never a fused multiply-add, never `wide`'s `reduce_add` (its lane order differs between AVX
//! and non-AVX builds), and every sum in an order written here. A dot product keeps eight lane
//! accumulators, the lanes are folded pairwise `((0+1)+(2+3))+((4+5)+(6+7))`, and the tail past
//! the last full lane group is added one element at a time. The scalar twins in [`scalar`]
//! follow the same order, and tests check that both agree bit for bit.

pub mod math;
pub mod scalar;
pub mod steps;

use wide::f32x8;

const LANES: usize = 8;

// The loops below walk slices as arrays of eight (`as_chunks`), so every load and store has a
// length known at compile time: no bounds check or length test inside a hot loop.

#[inline(always)]
fn lanes(c: &[f32; LANES]) -> f32x8 {
    f32x8::from(*c)
}

#[inline(always)]
fn put(c: &mut [f32; LANES], v: f32x8) {
    *c = v.to_array();
}

/// `c += v`, lane by lane.
#[inline(always)]
fn add_to(c: &mut [f32; LANES], v: f32x8) {
    put(c, lanes(c) + v);
}

/// Folds eight lane accumulators in the fixed order `((0+1)+(2+3))+((4+5)+(6+7))`.
#[inline(always)]
pub(crate) fn fold_lanes(acc: [f32; LANES]) -> f32 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// `sum_i a[i] * b[i]` in the module's fixed order: four eight-lane accumulators over blocks of
/// 32, combined lane-wise as `(acc0 + acc1) + (acc2 + acc3)`, then the remaining blocks of 8 into
/// that, the lanes folded, and the last `len % 8` products added in index order. (Four
/// accumulators keep the adder pipeline busy; one would wait on each add.)
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a8, a_tail) = a[..n].as_chunks::<LANES>();
    let (b8, b_tail) = b[..n].as_chunks::<LANES>();
    let (a32, a8) = a8.as_chunks::<4>();
    let (b32, b8) = b8.as_chunks::<4>();
    let mut acc = [f32x8::ZERO; 4];
    for (x, y) in a32.iter().zip(b32) {
        for (q, accq) in acc.iter_mut().enumerate() {
            *accq += lanes(&x[q]) * lanes(&y[q]);
        }
    }
    let mut total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in a8.iter().zip(b8) {
        total += lanes(x) * lanes(y);
    }
    let mut sum = fold_lanes(total.to_array());
    for (x, y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

/// `sum_i a[i] * b[i]` added strictly in index order, one product at a time: for the short sums
/// whose order predates the eight-lane one (the scan's, over one channel's state).
#[inline]
pub fn dot_in_order(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        sum += x * y;
    }
    sum
}

/// Matrix-vector product `y = W x` for a row-major `W` of `rows × cols`.
#[inline]
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    assert!(w.len() >= rows * cols && x.len() >= cols && y.len() >= rows);
    if cols == 0 {
        y[..rows].fill(0.0);
        return;
    }
    let x = &x[..cols];
    for (out, row) in y[..rows].iter_mut().zip(w.chunks_exact(cols)) {
        *out = dot(row, x);
    }
}

/// Transposed product `out = Wᵀ g` for a row-major `W` of `rows × cols` (`out` has `cols`
/// entries). Rows are added in ascending order, element by element, so lanes never mix.
#[inline]
pub fn gemv_t(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    out[..cols].fill(0.0);
    gemv_t_acc(w, g, out, rows, cols);
}

/// `out += Wᵀ g`, the accumulating form of [`gemv_t`]: `out += g[r] · W[r]` for each row in
/// ascending order, skipping rows whose `g[r]` is zero.
///
/// The skip matters for the bits: `x + 0·w` is not `x` when `x` is −0 or `w` is infinite. The
/// rows that remain are added four per pass over `out` ([`axpy4`]), each element receiving the
/// same sums in the same order as one [`axpy`] per row, with a quarter of the loads and stores
/// of `out`.
#[inline]
pub fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
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
            axpy4(out, &batch);
            pending = 0;
        }
    }
    for &(gr, row) in &batch[..pending] {
        axpy(out, gr, row);
    }
}

/// Backward of `y = W x` for a row-major `W` of `rows × cols`, given `g = dL/dy`: writes
/// `g_x = Wᵀ g` and, when `g_w` is given, adds `g xᵀ` to it. See [`linear_backward_acc`].
#[inline]
pub fn linear_backward(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    rows: usize,
    cols: usize,
) {
    g_x[..cols].fill(0.0);
    linear_backward_acc(w, g, x, g_x, g_w, rows, cols);
}

/// Backward of `y = W x` for a row-major `W` of `rows × cols`, given `g = dL/dy`: `g_x += Wᵀ g`
/// and, when `g_w` is given, `g_w += g xᵀ`.
///
/// The same bits as [`add_outer`]`(g_w, rows, cols, g, x)` and [`gemv_t_acc`]`(w, g, g_x, rows,
/// cols)` (which write different buffers, so their order is free): both skip the rows whose
/// `g[r]` is zero, and every element gets the same products added in the same order. Done in
/// one pass, four rows at a time, each block of `x` and of `g_x` is loaded once for the rows of
/// both products.
#[inline]
pub fn linear_backward_acc(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    rows: usize,
    cols: usize,
) {
    let Some(g_w) = g_w else {
        return gemv_t_acc(w, g, g_x, rows, cols);
    };
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
            linear_backward4(x, g_x, &mut batch);
            pending = 0;
        }
    }
    for (gr, row, g_row) in &mut batch[..pending] {
        axpy(g_row, *gr, x);
        axpy(g_x, *gr, row);
    }
}

/// Four rows of [`linear_backward_acc`]: `g_w[k] += g[k]·x` for each row `k`, and `g_x += g[k]·W[k]`
/// for `k` = 0, 1, 2, 3 in this order, element by element.
#[inline]
fn linear_backward4(x: &[f32], g_x: &mut [f32], rows: &mut [(f32, &[f32], &mut [f32]); 4]) {
    let n = rows.iter().fold(x.len().min(g_x.len()), |n, r| {
        n.min(r.1.len()).min(r.2.len())
    });
    let a = [rows[0].0, rows[1].0, rows[2].0, rows[3].0];
    let av = a.map(f32x8::splat);
    let [(_, w0, gw0), (_, w1, gw1), (_, w2, gw2), (_, w3, gw3)] = rows;
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let (gx8, gx_tail) = g_x[..n].as_chunks_mut::<LANES>();
    let (w0, w0_tail) = w0[..n].as_chunks::<LANES>();
    let (w1, w1_tail) = w1[..n].as_chunks::<LANES>();
    let (w2, w2_tail) = w2[..n].as_chunks::<LANES>();
    let (w3, w3_tail) = w3[..n].as_chunks::<LANES>();
    let (gw0, gw0_tail) = gw0[..n].as_chunks_mut::<LANES>();
    let (gw1, gw1_tail) = gw1[..n].as_chunks_mut::<LANES>();
    let (gw2, gw2_tail) = gw2[..n].as_chunks_mut::<LANES>();
    let (gw3, gw3_tail) = gw3[..n].as_chunks_mut::<LANES>();
    for (i, gxc) in gx8.iter_mut().enumerate() {
        let xv = lanes(&x8[i]);
        add_to(&mut gw0[i], av[0] * xv);
        add_to(&mut gw1[i], av[1] * xv);
        add_to(&mut gw2[i], av[2] * xv);
        add_to(&mut gw3[i], av[3] * xv);
        let mut v = lanes(gxc);
        v += av[0] * lanes(&w0[i]);
        v += av[1] * lanes(&w1[i]);
        v += av[2] * lanes(&w2[i]);
        v += av[3] * lanes(&w3[i]);
        put(gxc, v);
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

/// `y += a * x`, element-wise.
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let (y8, y_tail) = y[..n].as_chunks_mut::<LANES>();
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let av = f32x8::splat(a);
    for (yc, xc) in y8.iter_mut().zip(x8) {
        put(yc, lanes(yc) + av * lanes(xc));
    }
    for (yi, xi) in y_tail.iter_mut().zip(x_tail) {
        *yi += a * xi;
    }
}

/// `y += a0·x0`, then `y += a1·x1`, `y += a2·x2`, `y += a3·x3`, in one pass over `y`: each
/// element gets its four products added in this order, so the bits equal four [`axpy`] calls.
#[inline]
fn axpy4(y: &mut [f32], terms: &[(f32, &[f32]); 4]) {
    let n = terms.iter().fold(y.len(), |n, (_, x)| n.min(x.len()));
    let a = terms.map(|(a, _)| a);
    let av = a.map(f32x8::splat);
    let x = terms.map(|(_, x)| x[..n].as_chunks::<LANES>());
    let (y8, y_tail) = y[..n].as_chunks_mut::<LANES>();
    let blocks = y8
        .iter_mut()
        .zip(x[0].0)
        .zip(x[1].0)
        .zip(x[2].0)
        .zip(x[3].0);
    for ((((yc, x0), x1), x2), x3) in blocks {
        let mut v = lanes(yc);
        v += av[0] * lanes(x0);
        v += av[1] * lanes(x1);
        v += av[2] * lanes(x2);
        v += av[3] * lanes(x3);
        put(yc, v);
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

/// `dst[r][c] += left[r] * right[c]`: the gradient of a matrix in `y = W x`. Rows whose
/// `left[r]` is zero are left untouched.
#[inline]
pub fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
    assert!(dst.len() >= rows * cols && left.len() >= rows && right.len() >= cols);
    if cols == 0 {
        return;
    }
    let right = &right[..cols];
    for (&g, row) in left[..rows].iter().zip(dst.chunks_exact_mut(cols)) {
        if g == 0.0 {
            continue;
        }
        axpy(row, g, right);
    }
}

/// `y += x`, element-wise.
#[inline]
pub fn add_assign(y: &mut [f32], x: &[f32]) {
    for (a, b) in y.iter_mut().zip(x) {
        *a += *b;
    }
}

/// Writes `exp(x[i])` into `out[i]` with [`math::exp`]'s SIMD form.
#[inline]
pub fn exp_into(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<LANES>();
    for (o, xc) in o8.iter_mut().zip(x8) {
        put(o, math::exp_x8(lanes(xc)));
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = math::exp(xi);
    }
}

/// Writes `exp(a · x[i])` into `out[i]`: the product rounded, then [`math::exp`]'s SIMD form.
#[inline]
pub fn exp_scaled_into(a: f32, x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<LANES>();
    let av = f32x8::splat(a);
    for (o, xc) in o8.iter_mut().zip(x8) {
        put(o, math::exp_x8(av * lanes(xc)));
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = math::exp(a * xi);
    }
}

/// Eight lanes of [`math::sigmoid`], the same operations in the same order.
#[inline(always)]
fn sigmoid_x8(x: f32x8) -> f32x8 {
    let one = f32x8::splat(1.0);
    one / (one + math::exp_x8(-x))
}

/// Writes `sigmoid(x[i])` into `out[i]`, bit for bit [`math::sigmoid`].
#[inline]
pub fn sigmoid_into(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<LANES>();
    for (o, xc) in o8.iter_mut().zip(x8) {
        put(o, sigmoid_x8(lanes(xc)));
    }
    for (o, &xi) in o_tail.iter_mut().zip(x_tail) {
        *o = math::sigmoid(xi);
    }
}

/// Writes `silu(x[i])` into `out[i]` and `sigmoid(x[i])` into `sig[i]`, bit for bit
/// [`math::silu_with_sigmoid`].
#[inline]
pub fn silu_into(x: &[f32], out: &mut [f32], sig: &mut [f32]) {
    let n = x.len().min(out.len()).min(sig.len());
    let (x8, x_tail) = x[..n].as_chunks::<LANES>();
    let (o8, o_tail) = out[..n].as_chunks_mut::<LANES>();
    let (s8, s_tail) = sig[..n].as_chunks_mut::<LANES>();
    for ((o, sg), xc) in o8.iter_mut().zip(s8).zip(x8) {
        let xv = lanes(xc);
        let sv = sigmoid_x8(xv);
        put(sg, sv);
        put(o, xv * sv);
    }
    for ((o, sg), &xi) in o_tail.iter_mut().zip(s_tail).zip(x_tail) {
        (*o, *sg) = math::silu_with_sigmoid(xi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 4.0 - 2.0
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    // Lengths around and between multiples of the lane width.
    const LENS: [usize; 12] = [0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 67, 130];

    #[test]
    fn dot_matches_scalar_twin() {
        for n in LENS {
            let (a, b) = (data(n, 1), data(n, 2));
            assert_eq!(
                dot(&a, &b).to_bits(),
                scalar::dot(&a, &b).to_bits(),
                "n={n}"
            );
        }
    }

    #[test]
    fn gemv_and_transpose_match_scalar_twins() {
        for (rows, cols) in [
            (1, 1),
            (3, 7),
            (5, 8),
            (9, 17),
            (16, 33),
            (4, 0),
            (0, 5),
            (7, 72),
        ] {
            let w = data(rows * cols, 3);
            let x = data(cols, 4);
            let g = data(rows, 5);
            let (mut y1, mut y2) = (vec![0.0; rows], vec![0.0; rows]);
            gemv(&w, &x, &mut y1, rows, cols);
            scalar::gemv(&w, &x, &mut y2, rows, cols);
            assert_eq!(bits(&y1), bits(&y2));
            let (mut t1, mut t2) = (data(cols, 6), data(cols, 6));
            gemv_t_acc(&w, &g, &mut t1, rows, cols);
            scalar::gemv_t_acc(&w, &g, &mut t2, rows, cols);
            assert_eq!(bits(&t1), bits(&t2));
        }
    }

    /// Rows with a zero coefficient must be skipped, not added as `0·w`: that would turn an
    /// output of −0 into +0, and an infinite weight into NaN. Shapes cover every count of rows
    /// left over after the passes of four, and widths that are not multiples of eight.
    #[test]
    fn transpose_and_outer_skip_zero_rows_like_their_twins() {
        for (rows, cols) in [(1, 3), (4, 8), (6, 9), (7, 16), (11, 21), (13, 40)] {
            let mut w = data(rows * cols, 13);
            let mut g = data(rows, 14);
            for r in (0..rows).step_by(3) {
                g[r] = if r % 2 == 0 { 0.0 } else { -0.0 };
                w[r * cols] = f32::INFINITY;
            }
            let mut out0 = data(cols, 15);
            out0[0] = -0.0;
            let (mut t1, mut t2) = (out0.clone(), out0.clone());
            gemv_t_acc(&w, &g, &mut t1, rows, cols);
            scalar::gemv_t_acc(&w, &g, &mut t2, rows, cols);
            assert_eq!(bits(&t1), bits(&t2), "gemv_t_acc {rows}x{cols}");
            let right: Vec<f32> = data(cols, 16).iter().map(|v| v * 1e30).collect();
            let (mut d1, mut d2) = (w.clone(), w.clone());
            d1[cols - 1] = -0.0;
            d2[cols - 1] = -0.0;
            add_outer(&mut d1, rows, cols, &g, &right);
            scalar::add_outer(&mut d2, rows, cols, &g, &right);
            assert_eq!(bits(&d1), bits(&d2), "add_outer {rows}x{cols}");
        }
    }

    /// The fused backward of a linear layer equals `add_outer` plus `gemv_t_acc`, zero rows,
    /// −0 and infinities included.
    #[test]
    fn linear_backward_matches_outer_and_transpose() {
        for (rows, cols) in [(1, 3), (4, 8), (6, 9), (7, 16), (11, 21), (13, 40), (9, 0)] {
            let mut w = data(rows * cols, 18);
            let mut g = data(rows, 19);
            for r in (0..rows).step_by(3) {
                g[r] = if r % 2 == 0 { 0.0 } else { -0.0 };
                if cols > 0 {
                    w[r * cols] = f32::INFINITY;
                }
            }
            let x = data(cols, 20);
            let mut gx0 = data(cols, 21);
            let mut gw0 = data(rows * cols, 22);
            if cols > 0 {
                gx0[0] = -0.0;
                gw0[cols - 1] = -0.0;
            }
            let (mut gx1, mut gw1) = (gx0.clone(), gw0.clone());
            linear_backward_acc(&w, &g, &x, &mut gx1, Some(&mut gw1), rows, cols);
            let (mut gx2, mut gw2) = (gx0.clone(), gw0.clone());
            scalar::add_outer(&mut gw2, rows, cols, &g, &x);
            scalar::gemv_t_acc(&w, &g, &mut gx2, rows, cols);
            assert_eq!(bits(&gx1), bits(&gx2), "g_x {rows}x{cols}");
            assert_eq!(bits(&gw1), bits(&gw2), "g_w {rows}x{cols}");
            let mut gx3 = gx0.clone();
            linear_backward_acc(&w, &g, &x, &mut gx3, None, rows, cols);
            assert_eq!(bits(&gx3), bits(&gx2), "g_x alone {rows}x{cols}");
        }
    }

    #[test]
    fn axpy_and_outer_match_scalar_twins() {
        for n in LENS {
            let x = data(n, 7);
            let (mut y1, mut y2) = (data(n, 8), data(n, 8));
            axpy(&mut y1, 0.37, &x);
            scalar::axpy(&mut y2, 0.37, &x);
            assert_eq!(bits(&y1), bits(&y2));
        }
        let (rows, cols) = (5, 19);
        let (l, r) = (data(rows, 9), data(cols, 10));
        let (mut d1, mut d2) = (data(rows * cols, 11), data(rows * cols, 11));
        add_outer(&mut d1, rows, cols, &l, &r);
        scalar::add_outer(&mut d2, rows, cols, &l, &r);
        assert_eq!(bits(&d1), bits(&d2));
    }

    #[test]
    fn exp_simd_matches_scalar() {
        for n in LENS {
            let x: Vec<f32> = data(n, 12).iter().map(|v| v * 50.0).collect();
            let mut out = vec![0.0; n];
            exp_into(&x, &mut out);
            let want: Vec<f32> = x.iter().map(|&v| math::exp(v)).collect();
            assert_eq!(bits(&out), bits(&want));
        }
    }

    #[test]
    fn activations_match_their_scalar_forms() {
        for n in LENS {
            let x: Vec<f32> = data(n, 17).iter().map(|v| v * 12.0).collect();
            let (mut e, mut sg, mut si, mut si_sig) =
                (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            exp_scaled_into(-0.37, &x, &mut e);
            sigmoid_into(&x, &mut sg);
            silu_into(&x, &mut si, &mut si_sig);
            for i in 0..n {
                assert_eq!(
                    e[i].to_bits(),
                    math::exp(-0.37 * x[i]).to_bits(),
                    "exp n={n}"
                );
                assert_eq!(
                    sg[i].to_bits(),
                    math::sigmoid(x[i]).to_bits(),
                    "sigmoid n={n}"
                );
                let (u, s) = math::silu_with_sigmoid(x[i]);
                assert_eq!(
                    (si[i].to_bits(), si_sig[i].to_bits()),
                    (u.to_bits(), s.to_bits())
                );
            }
        }
    }

    #[test]
    fn gemv_computes_a_matrix_product() {
        // 2×3 times a 3-vector, worked by hand.
        let w = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0];
        let mut y = [0.0; 2];
        gemv(&w, &[1.0, 1.0, 2.0], &mut y, 2, 3);
        assert_eq!(y, [9.0, 7.5]);
        let mut t = [0.0; 3];
        gemv_t(&w, &[1.0, 2.0], &mut t, 2, 3);
        assert_eq!(t, [-1.0, 3.0, 11.0]);
    }
}
