//! `bf gaps`: the days a table lacks, the days far below their usual level, the backfills left
//! unfinished, and what to run next.

use std::fmt::Write;

use bf::gaps::Gaps;
use maud::html;

use crate::render::count;
use crate::render::svg::Mark;

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

/// The gaps as one self-contained HTML page (`bf gaps --html FILE`): the calendar of rows per
/// day with what was found marked, then the same lists as the terminal's.
pub fn html(gaps: &Gaps, rerun: &str) -> String {
    let days: Vec<crate::render::svg::calendar::Day> = gaps
        .range
        .start
        .iter_days()
        .take_while(|d| *d <= gaps.range.end)
        .map(|day| (day, gaps.rows.get(&day).copied().unwrap_or(0), mark(gaps, day)))
        .collect();
    let title = format!("bf gaps · {} · {}", gaps.table, gaps.range);
    let legend = [Mark::Rows, Mark::Missing, Mark::Thin, Mark::Unfinished, Mark::Closed];
    crate::render::page::page(
        &title,
        html! {
            h1 { "Gaps in " (gaps.table) " on " code { (gaps.date_column) } ", " (gaps.range) }
            p.legend {
                "Rows per day, a column per week, Monday on top; darker is more rows. Hover a day for its numbers."
                @for mark in legend {
                    span style=(format!("background:{}", css(mark))) {} (mark.word())
                }
            }
            (crate::render::svg::calendar(&days))
            pre { (text(gaps, rerun)) }
        },
    )
}

/// What `bf gaps` found on `day`: missing and thin first, then inside an unfinished backfill.
fn mark(gaps: &Gaps, day: chrono::NaiveDate) -> Mark {
    if gaps.missing.contains(&day) {
        Mark::Missing
    } else if gaps.thin.iter().any(|t| t.day == day) {
        Mark::Thin
    } else if gaps.unfinished.iter().any(|u| u.window.contains(day)) {
        Mark::Unfinished
    } else if !gaps.rows.contains_key(&day) {
        Mark::Closed
    } else {
        Mark::Rows
    }
}

fn css(mark: Mark) -> String {
    let plotters::style::RGBColor(r, g, b) = mark.colour();
    format!("#{r:02x}{g:02x}{b:02x}")
}
