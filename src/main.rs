//! The `lmzip` binary: all the work is in the library's [`lmzip::cli`].

fn main() -> std::process::ExitCode {
    lmzip::cli::run(std::env::args_os())
}
