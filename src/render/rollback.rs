//! What `bf rollback` prints: what it will undo before asking, and what it did.

use std::fmt::Write;

use super::{count, number};
use bf::rollback::{Applied, RollbackPlan, RollbackReport};

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
    let _ = writeln!(out, "It wrote {} after version {}.", versions(&plan.ours), backfill.pre_version);
    match (plan.earlier.is_empty(), plan.finished()) {
        (true, _) => {}
        (false, true) => {
            let _ = writeln!(out, "It was rolled back already: {}.", versions(&plan.earlier));
        }
        (false, false) => {
            let _ = writeln!(
                out,
                "An earlier rollback of it committed {} and stopped; this one writes only what it left.",
                versions(&plan.earlier)
            );
        }
    }
    if !plan.cancelled.is_empty() {
        let _ = writeln!(
            out,
            "Later backfills were applied and rolled back since ({}): nothing of them to keep.",
            versions(&plan.cancelled)
        );
    }
    if !plan.others.is_empty() {
        let _ =
            writeln!(out, "Other writers committed since:\n{}", bf::delta::ledger::describe(&plan.others));
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

/// Until when `bf rollback` can undo a backfill: `rollback: possible until …`.
pub fn horizon(horizon: &bf::rollback::Horizon) -> String {
    use bf::rollback::Horizon;
    match horizon {
        Horizon::PossibleUntil { until, property, days } => format!(
            "rollback: possible until at least {} ({property} is {} days; after that {} may delete what it reads)",
            until.format("%Y-%m-%d %H:%M UTC"),
            super::number(*days),
            if *property == "delta.logRetentionDuration" { "log cleanup" } else { "VACUUM" }
        ),
        Horizon::Possible => "rollback: possible (nothing it reads was removed since)".to_owned(),
        Horizon::WindowOnly { why } => {
            format!(
                "rollback: `bf rollback --window-only` only (the full rollback is no longer possible: {why})"
            )
        }
        Horizon::Gone { why } => format!("rollback: no longer possible: {why}"),
    }
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
            "Backfill {} of {} was already rolled back: nothing written; version {} equals version {} {scope}({} in the \
             window).\n",
            report.backfill_id,
            report.table,
            report.new_version,
            report.restored_version,
            count(report.rows_after, "row"),
        );
    }
    format!(
        "Rolled back{what} {}: now version {}, equal to version {} {scope}({} in the window, {} before the rollback); \
         wrote {}.\n",
        report.table,
        report.new_version,
        report.restored_version,
        count(report.rows_after, "row"),
        number(report.rows_before as f64),
        bf::words::versions(&report.wrote)
    )
}

fn versions(entries: &[bf::delta::ledger::Entry]) -> String {
    bf::words::versions(&entries.iter().map(|e| e.version).collect::<Vec<_>>())
}

/// The table's backfills to choose from, newest first, each with what became of it.
pub fn choose(table: &str, why: &str, backfills: &[Applied]) -> String {
    let mut out = String::new();
    if backfills.is_empty() {
        let _ = writeln!(out, "error: {why}, and bf never applied a backfill to it: nothing to roll back.");
        return out;
    }
    let _ = writeln!(
        out,
        "error: {why}; name the backfill to roll back. The backfills of {table}, newest first:"
    );
    for b in backfills {
        let state = match (b.rolled_back_at, b.finished) {
            (Some(at), _) => format!("rolled back at version {at}"),
            (None, true) => "applied".to_owned(),
            (None, false) => "partly applied (its apply did not finish)".to_owned(),
        };
        let versions = match b.versions {
            (first, last) if first == last => format!("version {first}"),
            (first, last) => format!("versions {first}–{last}"),
        };
        let _ = writeln!(
            out,
            "  {} — {}..{}, {}, {versions} (after {}): {state}\n      {}",
            b.backfill_id,
            b.window.start,
            b.window.end,
            super::count(b.slices, "slice"),
            b.pre_version,
            b.reason
        );
    }
    let newest = backfills.iter().find(|b| b.rolled_back_at.is_none());
    if let Some(b) = newest {
        let _ = writeln!(
            out,
            "To roll back the newest still in place: `bf rollback --table {table} --backfill {}`",
            b.backfill_id
        );
    }
    out
}

/// A saved plan naming a backfill this state dir did not apply: it is undone only when named.
pub fn not_applied_here(saved: &std::path::Path, table: &str, backfill_id: &str) -> String {
    format!(
        "the saved plan {} names backfill {backfill_id} of {table}, but none of its slices was applied from \
         this state dir (their commits carry no receipt of it). A saved plan is a file a checkout can hold, so it \
         chooses only a backfill applied from here. To undo that one, name it:\n  bf rollback --table {table} \
         --backfill {backfill_id}",
        saved.display()
    )
}
