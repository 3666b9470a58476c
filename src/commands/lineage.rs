//! `bf lineage resend`: deliver the OpenLineage events an apply or a rollback could not.

use std::process::ExitCode;

use anyhow::Context;
use bf::lineage::{Transport, transport};

/// OpenLineage events (`OPENLINEAGE_URL` or `OPENLINEAGE_CONFIG` say where they go).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Send the events saved in the state dir when the endpoint could not take them, in the order
    /// they happened; each is removed once delivered. Exit 1 when some are left.
    Resend {
        #[command(flatten)]
        state: super::StateDir,
    },
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Resend { state } = args.command;
    let spool = bf::lineage::spool(state.path());
    let waiting = transport::saved(&spool).with_context(|| format!("reading {}", spool.display()))?;
    if waiting.is_empty() {
        say!("No OpenLineage events wait in {}.", spool.display());
        return Ok(ExitCode::SUCCESS);
    }
    let transport = Transport::from_env()?.with_context(|| {
        format!(
            "{} OpenLineage events wait in {}, and no endpoint is set: set OPENLINEAGE_URL (or OPENLINEAGE_CONFIG) \
             to say where they go",
            waiting.len(),
            spool.display()
        )
    })?;
    let resent = transport::resend(&transport, &spool).await?;
    say!("{} OpenLineage events sent to {}.", resent.sent, resent.to);
    match resent.problem {
        None => Ok(ExitCode::SUCCESS),
        Some(problem) => {
            say!("error: {problem}; {} events still wait in {}.", resent.left, spool.display());
            Ok(ExitCode::FAILURE)
        }
    }
}
