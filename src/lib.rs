//! lmzip: a lossless compressor whose model is a small byte-level neural network (Mamba-1 or
//! RWKV-7) that learns the data while it compresses it.
//!
//! The path of a byte: [`predictor`] gives a distribution over the next byte, [`coder`] spends
//! `-log2 p` bits on the byte that came, the predictor trains on it ([`train`]) and runs its
//! [`model`] forward. [`codec`] runs that loop in both directions and [`format`] frames the
//! result; the decoder repeats the encoder's computation bit for bit (docs/determinism.md).

// The numeric code indexes several arrays by one loop variable, as its formulas do; iterator
// chains would hide the correspondence.
#![allow(clippy::needless_range_loop)]

pub mod cli;
pub mod codec;
pub mod coder;
pub mod compact;
pub mod format;
pub mod kernels;
pub mod levels;
pub mod mix;
pub mod model;
pub mod modelfile;
pub mod params;
pub mod pool;
pub mod predictor;
pub mod recipe;
pub mod resume;
pub mod train;
