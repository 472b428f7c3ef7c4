//! Reversible transforms of the input, applied before the model sees it and undone after
//! decoding, each chosen by detection and recorded in the recipe (so in the header).
//!
//! - [`x86`]: call and jump displacements of x86 machine code made absolute (`mix:x86=1`).

pub mod x86;
