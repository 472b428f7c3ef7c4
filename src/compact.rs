//! How a header holds a recipe (docs/format.md, "The recipe in the header"): a level of
//! [`crate::levels`] and the recipe text that edits it into the recipe, when that is shorter
//! than the whole recipe, which is nearly always for recipes made from a level; else the
//! whole canonical text.
//!
//! What a level means is pinned by the numerics version (a change of the level table bumps
//! it, as any change of what the encoder computes for a file does), and checked besides: the
//! header carries the CRC32 of the recipe's canonical text, so a build whose level expands to
//! another recipe refuses the file with a message instead of decoding it with another model.

use crate::format::{FormatError, StoredRecipe};
use crate::levels::{self, MAX_LEVEL};
use crate::recipe::{ModelKind, Recipe};

/// The byte that names a model in a header (fixed: a file outlives any order of the models).
pub fn model_code(kind: ModelKind) -> u8 {
    match kind {
        ModelKind::Mamba1 => 1,
        ModelKind::Rwkv7 => 2,
    }
}

fn model_of(code: u8) -> Option<ModelKind> {
    ModelKind::ALL.into_iter().find(|&k| model_code(k) == code)
}

/// Bytes a level form spends beyond its text: model, level and the recipe's CRC32.
const LEVEL_FORM_EXTRA: usize = 6;

/// The form in which a header stores `recipe` (resolved to bytes): the level, or a level's
/// seeded recipe ([`levels::stored_bases`]), whose edits are shortest (the lowest such
/// number), or the whole text when that is no longer.
pub fn store(recipe: &Recipe) -> StoredRecipe {
    let text = recipe.to_text();
    let kind = recipe.kind();
    let best = levels::stored_bases(kind)
        .into_iter()
        .filter_map(|(number, base)| Some((number, recipe.edits_from(&base)?)))
        .min_by_key(|(number, edits)| (edits.len(), *number));
    match best {
        Some((level, edits)) if edits.len() + LEVEL_FORM_EXTRA < text.len() => {
            StoredRecipe::Level {
                model: model_code(kind),
                level,
                edits,
                crc: recipe_crc(recipe),
            }
        }
        _ => StoredRecipe::Text(text),
    }
}

/// The CRC32 a level form stores: of the recipe's canonical text and, when the network starts
/// from a built-in prior, of the prior's pinned SHA-256 after it (then, when the stage's mixer
/// starts from a warm start, of the start's), so that a build whose prior or start under that
/// number differed refuses the file rather than decode it from other weights.
pub fn recipe_crc(recipe: &Recipe) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(recipe.to_text().as_bytes());
    if let Some(prior) = crate::prior::by_number(recipe.config().prior()) {
        crc.update(prior.sha256().as_bytes());
    }
    if let Some(start) = recipe.mix.and_then(|m| crate::mix::warm::by_number(m.warm)) {
        crc.update(start.sha256().as_bytes());
    }
    crc.finalize()
}

fn bad(why: String) -> FormatError {
    FormatError::BadHeader(why)
}

/// The recipe a header of numerics version `numerics` stores: complete, canonical, in bytes.
pub fn expand(stored: &StoredRecipe, numerics: u8) -> Result<Recipe, FormatError> {
    let recipe = match stored {
        StoredRecipe::Text(text) => Recipe::parse(text).map_err(|e| bad(format!("recipe: {e}")))?,
        StoredRecipe::Level {
            model,
            level,
            edits,
            crc,
        } => {
            let kind =
                model_of(*model).ok_or_else(|| bad(format!("unknown model number {model}")))?;
            let Some(base) = levels::stored_base(numerics, kind, *level) else {
                return Err(bad(format!(
                    "level {level} is not one of this build's (1 to {MAX_LEVEL}, or from \
                     numerics version 9 a level's seeded network, {} to {})",
                    levels::SEEDED_BASE + 1,
                    levels::SEEDED_BASE + MAX_LEVEL
                )));
            };
            let named = levels::describe_base(*level);
            let recipe = base
                .edit_from_level(edits, None)
                .map_err(|e| bad(format!("the edits of {named}: {e}")))?;
            crate::prior::check(recipe.config()).map_err(|e| bad(format!("{e:#}")))?;
            let actual = recipe_crc(&recipe);
            if actual != *crc {
                return Err(bad(format!(
                    "{named} of {} with the stored edits is not the recipe the file was \
                     written with (its CRC32 is {actual:08x}, not {crc:08x}): this build's \
                     {named} means another recipe",
                    kind.name()
                )));
            }
            recipe
        }
    };
    if !recipe.is_resolved() {
        return Err(bad(
            "recipe: a stored recipe has its positions in bytes".into()
        ));
    }
    Ok(recipe)
}

/// How `info` describes the stored form: `level N` with its edits, or `full text`.
pub fn describe(stored: &StoredRecipe) -> String {
    match stored {
        StoredRecipe::Text(_) => "full recipe text".into(),
        StoredRecipe::Level { level, edits, .. } if edits.is_empty() => {
            levels::describe_base(*level)
        }
        StoredRecipe::Level { level, edits, .. } => {
            format!("{} with {edits}", levels::describe_base(*level))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{NUMERICS_VERSION, OLDEST_NUMERICS_VERSION};

    /// A file of an older numerics version stores its level as that version meant it, and
    /// expands to the same recipe; the same header read as this version's is refused (its
    /// level means another recipe now).
    #[test]
    fn an_older_numerics_versions_level_expands_to_what_it_meant() {
        for kind in ModelKind::ALL {
            for level in 1..=MAX_LEVEL {
                let old = levels::recipe_of(OLDEST_NUMERICS_VERSION, kind, level);
                assert_ne!(old, levels::recipe(kind, level), "{kind:?} {level}");
                // As an older build stored it: the level and no edits.
                let stored = StoredRecipe::Level {
                    model: model_code(kind),
                    level,
                    edits: String::new(),
                    crc: crc32fast::hash(old.to_text().as_bytes()),
                };
                assert_eq!(expand(&stored, OLDEST_NUMERICS_VERSION).unwrap(), old);
                assert!(
                    expand(&stored, NUMERICS_VERSION).is_err(),
                    "{kind:?} {level}"
                );
            }
        }
    }

    #[test]
    fn every_level_is_stored_as_itself_and_expands_back() {
        for kind in ModelKind::ALL {
            for level in 1..=MAX_LEVEL {
                let recipe = levels::recipe(kind, level);
                let stored = store(&recipe);
                let StoredRecipe::Level {
                    level: l, edits, ..
                } = &stored
                else {
                    panic!("{kind:?} level {level}: stored as {stored:?}");
                };
                // Levels 1 and 2 differ only in the table; each is found as itself. Levels 4–9
                // of Mamba-1 have one recipe for the inputs their prior suits (the default's
                // network with larger tables): the lowest.
                let number = match kind {
                    ModelKind::Mamba1 => level.min(4),
                    ModelKind::Rwkv7 => level,
                };
                assert_eq!((*l, edits.as_str()), (number, ""), "{kind:?} {level}");
                assert_eq!(expand(&stored, NUMERICS_VERSION).unwrap(), recipe);
                // And each level's seeded network as its own number.
                let seeded = levels::seeded_recipe(kind, level);
                let stored = store(&seeded);
                let StoredRecipe::Level {
                    level: l, edits, ..
                } = &stored
                else {
                    panic!("{kind:?} level {level} seeded: stored as {stored:?}");
                };
                let number = match kind {
                    ModelKind::Mamba1 => levels::SEEDED_BASE + level,
                    ModelKind::Rwkv7 => level,
                };
                assert_eq!((*l, edits.as_str()), (number, ""), "{kind:?} {level}");
                assert_eq!(expand(&stored, NUMERICS_VERSION).unwrap(), seeded);
            }
        }
    }

    #[test]
    fn edited_levels_store_only_their_edits() {
        let base = levels::seeded_recipe(ModelKind::Mamba1, 5);
        for (edit, expect) in [
            ("0..:train(lr=0.001)", "0..:train(lr=0.001)"),
            ("cfg:seed=7 mix:table=20", "cfg:seed=7 mix:table=20"),
            ("mix:off", "mix:off"),
            // The stride that follows the window is written out: the printer compares values.
            (
                "0..1K:infer 1K..:train(bptt=8)",
                "0..1K:infer 1K..:train(stride=8,bptt=8)",
            ),
        ] {
            let recipe = base.edit_from_level(edit, None).unwrap();
            let stored = store(&recipe);
            let StoredRecipe::Level { level, edits, .. } = &stored else {
                panic!("{edit}: stored as {stored:?}");
            };
            assert_eq!(*level, levels::SEEDED_BASE + 5, "{edit}");
            assert_eq!(edits, expect, "{edit}");
            assert_eq!(expand(&stored, NUMERICS_VERSION).unwrap(), recipe, "{edit}");
        }
    }

    #[test]
    fn a_recipe_from_a_model_file_is_stored_whole() {
        let level = levels::recipe(ModelKind::Rwkv7, 3);
        let recipe = Recipe {
            base: crate::recipe::Base::File {
                config: level.config().clone(),
                sha256: [7; 32],
                name: Some("prior.safetensors".into()),
            },
            ..level
        };
        let stored = store(&recipe);
        assert_eq!(stored, StoredRecipe::Text(recipe.to_text()));
        assert_eq!(expand(&stored, NUMERICS_VERSION).unwrap(), recipe);
    }

    #[test]
    fn a_header_whose_level_means_another_recipe_is_refused() {
        let recipe = levels::recipe(ModelKind::Rwkv7, 4);
        let StoredRecipe::Level {
            model,
            level,
            edits,
            crc,
        } = store(&recipe)
        else {
            panic!("level 4 is stored as a level");
        };
        let other = StoredRecipe::Level {
            model,
            level: level + 1,
            edits: edits.clone(),
            crc,
        };
        let err = expand(&other, NUMERICS_VERSION).unwrap_err().to_string();
        assert!(err.contains("means another recipe"), "{err}");
        for (model, level, edits) in [
            (9, 4, ""),
            (model, 0, ""),
            (model, 10, ""),
            (model, 4, "cfg:x=1"),
        ] {
            let stored = StoredRecipe::Level {
                model,
                level,
                edits: edits.into(),
                crc,
            };
            assert!(
                expand(&stored, NUMERICS_VERSION).is_err(),
                "{model} {level} {edits}"
            );
        }
    }
}
