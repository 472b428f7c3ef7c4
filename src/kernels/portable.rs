//! The portable path: the eight-lane algorithms of [`super::simd`] over `wide::f32x8`, which
//! compiles to whatever the build targets (two SSE registers on the baseline x86-64 build, one
//! AVX register with `-C target-cpu=x86-64-v3`, NEON on ARM). It runs on every machine.

use wide::{f32x8, i32x8};

use super::LANES;
use super::lanes::Lanes;
use super::math::ROUND_MAGIC_BITS;

impl Lanes<LANES> for f32x8 {
    #[inline(always)]
    fn load(c: &[f32; LANES]) -> Self {
        f32x8::from(*c)
    }
    #[inline(always)]
    fn store(self, c: &mut [f32; LANES]) {
        *c = self.to_array();
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        f32x8::splat(x)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        self / o
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32x8::sqrt(self)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        -self
    }
    #[inline(always)]
    fn raise_to(self, lo: Self) -> Self {
        self.simd_lt(lo).bitselect(lo, self)
    }
    #[inline(always)]
    fn lower_to(self, hi: Self) -> Self {
        self.simd_gt(hi).bitselect(hi, self)
    }
    #[inline(always)]
    fn flush_below(self, tiny: Self) -> Self {
        self.abs().simd_lt(tiny).bitselect(f32x8::ZERO, self)
    }
    #[inline(always)]
    fn pow2_of_rounded(t: Self) -> Self {
        let k: i32x8 = wide::bytemuck::cast::<f32x8, i32x8>(t) - i32x8::splat(ROUND_MAGIC_BITS);
        let bits = (k + i32x8::splat(127)) * i32x8::splat(1 << 23);
        wide::bytemuck::cast::<i32x8, f32x8>(bits)
    }
}

dots_in_eight_lanes!(f32x8);

// The entry points of the path, each one algorithm of `simd` over `f32x8`.
entry_points!(wide: f32x8 = 8, #[inline]);
scan_entry_points!(narrow: f32x8, #[inline]);
wkv_entry_points!(wide: f32x8 = 8, #[inline]);
