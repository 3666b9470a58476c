//! One file per verb: its arguments, and the glue from them to the library and back to the terminal.
//! Results go to stdout, problems to stderr; a verb returns the exit code it earned.

pub mod apply;
pub mod clean;
pub mod demo;
pub mod history;
pub mod plan;
pub mod rollback;
pub mod schema;
pub mod show;
pub mod slices;
pub mod status;
pub mod validate;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::Command;

pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Validate(args) => validate::run(args),
        Command::Slices(args) => slices::run(args),
        Command::Plan(args) => plan::run(args).await,
        Command::Show(args) => show::run(args),
        Command::Apply(args) => apply::run(args).await,
        Command::Rollback(args) => rollback::run(args).await,
        Command::History(args) => history::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Clean(args) => clean::run(args).await,
        Command::Schema(args) => schema::run(args),
        Command::Demo(args) => demo::run(args).await,
    }
}

/// Asks on the terminal, like Terraform: only "yes" goes ahead. Without a terminal to ask on, it
/// refuses rather than hang or guess.
pub fn confirm(question: &str, verb: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "refusing to {verb} without confirmation: stdin is not a terminal (pass --auto-approve)"
        );
    }
    eprint!("{question} Only 'yes' will be accepted: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// Where bf keeps what it remembers between commands (the saved plan, the rehearsals it made):
/// one option, one place that knows the layout.
#[derive(Debug, Clone, clap::Args)]
pub struct StateDir {
    /// Where bf keeps the saved plan and the list of rehearsals it made.
    #[arg(long = "state-dir", value_name = "DIR", env = "BF_STATE_DIR", default_value = ".bf")]
    pub dir: PathBuf,
}

impl StateDir {
    /// The plan the last `bf plan` saved.
    pub fn saved_plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}
