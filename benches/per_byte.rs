//! Per-byte cost of the default models: the forward pass alone, and a whole learning step
//! (backward, optimizer step and the next forward) for each training mode.
//! `cargo bench --bench per_byte`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lmzip::model::Network;
use lmzip::model::mamba1::Mamba1;
use lmzip::predictor;
use lmzip::recipe::{ModelConfig, ModelKind, Recipe};

fn text() -> Vec<u8> {
    b"It was the best of times, it was the worst of times, it was the age of wisdom. ".repeat(64)
}

fn forward(c: &mut Criterion) {
    let recipe = Recipe::default_for(ModelKind::Mamba1);
    let ModelConfig::Mamba1(cfg) = recipe.config().clone() else {
        unreachable!()
    };
    let (mut net, params) = Mamba1::new_random(cfg, 0).unwrap();
    let mut state = net.new_state();
    let data = text();
    let mut i = 0;
    c.bench_function("mamba1 forward", |b| {
        b.iter(|| {
            i = (i + 1) % data.len();
            black_box(net.forward(&params, &mut state, data[i], None)[0])
        })
    });
}

fn learn(c: &mut Criterion) {
    for (name, rule) in [
        ("mamba1 learn sgd bptt1", "0..:train(opt=sgd)"),
        ("mamba1 learn adam bptt1", "0..:train(opt=adam)"),
        ("mamba1 learn adam bptt8", "0..:train(opt=adam,bptt=8)"),
    ] {
        let recipe = Recipe::default_for(ModelKind::Mamba1)
            .edit(rule, None)
            .unwrap();
        let mut p = predictor::build(&recipe, None).unwrap();
        let data = text();
        let mut i = 0;
        c.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % data.len();
                p.learn(data[i]);
                black_box(p.pdf()[0])
            })
        });
    }
}

criterion_group!(benches, forward, learn);
criterion_main!(benches);
