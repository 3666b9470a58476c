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

/// The commits, newest first: a table of DESCRIBE HISTORY's columns and bf's, one line a commit
/// (fits 100 columns: no borders, the longest operation name and a backfill id whole), then the
/// predicates and reasons by version and by backfill, each whole, where a table would cut them,
/// and under a backfill's reason its line of `horizons` (until when it can be rolled back).
/// `--json` has every field.
pub fn table(entries: &[Entry], horizons: &std::collections::BTreeMap<String, String>) -> String {
    let mut rows = comfy_table::Table::new();
    rows.load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(["version", "time (UTC)", "operation", "rows", "backfill", "step"]);
    let mut predicates = Vec::new();
    let mut reasons: Vec<(String, String)> = Vec::new();
    let mut noted = |key: String, reason: &str| {
        if !reason.is_empty() && !reasons.iter().any(|(k, _)| *k == key) {
            reasons.push((key, reason.to_owned()));
        }
    };
    for entry in entries {
        let version = entry.version;
        let (backfill, step) = match entry.mark() {
            Err(malformed) => {
                noted(format!("version {version}"), &malformed.problem);
                (String::new(), "unreadable bf keys".to_owned())
            }
            Ok(None) => Default::default(),
            Ok(Some(mark)) => match mark {
                Mark::Slice { backfill, slice } => {
                    noted(backfill.backfill_id.clone(), &backfill.reason);
                    (backfill.backfill_id.clone(), format!("slice {}", slice.index))
                }
                Mark::Comment { backfill } => {
                    noted(backfill.backfill_id.clone(), &backfill.reason);
                    (backfill.backfill_id.clone(), "comment".to_owned())
                }
                Mark::Rollback { backfill_id, reason, step, .. } => {
                    noted(backfill_id.clone(), reason);
                    let step = match step {
                        RollbackStep::Restore => "undo: restore".to_owned(),
                        RollbackStep::Comment => "undo: comment".to_owned(),
                        RollbackStep::Slice(slice) => format!("undo: slice {}", slice.index),
                    };
                    (backfill_id.clone(), step)
                }
                Mark::RestoredTo { version } => (String::new(), format!("restore to {version}")),
                Mark::Clone { source_version, .. } => (String::new(), format!("clone of {source_version}")),
                Mark::Rehearsal { plan_id, slice } => (format!("plan {plan_id}"), format!("slice {slice}")),
                Mark::Freeze { period, lifted } => {
                    let what = if *lifted { "unfreeze" } else { "freeze" };
                    let said = format!("{what} {} by {}: {}", period.period(), period.by, period.reason);
                    noted(format!("version {version}"), &said);
                    (String::new(), what.to_owned())
                }
                Mark::Approved { approval } => {
                    let said = format!(
                        "unfreeze {}..{} for {} ({}) by {}: {}",
                        approval.from,
                        approval.to,
                        approval.ticket,
                        approval.approved_by,
                        approval.by,
                        approval.reason
                    );
                    noted(format!("version {version}"), &said);
                    (String::new(), "approval".to_owned())
                }
            },
        };
        if let Some(predicate) = &entry.predicate {
            predicates.push((version, predicate.clone()));
        }
        rows.add_row([
            version.to_string(),
            entry
                .timestamp
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_default(),
            entry.operation.clone(),
            entry.rows_written.map(|n| n.to_string()).unwrap_or_default(),
            backfill,
            step,
        ]);
    }
    // A line is as long as its text: no padding after the last column.
    let mut out: String = rows.lines().map(|line| line.trim_end().to_owned() + "\n").collect();
    out.pop();
    if !predicates.is_empty() {
        out.push_str("\n\npredicates:");
        for (version, predicate) in predicates {
            out.push_str(&format!("\n  {version:>7}  {predicate}"));
        }
    }
    if !reasons.is_empty() {
        out.push_str("\n\nreasons:");
        for (key, reason) in reasons {
            out.push_str(&format!("\n  {key}  {reason}"));
            if let Some(horizon) = horizons.get(&key) {
                out.push_str(&format!("\n  {:width$}  {horizon}", "", width = key.chars().count()));
            }
        }
    }
    out
}
