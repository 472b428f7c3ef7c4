//! The resident pages of built-in data (the network's priors, the stage's warm start): read
//! once when a stream starts from them, then not needed until the next stream does. They are
//! part of the program's file, so once read they count in its resident memory for the rest of
//! the run (about 1 MB for the warm start: a 64 KiB input's peak grew from 32.9 to 33.9 MB).
//! [`release`] gives them back.

/// Lets the system drop the pages that lie wholly within `bytes`, a static the program only
/// reads: a later read faults them back in from the program's file, with the same bytes. On
/// systems other than Linux, nothing.
pub fn release(bytes: &'static [u8]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Ok(page) = usize::try_from(page) else {
            return;
        };
        if page == 0 {
            return;
        }
        let start = (bytes.as_ptr() as usize).next_multiple_of(page);
        let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
        if end > start {
            // SAFETY: the pages lie wholly within a `&'static [u8]` of the program's read-only
            // data (an `include_bytes!`), a private mapping of its file that nothing writes, so
            // dropping them loses nothing: the next read maps the file's bytes again. No
            // reference into them is invalidated. A failure leaves them as they were.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}
