//! Scalar twins of the SIMD kernels: slow, obviously ordered, and bit-identical to them.
//!
//! Each function spells out the summation order its SIMD form keeps with eight lanes, so a test
//! can compare the two on lengths that are not multiples of the lane width.

use super::fold_lanes;

const LANES: usize = 8;

/// Twin of [`super::dot`].
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let blocks32 = n / 32;
    let mut acc = [[0.0f32; LANES]; 4];
    for k in 0..blocks32 {
        for q in 0..4 {
            for l in 0..LANES {
                let i = 32 * k + 8 * q + l;
                acc[q][l] += a[i] * b[i];
            }
        }
    }
    let mut total = [0.0f32; LANES];
    for l in 0..LANES {
        total[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    }
    let full = n - n % LANES;
    for i in 32 * blocks32..full {
        total[i % LANES] += a[i] * b[i];
    }
    let mut sum = fold_lanes(total);
    for i in full..n {
        sum += a[i] * b[i];
    }
    sum
}

/// Twin of [`super::gemv`].
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        y[r] = dot(&w[r * cols..(r + 1) * cols], &x[..cols]);
    }
}

/// Twin of [`super::gemv_t_acc`].
pub fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        if g[r] == 0.0 {
            continue;
        }
        for c in 0..cols {
            out[c] += g[r] * w[r * cols + c];
        }
    }
}

/// Twin of [`super::axpy`].
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * *xi;
    }
}

/// Twin of [`super::add_outer`].
pub fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
    for r in 0..rows {
        if left[r] == 0.0 {
            continue;
        }
        for c in 0..cols {
            dst[r * cols + c] += left[r] * right[c];
        }
    }
}
