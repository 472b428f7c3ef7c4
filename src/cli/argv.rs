//! The argument list before clap sees it: the program's name may choose the operation
//! (`unlmzip`, `lmzcat`), and `-N` level flags become `--level=N`, so that the last level given
//! wins and `-19` is read as level 19 (and refused with one clear message) rather than as
//! `-1 -9`.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use clap::CommandFactory;

use super::args::Cli;

/// The operation a program name implies, as the flags it stands for.
fn flags_of_name(program: &OsStr) -> &'static [&'static str] {
    let stem = Path::new(program)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.as_str() {
        "unlmzip" => &["-d"],
        "lmzcat" => &["-d", "-c"],
        _ => &[],
    }
}

/// The command line clap is to parse: name flags inserted after the program name, level flags
/// rewritten.
pub fn prepare(args: Vec<OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let Some(program) = args.next() else {
        return vec![OsString::from("lmzip")];
    };
    let mut out = vec![program.clone()];
    out.extend(flags_of_name(&program).iter().map(OsString::from));
    let takes_value = options_taking_values();
    let mut previous_takes_value = false;
    let mut after_double_dash = false;
    for arg in args {
        let text = arg.to_str();
        let is_level = !after_double_dash
            && !previous_takes_value
            && text.is_some_and(|t| {
                t.len() > 1 && t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit())
            });
        if text == Some("--") {
            after_double_dash = true;
        }
        previous_takes_value = !after_double_dash && text.is_some_and(|t| takes_value.contains(t));
        if is_level {
            let n = &text.unwrap_or_default()[1..];
            out.push(OsString::from(format!("--level={n}")));
        } else {
            out.push(arg);
        }
    }
    out
}

/// Every `--long` and `-s` spelling of an option that takes a separate value, in any command:
/// a `-5` after one of them is that option's value, not a level.
fn options_taking_values() -> HashSet<String> {
    let mut names = HashSet::new();
    let command = Cli::command();
    let commands = std::iter::once(&command).chain(command.get_subcommands());
    for c in commands {
        for arg in c.get_arguments() {
            if arg.is_positional() || !arg.get_action().takes_values() {
                continue;
            }
            if let Some(long) = arg.get_long() {
                names.insert(format!("--{long}"));
            }
            if let Some(short) = arg.get_short() {
                names.insert(format!("-{short}"));
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(args: &[&str]) -> Vec<String> {
        prepare(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn names_choose_the_operation_and_levels_become_options() {
        assert_eq!(
            prepared(&["/usr/bin/unlmzip", "a"]),
            ["/usr/bin/unlmzip", "-d", "a"]
        );
        assert_eq!(prepared(&["lmzcat", "a"]), ["lmzcat", "-d", "-c", "a"]);
        assert_eq!(
            prepared(&["lmzip", "-9", "-19", "a"]),
            ["lmzip", "--level=9", "--level=19", "a"]
        );
        // The value of an option, and anything after --, stay as they are.
        assert_eq!(
            prepared(&["lmzip", "-o", "-5", "--seed", "-3", "--", "-2"]),
            ["lmzip", "-o", "-5", "--seed", "-3", "--", "-2"]
        );
        assert_eq!(prepared(&["lmzip", "-", "-c"]), ["lmzip", "-", "-c"]);
    }
}
