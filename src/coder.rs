//! Range coding of bytes with constriction's queue (range) coder.
//!
//! The model's f64 distribution is quantised here, by integer-exact arithmetic, into frequencies
//! that sum to exactly 2^[`PRECISION`] and are at least 1 each: every byte stays codable whatever
//! the model says, and the encoder and decoder derive the same table from the same f64 values.
//! (constriction's own float constructors allocate per call and, fed values whose sum is not
//! exactly 1, can give a symbol zero width; this table avoids both.)

use std::borrow::Borrow;
use std::num::NonZeroU32;

use anyhow::{Result, anyhow};
use constriction::stream::model::{DecoderModel, EncoderModel, EntropyModel};
use constriction::stream::queue::{DefaultRangeDecoder, DefaultRangeEncoder};
use constriction::stream::{Decode, Encode};

use crate::model::VOCAB;

/// Bits of probability resolution: constriction's default range coder (u32 words, u64 state)
/// supports up to 24.
pub const PRECISION: usize = 24;
const TOTAL: u32 = 1 << PRECISION;
/// Frequency units shared out by the model; the other `VOCAB` units give each byte its floor of 1.
const SPREAD: f64 = (TOTAL - VOCAB as u32) as f64;

/// A byte distribution quantised for the coder: `cdf[s]..cdf[s+1]` is byte `s`'s interval.
pub struct QuantizedPdf {
    cdf: [u32; VOCAB + 1],
}

impl Default for QuantizedPdf {
    fn default() -> Self {
        Self::new()
    }
}

impl QuantizedPdf {
    pub fn new() -> Self {
        let mut q = QuantizedPdf {
            cdf: [0; VOCAB + 1],
        };
        q.set_uniform();
        q
    }

    fn set_uniform(&mut self) {
        for (s, c) in self.cdf.iter_mut().enumerate() {
            *c = (s as u32) * (TOTAL / VOCAB as u32);
        }
    }

    /// The cumulative table: `cdf()[s]..cdf()[s + 1]` is byte `s`'s interval.
    pub fn cdf(&self) -> &[u32] {
        &self.cdf
    }

    /// Quantises a normalised distribution. Each byte gets `1 + floor(p · (2^24 − 256))`; what
    /// rounding leaves over goes to the most probable byte (the first of equals). A pdf with a
    /// non-finite or negative entry codes with the uniform table instead.
    pub fn set(&mut self, pdf: &[f64]) {
        debug_assert_eq!(pdf.len(), VOCAB);
        let mut freq = [0u32; VOCAB];
        let mut total = 0u32;
        let mut best = 0usize;
        for (s, &p) in pdf.iter().enumerate() {
            if !(p.is_finite() && p >= 0.0) {
                self.set_uniform();
                return;
            }
            // p ≤ 1 after normalisation; the min guards a pdf that sums slightly above 1.
            let f = 1 + ((p.min(1.0) * SPREAD) as u32).min(TOTAL - VOCAB as u32);
            freq[s] = f;
            total += f;
            if f > freq[best] {
                best = s;
            }
        }
        if total > TOTAL {
            // Only reachable if the pdf sums above 1: fall back rather than overflow.
            self.set_uniform();
            return;
        }
        freq[best] += TOTAL - total;
        let mut acc = 0u32;
        for s in 0..VOCAB {
            self.cdf[s] = acc;
            acc += freq[s];
        }
        self.cdf[VOCAB] = acc;
    }

    /// Bits the coder spends on `byte` under this table. The same on every build (libm's
    /// log2): training may weigh a byte's loss by it (`train(focus=...)`).
    pub fn cost_bits(&self, byte: u8) -> f64 {
        let f = self.cdf[byte as usize + 1] - self.cdf[byte as usize];
        PRECISION as f64 - libm::log2(f as f64)
    }
}

impl EntropyModel<PRECISION> for QuantizedPdf {
    type Symbol = u8;
    type Probability = u32;
}

impl EncoderModel<PRECISION> for QuantizedPdf {
    fn left_cumulative_and_probability(
        &self,
        symbol: impl Borrow<u8>,
    ) -> Option<(u32, NonZeroU32)> {
        let s = *symbol.borrow() as usize;
        let left = self.cdf[s];
        NonZeroU32::new(self.cdf[s + 1] - left).map(|p| (left, p))
    }
}

impl DecoderModel<PRECISION> for QuantizedPdf {
    fn quantile_function(&self, quantile: u32) -> (u8, u32, NonZeroU32) {
        // The last s with cdf[s] <= quantile; every interval is non-empty, so s < VOCAB.
        let s = self.cdf[1..VOCAB].partition_point(|&c| c <= quantile);
        let left = self.cdf[s];
        let width = NonZeroU32::new(self.cdf[s + 1] - left).expect("every frequency is >= 1");
        (s as u8, left, width)
    }
}

/// A binary decision's model for the mixing stage (src/mix): the probability that the bit is
/// 1 in 12 bits (or, with `mix:fine`, 16), scaled to the coder's [`PRECISION`] (symbol 1
/// takes the interval's low part).
pub struct BitModel {
    one: u32,
    /// Bits of the probability it was given.
    bits: usize,
}

/// Bits of a [`BitModel`]'s probability unless told otherwise.
pub const BIT_PRECISION: usize = 12;

impl BitModel {
    /// A 12-bit `p1`, clamped to `1..4096`, so both outcomes stay codable.
    pub fn new(p1: i32) -> Self {
        Self::with_precision(p1, BIT_PRECISION)
    }

    /// A `p1` of `bits` bits (12 to 16), clamped to `1..2^bits`.
    pub fn with_precision(p1: i32, bits: usize) -> Self {
        debug_assert!((BIT_PRECISION..=16).contains(&bits));
        let p1 = p1.clamp(1, (1 << bits) - 1) as u32;
        BitModel {
            one: p1 << (PRECISION - bits),
            bits,
        }
    }

    /// Bits the coder spends on `bit` under this model.
    pub fn cost_bits(&self, bit: bool) -> f64 {
        let f = if bit { self.one } else { TOTAL - self.one };
        PRECISION as f64 - libm::log2(f as f64)
    }

    /// The share of `bit` in the model's bits (1..2^bits).
    fn share(&self, bit: bool) -> u32 {
        let one = self.one >> (PRECISION - self.bits);
        if bit { one } else { (1 << self.bits) - one }
    }
}

/// The probability the coder gave a byte coded as 8 [`BitModel`] decisions: the product of
/// their shares (12 bits each, exact in 96 bits; 16 each with `mix:fine`, exact in 128), so
/// that its cost in bits is one logarithm per byte and the same on every build.
pub struct ByteShares {
    product: u128,
    /// Bits of the shares multiplied so far.
    bits: usize,
}

impl ByteShares {
    pub fn new() -> Self {
        ByteShares {
            product: 1,
            bits: 0,
        }
    }

    /// Counts the decision `bit` coded under `model`.
    pub fn push(&mut self, model: &BitModel, bit: bool) {
        self.product *= model.share(bit) as u128;
        self.bits += model.bits;
    }

    /// Bits spent on the byte (after its 8 decisions), by libm's log2.
    pub fn bits(&self) -> f64 {
        self.bits as f64 - libm::log2(self.product as f64)
    }
}

impl Default for ByteShares {
    fn default() -> Self {
        Self::new()
    }
}

impl EntropyModel<PRECISION> for BitModel {
    type Symbol = bool;
    type Probability = u32;
}

impl EncoderModel<PRECISION> for BitModel {
    fn left_cumulative_and_probability(
        &self,
        symbol: impl Borrow<bool>,
    ) -> Option<(u32, NonZeroU32)> {
        if *symbol.borrow() {
            NonZeroU32::new(self.one).map(|p| (0, p))
        } else {
            NonZeroU32::new(TOTAL - self.one).map(|p| (self.one, p))
        }
    }
}

impl DecoderModel<PRECISION> for BitModel {
    fn quantile_function(&self, quantile: u32) -> (bool, u32, NonZeroU32) {
        if quantile < self.one {
            (true, 0, NonZeroU32::new(self.one).expect("p1 >= 1"))
        } else {
            (
                false,
                self.one,
                NonZeroU32::new(TOTAL - self.one).expect("p1 < 1"),
            )
        }
    }
}

/// Encodes bytes into 32-bit words.
pub struct Encoder {
    inner: DefaultRangeEncoder,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    pub fn new() -> Self {
        Self {
            inner: DefaultRangeEncoder::new(),
        }
    }

    pub fn encode(&mut self, byte: u8, pdf: &QuantizedPdf) -> Result<()> {
        self.inner
            .encode_symbol(byte, pdf)
            .map_err(|e| anyhow!("range encoder failed: {e:?}"))
    }

    pub fn encode_bit(&mut self, bit: bool, model: &BitModel) -> Result<()> {
        self.inner
            .encode_symbol(bit, model)
            .map_err(|e| anyhow!("range encoder failed: {e:?}"))
    }

    /// Flushes the coder and returns the compressed words.
    pub fn finish(self) -> Vec<u32> {
        self.inner
            .into_compressed()
            .unwrap_or_else(|never| match never {})
    }
}

/// Decodes bytes from the words an [`Encoder`] wrote.
pub struct Decoder {
    inner: DefaultRangeDecoder,
}

impl Decoder {
    pub fn new(words: Vec<u32>) -> Result<Self> {
        let inner = DefaultRangeDecoder::from_compressed(words)
            .map_err(|_| anyhow!("compressed frame is too short to start the range decoder"))?;
        Ok(Self { inner })
    }

    /// Decodes one byte. Corrupt data may still decode to some byte: the frame's length and the
    /// file's CRC catch that.
    pub fn decode(&mut self, pdf: &QuantizedPdf) -> Result<u8> {
        self.inner
            .decode_symbol(pdf)
            .map_err(|e| anyhow!("corrupt compressed data ({e:?})"))
    }

    /// Decodes one binary decision of the mixing stage.
    pub fn decode_bit(&mut self, model: &BitModel) -> Result<bool> {
        self.inner
            .decode_symbol(model)
            .map_err(|e| anyhow!("corrupt compressed data ({e:?})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bytes_shares_cost_what_its_decisions_cost() {
        // The most skewed decisions both ways: 4095 and 1 in 4096 each.
        for p in [1, 7, 2048, 3000, 4095] {
            for bit in [false, true] {
                let model = BitModel::new(p);
                let mut shares = ByteShares::new();
                for _ in 0..8 {
                    shares.push(&model, bit);
                }
                let sum = 8.0 * model.cost_bits(bit);
                assert!((shares.bits() - sum).abs() < 1e-9, "{p} {bit}");
            }
        }
        // 16-bit shares (`mix:fine`), the most skewed alone and with 12-bit ones in one byte.
        for p in [1, 2, 4096, 32768, 65534, 65535] {
            let fine = BitModel::with_precision(p, 16);
            let coarse = BitModel::new(p >> 4);
            let mut shares = ByteShares::new();
            for k in 0..8 {
                shares.push(if k % 2 == 0 { &fine } else { &coarse }, k % 3 == 0);
            }
            let sum: f64 = (0..8)
                .map(|k| match k % 2 {
                    0 => fine.cost_bits(k % 3 == 0),
                    _ => coarse.cost_bits(k % 3 == 0),
                })
                .sum();
            assert!((shares.bits() - sum).abs() < 1e-9, "{p}");
        }
        // A 16-bit model sure of a bit spends 1/16 of what the surest 12-bit one does.
        let (fine, coarse) = (BitModel::with_precision(65535, 16), BitModel::new(4095));
        assert!((coarse.cost_bits(true) / fine.cost_bits(true) - 16.0).abs() < 0.01);
    }

    fn skewed_pdf(seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut p: Vec<f64> = (0..VOCAB)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 11) as f64 / (1u64 << 53) as f64).powi(8)
            })
            .collect();
        let sum: f64 = p.iter().sum();
        p.iter_mut().for_each(|v| *v /= sum);
        p
    }

    #[test]
    fn quantized_table_is_complete_and_positive() {
        let mut q = QuantizedPdf::new();
        let mut certain = vec![0.0; VOCAB];
        certain[200] = 1.0;
        for pdf in [skewed_pdf(1), certain, vec![1.0 / 256.0; VOCAB]] {
            q.set(&pdf);
            assert_eq!(q.cdf[0], 0);
            assert_eq!(q.cdf[VOCAB], TOTAL);
            assert!(q.cdf.windows(2).all(|w| w[1] > w[0]));
        }
        let mut bad = skewed_pdf(2);
        bad[3] = f64::NAN;
        q.set(&bad);
        assert_eq!(q.cdf[VOCAB], TOTAL);
        assert!((q.cost_bits(7) - 8.0).abs() < 1e-9);
    }

    #[test]
    fn bits_round_trip_at_every_probability() {
        let bit = |i: u32| (i * 2_654_435_761u32) >> 31 == 1;
        // 12-bit models, and 16-bit ones (`mix:fine`) from one end of the range to the other.
        let coarse = |i: u32| BitModel::new(((i * 37) % 4200) as i32 - 50);
        let fine = |i: u32| BitModel::with_precision(((i * 3277) % 66000) as i32 - 200, 16);
        for model in [&coarse as &dyn Fn(u32) -> BitModel, &fine] {
            let mut enc = Encoder::new();
            for i in 0..20_000u32 {
                enc.encode_bit(bit(i), &model(i)).unwrap();
            }
            let mut dec = Decoder::new(enc.finish()).unwrap();
            for i in 0..20_000u32 {
                assert_eq!(dec.decode_bit(&model(i)).unwrap(), bit(i), "bit {i}");
            }
        }
    }

    #[test]
    fn encode_then_decode_gives_the_bytes_back() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut enc = Encoder::new();
        let mut q = QuantizedPdf::new();
        for (i, &b) in bytes.iter().enumerate() {
            q.set(&skewed_pdf(i as u64));
            enc.encode(b, &q).unwrap();
        }
        let words = enc.finish();
        let mut dec = Decoder::new(words).unwrap();
        for (i, &b) in bytes.iter().enumerate() {
            q.set(&skewed_pdf(i as u64));
            assert_eq!(dec.decode(&q).unwrap(), b, "byte {i}");
        }
    }
}
