//! `bf clean`: delete rehearsal tables no saved plan needs.

use std::io::Write;
use std::process::ExitCode;

use bf::delta::store::{self, Location, Stores};
use bf::rehearse::clone::removable;
use bf::rehearse::own_files::remembered_rehearsals;
use bf::rehearse::plan::Plan;

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

/// Whether every slice of the plan and of the plans downstream of it is committed: its rehearsals
/// have served their purpose then (a downstream's apply reads its upstream's rehearsal).
async fn applied(plan: &Plan) -> bool {
    for planned in plan.chain() {
        if !bf::apply::state(planned).await.is_ok_and(|state| state.all_committed()) {
            return false;
        }
    }
    true
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let saved = Plan::load(&args.state.saved_plan()).ok();
    // The saved plan's `[storage]` settings are for its own rehearsal; the environment reaches the rest.
    let mut planned = Vec::new();
    for plan in saved.iter().flat_map(Plan::chain) {
        planned.push((plan.rehearsal.uri.clone(), plan.stores()?));
    }
    let environment = Stores::from_environment();
    let stores_for = |url: &url::Url| {
        planned.iter().find(|(rehearsal, _)| rehearsal == url.as_str()).map_or(&environment, |(_, s)| s)
    };
    let needed: Vec<String> = match &saved {
        Some(plan) if args.tables.is_empty() && !applied(plan).await => {
            plan.chain().iter().map(|p| p.rehearsal.uri.clone()).collect()
        }
        _ => Vec::new(),
    };
    let candidates: Vec<url::Url> = if args.tables.is_empty() {
        remembered_rehearsals(args.state.path())
            .into_iter()
            .filter(|u| !needed.iter().any(|n| n == u.as_str()))
            .collect()
    } else {
        args.tables.iter().map(|t| store::table_url(&Location::resolve(&cwd, t))).collect::<Result<_, _>>()?
    };
    let mut rehearsals = Vec::new();
    let mut refused = Vec::new();
    for url in candidates {
        match removable(stores_for(&url), &url).await {
            Ok(true) => rehearsals.push(url),
            Ok(false) => {}
            Err(why) => refused.push(format!("  - {why}")),
        }
    }
    if !refused.is_empty() {
        say!("error: not a bf rehearsal, so not deleted (nothing was deleted):\n{}", refused.join("\n"));
        return Ok(ExitCode::FAILURE);
    }
    let mut out = std::io::stdout().lock();
    for url in &rehearsals {
        let name = store::display_url(url);
        if args.dry_run {
            writeln!(out, "would delete {name}")?;
        } else {
            stores_for(url).remove_folder(url).await?;
            writeln!(out, "deleted {name}")?;
        }
    }
    if rehearsals.is_empty() {
        writeln!(out, "no rehearsal to delete")?;
    }
    for kept in &needed {
        let name = url::Url::parse(kept).map_or_else(|_| kept.clone(), |u| store::display_url(&u));
        writeln!(
            out,
            "kept {name}: the saved plan ({}) is not applied yet and publishes its files",
            args.state.saved_plan().display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
