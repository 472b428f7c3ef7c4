//! Kernels over the steps of a segment: one pass over a weight matrix serves every step, where
//! a step at a time would stream the matrix (and its gradient) through the cache once per byte.
//!
//! Each is defined by the per-step kernels it replaces: its results are bit for bit those of
//! calling them step after step, because every output element receives the same products in
//! the same order (docs/determinism.md, "Segments").

pub use super::rows::Rows;

use super::Kernels;

/// Backward of `y_t = W x_t` for the steps `t = 0..n` of a segment, with `W` row-major
/// `rows × cols`, from `g_t = dL/dy_t` (row `t` of `g`): writes `g_x[t] = Wᵀ g_t` (adds it with
/// `accumulate`) and, when `g_w` is given, adds `Σ_t g_t x_tᵀ`.
///
/// The bits of [`super::linear_backward`] (or `_acc`) called for `t = n−1, …, 0` in turn: each
/// element of `g_x[t]` gets the products of the rows whose `g_t[r]` is non-zero added in
/// ascending `r`, and each element of `g_w` its products in descending `t`. Row `r` of `W` and
/// of `g_w` is loaded once for all steps.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_steps(
    w: &[f32],
    x: &[&[f32]],
    g: Rows,
    g_x: &mut [f32],
    gx_stride: usize,
    g_w: Option<&mut [f32]>,
    (rows, cols): (usize, usize),
    accumulate: bool,
) {
    let n = x.len();
    assert!(w.len() >= rows * cols && gx_stride >= cols);
    assert!(n == 0 || g_x.len() >= (n - 1) * gx_stride + cols);
    if !accumulate {
        for t in 0..n {
            g_x[t * gx_stride..t * gx_stride + cols].fill(0.0);
        }
    }
    if cols == 0 || n == 0 {
        return;
    }
    assert!(g.data.len() >= (n - 1) * g.stride + rows);
    if let Some(gw) = g_w.as_deref() {
        assert!(gw.len() >= rows * cols);
    }
    let g_x = (g_x, gx_stride);
    super::par::linear_backward_steps(Kernels::active(), w, x, g, g_x, g_w, (rows, cols))
}

/// `y_t = W x_t` for the steps `t = 0..n`: the bits of [`super::gemv`] per step, each row of `W`
/// loaded once for all steps. `y` is step-major with `y_stride ≥ rows`.
pub fn gemv_steps(
    w: &[f32],
    x: &[&[f32]],
    y: &mut [f32],
    y_stride: usize,
    (rows, cols): (usize, usize),
) {
    let n = x.len();
    assert!(w.len() >= rows * cols && y_stride >= rows);
    assert!(n == 0 || y.len() >= (n - 1) * y_stride + rows);
    if cols == 0 {
        for t in 0..n {
            y[t * y_stride..t * y_stride + rows].fill(0.0);
        }
        return;
    }
    super::par::gemv_steps(Kernels::active(), w, x, (y, y_stride), (rows, cols))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{gemv, linear_backward, linear_backward_acc};

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every step's gradient agrees bit for bit with the per-step kernel run last step first,
    /// on sizes that are not multiples of the lane width, with zero gradient rows skipped.
    #[test]
    fn linear_backward_steps_equals_the_per_step_kernel() {
        for (rows, cols, n) in [(13, 21, 5), (8, 16, 1), (40, 7, 16), (3, 0, 2)] {
            let w = data(rows * cols, 1);
            let xs: Vec<Vec<f32>> = (0..n).map(|t| data(cols, 10 + t as u32)).collect();
            let mut g = data(n * rows, 7);
            for t in 0..n {
                g[t * rows + (t % rows.max(1))] = 0.0;
            }
            for accumulate in [false, true] {
                let stride = cols + 3;
                let mut gx_ref = data(n * stride, 3);
                let mut gw_ref = data(rows * cols, 4);
                let (mut gx, mut gw) = (gx_ref.clone(), gw_ref.clone());
                for t in (0..n).rev() {
                    let gt = &g[t * rows..(t + 1) * rows];
                    let out = &mut gx_ref[t * stride..t * stride + cols];
                    if accumulate {
                        linear_backward_acc(&w, gt, &xs[t], out, Some(&mut gw_ref), rows, cols);
                    } else {
                        linear_backward(&w, gt, &xs[t], out, Some(&mut gw_ref), rows, cols);
                    }
                }
                let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
                let g_rows = Rows {
                    data: &g,
                    stride: rows,
                };
                let dims = (rows, cols);
                linear_backward_steps(
                    &w,
                    &x,
                    g_rows,
                    &mut gx,
                    stride,
                    Some(&mut gw),
                    dims,
                    accumulate,
                );
                assert_eq!(bits(&gx), bits(&gx_ref), "{rows}x{cols}, n {n}");
                assert_eq!(bits(&gw), bits(&gw_ref), "{rows}x{cols}, n {n}");
            }
        }
    }

    #[test]
    fn gemv_steps_equals_gemv_per_step() {
        for (rows, cols, n) in [(13, 21, 5), (8, 40, 16), (5, 0, 2)] {
            let w = data(rows * cols, 2);
            let xs: Vec<Vec<f32>> = (0..n).map(|t| data(cols, 20 + t as u32)).collect();
            let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
            let stride = rows + 2;
            let mut y = data(n * stride, 5);
            let mut y_ref = y.clone();
            for t in 0..n {
                gemv(&w, &xs[t], &mut y_ref[t * stride..], rows, cols);
            }
            gemv_steps(&w, &x, &mut y, stride, (rows, cols));
            assert_eq!(bits(&y), bits(&y_ref));
        }
    }
}
