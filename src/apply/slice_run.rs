//! One slice of an apply: checked against the table as it is, written in one commit (published or
//! recomputed), verified.

use deltalake::{DeltaTable, DeltaTableError};

use super::{ApplyError, ApplyProgress, Preflight, SliceOutcome, SliceStatus};
use crate::delta::ledger;
use crate::delta::publish::{Publisher, Written};
use crate::delta::store::Stores;
use crate::delta::table;
use crate::fault::{fault, pause_after_check, pause_before};
use crate::rehearse::plan::Plan;
use crate::rehearse::slice_writer::SliceWriter;
use crate::source::run::Source;
use crate::window::Slice;

/// What writing one slice needs, borrowed for the length of an apply.
pub(super) struct SliceRun<'r> {
    pub(super) plan: &'r Plan,
    pub(super) preflight: &'r Preflight,
    pub(super) source: &'r Source<'r>,
    pub(super) writer: &'r SliceWriter,
    /// Publishes the rehearsed slices; without it, each slice's query runs again.
    pub(super) publisher: Option<&'r Publisher<'r>>,
    pub(super) progress: &'r dyn ApplyProgress,
    /// How many slices this run committed so far.
    pub(super) committed: std::sync::atomic::AtomicUsize,
}

impl Preflight {
    /// The target's files the slice's publication removes; none when slices are recomputed.
    pub(super) fn removes<'p>(&self, plan: &'p Plan, slice: &Slice) -> &'p [String] {
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
        table::catch_up(&mut table).await?;
        let removes = self.preflight.removes(self.plan, slice);
        let watch = &self.preflight.watch;
        let by = watch.check(&table, &self.plan.watched(slice), removes, 0).await?;
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

    /// Whether the slice is watched over more days than it rewrites: a plan of some of its window's
    /// days (`[slicing] only`, a preview) watches the whole window, while deltalake's conflict check
    /// knows only the slice's predicate — an append on another day of the window, landing between
    /// bf's check and the commit, would pass it. Such a slice's commit is bf's to check again.
    fn watches_beyond(&self, slice: &Slice) -> bool {
        let watched = self.plan.watched(slice);
        (watched.first, watched.last) != (slice.first, slice.last)
    }

    /// Checks the slice is still the plan's, writes it in one commit, verifies it. Another writer's
    /// commit that does not touch the slice is rebased over by deltalake (bounded retries); one that
    /// does stops the apply before the slice is written.
    ///
    /// On a table whose partition values the log keys by physical names (column mapping), deltalake
    /// 1.1 panics checking a concurrent commit (`kernel/transaction/state.rs` looks them up by
    /// logical name). There bf never lets it check: each commit is tried without retries, and a
    /// commit that lost the race is written again from the table as it is then, after bf's own check.
    /// So too on a table whose commits bf completes itself (in-commit timestamps, `delta/commit.rs`),
    /// and for a slice watched over more days than its own ([`Self::watches_beyond`]).
    pub(super) async fn apply(
        &self,
        slice: &Slice,
        table: DeltaTable,
    ) -> Result<(DeltaTable, SliceOutcome), ApplyError> {
        fault(&format!("before-slice:{}", slice.index));
        self.progress.slice_started(slice);
        let rehearsed = self.rehearsed(slice)?;
        let url = table.table_url().clone();
        let own_conflict_check = table::partition_values_by_physical_name(&table)
            || crate::delta::commit::Own::of(&table).needed()
            || self.watches_beyond(slice);
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
                    // Every attempt lost to a commit that landed first: bounded, and said so.
                    Failed::Write(error) if own_conflict_check && lost_race(&error) => {
                        ApplyError::Raced { slice: *slice, attempts }
                    }
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
        let table = table::checkpoint_when_due(table).await;
        let version = table.version();
        let written = match (&self.publisher, &rehearsed.publication, version) {
            (Some(_), Some(publication), _) => Some(Written::of(publication)),
            (_, _, Some(version)) => Some(Written::read(&table, version).await?),
            _ => None,
        };
        let outcome = SliceOutcome {
            index: slice.index,
            first: slice.first.to_string(),
            last: slice.last.to_string(),
            status: SliceStatus::Committed,
            version,
            rows: Some(found),
            source_rows: Some(rehearsed.source.written()),
            written,
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
                publisher.settle_before_pause(slice, publication).await;
                pause_before(slice.index);
                let table = match self.untouched(slice, table).await? {
                    Ready::Write(table) => table,
                    Ready::Done(table) => return Ok((Err(Failed::Done(table)), 0)),
                };
                let read_version = table.version().unwrap_or(0);
                if let Some(lost) = losing_on_purpose(slice, no_retries, read_version) {
                    return Ok((Err(lost), read_version));
                }
                let commit = |info| retries(backfill.slice_commit_with(slice, info));
                let published =
                    publisher.publish(table, slice, publication, rehearsed.predicate.clone(), commit).await;
                let written = published.map_err(|error| match error {
                    // A commit that failed reads as a write's does: a conflict is named the same way.
                    crate::delta::publish::PublishError::Delta(error) => commit_failed(slice, error),
                    other => Failed::Other(ApplyError::Publish {
                        slice: slice.index,
                        first: slice.first.to_string(),
                        message: other.to_string(),
                    }),
                });
                (written, read_version)
            }
            _ => {
                let rows = self.source.for_slice_with(slice, &rehearsed.lending(&self.plan.slices)).await?;
                pause_before(slice.index);
                let table = match self.untouched(slice, table).await? {
                    Ready::Write(table) => table,
                    Ready::Done(table) => return Ok((Err(Failed::Done(table)), 0)),
                };
                let read_version = table.version().unwrap_or(0);
                if let Some(lost) = losing_on_purpose(slice, no_retries, read_version) {
                    return Ok((Err(lost), read_version));
                }
                let written =
                    self.writer.write(table, slice, &rows, retries(backfill.slice_commit(slice))).await;
                (written.map_err(Failed::Write), read_version)
            }
        })
    }
}

/// How many times a slice's commit is tried on a table where bf checks concurrent commits itself.
const RACE_ATTEMPTS: usize = 16;

/// A test hook (`BF_FAULT=lose-races:N`): every attempt at slice N's commit, where bf checks
/// concurrent commits itself, fails as a commit another writer beat, without committing — a
/// writer that wins every race, so the attempts' bound is proven to end in a named error.
fn losing_on_purpose(slice: &Slice, no_retries: bool, read_version: u64) -> Option<Failed> {
    use deltalake::kernel::transaction::TransactionError;
    (no_retries && crate::fault::corrupt(&format!("lose-races:{}", slice.index))).then(|| {
        let lost = TransactionError::VersionAlreadyExists(read_version + 1);
        commit_failed(slice, DeltaTableError::Transaction { source: lost })
    })
}

/// A slice's commit that deltalake refused, as a write's refusal reads.
fn commit_failed(slice: &Slice, error: DeltaTableError) -> Failed {
    Failed::Write(crate::rehearse::slice_writer::WriteError {
        slice: slice.index,
        first: slice.first.to_string(),
        last: slice.last.to_string(),
        broken: None,
        at: None,
        source: Box::new(error),
    })
}

/// Whether a commit tried without retries failed because another landed first.
fn lost_race(error: &crate::rehearse::slice_writer::WriteError) -> bool {
    crate::delta::commit::lost_race(error.source.as_ref())
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
    if found == expected { Ok(found) } else { Err(ApplyError::Verify { slice: *slice, expected, found }) }
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
        } => conflict_kind(conflict),
        _ => return ApplyError::Write(error),
    };
    let commits = match stores.open(url, None).await {
        Ok(table) => {
            let since = ledger::commits_after(&table, read_version).await.unwrap_or_default();
            ledger::describe(since.iter().filter(|e| !e.is_of(backfill_id)))
        }
        Err(e) => format!("  (the table's new commits cannot be listed: {e})"),
    };
    ApplyError::Conflict { slice: *slice, kind, commits }
}

/// What the commit a slice lost to did, in the slice's terms. deltalake's own wording ends in advice
/// for its own API ("the isolation level can be set to Snapshot Isolation"), which is no way out
/// for a backfill: the way out is a new plan, which the error says.
fn conflict_kind(conflict: &deltalake::kernel::transaction::CommitConflictError) -> String {
    use deltalake::kernel::transaction::CommitConflictError as Conflict;
    match conflict {
        Conflict::ConcurrentAppend => "it added rows where the slice writes".to_owned(),
        Conflict::ConcurrentDeleteRead => "it removed files the slice's commit reads".to_owned(),
        Conflict::ConcurrentDeleteDelete => "it removed files the slice's commit removes".to_owned(),
        Conflict::MetadataChanged => "it changed the table's schema or properties".to_owned(),
        Conflict::ProtocolChanged(_) => "it changed the table's protocol".to_owned(),
        other => other.to_string().lines().next().unwrap_or_default().trim_end_matches('.').to_owned(),
    }
}
