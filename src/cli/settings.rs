//! Typed settings: the raw command line checked as a whole — the recipe validated, the flags
//! checked against each other — before any file is opened. Everything that fails here is a
//! usage error (exit status 2).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::args::{Cli, Command, ModelArgs, OutputArgs};
use crate::params::Scope;
use crate::recipe::{ModelKind, Recipe};

/// The model used when `--model` is not given.
pub const DEFAULT_MODEL: ModelKind = ModelKind::Mamba1;

/// How much to say on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
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

/// What to do with every input.
#[derive(Clone, Debug)]
pub enum Job {
    Compress {
        recipe: Box<Recipe>,
        verify: bool,
        output: OutputSettings,
    },
    Decompress {
        output: OutputSettings,
    },
    Test,
    Info,
}

/// A whole run, validated.
#[derive(Clone, Debug)]
pub struct Settings {
    pub job: Job,
    pub inputs: Vec<Input>,
    pub verbosity: Verbosity,
}

impl Settings {
    /// Checks the command line; every error is a usage error.
    pub fn from_cli(cli: Cli) -> Result<Self> {
        let verbosity = match (cli.quiet, cli.verbose) {
            (true, _) => Verbosity::Quiet,
            (false, true) => Verbosity::Verbose,
            (false, false) => Verbosity::Normal,
        };
        let (job, files) = match cli.command {
            Command::Compress(a) => {
                let recipe = recipe_from(&a.model)?;
                let output = output_from(&a.output, a.files.len())?;
                let job = Job::Compress {
                    recipe: Box::new(recipe),
                    verify: a.verify,
                    output,
                };
                (job, a.files)
            }
            Command::Decompress(a) => {
                let output = output_from(&a.output, a.files.len())?;
                (Job::Decompress { output }, a.files)
            }
            Command::Test(a) => (Job::Test, a.files),
            Command::Info(a) => {
                if a.files.iter().any(|f| f.as_os_str() == "-") {
                    bail!("info reads files, not standard input (it seeks over the coded data)");
                }
                (Job::Info, a.files)
            }
        };
        let inputs = if files.is_empty() {
            vec![Input::Stdin]
        } else {
            files.into_iter().map(Input::from_arg).collect()
        };
        if inputs.iter().filter(|i| **i == Input::Stdin).count() > 1 {
            bail!("standard input can be read only once");
        }
        Ok(Settings {
            job,
            inputs,
            verbosity,
        })
    }
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

/// The recipe: the model kind's defaults with the given knobs applied, validated.
pub fn recipe_from(m: &ModelArgs) -> Result<Recipe> {
    let kind = m.model.unwrap_or(DEFAULT_MODEL);
    let mut recipe = Recipe::default_for(kind);
    recipe.model.set_size(m.hidden, m.layers);
    if let Some(seed) = m.seed {
        recipe.seed = seed;
    }
    let t = &mut recipe.training;
    if let Some(optimizer) = m.optimizer {
        t.optimizer = optimizer;
    }
    if let Some(lr) = m.lr {
        t.lr = lr;
    }
    if let Some(scope) = &m.scope {
        t.scope = Scope::parse(scope, kind.groups()).context("--scope")?;
    }
    if let Some(bptt) = m.bptt {
        t.bptt = bptt;
    }
    if let Some(clip) = m.clip {
        t.clip = clip;
    }
    recipe.validate().context("invalid model settings")?;
    Ok(recipe)
}

/// The output name of compressing `path`: `FILE.lmz`.
pub fn compressed_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lmz");
    PathBuf::from(name)
}

/// The output name of decompressing `path`: the name without its `.lmz` suffix.
pub fn decompressed_name(path: &Path) -> Result<PathBuf> {
    let file_name = path.file_name().unwrap_or_default();
    // Compare bytes, not UTF-8: a name need not be valid Unicode to end in ".lmz".
    let bytes = file_name.as_encoded_bytes();
    match bytes.strip_suffix(b".lmz") {
        Some([]) => bail!("has no name before its .lmz suffix (use -o to name the output)"),
        Some(_) => Ok(path.with_extension("")),
        None => bail!("has no .lmz suffix (use -o or -c to name the output)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(args: &[&str]) -> Result<Settings> {
        let cli = Cli::try_parse_from(std::iter::once("lmzip").chain(args.iter().copied()))?;
        Settings::from_cli(cli)
    }

    #[test]
    fn unset_knobs_take_the_defaults_and_set_ones_apply() {
        let s = settings(&[
            "compress", "--hidden", "16", "--layers", "1", "--lr", "0.01",
        ])
        .unwrap();
        let Job::Compress { recipe, .. } = s.job else {
            panic!("not compress")
        };
        let mut expected = Recipe::default_for(DEFAULT_MODEL);
        expected.model.set_size(Some(16), Some(1));
        expected.training.lr = 0.01;
        assert_eq!(*recipe, expected);
        assert_eq!(s.inputs, vec![Input::Stdin]);
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
            &["info", "-"],
        ] {
            assert!(settings(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn rm_and_keep_follow_the_last_one_given() {
        let rm = |args: &[&str]| match settings(args).unwrap().job {
            Job::Decompress { output } => output.remove_source,
            _ => unreachable!(),
        };
        assert!(rm(&["d", "--rm", "a.lmz"]));
        assert!(!rm(&["d", "--rm", "-k", "a.lmz"]));
        assert!(rm(&["d", "-k", "--rm", "a.lmz"]));
        assert!(!rm(&["d", "a.lmz"]));
    }

    #[test]
    fn names_are_derived_and_checked() {
        assert_eq!(
            compressed_name(Path::new("d/a.txt")),
            Path::new("d/a.txt.lmz")
        );
        assert_eq!(
            decompressed_name(Path::new("d/a.txt.lmz")).unwrap(),
            Path::new("d/a.txt")
        );
        assert_eq!(
            decompressed_name(Path::new("a.lmz")).unwrap(),
            Path::new("a")
        );
        assert!(decompressed_name(Path::new("d/.lmz")).is_err());
        assert!(decompressed_name(Path::new("a.txt")).is_err());
        assert!(decompressed_name(Path::new("a.LMZ")).is_err());
    }
}
