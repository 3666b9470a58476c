//! `bf init`: a first plan for a table, from its schema.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bf::delta::store::{Location, Stores};
use bf::plan_file::scaffold::Scaffold;

/// Write a first plan for a table, from its schema.
///
/// Every column is in the query; the date column and the key are guessed, and marked as guesses;
/// the reason, the window and the corrected rows' path are left as `<…>` placeholders that
/// `bf validate` points at.
///
/// `bf init --table warehouse/payments > plans/payments.toml`: the table's path is written relative
/// to the plan's folder (the file stdout or `--out` names, or `--plan-dir`), as plan paths are.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path, a URI, or a catalog name (`uc://catalog.schema.table`,
    /// `glue://database.table`).
    #[arg(long, value_name = "TABLE")]
    table: String,
    /// The DATE column slices are cut by (default: guessed, preferring the one the table is
    /// partitioned by).
    #[arg(long, value_name = "COLUMN")]
    date_column: Option<String>,
    /// The columns that identify a row (comma-separated; default: guessed from their names).
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',')]
    key: Vec<String>,
    /// Write the plan to FILE (refused if it exists) instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The folder the plan will be saved in, when stdout is a pipe (`bf init … | tee plans/x.toml`):
    /// the table's path is written relative to it. Default: the folder of `--out`, or of the file
    /// stdout is redirected to, or the current folder.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    plan_dir: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir()?;
    let located = bf::delta::catalog::locate(&here, &args.table).await?;
    let table = Stores::from_environment().open(&located.url, None).await?;
    let schema = bf::delta::table::arrow_schema(&table)?;
    let partition_columns = bf::delta::table::partition_columns(&table);
    let plan_dir = match (&args.out, &args.plan_dir, stdout_file()) {
        (Some(out), _, _) => out.parent().map(|p| here.join(p)).unwrap_or_else(|| here.clone()),
        (None, Some(dir), _) => here.join(dir),
        (None, None, Some(file)) => file.parent().map(Path::to_path_buf).unwrap_or_else(|| here.clone()),
        (None, None, None) => {
            // A pipe or a terminal: where the plan will live is not known, and a plan's paths are
            // relative to its own folder.
            if !std::io::stdout().is_terminal() && bf::delta::store::uri(&args.table).is_none() {
                say!(
                    "note: stdout is not a file, so the table's path is written relative to this folder; if the \
                     plan is saved in another, pass `--plan-dir DIR` (or `--out FILE`) to write it from there"
                );
            }
            here.clone()
        }
    };
    let written = Location::written_from(&plan_dir, &here, &args.table);
    let notes = bf::delta::compat::notes(&table).await;
    let spark = bf::delta::table::written_by_spark(&table).await;
    for note in &notes {
        say!("Note: {note}");
    }
    let text = Scaffold {
        table: &written,
        schema: &schema,
        partition_columns: &partition_columns,
        date_column: args.date_column.as_deref(),
        key: &args.key,
        notes: &notes,
        spark: spark.as_deref(),
    }
    .write()?;
    match &args.out {
        Some(out) => {
            let mut file =
                std::fs::OpenOptions::new().write(true).create_new(true).open(out).map_err(|e| {
                    anyhow::anyhow!("cannot write {}: {}", out.display(), bf::words::io_problem(out, &e))
                })?;
            file.write_all(text.as_bytes())?;
            say!(
                "Wrote {}: write its <…> placeholders, then `bf validate {}`.",
                out.display(),
                out.display()
            );
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The file stdout is redirected to (`> plans/x.toml`), where the system says.
fn stdout_file() -> Option<PathBuf> {
    let target = std::fs::read_link("/proc/self/fd/1").ok()?;
    target.is_file().then_some(target)
}
