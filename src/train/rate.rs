//! The learning-rate schedule: the factor an Adam step's learning rate is multiplied by, as a
//! function of the step's number `t` (1 for the first Adam step of the stream; the count a
//! saved model keeps, so a resumed or primed run continues the schedule where it stood).
//!
//! `factor(t) = warm(t) · curve(t) · max(decay(t), floor)` with
//!
//! - `warm(t) = min(t, warmup) / warmup` (1 when `warmup` is 0): a linear ramp over the first
//!   `warmup` steps;
//! - `curve(t)`: piecewise linear through up to [`MAX_KNOTS`] points `(step, factor)`, flat
//!   before the first and after the last (1 without points): NNCP's breakpoint schedules;
//! - `decay(t) = (1 + decay·t)^(−power)`: with `power` 0.5 the `1/sqrt` decay of online
//!   LSTM compressors; 1 when `decay` or `power` is 0.
//!
//! Computed in f64 from integers with `+ − * / sqrt` (and the pure-Rust `libm::pow` for a power
//! other than 0.5), so every build computes the same bits (docs/determinism.md). Without a
//! schedule ([`RateSchedule::NONE`]) the factor is exactly 1 and the rate is the one given.

/// How the learning rate moves with the Adam step count (docs/recipes.md, "train").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSchedule {
    /// Steps over which the rate ramps up linearly from `lr/warmup` to `lr`; 0 for none.
    pub warmup: u32,
    /// `k` in `(1 + k·t)^(−power)`; 0 for no decay.
    pub decay: f32,
    /// The decay's exponent (0.5: `1/sqrt`).
    pub power: f32,
    /// The decay factor never goes below this.
    pub floor: f32,
    /// Piecewise-linear factor over the step count (none: 1 throughout).
    pub curve: Curve,
}

/// Most points a [`Curve`] takes.
pub const MAX_KNOTS: usize = 8;

/// A piecewise-linear function of the Adam step count through `len` points, their steps
/// strictly increasing (the recipe checks that): the first point's factor before it, the last
/// one's after it, straight lines between. No points: the factor 1 at every step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Curve {
    len: u8,
    steps: [u32; MAX_KNOTS],
    factors: [f32; MAX_KNOTS],
}

impl Curve {
    /// No points: 1 throughout.
    pub const FLAT: Curve = Curve {
        len: 0,
        steps: [0; MAX_KNOTS],
        factors: [0.0; MAX_KNOTS],
    };

    /// The curve through `points` (step, factor); `None` for more than [`MAX_KNOTS`].
    pub fn through(points: &[(u32, f32)]) -> Option<Curve> {
        if points.len() > MAX_KNOTS {
            return None;
        }
        let mut c = Curve::FLAT;
        for (i, &(step, factor)) in points.iter().enumerate() {
            c.steps[i] = step;
            c.factors[i] = factor;
        }
        c.len = points.len() as u8;
        Some(c)
    }

    /// The points, in order.
    pub fn points(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        let n = self.len as usize;
        self.steps[..n]
            .iter()
            .copied()
            .zip(self.factors[..n].iter().copied())
    }

    pub fn is_flat(&self) -> bool {
        self.len == 0
    }

    /// The factor at step `t`.
    pub fn at(&self, t: u64) -> f64 {
        let n = self.len as usize;
        if n == 0 {
            return 1.0;
        }
        let (steps, factors) = (&self.steps[..n], &self.factors[..n]);
        // The first point at or after t: before the first, after the last, or on a segment.
        match steps.iter().position(|&s| t <= s as u64) {
            Some(0) => factors[0] as f64,
            None => factors[n - 1] as f64,
            Some(i) => {
                let (s0, s1) = (steps[i - 1] as f64, steps[i] as f64);
                let (f0, f1) = (factors[i - 1] as f64, factors[i] as f64);
                f0 + (f1 - f0) * (t as f64 - s0) / (s1 - s0)
            }
        }
    }
}

impl RateSchedule {
    /// No schedule: the rate as given at every step.
    pub const NONE: RateSchedule = RateSchedule {
        warmup: 0,
        decay: 0.0,
        power: 0.5,
        floor: 0.0,
        curve: Curve::FLAT,
    };

    /// Whether the factor is 1 at every step.
    pub fn is_none(&self) -> bool {
        self.warmup == 0 && (self.decay == 0.0 || self.power == 0.0) && self.curve.is_flat()
    }

    /// The factor of step `t` (the first step is 1).
    pub fn factor(&self, t: u64) -> f64 {
        let t = t.max(1);
        let warm = match self.warmup {
            0 => 1.0,
            w => t.min(w as u64) as f64 / w as f64,
        };
        let decay = if self.decay == 0.0 || self.power == 0.0 {
            1.0
        } else {
            let base = 1.0 + self.decay as f64 * t as f64;
            let d = if self.power == 0.5 {
                1.0 / base.sqrt()
            } else {
                libm::pow(base, -(self.power as f64))
            };
            d.max(self.floor as f64)
        };
        match self.curve.is_flat() {
            true => warm * decay,
            false => warm * self.curve.at(t) * decay,
        }
    }

    /// The learning rate of step `t`: `lr` itself without a schedule.
    pub fn lr_at(&self, lr: f32, t: u64) -> f32 {
        if self.is_none() {
            return lr;
        }
        (lr as f64 * self.factor(t)) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn no_schedule_keeps_the_rate_bit_for_bit() {
        let s = RateSchedule::NONE;
        assert!(s.is_none());
        for t in [1, 2, 1000, u64::MAX] {
            assert_eq!(s.lr_at(0.0005, t).to_bits(), 0.0005f32.to_bits());
            assert_eq!(s.factor(t), 1.0);
        }
    }

    #[test]
    fn warmup_ramps_linearly_then_holds() {
        let s = RateSchedule {
            warmup: 4,
            ..RateSchedule::NONE
        };
        let f: Vec<f64> = (1..=6).map(|t| s.factor(t)).collect();
        assert_eq!(f, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
        // Step 0 (never taken) reads as step 1.
        assert_eq!(s.factor(0), 0.25);
        assert_eq!(s.lr_at(0.002, 2), 0.001);
    }

    #[test]
    fn inverse_sqrt_decay_with_a_floor() {
        // The paq8px LSTM's schedule: max(1/sqrt(1 + 0.0004·t), 0.3).
        let s = RateSchedule {
            decay: 0.0004,
            floor: 0.3,
            ..RateSchedule::NONE
        };
        let k = 0.0004f32 as f64;
        assert!(close(s.factor(1), 1.0 / (1.0 + k).sqrt()));
        assert!(close(s.factor(2500), 1.0 / (1.0 + 2500.0 * k).sqrt()));
        assert!((s.factor(2500) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-4);
        assert!((s.factor(7500) - 0.5).abs() < 1e-4);
        // 1/sqrt(1 + 0.0004 t) = 0.3 at t ≈ 25 278: the floor from there on.
        assert!(s.factor(25_000) > 0.3);
        assert_eq!(s.factor(26_000), 0.3f32 as f64);
        assert_eq!(s.factor(u64::MAX), 0.3f32 as f64);
    }

    #[test]
    fn power_decay_and_warmup_multiply() {
        let s = RateSchedule {
            warmup: 10,
            decay: 0.01,
            power: 1.0,
            floor: 0.0,
            curve: Curve::FLAT,
        };
        // (1 + 0.01 t)^-1 at t = 100 is 0.5; at t = 5 the ramp stands at a half.
        assert!((s.factor(100) - 0.5).abs() < 1e-7);
        assert!((s.factor(5) - 0.5 / 1.05).abs() < 1e-7);
        let s = RateSchedule { power: 0.0, ..s };
        assert_eq!(s.factor(1000), 1.0);
        assert!(!s.is_none(), "the warm-up still runs");
    }

    #[test]
    fn a_curve_is_flat_outside_its_points_and_straight_between() {
        let c = Curve::through(&[(100, 2.0), (1100, 0.5), (2100, 0.5), (3100, 1.0)]).unwrap();
        assert_eq!(c.points().count(), 4);
        assert_eq!(c.at(0), 2.0);
        assert_eq!(c.at(100), 2.0);
        assert_eq!(c.at(600), 1.25);
        assert_eq!(c.at(1100), 0.5);
        assert_eq!(c.at(1600), 0.5);
        assert_eq!(c.at(2600), 0.75);
        assert_eq!(c.at(3100), 1.0);
        assert_eq!(c.at(u64::MAX), 1.0);
        assert_eq!(Curve::FLAT.at(12345), 1.0);
        assert!(Curve::through(&[(1, 1.0); MAX_KNOTS + 1]).is_none());
    }

    #[test]
    fn a_curve_multiplies_the_other_factors() {
        let s = RateSchedule {
            warmup: 10,
            decay: 0.01,
            power: 1.0,
            floor: 0.0,
            curve: Curve::through(&[(0, 1.0), (200, 0.0)]).unwrap(),
        };
        assert!(!s.is_none());
        // Step 100: the curve at a half, the decay at a half, the warm-up done.
        assert!((s.factor(100) - 0.25).abs() < 1e-7);
        assert_eq!(s.factor(200), 0.0);
        let only = RateSchedule {
            curve: Curve::through(&[(10, 3.0)]).unwrap(),
            ..RateSchedule::NONE
        };
        assert!(!only.is_none());
        assert_eq!(only.lr_at(0.001, 5), (0.001f32 as f64 * 3.0) as f32);
    }
}
