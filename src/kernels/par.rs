//! The kernels that split their outputs over the pool installed on the calling thread
//! ([`crate::pool`]): each part is a set of whole output elements — rows of a product, steps of
//! a segment, channels of the scan — computed by the single-threaded kernel on a sub-range, so
//! every element gets exactly the operations, in the order, it gets on one thread. No sum is
//! ever split, and the results are the same for every number of threads.
//!
//! | kernel | split into |
//! |---|---|
//! | [`gemv`] | ranges of rows of `W` |
//! | [`gemv_steps`] | ranges of steps |
//! | [`linear_backward_steps`] | ranges of rows of `g_w`, and (in the same parts) ranges of steps of `g_x` |
//! | [`scan_forward`] | ranges of channels |
//!
//! A job is cut into at most one part per thread, and into fewer when a part would hold less
//! than the pool's [`Pool::min_part_work`] multiply-adds.

use std::ops::Range;

use super::rows::Rows;
use super::{Kernels, ScanInput};
use crate::pool::{self, Pool};

/// `buf` cut at the given ranges of `stride`-wide rows, the last part taking the rest.
fn cut_rows<'a>(
    mut buf: &'a mut [f32],
    ranges: &[Range<usize>],
    stride: usize,
) -> Vec<&'a mut [f32]> {
    let mut parts = Vec::with_capacity(ranges.len());
    for (k, r) in ranges.iter().enumerate() {
        let len = if k + 1 == ranges.len() {
            buf.len()
        } else {
            ((r.end - r.start) * stride).min(buf.len())
        };
        let (head, rest) = std::mem::take(&mut buf).split_at_mut(len);
        parts.push(head);
        buf = rest;
    }
    parts
}

/// The pool to split `work` over and into how many parts, if splitting pays.
fn plan(work: usize, most: usize, f: impl FnOnce(Option<(&Pool, usize)>)) {
    pool::with_current(|pool| {
        let split = pool.map(|p| (p, p.parts_for(work, most)));
        f(split.filter(|&(_, parts)| parts > 1))
    })
}

/// [`super::gemv`]: rows in ranges of 16.
pub(super) fn gemv(k: Kernels, w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    plan(rows * cols, rows / 16, |split| {
        let Some((pool, parts)) = split else {
            return k.gemv(w, x, y, rows, cols);
        };
        let ranges: Vec<_> = pool::split(rows, parts, 16).collect();
        let mut items: Vec<_> = ranges
            .iter()
            .cloned()
            .zip(cut_rows(y, &ranges, 1))
            .collect();
        pool.for_each_mut(&mut items, |_, (r, y)| {
            k.gemv(&w[r.start * cols..], x, y, r.end - r.start, cols)
        });
    })
}

/// `steps::gemv_steps` (`cols > 0`): steps in ranges of two.
pub(super) fn gemv_steps(
    k: Kernels,
    w: &[f32],
    x: &[&[f32]],
    (y, y_stride): (&mut [f32], usize),
    dims: (usize, usize),
) {
    let n = x.len();
    plan(n * dims.0 * dims.1, n / 2, |split| {
        let Some((pool, parts)) = split else {
            return k.gemv_steps(w, x, (y, y_stride), dims);
        };
        let ranges: Vec<_> = pool::split(n, parts, 2).collect();
        let cut = cut_rows(y, &ranges, y_stride);
        let mut items: Vec<_> = ranges.iter().cloned().zip(cut).collect();
        pool.for_each_mut(&mut items, |_, (t, y)| {
            if t.start < t.end {
                k.gemv_steps(w, &x[t.clone()], (y, y_stride), dims);
            }
        });
    })
}

/// One part of [`linear_backward_steps`]: rows of the weight gradient and steps of the input
/// gradient.
struct BackwardPart<'a> {
    rows: Range<usize>,
    g_w: Option<&'a mut [f32]>,
    steps: Range<usize>,
    g_x: &'a mut [f32],
}

/// `steps::linear_backward_steps` after its zeroing (`cols > 0`): the weight gradient's rows
/// in ranges of 8, and the input gradient's steps in ranges of two, in the same parts.
pub(super) fn linear_backward_steps(
    k: Kernels,
    w: &[f32],
    x: &[&[f32]],
    g: Rows,
    (g_x, gx_stride): (&mut [f32], usize),
    g_w: Option<&mut [f32]>,
    (rows, cols): (usize, usize),
) {
    let n = x.len();
    let work = n * rows * cols * if g_w.is_some() { 2 } else { 1 };
    let most = if g_w.is_some() { rows / 8 } else { n / 2 };
    plan(work, most, |split| {
        let Some((pool, parts)) = split else {
            return k.linear_backward_steps(w, x, g, (g_x, gx_stride), g_w, (rows, cols));
        };
        let row_ranges: Vec<_> = pool::split(rows, parts, 8).collect();
        let step_ranges: Vec<_> = pool::split(n, parts, 2).collect();
        let g_ws = match g_w {
            Some(gw) => cut_rows(&mut gw[..rows * cols], &row_ranges, cols)
                .into_iter()
                .map(Some)
                .collect(),
            None => (0..parts).map(|_| None).collect::<Vec<_>>(),
        };
        let g_xs = cut_rows(g_x, &step_ranges, gx_stride);
        let mut items: Vec<BackwardPart> = (row_ranges.into_iter().zip(g_ws))
            .zip(step_ranges.into_iter().zip(g_xs))
            .map(|((rows, g_w), (steps, g_x))| BackwardPart {
                rows,
                g_w,
                steps,
                g_x,
            })
            .collect();
        pool.for_each_mut(&mut items, |_, part| {
            if let Some(gw) = part.g_w.as_deref_mut() {
                let g_r = Rows {
                    data: &g.data[part.rows.start..],
                    stride: g.stride,
                };
                k.weight_grad_steps(x, g_r, gw, cols);
            }
            let t = part.steps.clone();
            if !t.is_empty() {
                let g_t = Rows {
                    data: &g.data[t.start * g.stride..],
                    stride: g.stride,
                };
                let g_x = (&mut *part.g_x, gx_stride);
                k.input_grad_steps(w, g_t, g_x, t.end - t.start, (rows, cols));
            }
        });
    })
}

/// One part of [`scan_forward`]: a range of channels and their rows of the outputs.
struct ScanPart<'a> {
    channels: Range<usize>,
    ssm: &'a mut [f32],
    da: &'a mut [f32],
    y_pre: &'a mut [f32],
}

/// The cost of one state element of the scan (an exponential and a few products), in
/// multiply-adds.
const SCAN_ELEMENT_WORK: usize = 12;

/// [`super::scan_forward`]: channels in ranges of 8.
pub(super) fn scan_forward(
    k: Kernels,
    x: &ScanInput,
    ssm: &mut [f32],
    da: &mut [f32],
    y_pre: &mut [f32],
) {
    let (channels, s) = (x.u.len(), x.b.len());
    plan(channels * s * SCAN_ELEMENT_WORK, channels / 8, |split| {
        let Some((pool, parts)) = split else {
            return k.scan_forward(x, ssm, da, y_pre);
        };
        let ranges: Vec<_> = pool::split(channels, parts, 8).collect();
        let cut = cut_rows(&mut ssm[..channels * s], &ranges, s)
            .into_iter()
            .zip(cut_rows(&mut da[..channels * s], &ranges, s))
            .zip(cut_rows(&mut y_pre[..channels], &ranges, 1));
        let mut items: Vec<ScanPart> = ranges
            .iter()
            .cloned()
            .zip(cut)
            .map(|(channels, ((ssm, da), y_pre))| ScanPart {
                channels,
                ssm,
                da,
                y_pre,
            })
            .collect();
        pool.for_each_mut(&mut items, |_, part| {
            let c = part.channels.clone();
            let sub = ScanInput {
                u: &x.u[c.clone()],
                dt: &x.dt[c.clone()],
                b: x.b,
                c: x.c,
                d: &x.d[c.clone()],
                a: &x.a[c.start * s..c.end * s],
            };
            k.scan_forward(&sub, part.ssm, part.da, part.y_pre);
        });
    })
}

#[cfg(test)]
mod tests {
    use super::super::{gemv as gemv_seam, scan_forward as scan_seam};
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                // Every seventh a zero, to exercise the skipped rows.
                if i % 7 == 3 {
                    0.0
                } else {
                    (s % 2001) as f32 / 997.0 - 1.0
                }
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Runs `f` on one thread and on pools of 2 and 3 that split everything, and requires the
    /// same bits from each.
    fn same_on_every_pool(name: &str, f: impl Fn() -> Vec<f32>) {
        let alone = bits(&f());
        for threads in [2, 3] {
            let pool = Pool::new(threads).unwrap().with_min_part_work(1);
            let split = pool.install(&f);
            assert_eq!(bits(&split), alone, "{name} on {threads} threads");
        }
    }

    #[test]
    fn split_products_compute_the_bits_of_one_thread() {
        for (rows, cols) in [(37, 21), (64, 8), (5, 3), (130, 67)] {
            let (w, x) = (data(rows * cols, 1), data(cols, 2));
            same_on_every_pool("gemv", || {
                let mut y = data(rows + 3, 3);
                gemv_seam(&w, &x, &mut y, rows, cols);
                y
            });
            for n in [1, 5, 16] {
                let xs: Vec<Vec<f32>> = (0..n).map(|t| data(cols, 10 + t as u32)).collect();
                let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
                let stride = rows + 2;
                same_on_every_pool("gemv_steps", || {
                    let mut y = data(n * stride, 4);
                    let k = Kernels::active();
                    gemv_steps(k, &w, &x, (&mut y, stride), (rows, cols));
                    y
                });
                let g = data(n * rows, 5);
                for with_gw in [true, false] {
                    same_on_every_pool("linear_backward_steps", || {
                        let gx_stride = cols + 1;
                        let mut out = data(n * gx_stride + rows * cols, 6);
                        let (g_x, g_w) = out.split_at_mut(n * gx_stride);
                        let rows_g = Rows {
                            data: &g,
                            stride: rows,
                        };
                        let g_w = with_gw.then_some(g_w);
                        let dims = (rows, cols);
                        let k = Kernels::active();
                        linear_backward_steps(k, &w, &x, rows_g, (g_x, gx_stride), g_w, dims);
                        out
                    });
                }
            }
        }
    }

    #[test]
    fn split_scan_computes_the_bits_of_one_thread() {
        for (channels, s) in [(40, 16), (9, 5), (256, 16)] {
            let (u, dt, d) = (data(channels, 1), data(channels, 2), data(channels, 3));
            let dt: Vec<f32> = dt.iter().map(|v| v.abs() * 0.5).collect();
            let a: Vec<f32> = data(channels * s, 4).iter().map(|v| -v.abs()).collect();
            let (b, c) = (data(s, 5), data(s, 6));
            let input = ScanInput {
                u: &u,
                dt: &dt,
                b: &b,
                c: &c,
                d: &d,
                a: &a,
            };
            same_on_every_pool("scan_forward", || {
                let mut out = data(2 * channels * s + channels, 7);
                let (ssm, rest) = out.split_at_mut(channels * s);
                let (da, y_pre) = rest.split_at_mut(channels * s);
                scan_seam(&input, ssm, da, y_pre);
                out
            });
        }
    }
}
