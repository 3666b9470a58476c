//! The plan's checks and guards, run on the rehearsal.
//!
//! Checks look at each rehearsed slice through a view named `slice` (the rehearsal's rows of that
//! slice) in the slice's source session, so an `sql` check can also read the inputs. A check passes
//! when it finds no offending rows; a failure reports how many and a few of them. One check is
//! always there: the reconcile, which proves the slice holds what the source produced for it.
//!
//! Guards look at the whole window: a metric (or the row count) that moves more than
//! `max_change_pct` fails the plan.

use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use crate::plan_file::{Check, Guards};
use crate::rehearse::blast_radius::BlastRadius;
use crate::rehearse::deleted_keys::DeletedKeys;
use crate::rehearse::diff::{Measures, ident};
use crate::source::run::read_only_options;

/// How many offending rows a failed check shows.
const SAMPLE_ROWS: usize = 3;

/// What a check looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// Rows sharing the declared columns' values with another row.
    Unique,
    /// Rows with a NULL in a declared column.
    NotNull,
    /// The rows the check's own query returns.
    Sql,
    /// The slice holds exactly the rows the source produced for it (always run).
    Reconcile,
}

/// One check on one slice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckResult {
    pub name: String,
    pub kind: CheckKind,
    pub slice: usize,
    pub passed: bool,
    /// Offending rows (for `unique`: rows sharing a key with another row).
    pub offending: u64,
    /// A few offending rows, as text.
    pub sample: Vec<String>,
    /// One line for people, e.g. "4 rows for the source's 4, 0 missing".
    pub detail: String,
}

/// One guard over the whole window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GuardResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// Runs a declared check against the view `slice` in `ctx`.
pub async fn run_check(ctx: &SessionContext, check: &Check, slice: usize) -> Result<CheckResult, String> {
    let (kind, sql) = if let Some(columns) = &check.unique {
        let list = columns.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ");
        (
            CheckKind::Unique,
            format!(
                "SELECT {list}, COUNT(*) AS copies FROM slice GROUP BY {list} HAVING COUNT(*) > 1 ORDER BY copies DESC, {list}"
            ),
        )
    } else if let Some(columns) = &check.not_null {
        let any_null =
            columns.iter().map(|c| format!("{} IS NULL", ident(c))).collect::<Vec<_>>().join(" OR ");
        (CheckKind::NotNull, format!("SELECT * FROM slice WHERE {any_null}"))
    } else if let Some(sql) = &check.sql {
        (CheckKind::Sql, sql.clone())
    } else {
        return Err(format!("check `{}` has no kind", check.name));
    };
    let frame = ctx
        .sql_with_options(&sql, read_only_options())
        .await
        .map_err(|e| format!("check `{}`: {e}", check.name))?;
    let batches = frame.collect().await.map_err(|e| format!("check `{}`: {e}", check.name))?;
    let mut offending = 0u64;
    let mut sample = Vec::new();
    for batch in &batches {
        for row in 0..batch.num_rows() {
            let fields: Vec<String> =
                batch.columns().iter().map(|c| array_value_to_string(c, row).unwrap_or_default()).collect();
            offending += if kind == CheckKind::Unique {
                fields.last().and_then(|n| n.parse().ok()).unwrap_or(1)
            } else {
                1
            };
            if sample.len() < SAMPLE_ROWS {
                sample.push(fields.join(" | "));
            }
        }
    }
    let detail = match (kind, offending) {
        (_, 0) => "no offending rows".to_owned(),
        (CheckKind::Unique, n) => format!(
            "{n} rows share their {} with another row",
            check.unique.as_deref().unwrap_or_default().join(", ")
        ),
        (_, n) => format!("{n} offending rows"),
    };
    Ok(CheckResult {
        name: check.name.clone(),
        kind,
        slice,
        passed: offending == 0,
        offending,
        sample,
        detail,
    })
}

/// The reconcile: the rehearsed slice holds exactly the rows the source produced for it — its own
/// query's for its days and `lent`, those other slices' files hold for them, which it says.
/// `days` names the slice as every line of bf does: `2026-09-15`, `2026-11-02..2026-11-08`.
pub fn reconcile(
    slice: usize,
    days: &str,
    source_rows: u64,
    lent: u64,
    slice_rows: u64,
    missing: u64,
) -> CheckResult {
    let passed = missing == 0 && slice_rows >= source_rows;
    let lent = match lent {
        0 => String::new(),
        n => format!(" ({n} of them from other slices' files)"),
    };
    CheckResult {
        name: "reconcile".into(),
        kind: CheckKind::Reconcile,
        slice,
        passed,
        offending: missing,
        sample: Vec::new(),
        detail: format!(
            "{} {days}: {slice_rows} rows for the source's {source_rows}{lent}, {missing} missing",
            if passed { "ok" } else { "MISMATCH" }
        ),
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

/// Checks the window's totals against `max_change_pct`, what it writes against
/// `max_bytes_rewritten`, each slice against `allow_empty_slices`, and the deleted keys it brings
/// back against `allow_deleted_keys_back`.
pub fn run_guards(
    guards: &Guards,
    before: &Measures,
    after: &Measures,
    radius: &BlastRadius,
    slices: &[SliceRows],
    deleted_keys: Option<&DeletedKeys>,
) -> Vec<GuardResult> {
    let mut results = change_guards(guards, before, after);
    results.extend(empty_slices(guards, slices));
    results.extend(deleted_keys_back(guards.allow_deleted_keys_back, deleted_keys));
    if let Some(limit) = guards.max_bytes_rewritten {
        let written = crate::plan_file::Size(radius.bytes_added);
        results.push(GuardResult {
            name: "max_bytes_rewritten".into(),
            passed: written.0 <= limit.0,
            detail: format!("the backfill writes {written} (limit {limit})"),
        });
    }
    results
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
