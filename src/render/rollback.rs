//! What `bf rollback` prints: what it will undo before asking, and what it did.

use std::fmt::Write;

use bf::rollback::{RollbackPlan, RollbackReport};

/// The backfill, its commits, other writers' commits, an earlier rollback that stopped, and what
/// this one will write.
pub fn intent(plan: &RollbackPlan, window_only: bool) -> String {
    let backfill = &plan.backfill.backfill;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Backfill {} of {}, window {}..{}: {}",
        backfill.backfill_id, plan.table, plan.window.start, plan.window.end, backfill.reason
    );
    let _ =
        writeln!(out, "It wrote versions {:?} after version {}.", versions(&plan.ours), backfill.pre_version);
    if !plan.earlier.is_empty() {
        let _ = writeln!(
            out,
            "An earlier rollback of it committed versions {:?} and stopped; this one writes only what it left.",
            versions(&plan.earlier)
        );
    }
    if !plan.others.is_empty() {
        let _ = writeln!(out, "Other writers committed since: versions {:?}.", versions(&plan.others));
    }
    let will = match (window_only, plan.restored_at()) {
        (true, _) => format!(
            "put back the rows the window held at version {}, one commit per slice",
            backfill.pre_version
        ),
        (false, None) => format!("RESTORE version {} in one commit", backfill.pre_version),
        (false, Some(_)) if plan.finished() => "write nothing: the backfill is rolled back".to_owned(),
        (false, Some(version)) => {
            format!("keep the RESTORE committed at version {version} and finish the rollback")
        }
    };
    let _ = writeln!(out, "Will {will}.");
    out
}

/// `bf rollback --to-version N`'s question.
pub fn restore_intent(table: &str, version: u64) -> String {
    format!("Will RESTORE {table} to version {version}; every commit after it is undone.\n")
}

/// What the rollback did.
pub fn report(report: &RollbackReport) -> String {
    let what = if report.backfill_id.is_empty() {
        String::new()
    } else {
        format!(" backfill {} of", report.backfill_id)
    };
    let scope = if report.window_only { "inside the window " } else { "" };
    if report.wrote.is_empty() {
        return format!(
            "Backfill {} of {} was already rolled back: nothing written; version {} equals version {} {scope}({} rows).\n",
            report.backfill_id, report.table, report.new_version, report.restored_version, report.rows_after,
        );
    }
    format!(
        "Rolled back{what} {}: now version {}, equal to version {} {scope}({} rows, {} before the rollback); wrote {}.\n",
        report.table,
        report.new_version,
        report.restored_version,
        report.rows_after,
        report.rows_before,
        match report.wrote.as_slice() {
            [one] => format!("version {one}"),
            many => format!("versions {many:?}"),
        }
    )
}

fn versions(entries: &[bf::delta::ledger::Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.version).collect()
}
