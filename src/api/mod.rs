//! The library's API: [`Encoder`] and [`Decoder`] over [`std::io::Write`] and
//! [`std::io::Read`], [`compress`] and [`decompress`] over slices, their [`Options`] and
//! their [`Error`]. A thin layer over [`crate::codec`]'s `MemberEncoder` and `StreamDecoder`,
//! which the command line drives too: both write and read the same bytes.

mod decoder;
mod encoder;
mod error;
mod options;

pub use decoder::{Decoder, decompress, decompress_with};
pub use encoder::{Encoder, compress};
pub use error::Error;
pub use options::Options;
pub(crate) use options::{Names, level_recipe};
