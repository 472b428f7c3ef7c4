//! The learning rate of offline training: a linear warm-up over the first steps, then a decay
//! from the peak to a floor over the planned run (cosine, linear, or none), as a function of
//! how far the run has come.
//!
//! `lr(step, f) = peak · min(1, step / warmup) · shape(f)`, with `f` the fraction of the plan
//! done (steps taken over steps planned, or time spent over the time budget) and
//! `shape(f) = floor + (1 − floor) · d(f)`, `d` falling from 1 at `f = 0` to 0 at `f = 1`.

use anyhow::{Result, bail};

/// How the rate falls from its peak to the floor over the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decay {
    /// Half a cosine period: slow at both ends.
    Cosine,
    /// A straight line.
    Linear,
    /// The peak throughout (after warm-up).
    Constant,
}

impl Decay {
    pub fn name(self) -> &'static str {
        match self {
            Decay::Cosine => "cosine",
            Decay::Linear => "linear",
            Decay::Constant => "constant",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "cosine" => Ok(Decay::Cosine),
            "linear" => Ok(Decay::Linear),
            "constant" | "none" => Ok(Decay::Constant),
            other => bail!("unknown decay '{other}' (decays: cosine, linear, constant)"),
        }
    }
}

/// The learning-rate schedule of a training run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrSchedule {
    /// The rate at the end of warm-up.
    pub peak: f32,
    /// Steps of the linear ramp from `peak / warmup` to `peak`; 0 for none.
    pub warmup: u64,
    pub decay: Decay,
    /// The fraction of the peak the decay ends at.
    pub floor: f32,
}

impl LrSchedule {
    pub fn validate(&self) -> Result<()> {
        if !(self.peak.is_finite() && self.peak > 0.0 && self.peak <= 1.0) {
            bail!(
                "learning rate {} is out of range (above 0, at most 1)",
                self.peak
            );
        }
        if !(0.0..=1.0).contains(&self.floor) {
            bail!("floor {} is out of range (0 to 1)", self.floor);
        }
        Ok(())
    }

    /// The rate of step `step` (the first is 1) when a fraction `done` of the run is behind.
    pub fn lr(&self, step: u64, done: f64) -> f32 {
        let warm = match self.warmup {
            0 => 1.0,
            w => (step.min(w) as f64) / w as f64,
        };
        let f = done.clamp(0.0, 1.0);
        let fall = match self.decay {
            Decay::Cosine => 0.5 * (1.0 + libm::cos(std::f64::consts::PI * f)),
            Decay::Linear => 1.0 - f,
            Decay::Constant => 1.0,
        };
        let floor = self.floor as f64;
        (self.peak as f64 * warm * (floor + (1.0 - floor) * fall)) as f32
    }

    /// The text that names the schedule in checkpoints (a resumed run must follow the same).
    pub fn describe(&self) -> String {
        format!(
            "lr={:e},warmup={},decay={},floor={}",
            self.peak,
            self.warmup,
            self.decay.name(),
            self.floor
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_then_falls_to_the_floor() {
        let s = LrSchedule {
            peak: 0.01,
            warmup: 10,
            decay: Decay::Cosine,
            floor: 0.1,
        };
        assert!((s.lr(1, 0.0) - 0.001).abs() < 1e-9);
        assert!((s.lr(10, 0.0) - 0.01).abs() < 1e-9);
        assert!((s.lr(500, 0.5) - 0.0055).abs() < 1e-7);
        assert!((s.lr(1000, 1.0) - 0.001).abs() < 1e-9);
        let lin = LrSchedule {
            decay: Decay::Linear,
            ..s
        };
        assert!((lin.lr(100, 0.25) - 0.01 * (0.1 + 0.9 * 0.75)).abs() < 1e-8);
        let flat = LrSchedule {
            decay: Decay::Constant,
            warmup: 0,
            ..s
        };
        assert_eq!(flat.lr(1, 0.9), 0.01);
        assert!(Decay::parse("exp").is_err());
        assert!(LrSchedule { peak: 0.0, ..s }.validate().is_err());
        assert!(LrSchedule { floor: 2.0, ..s }.validate().is_err());
    }
}
