//! One input at a time: compress, decompress, test or describe it, with the checks that come
//! before (names, terminals, existing targets) and the steps that come after (verify, commit,
//! remove the source).

use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufReader, IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use super::blocks;
use super::files::{Source, StagedFile, check_target};
use super::progress::{Meter, bits_per_byte, say, summary, wants_summary};
use super::settings::{
    BlockPlan, Input, Job, OutputChoice, OutputSettings, Settings, Verbosity, compressed_name,
    decompressed_name, has_suffix,
};
use super::stats::Curve;
use super::{FAILURE_STATUS, USAGE_STATUS};
use crate::codec;
use crate::compact;
use crate::format;
use crate::modelfile::Weights;
use crate::recipe::{Base, Recipe, hex};

/// What every input of a run shares: the model file it starts from and, for compression, the
/// recipe.
pub struct Shared {
    weights: Option<Weights>,
    recipe: Option<Recipe>,
    /// Whether the recipe's stage is sized for each input (src/fit.rs).
    fit: bool,
    /// Whether the level's prior is kept only for inputs it suits ([`crate::prior::suits`]).
    choose_prior: bool,
    /// The recipe for inputs the level's prior does not suit, when that is chosen per input.
    seeded: Option<Recipe>,
    /// Whether the stage's warm start is left out where the x86 transform is on.
    choose_warm: bool,
    /// Whether the x86 transform is chosen by detection ([`crate::transform::x86::detect`]).
    choose_x86: bool,
    /// Whether machine code's first bytes are left untrained
    /// ([`crate::codec::MACHINE_CODE_UNTRAINED`]).
    choose_training: bool,
    /// `--memory`.
    memory_limit: Option<u64>,
    /// `list` has printed its header line.
    listed: std::cell::Cell<bool>,
    /// What `list` has listed so far, for its totals line.
    list_totals: std::cell::Cell<ListTotals>,
}

/// Files, members and bytes listed by `-l`.
#[derive(Clone, Copy, Default)]
struct ListTotals {
    files: u64,
    members: u64,
    lmz: u64,
    raw: u64,
}

impl Shared {
    /// Loads the model file and builds the recipe; on error, the exit status and the cause.
    pub fn prepare(settings: &Settings) -> Result<Self, (u8, anyhow::Error)> {
        let weights = settings
            .weights
            .as_deref()
            .map(Weights::open)
            .transpose()
            .map_err(|e| (FAILURE_STATUS, e))?;
        let recipe = match &settings.job {
            Job::Compress { plan, .. } => Some(
                plan.build(weights.as_ref())
                    .map_err(|e| (USAGE_STATUS, e))?,
            ),
            _ => None,
        };
        let seeded = match &settings.job {
            Job::Compress { plan, .. } => plan
                .build_seeded(weights.as_ref())
                .map_err(|e| (USAGE_STATUS, e))?,
            _ => None,
        };
        let (fit, choose_prior, choose_warm, choose_x86, choose_training) = match &settings.job {
            Job::Compress { plan, .. } => (
                plan.fits(),
                plan.chooses_prior(),
                plan.chooses_warm(),
                plan.chooses_x86(),
                plan.chooses_training(),
            ),
            _ => (false, false, false, false, false),
        };
        Ok(Shared {
            weights,
            recipe,
            fit,
            choose_prior,
            seeded,
            choose_warm,
            choose_x86,
            choose_training,
            memory_limit: settings.memory_limit,
            listed: std::cell::Cell::new(false),
            list_totals: std::cell::Cell::default(),
        })
    }

    fn options(&self, save_model: bool) -> codec::Options<'_> {
        codec::Options {
            weights: self.weights.as_ref(),
            save_model,
            expected_len: None,
            known_len: None,
            memory_limit: self.memory_limit,
            choose_prior: self.choose_prior,
            seeded: self.seeded.as_ref(),
            choose_warm: self.choose_warm,
            choose_x86: self.choose_x86,
            choose_training: self.choose_training,
        }
    }
}

/// Runs the job on one input.
pub fn run_one(settings: &Settings, shared: &Shared, input: &Input) -> Result<()> {
    let label = input.label();
    let v = settings.verbosity;
    let suffix = settings.suffix.as_str();
    match &settings.job {
        Job::Compress {
            verify,
            output,
            save_weights,
            size,
            blocks,
            stats,
            ..
        } => {
            let Some(recipe) = &shared.recipe else {
                bail!("no recipe");
            };
            if skip_symlink(input, output.force, &label, v) {
                return Ok(());
            }
            let job = CompressJob {
                recipe,
                shared,
                verify: *verify,
                out: output,
                save_weights: save_weights.as_deref(),
                size: *size,
                suffix,
                blocks: *blocks,
                stats: stats.as_deref(),
            };
            job.run(input, &label, v)
        }
        Job::Decompress {
            output,
            save_weights,
        } => {
            if skip_symlink(input, output.force, &label, v) {
                return Ok(());
            }
            let job = DecompressJob {
                shared,
                threads: settings.threads,
                out: output,
                save_weights: save_weights.as_deref(),
                suffix,
            };
            job.run(input, &label, v)
        }
        Job::Test => test_one(shared, settings.threads, input, &label, v),
        Job::Info => info_one(input, v),
        Job::List => list_one(shared, input, v),
    }
}

/// gzip's and zstd's rule: a symbolic link named as an input is skipped unless `-f` says to
/// follow it (a note says so). Returns whether to skip.
fn skip_symlink(input: &Input, force: bool, label: &str, verbosity: Verbosity) -> bool {
    let Input::File(path) = input else {
        return false;
    };
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && !force && verbosity > Verbosity::Quiet {
        say(format_args!(
            "lmzip: {label}: is a symbolic link; skipped (use -f to follow it)"
        ));
    }
    is_link && !force
}

/// A file written beside the main output (a model, a learning curve): its temporary file is
/// created before coding starts, so that a missing directory or a name that may not be
/// replaced fails at once rather than after the whole run; it is renamed onto its name once
/// written, and removed if the run fails.
struct SideFile {
    path: PathBuf,
    staged: StagedFile,
}

impl SideFile {
    /// Checks `path` and creates its temporary file; `None` when there is no such output.
    fn prepare(path: Option<&Path>, force: bool) -> Result<Option<Self>> {
        let Some(path) = path else {
            return Ok(None);
        };
        if !force && path.exists() {
            bail!("{} already exists (use -f to overwrite)", path.display());
        }
        if path.is_dir() {
            bail!("{} is a directory", path.display());
        }
        let staged = StagedFile::create(path, None)?;
        Ok(Some(SideFile {
            path: path.to_path_buf(),
            staged,
        }))
    }

    /// Writes `bytes` and renames the file onto its name (never over an existing file unless
    /// forced).
    fn write(self, bytes: &[u8], force: bool) -> Result<()> {
        let mut file = self.staged.file();
        file.write_all(bytes)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.staged.commit(None, force)
    }
}

/// Writes the model a run ended with into its prepared side file.
fn save_model(file: Option<SideFile>, summary: &codec::Summary, force: bool) -> Result<()> {
    if let (Some(file), Some(bytes)) = (file, &summary.model) {
        file.write(bytes, force)?;
    }
    Ok(())
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

/// One compression: the recipe, the shared model file, and what to do with the results.
struct CompressJob<'a> {
    recipe: &'a Recipe,
    shared: &'a Shared,
    verify: bool,
    out: &'a OutputSettings,
    save_weights: Option<&'a Path>,
    size: Option<u64>,
    suffix: &'a str,
    blocks: Option<BlockPlan>,
    stats: Option<&'a Path>,
}

impl CompressJob<'_> {
    fn run(&self, input: &Input, label: &str, verbosity: Verbosity) -> Result<()> {
        let out = self.out;
        if let Input::File(path) = input
            && has_suffix(path, self.suffix)
            && !out.force
        {
            bail!(
                "already has the {} suffix (use -f to compress it again)",
                self.suffix
            );
        }
        let target = Target::choose(&out.choice, input, |p| Ok(compressed_name(p, self.suffix)))?;
        if matches!(target, Target::Stdout) && io::stdout().is_terminal() && !out.force {
            bail!("refusing to write compressed data to a terminal (use -f to force, or -o FILE)");
        }
        let mut source = Source::open(input)?;
        if let Target::File(path) = &target {
            check_target(&source, path, out.force)?;
        }
        // Every output is set up before the long run: a missing directory fails now.
        let model_file = SideFile::prepare(self.save_weights, out.force)?;
        let stats_file = SideFile::prepare(self.stats, out.force)?;
        // Percent positions become bytes of this input.
        let length = self.size.or(source.len());
        let mut options = self.shared.options(self.save_weights.is_some());
        options.expected_len = self.size;
        options.known_len = length;
        let mut meter = Meter::new(verbosity, label, length);
        let mut curve = self.stats.map(|_| Curve::default());
        let source_meta = source.metadata().cloned();
        let mut reader = DigestReader::new(&mut source.reader);

        let (summary_of, took) = match &target {
            Target::File(path) => {
                let staged = StagedFile::create(path, source_meta.as_ref())?;
                let s = self.encode(
                    length,
                    &options,
                    &mut reader,
                    &mut staged.file(),
                    &mut meter,
                    &mut curve,
                )?;
                let took = meter.finish();
                super::signals::check()?;
                if self.verify {
                    verify_compressed(
                        self.shared,
                        staged.file(),
                        &reader.digest,
                        label,
                        verbosity,
                    )?;
                }
                staged.commit(source_meta.as_ref(), out.force)?;
                save_model(model_file, &s, out.force)?;
                if out.remove_source {
                    source.remove()?;
                }
                (s, took)
            }
            Target::Stdout if self.verify => {
                // Hold the stream back until it has proved itself: spool, decode, then copy out.
                let mut spool = tempfile::tempfile().context("cannot create a temporary file")?;
                let s = self.encode(
                    length,
                    &options,
                    &mut reader,
                    &mut spool,
                    &mut meter,
                    &mut curve,
                )?;
                let took = meter.finish();
                verify_compressed(self.shared, &spool, &reader.digest, label, verbosity)?;
                spool
                    .seek(SeekFrom::Start(0))
                    .context("cannot read back the output")?;
                let mut stdout = io::stdout().lock();
                io::copy(&mut spool, &mut stdout).context("cannot write output")?;
                stdout.flush().context("cannot write output")?;
                save_model(model_file, &s, out.force)?;
                (s, took)
            }
            Target::Stdout => {
                let mut stdout = io::stdout().lock();
                let s = self.encode(
                    length,
                    &options,
                    &mut reader,
                    &mut stdout,
                    &mut meter,
                    &mut curve,
                )?;
                save_model(model_file, &s, out.force)?;
                (s, meter.finish())
            }
        };
        if let (Some(file), Some(curve)) = (stats_file, curve) {
            file.write(curve.finish().as_bytes(), out.force)?;
        }
        if wants_summary(verbosity) {
            let (raw, lmz) = (summary_of.raw_bytes, summary_of.lmz_bytes);
            summary(label, raw, lmz, (lmz, raw), took, &target.label());
        }
        if verbosity >= Verbosity::Detailed {
            say_members(label, &summary_of.members);
            say(format_args!(
                "{label}: recipe {}",
                summary_of.recipe.to_text()
            ));
        }
        Ok(())
    }

    /// Codes the input into `output`: one member, or one per block.
    fn encode(
        &self,
        length: Option<u64>,
        options: &codec::Options<'_>,
        input: &mut dyn Read,
        output: &mut dyn Write,
        meter: &mut Meter,
        curve: &mut Option<Curve>,
    ) -> Result<codec::Summary> {
        let mut report = |p: codec::Progress| {
            if let Some(c) = curve.as_mut() {
                c.record(p);
            }
            meter.update(p)
        };
        match self.blocks {
            Some(plan) => blocks::compress(
                self.recipe,
                plan,
                self.shared.fit,
                options,
                input,
                output,
                &mut report,
            ),
            None => {
                let fit = |r| crate::fit::for_input(r, length, self.shared.fit);
                let recipe = fit(self.recipe)?;
                let seeded = options.seeded.map(fit).transpose()?;
                let options = codec::Options {
                    seeded: seeded.as_ref(),
                    ..*options
                };
                codec::compress(&recipe, &options, input, output, &mut report)
            }
        }
    }
}

/// The `-vv` lines of a stream of several members: sizes and bits per byte of each.
fn say_members(label: &str, members: &[codec::Member]) {
    if members.len() < 2 {
        return;
    }
    for (i, m) in members.iter().enumerate() {
        say(format_args!(
            "{label}: member {}: {} bytes <-> {} bytes, {:.3} bpb",
            i + 1,
            m.raw_bytes,
            m.lmz_bytes,
            bits_per_byte(m.lmz_bytes, m.raw_bytes)
        ));
    }
}

/// Decodes a freshly written `.lmz` file and checks that it gives back exactly what was read.
fn verify_compressed(
    shared: &Shared,
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
    let options = shared.options(false);
    codec::decompress(&options, BufReader::new(lmz), &mut decoded, &mut |p| {
        meter.update(p)
    })
    .context("verification failed: the output does not decode")?;
    ensure!(
        decoded.digest.finish() == expected.finish(),
        "verification failed: the output decodes to different bytes"
    );
    if verbosity >= Verbosity::Verbose {
        say(format_args!(
            "{label}: verified: the output decodes to the {} bytes read",
            expected.len
        ));
    }
    Ok(())
}

/// One decompression: the shared model file and what to do with the results.
struct DecompressJob<'a> {
    shared: &'a Shared,
    /// The network threads of `-T`.
    threads: usize,
    out: &'a OutputSettings,
    save_weights: Option<&'a Path>,
    suffix: &'a str,
}

impl DecompressJob<'_> {
    fn run(&self, input: &Input, label: &str, verbosity: Verbosity) -> Result<()> {
        let (shared, out, save_weights) = (self.shared, self.out, self.save_weights);
        if let Input::File(path) = input
            && path.is_dir()
        {
            bail!("is a directory");
        }
        let target = Target::choose(&out.choice, input, |p| decompressed_name(p, self.suffix))?;
        refuse_terminal_input(input, out.force)?;
        let options = shared.options(save_weights.is_some());
        let mut source = Source::open(input)?;
        if let Target::File(path) = &target {
            check_target(&source, path, out.force)?;
        }
        let model_file = SideFile::prepare(save_weights, out.force)?;
        let mut meter = Meter::new(verbosity, label, decoded_len(input, &source));
        let (summary_of, took) = match &target {
            Target::File(path) => {
                let staged = StagedFile::create(path, source.metadata())?;
                let s = codec::decompress(&options, &mut source.reader, staged.file(), &mut |p| {
                    meter.update(p)
                })?;
                let took = meter.finish();
                super::signals::check()?;
                staged.commit(source.metadata(), out.force)?;
                save_model(model_file, &s, out.force)?;
                if out.remove_source {
                    source.remove()?;
                }
                (s, took)
            }
            Target::Stdout => {
                let mut stdout = io::stdout().lock();
                let s = codec::decompress(&options, &mut source.reader, &mut stdout, &mut |p| {
                    meter.update(p)
                })?;
                save_model(model_file, &s, out.force)?;
                (s, meter.finish())
            }
        };
        note_unused_weights(shared, &summary_of, label, verbosity);
        note_serial_members(self.threads, &summary_of, label, verbosity);
        if wants_summary(verbosity) {
            let (raw, lmz) = (summary_of.raw_bytes, summary_of.lmz_bytes);
            summary(label, lmz, raw, (lmz, raw), took, &target.label());
        }
        if verbosity >= Verbosity::Detailed {
            say_members(label, &summary_of.members);
        }
        Ok(())
    }
}

/// A `--weights` file that a stream did not start from changed nothing; say so rather than let
/// the user believe it was checked.
fn note_unused_weights(shared: &Shared, s: &codec::Summary, label: &str, verbosity: Verbosity) {
    if shared.weights.is_some()
        && !s.members.iter().any(|m| m.starts_from_file)
        && verbosity != Verbosity::Quiet
    {
        say(format_args!(
            "{label}: note: the stream starts from a fresh model; --weights was not used"
        ));
    }
}

/// `-T N` on a stream of several members (a `--block-size` file, concatenated files): the
/// members are decoded one after another, not N at a time as they were coded, and the threads
/// only split each member's network products, which at lmzip's sizes does not pay (see
/// `DEFAULT_NETWORK_THREADS` in settings.rs). Say so rather than let the user think the second
/// core worked for them.
fn note_serial_members(threads: usize, s: &codec::Summary, label: &str, verbosity: Verbosity) {
    if threads > 1 && s.members.len() > 1 && verbosity != Verbosity::Quiet {
        say(format_args!(
            "{label}: note: -T {threads} does not apply to members: the {} members were \
             decoded one after another (the threads only split each one's network products)",
            s.members.len()
        ));
    }
}

/// The length a regular `.lmz` file decodes to, read from its trailers, so that the progress
/// bar knows its total; `None` for a stream or a file that does not scan (decoding will say
/// why).
fn decoded_len(input: &Input, source: &Source) -> Option<u64> {
    let Input::File(path) = input else {
        return None;
    };
    source.len()?;
    let file = File::open(path).ok()?;
    format::scan_members(&mut BufReader::new(file))
        .ok()
        .map(|members| members.iter().map(|m| m.raw_len).sum())
}

fn refuse_terminal_input(input: &Input, force: bool) -> Result<()> {
    if *input == Input::Stdin && io::stdin().is_terminal() && !force {
        bail!("refusing to read compressed data from a terminal (use -f to force)");
    }
    Ok(())
}

fn test_one(
    shared: &Shared,
    threads: usize,
    input: &Input,
    label: &str,
    verbosity: Verbosity,
) -> Result<()> {
    refuse_terminal_input(input, false)?;
    let mut source = Source::open(input)?;
    let mut meter = Meter::new(verbosity, label, decoded_len(input, &source));
    let options = shared.options(false);
    let s = codec::decompress(&options, &mut source.reader, io::sink(), &mut |p| {
        meter.update(p)
    })?;
    let took = meter.finish();
    note_unused_weights(shared, &s, label, verbosity);
    note_serial_members(threads, &s, label, verbosity);
    match verbosity {
        Verbosity::Quiet => {}
        Verbosity::Normal => say(format_args!("{label}: ok")),
        Verbosity::Verbose | Verbosity::Detailed => {
            summary(
                label,
                s.lmz_bytes,
                s.raw_bytes,
                (s.lmz_bytes, s.raw_bytes),
                took,
                &match s.members.len() {
                    1 => "ok".to_string(),
                    n => format!("ok ({n} members)"),
                },
            );
            if verbosity == Verbosity::Detailed {
                say_members(label, &s.members);
            }
        }
    }
    Ok(())
}

/// The members of an input, found without decoding it. Standard input is read whole first.
fn scan_input(input: &Input) -> Result<Vec<format::Layout>> {
    match input {
        Input::Stdin => {
            let mut bytes = Vec::new();
            io::stdin()
                .lock()
                .read_to_end(&mut bytes)
                .context("cannot read input")?;
            format::scan_members(&mut io::Cursor::new(bytes))
        }
        Input::File(path) => {
            let file = File::open(path).context("cannot open")?;
            if file
                .metadata()
                .context("cannot read file metadata")?
                .is_dir()
            {
                bail!("is a directory");
            }
            format::scan_members(&mut BufReader::new(file))
        }
    }
}

fn write_stdout(text: &str) -> Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("cannot write output")?;
    stdout.flush().context("cannot write output")
}

/// Prints what the container says about a file, without running its model: the stream as a
/// whole, then (with several members, or `-v`) a line per member.
fn info_one(input: &Input, verbosity: Verbosity) -> Result<()> {
    let members = scan_input(input)?;
    let first = &members[0];
    let numerics = numerics_text(first.header.numerics_version);
    let (recipe, model_file) = describe_recipe(&first.header);
    let same_recipe = members.iter().all(|m| m.header == first.header);
    let recipe = if same_recipe {
        recipe
    } else {
        format!("{recipe} (member 1; the members differ)")
    };
    let raw: u64 = members.iter().map(|m| m.raw_len).sum();
    let lmz: u64 = members.iter().map(|m| m.stream_len).sum();
    let frames: u64 = members.iter().map(|m| m.frames).sum();
    let memory = decode_memory(&members);
    let mut text = format!(
        "{name}\n\
         \x20 format version:   {format}\n\
         \x20 numerics version: {numerics}\n\
         \x20 recipe:           {recipe}\n\
         \x20 header:           {header_len} bytes, stored as {form}\n\
         {model_file}\
         \x20 original size:    {raw} bytes\n\
         \x20 compressed size:  {lmz} bytes\n\
         \x20 bits per byte:    {bpb:.3}\n\
         \x20 frames:           {frames}\n\
         \x20 memory to decode: {memory}\n",
        name = input.label(),
        format = first.header.format_version,
        header_len = first.header.len,
        form = compact::describe(&first.header.recipe),
        bpb = bits_per_byte(lmz, raw),
    );
    if members.len() == 1 {
        text += &format!("\x20 CRC32:            {:08x}\n", first.trailer.crc);
    } else {
        text += &format!("\x20 members:          {}\n", members.len());
    }
    if members.len() > 1 || verbosity >= Verbosity::Verbose {
        for (i, m) in members.iter().enumerate() {
            text += &format!(
                "\x20 member {}: {} -> {} bytes, {:.3} bpb, {} frame{}, header {} bytes, \
                 CRC32 {:08x}\n",
                i + 1,
                m.raw_len,
                m.stream_len,
                bits_per_byte(m.stream_len, m.raw_len),
                m.frames,
                if m.frames == 1 { "" } else { "s" },
                m.header.len,
                m.trailer.crc
            );
            if verbosity >= Verbosity::Verbose {
                let (recipe, model_file) = describe_recipe(&m.header);
                text += &format!(
                    "\x20   numerics version {}, recipe {recipe}\n{model_file}",
                    m.header.numerics_version
                );
            }
        }
    }
    write_stdout(&text)
}

/// The numerics version of a file and whether this build decodes it.
fn numerics_text(version: u8) -> String {
    if (format::OLDEST_NUMERICS_VERSION..=format::NUMERICS_VERSION).contains(&version) {
        format!("{version} (decodable by this build)")
    } else {
        format!(
            "{version} (this build computes versions {} to {}: cannot decode; {})",
            format::OLDEST_NUMERICS_VERSION,
            format::NUMERICS_VERSION,
            format::which_release_decodes(version)
        )
    }
}

/// The memory decoding needs ([`codec::memory_needed`]): the most any member with frames needs
/// (members are decoded one after another, and one without frames builds no model), or why it
/// is not known.
fn decode_memory(members: &[format::Layout]) -> String {
    let mut most = codec::PROGRAM_BYTES as u64;
    for m in members.iter().filter(|m| m.frames > 0) {
        match codec::read_recipe(&m.header) {
            Ok(recipe) => most = most.max(codec::memory_needed(&recipe)),
            Err(_) => return "unknown (a recipe this build cannot read)".into(),
        }
    }
    codec::mebibytes(most)
}

/// One `-l` row: members, compressed and uncompressed bytes, ratio, bits per byte, name.
/// Where the output is larger than the input, the header outweighs what the model saved, and
/// bits per byte would measure the header (a 1-byte member shows thousands): `-` stands there
/// instead, as xz -l shows `---` for a ratio it cannot give.
fn list_row(count: &str, lmz: u64, raw: u64, memory: Option<&str>, name: &str) -> String {
    let ratio = if lmz == 0 {
        0.0
    } else {
        raw as f64 / lmz as f64
    };
    let bpb = if lmz > raw {
        "-".to_string()
    } else {
        format!("{:.3}", bits_per_byte(lmz, raw))
    };
    let memory = memory.map_or(String::new(), |m| format!(" {m:>10}"));
    format!("{count:>7} {lmz:>11} {raw:>13} {ratio:>7.3} {bpb:>7}{memory}  {name}\n")
}

/// The `-l` line of a file (after a header line before the first): members, sizes, ratio,
/// bits per byte; with `-v`, the memory decoding needs and a line per member below it.
fn list_one(shared: &Shared, input: &Input, verbosity: Verbosity) -> Result<()> {
    let members = scan_input(input)?;
    let verbose = verbosity >= Verbosity::Verbose;
    let mut text = String::new();
    if !shared.listed.replace(true) {
        text += match verbose {
            false => "members  compressed  uncompressed   ratio     bpb  name\n",
            true => "members  compressed  uncompressed   ratio     bpb     memory  name\n",
        };
    }
    let raw: u64 = members.iter().map(|m| m.raw_len).sum();
    let lmz: u64 = members.iter().map(|m| m.stream_len).sum();
    let memory = |ms: &[format::Layout]| {
        let m = decode_memory(ms);
        match m.starts_with("unknown") {
            true => "-".to_string(),
            false => m,
        }
    };
    let file_memory = verbose.then(|| memory(&members));
    let count = members.len().to_string();
    text += &list_row(&count, lmz, raw, file_memory.as_deref(), &input.label());
    if verbose {
        for (i, m) in members.iter().enumerate() {
            text += &list_row(
                &format!("#{}", i + 1),
                m.stream_len,
                m.raw_len,
                Some(&memory(std::slice::from_ref(m))),
                &format!("  member {}", i + 1),
            );
        }
    }
    let t = shared.list_totals.get();
    shared.list_totals.set(ListTotals {
        files: t.files + 1,
        members: t.members + members.len() as u64,
        lmz: t.lmz + lmz,
        raw: t.raw + raw,
    });
    write_stdout(&text)
}

/// After the last file of `-l`: with more than one file listed, a rule and the totals, as
/// `xz -l` and `zstd -l` end.
pub fn finish_list(shared: &Shared) -> Result<()> {
    let t = shared.list_totals.get();
    if t.files < 2 {
        return Ok(());
    }
    let mut text = "-".repeat(55) + "\n";
    text += &list_row(
        &t.members.to_string(),
        t.lmz,
        t.raw,
        None,
        &format!("{} files", t.files),
    );
    write_stdout(&text)
}

/// The stored recipe text, and a `model file:` line when the stream starts from one. A recipe
/// this build cannot read (a newer model, say) is shown as stored, with the reason.
fn describe_recipe(header: &format::Header) -> (String, String) {
    match codec::read_recipe(header) {
        Ok(recipe) => {
            let model_file = match &recipe.base {
                Base::File { sha256, name, .. } => format!(
                    "\x20 model file:       sha256 {}{}\n",
                    hex(sha256),
                    name.as_ref().map_or(String::new(), |n| format!(" ({n})"))
                ),
                Base::Fresh { config, .. } => match crate::prior::by_number(config.prior()) {
                    Some(p) => format!(
                        "\x20 prior:            {} (number {}, sha256 {}): {}\n",
                        p.name,
                        p.number,
                        p.sha256(),
                        p.about
                    ),
                    None => String::new(),
                },
            };
            (recipe.to_text(), model_file)
        }
        Err(e) => (
            format!(
                "{} (not readable by this build: {e})",
                match &header.recipe {
                    format::StoredRecipe::Text(text) => text.clone(),
                    level => compact::describe(level),
                }
            ),
            String::new(),
        ),
    }
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
