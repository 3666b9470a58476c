//! The commits that end an apply once every slice is in: the table comment (its own metadata
//! commit, never while slices run, since a metadata commit makes concurrent writers fail), then the
//! change log's row. Both are written once even when two finishers race or a crash falls between.
//! A table named by its catalog name gets the comment in its catalog as well.

use deltalake::DeltaTable;

use super::{ApplyError, Preflight, change_log, url_of};
use crate::delta::catalog::CatalogTable;
use crate::delta::ledger::{self, Backfill, Entry};
use crate::delta::store::display_url;
use crate::fault::fault;
use crate::rehearse::plan::Plan;

/// What ends a backfill's apply once every slice is in: the table comment, then the change-log row.
/// Returns the table after the comment, the comment, and the change log written to.
pub(super) async fn sign_off(
    plan: &Plan,
    preflight: &Preflight,
    target: DeltaTable,
    started_at: chrono::DateTime<chrono::Utc>,
) -> Result<(DeltaTable, String, Option<String>), ApplyError> {
    let Preflight { stores, since, log_url, backfill, document, .. } = preflight;
    fault("before-comment");
    crate::fault::pause_before_comment();
    let comment = comment_text(&document.plan.record.comment, backfill, chrono::Utc::now().date_naive());
    let (target, wrote_comment) = comment_once(target, since, backfill, &comment).await?;
    // Where people browsing the catalog read it, too; again on a rerun, in case a crash fell between.
    if let Some(name) = plan.target.catalog.as_ref().and_then(CatalogTable::catalog_name) {
        crate::delta::catalog::set_comment(&name, &comment).await?;
    }
    let Some(url) = log_url else { return Ok((target, comment, None)) };
    // Two finishers at once: the one whose comment landed writes the row; a crash between the
    // two leaves it to the next run, which finds the comment and no row.
    let row = change_log::LogRow {
        backfill_id: backfill.backfill_id.clone(),
        table: display_url(&url_of(plan)?),
        // This table's plan: the tables downstream have rows of their own.
        plan: Plan { downstream: Vec::new(), ..plan.clone() },
        pre_version: backfill.pre_version,
        post_version: target.version().unwrap_or(0),
        started_at,
        finished_at: chrono::Utc::now(),
        user: ledger::user(),
    };
    let commented_before = since.iter().any(|e| e.is_comment_of(&backfill.backfill_id));
    if wrote_comment || commented_before {
        change_log::record(stores, url, &row).await?;
    }
    Ok((target, comment, Some(display_url(url))))
}

/// Sets the table comment that ends the backfill's apply, unless its commit is in the table already;
/// returns the table and whether this call wrote it. Two finishers racing: the comment is a metadata
/// commit, so the second conflicts, finds the first's comment, and writes nothing.
async fn comment_once(
    target: DeltaTable,
    since: &[Entry],
    backfill: &Backfill,
    comment: &str,
) -> Result<(DeltaTable, bool), ApplyError> {
    if since.iter().any(|e| e.is_comment_of(&backfill.backfill_id)) {
        return Ok((target, false));
    }
    // `since` was read before the slices; another finisher may have commented since then, and a
    // table read after its comment would commit a second one without any conflict.
    let mut target = target;
    crate::delta::table::catch_up(&mut target).await?;
    let known = since.last().map_or(backfill.pre_version, |e| e.version);
    if ledger::commits_after(&target, known).await?.iter().any(|e| e.is_comment_of(&backfill.backfill_id)) {
        return Ok((target, false));
    }
    // A commit bf completes itself (in-commit timestamps) is not rebased by deltalake: one that
    // lost the race to another writer is made again on the table as it is then, unless that
    // writer was another finisher commenting for this backfill.
    for attempt in 1..=COMMENT_ATTEMPTS {
        let read_version = target.version().unwrap_or(0);
        let fallback = target.clone();
        let written =
            crate::delta::commit::set_description(target, comment.to_owned(), backfill.comment_commit())
                .await;
        match written {
            Ok(table) => return Ok((table, true)),
            Err(error) => {
                let mut table = fallback;
                table.update_incremental(None).await?;
                let newer = ledger::commits_after(&table, read_version).await?;
                if newer.iter().any(|e| e.is_comment_of(&backfill.backfill_id)) {
                    return Ok((table, false));
                }
                if attempt == COMMENT_ATTEMPTS || !crate::delta::commit::lost_race(&error) {
                    return Err(error.into());
                }
                target = table;
            }
        }
    }
    unreachable!("the last attempt returns")
}

/// How many times the comment is tried against other writers' commits landing first.
const COMMENT_ATTEMPTS: usize = 5;

/// The table comment from the plan's template, at most 4000 characters, made inert markdown line
/// by line: catalogs (Unity Catalog, Databricks' explorer) render a table comment as markdown, and
/// the reason and the template come from a pull request, so a link or a remote image in them would
/// become one on every page that shows the table.
pub fn comment_text(template: &str, backfill: &Backfill, today: chrono::NaiveDate) -> String {
    let text = template
        .replace("{reason}", &backfill.reason)
        .replace("{window}", &backfill.window.to_string())
        .replace("{start}", &backfill.window.start.to_string())
        .replace("{end}", &backfill.window.end.to_string())
        .replace("{date}", &today.to_string())
        .replace("{backfill_id}", &backfill.backfill_id);
    let inert: Vec<String> = text.lines().map(crate::markdown::text).collect();
    inert.join("\n").chars().take(4000).collect()
}
