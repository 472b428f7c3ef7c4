//! lmzip: a lossless compressor whose model is a small byte-level neural network (Mamba-1 or
//! RWKV-7) that learns the data while it compresses it, mixed with context statistics, driving
//! a range coder. The decoder repeats the encoder's computation bit for bit, so a stream
//! carries no weights, only its recipe and the coded bits.
//!
//! # The library
//!
//! [`compress`] and [`decompress`] work on slices; [`Encoder`] and [`Decoder`] stream over any
//! [`std::io::Write`] and [`std::io::Read`]. [`Options`] chooses the level, the network, the
//! recipe, a model file and threads; every failure is an [`Error`]. The bytes are the command
//! line's: `Options::new().level(N)` writes what `lmzip -N` writes, and either decodes the
//! other's streams, concatenated members included.
//!
//! ```
//! use std::io::{Read, Write};
//!
//! // One call each way.
//! let packed = lmzip::compress(b"abracadabra", &lmzip::Options::new().level(1))?;
//! assert_eq!(lmzip::decompress(&packed)?, b"abracadabra");
//!
//! // Streaming: written in pieces, read back in pieces. With the length announced (as
//! // `compress` announces it), the stage is sized for the input and the bytes are the same.
//! let options = lmzip::Options::new().level(1).size(11);
//! let mut encoder = lmzip::Encoder::new(Vec::new(), &options)?;
//! for piece in [&b"abra"[..], b"cad", b"abra"] {
//!     encoder.write_all(piece)?;
//! }
//! let streamed = encoder.finish()?;
//! assert_eq!(streamed, packed);
//! let mut back = Vec::new();
//! lmzip::Decoder::new(&streamed[..]).read_to_end(&mut back)?;
//! assert_eq!(back, b"abracadabra");
//! # Ok::<(), lmzip::Error>(())
//! ```
//!
//! Compression runs at tens of kilobytes per second (the network trains on every byte), and
//! each level allocates its tables up front: a few hundred MB, or, when the input's length is
//! known ([`Options::size`], which [`compress`] sets), what the input needs (about 22 MB for
//! a few kilobytes, 90 MB for a megabyte). lmzip is for data whose ratio matters more than
//! its speed.
//!
//! # The internals
//!
//! The modules below are lmzip's inner layers, public for its tests, benchmarks and tools;
//! their API may change in any release. The path of a byte: [`predictor`] gives a
//! distribution over the next byte, [`coder`] spends `-log2 p` bits on the byte that came, the
//! predictor trains on it ([`train`]) and runs its [`model`] forward. [`codec`] runs that loop
//! in both directions and [`format`](mod@format) frames the result; the decoder repeats the encoder's
//! computation bit for bit (docs/determinism.md).

// The numeric code indexes several arrays by one loop variable, as its formulas do; iterator
// chains would hide the correspondence.
#![allow(clippy::needless_range_loop)]
// The inner modules' docs link to their private items for contributors, who read them with
// `cargo doc --document-private-items`; the public pages show those names as plain text.
#![allow(rustdoc::private_intra_doc_links)]

#[warn(missing_docs)]
mod api;
pub mod cli;
pub mod codec;
pub mod coder;
pub mod compact;
pub mod fit;
pub mod format;
pub mod kernels;
pub mod levels;
pub mod mix;
pub mod model;
pub mod modelfile;
pub mod pages;
pub mod params;
pub mod pool;
pub mod predictor;
pub mod prior;
pub mod recipe;
pub mod resume;
pub mod train;
pub mod transform;

pub use api::{Decoder, Encoder, Error, Options, compress, decompress, decompress_with};
pub use recipe::ModelKind;
