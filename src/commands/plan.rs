//! `bf plan`: rehearse every slice on a shallow clone, show before vs after, save the plan.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use bf::plan_file;
use bf::rehearsal::{self, Progress};
use indicatif::{ProgressBar, ProgressStyle};

use crate::render::plan::{Format, render};

/// Rehearse a plan on a shallow clone of the table and show what it would change.
///
/// Nothing in the target table changes: bf clones it (no data copied but the window's files of an
/// unpartitioned table), writes every slice into the clone exactly as `bf apply` would, and compares
/// rows, metrics, keys, checks and guards before vs after. The plan is saved for `bf show` and
/// `bf apply`.
///
/// Exit status: 0 the plan can be applied, 1 an error or a failed check or guard, and with
/// `--detailed-exitcode` 2 when the plan can be applied and changes data.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Save the plan to this file instead of `<state-dir>/plan.json`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Exit 2 (instead of 0) when the plan would change data.
    #[arg(long)]
    detailed_exitcode: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let document = match plan_file::load(&args.plan) {
        Ok(document) => document,
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let progress = Bar::new(args.quiet);
    let plan = match rehearsal::rehearse(&document, &progress).await {
        Ok(plan) => plan,
        Err(error) => {
            progress.clear();
            eprintln!("error: {error}");
            eprintln!("nothing was written to the target, and no plan was saved");
            return Ok(ExitCode::FAILURE);
        }
    };
    progress.clear();
    let saved = args.out.clone().unwrap_or_else(|| args.state.saved_plan());
    plan.save(&saved)?;
    bf::plan::remember_rehearsal(args.state.path(), &plan.rehearsal.uri)?;
    let format = if args.json { Format::Json } else { args.format };
    let mut out = std::io::stdout().lock();
    out.write_all(render(&plan, format).as_bytes())?;
    if format == Format::Text {
        if plan.appliable() {
            writeln!(
                out,
                "Saved the plan to {} (id {}); apply it with `bf apply`.",
                saved.display(),
                plan.id
            )?;
        } else {
            writeln!(out, "Saved the plan to {} for `bf show`; it cannot be applied.", saved.display())?;
        }
    }
    Ok(match (plan.appliable(), args.detailed_exitcode && plan.changes_data()) {
        (false, _) => ExitCode::FAILURE,
        (true, true) => ExitCode::from(2),
        (true, false) => ExitCode::SUCCESS,
    })
}

/// A progress bar on a terminal's stderr; nothing when piped or quiet.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new(quiet: bool) -> Bar {
        Bar((!quiet && std::io::stderr().is_terminal()).then(ProgressBar::new_spinner))
    }

    fn clear(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn slices(&self, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} rehearsing slice {pos}/{len} {wide_bar} {msg}")
                    .expect("a valid template"),
            );
        }
    }

    fn slice_written(&self, _index: usize, first: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(first.to_owned());
            bar.inc(1);
        }
    }

    fn step(&self, what: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(what.to_owned());
            bar.tick();
        }
    }
}
