//! `bf gaps`: which days of a table need a backfill, and a plan for exactly them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bf::delta::catalog;
use bf::delta::store::Stores;
use bf::gaps::{Gaps, Thinness};
use bf::plan_file::confine::Policy;
use bf::window::Window;
use chrono::NaiveDate;

use crate::render;

/// Find the days a table lacks: days without rows, days far below their usual level, and bf
/// backfills left unfinished.
///
/// Rows per day come from the Delta log (partition values, statistics) where they settle them, and
/// from the date column of the files where not. A day is thin when it holds fewer rows than
/// `--threshold` times the median of the same weekday over `--weeks` weeks either side.
/// `--write-plan FILE --like PLAN` writes a plan for exactly the days found, from a plan of the same
/// table.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A table (a path, a URI, or a catalog name), or a plan file (`.toml`): its table, date column
    /// and window.
    #[arg(value_name = "TABLE|PLAN")]
    what: String,
    /// The table's DATE column (with a table; a plan names its own).
    #[arg(long, value_name = "COLUMN")]
    date_column: Option<String>,
    /// The first day to look at (with a table; a plan's window starts it otherwise).
    #[arg(long, value_name = "DATE")]
    from: Option<NaiveDate>,
    /// The last day to look at.
    #[arg(long, value_name = "DATE")]
    to: Option<NaiveDate>,
    /// A day is thin under this share of its usual rows.
    #[arg(long, default_value_t = Thinness::default().threshold, value_parser = share)]
    threshold: f64,
    /// Its usual rows: the median of its weekday over this many weeks before and after it.
    #[arg(long, default_value_t = Thinness::default().weeks, value_parser = clap::value_parser!(u32).range(1..=52))]
    weeks: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also write the gaps as one self-contained HTML page to FILE: a calendar of rows per day,
    /// the missing, thin and unfinished days marked. It loads nothing and runs no script.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write a plan for the days found to FILE (never over an existing file), from `--like`.
    #[arg(long, value_name = "FILE", requires = "like")]
    write_plan: Option<PathBuf>,
    /// The plan of this table to copy the source, checks and settings from.
    #[arg(long, value_name = "PLAN", requires = "write_plan")]
    like: Option<PathBuf>,
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err(format!("`{text}` is not a share between 0 and 1, like 0.5")),
    }
}

/// The table, its date column and the days to look at, from a plan file or the arguments.
struct Looked {
    stores: Stores,
    url: url::Url,
    date_column: String,
    range: Window,
}

pub async fn run(args: Args, policy: &Policy) -> anyhow::Result<ExitCode> {
    let Some(looked) = what_to_look_at(&args, policy).await? else { return Ok(ExitCode::FAILURE) };
    let table = looked.stores.open(&looked.url, None).await?;
    let thinness = Thinness { threshold: args.threshold, weeks: args.weeks };
    let gaps =
        bf::gaps::find(&looked.stores, &looked.url, &table, &looked.date_column, looked.range, thinness)
            .await?;
    let written = match (&args.write_plan, &args.like) {
        (Some(out), Some(like)) => match write_plan(out, like, &looked, &gaps, policy).await? {
            Some(written) => Some(written),
            None => return Ok(ExitCode::FAILURE),
        },
        _ => None,
    };
    let rerun = match args.what.ends_with(".toml") {
        true => format!("bf gaps {}", args.what),
        false => format!(
            "bf gaps {} --date-column {} --from {} --to {}",
            args.what, looked.date_column, looked.range.start, looked.range.end
        ),
    };
    if let Some(path) = &args.html {
        super::write_report(path, &render::gaps::html(&gaps, &rerun))?;
    }
    if args.json {
        let mut report = serde_json::to_value(&gaps)?;
        report["days"] = serde_json::to_value(gaps.days())?;
        report["written_plan"] = serde_json::to_value(written.as_ref().map(|p| p.display().to_string()))?;
        crate::render::print(&render::json(&report))?;
    } else {
        let mut text = render::gaps::text(&gaps, &rerun);
        if let Some(out) = &written {
            text.push_str(&format!(
                "Wrote {}: {} of `day`, the rest as {} has it. Write its reason, then `bf validate {0}` and \
                 `bf plan {0}`.\n",
                out.display(),
                crate::render::count(gaps.days().len(), "slice"),
                args.like.as_deref().unwrap_or(Path::new("")).display()
            ));
        }
        crate::render::print(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn what_to_look_at(args: &Args, policy: &Policy) -> anyhow::Result<Option<Looked>> {
    if args.what.ends_with(".toml") {
        let path = Path::new(&args.what);
        let scope = policy.scope(path);
        let document = match bf::plan_file::load(path, &scope) {
            Ok(document) => document,
            Err(error) => {
                say!("{error}");
                return Ok(None);
            }
        };
        let spec = &document.plan;
        let located = catalog::locate(document.dir(), &spec.target.table).await?;
        if let Some(pinned) = &located.catalog {
            scope.check_resolved(&pinned.name, &located.url).map_err(|e| anyhow::anyhow!(e.0))?;
        }
        let window = spec.window();
        return Ok(Some(Looked {
            stores: document.stores(),
            url: located.url,
            date_column: args.date_column.clone().unwrap_or_else(|| spec.target.date_column.clone()),
            range: Window { start: args.from.unwrap_or(window.start), end: args.to.unwrap_or(window.end) },
        }));
    }
    let (Some(date_column), Some(from), Some(to)) = (&args.date_column, args.from, args.to) else {
        anyhow::bail!(
            "`bf gaps {}` needs the table's date column and the days to look at: --date-column COLUMN --from DATE \
             --to DATE (or name a plan file, which says all three)",
            args.what
        );
    };
    let located = catalog::locate(&std::env::current_dir()?, &args.what).await?;
    Ok(Some(Looked {
        stores: Stores::from_environment(),
        url: located.url,
        date_column: date_column.clone(),
        range: Window { start: from, end: to },
    }))
}

/// Writes the plan for the days found to `out`, like the plan at `like`; `None` when refused (the
/// reason said). The plan it writes is checked as `bf validate` would, its reason aside, before it
/// is written: a plan for another table, or one that would not validate, is not written.
async fn write_plan(
    out: &Path,
    like: &Path,
    looked: &Looked,
    gaps: &Gaps,
    policy: &Policy,
) -> anyhow::Result<Option<PathBuf>> {
    let document = match bf::plan_file::load(like, &policy.scope(like)) {
        Ok(document) => document,
        Err(error) => {
            say!("{error}");
            return Ok(None);
        }
    };
    let located = catalog::locate(document.dir(), &document.plan.target.table).await?;
    if located.url != looked.url {
        anyhow::bail!(
            "{} is a plan of {}, not of {}: a plan for these days is written like a plan of the same table",
            like.display(),
            bf::delta::store::display_url(&located.url),
            bf::delta::store::display_url(&looked.url)
        );
    }
    if document.plan.target.date_column != looked.date_column {
        anyhow::bail!(
            "{} slices `{}`, not `{}`, the column the gaps were found on",
            like.display(),
            document.plan.target.date_column,
            looked.date_column
        );
    }
    if out.exists() {
        anyhow::bail!("{} already exists: bf gaps writes a new file, never over one", out.display());
    }
    let text = bf::gaps::write::plan_like(like, &document.text, out, gaps)?;
    // Checked as the author will check it once the reason is written.
    let reasoned = text.replacen(bf::gaps::write::REASON, "\"checked\"", 1);
    if let Err(error) = bf::plan_file::parse_within(out, reasoned, Some(&policy.scope(out))) {
        say!("{error}");
        say!("the plan for these days would not validate (above), so it was not written");
        return Ok(None);
    }
    // As `bf init --out` does: a folder that does not exist is named, not made (a typo in it would
    // put the plan where nobody looks).
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).open(out).map_err(|e| {
            anyhow::anyhow!("cannot write {}: {}", out.display(), bf::words::io_problem(out, &e))
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(Some(out.to_owned()))
}
