//! The run model (`ext` 256, `runs`): per context of the last 1, 2, 3, 4 and 6 bytes, the byte
//! that followed it last and how many times in a row it did. Where a counter spreads its
//! belief over the bits, a run is a claim about the whole byte: a context followed by the same
//! byte eight times predicts it with a confidence learned per (order, run length), and says
//! nothing once a bit of the byte disagrees.

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::counters::hash;
use super::logistic::stretch;
use super::spec::{MixSpec, Part};

/// The orders a run is kept for.
const ORDERS: [u32; 5] = [1, 2, 3, 4, 6];
/// Run lengths told apart by the confidence maps (longer ones count as the longest).
const RUN_BUCKETS: usize = 16;
/// Shift of the confidence maps' updates (1/32 of the error).
const MAP_RATE: u32 = 5;

/// What a context's slot holds: 8 check bits, the byte, the run length (16 bits).
#[derive(Clone, Copy, Default)]
struct Slot(u32);

impl Slot {
    fn check(self) -> u32 {
        self.0 >> 24
    }
    fn byte(self) -> u8 {
        (self.0 >> 16) as u8
    }
    fn run(self) -> u32 {
        self.0 & 0xffff
    }
    fn new(check: u32, byte: u8, run: u32) -> Slot {
        Slot(check << 24 | (byte as u32) << 16 | run.min(0xffff))
    }
}

/// One order's run table and the current byte's claim.
struct Order {
    slots: Vec<Slot>,
    bits: u32,
    /// The current context's slot index and check.
    at: usize,
    check: u32,
    /// The claimed byte and its run length, while its bits agree with the bits coded so far.
    claim: Option<(u8, u32)>,
    /// Per run bucket: the 16-bit probability that the claimed bit is right.
    sure: [u32; RUN_BUCKETS],
}

pub struct Runs {
    orders: Vec<Order>,
}

/// Log2 slots of each order's run table: a quarter of `table` (under `cap`, [`Part::Quarter`]).
fn run_bits(spec: &MixSpec) -> u32 {
    spec.part_bits(Part::Quarter, spec.quarter_table(), 0)
}

fn run_bucket(run: u32) -> usize {
    match run {
        0..=11 => run as usize,
        12..=15 => 12,
        16..=31 => 13,
        32..=63 => 14,
        _ => 15,
    }
}

impl Component for Runs {
    fn wanted(spec: &MixSpec) -> bool {
        spec.runs
    }

    fn declare(spec: &MixSpec, d: &mut Declare) {
        d.inputs(ORDERS.len());
        d.memory(ORDERS.len() * (4 << run_bits(spec)));
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        let bits = run_bits(spec);
        Ok(Runs {
            orders: ORDERS
                .iter()
                .map(|_| Order {
                    slots: vec![Slot::default(); 1 << bits],
                    bits,
                    at: 0,
                    check: 0,
                    claim: None,
                    sure: [3 << 14; RUN_BUCKETS],
                })
                .collect(),
        })
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        for o in &self.orders {
            m.add(match o.claim {
                None => 0,
                Some((byte, run)) => {
                    let p = (o.sure[run_bucket(run)] >> 4) as i32;
                    let st = stretch(p.clamp(1, 4095));
                    match expected_bit(byte, s.bit_index) {
                        1 => st,
                        _ => -st,
                    }
                }
            });
        }
    }

    #[inline]
    fn update(&mut self, s: &Shared, bit: u32) {
        for o in &mut self.orders {
            if let Some((byte, run)) = o.claim {
                let right = expected_bit(byte, s.bit_index) == bit;
                let p = &mut o.sure[run_bucket(run)];
                let target = if right { 65535 } else { 0 };
                *p = (*p as i32 + ((target - *p as i32) >> MAP_RATE)) as u32;
                if !right {
                    o.claim = None;
                }
            }
        }
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        for o in &mut self.orders {
            let slot = o.slots[o.at];
            o.slots[o.at] = match slot.check() == o.check && slot.run() > 0 {
                true if slot.byte() == byte => Slot::new(o.check, byte, slot.run() + 1),
                _ => Slot::new(o.check, byte, 1),
            };
        }
    }

    fn start_byte(&mut self, s: &Shared) {
        for (o, &order) in self.orders.iter_mut().zip(&ORDERS) {
            let mask = (1u64 << (8 * order)) - 1;
            let h = hash(s.history & mask, 0x300 + order);
            o.at = (h >> (32 - o.bits)) as usize;
            o.check = h & 0xff;
            let slot = o.slots[o.at];
            o.claim = match slot.check() == o.check && slot.run() > 0 {
                true => Some((slot.byte(), slot.run())),
                false => None,
            };
        }
    }
}

/// The bit at `bit_index` (0 = the most significant) of `byte`.
fn expected_bit(byte: u8, bit_index: u32) -> u32 {
    (byte as u32 >> (7 - bit_index)) & 1
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Random 5-byte keys, each followed by the byte its key was followed by the times before
    /// (a byte drawn once per key): after a key has come round, its byte is certain.
    fn keyed_bytes(records: usize) -> Vec<u8> {
        let mut next = lcg(9);
        let keys: Vec<([u8; 5], u8)> = (0..40)
            .map(|_| ([0; 5].map(|_| next() as u8), next() as u8))
            .collect();
        let mut data = Vec::new();
        for _ in 0..records {
            let (key, byte) = keys[next() as usize % keys.len()];
            data.extend_from_slice(&key);
            data.push(byte);
        }
        data
    }

    #[test]
    fn a_run_predicts_the_byte_that_always_followed_its_context() {
        let data = keyed_bytes(2000);
        let (with, without) = with_and_without(&data, |m| m.runs = true);
        assert!(with < 0.95 * without, "{with} vs {without}");
    }
}
