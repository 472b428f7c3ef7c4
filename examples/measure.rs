//! Measures lmzip's ratio and speed on a file with a recipe, for tuning levels:
//! `cargo run --release --example measure -- FILE [limit=N] [model=mamba1] [level=N]
//! ['recipe=cfg:hidden=64 0..:train(lr=0.001,bptt=16)'] [verify=1]`. The recipe text edits the
//! level's recipe (docs/recipes.md). Prints one line: file, bytes, bits per byte, compress
//! KB/s, an FNV-1a hash of the stream (with `pdfs=1` also of every distribution: a speedup
//! must leave both unchanged), and the recipe.

use std::time::Instant;

use lmzip::recipe::ModelKind;

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
    let level = match kv("level") {
        Some(v) => v.parse()?,
        None => lmzip::levels::DEFAULT_LEVEL,
    };
    let mut recipe = lmzip::levels::recipe(kind, level);
    if let Some(text) = kv("recipe") {
        recipe = recipe.edit(&text, None)?;
    }
    let recipe = recipe.resolve(Some(data.len() as u64))?;
    let start = Instant::now();
    let packed = lmzip::codec::compress_bytes(&recipe, &data)?;
    let secs = start.elapsed().as_secs_f64();
    let bpb = 8.0 * packed.len() as f64 / data.len().max(1) as f64;
    println!(
        "{file}\t{}\t{bpb:.4} bpb\t{:.2} KB/s\tfnv64 {:016x}\t{recipe}",
        data.len(),
        data.len() as f64 / 1000.0 / secs,
        fnv1a64(0xcbf2_9ce4_8422_2325, &packed),
    );
    if kv("pdfs").is_some() {
        // Every bit of every distribution the coder saw: the strictest check that a speedup
        // changed nothing.
        let mut model = lmzip::predictor::build(&recipe, None)?;
        let mut h = 0xcbf2_9ce4_8422_2325;
        for &b in &data {
            for p in model.pdf() {
                h = fnv1a64(h, &p.to_bits().to_le_bytes());
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

/// FNV-1a, 64 bits, continued from `h`.
fn fnv1a64(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
