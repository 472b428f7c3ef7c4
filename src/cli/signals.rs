//! Ctrl-C and termination: a signal raises a flag. The codec's progress callback checks the
//! flag every few thousand bytes and stops the run with [`Interrupted`], so the ordinary error
//! path — which removes the temporary output — does the cleanup, and no partial file is left.
//!
//! A big model codes only a few hundred bytes a second, and a read from a silent pipe may never
//! return, so the check can be seconds away. If the run has not stopped [`GRACE`] after the
//! signal (or at a second signal), the handler removes the temporary files registered here and
//! exits itself. That is as safe as the ordinary path: a temporary file is either removed or
//! already renamed complete onto its target, and a source is removed only after that rename.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// How long a signalled run may take to reach its next check before the handler ends it.
pub const GRACE: Duration = Duration::from_secs(1);

/// The first signal that came (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Temporary files in progress, for the handler's own cleanup.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The error that stops a run after a signal.
#[derive(Debug, Clone, Copy)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP. Failing to install it is not fatal: the
/// signals then keep their default action (the process dies, and may leave a temporary file).
pub fn install() -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if SIGNAL
                    .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    escape();
                }
                // Signals arrive on this thread one at a time: wait elsewhere, so that a
                // second signal is still seen at once.
                let spawned = std::thread::Builder::new().spawn(|| {
                    std::thread::sleep(GRACE);
                    escape();
                });
                if spawned.is_err() {
                    escape();
                }
            }
        })?;
    Ok(())
}

/// Exit status of a run stopped by a signal: 128 + its number, as shells report it (130 for
/// SIGINT, 143 for SIGTERM, 129 for SIGHUP).
pub fn interrupted_status() -> u8 {
    let signal = SIGNAL.load(Ordering::SeqCst);
    let signal = if signal == 0 { SIGINT } else { signal };
    (128 + signal).clamp(0, 255) as u8
}

/// Removes the pending temporary files and exits with [`interrupted_status`].
fn escape() -> ! {
    for path in pending().drain(..) {
        let _ = std::fs::remove_file(path);
    }
    std::process::exit(i32::from(interrupted_status()));
}

/// `Err(Interrupted)` once a signal has come.
pub fn check() -> Result<(), Interrupted> {
    if SIGNAL.load(Ordering::SeqCst) != 0 {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock cannot leave the list inconsistent: take it as it is.
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers a temporary file for the handler's cleanup while the guard lives.
pub struct PendingFile {
    path: PathBuf,
}

impl PendingFile {
    pub fn register(path: &Path) -> Self {
        pending().push(path.to_path_buf());
        PendingFile {
            path: path.to_path_buf(),
        }
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        let mut list = pending();
        if let Some(i) = list.iter().position(|p| *p == self.path) {
            list.swap_remove(i);
        }
    }
}
