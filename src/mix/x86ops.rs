//! Instruction contexts for x86 machine code (`mix:x86=2`, with the x86 transform): a light
//! decoder of instruction lengths follows the code byte by byte and says what the next byte
//! is — an opcode (after which prefixes, in which opcode map), a ModRM or SIB byte, which byte
//! of a displacement or an immediate — and of which instruction. Machine code repeats by
//! instruction, not by byte distance: the same opcode takes the same kinds of ModRM bytes, an
//! instruction's operands depend on its opcode, and instructions follow each other in habits.
//! The order-N tables see none of that where instructions have different lengths.
//!
//! The decoder reads the opcode maps of the x86 and x86-64 manuals (one byte, `0F`, `0F 38`,
//! `0F 3A`, VEX) for what follows each opcode, as the transform's does
//! ([`crate::transform::x86::one_byte`]). It assumes 64-bit code (`40`–`4F` read as REX);
//! in data, or where it guesses wrong, it falls back into step within a few instructions, and
//! the mixer learns how far to trust it. Only contexts come from it: no coded value depends on
//! its being right.

use std::io;

use super::component::{Component, Declare, Push, Shared};
use super::counters::hash;
use super::spec::{MixSpec, Part};
use super::tables::Family;
use crate::transform::x86::{one_byte, two_byte};

/// What the next byte is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The first byte of an instruction, or one after its prefixes.
    Opcode,
    /// A VEX prefix's payload byte.
    Vex,
    ModRm,
    Sib,
    /// A displacement byte.
    Disp,
    /// An immediate byte (or a relative target's).
    Imm,
}

/// Where the coded bytes are in x86 instructions.
pub struct X86Ops {
    role: Role,
    /// Opcode map of the opcode to come or read: 0 one byte, 1 `0F`, 2 `0F 38`, 3 `0F 3A`.
    map: u8,
    /// Whether the map was set by a VEX prefix (its opcodes all take a ModRM byte).
    vex: bool,
    /// The instruction's prefixes so far: bit 0 operand size (`66`), bit 1 REX.W, bit 2 `F2`
    /// or `F3`, bit 3 any other.
    prefixes: u8,
    /// The opcode, once read.
    op: u8,
    /// The ModRM byte, once read (0 before).
    modrm: u8,
    /// Immediate bytes that follow the ModRM byte and displacement.
    imm: u8,
    /// Bytes left in the current displacement, immediate or VEX payload, and the next one's
    /// index in it.
    left: u8,
    index: u8,
    /// The two instructions before, each as map << 8 | opcode.
    prev: [u16; 2],
    /// Per opcode (map << 8 | opcode), the ModRM byte, displacement and immediate its last
    /// instruction had, a byte each from the low end: what the same opcode's operands were.
    last: Vec<u64>,
    /// The current instruction's operand bytes so far (as `last`).
    operands: u64,
    /// How many of them.
    operand_bytes: u32,
    /// Bytes seen so far in the member, and where the code is (`x86from..x86to`, an end of 0
    /// the member's end): outside it the tables sit out.
    pos: u64,
    region: (u64, u64),
}

impl X86Ops {
    /// Whether the next byte is in the code region.
    fn in_code(&self) -> bool {
        (self.region.0..self.region.1).contains(&self.pos)
    }

    fn start_instruction(&mut self) {
        let this = (self.map as usize) << 8 | self.op as usize;
        if self.operand_bytes > 0 {
            self.last[this] = self.operands;
        }
        (self.operands, self.operand_bytes) = (0, 0);
        self.prev = [this as u16, self.prev[0]];
        self.role = Role::Opcode;
        self.map = 0;
        self.vex = false;
        self.prefixes = 0;
        self.modrm = 0;
        self.imm = 0;
    }

    /// After the opcode (`modrm`: whether a ModRM byte follows; `imm`: the immediate's bytes).
    fn after_opcode(&mut self, modrm: bool, imm: u8) {
        self.imm = imm;
        match modrm {
            true => self.role = Role::ModRm,
            false => self.operand(Role::Imm, imm),
        }
    }

    /// Goes on to `n` bytes of `role`, or to what follows them when `n` is 0.
    fn operand(&mut self, role: Role, n: u8) {
        match (role, n) {
            (_, 0) if role == Role::Disp => self.operand(Role::Imm, self.imm),
            (_, 0) => self.start_instruction(),
            _ => (self.role, self.left, self.index) = (role, n, 0),
        }
    }

    fn opcode(&mut self, byte: u8) {
        let z = if self.prefixes & 1 != 0 { 2 } else { 4 };
        if self.map == 0 {
            match byte {
                0x26 | 0x2E | 0x36 | 0x3E | 0x64 | 0x65 | 0x67 | 0xF0 => self.prefixes |= 8,
                0x66 => self.prefixes |= 1,
                0xF2 | 0xF3 => self.prefixes |= 4,
                0x40..=0x4F => self.prefixes |= (byte & 8) >> 2,
                0x0F => self.map = 1,
                0xC4 | 0xC5 => {
                    self.vex = true;
                    self.map = 1;
                    self.op = byte;
                    self.operand(Role::Vex, if byte == 0xC4 { 2 } else { 1 });
                }
                _ => {
                    self.op = byte;
                    let (modrm, imm) = one_byte(byte, z, self.prefixes & 2 != 0);
                    self.after_opcode(modrm, imm);
                }
            }
            return;
        }
        match (self.map, byte) {
            (1, 0x38) if !self.vex => self.map = 2,
            (1, 0x3A) if !self.vex => self.map = 3,
            (1, _) => {
                self.op = byte;
                let (modrm, imm) = two_byte(byte, z);
                self.after_opcode(modrm || self.vex, imm);
            }
            _ => {
                self.op = byte;
                self.after_opcode(true, (self.map == 3) as u8);
            }
        }
    }

    fn mod_rm(&mut self, byte: u8) {
        self.modrm = byte;
        let (md, reg, rm) = (byte >> 6, byte >> 3 & 7, byte & 7);
        if self.map == 0 && matches!(self.op, 0xF6 | 0xF7) && reg < 2 {
            self.imm = match self.op {
                0xF6 => 1,
                _ if self.prefixes & 1 != 0 => 2,
                _ => 4,
            };
        }
        match (md, rm) {
            (3, _) => self.operand(Role::Imm, self.imm),
            (_, 4) => self.role = Role::Sib,
            (0, 5) | (2, _) => self.operand(Role::Disp, 4),
            (1, _) => self.operand(Role::Disp, 1),
            _ => self.operand(Role::Imm, self.imm),
        }
    }

    fn sib(&mut self, byte: u8) {
        let disp = match (self.modrm >> 6, byte & 7) {
            (1, _) => 1,
            (2, _) | (0, 5) => 4,
            _ => 0,
        };
        self.operand(Role::Disp, disp);
    }
}

impl Family for X86Ops {
    fn wanted(spec: &MixSpec) -> bool {
        spec.x86_ops
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        vec![spec.part_bits(Part::Quarter, spec.quarter_table(), 0); 4]
    }

    fn bytes(_spec: &MixSpec) -> usize {
        8 << 10
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(X86Ops {
            role: Role::Opcode,
            map: 0,
            vex: false,
            prefixes: 0,
            op: 0,
            modrm: 0,
            imm: 0,
            left: 0,
            index: 0,
            prev: [0; 2],
            last: vec![0; 4 << 8],
            operands: 0,
            operand_bytes: 0,
            pos: 0,
            region: (
                spec.x86_from as u64,
                match spec.x86_to {
                    0 => u64::MAX,
                    end => end as u64,
                },
            ),
        })
    }

    fn learn_byte(&mut self, _s: &Shared, byte: u8) {
        self.pos += 1;
        if matches!(self.role, Role::ModRm | Role::Sib | Role::Disp | Role::Imm)
            && self.operand_bytes < 8
        {
            self.operands |= (byte as u64) << (8 * self.operand_bytes);
            self.operand_bytes += 1;
        }
        match self.role {
            Role::Opcode => self.opcode(byte),
            Role::ModRm => self.mod_rm(byte),
            Role::Sib => self.sib(byte),
            Role::Vex | Role::Disp | Role::Imm => {
                if self.role == Role::Vex && self.op == 0xC4 && self.index == 0 {
                    // The first payload byte of C4 names the map (1, 2 or 3).
                    self.map = (byte & 0x1F).clamp(1, 3);
                }
                self.left -= 1;
                self.index += 1;
                if self.left == 0 {
                    match self.role {
                        Role::Vex => self.role = Role::Opcode,
                        Role::Disp => self.operand(Role::Imm, self.imm),
                        _ => self.start_instruction(),
                    }
                }
            }
        }
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        let at = (self.role as u64) << 8 | (self.index as u64) << 4 | self.left as u64;
        let op = match self.role {
            Role::Opcode => (self.prefixes as u64) << 8,
            _ => self.op as u64,
        };
        // Where in which instruction: 31 bits.
        let key = at << 20 | (self.map as u64) << 16 | op;
        out[0] = hash(key << 8 | self.modrm as u64, 0x2e0);
        out[1] = hash(key << 16 | (s.history & 0xffff), 0x2e1);
        let prev = (self.prev[0] as u64) << 16 | self.prev[1] as u64;
        out[2] = hash(key << 32 | prev, 0x2e2);
        // The byte at this place in the operands of this opcode's last instruction.
        let last = match self.role {
            Role::Opcode | Role::Vex => 0x100,
            _ => {
                let op = (self.map as usize) << 8 | self.op as usize;
                let n = self.operand_bytes.min(7);
                self.last[op] >> (8 * n) & 0xff
            }
        };
        out[3] = hash(
            key << 12 | last << 3 | self.operand_bytes.min(7) as u64,
            0x2e3,
        );
    }

    fn active(&self) -> bool {
        self.in_code()
    }
}

/// The mixer's weight set by the decoder's place in the instruction, with the bit position
/// (`x86` 2): an opcode byte, a ModRM byte and an immediate's high byte want different trust
/// in the tables.
pub struct X86Select {
    decoder: X86Ops,
}

/// Places told apart: opcode, VEX payload, ModRM, SIB, four displacement bytes, seven
/// immediate bytes (the last taking the eighth), and outside the code.
const PLACES: usize = 16;

/// Sets of the second selector: the opcode (map 0 or 1) of an operand byte, or of the
/// instruction before an opcode byte; the last set outside the code.
const OPCODE_SETS: usize = 1025;

impl X86Select {
    fn opcode_set(&self) -> usize {
        let d = &self.decoder;
        if !d.in_code() {
            return OPCODE_SETS - 1;
        }
        match d.role {
            Role::Opcode | Role::Vex => {
                ((d.prev[0] >> 8).min(1) << 8 | (d.prev[0] & 0xff)) as usize
            }
            _ => 512 + ((d.map as usize).min(1) << 8 | d.op as usize),
        }
    }

    fn place(&self) -> usize {
        let d = &self.decoder;
        if !d.in_code() {
            return PLACES - 1;
        }
        match d.role {
            Role::Opcode => 0,
            Role::Vex => 1,
            Role::ModRm => 2,
            Role::Sib => 3,
            Role::Disp => 4 + (d.index as usize).min(3),
            Role::Imm => 8 + (d.index as usize).min(6),
        }
    }
}

impl Component for X86Select {
    fn wanted(spec: &MixSpec) -> bool {
        spec.x86_ops
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.selector(PLACES * 8);
        d.selector(OPCODE_SETS);
        d.memory(8 << 10);
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(X86Select {
            decoder: X86Ops::new(spec)?,
        })
    }

    fn learn_byte(&mut self, s: &Shared, byte: u8) {
        self.decoder.learn_byte(s, byte);
    }

    #[inline]
    fn select(&self, s: &Shared, m: &mut Push) {
        m.select(self.place() * 8 + s.bit_index as usize);
        m.select(self.opcode_set());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The roles the decoder gives each byte of `code`, from the start of an instruction.
    fn roles(code: &[u8]) -> Vec<Role> {
        let mut d = X86Ops::new(&MixSpec::DEFAULT).unwrap();
        let s = Shared::new();
        code.iter()
            .map(|&b| {
                let role = d.role;
                d.learn_byte(&s, b);
                role
            })
            .collect()
    }

    #[test]
    fn the_decoder_follows_instructions_of_every_shape() {
        use Role::*;
        // push rbp; mov rbp, rsp; sub rsp, 0x10; mov eax, [rbp-4]; call rel32;
        // mov dword [rsp+8], imm32; movabs rax, imm64; jne rel32 (0F 85); ret
        let code = [
            0x55, 0x48, 0x89, 0xE5, 0x48, 0x83, 0xEC, 0x10, 0x8B, 0x45, 0xFC, 0xE8, 1, 2, 3, 4,
            0xC7, 0x44, 0x24, 0x08, 1, 2, 3, 4, 0x48, 0xB8, 1, 2, 3, 4, 5, 6, 7, 8, 0x0F, 0x85, 1,
            2, 3, 4, 0xC3, 0x55,
        ];
        let expected = [
            Opcode, Opcode, Opcode, ModRm, Opcode, Opcode, ModRm, Imm, Opcode, ModRm, Disp, Opcode,
            Imm, Imm, Imm, Imm, Opcode, ModRm, Sib, Disp, Imm, Imm, Imm, Imm, Opcode, Opcode, Imm,
            Imm, Imm, Imm, Imm, Imm, Imm, Imm, Opcode, Opcode, Imm, Imm, Imm, Imm, Opcode, Opcode,
        ];
        assert_eq!(roles(&code), expected);
        // A VEX instruction with its map from the payload: vpshufd xmm0, xmm1, imm8 (C5, map
        // 0F, opcode 70 takes an immediate) and vpermq (C4, map 0F 3A, an immediate).
        let vex = [
            0xC5, 0xF9, 0x70, 0xC1, 0x1B, 0xC4, 0xE3, 0xFD, 0x00, 0xC0, 0x4E, 0x90,
        ];
        let expected = [
            Opcode, Vex, Opcode, ModRm, Imm, Opcode, Vex, Vex, Opcode, ModRm, Imm, Opcode,
        ];
        assert_eq!(roles(&vex), expected);
    }

    #[test]
    fn instruction_contexts_predict_machine_code() {
        use super::super::tests_support::{cost, lcg, plain};
        // Instructions of varying lengths in random order, each with its habits: the same
        // opcode takes one of two ModRM bytes and an immediate of its own size.
        let shapes: [&[u8]; 6] = [
            &[0x48, 0x89, 0xE5],
            &[0x48, 0x83, 0xEC, 0x10],
            &[0x8B, 0x45, 0xF8],
            &[0xC7, 0x44, 0x24, 0x08, 0, 0, 0, 0],
            &[0x0F, 0xB6, 0xC0],
            &[0x55],
        ];
        let mut next = lcg(9);
        let mut data = Vec::new();
        while data.len() < 30_000 {
            let shape = shapes[next() as usize % shapes.len()];
            data.extend_from_slice(shape);
            if shape.len() == 8 {
                let n = data.len();
                data[n - 4] = next() as u8;
            }
        }
        // Against the operand contexts alone (`x86=1`).
        let without = MixSpec {
            x86: true,
            ..plain()
        };
        let with = MixSpec {
            x86_ops: true,
            ..without
        };
        let (with, without) = (cost(&with, &data), cost(&without, &data));
        assert!(with < 0.97 * without, "{with} vs {without}");
    }
}
