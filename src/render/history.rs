//! A table's history as `bf history` prints it, like DESCRIBE HISTORY with bf's columns beside it.

use bf::delta::catalog::CatalogTable;
use bf::delta::ledger::{Entry, Mark, RollbackStep};
use bf::delta::store::display_url;

/// The line above a table named by its catalog name: the name, and where it resolved to.
pub fn named(pinned: &CatalogTable) -> String {
    let location = url::Url::parse(&pinned.location)
        .map(|u| display_url(&u))
        .unwrap_or_else(|_| pinned.location.clone());
    format!("{} is the table at {location}\n", pinned.name)
}

/// The commits as a table, newest first: DESCRIBE HISTORY's columns and bf's.
pub fn table(entries: &[Entry]) -> comfy_table::Table {
    let mut rows = super::table([
        "version",
        "timestamp",
        "operation",
        "predicate",
        "rows",
        "backfill",
        "slice",
        "reason",
    ]);
    for entry in entries {
        let (backfill, slice, reason) = match entry.mark() {
            Err(malformed) => ("unreadable bf keys".to_owned(), String::new(), malformed.problem),
            Ok(None) => Default::default(),
            Ok(Some(mark)) => match mark {
                Mark::Slice { backfill, slice } => {
                    (backfill.backfill_id.clone(), slice.index.to_string(), backfill.reason.clone())
                }
                Mark::Comment { backfill } => {
                    (backfill.backfill_id.clone(), "comment".to_owned(), backfill.reason.clone())
                }
                Mark::Rollback { backfill_id, reason, step, .. } => (
                    format!("rollback of {backfill_id}"),
                    match step {
                        RollbackStep::Restore => String::new(),
                        RollbackStep::Comment => "comment".to_owned(),
                        RollbackStep::Slice(slice) => slice.index.to_string(),
                    },
                    reason.clone(),
                ),
                Mark::RestoredTo { version } => {
                    (format!("restore to {version}"), String::new(), String::new())
                }
                Mark::Clone { rehearsal_of, source_version } => {
                    (format!("rehearsal of {rehearsal_of} at {source_version}"), String::new(), String::new())
                }
                Mark::Rehearsal { plan_id, slice } => {
                    (format!("plan {plan_id}"), slice.to_string(), String::new())
                }
                Mark::Freeze { period, lifted } => (
                    format!(
                        "{} {} by {}",
                        if *lifted { "unfreeze" } else { "freeze" },
                        period.period(),
                        period.by
                    ),
                    String::new(),
                    period.reason.clone(),
                ),
                Mark::Approved { approval } => (
                    format!(
                        "unfreeze {}..{} for {} ({}) by {}",
                        approval.from, approval.to, approval.ticket, approval.approved_by, approval.by
                    ),
                    String::new(),
                    approval.reason.clone(),
                ),
            },
        };
        rows.add_row([
            entry.version.to_string(),
            entry
                .timestamp
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default(),
            entry.operation.clone(),
            entry.predicate.clone().unwrap_or_default(),
            entry.rows_written.map(|n| n.to_string()).unwrap_or_default(),
            backfill,
            slice,
            reason.chars().take(60).collect(),
        ]);
    }
    rows
}
