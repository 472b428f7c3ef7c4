//! The logistic domain of the mixing stage, in integers: probabilities are 12-bit (`0..4096`,
//! the chance that the next bit is 1), and their *stretch* `ln(p / (1 − p))` is kept in units of
//! 1/256 in `-2047..=2047`. Both tables are built by integer arithmetic from 33 fixed points, so
//! every build computes the same values (docs/determinism.md).

/// 12-bit probability scale: `p = 4096` would be certainty.
pub const P_ONE: i32 = 4096;
/// Largest magnitude of a stretched probability.
pub const ST_MAX: i32 = 2047;

/// `4096 / (1 + e^(−d/256))` at `d = −2048, −1920, …, 2048`.
const SQUASH_POINTS: [i32; 33] = [
    1, 2, 3, 6, 10, 16, 27, 45, 73, 120, 194, 310, 488, 747, 1101, 1546, 2048, 2549, 2994, 3348,
    3607, 3785, 3901, 3975, 4022, 4050, 4068, 4079, 4085, 4089, 4092, 4093, 4094,
];

/// The logistic function: stretch units to a 12-bit probability in `1..=4095`, interpolated
/// linearly between the fixed points.
pub const fn squash(d: i32) -> i32 {
    if d > ST_MAX {
        return 4095;
    }
    if d < -ST_MAX {
        return 1;
    }
    let w = d & 127;
    let i = ((d >> 7) + 16) as usize;
    let p = (SQUASH_POINTS[i] * (128 - w) + SQUASH_POINTS[i + 1] * w + 64) >> 7;
    // `clamp(1, 4095)`, which a const fn cannot call.
    if p < 1 {
        1
    } else if p > 4095 {
        4095
    } else {
        p
    }
}

/// The inverse of [`squash`]: the smallest `d` whose squash reaches `p` (`p` is clamped to
/// `0..4096`).
pub fn stretch(p: i32) -> i32 {
    STRETCH[p.clamp(0, 4095) as usize] as i32
}

/// [`stretch`] of every probability, built when the program is compiled: the stage calls it
/// some 60 times per bit, and a table built lazily at run time cost a check of its
/// initialisation on each call.
static STRETCH: [i16; 4096] = stretch_table();

const fn stretch_table() -> [i16; 4096] {
    let mut t = [0i16; 4096];
    let mut next = 0usize;
    let mut d = -ST_MAX;
    while d <= ST_MAX {
        // Every probability up to squash(d) not yet given a stretch takes d.
        let v = squash(d) as usize;
        while next <= v {
            t[next] = d as i16;
            next += 1;
        }
        d += 1;
    }
    while next < 4096 {
        t[next] = ST_MAX as i16;
        next += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretch_inverts_squash_and_both_are_monotone() {
        let mut last = i32::MIN;
        for p in 0..4096 {
            let s = stretch(p);
            assert!(s >= last, "stretch is monotone at {p}");
            last = s;
        }
        for d in -ST_MAX..=ST_MAX {
            let p = squash(d);
            assert!((1..=4095).contains(&p));
            // The round trip lands on a stretch whose squash is the same probability.
            assert_eq!(squash(stretch(p)), p, "d = {d}");
        }
        assert_eq!(squash(0), 2048);
        assert_eq!(stretch(2048), 0);
    }

    #[test]
    fn the_stretch_table_is_the_one_built_at_run_time_before() {
        // The table as it was built lazily, by iterators.
        let mut t = [0i16; 4096];
        let mut next = 0usize;
        for d in -ST_MAX..=ST_MAX {
            let v = squash(d) as usize;
            for slot in t.iter_mut().take(v + 1).skip(next) {
                *slot = d as i16;
            }
            next = next.max(v + 1);
        }
        for slot in t.iter_mut().skip(next) {
            *slot = ST_MAX as i16;
        }
        assert_eq!(t, STRETCH);
    }
}
