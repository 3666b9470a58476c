//! Applying a saved plan to the real table: exactly once per slice, resumable, recorded.
//!
//! 1. Refuse a stale plan ([`check_stale`]): the plan file edited since `bf plan`, the target moved
//!    by anyone but this plan's own slices, an input file changed, a file added to or removed from
//!    an input folder, a commit to a Delta input, or a check or guard that failed; and a change log
//!    table bf may not write.
//! 2. Read which slices of this backfill the table already holds (their Delta transactions): after a
//!    crash, those are skipped and the apply resumes at the first slice not committed.
//! 3. For each remaining slice, in the plan's order (N at a time with `parallel = N`, which `bf plan`
//!    only allows on tables partitioned by the date column): publish the files its rehearsal wrote
//!    ([`Publisher`]: exactly what the plan showed) — or, with `--recompute`, run the source query
//!    and write the slice through the [`SliceWriter`] the rehearsal used — in one commit carrying the
//!    ledger and the slice's transaction, then verify the table holds as many rows of the slice as
//!    the rehearsal did.
//! 4. Last, in its own metadata commit, set the table comment from `[record] comment`. Never while
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

use crate::change_log;
use crate::fault::{fault, pause_before};
use crate::ledger::{self, Backfill, Entry};
use crate::plan::{self, Plan};
use crate::plan_file::{self, PlanFile};
use crate::publish::Publisher;
use crate::slice_writer::SliceWriter;
use crate::source::run::{DeltaInput, FolderListing, Source};
use crate::store::{StoreError, Stores, display_url};
use crate::table;
use crate::window::Slice;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the saved plan is stale:\n{0}")]
    Stale(String),
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(transparent)]
    Open(#[from] crate::store::OpenError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    UnsafeCommits(#[from] crate::store::UnsafeCommits),
    #[error(transparent)]
    Source(#[from] crate::source::run::SourceError),
    #[error(transparent)]
    Write(#[from] crate::slice_writer::WriteError),
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
    Unsupported(#[from] crate::compat::Unsupported),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
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
        // The inputs are fingerprinted while the table's log is read.
        let files = plan.input_files();
        let hashing = {
            let stores = stores.clone();
            tokio::spawn(async move { plan::fingerprint_all(&stores, &files).await })
        };
        let target = stores.open(&url, None).await?;
        crate::compat::check_writable(&target).await?;
        // The change log is written after the last slice: a log table bf may not write is refused
        // before the first.
        let log_url = change_log::location(&document)?;
        if let Some(log_url) = &log_url {
            stores.require_safe_commits(log_url)?;
            change_log::check(&stores, log_url).await?;
        }
        let since = ledger::commits_after(&target, plan.target.pre_version).await?;
        let inputs_now =
            hashing.await.map_err(|e| ApplyError::Delta(format!("fingerprinting the inputs: {e}")))?;
        let folders_now = futures::future::join_all(plan.input_folders.iter().map(|f| f.now(&stores))).await;
        let delta_now = delta_input_versions(&stores, &plan.delta_inputs).await;
        check_stale(plan, &since, &Now { inputs: &inputs_now, folders: &folders_now, delta: &delta_now })?;
        Ok(Preflight { document, stores, target, since, log_url })
    }

    pub async fn execute(self, progress: &dyn ApplyProgress) -> Result<ApplyReport, ApplyError> {
        let started_at = chrono::Utc::now();
        let plan = self.plan;
        let Preflight { document, stores, mut target, since, log_url } = self.preflight().await?;
        let url = url_of(plan)?;
        let mut backfill = backfill_for(plan, &since, self.rerun);
        backfill.cascade = self.cascade.clone();
        let slices = document.plan.slices();
        // Only slices this backfill's commits since the plan name can be committed (the stale check
        // already holds `since` to be every commit after the plan's version); their transactions
        // confirm it. Each lookup replays the log, so a first apply makes none.
        let named: BTreeSet<usize> = since
            .iter()
            .filter(|e| e.is_slice_of(&backfill.backfill_id))
            .filter_map(|e| e.slice().map(|s| s.index))
            .collect();
        let named: Vec<Slice> = slices.iter().filter(|s| named.contains(&s.index)).cloned().collect();
        let done: BTreeSet<usize> = if named.is_empty() {
            BTreeSet::new()
        } else {
            backfill.committed_slices(&target, &named).await?.into_iter().collect()
        };
        let schema = table::arrow_schema(&target)?;
        let spec = &document.plan;
        let writer = SliceWriter::for_plan(spec);
        let generated = crate::row_rules::generated_columns(&target);
        let source = Source::new(&document, schema)
            .with_computed_columns(generated.iter().map(String::as_str))
            .with_delta_inputs(&plan.delta_inputs);
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
        if self.finish {
            let missing: Vec<String> = slices
                .iter()
                .filter(|s| !done.contains(&s.index))
                .map(|s| format!("{} ({})", s.index, s.first))
                .collect();
            if !missing.is_empty() {
                return Err(ApplyError::Unfinished { count: missing.len(), missing: missing.join(", ") });
            }
        }
        let chosen = |slice: &Slice| self.only.as_ref().is_none_or(|only| only.contains(&slice.index));
        let mut outcomes = Vec::with_capacity(slices.len());
        for slice in slices.iter().filter(|s| done.contains(&s.index) && chosen(s)) {
            let outcome = SliceOutcome::skipped(slice);
            progress.slice_done(&outcome);
            outcomes.push(outcome);
        }
        let pending: Vec<&Slice> = slices.iter().filter(|s| !done.contains(&s.index) && chosen(s)).collect();
        // Nothing pending (a resume of a finished apply, `--finish`) needs no rehearsal.
        let publisher = match self.recompute || pending.is_empty() {
            true => None,
            false => Some(
                publisher(&stores, plan, pending.iter().map(|s| s.index))
                    .await
                    .map_err(ApplyError::Unpublishable)?,
            ),
        };
        let parallel = spec.slicing.parallel.max(1) as usize;
        let run = SliceRun {
            plan,
            stores: &stores,
            source: &source,
            writer: &writer,
            publisher: publisher.as_ref(),
            backfill: &backfill,
            spec,
            progress,
            others_may_commit: self.only.is_some(),
        };
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
        let already_commented = since.iter().any(|e| e.is_comment_of(&backfill.backfill_id));
        let comment = comment_text(&spec.record.comment, &backfill, chrono::Utc::now().date_naive());
        if !already_commented {
            target = target
                .update_table_metadata()
                .with_update(TableMetadataUpdate { name: None, description: Some(comment.clone()) })
                .with_commit_properties(backfill.comment_commit())
                .await?;
        }
        let mut log_table = None;
        if let Some(url) = log_url {
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
            change_log::record(&stores, &url, &row).await?;
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
    stores: &'r Stores,
    source: &'r Source<'r>,
    writer: &'r SliceWriter,
    /// Publishes the rehearsed slices; without it, each slice's query runs again.
    publisher: Option<&'r Publisher<'r>>,
    backfill: &'r Backfill,
    spec: &'r PlanFile,
    progress: &'r dyn ApplyProgress,
    /// Other processes apply slices of the same backfill (`--slice`): a slice one of them committed
    /// first is done, not a conflict.
    others_may_commit: bool,
}

impl SliceRun<'_> {
    fn rehearsed(&self, slice: &Slice) -> Result<&crate::plan::SliceReport, ApplyError> {
        self.plan.slices.iter().find(|r| r.index == slice.index).ok_or_else(|| {
            ApplyError::Stale(format!("the saved plan has no rehearsal of slice {}", slice.index))
        })
    }

    /// Source query, one commit, verification. Another writer's commit that does not touch the
    /// slice's rows is rebased over by deltalake (bounded retries); one that does stops the apply.
    async fn apply(
        &self,
        slice: &Slice,
        table: DeltaTable,
    ) -> Result<(DeltaTable, SliceOutcome), ApplyError> {
        fault(&format!("before-slice:{}", slice.index));
        let rehearsed = self.rehearsed(slice)?;
        let read_version = table.version().unwrap_or(0);
        let url = table.table_url().clone();
        let written = match (self.publisher, &rehearsed.publication) {
            (Some(publisher), Some(publication)) => {
                pause_before(slice.index);
                let commit = |info| self.backfill.slice_commit_with(slice, info);
                match publisher.publish(table, slice, publication, rehearsed.predicate.clone(), commit).await
                {
                    Ok(table) => Ok(table),
                    // A commit that failed reads as a write's does: a conflict is named the same way.
                    Err(crate::publish::PublishError::Delta(error)) => Err(crate::slice_writer::WriteError {
                        slice: slice.index,
                        first: slice.first.to_string(),
                        last: slice.last.to_string(),
                        broken: None,
                        source: Box::new(error),
                    }),
                    Err(other) => {
                        return Err(ApplyError::Publish {
                            slice: slice.index,
                            first: slice.first.to_string(),
                            message: other.to_string(),
                        });
                    }
                }
            }
            _ => {
                let rows = self.source.for_slice(slice).await?;
                pause_before(slice.index);
                self.writer.write(table, slice, &rows, self.backfill.slice_commit(slice)).await
            }
        };
        let table = match written {
            Ok(table) => table,
            Err(error) => {
                if self.others_may_commit
                    && let Some(done) = self.committed_by_another(slice, &url).await
                {
                    return Ok(done);
                }
                return Err(conflict_or(
                    self.stores,
                    error,
                    slice,
                    &url,
                    read_version,
                    &self.backfill.backfill_id,
                )
                .await);
            }
        };
        fault(&format!("after-commit:{}", slice.index));
        let found = verify(&table, &self.spec.target.date_column, slice, rehearsed.after.rows).await?;
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
        let table = self.stores.open(url, None).await.ok()?;
        let committed = self.backfill.committed_slices(&table, std::slice::from_ref(slice)).await.ok()?;
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
    let publications: Vec<&crate::publish::Publication> = pending
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
    let others: Vec<&Entry> = since
        .iter()
        .filter(|e| e.mark().is_ok() && e.backfill().is_none_or(|b| b.plan_id != plan.id))
        .collect();
    if !others.is_empty() {
        let listed = ledger::describe(others);
        reasons.push(format!(
            "the table moved since its planned version {}:\n{listed}",
            plan.target.pre_version
        ));
    }
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
                crate::store::uri(&folder.location).map_or(folder.location.clone(), |u| display_url(&u)),
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
    error: crate::slice_writer::WriteError,
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
