//! `bf apply`: apply a saved plan to the real table, one recorded commit per slice.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use bf::apply::{Apply, ApplyProgress, SliceOutcome};
use bf::plan::Plan;
use bf::rehearsal::Quiet;
use indicatif::{ProgressBar, ProgressStyle};

use crate::render;
use crate::render::plan::{Format, render, summary};

/// Apply a saved plan: each slice one atomic commit, recorded in the table, resumable.
///
/// `bf apply` applies the plan `bf plan` saved in the state dir; `bf apply FILE.json` one saved with
/// `--out`; `bf apply PLAN.toml` plans first, shows the plan and asks before applying. A stale plan
/// (plan file edited, table moved, input changed, failed check) is refused. Each slice publishes the
/// files its rehearsal wrote, exactly what the plan showed; `--recompute` runs its query again
/// instead. Run it again after a crash: slices already committed are skipped.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A saved plan (`.json`) or a plan file (`.toml`) to plan and apply; default: the saved plan.
    #[arg(value_name = "PLAN")]
    plan: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Apply without asking.
    #[arg(long)]
    auto_approve: bool,
    /// `all`: apply every slice again under a new backfill id, even those already committed.
    #[arg(long, value_name = "WHAT", value_parser = ["all"])]
    rerun: Option<String>,
    /// Run each slice's query again and write its rows, instead of publishing the files the
    /// rehearsal wrote (for a rehearsal cleaned or vacuumed since `bf plan`; what lands may then
    /// differ from what the plan showed).
    #[arg(long)]
    recompute: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// Print only the outcome.
    #[arg(long, short)]
    quiet: bool,
}

/// One line per slice on stderr ("ok 2026-09-15: 4 rows for the source's 4, 0 missing"), under a
/// progress bar when stderr is a terminal.
struct Lines {
    quiet: bool,
    bar: Option<ProgressBar>,
}

impl Lines {
    fn new(quiet: bool, slices: usize) -> Lines {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(slices as u64);
            bar.set_style(
                ProgressStyle::with_template("applying slice {pos}/{len} {wide_bar} {elapsed}")
                    .expect("a valid template"),
            );
            bar
        });
        Lines { quiet, bar }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl ApplyProgress for Lines {
    fn slice_done(&self, outcome: &SliceOutcome) {
        if self.quiet {
            return;
        }
        let line = render::apply::slice_line(outcome);
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = match &args.plan {
        Some(path) if path.extension().is_some_and(|e| e == "toml") => {
            let Some((plan, _)) = super::plan::rehearse_and_save(path, &args.state, None, &Quiet).await?
            else {
                return Ok(ExitCode::FAILURE);
            };
            // The plan to decide on; stdout is the outcome's (with `--json`, one JSON document).
            let shown = render(&plan, Format::Text);
            if args.json || args.quiet {
                eprint!("{shown}");
            } else {
                print!("{shown}");
            }
            plan
        }
        Some(path) => Plan::load(path)?,
        None => Plan::load(&args.state.saved_plan())?,
    };
    if !plan.appliable() {
        eprintln!("error: this plan cannot be applied:");
        for problem in &plan.problems {
            eprintln!("  - {problem}");
        }
        return Ok(ExitCode::FAILURE);
    }
    for warning in &plan.warnings {
        eprintln!("Warning: {warning}");
    }
    if !args.auto_approve {
        eprintln!("{}", summary(&plan));
        if !super::confirm("Do you want to apply this backfill?", "apply")? {
            eprintln!("Apply cancelled; nothing was written.");
            return Ok(ExitCode::FAILURE);
        }
    }
    let lines = Lines::new(args.quiet || args.json, plan.slices.len());
    let outcome = Apply::new(&plan)
        .with_rerun(args.rerun.is_some())
        .with_recompute(args.recompute)
        .execute(&lines)
        .await;
    lines.finish();
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {}", bf::store::redact(&error.to_string()));
            use bf::apply::ApplyError;
            match error {
                ApplyError::Verify { .. } => eprintln!(
                    "That slice's commit is in the table: `bf rollback` puts the table back to the pre-version."
                ),
                // Refused before writing: the message says what to do instead of a resume.
                ApplyError::Stale(_)
                | ApplyError::Unsupported(_)
                | ApplyError::Ledger(_)
                | ApplyError::UnsafeCommits(_) => {}
                _ => eprintln!(
                    "Slices committed before this stay recorded in the table; run `bf apply` again to resume."
                ),
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let text = if args.json { render::json(&report) } else { render::apply::report(&report) };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
