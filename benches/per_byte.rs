//! Per-byte cost of both models at the default level's size: the forward pass alone, and a
//! whole learning step (backward, optimizer step and the next forward) for each training mode,
//! one-step and TBPTT.
//! The `threads` group times the kernel pool: a job of two empty parts (the pool's own cost
//! per call), the input projection's product and a whole TBPTT learning step on 1 and 2
//! threads.
//! `cargo bench --bench per_byte` (a filter such as `-- rwkv7` runs part of it)

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lmzip::model::Network;
use lmzip::model::mamba1::Mamba1;
use lmzip::model::rwkv7::Rwkv7;
use lmzip::params::ParamSet;
use lmzip::pool::Pool;
use lmzip::predictor;
use lmzip::recipe::{ModelConfig, ModelKind};

fn text() -> Vec<u8> {
    b"It was the best of times, it was the worst of times, it was the age of wisdom. ".repeat(64)
}

fn bench_forward<N: Network>(c: &mut Criterion, name: &str, mut net: N, params: ParamSet) {
    let mut state = net.new_state();
    let data = text();
    let mut i = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 1) % data.len();
            black_box(net.forward(&params, &mut state, data[i], None)[0])
        })
    });
}

fn forward(c: &mut Criterion) {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let name = format!("{} forward", kind.name());
        match lmzip::levels::default_recipe(kind).config().clone() {
            ModelConfig::Mamba1(cfg) => {
                let (net, params) = Mamba1::new_random(cfg, 0).unwrap();
                bench_forward(c, &name, net, params);
            }
            ModelConfig::Rwkv7(cfg) => {
                let (net, params) = Rwkv7::new_random(cfg, 0).unwrap();
                bench_forward(c, &name, net, params);
            }
        }
    }
}

fn learn(c: &mut Criterion) {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        for (mode, rule) in [
            ("sgd bptt1", "0..:train(opt=sgd)"),
            ("adam bptt1", "0..:train(opt=adam)"),
            ("adam bptt8", "0..:train(opt=adam,bptt=8)"),
            ("adam bptt16", "0..:train(opt=adam,bptt=16)"),
        ] {
            let recipe = lmzip::levels::default_recipe(kind)
                .edit(rule, None)
                .unwrap();
            let mut p = predictor::build(&recipe, None).unwrap();
            let data = text();
            let mut i = 0;
            c.bench_function(&format!("{} learn {mode}", kind.name()), |b| {
                b.iter(|| {
                    i = (i + 1) % data.len();
                    p.learn(data[i]);
                    black_box(p.pdf()[0])
                })
            });
        }
    }
}

fn threads(c: &mut Criterion) {
    let pool = Pool::new(2).unwrap();
    c.bench_function("pool run two empty parts", |b| {
        b.iter(|| {
            pool.run(2, &|part| {
                black_box(part);
            })
        })
    });
    let (rows, cols) = (512, 128);
    let w: Vec<f32> = (0..rows * cols).map(|i| (i % 17) as f32 * 0.01).collect();
    let x: Vec<f32> = (0..cols).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut y = vec![0.0; rows];
    for threads in [1, 2] {
        let pool = Pool::new(threads).unwrap();
        c.bench_function(&format!("gemv 512x128 on {threads} threads"), |b| {
            pool.install(|| b.iter(|| lmzip::kernels::gemv(&w, &x, &mut y, rows, cols)))
        });
    }
    for threads in [1, 2] {
        let recipe = lmzip::levels::default_recipe(ModelKind::Mamba1);
        let mut p = predictor::build(&recipe, None).unwrap();
        let data = text();
        let mut i = 0;
        let pool = Pool::new(threads).unwrap();
        c.bench_function(&format!("mamba1 learn default on {threads} threads"), |b| {
            pool.install(|| {
                b.iter(|| {
                    i = (i + 1) % data.len();
                    p.learn(data[i]);
                    black_box(p.pdf()[0])
                })
            })
        });
    }
}

criterion_group!(benches, forward, learn, threads);
criterion_main!(benches);
