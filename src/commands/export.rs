//! `bf export`: hand a saved plan to the orchestrator a team already runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bf::rehearse::plan::Plan;

use crate::render::airflow::{Retries, dag};

/// Write a saved plan as an orchestrator's job: `bf export airflow > dags/backfill_march.py`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    to: To,
}

#[derive(Debug, clap::Subcommand)]
enum To {
    /// An Airflow 3 DAG: one task per slice (`bf apply --slice N`) in the plan's order, at most
    /// `slicing.parallel` at once, each retried; then `finish` (`bf apply --finish`).
    Airflow(Airflow),
}

#[derive(Debug, clap::Args)]
struct Airflow {
    /// A plan saved with `bf plan --out FILE`, or the plan file whose saved plan is in the state
    /// dir; default: the saved plan in the state dir. The DAG names the saved plan by its absolute
    /// path: the workers must see it there.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// How many times a failed slice task is retried.
    #[arg(long, value_name = "N", default_value_t = 2)]
    retries: u32,
    /// Seconds between a failed slice task and its retry.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    retry_delay: u32,
}

pub fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    let To::Airflow(airflow) = args.to;
    let path = match airflow.file {
        // A plan file names the plan `bf plan` saved from it: the reviewed artifact, not a new plan.
        Some(file) if file.extension().is_some_and(|e| e == "toml") => {
            let saved = airflow.state.saved_plan();
            let planned = Plan::load(&saved)
                .ok()
                .filter(|p| std::fs::canonicalize(&file).is_ok_and(|f| Path::new(&p.plan_file.path) == f));
            if planned.is_none() {
                anyhow::bail!(
                    "the saved plan in {} is not one of {}: run `bf plan {}` and review it first; the DAG applies \
                     the saved plan",
                    saved.display(),
                    file.display(),
                    file.display()
                );
            }
            saved
        }
        Some(file) => file,
        None => airflow.state.saved_plan(),
    };
    // The DAG applies the saved plan as it was reviewed (bf::rehearse::seal), or not at all.
    let plan = bf::rehearse::seal::load_reviewed(&path, policy)?;
    if !plan.appliable() {
        anyhow::bail!(
            "the saved plan {} cannot be applied (`bf show` says why): no DAG for it",
            path.display()
        );
    }
    if !plan.downstream.is_empty() {
        anyhow::bail!(
            "the saved plan {} has downstream plans, which `bf apply` applies as one chain: `bf export airflow` \
             exports a plan without `[[downstream]]`",
            path.display()
        );
    }
    let saved = std::fs::canonicalize(&path).with_context(|| format!("finding {}", path.display()))?;
    let retries = Retries { count: airflow.retries, delay_seconds: airflow.retry_delay };
    let dag = dag(&plan, &saved.display().to_string(), &retries).map_err(anyhow::Error::msg)?;
    std::io::stdout().lock().write_all(dag.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
