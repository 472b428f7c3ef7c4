//! Memory to fit the input (src/fit.rs): an input of known length gets a stage sized for it
//! (the mix key `cap`, stored in the header; files of the first builds have `fit`), standard
//! input of unknown length keeps the level's sizes, the peak resident memory stays within the
//! goals and below the estimate, and `--memory` / `Options::memory_limit` refuse a stream
//! whose decoding needs more, before anything is built for it.

mod common;

use std::fs;

use common::cli::{assert_fails_with, assert_usage_error, listing, names, ok, run, stdout};
use common::recipe_of;
use lmzip::codec::{self, memory_needed};
use lmzip::fit::{fit_bits, fitted};
use lmzip::levels;
use lmzip::recipe::ModelKind;
use lmzip::{Error, Options};
use tempfile::TempDir;

/// The stage's size key a stream was written with (`cap`; 0 for none).
fn fit_of(lmz: &[u8]) -> u32 {
    let mix = recipe_of(lmz).mix;
    assert_eq!(
        mix.map_or(0, |m| m.fit),
        0,
        "new streams get `cap`, not `fit`"
    );
    mix.map_or(0, |m| m.cap)
}

#[test]
fn fitted_stages_round_trip_on_text_and_binaries_at_several_levels() {
    for (data, level) in [
        (common::related_text(3000, 4), 3),
        (common::binary(5000, 9), 1),
        (common::related_text(20_000, 2), 2),
    ] {
        let options = Options::new().level(level);
        let packed = lmzip::compress(&data, &options).unwrap();
        assert_eq!(
            fit_of(&packed),
            fit_bits(data.len() as u64),
            "level {level}"
        );
        assert_eq!(lmzip::decompress(&packed).unwrap(), data, "level {level}");
        // The fitted stage is smaller than the level's, and the header says so.
        let level_recipe = levels::recipe(ModelKind::Mamba1, level);
        assert!(memory_needed(&recipe_of(&packed)) < memory_needed(&level_recipe));
    }
}

#[test]
fn a_fitted_stage_codes_within_a_fraction_of_the_level_sizes() {
    // On a short text the cap costs next to nothing (hundreds of counters per byte remain).
    let data = common::related_text(6000, 11);
    let fit = lmzip::compress(&data, &Options::new().level(1)).unwrap();
    let level = lmzip::compress(&data, &Options::new().level(1).recipe("mix:cap=0")).unwrap();
    assert_eq!((fit_of(&fit), fit_of(&level)), (17, 0));
    assert!(
        (fit.len() as f64) < level.len() as f64 * 1.02 + 16.0,
        "{} against {}",
        fit.len(),
        level.len()
    );
}

#[test]
fn a_small_file_gets_the_fit_key_and_standard_input_only_with_its_size() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = common::related_text(2500, 3);
    fs::write(d.join("a"), &data).unwrap();
    let from_file = ok(run(d, &["-1", "-c", "a"], b"")).stdout;
    assert_eq!(fit_of(&from_file), 17);
    let info = stdout(&ok(run(d, &["-1", "-k", "a"], b"")));
    assert!(info.is_empty());
    let info = stdout(&ok(run(d, &["info", "a.lmz"], b"")));
    assert!(
        info.contains(
            ",cap=17,warm=1,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,fine=1 "
        ),
        "{info}"
    );
    assert!(info.contains("memory to decode: "), "{info}");
    // Standard input of unknown length keeps the level's sizes; with --size, it is fitted.
    let piped = ok(run(d, &["-1", "-c"], &data)).stdout;
    assert_eq!(fit_of(&piped), 0);
    assert_eq!(recipe_of(&piped), levels::recipe(ModelKind::Mamba1, 1));
    let len = data.len().to_string();
    let sized = ok(run(d, &["-1", "-c", "--size", &len], &data)).stdout;
    assert_eq!(sized, from_file);
    // Sizes the user gives are kept: no fit key is added.
    for recipe in [
        "mix:table=16",
        "mix:match=20",
        "mix:fit=0",
        "mix:fit=20",
        "mix:cap=0",
        "mix:cap=20",
    ] {
        let given = ok(run(d, &["-1", "-c", "--recipe", recipe, "a"], b"")).stdout;
        let expected = levels::recipe(ModelKind::Mamba1, 1)
            .edit(recipe, None)
            .unwrap();
        assert_eq!(recipe_of(&given), expected, "{recipe}");
    }
    // Every block is fitted to its own length.
    let blocks = ok(run(d, &["-1", "-c", "--block-size", "1K", "a"], b"")).stdout;
    let layout = lmzip::format::scan_members(&mut std::io::Cursor::new(&blocks)).unwrap();
    assert_eq!(layout.len(), 3);
    for m in &layout {
        assert_eq!(codec::read_recipe(&m.header).unwrap().mix.unwrap().cap, 17);
    }
    assert_eq!(ok(run(d, &["-d", "-c"], &blocks)).stdout, data);
}

#[test]
fn the_fitted_sizes_cost_a_few_bytes_of_header() {
    let level = levels::default_recipe(ModelKind::Mamba1);
    let stored = lmzip::compact::store(&fitted(&level, 5000));
    // With the network's context tables sized for the input too.
    assert_eq!(stored.text(), "cfg:ctx=9 mix:cap=17");
}

#[test]
fn fit_and_cap_are_not_given_together() {
    let level = levels::default_recipe(ModelKind::Mamba1);
    let err = level.edit("mix:fit=18,cap=18", None).unwrap_err();
    assert!(format!("{err:#}").contains("give one of them"), "{err:#}");
}

/// The goals of memory to fit the input, as `lmzip bench` measures them (the resident
/// high-water mark of compressing and of decompressing, Linux only): inputs of `len` bytes
/// within `goal` bytes, and within what `info` says decoding needs (the estimate must bound the
/// peak, or `--memory` would let through what it means to refuse). Binary data touches every
/// table (text sits out the binary families), so the binary and random inputs are the ones at
/// the limit. `bench` keeps in memory what `compress` and `decompress` stream (the input, the
/// compressed bytes in a growing vector, the decoded copy): that much more is allowed. Each
/// input has a `bench` of its own: in one process the heap an earlier file freed but the
/// allocator kept stays resident, 1–2 MiB that a lone `compress` never carries.
fn peaks_within(len: usize, goal: u64) {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let inputs = [
        ("binary", common::binary(len, 17)),
        ("random", common::random(len, 5)),
        ("text", common::related_text(len, 9)),
    ];
    for (name, data) in &inputs {
        fs::write(d.join(name), data).unwrap();
    }
    let level = levels::default_recipe(ModelKind::Mamba1);
    let needed = memory_needed(&fitted(&level, len as u64));
    for (name, _) in &inputs {
        let tsv = stdout(&ok(run(d, &["bench", "--format", "tsv", "-q", name], b"")));
        let row = tsv
            .lines()
            .nth(1)
            .unwrap_or_else(|| panic!("no row\n{tsv}"));
        let cells: Vec<&str> = row.split('\t').collect();
        assert_eq!(cells[0], *name, "{tsv}");
        assert_eq!(cells[9], "ok", "{tsv}");
        let compressed: u64 = cells[3].parse().unwrap();
        let buffers = 2 * len as u64 + 2 * compressed;
        for peak in &cells[7..9] {
            if peak.is_empty() {
                continue; // not measured (no /proc/self/clear_refs)
            }
            let peak: u64 = peak.parse::<u64>().unwrap() * 1024;
            assert!(
                peak <= goal + buffers,
                "{name}: peak {peak} bytes, over {goal} and bench's buffers {buffers}\n{tsv}"
            );
            assert!(
                peak <= needed,
                "{name}: peak {peak} bytes, above the estimate {needed}\n{tsv}"
            );
        }
    }
}

#[test]
fn sixty_four_kib_fit_in_32_mib_and_below_the_estimate() {
    peaks_within(65_536, 32 << 20);
}

/// The same for 1 MiB (three inputs compressed and decompressed at the default: four to eight
/// minutes, so CI runs it by name).
#[test]
#[ignore = "slow: compresses and decompresses 3 MiB at the default level; CI runs it by name"]
fn one_mib_fits_in_96_mib_and_below_the_estimate() {
    peaks_within(1 << 20, 96 << 20);
}

/// The estimate of the sizes the choice gives stays near the goals with the program's
/// allowance (4 MiB) counted: 64 KiB within 32 MiB, 1 MiB within 100 MiB (the estimate counts
/// every row of the network's context tables and every counter as resident, which the peaks
/// measured above stay under: 94–95 MiB on 1 MiB).
#[test]
fn the_estimate_of_fitted_stages_is_within_the_goals() {
    let level = levels::default_recipe(ModelKind::Mamba1);
    // The frame buffers are sized for the largest frame (1 MiB); an input of 64 KiB fills
    // a sixteenth of them.
    let frame =
        (lmzip::format::FRAME_MAX + 4 * lmzip::format::max_words(lmzip::format::FRAME_MAX)) as u64;
    let stage = |len: u64| memory_needed(&fitted(&level, len)) - frame;
    assert!(stage(65_536) + frame / 16 <= 32 << 20, "{}", stage(65_536));
    assert!(stage(1 << 20) + frame <= 100 << 20, "{}", stage(1 << 20));
}

#[test]
fn memory_limits_refuse_before_building_anything() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = common::related_text(2000, 5);
    fs::write(d.join("small"), &data).unwrap();
    // A small file's stage fits in 64 MiB; the level's (standard input, no --size) does not.
    let small = ok(run(d, &["-c", "--memory", "64M", "small"], b"")).stdout;
    let piped = ok(run(d, &["-c"], &data)).stdout;
    let need = |lmz: &[u8]| memory_needed(&recipe_of(lmz));
    assert!(need(&small) < 64 << 20, "{}", need(&small));
    assert!(need(&piped) > 200 << 20, "{}", need(&piped));
    fs::write(d.join("piped.lmz"), &piped).unwrap();
    for args in [
        &["-d", "-c", "--memory", "64M", "piped.lmz"][..],
        &["decompress", "-c", "--memory", "64M", "piped.lmz"],
        &["test", "--memory", "64M", "piped.lmz"],
        &["-t", "--memory", "64M", "piped.lmz"],
    ] {
        let out = run(d, args, b"");
        assert_fails_with(&out, "decoding needs ");
        assert_fails_with(&out, "more than the limit of 64 MiB");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Decompressing to a file leaves nothing behind.
    fs::remove_file(d.join("small")).unwrap();
    let before = listing(d);
    assert_fails_with(
        &run(d, &["-d", "--memory", "64M", "piped.lmz"], b""),
        "decoding needs",
    );
    assert_eq!(listing(d), before);
    // Compression refuses to write what could not be decoded within the limit.
    let out = run(d, &["-c", "--memory", "64M"], &data);
    assert_fails_with(&out, "decoding needs ");
    assert!(out.stdout.is_empty());
    // Within the limit, all is as without it.
    fs::write(d.join("small.lmz"), &small).unwrap();
    let back = ok(run(d, &["-d", "-c", "--memory", "64M", "small.lmz"], b"")).stdout;
    assert_eq!(back, data);
    assert_usage_error(
        &run(d, &["-d", "--memory", "0", "small.lmz"], b""),
        "0 bytes",
    );
    assert_usage_error(
        &run(d, &["-d", "--memory", "lots", "small.lmz"], b""),
        "not a size",
    );
    assert_eq!(listing(d), names(&["piped.lmz", "small.lmz"]));
    // An empty input keeps the level's sizes in its header, but its member has no frame to
    // decode and builds no model: it decodes within any limit.
    let empty = ok(run(d, &["-c"], b"")).stdout;
    assert!(need(&empty) > 200 << 20, "{}", need(&empty));
    fs::write(d.join("empty.lmz"), &empty).unwrap();
    let back = ok(run(d, &["-d", "-c", "--memory", "8M", "empty.lmz"], b"")).stdout;
    assert!(back.is_empty());
    let info = String::from_utf8(ok(run(d, &["info", "empty.lmz"], b"")).stdout).unwrap();
    assert!(info.contains("memory to decode: 4 MiB"), "{info}");
    // Nor does its encoding, from standard input or a file: the same bytes as without it.
    assert_eq!(ok(run(d, &["-c", "--memory", "8M"], b"")).stdout, empty);
    fs::write(d.join("none"), b"").unwrap();
    let from_file = ok(run(d, &["-c", "--memory", "8M", "none"], b"")).stdout;
    assert_eq!(from_file, empty);
    // One byte has a frame, and the level's stage (standard input) is refused.
    assert_fails_with(&run(d, &["-c", "--memory", "8M"], b"x"), "decoding needs ");
}

#[test]
fn the_library_refuses_with_a_typed_error() {
    let data = common::related_text(1500, 8);
    let packed = lmzip::compress(&data, &Options::new().recipe("mix:fit=0")).unwrap();
    let needed = memory_needed(&recipe_of(&packed));
    let tight = Options::new().memory_limit(needed - 1);
    match lmzip::decompress_with(&packed, &tight) {
        Err(Error::MemoryLimit { needed: n, limit }) => {
            assert_eq!((n, limit), (needed, needed - 1))
        }
        other => panic!("{other:?}"),
    }
    let roomy = Options::new().memory_limit(needed);
    assert_eq!(lmzip::decompress_with(&packed, &roomy).unwrap(), data);
    // The encoder refuses the same recipe at the same limit.
    let encoder = lmzip::Encoder::new(Vec::new(), &tight.clone().recipe("mix:fit=0"));
    assert!(matches!(encoder, Err(Error::MemoryLimit { .. })));
    // An empty input builds no model either way.
    let tiny = Options::new().memory_limit(8 << 20).recipe("mix:fit=0");
    let empty = lmzip::compress(b"", &tiny).unwrap();
    assert_eq!(lmzip::decompress_with(&empty, &tiny).unwrap(), b"");
}

#[test]
fn list_and_info_show_the_memory_to_decode() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let data = common::related_text(1000, 6);
    let small = lmzip::compress(&data, &Options::new().level(1)).unwrap();
    let large = lmzip::compress(&data, &Options::new().level(1).recipe("mix:fit=0")).unwrap();
    fs::write(d.join("two.lmz"), [&small[..], &large[..]].concat()).unwrap();
    let mib = |lmz: &[u8]| codec::mebibytes(memory_needed(&recipe_of(lmz)));
    let info = stdout(&ok(run(d, &["info", "two.lmz"], b"")));
    // Members decode one after another: the most any of them needs.
    assert!(
        info.contains(&format!("memory to decode: {}\n", mib(&large))),
        "{info}"
    );
    let list = stdout(&ok(run(d, &["-l", "-v", "two.lmz"], b"")));
    let rows: Vec<&str> = list.lines().collect();
    assert!(rows[0].contains("memory"), "{list}");
    assert!(rows[1].contains(&mib(&large)), "{list}");
    assert!(rows[2].contains(&mib(&small)), "{list}");
    assert!(rows[3].contains(&mib(&large)), "{list}");
    // Without -v, the columns are as they were.
    let plain = stdout(&ok(run(d, &["-l", "two.lmz"], b"")));
    assert!(!plain.contains("memory"), "{plain}");
}
