//! The command-line front end: `lmzip [-z|-d|-t|-l]`, and the commands `compress | decompress |
//! test | info | list | bench | train | completions | man`.
//!
//! [`run`] reads the program's name and the level flags ([`argv`]), parses the arguments
//! ([`args`]), validates them into typed [`settings`] before any file is touched, runs the job
//! on each input ([`jobs`]) and maps the outcome to an exit status:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | an input failed (the others were still processed); one line `lmzip: FILE: cause` each |
//! | 2 | usage error |
//! | 130, 143, 129 | stopped by SIGINT, SIGTERM or SIGHUP (128 + the signal); no partial output is left |
//! | 141 | the reader of standard output went away (broken pipe); quiet, like a shell pipeline |

mod args;
mod argv;
mod bench;
mod blocks;
mod files;
mod jobs;
mod man;
mod progress;
mod settings;
mod signals;
mod stats;
mod train;

use std::ffi::OsString;
use std::process::ExitCode;

use crate::pool;

use clap::{CommandFactory, FromArgMatches};

pub use args::Cli;
pub use settings::{Settings, Verbosity};

use settings::Input;

use progress::say;

/// Exit status of usage errors (clap's own as well).
const USAGE_STATUS: u8 = 2;
/// Exit status of a failure (of an input, or of the model file every input needs).
const FAILURE_STATUS: u8 = 1;
/// Exit status after a broken pipe: 128 + SIGPIPE, what a shell reports for a process the
/// signal would have killed (Rust ignores SIGPIPE, so the write fails instead).
const BROKEN_PIPE_STATUS: u8 = 141;

/// Runs lmzip with the given arguments (the first is the program name) and returns its exit
/// status.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = argv::prepare(args.into_iter().map(Into::into).collect());
    let cli = match parse(args) {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(report_clap_error(&e)),
    };
    match &cli.command {
        Some(args::Command::Completions { shell }) => {
            let mut command = command();
            clap_complete::generate(*shell, &mut command, "lmzip", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Some(args::Command::Man) => {
            return match man::render(command(), &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    say(format_args!("lmzip: cannot write the manual page: {e}"));
                    ExitCode::from(FAILURE_STATUS)
                }
            };
        }
        _ => {}
    }
    if let Some(args::Command::Bench(bench_args)) = &cli.command {
        if let Err(e) = crate::kernels::dispatch::init_from_env() {
            say(format_args!("lmzip: {e}"));
            return ExitCode::from(USAGE_STATUS);
        }
        progress::set_bars(!cli.talk.no_progress);
        // A signal stops the run at the next progress report, as for the other jobs.
        let _ = signals::install();
        return ExitCode::from(bench::run(bench_args, cli.talk.quiet));
    }
    if let Some(args::Command::Train(train_args)) = &cli.command {
        progress::set_bars(!cli.talk.no_progress);
        return ExitCode::from(train::run(train_args, cli.talk.quiet));
    }
    let settings = match Settings::from_cli(cli) {
        Ok(s) => s,
        Err(e) => {
            say(format_args!("lmzip: {e:#}"));
            say(format_args!("For more information, try '--help'."));
            return ExitCode::from(USAGE_STATUS);
        }
    };
    // The kernels' SIMD path, fixed before any kernel runs; a bad LMZIP_SIMD is a usage error.
    if let Err(e) = crate::kernels::dispatch::init_from_env() {
        say(format_args!("lmzip: {e}"));
        return ExitCode::from(USAGE_STATUS);
    }
    if settings.verbosity > Verbosity::Quiet {
        for warning in &settings.warnings {
            say(format_args!("lmzip: {warning}"));
        }
    }
    progress::set_bars(!settings.no_progress);
    let shared = match jobs::Shared::prepare(&settings) {
        Ok(shared) => shared,
        Err((status, e)) => {
            say(format_args!("lmzip: {e:#}"));
            return ExitCode::from(status);
        }
    };
    if let Err(e) = signals::install()
        && settings.verbosity >= Verbosity::Verbose
    {
        say(format_args!("lmzip: warning: cannot handle signals: {e}"));
    }
    // One pool for the run: the kernels of every stream coded on this thread split over it.
    let pool = match start_pool(settings.threads) {
        Ok(pool) => pool,
        Err((status, e)) => {
            say(format_args!("lmzip: {e}"));
            return ExitCode::from(status);
        }
    };
    ExitCode::from(pool.install(|| run_all(&settings, &shared)))
}

/// The kernels' pool of `threads`, with the least work per part from
/// [`pool::MIN_PART_WORK_ENV_VAR`] if set (a value that is not a number is a usage error).
fn start_pool(threads: usize) -> Result<pool::Pool, (u8, String)> {
    let var = pool::MIN_PART_WORK_ENV_VAR;
    let min_work = match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v.parse::<usize>().map_err(|_| {
            let msg = format!("{var}={v:?} is not a number of multiply-adds");
            (USAGE_STATUS, msg)
        })?),
        _ => None,
    };
    let pool = pool::Pool::new(threads)
        .map_err(|e| (1, format!("cannot start {threads} threads: {e}")))?;
    Ok(match min_work {
        Some(work) => pool.with_min_part_work(work),
        None => pool,
    })
}

/// The version line: the release, and the versions of the file format and of the numerics a
/// build writes and reads (a file decodes only with a numerics version the build computes).
pub fn version_text() -> String {
    format!(
        "{} (format version {}, numerics version {}; decodes numerics {} to {})",
        env!("CARGO_PKG_VERSION"),
        crate::format::FORMAT_VERSION,
        crate::format::NUMERICS_VERSION,
        crate::format::OLDEST_NUMERICS_VERSION,
        crate::format::NUMERICS_VERSION
    )
}

/// `--version`: the version line, then the built-in priors and warm starts the build carries (a
/// file written with one decodes only with a build that carries it).
pub fn long_version_text() -> String {
    let mut text = version_text() + "\nbuilt-in priors:";
    if crate::prior::all().is_empty() {
        text += " none";
    }
    for p in crate::prior::all() {
        text += &format!(
            "\n  {} (number {}, SHA-256 {}): {}",
            p.name,
            p.number,
            p.sha256(),
            p.about
        );
    }
    text += "\nbuilt-in warm starts of the stage's mixer:";
    for w in crate::mix::warm::all() {
        text += &format!(
            "\n  {} (mix:warm={}, SHA-256 {}): {}",
            w.name,
            w.number,
            w.sha256(),
            w.about
        );
    }
    text
}

/// The clap command with the full version text.
fn command() -> clap::Command {
    // clap keeps borrowed version strings; the command is built once or twice per process.
    let version: &'static str = Box::leak(version_text().into_boxed_str());
    let long: &'static str = Box::leak(long_version_text().into_boxed_str());
    Cli::command().version(version).long_version(long)
}

fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// Prints a clap error (or help, or version) and returns its exit status. Errors take the one
/// prefix every lmzip error has.
fn report_clap_error(e: &clap::Error) -> u8 {
    let status = e.exit_code().clamp(0, 255) as u8;
    if !e.use_stderr() {
        let _ = e.print();
        return status;
    }
    // A level out of range: the parser's own sentence says it all (the user may have typed
    // `-19`, not `--level 19`).
    if e.kind() == clap::error::ErrorKind::ValueValidation
        && let Some(clap::error::ContextValue::String(arg)) =
            e.get(clap::error::ContextKind::InvalidArg)
        && arg.starts_with("--level")
        && let Some(cause) = std::error::Error::source(e)
    {
        say(format_args!("lmzip: {cause}"));
        return status;
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    say(format_args!("lmzip: {}", text.trim_end()));
    status
}

/// What an error means for the run as a whole.
enum Failure {
    /// Report it and go on with the next input.
    Input,
    /// Stop everything: a signal came.
    Interrupted,
    /// Stop everything quietly: nobody reads the output any more.
    BrokenPipe,
}

fn classify(err: &anyhow::Error) -> Failure {
    for cause in err.chain() {
        if cause.downcast_ref::<signals::Interrupted>().is_some() {
            return Failure::Interrupted;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            return Failure::BrokenPipe;
        }
    }
    Failure::Input
}

/// The inputs a run works on: with `-r`, a directory stands for the files under it that the
/// job takes (compression: those without the suffix; the others: those with it).
fn expand(settings: &Settings, input: &Input) -> Result<Vec<Input>, anyhow::Error> {
    let Input::File(path) = input else {
        return Ok(vec![input.clone()]);
    };
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    if !settings.recursive || !is_dir {
        return Ok(vec![input.clone()]);
    }
    let compressing = matches!(settings.job, settings::Job::Compress { .. });
    let files = files::walk(path).map_err(|e| anyhow::anyhow!("cannot read the directory: {e}"))?;
    Ok(files
        .into_iter()
        .filter(|f| settings::has_suffix(f, &settings.suffix) != compressing)
        .map(Input::File)
        .collect())
}

/// Runs the job on every input and returns the exit status.
fn run_all(settings: &Settings, shared: &jobs::Shared) -> u8 {
    let mut status = 0;
    let mut inputs = Vec::new();
    for input in &settings.inputs {
        match expand(settings, input) {
            Ok(found) => inputs.extend(found),
            Err(err) => {
                say(format_args!("lmzip: {}: {err:#}", input.label()));
                status = 1;
            }
        }
    }
    for input in &inputs {
        let Err(err) = jobs::run_one(settings, shared, input) else {
            continue;
        };
        match classify(&err) {
            Failure::Input => {
                // `{:#}` joins the context chain with ": " on one line.
                say(format_args!("lmzip: {}: {err:#}", input.label()));
                status = 1;
            }
            // Quiet, as when the signal kills a process: the user asked for it.
            Failure::Interrupted => return signals::interrupted_status(),
            Failure::BrokenPipe => return BROKEN_PIPE_STATUS,
        }
    }
    if matches!(settings.job, settings::Job::List)
        && let Err(err) = jobs::finish_list(shared)
    {
        match classify(&err) {
            Failure::BrokenPipe => return BROKEN_PIPE_STATUS,
            _ => {
                say(format_args!("lmzip: {err:#}"));
                status = 1;
            }
        }
    }
    // A signal after the last check still means the run was stopped.
    if signals::check().is_err() {
        return signals::interrupted_status();
    }
    status
}
