//! What the container costs (format version 2, docs/format.md): the goals of issue 25 for an
//! empty input, 100 bytes of text and incompressible data; round trips at several levels of
//! both models, as the levels are and edited, each stored as its level and only its edits;
//! and files of format version 1 (whole recipes, u32 lengths), alone and mixed with version 2
//! members in one stream, decoding as before.

mod common;

use std::io::Cursor;

use lmzip::codec::{compress_bytes, decompress_bytes};
use lmzip::format::{self, StoredRecipe};
use lmzip::levels;
use lmzip::recipe::{ModelKind, Recipe};

use common::{as_version_1, random, text};

/// 100 bytes of English prose.
const PROSE: &[u8; 100] =
    b"It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin nu";

fn round_trip(recipe: &Recipe, data: &[u8]) -> Vec<u8> {
    let packed = compress_bytes(recipe, data).unwrap();
    assert!(decompress_bytes(&packed).unwrap() == data, "round trip");
    packed
}

fn header(packed: &[u8]) -> format::Header {
    format::read_header(&mut &packed[..]).unwrap()
}

#[test]
fn an_empty_input_takes_at_most_40_bytes_at_every_level() {
    for kind in ModelKind::ALL {
        for level in 1..=levels::MAX_LEVEL {
            let packed = round_trip(&levels::recipe(kind, level), b"");
            assert!(
                packed.len() <= 40,
                "{kind:?} level {level}: {} bytes",
                packed.len()
            );
        }
    }
}

#[test]
fn a_hundred_bytes_of_text_take_at_most_160_bytes() {
    for kind in ModelKind::ALL {
        for level in [1, levels::DEFAULT_LEVEL] {
            let packed = round_trip(&levels::recipe(kind, level), PROSE);
            assert!(
                packed.len() <= 160,
                "{kind:?} level {level}: {} bytes",
                packed.len()
            );
        }
    }
}

/// Random bytes grow by at most 64 bytes per MiB: the frame is stored as it is. The network
/// only predicts here (no stage, no training), which keeps the megabyte fast; the level form of
/// the header is what a level's file has.
#[test]
fn random_data_grows_by_at_most_64_bytes_per_mib() {
    let data = random(1 << 20, 0x5eed);
    for kind in ModelKind::ALL {
        let recipe = levels::recipe(kind, 1)
            .edit_from_level("mix:off 0..:infer", None)
            .unwrap();
        let packed = round_trip(&recipe, &data);
        let growth = packed.len() - data.len();
        assert!(growth <= 64, "{kind:?}: {growth} bytes more");
        let layout = format::scan(&mut Cursor::new(&packed)).unwrap();
        assert_eq!((layout.frames, layout.stored_frames), (1, 1), "{kind:?}");
    }
}

/// The same with a whole level (the stage and training), on a quarter of a megabyte.
#[test]
fn random_data_at_a_level_grows_only_by_the_container() {
    let data = random(1 << 18, 0xfeed);
    let packed = round_trip(&levels::recipe(ModelKind::Mamba1, 1), &data);
    let growth = packed.len() - data.len();
    assert!(growth <= 64, "{growth} bytes more");
    assert_eq!(
        format::scan(&mut Cursor::new(&packed))
            .unwrap()
            .stored_frames,
        1
    );
}

/// Text compresses, so its frame is coded, not stored; and it decodes.
#[test]
fn compressible_frames_are_coded() {
    let data = text(4000);
    let packed = round_trip(&levels::recipe(ModelKind::Mamba1, 1), &data);
    let layout = format::scan(&mut Cursor::new(&packed)).unwrap();
    assert_eq!((layout.frames, layout.stored_frames), (1, 0));
    assert!(packed.len() < data.len() / 2, "{} bytes", packed.len());
}

#[test]
fn levels_round_trip_as_they_are_and_edited_storing_only_the_edits() {
    let data = text(1500);
    for kind in ModelKind::ALL {
        for level in [1, 3, 5, 9] {
            let plain = levels::recipe(kind, level);
            let edits = [
                "",
                "0..:train(lr=0.001)",
                "cfg:seed=3 mix:table=16",
                "mix:off 0..512:infer 512..:train(bptt=8)",
            ];
            for edit in edits {
                let recipe = plain.edit_from_level(edit, None).unwrap();
                let packed = round_trip(&recipe, &data);
                let h = header(&packed);
                let StoredRecipe::Level {
                    level: l, edits, ..
                } = &h.recipe
                else {
                    panic!("{kind:?} level {level} '{edit}': {:?}", h.recipe);
                };
                // Its own level, or one that takes no longer edits (RWKV-7's levels 1 to 3
                // differ only in the stage's table).
                let own = recipe.edits_from(&plain).unwrap();
                assert!(
                    *l == level || edits.len() <= own.len(),
                    "{kind:?} level {level} '{edit}': stored as level {l} with '{edits}'"
                );
                // The edits, with at most a derived key written out (a stride that follows
                // a window), and nothing of the level itself.
                assert!(
                    edits.len() <= edit.len() + 10,
                    "{kind:?} level {level} '{edit}': stored '{edits}'"
                );
                assert_eq!(
                    h.len as usize,
                    18 + edits.len() + (edits.len() > 127) as usize
                );
                assert_eq!(lmzip::codec::read_recipe(&h).unwrap(), recipe);
            }
        }
    }
}

#[test]
fn version_1_files_decode_alone_and_beside_version_2_members() {
    for kind in ModelKind::ALL {
        let recipe = levels::recipe(kind, 1);
        let (a, b) = (text(700), random(300, 1));
        let old = as_version_1(&recipe, &a);
        assert_eq!(header(&old).format_version, 1);
        assert!(decompress_bytes(&old).unwrap() == a, "{kind:?}: version 1");
        let new = round_trip(&recipe, &b);
        // The container shrank; the coded words did not change.
        let stream = [&old[..], &new[..], &old[..]].concat();
        let decoded = decompress_bytes(&stream).unwrap();
        assert!(
            decoded == [&a[..], &b[..], &a[..]].concat(),
            "{kind:?}: mixed"
        );
        let members = format::scan_members(&mut Cursor::new(&stream)).unwrap();
        let versions: Vec<u8> = members.iter().map(|m| m.header.format_version).collect();
        assert_eq!(versions, [1, 2, 1]);
        // A damaged old file is still refused.
        let mut bad = old.clone();
        bad[20] ^= 1;
        assert!(decompress_bytes(&bad).is_err());
    }
}
