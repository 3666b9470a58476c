//! The command line: clap types only. Each verb's arguments live beside its code in `commands/`.

use clap::{Parser, Subcommand};

use crate::commands::{
    apply, clean, cluster, demo, export, freeze, gaps, history, init, lineage, plan, policy, rollback,
    schema, show, slices, status, unfreeze, validate,
};

/// Backfills of Delta Lake tables as a reviewed, rehearsed and reversible change.
///
/// A plan file names the window, the table, the reason and where the corrected rows come from.
/// bf checks it offline, shows the slices it makes, rehearses it on a shallow clone, applies it one
/// atomic commit per slice and keeps the version to roll back to.
#[derive(Debug, Parser)]
#[command(name = "bf", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// The folder every local path a plan names must resolve inside, symlinks followed (default:
    /// the git work tree holding the plan file, else the folder above the plan's).
    #[arg(long, global = true, value_name = "DIR", env = "BF_ROOT")]
    pub root: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::Args),
    Validate(validate::Args),
    Slices(slices::Args),
    Plan(plan::Args),
    Show(show::Args),
    Apply(apply::Args),
    Rollback(rollback::Args),
    History(history::Args),
    Gaps(gaps::Args),
    Status(status::Args),
    Freeze(freeze::Args),
    Unfreeze(unfreeze::Args),
    Policy(policy::Args),
    Clean(clean::Args),
    Export(export::Args),
    Lineage(lineage::Args),
    Schema(schema::Args),
    Demo(demo::Args),
    Cluster(cluster::Args),
}
