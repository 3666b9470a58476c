//! `bf gaps`: the days a table lacks, the days far below their usual level, the backfills left
//! unfinished, and what to run next.

use std::fmt::Write;

use bf::gaps::Gaps;

use crate::render::count;

pub fn text(gaps: &Gaps, rerun: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Gaps in {} on `{}`, {} (version {})",
        gaps.table, gaps.date_column, gaps.range, gaps.version
    );
    let _ = writeln!(
        out,
        "  rows per day {}",
        match gaps.files_read {
            Some(0) => "from the log alone".to_owned(),
            Some(n) =>
                format!("from the log, and the date column of {} the log does not settle", count(n, "file")),
            None => "read through the table (the log alone could not tell them)".to_owned(),
        }
    );
    if !gaps.closed.is_empty() {
        let _ = writeln!(
            out,
            "  closed on {}: no rows on any of them in the range and {} around it, so none is missing",
            gaps.closed.join(", "),
            count(gaps.thinness.weeks as usize, "week")
        );
    }
    if gaps.is_empty() {
        let _ = writeln!(
            out,
            "\nNo gaps: every day has rows, none far below its usual level, no backfill unfinished."
        );
        return out;
    }
    if !gaps.missing.is_empty() {
        let _ = writeln!(out, "\nMissing: {} without a row", count(gaps.missing.len(), "day"));
        for (first, last) in bf::gaps::runs(&gaps.missing) {
            let _ = match first == last {
                true => writeln!(out, "  {first} ({})", first.format("%a")),
                false => writeln!(out, "  {first}..{last} ({} days)", (last - first).num_days() + 1),
            };
        }
    }
    if !gaps.thin.is_empty() {
        let _ = writeln!(
            out,
            "\nThin: {} under {}% of its usual rows (the median of the same weekday, up to {} either side)",
            count(gaps.thin.len(), "day"),
            gaps.thinness.threshold * 100.0,
            count(gaps.thinness.weeks as usize, "week"),
        );
        for thin in &gaps.thin {
            let _ = writeln!(
                out,
                "  {} ({})  {}, usually {} ({}%)",
                thin.day,
                thin.day.format("%a"),
                count(thin.rows as usize, "row"),
                thin.usual,
                (thin.rows * 100).checked_div(thin.usual).unwrap_or(0)
            );
        }
    }
    if !gaps.unfinished.is_empty() {
        let _ = writeln!(out, "\nUnfinished: {} never finished", count(gaps.unfinished.len(), "backfill"));
        for backfill in &gaps.unfinished {
            let _ = writeln!(
                out,
                "  {} ({}): {} of {} slices committed, \"{}\"",
                backfill.backfill_id, backfill.window, backfill.committed, backfill.slices, backfill.reason
            );
            let _ = writeln!(
                out,
                "    finish it with `bf apply` and its saved plan, or undo it with `bf rollback --table {} --backfill {}`",
                gaps.table, backfill.backfill_id
            );
        }
    }
    let days = gaps.days();
    if !days.is_empty() {
        let _ = writeln!(
            out,
            "\n{} to backfill. `{rerun} --write-plan FILE --like PLAN` writes a plan for exactly them, from a \
             plan of this table.",
            count(days.len(), "day")
        );
    }
    out
}
