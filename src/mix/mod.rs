//! The mixing stage: an optional step between the network and the coder (recipe item `mix:`,
//! docs/recipes.md), which codes each byte as 8 binary decisions, most significant bit first.
//! For each bit it mixes the network's own prediction — derived from its 256-way distribution
//! as the share of the remaining bytes whose next bit is 1 — with fast context statistics:
//!
//! - [`counters`]: order-0 to order-N contexts, the current word (and the one before it),
//!   sparse and record contexts, in hashed tables of adaptive counters — each, with `conf`,
//!   also refined by a map learned from its count and whether its history was deterministic;
//! - [`matcher`]: the longest recent match of the last bytes and the byte that followed it
//!   (with `follow`, followed past a miss, and [`expected`]: counters by the byte it expects);
//! - [`mixer`]: a two-layer logistic mixer with weight sets chosen by small contexts (with
//!   `ext` 4, a rate that starts higher and decays; with `young`, each set's rate decays with
//!   its own updates; with `settle`, the last layer settles at three eighths of the rate);
//! - [`record`]: the record lengths of tables and binaries, and contexts by the bytes above;
//!   with `delta`, [`deltas`]: per column, the steps from the bytes above, whatever their value;
//! - [`sse`]: adaptive probability maps ([`apm`]) on the mixed probability (two, or four with
//!   `ext` 1);
//! - with `ext` 8, [`NetMaps`]: the network's prediction refined by two maps, as inputs.
//!
//! Each of these is a [`Component`] ([`component`]): it declares its mixer inputs, selectors
//! and memory and pushes them for each bit; the stage holds the list [`parts`] asks for, and
//! the mixer's inputs and selectors are what the list pushes, in its order.
//!
//! The third round's components are bits of the one key `ext` ([`spec::EXT_ALL`]); with `ext`
//! 2 the word tables gain two contexts and with `ext` 16 the tables above order 1 are two-way.
//! The fifth round's are bits of it too: [`indirect`] (32), [`columns`] (64), the selector by
//! the byte two back ([`base::SecondByte`], 128) and [`runs`] (256). So are the sixth's: the
//! counters' recent bits ([`counters`], 512), the second sparse contexts for binaries
//! ([`orders::Sparse2`], 1024) and [`nesting`] for code and markup (2048). The seventh round's
//! [`text`] (4096) adds text contexts and a selector for text.
//!
//! Its settings and their header keys are in [`spec`].
//!
//! The network trains on its softmax loss exactly as without the stage; the stage only reads
//! its distribution, after the coder's integer quantisation ([`crate::coder::QuantizedPdf`]),
//! and computes in integers from there, so encoder and decoder agree by construction.

pub mod apm;
pub mod base;
pub mod columns;
pub mod component;
pub mod counters;
pub mod deltas;
pub mod expected;
pub mod indirect;
pub mod logistic;
pub mod matcher;
pub mod mixer;
pub mod nesting;
pub mod netmaps;
pub mod orders;
pub mod parts;
pub mod record;
pub mod runs;
pub mod slots;
pub mod spec;
pub mod sse;
pub mod tables;
pub mod text;
pub mod warm;
pub mod words;
pub mod x86code;
pub mod x86ops;

pub use component::{Component, Declare, Push, Shared};
pub use netmaps::NetMaps;
pub use spec::{
    FIT_BITS, KEYS, MATCH_BITS, MAX_MIX_BYTES, MAX_ORDERS, MixKey, MixSpec, Part, RATE, TABLE_BITS,
    key, key_names,
};

use std::io;

use logistic::stretch;
use mixer::Mixer2;
use parts::Parts;
use sse::{Sse, SseContext};

/// The stage's state over a stream: its components ([`parts`]), what they all read
/// ([`Shared`]), the mixer over what they push ([`Push`]), and the SSE maps after it.
pub struct Stage {
    parts: Parts,
    shared: Shared,
    push: Push,
    mixer: Mixer2,
    /// The mixer's inputs and selectors, as the components declared them.
    shape: warm::Shape,
    sse: Option<Sse>,
    /// What the mixer and the maps said for the current bit.
    p_mix: i32,
    p: i32,
}

impl Stage {
    /// A stage of the given settings (which must be valid: see [`MixSpec::validate`]); an
    /// error when the system will not map its tables.
    pub fn new(spec: &MixSpec) -> io::Result<Self> {
        let spec = &spec.sized();
        let declared = parts::declare(spec);
        let mut stage = Stage {
            parts: Parts::new(spec)?,
            shared: Shared::new(),
            push: Push::new(&declared),
            mixer: {
                let m = Mixer2::new(
                    declared.init.len(),
                    &declared.sets,
                    spec.rate as i32,
                    &declared.init,
                );
                let m = match (spec.young, spec.decay) {
                    (true, _) => m.with_young_sets(),
                    (false, true) => m.with_decay(),
                    (false, false) => m,
                };
                match spec.settle {
                    true => m.with_settled_last(),
                    false => m,
                }
            },
            shape: warm::Shape::of(&declared),
            sse: spec.sse.then(|| Sse::new(spec)),
            p_mix: 2048,
            p: 2048,
        };
        if let Some(start) = warm::by_number(spec.warm) {
            start
                .load_into(&mut stage.mixer, &stage.shape)
                .map_err(|e| io::Error::other(format!("{e:#}")))?;
        }
        stage.start_byte();
        Ok(stage)
    }

    /// The mixer's weights now (to carry to the next document when learning a warm start).
    pub fn mixer_weights(&self) -> warm::MixerWeights {
        warm::MixerWeights::of(&self.mixer, &self.shape)
    }

    /// Sets the mixer's weights (before the first bit); an error when they are of another
    /// shape than this stage's mixer.
    pub fn start_mixer_from(&mut self, weights: &warm::MixerWeights) -> anyhow::Result<()> {
        warm::check_shape(&weights.shape, &self.shape)?;
        weights.apply_to(&mut self.mixer);
        Ok(())
    }

    /// Takes the network's distribution of the next byte: `cdf[s]..cdf[s + 1]` is byte `s`'s
    /// share (every share at least 1). Call before the byte's first bit.
    pub fn set_network(&mut self, cdf: &[u32]) {
        debug_assert_eq!(self.shared.bit_index, 0);
        self.shared.cdf.copy_from_slice(cdf);
        self.parts.set_network(&self.shared);
    }

    /// The probability that the next bit is 1, in [`Stage::precision`] bits.
    pub fn p(&mut self) -> i32 {
        let s = &mut self.shared;
        s.net = stretch(s.network_p());
        let s = &self.shared;
        let m = &mut self.push;
        m.clear();
        self.parts.predict(s, m);
        self.parts.select(s, m);
        let p = self
            .mixer
            .mix(m.inputs(), m.selectors(), s.bit_index as usize);
        self.p_mix = p;
        let p = match &mut self.sse {
            Some(sse) => sse.refine(
                p,
                &SseContext {
                    c0: s.c0,
                    c1: s.c1(),
                    c2: s.c2(),
                    match_state: m.match_state,
                },
            ),
            None => p,
        };
        // 1/4096 at the ends whatever the precision: a decision costs at most 12 bits.
        let floor = 1 << (self.precision() - 12);
        self.p = p.clamp(floor, (1 << self.precision()) - floor);
        self.p
    }

    /// Bits of the probability [`Stage::p`] gives: 12, or 16 with `mix:fine` and the SSE maps
    /// (without the maps the mixer's 12 bits are all there is).
    pub fn precision(&self) -> u32 {
        self.sse.as_ref().map_or(12, Sse::precision)
    }

    /// Starts loading what the next bit of this byte reads, once the current `bit` is known:
    /// the cache misses then overlap with the learning of this bit. (Asking for both values of
    /// the bit earlier, in `p`, was slower: twice the requests filled the queue of misses.)
    fn prefetch_next_bit(&self, bit: u32) {
        if self.shared.bit_index == 7 {
            return; // the next byte's slots are asked for by `start_byte`
        }
        self.prefetch_bit(self.shared.c0 << 1 | bit);
    }

    /// Starts loading what the bit after the bits `c0` of this byte reads from the large
    /// tables: the counters, and the points of the large maps.
    fn prefetch_bit(&self, c0: u32) {
        let s = &self.shared;
        self.parts.prefetch(s, c0);
        if let Some(sse) = &self.sse {
            sse.prefetch(c0, s.c1(), s.c2());
        }
    }

    /// Learns the coded bit (after [`Stage::p`]); after the eighth, the byte.
    pub fn update(&mut self, bit: u32) {
        self.prefetch_next_bit(bit);
        self.mixer.update(self.push.inputs(), bit);
        if let Some(sse) = &mut self.sse {
            sse.update(bit);
        }
        self.parts.update(&self.shared, bit);
        let s = &mut self.shared;
        s.c0 = (s.c0 << 1) | bit;
        s.bit_index += 1;
        if s.bit_index == 8 {
            let byte = (s.c0 & 0xff) as u8;
            s.c0 = 1;
            s.bit_index = 0;
            self.end_byte(byte);
        }
    }

    fn end_byte(&mut self, byte: u8) {
        let s = &mut self.shared;
        s.history = (s.history << 8) | byte as u64;
        if byte.is_ascii_alphabetic() {
            let lower = byte.to_ascii_lowercase() as u32;
            s.word = (s.word.wrapping_add(lower + 1)).wrapping_mul(0x2F0B_3C47) | 1;
        } else if s.word != 0 {
            s.prev_word2 = s.prev_word;
            s.prev_word = s.word;
            s.word = 0;
        }
        self.parts.learn_byte(&self.shared, byte);
        if let Some(m) = &self.parts.matcher {
            let s = &mut self.shared;
            s.match_byte = m.expected_byte();
            s.match_len = m.match_len();
        }
        self.start_byte();
    }

    /// Every component's contexts at a byte boundary; then the first bit's slots load while
    /// the network predicts the byte.
    fn start_byte(&mut self) {
        self.parts.start_byte(&self.shared);
        self.prefetch_bit(1);
    }

    /// The last mixer output before the SSE maps (12-bit), for tests.
    pub fn mixed(&self) -> i32 {
        self.p_mix
    }
}

#[cfg(test)]
mod tests_support {
    use super::*;

    /// The stage as files written before the later keys have it (each key with an implicit
    /// value off), at the mixer rate it had then.
    pub fn classic() -> MixSpec {
        MixSpec {
            rate: 12,
            ..MixSpec::DEFAULT.with_implicit_keys()
        }
    }

    /// The stage with context orders 0–2 only: the new components are judged against it.
    pub fn plain() -> MixSpec {
        MixSpec {
            orders: 2,
            word: false,
            sparse: false,
            matcher: 0,
            sse: false,
            table: 16,
            ..classic()
        }
    }

    /// Bits spent on `data` by [`plain`] and by [`plain`] with `add` applied: (with, without).
    pub fn with_and_without(data: &[u8], add: impl Fn(&mut MixSpec)) -> (f64, f64) {
        let mut spec = plain();
        add(&mut spec);
        (cost(&spec, data), cost(&plain(), data))
    }

    /// A small linear congruential generator for test data: 15 bits a call.
    pub fn lcg(seed: u32) -> impl FnMut() -> u32 {
        let mut x = seed;
        move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            x >> 16
        }
    }

    /// A uniform network: every byte has the same share.
    pub fn uniform() -> Vec<u32> {
        (0..=256u32).map(|s| s << 16).collect()
    }

    /// Bits spent by a stage on `data` with a uniform network.
    pub fn cost(spec: &MixSpec, data: &[u8]) -> f64 {
        let mut s = Stage::new(spec).unwrap();
        let cdf = uniform();
        let mut bits = 0.0;
        for &b in data {
            s.set_network(&cdf);
            for k in 0..8 {
                let bit = ((b >> (7 - k)) & 1) as u32;
                let p = s.p() as f64 / (1 << s.precision()) as f64;
                bits -= (if bit == 1 { p } else { 1.0 - p }).log2();
                s.update(bit);
            }
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn the_network_alone_is_passed_through() {
        let spec = MixSpec {
            orders: 0,
            word: false,
            sparse: false,
            matcher: 0,
            sse: false,
            ..classic()
        };
        let mut s = Stage::new(&spec).unwrap();
        // A network sure of byte 0x41: its bits come out confident from the start.
        let mut cdf = vec![0u32; 257];
        for b in 0..256usize {
            let f = if b == 0x41 { (1 << 24) - 255 * 16 } else { 16 };
            cdf[b + 1] = cdf[b] + f;
        }
        s.set_network(&cdf);
        for k in 0..8 {
            let bit = ((0x41 >> (7 - k)) & 1) as u32;
            let p = s.p();
            let sure = if bit == 1 { p } else { 4096 - p };
            assert!(sure > 3900, "bit {k}: {p}");
            s.update(bit);
        }
    }

    #[test]
    fn context_statistics_learn_a_repetitive_text() {
        let text: Vec<u8> = b"abracadabra, abracadabra! ".repeat(40);
        let spec = MixSpec {
            matcher: 0,
            ..classic()
        };
        let bits = cost(&spec, &text);
        assert!(
            bits / (text.len() as f64) < 0.8,
            "{} bpb",
            bits / text.len() as f64
        );
    }

    #[test]
    fn every_component_pays_on_data_it_suits() {
        let mut data = Vec::new();
        let mut x = 7u32;
        let block: Vec<u8> = (0..300)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for _ in 0..5 {
            data.extend_from_slice(&block);
        }
        let none = MixSpec {
            orders: 0,
            word: false,
            sparse: false,
            matcher: 0,
            sse: false,
            ..classic()
        };
        let with_match = MixSpec {
            matcher: 16,
            ..none
        };
        let a = cost(&none, &data);
        let b = cost(&with_match, &data);
        // Random bytes repeated: only the match model can see the repeats.
        assert!(a > 7.5 * data.len() as f64, "{a}");
        assert!(b < 0.3 * a, "{b} vs {a}");
    }
}

#[cfg(test)]
mod new_component_tests {
    use super::tests_support::*;
    use super::*;
    use apm::Apm;
    use counters::Counter;
    use logistic::stretch;
    use spec::CONF_CONTEXTS;
    use tables::confidence_input;

    /// Rows of 32 bytes, each the row above with every byte raised by 1 one time in four: only a
    /// model that looks one record back can predict it.
    fn image(rows: usize) -> Vec<u8> {
        let mut x = 11u32;
        let mut next = move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            x >> 16
        };
        let mut row: Vec<u8> = (0..32).map(|_| next() as u8).collect();
        let mut data = Vec::new();
        for _ in 0..rows {
            data.extend_from_slice(&row);
            for b in &mut row {
                *b = b.wrapping_add((next() & 3 == 0) as u8);
            }
        }
        data
    }

    #[test]
    fn the_record_model_predicts_a_column_from_the_row_above() {
        let data = image(150);
        let without = cost(&plain(), &data);
        let with = cost(
            &MixSpec {
                record: 1,
                ..plain()
            },
            &data,
        );
        assert!(without > 3.0 * data.len() as f64, "{without}");
        assert!(with < 0.8 * without, "{with} vs {without}");
    }

    /// Words from a small vocabulary, each followed by its fixed successor one time in two:
    /// the previous word tells much about the next one, the last two bytes little.
    fn word_chain(words: usize) -> Vec<u8> {
        const VOCABULARY: [&str; 12] = [
            "apple", "river", "stone", "cloud", "night", "paper", "glass", "tiger", "music",
            "bread", "light", "ocean",
        ];
        let mut x = 5u32;
        let mut w = 0usize;
        let mut data = Vec::new();
        for _ in 0..words {
            data.extend_from_slice(VOCABULARY[w].as_bytes());
            data.push(b' ');
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            w = if (x >> 16) & 1 == 0 {
                (w * 5 + 1) % VOCABULARY.len()
            } else {
                (x >> 20) as usize % VOCABULARY.len()
            };
        }
        data
    }

    #[test]
    fn the_previous_word_predicts_the_next_one() {
        let data = word_chain(1500);
        let base = MixSpec {
            word: true,
            ..plain()
        };
        let without = cost(&base, &data);
        let with = cost(
            &MixSpec {
                pword: true,
                ..base
            },
            &data,
        );
        assert!(with < 0.95 * without, "{with} vs {without}");
    }

    #[test]
    fn confidence_maps_learn_that_a_deterministic_context_is_sure() {
        let mut map = Apm::new(CONF_CONTEXTS, 6);
        let once = Counter {
            p: 3400,
            n: 1,
            deterministic: true,
            recent: 0,
        };
        let before = confidence_input(&mut map, Some(once), false);
        // Contexts seen once with a 1 are followed by a 1 again, every time.
        for _ in 0..500 {
            confidence_input(&mut map, Some(once), false);
            map.update(1);
        }
        let after = confidence_input(&mut map, Some(once), false);
        assert!(before <= stretch(3400) + 16, "{before}");
        assert!(after > stretch(3900), "{after}");
        // A context with a mixed history at the same probability is left as it was.
        let mixed = Counter {
            deterministic: false,
            ..once
        };
        assert!(confidence_input(&mut map, Some(mixed), false) < stretch(3600));
    }

    /// Words from a small vocabulary where the next word follows from the two before it (and
    /// not from one alone).
    fn word_pairs(words: usize) -> Vec<u8> {
        const VOCABULARY: [&str; 8] = [
            "apple", "river", "stone", "cloud", "night", "paper", "glass", "tiger",
        ];
        let mut x = 9u32;
        let (mut a, mut b) = (0usize, 1usize);
        let mut data = Vec::new();
        for _ in 0..words {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let next = match (x >> 16) % 4 {
                0 => (x >> 20) as usize % VOCABULARY.len(),
                _ => (a * 3 + b * 5 + 1) % VOCABULARY.len(),
            };
            data.extend_from_slice(VOCABULARY[next].as_bytes());
            data.push(b' ');
            (a, b) = (b, next);
        }
        data
    }

    #[test]
    fn two_words_back_predict_the_next_one() {
        let data = word_pairs(2000);
        let base = MixSpec {
            word: true,
            pword: true,
            ..plain()
        };
        let without = cost(&base, &data);
        let with = cost(
            &MixSpec {
                words: true,
                ..base
            },
            &data,
        );
        assert!(with < 0.95 * without, "{with} vs {without}");
    }

    #[test]
    fn the_third_round_pays_on_text() {
        let data = word_chain(1500);
        let second = MixSpec {
            table: 16,
            matcher: 16,
            rate: 6,
            ..MixSpec::DEFAULT.with_implicit_keys()
        };
        let second = MixSpec {
            conf: true,
            pword: true,
            select: true,
            record: 1,
            ..second
        };
        let third = MixSpec {
            table: 16,
            matcher: 16,
            indirect: false,
            columns: false,
            second: false,
            runs: false,
            ..MixSpec::DEFAULT
        };
        let (a, b) = (cost(&second, &data), cost(&third, &data));
        assert!(b < a, "{b} vs {a}");
    }

    #[test]
    fn the_new_keys_off_compute_what_the_stage_computed_before() {
        // The same input costs the same with every implicit key at its implicit value.
        let data = word_chain(200);
        let legacy = classic();
        let spec = MixSpec {
            table: 16,
            matcher: 16,
            ..legacy
        };
        let explicit = MixSpec {
            conf: false,
            pword: false,
            select: false,
            record: 0,
            fin: false,
            words: false,
            decay: false,
            nmap: false,
            ways: false,
            indirect: false,
            columns: false,
            second: false,
            runs: false,
            ..spec
        };
        assert_eq!(spec, explicit);
        assert_eq!(cost(&spec, &data), cost(&explicit, &data));
    }

    /// `split` moves memory above 64 KiB (`cap` 19 on): the text tables eight times as large,
    /// the record, sparse, order-2 and second sparse tables half; the rest as without it, and
    /// nothing at all up to 64 KiB.
    #[test]
    fn the_split_gives_text_the_memory_of_the_binary_families_above_64_kib() {
        let at = |cap, split| MixSpec {
            cap,
            split,
            delta: false,
            ..MixSpec::DEFAULT
        };
        let bits = |spec: &MixSpec, part| spec.part_bits(part, spec.table, 0);
        let parts = [
            Part::Table,
            Part::Order2,
            Part::Sparse,
            Part::Record,
            Part::Quarter,
            Part::Sparse2,
            Part::Map1,
            Part::Map2,
            Part::Text,
            Part::Match,
            Part::After3,
            Part::Expected,
        ];
        for cap in [19, 20, 21] {
            let (with, without) = (at(cap, true), at(cap, false));
            for part in parts {
                // Above `cap` 20 the text tables were a 16th without the split, not a 32nd.
                let moved = match part {
                    Part::Text if cap > 20 => 2,
                    Part::Text => 3,
                    Part::Order2 | Part::Sparse | Part::Record | Part::Sparse2 => -1,
                    _ => 0,
                };
                assert_eq!(
                    bits(&with, part) as i32,
                    bits(&without, part) as i32 + moved,
                    "cap {cap}: {part:?}"
                );
            }
        }
        // At 1 MiB the stage takes less memory with the split; the network's context tables
        // take what it frees (src/fit.rs).
        assert!(at(20, true).bytes() < at(20, false).bytes());
        for cap in [17, 18] {
            for part in parts {
                assert_eq!(bits(&at(cap, true), part), bits(&at(cap, false), part));
            }
            assert_eq!(at(cap, true).bytes(), at(cap, false).bytes());
        }
    }
}

#[cfg(test)]
mod seam_tests {
    use super::tests_support::*;
    use super::*;

    /// Settings that switch each component on and off.
    fn grid() -> Vec<MixSpec> {
        let mut specs = Vec::new();
        for bits in 0u32..1 << 12 {
            let b = |k: u32| bits >> k & 1 == 1;
            specs.push(MixSpec {
                orders: [0, 1, 3, 8][(bits & 3) as usize],
                word: b(2),
                sparse: b(3),
                matcher: if b(4) { 12 } else { 0 },
                sse: b(5),
                table: 12,
                conf: b(6),
                pword: b(7),
                select: b(8),
                record: (bits >> 9 & 1) + (bits >> 10 & 1),
                words: b(11),
                nmap: b(10) && b(4),
                ways: b(11) && b(2),
                x86: b(3) && b(5),
                partial: b(5) && b(8),
                fine: b(5) && b(6),
                ..MixSpec::DEFAULT
            });
        }
        specs
    }

    #[test]
    fn every_component_pushes_what_it_declares() {
        let data = b"The record of 1234 words, the record of 1235 words.\x00\x01\x02\xff".repeat(3);
        let cdf = uniform();
        for spec in grid().into_iter().step_by(37) {
            let d = spec.declare();
            let mut s = Stage::new(&spec).unwrap();
            // 16 bits with `fine` and the SSE maps, else 12; the range 1/4096 to 4095/4096.
            let bits = s.precision();
            assert_eq!(bits, if spec.fine && spec.sse { 16 } else { 12 });
            let floor = 1 << (bits - 12);
            for &byte in &data {
                s.set_network(&cdf);
                for k in 0..8 {
                    let p = s.p();
                    assert!(
                        (floor..=(1 << bits) - floor).contains(&p),
                        "{p} of {bits} bits"
                    );
                    assert_eq!(s.push.inputs().len(), d.init.len(), "{spec:?}");
                    assert_eq!(s.push.selectors().len(), d.sets.len(), "{spec:?}");
                    for (&v, &n) in s.push.selectors().iter().zip(&d.sets) {
                        assert!(v < n, "{spec:?}: selector {v} of {n}");
                    }
                    s.update(((byte >> (7 - k)) & 1) as u32);
                }
            }
        }
    }
}
