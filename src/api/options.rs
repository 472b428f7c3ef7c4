//! [`Options`]: what a compression is made of (level, model, recipe, model file) and how it
//! runs (threads, announced length); and the level's recipe with the user's edits, which the
//! command line builds through the same function.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::error::{Error, Otherwise, classify};
use crate::levels;
use crate::modelfile::Weights;
use crate::pool::{MAX_THREADS, Pool};
use crate::recipe::{self, ModelKind, Recipe};

/// How to compress (and, for [`crate::Decoder::with_options`], the model file and threads a
/// decompression uses).
///
/// A builder: each method returns the changed options. What is not set takes the command
/// line's defaults, so `Options::new().level(N)` writes the bytes `lmzip -N` writes.
///
/// ```
/// use lmzip::{ModelKind, Options};
///
/// let options = Options::new().level(2).model(ModelKind::Mamba1).threads(1);
/// let text = options.recipe_text().unwrap();
/// assert!(text.starts_with("mamba1 "), "{text}");
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    level: u8,
    model: Option<ModelKind>,
    recipe: Option<String>,
    threads: usize,
    weights: Option<Arc<Weights>>,
    size: Option<u64>,
    memory_limit: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            level: levels::DEFAULT_LEVEL,
            model: None,
            recipe: None,
            threads: 1,
            weights: None,
            size: None,
            memory_limit: None,
        }
    }
}

impl Options {
    /// The defaults: level 3, Mamba-1 (or the model file's kind), one thread.
    pub fn new() -> Self {
        Self::default()
    }

    /// The compression level, 1 (fastest) to 9 (best ratio), as `lmzip -1` … `-9`. A level
    /// out of range is refused when the options are used ([`Error::InvalidOptions`]).
    pub fn level(mut self, level: u8) -> Self {
        self.level = level;
        self
    }

    /// The network, as `--model`: when the recipe text or the model file names another,
    /// the options are refused.
    pub fn model(mut self, kind: ModelKind) -> Self {
        self.model = Some(kind);
        self
    }

    /// Recipe text, as `--recipe` (docs/recipes.md): what it leaves out comes from the level.
    /// A `file:PATH` base loads that model file when the options are used.
    ///
    /// ```
    /// let options = lmzip::Options::new().recipe("cfg:hidden=16 0..:infer");
    /// assert!(options.recipe_text().unwrap().contains("hidden=16"));
    /// ```
    pub fn recipe(mut self, text: impl Into<String>) -> Self {
        self.recipe = Some(text.into());
        self
    }

    /// Threads the network's products split over, as `-T` without `--block-size`: 0 means
    /// one per core; the default is 1. The output is the same for every count. With 1, the
    /// calling thread's pool, if it has one installed, is used.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Starts from a model file, as `--weights` (compression: the header records its SHA-256;
    /// decompression: a stream that starts from a model file needs the same file). Loaded
    /// now: a file that does not load is [`Error::ModelFile`].
    pub fn weights_file(mut self, path: impl AsRef<Path>) -> Result<Self, Error> {
        let weights =
            Weights::open(path.as_ref()).map_err(|e| Error::ModelFile(format!("{e:#}")))?;
        self.weights = Some(Arc::new(weights));
        Ok(self)
    }

    /// The input's length, when known before it is written to an [`crate::Encoder`], as
    /// `--size`: recipes with positions in percent need it, the mixing stage's tables are
    /// sized for it (the recipe's key `cap`, unless the recipe text gives `table`, `match`,
    /// `fit` or `cap` itself), and the input must then have exactly this length
    /// ([`Error::InvalidOptions`] from [`crate::Encoder::finish`]). [`crate::compress`] sets
    /// it from its input; without it an [`crate::Encoder`] uses the level's sizes.
    pub fn size(mut self, len: u64) -> Self {
        self.size = Some(len);
        self
    }

    /// Most memory, in bytes, that decoding a stream may need, as `--memory`: a
    /// [`crate::Decoder`] refuses a member that needs more before it allocates anything for
    /// it, and an [`crate::Encoder`] refuses to write one ([`Error::MemoryLimit`]). What a
    /// stream needs is its model's and its stage's working memory and one frame's buffers
    /// (`lmzip info` shows it); with a known length ([`Options::size`]) the stage is sized
    /// for the input, so a small input needs little.
    ///
    /// ```
    /// let packed = lmzip::compress(&[7u8; 5000], &lmzip::Options::new())?;
    /// let roomy = lmzip::Options::new().memory_limit(256 << 20);
    /// assert_eq!(lmzip::decompress_with(&packed, &roomy)?, [7u8; 5000]);
    /// let tight = lmzip::Options::new().memory_limit(4 << 20);
    /// let err = lmzip::decompress_with(&packed, &tight).unwrap_err();
    /// assert!(matches!(err, lmzip::Error::MemoryLimit { .. }), "{err}");
    /// # Ok::<(), lmzip::Error>(())
    /// ```
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// The canonical recipe these options compress with, as `lmzip info` shows it (for an
    /// input of the announced length, if one is).
    pub fn recipe_text(&self) -> Result<String, Error> {
        Ok(self.prepare()?.0.to_text())
    }

    /// Whether the recipe text holds `key` (say `prior=`): what it names, the input does not
    /// choose.
    pub(crate) fn recipe_names(&self, key: &str) -> bool {
        self.recipe.as_deref().is_some_and(|t| t.contains(key))
    }

    /// Whether the recipe text gives rules of its own (how the network trains).
    pub(crate) fn recipe_gives_rules(&self) -> bool {
        self.recipe
            .as_deref()
            .is_some_and(crate::recipe::names_rules)
    }

    /// The announced length, if any.
    pub(crate) fn announced_len(&self) -> Option<u64> {
        self.size
    }

    /// The memory limit, if any.
    pub(crate) fn memory(&self) -> Option<u64> {
        self.memory_limit
    }

    /// The model file to decode with: the one given, if any.
    pub(crate) fn weights(&self) -> Option<Arc<Weights>> {
        self.weights.clone()
    }

    /// The recipe of a compression, its positions in bytes, and the model file it starts
    /// from (given, or named by the recipe text).
    pub(crate) fn prepare(&self) -> Result<(Recipe, Option<Arc<Weights>>), Error> {
        let weights = self.model_file()?;
        let mut recipe = self.recipe_from(false, weights.as_deref())?;
        // As on the command line: sizes or a model file that leave the level's prior out take
        // the level's seeded network, whose training suits a network that does not start
        // from one.
        if recipe.config().prior() == 0 && !self.recipe_names("prior=") {
            recipe = self.recipe_from(true, weights.as_deref())?;
        }
        Ok((recipe, weights))
    }

    /// The recipe for inputs the level's prior does not suit ([`levels::seeded_recipe`]), made
    /// as [`Self::prepare`] makes the recipe; `None` where the prior is not the level's to
    /// choose: the recipe text names one, or the run starts from a model file.
    pub(crate) fn prepare_seeded(&self) -> Result<Option<Recipe>, Error> {
        let model_file =
            self.weights.is_some() || self.recipe.as_deref().and_then(recipe::file_path).is_some();
        if model_file || self.recipe_names("prior=") {
            return Ok(None);
        }
        self.recipe_from(true, None).map(Some)
    }

    /// The model file the run starts from: the one given, or the one the recipe text names
    /// (`file:PATH`), loaded.
    fn model_file(&self) -> Result<Option<Arc<Weights>>, Error> {
        let named = self.recipe.as_deref().and_then(recipe::file_path);
        match (&self.weights, named) {
            (Some(_), Some(_)) => Err(Error::InvalidOptions(
                "the model file is given twice (weights_file and file: in the recipe)".into(),
            )),
            (Some(w), None) => Ok(Some(Arc::clone(w))),
            (None, Some(path)) => Weights::open(Path::new(path))
                .map(|w| Some(Arc::new(w)))
                .map_err(|e| Error::ModelFile(format!("{e:#}"))),
            (None, None) => Ok(None),
        }
    }

    /// The recipe from the level's recipe, or from its seeded one, over `weights`: edited by
    /// the recipe text, validated, and sized for the announced length.
    fn recipe_from(&self, seeded: bool, weights: Option<&Weights>) -> Result<Recipe, Error> {
        if !(1..=levels::MAX_LEVEL).contains(&self.level) {
            return Err(Error::InvalidOptions(format!(
                "there is no level {}: levels go from 1 (fastest) to {} (best ratio)",
                self.level,
                levels::MAX_LEVEL
            )));
        }
        let names = Names {
            model: "Options::model",
            recipe: "recipe",
        };
        let network_of = match seeded {
            true => levels::seeded_recipe,
            false => levels::recipe,
        };
        level_recipe(
            network_of,
            self.model,
            self.level,
            self.recipe.as_deref(),
            weights,
            names,
        )
        .and_then(|mut r| {
            if let Some(mix) = r.mix.as_mut() {
                let named = self.recipe_names("warm=");
                crate::mix::warm::settle_with_x86(mix, named);
            }
            r.validate().context("invalid model settings")?;
            let fit = !self
                .recipe
                .as_deref()
                .is_some_and(recipe::names_stage_sizes);
            Ok(crate::fit::for_input(&r, self.size, fit)?)
        })
        .map_err(|e| classify(e, Otherwise::InvalidOptions))
    }

    /// A pool of the threads asked for, when more than one; with one, `None` (the caller's
    /// pool, if any, serves).
    pub(crate) fn pool(&self) -> Result<Option<Pool>, Error> {
        let threads = match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        if threads > MAX_THREADS {
            return Err(Error::InvalidOptions(format!(
                "{threads} threads: at most {MAX_THREADS} are supported"
            )));
        }
        if threads == 1 {
            return Ok(None);
        }
        Pool::new(threads).map(Some).map_err(Error::Io)
    }
}

/// How messages name where a model kind and the recipe text came from (`--model` and
/// `--recipe` on the command line).
#[derive(Clone, Copy)]
pub(crate) struct Names<'a> {
    pub model: &'a str,
    pub recipe: &'a str,
}

/// The recipe of `level` for the model kind that the caller (`kind`), the recipe text and the
/// model file agree on (by default [`levels::DEFAULT_MODEL`]), taken from the level by
/// `network_of` ([`levels::recipe`], or [`levels::seeded_recipe`] for inputs the level's prior
/// does not suit) and edited by the text; or, with a model file and no text, the level's
/// schedule over the file. Not validated: the command line edits it further first.
pub(crate) fn level_recipe(
    network_of: fn(ModelKind, u8) -> Recipe,
    kind: Option<ModelKind>,
    level: u8,
    text: Option<&str>,
    weights: Option<&Weights>,
    names: Names<'_>,
) -> anyhow::Result<Recipe> {
    let file_base = weights
        .map(|w| w.base())
        .transpose()
        .context("cannot use the model file")?;
    let from_file = file_base.as_ref().map(|b| b.config().kind());
    let from_text = text.and_then(recipe::declared_kind);
    let mut agreed = None;
    for (source, k) in [
        (names.model, kind),
        ("the recipe", from_text),
        ("the model file", from_file),
    ] {
        match (agreed, k) {
            (Some((first, k0)), Some(k1)) if k0 != k1 => bail!(
                "{first} names {}, but {source} {}",
                ModelKind::name(k0),
                if source == "the model file" {
                    format!("holds {}", k1.name())
                } else {
                    format!("names {}", k1.name())
                }
            ),
            (None, Some(k1)) => agreed = Some((source, k1)),
            _ => {}
        }
    }
    let kind = agreed.map_or(levels::DEFAULT_MODEL, |(_, k)| k);
    let template = network_of(kind, level);
    Ok(match (text, file_base) {
        (Some(text), file) => template
            .edit_from_level(text, file.as_ref())
            .map_err(anyhow::Error::new)
            .context(names.recipe.to_string())?,
        (None, Some(file)) => Recipe {
            base: file,
            ..template
        },
        (None, None) => template,
    })
}
