//! The plan's guards: rules over the whole backfill, each weighed from the saved plan's numbers, so
//! `bf apply` weighs them again from what it reads ([`super::seal`]) whatever the plan's `passed`
//! flags say.
//!
//! A metric (or the row count) that moves more than `max_change_pct`, a backfill writing more than
//! `max_bytes_rewritten`, and — a guard of their own whenever there are any, passed only when the
//! plan allows them — slices or days left empty, deleted keys brought back, rows the queries return
//! outside the window.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::plan_file::Guards;
use crate::rehearse::blast_radius::BlastRadius;
use crate::rehearse::deleted_keys::DeletedKeys;
use crate::rehearse::diff::Measures;
use crate::rehearse::plan::Plan;
use crate::source::routes::OutsideDay;
use crate::window::Window;

/// One guard over the whole window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GuardResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// What the guards weigh, read from a plan.
pub struct Weighed<'a> {
    pub before: &'a Measures,
    pub after: &'a Measures,
    /// The slices' blast radius added up: the files their publications add.
    pub radius: BlastRadius,
    /// Each slice, and each day emptied inside a slice of several days.
    pub slices: Vec<SliceRows>,
    pub deleted_keys: Option<&'a DeletedKeys>,
    /// The days outside the window the queries return rows for.
    pub outside: Outside<'a>,
}

/// The rows the queries return outside the window, and where a plan says to keep them.
pub struct Outside<'a> {
    pub window: Window,
    pub date_column: &'a str,
    pub days: &'a [OutsideDay],
}

impl<'a> Weighed<'a> {
    pub fn of(plan: &'a Plan) -> Weighed<'a> {
        Weighed {
            before: &plan.total.before,
            after: &plan.total.after,
            radius: BlastRadius::sum(plan.slices.iter().filter_map(|r| r.blast_radius.as_ref())),
            slices: plan.emptied_rows(),
            deleted_keys: plan.deleted_keys.as_ref(),
            outside: Outside {
                window: plan.window,
                date_column: &plan.target.date_column,
                days: &plan.outside_days,
            },
        }
    }
}

/// A slice's days and its rows before and after: what `allow_empty_slices` weighs.
#[derive(Debug, Clone, Copy)]
pub struct SliceRows {
    pub first: chrono::NaiveDate,
    pub last: chrono::NaiveDate,
    pub before: u64,
    pub after: u64,
}

/// Weighs the window's totals against `max_change_pct`, what it writes against
/// `max_bytes_rewritten`, each slice against `allow_empty_slices`, the deleted keys it brings
/// back against `allow_deleted_keys_back` and the rows outside the window against
/// `allow_rows_outside_window`.
pub fn run_guards(guards: &Guards, weighed: &Weighed) -> Vec<GuardResult> {
    let mut results = change_guards(guards, weighed.before, weighed.after);
    results.extend(outside_window(guards.allow_rows_outside_window, &weighed.outside));
    results.extend(empty_slices(guards, &weighed.slices));
    results.extend(deleted_keys_back(guards.allow_deleted_keys_back, weighed.deleted_keys));
    if let Some(limit) = guards.max_bytes_rewritten {
        let written = crate::plan_file::Size(weighed.radius.bytes_added);
        results.push(GuardResult {
            name: "max_bytes_rewritten".into(),
            passed: written.0 <= limit.0,
            detail: format!("the backfill writes {written} (limit {limit})"),
        });
    }
    results
}

/// `allow_rows_outside_window`: the rows the queries return for days outside the window, which no
/// slice writes — usually a bug in the query (a time zone shifting dates, a missing filter) — named
/// by their days.
fn outside_window(allowed: bool, outside: &Outside) -> Option<GuardResult> {
    if outside.days.is_empty() {
        return None;
    }
    let rows: u64 = outside.days.iter().map(|d| d.rows).sum();
    let (noun, verb, them) = if rows == 1 { ("row", "falls", "it") } else { ("rows", "fall", "them") };
    let column = outside.date_column;
    let detail = format!(
        "{} {noun} the queries return {verb} outside the window {}, on {}: no slice writes {them}{}",
        crate::words::number(rows as f64),
        outside.window,
        day_runs(outside.days),
        if allowed {
            " (allowed: `allow_rows_outside_window = true`)".to_owned()
        } else {
            format!(
                ". Keep only each slice's days by wrapping the query — SELECT * FROM (<the query>) WHERE \
                 {column} BETWEEN $start AND $end — or, if leaving them out is meant, say so with \
                 `[guards] allow_rows_outside_window = true`"
            )
        }
    );
    Some(GuardResult { name: "allow_rows_outside_window".into(), passed: allowed, detail })
}

/// Days as runs of consecutive days with their rows, the first five: `2026-02-27..2026-02-28 (12),
/// 2026-04-01 (7)`.
fn day_runs(days: &[OutsideDay]) -> String {
    const SHOWN: usize = 5;
    let mut runs: Vec<(NaiveDate, NaiveDate, u64)> = Vec::new();
    for day in days {
        match runs.last_mut() {
            Some((_, last, rows)) if last.succ_opt() == Some(day.day) => {
                *last = day.day;
                *rows += day.rows;
            }
            _ => runs.push((day.day, day.day, day.rows)),
        }
    }
    let mut shown: Vec<String> = runs
        .iter()
        .take(SHOWN)
        .map(|(first, last, rows)| {
            format!("{} ({})", crate::words::days(first, last), crate::words::number(*rows as f64))
        })
        .collect();
    if runs.len() > SHOWN {
        let more: usize =
            runs[SHOWN..].iter().map(|(first, last, _)| (*last - *first).num_days() as usize + 1).sum();
        shown.push(format!("and {more} more {}", if more == 1 { "day" } else { "days" }));
    }
    shown.join(", ")
}

/// `allow_empty_slices`: the slices, and the days inside slices of several days, the backfill leaves
/// without rows where the table held some, a guard of their own whenever there are any (passed only
/// when the plan allows it), so a plan shows them first whatever it allows.
fn empty_slices(guards: &Guards, slices: &[SliceRows]) -> Option<GuardResult> {
    let emptied: Vec<String> = slices
        .iter()
        .filter(|s| s.after == 0 && s.before > 0)
        .map(|s| {
            format!("{} ({} → 0)", crate::words::days(s.first, s.last), crate::words::number(s.before as f64))
        })
        .collect();
    if emptied.is_empty() {
        return None;
    }
    // A slice, or a day inside one (`Plan::emptied_rows`): named by its days, either way.
    let detail = format!(
        "the source leaves {} without rows where the table holds some{}",
        emptied.join(", "),
        if guards.allow_empty_slices {
            " (allowed: `allow_empty_slices = true`)"
        } else {
            ". If emptying those days is the fix, say so with `[guards] allow_empty_slices = true`"
        }
    );
    Some(GuardResult { name: "allow_empty_slices".into(), passed: guards.allow_empty_slices, detail })
}

/// `allow_deleted_keys_back`: the deletes in the table's history whose keys the backfill's added
/// rows bring back, a guard of their own whenever there are any (passed only when the plan allows
/// it), so that a reload of rows deleted on request is the first thing a reviewer reads.
pub fn deleted_keys_back(allowed: bool, deleted_keys: Option<&DeletedKeys>) -> Option<GuardResult> {
    let found = &deleted_keys?.found;
    if found.is_empty() {
        return None;
    }
    let mut described: Vec<String> = found.iter().take(3).map(|d| d.describe()).collect();
    if found.len() > 3 {
        described.push(format!("and {} more deletes", found.len() - 3));
    }
    let detail = format!(
        "{}{}",
        described.join("; "),
        if allowed {
            " (allowed: `allow_deleted_keys_back = true`)"
        } else {
            ". Rows deleted on purpose come back; if bringing them back is the fix, say so with \
             `[guards] allow_deleted_keys_back = true`"
        }
    );
    Some(GuardResult { name: "allow_deleted_keys_back".into(), passed: allowed, detail })
}

/// `max_change_pct`: each metric's change over the window against its limit.
fn change_guards(guards: &Guards, before: &Measures, after: &Measures) -> Vec<GuardResult> {
    guards
        .max_change_pct
        .iter()
        .map(|(name, limit)| {
            let values = if name == "rows" {
                Some((before.rows as f64, after.rows as f64))
            } else {
                before.metrics.get(name).copied().flatten().zip(after.metrics.get(name).copied().flatten())
            };
            let subject = if name == "rows" { "the row count" } else { name.as_str() };
            let (passed, detail) = match values {
                None => (false, format!("{subject} is NULL before or after; a change cannot be measured")),
                Some((b, a)) if b == 0.0 && a == 0.0 => (true, format!("{subject} is 0 before and after")),
                Some((0.0, _)) => (
                    false,
                    format!("{subject} is 0 before, so its change cannot be a percentage (limit {limit}%)"),
                ),
                Some((b, a)) => {
                    let pct = (a - b) / b.abs() * 100.0;
                    let passed = pct.abs() <= *limit;
                    let change = crate::words::signed_percent(pct);
                    (passed, format!("{subject} changes {change} (limit ±{limit}%)"))
                }
            };
            GuardResult { name: format!("max_change_pct.{name}"), passed, detail }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    #[test]
    fn days_outside_the_window_are_named_as_runs_the_first_five() {
        let days = |list: &[(&str, u64)]| -> Vec<OutsideDay> {
            list.iter().map(|(d, rows)| OutsideDay { day: day(d), rows: *rows }).collect()
        };
        let two_runs = days(&[("2026-02-27", 5), ("2026-02-28", 7), ("2026-04-01", 13)]);
        assert_eq!(day_runs(&two_runs), "2026-02-27..2026-02-28 (12), 2026-04-01 (13)");
        let seven: Vec<(String, u64)> = (1..=7).map(|d| (format!("2026-05-{:02}", d * 2), 1)).collect();
        let seven: Vec<(&str, u64)> = seven.iter().map(|(d, r)| (d.as_str(), *r)).collect();
        assert_eq!(
            day_runs(&days(&seven)),
            "2026-05-02 (1), 2026-05-04 (1), 2026-05-06 (1), 2026-05-08 (1), 2026-05-10 (1), and 2 more days"
        );
    }
}
