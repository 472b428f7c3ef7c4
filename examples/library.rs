//! The library in a few lines: compresses a file with a level, streaming through
//! `lmzip::Encoder`, reads it back through `lmzip::Decoder` and checks the round trip.
//! `cargo run --release --example library -- FILE [LEVEL]`

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};

fn main() -> Result<(), lmzip::Error> {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: library FILE [LEVEL]");
    let level = args
        .next()
        .map_or(1, |l| l.parse().expect("a level, 1 to 9"));
    let options = lmzip::Options::new().level(level);

    let packed_path = format!("{path}.lmz");
    let mut input = BufReader::new(File::open(&path)?);
    let mut encoder = lmzip::Encoder::new(BufWriter::new(File::create(&packed_path)?), &options)?;
    let raw = std::io::copy(&mut input, &mut encoder)?;
    encoder.finish()?;

    let mut back = Vec::new();
    lmzip::Decoder::new(File::open(&packed_path)?).read_to_end(&mut back)?;
    assert_eq!(back, std::fs::read(&path)?, "round trip");
    let packed = std::fs::metadata(&packed_path)?.len();
    println!("{path}: {raw} -> {packed} bytes ({packed_path}), round trip checked");
    Ok(())
}
