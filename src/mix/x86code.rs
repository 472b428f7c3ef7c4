//! Contexts for x86 machine code (with the x86 transform, `mix:x86=1`): inside the four-byte
//! operand of a call, a jump or a conditional jump, the operand's bytes so far with the opcode,
//! and the byte of the instruction's own position at the operand byte's place. After the
//! transform (src/transform/x86.rs) an operand is its target's position, and the targets of
//! near calls share their high bytes with the position of the call.

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;

/// Where the coded bytes are in x86 code.
pub struct X86Code {
    /// Bytes coded so far in the member.
    pos: u64,
    /// The operand's opcode (`E8`, `E9`, or the second byte of `0F 8x`).
    op: u8,
    /// The next byte's index in the operand (0..4) while `left` > 0.
    k: u32,
    /// Operand bytes still to come.
    left: u32,
    /// The position of the byte after the instruction.
    end: u64,
    /// The byte before.
    prev: u8,
}

impl Family for X86Code {
    fn wanted(spec: &MixSpec) -> bool {
        spec.x86
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Quarter, spec.quarter_table(), 0); 2]
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(X86Code {
            pos: 0,
            op: 0,
            k: 0,
            left: 0,
            end: 0,
            prev: 0,
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.pos += 1;
        if self.left > 0 {
            self.left -= 1;
            self.k += 1;
        } else if byte == 0xE8 || byte == 0xE9 || (self.prev == 0x0F && byte & 0xF0 == 0x80) {
            self.op = byte;
            self.k = 0;
            self.left = 4;
            self.end = self.pos + 4;
        }
        self.prev = byte;
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let k = self.k as u64;
        let so_far = s.history & ((1u64 << (8 * k)) - 1);
        out[0] = hash((self.op as u64) << 40 | k << 32 | so_far, 0x2d0);
        let place = (self.end >> (8 * k)) & 0xFF;
        out[1] = hash((self.op as u64) << 16 | k << 8 | place, 0x2d1);
    }

    fn active(&self) -> bool {
        self.left > 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{lcg, with_and_without};

    /// Code as the transform leaves it: calls of 48 functions spread over 64 KiB, each
    /// operand its target's position, between instructions of random bytes.
    fn transformed_calls(n: usize) -> Vec<u8> {
        let mut next = lcg(5);
        let targets: Vec<u32> = (0..48).map(|_| next() * 2 % 0x1_0000 + 0x3_0000).collect();
        let mut data = Vec::new();
        while data.len() < n {
            for _ in 0..1 + next() % 6 {
                data.push((next() % 0xE0) as u8);
            }
            data.push(0xE8);
            let t = targets[next() as usize % targets.len()];
            data.extend_from_slice(&t.to_le_bytes());
        }
        data
    }

    #[test]
    fn operand_contexts_predict_call_targets() {
        let data = transformed_calls(20_000);
        let (with, without) = with_and_without(&data, |m| m.x86 = true);
        assert!(with < 0.97 * without, "{with} vs {without}");
    }
}
