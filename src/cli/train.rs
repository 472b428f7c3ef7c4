//! `lmzip train`: the command line of offline training (src/train/offline). Checks the
//! arguments into a [`Plan`] before any file is read, then runs the training with a progress
//! bar, the learning curve (`--curve`) and checkpoints (`--checkpoint`).

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::args::TrainArgs;
use super::progress::say;
use super::{FAILURE_STATUS, USAGE_STATUS, signals};
use crate::levels;
use crate::modelfile::{ModelFile, write_atomically};
use crate::recipe::Base;
use crate::train::offline::{self, Budget, CurveRow, Decay, LrSchedule, Observer, Plan, Status};

// Decimal units (kB = 1000 bytes), as in the other bars.
const BAR_KNOWN_TOTAL: &str = "{prefix} {wide_bar} {decimal_bytes}/{decimal_total_bytes} \
                               {decimal_bytes_per_sec} {msg} ETA {eta}";
const BAR_UNKNOWN_TOTAL: &str =
    "{prefix} {spinner} {decimal_bytes} {decimal_bytes_per_sec} {msg} {elapsed}";

/// Defaults of the training options (docs/guide.md, "Training a network").
const STREAMS: usize = 8;
const BPTT: usize = 64;
const LR: f32 = 0.003;
const WARMUP: usize = 500;
const FLOOR: f32 = 0.1;
const VALID_BYTES: u64 = 256 << 10;
/// Intervals when only a time budget is given (no bytes to take fractions of).
const TIME_ONLY_VALID_EVERY: u64 = 16 << 20;
const TIME_ONLY_REPORT_EVERY: u64 = 1 << 20;

/// What the arguments ask for, checked.
struct Job {
    plan: Plan,
    data: PathBuf,
    valid: Option<PathBuf>,
    valid_bytes: usize,
    out: PathBuf,
    curve: Option<PathBuf>,
    checkpoint: Option<PathBuf>,
    resume: Option<PathBuf>,
}

/// Runs `lmzip train`; returns the exit status.
pub fn run(args: &TrainArgs, quiet: bool) -> u8 {
    let (job, data, valid) = match prepare(args) {
        Ok(prepared) => prepared,
        Err(e) => {
            say(format_args!("lmzip: {e:#}"));
            return USAGE_STATUS;
        }
    };
    match train(&job, &data, &valid, quiet) {
        Ok(()) => 0,
        Err(e) if e.downcast_ref::<signals::Interrupted>().is_some() => {
            if let Some(path) = &job.checkpoint {
                say(format_args!(
                    "lmzip: stopped; checkpoint in {}",
                    path.display()
                ));
            }
            signals::interrupted_status()
        }
        Err(e) => {
            say(format_args!("lmzip: {e:#}"));
            FAILURE_STATUS
        }
    }
}

/// The plan of the arguments, and the data and validation bytes, read.
fn prepare(a: &TrainArgs) -> Result<(Job, Vec<u8>, Vec<u8>)> {
    let config_and_seed = network(a)?;
    for (path, name) in [(Some(&a.out), "--out"), (a.files.curve.as_ref(), "--curve")] {
        if let Some(path) = path
            && path.exists()
            && !a.force
            && !(name == "--curve" && a.files.resume.is_some())
        {
            bail!("{name} {} exists (use -f to overwrite)", path.display());
        }
    }
    if let Some(path) = &a.files.resume
        && !path.exists()
    {
        bail!("--resume {}: no such file", path.display());
    }
    let data = read(&a.data, "--data")?;
    if data.is_empty() {
        bail!(
            "--data {} is empty: there is nothing to train on",
            a.data.display()
        );
    }
    let mut valid = match &a.valid {
        Some(path) => read(path, "--valid")?,
        None => Vec::new(),
    };
    if a.valid.is_some() && valid.is_empty() {
        bail!(
            "--valid {} is empty",
            a.valid
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        );
    }
    let valid_bytes = a.files.valid_bytes.unwrap_or(VALID_BYTES) as usize;
    valid.truncate(valid_bytes);
    let s = &a.schedule;
    let bytes = match (s.bytes, s.epochs, s.time) {
        (Some(b), _, _) => Some(b),
        (None, Some(e), _) => {
            if !(e.is_finite() && e > 0.0) {
                bail!("--epochs {e} is out of range (above 0)");
            }
            Some(((data.len() as f64 * e).ceil() as u64).max(1))
        }
        (None, None, Some(_)) => None,
        (None, None, None) => Some(data.len() as u64),
    };
    let streams = s.streams.unwrap_or(STREAMS);
    let bptt = s.bptt.unwrap_or(BPTT);
    let step_bytes = (streams.max(1) * bptt.max(1)) as u64;
    let planned_steps = bytes.map(|b| b.div_ceil(step_bytes).max(1));
    let warmup = match (s.warmup, planned_steps) {
        (Some(w), _) => w as u64,
        (None, Some(p)) => (WARMUP as u64).min(p / 10),
        (None, None) => WARMUP as u64,
    };
    let fraction = |parts: u64, time_only: u64| match bytes {
        Some(b) => (b / parts).max(step_bytes),
        None => time_only,
    };
    let threads = match s.threads.unwrap_or(0) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let (config, seed) = config_and_seed;
    let plan = Plan {
        config,
        seed,
        streams,
        bptt,
        threads,
        schedule: LrSchedule {
            peak: s.lr.unwrap_or(LR),
            warmup,
            decay: Decay::parse(s.decay.as_deref().unwrap_or("cosine"))?,
            floor: s.floor.unwrap_or(FLOOR),
        },
        clip: s.clip.unwrap_or(0.0),
        budget: Budget {
            bytes,
            seconds: s.time,
        },
        valid_every: a
            .files
            .valid_every
            .unwrap_or_else(|| fraction(10, TIME_ONLY_VALID_EVERY)),
        report_every: a
            .files
            .report_every
            .unwrap_or_else(|| fraction(200, TIME_ONLY_REPORT_EVERY)),
        checkpoint_every: match &a.files.checkpoint {
            Some(_) => a
                .files
                .checkpoint_every
                .unwrap_or_else(|| fraction(20, 8 * TIME_ONLY_VALID_EVERY)),
            None => 0,
        },
    };
    plan.validate()?;
    let job = Job {
        plan,
        data: a.data.clone(),
        valid: a.valid.clone(),
        valid_bytes,
        out: a.out.clone(),
        curve: a.files.curve.clone(),
        checkpoint: a.files.checkpoint.clone(),
        resume: a.files.resume.clone(),
    };
    Ok((job, data, valid))
}

/// The network's sizes and seed: the level's recipe, edited by `--recipe` and `--seed`.
fn network(a: &TrainArgs) -> Result<(crate::recipe::ModelConfig, u64)> {
    let n = &a.network;
    let names = crate::api::Names {
        model: "--model",
        recipe: "--recipe",
    };
    let level = n.level.unwrap_or(levels::DEFAULT_LEVEL);
    let recipe = crate::api::level_recipe(
        levels::recipe,
        n.model,
        level,
        n.recipe.as_deref(),
        None,
        names,
    )?;
    let Base::Fresh { config, seed } = recipe.base else {
        bail!("lmzip train starts from seeded weights; --recipe may not name a model file");
    };
    config.validate().context("invalid network")?;
    Ok((config, n.seed.unwrap_or(seed)))
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {flag} {}", path.display()))
}

fn train(job: &Job, data: &[u8], valid: &[u8], quiet: bool) -> Result<()> {
    let resume = match &job.resume {
        Some(path) => {
            Some(ModelFile::open(path).with_context(|| format!("--resume {}", path.display()))?)
        }
        None => None,
    };
    let _ = signals::install();
    let mut observer = Watch {
        bar: bar(quiet, job.plan.budget.bytes),
        curve: match &job.curve {
            Some(path) => Some(Curve::open(path, job.resume.is_some())?),
            None => None,
        },
        checkpoint: job.checkpoint.clone(),
    };
    let trained = offline::train(&job.plan, data, valid, resume.as_ref(), &mut observer)
        .with_context(|| match &job.resume {
            Some(path) => format!("resuming from {}", path.display()),
            None => format!("training on {}", job.data.display()),
        })?;
    if let Some(bar) = observer.bar.take() {
        bar.finish_and_clear();
    }
    write_atomically(&job.out, &trained.weights)?;
    if !quiet {
        let valid = match &job.valid {
            Some(path) => format!(
                ", validation {:.4} bpb on {} bytes of {}",
                trained.valid_bpb,
                valid.len().min(job.valid_bytes),
                path.display()
            ),
            None => String::new(),
        };
        say(format_args!(
            "lmzip train: {} bytes in {} steps, {:.1} s, {:.1} KB/s{valid} -> {}",
            trained.bytes,
            trained.steps,
            trained.seconds,
            trained.bytes as f64 / 1000.0 / trained.seconds.max(1e-9),
            job.out.display()
        ));
    }
    Ok(())
}

/// A progress bar on a terminal's stderr.
fn bar(quiet: bool, total: Option<u64>) -> Option<ProgressBar> {
    let show = !quiet && super::progress::bars_allowed() && std::io::stderr().is_terminal();
    show.then(|| {
        let (bar, template) = match total {
            Some(n) => (ProgressBar::new(n), BAR_KNOWN_TOTAL),
            None => (ProgressBar::new_spinner(), BAR_UNKNOWN_TOTAL),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_prefix("train");
        bar
    })
}

/// The learning curve's file.
struct Curve {
    file: File,
}

impl Curve {
    const HEADER: &str = "bytes\ttrain_bpb\tvalid_bpb\tlr\tseconds\n";

    /// Creates the file with its header, or when resuming appends to it.
    fn open(path: &Path, resuming: bool) -> Result<Self> {
        let append = resuming && path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(path)
            .with_context(|| format!("cannot write --curve {}", path.display()))?;
        if !append {
            file.write_all(Self::HEADER.as_bytes())?;
        }
        Ok(Curve { file })
    }

    fn row(&mut self, r: &CurveRow) -> Result<()> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.5}"));
        writeln!(
            self.file,
            "{}\t{}\t{}\t{:.3e}\t{:.1}",
            r.bytes,
            opt(r.train_bpb),
            opt(r.valid_bpb),
            r.lr,
            r.seconds
        )?;
        self.file.flush()?;
        Ok(())
    }
}

/// What the command line does with a run's reports.
struct Watch {
    bar: Option<ProgressBar>,
    curve: Option<Curve>,
    checkpoint: Option<PathBuf>,
}

impl Observer for Watch {
    fn status(&mut self, s: &Status) -> Result<()> {
        signals::check()?;
        if let Some(bar) = &self.bar {
            let bpb = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
            bar.set_message(format!(
                "train {} valid {} bpb, lr {:.2e}",
                bpb(s.train_bpb),
                bpb(s.valid_bpb),
                s.lr
            ));
            bar.set_position(s.bytes);
        }
        Ok(())
    }

    fn curve(&mut self, row: &CurveRow) -> Result<()> {
        match &mut self.curve {
            Some(c) => c.row(row),
            None => Ok(()),
        }
    }

    fn keeps_checkpoints(&self) -> bool {
        self.checkpoint.is_some()
    }

    fn checkpoint(&mut self, bytes: &[u8]) -> Result<()> {
        match &self.checkpoint {
            Some(path) => write_atomically(path, bytes)
                .with_context(|| format!("cannot write --checkpoint {}", path.display())),
            None => Ok(()),
        }
    }
}
