//! The plan's checks and guards, run on the rehearsal.
//!
//! Checks look at each rehearsed slice through a view named `slice` (the rehearsal's rows of that
//! slice) in the slice's source session, so an `sql` check can also read the inputs. A check passes
//! when it finds no offending rows; a failure reports how many and a few of them. One check is
//! always there: the reconcile, which proves the slice holds what the source produced for it.
//!
//! Guards, which weigh the whole backfill, are [`super::guards`].

use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use crate::plan_file::Check;
use crate::rehearse::diff::ident;
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
