//! e^x in f64 over a whole slice, for the coder's softmax: the `libm` crate's `exp` (FreeBSD's
//! `e_exp.c`) four lanes at a time, bit for bit.
//!
//! The softmax takes 256 exponentials a byte, about 6% of the default's time when each is a
//! call. The vector form runs libm's main path — the same argument reduction, the same rational
//! approximation and the same operations in the same order, lane by lane — for arguments with
//! |x| < 700, where libm takes that path (or, for |x| ≤ 2^-28, returns `1 + x`) and its final
//! `scalbn` is one exact multiplication by 2^k. A block of four with any other argument (NaN,
//! infinities, the overflow and underflow ranges) is computed by `libm::exp` itself. The tests
//! compare both with `libm::exp` bit for bit over about 900,000 arguments and around each of
//! libm's thresholds. The AVX2 form runs where the kernels' AVX2 or AVX-512 path is in force
//! ([`super::dispatch`]); the portable path calls `libm::exp` per element.

use super::math::exp_f64;

/// `v[i] = e^v[i]` for every element, each exactly `libm::exp(v[i])`.
pub fn exp_f64_in_place(v: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(
        super::dispatch::active(),
        super::SimdPath::Avx2 | super::SimdPath::Avx512
    ) {
        // SAFETY: those paths are only chosen on a CPU that has AVX2.
        unsafe { avx2::exp_in_place(v) };
        return;
    }
    exp_each(v);
}

/// The scalar form: one `libm::exp` per element.
fn exp_each(v: &mut [f64]) {
    for x in v {
        *x = exp_f64(*x);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    // libm's constants (e_exp.c), by their bits.
    const LN2HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    const INVLN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
    const P1: f64 = f64::from_bits(0x3fc5_5555_5555_553e);
    const P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93);
    const P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c);
    const P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1);
    const P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0);
    /// libm's branch points, as the high 32 bits of |x|: above 0.5·ln2 it reduces the argument,
    /// from 1.5·ln2 on by a rounded multiple of ln2, and at or below 2^-28 it returns `1 + x`.
    const HALF_LN2_WORD: i64 = 0x3fd6_2e42;
    const THREE_HALVES_LN2_WORD: i64 = 0x3ff0_a2b2;
    const TINY_WORD: i64 = 0x3e30_0000;
    /// Below this magnitude libm's `scalbn` is one exact multiplication by 2^k.
    const VECTOR_LIMIT: f64 = 700.0;

    /// [`super::exp_f64_in_place`] four lanes at a time.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn exp_in_place(v: &mut [f64]) {
        let (blocks, tail) = v.as_chunks_mut::<4>();
        for block in blocks {
            // SAFETY: AVX2 is enabled; the loads and stores are of exactly four doubles.
            unsafe {
                let x = _mm256_loadu_pd(block.as_ptr());
                match exp4(x) {
                    Some(e) => _mm256_storeu_pd(block.as_mut_ptr(), e),
                    None => super::exp_each(block),
                }
            }
        }
        super::exp_each(tail);
    }

    /// libm's `exp` in four lanes, or `None` when a lane is off its main path. (No closures:
    /// a closure would not inherit the target feature, and its intrinsics would become calls.)
    #[inline(always)]
    unsafe fn exp4(x: __m256d) -> Option<__m256d> {
        // SAFETY (every intrinsic): AVX2 is enabled by the caller.
        unsafe {
            let bits = _mm256_castpd_si256(x);
            let abs = _mm256_and_pd(x, _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX)));
            // Ordered: false for NaN, which therefore leaves the vector path.
            let inside = _mm256_cmp_pd::<_CMP_LT_OQ>(abs, _mm256_set1_pd(VECTOR_LIMIT));
            if _mm256_movemask_pd(inside) != 0b1111 {
                return None;
            }
            let word = _mm256_srli_epi64::<32>(_mm256_castpd_si256(abs));
            let reduced = _mm256_cmpgt_epi64(word, _mm256_set1_epi64x(HALF_LN2_WORD));
            let rounded = _mm256_cmpgt_epi64(word, _mm256_set1_epi64x(THREE_HALVES_LN2_WORD - 1));
            let not_tiny = _mm256_cmpgt_epi64(word, _mm256_set1_epi64x(TINY_WORD));
            let negative = _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_setzero_si256(), bits));
            // k = (INVLN2·x ± 0.5) truncated from 1.5·ln2 on, ±1 above 0.5·ln2, else 0.
            let half = _mm256_blendv_pd(_mm256_set1_pd(0.5), _mm256_set1_pd(-0.5), negative);
            let far = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(INVLN2), x), half);
            let k_far = _mm256_cvtepi32_pd(_mm256_cvttpd_epi32(far));
            let k_near = _mm256_blendv_pd(_mm256_set1_pd(1.0), _mm256_set1_pd(-1.0), negative);
            let k = _mm256_blendv_pd(k_near, k_far, _mm256_castsi256_pd(rounded));
            let k = _mm256_and_pd(k, _mm256_castsi256_pd(reduced));
            // hi = x − k·ln2hi, lo = k·ln2lo, r = hi − lo (with k = 0: hi = x, lo = 0, r = x).
            let hi = _mm256_sub_pd(x, _mm256_mul_pd(k, _mm256_set1_pd(LN2HI)));
            let lo = _mm256_mul_pd(k, _mm256_set1_pd(LN2LO));
            let r = _mm256_sub_pd(hi, lo);
            let rr = _mm256_mul_pd(r, r);
            let poly = _mm256_add_pd(_mm256_set1_pd(P4), _mm256_mul_pd(rr, _mm256_set1_pd(P5)));
            let poly = _mm256_add_pd(_mm256_set1_pd(P3), _mm256_mul_pd(rr, poly));
            let poly = _mm256_add_pd(_mm256_set1_pd(P2), _mm256_mul_pd(rr, poly));
            let poly = _mm256_add_pd(_mm256_set1_pd(P1), _mm256_mul_pd(rr, poly));
            let c = _mm256_sub_pd(r, _mm256_mul_pd(rr, poly));
            // y = 1 + ((r·c / (2 − c) − lo) + hi)
            let q = _mm256_div_pd(_mm256_mul_pd(r, c), _mm256_sub_pd(_mm256_set1_pd(2.0), c));
            let y = _mm256_add_pd(_mm256_set1_pd(1.0), _mm256_add_pd(_mm256_sub_pd(q, lo), hi));
            // scalbn(y, k) = y · 2^k for these k; 2^0 = 1 leaves y as libm does.
            let k64 = _mm256_cvtepi32_epi64(_mm256_cvttpd_epi32(k));
            let scale = _mm256_slli_epi64::<52>(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)));
            let e = _mm256_mul_pd(y, _mm256_castsi256_pd(scale));
            // At or below 2^-28 libm returns 1 + x.
            let near_one = _mm256_add_pd(_mm256_set1_pd(1.0), x);
            Some(_mm256_blendv_pd(near_one, e, _mm256_castsi256_pd(not_tiny)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::SimdPath;

    /// A deterministic stream of arguments over `[lo, hi)`.
    fn arguments(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
            })
            .collect()
    }

    /// Arguments at and around each of libm's branch points and the vector path's limit.
    fn edges() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            700.0,
            -700.0,
            709.0,
            -709.0,
            710.0,
            -746.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
        ];
        let words = [
            0x3fd6_2e42u64,
            0x3fd6_2e43,
            0x3ff0_a2b1,
            0x3ff0_a2b2,
            0x3e30_0000,
            0x3e30_0001,
        ];
        let lows = [0u64, 1, 0xffff_ffff].into_iter().chain(
            arguments(3000, 0.0, 4_294_967_295.0, 5)
                .into_iter()
                .map(|l| l as u64),
        );
        for low in lows {
            for word in words {
                let x = f64::from_bits(word << 32 | low);
                v.extend([x, -x, f64::from_bits(x.to_bits() - 1)]);
            }
        }
        v
    }

    /// Every element equals `libm::exp` of it, bit for bit, on the path in force and on the
    /// AVX2 form directly, at lengths that leave tails.
    #[test]
    fn the_slice_form_is_libm_bit_for_bit() {
        let mut inputs = edges();
        inputs.extend(arguments(400_000, -40.0, 0.0, 1));
        inputs.extend(arguments(200_000, -1.2, 1.2, 2));
        inputs.extend(arguments(200_000, -760.0, 760.0, 3));
        inputs.extend(arguments(50_000, -1e-7, 1e-7, 4));
        inputs.push(0.5);
        let want: Vec<u64> = inputs.iter().map(|&x| libm::exp(x).to_bits()).collect();
        let check = |got: &[f64], what: &str| {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), *w, "{what}: exp({:e})", inputs[i]);
            }
        };
        let mut v = inputs.clone();
        exp_f64_in_place(&mut v);
        check(&v, "active path");
        #[cfg(target_arch = "x86_64")]
        if SimdPath::Avx2.is_available() {
            for start in 0..3 {
                let mut v = inputs[start..].to_vec();
                // SAFETY: the CPU has AVX2.
                unsafe { avx2::exp_in_place(&mut v) };
                let want_from = &want[start..];
                for (i, (g, w)) in v.iter().zip(want_from).enumerate() {
                    assert_eq!(g.to_bits(), *w, "avx2: exp({:e})", inputs[start + i]);
                }
            }
        }
    }
}
