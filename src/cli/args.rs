//! The command line as clap sees it: raw flags and values, before they are checked against each
//! other and turned into [`super::settings::Settings`].
//!
//! The conventions follow zstd's: `FILE` becomes `FILE.lmz` and back, no file (or `-`) means
//! standard input to standard output, `-c` writes to standard output, `-f` overwrites, `--rm`
//! removes the source after success.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::recipe::ModelKind;

#[derive(Debug, Parser)]
#[command(
    name = "lmzip",
    version,
    about = "Lossless compression by a small neural network that learns the data as it goes",
    after_help = "With no command, lmzip compresses (or, with -d/-t/-l, decompresses, tests or \
                  lists), as gzip and zstd do, so `tar -I lmzip` works. \
                  Compressing FILE writes FILE.lmz; decompressing FILE.lmz writes FILE. \
                  With no FILE, or when FILE is -, read standard input and write standard output. \
                  Invoked as unlmzip, lmzip decompresses; as lmzcat, it decompresses to standard \
                  output.",
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// What to do without a command: compress (the default), or -d, -t, -l
    #[command(flatten)]
    pub mode: ModeArgs,

    /// The compression options, which also serve -d and -t where they apply
    #[command(flatten)]
    pub top: CompressArgs,

    #[command(flatten)]
    pub talk: TalkArgs,
}

/// How much a run says; accepted before or after the command. Under a heading of its own:
/// flattened after the model files, these would otherwise be listed under theirs.
#[derive(Debug, Args)]
#[command(next_help_heading = "Messages")]
pub struct TalkArgs {
    /// Print nothing but errors
    #[arg(short, long, global = true, overrides_with = "verbose")]
    pub quiet: bool,

    /// Print a summary line per file: sizes, bits per byte, speed (-vv: also per member, and
    /// the recipe)
    #[arg(short, long, global = true, action = ArgAction::Count, overrides_with = "quiet")]
    pub verbose: u8,

    /// Never show a progress bar
    #[arg(long, global = true)]
    pub no_progress: bool,
}

/// The operation of `lmzip` without a command (gzip's and zstd's letters; the last one wins).
#[derive(Debug, Args)]
pub struct ModeArgs {
    /// Compress (the default)
    #[arg(short = 'z', long = "compress", overrides_with_all = ["decompress", "test", "list"])]
    pub compress: bool,

    /// Decompress
    #[arg(short = 'd', long, visible_alias = "uncompress",
          overrides_with_all = ["compress", "test", "list"])]
    pub decompress: bool,

    /// Decode and check, writing nothing
    #[arg(short = 't', long, overrides_with_all = ["compress", "decompress", "list"])]
    pub test: bool,

    /// List members, sizes and ratios without decoding
    #[arg(short = 'l', long, overrides_with_all = ["compress", "decompress", "test"])]
    pub list: bool,
}

// Parsed once per run: the size of the compress variant costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compress FILEs to FILE.lmz (or standard input to standard output)
    #[command(visible_alias = "c", args_override_self = true)]
    Compress(CompressArgs),

    /// Decompress FILE.lmz to FILE (or standard input to standard output)
    #[command(
        visible_alias = "d",
        args_override_self = true,
        mut_arg("force", |a| a.help(
            "Overwrite existing files; follow symbolic links; read compressed data from a terminal"
        ))
    )]
    Decompress(DecompressArgs),

    /// Decode FILEs and check their checksums, writing nothing
    #[command(visible_alias = "t", args_override_self = true)]
    Test(TestArgs),

    /// Describe FILEs without decoding them: versions, recipe, sizes, per member
    #[command(args_override_self = true)]
    Info(InfoArgs),

    /// One line per file: members, sizes, ratio, bits per byte (-v: also per member)
    #[command(visible_alias = "l", args_override_self = true)]
    List(InfoArgs),

    /// Benchmark levels on FILEs: bytes, bits per byte, compress and decompress speed, peak
    /// memory, every round trip checked (zstd's -b)
    #[command(args_override_self = true)]
    Bench(BenchArgs),

    /// Train a network offline on a corpus and write its weights, a model file that
    /// `--weights` starts compression from
    #[command(args_override_self = true)]
    Train(TrainArgs),

    /// Print a shell completion script (bash, zsh, fish, elvish or powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },

    /// Print the manual page (roff; e.g. `lmzip man > lmzip.1`)
    Man,
}

/// The inputs, and how directories and names are treated.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// Files to work on; none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Work on the files in directories (and their subdirectories)
    #[arg(short, long)]
    pub recursive: bool,

    /// Suffix of compressed files [default: .lmz]
    #[arg(short = 'S', long, value_name = "SUFFIX")]
    pub suffix: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompressArgs {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Decode the result and compare it with the input before keeping it (and before --rm)
    #[arg(long)]
    pub verify: bool,

    /// Length of standard input in bytes, for recipes with positions in percent (the input
    /// must have exactly this length)
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, value_parser = parse_length)]
    pub size: Option<u64>,

    /// Write a learning curve: one line per 16 KB of input with its position, the bits per
    /// byte of that block and so far, and the speed (tab-separated; one input only)
    #[arg(long, value_name = "FILE.tsv")]
    pub stats: Option<PathBuf>,

    /// Refuse, before allocating anything, to write a stream whose decoding needs more than
    /// LIMIT bytes of memory (suffixes K, M, G: powers of 1024); with -d and -t, refuse such
    /// a stream
    #[arg(long, value_name = "LIMIT", value_parser = parse_memory)]
    pub memory: Option<u64>,

    #[command(flatten)]
    pub blocks: BlockArgs,

    #[command(flatten)]
    pub level: LevelArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub weights: WeightsArgs,
}

/// Independent blocks, coded in parallel.
#[derive(Debug, Args)]
#[command(next_help_heading = "Blocks and threads")]
pub struct BlockArgs {
    /// Cut the input into blocks of SIZE bytes (suffixes K, M, G: powers of 1024), each coded
    /// from the recipe's start as its own member; costs ratio, allows threads and concatenation
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub block_size: Option<u64>,

    /// Threads, 0 for one per core: the network's products, scan and segment gradients split
    /// over them (default 1), or with --block-size, blocks are coded in
    /// parallel, one thread each (default 1); the output is the same for every count
    #[arg(short = 'T', long, value_name = "N", allow_negative_numbers = true, value_parser = parse_threads)]
    pub threads: Option<usize>,
}

#[derive(Debug, Args)]
pub struct DecompressArgs {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub weights: WeightsArgs,

    /// Threads the network's products and scan split over, 0 for one per core (default 1); the
    /// output is the same for every count
    #[arg(short = 'T', long, value_name = "N", allow_negative_numbers = true, value_parser = parse_threads)]
    pub threads: Option<usize>,

    /// Refuse, before allocating anything, a stream whose decoding needs more than LIMIT
    /// bytes of memory (suffixes K, M, G: powers of 1024; `lmzip info` shows what a file
    /// needs)
    #[arg(long, value_name = "LIMIT", value_parser = parse_memory)]
    pub memory: Option<u64>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub input: InputArgs,

    /// The model file the streams start from, if they do (the header names its SHA-256)
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,

    /// Threads the network's products and scan split over, 0 for one per core (default 1); the
    /// output is the same for every count
    #[arg(short = 'T', long, value_name = "N", allow_negative_numbers = true, value_parser = parse_threads)]
    pub threads: Option<usize>,

    /// Refuse, before allocating anything, a stream whose decoding needs more than LIMIT
    /// bytes of memory (suffixes K, M, G: powers of 1024; `lmzip info` shows what a file
    /// needs)
    #[arg(long, value_name = "LIMIT", value_parser = parse_memory)]
    pub memory: Option<u64>,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Files to describe; - means standard input (read whole, then described)
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// `lmzip bench`: files × levels, coded in memory.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Files to benchmark (each is read whole into memory)
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// First level [default: 3]
    #[arg(short = 'b', long = "begin", value_name = "N", value_parser = parse_level)]
    pub begin: Option<u8>,

    /// Last level [default: the first]
    #[arg(short = 'e', long = "end", value_name = "N", value_parser = parse_level)]
    pub end: Option<u8>,

    /// Network: mamba1 or rwkv7 [default: mamba1]
    #[arg(long, value_name = "KIND", value_parser = model_names())]
    pub model: Option<ModelKind>,

    /// Output: an aligned table, tab-separated values or JSON (one object per run)
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = BenchFormat::Text)]
    pub format: BenchFormat,
}

/// `lmzip train`: a network trained offline on a corpus (src/train/offline).
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Training data: a file of bytes (documents concatenated)
    #[arg(long, value_name = "FILE")]
    pub data: PathBuf,

    /// Held-back bytes the network alone is measured on (bits per byte, forward only)
    #[arg(long, value_name = "FILE")]
    pub valid: Option<PathBuf>,

    /// Write the trained weights to FILE (safetensors, lmzip's layout; weights only)
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,

    /// Overwrite --out and --curve if they exist
    #[arg(short, long)]
    pub force: bool,

    #[command(flatten)]
    pub network: TrainNetworkArgs,

    #[command(flatten)]
    pub schedule: TrainScheduleArgs,

    #[command(flatten)]
    pub files: TrainFileArgs,
}

/// The network `lmzip train` trains: a level's, edited as `compress` does.
#[derive(Debug, Args)]
#[command(next_help_heading = "Network")]
pub struct TrainNetworkArgs {
    /// The network of this level (the `cfg:` part of its recipe) [default: 3]
    #[arg(long, value_name = "N", value_parser = parse_level)]
    pub level: Option<u8>,

    /// Network: mamba1 or rwkv7 [default: mamba1]
    #[arg(long, value_name = "KIND", value_parser = model_names())]
    pub model: Option<ModelKind>,

    /// Recipe text editing the level's, e.g. 'cfg:hidden=96,layers=2,seed=7'; only the network's
    /// sizes, seed and prior are used
    #[arg(long, value_name = "TEXT")]
    pub recipe: Option<String>,

    /// Seed of the initial weights [default: the recipe's]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_seed)]
    pub seed: Option<u64>,
}

/// How long and how `lmzip train` trains.
#[derive(Debug, Args)]
#[command(next_help_heading = "Training")]
pub struct TrainScheduleArgs {
    /// Bytes to train on over all streams (suffixes K, M, G) [default: one pass over --data]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub bytes: Option<u64>,

    /// Passes over --data (instead of --bytes; may be fractional)
    #[arg(
        long,
        value_name = "X",
        conflicts_with = "bytes",
        allow_negative_numbers = true
    )]
    pub epochs: Option<f64>,

    /// Stop after this much time (seconds, or with a suffix s, m, h); alone, the rate's decay
    /// runs over it
    #[arg(long, value_name = "TIME", allow_negative_numbers = true, value_parser = parse_duration)]
    pub time: Option<f64>,

    /// Streams read in parallel at evenly spaced places of the data [default: 8]
    #[arg(long, value_name = "B", allow_negative_numbers = true, value_parser = parse_count)]
    pub streams: Option<usize>,

    /// Bytes per stream and step: the truncated-BPTT window [default: 64]
    #[arg(long, value_name = "T", allow_negative_numbers = true, value_parser = parse_count)]
    pub bptt: Option<usize>,

    /// Peak learning rate of Adam [default: 0.003]
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub lr: Option<f32>,

    /// Steps of linear warm-up [default: 500, at most a tenth of the planned steps]
    #[arg(long, value_name = "STEPS", allow_negative_numbers = true, value_parser = parse_count)]
    pub warmup: Option<usize>,

    /// How the rate falls over the run: cosine, linear or constant [default: cosine]
    #[arg(long, value_name = "KIND", value_parser = ["cosine", "linear", "constant"])]
    pub decay: Option<String>,

    /// The fraction of the peak rate the decay ends at [default: 0.1]
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub floor: Option<f32>,

    /// Element-wise gradient clip, 0 for none [default: 0]
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub clip: Option<f32>,

    /// Threads the streams are split over, 0 for one per core (default 0); the weights are the
    /// same for every count
    #[arg(short = 'T', long, value_name = "N", allow_negative_numbers = true, value_parser = parse_threads)]
    pub threads: Option<usize>,
}

/// What `lmzip train` writes and reads besides the weights.
#[derive(Debug, Args)]
#[command(next_help_heading = "Checkpoints and the learning curve")]
pub struct TrainFileArgs {
    /// Keep a checkpoint in FILE (weights, Adam's state, the streams' places and states), at
    /// the end, on a signal and every --checkpoint-every bytes
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,

    /// Bytes between checkpoints (suffixes K, M, G) [default: a twentieth of the budget]
    #[arg(long, value_name = "BYTES", value_parser = parse_size, requires = "checkpoint")]
    pub checkpoint_every: Option<u64>,

    /// Continue the run a checkpoint saved, exactly (give the same data and options)
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,

    /// Write the learning curve to FILE: bytes, training and validation bits per byte, rate,
    /// seconds (tab-separated; appended to when resuming)
    #[arg(long, value_name = "FILE.tsv")]
    pub curve: Option<PathBuf>,

    /// Bytes between rows of the curve [default: a two-hundredth of the budget]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub report_every: Option<u64>,

    /// Bytes between validations [default: a tenth of the budget]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub valid_every: Option<u64>,

    /// Validate on the first BYTES of --valid [default: 256K]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub valid_bytes: Option<u64>,
}

/// `--time`: seconds, or a number with the suffix s, m or h.
fn parse_duration(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        _ => return Err(format!("'{text}' is not a time (e.g. 90, 90s, 10m, 2h)")),
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n * scale),
        _ => Err(format!(
            "'{text}' is not a time above 0 (e.g. 90, 90s, 10m, 2h)"
        )),
    }
}

/// How `lmzip bench` prints its results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchFormat {
    Text,
    Tsv,
    Json,
}

/// Where results go and what happens to the sources; shared by compress and decompress.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Write to FILE (only with a single input; - means standard output)
    #[arg(short, long, value_name = "FILE", conflicts_with = "stdout")]
    pub output: Option<PathBuf>,

    /// Write to standard output
    #[arg(short = 'c', long)]
    pub stdout: bool,

    /// Overwrite existing files; follow symbolic links; read or write compressed data on a
    /// terminal; compress files that already have the suffix
    #[arg(short, long)]
    pub force: bool,

    /// Remove each source file once its output is complete and synced to disk
    #[arg(long, overrides_with = "keep")]
    pub rm: bool,

    /// Keep source files (the default)
    #[arg(short, long, overrides_with = "rm")]
    pub keep: bool,
}

/// Model files: the one a run starts from, and the one it ends with.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model files")]
pub struct WeightsArgs {
    /// Start from this model file (safetensors: lmzip's layouts or the official Mamba one).
    /// The compressed file records its SHA-256; decompression needs the same file
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,

    /// After the run, save the model it ended with (weights, optimizer state and position, so
    /// that a later run can resume exactly); one input only
    #[arg(long, value_name = "FILE")]
    pub save_weights: Option<PathBuf>,
}

/// The compression level: a recipe from the table in src/levels.rs. `-N` is read as
/// `--level=N` before parsing ([`super::argv`]), so that the last level given wins.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model (stored in the file; decompression needs no flags)")]
pub struct LevelArgs {
    /// Compression level, 1 (fastest) to 9 (best ratio); also -1 ... -9; the last one given
    /// wins [default: 3]
    #[arg(long, value_name = "N", value_parser = parse_level)]
    pub level: Option<u8>,
}

/// The recipe and its knobs. Unset ones take the level's values. They are stored in the
/// compressed file, so decompression needs none of them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model (stored in the file; decompression needs no flags)")]
pub struct ModelArgs {
    /// Network: mamba1 or rwkv7 [default: mamba1, or the model file's]
    // The names as possible values, so that completions offer them.
    #[arg(long, value_name = "KIND", value_parser = model_names())]
    pub model: Option<ModelKind>,

    /// Recipe text: base and schedule, e.g. 'cfg:hidden=64 0..50%:train(lr=0.001) 50%..:infer'
    /// (docs/recipes.md); what it leaves out comes from the level
    #[arg(long, value_name = "TEXT")]
    pub recipe: Option<String>,

    /// Hidden width
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub hidden: Option<usize>,

    /// Number of layers
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub layers: Option<usize>,

    /// Learning rate
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub lr: Option<f32>,

    /// How the weights learn: none (only predict), sgd or adam
    #[arg(long, value_name = "KIND", value_parser = ["none", "sgd", "adam"])]
    pub optimizer: Option<String>,

    /// Trained parameter groups, joined with + (e.g. embed+head), or all
    #[arg(long, value_name = "GROUPS")]
    pub scope: Option<String>,

    /// Seed of the initial weights
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_seed)]
    pub seed: Option<u64>,

    /// Start the network from a built-in prior, trained offline on text and code (`lmzip
    /// --version` lists them; docs/prior.md), or from seeded weights (none) [default: the
    /// level's]
    #[arg(long, value_name = "NAME|none")]
    pub prior: Option<String>,

    /// The x86 transform: call, jump and RIP-relative addresses in x86 and x86-64 machine
    /// code made absolute before modelling, and the stage's instruction contexts (recorded in
    /// the header as mix:x86=2); auto applies it to inputs whose first 64 KiB look like x86 code
    /// [default: auto]
    #[arg(long, value_name = "on|off|auto", value_parser = ["on", "off", "auto"])]
    pub x86: Option<String>,

    /// Truncated-BPTT window in bytes (1: a one-step update per byte)
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub bptt: Option<usize>,

    /// Bytes from the start of one training window to the next (default: the window, so every
    /// byte is learned; larger leaves bytes that are only predicted, for speed)
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub stride: Option<usize>,

    /// Element-wise gradient clip (0: none)
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub clip: Option<f32>,
}

// The recipe owns the names of models; the parser only adapts its errors.

/// The levels of src/levels.rs.
const LEVELS: std::ops::RangeInclusive<u8> = 1..=crate::levels::MAX_LEVEL;

fn parse_level(text: &str) -> Result<u8, String> {
    let out_of_range = || {
        format!(
            "there is no level {text}: levels go from {} (fastest) to {} (best ratio)",
            LEVELS.start(),
            LEVELS.end()
        )
    };
    let level: u8 = text.parse().map_err(|_| out_of_range())?;
    if LEVELS.contains(&level) {
        Ok(level)
    } else {
        Err(out_of_range())
    }
}

/// A byte count with an optional binary suffix: `4096`, `256K`, `1M`, `2G` (also `KiB`, `MB`
/// and the like, all powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    match parse_bytes(text)? {
        0 => Err("a block must hold at least one byte".into()),
        n => Ok(n),
    }
}

/// [`parse_size`], 0 included.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("'{text}' is not a size (e.g. 65536, 256K, 4M)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size (e.g. 65536, 256K, 4M)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// `--memory`: a size ([`parse_size`]) of at least one byte.
fn parse_memory(text: &str) -> Result<u64, String> {
    match parse_bytes(text)? {
        0 => Err("a memory limit of 0 bytes allows nothing".into()),
        n => Ok(n),
    }
}

/// A size or a count of the recipe (`--hidden`, `--layers`, `--bptt`, `--stride`): a whole
/// number; whether it is in range is the recipe's to say, with the bound that applies.
fn parse_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<i128>() {
        Ok(n) if n < 0 => Err(format!("{n} is negative; a whole number is expected")),
        Ok(n) => usize::try_from(n).map_err(|_| format!("{n} is far too large")),
        Err(_) => Err(format!("'{text}' is not a whole number")),
    }
}

/// `--seed`: any whole number from 0 to 2^64 - 1.
fn parse_seed(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "'{text}' is not a seed: seeds are whole numbers from 0 to {}",
            u64::MAX
        )
    };
    let n: i128 = text.trim().parse().map_err(|_| bad())?;
    u64::try_from(n).map_err(|_| bad())
}

/// `--size`: a length in bytes.
fn parse_length(text: &str) -> Result<u64, String> {
    let bad = || format!("'{text}' is not a length in bytes (a whole number, 0 or more)");
    let n: i128 = text.trim().parse().map_err(|_| bad())?;
    u64::try_from(n).map_err(|_| bad())
}

/// The most threads `-T` accepts. zstd clamps its workers to 256 on 64-bit builds
/// (ZSTDMT_NBWORKERS_MAX); lmzip refuses a larger count rather than clamping it in silence,
/// because such a number is a typo (and its threads, each with a stack, would only wait for
/// one another). Counts above the number of cores but within this bound run, with a warning
/// ([`super::settings`]): the output is the same for every count, so they only cost time.
pub const MAX_THREADS: usize = 256;

/// `-T`: 0 (one per core) to [`MAX_THREADS`].
fn parse_threads(text: &str) -> Result<usize, String> {
    let bad = || format!("'{text}' is not a thread count: 0 (one per core) to {MAX_THREADS}");
    let n: i128 = text.trim().parse().map_err(|_| bad())?;
    match usize::try_from(n) {
        Ok(n) if n <= MAX_THREADS => Ok(n),
        _ => Err(bad()),
    }
}

/// `--model`: one of the names of [`ModelKind::ALL`].
fn model_names() -> impl clap::builder::TypedValueParser<Value = ModelKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(ModelKind::ALL.map(ModelKind::name))
        .try_map(|name| ModelKind::parse(&name).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_and_levels_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("256K"), Ok(256 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        for bad in ["", "0", "1.5M", "K", "12Q", "99999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_level("9"), Ok(9));
        for bad in ["0", "10", "19", "-1", "x"] {
            let err = parse_level(bad).unwrap_err();
            assert!(err.contains("levels go from 1"), "{err}");
        }
    }
}
