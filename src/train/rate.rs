//! The learning-rate schedule: the factor an Adam step's learning rate is multiplied by, as a
//! function of the step's number `t` (1 for the first Adam step of the stream; the count a
//! saved model keeps, so a resumed or primed run continues the schedule where it stood).
//!
//! `factor(t) = warm(t) · max(decay(t), floor)` with
//!
//! - `warm(t) = min(t, warmup) / warmup` (1 when `warmup` is 0): a linear ramp over the first
//!   `warmup` steps;
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
}

impl RateSchedule {
    /// No schedule: the rate as given at every step.
    pub const NONE: RateSchedule = RateSchedule {
        warmup: 0,
        decay: 0.0,
        power: 0.5,
        floor: 0.0,
    };

    /// Whether the factor is 1 at every step.
    pub fn is_none(&self) -> bool {
        self.warmup == 0 && (self.decay == 0.0 || self.power == 0.0)
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
        warm * decay
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
        };
        // (1 + 0.01 t)^-1 at t = 100 is 0.5; at t = 5 the ramp stands at a half.
        assert!((s.factor(100) - 0.5).abs() < 1e-7);
        assert!((s.factor(5) - 0.5 / 1.05).abs() < 1e-7);
        let s = RateSchedule { power: 0.0, ..s };
        assert_eq!(s.factor(1000), 1.0);
        assert!(!s.is_none(), "the warm-up still runs");
    }
}
