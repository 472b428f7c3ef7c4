//! Context statistics: for each context (the last N bytes, or the current word), the chance
//! that the next bit is 1, kept in an adaptive counter per (context, bits of the byte so far).
//!
//! A counter is one `u32`: a 16-bit probability, an 8-bit check taken from the context's hash
//! (so that a slot another context claimed reads as unseen instead of as someone else's
//! statistics), a 5-bit count of updates, two recent bits and a flag set once both bits have
//! been seen. The probability moves toward each bit by `1 / (count + 1.5)`, so the first
//! updates average the bits seen (a context seen once predicts its bit at about 0.83) and later
//! ones follow a moving average of `LIMIT` bits; a table with a long memory
//! ([`CounterTable::long_memory`], `mix:long`) slows faster after [`LONG_FROM`] updates, to a
//! moving average of about 136 bits, which suits the contexts seen often enough to be steady.
//! The flag only feeds the confidence maps (`mix:conf=1`): a context that has always been
//! followed by the same bit is a stronger hint than its probability says.
//!
//! A table finds the counter of each bit of a byte by hashing the context with the bits so far,
//! so every bit reads its own cache line; with `mix:nibble=1` ([`CounterTable::in_lines`]) the
//! four bits of a nibble share one line (the line by the context and the nibble so far, the
//! place in it by the bit's node in the nibble's tree), and a byte reads two lines per table.

use std::io;

use super::logistic::stretch;
use super::slots::Slots;

/// Updates after which a counter adapts at its slowest rate, `1 / (LIMIT + 1.5)`, in a table
/// with a short memory.
const LIMIT: u32 = 30;
/// The count's bits in the low byte of a slot (a count never exceeds [`LONG_LIMIT`]); bits 5 and 6
/// hold the context's last two bits in a table that keeps them ([`CounterTable::keep_recent`],
/// zero otherwise); the top bit is the mixed-history flag.
const COUNT_MASK: u32 = 0x1f;
const RECENT_SHIFT: u32 = 5;
const MIXED: u32 = 0x80;
/// A fresh counter: probability one half, count 0.
const FRESH_P: u32 = 1 << 15;

/// `65536 / (n + 1.5)` for each count `n`: the step toward the bit, in 1/65536.
const fn rate(n: u32) -> i64 {
    let r = 131_072 / (2 * n as i64 + 3);
    if r > 1 { r } else { 1 }
}

/// The most a slot's count holds: the count's bits ([`COUNT_MASK`]).
const LONG_LIMIT: u32 = COUNT_MASK;
/// Updates after which a table with a long memory slows faster: each later update counts as
/// [`LONG_STEP`] (measured on text, code and binaries: docs/experiments.md, numerics 17).
const LONG_FROM: u32 = 16;
const LONG_STEP: u32 = 8;

/// [`rate`] of every count a slot holds, so that an update divides nothing: in a table with a
/// short memory the count itself (which stops at [`LIMIT`]).
const RATES: [i64; LONG_LIMIT as usize + 1] = {
    let mut t = [0; LONG_LIMIT as usize + 1];
    let mut n = 0;
    while n <= LONG_LIMIT {
        t[n as usize] = rate(n);
        n += 1;
    }
    t
};

/// [`RATES`] of a table with a long memory: up to [`LONG_FROM`] the count, then
/// [`LONG_STEP`] more per update, to `1 / 137.5` at [`LONG_LIMIT`].
const LONG_RATES: [i64; LONG_LIMIT as usize + 1] = {
    let mut t = [0; LONG_LIMIT as usize + 1];
    let mut n = 0;
    while n <= LONG_LIMIT {
        t[n as usize] = match n <= LONG_FROM {
            true => rate(n),
            false => rate(LONG_FROM + (n - LONG_FROM) * LONG_STEP),
        };
        n += 1;
    }
    t
};

/// Slots in a cache line (64 bytes): a nibble's counters, in a table [`CounterTable::in_lines`].
const LINE: usize = 16;

/// One table of counters addressed by hashes.
pub struct CounterTable {
    slots: Slots,
    bits: u32,
    /// Two-way: a context may sit in its slot or the one beside it (index ^ 1); a new context
    /// takes the one of the pair with fewer updates (`mix:ways=2`).
    pair: bool,
    /// Each slot keeps its context's last two bits (`ext` 512), for the confidence maps.
    recent: bool,
    /// The counters of a context's nibble sit in one cache line (`mix:nibble`,
    /// [`CounterTable::in_lines`]).
    lines: bool,
    /// The step toward a bit by the count ([`RATES`], or [`LONG_RATES`] for `mix:long`), and
    /// the count's limit.
    rates: &'static [i64; LONG_LIMIT as usize + 1],
    limit: u32,
}

/// Where the counter of a hash sits: its slot and check byte, found once per bit by
/// [`CounterTable::find`] and used by both [`CounterTable::get_at`] and
/// [`CounterTable::update_at`] (nothing else writes the table in between, so a two-way table
/// would choose the same way again).
#[derive(Clone, Copy, Debug, Default)]
pub struct Position {
    index: usize,
    check: u32,
}

/// What a counter knows of its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// 12-bit probability that the next bit is 1.
    pub p: i32,
    /// Updates seen, up to the table's limit.
    pub n: u32,
    /// Every update so far was the same bit.
    pub deterministic: bool,
    /// The last two bits seen in the context, the latest lowest (the ones seen, with `n` < 2;
    /// 0 in a table that does not keep them).
    pub recent: u32,
}

impl CounterTable {
    /// A table of `2^bits` counters.
    pub fn new(bits: u32) -> io::Result<Self> {
        Ok(CounterTable {
            slots: Slots::zeroed(1usize << bits)?,
            bits,
            pair: false,
            recent: false,
            lines: false,
            rates: &RATES,
            limit: LIMIT,
        })
    }

    /// The table with a long memory (`mix:long`): counts go on to [`LONG_LIMIT`] and each past
    /// [`LONG_FROM`] slows the counter as [`LONG_STEP`] updates would ([`LONG_RATES`]).
    pub fn long_memory(self) -> Self {
        CounterTable {
            rates: &LONG_RATES,
            limit: LONG_LIMIT,
            ..self
        }
    }

    /// The table with each slot keeping its context's last two bits ([`Counter::recent`]).
    pub fn keep_recent(self) -> Self {
        CounterTable {
            recent: true,
            ..self
        }
    }

    /// The table with the counters of each context's nibble in one cache line: a context's bits
    /// are found by [`CounterTable::find_bit`], which then reads two lines per byte (one per
    /// nibble) instead of eight. Each counter keeps its own check byte, and a two-way table
    /// pairs a slot with the same slot of the neighbouring line (both lines of an aligned
    /// 128 bytes), so that the counters of one nibble never compete for a pair. The stage's
    /// tables have at least 2^11 counters, so at least two lines.
    pub fn in_lines(self) -> Self {
        assert!(self.bits >= 5, "a table of lines has two lines or more");
        CounterTable {
            lines: true,
            ..self
        }
    }

    /// A two-way table of `2^bits` counters (see the field `pair`).
    pub fn two_way(bits: u32) -> io::Result<Self> {
        Ok(CounterTable {
            pair: true,
            ..Self::new(bits)?
        })
    }

    /// The slot of a two-way table holding `check` at `i` or at its partner `j`, or the one
    /// to claim for it.
    fn way(&self, i: usize, j: usize, check: u32) -> (usize, bool) {
        let holds = |j: usize| {
            let s = self.slots.get(j);
            (s >> 8) & 0xff == check && s & COUNT_MASK > 0
        };
        if holds(i) {
            (i, true)
        } else if holds(j) {
            (j, true)
        } else if self.slots.get(j) & COUNT_MASK < self.slots.get(i) & COUNT_MASK {
            (j, false)
        } else {
            (i, false)
        }
    }

    /// The slot index and check byte of a 32-bit hash.
    fn locate(&self, hash: u32) -> (usize, u32) {
        let index = (hash >> (32 - self.bits)) as usize;
        let check = (hash >> (24 - self.bits.min(24))) & 0xff;
        (index, check)
    }

    /// The slot of the counter for `hash` (see [`Position`]).
    pub fn find(&self, hash: u32) -> Position {
        let (i, check) = self.locate(hash);
        self.position(i, i ^ 1, check)
    }

    /// Where the counter of `check` sits: at slot `i`, or in a two-way table at `i` or its
    /// `partner` ([`CounterTable::way`]).
    fn position(&self, i: usize, partner: usize, check: u32) -> Position {
        let index = if self.pair {
            self.way(i, partner, check).0
        } else {
            i
        };
        Position { index, check }
    }

    /// The slot of the counter for the bits `c0` of the byte so far (after a leading 1) in
    /// the context hashed `context`: [`CounterTable::find`] of [`with_partial`], or in a table
    /// [`CounterTable::in_lines`], its place in the line of the context's nibble.
    #[inline]
    pub fn find_bit(&self, context: u32, c0: u32) -> Position {
        let bit_hash = with_partial(context, c0);
        if !self.lines {
            return self.find(bit_hash);
        }
        let (nibble, node) = nibble_node(c0);
        let nibble_hash = with_partial(context, nibble);
        // The nodes of the nibble's tree at distinct places of the line, turned by the hash.
        let turn = nibble_hash as usize & (LINE - 1);
        let i = self.line(nibble_hash) + ((node + turn) & (LINE - 1));
        // Bits apart from the line's, so that the nodes of one line tell their contexts apart.
        let check = (bit_hash >> 8) & 0xff;
        self.position(i, i ^ LINE, check)
    }

    /// The first slot of the line of a nibble hashed `nibble_hash`.
    fn line(&self, nibble_hash: u32) -> usize {
        ((nibble_hash >> (32 - (self.bits - 4))) as usize) * LINE
    }

    /// Asks the memory system for what [`CounterTable::find_bit`] of `context` and `c0` will
    /// read (see [`prefetch`]). In a table [`CounterTable::in_lines`] only the first bit of a
    /// nibble asks: the line is in the cache for the other three.
    #[inline]
    pub fn prefetch_bit(&self, context: u32, c0: u32) {
        if !self.lines {
            return self.prefetch(with_partial(context, c0));
        }
        let (nibble, node) = nibble_node(c0);
        if node == 1 {
            let line = self.line(with_partial(context, nibble));
            prefetch(self.slots.byte(line));
            if self.pair {
                prefetch(self.slots.byte(line ^ LINE));
            }
        }
    }

    /// The counter for `hash`: its 12-bit probability and count, or `None` if the slot holds
    /// another context (or none yet).
    pub fn get(&self, hash: u32) -> Option<Counter> {
        self.get_at(self.find(hash))
    }

    /// [`CounterTable::get`] of a hash found at `at`.
    pub fn get_at(&self, at: Position) -> Option<Counter> {
        let Position { index: i, check } = at;
        let s = self.slots.get(i);
        let n = s & COUNT_MASK;
        ((s >> 8) & 0xff == check && n > 0).then_some(Counter {
            p: (s >> 20) as i32,
            n,
            deterministic: s & MIXED == 0,
            recent: (s >> RECENT_SHIFT) & 3,
        })
    }

    /// Asks the memory system for the slot of `hash` before it is read (see [`prefetch`]).
    pub fn prefetch(&self, hash: u32) {
        // Both ways of a pair share a cache line (`i ^ 1` is the neighbouring `u32`).
        prefetch(self.slots.byte(self.locate(hash).0));
    }

    /// Moves the counter for `hash` toward `bit`, claiming the slot if another context held it.
    pub fn update(&mut self, hash: u32, bit: u32) {
        self.update_at(self.find(hash), bit)
    }

    /// [`CounterTable::update`] of a hash found at `at`, before any other write to the table.
    pub fn update_at(&mut self, at: Position, bit: u32) {
        let Position { index: i, check } = at;
        let s = self.slots.get(i);
        let (p, n, mixed, recent) = if (s >> 8) & 0xff == check && s & COUNT_MASK > 0 {
            (s >> 16, s & COUNT_MASK, s & MIXED, (s >> RECENT_SHIFT) & 3)
        } else {
            (FRESH_P, 0, 0, 0)
        };
        let recent = match self.recent {
            true => ((recent << 1 | bit) & 3) << RECENT_SHIFT,
            false => 0,
        };
        // A deterministic history leans toward its bit: another bit makes it mixed.
        let mixed = if n > 0 && (p >= FRESH_P) != (bit == 1) {
            MIXED
        } else {
            mixed
        };
        let target = if bit == 1 { 65535i64 } else { 0 };
        let p = (p as i64 + (((target - p as i64) * self.rates[n as usize]) >> 16)).clamp(1, 65535)
            as u32;
        self.slots.set(
            i,
            (p << 16) | (check << 8) | mixed | recent | (n + 1).min(self.limit),
        );
    }
}

/// The inputs a counter gives the mixer: its stretched probability, and the same scaled by
/// how sure the count makes it (0 for an unseen context).
pub fn inputs(counter: Option<Counter>) -> [i32; 2] {
    match counter {
        None => [0, 0],
        Some(Counter { p, n, .. }) => {
            let st = stretch(p);
            let confidence = n.min(15) as i32;
            [st, (st * confidence) >> 4]
        }
    }
}

/// Starts loading the cache line of `x` without waiting for it: the stage's tables are far
/// larger than the caches, and each bit reads a random slot of every table, so loading the
/// next bit's slots while the current bit is mixed and coded hides most of the misses. Only
/// a hint: no value read or written depends on it.
#[inline]
pub fn prefetch<T>(x: &T) {
    // SAFETY: a prefetch reads nothing into the program and never faults; SSE, which it
    // needs, is part of every x86_64 target.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<{ _MM_HINT_T0 }>((x as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Hash of a context with a salt (which order, which model): spreads nearby values over all
/// 32 bits.
pub fn hash(value: u64, salt: u32) -> u32 {
    let x = (value ^ ((salt as u64) << 56))
        .wrapping_add(salt as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 32) as u32
}

/// The nibble of the bits `c0` of the byte so far (after a leading 1) that a table
/// [`CounterTable::in_lines`] hashes with the context: 1 in the first nibble, the leading 1
/// and the first four bits in the second; and the place of `c0` in that nibble's tree of bits
/// (1 for its first bit, 2–3 for the second, 4–7, 8–15).
#[inline]
pub fn nibble_node(c0: u32) -> (u32, usize) {
    let known = 31 - c0.leading_zeros();
    if known < 4 {
        (1, c0 as usize)
    } else {
        let k = known - 4;
        (c0 >> k, ((1 << k) | (c0 & ((1 << k) - 1))) as usize)
    }
}

/// A context hash combined with the bits of the current byte so far (`c0`, 1 to 255: a
/// leading 1, then the bits).
pub fn with_partial(context: u32, c0: u32) -> u32 {
    let x = (context ^ c0.wrapping_mul(0x2F0B_3C47)).wrapping_mul(0x9E37_79B1);
    x ^ (x >> 15)
}

#[cfg(test)]
mod tests {
    use super::super::spec::MixSpec;
    use super::super::tests_support::{cost, lcg, plain};
    use super::*;

    #[test]
    fn a_counter_keeps_its_contexts_last_two_bits_when_asked() {
        let mut t = CounterTable::new(10).unwrap().keep_recent();
        let ctx = with_partial(hash(9, 1), 1);
        for (bit, recent) in [(1, 1), (1, 3), (0, 2), (1, 1), (0, 2), (0, 0)] {
            t.update(ctx, bit);
            assert_eq!(t.get(ctx).unwrap().recent, recent);
        }
        assert_eq!(t.get(ctx).unwrap().n, 6, "the count is kept beside them");
        let mut plain = CounterTable::new(10).unwrap();
        plain.update(ctx, 1);
        assert_eq!(plain.get(ctx).unwrap().recent, 0);
    }

    /// After each `a` comes `x`, `x`, `y`, `y` in turn (other bytes random, never `a`): the
    /// average after `a` is even, the last two bits say what comes.
    #[test]
    fn the_confidence_maps_read_the_last_two_bits() {
        let mut next = lcg(8);
        let mut data = Vec::new();
        for i in 0..6000 {
            data.push(b'a');
            data.push([b'x', b'x', b'y', b'y'][i % 4]);
            data.push(b'b' + (next() % 8) as u8);
        }
        let conf = MixSpec {
            conf: true,
            ..plain()
        };
        let recent = MixSpec {
            recent: true,
            ..conf
        };
        let (with, without) = (cost(&recent, &data), cost(&conf, &data));
        assert!(with < 0.97 * without, "{with} vs {without}");
    }

    #[test]
    fn a_counter_learns_its_context_and_forgets_a_stranger() {
        let mut t = CounterTable::new(10).unwrap();
        let ctx = with_partial(hash(42, 1), 1);
        assert_eq!(t.get(ctx), None);
        let mut last = 2048;
        for k in 0..20 {
            t.update(ctx, 1);
            let Counter {
                p,
                n,
                deterministic,
                ..
            } = t.get(ctx).unwrap();
            assert_eq!(n, k + 1);
            assert!(deterministic);
            assert!(p > last || p >= 4090, "confidence rises: {p} after {last}");
            last = p;
        }
        assert!(last > 3900, "{last}");
        // The same slot with another check byte reads as unseen.
        let (i, check) = t.locate(ctx);
        let other = (0u64..)
            .map(|v: u64| with_partial(hash(v, 1), 1))
            .find(|&h| t.locate(h).0 == i && t.locate(h).1 != check)
            .unwrap();
        assert_eq!(t.get(other), None);
        t.update(other, 0);
        assert_eq!(t.get(ctx), None);
        assert!(t.get(other).unwrap().p < 1024);
    }

    #[test]
    fn a_counter_knows_whether_its_history_was_deterministic() {
        let mut t = CounterTable::new(10).unwrap();
        let ctx = with_partial(hash(7, 2), 1);
        for _ in 0..5 {
            t.update(ctx, 0);
            assert!(t.get(ctx).unwrap().deterministic);
        }
        t.update(ctx, 1);
        assert!(!t.get(ctx).unwrap().deterministic);
        // Mixed stays mixed, and the count goes on to its limit.
        for _ in 0..200 {
            t.update(ctx, 0);
        }
        let c = t.get(ctx).unwrap();
        assert!(!c.deterministic);
        assert_eq!(c.n, LIMIT);
    }

    #[test]
    fn a_long_memory_follows_the_short_one_for_sixteen_updates_then_moves_less() {
        let (mut short, mut long) = (
            CounterTable::new(10).unwrap(),
            CounterTable::new(10).unwrap().long_memory(),
        );
        let ctx = with_partial(hash(9, 4), 1);
        let bits = |k: u32| k.is_multiple_of(5) as u32;
        for k in 0..LONG_FROM {
            short.update(ctx, bits(k));
            long.update(ctx, bits(k));
            assert_eq!(short.get(ctx), long.get(ctx), "update {k}");
        }
        for k in LONG_FROM..200 {
            short.update(ctx, bits(k));
            long.update(ctx, bits(k));
        }
        let (s, l) = (short.get(ctx).unwrap(), long.get(ctx).unwrap());
        assert_eq!((s.n, l.n), (LIMIT, LONG_LIMIT));
        // One bit against the history moves the long memory about a quarter as far.
        short.update(ctx, 1);
        long.update(ctx, 1);
        let (s2, l2) = (short.get(ctx).unwrap(), long.get(ctx).unwrap());
        assert!(s2.p - s.p > 3 * (l2.p - l.p), "{s:?} {s2:?} {l:?} {l2:?}");
        assert!(l2.p > l.p);
    }

    #[test]
    fn a_two_way_table_keeps_two_contexts_that_share_a_slot() {
        let mut one = CounterTable::new(10).unwrap();
        let mut two = CounterTable::two_way(10).unwrap();
        let a = with_partial(hash(1, 3), 1);
        let (i, check) = one.locate(a);
        let b = (0u64..)
            .map(|v: u64| with_partial(hash(v, 3), 1))
            .find(|&h| one.locate(h).0 == i && one.locate(h).1 != check)
            .unwrap();
        for _ in 0..10 {
            for t in [&mut one, &mut two] {
                t.update(a, 1);
                t.update(b, 0);
            }
        }
        // One way: each evicts the other. Two ways: both keep their statistics.
        assert_eq!(one.get(a), None);
        assert!(two.get(a).unwrap().p > 3500);
        assert!(two.get(b).unwrap().p < 600);
        // A third context takes the less used slot of the pair.
        for _ in 0..3 {
            two.update(a, 1);
        }
        let c = (0u64..)
            .map(|v: u64| with_partial(hash(v, 4), 1))
            .find(|&h| two.locate(h).0 == i && two.locate(h).1 != check)
            .unwrap();
        two.update(c, 1);
        assert!(two.get(a).is_some() && two.get(c).is_some() && two.get(b).is_none());
    }

    /// Each bit of a byte has its own node in its nibble's tree, the first bit of a nibble
    /// node 1; the first nibble hashes as one key, the second by the first four bits.
    #[test]
    fn the_bits_of_a_byte_are_distinct_nodes_of_two_nibbles() {
        let mut seen = std::collections::HashSet::new();
        for c0 in 1u32..=255 {
            let (nibble, node) = nibble_node(c0);
            assert!((1..LINE).contains(&node), "{c0}");
            assert!(seen.insert((nibble, node)), "{c0}");
            let known = 31 - c0.leading_zeros();
            assert_eq!(nibble == 1, known < 4, "{c0}");
            assert_eq!(node == 1, known == 0 || known == 4, "{c0}");
        }
        // A leading 1, the first nibble 0110, then three bits 101 of the second.
        assert_eq!(nibble_node(0b1011_0101), (0b10110, 0b1101));
    }

    /// In a two-way table of lines, the four bits of each nibble of a context read one pair
    /// of cache lines (a slot's partner is a line over), and every counter learns its bits.
    #[test]
    fn a_table_of_lines_reads_one_line_per_nibble_and_learns_each_bit() {
        let mut lines = CounterTable::two_way(12).unwrap().in_lines();
        let mut next = lcg(3);
        let contexts: Vec<u32> = (0..40).map(|v| hash(v, 5)).collect();
        for _ in 0..30 {
            for &context in &contexts {
                let byte = (next() % 256) | 0x100;
                for bit_index in 0..8 {
                    let c0 = byte >> (8 - bit_index);
                    let bit = (byte >> (7 - bit_index)) & 1;
                    let at = lines.find_bit(context, c0);
                    let first = lines.find_bit(context, c0 >> (bit_index % 4));
                    let pair = |at: Position| at.index / (2 * LINE);
                    assert_eq!(pair(at), pair(first), "one pair of lines per nibble");
                    let before = lines.get_at(at).map_or(2048, |c| c.p);
                    lines.update_at(at, bit);
                    let after = lines.get_at(lines.find_bit(context, c0)).unwrap().p;
                    assert!(if bit == 1 {
                        after > before
                    } else {
                        after < before
                    });
                }
            }
        }
        // A context seen with one byte only: every node on its path is deterministic.
        let (context, byte) = (hash(99, 6), 0x1a5u32);
        for _ in 0..5 {
            for bit_index in 0..8 {
                let c0 = byte >> (8 - bit_index);
                let at = lines.find_bit(context, c0);
                lines.update_at(at, (byte >> (7 - bit_index)) & 1);
            }
        }
        for bit_index in 0..8 {
            let c = lines
                .get_at(lines.find_bit(context, byte >> (8 - bit_index)))
                .unwrap();
            assert!(c.deterministic && c.n == 5, "{bit_index}: {c:?}");
        }
        // The partner of a slot is the same place one line over.
        let a = lines.find_bit(context, 1);
        let (i, check) = (a.index, a.check);
        assert_eq!(lines.way(i, i ^ LINE, check), (i, true));
    }
}
