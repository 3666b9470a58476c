//! `bf rollback`: undo a backfill, from the saved plan or from the table's history alone.

use std::process::ExitCode;

use anyhow::Context;
use bf::apply::cascade;
use bf::delta::catalog;
use bf::delta::ledger;
use bf::delta::store::{self, Stores};
use bf::lineage::rollback::RollbackRun;
use bf::notify::Notice;
use bf::rehearse::plan::Plan;
use bf::rollback;

use crate::render;

/// Undo a backfill: RESTORE the version recorded before it, or put back only its window.
///
/// Without options, undoes the last backfill applied from the saved plan in this folder. With
/// `--table` and `--backfill`, any backfill found in the table's history, from anywhere. A full
/// rollback is refused when other writers committed since (use `--window-only`) or when VACUUM
/// removed files the old version needs.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table (a path, a URI, or a catalog name: `uc://catalog.schema.table`,
    /// `glue://database.table`); default: the saved plan's target.
    #[arg(long, value_name = "TABLE")]
    table: Option<String>,
    /// The backfill id to undo (see `bf history`); default: the saved plan's last apply.
    #[arg(long, value_name = "ID")]
    backfill: Option<String>,
    /// RESTORE this version instead of a backfill's pre-version (needs `--table` or a saved plan).
    #[arg(long, value_name = "N", conflicts_with_all = ["backfill", "window_only"])]
    to_version: Option<u64>,
    /// Put back only the window's rows (one commit per slice), keeping other writers' commits.
    #[arg(long)]
    window_only: bool,
    /// With `--window-only`: roll back even where other writers wrote inside the window since.
    #[arg(long, requires = "window_only")]
    force: bool,
    /// Also roll back the backfills of the tables built from this one (a chain's downstream plans),
    /// downstream first; without it, a rollback of a table whose downstream backfills are still in
    /// place is refused.
    #[arg(long, conflicts_with = "to_version")]
    cascade: bool,
    /// Roll back without asking.
    #[arg(long)]
    auto_approve: bool,
    #[command(flatten)]
    state: super::StateDir,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    let saved = || Plan::load(&args.state.saved_plan());
    let (url, catalog) = table_to_roll_back(&args).await?;
    let name = store::display_url(&url);
    // The saved plan's `[storage]` settings are for its own target; any other table is reached from
    // the environment alone.
    let stores = match saved() {
        Ok(plan) if plan.target.uri == url.as_str() => plan.stores()?,
        _ => Stores::from_environment(),
    };
    if let Some(version) = args.to_version {
        say_part!("{}", render::rollback::restore_intent(&name, version));
        if !args.auto_approve && !super::confirm("Do you want to roll back?", "roll back")? {
            say!("Rollback cancelled; nothing was written.");
            return Ok(ExitCode::FAILURE);
        }
        let (lineage, emitter) = super::lineage(&args.state);
        let run = RollbackRun::to_version(&url, version);
        emitter.emit(run.start(&lineage));
        let restored = rollback::restore_version(&stores, &url, version).await;
        emitter.emit(match &restored {
            Ok(report) => run.complete(&lineage, report),
            Err(error) => run.fail(&lineage, &store::redact(&error.to_string())),
        });
        super::delivered(emitter).await;
        return finish(&restored?, args.json);
    }
    let backfill = match (&args.backfill, saved().ok().filter(|p| p.target.uri == url.as_str())) {
        (Some(id), _) => id.clone(),
        (None, Some(plan)) => {
            let target = stores.open(&url, None).await?;
            let entries = ledger::entries_since_plan(&target, plan.target.pre_version).await?;
            match ledger::backfill_ids(&entries, &plan.id).pop() {
                // A saved plan is a file a checkout can hold: it chooses only a backfill applied
                // from this state dir, as the table's own commits prove.
                Some(id) if !applied_here(&args.state, &entries, &id) => {
                    say!(
                        "error: {}",
                        render::rollback::not_applied_here(&args.state.saved_plan(), &name, &id)
                    );
                    return Ok(ExitCode::FAILURE);
                }
                Some(id) => id,
                None => {
                    return choose(
                        &stores,
                        &url,
                        &format!("the saved plan {} was never applied to {name}", plan.id),
                    )
                    .await;
                }
            }
        }
        // No saved plan for this table: its history says which backfills there are to choose from.
        (None, None) => return choose(&stores, &url, &format!("no saved plan here applies to {name}")).await,
    };
    let mut plan = rollback::prepare(&stores, &url, &backfill).await?;
    plan.catalog = catalog;
    let saved = saved().ok();
    // Each table of the saved chain is reached with its own plan's `[storage]`; others from the
    // environment.
    let chain_stores: Vec<(String, Stores)> = match &saved {
        Some(root) => {
            root.chain().iter().filter_map(|p| Some((p.target.uri.clone(), p.stores().ok()?))).collect()
        }
        None => Vec::new(),
    };
    let stores_for = |table: &url::Url| {
        chain_stores
            .iter()
            .find(|(uri, _)| uri == table.as_str())
            .map_or_else(Stores::from_environment, |(_, stores)| stores.clone())
    };
    let mut undo = cascade::with_downstream(plan, &stores_for).await?;
    name_downstream(&mut undo, saved.as_ref());
    if undo.len() > 1 && !args.cascade {
        say!("error: {}", cascade::refusal(&undo));
        return Ok(ExitCode::FAILURE);
    }
    for step in &undo {
        say_part!("{}", render::rollback::intent(step, args.window_only));
    }
    let nothing_to_write = !args.window_only && undo.iter().all(|p| p.finished());
    if !args.auto_approve && !nothing_to_write && !super::confirm("Do you want to roll back?", "roll back")? {
        say!("Rollback cancelled; nothing was written.");
        return Ok(ExitCode::FAILURE);
    }
    let mut reports = roll_back(&undo, &args, nothing_to_write).await?;
    // The notice reads upstream first, as the chain was applied.
    reports.reverse();
    let notices = match saved.as_ref().and_then(|root| Some((root, root.notify()?))) {
        // A rollback that had nothing left to write tells nobody again.
        Some((root, spec)) if reports.iter().any(|r| belongs(root, r) && !r.wrote.is_empty()) => {
            let notice = Notice::of_rollback(root, &spec.owners, &reports);
            // The saved plan's text is the one the backfill was applied from, as the table's own
            // ledger records it: a saved plan planted or edited since says nothing of where to send.
            // Rolling back only tables downstream of it, its text is checked against its file.
            let text = bf::rehearse::plan::sha256_hex(root.plan_file.text.as_bytes());
            let applied_from = match undo.iter().find(|step| step.backfill.backfill.plan_id == root.id) {
                Some(step) => step.backfill.backfill.plan_sha256 == text,
                None => text == root.plan_file.sha256 && root.plan_file.unchanged_on_disk(),
            };
            super::tell(&spec, root, policy, &notice, applied_from).await
        }
        _ => Vec::new(),
    };
    let mut reports = reports.into_iter();
    let first = reports.next().expect("the rollback's own table");
    if args.json {
        #[derive(serde::Serialize)]
        struct RolledBack {
            #[serde(flatten)]
            first: rollback::RollbackReport,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            downstream: Vec<rollback::RollbackReport>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            notices: Vec<String>,
        }
        let text = render::json(&RolledBack { first, downstream: reports.collect(), notices });
        crate::render::print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = render::rollback::report(&first);
    for report in reports {
        text.push('\n');
        text.push_str(&render::rollback::report(&report));
    }
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Whether a slice commit of `backfill_id` among `entries` carries this state dir's receipt.
fn applied_here(state: &super::StateDir, entries: &[ledger::Entry], backfill_id: &str) -> bool {
    bf::apply::receipt::StateKey::existing(state.path()).is_some_and(|key| key.applied(entries, backfill_id))
}

/// No backfill named: lists the table's backfills, newest first, to name one with `--backfill`.
async fn choose(stores: &Stores, url: &url::Url, why: &str) -> anyhow::Result<ExitCode> {
    let backfills = rollback::backfills(stores, url).await?;
    say!("{}", render::rollback::choose(&store::display_url(url), why, &backfills));
    Ok(ExitCode::FAILURE)
}

/// Rolls back each table of `undo` in order, each a run of its table's `rollback` job for lineage
/// (none when nothing is left to write: an earlier rollback told it).
async fn roll_back(
    undo: &[rollback::RollbackPlan],
    args: &Args,
    nothing_to_write: bool,
) -> Result<Vec<rollback::RollbackReport>, rollback::RollbackError> {
    let (lineage, emitter) = super::lineage(&args.state);
    let runs: Vec<RollbackRun> = match nothing_to_write {
        true => Vec::new(),
        false => undo.iter().map(|step| RollbackRun::of(step, args.window_only)).collect(),
    };
    for run in &runs {
        emitter.emit(run.start(&lineage));
    }
    let rolled_back = cascade::roll_back(undo, args.window_only, args.force).await;
    for run in &runs {
        let report = rolled_back
            .as_ref()
            .ok()
            .and_then(|reports| reports.iter().find(|r| Some(r.backfill_id.as_str()) == run.backfill_id()));
        emitter.emit(match (report, &rolled_back) {
            (Some(report), _) => run.complete(&lineage, report),
            (None, Err(error)) => run.fail(&lineage, &store::redact(&error.to_string())),
            (None, Ok(_)) => run.fail(&lineage, "the rollback did not report on this table"),
        });
    }
    super::delivered(emitter).await;
    rolled_back
}

/// The table `--table` names (a path, a URI, a catalog name), or the saved plan's target; with its
/// catalog name when it has one (the catalog's credentials lent to the stores).
async fn table_to_roll_back(args: &Args) -> anyhow::Result<(url::Url, Option<catalog::CatalogName>)> {
    let (url, pinned) = match &args.table {
        Some(written) => {
            let located = catalog::locate(&std::env::current_dir()?, written).await?;
            (located.url, located.catalog)
        }
        None => {
            let saved = args.state.saved_plan();
            let plan = Plan::load(&saved).with_context(|| {
                format!(
                    "no saved plan ({}) to name the table: `bf rollback --table TABLE` lists the table's backfills",
                    saved.display()
                )
            })?;
            plan.reach_target().await?;
            (url::Url::parse(&plan.target.uri)?, plan.target.catalog)
        }
    };
    Ok((url, pinned.as_ref().and_then(catalog::CatalogTable::catalog_name)))
}

/// The tables downstream that the saved chain names by catalog name get the comment there too.
fn name_downstream(undo: &mut [rollback::RollbackPlan], saved: Option<&Plan>) {
    for step in undo.iter_mut().filter(|step| step.catalog.is_none()) {
        let planned = saved.and_then(|root| {
            root.chain().into_iter().find(|p| p.target.uri == step.url.as_str())?.target.catalog.clone()
        });
        step.catalog = planned.as_ref().and_then(catalog::CatalogTable::catalog_name);
    }
}

/// Whether a rolled-back backfill is one of the saved chain's (a rerun's id extends its plan's).
fn belongs(root: &Plan, report: &rollback::RollbackReport) -> bool {
    root.chain().iter().any(|p| report.backfill_id.starts_with(&p.id))
}

fn finish(report: &rollback::RollbackReport, json: bool) -> anyhow::Result<ExitCode> {
    let text = if json { render::json(report) } else { render::rollback::report(report) };
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
