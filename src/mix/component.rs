//! The seam between the stage and its components (docs/architecture.md, "How to add a stage
//! component"). A component — a family of context tables, the match model, the network's maps,
//! a weight-set selector — is one type that implements [`Component`]: it declares what it adds
//! to the mixer ([`Declare`]: inputs with their starting weights, selectors with their numbers
//! of weight sets, memory), pushes its inputs and selectors for each bit ([`Push`]) and learns
//! the bit and the byte. The stage holds the components that its [`MixSpec`] asks for, in the
//! order of the list in [`super::parts`]; that order is the order of the mixer's inputs and of
//! its selectors, so nothing outside a component counts positions.
//!
//! Every component reads the same [`Shared`] state: the network's distribution of the current
//! byte, its prediction of the current bit, the bits of the byte so far, the last bytes and the
//! word hashes.

use std::io;

use super::counters::Counter;
use super::spec::MixSpec;

/// The starting weight of a mixer input that declares none: 3/32 (the mixer's weights have 16
/// fractional bits).
pub const DEFAULT_WEIGHT: i32 = 6 << 10;

/// What every component may read. The stage writes it; components only read it.
pub struct Shared {
    /// The network's quantised distribution of the current byte, as a cumulative table:
    /// `cdf[s]..cdf[s + 1]` is byte `s`'s share (every share at least 1), `cdf[256]` the total.
    /// Set before the byte's first bit (see [`Component::set_network`]).
    pub cdf: Vec<u32>,
    /// The network's prediction of the current bit, stretched (see [`super::logistic`]);
    /// meaningful in [`Component::predict`], [`Component::select`] and [`Component::update`].
    pub net: i32,
    /// The bits of the current byte so far, after a leading 1 (1 at the first bit).
    pub c0: u32,
    /// Bits of the current byte coded so far (0..8; 0 = the most significant bit is next).
    pub bit_index: u32,
    /// The last 8 bytes, newest in the low byte.
    pub history: u64,
    /// Hash of the letters of the current word (0 between words).
    pub word: u32,
    /// Hash of the word before the current one (or before the last gap).
    pub prev_word: u32,
    /// Hash of the word before `prev_word`.
    pub prev_word2: u32,
    /// What the match model expects of the next byte, set at each byte boundary: the byte
    /// (none without a match model or a match) and the match's length
    /// ([`super::matcher::MatchModel::match_len`]).
    pub match_byte: Option<u8>,
    pub match_len: u32,
}

impl Shared {
    pub(super) fn new() -> Self {
        Shared {
            cdf: vec![0; 257],
            net: 0,
            c0: 1,
            bit_index: 0,
            history: 0,
            word: 0,
            prev_word: 0,
            prev_word2: 0,
            match_byte: None,
            match_len: 0,
        }
    }

    /// The last byte.
    pub fn c1(&self) -> u32 {
        (self.history & 0xff) as u32
    }

    /// The last two bytes (16 bits).
    pub fn c2(&self) -> u32 {
        (self.history & 0xffff) as u32
    }

    /// The network's 12-bit probability that the next bit is 1: the share of the bytes that
    /// agree with the bits so far and continue with a 1.
    pub fn network_p(&self) -> i32 {
        let (n0, n1) = self.halves(&self.cdf);
        (((n1 << 12) / (n0 + n1).max(1)) as i32).clamp(1, 4095)
    }

    /// Of a cumulative table over the byte values (`cumulative[v]` sums the shares below `v`,
    /// 257 entries), the shares of the bytes that agree with the bits so far and continue with
    /// a 0 and with a 1.
    #[inline]
    pub fn halves(&self, cumulative: &[u32]) -> (u64, u64) {
        let k = self.bit_index;
        let lo = ((self.c0 << (8 - k)) - 256) as usize;
        let width = 256usize >> k;
        let mid = lo + width / 2;
        let n0 = (cumulative[mid] - cumulative[lo]) as u64;
        let n1 = (cumulative[lo + width] - cumulative[mid]) as u64;
        (n0, n1)
    }

    /// The network's likeliest byte of the current byte position and its share of the total,
    /// in 1/65536 (a scan of the 256 shares: call it once per byte, in
    /// [`Component::set_network`], not per bit).
    pub fn network_likeliest(&self) -> (u8, u32) {
        let (mut best, mut share) = (0usize, 0u32);
        for s in 0..256 {
            let f = self.cdf[s + 1] - self.cdf[s];
            if f > share {
                (best, share) = (s, f);
            }
        }
        let total = self.cdf[256].max(1) as u64;
        (best as u8, (((share as u64) << 16) / total) as u32)
    }
}

/// What a stage of some settings adds up to: the mixer's inputs (their starting weights, in
/// order), its selectors (their numbers of weight sets, in order) and the memory the components
/// take. Components fill it in [`Component::declare`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declare {
    /// Per mixer input, in order: its starting weight.
    pub init: Vec<i32>,
    /// Per selector, in order: how many weight sets it chooses from.
    pub sets: Vec<usize>,
    /// Bytes of memory, all told.
    pub bytes: usize,
    /// Of `bytes`, the counter tables' (held in memory maps of their own, src/mix/slots.rs).
    pub table_bytes: usize,
}

impl Declare {
    /// `n` mixer inputs starting at [`DEFAULT_WEIGHT`].
    pub fn inputs(&mut self, n: usize) {
        self.init.extend(std::iter::repeat_n(DEFAULT_WEIGHT, n));
    }

    /// One mixer input starting at `weight` (16 fractional bits).
    pub fn input_weighted(&mut self, weight: i32) {
        self.init.push(weight);
    }

    /// One selector of `sets` weight sets: the values it pushes are `0..sets`.
    pub fn selector(&mut self, sets: usize) {
        self.sets.push(sets);
    }

    /// `bytes` of memory.
    pub fn memory(&mut self, bytes: usize) {
        self.bytes += bytes;
    }

    /// A counter table of `2^bits` counters (its memory, counted also in `table_bytes`).
    pub fn table(&mut self, bits: u32) {
        self.bytes += 4 << bits;
        self.table_bytes += 4 << bits;
    }
}

/// The mixer's inputs and selectors of the current bit, as components push them, and what
/// components report to the selectors and maps after them.
pub struct Push {
    inputs: Vec<i32>,
    selectors: Vec<usize>,
    /// Context tables whose counter of this bit had been seen before (see [`Push::counter`]).
    pub seen: usize,
    /// The match state of this bit: 0 for no match, else 1 + 2 × length bucket + expected
    /// bit (the match model writes it; selectors and the SSE maps read it).
    pub match_state: usize,
}

impl Push {
    pub(super) fn new(declared: &Declare) -> Self {
        Push {
            inputs: Vec::with_capacity(declared.init.len()),
            selectors: Vec::with_capacity(declared.sets.len()),
            seen: 0,
            match_state: 0,
        }
    }

    /// Empties it for the next bit (keeping its memory).
    pub(super) fn clear(&mut self) {
        self.inputs.clear();
        self.selectors.clear();
        self.seen = 0;
        self.match_state = 0;
    }

    /// One mixer input (stretch units).
    #[inline]
    pub fn add(&mut self, x: i32) {
        self.inputs.push(x);
    }

    /// The two inputs of a counter ([`super::counters::inputs`]); counts it in `seen`.
    #[inline]
    pub fn counter(&mut self, counter: Option<Counter>) {
        self.seen += counter.is_some() as usize;
        let [a, b] = super::counters::inputs(counter);
        self.inputs.push(a);
        self.inputs.push(b);
    }

    /// One selector's value: the weight set it chooses, below the `sets` it declared.
    #[inline]
    pub fn select(&mut self, set: usize) {
        self.selectors.push(set);
    }

    pub(super) fn inputs(&self) -> &[i32] {
        &self.inputs
    }

    pub(super) fn selectors(&self) -> &[usize] {
        &self.selectors
    }
}

/// One part of the stage. The stage calls, per byte: [`Component::set_network`], then per bit
/// [`Component::predict`] of every component, [`Component::select`] of every component,
/// [`Component::prefetch`] (with the next bit's `c0`, except after the last bit) and
/// [`Component::update`]; after the eighth bit [`Component::learn_byte`] and
/// [`Component::start_byte`] of every component. Every call goes to the components in the
/// list's order, and what they push lands in that order.
pub trait Component: Sized {
    /// Whether the stage of `spec` has this component.
    fn wanted(spec: &MixSpec) -> bool;

    /// What the component adds under `spec` (only asked when [`Component::wanted`]): its
    /// inputs, selectors and memory. [`Component::predict`] must push exactly the inputs
    /// declared here, and [`Component::select`] exactly the selectors.
    fn declare(spec: &MixSpec, d: &mut Declare);

    /// The component as `spec` asks for it; an error when the system will not map its memory.
    fn new(spec: &MixSpec) -> io::Result<Self>;

    /// The network's distribution of the next byte is in `s.cdf`: anything computed from it
    /// once per byte is computed here.
    #[inline]
    fn set_network(&mut self, _s: &Shared) {}

    /// Pushes the inputs for the current bit.
    #[inline]
    fn predict(&mut self, _s: &Shared, _m: &mut Push) {}

    /// Pushes the selectors for the current bit, after every component predicted (so it can
    /// read what they reported in `m`).
    #[inline]
    fn select(&self, _s: &Shared, _m: &mut Push) {}

    /// Starts loading what the bit after the bits `c0` of this byte will read (only a hint:
    /// no value may depend on it).
    #[inline]
    fn prefetch(&self, _s: &Shared, _c0: u32) {}

    /// Learns the coded bit (`s` still as at [`Component::predict`]).
    #[inline]
    fn update(&mut self, _s: &Shared, _bit: u32) {}

    /// Learns the coded byte (`s.history` already ends with it, `s.c0` is 1 again).
    #[inline]
    fn learn_byte(&mut self, _s: &Shared, _byte: u8) {}

    /// Sets up the next byte's contexts (also called once at the start of a stream, before
    /// any byte); the stage then prefetches the first bit.
    #[inline]
    fn start_byte(&mut self, _s: &Shared) {}
}

/// Defines [`super::parts::Parts`], a struct with one optional field per component type in the
/// order given, whose methods call each present component's in that order — direct calls the
/// compiler inlines (an enum of components matched per call cost a fifth of the stage's time
/// in indirect jumps) — and [`super::parts::declare`] over the list.
macro_rules! components {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        /// The stage's components (see [`super::component::Component`]), each present when the
        /// settings ask for it.
        pub struct Parts {
            $($(#[$doc])* pub $field: Option<$ty>,)*
        }

        /// What the components of `spec` add to the mixer, in the list's order.
        pub fn declare(spec: &MixSpec) -> Declare {
            let mut d = Declare::default();
            $(if <$ty as Component>::wanted(spec) {
                <$ty as Component>::declare(spec, &mut d);
            })*
            d
        }

        impl Parts {
            /// The components of `spec`.
            pub fn new(spec: &MixSpec) -> io::Result<Self> {
                Ok(Parts {
                    $($field: match <$ty as Component>::wanted(spec) {
                        true => Some(<$ty as Component>::new(spec)?),
                        false => None,
                    },)*
                })
            }
            #[inline]
            pub fn set_network(&mut self, s: &Shared) {
                $(if let Some(c) = &mut self.$field { <$ty as Component>::set_network(c, s); })*
            }
            #[inline]
            pub fn predict(&mut self, s: &Shared, m: &mut Push) {
                $(if let Some(c) = &mut self.$field { <$ty as Component>::predict(c, s, m); })*
            }
            #[inline]
            pub fn select(&self, s: &Shared, m: &mut Push) {
                $(if let Some(c) = &self.$field { <$ty as Component>::select(c, s, m); })*
            }
            #[inline]
            pub fn prefetch(&self, s: &Shared, c0: u32) {
                $(if let Some(c) = &self.$field { <$ty as Component>::prefetch(c, s, c0); })*
            }
            #[inline]
            pub fn update(&mut self, s: &Shared, bit: u32) {
                $(if let Some(c) = &mut self.$field { <$ty as Component>::update(c, s, bit); })*
            }
            #[inline]
            pub fn learn_byte(&mut self, s: &Shared, byte: u8) {
                $(if let Some(c) = &mut self.$field { <$ty as Component>::learn_byte(c, s, byte); })*
            }
            #[inline]
            pub fn start_byte(&mut self, s: &Shared) {
                $(if let Some(c) = &mut self.$field { <$ty as Component>::start_byte(c, s); })*
            }
        }
    };
}

pub(super) use components;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_likeliest_byte_and_its_share() {
        let mut s = Shared::new();
        for b in 0..256usize {
            let f = if b == 0x41 { 3 << 14 } else { 64 };
            s.cdf[b + 1] = s.cdf[b] + f;
        }
        let (byte, share) = s.network_likeliest();
        assert_eq!(byte, 0x41);
        let total = (3u64 << 14) + 255 * 64;
        assert_eq!(share as u64, (3u64 << 30) / total);
    }
}
