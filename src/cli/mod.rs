//! The command-line front end: `lmzip compress | decompress | test | info`.
//!
//! [`run`] parses the arguments ([`args`]), validates them into typed [`settings`] before any
//! file is touched, runs the job on each input ([`jobs`]) and maps the outcome to an exit
//! status:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | an input failed (the others were still processed); one line `lmzip: FILE: cause` each |
//! | 2 | usage error |
//! | 130 | stopped by a signal; no partial output is left |
//! | 141 | the reader of standard output went away (broken pipe); quiet, like a shell pipeline |

mod args;
mod files;
mod jobs;
mod progress;
mod settings;
mod signals;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use args::Cli;
pub use settings::{Settings, Verbosity};

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
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; errors to stderr with status 2.
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
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
    let shared = match jobs::Shared::prepare(&settings) {
        Ok(shared) => shared,
        Err((status, e)) => {
            say(format_args!("lmzip: {e:#}"));
            return ExitCode::from(status);
        }
    };
    if let Err(e) = signals::install()
        && settings.verbosity == Verbosity::Verbose
    {
        say(format_args!("lmzip: warning: cannot handle signals: {e}"));
    }
    ExitCode::from(run_all(&settings, &shared))
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

/// Runs the job on every input and returns the exit status.
fn run_all(settings: &Settings, shared: &jobs::Shared) -> u8 {
    let mut status = 0;
    for input in &settings.inputs {
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
            Failure::Interrupted => return signals::INTERRUPTED_STATUS,
            Failure::BrokenPipe => return BROKEN_PIPE_STATUS,
        }
    }
    // A signal after the last check still means the run was stopped.
    if signals::check().is_err() {
        return signals::INTERRUPTED_STATUS;
    }
    status
}
