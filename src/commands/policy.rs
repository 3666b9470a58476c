//! `bf policy test`: a policy folder's fixtures, run as `opa test` runs a policy's tests.

use std::path::PathBuf;
use std::process::ExitCode;

use bf::rehearse::policy::Policies;

use crate::render;

/// Rego policies on saved plans (`bf plan --policy DIR`).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run a policy folder's fixtures: each `fixtures/<name>.json` (a saved plan) decided by the
    /// folder's policies and compared with `fixtures/<name>.expected.json` (`{"deny": [...],
    /// "warn": [...]}`). Exit 1 when a decision differs.
    Test {
        /// The folder holding the `*.rego` policies and their `fixtures/`.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Test { dir } = args.command;
    let outcomes = Policies::load(&dir)?.test()?;
    let text = render::policy::outcomes(&dir, &outcomes);
    crate::render::print(&text)?;
    let passed = !outcomes.is_empty() && outcomes.iter().all(|o| o.passed());
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
