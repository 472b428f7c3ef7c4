//! Compression levels `-1` … `-9`: one table of recipes, from fast to the best ratio this kind
//! of machine runs at a few KB/s. Each entry is recipe text applied onto the model's default
//! sizes (docs/recipes.md); the level used when none is given is [`DEFAULT_LEVEL`], whose
//! recipe is lmzip's measured default.
//!
//! The Mamba-1 recipes are measured on whole files (README, "Levels"); the RWKV-7 ones follow
//! them in whole heads of 64 (level 3 is one 128-wide block rather than two 96-wide ones) and
//! are measured at level 4 only.
//!
//! A file written at a level stores only the level and what differs from it (src/compact.rs),
//! so what each level means is part of the numerics version: a change here must bump
//! `format::NUMERICS_VERSION`, as tests/golden_files.rs (the empty input at every level)
//! reminds, and [`recipe_of`] keeps what the levels meant in the older versions this build
//! still decodes. Headers also carry the CRC32 of the recipe, so a build that forgets refuses
//! old files instead of decoding them with another model.

use crate::recipe::{Action, Base, ModelConfig, ModelKind, Recipe, TrainSpec};

/// The level used when none is given.
pub const DEFAULT_LEVEL: u8 = 3;
/// The model used when neither the caller, the recipe nor a model file names one.
pub const DEFAULT_MODEL: ModelKind = ModelKind::Mamba1;
/// Levels run from 1 to this.
pub const MAX_LEVEL: u8 = 9;

/// One level: the recipe text for each model.
pub struct Level {
    /// Mamba-1's recipe; when it starts from a built-in prior, for the inputs the prior suits
    /// ([`crate::prior::suits`]).
    pub mamba1: &'static str,
    /// Mamba-1's recipe for the inputs the prior does not suit, when that is another network
    /// than `mamba1`'s without its prior ([`seeded_recipe`]).
    pub mamba1_seeded: Option<&'static str>,
    pub rwkv7: &'static str,
}

/// The training rule of every level at learning rate `$lr`: RMSprop-like Adam (β1 0, β2
/// 0.9995 reached by warm-up, ε 1e-6), the rate decaying as `max(1/sqrt(1 + 0.0004·t), 0.3)`
/// over t steps, and TBPTT windows growing from 4 to 16 bytes (docs/recipes.md); a network
/// from a prior takes other windows and floor (`train_from_prior!`). Measured
/// against plain Adam (β1 0.9, β2 0.999, ε 1e-8) at half the rate, fixed 16-byte windows: with
/// the network alone at level 5, 7.7% fewer bytes over prefixes of six files of five kinds, each
/// smaller (docs/experiments.md, "Training schedules"). The live state is carried on after each
/// update (`state=carry`) rather than rebuilt by a second forward pass: the same ratio with the
/// mixing stage, measured on six files of five kinds, for about a fifth less of the network's
/// time.
/// Each byte's loss weighs by the bits the coder spent on it (`focus=1`: full weight from one
/// bit on, at least 0.2): with the stage, 0.29% fewer bytes over five files of four kinds at
/// the default (every file smaller; enwik6 −0.33%, obj2 −0.65%), 0.37% at level 1, for no
/// measurable time (docs/experiments.md, 2026-12-02).
/// `$lrmul`, as the key `lrmul` takes it, gives per-group rates; without it every group trains
/// at `$lr` (`lrmul=1`, which the canonical text leaves out).
macro_rules! train {
    ($lr:literal) => {
        train!($lr, "1")
    };
    ($lr:literal, $lrmul:literal) => {
        train!($lr, $lrmul, "16", "0.3")
    };
    ($lr:literal, $lrmul:literal, $bptt:literal, $floor:literal) => {
        concat!(
            "0..:train(lr=",
            $lr,
            ",bptt=",
            $bptt,
            ",state=carry,b1=0,b2=0.9995,eps=1e-6,b2warm=1,decay=0.0004,floor=",
            $floor,
            ",bptt0=4,grow=12,lrmul=",
            $lrmul,
            ",focus=1)"
        )
    };
}

/// The per-group rates of the larger levels: the embedding, the output projection and the
/// output bias learn four times as fast as the blocks, whose rate drops from 1e-3 to 7e-4.
/// With the stage, on 100 KB prefixes of six files of five kinds at 128×3: 0.25% fewer bytes
/// in all (sum −1.8%, kennedy.xls −4.2%, text and E.coli within ±0.1%); with the network
/// alone 3.3% (docs/experiments.md, "Per-group rates"). The smaller networks gained nothing from them with
/// the stage (64×1 −0.02%, 96×2 at 1e-3 −0.05%), so levels 1–4 go without; the RWKV-7 levels
/// too, as they were measured with the network alone only.
macro_rules! train_fast_ends {
    () => {
        train!("0.0007", "embed*4+head*4+bias*4")
    };
}

/// The training of a network that starts from a prior (every level's for the inputs its prior
/// suits): TBPTT windows growing to 32 bytes at 0.0014, the floor raised so that the late rate
/// stays 0.0006. Against the training of seeded networks (windows to 16 at 0.002), at the
/// default with the same header: book1[:100K], enwik6[:100K], paper1 and progc 0.59% fewer
/// bytes, each file smaller; whole book1 −0.05%, enwik6 −0.22%; no slower, the longer windows
/// doing the same products in larger batches (docs/experiments.md, "Two networks per level").
/// Levels 1 and 2 from `text32`: each of those files smaller too, book1 −0.03% and −0.02%,
/// enwik6 −0.23% and −0.22%. Half the rate gained more on the small files but lost on book1;
/// the lower rate over windows to 16 lost on book1 too; the old rate with the longer windows
/// lost on progc.
macro_rules! train_from_prior {
    () => {
        train!("0.0014", "1", "32", "0.43")
    };
}

/// The network of levels 3–9 for inputs their prior suits: a 64-wide block started from the
/// prior `text2`. The larger seeded networks of levels 4–9 lost to it on text and code by 7%.
/// `$mix` is the level's stage item (levels 4–9: `larger_stage`'s).
macro_rules! prior_network_trained_longer {
    () => {
        prior_network_trained_longer!("mix:warm=1 ")
    };
    ($mix:expr) => {
        concat!(
            "cfg:hidden=64,layers=1,state=8,conv=8,ctx=14,prior=2 ",
            $mix,
            train_from_prior!()
        )
    };
}

/// The stage of levels 4–9: counter tables of 2^23 (twice the default's) and, for an input of
/// known length, `cap` one above the default's ([`crate::fit::fitted`]), and a mixer selector
/// by the last byte and the bits so far (`partial`). enwik6 then needs 209 MiB to decode
/// instead of 98: book1 −0.54%, enwik6 −0.55%, obj2 −1.1% against the default, for about 5%
/// more time (docs/experiments.md, "Levels 4–9 take twice the memory" and "Counters with a
/// long memory, and a selector by the bits so far").
macro_rules! larger_stage {
    () => {
        "mix:table=23,partial=1,warm=1 "
    };
}

/// Levels 1 to 9, fastest first. Every level mixes the network with the context statistics of
/// the mixing stage (src/mix), which carries most of the ratio: with it, a 64-wide one-block
/// network comes within 0.5% of a 128-wide three-block one on book1 at a fifth of the time
/// (docs/experiments.md, "Levels as measured until 2026-12-02"). So the fast levels shrink the
/// network and the stage's tables (memory, cache misses), and the slow ones grow the network,
/// where depth bought more ratio per parameter than width. Mamba-1's small levels keep half
/// the SSM state (8), which measured the same ratio as 16 for half the scan's work. Every
/// Mamba-1 level convolves over the last 8 positions rather than the model's 4: with the
/// stage, 0.65% fewer bytes over twelve files of eight kinds at the default (tables and
/// binaries 0.1–7%, text and source within ±0.1%), at no measurable cost in time
/// (docs/experiments.md, "Convolution width"). Every Mamba-1 level reads context inputs (three
/// hashed embeddings of 2^14 rows: the last two bytes, the last three, the word so far;
/// src/model/context.rs): with the stage, 0.61% fewer bytes over five files of four kinds at
/// the default and 0.79% at level 1, every file smaller, for about 7% more time
/// (docs/experiments.md, 2026-12-03, "Context inputs"). Every level starts its mixer from the
/// built-in warm start `mixtext1` (`mix:warm=1`, src/mix/warm.rs): 1.4–1.6% fewer bytes over
/// the sixteen corpus files under 100 KB at levels 1–4 of Mamba-1 and level 3 of RWKV-7, for no
/// measurable time (docs/experiments.md, "The stage's warm start"). Every level's mixer has
/// young weight sets (`mix:young=1`, from `MixSpec::DEFAULT`): 0.4–0.5% fewer bytes over those
/// files, 0.2% over larger inputs of many kinds, for about 3% of the time (docs/experiments.md,
/// "Young weight sets").
pub const LEVELS: [Level; MAX_LEVEL as usize] = [
    Level {
        mamba1: concat!(
            "cfg:hidden=32,layers=1,state=8,conv=8,ctx=14,prior=3 mix:table=18,warm=1 ",
            train_from_prior!()
        ),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=32,layers=1,state=8,conv=8,ctx=14 mix:table=18,warm=1 ",
            train!("0.002")
        )),
        rwkv7: concat!(
            "cfg:hidden=64,layers=1 mix:table=18,warm=1 ",
            train!("0.002")
        ),
    },
    Level {
        mamba1: concat!(
            "cfg:hidden=32,layers=1,state=8,conv=8,ctx=14,prior=3 mix:table=20,warm=1 ",
            train_from_prior!()
        ),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=32,layers=1,state=8,conv=8,ctx=14 mix:table=20,warm=1 ",
            train!("0.002")
        )),
        rwkv7: concat!(
            "cfg:hidden=64,layers=1 mix:table=20,warm=1 ",
            train!("0.002")
        ),
    },
    // The default: the fastest network that, with the full stage, stays within about 1% of the
    // larger levels' ratio on book1 and enwik6. It starts from the built-in prior `text2`
    // (src/prior; docs/experiments.md, "A built-in prior") where the input looks like text, and
    // from seeded weights at the rate that suits them elsewhere.
    Level {
        mamba1: prior_network_trained_longer!(),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=64,layers=1,state=8,conv=8,ctx=14 mix:warm=1 ",
            train!("0.002")
        )),
        rwkv7: concat!("cfg:hidden=64,layers=1 mix:warm=1 ", train!("0.002")),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=96,layers=2,state=8,conv=8,ctx=14 ",
            larger_stage!(),
            train!("0.0014")
        )),
        rwkv7: concat!(
            "cfg:hidden=128,layers=1 ",
            larger_stage!(),
            train!("0.0014")
        ),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=128,layers=2,conv=8,ctx=14 ",
            larger_stage!(),
            train_fast_ends!()
        )),
        rwkv7: concat!("cfg:hidden=128,layers=2 ", larger_stage!(), train!("0.001")),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=128,layers=3,conv=8,ctx=14 ",
            larger_stage!(),
            train_fast_ends!()
        )),
        rwkv7: concat!("cfg:hidden=128,layers=3 ", larger_stage!(), train!("0.001")),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=128,layers=4,conv=8,ctx=14 ",
            larger_stage!(),
            train_fast_ends!()
        )),
        rwkv7: concat!("cfg:hidden=128,layers=4 ", larger_stage!(), train!("0.001")),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=128,layers=6,conv=8,ctx=14 ",
            larger_stage!(),
            train_fast_ends!()
        )),
        rwkv7: concat!("cfg:hidden=128,layers=6 ", larger_stage!(), train!("0.001")),
    },
    Level {
        mamba1: prior_network_trained_longer!(larger_stage!()),
        mamba1_seeded: Some(concat!(
            "cfg:hidden=192,layers=4,conv=8,ctx=14 ",
            larger_stage!(),
            train_fast_ends!()
        )),
        rwkv7: concat!("cfg:hidden=192,layers=4 ", larger_stage!(), train!("0.001")),
    },
];

/// The recipe used when none is asked for: the default level's.
pub fn default_recipe(kind: ModelKind) -> Recipe {
    recipe(kind, DEFAULT_LEVEL)
}

/// The recipe of a level (clamped to 1..=9) for a model, as this build writes it; when it
/// starts from a built-in prior, for the inputs the prior suits.
pub fn recipe(kind: ModelKind, level: u8) -> Recipe {
    table_recipe(kind, level)
}

/// The recipe of a level (clamped to 1..=9) for the inputs its prior does not suit
/// ([`crate::prior::suits`]): the level's seeded network (Mamba-1: at levels 1–3 the same
/// network, trained as suits seeded weights, and from level 4 larger ones, which gain on
/// binaries where the prior's network, started from seeded weights, does not), or else the
/// level's recipe without its prior.
pub fn seeded_recipe(kind: ModelKind, level: u8) -> Recipe {
    match (kind, entry(level).mamba1_seeded) {
        (ModelKind::Mamba1, Some(text)) => from_text(kind, text),
        _ => crate::prior::without(&recipe(kind, level)),
    }
}

/// Numbers a header may store in place of a level ([`stored_base`]): the seeded recipe of
/// level `n` is stored as `SEEDED_BASE + n` (from numerics version 9).
pub const SEEDED_BASE: u8 = 10;

/// The recipes a header of this build may name by a number, and those numbers: each level's
/// ([`recipe`]) and each level's seeded one ([`seeded_recipe`]) where it differs.
pub fn stored_bases(kind: ModelKind) -> Vec<(u8, Recipe)> {
    let mut bases: Vec<(u8, Recipe)> = (1..=MAX_LEVEL).map(|l| (l, recipe(kind, l))).collect();
    for level in 1..=MAX_LEVEL {
        let seeded = seeded_recipe(kind, level);
        if seeded != recipe(kind, level) {
            bases.push((SEEDED_BASE + level, seeded));
        }
    }
    bases
}

/// The recipe that the number `number` names in a header of numerics version `numerics`:
/// a level ([`recipe_of`]) or, from version 9, a level's seeded recipe; `None` for a number
/// that names neither.
pub fn stored_base(numerics: u8, kind: ModelKind, number: u8) -> Option<Recipe> {
    match number {
        1..=MAX_LEVEL => Some(recipe_of(numerics, kind, number)),
        n if numerics >= 9 && (SEEDED_BASE + 1..=SEEDED_BASE + MAX_LEVEL).contains(&n) => {
            let mut seeded = seeded_recipe(kind, n - SEEDED_BASE);
            if let Some(mix) = seeded.mix.as_mut() {
                stage_as_of(mix, numerics);
            }
            Some(seeded)
        }
        _ => None,
    }
}

/// How a header's base number reads: `level 9`, or `level 9's seeded network`.
pub fn describe_base(number: u8) -> String {
    if number > SEEDED_BASE {
        format!("level {}'s seeded network", number - SEEDED_BASE)
    } else {
        format!("level {number}")
    }
}

/// The recipe a level meant in files of numerics version `numerics`, which the header gives
/// (`format::OLDEST_NUMERICS_VERSION` to `format::NUMERICS_VERSION`). In version 2 no level
/// had the stage's recent bits, second sparse contexts and nesting contexts (`ext` 512, 1024
/// and 2048); up to version 3 no Mamba-1 level had context inputs (`ctx`); up to version 4 no
/// level started from a built-in prior; up to version 5 no level had the stage's text contexts
/// (`ext` 4096), and the default level started from `text1` (from version 6, `text2`); up to
/// version 6 no level started its mixer from a warm start (`mix:warm`); up to version 7 no
/// level's mixer had young weight sets (`mix:young`); up to version 8 levels 4–9 of Mamba-1
/// had one network for every input, the one they now keep for inputs their prior does not
/// suit, and levels 1–3 trained their prior's network as they now train their seeded one
/// (windows to 16 bytes at 0.002); up to version 9 no level's match model followed a broken
/// match (`mix:follow`); up to version 10 no level kept a nibble's counters in one cache line
/// (`mix:nibble`); up to version 11 no level's mixer let its last layer settle at three eighths of
/// the rate (`mix:settle`); up to version 12 no level's stage split its memory above 64 KiB as
/// `mix:split` does; up to version 13 no level had the delta model (`mix:delta`); up to
/// version 14 no level's text contexts read the strings of binary data (`mix:strings`); up to
/// version 15 levels 4–9 had the default's tables (2^22, not 2^23); up to version 16 no
/// level's counters had a long memory (`mix:long`) and no level had the mixer selector by the
/// last byte and the bits so far (`mix:partial`, levels 4–9 from 17); up to version 17 no
/// level's stage gave the coder its probability in 16 bits (`mix:fine`); the rest of the table
/// is the same.
pub fn recipe_of(numerics: u8, kind: ModelKind, level: u8) -> Recipe {
    let mut recipe = match (numerics, kind, entry(level).mamba1_seeded) {
        // Levels 1–3 trained their prior's network as their seeded one is trained now.
        (..=8, ModelKind::Mamba1, Some(text)) if level <= DEFAULT_LEVEL => {
            let prior = table_recipe(kind, level).config().prior();
            crate::prior::with_number(&from_text(kind, text), prior)
        }
        (..=8, ModelKind::Mamba1, Some(text)) => from_text(kind, text),
        _ => table_recipe(kind, level),
    };
    if let Some(mix) = recipe.mix.as_mut() {
        stage_as_of(mix, numerics);
    }
    if numerics <= 5 {
        // Version 5's default level started from `text1`; no other level, and no level of
        // version 4 or older, had a prior.
        let prior = match (numerics, level) {
            (5, 3) => 1,
            _ => 0,
        };
        if recipe.config().prior() != 0 {
            recipe = crate::prior::with_number(&recipe, prior);
        }
    }
    if numerics <= 3
        && let Base::Fresh {
            config: ModelConfig::Mamba1(c),
            ..
        } = &mut recipe.base
    {
        c.ctx = 0;
    }
    recipe
}

/// A level's stage as files of numerics version `numerics` have it: without the keys later
/// versions gave every level (see [`recipe_of`]).
fn stage_as_of(mix: &mut crate::mix::MixSpec, numerics: u8) {
    mix.fine &= numerics >= 18;
    mix.long &= numerics >= 17;
    mix.partial &= numerics >= 17;
    if numerics <= 15 {
        mix.table = mix.table.min(crate::mix::MixSpec::DEFAULT.table);
    }
    mix.strings &= numerics >= 15;
    mix.delta &= numerics >= 14;
    mix.split &= numerics >= 13;
    mix.settle &= numerics >= 12;
    mix.nibble &= numerics >= 11;
    mix.follow &= numerics >= 10;
    mix.young &= numerics >= 8;
    if numerics <= 6 {
        mix.warm = 0;
    }
    mix.text &= numerics >= 6;
    if numerics <= 2 {
        mix.recent = false;
        mix.sparse2 = false;
        mix.nest = false;
    }
}

/// The entry of [`LEVELS`] for a level, clamped to 1..=9.
fn entry(level: u8) -> &'static Level {
    &LEVELS[(level.clamp(1, MAX_LEVEL) - 1) as usize]
}

/// The recipe of [`LEVELS`]' entry.
fn table_recipe(kind: ModelKind, level: u8) -> Recipe {
    let text = match kind {
        ModelKind::Mamba1 => entry(level).mamba1,
        ModelKind::Rwkv7 => entry(level).rwkv7,
    };
    from_text(kind, text)
}

/// A recipe of the table: `text` applied onto the model's default sizes.
fn from_text(kind: ModelKind, text: &str) -> Recipe {
    let base = Recipe::fresh(
        ModelConfig::default_for(kind),
        0,
        Action::Train(TrainSpec::defaults(kind)),
    );
    // The table is checked by the test below; a broken entry falls back to the model's
    // defaults rather than failing a run.
    base.edit(text, None).unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::MixSpec;
    use crate::recipe::{AdamSettings, LiveState, RateSchedule};

    #[test]
    fn every_level_parses_for_every_model() {
        for kind in ModelKind::ALL {
            let base = Recipe::fresh(
                ModelConfig::default_for(kind),
                0,
                Action::Train(TrainSpec::defaults(kind)),
            );
            for (i, level) in LEVELS.iter().enumerate() {
                let text = match kind {
                    ModelKind::Mamba1 => level.mamba1,
                    ModelKind::Rwkv7 => level.rwkv7,
                };
                let r = base
                    .edit(text, None)
                    .unwrap_or_else(|e| panic!("level {}: {e}", i + 1));
                r.validate().unwrap();
            }
        }
    }

    #[test]
    fn the_default_level_is_the_measured_default() {
        for kind in ModelKind::ALL {
            let r = recipe(kind, DEFAULT_LEVEL);
            // One block 64 wide; Mamba-1 with half the SSM state, twice the convolution and
            // context inputs.
            let mut config = ModelConfig::default_for(kind);
            config.set_size(Some(64), Some(1));
            if let ModelConfig::Mamba1(c) = &mut config {
                c.state = 8;
                c.conv = 8;
                c.ctx = 14;
                c.prior = 2;
            }
            assert_eq!(*r.config(), config);
            // RMSprop-like Adam with β2 warm-up and a decaying rate, the live state carried on:
            // Mamba-1 from its prior at 1.4e-3 over TBPTT segments growing from 4 to 32
            // bytes, RWKV-7 at 2e-3 over segments to 16; both rates end at 6e-4.
            let (lr, bptt, floor) = match kind {
                ModelKind::Mamba1 => (0.0014, 32, 0.43),
                ModelKind::Rwkv7 => (0.002, 16, 0.3),
            };
            let spec = TrainSpec {
                lr,
                bptt,
                stride: bptt,
                state: LiveState::Carry,
                adam: AdamSettings {
                    beta1: 0.0,
                    beta2: 0.9995,
                    eps: 1e-6,
                    beta2_warmup: true,
                },
                rate: RateSchedule {
                    decay: 0.0004,
                    floor,
                    ..RateSchedule::NONE
                },
                bptt0: 4,
                grow: 12,
                focus: 1.0,
                ..TrainSpec::defaults(kind)
            };
            assert_eq!(r.actions().collect::<Vec<_>>(), vec![&Action::Train(spec)]);
            // Every level mixes; the fastest with smaller tables. The mixer starts from the
            // built-in warm start.
            assert_eq!(
                r.mix,
                Some(crate::mix::MixSpec {
                    warm: 1,
                    ..crate::mix::MixSpec::DEFAULT
                })
            );
            for level in 1..=MAX_LEVEL {
                assert!(recipe(kind, level).mix.is_some(), "level {level}");
            }
        }
    }

    /// What a level costs: the parameters of its network for inputs its prior suits and of
    /// its seeded one, the TBPTT window of the first, then the stage's table size.
    fn cost(kind: ModelKind, level: u8) -> (usize, usize, usize, u32) {
        let (r, seeded) = (recipe(kind, level), seeded_recipe(kind, level));
        let window = match r.actions().next() {
            Some(Action::Train(spec)) => spec.bptt,
            _ => 0,
        };
        (
            r.config().param_count(),
            seeded.config().param_count(),
            window,
            r.mix.map_or(0, |m| m.table),
        )
    }

    #[test]
    fn levels_grow_from_fast_to_best() {
        for kind in ModelKind::ALL {
            for level in 1..MAX_LEVEL {
                let (this, next) = (cost(kind, level), cost(kind, level + 1));
                assert!(
                    this.0 <= next.0
                        && this.1 <= next.1
                        && this.2 <= next.2
                        && this.3 <= next.3
                        && this != next,
                    "{kind:?} level {level}: {this:?} then {next:?}"
                );
            }
        }
    }

    #[test]
    fn a_seeded_recipe_has_no_prior_and_keeps_the_levels_earlier_network() {
        for level in 1..=MAX_LEVEL {
            let (r, seeded) = (
                recipe(ModelKind::Mamba1, level),
                seeded_recipe(ModelKind::Mamba1, level),
            );
            assert_ne!(r.config().prior(), 0, "level {level}");
            assert_eq!(seeded.config().prior(), 0, "level {level}");
            assert_eq!(seeded.mix, r.mix, "level {level}: the same stage");
            // What each level meant up to numerics 8 (levels 1–3 started from the prior where
            // it suited, 4–9 never did), trained otherwise than the prior's network now.
            // (And without the stage keys of numerics 10-18.)
            let mut earlier = crate::prior::without(&recipe_of(8, ModelKind::Mamba1, level));
            if let Some(mix) = earlier.mix.as_mut() {
                mix.table = seeded.mix.unwrap().table;
                mix.partial = seeded.mix.unwrap().partial;
                mix.follow = true;
                mix.nibble = true;
                mix.settle = true;
                mix.split = true;
                mix.delta = true;
                mix.strings = true;
                mix.long = true;
                mix.fine = true;
            }
            assert_eq!(seeded, earlier, "level {level}");
            assert_ne!(seeded, crate::prior::without(&r), "level {level}");
            assert!(seeded.config().param_count() >= r.config().param_count());
        }
        // RWKV-7 has no prior: its seeded recipe is its recipe.
        for level in 1..=MAX_LEVEL {
            assert_eq!(
                seeded_recipe(ModelKind::Rwkv7, level),
                recipe(ModelKind::Rwkv7, level)
            );
        }
    }

    #[test]
    fn stored_numbers_name_levels_and_from_numerics_9_their_seeded_networks() {
        let kind = ModelKind::Mamba1;
        let bases = stored_bases(kind);
        assert_eq!(bases.len(), 2 * MAX_LEVEL as usize);
        for (number, base) in &bases {
            assert_eq!(
                stored_base(crate::format::NUMERICS_VERSION, kind, *number).as_ref(),
                Some(base)
            );
        }
        assert!(stored_base(8, kind, SEEDED_BASE + 4).is_none());
        for number in [0, SEEDED_BASE, SEEDED_BASE + MAX_LEVEL + 1, 255] {
            assert!(stored_base(9, kind, number).is_none(), "{number}");
        }
        assert_eq!(describe_base(14), "level 4's seeded network");
        assert_eq!(describe_base(4), "level 4");
        assert_eq!(stored_bases(ModelKind::Rwkv7).len(), MAX_LEVEL as usize);
    }

    /// Numerics 10 gave every level `mix:follow`, 11 `mix:nibble`, 12 `mix:settle`, 13
    /// `mix:split`, 14 `mix:delta` and 15 `mix:strings`: a number in a header of 9 names the
    /// level, or its seeded recipe, without any of them; of 10, with `follow` only; of 11,
    /// without `settle`, `split`, `delta` and `strings`; and so on to 14, without `strings`.
    /// Numerics 16 gave levels 4–9 tables of 2^23: up to 15 every level's are 2^22 at most.
    /// Numerics 17 gave every level `mix:long`, and levels 4–9 `mix:partial`; 18 every level
    /// `mix:fine`.
    #[test]
    fn numerics_9_to_17_name_their_levels_without_the_later_keys() {
        for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
            for (number, base) in stored_bases(kind) {
                let mix = |numerics| stored_base(numerics, kind, number).unwrap().mix.unwrap();
                let (nine, ten, eleven, twelve) = (mix(9), mix(10), mix(11), mix(12));
                let (thirteen, fourteen, fifteen) = (mix(13), mix(14), mix(15));
                let (sixteen, seventeen, eighteen) = (mix(16), mix(17), mix(18));
                assert!(!nine.follow && ten.follow, "{kind:?} {number}");
                assert!(!ten.nibble && eleven.nibble, "{kind:?} {number}");
                assert!(!eleven.settle && twelve.settle, "{kind:?} {number}");
                assert!(!twelve.split && thirteen.split, "{kind:?} {number}");
                assert!(!thirteen.delta && fourteen.delta, "{kind:?} {number}");
                assert!(!fourteen.strings && fifteen.strings, "{kind:?} {number}");
                assert_eq!(
                    MixSpec {
                        follow: true,
                        ..nine
                    },
                    ten
                );
                assert_eq!(
                    MixSpec {
                        nibble: true,
                        ..ten
                    },
                    eleven
                );
                assert_eq!(
                    MixSpec {
                        settle: true,
                        ..eleven
                    },
                    twelve
                );
                assert_eq!(
                    MixSpec {
                        split: true,
                        ..twelve
                    },
                    thirteen
                );
                assert_eq!(
                    MixSpec {
                        delta: true,
                        ..thirteen
                    },
                    fourteen
                );
                assert_eq!(
                    MixSpec {
                        strings: true,
                        ..fourteen
                    },
                    fifteen
                );
                let larger = number % SEEDED_BASE > DEFAULT_LEVEL;
                assert_eq!(sixteen.table, if larger { 23 } else { fifteen.table });
                assert!(fifteen.table <= 22, "{kind:?} {number}");
                assert_eq!(
                    MixSpec {
                        table: sixteen.table,
                        ..fifteen
                    },
                    sixteen
                );
                assert!(!sixteen.long && seventeen.long, "{kind:?} {number}");
                assert!(!sixteen.partial, "{kind:?} {number}");
                assert_eq!(seventeen.partial, larger, "{kind:?} {number}");
                assert_eq!(
                    MixSpec {
                        long: true,
                        partial: larger,
                        ..sixteen
                    },
                    seventeen
                );
                assert!(!seventeen.fine && eighteen.fine, "{kind:?} {number}");
                assert_eq!(
                    MixSpec {
                        fine: true,
                        ..seventeen
                    },
                    eighteen
                );
                assert_eq!(Some(eighteen), base.mix);
            }
        }
    }
}
