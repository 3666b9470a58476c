//! The `bf` command: parse arguments, run one verb, turn its outcome into an exit code.
//! Everything a verb does lives in the `bf` library; `commands/` holds one file per verb.

mod commands;
mod render;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli.command, cli.root.as_deref())) {
        Ok(code) => code,
        // `bf slices plan.toml | head` closes the pipe early; that is the reader's choice, not a failure.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", bf::delta::store::redact(&format!("{error:#}")));
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
