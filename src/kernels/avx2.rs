//! The AVX2 path: the eight-lane algorithms of [`super::simd`] over one `__m256` per eight
//! lanes, compiled inside `#[target_feature(enable = "avx2")]` entry points whatever the build's
//! flags. Only AVX and AVX2 instructions: no FMA (the `fma` feature is not enabled, and Rust
//! never contracts a multiply and an add by itself), so the bits are the portable path's.
//!
//! Soundness: the lane type [`M256`] is private to the kernels, and only entry points that carry
//! the target feature (these, and [`super::avx512`]'s, whose `avx512f` implies AVX2) instantiate
//! the algorithms with it; [`super::Kernels`] calls them
//! only for a path that [`super::SimdPath::is_available`] confirmed on this CPU.

use std::arch::x86_64::*;

use super::LANES;
use super::lanes::Lanes;
use super::math::ROUND_MAGIC_BITS;

/// Eight lanes in one AVX register.
#[derive(Clone, Copy)]
pub(super) struct M256(__m256);

impl From<__m256> for M256 {
    #[inline(always)]
    fn from(v: __m256) -> Self {
        M256(v)
    }
}

// SAFETY (every `unsafe` block below): the intrinsics need AVX/AVX2, which the entry points
// enable and the dispatcher checks at run time (module doc); loads and stores go through
// references to arrays of exactly eight floats.
impl Lanes<LANES> for M256 {
    #[inline(always)]
    fn load(c: &[f32; LANES]) -> Self {
        M256(unsafe { _mm256_loadu_ps(c.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, c: &mut [f32; LANES]) {
        unsafe { _mm256_storeu_ps(c.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        M256(unsafe { _mm256_set1_ps(x) })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        M256(unsafe { _mm256_add_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        M256(unsafe { _mm256_sub_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        M256(unsafe { _mm256_mul_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        M256(unsafe { _mm256_div_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        M256(unsafe { _mm256_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn neg(self) -> Self {
        M256(unsafe { _mm256_xor_ps(self.0, _mm256_set1_ps(-0.0)) })
    }
    #[inline(always)]
    fn raise_to(self, lo: Self) -> Self {
        // An ordered compare: false for NaN, which therefore stays.
        M256(unsafe { _mm256_blendv_ps(self.0, lo.0, _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, lo.0)) })
    }
    #[inline(always)]
    fn lower_to(self, hi: Self) -> Self {
        M256(unsafe { _mm256_blendv_ps(self.0, hi.0, _mm256_cmp_ps::<_CMP_GT_OQ>(self.0, hi.0)) })
    }
    #[inline(always)]
    fn flush_below(self, tiny: Self) -> Self {
        unsafe {
            let abs = _mm256_and_ps(self.0, _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX)));
            let tiny_lanes = _mm256_cmp_ps::<_CMP_LT_OQ>(abs, tiny.0);
            M256(_mm256_andnot_ps(tiny_lanes, self.0))
        }
    }
    #[inline(always)]
    fn pow2_of_rounded(t: Self) -> Self {
        unsafe {
            let k = _mm256_sub_epi32(
                _mm256_castps_si256(t.0),
                _mm256_set1_epi32(ROUND_MAGIC_BITS),
            );
            // `· 2^23` in wrapping i32 arithmetic is a left shift by 23.
            let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(k, _mm256_set1_epi32(127)));
            M256(_mm256_castsi256_ps(bits))
        }
    }
}

dots_in_eight_lanes!(M256);

// The entry points of the path, each one algorithm of `simd` over `M256`.
entry_points!(wide: M256 = 8, #[target_feature(enable = "avx2")]);
scan_entry_points!(narrow: M256, #[target_feature(enable = "avx2")]);
wkv_entry_points!(wide: M256 = 8, #[target_feature(enable = "avx2")]);
