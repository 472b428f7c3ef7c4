//! The AVX-512 path: the element-wise algorithms of [`super::simd`] over one `__m512` per
//! sixteen lanes, and the sums in their eight logical lanes — dot products with two
//! eight-lane accumulators per `__m512` ([`super::simd::dot_paired`]), the scan's state rows
//! in the AVX2 path's `__m256` — all compiled inside `#[target_feature(enable = "avx512f")]`
//! entry points whatever the build's flags.
//!
//! The bits are the other paths': every element sees the same IEEE 754 operations in the same
//! order (module doc of [`super::simd`]). Enabling `avx512f` also enables `fma`, but Rust never
//! contracts a multiply and an add into a fused one by itself, and nothing here asks for one;
//! tests/simd_paths.rs and the kernels' tests compare this path with the others bit for bit.
//!
//! Soundness: the lane type [`M512`] is private to this module and only the entry points (which
//! carry the target feature) instantiate the algorithms with it; [`super::Kernels`] calls them
//! only for a path that [`super::SimdPath::is_available`] confirmed on this CPU.

use std::arch::x86_64::*;

use super::avx2::M256;
use super::lanes::Lanes;
use super::math::ROUND_MAGIC_BITS;
use super::simd::{Dots, Halves};

/// Sixteen lanes in one AVX-512 register.
#[derive(Clone, Copy)]
pub(super) struct M512(__m512);

/// The sign bit of every lane, and every bit but it.
const SIGN: i32 = i32::MIN;
const MAGNITUDE: i32 = i32::MAX;

// SAFETY (every `unsafe` block below): the intrinsics need AVX-512F, which the entry points
// enable and the dispatcher checks at run time (module doc); loads and stores go through
// references to arrays of exactly sixteen floats.
impl Lanes<16> for M512 {
    #[inline(always)]
    fn load(c: &[f32; 16]) -> Self {
        M512(unsafe { _mm512_loadu_ps(c.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, c: &mut [f32; 16]) {
        unsafe { _mm512_storeu_ps(c.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        M512(unsafe { _mm512_set1_ps(x) })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        M512(unsafe { _mm512_add_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        M512(unsafe { _mm512_sub_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        M512(unsafe { _mm512_mul_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        M512(unsafe { _mm512_div_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        M512(unsafe { _mm512_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn neg(self) -> Self {
        unsafe {
            let bits = _mm512_xor_si512(_mm512_castps_si512(self.0), _mm512_set1_epi32(SIGN));
            M512(_mm512_castsi512_ps(bits))
        }
    }
    #[inline(always)]
    fn raise_to(self, lo: Self) -> Self {
        // An ordered compare: false for NaN, which therefore stays.
        unsafe {
            let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, lo.0);
            M512(_mm512_mask_blend_ps(below, self.0, lo.0))
        }
    }
    #[inline(always)]
    fn lower_to(self, hi: Self) -> Self {
        unsafe {
            let above = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(self.0, hi.0);
            M512(_mm512_mask_blend_ps(above, self.0, hi.0))
        }
    }
    #[inline(always)]
    fn flush_below(self, tiny: Self) -> Self {
        unsafe {
            let abs = _mm512_and_si512(_mm512_castps_si512(self.0), _mm512_set1_epi32(MAGNITUDE));
            let tiny_lanes = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_castsi512_ps(abs), tiny.0);
            // Zero (+0) in the tiny lanes, `self` in the others.
            M512(_mm512_maskz_mov_ps(!tiny_lanes, self.0))
        }
    }
    #[inline(always)]
    fn pow2_of_rounded(t: Self) -> Self {
        unsafe {
            let k = _mm512_sub_epi32(
                _mm512_castps_si512(t.0),
                _mm512_set1_epi32(ROUND_MAGIC_BITS),
            );
            // `· 2^23` in wrapping i32 arithmetic is a left shift by 23.
            let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(k, _mm512_set1_epi32(127)));
            M512(_mm512_castsi512_ps(bits))
        }
    }
}

impl Halves for M512 {
    type Half = M256;
    #[inline(always)]
    fn halves(self) -> (M256, M256) {
        unsafe {
            let low = _mm512_castps512_ps256(self.0);
            let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(self.0));
            (M256::from(low), M256::from(_mm256_castpd_ps(high)))
        }
    }
}

impl Dots for M512 {
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        super::simd::dot_paired::<M512>(a, b)
    }
    #[inline(always)]
    fn dot2(a0: &[f32], b0: &[f32], a1: &[f32], b1: &[f32]) -> (f32, f32) {
        super::simd::dot2_paired::<M512>(a0, b0, a1, b1)
    }
}

// The entry points of the path: element-wise work and dot products over `M512`, the scan over
// `M256`.
entry_points!(wide: M512 = 16, #[target_feature(enable = "avx512f")]);
scan_entry_points!(narrow: M256, #[target_feature(enable = "avx512f")]);
wkv_entry_points!(wide: M512 = 16, #[target_feature(enable = "avx512f")]);
