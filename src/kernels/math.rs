//! The project's own transcendental functions, built from `+ - * /` and bit operations only, so
//! that every build (baseline, AVX2, `native`) and every CPU computes the same bits.
//!
//! `std`'s `exp`/`ln` call the platform libm and `wide`'s polynomials fuse multiply-adds when FMA
//! is enabled; neither may touch a value that the coder sees. [`exp`] and its lane form
//! (`super::lanes::exp_lanes`, every SIMD path's at every width) are one algorithm written
//! twice, with the same operations in the same order; the rest are composed from them, and the
//! logarithm comes from the pure-Rust `libm` crate. This module is the bottom of the kernels:
//! it imports none of them.

// Cody–Waite split of ln 2 and the minimax polynomial for e^r on [-ln2/2, ln2/2]: the constants of
// the Cephes library's `expf` (S. Moshier), accurate to about 1 ulp in f32.
pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
pub(super) const P0: f32 = 1.987_569_1e-4;
pub(super) const P1: f32 = 1.398_199_9e-3;
pub(super) const P2: f32 = 8.333_452e-3;
pub(super) const P3: f32 = 4.166_579_6e-2;
pub(super) const P4: f32 = 1.666_666_5e-1;
pub(super) const P5: f32 = 0.5; // 5.0000001e-1 in Cephes, which rounds to 0.5 in f32
// Inputs are clamped so that 2^n stays a normal float: exp(-87.34) ≈ 1.2e-38 is the smallest
// result (true underflow to 0 is not needed by any model) and exp(88.37) ≈ 2.7e38 the largest.
pub(super) const EXP_LO: f32 = -87.336_54;
pub(super) const EXP_HI: f32 = 88.376_26;
// Adding 1.5·2^23 rounds a float of magnitude < 2^22 to the nearest integer (ties to even), which
// then sits in the low mantissa bits: the classic round-by-magic-number trick.
pub(super) const ROUND_MAGIC: f32 = 12_582_912.0;
pub(super) const ROUND_MAGIC_BITS: i32 = 0x4B40_0000;

/// e^x, deterministic, relative error about 1e-7. NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Compare-and-select clamps (not f32::max) so that NaN passes through as in the lane form.
    let x = if x < EXP_LO { EXP_LO } else { x };
    let x = if x > EXP_HI { EXP_HI } else { x };
    let t = x * LOG2E + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let z = r * r;
    let p = ((((P0 * r + P1) * r + P2) * r + P3) * r + P4) * r + P5;
    let e = (p * z + r) + 1.0;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC_BITS);
    let scale = f32::from_bits((k.wrapping_add(127) as u32).wrapping_mul(1 << 23));
    e * scale
}

/// Logistic sigmoid `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// SiLU `x · sigmoid(x)`, returned with the sigmoid that backward needs.
#[inline(always)]
pub fn silu_with_sigmoid(x: f32) -> (f32, f32) {
    let s = sigmoid(x);
    (x * s, s)
}

/// d silu(x) / dx from x and sigmoid(x).
#[inline(always)]
pub fn silu_grad(x: f32, s: f32) -> f32 {
    s * (1.0 + x * (1.0 - s))
}

/// Hyperbolic tangent as `sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|})`, exact at 0 and odd.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = if x < 0.0 { -x } else { x };
    let e = exp(-2.0 * a);
    let t = (1.0 - e) / (1.0 + e);
    if x < 0.0 { -t } else { t }
}

/// Natural logarithm of a positive float (pure-Rust `libm`, identical on every build).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    libm::logf(x)
}

/// `ln(1 + e^x)`, linear above 20 where the correction is below f32 resolution.
#[inline(always)]
pub fn softplus(x: f32) -> f32 {
    softplus_with_exp(x, exp(x))
}

/// [`softplus`] of `x` given `e = exp(x)`, so that callers can take the exponentials eight lanes
/// at a time.
#[inline(always)]
pub fn softplus_with_exp(x: f32, e: f32) -> f32 {
    if x > 20.0 { x } else { libm::log1pf(e) }
}

/// e^x in f64 for the coder's softmax (pure-Rust `libm`).
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_over_its_range() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = exp(x) as f64;
            let want = (x as f64).exp();
            assert!(
                ((got - want) / want).abs() < 4e-7,
                "x={x} got={got} want={want}"
            );
            x += 0.173;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 2e-38);
        assert!(exp(1000.0).is_finite());
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn derived_functions_match_their_definitions() {
        for i in -40..=40 {
            let x = i as f32 * 0.25;
            let xd = x as f64;
            assert!((sigmoid(x) as f64 - 1.0 / (1.0 + (-xd).exp())).abs() < 1e-6);
            assert!((tanh(x) as f64 - xd.tanh()).abs() < 1e-6, "tanh {x}");
            assert!((softplus(x) as f64 - (1.0 + xd.exp()).ln()).abs() < 1e-5);
        }
        assert_eq!(tanh(0.0), 0.0);
        assert_eq!(softplus(30.0), 30.0);
    }
}
