//! The mixing stage (src/mix, recipe item `mix:`): round trips with it on for both models in
//! every training mode, on the inputs that break compressors; it stores its settings in the
//! header; and it pays for itself on the kinds of data it is for.

mod common;

use common::{assert_round_trip, binary, modes, random, short_samples, text, tiny, with_mix};
use lmzip::codec::{compress_bytes, decompress_bytes_with};
use lmzip::format;
use lmzip::mix::MixSpec;
use lmzip::recipe::{ModelKind, OptimizerKind};

#[test]
fn mamba1_with_the_stage_round_trips_every_input_in_every_mode() {
    for recipe in modes(ModelKind::Mamba1) {
        for (name, data) in short_samples() {
            assert_round_trip(&with_mix(&recipe), name, &data);
        }
    }
}

#[test]
fn rwkv7_with_the_stage_round_trips_every_input_in_every_mode() {
    for recipe in modes(ModelKind::Rwkv7) {
        for (name, data) in short_samples() {
            assert_round_trip(&with_mix(&recipe), name, &data);
        }
    }
}

/// Each part of the stage on its own, and the full default-sized stage over several frames.
#[test]
fn every_configuration_of_the_stage_round_trips() {
    let base = tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1);
    let mut data = text(3000);
    data.extend(binary(3000, 5));
    for mix in [
        "mix:orders=0,word=0,sparse=0,match=0,sse=0,conf=0,pword=0,select=0,record=0",
        "mix:orders=0,word=0,sparse=0,match=12,sse=0,conf=0,pword=0,select=0,record=0",
        "mix:orders=1,word=0,sparse=0,match=0,sse=1,conf=0,pword=0,select=0,record=0",
        "mix:orders=8,word=1,sparse=1,match=0,sse=0,table=12,rate=1,conf=0,record=0",
        "mix:orders=3,word=0,sparse=1,match=20,sse=1,table=18,rate=64",
        "mix:orders=2,word=0,sparse=0,match=0,sse=0,table=12,conf=1,pword=0,select=0,record=0",
        "mix:orders=0,word=0,sparse=0,match=12,sse=0,conf=0,pword=0,select=1,record=0",
        "mix:orders=0,word=1,sparse=0,match=0,sse=1,conf=0,pword=1,select=0,record=1",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,conf=1,pword=1,select=1,record=1",
        "mix:orders=2,word=0,sparse=1,match=12,sse=1,table=14,conf=1,pword=0,select=0,record=2",
        "mix:orders=2,word=1,sparse=0,match=12,sse=1,table=12,conf=0,ext=1",
        "mix:orders=3,word=1,sparse=0,match=0,sse=0,table=12,ext=6",
        "mix:orders=1,word=0,sparse=0,match=0,sse=0,table=12,ext=24",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,rate=3,ext=31",
        "mix:orders=3,word=1,sparse=1,match=16,sse=1,table=14,rate=3,ext=480",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,rate=3,ext=511",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,rate=3,ext=2047",
        "mix:orders=3,word=1,sparse=0,match=12,sse=1,table=12,ext=2560",
        "mix:orders=2,word=0,sparse=0,match=12,sse=1,table=12,ext=1536",
        "mix:orders=2,word=1,sparse=0,match=12,sse=1,table=12,ext=4096",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,rate=3,ext=8191",
        "mix:orders=6,word=1,sparse=1,match=16,sse=1,table=16,rate=3,ext=8191,young=0",
    ] {
        let recipe = base.edit(mix, None).unwrap();
        assert_round_trip(&recipe, mix, &data);
    }
    let infer = tiny(ModelKind::Mamba1, None, 1).edit("mix:", None).unwrap();
    assert_eq!(infer.mix, Some(MixSpec::DEFAULT));
    let frames = vec![b'x'; lmzip::format::FRAME_MAX * 2 + 1000];
    assert_round_trip(&infer, "three frames of a run", &frames);
}

#[test]
fn the_header_stores_the_stage_and_the_decoder_runs_it() {
    let recipe = tiny(ModelKind::Rwkv7, Some(OptimizerKind::Sgd), 1)
        .edit(
            "mix:orders=4,rate=7,table=14,match=14,conf=0,pword=0,select=0,record=0,ext=0,young=0,follow=0,nibble=0,settle=0,split=0,delta=0,strings=0,long=0,fine=0",
            None,
        )
        .unwrap();
    let text_of = recipe.to_text();
    assert!(
        text_of.contains(" mix:orders=4,word=1,sparse=1,match=14,sse=1,table=14,rate=7 0..:"),
        "{text_of}"
    );
    let data = text(2000);
    let packed = compress_bytes(&recipe, &data).unwrap();
    let (back, summary) =
        decompress_bytes_with(&lmzip::codec::Options::default(), &packed).unwrap();
    assert_eq!(back, data);
    assert_eq!(summary.recipe, recipe);
    // Keys added later print only when they differ from their implicit value ("off").
    let later = recipe.edit("mix:conf=1,record=1", None).unwrap();
    // The default stage turns them all on.
    assert!(
        tiny(ModelKind::Rwkv7, None, 1)
            .edit("mix:", None)
            .unwrap()
            .to_text()
            .contains(
                ",rate=3,conf=1,pword=1,select=1,record=2,ext=8191,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,fine=1 0..:"
            )
    );
    let later_text = later.to_text();
    assert!(
        later_text.contains(
            " mix:orders=4,word=1,sparse=1,match=14,sse=1,table=14,rate=7,conf=1,record=1 0..:"
        ),
        "{later_text}"
    );
    assert_eq!(lmzip::recipe::Recipe::parse(&later_text).unwrap(), later);
    // Without the stage the same network codes other bytes.
    let plain = recipe.edit("mix:off", None).unwrap();
    assert_eq!(plain.mix, None);
    assert_ne!(compress_bytes(&plain, &data).unwrap(), packed);
}

/// On text the network has barely begun to learn, and on binary records, context statistics
/// and the match model predict what the network has not learned yet.
#[test]
fn the_stage_beats_the_network_alone_on_text_and_records() {
    for kind in ModelKind::ALL {
        let plain = tiny(kind, Some(OptimizerKind::Adam), 1);
        let mixed = with_mix(&plain);
        for (name, data) in [("text", text(4000)), ("records", binary(4000, 9))] {
            let a = compress_bytes(&plain, &data).unwrap().len();
            let b = assert_round_trip(&mixed, name, &data).len();
            assert!(
                b * 10 < a * 9,
                "{kind:?} {name}: {b} bytes with the stage, {a} without"
            );
        }
    }
}

/// A stored recipe written before the keys `conf`, `pword`, `select` and `record` existed
/// reads with each at its implicit value (off); one that leaves out an original key is refused.
#[test]
fn stored_recipes_without_the_later_keys_read_as_before() {
    let recipe = tiny(ModelKind::Mamba1, None, 1)
        .edit(
            "mix:orders=4,word=1,sparse=0,match=14,sse=1,table=14,rate=7",
            None,
        )
        .unwrap();
    // As a file written then stores it: without the later keys.
    let stored = recipe.to_text().replace(
        ",conf=1,pword=1,select=1,record=2,ext=8191,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,fine=1",
        "",
    );
    assert!(stored.contains(" mix:orders=4,word=1,sparse=0,match=14,sse=1,table=14,rate=7 0..:"));
    let back = lmzip::recipe::Recipe::parse(&stored).unwrap();
    let mix = back.mix.unwrap();
    assert_eq!(
        (mix.conf, mix.pword, mix.select, mix.record),
        (false, false, false, 0)
    );
    assert_eq!(
        (mix.fin, mix.words, mix.decay, mix.nmap, mix.ways),
        (false, false, false, false, false)
    );
    assert_eq!(
        (mix.indirect, mix.columns, mix.second, mix.runs),
        (false, false, false, false)
    );
    assert_eq!(
        (
            mix.recent,
            mix.sparse2,
            mix.nest,
            mix.text,
            mix.young,
            mix.follow,
            mix.nibble,
            mix.settle,
            mix.split,
            mix.delta,
            mix.strings,
            mix.long
        ),
        (
            false, false, false, false, false, false, false, false, false, false, false, false
        )
    );
    assert!(!mix.partial && !mix.fine);
    let without_rate = stored.replace(",rate=7", "");
    let err = lmzip::recipe::Recipe::parse(&without_rate).unwrap_err();
    assert!(err.to_string().contains("gives every key"), "{err}");
}

/// A header whose stage asks for values its keys do not take is refused, with the key named.
#[test]
fn a_header_with_absurd_values_of_the_later_keys_is_refused() {
    let recipe = with_mix(&tiny(ModelKind::Mamba1, None, 1));
    let packed = compress_bytes(&recipe, &text(300)).unwrap();
    for (good, bad, needle) in [
        ("ext=8191", "ext=8192", "out of range"),
        ("ext=8191", "ext=9000", "out of range"),
        ("young=1", "young=2", "mix young is 0 or 1"),
        ("follow=1", "follow=2", "mix follow is 0 or 1"),
        ("nibble=1", "nibble=3", "mix nibble is 0 or 1"),
        ("settle=1", "settle=2", "mix settle is 0 or 1"),
        ("split=1", "split=2", "mix split is 0 or 1"),
        ("delta=1", "delta=2", "mix delta is 0 or 1"),
        ("strings=1", "strings=2", "mix strings is 0 or 1"),
        ("long=1", "long=2", "mix long is 0 or 1"),
        ("fine=1", "fine=2", "mix fine is 0 or 1"),
    ] {
        let text = recipe.to_text().replace(good, bad);
        assert_ne!(text, recipe.to_text());
        let err = lmzip::recipe::Recipe::parse(&text).unwrap_err().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
        // The same in a file's header, whole or as a level's edits: the decoder refuses it
        // before running anything.
        let header_len = format::read_header(&mut &packed[..]).unwrap().len as usize;
        let level = format::StoredRecipe::Level {
            model: lmzip::compact::model_code(ModelKind::Mamba1),
            level: 3,
            edits: format!("mix:{bad}"),
            crc: 0,
        };
        for stored in [format::StoredRecipe::Text(text.clone()), level] {
            let mut file = Vec::new();
            format::write_header(&mut file, &stored).unwrap();
            file.extend_from_slice(&packed[header_len..]);
            let err = format!("{:#}", lmzip::codec::decompress_bytes(&file).unwrap_err());
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}

/// Wiki-like text: headings, links, templates, tags, table cells, capitals, all-capital words,
/// numbers, UTF-8 names, lines wrapped at a width.
fn wiki(lines: usize) -> Vec<u8> {
    let words = [
        "the",
        "River",
        "NASA",
        "of",
        "1999",
        "[[Alabama]]",
        "{{cite|year=2004}}",
        "&amp;",
        "<ref>",
        "</ref>",
        "Zürich",
        "İstanbul",
        "and",
        "''bold''",
        "3.14",
        "ÆTHER",
        "x",
    ];
    let heads = [
        "",
        "== History ==",
        "| cell || 12",
        "* item",
        ": indent",
        "<page>",
    ];
    let mut x = 0x1234_5678u32;
    let mut out = Vec::new();
    for _ in 0..lines {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let head = heads[(x >> 16) as usize % heads.len()];
        out.extend_from_slice(head.as_bytes());
        for _ in 0..(x >> 20) % 9 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            out.push(b' ');
            out.extend_from_slice(words[(x >> 16) as usize % words.len()].as_bytes());
        }
        out.extend_from_slice(if (x >> 24).is_multiple_of(3) {
            b".\n"
        } else {
            b"\n"
        });
    }
    out
}

/// The text contexts and selector (`ext` 4096) on text of every kind they read, on binary
/// data (where they sit out), on text and binaries in turn, and on the smallest inputs, at
/// the default stage and with them alone; and they change what the stage writes on text.
#[test]
fn the_text_contexts_round_trip_text_markup_and_binaries() {
    let base = tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1);
    let mut mixed = wiki(60);
    mixed.extend(binary(2000, 3));
    mixed.extend(wiki(40));
    mixed.extend([0xc3, 0x28, 0xe2, 0x82, b'\n', 0xff, 0xf0, 0x9f, 0x98, 0x80]);
    mixed.extend(text(1500));
    let inputs: [(&str, Vec<u8>); 6] = [
        ("wiki", wiki(200)),
        ("binary", binary(3000, 7)),
        ("mixed", mixed),
        ("empty", Vec::new()),
        ("one byte", vec![b'A']),
        ("one binary byte", vec![0]),
    ];
    for mix in [
        "mix:ext=8191",
        "mix:orders=2,word=1,sparse=0,match=0,sse=0,table=12,ext=4096",
    ] {
        let recipe = base.edit(mix, None).unwrap();
        for (name, data) in &inputs {
            assert_round_trip(&recipe, name, data);
        }
    }
    let data = wiki(200);
    let with = base.edit("mix:ext=8191", None).unwrap();
    let without = base.edit("mix:ext=4095", None).unwrap();
    assert_ne!(
        compress_bytes(&with, &data).unwrap(),
        compress_bytes(&without, &data).unwrap()
    );
}

/// Debugging records of 12 bytes, as a compiler writes them: a big-endian offset into a string
/// table that grows by each string's length, a type, a line number that grows by 0–2 and an
/// address that grows by an instruction or two. Every offset and address is new; their steps
/// from the row above come from a few.
fn growing_records(rows: u32) -> Vec<u8> {
    let mut x = 17u32;
    let mut next = move |n: u32| {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        (x >> 16) % n
    };
    let (mut offset, mut line, mut address) = (1u32, 1u16, 0x10c9cu32);
    let mut data = Vec::new();
    for _ in 0..rows {
        offset += 6 + next(40);
        line += next(3) as u16;
        address += 4 * (1 + next(2));
        data.extend_from_slice(&offset.to_be_bytes());
        data.extend_from_slice(&[[0x44, 0x80, 0x24][next(3) as usize], 0]);
        data.extend_from_slice(&line.to_be_bytes());
        data.extend_from_slice(&address.to_be_bytes());
    }
    data
}

/// The delta model (`mix:delta`) round trips with both models in every training mode, on its
/// records, on text where it keeps silent and on the inputs that break compressors, and it
/// pays on the records.
#[test]
fn the_delta_model_round_trips_and_pays_on_growing_records() {
    let records = growing_records(500);
    let mut mixed = text(2000);
    mixed.extend(growing_records(200));
    mixed.extend(binary(1000, 4));
    let samples = [("records", &records[..]), ("text, records, binary", &mixed)];
    let (with, without) = round_trips_and_sizes("delta", &samples, &records);
    assert!(with * 100 < without * 95, "{with} against {without}");
}

/// Round trips with the stage key `key` on (small tables) with both models in every training
/// mode, on `samples` and the inputs that break compressors; then the bytes of `measured`
/// with the key on and off (Mamba-1, Adam).
fn round_trips_and_sizes(key: &str, samples: &[(&str, &[u8])], measured: &[u8]) -> (usize, usize) {
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        for recipe in modes(kind) {
            let recipe = recipe
                .edit(&format!("mix:table=16,match=16,{key}=1"), None)
                .unwrap();
            for (name, data) in samples {
                assert_round_trip(&recipe, name, data);
            }
            for (name, data) in short_samples() {
                assert_round_trip(&recipe, name, &data);
            }
        }
    }
    let base = tiny(ModelKind::Mamba1, Some(OptimizerKind::Adam), 1);
    let size = |on: u8| {
        let recipe = base
            .edit(&format!("mix:table=16,match=16,{key}={on}"), None)
            .unwrap();
        compress_bytes(&recipe, measured).unwrap().len()
    };
    (size(1), size(0))
}

/// Tables of NUL-terminated strings after binary headers (as in object files and message
/// catalogues), with UTF-16 text beside them.
fn string_tables(tables: usize) -> Vec<u8> {
    let words = [
        "open", "close", "read", "write", "seek", "flush", "stat", "sync",
    ];
    let mut data = Vec::new();
    for t in 0..tables {
        data.extend_from_slice(&[0x7f, 0x03, t as u8, 0]);
        for i in 0..12 {
            let name = format!("{}_{}:f({},{})", words[(t + i) % 8], words[i % 8], t % 5, i);
            data.extend_from_slice(name.as_bytes());
            data.push(0);
        }
        let utf16: Vec<u8> = format!("Table {t} of the catalogue")
            .bytes()
            .flat_map(|b| [b, 0])
            .collect();
        data.extend(utf16);
    }
    data
}

/// The strings of binary data (`mix:strings`) round trip with both models in every training
/// mode, beside UTF-16 text and the inputs that break compressors, and they pay.
#[test]
fn strings_in_binary_data_round_trip_and_pay() {
    let tables = string_tables(60);
    let mut mixed = binary(1000, 7);
    mixed.extend(string_tables(10));
    mixed.extend(text(1500));
    let samples = [
        ("string tables", &tables[..]),
        ("binary, strings, text", &mixed),
    ];
    let (with, without) = round_trips_and_sizes("strings", &samples, &tables);
    assert!(with * 100 < without * 98, "{with} against {without}");
}

/// 2,000 bytes of text, then 2,000 of binary data drawn from `seed`: the inputs a key for one
/// kind of data must also round trip.
fn text_and_binary(seed: u64) -> Vec<u8> {
    let mut data = text(2000);
    data.extend(binary(2000, seed));
    data
}

/// Bytes of a steady source: four symbols at about 70, 10, 10 and 10 percent, drawn alike
/// everywhere, so that a counter's best estimate is the average of all it has seen.
fn steady_source(n: usize) -> Vec<u8> {
    random(n, 0x2545_f491_4f6c_dd1d)
        .into_iter()
        .map(|r| match r % 10 {
            0..=6 => b'a',
            7 => b'c',
            8 => b'g',
            _ => b't',
        })
        .collect()
}

/// The counters' long memory (`mix:long`) round trips with both models in every training
/// mode, on text, binary data and the inputs that break compressors, and it pays on a
/// steady source.
#[test]
fn the_long_memory_round_trips_and_pays_on_a_steady_source() {
    let steady = steady_source(30_000);
    let mixed = text_and_binary(9);
    let samples = [("steady source", &steady[..]), ("text, binary", &mixed)];
    let (with, without) = round_trips_and_sizes("long", &samples, &steady_source(100_000));
    assert!(with < without, "{with} against {without}");
}

/// A spreadsheet's columns of zeros: rows of twelve cells, one in 256 of them with a digit
/// other than 0. Most decisions are all but certain.
fn sheet_of_zeros(rows: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(rows * 24);
    for row in random(rows * 12, 0x5851_f42d_4c95_7f2d).chunks(12) {
        for (i, &draw) in row.iter().enumerate() {
            data.push(if draw == 0 { b'7' } else { b'0' });
            data.push(if i == 11 { b'\n' } else { b',' });
        }
    }
    data
}

/// The stage's 16-bit probability (`mix:fine`) round trips with both models in every training
/// mode, on text, binary data and the inputs that break compressors, and it pays where most
/// decisions are all but certain.
#[test]
fn the_fine_probability_round_trips_and_pays_on_near_certain_data() {
    let mixed = text_and_binary(5);
    let samples = [
        ("a sheet of zeros", &sheet_of_zeros(300)[..]),
        ("text, binary", &mixed),
    ];
    let (with, without) = round_trips_and_sizes("fine", &samples, &sheet_of_zeros(4000));
    // 532 against 543 bytes when measured.
    assert!(with * 100 < without * 99, "{with} against {without}");
}

/// Records of a tag and four bytes: three random, then one that copies the first (when the
/// tag is `A` and the first is below 128), the second with its top bit set (`A`, the first
/// 128 or above) or the third (`B`). Which context to trust for the last byte's later bits
/// depends on the tag and on its first bit.
fn tagged_copies(records: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(records * 5);
    for r in random(records * 4, 0x9e37_79b9_7f4a_7c15).chunks(4) {
        let (a, b, c) = (r[0], r[1], r[2]);
        let tag = if r[3] & 1 == 0 { b'A' } else { b'B' };
        let copy = match (tag, a < 128) {
            (b'A', true) => a,
            (b'A', false) => b | 128,
            _ => c,
        };
        data.extend_from_slice(&[a, b, c, tag, copy]);
    }
    data
}

/// The selector by the last byte and the bits so far (`mix:partial`) round trips with both
/// models in every training mode, on records, text, binary data and the inputs that break
/// compressors, and it pays where what to trust depends on the last byte and the bits so far.
#[test]
fn the_partial_byte_selector_round_trips_and_pays_on_tagged_copies() {
    let mixed = text_and_binary(3);
    let samples = [
        ("records", &tagged_copies(400)[..]),
        ("text, binary", &mixed),
    ];
    let (with, without) = round_trips_and_sizes("partial", &samples, &tagged_copies(6000));
    assert!(with < without, "{with} against {without}");
    // With the warm start, which sets the selectors before it and weighs it 0.
    for kind in [ModelKind::Mamba1, ModelKind::Rwkv7] {
        let warm = tiny(kind, Some(OptimizerKind::Adam), 1)
            .edit("mix:table=16,match=16,partial=1,warm=1", None)
            .unwrap();
        assert_eq!(warm.mix.unwrap().warm, 1, "{kind:?}");
        assert_round_trip(&warm, "records, warm", &tagged_copies(400));
        assert_round_trip(&warm, "text, binary, warm", &mixed);
    }
}
