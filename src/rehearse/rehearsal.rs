//! The rehearsal: the whole backfill, run on a shallow clone, measured against the real table.
//!
//! 1. Open the target at its latest version — the pre-version the plan is made against — and check
//!    the date column and the slicing (parallel slices need a table partitioned by that column).
//! 2. Shallow-clone it into the rehearsal table ([`clone`]), localizing the window's files when the
//!    table is not partitioned by the date column.
//! 3. Run every slice through the [`SliceWriter`] that `bf apply` uses, into the rehearsal: source
//!    query for the slice, one commit per slice.
//! 4. Compare ([`super::diff`]): per slice and over the window, rows and metrics before (target at
//!    the pre-version) and after (rehearsal); rows added, removed and changed by key; the breakdown;
//!    and everything outside the window, which must not have moved.
//! 5. Run the checks on each rehearsed slice, the reconcile, and the guards.
//! 6. Return the [`Plan`]: data to save, show and later apply. The target is only ever read.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use deltalake::datafusion::common::Column;
use deltalake::datafusion::error::{DataFusionError, Result as DfResult};
use deltalake::datafusion::logical_expr::{Expr, not};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use url::Url;

use crate::delta::predicate::{slice_predicate, slice_predicate_sql, window_predicate};
use crate::delta::store::{self, display_url};
use crate::delta::table::{self, TableError};
use crate::plan_file::chain::Chain;
use crate::plan_file::{Metric, OutsideRows, PlanDocument, WriteMode};
use crate::rehearse::checks::{self, CheckResult};
use crate::rehearse::clone::{self, ShallowClone};
use crate::rehearse::diff::{Comparison, Measures, Side};
use crate::rehearse::plan::{
    self, BeforeAfter, InputFingerprint, OutsideWindow, PLAN_FORMAT, Plan, PlanFileRecord, PlanTimings,
    RehearsalRecord, SliceReport, TargetRecord,
};
use crate::rehearse::slice_writer::SliceWriter;
use crate::source::run::{DeltaInput, FolderListing, SliceSource, Source, SourceCounts};
use crate::window::Window;

/// Told about each step, so a terminal can show progress; the library prints nothing itself.
pub trait Progress {
    fn slices(&self, _total: usize) {}
    fn slice_written(&self, _index: usize, _first: &str) {}
    fn step(&self, _what: &str) {}
}

/// Progress nobody watches.
pub struct Quiet;
impl Progress for Quiet {}

#[derive(Debug, thiserror::Error)]
pub enum RehearsalError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Open(#[from] crate::delta::store::OpenError),
    #[error(transparent)]
    Clone(#[from] clone::CloneError),
    #[error(transparent)]
    Source(#[from] crate::source::run::SourceError),
    #[error(transparent)]
    Write(#[from] crate::rehearse::slice_writer::WriteError),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Unsupported(#[from] crate::delta::compat::Unsupported),
    #[error("{what}: {message}")]
    Query { what: String, message: String },
    #[error("downstream plan {plan}: {source}")]
    Downstream { plan: String, source: Box<RehearsalError> },
}

fn query_error(
    what: impl Into<String>,
) -> impl FnOnce(deltalake::datafusion::error::DataFusionError) -> RehearsalError {
    let what = what.into();
    move |e| RehearsalError::Query { what, message: e.to_string() }
}

/// Slices of at most this many rows (the log's bound on the table's, plus the source's) are compared
/// from memory: each side read once instead of once per query. Bigger ones are read as often as
/// the queries need, so `bf plan`'s memory does not grow with a slice (docs/BENCHMARKS.md, W3).
const IN_MEMORY_ROWS: u64 = 1_000_000;

/// Rehearses the plan and returns it as a saved-plan value.
/// Rehearses a chain: its first plan, then each downstream plan reading the rehearsals of the
/// tables above it (its Delta inputs naming them are redirected), so the reviewer sees the
/// dashboard table move with the table it is built from before anything is written. The plans of
/// the plan's folder that read one of the chain's tables without being in it are warned about.
pub async fn rehearse_chain(chain: &Chain, progress: &dyn Progress) -> Result<Plan, RehearsalError> {
    let mut plan = rehearse_below(chain, &[], progress).await?;
    plan.warnings.extend(chain.undeclared_readers());
    Ok(plan)
}

fn rehearse_below<'a>(
    chain: &'a Chain,
    redirects: &'a [DeltaInput],
    progress: &'a dyn Progress,
) -> futures::future::LocalBoxFuture<'a, Result<Plan, RehearsalError>> {
    Box::pin(async move {
        let mut plan = rehearse(&chain.document, redirects, progress).await?;
        let mut below = redirects.to_vec();
        below.push(DeltaInput {
            input: String::new(),
            uri: plan.rehearsal.uri.clone(),
            version: plan.rehearsal.version,
            stands_for: Some(plan.target.uri.clone()),
        });
        for downstream in &chain.downstream {
            let rehearsed = rehearse_below(downstream, &below, progress).await.map_err(|e| match e {
                nested @ RehearsalError::Downstream { .. } => nested,
                other => RehearsalError::Downstream {
                    plan: downstream.document.path.display().to_string(),
                    source: Box::new(other),
                },
            })?;
            plan.downstream.push(rehearsed);
        }
        Ok(plan)
    })
}

/// Rehearses one plan; `redirects` are the upstream tables its Delta inputs read from their
/// rehearsals instead.
pub async fn rehearse(
    document: &PlanDocument,
    redirects: &[DeltaInput],
    progress: &dyn Progress,
) -> Result<Plan, RehearsalError> {
    let spec = &document.plan;
    let stores = document.stores();
    let mut timings = PlanTimings::default();
    let mut watch = Stopwatch::start();
    let target = open_target(document, &stores, progress).await?;
    let pre_version = target.table.version().unwrap_or(0);
    let column = spec.target.date_column.as_str();

    timings.open += watch.lap();
    progress.step("cloning the target");
    let mut clone = ShallowClone::new(&target.table, target.rehearsal_url.clone(), &stores);
    if !target.partitioned_by_date(column) {
        // Merge slices are replaceWheres too (crate::rehearse::slice_writer): the same files are rewritten.
        clone = clone.with_localized_window(column, spec.window());
    }
    let (rehearsal, clone_metrics) = clone.execute().await?;
    timings.clone += watch.lap();

    let schema = table::arrow_schema(&target.table)?;
    let generated = crate::delta::row_rules::generated_columns(&target.table);
    let id = plan_id();
    let source = Source::new(document, schema.clone())
        .with_computed_columns(generated.iter().map(String::as_str))
        .with_redirects(redirects);
    let run = SliceRun {
        document,
        stores: &stores,
        target: &target,
        writer: SliceWriter::for_plan(spec),
        id: &id,
        source: &source,
        schema: schema.clone(),
        localized: &clone_metrics.localized,
        progress,
    };
    let slices = spec.slices();
    let (rehearsal, compared) = run.write_slices(&slices, rehearsal, &mut timings, &mut watch).await?;
    watch.lap();
    progress.step("comparing before and after");
    let Gathered { reports, check_results, merge_notes, sources } = gather(compared, &mut timings);

    let window = spec.window();
    let (total, outside_window, breakdown) =
        compare_window(spec, &stores, &target.table, &rehearsal, schema, &reports).await?;
    timings.compare += watch.lap();
    let guards = checks::run_guards(&spec.guards, &total.before, &total.after);
    let warnings = warnings(&stores, &target, spec, merge_notes)?;
    let problems = problems(spec, &window, &reports, &outside_window, &check_results, &guards);

    Ok(Plan {
        format: PLAN_FORMAT,
        id,
        created_at: chrono::Utc::now(),
        plan_file: plan_file_record(document),
        reason: spec.reason.clone(),
        target: TargetRecord {
            uri: target.url.to_string(),
            table: spec.target.table.clone(),
            pre_version,
            date_column: column.to_owned(),
            key: spec.target.key.clone(),
            partition_columns: target.partition_columns,
        },
        window,
        every: spec.slicing.every.to_string(),
        mode: spec.write.mode,
        rehearsal: RehearsalRecord {
            uri: target.rehearsal_url.to_string(),
            version: rehearsal.version().unwrap_or(0),
            table_id: rehearsal.snapshot().ok().map(|s| s.metadata().id().to_owned()),
            clone: clone_metrics,
        },
        inputs: {
            watch.lap();
            let inputs = fingerprints(&stores, &sources).await?;
            timings.fingerprint += watch.lap();
            timings.total = watch.total();
            inputs
        },
        input_folders: folders(&sources),
        delta_inputs: source.delta_inputs(),
        slices: reports,
        total,
        outside_window,
        breakdown_by: spec.diff.by.clone(),
        breakdown,
        checks: check_results,
        guards,
        problems,
        warnings,
        timings,
        downstream: Vec::new(),
    })
}

/// The slices compared, gathered in the plan's order, their times added to the plan's.
struct Gathered {
    reports: Vec<SliceReport>,
    check_results: Vec<CheckResult>,
    merge_notes: Vec<String>,
    sources: Vec<(SliceSource, SourceCounts)>,
}

fn gather(compared: Vec<Compared>, timings: &mut PlanTimings) -> Gathered {
    let mut gathered = Gathered {
        reports: Vec::with_capacity(compared.len()),
        check_results: Vec::new(),
        merge_notes: Vec::new(),
        sources: Vec::with_capacity(compared.len()),
    };
    for done in compared {
        timings.compare += done.compare_ms;
        timings.checks += done.checks_ms;
        gathered.check_results.extend(done.checks);
        gathered.merge_notes.extend(done.merge_note);
        gathered.sources.push((done.rows, done.report.source));
        gathered.reports.push(done.report);
    }
    gathered
}

/// The plan file as the saved plan pins it: its text and the sha256 the seal checks it by.
fn plan_file_record(document: &PlanDocument) -> PlanFileRecord {
    PlanFileRecord {
        // Absolute, so `bf apply` finds the file (and the inputs) from any directory.
        path: document.path.canonicalize().unwrap_or_else(|_| document.path.clone()).display().to_string(),
        sha256: plan::sha256_hex(document.text.as_bytes()),
        text: document.text.clone(),
    }
}

/// What the reviewer should know that does not stop the apply: a retention shorter than the undo
/// must stay possible, a store whose commits are not safe, what a merge did.
fn warnings(
    stores: &store::Stores,
    target: &Target,
    spec: &crate::plan_file::PlanFile,
    merge_notes: Vec<String>,
) -> Result<Vec<String>, RehearsalError> {
    let mut warnings = retention_warnings(&target.table, spec.record.keep_undo_for.0)?;
    if let Err(unsafe_commits) = stores.require_safe_commits(&target.url) {
        warnings.push(format!("`bf apply` will refuse to write to {unsafe_commits}"));
    }
    warnings.extend(merge_notes);
    Ok(warnings)
}

/// The target, opened and found writable, and where its rehearsal goes.
struct Target {
    url: Url,
    table: DeltaTable,
    partition_columns: Vec<String>,
    rehearsal_url: Url,
}

impl Target {
    fn partitioned_by_date(&self, column: &str) -> bool {
        self.partition_columns == [column]
    }
}

/// Step 1: open the target at its latest version and refuse what the rehearsal or the apply could
/// not do: a table bf may not write, a date column that is not one, parallel slices on a table not
/// partitioned by it, a log table bf may not append to, a rehearsal that would be the target.
async fn open_target(
    document: &PlanDocument,
    stores: &store::Stores,
    progress: &dyn Progress,
) -> Result<Target, RehearsalError> {
    let spec = &document.plan;
    let target_url = store::table_url(&document.resolve(&spec.target.table))?;
    progress.step("opening the target");
    let target = stores.open(&target_url, None).await?;
    let column = spec.target.date_column.as_str();
    crate::delta::compat::check_writable(&target).await?;
    table::check_date_column(&target, column)?;
    if let Some(log) = document.log_table()? {
        crate::delta::compat::check_log_table(stores, &log).await?;
    }
    let partition_columns = table::partition_columns(&target);
    let partitioned_by_date = partition_columns == [column];
    if spec.slicing.parallel > 1 && !partitioned_by_date {
        return Err(RehearsalError::Refused(format!(
            "`slicing.parallel = {}` needs a table partitioned by `{column}`, and {} is {}: concurrent replaceWhere \
             commits on it conflict (ConcurrentAppend) and all but one fail. Use `parallel = 1`, or partition the \
             table by `{column}` so each slice replaces its own partitions.",
            spec.slicing.parallel,
            display_url(&target_url),
            if partition_columns.is_empty() {
                "not partitioned".to_owned()
            } else {
                format!("partitioned by {}", partition_columns.join(", "))
            },
        )));
    }
    if spec.slicing.parallel > 1 {
        stores
            .require_one_writer(&target_url, Some("`slicing.parallel` slices at once"))
            .map_err(|e| RehearsalError::Refused(e.to_string()))?;
    }
    let rehearsal_url = document.rehearsal_url(&target_url)?;
    // A rehearsal is replaced by every plan: it must be neither the target, nor inside it, nor
    // hold it, nor a bucket's root.
    if rehearsal_url.path_segments().is_none_or(|mut s| s.all(str::is_empty)) {
        return Err(RehearsalError::Refused(format!(
            "the rehearsal table {} is the root of a bucket: choose a folder of its own",
            display_url(&rehearsal_url)
        )));
    }
    if store::nested(&rehearsal_url, &target_url) {
        return Err(RehearsalError::Refused(format!(
            "the rehearsal table {} is the target table, or inside it, or holds it: choose a folder of its own",
            display_url(&rehearsal_url)
        )));
    }
    Ok(Target { url: target_url, table: target, partition_columns, rehearsal_url })
}

/// What writing the slices into the rehearsal needs.
struct SliceRun<'a, 's> {
    document: &'a PlanDocument,
    stores: &'a store::Stores,
    target: &'a Target,
    writer: SliceWriter,
    id: &'a str,
    source: &'a Source<'s>,
    schema: deltalake::arrow::datatypes::SchemaRef,
    localized: &'a BTreeMap<String, String>,
    progress: &'a dyn Progress,
}

impl SliceRun<'_, '_> {
    /// Step 3: each slice's source run, written into the rehearsal in one commit, recorded for
    /// publishing, and compared with the target on a task of its own while the next one is written:
    /// deltalake's write of an unpartitioned slice keeps one core busy, the comparison the other.
    /// One slice's comparison at a time, so at most two slices are held in memory.
    async fn write_slices(
        &self,
        slices: &[crate::window::Slice],
        mut rehearsal: DeltaTable,
        timings: &mut PlanTimings,
        watch: &mut Stopwatch,
    ) -> Result<(DeltaTable, Vec<Compared>), RehearsalError> {
        let spec = &self.document.plan;
        let column = spec.target.date_column.as_str();
        self.progress.slices(slices.len());
        // Unreadable bounds only mean every slice is read by each query, as big ones are.
        let bounds = table::RowBounds::read(&self.target.table, column).await.ok();
        let shared_spec = Arc::new(spec.clone());
        let mut comparing: Option<tokio::task::JoinHandle<Result<Compared, RehearsalError>>> = None;
        let mut compared: Vec<Compared> = Vec::with_capacity(slices.len());
        for slice in slices {
            watch.lap();
            let (rows, counts) = self.source.for_slice_counted(slice).await?;
            check_merge_keys(spec, slice, &rows).await?;
            timings.source += watch.lap();
            rehearsal = self
                .writer
                .write(rehearsal, slice, &rows, crate::delta::ledger::rehearsal_commit(self.id, slice.index))
                .await?;
            timings.write += watch.lap();
            // What `bf apply` will publish: this commit's files, and the target's files it replaces.
            let version = rehearsal.version().unwrap_or(0);
            let publication = crate::delta::publish::record(
                self.stores,
                &rehearsal,
                version,
                &self.target.url,
                self.localized,
            )
            .await
            .map_err(|e| RehearsalError::Query {
                what: format!("slice {} ({})", slice.index, slice.first),
                message: format!("recording what publishing it takes: {e}"),
            })?;
            timings.record += watch.lap();
            self.progress.slice_written(slice.index, &slice.first.to_string());
            if let Some(previous) = comparing.take() {
                compared.push(finished(previous).await?);
            }
            // The rehearsal at this slice's commit holds the slice's rows as its last version will:
            // slices never share a day.
            let before_rows = bounds.as_ref().and_then(|b| b.in_slice(slice));
            let in_memory = before_rows.is_some_and(|before| before + counts.in_slice <= IN_MEMORY_ROWS);
            let job = SliceComparison {
                sides: (
                    self.stores.clone(),
                    self.target.table.clone(),
                    rehearsal.clone(),
                    self.schema.clone(),
                ),
                spec: shared_spec.clone(),
                slice: *slice,
                rows,
                counts,
                publication,
                in_memory,
            };
            comparing = Some(tokio::spawn(job.run()));
            // Waiting for the comparison before is not a step of its own: the task times itself.
            watch.lap();
        }
        if let Some(last) = comparing.take() {
            compared.push(finished(last).await?);
        }
        Ok((rehearsal, compared))
    }
}

/// A merge slice's source must hold one row per key, none of them NULL.
async fn check_merge_keys(
    spec: &crate::plan_file::PlanFile,
    slice: &crate::window::Slice,
    rows: &SliceSource,
) -> Result<(), RehearsalError> {
    let (WriteMode::Merge, Some(key)) = (spec.write.mode, &spec.target.key) else { return Ok(()) };
    let what = format!("slice {} ({})", slice.index, slice.first);
    let keys =
        crate::rehearse::diff::key_report(rows.rows.clone(), key, 5).await.map_err(query_error(&what))?;
    let refused = |why: String| {
        RehearsalError::Refused(format!("slice {} ({}..{}): {why}", slice.index, slice.first, slice.last))
    };
    // A NULL key matches nothing: each rerun of the merge would add the row again.
    if keys.null_rows > 0 {
        return Err(refused(format!(
            "{} source rows have a NULL in the key ({}), and a merge matches rows by key",
            keys.null_rows,
            key.join(", ")
        )));
    }
    // A merge takes one source row per key; two would leave the slice's result to chance.
    if keys.repeated > 0 {
        return Err(refused(format!(
            "the source has several rows for {} key(s), and a merge needs one row per key: {}",
            keys.repeated,
            keys.samples.join("; ")
        )));
    }
    Ok(())
}

/// Step 4, over the window: its totals before and after, everything outside it (which must not
/// have moved), and the `[diff] by` breakdown.
async fn compare_window(
    spec: &crate::plan_file::PlanFile,
    stores: &store::Stores,
    target: &DeltaTable,
    rehearsal: &DeltaTable,
    schema: deltalake::arrow::datatypes::SchemaRef,
    reports: &[SliceReport],
) -> Result<(BeforeAfter, OutsideWindow, Vec<crate::rehearse::diff::BreakdownRow>), RehearsalError> {
    let comparison =
        Comparison::new(stores, target, rehearsal, schema).await.map_err(|e| RehearsalError::Query {
            what: "registering the target and the rehearsal".into(),
            message: e.to_string(),
        })?;
    let metrics = &spec.metrics;
    let column = spec.target.date_column.as_str();
    let window = spec.window();
    let in_window = window_predicate(column, &window);
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
    let outside_window = compare_outside(target, rehearsal, &comparison, column, &window, outside, metrics)
        .await
        .map_err(query_error("outside the window"))?;
    let breakdown = if spec.diff.by.is_empty() {
        Vec::new()
    } else {
        comparison
            .breakdown(in_window, spec.target.key.as_deref(), &spec.diff.by, metrics)
            .await
            .map_err(query_error("the [diff] by breakdown"))?
    };
    Ok((total, outside_window, breakdown))
}

/// Step 6: what stops `bf apply`: rows outside the window moved, source rows no slice writes, a
/// failed check or guard.
fn problems(
    spec: &crate::plan_file::PlanFile,
    window: &Window,
    reports: &[SliceReport],
    outside_window: &OutsideWindow,
    check_results: &[CheckResult],
    guards: &[crate::rehearse::checks::GuardResult],
) -> Vec<String> {
    let column = spec.target.date_column.as_str();
    let mut problems = Vec::new();
    if !outside_window.unchanged {
        problems.push("rows outside the window changed in the rehearsal".to_owned());
    }
    // Every slice runs the query; a NULL date shows in each, so the largest count is the number.
    let null_dates = reports.iter().map(|s| s.source.null_date).max().unwrap_or(0);
    if null_dates > 0 {
        problems.push(format!(
            "{null_dates} source rows have a NULL {column}: no slice would write them; fix the query or the input"
        ));
    }
    if spec.source.outside_window == OutsideRows::Refuse
        && let Some(worst) = reports.iter().max_by_key(|s| s.source.outside_window)
        && worst.source.outside_window > 0
    {
        problems.push(format!(
            "{} source rows of slice {}'s run fall outside the window {window}: no slice would write them; \
             filter the query (e.g. WHERE {column} BETWEEN $start AND $end) or set source.outside_window = \"skip\"",
            worst.source.outside_window, worst.index
        ));
    }
    for check in check_results.iter().filter(|c| !c.passed) {
        problems.push(format!("check `{}` failed on slice {}: {}", check.name, check.slice, check.detail));
    }
    for guard in guards.iter().filter(|g| !g.passed) {
        problems.push(format!("guard {} failed: {}", guard.name, guard.detail));
    }
    problems
}

/// One rehearsed slice to compare with the target: its measures, row changes, checks and reconcile.
/// It owns what it needs, so it runs on a task of its own beside the next slice's write.
struct SliceComparison {
    /// The target and the rehearsal at this slice's commit (with the stores they are in and the
    /// table's schema), compared in a session the task makes, off the writing thread.
    sides: (store::Stores, DeltaTable, DeltaTable, deltalake::arrow::datatypes::SchemaRef),
    spec: Arc<crate::plan_file::PlanFile>,
    slice: crate::window::Slice,
    rows: SliceSource,
    counts: SourceCounts,
    publication: crate::delta::publish::Publication,
    /// Whether both sides of the slice are small enough to be read once, into memory.
    in_memory: bool,
}

/// A slice compared: its report, and its source handed back for the plan's fingerprints.
struct Compared {
    report: SliceReport,
    checks: Vec<CheckResult>,
    merge_note: Option<String>,
    rows: SliceSource,
    compare_ms: u64,
    checks_ms: u64,
}

impl SliceComparison {
    async fn run(self) -> Result<Compared, RehearsalError> {
        let SliceComparison { sides, spec, slice, rows, counts, publication, in_memory } = self;
        let started = std::time::Instant::now();
        let (stores, target, rehearsal, schema) = sides;
        let mut comparison = Comparison::new(&stores, &target, &rehearsal, schema).await.map_err(|e| {
            RehearsalError::Query {
                what: "registering the target and the rehearsal".into(),
                message: e.to_string(),
            }
        })?;
        let column = spec.target.date_column.as_str();
        let metrics = &spec.metrics;
        let what = format!("slice {} ({})", slice.index, slice.first);
        let predicate = slice_predicate(column, &slice);
        comparison.focus(predicate.clone(), in_memory).await.map_err(query_error(&what))?;
        let before = comparison.measure_slice(Side::Before, metrics).await.map_err(query_error(&what))?;
        let after = comparison.measure_slice(Side::After, metrics).await.map_err(query_error(&what))?;
        let changes = match &spec.target.key {
            Some(key) => Some(
                comparison
                    .slice_changes(key, spec.diff.samples as usize)
                    .await
                    .map_err(query_error(&what))?,
            ),
            None => None,
        };
        comparison.register_slice(&rows.ctx, Side::After, predicate).await.map_err(query_error(&what))?;
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
                    "slice {} ({}): the table holds several rows for {} key(s); a source row for such a key replaces all of them: {}",
                    slice.index,
                    slice.first,
                    keys.repeated,
                    keys.samples.join("; ")
                ));
            }
        }
        let missing = match (spec.write.mode, &spec.target.key) {
            (WriteMode::Merge, Some(key)) => missing_keys(&rows, key).await.map_err(query_error(&what))?,
            _ => counts.in_slice.abs_diff(after.rows),
        };
        compare_ms += rest.elapsed().as_millis() as u64;
        // Only the source's files are needed from here on: let the rehearsal's version go.
        rows.ctx.deregister_table("slice").map_err(query_error(&what))?;
        checks.push(checks::reconcile(
            slice.index,
            &slice.first.to_string(),
            counts.in_slice,
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
            before,
            after,
            changes,
            publication: Some(publication),
        };
        Ok(Compared { report, checks, merge_note, rows, compare_ms, checks_ms })
    }
}

/// The outcome of a slice's comparison task; a task that panicked is an error, not a hang.
async fn finished(
    task: tokio::task::JoinHandle<Result<Compared, RehearsalError>>,
) -> Result<Compared, RehearsalError> {
    task.await
        .map_err(|e| RehearsalError::Query { what: "comparing a slice".into(), message: e.to_string() })?
}

/// Warnings for retention settings shorter than the undo must last: VACUUM past them deletes the
/// files a rollback to the pre-version needs.
fn retention_warnings(target: &deltalake::DeltaTable, keep_days: u32) -> Result<Vec<String>, RehearsalError> {
    use deltalake::table::config::TablePropertiesExt;
    let keep = std::time::Duration::from_secs(u64::from(keep_days) * 86_400);
    let snapshot = target.snapshot().map_err(|e| RehearsalError::Refused(e.to_string()))?;
    let config = snapshot.table_config();
    let settings = [
        (
            "delta.deletedFileRetentionDuration",
            "VACUUM may delete the files it needs",
            config.deleted_file_retention_duration(),
        ),
        (
            "delta.logRetentionDuration",
            "log cleanup may delete its versions",
            config.log_retention_duration(),
        ),
    ];
    Ok(settings
        .into_iter()
        .filter(|(_, _, kept)| *kept < keep)
        .map(|(name, risk, kept)| {
            format!(
                "{name} is {:.1} days, less than [record] keep_undo_for = {keep_days} days: after that, {risk} and this backfill cannot be rolled back",
                kept.as_secs_f64() / 86_400.0
            )
        })
        .collect())
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
    window: &Window,
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
                .is_some_and(|d| window.contains(d))
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

/// Every folder the slices' inputs read, each once.
fn folders(sources: &[(SliceSource, SourceCounts)]) -> Vec<FolderListing> {
    let mut folders: BTreeMap<String, FolderListing> = BTreeMap::new();
    for folder in sources.iter().flat_map(|(s, _)| &s.folders) {
        folders.entry(folder.location.clone()).or_insert_with(|| folder.clone());
    }
    folders.into_values().collect()
}

/// Fingerprints of every input file the slices read, each file once.
async fn fingerprints(
    stores: &store::Stores,
    sources: &[(SliceSource, SourceCounts)],
) -> Result<Vec<InputFingerprint>, RehearsalError> {
    let mut files: BTreeMap<&url::Url, &str> = BTreeMap::new();
    for file in sources.iter().flat_map(|(s, _)| &s.files) {
        files.entry(&file.url).or_insert(&file.input);
    }
    let located: Vec<(String, store::Location)> =
        files.iter().map(|(url, input)| (input.to_string(), store::Location::Uri((*url).clone()))).collect();
    plan::fingerprint_all(stores, &located)
        .await
        .into_iter()
        .zip(files.keys())
        .map(|(fingerprint, url)| {
            fingerprint.map_err(|e| {
                RehearsalError::Refused(format!("cannot fingerprint input file {}: {e}", display_url(url)))
            })
        })
        .collect()
}

/// A plan id: sortable by time, unique by a random suffix.
fn plan_id() -> String {
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%SZ"), &uuid[..8])
}

/// Milliseconds between laps, and since the start.
struct Stopwatch {
    started: std::time::Instant,
    last: std::time::Instant,
}

impl Stopwatch {
    fn start() -> Stopwatch {
        let now = std::time::Instant::now();
        Stopwatch { started: now, last: now }
    }

    /// Milliseconds since the last lap.
    fn lap(&mut self) -> u64 {
        let now = std::time::Instant::now();
        let millis = now.duration_since(self.last).as_millis() as u64;
        self.last = now;
        millis
    }

    fn total(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}
