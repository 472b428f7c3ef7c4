//! Times the mixing stage alone, without a network: `cargo run --release --example stage_speed
//! -- FILE... [runs=N]`. A cheap stand-in network (adaptive order-0 counts, quantised like the
//! coder's table) feeds the default stage; per file it prints the stage's µs per byte (best of
//! the runs) and an FNV-1a hash of every bit probability, which a speedup must leave unchanged.

use std::time::Instant;

use lmzip::mix::{MixSpec, Stage};

/// The stand-in network's cumulative table: order-0 counts, every share at least 1.
fn cdf_of(counts: &[u32; 256], cdf: &mut [u32]) {
    cdf[0] = 0;
    for s in 0..256 {
        cdf[s + 1] = cdf[s] + counts[s];
    }
}

/// Runs the stage over `data`; returns the seconds taken and the hash of its probabilities.
fn run(data: &[u8]) -> (f64, u64) {
    let mut stage = Stage::new(&MixSpec::DEFAULT).expect("the stage's tables");
    let mut counts = [1u32; 256];
    let mut cdf = vec![0u32; 257];
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let start = Instant::now();
    for &b in data {
        cdf_of(&counts, &mut cdf);
        stage.set_network(&cdf);
        for k in 0..8 {
            let bit = ((b >> (7 - k)) & 1) as u32;
            let p = stage.p();
            h = (h ^ p as u64).wrapping_mul(0x100_0000_01b3);
            stage.update(bit);
        }
        counts[b as usize] += 32;
    }
    (start.elapsed().as_secs_f64(), h)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("runs="))
        .map_or(Ok(3), str::parse)?;
    for file in args.iter().filter(|a| !a.contains('=')) {
        let data = std::fs::read(file)?;
        let mut best = f64::MAX;
        let mut hash = 0;
        for _ in 0..runs {
            let (t, h) = run(&data);
            best = best.min(t);
            hash = h;
        }
        println!(
            "{file}\t{:.2} µs/byte\t{hash:016x}",
            best * 1e6 / data.len() as f64
        );
    }
    Ok(())
}
