//! The command line as clap sees it: raw flags and values, before they are checked against each
//! other and turned into [`super::settings::Settings`].
//!
//! The conventions follow zstd's: `FILE` becomes `FILE.lmz` and back, no file (or `-`) means
//! standard input to standard output, `-c` writes to standard output, `-f` overwrites, `--rm`
//! removes the source after success.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::recipe::{ModelKind, OptimizerKind};

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

    #[command(flatten)]
    pub model: ModelArgs,
}

#[derive(Debug, Args)]
pub struct DecompressArgs {
    /// Files to decompress (named *.lmz unless -o or -c is given); none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Files to check; none, or -, means standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
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

/// The knobs of the recipe. Unset ones take the model's defaults. They are stored in the
/// compressed file, so decompression needs none of them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model (stored in the file; decompression needs no flags)")]
pub struct ModelArgs {
    /// Network: mamba1 or rwkv7 [default: mamba1]
    #[arg(long, value_name = "KIND", value_parser = parse_model)]
    pub model: Option<ModelKind>,

    /// Hidden width
    #[arg(long, value_name = "N")]
    pub hidden: Option<usize>,

    /// Number of layers
    #[arg(long, value_name = "N")]
    pub layers: Option<usize>,

    /// Learning rate
    #[arg(long, value_name = "X")]
    pub lr: Option<f32>,

    /// How the weights learn: none, sgd or adam
    #[arg(long, value_name = "KIND", value_parser = parse_optimizer)]
    pub optimizer: Option<OptimizerKind>,

    /// Trained parameter groups, joined with + (e.g. embed+head), or all
    #[arg(long, value_name = "GROUPS")]
    pub scope: Option<String>,

    /// Seed of the initial weights
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Truncated-BPTT window in bytes (1: a one-step update per byte)
    #[arg(long, value_name = "N")]
    pub bptt: Option<usize>,

    /// Element-wise gradient clip (0: none)
    #[arg(long, value_name = "X")]
    pub clip: Option<f32>,
}

// The recipe owns the names of models and optimizers; the parsers only adapt its errors.

fn parse_model(text: &str) -> Result<ModelKind, String> {
    ModelKind::parse(text).map_err(|e| e.to_string())
}

fn parse_optimizer(text: &str) -> Result<OptimizerKind, String> {
    OptimizerKind::parse(text).map_err(|e| e.to_string())
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
