//! One input at a time: compress, decompress, test or describe it, with the checks that come
//! before (names, terminals, existing targets) and the steps that come after (verify, commit,
//! remove the source).

use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufReader, IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use super::files::{Source, StagedFile, check_target};
use super::progress::{Meter, bits_per_byte, say, summary};
use super::settings::{
    Input, Job, OutputChoice, OutputSettings, Settings, Verbosity, compressed_name,
    decompressed_name,
};
use crate::codec;
use crate::format;
use crate::recipe::Recipe;

/// Runs the job on one input.
pub fn run_one(settings: &Settings, input: &Input) -> Result<()> {
    let label = input.label();
    let v = settings.verbosity;
    match &settings.job {
        Job::Compress {
            recipe,
            verify,
            output,
        } => compress_one(recipe, *verify, output, input, &label, v),
        Job::Decompress { output } => decompress_one(output, input, &label, v),
        Job::Test => test_one(input, &label, v),
        Job::Info => info_one(input),
    }
}

/// Where one result goes.
enum Target {
    Stdout,
    File(PathBuf),
}

impl Target {
    fn choose(
        choice: &OutputChoice,
        input: &Input,
        derive: impl Fn(&Path) -> Result<PathBuf>,
    ) -> Result<Self> {
        Ok(match (choice, input) {
            (OutputChoice::Stdout, _) | (OutputChoice::Derived, Input::Stdin) => Target::Stdout,
            (OutputChoice::File(path), _) => Target::File(path.clone()),
            (OutputChoice::Derived, Input::File(path)) => Target::File(derive(path)?),
        })
    }

    fn label(&self) -> String {
        match self {
            Target::Stdout => "stdout".to_string(),
            Target::File(path) => path.display().to_string(),
        }
    }
}

fn compress_one(
    recipe: &Recipe,
    verify: bool,
    out: &OutputSettings,
    input: &Input,
    label: &str,
    verbosity: Verbosity,
) -> Result<()> {
    if let Input::File(path) = input
        && path.extension().is_some_and(|e| e == "lmz")
        && !out.force
    {
        bail!("already has the .lmz suffix (use -f to compress it again)");
    }
    let target = Target::choose(&out.choice, input, |p| Ok(compressed_name(p)))?;
    if matches!(target, Target::Stdout) && io::stdout().is_terminal() && !out.force {
        bail!("refusing to write compressed data to a terminal (use -f to force, or -o FILE)");
    }
    let mut source = Source::open(input)?;
    if let Target::File(path) = &target {
        check_target(&source, path, out.force)?;
    }
    let mut meter = Meter::new(verbosity, label, source.len());
    let source_meta = source.metadata().cloned();
    let mut reader = DigestReader::new(&mut source.reader);

    let (summary_of, took) = match &target {
        Target::File(path) => {
            let staged = StagedFile::create(path, source_meta.as_ref())?;
            let s = codec::compress(recipe, &mut reader, staged.file(), &mut |p| meter.update(p))?;
            let took = meter.finish();
            super::signals::check()?;
            if verify {
                verify_compressed(staged.file(), &reader.digest, label, verbosity)?;
            }
            staged.commit(source_meta.as_ref(), out.force)?;
            if out.remove_source {
                source.remove()?;
            }
            (s, took)
        }
        Target::Stdout if verify => {
            // Hold the stream back until it has proved itself: spool, decode, then copy out.
            let mut spool = tempfile::tempfile().context("cannot create a temporary file")?;
            let s = codec::compress(recipe, &mut reader, &spool, &mut |p| meter.update(p))?;
            let took = meter.finish();
            verify_compressed(&spool, &reader.digest, label, verbosity)?;
            spool
                .seek(SeekFrom::Start(0))
                .context("cannot read back the output")?;
            let mut stdout = io::stdout().lock();
            io::copy(&mut spool, &mut stdout).context("cannot write output")?;
            stdout.flush().context("cannot write output")?;
            (s, took)
        }
        Target::Stdout => {
            let mut stdout = io::stdout().lock();
            let s = codec::compress(recipe, &mut reader, &mut stdout, &mut |p| meter.update(p))?;
            (s, meter.finish())
        }
    };
    if verbosity == Verbosity::Verbose {
        let (raw, lmz) = (summary_of.raw_bytes, summary_of.lmz_bytes);
        summary(label, raw, lmz, (lmz, raw), took, &target.label());
    }
    Ok(())
}

/// Decodes a freshly written `.lmz` file and checks that it gives back exactly what was read.
fn verify_compressed(
    lmz: &File,
    expected: &Digest,
    label: &str,
    verbosity: Verbosity,
) -> Result<()> {
    let mut lmz = lmz;
    lmz.seek(SeekFrom::Start(0))
        .context("cannot read back the output")?;
    let mut meter = Meter::new(verbosity, &format!("{label} (verify)"), Some(expected.len));
    let mut decoded = DigestWriter::default();
    codec::decompress(BufReader::new(lmz), &mut decoded, &mut |p| meter.update(p))
        .context("verification failed: the output does not decode")?;
    ensure!(
        decoded.digest.finish() == expected.finish(),
        "verification failed: the output decodes to different bytes"
    );
    Ok(())
}

fn decompress_one(
    out: &OutputSettings,
    input: &Input,
    label: &str,
    verbosity: Verbosity,
) -> Result<()> {
    let target = Target::choose(&out.choice, input, decompressed_name)?;
    refuse_terminal_input(input, out.force)?;
    let mut source = Source::open(input)?;
    if let Target::File(path) = &target {
        check_target(&source, path, out.force)?;
    }
    let mut meter = Meter::new(verbosity, label, decoded_len(input, &source));
    let (summary_of, took) = match &target {
        Target::File(path) => {
            let staged = StagedFile::create(path, source.metadata())?;
            let s = codec::decompress(&mut source.reader, staged.file(), &mut |p| meter.update(p))?;
            let took = meter.finish();
            super::signals::check()?;
            staged.commit(source.metadata(), out.force)?;
            if out.remove_source {
                source.remove()?;
            }
            (s, took)
        }
        Target::Stdout => {
            let mut stdout = io::stdout().lock();
            let s = codec::decompress(&mut source.reader, &mut stdout, &mut |p| meter.update(p))?;
            (s, meter.finish())
        }
    };
    if verbosity == Verbosity::Verbose {
        let (raw, lmz) = (summary_of.raw_bytes, summary_of.lmz_bytes);
        summary(label, lmz, raw, (lmz, raw), took, &target.label());
    }
    Ok(())
}

/// The length a regular `.lmz` file decodes to, read from its trailer, so that the progress bar
/// knows its total; `None` for a stream or a file that does not scan (decoding will say why).
fn decoded_len(input: &Input, source: &Source) -> Option<u64> {
    let Input::File(path) = input else {
        return None;
    };
    source.len()?;
    let file = File::open(path).ok()?;
    format::scan(&mut BufReader::new(file))
        .ok()
        .map(|layout| layout.raw_len)
}

fn refuse_terminal_input(input: &Input, force: bool) -> Result<()> {
    if *input == Input::Stdin && io::stdin().is_terminal() && !force {
        bail!("refusing to read compressed data from a terminal (use -f to force)");
    }
    Ok(())
}

fn test_one(input: &Input, label: &str, verbosity: Verbosity) -> Result<()> {
    refuse_terminal_input(input, false)?;
    let mut source = Source::open(input)?;
    let mut meter = Meter::new(verbosity, label, decoded_len(input, &source));
    let s = codec::decompress(&mut source.reader, io::sink(), &mut |p| meter.update(p))?;
    let took = meter.finish();
    match verbosity {
        Verbosity::Quiet => {}
        Verbosity::Normal => say(format_args!("{label}: ok")),
        Verbosity::Verbose => summary(
            label,
            s.lmz_bytes,
            s.raw_bytes,
            (s.lmz_bytes, s.raw_bytes),
            took,
            "ok",
        ),
    }
    Ok(())
}

/// Prints what the container says about a file, without running its model.
fn info_one(input: &Input) -> Result<()> {
    let Input::File(path) = input else {
        bail!("info reads files, not standard input");
    };
    let file = File::open(path).context("cannot open")?;
    if file
        .metadata()
        .context("cannot read file metadata")?
        .is_dir()
    {
        bail!("is a directory");
    }
    let layout = format::scan(&mut BufReader::new(file))?;
    let numerics = if layout.header.numerics_version == format::NUMERICS_VERSION {
        format!(
            "{} (decodable by this build)",
            layout.header.numerics_version
        )
    } else {
        format!(
            "{} (this build computes version {}: cannot decode)",
            layout.header.numerics_version,
            format::NUMERICS_VERSION
        )
    };
    let text = format!(
        "{name}\n\
         \x20 format version:   {format}\n\
         \x20 numerics version: {numerics}\n\
         \x20 recipe:           {recipe}\n\
         \x20 recipe (stored):  {json}\n\
         \x20 original size:    {raw} bytes\n\
         \x20 compressed size:  {lmz} bytes\n\
         \x20 bits per byte:    {bpb:.3}\n\
         \x20 frames:           {frames}\n\
         \x20 CRC32:            {crc:08x}\n",
        name = path.display(),
        format = format::FORMAT_VERSION,
        recipe = describe_recipe(&layout.header.recipe),
        json = layout.header.recipe,
        raw = layout.raw_len,
        lmz = layout.stream_len,
        bpb = bits_per_byte(layout.stream_len, layout.raw_len),
        frames = layout.frames,
        crc = layout.trailer.crc,
    );
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("cannot write output")?;
    stdout.flush().context("cannot write output")?;
    Ok(())
}

/// The recipe in words: `mamba1 (conv 4, hidden 16, ...), seed 0, adam lr 0.002 ...`. A recipe
/// this build cannot read (a newer model, say) is described as such; its JSON is shown anyway.
fn describe_recipe(json: &str) -> String {
    let recipe = match Recipe::from_json(json) {
        Ok(r) => r,
        Err(e) => return format!("not readable by this build ({e:#})"),
    };
    // The sizes come from the stored JSON, so every model's own fields show without a list here.
    let sizes = serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v["config"].as_object().cloned())
        .map(|config| {
            let parts: Vec<String> = config.iter().map(|(k, v)| format!("{k} {v}")).collect();
            parts.join(", ")
        })
        .unwrap_or_default();
    let kind = recipe.kind();
    let t = &recipe.training;
    format!(
        "{} ({sizes}), seed {}, optimizer {}, lr {}, scope {}, bptt {}, clip {}",
        kind.name(),
        recipe.seed,
        t.optimizer.name(),
        t.lr,
        t.scope.to_text(kind.groups()),
        t.bptt,
        t.clip,
    )
}

/// Length and two independent hashes of a byte stream: what `--verify` compares. (The codec's
/// own CRC32 already guards the decoder; this check does not trust the codec's bookkeeping.)
struct Digest {
    len: u64,
    crc: crc32fast::Hasher,
    // SipHash with fixed keys: stable within one process, which is all a comparison needs.
    sip: std::hash::DefaultHasher,
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            len: 0,
            crc: crc32fast::Hasher::new(),
            sip: std::hash::DefaultHasher::new(),
        }
    }
}

impl Digest {
    fn update(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        self.crc.update(bytes);
        self.sip.write(bytes);
    }

    fn finish(&self) -> (u64, u32, u64) {
        (self.len, self.crc.clone().finalize(), self.sip.finish())
    }
}

/// A reader that digests what passes through it.
struct DigestReader<R> {
    inner: R,
    digest: Digest,
}

impl<R> DigestReader<R> {
    fn new(inner: R) -> Self {
        DigestReader {
            inner,
            digest: Digest::default(),
        }
    }
}

impl<R: Read> Read for DigestReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digest.update(&buf[..n]);
        Ok(n)
    }
}

/// A writer that only digests.
#[derive(Default)]
struct DigestWriter {
    digest: Digest,
}

impl Write for DigestWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.digest.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
