//! Deterministic sample inputs. `text` and `binary` also make the golden input
//! (tests/golden_files.rs): changing them changes what `regenerate_golden_files` writes.

/// The inputs that break compressors, as `(name, bytes)`: empty, one byte, all 256 byte
/// values, a long run, 64 KiB of random bytes and text. Every model and training mode
/// round-trips these through the library (tests/roundtrip.rs).
pub fn samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", Vec::new()),
        ("one byte", vec![0x5a]),
        ("all 256 values", (0..=255u8).collect()),
        ("long run", vec![b'a'; 20_000]),
        ("random 64 KiB", random(64 * 1024, 0x1234_5678)),
        ("text", text(6000)),
    ]
}

/// The same kinds of input, shorter: for matrices that multiply them by more (the mixing
/// stage's) and for runs of the binary, where each input costs a process.
pub fn short_samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", Vec::new()),
        ("one byte", vec![0x5a]),
        ("all 256 values", (0..=255u8).collect()),
        ("long run", vec![b'a'; 5000]),
        ("random 4 KiB", random(4 * 1024, 0x1234_5678)),
        ("text", text(3000)),
    ]
}

/// English-like text with a small vocabulary, so that a model has something to learn.
pub fn text(n: usize) -> Vec<u8> {
    let words = [
        "the",
        "model",
        "learns",
        "each",
        "byte",
        "as",
        "it",
        "comes,",
        "and",
        "a",
        "range",
        "coder",
        "spends",
        "few",
        "bits",
        "on",
        "what",
        "it",
        "expected.\n",
    ];
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0usize;
    while out.len() < n {
        out.extend_from_slice(words[(i * 7 + i / 19) % words.len()].as_bytes());
        out.push(b' ');
        i += 1;
    }
    out.truncate(n);
    out
}

/// Text from the vocabulary of [`text`] in an order that `seed` picks: two seeds give related
/// texts (the same words, other sentences), so that a model learnt on one primes the other.
pub fn related_text(n: usize, seed: u64) -> Vec<u8> {
    let words = [
        "the ",
        "model ",
        "learns ",
        "each ",
        "byte ",
        "as ",
        "it ",
        "comes, ",
        "and ",
        "a ",
        "range ",
        "coder ",
        "spends ",
        "few ",
        "bits ",
        "on ",
        "what ",
        "it ",
        "expected.\n",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(words[(state % words.len() as u64) as usize].as_bytes());
    }
    out.truncate(n);
    out
}

/// Binary records like those of a file format: a counter, a slowly moving value, a flag byte
/// and a noisy byte (xorshift), little-endian.
pub fn binary(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0u32;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&i.to_le_bytes());
        out.extend_from_slice(&((1000 + i * 3) as u16).to_le_bytes());
        out.push(if i.is_multiple_of(5) { 0xff } else { 0 });
        out.push((x >> 56) as u8);
        i += 1;
    }
    out.truncate(n);
    out
}

/// Bytes with no structure a model could learn (xorshift64).
pub fn random(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}
