//! What `bf apply` prints: a line per slice as it lands, then the outcome.

use std::fmt::Write;

use bf::apply::{ApplyReport, SliceOutcome, SliceStatus};

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
