//! The `bf` command: parse arguments, run one verb, turn its outcome into an exit code.
//! Everything a verb does lives in the `bf` library; `commands/` holds one file per verb.

/// A line on stderr that never panics: when the reader closed the pipe (`bf apply 2>&1 | head -3`),
/// bf is no longer heard and goes on. Output never stops a write path half way.
/// Every line made inert for a terminal ([`render::inert`]).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", crate::render::inert(&format!($($arg)*)));
    }};
}

/// [`say!`] without the line break.
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "{}", crate::render::inert(&format!($($arg)*)));
        let _ = stderr.flush();
    }};
}

/// Text on stdout that never panics, for what is shown before an outcome (a closed pipe is the
/// reader's choice; the outcome itself is written with `?` and a closed pipe ends bf with 0).
macro_rules! out_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), "{}", crate::render::inert(&format!($($arg)*)));
    }};
}

mod commands;
mod process_memory;
mod render;

/// Counts what bf holds, to stop it at the bound the operator's memory limit sets
/// ([`process_memory`]).
#[global_allocator]
static ALLOCATOR: process_memory::Counted = process_memory::Counted;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    process_memory::bound_by_operator_limit();
    let cli = commands::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            say!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli.command, cli.root.as_deref())) {
        Ok(code) => code,
        // `bf slices plan.toml | head` closes the pipe early; that is the reader's choice, not a failure.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            say!("error: {}", commands::explained(&format!("{error:#}")));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
