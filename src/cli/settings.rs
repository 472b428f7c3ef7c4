//! Typed settings: the raw command line checked as a whole — the recipe validated, the flags
//! checked against each other — before any file is opened. Everything that fails here is a
//! usage error (exit status 2).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::args::{Cli, Command, CompressArgs, InputArgs, ModelArgs, OutputArgs};
use crate::levels;
use crate::modelfile::Weights;
use crate::params::Scope;
use crate::recipe::{self, Action, Base, ModelConfig, ModelKind, OptimizerKind, Recipe};

/// How much to say on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    /// `-v`: a summary line per file.
    Verbose,
    /// `-vv`: also a line per member, and the recipe.
    Detailed,
}

/// One thing to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    fn from_arg(path: PathBuf) -> Self {
        if path.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::File(path)
        }
    }

    /// How messages name this input.
    pub fn label(&self) -> String {
        match self {
            Input::Stdin => "stdin".to_string(),
            Input::File(path) => path.display().to_string(),
        }
    }
}

/// Where the result of one input goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputChoice {
    /// Beside the input, under the derived name (`FILE.lmz` / `FILE`); standard output for
    /// standard input.
    Derived,
    Stdout,
    /// The one file given with `-o`.
    File(PathBuf),
}

/// Output settings of compress and decompress.
#[derive(Clone, Debug)]
pub struct OutputSettings {
    pub choice: OutputChoice,
    pub force: bool,
    pub remove_source: bool,
}

/// Independent blocks (`--block-size`), coded by `threads` threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPlan {
    pub size: u64,
    pub threads: usize,
}

/// What to do with every input.
#[derive(Clone, Debug)]
pub enum Job {
    Compress {
        plan: Box<RecipePlan>,
        verify: bool,
        output: OutputSettings,
        /// Where to save the model the run ends with.
        save_weights: Option<PathBuf>,
        /// The announced length of the input.
        size: Option<u64>,
        /// Cut the input into independent members.
        blocks: Option<BlockPlan>,
        /// Where to write the learning curve.
        stats: Option<PathBuf>,
    },
    Decompress {
        output: OutputSettings,
        save_weights: Option<PathBuf>,
    },
    Test,
    Info,
    List,
}

/// A whole run, validated.
#[derive(Clone, Debug)]
pub struct Settings {
    pub job: Job,
    pub inputs: Vec<Input>,
    pub verbosity: Verbosity,
    /// The model file the run starts from (`--weights`, or `file:PATH` in the recipe).
    pub weights: Option<PathBuf>,
    /// Never show a progress bar.
    pub no_progress: bool,
    /// Directories given as inputs stand for the files in them.
    pub recursive: bool,
    /// The suffix of compressed files (`.lmz`).
    pub suffix: String,
    /// Threads the network's kernels split over when a stream is coded (1 with
    /// `--block-size`, whose blocks take the threads instead).
    pub threads: usize,
    /// Warnings about the command line that do not stop the run (printed unless `-q`).
    pub warnings: Vec<String>,
    /// `--memory`: most memory a stream's decoding may need.
    pub memory_limit: Option<u64>,
}

/// The suffix of compressed files unless `-S` names another.
pub const DEFAULT_SUFFIX: &str = ".lmz";

/// How the recipe of a compression is made: the level's recipe, edited by `--recipe`, then by
/// the knobs. Building it may need the model file (its sizes and model kind), so it waits for
/// the file to be loaded.
#[derive(Clone, Debug)]
pub struct RecipePlan {
    kind: Option<ModelKind>,
    level: u8,
    text: Option<String>,
    knobs: Knobs,
}

/// The recipe knobs of the command line.
#[derive(Clone, Debug, Default)]
struct Knobs {
    hidden: Option<usize>,
    layers: Option<usize>,
    seed: Option<u64>,
    prior: Option<String>,
    x86: Option<String>,
    optimizer: Option<String>,
    lr: Option<f32>,
    scope: Option<String>,
    bptt: Option<usize>,
    stride: Option<usize>,
    clip: Option<f32>,
}

impl RecipePlan {
    fn from_args(m: &ModelArgs, level: Option<u8>) -> Self {
        RecipePlan {
            kind: m.model,
            level: level.unwrap_or(levels::DEFAULT_LEVEL),
            text: m.recipe.clone(),
            knobs: Knobs {
                hidden: m.hidden,
                layers: m.layers,
                seed: m.seed,
                prior: m.prior.clone(),
                x86: m.x86.clone(),
                optimizer: m.optimizer.clone(),
                lr: m.lr,
                scope: m.scope.clone(),
                bptt: m.bptt,
                stride: m.stride,
                clip: m.clip,
            },
        }
    }

    /// Whether the stage may be sized for each input (src/fit.rs): unless `--recipe` gives
    /// `table`, `match`, `fit` or `cap` itself.
    pub fn fits(&self) -> bool {
        !self.text.as_deref().is_some_and(recipe::names_stage_sizes)
    }

    /// Whether the level's prior may be left out for an input it does not suit: unless
    /// `--prior` or the recipe text names one.
    pub fn chooses_prior(&self) -> bool {
        self.knobs.prior.is_none() && !self.text.as_deref().is_some_and(|t| t.contains("prior="))
    }

    /// Whether the level's warm start of the stage's mixer is left out where the x86 transform
    /// is on: unless the recipe text names `warm=`.
    pub fn chooses_warm(&self) -> bool {
        !self.text.as_deref().is_some_and(|t| t.contains("warm="))
    }

    /// Whether the x86 transform is chosen by detection for each input: unless `--x86 on|off`
    /// or the recipe text names `x86=`.
    pub fn chooses_x86(&self) -> bool {
        matches!(self.knobs.x86.as_deref(), None | Some("auto"))
            && !self.text.as_deref().is_some_and(|t| t.contains("x86="))
    }

    /// Whether machine code's first bytes may be left untrained
    /// ([`crate::codec::MACHINE_CODE_UNTRAINED`]): unless a training knob (`--optimizer`,
    /// `--lr`, `--scope`, `--bptt`, `--stride`, `--clip`) or the recipe text's rules say how
    /// the network trains.
    pub fn chooses_training(&self) -> bool {
        let k = &self.knobs;
        let knob = k.optimizer.is_some()
            || k.lr.is_some()
            || k.scope.is_some()
            || k.bptt.is_some()
            || k.stride.is_some()
            || k.clip.is_some();
        !knob && !self.text.as_deref().is_some_and(recipe::names_rules)
    }

    /// The `file:PATH` of the recipe text, if it has one.
    fn file_in_text(&self) -> Option<PathBuf> {
        self.text
            .as_deref()
            .and_then(recipe::file_path)
            .map(PathBuf::from)
    }

    /// Builds and validates the recipe; `weights` is the loaded model file when the run starts
    /// from one. With `--prior none`, or sizes or a model file that leave the level's prior
    /// out, the level's network for inputs without a prior ([`crate::levels::seeded_recipe`]),
    /// whose training is made for a network that does not start from one.
    pub fn build(&self, weights: Option<&Weights>) -> Result<Recipe> {
        let none = self.knobs.prior.as_deref() == Some("none");
        let recipe = self.build_from(none, weights)?;
        if !none && self.chooses_prior() && recipe.config().prior() == 0 {
            return self.build_from(true, weights);
        }
        Ok(recipe)
    }

    /// The recipe for inputs the level's prior does not suit, when the prior is chosen per
    /// input ([`Self::chooses_prior`]): built as [`Self::build`] from the level's seeded recipe.
    pub fn build_seeded(&self, weights: Option<&Weights>) -> Result<Option<Recipe>> {
        if !self.chooses_prior() {
            return Ok(None);
        }
        self.build_from(true, weights).map(Some)
    }

    fn build_from(&self, seeded: bool, weights: Option<&Weights>) -> Result<Recipe> {
        let names = crate::api::Names {
            model: "--model",
            recipe: "--recipe",
        };
        let network_of = match seeded {
            true => levels::seeded_recipe,
            false => levels::recipe,
        };
        let mut recipe = crate::api::level_recipe(
            network_of,
            self.kind,
            self.level,
            self.text.as_deref(),
            weights,
            names,
        )?;
        self.knobs.apply(&mut recipe)?;
        if let Some(mix) = recipe.mix.as_mut() {
            crate::mix::warm::settle_with_x86(mix, !self.chooses_warm());
        }
        if let Err(e) = recipe.validate() {
            return Err(match self.knobs.hidden {
                Some(h) => hidden_error(&recipe, h, e),
                None => e.context("invalid model settings"),
            });
        }
        Ok(recipe)
    }
}

/// `--prior NAME|none`: the built-in prior a fresh Mamba-1 network starts from.
fn apply_prior(recipe: &mut Recipe, name: &str) -> Result<()> {
    let number = match name {
        "none" => 0,
        _ => match crate::prior::by_name(name) {
            Some(p) => p.number,
            None => bail!(
                "--prior {name}: this build carries no such prior (it carries: {})",
                crate::prior::names()
            ),
        },
    };
    match &mut recipe.base {
        Base::Fresh {
            config: ModelConfig::Mamba1(cfg),
            ..
        } => cfg.prior = number,
        _ if number == 0 => {}
        _ => bail!(
            "--prior starts a fresh Mamba-1 network; this run has another model or a model file"
        ),
    }
    Ok(())
}

impl Knobs {
    /// Applies the knobs: sizes and seed to a fresh base, training settings to every train
    /// rule (`--optimizer none` turns them into infer).
    fn apply(&self, recipe: &mut Recipe) -> Result<()> {
        let kind = recipe.kind();
        if self.hidden.is_some() || self.layers.is_some() || self.seed.is_some() {
            let Base::Fresh { config, seed } = &mut recipe.base else {
                bail!(
                    "--hidden, --layers and --seed set up a fresh model; a model file has its \
                     own sizes and weights"
                );
            };
            config.set_size(self.hidden, self.layers);
            if self.prior.is_none() {
                crate::prior::keep_if_it_fits(config);
            }
            if let Some(s) = self.seed {
                *seed = s;
            }
        }
        if let Some(name) = &self.prior {
            apply_prior(recipe, name)?;
        }
        match (self.x86.as_deref(), recipe.mix.as_mut()) {
            (Some("on"), Some(mix)) => {
                (mix.x86, mix.x86_ops, mix.x86_from, mix.x86_to) = (true, true, 0, 0);
            }
            (Some("on"), None) => {
                bail!("--x86 on: the transform is a setting of the mixing stage, which is off")
            }
            (Some("off"), Some(mix)) => {
                (mix.x86, mix.x86_ops, mix.x86_from, mix.x86_to) = (false, false, 0, 0);
            }
            _ => {}
        }
        let optimizer = match self.optimizer.as_deref() {
            Some("none") => {
                for action in recipe.actions_mut() {
                    *action = Action::Infer;
                }
                None
            }
            Some(name) => Some(OptimizerKind::parse(name)?),
            None => None,
        };
        let scope = match &self.scope {
            Some(text) => {
                Some(Scope::parse(text, crate::train::trained_groups(kind)).context("--scope")?)
            }
            None => None,
        };
        let trains = recipe.actions().any(|a| matches!(a, Action::Train(_)));
        for (flag, given) in [
            ("--lr", self.lr.is_some()),
            ("--scope", scope.is_some()),
            ("--bptt", self.bptt.is_some()),
            ("--stride", self.stride.is_some()),
            ("--clip", self.clip.is_some()),
        ] {
            if given && !trains {
                bail!("{flag} sets how the model trains, but the schedule has no train rule");
            }
        }
        for t in recipe.train_specs_mut() {
            if let Some(o) = optimizer {
                t.optimizer = o;
            }
            if let Some(lr) = self.lr {
                t.lr = lr;
            }
            if let Some(s) = scope {
                t.scope = s;
            }
            if let Some(w) = self.bptt {
                // Contiguous segments stay contiguous; a stride with gaps keeps its gaps.
                t.stride = if t.stride == t.bptt {
                    w
                } else {
                    t.stride.max(w)
                };
                t.bptt = w;
            }
            if let Some(s) = self.stride {
                t.stride = s;
            }
            if let Some(c) = self.clip {
                t.clip = c;
            }
        }
        Ok(())
    }
}

/// The largest `--hidden` with which `recipe` (a fresh model's) is valid, if any: the widths
/// derived from it (Mamba-1's inner width is twice the hidden one, RWKV-7's intermediate four
/// times), the bound on parameters and the one on working memory limit it more than the bound
/// on each size does. Found by bisection: every one of these grows with the width.
fn largest_hidden(recipe: &Recipe) -> Option<usize> {
    // RWKV-7's width is a whole number of heads.
    let step = match recipe.kind() {
        ModelKind::Rwkv7 => 64,
        ModelKind::Mamba1 => 1,
    };
    let fits = |units: usize| {
        let mut r = recipe.clone();
        match &mut r.base {
            Base::Fresh { config, .. } => config.set_size(Some(units * step), None),
            Base::File { .. } => return false,
        }
        r.validate().is_ok()
    };
    // Invariant: `lo` fits (or is 0), `hi` does not.
    let (mut lo, mut hi) = (0usize, recipe::MAX_DIM / step + 1);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo > 0).then_some(lo * step)
}

/// The error of a recipe that `--hidden h` made invalid: one message with the bound that
/// applies, rather than the bound of a width derived from it.
fn hidden_error(recipe: &Recipe, h: usize, cause: anyhow::Error) -> anyhow::Error {
    match largest_hidden(recipe) {
        Some(max) if h == 0 || h > max => {
            let layers = match &recipe.base {
                Base::Fresh { config, .. } => config
                    .keys()
                    .into_iter()
                    .find(|(k, _)| *k == "layers")
                    .map_or(0, |(_, v)| v),
                Base::File { .. } => 0,
            };
            let unit = match recipe.kind() {
                ModelKind::Rwkv7 => ", a multiple of 64",
                ModelKind::Mamba1 => "",
            };
            let layers = match layers {
                1 => "1 layer".to_string(),
                n => format!("{n} layers"),
            };
            anyhow::anyhow!(
                "--hidden {h} is out of range: with this recipe ({kind}, {layers}) --hidden takes \
                 1 to {max}{unit} (the sizes derived from the width, the parameter count and the \
                 working memory are bounded too)",
                kind = recipe.kind().name(),
            )
        }
        // The width is not what is wrong.
        _ => cause.context("invalid model settings"),
    }
}

impl Settings {
    /// Checks the command line; every error is a usage error.
    pub fn from_cli(cli: Cli) -> Result<Self> {
        let verbosity = match (cli.talk.quiet, cli.talk.verbose) {
            (true, _) => Verbosity::Quiet,
            (false, 0) => Verbosity::Normal,
            (false, 1) => Verbosity::Verbose,
            (false, _) => Verbosity::Detailed,
        };
        let memory_limit = match &cli.command {
            None => cli.top.memory,
            Some(Command::Compress(a)) => a.memory,
            Some(Command::Decompress(a)) => a.memory,
            Some(Command::Test(a)) => a.memory,
            Some(_) => None,
        };
        let (job, input, weights, threads) = match cli.command {
            None => {
                // With -d, -t or -l the compression options are ignored, as zstd ignores a
                // level: `tar -I 'lmzip -3 --hidden 64'` then works both ways.
                let mode = &cli.mode;
                let a = cli.top;
                let threads = network_threads(a.blocks.threads);
                if mode.decompress {
                    let output = output_from(&a.output, a.input.files.len())?;
                    one_input_for(
                        &a.weights.save_weights,
                        "--save-weights",
                        a.input.files.len(),
                    )?;
                    let job = Job::Decompress {
                        output,
                        save_weights: a.weights.save_weights,
                    };
                    (job, a.input, a.weights.weights, threads)
                } else if mode.test {
                    (Job::Test, a.input, a.weights.weights, threads)
                } else if mode.list {
                    (Job::List, a.input, None, 1)
                } else {
                    compress_job(a)?
                }
            }
            Some(Command::Compress(a)) => compress_job(a)?,
            Some(Command::Decompress(a)) => {
                let output = output_from(&a.output, a.input.files.len())?;
                one_input_for(
                    &a.weights.save_weights,
                    "--save-weights",
                    a.input.files.len(),
                )?;
                let job = Job::Decompress {
                    output,
                    save_weights: a.weights.save_weights,
                };
                let threads = network_threads(a.threads);
                (job, a.input, a.weights.weights, threads)
            }
            Some(Command::Test(a)) => {
                let threads = network_threads(a.threads);
                (Job::Test, a.input, a.weights, threads)
            }
            Some(Command::Info(a)) => (Job::Info, files_only(a.files), None, 1),
            Some(Command::List(a)) => (Job::List, files_only(a.files), None, 1),
            Some(
                Command::Completions { .. } | Command::Man | Command::Bench(_) | Command::Train(_),
            ) => {
                bail!("completions, man, bench and train are handled before settings")
            }
        };
        let suffix = input
            .suffix
            .clone()
            .unwrap_or_else(|| DEFAULT_SUFFIX.to_string());
        if suffix.is_empty() || suffix.contains(std::path::is_separator) {
            bail!("-S/--suffix must be a non-empty name ending, such as .lmz");
        }
        let inputs = if input.files.is_empty() {
            vec![Input::Stdin]
        } else {
            input.files.into_iter().map(Input::from_arg).collect()
        };
        if inputs.iter().filter(|i| **i == Input::Stdin).count() > 1 {
            bail!("standard input can be read only once");
        }
        let block_threads = match &job {
            Job::Compress {
                blocks: Some(plan), ..
            } => plan.threads,
            _ => 1,
        };
        let warnings = threads_warning(threads.max(block_threads))
            .into_iter()
            .collect();
        Ok(Settings {
            job,
            inputs,
            verbosity,
            weights,
            no_progress: cli.talk.no_progress,
            recursive: input.recursive,
            suffix,
            threads,
            warnings,
            memory_limit,
        })
    }
}

fn files_only(files: Vec<PathBuf>) -> InputArgs {
    InputArgs {
        files,
        recursive: false,
        suffix: None,
    }
}

/// The compression job of `lmzip compress` and of `lmzip` without a command, and the
/// threads of the network's kernels.
fn compress_job(a: CompressArgs) -> Result<(Job, InputArgs, Option<PathBuf>, usize)> {
    let plan = RecipePlan::from_args(&a.model, a.level.level);
    let weights = match (&a.weights.weights, plan.file_in_text()) {
        (Some(_), Some(_)) => {
            bail!("the model file is given twice (--weights and file: in --recipe)")
        }
        (w, t) => w.clone().or(t),
    };
    if weights.is_none() {
        // Everything can be checked now.
        plan.build(None)?;
    }
    let n_files = a.input.files.len();
    let output = output_from(&a.output, n_files)?;
    one_input_for(&a.weights.save_weights, "--save-weights", n_files)?;
    one_input_for(&a.size, "--size", n_files)?;
    one_input_for(&a.stats, "--stats", n_files)?;
    if a.input.recursive && (a.stats.is_some() || a.weights.save_weights.is_some()) {
        bail!("--stats and --save-weights take a single input, not -r");
    }
    let blocks = match a.blocks.block_size {
        Some(size) => {
            for (flag, given) in [
                ("--size", a.size.is_some()),
                ("--save-weights", a.weights.save_weights.is_some()),
                ("--stats", a.stats.is_some()),
            ] {
                if given {
                    bail!("{flag} works on one stream of one model, not with --block-size");
                }
            }
            Some(BlockPlan {
                size,
                threads: resolve_threads(a.blocks.threads.unwrap_or(1)),
            })
        }
        None => None,
    };
    // Threads go to blocks first: each block is coded on one thread.
    let threads = match blocks {
        Some(_) => 1,
        None => network_threads(a.blocks.threads),
    };
    let job = Job::Compress {
        plan: Box::new(plan),
        verify: a.verify,
        output,
        save_weights: a.weights.save_weights,
        size: a.size,
        blocks,
        stats: a.stats,
    };
    Ok((job, a.input, weights, threads))
}

/// Threads a stream's network gets when `-T` is not given: as many as help, which on a 2-core
/// machine, idle otherwise, is one at every level measured. Two threads (medians of three runs,
/// 100 KB of book1, compressing) took 1.04× the wall time of one at level 4 and 0.95× at level
/// 6, for 1.9–2.1× the CPU; on whole book1 the default ran at 0.98× the speed compressing and
/// 1.10× decompressing. The per-byte products are too small to pay for the hand-over (docs/guide.md,
/// "Threads"), and a second busy thread only slows other work on the machine.
const DEFAULT_NETWORK_THREADS: usize = 1;

/// The threads of a stream's network for `-T` (given or not).
fn network_threads(given: Option<usize>) -> usize {
    match given {
        Some(threads) => resolve_threads(threads),
        None => DEFAULT_NETWORK_THREADS,
    }
}

/// More threads than cores run (the output is the same for every count, and the tests use 3
/// on 2 cores to prove it), but only cost time: the threads wait for one another at every
/// product. xz says so when it changes a thread count; lmzip says so and keeps the count.
fn threads_warning(threads: usize) -> Option<String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (threads > cores).then(|| {
        format!(
            "warning: -T {threads} is more threads than the {cores} core{s} here; the extra \
             ones only slow the run down (the output is the same for every count)",
            s = if cores == 1 { "" } else { "s" }
        )
    })
}

/// `-T 0` means one thread per core.
fn resolve_threads(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

/// Refuses an option that describes one input when several are given.
fn one_input_for<T>(option: &Option<T>, name: &str, n_files: usize) -> Result<()> {
    if option.is_some() && n_files > 1 {
        bail!("{name} takes a single input, but {n_files} were given");
    }
    Ok(())
}

fn output_from(args: &OutputArgs, n_files: usize) -> Result<OutputSettings> {
    let choice = match (&args.output, args.stdout) {
        (Some(path), _) => {
            if n_files > 1 {
                bail!("-o/--output takes a single input, but {n_files} were given");
            }
            if path.as_os_str() == "-" {
                OutputChoice::Stdout
            } else if path.as_os_str().is_empty() {
                bail!("-o/--output needs a file name");
            } else {
                OutputChoice::File(path.clone())
            }
        }
        (None, true) => OutputChoice::Stdout,
        (None, false) => OutputChoice::Derived,
    };
    Ok(OutputSettings {
        choice,
        force: args.force,
        // clap keeps only the last of --rm and --keep, so `rm` is set only if it came last.
        remove_source: args.rm && !args.keep,
    })
}

/// The output name of compressing `path`: `FILE` and the suffix (`FILE.lmz`).
pub fn compressed_name(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether `path`'s file name ends in `suffix` (compared as bytes: a name need not be valid
/// Unicode).
pub fn has_suffix(path: &Path, suffix: &str) -> bool {
    path.file_name()
        .is_some_and(|n| n.as_encoded_bytes().ends_with(suffix.as_bytes()))
}

/// The output name of decompressing `path`: the name without its suffix.
pub fn decompressed_name(path: &Path, suffix: &str) -> Result<PathBuf> {
    let file_name = path.file_name().unwrap_or_default();
    let bytes = file_name.as_encoded_bytes();
    match bytes.strip_suffix(suffix.as_bytes()) {
        Some([]) => bail!("has no name before its {suffix} suffix (use -o to name the output)"),
        Some(stem) => Ok(path.with_file_name(name_from_bytes(stem)?)),
        None => bail!("has no {suffix} suffix (use -o or -c to name the output)"),
    }
}

/// A file name from its bytes (a prefix of another name's bytes).
#[cfg(unix)]
fn name_from_bytes(bytes: &[u8]) -> Result<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::ffi::OsStr::from_bytes(bytes).to_owned())
}

#[cfg(not(unix))]
fn name_from_bytes(bytes: &[u8]) -> Result<std::ffi::OsString> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.into()),
        Err(_) => bail!("has a name that is not valid Unicode (use -o to name the output)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::levels::DEFAULT_MODEL;
    use clap::Parser;

    fn settings(args: &[&str]) -> Result<Settings> {
        let args = std::iter::once("lmzip").chain(args.iter().copied());
        let cli = Cli::try_parse_from(super::super::argv::prepare(args.map(Into::into).collect()))?;
        Settings::from_cli(cli)
    }

    fn recipe(args: &[&str]) -> Result<Recipe> {
        match settings(args)?.job {
            Job::Compress { plan, .. } => plan.build(None),
            _ => panic!("not compress"),
        }
    }

    #[test]
    fn unset_knobs_take_the_defaults_and_set_ones_apply() {
        let s = settings(&[
            "compress", "--hidden", "16", "--layers", "1", "--lr", "0.01",
        ])
        .unwrap();
        assert_eq!(s.inputs, vec![Input::Stdin]);
        let r = recipe(&[
            "compress", "--hidden", "16", "--layers", "1", "--lr", "0.01",
        ])
        .unwrap();
        // Other sizes than the prior's: the level's seeded network, resized.
        let expected = levels::seeded_recipe(DEFAULT_MODEL, levels::DEFAULT_LEVEL)
            .edit_from_level("cfg:hidden=16,layers=1 0..:train(lr=0.01,bptt=16)", None)
            .unwrap();
        assert_eq!(r, expected);
    }

    #[test]
    fn levels_recipes_and_knobs_combine() {
        for (args, want) in [
            (&["compress", "-1"][..], levels::recipe(DEFAULT_MODEL, 1)),
            (
                &["compress", "--level", "9"],
                levels::recipe(DEFAULT_MODEL, 9),
            ),
            (
                &["compress", "--model", "rwkv7", "-3"],
                levels::recipe(ModelKind::Rwkv7, 3),
            ),
            (
                &["compress", "-2", "--recipe", "0..50%:train() 50%..:infer"],
                levels::recipe(DEFAULT_MODEL, 2)
                    .edit_from_level("0..50%:train() 50%..:infer", None)
                    .unwrap(),
            ),
            (
                &["compress", "--recipe", "rwkv7 cfg:layers=1", "--lr", "0.01"],
                levels::recipe(ModelKind::Rwkv7, levels::DEFAULT_LEVEL)
                    .edit_from_level("cfg:layers=1 0..:train(lr=0.01,bptt=16)", None)
                    .unwrap(),
            ),
            (
                &["compress", "--optimizer", "none"],
                crate::levels::default_recipe(DEFAULT_MODEL)
                    .edit_from_level("0..:infer", None)
                    .unwrap(),
            ),
            (
                &[
                    "compress",
                    "--recipe",
                    "0..:train(bptt=4,stride=8)",
                    "--bptt",
                    "2",
                ],
                crate::levels::default_recipe(DEFAULT_MODEL)
                    .edit_from_level("0..:train(bptt=2,stride=8)", None)
                    .unwrap(),
            ),
            (
                &["compress", "--bptt", "8", "--stride", "32"],
                levels::recipe(DEFAULT_MODEL, levels::DEFAULT_LEVEL)
                    .edit_from_level("0..:train(bptt=8,stride=32)", None)
                    .unwrap(),
            ),
        ] {
            assert_eq!(recipe(args).unwrap(), want, "{args:?}");
        }
        // Overlapping segments are not a training mode.
        let err = recipe(&["compress", "--bptt", "8", "--stride", "4"]).unwrap_err();
        assert!(
            format!("{err:#}").contains("stride 4 is out of range"),
            "{err:#}"
        );
        let err = recipe(&["compress", "--optimizer", "none", "--stride", "4"]).unwrap_err();
        assert!(format!("{err:#}").contains("--stride"), "{err:#}");
    }

    #[test]
    fn a_recipe_takes_what_it_leaves_out_from_the_level() {
        let r = recipe(&["compress", "-3", "--recipe", "0..:train(lr=0.001)"]).unwrap();
        let level = levels::recipe(DEFAULT_MODEL, 3);
        let (Some(Action::Train(t)), Some(Action::Train(l))) =
            (r.actions().next(), level.actions().next())
        else {
            panic!("both train");
        };
        assert_eq!(t.lr, 0.001);
        assert_eq!(
            (t.bptt, t.stride, t.optimizer),
            (l.bptt, l.stride, l.optimizer)
        );
        assert_eq!(l.bptt, 32, "the level's window, not one-step training");
    }

    #[test]
    fn bad_settings_are_refused() {
        for args in [
            &["compress", "--bptt", "0"][..],
            &["compress", "--lr", "-1"],
            &["compress", "--scope", "embed+nonsense"],
            &["compress", "--model", "rwkv7", "--hidden", "16"],
            &["compress", "-o", "x", "a", "b"],
            &["decompress", "-o", "", "a"],
            &["compress", "-", "-"],
            &["info", "-", "-"],
            &["compress", "--level", "10"],
            &["compress", "-S", ""],
            &["compress", "-S", "a/b"],
            &["compress", "--block-size", "1K", "--size", "9"],
            &["compress", "--stats", "s.tsv", "a", "b"],
            &["compress", "--recipe", "cfg:hiden=3"],
            &["compress", "--model", "rwkv7", "--recipe", "mamba1"],
            &["compress", "--recipe", "0..:infer", "--lr", "0.1"],
            &["compress", "--weights", "w", "--recipe", "file:v"],
            &["compress", "--save-weights", "w", "a", "b"],
            &["compress", "--size", "9", "a", "b"],
        ] {
            assert!(settings(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn the_hidden_bound_named_is_the_real_one() {
        for kind in ["mamba1", "rwkv7"] {
            let err = recipe(&["compress", "--model", kind, "--hidden", "100000"]).unwrap_err();
            let text = format!("{err:#}");
            let tail = text.split("--hidden takes 1 to ").nth(1).expect(&text);
            let max: usize = tail
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap();
            let step = if kind == "rwkv7" { 64 } else { 1 };
            recipe(&["compress", "--model", kind, "--hidden", &max.to_string()]).unwrap();
            let above = (max + step).to_string();
            let err = recipe(&["compress", "--model", kind, "--hidden", &above]).unwrap_err();
            assert!(
                format!("{err:#}").contains(&format!("1 to {max}")),
                "{err:#}"
            );
        }
        // A width within the bound with another error keeps that error.
        let err = recipe(&["compress", "--hidden", "32", "--bptt", "5000"]).unwrap_err();
        assert!(format!("{err:#}").contains("bptt 5000"), "{err:#}");
    }

    #[test]
    fn rm_and_keep_follow_the_last_one_given() {
        let rm = |args: &[&str]| match settings(args).unwrap().job {
            Job::Decompress { output, .. } => output.remove_source,
            _ => unreachable!(),
        };
        assert!(rm(&["d", "--rm", "a.lmz"]));
        assert!(!rm(&["d", "--rm", "-k", "a.lmz"]));
        assert!(rm(&["d", "-k", "--rm", "a.lmz"]));
        assert!(!rm(&["d", "a.lmz"]));
    }

    #[test]
    fn names_are_derived_and_checked() {
        let lmz = DEFAULT_SUFFIX;
        assert_eq!(
            compressed_name(Path::new("d/a.txt"), lmz),
            Path::new("d/a.txt.lmz")
        );
        assert_eq!(
            decompressed_name(Path::new("d/a.txt.lmz"), lmz).unwrap(),
            Path::new("d/a.txt")
        );
        assert_eq!(
            decompressed_name(Path::new("a.lmz"), lmz).unwrap(),
            Path::new("a")
        );
        assert!(decompressed_name(Path::new("d/.lmz"), lmz).is_err());
        assert!(decompressed_name(Path::new("a.txt"), lmz).is_err());
        assert!(decompressed_name(Path::new("a.LMZ"), lmz).is_err());
        // Another suffix, with more than one dot.
        assert_eq!(
            compressed_name(Path::new("a.tar"), ".nn.z"),
            Path::new("a.tar.nn.z")
        );
        assert_eq!(
            decompressed_name(Path::new("d/a.tar.nn.z"), ".nn.z").unwrap(),
            Path::new("d/a.tar")
        );
        assert!(has_suffix(Path::new("d/x.lmz"), lmz));
        assert!(!has_suffix(Path::new("d.lmz/x"), lmz));
    }
}
