//! Which SIMD implementation of the kernels runs: chosen once per process, by runtime CPU
//! detection or by the `LMZIP_SIMD` environment variable, and then read by every kernel call
//! (one relaxed load of a byte, outside the kernels' inner loops).
//!
//! Every path computes the same bits (module doc of [`super`]), so the choice changes speed
//! only; the variable exists to test and measure each path on one machine.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that forces a path: `portable`, `avx2`, `avx512`, or `auto` (the
/// default: [`SimdPath::auto`]).
pub const SIMD_ENV_VAR: &str = "LMZIP_SIMD";

/// One implementation of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdPath {
    /// `wide::f32x8`, compiled for whatever the build targets (two SSE registers on the
    /// baseline x86-64 build, one AVX register with `-C target-cpu=x86-64-v3`); runs anywhere.
    Portable,
    /// `std::arch` AVX2 intrinsics, one `__m256` per eight lanes; x86-64 CPUs with AVX2.
    Avx2,
    /// `std::arch` AVX-512F intrinsics, one `__m512` per sixteen lanes (two of the eight logical
    /// lanes' accumulators per register in the sums); x86-64 CPUs with AVX-512F.
    Avx512,
}

impl SimdPath {
    /// Every path, narrowest first.
    pub const ALL: [SimdPath; 3] = [SimdPath::Portable, SimdPath::Avx2, SimdPath::Avx512];

    /// The name `LMZIP_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            SimdPath::Portable => "portable",
            SimdPath::Avx2 => "avx2",
            SimdPath::Avx512 => "avx512",
        }
    }

    /// The path of that name (`portable`, `avx2`, `avx512`), if there is one.
    pub fn from_name(name: &str) -> Option<SimdPath> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether this CPU can run the path.
    pub fn is_available(self) -> bool {
        match self {
            SimdPath::Portable => true,
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            // The path's sums run in AVX2 registers too.
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
            }
            #[cfg(not(target_arch = "x86_64"))]
            SimdPath::Avx2 | SimdPath::Avx512 => false,
        }
    }

    /// The paths this CPU can run, narrowest first.
    pub fn available() -> Vec<SimdPath> {
        Self::ALL.into_iter().filter(|p| p.is_available()).collect()
    }

    /// The path `auto` runs when nothing is forced: AVX2 where this CPU has it, else the
    /// portable one. AVX-512 is not chosen by itself: on the AVX-512 machine measured (an Intel
    /// Xeon with AVX-512F) it was no faster than AVX2 — 1.02× AVX2's wall time over book1 at
    /// the default level, 1.04–1.12× at levels 6 and 9 — because at these matrix sizes the
    /// kernels wait on memory and on their short sums' folds rather than on arithmetic width.
    /// On a 2-core AMD EPYC with AVX-512 it is no faster either (book1's first 100,000 bytes
    /// at the default level, three runs each: 4.19 s of user time against 3.93 s, medians).
    /// `LMZIP_SIMD=avx512` runs it.
    pub fn auto() -> SimdPath {
        [SimdPath::Avx2, SimdPath::Portable]
            .into_iter()
            .find(|p| p.is_available())
            .unwrap_or(SimdPath::Portable)
    }

    /// The path a value of `LMZIP_SIMD` asks for: `auto` or an empty value means [`Self::auto`];
    /// a path this CPU lacks, or a name that is no path, is an error (never a silent substitute,
    /// so that a test or measurement of a path runs that path).
    pub fn from_setting(value: &str) -> Result<SimdPath, SimdChoiceError> {
        let value = value.trim();
        if value.is_empty() || value == "auto" {
            return Ok(Self::auto());
        }
        match Self::from_name(value) {
            Some(p) if p.is_available() => Ok(p),
            Some(p) => Err(SimdChoiceError::Unavailable(p)),
            None => Err(SimdChoiceError::Unknown(value.to_owned())),
        }
    }

    /// The path the environment asks for ([`SIMD_ENV_VAR`]; unset means `auto`).
    pub fn from_env() -> Result<SimdPath, SimdChoiceError> {
        match std::env::var_os(SIMD_ENV_VAR) {
            None => Ok(Self::auto()),
            Some(v) => match v.to_str() {
                Some(s) => Self::from_setting(s),
                None => Err(SimdChoiceError::Unknown(v.to_string_lossy().into_owned())),
            },
        }
    }
}

/// Why `LMZIP_SIMD` cannot be followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimdChoiceError {
    /// The value names no path.
    Unknown(String),
    /// The path exists but this CPU cannot run it.
    Unavailable(SimdPath),
}

impl fmt::Display for SimdChoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |paths: &[SimdPath]| {
            paths
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            SimdChoiceError::Unknown(v) => write!(
                f,
                "{SIMD_ENV_VAR}={v:?} is not a SIMD path (expected auto, {})",
                names(&SimdPath::ALL)
            ),
            SimdChoiceError::Unavailable(p) => write!(
                f,
                "{SIMD_ENV_VAR}={}: this CPU cannot run that SIMD path (it can run: {})",
                p.name(),
                names(&SimdPath::available())
            ),
        }
    }
}

impl std::error::Error for SimdChoiceError {}

/// The chosen path: 0 until chosen, then 1 + its index in [`SimdPath::ALL`]. Only an available
/// path is ever stored, which is what makes calling the AVX2 and AVX-512 functions sound.
static ACTIVE: AtomicU8 = AtomicU8::new(0);

fn code(p: SimdPath) -> u8 {
    match p {
        SimdPath::Portable => 1,
        SimdPath::Avx2 => 2,
        SimdPath::Avx512 => 3,
    }
}

/// Fixes the path from the environment, once: the command-line front end calls this at
/// start-up so that a bad `LMZIP_SIMD` is reported as an error. Later calls return the path
/// fixed first (the environment of a process does not change what it computes midway).
pub fn init_from_env() -> Result<SimdPath, SimdChoiceError> {
    let wanted = SimdPath::from_env()?;
    Ok(fix(wanted))
}

/// Stores `p` unless a path is already fixed; returns the path in force.
fn fix(p: SimdPath) -> SimdPath {
    debug_assert!(p.is_available());
    match ACTIVE.compare_exchange(0, code(p), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => p,
        Err(_) => active(),
    }
}

/// The path in force. Without [`init_from_env`], the first kernel call fixes it from the
/// environment, and a value that cannot be followed falls back to the portable path (a library
/// has no channel for the error; the binary reports it before any kernel runs).
#[inline(always)]
pub fn active() -> SimdPath {
    match ACTIVE.load(Ordering::Relaxed) {
        1 => SimdPath::Portable,
        2 => SimdPath::Avx2,
        3 => SimdPath::Avx512,
        _ => choose_lazily(),
    }
}

#[cold]
#[inline(never)]
fn choose_lazily() -> SimdPath {
    fix(SimdPath::from_env().unwrap_or(SimdPath::Portable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_name_paths_or_fail_with_the_choices() {
        assert_eq!(SimdPath::from_setting("portable"), Ok(SimdPath::Portable));
        assert_eq!(SimdPath::from_setting(" auto "), Ok(SimdPath::auto()));
        assert_eq!(SimdPath::from_setting(""), Ok(SimdPath::auto()));
        let err = SimdPath::from_setting("avx9").unwrap_err();
        assert_eq!(err, SimdChoiceError::Unknown("avx9".into()));
        let msg = err.to_string();
        assert!(msg.contains("LMZIP_SIMD=\"avx9\"") && msg.contains("portable, avx2, avx512"));
        for path in [SimdPath::Avx2, SimdPath::Avx512] {
            let chosen = SimdPath::from_setting(path.name());
            if path.is_available() {
                assert_eq!(chosen, Ok(path));
            } else {
                let msg = chosen.unwrap_err().to_string();
                assert!(
                    msg.contains("cannot run") && msg.contains("portable"),
                    "{msg}"
                );
            }
        }
    }

    #[test]
    fn the_detected_paths_match_the_cpu() {
        assert_eq!(SimdPath::available()[0], SimdPath::Portable);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(
                SimdPath::Avx2.is_available(),
                std::arch::is_x86_feature_detected!("avx2")
            );
            assert_eq!(
                SimdPath::Avx512.is_available(),
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
            );
            let auto = SimdPath::auto();
            assert_eq!(auto == SimdPath::Avx2, SimdPath::Avx2.is_available());
        }
        assert!(SimdPath::auto().is_available());
    }
}
