//! The command line as clap sees it: raw flags and values, before they are checked against each
//! other and turned into [`super::settings::Settings`].
//!
//! The conventions follow zstd's: `FILE` becomes `FILE.lmz` and back, no file (or `-`) means
//! standard input to standard output, `-c` writes to standard output, `-f` overwrites, `--rm`
//! removes the source after success.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::recipe::ModelKind;

#[derive(Debug, Parser)]
#[command(
    name = "lmzip",
    version,
    about = "Lossless compression by a small neural network that learns the data as it goes",
    after_help = "Compressing FILE writes FILE.lmz; decompressing FILE.lmz writes FILE. \
                  With no FILE, or when FILE is -, read standard input and write standard output."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Print nothing but errors
    #[arg(short, long, global = true, overrides_with = "verbose")]
    pub quiet: bool,

    /// Print a summary line per file: sizes, bits per byte, speed
    #[arg(short, long, global = true, overrides_with = "quiet")]
    pub verbose: bool,
}

// Parsed once per run: the size of the compress variant costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compress FILEs to FILE.lmz (or standard input to standard output)
    #[command(visible_alias = "c")]
    Compress(CompressArgs),

    /// Decompress FILE.lmz to FILE (or standard input to standard output)
    #[command(visible_alias = "d")]
    Decompress(DecompressArgs),

    /// Decode FILEs and check their checksums, writing nothing
    #[command(visible_alias = "t")]
    Test(TestArgs),

    /// Describe FILEs without decoding them: versions, recipe, sizes
    Info(InfoArgs),
}

#[derive(Debug, Args)]
pub struct CompressArgs {
    /// Files to compress; none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Decode the result and compare it with the input before keeping it (and before --rm)
    #[arg(long)]
    pub verify: bool,

    /// Length of standard input in bytes, for recipes with positions in percent (the input
    /// must have exactly this length)
    #[arg(long, value_name = "BYTES")]
    pub size: Option<u64>,

    #[command(flatten)]
    pub level: LevelArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub weights: WeightsArgs,
}

#[derive(Debug, Args)]
pub struct DecompressArgs {
    /// Files to decompress (named *.lmz unless -o or -c is given); none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub weights: WeightsArgs,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Files to check; none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// The model file the streams start from, if they do (the header names its SHA-256)
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Files to describe
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
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

    /// Overwrite existing files; read or write compressed data on a terminal; compress *.lmz again
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

/// The compression level: a recipe from the table in src/levels.rs.
#[derive(Debug, Args)]
#[group(multiple = false)]
#[command(next_help_heading = "Model (stored in the file; decompression needs no flags)")]
pub struct LevelArgs {
    /// Compression level, 1 (fastest) to 9 (best ratio); also -1 ... -9 [default: 5]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=9))]
    pub level: Option<u8>,
    #[arg(short = '1', hide = true)]
    pub l1: bool,
    #[arg(short = '2', hide = true)]
    pub l2: bool,
    #[arg(short = '3', hide = true)]
    pub l3: bool,
    #[arg(short = '4', hide = true)]
    pub l4: bool,
    #[arg(short = '5', hide = true)]
    pub l5: bool,
    #[arg(short = '6', hide = true)]
    pub l6: bool,
    #[arg(short = '7', hide = true)]
    pub l7: bool,
    #[arg(short = '8', hide = true)]
    pub l8: bool,
    #[arg(short = '9', hide = true)]
    pub l9: bool,
}

impl LevelArgs {
    /// The level given, by `--level N` or `-N`.
    pub fn level(&self) -> Option<u8> {
        let flags = [
            self.l1, self.l2, self.l3, self.l4, self.l5, self.l6, self.l7, self.l8, self.l9,
        ];
        self.level
            .or_else(|| flags.iter().position(|&f| f).map(|i| i as u8 + 1))
    }
}

/// The recipe and its knobs. Unset ones take the level's values. They are stored in the
/// compressed file, so decompression needs none of them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model (stored in the file; decompression needs no flags)")]
pub struct ModelArgs {
    /// Network: mamba1 or rwkv7 [default: mamba1, or the model file's]
    #[arg(long, value_name = "KIND", value_parser = parse_model)]
    pub model: Option<ModelKind>,

    /// Recipe text: base and schedule, e.g. 'cfg:hidden=64 0..50%:train(lr=0.001) 50%..:infer'
    /// (docs/recipes.md); what it leaves out comes from the level
    #[arg(long, value_name = "TEXT")]
    pub recipe: Option<String>,

    /// Hidden width
    #[arg(long, value_name = "N")]
    pub hidden: Option<usize>,

    /// Number of layers
    #[arg(long, value_name = "N")]
    pub layers: Option<usize>,

    /// Learning rate
    #[arg(long, value_name = "X")]
    pub lr: Option<f32>,

    /// How the weights learn: none (only predict), sgd or adam
    #[arg(long, value_name = "KIND", value_parser = ["none", "sgd", "adam"])]
    pub optimizer: Option<String>,

    /// Trained parameter groups, joined with + (e.g. embed+head), or all
    #[arg(long, value_name = "GROUPS")]
    pub scope: Option<String>,

    /// Seed of the initial weights
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Truncated-BPTT window in bytes (1: a one-step update per byte)
    #[arg(long, value_name = "N")]
    pub bptt: Option<usize>,

    /// Bytes from the start of one training window to the next (default: the window, so every
    /// byte is learned; larger leaves bytes that are only predicted, for speed)
    #[arg(long, value_name = "N")]
    pub stride: Option<usize>,

    /// Element-wise gradient clip (0: none)
    #[arg(long, value_name = "X")]
    pub clip: Option<f32>,
}

// The recipe owns the names of models; the parser only adapts its errors.

fn parse_model(text: &str) -> Result<ModelKind, String> {
    ModelKind::parse(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
