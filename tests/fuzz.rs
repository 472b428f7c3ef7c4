//! Property tests in the manner of a fuzzer: arbitrary bytes, arbitrary recipe text and damaged
//! files are fed to the decoder and to its parts (`format::read_header`, `read_frame`, `scan`,
//! the recipe parsers `Recipe::parse` of headers and `Recipe::edit` of the command line).
//! Nothing may panic (proptest reports a panic as a failure, with the smallest input it can
//! find), every refusal is an error, and whatever is accepted is sound: a frame within its
//! bounds, a recipe within this build's limits whose canonical text reads back to it, a file
//! that decodes to its original bytes.
//!
//! The damaged files come in two kinds: plain mutations, which the checksums catch before
//! anything is decoded, and mutations whose checksums are recomputed ("resealed"), which take
//! the range decoder and the model through damaged words and damaged recipes.
//!
//! Case counts are kept moderate so that the suite stays fast; `PROPTEST_CASES` raises them
//! for a longer run.

mod common;

use std::io::Cursor;
use std::sync::OnceLock;

use lmzip::codec::decompress_bytes;
use lmzip::format::{self, Body, FRAME_MAX, FormatError, MAGIC, StoredRecipe, max_words};
use lmzip::recipe::working_floats;
use lmzip::recipe::{MAX_PARAMS, MAX_WORKING_BYTES, ModelKind, OptimizerKind, Recipe};
use proptest::prelude::*;

/// A small valid file: the original and its compressed form (Mamba-1 with Adam, so that the
/// decoder trains as it goes).
fn sample() -> &'static (Vec<u8>, Vec<u8>) {
    static SAMPLE: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let data = common::text(300);
        let recipe = common::tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1);
        let packed = lmzip::codec::compress_bytes(&recipe, &data).unwrap();
        (data, packed)
    })
}

/// The same with the mixing stage (small tables), so that damaged words reach its coder.
fn sample_with_mix() -> &'static (Vec<u8>, Vec<u8>) {
    static SAMPLE: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let data = common::text(300);
        let recipe = common::with_mix(&common::tiny(
            ModelKind::Mamba1,
            Some(OptimizerKind::Adam),
            1,
        ));
        let packed = lmzip::codec::compress_bytes(&recipe, &data).unwrap();
        (data, packed)
    })
}

/// The length of a file's (first) header.
fn header_len(b: &[u8]) -> usize {
    format::read_header(&mut &b[..]).unwrap().len as usize
}

/// A LEB128 value at `at`: the value and the byte after it.
fn varint_at(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut r = b.get(at..)?;
    let mut seen = Vec::new();
    let value = format::varint::read(&mut r, &mut seen, "fuzz").ok()?.ok()?;
    Some((value, at + seen.len()))
}

/// Recomputes the CRC32 of the header and of every frame that can be walked (format version
/// 2), so that damage inside them reaches the decoder instead of stopping at a checksum.
/// Returns the input bytes the walked frames claim.
fn reseal(b: &mut [u8]) -> usize {
    // magic, versions, form; model and level for a level form; the text; its CRC32.
    let Some(&form) = b.get(6) else {
        return 0;
    };
    let Some((text_len, text_at)) = varint_at(b, 7 + 2 * (form == 1) as usize) else {
        return 0;
    };
    let header_end = text_at + text_len as usize + 4 * (form == 1) as usize;
    if header_end + 4 > b.len() {
        return 0;
    }
    let crc = crc32fast::hash(&b[..header_end]);
    b[header_end..header_end + 4].copy_from_slice(&crc.to_le_bytes());
    let mut claimed = 0;
    let mut at = header_end + 4;
    while let Some((raw_len, mode_at)) = varint_at(b, at) {
        let body = match b.get(mode_at) {
            Some(0) => varint_at(b, mode_at + 1).map(|(n, words_at)| words_at + 4 * n as usize),
            Some(1) => Some(mode_at + 1 + raw_len as usize),
            _ => None,
        };
        let Some(body_end) = body else { break };
        if raw_len == 0 || body_end + 4 > b.len() {
            break;
        }
        let crc = crc32fast::hash(&b[at..body_end]);
        b[body_end..body_end + 4].copy_from_slice(&crc.to_le_bytes());
        claimed += raw_len as usize;
        at = body_end + 4;
    }
    claimed
}

/// A header holding `recipe` with a correct checksum, followed by the sample's frames and
/// trailer.
fn with_stored(recipe: &StoredRecipe) -> Vec<u8> {
    let packed = &sample().1;
    let mut file = Vec::new();
    format::write_header(&mut file, recipe).unwrap();
    file.extend_from_slice(&packed[header_len(packed)..]);
    file
}

/// A header carrying the whole `recipe` text, as [`with_stored`].
fn with_recipe(recipe: &str) -> Vec<u8> {
    with_stored(&StoredRecipe::Text(recipe.into()))
}

/// Decodes and checks the rule: an error, or exactly the original bytes.
fn decodes_to_original_or_fails(file: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(bytes) = decompress_bytes(file) {
        prop_assert!(bytes == sample().0, "decoded {} wrong bytes", bytes.len());
    }
    Ok(())
}

/// Why `bytes` are refused: decoding must fail with a format error (the file is not an
/// lmzip file, or is truncated or corrupt), not with another kind of error.
fn refusal(bytes: &[u8]) -> Result<String, TestCaseError> {
    let Err(err) = decompress_bytes(bytes) else {
        return Err(TestCaseError::fail("arbitrary bytes decoded"));
    };
    match err.chain().find_map(|e| e.downcast_ref::<FormatError>()) {
        Some(format_error) => Ok(format_error.to_string()),
        None => Err(TestCaseError::fail(format!("not a format error: {err:#}"))),
    }
}

/// Words and punctuation of the recipe language, from which recipe-like text is put together
/// so that the parser's deeper checks are reached.
const WORDS: &[&str] = &[
    "mamba1",
    "rwkv7",
    "cfg:",
    "file:",
    "file:sha256=",
    "name=",
    "seed=",
    "hidden=",
    "layers=",
    "intermediate=",
    "state=",
    "conv=",
    "dt_rank=",
    "decay_rank=",
    "a_rank=",
    "v_rank=",
    "g_rank=",
    "..",
    ":",
    ",",
    "=",
    "(",
    ")",
    " ",
    "%",
    "infer",
    "train",
    "train(",
    "repeat(",
    "scope=",
    "opt=",
    "lr=",
    "stride=",
    "bptt=",
    "clip=",
    "state=",
    "carry",
    "rebuild",
    "all",
    "sgd",
    "adam",
    "embed+head",
    "head+",
    "bias",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "%ff",
    "é",
];

/// Values at and beyond the bounds of the language's numbers.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "8",
    "16",
    "64",
    "100",
    "256",
    "257",
    "4096",
    "4097",
    "16384",
    "16385",
    "64K",
    "1M",
    "4G",
    "99.9999%",
    "100%",
    "100.0001%",
    "12.34567%",
    "0.002",
    "-1",
    "1e40",
    "1e-50",
    "NaN",
    "inf",
    "-0",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
];

/// Recipe-like text: language words and values in any order.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![prop::sample::select(WORDS), prop::sample::select(NUMBERS)];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

/// Canonical recipes of both models, default-sized and tiny (the sample's sizes), with
/// schedules that use every kind of rule.
fn canonical_recipes() -> Vec<String> {
    let mut out = Vec::new();
    let bases = ModelKind::ALL.into_iter().flat_map(|kind| {
        [
            lmzip::levels::default_recipe(kind),
            common::tiny(kind, Some(OptimizerKind::Adam), 1),
            common::with_mix(&common::tiny(kind, Some(OptimizerKind::Adam), 1)),
        ]
    });
    for base in bases {
        out.push(base.to_text());
        for rules in [
            "0..100:infer 100..4K:train(opt=sgd,lr=0.05) 4K..:train(bptt=16,stride=32,clip=1)",
            "0..:repeat(64:train(bptt=8,scope=head+bias),192:infer)",
            "10..20:train(bptt=2) 0..:infer",
            "0..:train(bptt=4,state=carry)",
        ] {
            out.push(base.edit(rules, None).unwrap().to_text());
        }
    }
    out
}

/// The pieces of a text: runs of letters, runs of digits, and single other characters.
fn pieces(text: &str) -> Vec<&str> {
    let class = |c: char| {
        if c.is_ascii_alphabetic() || c == '_' {
            0
        } else if c.is_ascii_digit() {
            1
        } else {
            2
        }
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev = None;
    for (i, c) in text.char_indices() {
        let k = class(c);
        if i > start && (k == 2 || prev != Some(k)) {
            out.push(&text[start..i]);
            start = i;
        }
        prev = Some(k);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// A canonical recipe with one to three of its pieces replaced (a number by another number, any
/// other piece by a word or number of the language), removed, or repeated.
fn mutated_recipe() -> impl Strategy<Value = String> {
    let edit = (
        any::<prop::sample::Index>(),
        0u8..4,
        prop::sample::select(WORDS),
        prop::sample::select(NUMBERS),
    );
    (
        prop::sample::select(canonical_recipes()),
        prop::collection::vec(edit, 1..4),
    )
        .prop_map(|(text, edits)| {
            let mut parts: Vec<String> = pieces(&text).into_iter().map(String::from).collect();
            for (at, how, word, number) in edits {
                if parts.is_empty() {
                    break;
                }
                let i = at.index(parts.len());
                let numeric = parts[i].bytes().all(|b| b.is_ascii_digit());
                match how {
                    0 | 1 if numeric => parts[i] = number.to_string(),
                    0 => parts[i] = word.to_string(),
                    1 => parts[i] = number.to_string(),
                    2 => {
                        parts.remove(i);
                    }
                    _ => {
                        let again = parts[i].clone();
                        parts.insert(i, again);
                    }
                }
            }
            parts.concat()
        })
}

/// The sample's own recipe with a different seed, learning rate or training scope: valid, so
/// the decoder runs a model that is not the encoder's.
fn other_valid_recipe() -> impl Strategy<Value = String> {
    (
        1u64..1000,
        1u32..100,
        prop::sample::select(vec!["all", "head", "embed+mixer_ssm"]),
    )
        .prop_map(|(seed, lr, scope)| {
            let lr = lr as f32 * 1e-3;
            common::tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1)
                .edit(
                    &format!("cfg:seed={seed} 0..:train(opt=adam,lr={lr},scope={scope})"),
                    None,
                )
                .unwrap()
                .to_text()
        })
}

/// Recipe text of every kind: arbitrary strings, recipe-like text, near-valid recipes and valid
/// recipes that are not the one a file was made with.
fn recipe_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,120}",
        token_soup(),
        mutated_recipe(),
        mutated_recipe(),
        other_valid_recipe(),
    ]
}

/// `cases` cases, or as many as `PROPTEST_CASES` says.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        // Proptest keeps failing inputs in files beside a crate's lib.rs, which integration
        // tests lack; a failure prints its shrunk input, and PROPTEST_RNG_SEED repeats a run.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// An accepted recipe is valid, within this build's limits, and its canonical text reads back
/// to the same recipe.
fn within_limits(recipe: &Recipe) -> Result<(), TestCaseError> {
    prop_assert!(recipe.validate().is_ok());
    prop_assert!(recipe.config().param_count() <= MAX_PARAMS);
    prop_assert!(recipe.working_bytes() <= MAX_WORKING_BYTES);
    let text = recipe.to_text();
    match Recipe::parse(&text) {
        Ok(again) => prop_assert_eq!(&again, recipe, "{}", text),
        Err(e) => prop_assert!(false, "canonical text {} does not parse: {}", text, e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let err = refusal(&bytes)?;
        // Bytes as long as a header's fixed part (12) that do not begin with the magic number
        // are refused by it; shorter ones are a truncated header.
        if bytes.len() >= 12 && !bytes.starts_with(&MAGIC) {
            prop_assert_eq!(err, FormatError::NotLmz.to_string());
        }
        let _ = format::read_header(&mut &bytes[..]);
        let _ = format::scan(&mut Cursor::new(&bytes));
    }

    #[test]
    fn arbitrary_bytes_behind_the_magic_are_refused(
        tail in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[format::FORMAT_VERSION, format::NUMERICS_VERSION, 0, 0]);
        bytes.extend_from_slice(&tail);
        refusal(&bytes)?;
        let _ = format::scan(&mut Cursor::new(&bytes));
    }

    /// Frames are read within their bounds whatever the bytes say; lengths are drawn near the
    /// bounds as well as anywhere.
    #[test]
    fn frames_are_read_within_their_bounds(
        raw_len in prop_oneof![
            any::<u32>(),
            0u32..16,
            (FRAME_MAX as u32 - 2)..(FRAME_MAX as u32 + 2),
        ],
        words in prop_oneof![any::<u32>(), 0u32..8, (max_words(FRAME_MAX) as u32 - 2)..],
        mode in 0u8..3,
        rest in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        // Version 1: two u32 lengths; version 2: LEB128 lengths around a mode byte.
        let mut v1 = raw_len.to_le_bytes().to_vec();
        v1.extend_from_slice(&words.to_le_bytes());
        let mut v2 = Vec::new();
        format::varint::put(&mut v2, raw_len as u64);
        v2.push(mode);
        format::varint::put(&mut v2, words as u64);
        for (version, mut bytes) in [(1, v1), (2, v2)] {
            bytes.extend_from_slice(&rest);
            match format::read_frame(&mut &bytes[..], version, 0) {
                Ok(Some(frame)) => {
                    prop_assert!((1..=FRAME_MAX).contains(&frame.raw_len));
                    match frame.body {
                        Body::Coded(w) => prop_assert!(w.len() <= max_words(frame.raw_len)),
                        Body::Stored(s) => prop_assert_eq!(s.len(), frame.raw_len),
                    }
                }
                Ok(None) => prop_assert_eq!(raw_len, 0),
                Err(_) => {}
            }
        }
    }

    /// A recipe accepted from a header is valid, within this build's limits, and its canonical
    /// text reads back to the same recipe.
    #[test]
    fn stored_recipes_are_accepted_only_within_limits(text in recipe_text()) {
        if let Ok(recipe) = Recipe::parse(&text) {
            within_limits(&recipe)?;
        }
    }

    /// The same for recipe text as the command line takes it (parts left out come from the
    /// default level).
    #[test]
    fn command_line_recipes_are_accepted_only_within_limits(text in recipe_text()) {
        for kind in ModelKind::ALL {
            if let Ok(recipe) = lmzip::levels::default_recipe(kind).edit(&text, None) {
                within_limits(&recipe)?;
            }
        }
    }
}

proptest! {
    // Each case below may decode the whole sample, a few milliseconds.
    #![proptest_config(config(128))]

    /// A header with a correct checksum and any recipe text, in front of real frames: read as
    /// such, refused cleanly, or (only for the original recipe) decoded to the original.
    #[test]
    fn sealed_headers_with_any_recipe_fail_cleanly(text in recipe_text()) {
        let small = Recipe::parse(&text).map_or(true, |r| {
            working_floats(&r) < 1 << 20 && r.mix.is_none_or(|m| m.bytes() < 64 << 20)
        });
        // A valid but large model would decode correctly, only slowly: out of scope here.
        prop_assume!(small);
        let file = with_recipe(&text);
        let header = format::read_header(&mut &file[..]).unwrap();
        prop_assert_eq!(header.recipe, StoredRecipe::Text(text));
        decodes_to_original_or_fails(&file)?;
    }

    /// A compact header with a correct checksum, any level and any edits, in front of real
    /// frames: its recipe's CRC32 either the one of what the edits make (so that decoding is
    /// reached) or any. Refused cleanly, or decoded to the original.
    #[test]
    fn sealed_compact_headers_with_any_edits_fail_cleanly(
        text in recipe_text(),
        level in 0u8..11,
        model in 0u8..4,
        crc in prop::option::of(any::<u32>()),
    ) {
        let kind = lmzip::compact::model_code(ModelKind::Mamba1);
        let expanded = (1..=9).contains(&level).then(|| {
            lmzip::levels::recipe(ModelKind::Mamba1, level).edit_from_level(&text, None).ok()
        }).flatten();
        let crc = crc.or(expanded.as_ref().map(|r| crc32fast::hash(r.to_text().as_bytes())));
        let stored = StoredRecipe::Level {
            model: if model == 0 { kind } else { model },
            level,
            edits: text,
            crc: crc.unwrap_or(0),
        };
        let file = with_stored(&stored);
        let header = format::read_header(&mut &file[..]).unwrap();
        prop_assert_eq!(&header.recipe, &stored);
        let small = expanded.as_ref().is_none_or(|r| {
            working_floats(r) < 1 << 20 && r.mix.is_none_or(|m| m.bytes() < 64 << 20)
        });
        match small {
            true => decodes_to_original_or_fails(&file)?,
            // A valid but large model would decode correctly, only slowly: only expanded.
            false => {
                let _ = lmzip::codec::read_recipe(&header);
            }
        }
    }

    /// Bytes overwritten anywhere: the checksums refuse the file before anything is decoded.
    #[test]
    fn mutated_files_fail_cleanly(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
    ) {
        let mut file = sample().1.clone();
        for (at, byte) in &edits {
            let i = at.index(file.len());
            file[i] = *byte;
        }
        decodes_to_original_or_fails(&file)?;
    }

    /// Bytes after the header overwritten and the checksums recomputed: the range decoder and
    /// the model run on damaged words and lengths, and the trailer's length and CRC32 catch
    /// what they decode. (Damaged recipes behind a correct checksum are the test above.)
    #[test]
    fn resealed_mutations_fail_cleanly(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
    ) {
        let mut file = sample().1.clone();
        let header_len = header_len(&file);
        for (at, byte) in &edits {
            let i = header_len + at.index(file.len() - header_len);
            file[i] = *byte;
        }
        let claimed = reseal(&mut file);
        // A frame may claim up to 2^20 bytes from two words: bounded work, but slow work.
        prop_assume!(claimed <= 4 * sample().0.len());
        decodes_to_original_or_fails(&file)?;
    }

    /// The same with the mixing stage: its binary decisions decode damaged words cleanly.
    #[test]
    fn resealed_mutations_with_the_mixing_stage_fail_cleanly(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5),
    ) {
        let (data, packed) = sample_with_mix();
        let mut file = packed.clone();
        let header_len = header_len(&file);
        for (at, byte) in &edits {
            let i = header_len + at.index(file.len() - header_len);
            file[i] = *byte;
        }
        let claimed = reseal(&mut file);
        prop_assume!(claimed <= 4 * data.len());
        decodes_to_original_or_fails(&file)?;
    }
}

/// The helpers above do what they claim: a resealed unchanged file is unchanged, and a
/// resealed damaged frame gets past the frame checksum into the decoder.
#[test]
fn resealing_reaches_the_decoder() {
    let (data, packed) = sample();
    let mut same = packed.clone();
    assert_eq!(reseal(&mut same), data.len());
    assert_eq!(&same, packed);

    let mut damaged = packed.clone();
    // Inside the first frame's words (length, mode, word count, then the words).
    damaged[header_len(packed) + 6 + 20] ^= 0x40;
    reseal(&mut damaged);
    let err = format!("{:#}", decompress_bytes(&damaged).unwrap_err());
    assert!(!err.contains("frame checksum"), "{err}");
}
