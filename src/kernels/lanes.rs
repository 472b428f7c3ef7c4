//! The lanes every SIMD path computes in: the [`Lanes`] trait (one IEEE 754 operation per lane,
//! or a bit operation, never a fused multiply-add) and the lane forms of the project's
//! transcendental functions, [`exp_lanes`] and [`sigmoid_lanes`], each the same operations in
//! the same order as its scalar form in [`super::math`].
//!
//! This module sits below the algorithms ([`super::simd`], [`super::scan`]) and the paths
//! (`portable`, `avx2`, `avx512`) that implement [`Lanes`]; it reads only [`super::math`]'s
//! constants.

use super::LANES;
use super::math::{EXP_HI, EXP_LO, LN2_HI, LN2_LO, LOG2E, P0, P1, P2, P3, P4, P5, ROUND_MAGIC};

/// `W` f32 lanes and the operations the kernels use on them: each lane-wise, each either one
/// correctly rounded IEEE 754 operation or a bit operation, so every implementation computes the
/// same bits. No fused multiply-add.
///
/// The element-wise algorithms of [`super::simd`] take any width: each element sees the same
/// operations in the same order whatever `W` is (and their scalar tails spell the same
/// operations), so a 16-lane register computes what two 8-lane ones do. The sums that fix an
/// order (`simd::dot`, the scan's state rows) are written over eight lanes ([`Lanes8`]); a wider
/// path keeps those eight logical lanes (`simd::Dots`).
pub(super) trait Lanes<const W: usize>: Copy {
    fn load(c: &[f32; W]) -> Self;
    fn store(self, c: &mut [f32; W]);
    fn splat(x: f32) -> Self;
    /// `self + o`, in this operand order (which fixes the payload of a NaN).
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn sqrt(self) -> Self;
    /// Flips the sign bit.
    fn neg(self) -> Self;
    /// `lo` where `self < lo`, else `self` (compare-and-select: NaN stays NaN).
    fn raise_to(self, lo: Self) -> Self;
    /// `hi` where `self > hi`, else `self` (NaN stays NaN).
    fn lower_to(self, hi: Self) -> Self;
    /// `+0` where `|self| < tiny`, else `self` (NaN stays NaN).
    fn flush_below(self, tiny: Self) -> Self;
    /// For `t = n + ROUND_MAGIC` with an integer `n` in the low mantissa bits: the float whose
    /// bits are `(bits(t) − bits(ROUND_MAGIC) + 127) · 2^23` in wrapping i32 arithmetic, which
    /// is `2^n` for the `n` that [`exp_lanes`] produces.
    fn pow2_of_rounded(t: Self) -> Self;
}

/// Eight lanes: the width of every sum's fixed order ([`LANES`]).
pub(super) trait Lanes8: Lanes<LANES> {}
impl<V: Lanes<LANES>> Lanes8 for V {}

/// [`super::math::exp`] in every lane, the same operations in the same order.
#[inline(always)]
pub(super) fn exp_lanes<const W: usize, V: Lanes<W>>(x: V) -> V {
    let x = x.raise_to(V::splat(EXP_LO));
    let x = x.lower_to(V::splat(EXP_HI));
    let magic = V::splat(ROUND_MAGIC);
    let t = x.mul(V::splat(LOG2E)).add(magic);
    let n = t.sub(magic);
    let r = (x.sub(n.mul(V::splat(LN2_HI)))).sub(n.mul(V::splat(LN2_LO)));
    let z = r.mul(r);
    let p = V::splat(P0).mul(r).add(V::splat(P1));
    let p = p.mul(r).add(V::splat(P2));
    let p = p.mul(r).add(V::splat(P3));
    let p = p.mul(r).add(V::splat(P4));
    let p = p.mul(r).add(V::splat(P5));
    let e = (p.mul(z).add(r)).add(V::splat(1.0));
    e.mul(V::pow2_of_rounded(t))
}

/// [`super::math::sigmoid`] in every lane, the same operations in the same order.
#[inline(always)]
pub(super) fn sigmoid_lanes<const W: usize, V: Lanes<W>>(x: V) -> V {
    let one = V::splat(1.0);
    one.div(one.add(exp_lanes::<W, V>(x.neg())))
}

#[cfg(test)]
mod tests {
    use wide::f32x8;

    use super::*;
    use crate::kernels::math::exp;

    #[test]
    fn exp_lanes_agree_with_scalar_including_edges() {
        let xs = [-1000.0, -87.5, -0.5, 0.0, 1e-30, 0.346_573_6, 44.0, 1000.0];
        let got = exp_lanes::<LANES, f32x8>(f32x8::from(xs)).to_array();
        for (g, x) in got.iter().zip(xs) {
            assert_eq!(g.to_bits(), exp(x).to_bits(), "x={x}");
        }
        let nan = exp_lanes::<LANES, f32x8>(f32x8::splat(f32::NAN)).to_array();
        assert!(nan.iter().all(|v| v.is_nan()));
    }
}
