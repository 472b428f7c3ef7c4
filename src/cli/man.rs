//! `lmzip man`: the manual page. clap_mangen renders the name, synopsis, description and
//! options; the commands, exit status and environment are written here, because its own
//! subcommand list points at `lmzip-compress(1)` pages that do not exist (every command's
//! options are in `lmzip COMMAND --help`).

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::kernels::SIMD_ENV_VAR;
use crate::pool::MIN_PART_WORK_ENV_VAR;

/// The exit statuses, as the table in [`super`] lists them.
const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "An input failed (the others were still processed); one line `lmzip: FILE: cause` each.",
    ),
    (
        "2",
        "Usage error: bad options or values, checked before any file is touched.",
    ),
    (
        "129, 130, 143",
        "Stopped by SIGHUP, SIGINT or SIGTERM (128 + the signal); no partial output is left.",
    ),
    (
        "141",
        "The reader of standard output went away (broken pipe).",
    ),
];

/// The environment variables lmzip reads.
fn environment() -> Vec<(&'static str, String)> {
    vec![
        (
            SIMD_ENV_VAR,
            "portable, avx2 or avx512 forces the kernels' SIMD path (auto, the default, takes \
             AVX2 where the CPU has it). Every path writes and reads the same bytes; a path the CPU \
             lacks, or another value, is a usage error."
                .to_string(),
        ),
        (
            MIN_PART_WORK_ENV_VAR,
            "The least work (multiply-adds) a thread's part of a product gets with -T; for \
             measurements and tests. It changes speed only, never the output."
                .to_string(),
        ),
    ]
}

/// Escapes text for roff: backslashes and hyphens, and a leading `.` or `'` that would start a
/// request.
fn escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// Renders the page of `command` (the top-level clap command).
pub fn render(command: clap::Command, w: &mut dyn Write) -> io::Result<()> {
    let page = clap_mangen::Man::new(command.clone());
    page.render_title(w)?;
    page.render_name_section(w)?;
    page.render_synopsis_section(w)?;
    page.render_description_section(w)?;
    page.render_options_section(w)?;
    let mut roff = String::new();
    roff += ".SH COMMANDS\n";
    roff += "With no command, lmzip compresses (\\-d, \\-t and \\-l choose the other operations). \
             Each command's options: \\fBlmzip\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR.\n";
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let aliases: Vec<&str> = sub.get_visible_aliases().collect();
        let _ = write!(roff, ".TP\n\\fBlmzip {}\\fR", escape(sub.get_name()));
        if !aliases.is_empty() {
            let _ = write!(roff, " (or \\fB{}\\fR)", escape(&aliases.join(", ")));
        }
        roff += "\n";
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        roff += &escape(&about);
        roff += "\n";
    }
    if let Some(extra) = command.get_after_help() {
        roff += ".SH NOTES\n";
        roff += &escape(&extra.to_string());
        roff += "\n";
    }
    roff += ".SH \"EXIT STATUS\"\n";
    for (status, meaning) in EXIT_STATUS {
        let _ = write!(roff, ".TP\n{}\n{}\n", escape(status), escape(meaning));
    }
    roff += ".SH ENVIRONMENT\n";
    for (name, meaning) in environment() {
        let _ = write!(
            roff,
            ".TP\n\\fB{}\\fR\n{}\n",
            escape(name),
            escape(&meaning)
        );
    }
    roff += ".SH \"SEE ALSO\"\n\\fBzstd\\fR(1), \\fBxz\\fR(1), \\fBgzip\\fR(1); docs/recipes.md and \
             docs/format.md in the source.\n";
    w.write_all(roff.as_bytes())?;
    page.render_version_section(w)
}
