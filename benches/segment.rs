//! One TBPTT segment of the default level, and the matrix products it rests on.
//!
//! - `segment/<model>`: the 16 bytes of one segment at the default level without the mixing
//!   stage — 16 live forwards, then the segment's backward, one Adam step and the rebuild of the
//!   live state. Criterion's time is per segment; its throughput is in bytes.
//! - `gemm/...`: the segment kernels on the default Mamba-1's matrix shapes over 16 steps —
//!   `gemv_steps` (`Y = W X`, the rebuild's products) and `linear_backward_steps`
//!   (`G_X = Wᵀ G`, `dW += G Xᵀ`). Throughput is in floating-point operations (criterion prints
//!   them as "elem/s", i.e. FLOP/s), to compare with the machine's peak without FMA:
//!   cores × 8 lanes × 2 operations × clock (docs/determinism.md explains why there is no FMA).
//!
//! `cargo bench --bench segment` (a filter such as `-- gemm` runs part of it; `LMZIP_SIMD`
//! chooses the kernel path).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lmzip::kernels::steps::{Rows, gemv_steps, linear_backward_steps};
use lmzip::predictor;
use lmzip::recipe::ModelKind;

/// Steps in a segment of the default level.
const STEPS: usize = 16;

fn text() -> Vec<u8> {
    b"It was the best of times, it was the worst of times, it was the age of wisdom. ".repeat(64)
}

fn segment(c: &mut Criterion) {
    let mut group = c.benchmark_group("segment");
    group.throughput(Throughput::Bytes(STEPS as u64));
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let recipe = lmzip::levels::default_recipe(kind)
            .edit("mix:off", None)
            .unwrap();
        let mut p = predictor::build(&recipe, None).unwrap();
        let data = text();
        let mut i = 0;
        group.bench_function(kind.name(), |b| {
            b.iter(|| {
                for _ in 0..STEPS {
                    i = (i + 1) % data.len();
                    p.learn(data[i]);
                }
                black_box(p.pdf()[0])
            })
        });
    }
    group.finish();
}

/// Deterministic values in [-1, 1].
fn values(n: usize, seed: u32) -> Vec<f32> {
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

/// The default Mamba-1's linear layers (hidden 128, inner 256, state 16, Δ-rank 8): name, rows
/// (outputs) and columns (inputs).
const SHAPES: [(&str, usize, usize); 5] = [
    ("in_proj 512x128", 512, 128),
    ("x_proj 40x256", 40, 256),
    ("dt_proj 256x8", 256, 8),
    ("out_proj 128x256", 128, 256),
    ("head 256x128", 256, 128),
];

fn gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    for (name, rows, cols) in SHAPES {
        let w = values(rows * cols, 1);
        let xs: Vec<Vec<f32>> = (0..STEPS).map(|t| values(cols, 10 + t as u32)).collect();
        let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
        let g = values(STEPS * rows, 7);
        let mut y = vec![0.0; STEPS * rows];
        let mut g_x = vec![0.0; STEPS * cols];
        let mut g_w = vec![0.0; rows * cols];
        let products = (rows * cols * STEPS) as u64;

        group.throughput(Throughput::Elements(2 * products));
        group.bench_function(format!("forward {name}"), |b| {
            b.iter(|| gemv_steps(&w, &x, &mut y, rows, (rows, cols)))
        });
        // Two products per weight and step: one for G_X, one for dW.
        group.throughput(Throughput::Elements(4 * products));
        group.bench_function(format!("backward {name}"), |b| {
            b.iter(|| {
                let g = Rows {
                    data: &g,
                    stride: rows,
                };
                linear_backward_steps(
                    &w,
                    &x,
                    g,
                    &mut g_x,
                    cols,
                    Some(&mut g_w),
                    (rows, cols),
                    false,
                )
            })
        });
        black_box((&y, &g_x, &g_w));
    }
    group.finish();
}

criterion_group!(benches, segment, gemm);
criterion_main!(benches);
