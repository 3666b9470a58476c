//! What `bf apply` prints: a line per slice as it lands, then the outcome.

use std::fmt::Write;

use bf::apply::{ApplyReport, ApplyState, SliceOutcome, SliceStatus};
use bf::rehearse::plan::Plan;

use super::count;

/// `ok 2026-09-15: 4 rows for the source's 4, 0 missing (version 16)` (`ok 2026-11-02..2026-11-08: …`
/// for a slice of several days), or the slice an earlier run committed.
pub fn slice_line(outcome: &SliceOutcome) -> String {
    // A slice of several days is named by all of them: `2026-11-02..2026-11-08`.
    let days = bf::words::days(&outcome.first, &outcome.last);
    match (outcome.status, outcome.rows, outcome.source_rows) {
        (SliceStatus::Committed, Some(rows), Some(source)) => format!(
            "ok {days}: {} for the source's {source}, {} missing (version {})",
            count(rows as usize, "row"),
            source.saturating_sub(rows),
            outcome.version.unwrap_or(0)
        ),
        (SliceStatus::Committed, ..) => format!("ok {days} (version {})", outcome.version.unwrap_or(0)),
        (SliceStatus::Skipped, ..) => {
            format!("skip {days}: already committed, by an earlier run or another process")
        }
    }
}

/// Before the question of a resumed apply: which slices are in already, and where it goes on.
/// `None` for an apply that starts afresh (or one a rollback undid, which the apply refuses).
pub fn resuming(plan: &Plan, state: &ApplyState) -> Option<String> {
    let backfill = state.backfill_id.as_ref().filter(|_| state.rolled_back.is_none())?;
    let first = state.pending.first();
    let next = plan.slices.iter().find(|s| Some(&s.first) == first);
    let slices = plan.slices.len();
    Some(format!(
        "{} of {slices} slices are committed already (backfill {backfill}); this apply goes on {}.",
        state.committed.len(),
        match next {
            Some(slice) => format!("from slice {} ({}), and skips them", slice.index, slice.first),
            None => "with the comment that ends the backfill".to_owned(),
        }
    ))
}

/// What an apply stopped by Ctrl-C left in each table, and how to go on.
pub fn interrupted(states: &[(&Plan, Option<ApplyState>)]) -> String {
    let mut out = String::from("Interrupted.");
    for (plan, state) in states {
        let slices = plan.slices.len();
        let table = &plan.target.table;
        let _ = match state {
            None => write!(
                out,
                " {table} could not be read to count the slices committed: `bf status` says where the backfill \
                 stands."
            ),
            Some(state) if state.committed.is_empty() => {
                write!(out, " No slice was committed to {table}: the table is as it was.")
            }
            Some(state) => write!(
                out,
                " {} of {slices} slices are committed to {table} (backfill {}), each one whole commit: nothing is \
                 half written.",
                state.committed.len(),
                state.backfill_id.as_deref().unwrap_or("?"),
            ),
        };
    }
    let next = states.iter().find_map(|(plan, state)| {
        let first = state.as_ref()?.pending.first()?;
        plan.slices.iter().find(|s| &s.first == first).map(|slice| (plan, slice))
    });
    match next {
        Some((plan, slice)) if states.len() > 1 => {
            let _ = write!(
                out,
                " `bf apply` resumes at {}, slice {} ({}).",
                plan.target.table, slice.index, slice.first
            );
        }
        Some((_, slice)) => {
            let _ = write!(out, " `bf apply` resumes at slice {} ({}).", slice.index, slice.first);
        }
        None => out.push_str(" `bf apply` resumes where it stopped."),
    }
    out
}

/// The outcome: versions, slices, the comment, the change log and the version to go back to.
pub fn report(report: &ApplyReport) -> String {
    let committed = report.slices.iter().filter(|s| s.status == SliceStatus::Committed).count();
    let rows: u64 = report.slices.iter().filter_map(|s| s.rows).sum();
    let mut out = String::new();
    if report.already_applied {
        let _ = writeln!(
            out,
            "Backfill {} is already applied to {}: nothing written. The version to go back to is {}.",
            report.backfill_id, report.table, report.pre_version
        );
        return out;
    }
    let _ = writeln!(
        out,
        "Applied backfill {} to {}: version {} → {}; {} committed ({rows} rows), {} already there.",
        report.backfill_id,
        report.table,
        report.pre_version,
        report.post_version,
        count(committed, "slice"),
        report.slices.len() - committed,
    );
    if let Some(comment) = &report.comment {
        let _ = writeln!(out, "Table comment: {comment}");
    }
    if let Some(log) = &report.log_table {
        let _ = writeln!(out, "Recorded in the change log {log}.");
    }
    let _ = writeln!(
        out,
        "The version to go back to is {} (recorded in every commit as bf.pre_version).",
        report.pre_version
    );
    out
}
