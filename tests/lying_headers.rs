//! What a header can make the decoder allocate. The recipe in a header sizes the model, and the
//! frame lengths size the buffers; a file that lies about either must be refused before the
//! memory is asked for, fast, with a message that says why.
//!
//! A counting allocator measures the peak of live heap bytes while each case runs. The tests of
//! this binary take a lock, so that one measurement sees only its own case (and the harness's
//! small allocations).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lmzip::codec::decompress_bytes;
use lmzip::format::{self, FRAME_MAX, StoredRecipe, max_words};
use lmzip::mix::MixSpec;
use lmzip::model::{mamba1, rwkv7};
use lmzip::recipe::{
    Action, Base, Body, MAX_BPTT, MAX_DIM, ModelConfig, ModelKind, Pos, Recipe, Rule, Span,
    TrainSpec,
};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The heap counter sees every thread, so each test holds this for its whole body: another
/// test's allocations (outside its own measured window too) must not land in a measurement.
fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` and returns its result, the most heap it held at once beyond what was live before,
/// and how long it took. The caller holds [`alone`].
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, Duration) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let start = Instant::now();
    let out = f();
    let elapsed = start.elapsed();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    (out, peak, elapsed)
}

const MIB: usize = 1 << 20;

/// A file that is only a header carrying `recipe` (its canonical text, unvalidated) and the end
/// of an empty stream.
fn file_with(recipe: &Recipe) -> Vec<u8> {
    let mut f = Vec::new();
    format::write_header(&mut f, &StoredRecipe::Text(recipe.to_text())).unwrap();
    format::write_end(&mut f, 0, 0).unwrap();
    f
}

/// Decodes a lying file and checks that it was refused with `needle` in the message, within
/// a megabyte of heap and without doing the work it asked for (a refusal takes microseconds;
/// the bound is loose enough for any loaded machine and still catches a model being built).
#[track_caller]
fn refused_at_once(file: &[u8], needle: &str) {
    let (result, peak, elapsed) = measure(|| decompress_bytes(file));
    let err = format!("{:#}", result.expect_err("a lying header is refused"));
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(peak < MIB, "{peak} bytes allocated before refusing: {err}");
    assert!(
        elapsed < Duration::from_secs(10),
        "{elapsed:?} before refusing: {err}"
    );
}

/// The default level's schedule on a fresh model of these sizes (not validated).
fn with_model(config: ModelConfig) -> Recipe {
    Recipe {
        base: Base::Fresh { config, seed: 0 },
        ..lmzip::levels::default_recipe(ModelKind::Mamba1)
    }
}

/// Models of some hundred million parameters: every dimension is within bounds, and so they
/// were accepted while the cap was 256M parameters (gigabytes with gradients and Adam).
#[test]
fn a_header_asking_for_a_huge_model_is_refused_before_allocating() {
    let _alone = alone();
    let mamba = with_model(ModelConfig::Mamba1(mamba1::Config {
        hidden: 4096,
        layers: 2,
        inner: 8192,
        ..mamba1::Config::default()
    }));
    let rwkv = with_model(ModelConfig::Rwkv7(rwkv7::Config {
        hidden: 1024,
        layers: 8,
        intermediate: 4096,
        ..rwkv7::Config::default()
    }));
    for recipe in [mamba, rwkv] {
        refused_at_once(
            &file_with(&recipe),
            "parameters; this build accepts at most",
        );
    }
}

/// Few parameters, but a TBPTT window that keeps 64 traces of an SSM state as large as the
/// model: the training buffers, not the weights, would take gigabytes.
#[test]
fn a_header_asking_for_huge_training_buffers_is_refused_before_allocating() {
    let _alone = alone();
    let mut recipe = with_model(ModelConfig::Mamba1(mamba1::Config {
        hidden: 1,
        layers: 1,
        inner: MAX_DIM,
        state: 256,
        conv: 64,
        dt_rank: 1,
        ctx: 0,
        prior: 0,
    }));
    let long = TrainSpec {
        bptt: MAX_BPTT,
        stride: MAX_BPTT,
        ..TrainSpec::defaults(ModelKind::Mamba1)
    };
    recipe.schedule = vec![Rule {
        span: Span::ALL,
        body: Body::Action(Action::Train(long)),
    }];
    refused_at_once(&file_with(&recipe), "working memory");
    // The same window in a later rule, after an inferring one: every action is counted.
    recipe.schedule = vec![
        Rule {
            span: Span {
                start: Pos::Bytes(0),
                end: Pos::Bytes(1000),
            },
            body: Body::Action(Action::Infer),
        },
        Rule {
            span: Span {
                start: Pos::Bytes(1000),
                end: Pos::End,
            },
            body: Body::Action(Action::Train(long)),
        },
    ];
    refused_at_once(&file_with(&recipe), "working memory");
}

/// A mixing stage whose tables and match window would take more than this build accepts: the
/// header is refused before any table is allocated.
#[test]
fn a_header_asking_for_a_huge_mixing_stage_is_refused_before_allocating() {
    let _alone = alone();
    let mut recipe = lmzip::levels::default_recipe(ModelKind::Mamba1)
        .edit("cfg:hidden=16,layers=1", None)
        .unwrap();
    recipe.mix = Some(MixSpec {
        orders: 8,
        word: true,
        sparse: true,
        matcher: 28,
        sse: true,
        table: 24,
        rate: 12,
        ..MixSpec::DEFAULT
    });
    refused_at_once(&file_with(&recipe), "the mixing stage needs");
}

/// A compact header (a level and edits) may lie as a whole recipe can: edits that ask for a
/// huge model or stage, a level this build does not have, a checksum of another recipe. Each
/// is refused before anything is allocated.
#[test]
fn a_compact_header_that_lies_is_refused_before_allocating() {
    let _alone = alone();
    let level = |level: u8, edits: &str, crc: u32| {
        let mut f = Vec::new();
        let stored = StoredRecipe::Level {
            model: lmzip::compact::model_code(ModelKind::Mamba1),
            level,
            edits: edits.into(),
            crc,
        };
        format::write_header(&mut f, &stored).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        f
    };
    let crc_of =
        |level: u8| lmzip::compact::recipe_crc(&lmzip::levels::recipe(ModelKind::Mamba1, level));
    refused_at_once(
        &level(3, "cfg:hidden=4096,layers=2,intermediate=8192", 0),
        "parameters; this build accepts at most",
    );
    refused_at_once(
        &level(3, "mix:orders=8,match=28,table=24", 0),
        "the mixing stage needs",
    );
    refused_at_once(
        &level(0, "", crc_of(1)),
        "level 0 is not one of this build's",
    );
    refused_at_once(
        &level(10, "", crc_of(9)),
        "level 10 is not one of this build's",
    );
    refused_at_once(&level(2, "", crc_of(3)), "means another recipe");
    refused_at_once(
        &level(3, "0..:train(lr=abc)", crc_of(3)),
        "the edits of level 3",
    );
    // The honest header of the same level decodes (to nothing).
    assert_eq!(decompress_bytes(&level(3, "", crc_of(3))).unwrap(), b"");
}

/// Frame lengths at and beyond their bounds, with nothing behind them: the decoder allocates
/// at most the frame buffer and the largest word array a frame may have, then finds the file
/// truncated (or the lengths out of bounds).
#[test]
fn frame_lengths_allocate_no_more_than_their_bounds() {
    let _alone = alone();
    let recipe = lmzip::levels::default_recipe(ModelKind::Mamba1)
        .edit("cfg:hidden=16,layers=1,ctx=0 mix:off", None)
        .unwrap();
    let frame_bound = FRAME_MAX + 4 * max_words(FRAME_MAX);
    for (raw_len, words, needle) in [
        (FRAME_MAX as u32, max_words(FRAME_MAX) as u32, "truncated"),
        (
            FRAME_MAX as u32,
            max_words(FRAME_MAX) as u32 + 1,
            "cannot code",
        ),
        (FRAME_MAX as u32 + 1, 3, "exceeds"),
        (u32::MAX, u32::MAX, "exceeds"),
    ] {
        let mut file = Vec::new();
        format::write_header(&mut file, &lmzip::compact::store(&recipe)).unwrap();
        format::varint::put(&mut file, raw_len as u64);
        file.push(0);
        format::varint::put(&mut file, words as u64);
        let (result, peak, _) = measure(|| decompress_bytes(&file));
        let err = format!("{:#}", result.unwrap_err());
        assert!(
            err.contains(needle),
            "{raw_len}/{words}: expected '{needle}' in: {err}"
        );
        // The tiny model's own buffers are far below a megabyte.
        assert!(
            peak < frame_bound + MIB,
            "{raw_len}/{words}: {peak} bytes allocated"
        );
    }
}

/// The same limit meets a user who asks for too much: a usage error before anything is read.
#[test]
fn the_binary_refuses_a_model_above_the_limit() {
    let _alone = alone();
    let dir = tempfile::TempDir::new().unwrap();
    let out = common::cli::run(
        dir.path(),
        &["compress", "-c", "--hidden", "4096", "--layers", "2"],
        b"some input",
    );
    // The width is what is too large: the message names the largest that fits.
    common::cli::assert_usage_error(&out, "--hidden 4096 is out of range");
    common::cli::assert_usage_error(&out, "the parameter count");
    let out = common::cli::run(
        dir.path(),
        &["compress", "-c", "--layers", "64", "--hidden", "1024"],
        b"some input",
    );
    common::cli::assert_usage_error(&out, "--hidden 1024 is out of range");
}

/// The estimate the limit is checked against follows what decoding really holds: for schedules
/// that mix one-step updates, SGD, Adam and TBPTT windows, with and without the mixing stage,
/// the peak heap of a decode is the estimate (less the stage's mapped tables) plus the frame
/// buffer and vector-sized scratch, and not far below it.
#[test]
fn the_working_memory_estimate_follows_what_decoding_allocates() {
    let _alone = alone();
    let data: Vec<u8> = b"the estimate bounds what the decoder allocates; "
        .iter()
        .cycle()
        .take(700)
        .copied()
        .collect();
    for (kind, text) in [
        (
            ModelKind::Mamba1,
            "cfg:hidden=96,layers=2 mix:off 0..100:train(opt=sgd,bptt=1) \
             100..:train(opt=adam,bptt=200,stride=200)",
        ),
        (
            ModelKind::Mamba1,
            "cfg:hidden=64,layers=1,state=64 mix:off \
             0..:repeat(50:infer,100:train(opt=sgd,bptt=100))",
        ),
        (
            ModelKind::Mamba1,
            "cfg:hidden=32,layers=1 mix:orders=6,match=18,table=18 0..:train(opt=adam,bptt=1)",
        ),
        (
            ModelKind::Rwkv7,
            "cfg:hidden=64,layers=2 mix:off 0..300:train(opt=adam,bptt=1) \
             300..:train(opt=sgd,bptt=70,stride=70)",
        ),
    ] {
        let recipe = lmzip::levels::default_recipe(kind)
            .edit(text, None)
            .unwrap();
        let lmz = lmzip::codec::compress_bytes(&recipe, &data).unwrap();
        let (out, peak, _) = measure(|| decompress_bytes(&lmz));
        assert_eq!(out.unwrap(), data);
        // The stage's context tables live in memory maps of their own (src/mix/slots.rs),
        // which the counting allocator does not see: the heap holds the rest of the estimate.
        let estimate = recipe.working_bytes() - recipe.mix.map_or(0, |m| m.table_bytes());
        // The frame buffer, the output, and the network's vector-sized scratch (with the
        // bookkeeping of each trace's vectors, some hundred bytes a trace).
        let fixed = FRAME_MAX + data.len().next_power_of_two() + 4 * lmz.len();
        assert!(
            peak <= estimate + fixed + 256 * 1024,
            "{text}: peak {peak} bytes, estimate {estimate} + {fixed}"
        );
        assert!(
            peak >= estimate + FRAME_MAX,
            "{text}: peak {peak} bytes, estimate {estimate}: the estimate counts too much"
        );
    }
}

/// A header whose stage key `fit` or `cap` is out of range (a huge value, which could only
/// mean "no cap", or one below what the maps it shrinks allow), or that gives both, is
/// refused before anything is built.
#[test]
fn a_header_with_a_huge_or_tiny_fit_is_refused_before_allocating() {
    let _alone = alone();
    let level = lmzip::levels::default_recipe(ModelKind::Mamba1);
    let text = level.to_text();
    assert!(text.contains(",table=22,"), "{text}");
    for key in ["fit", "cap"] {
        for fit in ["4294967295", "99", "29", "15", "1"] {
            let lying = text.replace(",table=22,", &format!(",table=22,{key}={fit},"));
            let mut f = Vec::new();
            format::write_header(&mut f, &StoredRecipe::Text(lying)).unwrap();
            format::write_end(&mut f, 0, 0).unwrap();
            refused_at_once(&f, key);
        }
    }
    let both = text.replace(",table=22,", ",table=22,fit=18,");
    let both = both.replace(",ext=8191,warm=1,", ",ext=8191,cap=18,warm=1,");
    assert!(both.contains("cap=18"), "{both}");
    let mut f = Vec::new();
    format::write_header(&mut f, &StoredRecipe::Text(both)).unwrap();
    format::write_end(&mut f, 0, 0).unwrap();
    refused_at_once(&f, "give one of them");
}

/// A header whose network size `ctx` is out of range (tables below 2^8 rows, or above 2^20,
/// which could ask for gigabytes) is refused before anything is built.
#[test]
fn a_header_with_out_of_range_context_tables_is_refused_before_allocating() {
    let _alone = alone();
    let level = lmzip::levels::default_recipe(ModelKind::Mamba1);
    let text = level.to_text();
    assert!(text.contains(",ctx=14,"), "{text}");
    for ctx in ["4294967295", "99", "21", "7", "1"] {
        let lying = text.replace(",ctx=14,", &format!(",ctx={ctx},"));
        let mut f = Vec::new();
        format::write_header(&mut f, &StoredRecipe::Text(lying)).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        refused_at_once(&f, "ctx");
    }
}

/// A header naming a built-in prior this build does not carry (by number), or one out of range,
/// is refused before anything is built, in either of the header's recipe forms.
#[test]
fn a_header_naming_an_unknown_prior_is_refused_before_allocating() {
    let _alone = alone();
    let level = lmzip::levels::default_recipe(ModelKind::Mamba1);
    let text = level.to_text();
    assert!(text.contains(",ctx=14,prior=2,"), "{text}");
    let unknown = lmzip::model::MAX_PRIOR;
    assert!(lmzip::prior::by_number(unknown).is_none());
    for (prior, needle) in [
        (unknown.to_string(), "does not carry"),
        ("256".into(), "prior"),
    ] {
        let lying = text.replace(",prior=2,", &format!(",prior={prior},"));
        let mut f = Vec::new();
        format::write_header(&mut f, &StoredRecipe::Text(lying)).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        refused_at_once(&f, needle);
        // The level form: level 3 with the edit naming the prior.
        let mut f = Vec::new();
        let stored = StoredRecipe::Level {
            model: 1,
            level: 3,
            edits: format!("cfg:prior={prior}"),
            crc: 0,
        };
        format::write_header(&mut f, &stored).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        refused_at_once(&f, needle);
    }
}

/// A header naming a warm start of the stage's mixer this build does not carry, or one whose
/// shape is not the stage's, is refused before anything is built, in either recipe form.
#[test]
fn a_header_naming_an_unknown_or_misfitting_warm_start_is_refused_before_allocating() {
    let _alone = alone();
    let level = lmzip::levels::default_recipe(ModelKind::Mamba1);
    let text = level.to_text();
    assert!(text.contains(",warm=1,"), "{text}");
    for (edit, needle) in [
        ("warm=7", "does not carry"),
        ("orders=5,warm=1", "warm start is for"),
    ] {
        let lying = match edit {
            "warm=7" => text.replace(",warm=1,", ",warm=7,"),
            _ => text.replace("mix:orders=6,", "mix:orders=5,"),
        };
        assert_ne!(lying, text);
        let mut f = Vec::new();
        format::write_header(&mut f, &StoredRecipe::Text(lying)).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        refused_at_once(&f, needle);
        let mut f = Vec::new();
        let stored = StoredRecipe::Level {
            model: 1,
            level: 3,
            edits: format!("mix:{edit}"),
            crc: 0,
        };
        format::write_header(&mut f, &stored).unwrap();
        format::write_end(&mut f, 0, 0).unwrap();
        refused_at_once(&f, needle);
    }
}

/// A decoder with a memory limit refuses a member that needs more before building its model
/// or its stage; within the limit, the same file decodes. A member without frames (an empty
/// input) builds neither, and decodes within any limit.
#[test]
fn a_memory_limit_refuses_a_member_before_allocating() {
    let _alone = alone();
    let level = lmzip::levels::default_recipe(ModelKind::Mamba1);
    let needed = lmzip::codec::memory_needed(&level);
    assert!(needed > 300 << 20, "{needed}");
    let tight = lmzip::Options::new().memory_limit(64 << 20);
    let empty = file_with(&level);
    let (result, peak, _) = measure(|| lmzip::decompress_with(&empty, &tight));
    assert!(result.unwrap().is_empty());
    assert!(peak < 2 * MIB, "{peak} bytes allocated for an empty member");
    let one_byte = lmzip::codec::compress_bytes(&level, b"x").unwrap();
    let (result, peak, _) = measure(|| lmzip::decompress_with(&one_byte, &tight));
    match result {
        Err(lmzip::Error::MemoryLimit { needed: n, limit }) => {
            assert_eq!((n, limit), (needed, 64 << 20))
        }
        other => panic!("{other:?}"),
    }
    assert!(peak < 2 * MIB, "{peak} bytes allocated before refusing");
    let roomy = lmzip::Options::new().memory_limit(needed);
    assert_eq!(lmzip::decompress_with(&one_byte, &roomy).unwrap(), b"x");
}
