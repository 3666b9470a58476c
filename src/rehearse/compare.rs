//! Step 4 of the rehearsal: the rehearsal measured against the target, per slice (on a task beside
//! the next slice's write) and over the window, with everything outside it, which must not move.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use deltalake::datafusion::common::Column;
use deltalake::datafusion::error::{DataFusionError, Result as DfResult};
use deltalake::datafusion::logical_expr::{Expr, lit, not};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;

use crate::delta::predicate::{slice_predicate, slice_predicate_sql, window_predicate};
use crate::delta::store;
use crate::delta::table;
use crate::plan_file::{Metric, WriteMode};
use crate::rehearse::checks::{self, CheckResult};
use crate::rehearse::diff::{Comparison, Day, Measured, Measures, Side, Trend};
use crate::rehearse::error::{RehearsalError, query_error};
use crate::rehearse::plan::{BeforeAfter, BlastRadius, OutsideWindow, SliceReport};
use crate::source::run::{SliceSource, SourceCounts};
use crate::window::Window;

/// The days inside slices of several days that the backfill leaves without rows where the table
/// holds some: a corrections file missing one day of a month empties that day, and a slice's rows
/// alone would not say so. Read from the days each slice's comparison measured (`measured`), so
/// no day is counted twice.
pub(crate) fn emptied_days(
    measured: &Measured,
    slices: &[crate::window::Slice],
) -> Vec<crate::rehearse::plan::EmptiedDay> {
    slices
        .iter()
        .filter(|s| s.first < s.last)
        .flat_map(|s| measured.days.range(s.first..=s.last).map(|(_, day)| day))
        .filter(|day| day.before.rows > 0 && day.after.rows == 0)
        .map(|day| crate::rehearse::plan::EmptiedDay { day: day.day, before: day.before.rows })
        .collect()
}

/// The window compared as a whole.
pub(crate) struct WindowCompared {
    pub(crate) total: BeforeAfter,
    pub(crate) outside_window: OutsideWindow,
    pub(crate) breakdown: Vec<crate::rehearse::diff::BreakdownRow>,
    pub(crate) trend: Trend,
}

/// Step 4, over the window: its totals before and after, everything outside it (which must not
/// have moved), the `[diff] by` breakdown, and the trend the charts draw.
pub(crate) async fn compare_window(
    spec: &crate::plan_file::PlanFile,
    stores: &store::Stores,
    target: &DeltaTable,
    rehearsal: &DeltaTable,
    schema: deltalake::arrow::datatypes::SchemaRef,
    reports: &[SliceReport],
    measured: &Measured,
) -> Result<WindowCompared, RehearsalError> {
    // The days the slices rewrote: the window, or the slices a preview rehearsed.
    let rewritten = measured.covered.as_slice();
    let comparison =
        Comparison::new(stores, target, rehearsal, schema, spec.source.dialect).await.map_err(|e| {
            RehearsalError::Query {
                what: "registering the target and the rehearsal".into(),
                message: e.to_string(),
            }
        })?;
    let metrics = &spec.metrics;
    let column = spec.target.date_column.as_str();
    // The days the slices rewrote: the window, or the slices a preview rehearsed. A preview's
    // other slices are outside them, and must not move either.
    let in_window =
        rewritten.iter().map(|range| window_predicate(column, range)).reduce(Expr::or).unwrap_or(lit(false));
    let date = Expr::Column(Column::new_unqualified(column));
    let outside = not(in_window.clone()).or(date.is_null());
    // The slices make up the window: where their measures add up, they are its totals.
    let side = |pick: fn(&SliceReport) -> &Measures| reports.iter().map(pick).collect::<Vec<_>>();
    let summed =
        (Measures::sum_of(&side(|r| &r.before), metrics), Measures::sum_of(&side(|r| &r.after), metrics));
    let total = match summed {
        (Some(before), Some(after)) => BeforeAfter { before, after },
        _ => BeforeAfter {
            before: comparison
                .measure(Side::Before, in_window.clone(), metrics)
                .await
                .map_err(query_error("the window"))?,
            after: comparison
                .measure(Side::After, in_window.clone(), metrics)
                .await
                .map_err(query_error("the window"))?,
        },
    };
    let outside_window = compare_outside(target, rehearsal, &comparison, column, rewritten, outside, metrics)
        .await
        .map_err(query_error("outside the window"))?;
    let breakdown = match spec.diff.by.is_empty() {
        true => Vec::new(),
        false => comparison
            .breakdown(in_window, spec.target.key.as_deref(), &spec.diff.by, metrics)
            .await
            .map_err(query_error("the [diff] by breakdown"))?
            .ok_or_else(|| too_many_groups(&spec.diff.by))?,
    };
    let trend = comparison
        .trend(column, &spec.window(), metrics, measured)
        .await
        .map_err(query_error("the window's trend"))?;
    Ok(WindowCompared { total, outside_window, breakdown, trend })
}

/// One rehearsed slice to compare with the target: its measures, row changes, checks and reconcile.
/// It owns what it needs, so it runs on a task of its own beside the next slice's write.
pub(crate) struct SliceComparison {
    /// The target and the rehearsal at this slice's commit (with the stores they are in and the
    /// table's schema), compared in a session the task makes, off the writing thread.
    pub(crate) sides: (store::Stores, DeltaTable, DeltaTable, deltalake::arrow::datatypes::SchemaRef),
    pub(crate) spec: Arc<crate::plan_file::PlanFile>,
    pub(crate) slice: crate::window::Slice,
    pub(crate) rows: SliceSource,
    pub(crate) counts: SourceCounts,
    pub(crate) lenders: Vec<crate::source::routes::Lender>,
    pub(crate) publication: crate::delta::publish::Publication,
    /// Whether both sides of the slice are small enough to be read once, into memory.
    pub(crate) in_memory: bool,
}

/// A slice compared: its report, and its source handed back for the plan's fingerprints.
pub(crate) struct Compared {
    pub(crate) report: SliceReport,
    pub(crate) checks: Vec<CheckResult>,
    pub(crate) merge_note: Option<String>,
    pub(crate) rows: SliceSource,
    /// The slice's rows and metrics day by day, for the trend.
    pub(crate) days: Vec<Day>,
    pub(crate) compare_ms: u64,
    pub(crate) checks_ms: u64,
}

impl SliceComparison {
    pub(crate) async fn run(self) -> Result<Compared, RehearsalError> {
        let SliceComparison { sides, spec, slice, rows, counts, lenders, publication, in_memory } = self;
        let started = std::time::Instant::now();
        let (stores, target, rehearsal, schema) = sides;
        let mut comparison = Comparison::new(&stores, &target, &rehearsal, schema, spec.source.dialect)
            .await
            .map_err(|e| RehearsalError::Query {
                what: "registering the target and the rehearsal".into(),
                message: e.to_string(),
            })?;
        let column = spec.target.date_column.as_str();
        let metrics = &spec.metrics;
        let what = slice.to_string();
        let predicate = slice_predicate(column, &slice);
        comparison.focus(predicate, in_memory).await.map_err(query_error(&what))?;
        let (before, after) = comparison.measure_slice(metrics).await.map_err(query_error(&what))?;
        let days = comparison.measure_days(column, metrics).await.map_err(query_error(&what))?;
        let changes = match &spec.target.key {
            Some(key) => Some(
                comparison
                    .slice_changes(key, spec.diff.samples as usize, &spec.diff.by)
                    .await
                    .map_err(query_error(&what))?,
            ),
            None => None,
        };
        comparison.register_slice(&rows.ctx, Side::After).await.map_err(query_error(&what))?;
        let mut compare_ms = started.elapsed().as_millis() as u64;
        let checking = std::time::Instant::now();
        let mut checks = Vec::with_capacity(spec.checks.len() + 1);
        for check in &spec.checks {
            let result = checks::run_check(&rows.ctx, check, slice.index)
                .await
                .map_err(|message| RehearsalError::Query { what: what.clone(), message })?;
            checks.push(result);
        }
        let checks_ms = checking.elapsed().as_millis() as u64;
        let rest = std::time::Instant::now();
        let mut merge_note = None;
        if let (WriteMode::Merge, Some(key)) = (spec.write.mode, &spec.target.key) {
            let keys = comparison.slice_key_report(Side::Before, key, 5).await.map_err(query_error(&what))?;
            if keys.repeated > 0 {
                merge_note = Some(format!(
                    "{slice}: the table holds several rows for {}; a source row for such a key replaces all of them: {}",
                    crate::words::count(keys.repeated, "key"),
                    keys.samples.join("; ")
                ));
            }
        }
        let missing = match (spec.write.mode, &spec.target.key) {
            (WriteMode::Merge, Some(key)) => missing_keys(&rows, key).await.map_err(query_error(&what))?,
            _ => counts.written().abs_diff(after.rows),
        };
        compare_ms += rest.elapsed().as_millis() as u64;
        // Only the source's files are needed from here on: let the rehearsal's version go.
        rows.ctx.deregister_table("slice").map_err(query_error(&what))?;
        checks.push(checks::reconcile(
            slice.index,
            &crate::words::days(slice.first, slice.last),
            counts.written(),
            counts.from_other_slices,
            after.rows,
            missing,
        ));
        let report = SliceReport {
            index: slice.index,
            first: slice.first,
            last: slice.last,
            run_date: slice.run_date,
            predicate: slice_predicate_sql(column, &slice),
            source: counts,
            lenders,
            blast_radius: Some(BlastRadius::of(&publication, after.rows)),
            before,
            after,
            changes,
            publication: Some(publication),
        };
        Ok(Compared { report, checks, merge_note, rows, days, compare_ms, checks_ms })
    }
}

/// The outcome of a slice's comparison task; a task that panicked is an error, not a hang.
pub(crate) async fn finished(
    task: tokio::task::JoinHandle<Result<Compared, RehearsalError>>,
) -> Result<Compared, RehearsalError> {
    task.await
        .map_err(|e| RehearsalError::Query { what: "comparing a slice".into(), message: e.to_string() })?
}

/// Rows outside the window, compared where they can differ. A file the rehearsal shares with the
/// target is the same file (the clone references it, deletion vector included), so only the
/// files the slices replaced and the files they wrote are read: a one-month plan on a three-year
/// table reads one month's files, not three years. Where the rewritten files cannot be read on
/// their own (partition columns other than the date live in the log, not in the files; deletion
/// vectors; column mapping), every row outside the window is compared.
async fn compare_outside(
    target: &DeltaTable,
    rehearsal: &DeltaTable,
    comparison: &Comparison,
    column: &str,
    rewritten: &[Window],
    outside: Expr,
    metrics: &[Metric],
) -> DfResult<OutsideWindow> {
    let files = |e: DeltaTableError| DataFusionError::External(Box::new(e));
    let before = live_files(target).await.map_err(files)?;
    let after = live_files(rehearsal).await.map_err(files)?;
    let thinned: BTreeSet<String> =
        before.with_deletion_vectors.union(&after.with_deletion_vectors).cloned().collect();
    let (before, after) = (before.files, after.files);
    let replaced: Vec<String> = before.keys().filter(|f| !after.contains_key(*f)).cloned().collect();
    let written: Vec<String> = after.keys().filter(|f| !before.contains_key(*f)).cloned().collect();
    let counts = |o: OutsideWindow| OutsideWindow {
        shared_files: (before.len() - replaced.len()) as u64,
        replaced_files: replaced.len() as u64,
        written_files: written.len() as u64,
        ..o
    };
    let partitions = table::partition_columns(target);
    if partitions.iter().any(|p| p == column) {
        // Each file holds one day: files of days inside the window hold no row outside it.
        let physical = table::physical_name(target, column);
        let inside = |values: &HashMap<String, Option<String>>| {
            values
                .get(&physical)
                .cloned()
                .flatten()
                .and_then(|d| d.parse().ok())
                .is_some_and(|d| rewritten.iter().any(|range| range.contains(d)))
        };
        if replaced.iter().all(|f| inside(&before[f])) && written.iter().all(|f| inside(&after[f])) {
            let none = comparison.measure_files(&[], outside, metrics).await?;
            return Ok(counts(OutsideWindow {
                before: none.clone(),
                after: none,
                unchanged: true,
                ..Default::default()
            }));
        }
    }
    // Files read on their own show the rows their deletion vectors delete, and a column-mapped
    // table's columns under physical names (its date reads as NULL): compare through the tables.
    if !partitions.is_empty()
        || table::maps_columns(target)
        || replaced.iter().chain(&written).any(|f| thinned.contains(f))
    {
        return compare_all_outside(comparison, outside, metrics).await;
    }
    let before = comparison.measure_files(&replaced, outside.clone(), metrics).await?;
    let after = comparison.measure_files(&written, outside, metrics).await?;
    Ok(counts(OutsideWindow::compared(before, after)))
}

/// Every row outside the window, before and after.
async fn compare_all_outside(
    comparison: &Comparison,
    outside: Expr,
    metrics: &[Metric],
) -> DfResult<OutsideWindow> {
    let before = comparison.measure(Side::Before, outside.clone(), metrics).await?;
    let after = comparison.measure(Side::After, outside, metrics).await?;
    Ok(OutsideWindow::compared(before, after))
}

/// A table's live files by their absolute location (decoded, as the log holds a clone's), with
/// their partition values: a clone's absolute paths and a table's relative paths name one file alike.
struct LiveFiles {
    files: BTreeMap<String, HashMap<String, Option<String>>>,
    /// Files whose rows a deletion vector thins: read on their own, they would show deleted rows.
    with_deletion_vectors: BTreeSet<String>,
}

async fn live_files(table: &DeltaTable) -> Result<LiveFiles, DeltaTableError> {
    let root =
        percent_encoding::percent_decode_str(table.table_url().as_str()).decode_utf8_lossy().into_owned();
    let files: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await?;
    let mut live = LiveFiles { files: BTreeMap::new(), with_deletion_vectors: BTreeSet::new() };
    for file in files {
        let path = file.path();
        let location = match store::uri(&path) {
            Some(_) => path.into_owned(),
            None => format!("{root}{path}"),
        };
        if file.deletion_vector_descriptor().is_some() {
            live.with_deletion_vectors.insert(location.clone());
        }
        live.files.insert(location, file.partition_values_map());
    }
    Ok(live)
}

/// Source rows whose key is not in the rehearsed slice (a merge keeps other rows, so counts alone
/// cannot tell).
async fn missing_keys(rows: &SliceSource, key: &[String]) -> deltalake::datafusion::error::Result<u64> {
    rows.ctx.deregister_table("__bf_source")?;
    rows.ctx.register_table("__bf_source", rows.rows.clone().into_view())?;
    let on = key
        .iter()
        .map(|k| format!("t.{0} = s.{0}", crate::rehearse::diff::ident(k)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let sql =
        format!("SELECT COUNT(*) FROM __bf_source s WHERE NOT EXISTS (SELECT 1 FROM slice t WHERE {on})");
    let batches = rows.ctx.sql(&sql).await?.collect().await?;
    let count = batches
        .first()
        .and_then(|b| deltalake::datafusion::common::ScalarValue::try_from_array(b.column(0), 0).ok())
        .and_then(|v| {
            if let deltalake::datafusion::common::ScalarValue::Int64(Some(n)) = v {
                Some(n as u64)
            } else {
                None
            }
        })
        .unwrap_or(0);
    Ok(count)
}

/// A `[diff] by` whose values make more groups than a breakdown holds, refused at its key.
fn too_many_groups(by: &[String]) -> RehearsalError {
    RehearsalError::At {
        key: "diff.by".to_owned(),
        help: Some(
            "break the change down by a column with fewer values (a currency, a country, a status), or leave \
             `[diff] by` out"
                .to_owned(),
        ),
        source: Box::new(RehearsalError::Refused(format!(
            "the window's rows fall in more than {} of ({}): a breakdown names its largest few, and one by \
             a column with a value per row (an id, a timestamp) says nothing by groups",
            crate::words::count(crate::rehearse::diff::MAX_GROUPS, "group"),
            by.join(", ")
        ))),
    }
}
