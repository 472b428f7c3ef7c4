//! Built-in priors: networks trained offline on text and code (docs/prior.md) whose weights
//! ship inside lmzip, so that the online network starts knowing something before the first
//! byte (the recipe key `prior=N` of a Mamba-1 base, `--prior NAME`).
//!
//! A prior is a model file in lmzip's native layout, its weights stored as F16 and widened to
//! f32 exactly (the same bits on every build), without optimizer state: the online run starts
//! its optimizer fresh, as from seeded weights. It holds the network's tensors at the sizes the
//! levels use, and its context tables (src/model/context.rs) at one size, which a run of
//! another `ctx` folds or spreads to its own ([`fit_rows`]).
//!
//! A prior's number is never reused: a new prior gets a new number and name, and the build
//! pins the SHA-256 of each prior's bytes and of its widened weights (checked by a test, and
//! each time a stream starts from it). A header names its prior by number in the recipe, and
//! the level form's CRC32 covers the prior's SHA-256 (src/compact.rs), so a build whose prior
//! under that number differed would refuse the file.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use safetensors::SafeTensors;
use sha2::{Digest, Sha256};

use crate::model::ModelConfig;
use crate::model::mamba1::{self, CONTEXT_EMBED};
use crate::modelfile::{ModelFile, RESUME_PREFIX};
use crate::params::{ParamSet, TensorSource};
use crate::recipe::hex;

/// One prior this build carries.
pub struct Prior {
    /// Its number in recipes (`prior=N`): never reused for other weights.
    pub number: usize,
    /// Its name for `--prior` and messages.
    pub name: &'static str,
    /// What it was trained on, in a few words (for `--version` and `info`).
    pub about: &'static str,
    /// The model file's bytes (safetensors, F16 weights).
    bytes: &'static [u8],
    /// SHA-256 of `bytes`, pinned when the prior was added.
    sha256: &'static str,
    /// SHA-256 of the expanded weights ([`expanded_sha256`]): the f32 bits every build starts
    /// from, checked on first use and by a test.
    expanded_sha256: &'static str,
}

/// The priors this build carries, by number.
static PRIORS: [Prior; 3] = [
    Prior {
        number: 1,
        name: "text1",
        about: "Mamba-1 64x1 (the default level's network), context tables of 2^9 rows; one pass \
            over 81.5 MB of permissive text and code from PyPI, crates.io and npm (docs/prior.md)",
        bytes: include_bytes!("../../priors/text1.safetensors"),
        sha256: "ec3575d41860d217e57f7dc14a16e02e0ad1033557ef44d06038766762c341e6",
        expanded_sha256: "e3021faa716c576a3c176f4f6e394bb983ef49139a77eac39f9ecce0281f9040",
    },
    Prior {
        number: 2,
        name: "text2",
        about: "Mamba-1 64x1 (the default level's network), context tables of 2^9 rows; text1 \
            trained on by `lmzip train` (8 streams, 64-byte windows, Adam at 0.001 falling to a \
            tenth) for one more pass over the same 81.5 MB (docs/prior.md)",
        bytes: include_bytes!("../../priors/text2.safetensors"),
        sha256: "5b89025ffa93344c9a0794ebf8378b98bb13c5f4acaaabef76f4eacce2b8aaee",
        expanded_sha256: "4e8f69512fbfc7ecbe00123caf3f235e12ecb262e3b694296cc0572a6a880b4e",
    },
    Prior {
        number: 3,
        name: "text32",
        about: "Mamba-1 32x1 (levels 1 and 2), context tables of 2^9 rows; trained by `lmzip train` \
            (8 streams, 64-byte windows, Adam at 0.003 falling to a tenth) for one pass over the \
            81.5 MB of text1 (docs/prior.md)",
        bytes: include_bytes!("../../priors/text32.safetensors"),
        sha256: "fe5fe4e263b76be4281c3021eb23bf9843253122a45c1384f4c3b668ef2f0a15",
        expanded_sha256: "ac537248e20f4f6a0fbdb6bd8495dcc3f3935fcb92daabc2e71f2ecaf91bff43",
    },
];

/// Every prior this build carries.
pub fn all() -> &'static [Prior] {
    &PRIORS
}

/// The prior of number `number`, if this build carries it.
pub fn by_number(number: usize) -> Option<&'static Prior> {
    PRIORS.iter().find(|p| p.number == number)
}

/// The prior called `name`, if this build carries it.
pub fn by_name(name: &str) -> Option<&'static Prior> {
    PRIORS.iter().find(|p| p.name == name)
}

/// The names of the priors this build carries, for messages.
pub fn names() -> String {
    match PRIORS.is_empty() {
        true => "none".into(),
        false => PRIORS.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    }
}

impl Prior {
    /// The pinned SHA-256 of the prior's bytes, in hex.
    pub fn sha256(&self) -> &'static str {
        self.sha256
    }

    /// The prior's tensors, widened to f32 and checked against both pinned hashes. Made
    /// afresh for each stream that starts from the prior (a millisecond or two) and dropped
    /// once the weights are filled, so that no process keeps it.
    pub fn file(&self) -> Result<ModelFile> {
        let actual = hex(Sha256::digest(self.bytes).as_slice());
        if actual != self.sha256 {
            bail!(
                "built-in prior {} is damaged: SHA-256 {actual}, expected {}",
                self.name,
                self.sha256
            );
        }
        let file = ModelFile::from_bytes(self.bytes)
            .with_context(|| format!("built-in prior {}", self.name));
        crate::pages::release(self.bytes);
        let file = file?;
        // The widening is exact by construction; checking its result too guards every build
        // against a changed conversion.
        let expanded = expanded_sha256(&file);
        if expanded != self.expanded_sha256 {
            bail!(
                "built-in prior {} expands to other weights on this build (SHA-256 {expanded}, \
                 expected {})",
                self.name,
                self.expanded_sha256
            );
        }
        Ok(file)
    }

    /// The sizes of the prior's network, read off its tensors' shapes without widening them.
    pub fn config(&self) -> Result<mamba1::Config> {
        let (_, meta) = SafeTensors::read_metadata(self.bytes)
            .map_err(|e| anyhow::anyhow!("built-in prior {}: {e}", self.name))?;
        let shapes = Shapes(
            meta.tensors()
                .into_iter()
                .map(|(name, info)| (name, info.shape.clone()))
                .collect(),
        );
        mamba1::Config::infer(&shapes)
    }

    /// Floats the expanded prior holds while a stream starts from it (for the memory estimate).
    pub fn floats(&self) -> usize {
        // F16: two bytes per value; the header is small beside the data.
        self.bytes.len() / 2
    }
}

/// Tensor shapes by name: what a network's sizes are inferred from.
struct Shapes(BTreeMap<String, Vec<usize>>);

impl TensorSource for Shapes {
    fn tensor_shape(&self, name: &str) -> Option<&[usize]> {
        self.0.get(name).map(Vec::as_slice)
    }
}

/// SHA-256 over the tensors of an expanded model file, in name order: each name's bytes, then
/// its values as little-endian f32.
pub fn expanded_sha256(file: &ModelFile) -> String {
    let mut h = Sha256::new();
    for (name, t) in &file.tensors {
        h.update(name.as_bytes());
        for x in &t.data {
            h.update(x.to_le_bytes());
        }
    }
    hex(h.finalize().as_slice())
}

/// Checks that the prior a config names exists in this build and fits the config's sizes: a
/// header naming another one is refused here, before anything is allocated.
pub fn check(config: &ModelConfig) -> Result<()> {
    let number = config.prior();
    if number == 0 {
        return Ok(());
    }
    let Some(prior) = by_number(number) else {
        bail!(
            "this stream starts from built-in prior number {number}, which this build does not \
             carry (it carries: {}); a newer lmzip may",
            names()
        );
    };
    let ModelConfig::Mamba1(cfg) = config else {
        bail!("built-in priors are Mamba-1 networks");
    };
    let theirs = prior.config()?;
    if !same_but_context(&theirs, cfg) {
        bail!(
            "built-in prior {} is a network of other sizes (hidden {}, layers {}, \
             intermediate {}, state {}, conv {}, dt_rank {})",
            prior.name,
            theirs.hidden,
            theirs.layers,
            theirs.inner,
            theirs.state,
            theirs.conv,
            theirs.dt_rank
        );
    }
    Ok(())
}

/// Leaves a config's prior out when the config's sizes are not the prior's (a level's sizes
/// edited): a prior comes with the network it was trained as.
pub fn keep_if_it_fits(config: &mut ModelConfig) {
    if config.prior() != 0
        && check(config).is_err()
        && let ModelConfig::Mamba1(cfg) = config
    {
        cfg.prior = 0;
    }
}

fn same_but_context(a: &mamba1::Config, b: &mamba1::Config) -> bool {
    let sizes = |c: &mamba1::Config| (c.hidden, c.layers, c.inner, c.state, c.conv, c.dt_rank);
    sizes(a) == sizes(b)
}

/// Starts `params` (a network of `config`'s sizes, seeded) from the prior the config names:
/// every tensor the prior holds replaces the seeded one, the context tables fitted to the
/// config's rows (or left out, for a network without context inputs). Tensors the prior lacks
/// keep their seeded values.
pub fn start_from(config: &ModelConfig, params: &mut ParamSet) -> Result<()> {
    match named_file(config)? {
        Some(file) => apply(&file, params),
        None => Ok(()),
    }
}

/// [`start_from`] for a network without the coder's output bias (the offline trainer's, which
/// trains the network alone): the prior's bias is left out, the rest applied.
pub fn start_network_from(config: &ModelConfig, params: &mut ParamSet) -> Result<()> {
    let Some(mut file) = named_file(config)? else {
        return Ok(());
    };
    file.tensors.remove(crate::predictor::OUTPUT_BIAS);
    apply(&file, params)
}

/// The tensors of the prior `config` names, checked against its sizes; `None` for no prior.
fn named_file(config: &ModelConfig) -> Result<Option<ModelFile>> {
    if config.prior() == 0 {
        return Ok(None);
    }
    check(config)?;
    by_number(config.prior()).expect("checked").file().map(Some)
}

/// Fills `params` from the tensors of `file` (a prior's, or a test's): the tensors of equal
/// shape copied, the context tables fitted ([`fit_rows`]). A tensor of another shape, or one
/// the network does not have, is an error.
pub fn apply(file: &ModelFile, params: &mut ParamSet) -> Result<()> {
    for (name, tensor) in &file.tensors {
        if name.starts_with(RESUME_PREFIX) {
            continue;
        }
        let Some(info) = params.find(name).cloned() else {
            if name == CONTEXT_EMBED {
                continue; // a network without context inputs starts from the rest
            }
            bail!("the prior has tensor {name}, which this network does not have");
        };
        let out = params.get_mut(info.slot);
        if tensor.shape == info.shape {
            out.copy_from_slice(&tensor.data);
        } else if name == CONTEXT_EMBED && tensor.shape.len() == 2 && info.shape.len() == 2 {
            let (from_rows, to_rows) = (tensor.shape[0], info.shape[0]);
            if tensor.shape[1] != info.shape[1] {
                bail!("the prior's {name} rows have another width");
            }
            fit_rows(&tensor.data, from_rows, out, to_rows)?;
        } else {
            bail!(
                "the prior's {name} has shape {:?}, the network's {:?}",
                tensor.shape,
                info.shape
            );
        }
    }
    Ok(())
}

/// Fits context tables of `from_rows` rows (the tables laid end to end, each a power of two)
/// to `to_rows` rows. A context's row is the top bits of its hash (src/model/context.rs), so a
/// row of the smaller table covers the rows of the larger one that share its top bits: shrinking
/// averages them (summed in order, then scaled by a power of two: exact and the same on every
/// build), growing copies each row to all the rows it covers.
pub fn fit_rows(from: &[f32], from_rows: usize, to: &mut [f32], to_rows: usize) -> Result<()> {
    let tables = crate::model::context::TABLES;
    let (per_from, per_to) = (from_rows / tables, to_rows / tables);
    if per_from * tables != from_rows
        || per_to * tables != to_rows
        || !per_from.is_power_of_two()
        || !per_to.is_power_of_two()
    {
        bail!("context tables of {from_rows} and {to_rows} rows do not fit one another");
    }
    let width = from.len() / from_rows;
    debug_assert_eq!(to.len(), to_rows * width);
    for t in 0..tables {
        for r in 0..per_to {
            let dst = &mut to[(t * per_to + r) * width..][..width];
            if per_to >= per_from {
                let src = t * per_from + r / (per_to / per_from);
                dst.copy_from_slice(&from[src * width..][..width]);
            } else {
                let group = per_from / per_to;
                dst.fill(0.0);
                for k in 0..group {
                    let src = &from[(t * per_from + r * group + k) * width..][..width];
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d += s;
                    }
                }
                let scale = 1.0 / group as f32;
                dst.iter_mut().for_each(|d| *d *= scale);
            }
        }
    }
    Ok(())
}

/// Bytes of an input's start that decide whether a level's prior suits it ([`suits`]).
pub const SAMPLE: usize = 64 << 10;

/// Most control bytes (other than tab, line feed, form feed and carriage return) in a thousand
/// that text may hold for a prior of text and code to suit it ...
const MAX_CONTROLS_PER_MILLE: usize = 10;

/// ... or, in ASCII text with escape sequences (terminal sessions, coloured logs), with at most
/// [`MAX_HIGH_PER_MILLE_WITH_CONTROLS`] bytes above 0x7F in a thousand.
const MAX_ESCAPES_PER_MILLE: usize = 100;
const MAX_HIGH_PER_MILLE_WITH_CONTROLS: usize = 10;

/// Runs of at least this many printable ASCII bytes (and tab, line feed, carriage return) are
/// strings ([`strings`]).
const STRING_RUN: usize = 8;

/// Bytes in a thousand that binary data must hold in strings for a prior of text and code to
/// suit it: files that carry their names and messages as text (compiled Python, message
/// catalogues, object files and databases of strings) gain by it, 1–13%; machine code, tables
/// of numbers and compressed data, with about one byte in ten in strings or fewer, lose or gain
/// nothing (docs/experiments.md, "The prior for binaries with strings").
const MIN_STRINGS_PER_MILLE: usize = 200;

/// Whether a prior trained on text and code suits an input that starts with `sample`: text
/// ([`is_text`]), or binary data of which a fifth is in strings. Executables, spreadsheets,
/// compressed and other binary data have many control and high bytes and few strings, and a
/// prior of text cost them up to 4.5% (docs/experiments.md, "A built-in prior"); x86 machine
/// code, with the stage for it, gains by the prior after all, which the encoder decides from
/// its detection ([`crate::codec::compress`]). An empty sample suits (nothing is coded).
pub fn suits(sample: &[u8]) -> bool {
    is_text(sample) || strings(sample) * 1000 >= sample.len() * MIN_STRINGS_PER_MILLE
}

/// Whether `sample` is text: ASCII or UTF-8 has almost no control bytes, and ASCII text with
/// escape sequences no high bytes. Binary data that the prior suits otherwise (by its strings)
/// keeps its level's seeded training from the prior where the networks are the same: the
/// training for text over windows to 32 bytes wrote 0.1–0.7% less on it but took 0.7 MiB more
/// (a 64 KiB input over 32 MiB; docs/experiments.md, "The prior for binaries with strings").
pub fn is_text(sample: &[u8]) -> bool {
    let controls = sample
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | 0x0c | b'\r')) || b == 0x7f)
        .count();
    let high = sample.iter().filter(|&&b| b >= 0x80).count();
    let per_mille = |n: usize, most: usize| n * 1000 <= sample.len() * most;
    per_mille(controls, MAX_CONTROLS_PER_MILLE)
        || (per_mille(controls, MAX_ESCAPES_PER_MILLE)
            && per_mille(high, MAX_HIGH_PER_MILLE_WITH_CONTROLS))
}

/// Bytes of `sample` in runs of at least [`STRING_RUN`] printable ASCII bytes.
fn strings(sample: &[u8]) -> usize {
    let printable = |b: u8| matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r');
    let (mut total, mut run) = (0, 0);
    for &b in sample {
        if printable(b) {
            run += 1;
        } else {
            total += if run >= STRING_RUN { run } else { 0 };
            run = 0;
        }
    }
    total + if run >= STRING_RUN { run } else { 0 }
}

/// `recipe` with its network started from seeded weights instead of a prior.
pub fn without(recipe: &crate::recipe::Recipe) -> crate::recipe::Recipe {
    with_number(recipe, 0)
}

/// `recipe` with its Mamba-1 network starting from the prior of number `number` (0: none); a
/// recipe of another base is returned as it is.
pub fn with_number(recipe: &crate::recipe::Recipe, number: usize) -> crate::recipe::Recipe {
    let mut recipe = recipe.clone();
    if let crate::recipe::Base::Fresh {
        config: ModelConfig::Mamba1(cfg),
        ..
    } = &mut recipe.base
    {
        cfg.prior = number;
    }
    recipe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_rows_shrinks_by_averaging_and_grows_by_copying() {
        // Three tables of 4 rows, width 2: row r of table t holds (10t + r, -(10t + r)).
        let from: Vec<f32> = (0..3)
            .flat_map(|t| (0..4).flat_map(move |r| [(10 * t + r) as f32, -((10 * t + r) as f32)]))
            .collect();
        let mut small = vec![0.0; 3 * 2 * 2];
        fit_rows(&from, 12, &mut small, 6).unwrap();
        // Table 1, row 1 averages rows 2 and 3: (12 + 13) / 2.
        assert_eq!(small[(2 + 1) * 2], 12.5);
        assert_eq!(small[(2 + 1) * 2 + 1], -12.5);
        let mut big = vec![0.0; 3 * 8 * 2];
        fit_rows(&from, 12, &mut big, 24).unwrap();
        // Table 2, rows 6 and 7 are row 3 of the prior's table 2.
        assert_eq!(
            &big[(16 + 6) * 2..(16 + 8) * 2],
            &[23.0, -23.0, 23.0, -23.0]
        );
        let mut same = vec![0.0; 24];
        fit_rows(&from, 12, &mut same, 12).unwrap();
        assert_eq!(same, from);
    }

    #[test]
    fn fit_rows_refuses_tables_that_do_not_fit() {
        let from = vec![0.0; 12 * 2];
        let mut to = vec![0.0; 9 * 2];
        assert!(fit_rows(&from, 12, &mut to, 9).is_err());
    }

    fn tiny(ctx: usize, hidden: usize) -> mamba1::Config {
        mamba1::Config {
            hidden,
            layers: 1,
            inner: 2 * hidden,
            state: 4,
            conv: 4,
            dt_rank: 2,
            ctx,
            prior: 0,
        }
    }

    fn as_file(params: &ParamSet) -> ModelFile {
        let bytes = crate::modelfile::to_bytes(params, &[], &Default::default()).unwrap();
        ModelFile::from_bytes(&bytes).unwrap()
    }

    #[test]
    fn apply_copies_every_tensor_and_fits_the_context_tables() {
        use crate::model::mamba1::Mamba1;
        let (_, trained) = Mamba1::new_random(tiny(9, 8), 7).unwrap();
        let file = as_file(&trained);
        let (_, mut params) = Mamba1::new_random(tiny(8, 8), 1).unwrap();
        apply(&file, &mut params).unwrap();
        for t in &params.tensors {
            let theirs = trained.get(trained.find(&t.name).unwrap().slot);
            let ours = params.get(t.slot);
            if t.name == CONTEXT_EMBED {
                // Row 0 of the 2^8-row table averages rows 0 and 1 of the 2^9-row one.
                for c in 0..8 {
                    assert_eq!(ours[c], (theirs[c] + theirs[8 + c]) * 0.5);
                }
            } else {
                assert_eq!(ours, theirs, "{}", t.name);
            }
        }
    }

    #[test]
    fn apply_refuses_a_network_of_other_sizes() {
        use crate::model::mamba1::Mamba1;
        let (_, trained) = Mamba1::new_random(tiny(9, 8), 7).unwrap();
        let (_, mut params) = Mamba1::new_random(tiny(9, 16), 1).unwrap();
        let e = apply(&as_file(&trained), &mut params)
            .unwrap_err()
            .to_string();
        assert!(e.contains("shape"), "{e}");
    }

    #[test]
    fn text_and_code_suit_a_prior_and_binary_data_does_not() {
        assert!(suits(b""));
        assert!(suits(
            "fn main() {\n\tprintln!(\"héllo\");\r\n}\n".as_bytes()
        ));
        let mut text = b"plain text ".repeat(100);
        assert!(suits(&text));
        // ASCII text with escape sequences suits: a terminal session.
        let mut session = b"\x1b[1mls\x1b[0m -l: total 48, drwxr-xr-x src\n".repeat(50);
        assert!(suits(&session));
        assert!(is_text(&text) && is_text(&session));
        // Text with a few binary bytes is no longer text, but still mostly strings.
        text.extend_from_slice(&[0u8; 12]);
        text.extend_from_slice(&[0xE9; 12]);
        assert!(suits(&text) && !is_text(&text));
        session.extend_from_slice(&[0x80; 60]);
        assert!(suits(&session) && !is_text(&session));
        // Short runs between control bytes (one in six) are not text, nor with bytes above
        // 0x7F among escape sequences (one control byte in sixteen).
        assert!(!suits(&b"ab cd\x01".repeat(200)));
        assert!(!suits(&b"\x1b[1mls\xe9 -l\xe9x".repeat(100)));
        let binary: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        assert!(!suits(&binary));
        // Binary data suits where a fifth of it is in strings of 8 printable bytes or more, as
        // in compiled Python or a message catalogue; shorter runs do not count.
        let mut strings = binary.clone();
        strings.extend(b"\0\x01\xfe\x02name_of_a_function\x03".repeat(80));
        assert!(suits(&strings) && !is_text(&strings));
        let mut short = binary.clone();
        short.extend(b"\0\x01\xfe\x02a_name\x03".repeat(120));
        assert!(!suits(&short));
        let mut few = binary;
        few.extend(b"\0\x01\xfe\x02name_of_a_function\x03".repeat(30));
        assert!(!suits(&few));
    }

    #[test]
    fn every_prior_expands_to_its_pinned_bits() {
        for p in all() {
            let file = p.file().unwrap();
            assert_eq!(
                expanded_sha256(&file),
                p.expanded_sha256,
                "prior {}",
                p.name
            );
            assert_eq!(p.config().unwrap(), mamba1::Config::infer(&file).unwrap());
            // Its sizes serve a level, and every tensor fills a network of them.
            check(&ModelConfig::Mamba1(mamba1::Config {
                prior: p.number,
                ..mamba1::Config::infer(&file).unwrap()
            }))
            .unwrap();
        }
    }

    #[test]
    fn an_unknown_prior_is_refused_by_number() {
        let cfg = ModelConfig::Mamba1(mamba1::Config {
            prior: 200,
            ..mamba1::Config::default()
        });
        let e = check(&cfg).unwrap_err().to_string();
        assert!(e.contains("prior number 200"), "{e}");
        assert!(check(&ModelConfig::Mamba1(mamba1::Config::default())).is_ok());
    }
}
