//! Memory to fit the input: when the length of an input is known before it is coded (a file,
//! `--size`, [`crate::Options::size`], a block, `lmzip bench`), the mixing stage's large
//! tables are sized for it. The size is the recipe's mix key `cap` (docs/recipes.md), so the
//! header records it and the decoder never infers it; a file's recipe without the key has the
//! level's sizes, as every file written before it had.
//!
//! `cap = N` gives the context tables of orders 3 and up and of words 2^N counters at most,
//! and each other family, map and window its own size against N
//! ([`crate::mix::Part::offset`]). N is chosen as `ceil((log2 len + FIT_OFFSET) / 2)`,
//! within [`FIT_CHOSEN`] (for a stage whose tables are above the default's, as at levels 4–9,
//! that many steps higher): a table of 2^N counters then holds about `sqrt(2^20 / len)`
//! counters per input byte (4 at 64 KiB, 1 at 1 MiB), which keeps inputs up to 64 KiB within
//! 32 MiB and up to 1 MiB within 96 MiB of resident memory, where each step of N costs the
//! whole table size; from 128 KiB to 1 MiB N is 20 ([`FIT_FROM_128K`]), where 19 cost more
//! than 0.5% (docs/experiments.md, "Memory to fit the input").
//!
//! The first builds that sized the stage wrote the key `fit` instead (every family capped at
//! 2^N alike, about a fifth more memory at the same N): such files decode as they were
//! written, and a recipe may still give `fit`; [`fitted`] writes `cap`.
//!
//! A Mamba-1 network's context embeddings (its size `ctx`, src/model/context.rs) are sized for
//! the input the same way: [`context_bits`] rows per table, never more than the recipe's.

use std::ops::RangeInclusive;

use crate::mix::MixSpec;
use crate::recipe::{Base, ModelConfig, Recipe, UnresolvedPercent};

/// The values [`fit_bits`] chooses: 2^17 counters is about 0.5 MiB a table; from 2^22 on
/// today's levels' stages are nearly as they are (and [`fitted`] leaves the key out where it
/// changes nothing).
pub const FIT_CHOSEN: RangeInclusive<u32> = 17..=24;

/// The offset of the choice, log2 (see the module's docs).
pub const FIT_OFFSET: u32 = 20;

/// The `cap` for an input of `len` bytes: `ceil((log2 len + FIT_OFFSET) / 2)` within
/// [`FIT_CHOSEN`], and at least [`FIT_FROM_128K`] above 128 KiB.
pub fn fit_bits(len: u64) -> u32 {
    // ceil(log2 len) is the least L with len <= 2^L; ceil((log2 len + c) / 2) is the least N
    // with len <= 2^(2N − c), so N = ceil((L + c) / 2) with L = ceil(log2 len).
    let log = match len {
        0 | 1 => 0,
        n => 64 - (n - 1).leading_zeros(),
    };
    let n = (log + FIT_OFFSET).div_ceil(2);
    let n = if log >= 18 { n.max(FIT_FROM_128K) } else { n };
    n.clamp(*FIT_CHOSEN.start(), *FIT_CHOSEN.end())
}

/// The values [`context_bits`] chooses.
pub const CONTEXT_CHOSEN: RangeInclusive<usize> = 9..=14;

/// Log2 rows per context table for an input of `len` bytes: 9 up to 64 KiB, 12 up to 2 MiB,
/// then one more for each doubling up to 14. Each row is 64 floats of weights, gradient and
/// Adam's second moment (768 bytes; 2^12 rows in three tables take 9 MiB), which is what the
/// memory goals leave beside the stage sized by `cap`: inputs up to 64 KiB within 32 MiB, up
/// to 1 MiB within 96 MiB. Over 64 KiB they were 2^10 until the stage's memory split
/// (`mix:split`, numerics 13) freed room for them: 2^12 took enwik6 0.25%, book1 0.13% and
/// obj2 0.4% below 2^10 (docs/experiments.md, "Memory where it pays"). More rows still pay
/// on small inputs (2^11 against 2^9: 0.2% on calgary/progc and paper1), but the stage's
/// counters pay more for their memory (docs/experiments.md, "Memory to fit the input, with
/// context inputs").
pub fn context_bits(len: u64) -> usize {
    let log = match len {
        0 | 1 => 0,
        n => 64 - (n - 1).leading_zeros() as usize,
    };
    match log {
        0..=16 => 9,
        17..=20 => 12,
        _ => (log - 9).min(*CONTEXT_CHOSEN.end()),
    }
}

/// The `cap` of inputs over 128 KiB (up to 1 MiB; above, the formula gives more): 2^19
/// cost obj2 (241 KiB) 0.7% against the level's sizes, 2^20 0.2%, within the 96 MiB that
/// inputs up to 1 MiB may take.
pub const FIT_FROM_128K: u32 = 20;

/// `recipe` for an input of `len` bytes: its stage with `cap` chosen for `len` when that
/// makes the stage smaller, and its network's context tables no larger than
/// [`context_bits`]; as it is when it has no stage, a stage with `fit` or `cap` already, or
/// one that is already as small, and for an empty input (which codes nothing: its member stays
/// the level's 24 bytes, and its tables are never touched).
pub fn fitted(recipe: &Recipe, len: u64) -> Recipe {
    let mut recipe = fitted_context(recipe, len);
    let Some(mix) = recipe.mix.filter(|m| m.fit == 0 && m.cap == 0 && len > 0) else {
        return recipe;
    };
    let fitted = MixSpec {
        cap: fit_bits(len) + larger_by(&mix),
        ..mix
    };
    // `cap` only ever lowers sizes, and every size it lowers is counted in `bytes`.
    if fitted.bytes() < mix.bytes() {
        recipe.mix = Some(fitted);
    }
    recipe
}

/// How many steps of `cap` a stage's tables are above the default level's (levels 4–9: one,
/// for tables of 2^23 against 2^22): its `cap` for an input is that much above the default's,
/// so that it keeps twice the default's memory at every length (where that is below its own
/// tables' size).
fn larger_by(mix: &MixSpec) -> u32 {
    mix.table.saturating_sub(MixSpec::DEFAULT.table)
}

/// `recipe` with its fresh network's context tables at most [`context_bits`]`(len)` (a
/// model file's sizes are the file's).
fn fitted_context(recipe: &Recipe, len: u64) -> Recipe {
    let mut recipe = recipe.clone();
    if let Base::Fresh {
        config: ModelConfig::Mamba1(c),
        ..
    } = &mut recipe.base
        && c.ctx > context_bits(len)
        && len > 0
    {
        c.ctx = context_bits(len);
    }
    recipe
}

/// The recipe of one input of length `len` (when known): percent positions resolved with it
/// ([`Recipe::resolve`]) and, when `fit` allows (the user did not give the stage's sizes:
/// [`crate::recipe::names_stage_sizes`]), the stage sized for it.
pub fn for_input(
    recipe: &Recipe,
    len: Option<u64>,
    fit: bool,
) -> Result<Recipe, UnresolvedPercent> {
    let resolved = recipe.resolve(len)?;
    Ok(match len {
        Some(len) if fit => fitted(&resolved, len),
        _ => resolved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::levels;
    use crate::recipe::ModelKind;

    #[test]
    fn the_choice_grows_with_the_length_within_its_range() {
        let at = |len: u64| fit_bits(len);
        assert_eq!(at(0), 17);
        assert_eq!(at(1 << 10), 17);
        assert_eq!(at(1 << 16), (16 + FIT_OFFSET).div_ceil(2));
        assert_eq!(at((1 << 16) + 1), (17 + FIT_OFFSET).div_ceil(2));
        assert_eq!(at(1 << 17), (17 + FIT_OFFSET).div_ceil(2));
        assert_eq!(at((1 << 17) + 1), FIT_FROM_128K);
        assert_eq!(at(1 << 20), (20 + FIT_OFFSET).div_ceil(2));
        assert_eq!(at(u64::MAX), 24);
        let mut last = 0;
        for shift in 0..64 {
            let n = at(1 << shift);
            assert!(n >= last && FIT_CHOSEN.contains(&n));
            last = n;
        }
    }

    #[test]
    fn a_small_input_gets_the_key_and_a_large_one_keeps_the_level() {
        let level = levels::default_recipe(ModelKind::Mamba1);
        let small = fitted(&level, 5000);
        let mix = small.mix.unwrap();
        assert_eq!((mix.fit, mix.cap), (0, 17));
        assert!(
            mix.bytes() * 8 < level.mix.unwrap().bytes(),
            "{}",
            mix.bytes()
        );
        assert!(
            small.to_text().contains(
                ",cap=17,warm=1,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,fine=1 "
            ),
            "{small}"
        );
        // Where the cap changes no size, the recipe stays the level's; an empty input too.
        assert_eq!(fitted(&level, 1 << 40), level);
        assert_eq!(fitted(&level, 0), level);
        assert_eq!(fitted(&level, 1).mix.unwrap().cap, 17);
        // Without a stage, or with `fit` or `cap` given, the stage stays as it is.
        let off = level.edit("mix:off", None).unwrap();
        assert_eq!(fitted(&off, 5000).mix, None);
        for key in ["mix:fit=20", "mix:cap=20"] {
            let given = level.edit(key, None).unwrap();
            assert_eq!(fitted(&given, 5000).mix, given.mix);
        }
        // Unknown length, or sizes the user chose: the level's.
        assert_eq!(for_input(&level, None, true).unwrap(), level);
        assert_eq!(for_input(&level, Some(5000), false).unwrap(), level);
        assert_eq!(for_input(&level, Some(5000), true).unwrap(), small);
    }

    #[test]
    fn the_larger_levels_keep_twice_the_defaults_tables_at_every_length() {
        let default = levels::default_recipe(ModelKind::Mamba1);
        for level in 4..=levels::MAX_LEVEL {
            for recipe in [
                levels::recipe(ModelKind::Mamba1, level),
                levels::seeded_recipe(ModelKind::Mamba1, level),
                levels::recipe(ModelKind::Rwkv7, level),
            ] {
                for len in [1, 5000, 100_000, 1 << 20, 1 << 24] {
                    let (ours, theirs) = (
                        fitted(&recipe, len).mix.unwrap(),
                        fitted(&default, len).mix.unwrap(),
                    );
                    assert_eq!(ours.cap, theirs.cap + 1, "level {level}, {len} bytes");
                    assert!(ours.bytes() > theirs.bytes(), "level {level}, {len} bytes");
                }
                // Where the default keeps its own sizes, so do they.
                let huge = fitted(&recipe, 1 << 40).mix.unwrap();
                assert_eq!((huge.cap, huge.table), (0, 23), "level {level}");
            }
        }
    }

    fn ctx_of(r: &Recipe) -> usize {
        match r.config() {
            ModelConfig::Mamba1(c) => c.ctx,
            ModelConfig::Rwkv7(_) => 0,
        }
    }

    #[test]
    fn context_tables_shrink_for_small_inputs_and_never_grow() {
        assert_eq!(context_bits(0), 9);
        assert_eq!(context_bits(5000), 9);
        assert_eq!(context_bits(1 << 16), 9);
        assert_eq!(context_bits((1 << 16) + 1), 12);
        assert_eq!(context_bits(1 << 20), 12);
        assert_eq!(context_bits((1 << 20) + 1), 12);
        assert_eq!(context_bits(1 << 22), 13);
        assert_eq!(context_bits((1 << 22) + 1), 14);
        assert_eq!(context_bits(u64::MAX), 14);
        for len in [0, 1, 99, 1 << 16, 1 << 20, 1 << 40] {
            assert!(CONTEXT_CHOSEN.contains(&context_bits(len)), "{len}");
        }
        let level = levels::default_recipe(ModelKind::Mamba1);
        assert_eq!(ctx_of(&level), 14);
        let small = fitted(&level, 40_000);
        assert_eq!(ctx_of(&small), 9);
        assert!(small.to_text().contains(",ctx=9,"), "{small}");
        assert!(small.config().param_count() < level.config().param_count());
        assert_eq!(ctx_of(&fitted(&level, 1 << 30)), 14);
        // A recipe with smaller tables, or none, keeps them.
        let fewer = level.edit("cfg:ctx=11", None).unwrap();
        assert_eq!(ctx_of(&fitted(&fewer, 1 << 30)), 11);
        let none = level.edit("cfg:ctx=0", None).unwrap();
        assert_eq!(ctx_of(&fitted(&none, 40_000)), 0);
        assert_eq!(ctx_of(&fitted(&fewer, 40_000)), 9);
        assert_eq!(ctx_of(&fitted(&fewer, 1 << 20)), 11);
        assert_eq!(ctx_of(&fitted(&fewer, 1 << 21)), 11);
        // Even without a stage.
        let off = level.edit("mix:off", None).unwrap();
        assert_eq!(ctx_of(&fitted(&off, 40_000)), 9);
    }
}
