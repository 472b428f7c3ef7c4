//! The mixing stage's two integer loops, run per weight set for every bit (src/mix/mixer.rs):
//! their results do not depend on the order of the additions, so a vectorised copy computes
//! exactly the same. The baseline x86-64 build has no signed 64-bit vector multiply, and left
//! alone they ran one input at a time; where the kernels run their AVX2 path (`LMZIP_SIMD`,
//! [`super::dispatch`]), the same code compiled for AVX2 runs instead, so forcing the portable
//! path runs the portable twin.

/// Whether the kernels' AVX2 path is in force (it is only ever chosen where the CPU has it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn uses_avx2() -> bool {
    super::dispatch::active() == super::SimdPath::Avx2
}

/// `Σ x[i] · w[i]` (no overflow: |x| < 2^11, |w| ≤ 2^22, a few hundred inputs at most).
pub fn dot(x: &[i32], w: &[i32]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    if uses_avx2() {
        // SAFETY: the AVX2 path is only chosen on a CPU that has AVX2.
        return unsafe { avx2::dot(x, w) };
    }
    dot_body(x, w)
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
    #[cfg(target_arch = "x86_64")]
    if uses_avx2() {
        // SAFETY: the AVX2 path is only chosen on a CPU that has AVX2.
        return unsafe {
            match narrow {
                Some(s) => avx2::train_narrow(x, w, s, limit),
                None => avx2::train(x, w, scaled, limit),
            }
        };
    }
    match narrow {
        Some(s) => train_narrow_body(x, w, s, limit),
        None => train_body(x, w, scaled, limit),
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

/// The same loops compiled for AVX2.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    #[target_feature(enable = "avx2")]
    pub(super) fn dot(x: &[i32], w: &[i32]) -> i64 {
        super::dot_body(x, w)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn train(x: &[i32], w: &mut [i32], scaled: i64, limit: i32) {
        super::train_body(x, w, scaled, limit)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn train_narrow(x: &[i32], w: &mut [i32], scaled: i32, limit: i32) {
        super::train_narrow_body(x, w, scaled, limit)
    }
}

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
