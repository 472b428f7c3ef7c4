//! [`Encoder`]: compression as a [`Write`]r, and [`compress`], the one call over a slice.

use std::io::{self, Write};

use super::error::{Error, Otherwise, classify};
use super::options::Options;
use crate::codec::{self, MemberEncoder};
use crate::pool::Pool;

/// Compresses what is written to it into `W`, as one lmzip member, however the input is cut
/// into writes. The header goes out before the first byte is seen, so the recipe is the
/// level's as it stands: where the command line would choose by the input's first bytes (the
/// level's seeded network for input its prior does not suit, the x86 transform for x86 code),
/// the encoder does not, and writes the command line's bytes for text and code. [`compress`],
/// which sees the input first, chooses as the command line does.
///
/// Input is coded a frame (1 MiB) at a time, so up to a frame of input waits in the encoder;
/// [`Write::flush`] flushes only `W` (cutting a frame early would change the output).
/// [`Encoder::finish`] codes the rest and writes the trailer: an encoder dropped without it
/// leaves a truncated stream.
///
/// ```
/// use std::io::Write;
///
/// let mut encoder = lmzip::Encoder::new(Vec::new(), &lmzip::Options::new().level(1))?;
/// encoder.write_all(b"hello, ")?;
/// encoder.write_all(b"hello")?;
/// let packed = encoder.finish()?;
/// assert_eq!(lmzip::decompress(&packed)?, b"hello, hello");
/// # Ok::<(), lmzip::Error>(())
/// ```
pub struct Encoder<W: Write> {
    output: W,
    member: Option<MemberEncoder>,
    pool: Option<Pool>,
}

impl<W: Write> Encoder<W> {
    /// Builds the model the options describe and writes the stream's header to `output`.
    pub fn new(mut output: W, options: &Options) -> Result<Self, Error> {
        let (recipe, weights) = options.prepare()?;
        let pool = options.pool()?;
        // The header goes out before any data: the level's prior, the stage's warm start and
        // the x86 transform stay as the recipe says.
        let codec_options = codec_options(options, weights.as_deref(), Choice::AsGiven);
        let member = in_pool(&pool, || {
            MemberEncoder::start(&recipe, &codec_options, &mut output)
        })
        .map_err(|e| classify(e, Otherwise::InvalidOptions))?;
        Ok(Encoder {
            output,
            member: Some(member),
            pool,
        })
    }

    /// Compresses `data`; what [`Write::write_all`] does, with the error typed.
    pub fn push(&mut self, data: &[u8]) -> Result<(), Error> {
        let Some(member) = self.member.as_mut() else {
            return Err(Error::InvalidOptions(
                "an earlier error stopped this encoder".into(),
            ));
        };
        let output = &mut self.output;
        let result = in_pool(&self.pool, || member.push(data, output, &mut |_| Ok(())));
        result.map_err(|e| {
            // A frame half coded leaves the model between two bytes: nothing more can follow.
            self.member = None;
            classify(e, Otherwise::InvalidOptions)
        })
    }

    /// Codes what is left, writes the member's trailer, flushes and returns the writer.
    pub fn finish(mut self) -> Result<W, Error> {
        let Some(member) = self.member.take() else {
            return Err(Error::InvalidOptions(
                "an earlier error stopped this encoder".into(),
            ));
        };
        let output = &mut self.output;
        in_pool(&self.pool, || member.finish(output, &mut |_| Ok(())))
            .map_err(|e| classify(e, Otherwise::InvalidOptions))?;
        Ok(self.output)
    }

    /// The writer the stream goes to.
    pub fn get_ref(&self) -> &W {
        &self.output
    }
}

impl<W: Write> Write for Encoder<W> {
    /// Takes all of `buf` (coding every frame it completes); errors carry an [`Error`]
    /// (`lmzip::Error::from` recovers it).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.output.flush()
    }
}

/// Runs `f` with `pool` installed on this thread, if there is one.
pub(crate) fn in_pool<T>(pool: &Option<Pool>, f: impl FnOnce() -> T) -> T {
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Compresses `data` in one call; the announced length is `data`'s. It writes what the command
/// line writes for the same options and input: by the input's first bytes it takes the level's
/// seeded network where the level's prior does not suit them, and the x86 transform for x86
/// code, unless the recipe text names the prior, the warm start or the transform; at levels
/// 1-3 the network does not train on x86 code's first 128 KiB
/// ([`crate::codec::MACHINE_CODE_UNTRAINED`]) unless the recipe text gives rules.
///
/// ```
/// let data = b"to be or not to be";
/// let packed = lmzip::compress(data, &lmzip::Options::new().level(1))?;
/// assert_eq!(lmzip::decompress(&packed)?, data);
/// # Ok::<(), lmzip::Error>(())
/// ```
pub fn compress(data: &[u8], options: &Options) -> Result<Vec<u8>, Error> {
    let options = match options.announced_len() {
        Some(_) => options.clone(),
        None => options.clone().size(data.len() as u64),
    };
    let (recipe, weights) = options.prepare()?;
    let seeded = options.prepare_seeded()?;
    let pool = options.pool()?;
    let choice = Choice::ByInput {
        seeded: seeded.as_ref(),
    };
    let codec_options = codec_options(&options, weights.as_deref(), choice);
    let mut packed = Vec::new();
    in_pool(&pool, || {
        codec::compress(&recipe, &codec_options, data, &mut packed, &mut |_| Ok(()))
    })
    .map_err(|e| classify(e, Otherwise::InvalidOptions))?;
    Ok(packed)
}

/// Whether the input's first bytes choose the recipe's prior, warm start, x86 transform and
/// machine code's untrained start.
enum Choice<'a> {
    /// The recipe stays as it is (the streaming encoder, whose header goes out first).
    AsGiven,
    /// As on the command line (the one call, which sees the input first): the level's seeded
    /// recipe, if there is one to choose, where the prior does not suit the input, and the warm
    /// start and the x86 transform unless the recipe text names them, and machine code's
    /// untrained start unless it gives rules.
    ByInput {
        seeded: Option<&'a crate::recipe::Recipe>,
    },
}

/// The codec's options for `options`, choosing as `choice` says.
fn codec_options<'a>(
    options: &Options,
    weights: Option<&'a crate::modelfile::Weights>,
    choice: Choice<'a>,
) -> codec::Options<'a> {
    let (chooses, seeded) = match choice {
        Choice::AsGiven => (false, None),
        Choice::ByInput { seeded } => (true, seeded),
    };
    codec::Options {
        weights,
        save_model: false,
        expected_len: options.announced_len(),
        known_len: None,
        memory_limit: options.memory(),
        choose_prior: seeded.is_some(),
        seeded,
        choose_warm: chooses && !options.recipe_names("warm="),
        choose_x86: chooses && !options.recipe_names("x86="),
        choose_training: chooses && !options.recipe_gives_rules(),
    }
}
