//! The rehearsal: the whole backfill, run on a shallow clone, measured against the real table.
//! This file runs the steps in order; each step lives in a file of its own.
//!
//! 1. Open the target at its latest version — the pre-version the plan is made against — and check
//!    the date column and the slicing ([`super::target`]).
//! 2. Shallow-clone it into the rehearsal table ([`super::clone`]), localizing the window's files
//!    when the table is not partitioned by the date column.
//! 3. Run every slice through the [`SliceWriter`] that `bf apply` uses, into the rehearsal: source
//!    query for the slice, one commit per slice ([`super::write`]).
//! 4. Compare ([`super::compare`], with [`super::diff`]'s measures): per slice and over the window,
//!    rows and metrics before (target at the pre-version) and after (rehearsal); rows added, removed
//!    and changed by key; the breakdown; and everything outside the window, which must not move.
//! 5. Run the checks on each rehearsed slice, the reconcile, and the guards.
//! 6. Return the [`Plan`]: data to save, show and later apply. The target is only ever read.

use std::collections::BTreeMap;

use crate::delta::same_table;
use crate::delta::store::{self, display_url};
use crate::delta::table;
use crate::plan_file::PlanDocument;
use crate::plan_file::chain::Chain;
use crate::rehearse::checks::CheckResult;
use crate::rehearse::clone::ShallowClone;
use crate::rehearse::compare::{Compared, WindowCompared, compare_window};
use crate::rehearse::deleted_keys::Search;
use crate::rehearse::guards;
use crate::rehearse::plan::{
    self, BlastRadius, InputFingerprint, PLAN_FORMAT, Plan, PlanFileRecord, PlanTimings, RehearsalRecord,
    SliceReport, TargetRecord,
};
use crate::rehearse::slice_writer::SliceWriter;
use crate::rehearse::target::{Target, open_target};
use crate::rehearse::write::SliceRun;
use crate::source::run::{DeltaInput, FolderListing, SliceSource, Source, SourceCounts};
use crate::window::Window;

pub use crate::rehearse::error::{RehearsalError, without_values};
use crate::rehearse::progress::Stopwatch;
pub use crate::rehearse::progress::{Progress, Quiet};
use crate::rehearse::sample::Preview;

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
        let mut plan = rehearse(chain, redirects, progress, None).await?;
        let mut below = redirects.to_vec();
        below.push(DeltaInput {
            input: String::new(),
            uri: plan.rehearsal.uri.clone(),
            version: plan.rehearsal.version,
            table_id: plan.rehearsal.table_id.clone(),
            commit_sha256: None,
            stands_for: Some(plan.target.uri.clone()),
            catalog: None,
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

/// A first look at a long window (`bf plan --sample N`): `n` of the plan's slices, chosen to stand
/// for the rest ([`Preview::choose`]), rehearsed as a plan rehearses them. The plan returned says
/// it is a preview, and `bf apply` refuses it. A chain's downstream plans are rehearsed on every
/// slice of the table above them, so a plan with downstream plans is previewed one plan at a time.
pub async fn preview(chain: &Chain, n: usize, progress: &dyn Progress) -> Result<Plan, RehearsalError> {
    if !chain.downstream.is_empty() {
        return Err(RehearsalError::Refused(format!(
            "`--sample` previews one table's plan, and {} has downstream plans ({}), which are rehearsed on every \
             slice of the table above them: preview each plan file on its own, or plan the chain without `--sample`",
            chain.document.path.display(),
            chain
                .downstream
                .iter()
                .map(|d| d.document.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    rehearse(chain, &[], progress, Some(n)).await
}

/// Rehearses the chain's own plan (not those downstream of it), within its scope and on its
/// cluster; `redirects` are the upstream tables its Delta inputs read from their rehearsals
/// instead. With `sample`, only that many of its slices ([`preview`]).
async fn rehearse(
    chain: &Chain,
    redirects: &[DeltaInput],
    progress: &dyn Progress,
    sample: Option<usize>,
) -> Result<Plan, RehearsalError> {
    let (document, scope) = (&chain.document, &chain.scope);
    let spec = &document.plan;
    let stores = document.stores();
    let mut timings = PlanTimings::default();
    let mut watch = Stopwatch::start();
    let target = open_target(document, scope, &stores, progress, sample.is_some()).await?;
    let pre_version = target.table.version().unwrap_or(0);
    let pre_commit_sha256 = same_table::commit_sha256(&target.table, pre_version).await.map_err(|e| {
        RehearsalError::Refused(format!("cannot read version {pre_version}'s commit of the target: {e}"))
    })?;

    let schema = table::arrow_schema(&target.table)?;
    let generated = crate::delta::row_rules::generated_columns(&target.table);
    let always = crate::delta::identity::always(&target.table).map_err(RehearsalError::Refused)?;
    let source = Source::new(document, schema.clone())
        .with_computed_columns(generated.iter().map(String::as_str))
        .with_columns_made_by_writers(always.into_iter().map(|c| c.column))
        .with_redirects(redirects)
        .within(scope)
        .on_cluster(chain.cluster.as_ref().map(|c| &c.cluster));
    let mut slices = spec.slices();
    let preview = match sample {
        Some(n) => Some(choose_preview(spec, &target, &slices, n).await?),
        None => None,
    };
    if let Some(preview) = &preview {
        slices.retain(|slice| preview.has(slice.index));
    }
    // The days the rehearsal rewrites: the window, or the runs of a preview's or `only` slices.
    let rewritten = Window::runs(&slices);
    if let Some(first) = slices.first() {
        source.pin_inputs(first).await?;
    }

    timings.open += watch.lap();
    progress.step("cloning the target");
    // A preview's rehearsal is its own, and never published from.
    let replaced = match sample {
        None => in_use(document, &target, &stores).await?,
        Some(_) => None,
    };
    let clone_metrics = clone_target(spec, &target, &stores, rewritten.clone()).await?;
    // The rehearsal opened once, through a store that checksums what its writer writes: the files
    // the saved plan records are not read back.
    let (rehearsal, written) = stores.open_checksummed(&target.rehearsal_url).await?;
    timings.clone += watch.lap();

    let id = plan_id();
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
    let routes = run.routes(&slices).await?;
    timings.source += watch.lap();
    let (rehearsal, compared) =
        run.write_slices(&slices, &routes, rehearsal, &written, &mut timings, &mut watch).await?;
    watch.lap();
    progress.step("comparing before and after");
    let Gathered { reports, check_results, merge_notes, sources, days } = gather(compared, &mut timings);
    let measured = crate::rehearse::diff::Measured { days, covered: rewritten.clone() };

    let window = spec.window();
    let WindowCompared { total, outside_window, breakdown, trend } =
        compare_window(spec, &stores, &target.table, &rehearsal, schema, &reports, &measured).await?;
    let row_changes = crate::rehearse::diff::RowCounts::sum(reports.iter().map(|r| r.changes.as_ref()));
    let deleted_keys = match &spec.target.key {
        Some(key) => {
            let search = Search {
                stores: &stores,
                target: &target.table,
                rehearsal: &rehearsal,
                key,
                date_column: &spec.target.date_column,
                rewritten: &rewritten,
            };
            Some(search.run(row_changes.map_or(0, |c| c.added)).await?)
        }
        None => None,
    };
    timings.compare += watch.lap();
    let blast_radius = BlastRadius::sum(reports.iter().filter_map(|r| r.blast_radius.as_ref()));
    let emptied_days = crate::rehearse::compare::emptied_days(&measured, &slices);
    let mut warnings = warnings(&stores, &target, spec, merge_notes)?;
    warnings.extend(deleted_keys.iter().flat_map(|d| &d.unchecked).map(|u| format!("deleted keys: {u}")));
    warnings.extend(source.type_warnings());
    let written = reports.iter().map(|r| r.source.written()).sum();
    let in_files = reports.iter().filter_map(|r| r.publication.as_ref()?.rows_written).sum();
    warnings.extend(crate::delta::row_tracking::note(&target.table, written, in_files));

    let mut plan = Plan {
        format: PLAN_FORMAT,
        id,
        created_at: chrono::Utc::now(),
        plan_file: plan_file_record(document),
        reason: spec.reason.clone(),
        target: TargetRecord {
            table_id: same_table::table_id(&target.table),
            pre_commit_sha256,
            ..target_record(spec, &target, pre_version)
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
        row_changes,
        deleted_keys,
        emptied_days,
        outside_days: routes.outside().to_vec(),
        slices: reports,
        total,
        outside_window,
        breakdown_by: spec.diff.by.clone(),
        breakdown,
        trend: Some(trend),
        checks: check_results,
        guards: Vec::new(),
        blast_radius,
        policy: None,
        frozen: target.frozen,
        unfreeze: spec.guards.unfreeze.as_ref().map(crate::plan_file::Unfreeze::approval),
        problems: Vec::new(),
        warnings,
        timings,
        downstream: Vec::new(),
        replaced_rehearsal_of: replaced,
        preview,
        source_ran_on: chain.cluster.as_ref().map(crate::cluster::Reached::ran_on),
    };
    // Step 5's guards and step 6's verdict weigh the plan as it is saved, as `bf apply` weighs it
    // again ([`super::seal`]).
    plan.guards = guards::run_guards(&spec.guards, &guards::Weighed::of(&plan));
    plan.problems = problems(spec, &plan);
    Ok(plan)
}

/// The slices a preview rehearses, chosen by the rows the table holds on each of their days.
async fn choose_preview(
    spec: &crate::plan_file::PlanFile,
    target: &Target,
    slices: &[crate::window::Slice],
    n: usize,
) -> Result<Preview, RehearsalError> {
    let window = spec.window();
    let column = &spec.target.date_column;
    let counted = crate::delta::days::rows_per_day(&target.table, column, window.start, window.end)
        .await
        .map_err(|e| RehearsalError::Query {
            what: "counting the table's rows per day".into(),
            message: e.to_string(),
        })?;
    Ok(Preview::choose(slices, n, |slice| counted.between(slice.first, slice.last)))
}

/// Before step 2: the rehearsal is replaced by every plan, so one holding the files a half-applied
/// backfill of another plan still has to publish is left alone: planning over it would leave that
/// backfill unpublishable. The same plan text planned again may replace it (its apply then runs
/// the queries again, `--recompute`). Returns the id of the plan whose rehearsal this one replaces
/// when that plan was never applied: a saved copy of it can no longer be published.
async fn in_use(
    document: &PlanDocument,
    target: &Target,
    stores: &store::Stores,
) -> Result<Option<String>, RehearsalError> {
    use crate::delta::ledger::{self, Mark};
    let url = &target.rehearsal_url;
    if !crate::rehearse::clone::is_rehearsal(stores, url).await {
        return Ok(None);
    }
    let Ok(rehearsal) = stores.open(url, None).await else { return Ok(None) };
    // A rehearsal's commits are its clone (version 0, naming the target's version it was made from)
    // and then its plan's slices, each naming the plan: the first two say whose it is.
    let first_slice = rehearsal.version().unwrap_or(0).min(1);
    let Ok(first) = ledger::read_log(&rehearsal, 0..=first_slice).await else { return Ok(None) };
    let marks: Vec<&Mark> = first.iter().filter_map(|l| l.entry.mark().ok().flatten()).collect();
    let Some(plan_id) = marks.iter().find_map(|m| match m {
        Mark::Rehearsal { plan_id, .. } => Some(plan_id.clone()),
        _ => None,
    }) else {
        return Ok(None);
    };
    // Its plan's backfills follow the version the rehearsal was cloned from.
    let cloned_from = marks
        .iter()
        .find_map(|m| match m {
            Mark::Clone { source_version, .. } => Some(*source_version),
            _ => None,
        })
        .unwrap_or(0);
    let applied = ledger::commits_after(&target.table, cloned_from)
        .await
        .map_err(|e| RehearsalError::Refused(e.to_string()))?;
    let Some(backfill_id) = ledger::backfill_ids(&applied, &plan_id).pop() else { return Ok(Some(plan_id)) };
    let Ok(Some(recorded)) = ledger::recorded(&applied, &backfill_id) else { return Ok(None) };
    let unfinished = !recorded.commented && recorded.slices.len() < recorded.backfill.slices;
    let same_text =
        recorded.backfill.plan_sha256 == crate::rehearse::plan::sha256_hex(document.text.as_bytes());
    if !unfinished || same_text || ledger::undone_at(&applied, &recorded).is_some() {
        return Ok(None);
    }
    Err(RehearsalError::Refused(format!(
        "the rehearsal {} holds the files of plan {plan_id}, whose backfill {backfill_id} is half applied to {} \
         ({} of {} slices committed; \"{}\"): planning another plan there would leave it unpublishable. \
         Finish it first (`bf apply` with its saved plan), or roll it back \
         (`bf rollback --table {} --backfill {backfill_id}`), or give this plan a rehearsal of its own \
         (`[rehearsal] table = \"…\"`). Nothing was written.",
        store::display_url(url),
        store::display_url(&target.url),
        recorded.slices.len(),
        recorded.backfill.slices,
        recorded.backfill.reason,
        store::display_url(&target.url),
    )))
}

/// Step 2: the shallow clone the slices are written into. On a table not partitioned by the date
/// the window's files are copied in, because deltalake rewrites no file outside the table's root;
/// on a table keeping row ids, a merge's too, since it copies rows the source does not name and
/// the copies hold their ids.
async fn clone_target(
    spec: &crate::plan_file::PlanFile,
    target: &Target,
    stores: &store::Stores,
    rewritten: Vec<Window>,
) -> Result<crate::rehearse::clone::CloneMetrics, RehearsalError> {
    let column = spec.target.date_column.as_str();
    let mut clone = ShallowClone::new(&target.table, target.rehearsal_url.clone(), stores);
    let keeps_row_ids = target.table.snapshot().is_ok_and(|state| {
        crate::delta::row_tracking::RowTracking::of(state).is_some_and(|t| t.materialized.is_some())
    });
    let merge_keeps_ids = spec.write.mode == crate::plan_file::WriteMode::Merge && keeps_row_ids;
    if !target.partitioned_by_date(column) || merge_keeps_ids {
        // Merge slices are replaceWheres too (crate::rehearse::slice_writer): the same files are rewritten.
        clone = clone.with_localized_days(column, rewritten);
    }
    Ok(clone.execute().await?)
}

/// The target as the saved plan records it: where it is, as written, and at which version.
fn target_record(spec: &crate::plan_file::PlanFile, target: &Target, pre_version: u64) -> TargetRecord {
    TargetRecord {
        uri: target.url.to_string(),
        table: spec.target.table.clone(),
        pre_version,
        table_id: None,
        pre_commit_sha256: None,
        date_column: spec.target.date_column.clone(),
        key: spec.target.key.clone(),
        partition_columns: target.partition_columns.clone(),
        catalog: target.catalog.clone(),
    }
}

/// The slices compared, gathered in the plan's order, their times added to the plan's.
struct Gathered {
    reports: Vec<SliceReport>,
    check_results: Vec<CheckResult>,
    merge_notes: Vec<String>,
    sources: Vec<(SliceSource, SourceCounts)>,
    /// What the slices measured day by day, for the trend.
    days: std::collections::BTreeMap<chrono::NaiveDate, crate::rehearse::diff::Day>,
}

fn gather(compared: Vec<Compared>, timings: &mut PlanTimings) -> Gathered {
    let mut gathered = Gathered {
        reports: Vec::with_capacity(compared.len()),
        check_results: Vec::new(),
        merge_notes: Vec::new(),
        sources: Vec::with_capacity(compared.len()),
        days: std::collections::BTreeMap::new(),
    };
    for done in compared {
        gathered.days.extend(done.days.into_iter().map(|d| (d.day, d)));
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
    warnings.extend(crate::delta::commit::Own::of(&target.table).note());
    Ok(warnings)
}

/// Step 6: what stops `bf apply`: rows outside the window moved, source rows no slice writes, a
/// failed check or guard.
fn problems(spec: &crate::plan_file::PlanFile, plan: &Plan) -> Vec<String> {
    let column = spec.target.date_column.as_str();
    let mut problems = Vec::new();
    if !plan.outside_window.unchanged {
        problems.push("rows outside the window changed in the rehearsal".to_owned());
    }
    // Every slice runs the query; a NULL date shows in each, so the largest count is the number.
    let null_dates = plan.slices.iter().map(|s| s.source.null_date).max().unwrap_or(0);
    if null_dates > 0 {
        problems.push(format!(
            "{} a NULL {column}: no slice would write them; fix the query or the input",
            match null_dates {
                1 => "1 source row has".to_owned(),
                n => format!("{n} source rows have"),
            }
        ));
    }
    for check in plan.checks.iter().filter(|c| !c.passed) {
        problems.push(format!("check `{}` failed on slice {}: {}", check.name, check.slice, check.detail));
    }
    for guard in plan.guards.iter().filter(|g| !g.passed) {
        problems.push(format!("guard {} failed: {}", guard.name, guard.detail));
    }
    problems
}

/// Warnings for retention settings shorter than the undo must last: VACUUM past them deletes the
/// files a rollback to the pre-version needs.
fn retention_warnings(target: &deltalake::DeltaTable, keep_days: u32) -> Result<Vec<String>, RehearsalError> {
    let risk = |name: &str| match name {
        "delta.logRetentionDuration" => "log cleanup may delete its versions",
        _ => "VACUUM may delete the files it needs",
    };
    Ok(crate::delta::retention::of(target)?
        .into_iter()
        .filter(|(_, kept)| *kept < f64::from(keep_days))
        .map(|(name, kept)| {
            format!(
                "{name} is {kept:.1} days, less than [record] keep_undo_for = {keep_days} days: after that, {} and this backfill cannot be rolled back",
                risk(name)
            )
        })
        .collect())
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
