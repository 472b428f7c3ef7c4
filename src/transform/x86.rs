//! The x86 transform (recipe key `mix:x86=1`): in x86 and x86-64 machine code, the 32-bit
//! displacements of `call rel32` (E8), `jmp rel32` (E9) and `jcc rel32` (0F 80–8F) become
//! targets counted from the start of the member, so that every call of one function carries
//! the same four bytes and the models can predict them. The encoder applies it to each frame's
//! bytes before they are coded; the decoder applies the inverse to each decoded frame.
//!
//! # The rule
//!
//! A scan from the frame's first byte: at position `i`,
//! - an `E8` or `E9` whose four operand bytes lie in the frame is an instruction of 5 bytes;
//!   `0F` followed by `80`–`8F` whose four operand bytes lie in the frame, one of 6 bytes;
//! - an instruction's operand (a little-endian `u32`) is rewritten when its top byte is `00`
//!   or `FF` (a displacement within ±16 MiB); the scan goes on after the instruction,
//!   whether or not its operand was rewritten;
//! - any other byte: the scan goes on at `i + 1`.
//!
//! An operand with top byte `00` or `FF` is read as a 25-bit number (bits 0–23, and bit 24
//! set for `FF`); the encoder adds `p`, the position in the member of the byte after the
//! instruction (the frame's start plus `i` plus its length), modulo 2^25, and writes the sum
//! back with top byte `FF` if its bit 24 is set, else `00`. The decoder subtracts `p`.
//!
//! # RIP-relative displacements (`mix:x86=2`)
//!
//! With `x86=2`, a first pass (before the scan above when encoding, after its inverse when
//! decoding) walks the frame instruction by instruction from its first byte, by the lengths
//! the opcode maps give ([`instruction_at`]): where an instruction's ModRM byte has mod `00`
//! and r/m `101` (x86-64's RIP-relative operand), its 32-bit displacement becomes the target,
//! the displacement plus `p` (the position in the member of the byte after the instruction)
//! modulo 2^32; the decoder subtracts `p`. Every load of one global then carries the same
//! four bytes. The walk reads prefixes, opcodes, ModRM, SIB and VEX bytes, never a
//! displacement or an immediate (it steps over them by their lengths), and rewrites only such
//! displacements, so over the transformed bytes it takes the same steps; an instruction cut
//! by the frame's end ends the walk. In data the walk reads nonsense and rewrites some bytes
//! as if they were displacements, which the decoder undoes as well.
//!
//! # Why the decoder decides what the encoder decided
//!
//! The scan reads the bytes at the positions it visits (the opcode, and the second byte of
//! `0F 8x`) and the top byte of an instruction's operand; it rewrites only the operand bytes
//! of an instruction it visited, which it then steps over. So a rewritten byte is never a
//! byte a later step reads, except the operand's top byte, which stays `00` or `FF` (the map
//! is a bijection of the 2^25 such values onto themselves, and of nothing else). The scan over
//! the transformed bytes thus visits the same positions and finds the same instructions with
//! the same top bytes, and subtracts what was added. The transform works within a frame
//! (positions count from the member's start, the frame's start given), so it needs nothing
//! from the frames before or after: an instruction cut by the frame's end is left as it is.

/// Operands read as 25-bit numbers.
const MASK: u32 = (1 << 25) - 1;

/// Whether `v` is an operand the transform rewrites: a displacement within ±16 MiB.
fn near(top: u8) -> bool {
    top == 0x00 || top == 0xFF
}

/// The length of the instruction at `bytes[i]` (5 for `E8`/`E9`, 6 for `0F 8x`) when its
/// operand lies within `bytes`; else `None`.
fn instruction(bytes: &[u8], i: usize) -> Option<usize> {
    let len = match bytes[i] {
        0xE8 | 0xE9 => 5,
        0x0F if bytes.get(i + 1).is_some_and(|b| b & 0xF0 == 0x80) => 6,
        _ => return None,
    };
    (i + len <= bytes.len()).then_some(len)
}

/// What follows a one-byte opcode: a ModRM byte, and how many immediate bytes (`z`: 4, or 2
/// under an operand-size prefix). `F6`/`F7` take theirs by the ModRM byte.
pub(crate) fn one_byte(op: u8, z: u8, rex_w: bool) -> (bool, u8) {
    match op {
        0x00..=0x3F => match op & 7 {
            0..=3 => (true, 0),
            4 => (false, 1),
            5 => (false, z),
            _ => (false, 0),
        },
        0x62 | 0x63 | 0x84..=0x8F | 0xD0..=0xD3 | 0xD8..=0xDF => (true, 0),
        0xF6 | 0xF7 | 0xFE | 0xFF => (true, 0),
        0x69 | 0x81 | 0xC7 => (true, z),
        0x6B | 0x80 | 0x82 | 0x83 | 0xC0 | 0xC1 | 0xC6 => (true, 1),
        0x68 | 0xA9 => (false, z),
        0x6A | 0x70..=0x7F | 0xA8 | 0xB0..=0xB7 | 0xCD | 0xD4 | 0xD5 => (false, 1),
        0xE0..=0xE7 | 0xEB => (false, 1),
        0xB8..=0xBF if rex_w => (false, 8),
        0xB8..=0xBF => (false, z),
        0xE8 | 0xE9 => (false, 4),
        0xC2 | 0xCA => (false, 2),
        0xC8 => (false, 3),
        0x9A | 0xEA => (false, 6),
        0xA0..=0xA3 => (false, 8),
        _ => (false, 0),
    }
}

/// What follows a `0F` opcode (as [`one_byte`]).
pub(crate) fn two_byte(op: u8, z: u8) -> (bool, u8) {
    match op {
        0x80..=0x8F => (false, z),
        0x0F | 0x70..=0x73 | 0xA4 | 0xAC | 0xBA | 0xC2 | 0xC4..=0xC6 => (true, 1),
        0x04..=0x0B | 0x0E | 0x30..=0x37 | 0x77 | 0xA0..=0xA2 | 0xA8..=0xAA | 0xC8..=0xCF => {
            (false, 0)
        }
        _ => (true, 0),
    }
}

/// The instruction at `bytes[i]`: its length and, for a RIP-relative operand, the offset of
/// its 32-bit displacement from `i`; `None` when it runs past the end of `bytes`. Reads only
/// prefixes, opcode, ModRM, SIB and VEX bytes. A run of more than 14 prefixes is read as one
/// instruction of prefixes.
pub(crate) fn instruction_at(bytes: &[u8], i: usize) -> Option<(usize, Option<usize>)> {
    let (mut p, mut opsize, mut rex_w) = (i, false, false);
    loop {
        match *bytes.get(p)? {
            0x26 | 0x2E | 0x36 | 0x3E | 0x64 | 0x65 | 0x67 | 0xF0 | 0xF2 | 0xF3 => {}
            0x66 => opsize = true,
            b @ 0x40..=0x4F => rex_w |= b & 8 != 0,
            _ => break,
        }
        p += 1;
        if p - i > 14 {
            return Some((p - i, None));
        }
    }
    let z = if opsize { 2 } else { 4 };
    let op = bytes[p];
    p += 1;
    let (modrm, mut imm) = match op {
        0x0F => {
            let second = *bytes.get(p)?;
            p += 1;
            match second {
                0x38 | 0x3A => {
                    p += 1;
                    (true, (second == 0x3A) as u8)
                }
                _ => two_byte(second, z),
            }
        }
        0xC4 | 0xC5 => {
            let map = match op {
                0xC4 => bytes.get(p)? & 0x1F,
                _ => 1,
            };
            p += if op == 0xC4 { 2 } else { 1 };
            let third = *bytes.get(p)?;
            p += 1;
            let imm = match map {
                1 => two_byte(third, z).1,
                3 => 1,
                _ => 0,
            };
            (true, imm)
        }
        _ => one_byte(op, z, rex_w),
    };
    let mut rip = None;
    if modrm {
        let m = *bytes.get(p)?;
        p += 1;
        let (md, reg, rm) = (m >> 6, m >> 3 & 7, m & 7);
        if matches!(op, 0xF6 | 0xF7) && reg < 2 {
            imm = if op == 0xF6 { 1 } else { z };
        }
        p += match (md, rm) {
            (3, _) => 0,
            (_, 4) => {
                let sib = *bytes.get(p)?;
                p += 1;
                match (md, sib & 7) {
                    (1, _) => 1,
                    (2, _) | (0, 5) => 4,
                    _ => 0,
                }
            }
            (0, 5) => {
                rip = Some(p - i);
                4
            }
            (1, _) => 1,
            (2, _) => 4,
            _ => 0,
        };
    }
    p += imm as usize;
    (p <= bytes.len()).then_some((p - i, rip))
}

/// The walk of `x86=2` (the module's rule), with `map(displacement, position)` for each
/// RIP-relative displacement.
fn walk(bytes: &mut [u8], start: u64, map: impl Fn(u32, u32) -> u32) {
    let mut i = 0;
    while let Some((len, rip)) = instruction_at(bytes, i) {
        if let Some(at) = rip.map(|d| i + d) {
            let v = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            let end = start.wrapping_add((i + len) as u64) as u32;
            bytes[at..at + 4].copy_from_slice(&map(v, end).to_le_bytes());
        }
        i += len;
    }
}

/// The scan of the module's rule, with `map(operand as 25 bits, position)` for each operand
/// it rewrites.
fn scan(bytes: &mut [u8], start: u64, map: impl Fn(u32, u32) -> u32) {
    let mut i = 0;
    while i < bytes.len() {
        let Some(len) = instruction(bytes, i) else {
            i += 1;
            continue;
        };
        let end = i + len;
        let operand = &mut bytes[end - 4..end];
        if near(operand[3]) {
            let v = u32::from_le_bytes([operand[0], operand[1], operand[2], operand[3]]);
            let at = (start.wrapping_add(end as u64) as u32) & MASK;
            let w = map(v & MASK, at) & MASK;
            // Bit 24 back into the whole top byte: 00 or FF.
            let w = (((w << 7) as i32) >> 7) as u32;
            operand.copy_from_slice(&w.to_le_bytes());
        }
        i = end;
    }
}

/// Where in a member the transform applies: bytes `start..end` (`end` 0: to the end). For an
/// ELF executable, the file range of its executable segments (its data, symbol and relocation
/// tables hold E8 bytes too, which the transform would only scramble); else the whole member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u32,
    pub end: u32,
    /// RIP-relative displacements too (`mix:x86=2`).
    pub relative: bool,
}

impl Region {
    /// The whole member.
    pub const ALL: Region = Region {
        start: 0,
        end: 0,
        relative: false,
    };

    /// The part of a frame of `len` bytes at `at` in the member that the region holds: its
    /// range in the frame and its position in the member.
    fn within(self, at: u64, len: usize) -> Option<(std::ops::Range<usize>, u64)> {
        let end = match self.end {
            0 => u64::MAX,
            e => e as u64,
        };
        let lo = at.max(self.start as u64);
        let hi = at.saturating_add(len as u64).min(end);
        (lo < hi).then(|| ((lo - at) as usize..(hi - at) as usize, lo))
    }
}

/// [`encode`] on the part of a frame (at `at` in its member) that `region` holds; the scan
/// starts at the region's start or the frame's, whichever is later, and stops at the region's
/// end, so both directions cut the same part.
pub fn encode_frame(region: Region, bytes: &mut [u8], at: u64) {
    if let Some((range, start)) = region.within(at, bytes.len()) {
        let bytes = &mut bytes[range];
        if region.relative {
            walk(bytes, start, |v, end| v.wrapping_add(end));
        }
        encode(bytes, start);
    }
}

/// Undoes [`encode_frame`].
pub fn decode_frame(region: Region, bytes: &mut [u8], at: u64) {
    if let Some((range, start)) = region.within(at, bytes.len()) {
        let bytes = &mut bytes[range];
        decode(bytes, start);
        if region.relative {
            walk(bytes, start, |v, end| v.wrapping_sub(end));
        }
    }
}

/// Transforms a frame's bytes in place; `start` is the frame's position in its member.
pub fn encode(bytes: &mut [u8], start: u64) {
    scan(bytes, start, |v, at| v.wrapping_add(at));
}

/// Undoes [`encode`] with the same `start`.
pub fn decode(bytes: &mut [u8], start: u64) {
    scan(bytes, start, |v, at| v.wrapping_sub(at));
}

/// Bytes of an input's start that [`detect`] reads.
pub const SAMPLE: usize = 64 << 10;

/// Least `E8` bytes followed by a near displacement in a sample without an executable's
/// header ...
const MIN_CALLS: usize = 16;
/// ... and least share of them, in percent, among all the `E8` bytes of the sample whose
/// operand it holds: in x86 code most `E8` bytes are calls within ±16 MiB (measured: 70–95%
/// on this machine's executables), in other data about 2 in 256 are.
const MIN_CALL_PERCENT: usize = 40;

/// The file range of an x86 ELF's executable segments (`PT_LOAD` with `PF_X`), from the
/// program headers in `s`: from the first one's start to the last one's end. `None` when the
/// headers are not in `s` or name no such segment, or the range does not fit 32 bits.
fn elf_code(s: &[u8]) -> Option<Region> {
    let little = s.get(5) == Some(&1);
    let int = |at: usize, n: usize| -> Option<u64> {
        let b = s.get(at..at + n)?;
        Some(match little {
            true => b.iter().rev().fold(0u64, |v, &x| v << 8 | x as u64),
            false => b.iter().fold(0u64, |v, &x| v << 8 | x as u64),
        })
    };
    let wide = match s.get(4) {
        Some(1) => false,
        Some(2) => true,
        _ => return None,
    };
    let (phoff, phentsize, phnum) = match wide {
        true => (int(0x20, 8)?, int(0x36, 2)?, int(0x38, 2)?),
        false => (int(0x1C, 4)?, int(0x2A, 2)?, int(0x2C, 2)?),
    };
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for k in 0..phnum {
        let at = usize::try_from(phoff.checked_add(k.checked_mul(phentsize)?)?).ok()?;
        let (kind, flags, offset, size) = match wide {
            true => (
                int(at, 4)?,
                int(at + 4, 4)?,
                int(at + 8, 8)?,
                int(at + 32, 8)?,
            ),
            false => (
                int(at, 4)?,
                int(at + 24, 4)?,
                int(at + 4, 4)?,
                int(at + 16, 4)?,
            ),
        };
        if kind == 1 && flags & 1 == 1 && size > 0 {
            lo = lo.min(offset);
            hi = hi.max(offset.checked_add(size)?);
        }
    }
    (lo < hi && hi <= u32::MAX as u64).then_some(Region {
        start: lo as u32,
        end: hi as u32,
        relative: false,
    })
}

/// What an executable's header says of its machine: `Some(true)` for x86 or x86-64 (ELF, PE,
/// Mach-O), `Some(false)` for an executable of another machine, `None` when `sample` does not
/// start with such a header.
fn header_machine(s: &[u8]) -> Option<bool> {
    let u16le = |at: usize| s.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32le = |at: usize| {
        s.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if s.starts_with(b"\x7fELF") {
        // e_machine at 18.
        let machine = elf_half(s, 18)?;
        return Some(matches!(machine, 3 | 6 | 62)); // EM_386, EM_486, EM_X86_64
    }
    if s.starts_with(b"MZ") {
        let pe = u32le(0x3C)? as usize;
        if s.get(pe..pe + 4)? != b"PE\0\0" {
            return None;
        }
        return Some(matches!(u16le(pe + 4)?, 0x014C | 0x8664)); // i386, AMD64
    }
    // Mach-O, 32 and 64 bits, little-endian: cputype after the magic.
    if s.starts_with(&[0xCE, 0xFA, 0xED, 0xFE]) || s.starts_with(&[0xCF, 0xFA, 0xED, 0xFE]) {
        return Some(matches!(u32le(4)?, 7 | 0x0100_0007)); // x86, x86-64
    }
    None
}

/// Whether `sample` starts with the header of an x86 or x86-64 program or shared library: a PE
/// or Mach-O file, or an ELF file of type `ET_EXEC` or `ET_DYN` (not a relocatable object,
/// nor an archive of them, whose symbols and relocations outweigh their code).
pub fn is_program(sample: &[u8]) -> bool {
    if header_machine(sample) != Some(true) {
        return false;
    }
    if !sample.starts_with(b"\x7fELF") {
        return true;
    }
    // e_type at 16.
    matches!(elf_half(sample, 16), Some(2 | 3)) // ET_EXEC, ET_DYN
}

/// The 16-bit field of an ELF header at `at`, in the file's byte order (EI_DATA: 1 little,
/// 2 big); `None` for another order or a header shorter than the field.
fn elf_half(s: &[u8], at: usize) -> Option<u16> {
    let b = s.get(at..at + 2)?;
    match s.get(5) {
        Some(1) => Some(u16::from_le_bytes([b[0], b[1]])),
        Some(2) => Some(u16::from_be_bytes([b[0], b[1]])),
        _ => None,
    }
}

/// Where to apply the transform to an input that starts with `sample` (its first [`SAMPLE`]
/// bytes, or all of it), if it is x86 or x86-64 code: an executable's header naming such a
/// machine (an ELF's executable segments when its program headers say where they are, else
/// the whole input), or, without one, at least [`MIN_CALLS`] `E8` bytes followed by a near
/// displacement, [`MIN_CALL_PERCENT`]% of the sample's `E8` bytes or more (the whole input).
pub fn detect(sample: &[u8]) -> Option<Region> {
    match header_machine(sample) {
        Some(false) => None,
        Some(true) if sample.starts_with(b"\x7fELF") => {
            Some(elf_code(sample).unwrap_or(Region::ALL))
        }
        Some(true) => Some(Region::ALL),
        None => looks_like_code(sample).then_some(Region::ALL),
    }
}

/// The count of [`detect`] over a sample without an executable's header.
fn looks_like_code(sample: &[u8]) -> bool {
    let (mut calls, mut all) = (0usize, 0usize);
    for (i, &b) in sample.iter().enumerate() {
        if b == 0xE8 && i + 5 <= sample.len() {
            all += 1;
            calls += near(sample[i + 4]) as usize;
        }
    }
    calls >= MIN_CALLS && calls * 100 >= all * MIN_CALL_PERCENT
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(data: &[u8], start: u64) -> Vec<u8> {
        let mut t = data.to_vec();
        encode(&mut t, start);
        let mut back = t.clone();
        decode(&mut back, start);
        assert_eq!(back, data, "start {start}");
        t
    }

    /// Both passes of `x86=2` over a whole frame at `start`, and back.
    fn round_trip_relative(data: &[u8], start: u64) -> Vec<u8> {
        let region = Region {
            relative: true,
            ..Region::ALL
        };
        let mut t = data.to_vec();
        encode_frame(region, &mut t, start);
        let mut back = t.clone();
        decode_frame(region, &mut back, start);
        assert_eq!(back, data, "start {start}");
        t
    }

    #[test]
    fn instructions_have_the_lengths_of_the_manuals() {
        let cases: [(&[u8], usize, Option<usize>); 12] = [
            (&[0x55], 1, None),                                   // push rbp
            (&[0x48, 0x89, 0xE5], 3, None),                       // mov rbp, rsp
            (&[0x48, 0x83, 0xEC, 0x10], 4, None),                 // sub rsp, 0x10
            (&[0x8B, 0x45, 0xFC], 3, None),                       // mov eax, [rbp-4]
            (&[0x48, 0x8B, 0x05, 1, 2, 3, 4], 7, Some(3)),        // mov rax, [rip+d]
            (&[0xC7, 0x05, 1, 2, 3, 4, 5, 6, 7, 8], 10, Some(2)), // mov dword [rip+d], imm32
            (&[0x66, 0xC7, 0x05, 1, 2, 3, 4, 5, 6], 9, Some(3)),  // mov word [rip+d], imm16
            (&[0xC7, 0x44, 0x24, 0x08, 1, 2, 3, 4], 8, None),     // mov dword [rsp+8], imm32
            (&[0x48, 0xB8, 1, 2, 3, 4, 5, 6, 7, 8], 10, None),    // movabs rax, imm64
            (&[0x0F, 0x85, 1, 2, 3, 4], 6, None),                 // jne rel32
            (&[0xC5, 0xF9, 0x70, 0xC1, 0x1B], 5, None),           // vpshufd xmm0, xmm1, imm8
            (&[0xF6, 0x05, 1, 2, 3, 4, 0x80], 7, Some(2)),        // test byte [rip+d], imm8
        ];
        for (bytes, len, rip) in cases {
            assert_eq!(instruction_at(bytes, 0), Some((len, rip)), "{bytes:02x?}");
            // Cut before its end, it is not read.
            assert_eq!(instruction_at(&bytes[..len - 1], 0), None, "{bytes:02x?}");
        }
    }

    #[test]
    fn a_rip_relative_displacement_becomes_its_target() {
        // nop; mov rax, [rip+0x10] at 1..8; ret: the target is 8 + 0x10 from the member's
        // start 0x1000.
        let code = [0x90, 0x48, 0x8B, 0x05, 0x10, 0, 0, 0, 0xC3];
        let t = round_trip_relative(&code, 0x1000);
        assert_eq!(&t[4..8], &(0x1000u32 + 8 + 0x10).to_le_bytes());
        assert_eq!((&t[..4], t[8]), (&code[..4], 0xC3));
        // The same instruction elsewhere points at the same place and reads the same.
        let mut twice = code.to_vec();
        twice.extend_from_slice(&[0x48, 0x8B, 0x05, 0x10 - 8, 0, 0, 0]);
        let t = round_trip_relative(&twice, 0);
        assert_eq!(t[4..8], t[12..16]);
    }

    #[test]
    fn a_call_becomes_its_target() {
        // call +0x10 at 0x100: the target is 0x105 + 0x10.
        let mut code = vec![0x90u8; 0x100];
        code.extend_from_slice(&[0xE8, 0x10, 0, 0, 0]);
        let t = round_trip(&code, 0);
        assert_eq!(&t[0x100..], &[0xE8, 0x15, 0x01, 0, 0]);
        // A backward call to the same target writes the same bytes.
        let mut back = vec![0x90u8; 0x200];
        let rel = 0x115i32 - 0x205;
        back.push(0xE8);
        back.extend_from_slice(&rel.to_le_bytes());
        let t = round_trip(&back, 0);
        assert_eq!(&t[0x200..], &[0xE8, 0x15, 0x01, 0, 0]);
        // The frame's start counts.
        let t = round_trip(&[0xE9, 0, 0, 0, 0], 1 << 20);
        assert_eq!(t, [0xE9, 5, 0, 0x10, 0]);
        // jcc rel32.
        let t = round_trip(&[0x0F, 0x84, 0xFA, 0xFF, 0xFF, 0xFF], 0);
        assert_eq!(t, [0x0F, 0x84, 0, 0, 0, 0]);
        // Far operands and cut instructions stay.
        for data in [
            &[0xE8, 1, 2, 3, 4][..],
            &[0xE8, 0, 0, 0],
            &[0x0F, 0x84, 0, 0, 0],
        ] {
            assert_eq!(round_trip(data, 7), data);
        }
    }

    #[test]
    fn the_sign_wraps_at_bit_24() {
        // A target past +16 MiB comes out with top byte FF, and back.
        let t = round_trip(&[0xE8, 0xFF, 0xFF, 0xFF, 0x00], 0);
        assert_eq!(t, [0xE8, 0x04, 0x00, 0x00, 0xFF]);
        let t = round_trip(&[0xE8, 0x00, 0x00, 0x00, 0xFF], (1 << 25) - 10);
        assert_eq!(t, [0xE8, 0xFB, 0xFF, 0xFF, 0x00]);
    }

    #[test]
    fn short_and_adversarial_inputs_invert() {
        let mut cases: Vec<Vec<u8>> = vec![vec![]];
        for n in 1..=12 {
            for fill in [0x00, 0xFF, 0xE8, 0xE9, 0x0F, 0x84] {
                cases.push(vec![fill; n]);
            }
        }
        cases.push((0..=255).collect());
        let mut dense = Vec::new();
        for i in 0..4000u32 {
            dense.extend_from_slice(&[0xE8, 0xE8, (i & 1) as u8 * 0xFF, 0x0F, 0x85]);
            dense.push(if i % 3 == 0 { 0xFF } else { 0x00 });
        }
        cases.push(dense);
        for c in &cases {
            for start in [0, 1, 5, (1 << 20) - 3, (1 << 25) - 1, u64::MAX - 2] {
                round_trip(c, start);
            }
        }
        // Every split of a run of E8 at a frame boundary: each frame alone inverts.
        let run = [0xE8u8, 0, 0, 0xE8, 0, 0, 0, 0xE8, 0xFF];
        for cut in 0..=run.len() {
            let (a, b) = run.split_at(cut);
            round_trip(a, 0);
            round_trip(b, cut as u64);
        }
    }

    fn e8_dense() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => Just(0xE8u8),
            2 => Just(0xE9u8),
            2 => Just(0x0Fu8),
            2 => 0x80u8..=0x8F,
            4 => Just(0x00u8),
            4 => Just(0xFFu8),
            3 => any::<u8>(),
        ];
        proptest::collection::vec(byte, 0..600)
    }

    proptest! {
        #[test]
        fn random_bytes_invert(data in proptest::collection::vec(any::<u8>(), 0..2000), start in any::<u64>()) {
            round_trip(&data, start);
        }

        #[test]
        fn e8_dense_bytes_invert(data in e8_dense(), start in 0u64..(1 << 26)) {
            round_trip(&data, start);
        }

        #[test]
        fn random_bytes_invert_with_rip_relative_displacements(
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            start in any::<u64>(),
        ) {
            round_trip_relative(&data, start);
        }

        #[test]
        fn e8_dense_bytes_invert_with_rip_relative_displacements(
            data in e8_dense(),
            start in 0u64..(1 << 26),
        ) {
            round_trip_relative(&data, start);
        }
    }

    #[test]
    fn a_region_cuts_frames_alike_both_ways() {
        let mut state = 7u64;
        let data: Vec<u8> = (0..3000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                [0xE8, 0xE9, 0x0F, 0x84, 0x00, 0xFF, (state >> 40) as u8]
                    [(state >> 61) as usize % 7]
            })
            .collect();
        let regions = [(0, 0), (3, 0), (10, 50), (0, 7), (999, 2001)];
        let regions = regions.into_iter().flat_map(|(start, end)| {
            [false, true].map(|relative| Region {
                start,
                end,
                relative,
            })
        });
        for region in regions {
            for frame in [1, 5, 7, 16, 1000, 4096] {
                let mut t = data.clone();
                for (k, c) in t.chunks_mut(frame).enumerate() {
                    encode_frame(region, c, (k * frame) as u64);
                }
                let end = match region.end {
                    0 => data.len(),
                    e => e as usize,
                };
                let outside = |v: &[u8]| [v[..region.start as usize].to_vec(), v[end..].to_vec()];
                assert_eq!(outside(&t), outside(&data), "{region:?}");
                for (k, c) in t.chunks_mut(frame).enumerate() {
                    decode_frame(region, c, (k * frame) as u64);
                }
                assert_eq!(t, data, "{region:?} frames of {frame}");
            }
        }
    }

    /// `len` bytes that start with the header of a little-endian ELF64 for x86-64, the rest
    /// zero (no program headers).
    fn x86_64_elf(len: usize) -> Vec<u8> {
        let mut elf = vec![0u8; len];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[18] = 62;
        elf
    }

    #[test]
    fn an_elf_names_its_code() {
        // Two program headers at 64: a read-only segment, then the executable one at 0x1000.
        let mut elf = x86_64_elf(64 + 2 * 56);
        elf[0x20] = 64;
        elf[0x36] = 56;
        elf[0x38] = 2;
        let phdr = |elf: &mut Vec<u8>, k: usize, flags: u8, offset: u64, size: u64| {
            let at = 64 + 56 * k;
            elf[at] = 1;
            elf[at + 4] = flags;
            elf[at + 8..at + 16].copy_from_slice(&offset.to_le_bytes());
            elf[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
        };
        phdr(&mut elf, 0, 4, 0, 0x1000);
        phdr(&mut elf, 1, 5, 0x1000, 0x2345);
        assert_eq!(
            detect(&elf),
            Some(Region {
                start: 0x1000,
                end: 0x3345,
                relative: false,
            })
        );
        // Program headers beyond the sample: the whole input.
        elf[0x20] = 0xFF;
        assert_eq!(detect(&elf), Some(Region::ALL));
    }

    /// Programs and shared libraries by their headers; not relocatable objects, other
    /// machines, or code without a header.
    #[test]
    fn programs_by_their_headers() {
        let mut elf = x86_64_elf(64);
        for (e_type, program) in [(1, false), (2, true), (3, true), (4, false)] {
            elf[16] = e_type;
            assert_eq!(is_program(&elf), program, "{e_type}");
        }
        // Big-endian: the type's low byte last.
        elf[5] = 2;
        (elf[16], elf[17], elf[18], elf[19]) = (0, 3, 0, 3);
        assert!(is_program(&elf));
        elf[19] = 183; // AArch64
        assert!(!is_program(&elf));
        let mut pe = vec![0u8; 0x100];
        pe[..2].copy_from_slice(b"MZ");
        pe[0x3C] = 0x80;
        pe[0x80..0x84].copy_from_slice(b"PE\0\0");
        pe[0x84..0x86].copy_from_slice(&0x8664u16.to_le_bytes());
        assert!(is_program(&pe));
        assert!(!is_program(b"!<arch>\n"));
    }

    #[test]
    fn detection() {
        let mut elf = x86_64_elf(64);
        assert_eq!(detect(&elf), Some(Region::ALL));
        elf[18] = 183; // AArch64
        assert_eq!(detect(&elf), None);
        let text = b"Il \xe8 venu le soir, apr\xe8s la pluie. ".repeat(500);
        assert_eq!(detect(&text), None);
        let mut state = 1u64;
        let random: Vec<u8> = (0..SAMPLE)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        assert_eq!(detect(&random), None);
        // Raw code: a call every 20 bytes.
        let mut code = Vec::new();
        for i in 0..100u32 {
            code.extend_from_slice(&[0x48, 0x89, 0xC7, 0xE8]);
            code.extend_from_slice(&(i * 64).wrapping_neg().to_le_bytes());
            code.extend_from_slice(&[0x90; 12]);
        }
        assert_eq!(detect(&code), Some(Region::ALL));
        assert_eq!(detect(&[]), None);
    }
}
