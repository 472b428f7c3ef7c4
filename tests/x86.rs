//! The x86 transform (`mix:x86=1`, src/transform/x86.rs, and with the stage for machine code
//! `mix:x86=2`, src/mix/x86ops.rs) end to end: every input round-trips
//! with it forced on (the adversarial ones too, and across a frame's boundary, in pieces and
//! through standard input and output); detection chooses it for an x86-64 executable and not
//! for text or random bytes; the header records it, so decompression takes no flag; a header
//! naming a transform this build does not know is refused.

mod common;

use std::io::{Read, Write};

use common::cli::{TINY, assert_ok, run};
use common::{assert_round_trip, random, recipe_of, samples, text, tiny, with_mix};
use lmzip::codec::{self, Options, compress_bytes, decompress_bytes};
use lmzip::format::FRAME_MAX;
use lmzip::recipe::{ModelKind, OptimizerKind, Recipe};

/// The tiny network with the small stage, transform on.
fn x86_recipe() -> Recipe {
    let recipe = with_mix(&tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1));
    recipe.edit("mix:x86=1", None).unwrap()
}

/// Predicting only, with a smaller stage and both passes of the transform (`x86=2`): for
/// inputs over a frame.
fn fast_x86_recipe() -> Recipe {
    let recipe = tiny(ModelKind::Mamba1, None, 1);
    recipe
        .edit("mix:orders=2,table=12,match=12,ext=0,x86=2", None)
        .unwrap()
}

/// Bytes dense in E8, E9 and 0F 8x, with near and far operands, cut anywhere.
fn e8_dense(n: usize, seed: u64) -> Vec<u8> {
    let noise = random(n, seed);
    noise
        .iter()
        .enumerate()
        .map(|(i, &r)| match r % 9 {
            0 | 1 => 0xE8,
            2 => 0xE9,
            3 => 0x0F,
            4 => 0x80 | (i as u8 & 0x0F),
            5 | 6 => 0x00,
            7 => 0xFF,
            _ => r,
        })
        .collect()
}

/// x86-64-like code: calls to a few functions from many places, and conditional jumps.
fn code(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 16);
    let targets = [0x400u32, 0x9000, 0x2_0000, 0x8_0000];
    let mut i = 0u32;
    while out.len() < n {
        out.extend_from_slice(&[0x48, 0x89, 0xDF]); // mov rdi, rbx
        let target = targets[(i % 4) as usize];
        let next = out.len() as u32 + 5;
        out.push(0xE8);
        out.extend_from_slice(&target.wrapping_sub(next).to_le_bytes());
        out.extend_from_slice(&[0x85, 0xC0, 0x0F, 0x84]); // test eax, eax; je
        out.extend_from_slice(&(0x40 + (i % 7) * 4).to_le_bytes());
        i += 1;
    }
    out.truncate(n);
    out
}

#[test]
fn every_input_round_trips_with_the_transform_on() {
    for x86 in ["mix:x86=1", "mix:x86=2"] {
        let recipe = x86_recipe().edit(x86, None).unwrap();
        every_input_round_trips_with(&recipe);
    }
}

fn every_input_round_trips_with(recipe: &Recipe) {
    let recipe = recipe.clone();
    let mut inputs: Vec<(String, Vec<u8>)> = samples()
        .into_iter()
        .map(|(name, data)| (name.to_string(), data))
        .collect();
    for n in 0..=5 {
        inputs.push((format!("{n} bytes of E8"), vec![0xE8; n]));
        inputs.push((
            format!("{n} bytes of 0F 84"),
            [0x0F, 0x84].repeat(3)[..n].to_vec(),
        ));
    }
    inputs.push(("E8 then a near operand".into(), vec![0xE8, 1, 2, 3, 0xFF]));
    inputs.push((
        "E8 at the end".into(),
        [&text(100)[..], &[0xE8, 0, 0]].concat(),
    ));
    inputs.push(("E8 dense".into(), e8_dense(20_000, 7)));
    inputs.push(("code".into(), code(20_000)));
    for (name, data) in &inputs {
        let packed = assert_round_trip(&recipe, name, data);
        // The header says so: decompression needed no flag.
        let (_, summary) = codec::decompress_bytes_with(&Options::default(), &packed).unwrap();
        assert!(summary.recipe.mix.unwrap().x86, "{name}");
    }
}

#[test]
fn the_transform_pays_on_code() {
    let on = x86_recipe();
    let off = on.edit("mix:x86=0", None).unwrap();
    let data = calls(30_000);
    let with = compress_bytes(&on, &data).unwrap().len();
    let without = compress_bytes(&off, &data).unwrap().len();
    assert!(with < without, "with {with}, without {without}");
}

/// Calls to 64 functions in random order between random instructions of 1 to 8 bytes.
fn calls(n: usize) -> Vec<u8> {
    let noise = random(n, 99);
    let mut out = Vec::with_capacity(n + 16);
    let mut k = 0;
    while out.len() < n {
        let r = noise[k % n] as usize;
        k += 1;
        out.extend_from_slice(&noise[k % n..(k % n + 1 + r % 8).min(n)]);
        let target = 0x1000 + (noise[(k * 7) % n] as u32 % 64) * 0x100;
        let next = out.len() as u32 + 5;
        out.push(0xE8);
        out.extend_from_slice(&target.wrapping_sub(next).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Standard input to standard output, with the input written in uneven pieces through the
/// library's encoder: the same bytes.
#[test]
fn pieces_give_the_same_bytes() {
    let recipe = x86_recipe();
    let data = [&code(20_000)[..], &e8_dense(3000, 5)].concat();
    let packed = compress_bytes(&recipe, &data).unwrap();
    let options = lmzip::Options::new().recipe(recipe.to_text());
    assert_pieces_round_trip(&options, &data, &packed, 777);
}

/// `data` written through the library's encoder in pieces of `piece` bytes decodes to itself,
/// and `packed` (its one-call compression) reads back through the streaming decoder.
fn assert_pieces_round_trip(options: &lmzip::Options, data: &[u8], packed: &[u8], piece: usize) {
    let mut encoder = lmzip::Encoder::new(Vec::new(), options).unwrap();
    for piece in data.chunks(piece) {
        encoder.write_all(piece).unwrap();
    }
    let streamed = encoder.finish().unwrap();
    assert!(decompress_bytes(&streamed).unwrap() == data);
    let mut back = Vec::new();
    lmzip::Decoder::new(packed).read_to_end(&mut back).unwrap();
    assert!(back == data);
}

/// Instructions cut by the end of the first frame; the second frame's positions count from the
/// member's start. Also written in uneven pieces through the library's encoder and read back
/// in pieces. A megabyte takes about a minute: `cargo test --release --test x86 -- --ignored`
/// (src/transform/x86.rs tests every cut of a frame at the transform itself).
#[test]
#[ignore = "slow: codes a megabyte across a frame boundary; CI runs it by name"]
fn frames_cut_instructions_and_still_round_trip() {
    let recipe = fast_x86_recipe();
    let mut data = code(FRAME_MAX - 3);
    data.extend_from_slice(&e8_dense(200, 3));
    data.extend_from_slice(&code(FRAME_MAX));
    for cut in 1..=6 {
        // An instruction starting `cut` bytes before the boundary.
        let at = FRAME_MAX - cut;
        data[at] = 0xE8;
        data[at + 4] = 0x00;
    }
    // RIP-relative loads (`mov rax, [rip+d]`, 7 bytes) in the second megabyte, and one cut
    // by its end.
    for at in (FRAME_MAX + 1000..2 * FRAME_MAX - 100)
        .step_by(9973)
        .chain([2 * FRAME_MAX - 3])
    {
        data[at..at + 7].copy_from_slice(&[0x48, 0x8B, 0x05, 9, 8, 7, 0]);
    }
    let packed = assert_round_trip(&recipe, "over a frame", &data);
    // Pieces: the frames are cut every FRAME_MAX bytes whatever the pieces are.
    let options = lmzip::Options::new()
        .recipe(recipe.to_text())
        .size(data.len() as u64);
    assert_pieces_round_trip(&options, &data, &packed, 333_333);
}

/// What detection chooses for `data`.
fn chooses(data: &[u8]) -> bool {
    let recipe = with_mix(&tiny(ModelKind::Mamba1, None, 1));
    let options = Options {
        choose_x86: true,
        ..Options::default()
    };
    let (packed, summary) = codec::compress_bytes_with(&recipe, &options, data).unwrap();
    assert_eq!(decompress_bytes(&packed).unwrap(), data);
    summary.recipe.mix.unwrap().x86
}

#[test]
fn detection_chooses_it_for_code_only() {
    assert!(!chooses(&text(20_000)));
    assert!(!chooses(&random(70_000, 11)));
    assert!(!chooses(&e8_dense(5000, 1)));
    assert!(!chooses(&[]));
    assert!(chooses(&code(20_000)));
}

/// The test program itself is an x86-64 ELF executable: its first 100 KB.
#[cfg(target_arch = "x86_64")]
fn this_executable() -> Vec<u8> {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(exe.starts_with(b"\x7fELF"));
    exe[..exe.len().min(100_000)].to_vec()
}

#[cfg(target_arch = "x86_64")]
#[test]
fn detection_chooses_it_for_an_x86_64_executable() {
    assert!(chooses(&this_executable()));
}

/// Machine code takes the level's recipe for text (its prior and its training) at levels 1-3,
/// where the seeded network for other input is the prior's network; level 4 keeps its larger
/// seeded network. Either way the stage for machine code is on.
#[cfg(target_arch = "x86_64")]
#[test]
fn machine_code_takes_the_prior_where_the_network_is_the_same() {
    let exe = this_executable();
    let exe = &exe[..30_000];
    for (level, prior) in [(1, true), (3, true), (4, false)] {
        let packed = lmzip::compress(exe, &lmzip::Options::new().level(level)).unwrap();
        let recipe = recipe_of(&packed);
        assert!(recipe.mix.unwrap().x86_ops, "level {level}");
        assert_eq!(recipe.config().prior() != 0, prior, "level {level}");
        let seeded = lmzip::levels::seeded_recipe(ModelKind::Mamba1, level);
        match prior {
            // At levels 1-3 the network does not train on machine code's first 128 KiB: all of
            // these bytes (the training it takes after them is below).
            true => assert_eq!(recipe.schedule.len(), 1, "level {level}"),
            false => assert_eq!(recipe.schedule, seeded.schedule, "level {level}"),
        }
        assert_eq!(lmzip::decompress(&packed).unwrap(), exe, "level {level}");
    }
    // Text-free binary data that is not machine code keeps the seeded network.
    let packed = lmzip::compress(&random(30_000, 5), &lmzip::Options::new().level(3)).unwrap();
    assert_eq!(recipe_of(&packed).config().prior(), 0);
    // So does machine code known to be longer than 256 KiB, where the prior costs bytes.
    let (text, seeded) = (
        lmzip::levels::recipe(ModelKind::Mamba1, 3),
        lmzip::levels::seeded_recipe(ModelKind::Mamba1, 3),
    );
    for (known, prior) in [(256 << 10, true), ((256 << 10) + 1, false)] {
        let options = Options {
            choose_prior: true,
            choose_x86: true,
            seeded: Some(&seeded),
            known_len: Some(known),
            ..Options::default()
        };
        let (_, summary) = codec::compress_bytes_with(&text, &options, &exe[..3000]).unwrap();
        assert_eq!(summary.recipe.config().prior() != 0, prior, "{known}");
        let like = if prior { &text } else { &seeded };
        assert_eq!(summary.recipe.schedule, like.schedule, "{known}");
    }
}

/// The network does not train on machine code's first 128 KiB: an input known to be no
/// longer is coded with one rule, `infer` throughout (so with the coder words that the level's
/// rules would not give); a longer one has `infer` over them ahead of the level's rules. Input
/// that is not a program's machine code, and a recipe or command line that says how to train,
/// train from the first byte as the recipe says.
#[cfg(target_arch = "x86_64")]
#[test]
fn machine_code_is_not_trained_over_its_first_128_kib() {
    use lmzip::recipe::{Action, Body, Pos, Rule, Span};
    let exe = this_executable();
    let exe = &exe[..30_000];
    let options = lmzip::Options::new().level(1);
    let packed = lmzip::compress(exe, &options).unwrap();
    assert_eq!(lmzip::decompress(&packed).unwrap(), exe);
    let recipe = recipe_of(&packed);
    let infer = |end| Rule {
        span: Span {
            start: Pos::Bytes(0),
            end,
        },
        body: Body::Action(Action::Infer),
    };
    assert_eq!(recipe.schedule, [infer(Pos::End)]);
    let level = lmzip::levels::recipe(ModelKind::Mamba1, 1);
    let trained = Recipe {
        schedule: level.schedule.clone(),
        ..recipe.clone()
    };
    let words = |r: &Recipe| codec::frame_words(r, &Options::default(), exe).unwrap();
    assert!(words(&recipe) != words(&trained));
    // Known to be longer: untrained up to 128 KiB, then the level's rules.
    let seeded = lmzip::levels::seeded_recipe(ModelKind::Mamba1, 1);
    let longer = Options {
        choose_prior: true,
        choose_x86: true,
        choose_training: true,
        seeded: Some(&seeded),
        known_len: Some(codec::MACHINE_CODE_UNTRAINED + 1),
        ..Options::default()
    };
    let (_, summary) = codec::compress_bytes_with(&level, &longer, exe).unwrap();
    let until = Pos::Bytes(codec::MACHINE_CODE_UNTRAINED);
    assert_eq!(summary.recipe.schedule[0], infer(until));
    assert_eq!(summary.recipe.schedule[1..], level.schedule);
    // Over the bytes it leaves untrained, the rule codes as `infer` throughout does.
    let throughout = Recipe {
        schedule: vec![infer(Pos::End)],
        ..summary.recipe.clone()
    };
    assert!(words(&summary.recipe) == words(&throughout));
    // A run that saves its model trains it from the first byte.
    let saving = Options {
        save_model: true,
        ..longer
    };
    let (_, summary) = codec::compress_bytes_with(&level, &saving, exe).unwrap();
    assert_eq!(summary.recipe.schedule, level.schedule);
    // Text, and a recipe with rules of its own, keep the level's training from the start.
    let first_rule = |data: &[u8], options: &lmzip::Options| {
        let packed = lmzip::compress(data, options).unwrap();
        recipe_of(&packed).schedule[0].clone()
    };
    assert_eq!(first_rule(&text(3000), &options), level.schedule[0]);
    // So does code without a program's header (as archives of object files are: their
    // symbols and relocations pay for training).
    assert!(chooses(&code(20_000)));
    assert_eq!(first_rule(&code(20_000), &options), level.schedule[0]);
    let own = options.clone().recipe("0..:train(lr=0.003)");
    let rule = first_rule(exe, &own);
    assert_eq!(rule.span.start, Pos::Bytes(0));
    assert!(matches!(rule.body, Body::Action(Action::Train(_))));
    // On the command line, so does a training knob.
    let dir = tempfile::tempdir().unwrap();
    for (args, untrained) in [(&[][..], true), (&["--lr", "0.003"][..], false)] {
        let mut all = vec!["compress", "-c", "-1"];
        all.extend_from_slice(args);
        let out = run(dir.path(), &all, exe);
        assert_ok(&out);
        let body = &recipe_of(&out.stdout).schedule[0].body;
        assert_eq!(*body == Body::Action(Action::Infer), untrained, "{args:?}");
    }
}

/// The stage for machine code (`x86=2`: instruction contexts, the families for text left
/// out) writes less than the transform's stage (`x86=1`) on real x86-64 code.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_stage_for_machine_code_pays_on_an_executable() {
    // 60,000 bytes of the test program's code: where its program headers say it is.
    let whole = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let region = lmzip::transform::x86::detect(&whole[..whole.len().min(64 << 10)]).unwrap();
    let start = region.start as usize;
    let exe = &whole[start..(start + 60_000).min(whole.len())];
    let size = |x86: &str| {
        let recipe = x86_recipe().edit(x86, None).unwrap();
        let packed = compress_bytes(&recipe, exe).unwrap();
        assert_eq!(decompress_bytes(&packed).unwrap(), exe, "{x86}");
        packed.len()
    };
    let (code, transform) = (size("mix:x86=2"), size("mix:x86=1"));
    assert!(
        (code as f64) < 0.98 * transform as f64,
        "{code} against {transform}"
    );
}

/// The command line: `--x86 auto` (the default) chooses it for an executable from standard
/// input, `--x86 off` and `--x86 on` force it; decompression to standard output takes no flag.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_command_line_chooses_and_forces_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = this_executable();
    let exe = &exe[..40_000];
    let txt = text(5000);
    // What the header says: no transform (None), or its value.
    let has = |packed: &[u8]| {
        let at = packed.windows(4).position(|w| w == b"x86=")?;
        Some(packed[at + 4])
    };
    for (args, data, want) in [
        (&[][..], exe, Some(b'2')),
        (&["--x86", "off"][..], exe, None),
        (&["--x86", "auto"][..], &txt[..], None),
        (&["--x86", "on"][..], &txt[..], Some(b'2')),
        (&["--recipe", "mix:x86=1"][..], &txt[..], Some(b'1')),
        (&["--recipe", "mix:x86=2"][..], &txt[..], Some(b'2')),
    ] {
        let mut all = vec!["compress", "-c"];
        all.extend_from_slice(TINY);
        all.extend_from_slice(args);
        let out = run(dir.path(), &all, data);
        assert_ok(&out);
        assert_eq!(has(&out.stdout), want, "{args:?}");
        let back = run(dir.path(), &["decompress", "-c"], &out.stdout);
        assert_ok(&back);
        assert!(back.stdout == data, "{args:?}");
    }
    let out = run(dir.path(), &["compress", "--x86", "maybe"], b"x");
    assert!(!out.status.success());
}

/// A header naming a transform this build does not know (`x86=7`, its CRC made right) is
/// refused with a message that names it, without a panic.
#[test]
fn an_unknown_transform_in_a_header_is_refused() {
    let packed = compress_bytes(&x86_recipe(), &code(3000)).unwrap();
    let header = lmzip::format::read_header(&mut &packed[..]).unwrap();
    let len = header.len as usize;
    let at = packed[..len]
        .windows(5)
        .position(|w| w == b"x86=1")
        .expect("the header names the transform");
    let mut bad = packed.clone();
    bad[at + 4] = b'7';
    let crc = crc32fast::hash(&bad[..len - 4]);
    bad[len - 4..len].copy_from_slice(&crc.to_le_bytes());
    let err = format!("{:#}", decompress_bytes(&bad).unwrap_err());
    assert!(err.contains("x86 7"), "{err}");
    // And through the binary.
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["decompress", "-c"], &bad);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("x86 7"));
}

/// The range keys need the transform and an end after their start.
#[test]
fn a_bad_range_is_refused() {
    let recipe = x86_recipe();
    for (text, needle) in [
        ("mix:x86=0,x86from=5", "need x86=1"),
        ("mix:x86=0,x86to=9", "need x86=1"),
        ("mix:x86=1,x86from=9,x86to=9", "after x86from"),
        ("mix:x86=3", "x86 3 is not a transform"),
    ] {
        let err = match recipe.edit(text, None) {
            Err(e) => e.to_string(),
            Ok(r) => format!("{:#}", r.validate().unwrap_err()),
        };
        assert!(err.contains(needle), "{text}: {err}");
    }
    let ok = recipe.edit("mix:x86from=9,x86to=10", None).unwrap();
    ok.validate().unwrap();
    assert_round_trip(&ok, "a range of one byte", &code(100));
}
