//! Measures lmzip's ratio and speed on files with a recipe given as `key=value` arguments, for
//! tuning defaults: `cargo run --release --example measure -- FILE [limit=N] [model=mamba1]
//! [hidden=N] [layers=N] [inner=N] [state=N] [conv=N] [lr=X] [opt=adam] [bptt=N] [clip=X]
//! [scope=...] [seed=N] [verify=1] [pdfs=1]`. Prints one line: file, bytes, bits per byte, compress KB/s, a hash of
//! the compressed bytes (to check that a speedup changed no bit), and the recipe.

use std::time::Instant;

use lmzip::recipe::{ModelConfig, ModelKind, OptimizerKind, Recipe};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args.first().expect("usage: measure FILE [key=value...]");
    let mut data = std::fs::read(file)?;
    let kv = |key: &str| {
        args.iter()
            .skip(1)
            .find_map(|a| a.strip_prefix(&format!("{key}=")).map(str::to_string))
    };
    if let Some(limit) = kv("limit") {
        data.truncate(limit.parse()?);
    }
    let kind = ModelKind::parse(&kv("model").unwrap_or_else(|| "mamba1".into()))?;
    let mut recipe = Recipe::default_for(kind);
    let hidden = kv("hidden").map(|v| v.parse()).transpose()?;
    let layers = kv("layers").map(|v| v.parse()).transpose()?;
    recipe.model.set_size(hidden, layers);
    match &mut recipe.model {
        ModelConfig::Mamba1(c) => {
            if let Some(v) = kv("inner") {
                c.inner = v.parse()?;
            }
            if let Some(v) = kv("state") {
                c.state = v.parse()?;
            }
            if let Some(v) = kv("dt_rank") {
                c.dt_rank = v.parse()?;
            }
            if let Some(v) = kv("conv") {
                c.conv = v.parse()?;
            }
        }
        ModelConfig::Rwkv7(c) => {
            if let Some(v) = kv("intermediate") {
                c.intermediate = v.parse()?;
            }
        }
    }
    let t = &mut recipe.training;
    if let Some(v) = kv("lr") {
        t.lr = v.parse()?;
    }
    if let Some(v) = kv("opt") {
        t.optimizer = OptimizerKind::parse(&v)?;
    }
    if let Some(v) = kv("bptt") {
        t.bptt = v.parse()?;
    }
    if let Some(v) = kv("clip") {
        t.clip = v.parse()?;
    }
    if let Some(v) = kv("scope") {
        t.scope = lmzip::params::Scope::parse(&v, kind.groups())?;
    }
    if let Some(v) = kv("seed") {
        recipe.seed = v.parse()?;
    }
    let start = Instant::now();
    let packed = lmzip::codec::compress_bytes(&recipe, &data)?;
    let secs = start.elapsed().as_secs_f64();
    let bpb = 8.0 * packed.len() as f64 / data.len().max(1) as f64;
    println!(
        "{file}\t{}\t{bpb:.4} bpb\t{:.2} KB/s\tfnv64 {:016x}\t{}",
        data.len(),
        data.len() as f64 / 1000.0 / secs,
        fnv1a64(&packed),
        recipe.to_json()
    );
    if kv("pdfs").is_some() {
        // Every bit of every distribution the coder saw: the strictest check that a speedup
        // changed nothing.
        let mut model = lmzip::predictor::build(&recipe)?;
        let mut h = fnv1a64(&[]);
        for &b in &data {
            for p in model.pdf() {
                h = fnv1a64_from(h, &p.to_bits().to_le_bytes());
            }
            model.learn(b);
        }
        println!("pdfs fnv64 {h:016x}");
    }
    if kv("verify").is_some() {
        let back = lmzip::codec::decompress_bytes(&packed)?;
        assert_eq!(back, data, "round trip failed");
        println!("verified");
    }
    Ok(())
}

/// FNV-1a over the whole stream. (Not CRC32: every part of a stream ends with its own CRC32, so a
/// CRC32 of the stream depends only on the parts' lengths and the trailer, not on the payload.)
fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_from(0xcbf2_9ce4_8422_2325, bytes)
}

fn fnv1a64_from(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
