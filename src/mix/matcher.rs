//! The match model: finds the last place where the most recent `MIN_LEN` bytes occurred before
//! and predicts that the byte which followed them then follows now. Its confidence is learned
//! per match length and predicted bit, by an adaptive probability (a match of 3 bytes in text
//! is a guess; one of 40 is nearly certain).
//!
//! History lives in a window of `2^window_bits` bytes; an index of one `u32` slot per 4 window
//! bytes maps the hash of the last `MIN_LEN` bytes to the position after them. A match found
//! through the index is verified against the window, so a hash collision costs nothing.
//!
//! With `mix:follow=1` a match that misses a byte is not dropped: the model goes on predicting
//! the bytes after the place it followed (a record with one field changed, an instruction with
//! another operand, a line with one word changed), with a confidence of its own, until the
//! bytes agree again for [`FOLLOW_HOLD`] bytes or it has missed [`FOLLOW_MISSES`] times.

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::counters::{CounterTable, hash, inputs};
use super::logistic::stretch;
use super::spec::MixSpec;

/// Bytes hashed to find a match.
pub const MIN_LEN: usize = 6;
/// Longest length counted; longer matches are as sure as this.
const MAX_LEN: u32 = 65_535;
/// How far back a new match is verified (and so the length it starts with, at most).
const MAX_SCAN: usize = 64;
/// With `follow`: misses after which a followed match is dropped (measured against 4, 6, 12
/// and 16 on text, code and binaries: 8 to 12 gained most).
pub const FOLLOW_MISSES: u32 = 8;
/// With `follow`: bytes in a row that a followed match must predict right to count as a match
/// again (its misses forgotten).
const FOLLOW_HOLD: u32 = 16;

/// The match model's state.
pub struct MatchModel {
    window: Vec<u8>,
    window_mask: usize,
    index: Vec<u32>,
    index_bits: u32,
    /// Bytes seen.
    pos: usize,
    /// Position (in the whole stream) of the predicted byte; meaningful when `len > 0`.
    ptr: usize,
    /// Bytes matched so far; 0 when there is no match.
    len: u32,
    /// The predicted byte, while its bits agree with the bits coded so far.
    expected: Option<u8>,
    /// Confidence per (length bucket, predicted bit).
    confidence: CounterTable,
    conf_hash: u32,
    /// With `follow` (`mix:follow=1`).
    follow: bool,
    /// Following a match past a miss: `len` counts the bytes right since the last miss.
    following: bool,
    /// Misses since the match was found (while `following`).
    misses: u32,
}

/// The memory a model of `window_bits` takes, in bytes.
pub fn bytes(window_bits: u32) -> usize {
    (1usize << window_bits) + 4 * (1usize << index_bits(window_bits)) + 4 * 1024
}

fn index_bits(window_bits: u32) -> u32 {
    window_bits.saturating_sub(2).max(8)
}

/// Match lengths in 32 buckets: 0 to 15 as they are, then two per doubling.
pub fn length_bucket(len: u32) -> u32 {
    if len < 16 {
        len
    } else {
        let log = 31 - len.leading_zeros(); // 4..=15
        let half = (len >> (log - 1)) & 1;
        (16 + (log - 4) * 2 + half).min(31)
    }
}

impl MatchModel {
    pub fn new(window_bits: u32, follow: bool) -> io::Result<Self> {
        let ib = index_bits(window_bits);
        Ok(MatchModel {
            window: vec![0; 1usize << window_bits],
            window_mask: (1usize << window_bits) - 1,
            index: vec![0; 1usize << ib],
            index_bits: ib,
            pos: 0,
            ptr: 0,
            len: 0,
            expected: None,
            confidence: CounterTable::new(10)?,
            conf_hash: 0,
            follow,
            following: false,
            misses: 0,
        })
    }

    /// The current match length (0: none). A followed match reads as 0 to 5 bytes (its bytes
    /// right since the last miss), lengths a fresh match never has ([`MIN_LEN`] on): the
    /// selectors and maps that read the length tell the two apart.
    pub fn match_len(&self) -> u32 {
        match (self.expected, self.following) {
            (None, _) => 0,
            (Some(_), true) => self.len.min(MIN_LEN as u32 - 1),
            (Some(_), false) => self.len,
        }
    }

    /// The byte the match predicts as the next, while the bits so far agree with it.
    pub fn expected_byte(&self) -> Option<u8> {
        self.expected
    }

    /// The bit the match predicts at bit `bit_index` (0 = most significant), if any.
    pub fn expected_bit(&self, bit_index: u32) -> Option<u32> {
        self.expected.map(|b| ((b >> (7 - bit_index)) & 1) as u32)
    }

    /// The mixer's inputs for the next bit: the learned confidence of the match, stretched, and
    /// a fixed vote that grows with the length; all zero without a match.
    pub fn predict(&mut self, bit_index: u32) -> [i32; 3] {
        let Some(bit) = self.expected_bit(bit_index) else {
            return [0, 0, 0];
        };
        // A followed match learns its confidence apart, by its bytes right and its misses.
        let state = match self.following {
            true => 32 + self.len.min(15) + 16 * self.misses.min(3),
            false => length_bucket(self.len),
        };
        self.conf_hash = hash((state * 2 + bit) as u64, 0x3a7c);
        let [st, sure] = inputs(self.confidence.get(self.conf_hash));
        let vote = (self.len.min(32) as i32) * 32;
        let sign = if bit == 1 { 1 } else { -1 };
        // Unseen confidence: fall back to a mild vote.
        let st = if st == 0 { sign * stretch(3072) } else { st };
        [st, sure, sign * vote]
    }

    /// Learns the coded bit: the confidence of the bucket that predicted it, and whether the
    /// match still holds.
    pub fn update_bit(&mut self, bit_index: u32, bit: u32) {
        if let Some(expected) = self.expected_bit(bit_index) {
            self.confidence.update(self.conf_hash, bit);
            if expected != bit {
                self.expected = None;
                if !self.follow {
                    self.len = 0;
                }
            }
        }
    }

    /// Learns a whole byte: extends or ends the match, files the new context in the index and
    /// looks for a match if there is none.
    pub fn update_byte(&mut self, byte: u8) {
        self.window[self.pos & self.window_mask] = byte;
        self.pos += 1;
        let active = self.len > 0 || self.following;
        if active && self.at(self.ptr) == byte {
            self.len = (self.len + 1).min(MAX_LEN);
            self.ptr += 1;
            if self.following && self.len >= FOLLOW_HOLD {
                self.following = false;
                self.misses = 0;
            }
        } else if self.follow && active && self.misses < FOLLOW_MISSES {
            self.following = true;
            self.misses += 1;
            self.len = 0;
            self.ptr += 1;
        } else {
            self.len = 0;
            self.following = false;
            self.misses = 0;
        }
        if self.pos >= MIN_LEN {
            let h = self.context_hash();
            let slot = (h >> (32 - self.index_bits)) as usize;
            // A followed match gives way to a fresh one until it is as long.
            if self.len == 0 || (self.following && (self.len as usize) < MIN_LEN) {
                let candidate = self.index[slot] as usize;
                if candidate > 0 && candidate < self.pos && self.pos - candidate <= self.window_mask
                {
                    // Count how far back the two histories agree.
                    let mut n = 0usize;
                    while n < MAX_SCAN
                        && n < candidate
                        && self.pos - candidate + n <= self.window_mask
                        && self.at(candidate - 1 - n) == self.at(self.pos - 1 - n)
                    {
                        n += 1;
                    }
                    if n >= MIN_LEN {
                        self.len = n as u32;
                        self.ptr = candidate;
                        self.following = false;
                        self.misses = 0;
                    }
                }
            }
            self.index[slot] = self.pos as u32;
        }
        self.expected = (self.len > 0 || self.following).then(|| self.at(self.ptr));
    }

    fn at(&self, pos: usize) -> u8 {
        self.window[pos & self.window_mask]
    }

    /// Hash of the last [`MIN_LEN`] bytes.
    fn context_hash(&self) -> u32 {
        let mut v = 0u64;
        for k in 1..=MIN_LEN {
            v = (v << 8) | self.at(self.pos - k) as u64;
        }
        hash(v, 0x6d61)
    }
}

/// As a stage component (`mix:match`): three mixer inputs ([`MatchModel::predict`]), and the
/// match state ([`Push::match_state`]) for the selectors and maps after it.
impl Component for MatchModel {
    fn wanted(spec: &MixSpec) -> bool {
        spec.matcher > 0
    }

    fn declare(spec: &MixSpec, d: &mut Declare) {
        d.inputs(3);
        d.memory(bytes(spec.matcher));
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        let m = MatchModel::new(spec.matcher, spec.follow)?;
        Ok(match spec.long {
            true => MatchModel {
                confidence: m.confidence.long_memory(),
                ..m
            },
            false => m,
        })
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        let [a, b, c] = MatchModel::predict(self, s.bit_index);
        m.add(a);
        m.add(b);
        m.add(c);
        if let Some(bit) = self.expected_bit(s.bit_index) {
            m.match_state = 1 + (length_bucket(self.match_len()) * 2 + bit) as usize;
        }
    }

    #[inline]
    fn update(&mut self, s: &Shared, bit: u32) {
        self.update_bit(s.bit_index, bit);
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.update_byte(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mixer input 0 toward the right bit, summed over a pass of the phrase.
    fn pass(m: &mut MatchModel, phrase: &[u8]) -> i64 {
        let mut support = 0i64;
        for &b in phrase {
            for k in 0..8 {
                let bit = ((b >> (7 - k)) & 1) as u32;
                let [st, _, _] = m.predict(k);
                support += if bit == 1 { st } else { -st } as i64;
                m.update_bit(k, bit);
            }
            m.update_byte(b);
        }
        support
    }

    #[test]
    fn the_match_model_predicts_a_repeat_with_rising_confidence() {
        let mut m = MatchModel::new(16, false).unwrap();
        let phrase = b"a phrase that comes back, word for word, every time. ";
        assert_eq!(pass(&mut m, phrase), 0, "nothing to match the first time");
        let second = pass(&mut m, phrase);
        let third = pass(&mut m, phrase);
        let fifth = {
            pass(&mut m, phrase);
            pass(&mut m, phrase)
        };
        assert!(second > 0, "{second}");
        assert!(third > second && fifth > third, "{second} {third} {fifth}");
        assert!(
            m.match_len() > 4 * phrase.len() as u32 - 8,
            "{}",
            m.match_len()
        );
    }

    #[test]
    fn a_broken_match_stops_predicting() {
        let mut m = MatchModel::new(12, false).unwrap();
        pass(&mut m, b"0123456789abcdef");
        pass(&mut m, b"0123456789");
        assert!(m.match_len() > 0);
        // The history continues with 'a'; a 'Z' breaks the match at its first differing bit.
        pass(&mut m, b"Z");
        assert_eq!(m.match_len(), 0);
        assert_eq!(m.predict(0), [0, 0, 0]);
    }

    #[test]
    fn a_followed_match_predicts_past_a_miss() {
        // Records that differ in one byte: the match breaks at it and, followed, picks up
        // the bytes after it at once.
        let run = |follow: bool| {
            let mut m = MatchModel::new(12, follow).unwrap();
            let mut after_miss = 0i64;
            for row in 0..40u8 {
                let record = [
                    b'<', b'r', b'e', b'c', b'o', b'r', b'd', row, b'>', b'.', b'.', b'\n',
                ];
                for (i, &b) in record.iter().enumerate() {
                    for k in 0..8 {
                        let bit = ((b >> (7 - k)) & 1) as u32;
                        let [st, _, _] = m.predict(k);
                        if i == 8 && row >= 20 {
                            after_miss += if bit == 1 { st } else { -st } as i64;
                        }
                        m.update_bit(k, bit);
                    }
                    m.update_byte(b);
                }
            }
            after_miss
        };
        let (followed, dropped) = (run(true), run(false));
        assert!(followed > 0 && dropped == 0, "{followed} {dropped}");
    }

    #[test]
    fn a_followed_match_is_dropped_after_its_misses() {
        let mut m = MatchModel::new(12, true).unwrap();
        pass(&mut m, b"0123456789abcdefghijklmnopqrstuvwxyz");
        pass(&mut m, b"0123456789");
        assert!(m.match_len() >= MIN_LEN as u32);
        // Bytes that agree with nothing (and never repeat): the match is followed for
        // FOLLOW_MISSES misses, a length below a fresh match's least.
        for n in 1..=FOLLOW_MISSES {
            pass(&mut m, &[0x80 + n as u8]);
            assert!(m.following && m.misses == n, "{n}");
            assert_eq!(
                m.expected_byte(),
                Some(b"abcdefghijklmnopqrstuvwxyz"[n as usize])
            );
            assert!(m.match_len() < MIN_LEN as u32);
        }
        pass(&mut m, &[0xff]);
        assert_eq!((m.match_len(), m.expected_byte()), (0, None));
    }

    #[test]
    fn length_buckets_are_monotone_and_bounded() {
        let mut last = 0;
        for len in 0..100_000 {
            let b = length_bucket(len);
            assert!(b >= last && b < 32);
            last = b;
        }
    }
}
