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

use wide::f32x8;

const LANES: usize = 8;

#[inline(always)]
fn load(s: &[f32], at: usize) -> f32x8 {
    f32x8::from(<[f32; LANES]>::try_from(&s[at..at + LANES]).unwrap())
}

#[inline(always)]
fn store(s: &mut [f32], at: usize, v: f32x8) {
    s[at..at + LANES].copy_from_slice(&v.to_array());
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
    let (a, b) = (&a[..n], &b[..n]);
    let blocks32 = n / 32;
    let mut acc = [f32x8::ZERO; 4];
    for k in 0..blocks32 {
        let base = 32 * k;
        for (q, accq) in acc.iter_mut().enumerate() {
            *accq += load(a, base + 8 * q) * load(b, base + 8 * q);
        }
    }
    let mut total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    let full = n - n % LANES;
    let mut i = 32 * blocks32;
    while i < full {
        total += load(a, i) * load(b, i);
        i += LANES;
    }
    let mut sum = fold_lanes(total.to_array());
    while i < n {
        sum += a[i] * b[i];
        i += 1;
    }
    sum
}

/// Matrix-vector product `y = W x` for a row-major `W` of `rows × cols`.
#[inline]
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    assert!(w.len() >= rows * cols && x.len() >= cols && y.len() >= rows);
    for (r, out) in y[..rows].iter_mut().enumerate() {
        *out = dot(&w[r * cols..(r + 1) * cols], &x[..cols]);
    }
}

/// Transposed product `out = Wᵀ g` for a row-major `W` of `rows × cols` (`out` has `cols`
/// entries). Rows are added in ascending order, element by element, so lanes never mix.
#[inline]
pub fn gemv_t(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    out[..cols].fill(0.0);
    gemv_t_acc(w, g, out, rows, cols);
}

/// `out += Wᵀ g`, the accumulating form of [`gemv_t`].
#[inline]
pub fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    assert!(w.len() >= rows * cols && g.len() >= rows && out.len() >= cols);
    for r in 0..rows {
        let gr = g[r];
        if gr == 0.0 {
            // Adding exact zeros changes no bit (x + 0·w = x for every finite w), so skipping
            // them keeps the result identical to the scalar twin, which skips them too.
            continue;
        }
        axpy(&mut out[..cols], gr, &w[r * cols..(r + 1) * cols]);
    }
}

/// `y += a * x`, element-wise.
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let full = n - n % LANES;
    let av = f32x8::splat(a);
    let mut i = 0;
    while i < full {
        let v = load(y, i) + av * load(x, i);
        store(y, i, v);
        i += LANES;
    }
    while i < n {
        y[i] += a * x[i];
        i += 1;
    }
}

/// `dst[r][c] += left[r] * right[c]`: the gradient of a matrix in `y = W x`.
#[inline]
pub fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
    assert!(dst.len() >= rows * cols && left.len() >= rows && right.len() >= cols);
    for r in 0..rows {
        let g = left[r];
        if g == 0.0 {
            continue;
        }
        axpy(&mut dst[r * cols..(r + 1) * cols], g, &right[..cols]);
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
    let full = n - n % LANES;
    let mut i = 0;
    while i < full {
        store(out, i, math::exp_x8(load(x, i)));
        i += LANES;
    }
    while i < n {
        out[i] = math::exp(x[i]);
        i += 1;
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
        for (rows, cols) in [(1, 1), (3, 7), (5, 8), (9, 17), (16, 33)] {
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
