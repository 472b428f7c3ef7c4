//! The library's API (`lmzip::Encoder`, `Decoder`, `compress`, `decompress`, `Options`,
//! `Error`) against itself and against the binary: the same bytes for the same settings,
//! however the input is cut into writes and the output into reads.

mod common;

use std::io::{Read, Write};

use common::cli::{ok, run};
use lmzip::{Decoder, Encoder, Error, ModelKind, Options};
use tempfile::TempDir;

/// A network that only predicts, without the stage: fast enough to code more than one frame
/// (1 MiB) in a test.
const FAST: &str = "cfg:hidden=16,layers=1 mix:off 0..:infer";

/// `data` through an [`Encoder`] in writes of 1, 2, … `most` bytes, round and round.
fn encode_in_pieces(data: &[u8], options: &Options, most: usize) -> Vec<u8> {
    let mut encoder = Encoder::new(Vec::new(), options).unwrap();
    let (mut at, mut size) = (0, 1);
    while at < data.len() {
        let end = (at + size).min(data.len());
        encoder.write_all(&data[at..end]).unwrap();
        at = end;
        size = size % most + 1;
    }
    encoder.finish().unwrap()
}

/// A stream through a [`Decoder`] in reads of at most `most` bytes.
fn decode_in_pieces(stream: &[u8], most: usize) -> Result<Vec<u8>, Error> {
    let mut decoder = Decoder::new(stream);
    let mut out = Vec::new();
    let mut buf = vec![0u8; most];
    loop {
        let n = decoder.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// What `lmzip ARGS -c` writes for `stdin`.
fn cli_output(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let dir = TempDir::new().unwrap();
    let args: Vec<&str> = args.iter().copied().chain(["-c"]).collect();
    ok(run(dir.path(), &args, stdin)).stdout
}

#[test]
fn small_writes_and_reads_round_trip_to_the_bytes_of_one_call() {
    let data = common::related_text(3000, 7);
    // With the length announced, as the one call announces it (the stage is then fitted).
    let options = Options::new().level(1).size(data.len() as u64);
    let streamed = encode_in_pieces(&data, &options, 37);
    assert_eq!(streamed, lmzip::compress(&data, &options).unwrap());
    for most in [1, 7, 4096] {
        assert_eq!(
            decode_in_pieces(&streamed, most).unwrap(),
            data,
            "reads of {most}"
        );
    }
}

#[test]
fn frames_are_cut_where_the_command_line_cuts_them() {
    // Two frames and a bit, written in pieces that straddle the frame boundary.
    let data = common::binary((1 << 20) + 5000, 3);
    let options = Options::new().recipe(FAST);
    let streamed = encode_in_pieces(&data, &options, 65_537);
    assert_eq!(streamed, cli_output(&["--recipe", FAST], &data));
    assert_eq!(decode_in_pieces(&streamed, 100_000).unwrap(), data);
}

#[test]
fn the_library_writes_what_the_command_line_writes() {
    let data = common::related_text(2000, 1);
    let split = "cfg:hidden=24 0..50%:train() 50%..:infer";
    let len = data.len().to_string();
    // Standard input announces its length, as the one call does (for percent positions, and
    // the stage sized for the input).
    for (args, options) in [
        (&["-1", "--size", &len][..], Options::new().level(1)),
        (
            &["-2", "--model", "rwkv7", "--size", &len],
            Options::new().level(2).model(ModelKind::Rwkv7),
        ),
        (
            &["-1", "--recipe", split, "--size", &len],
            Options::new().level(1).recipe(split),
        ),
        (
            &["-1", "-T", "2", "--size", &len],
            Options::new().level(1).threads(2),
        ),
    ] {
        let library = lmzip::compress(&data, &options).unwrap();
        assert_eq!(library, cli_output(args, &data), "{args:?}");
        assert_eq!(lmzip::decompress(&library).unwrap(), data, "{args:?}");
    }
    // A file named on the command line, rather than standard input.
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("a"), &data).unwrap();
    let from_file = ok(run(dir.path(), &["-1", "-c", "a"], b"")).stdout;
    assert_eq!(
        from_file,
        lmzip::compress(&data, &Options::new().level(1)).unwrap()
    );
}

/// The one call chooses by the input as the command line does: the default level's seeded
/// network for binary data (its prior is for text), and for sizes that leave the prior out.
#[test]
fn the_one_call_chooses_the_network_as_the_command_line_does() {
    let text = common::related_text(1500, 4);
    let binary = common::binary(1500, 6);
    let resized = "cfg:hidden=24";
    for (data, args, options) in [
        (&binary, &["-3"][..], Options::new().level(3)),
        (
            &text,
            &["-3", "--recipe", resized],
            Options::new().level(3).recipe(resized),
        ),
    ] {
        let len = data.len().to_string();
        let args: Vec<&str> = args.iter().copied().chain(["--size", &len]).collect();
        let library = lmzip::compress(data, &options).unwrap();
        assert_eq!(library, cli_output(&args, data), "{args:?}");
        assert_eq!(lmzip::decompress(&library).unwrap(), *data, "{args:?}");
    }
    // The streaming encoder writes its header before it sees the input: it keeps the level's
    // prior for binary data, and so writes other bytes, which decode as well.
    let options = Options::new().level(3).size(binary.len() as u64);
    let streamed = encode_in_pieces(&binary, &options, 100);
    assert_ne!(streamed, lmzip::compress(&binary, &options).unwrap());
    assert_eq!(lmzip::decompress(&streamed).unwrap(), binary);
}

#[test]
fn concatenated_members_decode_in_order_both_ways() {
    let (a, b) = (common::related_text(1200, 2), common::related_text(800, 5));
    let options = Options::new().level(1);
    let from_cli = cli_output(&["-1"], &a);
    assert_ne!(
        from_cli[..],
        lmzip::compress(&a, &options).unwrap()[..],
        "unknown length"
    );
    let empty = lmzip::compress(b"", &options).unwrap();
    let from_library = lmzip::compress(&b, &options).unwrap();
    let stream = [&from_cli[..], &empty[..], &from_library[..]].concat();
    let both = [&a[..], &b[..]].concat();
    assert_eq!(lmzip::decompress(&stream).unwrap(), both);
    assert_eq!(decode_in_pieces(&stream, 333).unwrap(), both);
    let dir = TempDir::new().unwrap();
    assert_eq!(ok(run(dir.path(), &["-d"], &stream)).stdout, both);
}

#[test]
fn empty_input_is_one_empty_member() {
    let options = Options::new().level(1);
    let packed = lmzip::compress(b"", &options).unwrap();
    assert_eq!(
        packed,
        Encoder::new(Vec::new(), &options)
            .unwrap()
            .finish()
            .unwrap()
    );
    assert_eq!(packed, cli_output(&["-1"], b""));
    assert!(lmzip::decompress(&packed).unwrap().is_empty());
    assert!(decode_in_pieces(&packed, 10).unwrap().is_empty());
    assert!(matches!(lmzip::decompress(b""), Err(Error::Truncated(_))));
}

/// The error of decoding `stream` in one call, checked to be the one a [`Decoder`] gives
/// through `Read` (recovered from its `io::Error`).
fn decode_error(stream: &[u8]) -> Error {
    let one_call = lmzip::decompress(stream).unwrap_err();
    let mut out = Vec::new();
    let io = Decoder::new(stream).read_to_end(&mut out).unwrap_err();
    let streamed = Error::from(io);
    assert_eq!(
        std::mem::discriminant(&one_call),
        std::mem::discriminant(&streamed),
        "{one_call} / {streamed}"
    );
    one_call
}

#[test]
fn damage_gives_the_variant_that_names_it() {
    let data = common::related_text(2000, 9);
    let packed = lmzip::compress(&data, &Options::new().level(1)).unwrap();
    assert!(matches!(
        decode_error(b"PK\x03\x04 not ours"),
        Error::NotLmzip
    ));
    for cut in [3, packed.len() / 2, packed.len() - 1] {
        let err = decode_error(&packed[..cut]);
        assert!(matches!(err, Error::Truncated(_)), "cut at {cut}: {err}");
    }
    // A byte in the middle lies in the coded words: the frame's checksum catches it.
    let mut flipped = packed.clone();
    flipped[packed.len() / 2] ^= 0x10;
    let err = decode_error(&flipped);
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    // The last byte is the stored CRC32's: the data decodes but does not match it.
    let mut crc = packed.clone();
    *crc.last_mut().unwrap() ^= 1;
    let err = decode_error(&crc);
    let Error::ChecksumMismatch { expected, actual } = err else {
        panic!("{err}");
    };
    assert_eq!(expected ^ actual, 1 << 24, "only the flipped bit differs");
    // Junk after a member, and a damaged second member, named as such.
    let junk = [&packed[..], b"junk"].concat();
    assert!(matches!(decode_error(&junk), Error::Corrupt(_)));
    let second = [&packed[..], &flipped[..]].concat();
    let err = decode_error(&second);
    assert!(err.to_string().starts_with("member 2 "), "{err}");
}

#[test]
fn bad_options_are_refused_with_their_own_variant() {
    let invalid = |options: Options| match Encoder::new(Vec::new(), &options) {
        Err(Error::InvalidOptions(m)) => m,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(invalid(Options::new().level(0)).contains("no level 0"));
    assert!(invalid(Options::new().level(10)).contains("no level 10"));
    invalid(Options::new().recipe("cfg:hiden=3"));
    invalid(Options::new().threads(100_000));
    invalid(Options::new().model(ModelKind::Rwkv7).recipe("mamba1"));
    // Percent positions need the length.
    invalid(Options::new().recipe("0..50%:train() 50%..:infer"));
    // An announced length the input does not have.
    let mut encoder = Encoder::new(Vec::new(), &Options::new().level(1).size(5)).unwrap();
    encoder.write_all(b"abc").unwrap();
    assert!(matches!(encoder.finish(), Err(Error::InvalidOptions(_))));
    let missing = Options::new().weights_file("/nonexistent/model.safetensors");
    assert!(matches!(missing, Err(Error::ModelFile(_))));
}
