//! The mixing stage's two integer loops, run per weight set for every bit (src/mix/mixer.rs):
//! their results do not depend on the order of the additions, so a vectorised copy computes
//! exactly the same. The baseline x86-64 build has no signed 64-bit vector multiply, and left
//! alone they ran one input at a time; where the kernels run their AVX2 or AVX-512 path
//! (`LMZIP_SIMD`, [`super::dispatch`]), the same code compiled for that path runs instead, so
//! forcing the portable path runs the portable twin.

/// Calls the loop `$f` compiled for the kernels' path in force (`LMZIP_SIMD`,
/// [`super::dispatch`]), or evaluates `$plain` on the portable path.
macro_rules! on_active_path {
    ($f:ident($($arg:expr),*), $plain:expr) => {{
        #[cfg(target_arch = "x86_64")]
        match super::dispatch::active() {
            // SAFETY: a path is only ever chosen on a CPU that has its features.
            super::SimdPath::Avx2 => return unsafe { avx2::$f($($arg),*) },
            super::SimdPath::Avx512 => return unsafe { avx512::$f($($arg),*) },
            super::SimdPath::Portable => {}
        }
        $plain
    }};
}

/// `Σ x[i] · w[i]` (no overflow: |x| < 2^11, |w| ≤ 2^22, a few hundred inputs at most).
pub fn dot(x: &[i32], w: &[i32]) -> i64 {
    on_active_path!(dot(x, w), dot_body(x, w))
}

/// One gradient step: `w[i] += x[i] · scaled / 2^14` (rounded down), within `±limit`
/// (`limit` ≤ 2^22).
pub fn train(x: &[i32], w: &mut [i32], scaled: i64, limit: i32) {
    // With |x| ≤ 2048 (stretch units, ±2047 at most) and |scaled| below 2^20, every product
    // fits an i32, and so does w + step (|w| ≤ 2^22): the 32-bit loop then computes the same
    // bits with twice the lanes. That holds at every valid rate (4095 · 64 · 1024 / 2^8 =
    // 1048320 ≤ i32::MAX / 2048); the 64-bit loop stays for anything else.
    let narrow = i32::try_from(scaled)
        .ok()
        .filter(|s| s.unsigned_abs() <= (i32::MAX / 2048) as u32);
    match narrow {
        Some(s) => on_active_path!(
            train_narrow(x, w, s, limit),
            train_narrow_body(x, w, s, limit)
        ),
        None => on_active_path!(train(x, w, scaled, limit), train_body(x, w, scaled, limit)),
    }
}

#[inline(always)]
fn dot_body(x: &[i32], w: &[i32]) -> i64 {
    debug_assert_eq!(x.len(), w.len());
    x.iter().zip(w).map(|(&a, &b)| a as i64 * b as i64).sum()
}

#[inline(always)]
fn train_body(x: &[i32], w: &mut [i32], scaled: i64, limit: i32) {
    debug_assert_eq!(x.len(), w.len());
    for (w, &x) in w.iter_mut().zip(x) {
        let step = (x as i64 * scaled) >> 14;
        *w = (*w as i64 + step).clamp(-(limit as i64), limit as i64) as i32;
    }
}

/// [`train_body`] in 32 bits, for `|scaled| ≤ i32::MAX / 2048` (see [`train`]).
#[inline(always)]
fn train_narrow_body(x: &[i32], w: &mut [i32], scaled: i32, limit: i32) {
    debug_assert_eq!(x.len(), w.len());
    for (w, &x) in w.iter_mut().zip(x) {
        debug_assert!(x.abs() <= 2048);
        let step = (x * scaled) >> 14;
        *w = (*w + step).clamp(-limit, limit);
    }
}

/// Defines a module of the same loops compiled for a target feature.
macro_rules! loops_compiled_for {
    ($module:ident, $feature:literal) => {
        #[cfg(target_arch = "x86_64")]
        mod $module {
            #[target_feature(enable = $feature)]
            pub(super) fn dot(x: &[i32], w: &[i32]) -> i64 {
                super::dot_body(x, w)
            }

            #[target_feature(enable = $feature)]
            pub(super) fn train(x: &[i32], w: &mut [i32], scaled: i64, limit: i32) {
                super::train_body(x, w, scaled, limit)
            }

            #[target_feature(enable = $feature)]
            pub(super) fn train_narrow(x: &[i32], w: &mut [i32], scaled: i32, limit: i32) {
                super::train_narrow_body(x, w, scaled, limit)
            }
        }
    };
}

loops_compiled_for!(avx2, "avx2");
loops_compiled_for!(avx512, "avx512f");

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path gives the loops' plain results, wide and narrow steps alike.
    #[test]
    fn the_loops_match_their_plain_forms() {
        let x: Vec<i32> = (0..37).map(|i| (i * 331 % 4095) - 2047).collect();
        let w0: Vec<i32> = (0..37)
            .map(|i| (i * 7919 % 8_000_000) - 4_000_000)
            .collect();
        let plain_dot: i64 = x.iter().zip(&w0).map(|(&a, &b)| a as i64 * b as i64).sum();
        assert_eq!(dot(&x, &w0), plain_dot);
        for scaled in [1_000i64, -1_048_320, 1 << 30] {
            let mut w = w0.clone();
            train(&x, &mut w, scaled, 1 << 22);
            for ((&got, &was), &xi) in w.iter().zip(&w0).zip(&x) {
                let want =
                    (was as i64 + ((xi as i64 * scaled) >> 14)).clamp(-(1 << 22), 1 << 22) as i32;
                assert_eq!(got, want);
            }
        }
    }
}
