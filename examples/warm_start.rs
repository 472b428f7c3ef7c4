//! Learns a warm start for the stage's mixer (src/mix/warm.rs) from a corpus of documents:
//! `cargo run --release --example warm_start -- CORPUS OUT [bytes=2500000] [level=3] [min=1000]
//! [max=20000] [all=0] [avg=N] [young=0]`, where CORPUS is the prior's training file (documents separated
//! by NUL bytes, docs/prior.md); `scripts/warm-start.sh` runs it.
//!
//! The documents of `min` to `max` bytes that look like text ([`lmzip::prior::suits`]; with
//! `all=1`, every one) are ordered by a hash of their bytes (a fixed shuffle) and taken until
//! `bytes`; each is coded as lmzip codes a file of its length at the level (sized for it,
//! starting from the level's prior), its mixer starting from the weights the one before ended
//! with. The start is the average of the weights each of the last `avg` documents ended with
//! (by default all of them; `avg=0`, the last document's). OUT gets it in the stored form, and
//! the SHA-256 to pin is printed. The same corpus gives the same bytes. The mixer learns as
//! numerics 7's did, without young weight sets (`mix:young=0`), as `mixtext1` was learned;
//! `young=1` learns with them.

use sha2::{Digest, Sha256};

use lmzip::codec::{self, Options};
use lmzip::recipe::ModelKind;

/// The documents' sizes: small inputs are what a warm start is for. Over the sixteen small
/// corpus files, 1–20 KB did 0.06% better than 2–60 KB, 2.5 MB 0.08% better than 5 MB, and the
/// average over every document 0.28% better than the last weights (docs/experiments.md, "The
/// stage's warm start").
const SIZES: std::ops::RangeInclusive<usize> = 1_000..=20_000;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [corpus, out, rest @ ..] = &args[..] else {
        anyhow::bail!(
            "usage: warm_start CORPUS OUT [bytes=N] [level=N] [min=N] [max=N] [all=1] [avg=N] \
             [young=1]"
        );
    };
    let kv = |key: &str| {
        rest.iter()
            .find_map(|a| a.strip_prefix(&format!("{key}=")).map(str::to_string))
    };
    let budget: usize = kv("bytes").map_or(Ok(2_500_000), |v| v.parse())?;
    let min: usize = kv("min").map_or(Ok(*SIZES.start()), |v| v.parse())?;
    let max: usize = kv("max").map_or(Ok(*SIZES.end()), |v| v.parse())?;
    let all = kv("all").is_some_and(|v| v == "1");
    // The start is the average of the weights the last `avg` documents ended with (0: the last
    // ones; by default every document's).
    let avg: Option<usize> = kv("avg").map(|v| v.parse()).transpose()?;
    let young = kv("young").is_some_and(|v| v == "1") as u8;
    let level: u8 = kv("level").map_or(Ok(lmzip::levels::DEFAULT_LEVEL), |v| v.parse())?;
    let corpus = std::fs::read(corpus)?;

    let mut docs: Vec<(u64, &[u8])> = corpus
        .split(|&b| b == 0)
        .filter(|d| (min..=max).contains(&d.len()) && (all || lmzip::prior::suits(d)))
        .map(|d| (fnv1a(d), d))
        .collect();
    docs.sort();
    let mut taken = 0;
    docs.retain(|(_, d)| {
        let keep = taken < budget;
        taken += d.len() * keep as usize;
        keep
    });

    // The level's recipe without a warm start: the weights are carried by hand.
    let level_recipe = lmzip::levels::recipe(ModelKind::Mamba1, level)
        .edit(&format!("mix:warm=0,young={young}"), None)?;
    let avg = avg.unwrap_or(docs.len());
    let mut weights: Option<lmzip::mix::warm::MixerWeights> = None;
    let mut sums: Option<(Vec<Vec<i64>>, Vec<i64>)> = None;
    let started = std::time::Instant::now();
    for (i, (_, doc)) in docs.iter().enumerate() {
        let recipe = lmzip::fit::fitted(&level_recipe, doc.len() as u64);
        weights = Some(codec::mixer_after(
            &recipe,
            &Options::default(),
            doc,
            weights.as_ref(),
        )?);
        if i + avg >= docs.len()
            && avg > 0
            && let Some(w) = &weights
        {
            let (first, last) = sums.get_or_insert_with(|| {
                let first = w.first.iter().map(|s| vec![0; s.len()]).collect();
                (first, vec![0; w.last.len()])
            });
            for (sum, set) in first.iter_mut().zip(&w.first) {
                sum.iter_mut().zip(set).for_each(|(a, &b)| *a += b as i64);
            }
            last.iter_mut()
                .zip(&w.last)
                .for_each(|(a, &b)| *a += b as i64);
        }
        if (i + 1) % 50 == 0 {
            eprintln!(
                "{} documents, {:.0} s",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let Some(mut weights) = weights else {
        anyhow::bail!("no document of {min} to {max} bytes that looks like text");
    };
    if let Some((first, last)) = sums {
        let n = avg.min(docs.len()) as i64;
        let mean = |s: &i64| (s + n / 2).div_euclid(n) as i32;
        for (set, sum) in weights.first.iter_mut().zip(&first) {
            set.iter_mut().zip(sum).for_each(|(w, s)| *w = mean(s));
        }
        weights
            .last
            .iter_mut()
            .zip(&last)
            .for_each(|(w, s)| *w = mean(s));
    }
    // Selectors whose sets the start leaves at their starting weights (a smaller start).
    if let Some(list) = kv("drop") {
        for k in list.split(',') {
            let k: usize = k.parse()?;
            let init = weights.shape.init.clone();
            for set in weights.first[k].chunks_mut(init.len()) {
                set.copy_from_slice(&init);
            }
        }
    }
    let bytes = weights.to_bytes();
    std::fs::write(out, &bytes)?;
    let sha: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!(
        "{} documents, {taken} bytes; {} bytes written to {out}, sha256 {sha}",
        docs.len(),
        bytes.len()
    );
    Ok(())
}

/// FNV-1a over the document: the fixed order the documents are learned in.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
