//! Context tables as a stage component: [`Tables`] holds the counter tables of one [`Family`]
//! of contexts (the orders, the word, the sparse contexts…), each with, under `mix:conf=1`, its
//! confidence map; a family only says how many tables of what size it has and how it hashes
//! their contexts at each byte boundary.
//!
//! Per table the mixer gets two inputs ([`super::counters::inputs`]) and, with `conf`, a third
//! (its confidence map's refinement); tables with a counter for the current bit count toward
//! [`Push::seen`].

use std::io;

use super::apm::Apm;
use super::component::{Component, Declare, Push, Shared};
use super::counters::{Counter, CounterTable, Position};
use super::logistic::stretch;
use super::spec::MixSpec;

/// A family of context tables.
pub trait Family: Sized {
    /// Whether the stage of `spec` has this family.
    fn wanted(spec: &MixSpec) -> bool;

    /// Log2 sizes of its tables under `spec`, in order.
    fn table_bits(spec: &MixSpec) -> Vec<u32>;

    /// Memory it takes besides its tables (a model of its own).
    fn bytes(_spec: &MixSpec) -> usize {
        0
    }

    fn new(spec: &MixSpec) -> io::Result<Self>;

    /// Learns the coded byte (for a family with a model of its own).
    fn learn_byte(&mut self, _s: &Shared, _byte: u8) {}

    /// Whether its contexts read the network's distribution of the byte ([`Shared::cdf`]):
    /// then they are hashed when the distribution arrives ([`Component::set_network`]) rather
    /// than at the byte boundary, and the first bit's counters are prefetched then.
    const READS_NETWORK: bool = false;

    /// The context hash of each of its tables for the next byte.
    fn contexts(&self, s: &Shared, out: &mut [u32]);

    /// Whether its tables predict and learn the next byte (asked with [`Family::contexts`]):
    /// a family for one kind of data may sit out the others, pushing zeros, which the mixer
    /// reads as no opinion.
    fn active(&self) -> bool {
        true
    }
}

/// The counter tables of a family, as a component.
pub struct Tables<F> {
    family: F,
    tables: Vec<CounterTable>,
    /// Per table: the context hash of the current byte position.
    contexts: Vec<u32>,
    /// Per table: where the current bit's counter sits.
    slots: Vec<Position>,
    /// Per table, with `conf`: the map from a counter's history to a probability.
    confidence: Vec<Apm>,
    /// The confidence maps read the counters' last two bits (`ext` 512).
    recent: bool,
    /// What [`Family::active`] said for the current byte.
    active: bool,
}

impl<F: Family> Component for Tables<F> {
    fn wanted(spec: &MixSpec) -> bool {
        F::wanted(spec)
    }

    fn declare(spec: &MixSpec, d: &mut Declare) {
        for bits in F::table_bits(spec) {
            d.table(bits);
            d.inputs(2 + spec.conf as usize);
            if spec.conf {
                d.memory(Apm::bytes(spec.conf_contexts()));
            }
        }
        d.memory(F::bytes(spec));
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        let bits = F::table_bits(spec);
        Ok(Tables {
            family: F::new(spec)?,
            tables: bits
                .iter()
                .map(|&b| {
                    let table = match spec.ways && b > 16 {
                        true => CounterTable::two_way(b)?,
                        false => CounterTable::new(b)?,
                    };
                    let table = if spec.nibble { table.in_lines() } else { table };
                    let table = if spec.long {
                        table.long_memory()
                    } else {
                        table
                    };
                    Ok(if spec.recent {
                        table.keep_recent()
                    } else {
                        table
                    })
                })
                .collect::<io::Result<_>>()?,
            contexts: vec![0; bits.len()],
            slots: vec![Position::default(); bits.len()],
            confidence: match spec.conf {
                true => bits
                    .iter()
                    .map(|_| Apm::new(spec.conf_contexts(), 6))
                    .collect(),
                false => Vec::new(),
            },
            recent: spec.recent,
            active: true,
        })
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        if !self.active {
            let per_table = 2 + !self.confidence.is_empty() as usize;
            for _ in 0..self.tables.len() * per_table {
                m.add(0);
            }
            return;
        }
        for (t, table) in self.tables.iter().enumerate() {
            let at = table.find_bit(self.contexts[t], s.c0);
            self.slots[t] = at;
            let counter = table.get_at(at);
            m.counter(counter);
            if let Some(map) = self.confidence.get_mut(t) {
                m.add(confidence_input(map, counter, self.recent));
            }
        }
    }

    #[inline]
    fn prefetch(&self, _s: &Shared, c0: u32) {
        if !self.active {
            return;
        }
        for (table, &context) in self.tables.iter().zip(&self.contexts) {
            table.prefetch_bit(context, c0);
        }
    }

    #[inline]
    fn update(&mut self, _s: &Shared, bit: u32) {
        if !self.active {
            return;
        }
        for map in &mut self.confidence {
            map.update(bit);
        }
        for (table, &at) in self.tables.iter_mut().zip(&self.slots) {
            table.update_at(at, bit);
        }
    }

    fn learn_byte(&mut self, s: &Shared, byte: u8) {
        self.family.learn_byte(s, byte);
    }

    fn set_network(&mut self, s: &Shared) {
        if F::READS_NETWORK {
            self.family.contexts(s, &mut self.contexts);
            self.active = self.family.active();
            self.prefetch(s, 1);
        }
    }

    fn start_byte(&mut self, s: &Shared) {
        if !F::READS_NETWORK {
            self.family.contexts(s, &mut self.contexts);
            self.active = self.family.active();
        }
    }
}

/// A counter's third mixer input (`mix:conf=1`): its probability refined by `map` in the
/// context of its count and whether its history was deterministic, stretched.
pub fn confidence_input(map: &mut Apm, counter: Option<Counter>, recent: bool) -> i32 {
    let (p, cx) = match counter {
        None => (2048, 0),
        Some(c) => {
            let history = (c.n.min(15) as usize) << 1 | c.deterministic as usize;
            match recent {
                true => (c.p, history << 2 | c.recent as usize),
                false => (c.p, history),
            }
        }
    };
    stretch(map.refine(p, cx))
}

/// Bytes seen and where the last byte that text does not have came (a control byte other than
/// tab, newline and return, or one above `~`): what the families for one kind of data read to
/// sit out the others ([`Family::active`]).
#[derive(Default)]
pub struct BinaryClock {
    /// Bytes seen.
    pub pos: u64,
    /// `pos` after the last byte that text does not have (0: none yet).
    last_binary: u64,
}

impl BinaryClock {
    pub fn learn(&mut self, byte: u8) {
        self.pos += 1;
        if !matches!(byte, b'\t' | b'\n' | b'\r' | b' '..=b'~') {
            self.last_binary = self.pos;
        }
    }

    /// Bytes since the last byte that text does not have, if one has come.
    pub fn since_binary(&self) -> Option<u64> {
        (self.last_binary > 0).then(|| self.pos - self.last_binary)
    }

    /// Whether a byte that text does not have came within the last [`BINARY_SPAN`] bytes:
    /// where the families for binary data are on, so that text sits them out (no time, no
    /// noise in the mix).
    pub fn near_binary(&self) -> bool {
        self.since_binary().is_some_and(|d| d < BINARY_SPAN)
    }
}

/// Bytes after the last byte that text does not have (a control character or one above 126)
/// during which the families for binary data stay on ([`BinaryClock::near_binary`]).
pub const BINARY_SPAN: u64 = 64;
