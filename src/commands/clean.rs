//! `bf clean`: delete rehearsal tables no saved plan needs.

use std::io::Write;
use std::process::ExitCode;

use bf::clone::is_rehearsal;
use bf::plan::{Plan, remembered_rehearsals};
use bf::plan_file::Location;
use bf::table;

/// Delete rehearsal tables: those `bf plan` made from this folder that no saved plan needs (the
/// saved plan's own, until it is applied), or the ones named. Only bf rehearsals are deleted, and only the files under their own
/// folder: their references into the real table are never followed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rehearsal tables to delete; default: every rehearsal made from this folder but the saved plan's.
    #[arg(value_name = "TABLE")]
    tables: Vec<String>,
    #[command(flatten)]
    state: super::StateDir,
    /// Show what would be deleted, delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Whether every slice of the plan is committed: its rehearsal has served its purpose then.
async fn applied(plan: &Plan) -> bool {
    bf::apply::state(plan).await.is_ok_and(|state| state.all_committed())
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let candidates: Vec<url::Url> = if args.tables.is_empty() {
        let needed = match Plan::load(&args.state.saved_plan()) {
            Ok(plan) if !applied(&plan).await => Some(plan.rehearsal.uri),
            _ => None,
        };
        remembered_rehearsals(args.state.path())
            .into_iter()
            .filter(|u| Some(u.as_str()) != needed.as_deref())
            .collect()
    } else {
        args.tables.iter().map(|t| table::table_url(&Location::resolve(&cwd, t))).collect::<Result<_, _>>()?
    };
    let refused: Vec<String> = candidates
        .iter()
        .filter(|u| u.to_file_path().is_ok_and(|p| p.exists()) && !is_rehearsal(u))
        .map(table::display_url)
        .collect();
    if !refused.is_empty() {
        eprintln!("error: not a bf rehearsal, so not deleted (nothing was deleted): {}", refused.join(", "));
        return Ok(ExitCode::FAILURE);
    }
    let mut out = std::io::stdout().lock();
    let mut deleted = 0;
    for url in candidates.iter().filter(|u| is_rehearsal(u)) {
        let path = url.to_file_path().map_err(|()| anyhow::anyhow!("{url} is not a local folder"))?;
        if args.dry_run {
            writeln!(out, "would delete {}", path.display())?;
        } else {
            std::fs::remove_dir_all(&path)?;
            writeln!(out, "deleted {}", path.display())?;
        }
        deleted += 1;
    }
    if deleted == 0 {
        writeln!(out, "no rehearsal to delete")?;
    }
    Ok(ExitCode::SUCCESS)
}
