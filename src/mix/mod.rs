//! The mixing stage: an optional step between the network and the coder (recipe item `mix:`,
//! docs/recipes.md), which codes each byte as 8 binary decisions, most significant bit first.
//! For each bit it mixes the network's own prediction — derived from its 256-way distribution
//! as the share of the remaining bytes whose next bit is 1 — with fast context statistics:
//!
//! - [`counters`]: order-0 to order-N contexts and the current word, in hashed tables of
//!   adaptive counters;
//! - [`matcher`]: the longest recent match of the last bytes and the byte that followed it;
//! - [`mixer`]: a two-layer logistic mixer with weight sets chosen by small contexts;
//! - [`apm`]: two adaptive probability maps (SSE) on the mixed probability.
//!
//! The network trains on its softmax loss exactly as without the stage; the stage only reads
//! its distribution, after the coder's integer quantisation ([`crate::coder::QuantizedPdf`]),
//! and computes in integers from there, so encoder and decoder agree by construction.

pub mod apm;
pub mod counters;
pub mod logistic;
pub mod matcher;
pub mod mixer;

use anyhow::{Result, bail};

use apm::Apm;
use counters::{CounterTable, hash, inputs, with_partial};
use logistic::{ST_MAX, stretch};
use matcher::{MatchModel, length_bucket};
use mixer::Mixer2;

/// The settings of the stage, as the recipe's `mix:` item gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixSpec {
    /// Context statistics of the last 0..=N bytes (N + 1 tables); 0 for none.
    pub orders: u32,
    /// A table for the current word (letters), for text.
    pub word: bool,
    /// Sparse contexts, for binary data: bytes 2 and 4 back alone, bytes 2–3, and bytes 1
    /// and 3 (records and instructions of 2 and 4 bytes).
    pub sparse: bool,
    /// The match model's window, log2 of bytes; 0 for no match model.
    pub matcher: u32,
    /// The two SSE maps after the mixer.
    pub sse: bool,
    /// Counters per context table above order 1, log2.
    pub table: u32,
    /// The mixer's learning rate (1/16384 units, see [`mixer`]).
    pub rate: u32,
}

/// Most memory the stage may take in this build: a header asking for more is refused before
/// anything is allocated.
pub const MAX_MIX_BYTES: usize = 1 << 30;
pub const MAX_ORDERS: u32 = 8;
pub const TABLE_BITS: std::ops::RangeInclusive<u32> = 12..=24;
pub const MATCH_BITS: std::ops::RangeInclusive<u32> = 12..=28;
pub const RATE: std::ops::RangeInclusive<u32> = 1..=64;
/// Counters of the order-0 and order-1 tables, log2 (a byte and a partial byte fit in 16 bits).
const SMALL_TABLE_BITS: u32 = 16;

/// One key of the recipe's `mix:` item (docs/recipes.md, "The mixing stage"): its name, how
/// it reads and sets its whole-number value, and the values it takes. The recipe's parser,
/// printer and error messages and [`MixSpec::validate`] all follow [`KEYS`].
pub struct MixKey {
    pub name: &'static str,
    pub get: fn(&MixSpec) -> u32,
    /// Sets a value that `check` accepted.
    pub set: fn(&mut MixSpec, u32),
    /// The values the key takes; the message names the key.
    pub check: fn(u32) -> Result<(), String>,
}

/// The keys of `mix:` in canonical order.
pub static KEYS: [MixKey; 7] = [
    MixKey {
        name: "orders",
        get: |m| m.orders,
        set: |m, v| m.orders = v,
        check: |v| match v <= MAX_ORDERS {
            true => Ok(()),
            false => Err(format!("mix orders {v} is out of range (0..={MAX_ORDERS})")),
        },
    },
    MixKey {
        name: "word",
        get: |m| m.word as u32,
        set: |m, v| m.word = v != 0,
        check: |v| flag(v, "word"),
    },
    MixKey {
        name: "sparse",
        get: |m| m.sparse as u32,
        set: |m, v| m.sparse = v != 0,
        check: |v| flag(v, "sparse"),
    },
    MixKey {
        name: "match",
        get: |m| m.matcher,
        set: |m, v| m.matcher = v,
        check: |v| match v == 0 || MATCH_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix match {v} is out of range (0 for none, or {}..={}, log2 of the window)",
                MATCH_BITS.start(),
                MATCH_BITS.end()
            )),
        },
    },
    MixKey {
        name: "sse",
        get: |m| m.sse as u32,
        set: |m, v| m.sse = v != 0,
        check: |v| flag(v, "sse"),
    },
    MixKey {
        name: "table",
        get: |m| m.table,
        set: |m, v| m.table = v,
        check: |v| match TABLE_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix table {v} is out of range ({}..={}, log2 of counters)",
                TABLE_BITS.start(),
                TABLE_BITS.end()
            )),
        },
    },
    MixKey {
        name: "rate",
        get: |m| m.rate,
        set: |m, v| m.rate = v,
        check: |v| match RATE.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix rate {v} is out of range ({}..={})",
                RATE.start(),
                RATE.end()
            )),
        },
    },
];

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static MixKey> {
    KEYS.iter().find(|k| k.name == name)
}

/// The key names in canonical order, joined by `sep`.
pub fn key_names(sep: &str) -> String {
    let names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    names.join(sep)
}

/// A 0/1 switch.
fn flag(v: u32, key: &str) -> Result<(), String> {
    match v {
        0 | 1 => Ok(()),
        _ => Err(format!("mix {key} is 0 or 1")),
    }
}

impl MixSpec {
    /// The stage as the default level uses it.
    pub const DEFAULT: MixSpec = MixSpec {
        orders: 6,
        word: true,
        sparse: true,
        matcher: 22,
        sse: true,
        table: 22,
        rate: 12,
    };

    /// Checks every key ([`KEYS`]) and the memory the stage needs.
    pub fn validate(&self) -> Result<()> {
        for key in &KEYS {
            if let Err(message) = (key.check)((key.get)(self)) {
                bail!(message);
            }
        }
        let bytes = self.bytes();
        if bytes > MAX_MIX_BYTES {
            bail!(
                "the mixing stage needs about {} MiB; this build accepts at most {} MiB",
                bytes >> 20,
                MAX_MIX_BYTES >> 20
            );
        }
        Ok(())
    }

    /// Log2 sizes of the context tables, orders first, then the word table.
    fn table_bits(&self) -> Vec<u32> {
        let mut t = Vec::new();
        if self.orders > 0 {
            for order in 0..=self.orders {
                t.push(if order <= 1 {
                    SMALL_TABLE_BITS
                } else {
                    self.table
                });
            }
        }
        if self.word {
            t.push(self.table);
        }
        if self.sparse {
            for (i, _) in SPARSE.iter().enumerate() {
                t.push(if i < 2 { SMALL_TABLE_BITS } else { self.table });
            }
        }
        t
    }

    /// The mixer's inputs: a bias, the network, two per context table, three for the match.
    fn inputs(&self) -> usize {
        2 + 2 * self.table_bits().len() + if self.matcher > 0 { 3 } else { 0 }
    }

    /// The sizes of the first layer's weight sets, one per selector (see [`Stage::p`]).
    fn selector_sets(&self) -> [usize; 4] {
        [256, 33, (self.orders as usize + 2) * 8, 16]
    }

    /// Bytes of memory the stage takes (within a few kilobytes).
    pub fn bytes(&self) -> usize {
        let tables: usize = self.table_bits().iter().map(|&b| 4usize << b).sum();
        let matcher = if self.matcher > 0 {
            matcher::bytes(self.matcher)
        } else {
            0
        };
        let apms = if self.sse {
            Apm::bytes(256) + Apm::bytes(1 << 16)
        } else {
            0
        };
        tables + matcher + apms + Mixer2::bytes(self.inputs(), &self.selector_sets())
    }
}

/// The bytes of the history (newest in the low byte) each sparse context reads: one byte
/// alone first (tables of [`SMALL_TABLE_BITS`]), then pairs.
const SPARSE: [u64; 4] = [0xff00, 0xff00_0000, 0xff_ff00, 0xff_00ff];

/// Bias input of the mixer (a constant, in stretch units).
const BIAS: i32 = 256;

/// The stage's state over a stream.
pub struct Stage {
    spec: MixSpec,
    tables: Vec<CounterTable>,
    /// Per table: the context hash of the current byte position.
    contexts: Vec<u32>,
    /// Per table: the slot hash of the current bit.
    slots: Vec<u32>,
    matcher: Option<MatchModel>,
    mixer: Mixer2,
    apm_order0: Option<Apm>,
    apm_order1: Option<Apm>,
    inputs: Vec<i32>,
    /// The network's quantised distribution of the current byte, as a cumulative table.
    cdf: Vec<u32>,
    /// The last 8 bytes, newest in the low byte.
    history: u64,
    /// Hash of the letters of the current word (0 between words).
    word: u32,
    /// The bits of the current byte so far, after a leading 1.
    c0: u32,
    /// Bits of the current byte coded so far.
    bit_index: u32,
    /// What the mixer and the maps said for the current bit.
    p_mix: i32,
    p: i32,
}

impl Stage {
    /// A stage of the given settings (which must be valid: see [`MixSpec::validate`]).
    pub fn new(spec: &MixSpec) -> Self {
        let bits = spec.table_bits();
        let n_inputs = spec.inputs();
        let mut init = vec![6 << 10; n_inputs];
        init[0] = 0;
        init[1] = 1 << 16; // the network alone, to begin with
        let mut stage = Stage {
            spec: *spec,
            tables: bits.iter().map(|&b| CounterTable::new(b)).collect(),
            contexts: vec![0; bits.len()],
            slots: vec![0; bits.len()],
            matcher: (spec.matcher > 0).then(|| MatchModel::new(spec.matcher)),
            mixer: Mixer2::new(n_inputs, &spec.selector_sets(), spec.rate as i32, &init),
            apm_order0: spec.sse.then(|| Apm::new(256, 7)),
            apm_order1: spec.sse.then(|| Apm::new(1 << 16, 7)),
            inputs: vec![0; n_inputs],
            cdf: vec![0; 257],
            history: 0,
            word: 0,
            c0: 1,
            bit_index: 0,
            p_mix: 2048,
            p: 2048,
        };
        stage.set_contexts();
        stage
    }

    /// Takes the network's distribution of the next byte: `cdf[s]..cdf[s + 1]` is byte `s`'s
    /// share (every share at least 1). Call before the byte's first bit.
    pub fn set_network(&mut self, cdf: &[u32]) {
        debug_assert_eq!(self.bit_index, 0);
        self.cdf.copy_from_slice(cdf);
    }

    /// The network's 12-bit probability that the next bit is 1: the share of the bytes that
    /// agree with the bits so far and continue with a 1.
    fn network_p(&self) -> i32 {
        let k = self.bit_index;
        let lo = ((self.c0 << (8 - k)) - 256) as usize;
        let width = 256usize >> k;
        let mid = lo + width / 2;
        let n0 = (self.cdf[mid] - self.cdf[lo]) as u64;
        let n1 = (self.cdf[lo + width] - self.cdf[mid]) as u64;
        (((n1 << 12) / (n0 + n1).max(1)) as i32).clamp(1, 4095)
    }

    /// The 12-bit probability that the next bit is 1.
    pub fn p(&mut self) -> i32 {
        let net = stretch(self.network_p());
        let x = &mut self.inputs;
        x[0] = BIAS;
        x[1] = net;
        let mut seen = 0usize;
        let mut i = 2;
        for (t, table) in self.tables.iter().enumerate() {
            let slot = with_partial(self.contexts[t], self.c0);
            self.slots[t] = slot;
            let counter = table.get(slot);
            seen += counter.is_some() as usize;
            let [a, b] = inputs(counter);
            x[i] = a;
            x[i + 1] = b;
            i += 2;
        }
        let mut match_set = 0usize;
        if let Some(m) = &mut self.matcher {
            let [a, b, c] = m.predict(self.bit_index);
            x[i] = a;
            x[i + 1] = b;
            x[i + 2] = c;
            if let Some(bit) = m.expected_bit(self.bit_index) {
                match_set = 1 + (length_bucket(m.match_len()).min(15) * 2 + bit) as usize;
            }
        }
        let orders_seen = seen.min(self.spec.orders as usize + 1);
        let net_bucket = ((net + ST_MAX + 1) >> 8).clamp(0, 15) as usize;
        let select = [
            self.c0 as usize,
            match_set,
            orders_seen * 8 + self.bit_index as usize,
            net_bucket,
        ];
        let mut p = self
            .mixer
            .mix(&self.inputs, &select, self.bit_index as usize);
        self.p_mix = p;
        if let (Some(a0), Some(a1)) = (&mut self.apm_order0, &mut self.apm_order1) {
            let c1 = (self.history & 0xff) as usize;
            let r0 = a0.refine(p, self.c0 as usize);
            let r1 = a1.refine(p, (c1 << 8) | self.c0 as usize);
            p = (p + r0 + 2 * r1 + 2) >> 2;
        }
        self.p = p.clamp(1, 4095);
        self.p
    }

    /// Learns the coded bit (after [`Stage::p`]); after the eighth, the byte.
    pub fn update(&mut self, bit: u32) {
        self.mixer.update(&self.inputs, bit);
        if let (Some(a0), Some(a1)) = (&mut self.apm_order0, &mut self.apm_order1) {
            a0.update(bit);
            a1.update(bit);
        }
        for (t, table) in self.tables.iter_mut().enumerate() {
            table.update(self.slots[t], bit);
        }
        if let Some(m) = &mut self.matcher {
            m.update_bit(self.bit_index, bit);
        }
        self.c0 = (self.c0 << 1) | bit;
        self.bit_index += 1;
        if self.bit_index == 8 {
            let byte = (self.c0 & 0xff) as u8;
            self.c0 = 1;
            self.bit_index = 0;
            self.end_byte(byte);
        }
    }

    fn end_byte(&mut self, byte: u8) {
        self.history = (self.history << 8) | byte as u64;
        if byte.is_ascii_alphabetic() {
            let lower = byte.to_ascii_lowercase() as u32;
            self.word = (self.word.wrapping_add(lower + 1)).wrapping_mul(0x2F0B_3C47) | 1;
        } else {
            self.word = 0;
        }
        if let Some(m) = &mut self.matcher {
            m.update_byte(byte);
        }
        self.set_contexts();
    }

    /// The context hash of every table at a byte boundary.
    fn set_contexts(&mut self) {
        let mut t = 0;
        if self.spec.orders > 0 {
            for order in 0..=self.spec.orders {
                let mask = if order >= 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * order)) - 1
                };
                self.contexts[t] = hash(self.history & mask, order + 1);
                t += 1;
            }
        }
        if self.spec.word {
            // Inside a word: the word so far; between words: the last byte.
            let value = if self.word != 0 {
                (self.word as u64) << 8
            } else {
                self.history & 0xff
            };
            self.contexts[t] = hash(value, 0x77);
            t += 1;
        }
        if self.spec.sparse {
            for (i, mask) in SPARSE.iter().enumerate() {
                self.contexts[t] = hash(self.history & mask, 0x100 + i as u32);
                t += 1;
            }
        }
        debug_assert_eq!(t, self.contexts.len());
    }

    /// The last mixer output before the SSE maps (12-bit), for tests.
    pub fn mixed(&self) -> i32 {
        self.p_mix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A uniform network: every byte has the same share.
    fn uniform() -> Vec<u32> {
        (0..=256u32).map(|s| s << 16).collect()
    }

    /// Bits spent by a stage on `data` with a uniform network.
    fn cost(spec: &MixSpec, data: &[u8]) -> f64 {
        let mut s = Stage::new(spec);
        let cdf = uniform();
        let mut bits = 0.0;
        for &b in data {
            s.set_network(&cdf);
            for k in 0..8 {
                let bit = ((b >> (7 - k)) & 1) as u32;
                let p = s.p() as f64 / 4096.0;
                bits -= (if bit == 1 { p } else { 1.0 - p }).log2();
                s.update(bit);
            }
        }
        bits
    }

    #[test]
    fn the_network_alone_is_passed_through() {
        let spec = MixSpec {
            orders: 0,
            word: false,
            sparse: false,
            matcher: 0,
            sse: false,
            ..MixSpec::DEFAULT
        };
        let mut s = Stage::new(&spec);
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
            ..MixSpec::DEFAULT
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
            ..MixSpec::DEFAULT
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
