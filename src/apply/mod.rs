//! Stage: apply. In: a saved plan ([`crate::rehearse::plan::Plan`]) and the real table. Out: the
//! rehearsed slices committed to it, one recorded commit each, a change log row, an
//! [`ApplyReport`]. It may use every stage below it, rollback included (a [`cascade`] rolls a chain
//! back when one of its tables fails); nothing below uses it.
//!
//! Applying a saved plan to the real table: exactly once per slice, resumable, recorded.
//!
//! 1. Refuse a stale plan ([`check_stale`]): the plan file edited since `bf plan`, an input file
//!    changed, a file added to or removed from an input folder, a commit to a Delta input, or a check
//!    or guard that failed; and a change log table bf may not write.
//! 2. Read which slices of this backfill the table already holds (their Delta transactions): after a
//!    crash, those are skipped and the apply resumes at the first slice not committed. Each of them
//!    is counted again: a slice whose rows differ from the rehearsal's stops every resume, retry and
//!    finish ([`ApplyError::Unverified`]).
//! 3. Refuse, naming them, the pending slices another writer's commits since the plan touch
//!    ([`Watch`], the rule in [`crate::apply::staleness`]), and published slices whose files' predecessors
//!    are not committed. Commits that touch no pending slice never block.
//! 4. For each remaining slice, in the plan's order (N at a time with `parallel = N`, which `bf plan`
//!    only allows on tables partitioned by the date column): check again that no commit touches it,
//!    then publish the files its rehearsal wrote ([`Publisher`]: exactly what the plan showed) — or,
//!    with `--recompute` or on a rerun, run the source query and write the slice through the
//!    [`SliceWriter`] the rehearsal used — in one commit carrying the ledger and the slice's
//!    transaction, then verify the table holds as many rows of the slice as the rehearsal did.
//! 5. Last, in its own metadata commit, set the table comment from `[record] comment`. Never while
//!    slices run: a metadata commit makes concurrent writers fail.
//!
//! Every write is one Delta commit or nothing, so a crash at any point leaves the table at a slice
//! boundary, and the ledger says which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use deltalake::operations::update_table_metadata::TableMetadataUpdate;
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

pub mod cascade;
pub mod change_log;
pub mod staleness;

use crate::apply::staleness::{Overtaken, Watch};
use crate::delta::ledger::{self, Backfill, Entry};
use crate::delta::publish::Publisher;
use crate::delta::store::{StoreError, Stores, display_url};
use crate::delta::table;
use crate::fault::{fault, pause_after_check, pause_before};
use crate::plan_file;
use crate::rehearse::plan::{self, Plan};
use crate::rehearse::slice_writer::SliceWriter;
use crate::source::run::{DeltaInput, FolderListing, Source};
use crate::window::Slice;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the saved plan is stale:\n{0}")]
    Stale(String),
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(transparent)]
    Open(#[from] crate::delta::store::OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    UnsafeCommits(#[from] crate::delta::store::UnsafeCommits),
    #[error(transparent)]
    Source(#[from] crate::source::run::SourceError),
    #[error(transparent)]
    Write(#[from] crate::rehearse::slice_writer::WriteError),
    #[error(
        "slice {slice} ({first}): the table holds {found} rows of it after the commit, but the rehearsal held {expected}"
    )]
    Verify { slice: usize, first: String, expected: u64, found: u64 },
    #[error(
        "slice {slice} ({first}) conflicts with another writer's commit ({kind}), so it was not written:\n{commits}\n\
         The slices committed before it stay recorded. Run `bf plan` again to plan against the new version."
    )]
    Conflict { slice: usize, first: String, kind: String, commits: String },
    #[error(
        "bf cannot publish the rehearsed slices: {0}.\nRun `bf plan` to rehearse again, or `bf apply --recompute` \
         to run each slice's query again and write its rows (what lands may then differ from what was reviewed)."
    )]
    Unpublishable(String),
    #[error("slice {slice} ({first}) was not published: {message}")]
    Publish { slice: usize, first: String, message: String },
    #[error("{}", overtaken_message(.slices, *.committed, .plan_file))]
    Overtaken { slices: Vec<(Slice, Overtaken)>, committed: usize, plan_file: String },
    #[error(
        "{}\nThe table differs from the plan there, so bf will not finish this backfill (no comment, change log \
         or notice). `bf rollback` puts the table back to the pre-version; `bf apply --rerun all` writes every \
         slice again under a new backfill id.",
        .0.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
    )]
    Unverified(Vec<Unverified>),
    #[error(
        "{}\nNothing was written. Apply them first, or run these slices with `--recompute` (a recomputed slice \
         rewrites whatever the table holds on its days).",
        .0.iter().map(|(s, before)| format!(
            "slice {} ({}) rewrites files that slices {} write: it can only be published after them",
            s.index, s.first, before.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        )).collect::<Vec<_>>().join("\n")
    )]
    OutOfOrder(Vec<(Slice, Vec<usize>)>),
    #[error("the plan has slices 1 to {count}; it has no slice {missing}")]
    NoSuchSlice { count: usize, missing: String },
    #[error(
        "the backfill cannot be finished: {count} of its slices are not committed yet: {missing}\n\
         Apply them first (`bf apply --slice N`), then finish."
    )]
    Unfinished { count: usize, missing: String },
    #[error(
        "this plan has downstream plans: a chain is applied by `bf apply` as a whole, upstream first; \
         `--slice` and `--finish` apply the slices of a plan without `[[downstream]]`"
    )]
    FanOutChain,
    #[error("{0}")]
    Delta(String),
    #[error(transparent)]
    Unsupported(#[from] crate::delta::compat::Unsupported),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
}

/// A committed slice whose rows are not the rehearsal's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    pub slice: Slice,
    /// The version that committed it, where it was counted.
    pub version: u64,
    pub expected: u64,
    pub found: u64,
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "slice {} ({}), committed at version {}, holds {} rows of its days, but the rehearsal held {}",
            self.slice.index, self.slice.first, self.version, self.found, self.expected
        )
    }
}

fn overtaken_message(slices: &[(Slice, Overtaken)], committed: usize, plan_file: &str) -> String {
    let each: Vec<String> = slices
        .iter()
        .map(|(slice, by)| {
            format!(
                "slice {} ({} to {}) was not written: since the plan, other commits touch its rows:\n{by}",
                slice.index, slice.first, slice.last
            )
        })
        .collect();
    let kept = match committed {
        0 => "No slice of this backfill is committed.".to_owned(),
        n => format!("The {n} slice(s) of this backfill already committed stay recorded."),
    };
    format!(
        "{}\n{kept} Run `bf plan {plan_file}` again: it rehearses against the table as it is now, the other \
         writers' rows included.",
        each.join("\n")
    )
}

impl From<DeltaTableError> for ApplyError {
    fn from(error: DeltaTableError) -> Self {
        ApplyError::Delta(error.to_string())
    }
}

/// What became of a slice in an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SliceStatus {
    /// This run committed it.
    Committed,
    /// An earlier run of the same backfill had committed it.
    Skipped,
}

/// What one slice's apply did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceOutcome {
    pub index: usize,
    pub first: String,
    pub last: String,
    pub status: SliceStatus,
    pub version: Option<u64>,
    pub rows: Option<u64>,
    pub source_rows: Option<u64>,
}

impl SliceOutcome {
    /// A slice committed before this run (by an earlier run, or another process).
    fn skipped(slice: &Slice) -> SliceOutcome {
        SliceOutcome {
            index: slice.index,
            first: slice.first.to_string(),
            last: slice.last.to_string(),
            status: SliceStatus::Skipped,
            version: None,
            rows: None,
            source_rows: None,
        }
    }
}

/// What an apply did, for the summary and `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyReport {
    pub backfill_id: String,
    pub table: String,
    pub pre_version: u64,
    pub post_version: u64,
    pub slices: Vec<SliceOutcome>,
    pub comment: Option<String>,
    /// The change log table the backfill was recorded in, if the plan names one.
    pub log_table: Option<String>,
}

/// Told about each slice as it lands.
pub trait ApplyProgress: Sync {
    fn slice_done(&self, _outcome: &SliceOutcome) {}
}

/// Progress nobody watches.
pub struct Silent;
impl ApplyProgress for Silent {}

/// Applies a saved plan.
pub struct Apply<'a> {
    plan: &'a Plan,
    rerun: bool,
    recompute: bool,
    cascade: Option<ledger::Cascade>,
    /// Only these slices, by number: one task of a fan-out. The end of the apply waits for `finish`.
    only: Option<BTreeSet<usize>>,
    /// No slice: the end of an apply whose slices were applied one task each.
    finish: bool,
}

/// What an apply found before writing: the plan as reviewed, the target, and its commits since the
/// plan, which the stale check held to be this plan's own.
struct Preflight {
    document: plan_file::PlanDocument,
    stores: Stores,
    target: DeltaTable,
    since: Vec<Entry>,
    log_url: Option<url::Url>,
    backfill: Backfill,
    /// The backfill's slices the table holds, each with the version that committed it.
    done: BTreeMap<usize, u64>,
    /// Whether slices are written by running their queries again: asked for, or because an earlier
    /// backfill of this plan already published the rehearsed files (a rerun).
    recompute: bool,
    watch: Watch,
}

impl<'a> Apply<'a> {
    pub fn new(plan: &'a Plan) -> Self {
        Apply { plan, rerun: false, recompute: false, cascade: None, only: None, finish: false }
    }

    /// Applies only these slices (by number), each with every guarantee of a full apply; a slice
    /// already committed, by this process or another, is a success. The table comment and the
    /// change-log row wait for [`Apply::finishing`]: an orchestrator runs slices as its tasks.
    pub fn with_only(mut self, slices: Option<BTreeSet<usize>>) -> Self {
        self.only = slices;
        self
    }

    /// Writes no slice: refuses, naming them, while any slice is not committed, and then writes
    /// the table comment and the change-log row, once.
    pub fn finishing(mut self, finish: bool) -> Self {
        self.finish = finish;
        self
    }

    /// Records the backfill's place in a chain in each of its commits.
    pub fn with_cascade(mut self, cascade: Option<ledger::Cascade>) -> Self {
        self.cascade = cascade;
        self
    }

    /// Runs each slice's query again and writes its rows, instead of publishing the rehearsed files.
    pub fn with_recompute(mut self, recompute: bool) -> Self {
        self.recompute = recompute;
        self
    }

    /// Re-applies every slice under a new backfill id, even those already committed.
    pub fn with_rerun(mut self, rerun: bool) -> Self {
        self.rerun = rerun;
        self
    }

    /// Refuses a stale plan, or a table bf may not write, without writing anything.
    pub async fn check(&self) -> Result<(), ApplyError> {
        self.preflight().await.map(drop)
    }

    async fn preflight(&self) -> Result<Preflight, ApplyError> {
        let plan = self.plan;
        // The plan as reviewed, read from the saved text (the file on disk was checked to match).
        let document = plan_file::parse(Path::new(&plan.plan_file.path), plan.plan_file.text.clone())
            .map_err(|e| ApplyError::Stale(format!("the saved plan's text no longer parses:\n{e}")))?;
        let url = url_of(plan)?;
        let stores = document.stores();
        stores.require_safe_commits(&url)?;
        let several = match (&self.only, document.plan.slicing.parallel > 1) {
            (Some(_), _) => Some("slices applied as separate tasks (`--slice`, `--slices`)"),
            (None, true) => Some("`slicing.parallel` slices at once"),
            (None, false) => None,
        };
        stores.require_one_writer(&url, several)?;
        // The inputs are fingerprinted while the table's log is read.
        let files = plan.input_files();
        let hashing = {
            let stores = stores.clone();
            tokio::spawn(async move { plan::fingerprint_all(&stores, &files).await })
        };
        let target = stores.open(&url, None).await?;
        crate::delta::compat::check_writable(&target).await?;
        // The change log is written after the last slice: a log table bf may not write is refused
        // before the first.
        let log_url = document.log_table()?;
        if let Some(log_url) = &log_url {
            stores.require_safe_commits(log_url)?;
            crate::delta::compat::check_log_table(&stores, log_url).await?;
        }
        let since = ledger::commits_after(&target, plan.target.pre_version).await?;
        let inputs_now =
            hashing.await.map_err(|e| ApplyError::Delta(format!("fingerprinting the inputs: {e}")))?;
        let folders_now = futures::future::join_all(plan.input_folders.iter().map(|f| f.now(&stores))).await;
        let delta_now = delta_input_versions(&stores, &plan.delta_inputs).await;
        check_stale(plan, &since, &Now { inputs: &inputs_now, folders: &folders_now, delta: &delta_now })?;

        let mut backfill = backfill_for(plan, &since, self.rerun);
        backfill.cascade = self.cascade.clone();
        let slices = document.plan.slices();
        if let Some(only) = &self.only {
            let unknown: Vec<String> = only
                .iter()
                .filter(|i| !slices.iter().any(|s| s.index == **i))
                .map(usize::to_string)
                .collect();
            if !unknown.is_empty() {
                return Err(ApplyError::NoSuchSlice { count: slices.len(), missing: unknown.join(", ") });
            }
        }
        let done = committed(&target, &since, &backfill, &slices).await?;
        // An earlier backfill of this plan published the rehearsed files already: they are the
        // table's now, and what a rerun rewrites is whatever the table holds on those days.
        let republishing = since
            .iter()
            .filter_map(Entry::backfill)
            .any(|b| b.plan_id == plan.id && b.backfill_id != backfill.backfill_id);
        let recompute = self.recompute || republishing;
        let watch = Watch::new(&plan.id, plan.target.pre_version, &target, &plan.target.date_column);
        let preflight =
            Preflight { document, stores, target, since, log_url, backfill, done, recompute, watch };
        let pending: Vec<&Slice> =
            slices.iter().filter(|s| !preflight.done.contains_key(&s.index) && self.chosen(s)).collect();
        self.refuse_out_of_order(&preflight, &pending)?;
        let mut overtaken = Vec::new();
        for slice in &pending {
            let by =
                preflight.watch.check(&preflight.target, slice, preflight.removes(plan, slice), 0).await?;
            if !by.is_empty() {
                overtaken.push((**slice, by));
            }
        }
        if !overtaken.is_empty() {
            return Err(self.overtaken(overtaken, preflight.done.len()));
        }
        // A slice committed but not as rehearsed stays a failure on every resume, retry and finish.
        let which = |s: &Slice| self.finish || self.chosen(s);
        let unverified =
            verify_committed(&preflight.target, &preflight.watch, &preflight.done, plan, &slices, which)
                .await?;
        if !unverified.is_empty() {
            return Err(ApplyError::Unverified(unverified));
        }
        Ok(preflight)
    }

    fn chosen(&self, slice: &Slice) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(&slice.index))
    }

    fn overtaken(&self, slices: Vec<(Slice, Overtaken)>, committed: usize) -> ApplyError {
        ApplyError::Overtaken { slices, committed, plan_file: self.plan.plan_file.path.clone() }
    }

    /// Refuses, before anything is written, pending slices whose published files would rewrite files
    /// slices neither committed nor applied in this run write.
    fn refuse_out_of_order(&self, preflight: &Preflight, pending: &[&Slice]) -> Result<(), ApplyError> {
        if preflight.recompute {
            return Ok(());
        }
        let waits = crate::apply::staleness::predecessors(
            self.plan.slices.iter().filter_map(|r| Some((r.index, r.publication.as_ref()?))),
        );
        let running: BTreeSet<usize> = pending.iter().map(|s| s.index).collect();
        let blocked: Vec<(Slice, Vec<usize>)> = pending
            .iter()
            .filter_map(|slice| {
                let missing: Vec<usize> = waits
                    .get(&slice.index)?
                    .iter()
                    .filter(|before| !preflight.done.contains_key(before) && !running.contains(before))
                    .copied()
                    .collect();
                (!missing.is_empty()).then_some((**slice, missing))
            })
            .collect();
        match blocked.is_empty() {
            true => Ok(()),
            false => Err(ApplyError::OutOfOrder(blocked)),
        }
    }

    pub async fn execute(self, progress: &dyn ApplyProgress) -> Result<ApplyReport, ApplyError> {
        let started_at = chrono::Utc::now();
        let plan = self.plan;
        let preflight = self.preflight().await?;
        let url = url_of(plan)?;
        let slices = preflight.document.plan.slices();
        let done = &preflight.done;
        let schema = table::arrow_schema(&preflight.target)?;
        let spec = &preflight.document.plan;
        let writer = SliceWriter::for_plan(spec);
        let generated = crate::delta::row_rules::generated_columns(&preflight.target);
        let source = Source::new(&preflight.document, schema)
            .with_computed_columns(generated.iter().map(String::as_str))
            .with_delta_inputs(&plan.delta_inputs);
        if self.finish {
            let missing: Vec<String> = slices
                .iter()
                .filter(|s| !done.contains_key(&s.index))
                .map(|s| format!("{} ({})", s.index, s.first))
                .collect();
            if !missing.is_empty() {
                return Err(ApplyError::Unfinished { count: missing.len(), missing: missing.join(", ") });
            }
        }
        let mut outcomes = Vec::with_capacity(slices.len());
        for slice in slices.iter().filter(|s| done.contains_key(&s.index) && self.chosen(s)) {
            let outcome = SliceOutcome::skipped(slice);
            progress.slice_done(&outcome);
            outcomes.push(outcome);
        }
        let pending: Vec<&Slice> =
            slices.iter().filter(|s| !done.contains_key(&s.index) && self.chosen(s)).collect();
        // Nothing pending (a resume of a finished apply, `--finish`) needs no rehearsal.
        let publisher = match preflight.recompute || pending.is_empty() {
            true => None,
            false => Some(
                publisher(&preflight.stores, plan, pending.iter().map(|s| s.index))
                    .await
                    .map_err(ApplyError::Unpublishable)?,
            ),
        };
        let parallel = spec.slicing.parallel.max(1) as usize;
        let run = SliceRun {
            plan,
            preflight: &preflight,
            source: &source,
            writer: &writer,
            publisher: publisher.as_ref(),
            progress,
            committed: Default::default(),
        };
        let mut target = preflight.target.clone();
        if parallel == 1 {
            // Each slice writes on the table the previous one returned: commits follow one another.
            for slice in pending {
                let (table, outcome) = run.apply(slice, target).await?;
                target = table;
                outcomes.push(outcome);
            }
        } else {
            // Each slice replaces its own partitions; deltalake rebases such commits on one another.
            let results: Vec<(DeltaTable, SliceOutcome)> =
                futures::stream::iter(pending.into_iter().map(|slice| run.apply(slice, target.clone())))
                    .buffer_unordered(parallel)
                    .try_collect()
                    .await?;
            outcomes.extend(results.into_iter().map(|(_, outcome)| outcome));
            target.load().await?;
        }
        let Preflight { stores, since, log_url, backfill, .. } = preflight;

        if self.only.is_some() {
            // One task of a fan-out: the comment and the change log are `finish`'s.
            outcomes.sort_by_key(|o| o.index);
            return Ok(ApplyReport {
                backfill_id: backfill.backfill_id,
                table: display_url(&url),
                pre_version: plan.target.pre_version,
                post_version: target.version().unwrap_or(0),
                slices: outcomes,
                comment: None,
                log_table: None,
            });
        }
        fault("before-comment");
        crate::fault::pause_before_comment();
        let comment = comment_text(&spec.record.comment, &backfill, chrono::Utc::now().date_naive());
        let (target, wrote_comment) = comment_once(target, &since, &backfill, &comment).await?;
        let mut log_table = None;
        if let Some(url) = log_url {
            // Two finishers at once: the one whose comment landed writes the row; a crash between the
            // two leaves it to the next run, which finds the comment and no row.
            let row = change_log::LogRow {
                backfill_id: backfill.backfill_id.clone(),
                table: display_url(&url_of(plan)?),
                // This table's plan: the tables downstream have rows of their own.
                plan: Plan { downstream: Vec::new(), ..plan.clone() },
                post_version: target.version().unwrap_or(0),
                started_at,
                finished_at: chrono::Utc::now(),
                user: std::env::var("USER")
                    .or_else(|_| std::env::var("USERNAME"))
                    .unwrap_or_else(|_| "unknown".into()),
            };
            let commented_before = since.iter().any(|e| e.is_comment_of(&backfill.backfill_id));
            if wrote_comment || commented_before {
                change_log::record(&stores, &url, &row).await?;
            }
            log_table = Some(display_url(&url));
        }
        outcomes.sort_by_key(|o| o.index);
        Ok(ApplyReport {
            backfill_id: backfill.backfill_id,
            table: display_url(&url),
            pre_version: plan.target.pre_version,
            post_version: target.version().unwrap_or(0),
            slices: outcomes,
            comment: Some(comment),
            log_table,
        })
    }
}

/// Sets the table comment that ends the backfill's apply, unless its commit is in the table already;
/// returns the table and whether this call wrote it. Two finishers racing: the comment is a metadata
/// commit, so the second conflicts, finds the first's comment, and writes nothing.
async fn comment_once(
    target: DeltaTable,
    since: &[Entry],
    backfill: &Backfill,
    comment: &str,
) -> Result<(DeltaTable, bool), ApplyError> {
    if since.iter().any(|e| e.is_comment_of(&backfill.backfill_id)) {
        return Ok((target, false));
    }
    let read_version = target.version().unwrap_or(0);
    let fallback = target.clone();
    let written = target
        .update_table_metadata()
        .with_update(TableMetadataUpdate { name: None, description: Some(comment.to_owned()) })
        .with_commit_properties(backfill.comment_commit())
        .await;
    match written {
        Ok(table) => Ok((table, true)),
        Err(error) => {
            let mut table = fallback;
            table.update_incremental(None).await?;
            let newer = ledger::commits_after(&table, read_version).await?;
            match newer.iter().any(|e| e.is_comment_of(&backfill.backfill_id)) {
                true => Ok((table, false)),
                false => Err(error.into()),
            }
        }
    }
}

/// The backfill's slices the table holds, each with the version that committed it: named by the
/// backfill's commits since the plan, confirmed by their transactions (each lookup replays the log,
/// so a first apply makes none).
async fn committed(
    target: &DeltaTable,
    since: &[Entry],
    backfill: &Backfill,
    slices: &[Slice],
) -> Result<BTreeMap<usize, u64>, ApplyError> {
    let named: BTreeMap<usize, u64> = since
        .iter()
        .filter(|e| e.is_slice_of(&backfill.backfill_id))
        .filter_map(|e| Some((e.slice()?.index, e.version)))
        .collect();
    if named.is_empty() {
        return Ok(BTreeMap::new());
    }
    let named_slices: Vec<Slice> = slices.iter().filter(|s| named.contains_key(&s.index)).cloned().collect();
    let confirmed = backfill.committed_slices(target, &named_slices).await?;
    Ok(named.into_iter().filter(|(index, _)| confirmed.contains(index)).collect())
}

/// Counts the rows of each committed slice `which` picks and returns those that differ from the
/// rehearsal's. A slice is counted in the table as it is now, unless a later commit of another
/// writer touched its days: then at the version that committed it.
async fn verify_committed(
    target: &DeltaTable,
    watch: &Watch,
    done: &BTreeMap<usize, u64>,
    plan: &Plan,
    slices: &[Slice],
    which: impl Fn(&Slice) -> bool,
) -> Result<Vec<Unverified>, ApplyError> {
    let mut unverified = Vec::new();
    for slice in slices.iter().filter(|s| which(s)) {
        let Some(&version) = done.get(&slice.index) else { continue };
        let Some(rehearsed) = plan.slices.iter().find(|r| r.index == slice.index) else { continue };
        let touched_since = !watch.check(target, slice, &[], version).await?.is_empty();
        let found = if touched_since {
            let mut then = target.clone();
            then.load_version(version as _).await?;
            table::rows_in_slice(&then, &plan.target.date_column, slice).await?
        } else {
            table::rows_in_slice(target, &plan.target.date_column, slice).await?
        };
        if found != rehearsed.after.rows {
            unverified.push(Unverified { slice: *slice, version, expected: rehearsed.after.rows, found });
        }
    }
    Ok(unverified)
}

/// How far applying a saved plan got, read from the table alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyState {
    pub table: String,
    pub table_version: u64,
    /// The plan's latest backfill in the table (commit order), if any of its slices committed.
    pub backfill_id: Option<String>,
    /// The numbers of the slices that backfill committed, in plan order.
    pub committed: Vec<usize>,
    /// The first days of the slices it has not committed, in plan order.
    pub pending: Vec<chrono::NaiveDate>,
    /// Whether its comment commit, the last of an apply, is in the table.
    pub commented: bool,
    /// Who committed each slice, where its commit says (`bf.applied_by`): an Airflow task, or a
    /// host and process.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub committed_by: BTreeMap<usize, String>,
}

impl ApplyState {
    /// Whether the plan's latest backfill committed every slice (its comment may still be missing).
    pub fn all_committed(&self) -> bool {
        self.backfill_id.is_some() && self.pending.is_empty()
    }
}

/// Reads how far the saved plan's apply got.
pub async fn state(plan: &Plan) -> Result<ApplyState, ApplyError> {
    let url = url_of(plan)?;
    let target = plan.stores().map_err(|e| ApplyError::Stale(e.to_string()))?.open(&url, None).await?;
    // One read of the history answers both: which backfill, and what it committed.
    let history = ledger::commits_after(&target, 0).await?;
    let backfill_id = ledger::backfill_ids(&history, &plan.id).pop();
    let recorded = match &backfill_id {
        Some(id) => ledger::recorded(&history, id).map_err(ledger::LedgerError::from)?,
        None => None,
    };
    let committed: BTreeSet<usize> =
        recorded.iter().flat_map(|r| r.slices.iter().map(|(s, _)| s.index)).collect();
    let committed_by = match &backfill_id {
        Some(id) => history
            .iter()
            .filter(|e| e.is_slice_of(id))
            .filter_map(|e| Some((e.slice()?.index, e.keys.applied_by.clone()?)))
            .collect(),
        None => BTreeMap::new(),
    };
    Ok(ApplyState {
        table: display_url(&url),
        table_version: target.version().unwrap_or(0),
        backfill_id,
        committed: plan.slices.iter().map(|s| s.index).filter(|i| committed.contains(i)).collect(),
        pending: plan.slices.iter().filter(|s| !committed.contains(&s.index)).map(|s| s.first).collect(),
        commented: recorded.is_some_and(|r| r.commented),
        committed_by,
    })
}

/// The committed slices of the plan's latest backfill whose rows are not the rehearsal's: what stops
/// its resume, its retries and its finish. Counts rows, so only what reports it asks.
pub async fn unverified(plan: &Plan) -> Result<Vec<Unverified>, ApplyError> {
    let url = url_of(plan)?;
    let target = plan.stores().map_err(|e| ApplyError::Stale(e.to_string()))?.open(&url, None).await?;
    let since = ledger::commits_after(&target, plan.target.pre_version).await?;
    let backfill = backfill_for(plan, &since, false);
    let slices: Vec<Slice> = plan
        .slices
        .iter()
        .map(|r| Slice { index: r.index, first: r.first, last: r.last, run_date: r.run_date })
        .collect();
    let done = committed(&target, &since, &backfill, &slices).await?;
    let watch = Watch::new(&plan.id, plan.target.pre_version, &target, &plan.target.date_column);
    verify_committed(&target, &watch, &done, plan, &slices, |_| true).await
}

/// Why `bf apply` cannot publish the rehearsed files of the slices `state` says are pending (it
/// would need `--recompute`); `None` when it can, or nothing is pending. Opens the rehearsal and
/// looks for each file, so only what reports it asks.
pub async fn cannot_publish(plan: &Plan, state: &ApplyState) -> Option<String> {
    let pending = plan.slices.iter().filter(|s| state.pending.contains(&s.first)).map(|s| s.index);
    let stores = match plan.stores() {
        Ok(stores) => stores,
        Err(e) => return Some(e.to_string()),
    };
    publisher(&stores, plan, pending).await.err()
}

fn url_of(plan: &Plan) -> Result<url::Url, ApplyError> {
    url::Url::parse(&plan.target.uri)
        .map_err(|e| ApplyError::Delta(format!("the saved plan's target URI: {e}")))
}

/// What writing one slice needs, borrowed for the length of an apply.
struct SliceRun<'r> {
    plan: &'r Plan,
    preflight: &'r Preflight,
    source: &'r Source<'r>,
    writer: &'r SliceWriter,
    /// Publishes the rehearsed slices; without it, each slice's query runs again.
    publisher: Option<&'r Publisher<'r>>,
    progress: &'r dyn ApplyProgress,
    /// How many slices this run committed so far.
    committed: std::sync::atomic::AtomicUsize,
}

impl Preflight {
    /// The target's files the slice's publication removes; none when slices are recomputed.
    fn removes<'p>(&self, plan: &'p Plan, slice: &Slice) -> &'p [String] {
        match self.recompute {
            true => &[],
            false => plan
                .slices
                .iter()
                .find(|r| r.index == slice.index)
                .and_then(|r| r.publication.as_ref())
                .map_or(&[], |p| p.removes.as_slice()),
        }
    }
}

impl SliceRun<'_> {
    fn rehearsed(&self, slice: &Slice) -> Result<&crate::rehearse::plan::SliceReport, ApplyError> {
        self.plan.slices.iter().find(|r| r.index == slice.index).ok_or_else(|| {
            ApplyError::Stale(format!("the saved plan has no rehearsal of slice {}", slice.index))
        })
    }

    /// The table as it is now, once no commit since the plan touches the slice: the version the
    /// slice's commit is built on. Commits after it are deltalake's conflict check's. A slice another
    /// process committed meanwhile is [`Ready::Done`].
    async fn untouched(&self, slice: &Slice, mut table: DeltaTable) -> Result<Ready, ApplyError> {
        table.update_incremental(None).await?;
        let removes = self.preflight.removes(self.plan, slice);
        let watch = &self.preflight.watch;
        let by = watch.check(&table, slice, removes, 0).await?;
        if watch.committed(&self.preflight.backfill.backfill_id, slice.index).await.is_some() {
            return Ok(Ready::Done(table));
        }
        if !by.is_empty() {
            let committed =
                self.preflight.done.len() + self.committed.load(std::sync::atomic::Ordering::SeqCst);
            return Err(ApplyError::Overtaken {
                slices: vec![(*slice, by)],
                committed,
                plan_file: self.plan.plan_file.path.clone(),
            });
        }
        pause_after_check(slice.index);
        Ok(Ready::Write(table))
    }

    /// Checks the slice is still the plan's, writes it in one commit, verifies it. Another writer's
    /// commit that does not touch the slice is rebased over by deltalake (bounded retries); one that
    /// does stops the apply before the slice is written.
    ///
    /// On a table whose partition values the log keys by physical names (column mapping), deltalake
    /// 1.1 panics checking a concurrent commit (`kernel/transaction/state.rs` looks them up by
    /// logical name). There bf never lets it check: each commit is tried without retries, and a
    /// commit that lost the race is written again from the table as it is then, after bf's own check.
    async fn apply(
        &self,
        slice: &Slice,
        table: DeltaTable,
    ) -> Result<(DeltaTable, SliceOutcome), ApplyError> {
        fault(&format!("before-slice:{}", slice.index));
        let rehearsed = self.rehearsed(slice)?;
        let url = table.table_url().clone();
        let own_conflict_check = table::partition_values_by_physical_name(&table);
        let attempts = if own_conflict_check { RACE_ATTEMPTS } else { 1 };
        let mut table = table;
        let mut written = None;
        for attempt in 1..=attempts {
            let (outcome, read_version) =
                self.write(slice, rehearsed, table.clone(), own_conflict_check).await?;
            match outcome {
                Err(Failed::Write(error))
                    if own_conflict_check && attempt < attempts && lost_race(&error) =>
                {
                    table.update_incremental(None).await?;
                }
                Err(Failed::Done(table)) => {
                    let outcome = SliceOutcome::skipped(slice);
                    self.progress.slice_done(&outcome);
                    return Ok((table, outcome));
                }
                outcome => {
                    written = Some((outcome, read_version));
                    break;
                }
            }
        }
        let (written, read_version) = written.expect("at least one attempt");
        let backfill = &self.preflight.backfill;
        let table = match written {
            Ok(table) => table,
            Err(failed) => {
                // Another process (a fan-out task, a second apply) committed the slice first.
                if let Some(done) = self.committed_by_another(slice, &url).await {
                    return Ok(done);
                }
                return Err(match failed {
                    Failed::Write(error) => {
                        conflict_or(
                            &self.preflight.stores,
                            error,
                            slice,
                            &url,
                            read_version,
                            &backfill.backfill_id,
                        )
                        .await
                    }
                    Failed::Other(error) => error,
                    Failed::Done(_) => unreachable!("a slice committed before its write is a success"),
                });
            }
        };
        self.committed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        fault(&format!("after-commit:{}", slice.index));
        let found = verify(&table, &self.plan.target.date_column, slice, rehearsed.after.rows).await?;
        let outcome = SliceOutcome {
            index: slice.index,
            first: slice.first.to_string(),
            last: slice.last.to_string(),
            status: SliceStatus::Committed,
            version: table.version(),
            rows: Some(found),
            source_rows: Some(rehearsed.source.in_slice),
        };
        self.progress.slice_done(&outcome);
        Ok((table, outcome))
    }

    /// One attempt at the slice's commit, on the table as it is now once the check passed; returns
    /// what became of it and the version it was built on. `no_retries`: a commit that finds the
    /// table moved fails instead of rebasing.
    async fn write(
        &self,
        slice: &Slice,
        rehearsed: &crate::rehearse::plan::SliceReport,
        table: DeltaTable,
        no_retries: bool,
    ) -> Result<(Result<DeltaTable, Failed>, u64), ApplyError> {
        let backfill = &self.preflight.backfill;
        let retries = |properties: deltalake::kernel::transaction::CommitProperties| match no_retries {
            true => properties.with_max_retries(0),
            false => properties,
        };
        Ok(match (self.publisher, &rehearsed.publication) {
            (Some(publisher), Some(publication)) => {
                pause_before(slice.index);
                let table = match self.untouched(slice, table).await? {
                    Ready::Write(table) => table,
                    Ready::Done(table) => return Ok((Err(Failed::Done(table)), 0)),
                };
                let read_version = table.version().unwrap_or(0);
                let commit = |info| retries(backfill.slice_commit_with(slice, info));
                let published =
                    publisher.publish(table, slice, publication, rehearsed.predicate.clone(), commit).await;
                let written = published.map_err(|error| match error {
                    // A commit that failed reads as a write's does: a conflict is named the same way.
                    crate::delta::publish::PublishError::Delta(error) => {
                        Failed::Write(crate::rehearse::slice_writer::WriteError {
                            slice: slice.index,
                            first: slice.first.to_string(),
                            last: slice.last.to_string(),
                            broken: None,
                            source: Box::new(error),
                        })
                    }
                    other => Failed::Other(ApplyError::Publish {
                        slice: slice.index,
                        first: slice.first.to_string(),
                        message: other.to_string(),
                    }),
                });
                (written, read_version)
            }
            _ => {
                let rows = self.source.for_slice(slice).await?;
                pause_before(slice.index);
                let table = match self.untouched(slice, table).await? {
                    Ready::Write(table) => table,
                    Ready::Done(table) => return Ok((Err(Failed::Done(table)), 0)),
                };
                let read_version = table.version().unwrap_or(0);
                let written =
                    self.writer.write(table, slice, &rows, retries(backfill.slice_commit(slice))).await;
                (written.map_err(Failed::Write), read_version)
            }
        })
    }
}

/// How many times a slice's commit is tried on a table where bf checks concurrent commits itself.
const RACE_ATTEMPTS: usize = 16;

/// Whether a commit tried without retries failed because another landed first.
fn lost_race(error: &crate::rehearse::slice_writer::WriteError) -> bool {
    matches!(
        error.source.as_ref(),
        DeltaTableError::Transaction {
            source: deltalake::kernel::transaction::TransactionError::MaxCommitAttempts(0)
        }
    )
}

/// Why a slice's write did not land: deltalake refused the commit, publishing stopped before it, or
/// another process had committed the slice.
enum Failed {
    Write(crate::rehearse::slice_writer::WriteError),
    Other(ApplyError),
    Done(DeltaTable),
}

/// What the check before a slice's commit found.
enum Ready {
    /// The table to build the commit on.
    Write(DeltaTable),
    /// The slice is in the table already, committed by another process.
    Done(DeltaTable),
}

impl SliceRun<'_> {
    /// After a failed commit: the slice as another process committed it, if one did (its
    /// transaction is in the table), so a task racing another for the same slice succeeds as a
    /// skip instead of failing.
    async fn committed_by_another(
        &self,
        slice: &Slice,
        url: &url::Url,
    ) -> Option<(DeltaTable, SliceOutcome)> {
        let table = self.preflight.stores.open(url, None).await.ok()?;
        let committed =
            self.preflight.backfill.committed_slices(&table, std::slice::from_ref(slice)).await.ok()?;
        if !committed.contains(&slice.index) {
            return None;
        }
        let outcome = SliceOutcome::skipped(slice);
        self.progress.slice_done(&outcome);
        Some((table, outcome))
    }
}

/// The publisher of the rehearsed slices, once it is sure it can publish every pending one: the
/// rehearsal the plan reviewed, unchanged, holding every file to publish.
async fn publisher<'s>(
    stores: &'s Stores,
    plan: &Plan,
    pending: impl Iterator<Item = usize>,
) -> Result<Publisher<'s>, String> {
    let publications: Vec<&crate::delta::publish::Publication> = pending
        .map(|index| {
            plan.slices.iter().find(|r| r.index == index).and_then(|r| r.publication.as_ref()).ok_or_else(
                || {
                    "this plan was saved by a bf that did not record the rehearsed files to publish"
                        .to_owned()
                },
            )
        })
        .collect::<Result<_, _>>()?;
    let table_id =
        plan.rehearsal.table_id.as_deref().ok_or("the plan does not record its rehearsal's table id")?;
    let rehearsal =
        url::Url::parse(&plan.rehearsal.uri).map_err(|e| format!("the saved rehearsal URI: {e}"))?;
    let publisher =
        Publisher::open(stores, &rehearsal, table_id, plan.rehearsal.version, &plan.target.partition_columns)
            .await?;
    publisher.check(publications).await?;
    Ok(publisher)
}

/// The backfill this apply continues or starts. A resume keeps the id of the plan's latest backfill
/// in commit order (`-r10` after `-r9`, whatever their names sort as); a first apply takes the
/// plan's id; `--rerun` takes a new one.
fn backfill_for(plan: &Plan, since: &[Entry], rerun: bool) -> Backfill {
    let earlier = ledger::backfill_ids(since, &plan.id);
    let backfill_id = match (rerun, earlier.last()) {
        (false, Some(last)) => last.clone(),
        (false, None) => plan.id.clone(),
        (true, _) => format!("{}-r{}", plan.id, earlier.len() + 1),
    };
    Backfill {
        backfill_id,
        plan_id: plan.id.clone(),
        plan_sha256: plan.plan_file.sha256.clone(),
        pre_version: plan.target.pre_version,
        reason: plan.reason.clone(),
        window: plan.window,
        date_column: plan.target.date_column.clone(),
        slices: plan.slices.len(),
        cascade: None,
    }
}

/// The latest version of each Delta input, in the plan's order, or why it cannot be read.
async fn delta_input_versions(stores: &Stores, inputs: &[DeltaInput]) -> Vec<Result<u64, String>> {
    let versions = inputs.iter().map(|input| async move {
        let url = url::Url::parse(&input.uri).map_err(|e| e.to_string())?;
        let table = stores.open(&url, None).await.map_err(|e| e.to_string())?;
        Ok(table.version().unwrap_or(0))
    });
    futures::future::join_all(versions).await
}

/// The plan's inputs as they are now, each list in the saved plan's order.
pub struct Now<'n> {
    /// The input files' fingerprints.
    pub inputs: &'n [Result<plan::InputFingerprint, String>],
    /// The input folders' listings.
    pub folders: &'n [Result<FolderListing, StoreError>],
    /// The latest version of each Delta input.
    pub delta: &'n [Result<u64, String>],
}

/// Every reason the saved plan no longer describes the world, or `Ok` when it still does.
pub fn check_stale(plan: &Plan, since: &[Entry], now: &Now) -> Result<(), ApplyError> {
    let mut reasons = Vec::new();
    if !plan.appliable() {
        reasons.push(format!(
            "the plan failed its checks or guards:\n{}",
            plan.problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
        ));
    }
    match std::fs::read_to_string(&plan.plan_file.path) {
        Ok(text) if plan::sha256_hex(text.as_bytes()) == plan.plan_file.sha256 => {}
        Ok(text) => reasons.push(format!(
            "the plan file {} changed since `bf plan`:\n{}",
            plan.plan_file.path,
            similar::TextDiff::from_lines(&plan.plan_file.text, &text)
                .unified_diff()
                .header("planned", "now")
                .to_string()
                .trim_end()
        )),
        Err(e) => reasons.push(format!("the plan file {} cannot be read: {e}", plan.plan_file.path)),
    }
    for malformed in since.iter().filter_map(|e| e.mark().err()) {
        reasons.push(malformed.to_string());
    }
    // Other writers' commits since the plan are judged slice by slice ([`Watch`]): only those that
    // touch a slice's days or files make it stale.
    for (input, now) in plan.inputs.iter().zip(now.inputs) {
        if !now.as_ref().is_ok_and(|now| input.matches(now)) {
            reasons.push(match now {
                Ok(_) => format!("input `{}` changed since `bf plan`: {}", input.input, input.path),
                Err(e) => format!("input `{}` cannot be read: {} ({e})", input.input, input.path),
            });
        }
    }
    for (folder, now) in plan.input_folders.iter().zip(now.folders) {
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                reasons.push(format!("input `{}`'s folder cannot be listed: {e}", folder.input));
                continue;
            }
        };
        if now.files != folder.files {
            let added: Vec<&String> = now.files.iter().filter(|f| !folder.files.contains(f)).collect();
            let removed: Vec<&String> = folder.files.iter().filter(|f| !now.files.contains(f)).collect();
            reasons.push(format!(
                "input `{}`'s folder {} changed since `bf plan`: {} added {:?}, {} removed {:?}",
                folder.input,
                crate::delta::store::uri(&folder.location)
                    .map_or(folder.location.clone(), |u| display_url(&u)),
                added.len(),
                added,
                removed.len(),
                removed
            ));
        }
    }
    // Slices read a Delta input at the version the plan read, so a commit to it after the apply
    // began changes nothing a resume writes: only a first apply refuses it.
    let resuming = since.iter().any(|e| e.backfill().is_some_and(|b| b.plan_id == plan.id));
    for (input, now) in plan.delta_inputs.iter().zip(now.delta) {
        if input.uri == plan.target.uri || (resuming && now.is_ok()) {
            // A target reloaded from itself: its own moves are checked above.
            continue;
        }
        match now {
            Ok(version) if *version == input.version => {}
            Ok(version) => reasons.push(format!(
                "input `{}` ({}) is at version {version}, but the plan read version {}",
                input.input, input.uri, input.version
            )),
            Err(e) => reasons.push(format!("input `{}` ({}) cannot be read: {e}", input.input, input.uri)),
        }
    }
    if reasons.is_empty() {
        return Ok(());
    }
    reasons.push(format!("Run `bf plan {}` again, review it, then apply.", plan.plan_file.path));
    Err(ApplyError::Stale(reasons.join("\n")))
}

/// Checks the committed slice holds as many rows as the rehearsed one (in replace mode, the rows the
/// source produced, which the reconcile proved); returns its row count. The saved plan's inputs are
/// fingerprinted and the table checked unmoved, so the rehearsal's count is the expectation, and
/// apply need not run each query twice to count it.
async fn verify(
    table: &DeltaTable,
    date_column: &str,
    slice: &Slice,
    expected: u64,
) -> Result<u64, ApplyError> {
    let found = table::rows_in_slice(table, date_column, slice).await?;
    if found == expected {
        Ok(found)
    } else {
        Err(ApplyError::Verify { slice: slice.index, first: slice.first.to_string(), expected, found })
    }
}

/// The table comment from the plan's template, at most 4000 characters.
pub fn comment_text(template: &str, backfill: &Backfill, today: chrono::NaiveDate) -> String {
    let text = template
        .replace("{reason}", &backfill.reason)
        .replace("{window}", &backfill.window.to_string())
        .replace("{start}", &backfill.window.start.to_string())
        .replace("{end}", &backfill.window.end.to_string())
        .replace("{date}", &today.to_string())
        .replace("{backfill_id}", &backfill.backfill_id);
    text.chars().take(4000).collect()
}

/// Turns a write that lost a commit race into an error naming the commits it lost to.
async fn conflict_or(
    stores: &Stores,
    error: crate::rehearse::slice_writer::WriteError,
    slice: &Slice,
    url: &url::Url,
    read_version: u64,
    backfill_id: &str,
) -> ApplyError {
    let kind = match error.source.as_ref() {
        DeltaTableError::Transaction {
            source: deltalake::kernel::transaction::TransactionError::CommitConflict(conflict),
        } => conflict.to_string(),
        _ => return ApplyError::Write(error),
    };
    let commits = match stores.open(url, None).await {
        Ok(table) => {
            let since = ledger::commits_after(&table, read_version).await.unwrap_or_default();
            ledger::describe(since.iter().filter(|e| !e.is_of(backfill_id)))
        }
        Err(e) => format!("  (the table's new commits cannot be listed: {e})"),
    };
    ApplyError::Conflict { slice: slice.index, first: slice.first.to_string(), kind, commits }
}
