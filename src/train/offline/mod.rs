//! Offline training (`lmzip train`): a network trained on a corpus before any compression, so
//! that its weights can start the online network (`--weights`, and the built-in priors of
//! src/prior).
//!
//! The data is read by B streams at B evenly spaced offsets; each step takes the next T bytes
//! of every stream, runs the network forward over them and the segment backward
//! ([`batch`]), sums the streams' gradients in stream order and takes one Adam step at the
//! rate of the [`schedule`]. A stream keeps its recurrent state from one step to the next
//! (truncated BPTT with the state carried), and wraps to the start of the data at its end.
//! Every so often the network alone is measured, forward only, on held-back bytes.
//!
//! A run is a function of its plan and its data: the same arguments on the same build give the
//! same weights whatever the number of threads (each stream has its own gradient buffer; the
//! sum runs in stream order), and a run resumed from a checkpoint ([`checkpoint`]) gives the
//! weights of the run it continues. Only a time budget makes a run depend on the clock.

mod batch;
pub mod checkpoint;
pub mod schedule;

use std::time::Instant;

use anyhow::{Result, bail};
use sha2::{Digest, Sha256};

use self::batch::{GROUPS, Group, Stream, Worker, run_segments, sum_into_first};
pub use self::schedule::{Decay, LrSchedule};
use crate::model::mamba1::Mamba1;
use crate::model::rwkv7::Rwkv7;
use crate::model::{Build, ModelConfig, Network};
use crate::modelfile::ModelFile;
use crate::params::{ParamSet, Scope};
use crate::recipe::hex;
use crate::train::optim::{AdamSettings, Hyper, LrMul, Optimizer, OptimizerKind};
use crate::train::rate::RateSchedule;

/// Most streams a run takes (each holds a gradient buffer of the whole network).
pub const MAX_STREAMS: usize = 256;
/// Longest segment (each step keeps one trace per byte of it, per thread).
pub const MAX_BPTT: usize = 4096;

/// Adam's constants for offline training: the usual β1 and a shorter memory of the squared
/// gradients than the online rule's, as batches of hundreds of bytes make them less noisy.
pub const ADAM: AdamSettings = AdamSettings {
    beta1: 0.9,
    beta2: 0.99,
    eps: 1e-8,
    beta2_warmup: false,
};

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Bytes to train on, over all streams (rounded up to whole steps). The rate's decay runs
    /// over them.
    pub bytes: Option<u64>,
    /// Seconds of training (validation included); without `bytes`, the rate's decay runs over
    /// them (and the run depends on the clock).
    pub seconds: Option<f64>,
}

/// Everything that decides a run, and how it reports.
#[derive(Clone, Debug)]
pub struct Plan {
    pub config: ModelConfig,
    /// Seed of the initial weights.
    pub seed: u64,
    /// B: streams read in parallel.
    pub streams: usize,
    /// T: bytes per stream and step.
    pub bptt: usize,
    /// Threads the streams are split over (the result does not depend on it; at most
    /// [`GROUPS`] are used).
    pub threads: usize,
    pub schedule: LrSchedule,
    /// Element-wise gradient clip; 0 for none.
    pub clip: f32,
    pub budget: Budget,
    /// Bytes between validations (0: only at the start and the end).
    pub valid_every: u64,
    /// Bytes between rows of the learning curve.
    pub report_every: u64,
    /// Bytes between checkpoints (0: none but at the end and on a stop).
    pub checkpoint_every: u64,
}

impl Plan {
    /// Bytes one step trains on.
    pub fn step_bytes(&self) -> u64 {
        (self.streams * self.bptt) as u64
    }

    /// Steps the byte budget plans, if it has one.
    pub fn planned_steps(&self) -> Option<u64> {
        self.budget
            .bytes
            .map(|b| b.div_ceil(self.step_bytes()).max(1))
    }

    pub fn validate(&self) -> Result<()> {
        self.config.validate()?;
        if self.streams == 0 || self.streams > MAX_STREAMS {
            bail!(
                "--streams {} is out of range (1 to {MAX_STREAMS})",
                self.streams
            );
        }
        if self.bptt == 0 || self.bptt > MAX_BPTT {
            bail!("--bptt {} is out of range (1 to {MAX_BPTT})", self.bptt);
        }
        if self.threads == 0 {
            bail!("at least one thread is needed");
        }
        self.schedule.validate()?;
        if !(self.clip.is_finite() && self.clip >= 0.0) {
            bail!(
                "--clip {} is out of range (0 for none, or above 0)",
                self.clip
            );
        }
        match self.budget {
            Budget { bytes: Some(0), .. } => bail!("a budget of 0 bytes trains nothing"),
            Budget {
                seconds: Some(s), ..
            } if !(s.is_finite() && s > 0.0) => {
                bail!("a time budget must be above 0 seconds")
            }
            Budget {
                bytes: None,
                seconds: None,
            } => bail!("no budget: give bytes or a time"),
            _ => Ok(()),
        }
    }

    /// The text that identifies what decides the weights (not threads, nor reporting), stored
    /// in checkpoints: a resumed run must have the same.
    fn identity(&self, data: &DataId) -> String {
        format!(
            "{:?} seed={} streams={} bptt={} {} clip={} adam={:?} bytes={:?} seconds={:?} data={}",
            self.config,
            self.seed,
            self.streams,
            self.bptt,
            self.schedule.describe(),
            self.clip,
            ADAM,
            self.budget.bytes,
            self.budget.seconds,
            data.0,
        )
    }
}

/// The training data's length and SHA-256, as checkpoints name it.
struct DataId(String);

impl DataId {
    fn of(data: &[u8]) -> Self {
        DataId(format!("{}:{}", data.len(), hex(&Sha256::digest(data))))
    }
}

/// Where a run stands, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Status {
    /// Bytes trained on, over all streams.
    pub bytes: u64,
    /// Bytes the budget plans, if it plans bytes.
    pub planned: Option<u64>,
    /// Bits per byte of the network on the training bytes of the last curve interval (before
    /// each step's update), and of the last validation.
    pub train_bpb: Option<f64>,
    pub valid_bpb: Option<f64>,
    pub lr: f32,
    /// Seconds of training, over all resumed runs.
    pub seconds: f64,
}

/// One row of the learning curve.
#[derive(Clone, Copy, Debug)]
pub struct CurveRow {
    pub bytes: u64,
    /// Over the bytes since the previous row (none for the first row of a run).
    pub train_bpb: Option<f64>,
    /// When measured at this point.
    pub valid_bpb: Option<f64>,
    pub lr: f32,
    pub seconds: f64,
}

/// What a run tells its caller as it goes.
pub trait Observer {
    /// After every step; an error stops the run (a checkpoint is written first if the caller
    /// keeps them).
    fn status(&mut self, status: &Status) -> Result<()>;
    /// A row of the learning curve.
    fn curve(&mut self, row: &CurveRow) -> Result<()>;
    /// Whether the caller keeps checkpoints (they are made only then).
    fn keeps_checkpoints(&self) -> bool;
    /// A checkpoint's bytes (a model file that resumes the run exactly), when due.
    fn checkpoint(&mut self, bytes: &[u8]) -> Result<()>;
}

/// The result of a run.
pub struct Trained {
    /// The output model file: the weights only, in lmzip's native layout (F32).
    pub weights: Vec<u8>,
    pub bytes: u64,
    pub steps: u64,
    pub valid_bpb: f64,
    pub seconds: f64,
}

/// Trains the network of `plan` on `data`, validating on `valid` (which may be empty: no
/// validation), from seeded weights or from the checkpoint `resume`.
pub fn train(
    plan: &Plan,
    data: &[u8],
    valid: &[u8],
    resume: Option<&ModelFile>,
    observer: &mut dyn Observer,
) -> Result<Trained> {
    plan.validate()?;
    if data.is_empty() {
        bail!("the training data is empty");
    }
    match &plan.config {
        ModelConfig::Mamba1(cfg) => {
            let (mut net, mut params) = Mamba1::new_random(cfg.clone(), plan.seed)?;
            // `cfg:prior=N` (a level's, or the user's): train on from a built-in prior.
            crate::prior::start_network_from(&plan.config, &mut params)?;
            net.refresh(&params);
            Trainer::new(plan, cfg, net, params, data)?.run(valid, resume, observer)
        }
        ModelConfig::Rwkv7(cfg) => {
            let (net, params) = Rwkv7::new_random(cfg.clone(), plan.seed)?;
            Trainer::new(plan, cfg, net, params, data)?.run(valid, resume, observer)
        }
    }
}

/// A run in progress.
struct Trainer<'d, N: Network> {
    plan: Plan,
    data: &'d [u8],
    data_id: DataId,
    params: ParamSet,
    optimizer: Optimizer,
    /// One per thread; the first also validates.
    workers: Vec<Worker<N>>,
    /// The streams in their gradient groups, in stream order.
    groups: Vec<Group<N>>,
    /// Steps taken (each one optimizer step).
    steps: u64,
    /// Seconds spent by the runs this one resumes.
    seconds_before: f64,
    started: Instant,
    /// Bits and bytes since the last curve row.
    interval_bits: f64,
    interval_bytes: u64,
    last_train: Option<f64>,
    last_valid: Option<f64>,
    /// The bytes trained on when the network was last validated.
    valid_at: Option<u64>,
}

impl<N: Network> Trainer<'_, N> {
    /// Bytes trained on, over all streams.
    fn bytes(&self) -> u64 {
        self.steps * self.plan.step_bytes()
    }

    /// The streams, in order.
    fn streams(&self) -> impl Iterator<Item = &Stream<N>> {
        self.groups.iter().flat_map(|g| &g.streams)
    }

    /// Seconds of training, over this run and those it resumes.
    fn seconds(&self) -> f64 {
        self.seconds_before + self.started.elapsed().as_secs_f64()
    }
}

impl<'d, N: Network + Build + Send> Trainer<'d, N>
where
    N::State: Send,
    N::Trace: Send,
    N::Carry: Send,
    N::Config: Clone,
{
    fn new(plan: &Plan, cfg: &N::Config, net: N, params: ParamSet, data: &'d [u8]) -> Result<Self> {
        let groups = plan.streams.min(GROUPS);
        let threads = plan.threads.min(groups);
        let mut workers = vec![Worker::new(net, plan.bptt)];
        for _ in 1..threads {
            let (mut net, _) = N::new(cfg.clone())?;
            net.refresh(&params);
            workers.push(Worker::new(net, plan.bptt));
        }
        // Evenly spaced starts: the streams read different parts of the data.
        let mut streams = (0..plan.streams).map(|b| {
            let start = (data.len() as u128 * b as u128 / plan.streams as u128) as usize;
            Stream::new(&workers[0].net, start)
        });
        let per = plan.streams.div_ceil(groups);
        let groups = (0..groups)
            .map(|_| {
                let members = streams.by_ref().take(per).collect();
                Group::new(&workers[0].net, &params, members)
            })
            .collect();
        Ok(Trainer {
            plan: plan.clone(),
            data,
            data_id: DataId::of(data),
            params,
            optimizer: Optimizer::new(),
            workers,
            groups,
            steps: 0,
            seconds_before: 0.0,
            started: Instant::now(),
            interval_bits: 0.0,
            interval_bytes: 0,
            last_train: None,
            last_valid: None,
            valid_at: None,
        })
    }

    /// The fraction of the plan behind: steps, or else time.
    fn done(&self) -> f64 {
        match (self.plan.planned_steps(), self.plan.budget.seconds) {
            (Some(planned), _) => self.steps as f64 / planned as f64,
            (None, Some(s)) => self.seconds() / s,
            (None, None) => 1.0,
        }
    }

    fn finished(&self) -> bool {
        let by_steps = self.plan.planned_steps().is_some_and(|p| self.steps >= p);
        let by_time = self
            .plan
            .budget
            .seconds
            .is_some_and(|s| self.seconds() >= s);
        by_steps || by_time
    }

    fn lr(&self) -> f32 {
        self.plan.schedule.lr(self.steps.max(1), self.done())
    }

    /// The learning rate of the next step.
    fn next_lr(&self) -> f32 {
        self.plan.schedule.lr(self.steps + 1, self.done())
    }

    /// One step: the segments of every stream, their gradients summed, one Adam step.
    fn step(&mut self) {
        let scale = 1.0 / self.plan.step_bytes() as f32;
        let lr = self.next_lr();
        let (workers, groups) = (&mut self.workers, &mut self.groups);
        run_segments(workers, groups, &self.params, self.data, scale);
        self.interval_bits += self.streams().map(|s| s.bits).sum::<f64>();
        self.interval_bytes += self.plan.step_bytes();
        sum_into_first(&self.params, &mut self.groups);
        let hyper = Hyper {
            kind: OptimizerKind::Adam,
            lr,
            clip: self.plan.clip,
            adam: ADAM,
            rate: RateSchedule::NONE,
            lrmul: LrMul::ONE,
        };
        let first = &mut self.groups[0];
        self.optimizer.step(
            &mut self.params,
            &mut first.grads,
            &hyper,
            Scope::ALL,
            &first.touched,
        );
        first.touched.fill(false);
        for w in &mut self.workers {
            w.net.refresh(&self.params);
        }
        self.steps += 1;
    }

    fn validate(&mut self, valid: &[u8]) -> Option<f64> {
        if valid.is_empty() || self.valid_at == Some(self.bytes()) {
            return None;
        }
        self.valid_at = Some(self.bytes());
        let bpb = self.workers[0].evaluate(&self.params, valid);
        self.last_valid = Some(bpb);
        Some(bpb)
    }

    /// A curve row for the interval since the last one.
    fn row(&mut self, valid_bpb: Option<f64>) -> CurveRow {
        let train_bpb =
            (self.interval_bytes > 0).then(|| self.interval_bits / self.interval_bytes as f64);
        if train_bpb.is_some() {
            self.last_train = train_bpb;
        }
        self.interval_bits = 0.0;
        self.interval_bytes = 0;
        CurveRow {
            bytes: self.bytes(),
            train_bpb,
            valid_bpb,
            lr: self.lr(),
            seconds: self.seconds(),
        }
    }

    fn status(&self) -> Status {
        Status {
            bytes: self.bytes(),
            planned: self
                .plan
                .planned_steps()
                .map(|s| s * self.plan.step_bytes()),
            train_bpb: self.last_train,
            valid_bpb: self.last_valid,
            lr: self.lr(),
            seconds: self.seconds(),
        }
    }

    fn save_checkpoint(&self, observer: &mut dyn Observer) -> Result<()> {
        if observer.keeps_checkpoints() {
            observer.checkpoint(&checkpoint::save(self)?)?;
        }
        Ok(())
    }

    /// Whether `every` bytes were crossed by the last step.
    fn crossed(&self, every: u64) -> bool {
        let (now, step) = (self.bytes(), self.plan.step_bytes());
        every > 0 && now / every != (now - step) / every
    }

    fn run(
        mut self,
        valid: &[u8],
        resume: Option<&ModelFile>,
        observer: &mut dyn Observer,
    ) -> Result<Trained> {
        match resume {
            Some(file) => {
                checkpoint::restore(&mut self, file)?;
                self.started = Instant::now();
            }
            None => {
                let v = self.validate(valid);
                observer.curve(&self.row(v))?;
            }
        }
        while !self.finished() {
            self.step();
            let validate = self.crossed(self.plan.valid_every);
            let v = if validate { self.validate(valid) } else { None };
            if validate || self.crossed(self.plan.report_every) {
                observer.curve(&self.row(v))?;
            }
            if self.crossed(self.plan.checkpoint_every) {
                self.save_checkpoint(observer)?;
            }
            if let Err(e) = observer.status(&self.status()) {
                self.save_checkpoint(observer)?;
                return Err(e);
            }
        }
        let v = self.validate(valid);
        if v.is_some() || self.interval_bytes > 0 {
            observer.curve(&self.row(v))?;
        }
        self.save_checkpoint(observer)?;
        Ok(Trained {
            weights: checkpoint::weights_only(&self)?,
            bytes: self.bytes(),
            steps: self.steps,
            valid_bpb: self.last_valid.unwrap_or(f64::NAN),
            seconds: self.seconds(),
        })
    }
}
