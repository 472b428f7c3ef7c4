//! Context inputs: besides the byte it reads, a network may read the rows of three hashed
//! context embeddings — the last two bytes, the last three, and the word so far — added to the
//! byte's embedding (Mamba-1's size `ctx`, docs/recipes.md).
//!
//! A small recurrent network has to hold its short contexts in its state; these rows hand them
//! to it directly, so the state is free for what the mixing stage's counters do not see. With
//! the stage, at the default level, 0.61% fewer bytes over five files of four kinds for about 7%
//! more time (docs/experiments.md, 2026-12-03, "Context inputs").
//!
//! The hashes are integer arithmetic on the bytes; what they need of the past (two bytes and
//! the word's hash) lives in the network's state as exact small integers in `f32`, so a replay
//! from a segment's start state and a resumed stream see the same rows.

/// Floats of state the contexts keep: the two bytes before the input and the word's hash.
pub const HISTORY: usize = 3;

/// Hashed context tables (order 2, order 3, the word so far).
pub const TABLES: usize = 3;

/// Accepted sizes: 2^MIN_BITS to 2^MAX_BITS rows per table (0 = no context inputs).
pub const MIN_BITS: usize = 8;
pub const MAX_BITS: usize = 20;

/// The word hash keeps 24 bits, so that it is an exact integer in an `f32`.
const WORD_MASK: u32 = 0xFF_FFFF;

/// The context tables of a network: `TABLES` tables of `2^bits` rows each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextInputs {
    bits: u32,
}

impl ContextInputs {
    /// The inputs for the size key `ctx` (log2 rows per table), none for 0.
    pub fn new(ctx: usize) -> Option<Self> {
        (ctx > 0).then_some(ContextInputs { bits: ctx as u32 })
    }

    /// Rows of all tables together.
    pub fn rows(self) -> usize {
        TABLES << self.bits
    }

    /// The rows (in the tables laid end to end) of the contexts that end with `token`, given
    /// the `history` before it; advances the history past `token`.
    pub fn rows_of(self, history: &mut [f32], token: u8) -> [usize; TABLES] {
        let (b1, b2, word) = (history[0] as u32, history[1] as u32, history[2] as u32);
        let t = token as u32;
        // Letters (ASCII, case folded, and every byte of a UTF-8 sequence) extend the word;
        // anything else ends it.
        let letter = token.is_ascii_alphabetic() || token >= 0x80;
        let word = if letter {
            (word.wrapping_mul(0x2F0B_5A1D) ^ (t | 0x20)).wrapping_add(t | 0x20) & WORD_MASK
        } else {
            0
        };
        let keys = [
            (1u64 << 40) | u64::from(b1 << 8 | t),
            (2u64 << 40) | u64::from(b2 << 16 | b1 << 8 | t),
            (3u64 << 40) | u64::from(word),
        ];
        history[0] = t as f32;
        history[1] = b1 as f32;
        history[2] = word as f32;
        let mut rows = [0; TABLES];
        for (i, key) in keys.into_iter().enumerate() {
            // Fibonacci hashing: the top bits of the product spread every input bit.
            let h = key.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits);
            rows[i] = (i << self.bits) + h as usize;
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_over(ctx: &ContextInputs, text: &[u8]) -> Vec<[usize; TABLES]> {
        let mut history = [0.0; HISTORY];
        text.iter().map(|&b| ctx.rows_of(&mut history, b)).collect()
    }

    #[test]
    fn rows_fall_in_their_tables() {
        let ctx = ContextInputs::new(8).unwrap();
        assert_eq!(ctx.rows(), 768);
        let text: Vec<u8> = (0..=255u8)
            .chain(b"Hello, hello world".iter().copied())
            .collect();
        for rows in rows_over(&ctx, &text) {
            for (i, r) in rows.into_iter().enumerate() {
                assert!((i << 8..(i + 1) << 8).contains(&r), "table {i}: row {r}");
            }
        }
    }

    #[test]
    fn the_same_context_gives_the_same_rows_and_words_fold_case() {
        let ctx = ContextInputs::new(12).unwrap();
        let rows = rows_over(&ctx, b"xabc yabc Zabc zABC");
        // "abc" after a letter and after a space: the order-2 and order-3 rows of 'c' agree
        // where the two bytes before agree.
        assert_eq!(rows[3][0], rows[8][0]);
        assert_eq!(rows[3][1], rows[8][1]);
        // The word "zabc" and "zABC" are one word; "yabc" another.
        assert_eq!(rows[13][2], rows[18][2]);
        assert_ne!(rows[8][2], rows[13][2]);
        // A space ends the word: the same row whatever came before.
        assert_eq!(rows[4][2], rows[9][2]);
    }

    #[test]
    fn the_history_is_exact_in_f32() {
        let ctx = ContextInputs::new(10).unwrap();
        let mut history = [0.0; HISTORY];
        let long_word = vec![b'q'; 10_000];
        for &b in &long_word {
            ctx.rows_of(&mut history, b);
            assert!(history[2] < (1 << 24) as f32 && history[2].fract() == 0.0);
        }
        assert_eq!(&history[..2], &[b'q' as f32, b'q' as f32]);
    }

    #[test]
    fn no_tables_for_zero() {
        assert!(ContextInputs::new(0).is_none());
    }
}
