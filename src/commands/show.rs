//! `bf show`: print a saved plan again, for a terminal, a script or a pull request.

use std::path::PathBuf;
use std::process::ExitCode;

use bf::rehearse::plan::Plan;

use crate::render::plan::{Detail, Format, charts_wanted, render_with};

/// Show a saved plan (the last `bf plan`, or a file saved with `--out`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan saved with `bf plan --out FILE`; default: the last plan in the state dir.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// How much of the plan to show (text and markdown).
    #[arg(long, value_enum, default_value_t = Detail::Auto)]
    detail: Detail,
    /// No charts: the trend is drawn under the summary on a terminal (never into a pipe) and as
    /// Mermaid charts in `--format markdown`.
    #[arg(long)]
    no_chart: bool,
    /// Also write the plan as one self-contained HTML page to FILE: the header, a chart per
    /// metric over the window and its neighbours, the slices, the changes, checks, guards and
    /// the outside-the-window proof. It loads nothing and runs no script.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.file.unwrap_or_else(|| args.state.saved_plan());
    let mut plan = Plan::load(&path)?;
    if super::plan::Samples::from_env() == super::plan::Samples::None {
        plan.keep_counts_only();
    }
    let format = if args.json { Format::Json } else { args.format };
    if let Some(path) = &args.html {
        super::write_report(path, &crate::render::plan::html(&plan))?;
    }
    let chart = charts_wanted(format, args.no_chart);
    crate::render::print(&render_with(&plan, format, args.detail, chart))?;
    Ok(ExitCode::SUCCESS)
}
