//! The memory of a context table: `u32` slots, all zero at first, in their own anonymous
//! mapping which Linux is asked to back with huge pages. Each bit reads a random slot of
//! every table (about 240 MiB at the default), so with 4 KiB pages nearly every read also
//! missed the TLB and walked the page tables; 2 MiB pages cover the tables with a few hundred
//! entries. Where the advice is not taken (another system, huge pages off), the tables work
//! as before, only slower; no value depends on it.

use std::io;

use memmap2::MmapMut;

/// Alignment that lets every 2 MiB stretch of a large table be one huge page.
const HUGE_PAGE: usize = 2 << 20;

pub struct Slots {
    map: MmapMut,
    /// Where slot 0 starts in `map` (past its first huge-page boundary).
    start: usize,
}

impl Slots {
    /// `len` zero slots; an error when the system will not map them (out of memory or
    /// address space), so that a run ends with a message rather than a panic.
    pub fn zeroed(len: usize) -> io::Result<Self> {
        let bytes = 4 * len;
        let pad = if bytes >= HUGE_PAGE { HUGE_PAGE } else { 0 };
        let map = MmapMut::map_anon(bytes + pad).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot map {} MiB for a context table: {e}", bytes >> 20),
            )
        })?;
        let start = match pad {
            0 => 0,
            _ => (HUGE_PAGE - map.as_ptr() as usize % HUGE_PAGE) % HUGE_PAGE,
        };
        #[cfg(target_os = "linux")]
        if pad > 0 {
            // Only advice: the table works the same without it.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(Slots { map, start })
    }

    /// The slot at `i` (`i < len`).
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        let at = self.start + 4 * i;
        u32::from_ne_bytes(self.map[at..at + 4].try_into().unwrap())
    }

    /// Writes the slot at `i` (`i < len`).
    #[inline]
    pub fn set(&mut self, i: usize, value: u32) {
        let at = self.start + 4 * i;
        self.map[at..at + 4].copy_from_slice(&value.to_ne_bytes());
    }

    /// The first byte of slot `i`, for a prefetch.
    #[inline]
    pub fn byte(&self, i: usize) -> &u8 {
        &self.map[self.start + 4 * i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_start_at_zero_and_keep_what_is_written() {
        for len in [1usize << 10, 1 << 20] {
            let mut s = Slots::zeroed(len).unwrap();
            assert!((0..len).step_by(997).all(|i| s.get(i) == 0));
            s.set(0, 7);
            s.set(len - 1, u32::MAX);
            assert_eq!((s.get(0), s.get(1), s.get(len - 1)), (7, 0, u32::MAX));
        }
    }
}
