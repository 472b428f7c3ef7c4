//! Unsigned LEB128 integers: seven bits a byte, least significant first, the top bit set on
//! every byte but the last. Format version 2 stores its lengths this way, so that a short
//! member spends one or two bytes where version 1 spent four or eight.
//!
//! Only the shortest encoding of a value is accepted: a longer one (a last byte of zero after
//! others) would let a damaged length read as an intact one.

use std::io::{self, Read, Write};

use super::read_exact_or;

/// Most bytes of a `u64`.
pub const MAX_LEN: usize = 10;

/// Appends `value` to `out`.
pub fn put(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// Bytes `value` takes.
pub fn len(value: u64) -> usize {
    // Seven bits a byte; zero takes one byte.
    ((64 - value.leading_zeros()) as usize).div_ceil(7).max(1)
}

/// Writes `value`.
pub fn write(w: &mut impl Write, value: u64) -> io::Result<()> {
    let mut buf = Vec::with_capacity(MAX_LEN);
    put(&mut buf, value);
    w.write_all(&buf)
}

/// Reads a value, appending its bytes to `seen` (for the checksum of what holds it). `what`
/// names the part of the file for a truncation; a malformed value is the inner error, which the
/// caller names as the part it damages.
pub fn read(
    r: &mut impl Read,
    seen: &mut Vec<u8>,
    what: &'static str,
) -> anyhow::Result<Result<u64, &'static str>> {
    let mut value = 0u64;
    for i in 0..MAX_LEN {
        let mut b = [0u8; 1];
        read_exact_or(r, &mut b, what)?;
        seen.push(b[0]);
        let bits = (b[0] & 0x7f) as u64;
        // The tenth byte holds only the top bit of a u64.
        if i == MAX_LEN - 1 && bits > 1 {
            break;
        }
        value |= bits << (7 * i);
        if b[0] & 0x80 == 0 {
            if i > 0 && b[0] == 0 {
                return Ok(Err("a length is not in its shortest form"));
            }
            return Ok(Ok(value));
        }
    }
    Ok(Err("a length does not fit 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_and_take_their_length() {
        for v in [0, 1, 127, 128, 300, 1 << 20, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put(&mut buf, v);
            assert_eq!(buf.len(), len(v));
            let mut seen = Vec::new();
            assert_eq!(read(&mut &buf[..], &mut seen, "test").unwrap(), Ok(v));
            assert_eq!(seen, buf);
        }
        assert_eq!(len(127), 1);
        assert_eq!(len(128), 2);
        assert_eq!(len(u64::MAX), MAX_LEN);
    }

    #[test]
    fn overlong_overflowing_and_cut_values_are_refused() {
        for bad in [
            &[0x80, 0x00][..],
            &[0x81, 0x80, 0x00],
            &[0xff; 10],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0x80],
            &[],
        ] {
            let got = read(&mut &bad[..], &mut Vec::new(), "test");
            assert!(!matches!(got, Ok(Ok(_))), "{bad:?}");
        }
    }
}
