//! The ledger: what bf writes into every commit it makes, so the table's own history says what was
//! done, when, why, and which version to go back to — readable by `bf`, by `DESCRIBE HISTORY` in
//! Spark and Databricks, and on any machine, without `.bf/`.
//!
//! This module is the one owner of the `bf.*` keys: [`Keys`] spells them once, for writing and for
//! reading, and [`Mark`] is what a commit's keys mean. A commit whose keys are missing one its kind
//! needs, or hold a value of the wrong type (another tool, a hand edit, a future format), is an error
//! naming the commit, never a default: a default pre-version is "restore version 0".
//!
//! Each slice commit carries:
//! - `bf.*` keys at the top level of commitInfo (backfill id, plan id and sha256, pre-version,
//!   reason, window, slice index and bounds);
//! - the same as one JSON string in `userMetadata`, the column DESCRIBE HISTORY shows;
//! - a Delta application transaction (`txn`) with app id `bf:<backfill id>:<slice>` and the slice
//!   number as version. Delta keeps the last version per app id, and slices may commit in any order
//!   (backward, in parallel), so each slice has its own app id: "is slice 17 committed?" is then a
//!   lookup, and two writers racing for the same slice conflict instead of both committing.

use std::collections::HashMap;

use chrono::NaiveDate;
use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::window::{Slice, Window};

/// The prefix of every key bf writes into commitInfo.
const PREFIX: &str = "bf.";

/// Every key bf writes into a commit, spelled once. Stored as `bf.<field>` at the top level of
/// commitInfo and as one JSON object in `userMetadata`. Which keys a commit holds says what it is
/// ([`Mark`]); this record only carries them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Keys {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_column: Option<String>,
    /// How many slices the backfill has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slices: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_first: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_last: Option<NaiveDate>,
    /// The commit that sets the table comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<bool>,
    /// The backfill a rollback commit undoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_slice: Option<usize>,
    /// The version a `--to-version` RESTORE went back to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u64>,
    /// On a rehearsal's first commit: the table it rehearses, and at which version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rehearsal_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_version: Option<u64>,
    /// On a rehearsal's slice commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rehearsal: Option<bool>,
    /// On a slice commit: who committed it — the Airflow task (`airflow:<dag>/<task>#<try>`) when
    /// one ran it, else `<host>:<pid>` — for `bf status` when slices run as separate tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_by: Option<String>,
    /// A backfill in a chain: the chain's id (its first plan's id)…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade: Option<String>,
    /// …the table it is built from, when it is downstream…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// …and the tables built from it, which a rollback must not leave built from undone rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downstream: Option<Vec<String>>,
}

/// What a commit bf made is, read from its keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// One slice of a backfill applied to the table.
    Slice { backfill: Backfill, slice: RecordedSlice },
    /// The metadata commit that ends an apply: the table comment.
    Comment { backfill: Backfill },
    /// A step of undoing a backfill.
    Rollback { backfill_id: String, pre_version: u64, reason: String, step: RollbackStep },
    /// A RESTORE of an explicit version (`bf rollback --to-version`).
    RestoredTo { version: u64 },
    /// A rehearsal's first commit, the shallow clone.
    Clone { rehearsal_of: String, source_version: u64 },
    /// A slice written into a rehearsal.
    Rehearsal { plan_id: String, slice: usize },
}

/// Which step of a rollback a commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackStep {
    /// The RESTORE of the pre-version.
    Restore,
    /// The comment that says the backfill was rolled back.
    Comment,
    /// One slice of a window-only rollback.
    Slice(RecordedSlice),
}

/// A slice as a commit records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordedSlice {
    pub index: usize,
    pub first: NaiveDate,
    pub last: NaiveDate,
}

/// A commit whose `bf.*` keys do not say what it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "version {version} of the table carries bf keys that bf cannot read: {problem}. \
     Another tool or a hand edit may have written them; bf will not guess (a default pre-version \
     would restore version 0). Inspect it with `bf history`."
)]
pub struct Malformed {
    pub version: u64,
    pub problem: String,
}

/// What identifies a backfill in the table's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backfill {
    pub backfill_id: String,
    pub plan_id: String,
    pub plan_sha256: String,
    pub pre_version: u64,
    pub reason: String,
    pub window: Window,
    /// The column the slices' predicates filter on: what a rollback puts back by.
    pub date_column: String,
    pub slices: usize,
    /// Its place in a chain of backfills, when its plan has downstream plans or is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade: Option<Cascade>,
}

/// A backfill's place in a chain: the tables above and below it were backfilled with it, and are
/// found again from the table's history alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cascade {
    /// The chain's id: its first plan's id, on every backfill of the chain.
    pub id: String,
    /// The table it is built from (a URI), when it is downstream.
    pub upstream: Option<String>,
    /// The tables built from it (URIs), in apply order.
    pub downstream: Vec<String>,
}

impl Backfill {
    /// The app id of a slice's Delta transaction.
    pub fn app_id(&self, slice: usize) -> String {
        format!("bf:{}:{slice}", self.backfill_id)
    }

    /// The commit properties of one slice: ledger keys, `userMetadata`, app transaction.
    pub fn slice_commit(&self, slice: &Slice) -> CommitProperties {
        self.slice_commit_with(slice, HashMap::new())
    }

    /// [`Backfill::slice_commit`] with more commitInfo entries (a published slice's
    /// `operationMetrics`, as its rehearsal's write recorded them).
    pub fn slice_commit_with(&self, slice: &Slice, info: HashMap<String, Value>) -> CommitProperties {
        let mut metadata = self.slice_keys(slice).metadata();
        metadata.extend(info);
        CommitProperties::default()
            .with_metadata(metadata)
            .with_cleanup_expired_logs(Some(false))
            .with_application_transaction(Transaction::new(self.app_id(slice.index), slice.index as i64))
    }

    fn slice_keys(&self, slice: &Slice) -> Keys {
        Keys {
            slice: Some(slice.index),
            slice_first: Some(slice.first),
            slice_last: Some(slice.last),
            applied_by: Some(worker()),
            ..self.keys()
        }
    }

    /// The commit properties of the comment commit that ends an apply.
    pub fn comment_commit(&self) -> CommitProperties {
        self.comment_keys().commit()
    }

    fn comment_keys(&self) -> Keys {
        Keys { comment: Some(true), ..self.keys() }
    }

    fn keys(&self) -> Keys {
        Keys {
            backfill_id: Some(self.backfill_id.clone()),
            plan_id: Some(self.plan_id.clone()),
            plan_sha256: Some(self.plan_sha256.clone()),
            pre_version: Some(self.pre_version),
            reason: Some(self.reason.clone()),
            window_start: Some(self.window.start),
            window_end: Some(self.window.end),
            date_column: Some(self.date_column.clone()),
            slices: Some(self.slices),
            cascade: self.cascade.as_ref().map(|c| c.id.clone()),
            upstream: self.cascade.as_ref().and_then(|c| c.upstream.clone()),
            downstream: self.cascade.as_ref().map(|c| c.downstream.clone()),
            ..Keys::default()
        }
    }

    /// The slice numbers of this backfill already committed to `table` (by their transactions).
    /// Each lookup replays the log on a blocking thread, so they run side by side.
    pub async fn committed_slices(
        &self,
        table: &DeltaTable,
        slices: &[Slice],
    ) -> Result<Vec<usize>, DeltaTableError> {
        committed(table, slices.iter().map(|s| (s.index, self.app_id(s.index)))).await
    }
}

/// Who is committing: the Airflow task running bf (Airflow sets `AIRFLOW_CTX_*` for a task's
/// commands), else this host and process.
fn worker() -> String {
    let airflow = |name: &str| std::env::var(format!("AIRFLOW_CTX_{name}")).ok();
    if let (Some(dag), Some(task)) = (airflow("DAG_ID"), airflow("TASK_ID")) {
        let attempt = airflow("TRY_NUMBER").map(|t| format!("#{t}")).unwrap_or_default();
        return format!("airflow:{dag}/{task}{attempt}");
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// Which of `slices` (number, app id) have a Delta transaction in `table`: the commits bf makes
/// exactly once. Each lookup replays the log on a blocking thread, so they run side by side.
pub async fn committed(
    table: &DeltaTable,
    slices: impl IntoIterator<Item = (usize, String)>,
) -> Result<Vec<usize>, DeltaTableError> {
    let state = table.snapshot()?;
    let log_store = table.log_store();
    let lookups = slices.into_iter().map(|(index, app_id)| {
        let log_store = log_store.clone();
        async move {
            let version = state.transaction_version(log_store.as_ref(), app_id).await?;
            Ok::<_, DeltaTableError>(version.map(|_| index))
        }
    });
    let found = futures::future::try_join_all(lookups).await?;
    Ok(found.into_iter().flatten().collect())
}

impl Keys {
    /// The commitInfo entries the keys are written as: `bf.<key>` entries and a `userMetadata`
    /// JSON string holding them all.
    pub fn metadata(&self) -> HashMap<String, Value> {
        let Value::Object(keys) = serde_json::to_value(self).expect("keys serialize") else {
            unreachable!("a struct serializes to an object")
        };
        let prefixed: serde_json::Map<String, Value> =
            keys.into_iter().map(|(k, v)| (format!("{PREFIX}{k}"), v)).collect();
        let user_metadata = Value::Object(prefixed.clone()).to_string();
        let mut metadata: HashMap<String, Value> = prefixed.into_iter().collect();
        metadata.insert("userMetadata".to_owned(), Value::String(user_metadata));
        metadata
    }

    /// Every commit bf makes to a table carries its keys, and leaves the table's log alone: deltalake
    /// would otherwise delete commits older than the log retention after it, and the log is the
    /// history a rollback and an audit read (and, under `checkpointProtection`, not bf's to delete).
    fn commit(&self) -> CommitProperties {
        CommitProperties::default().with_metadata(self.metadata()).with_cleanup_expired_logs(Some(false))
    }

    /// The `bf.*` keys of a commitInfo, typed; `Ok(None)` when it has none (another writer's
    /// commit), an error naming the key when one holds a value of the wrong type.
    pub fn read(commit_info: &HashMap<String, Value>) -> Result<Option<Keys>, String> {
        match Keys::read_lenient(commit_info) {
            (keys, None) => Ok(keys),
            (_, Some(problem)) => Err(problem),
        }
    }

    /// The keys that read, and what is wrong with those that do not: a commit whose `bf.pre_version`
    /// is text still says whose it is, so the error can be reported for the right backfill.
    fn read_lenient(commit_info: &HashMap<String, Value>) -> (Option<Keys>, Option<String>) {
        let mut ours: serde_json::Map<String, Value> = commit_info
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(PREFIX).map(|k| (k.to_owned(), v.clone())))
            .collect();
        if ours.is_empty() {
            return (None, None);
        }
        let mut problems = Vec::new();
        // Each round drops the key that failed; there are no more rounds than keys.
        for _ in 0..=ours.len() {
            match serde_path_to_error::deserialize::<_, Keys>(Value::Object(ours.clone())) {
                Ok(keys) => {
                    let problem = (!problems.is_empty()).then(|| problems.join("; "));
                    return (Some(keys), problem);
                }
                Err(error) => {
                    let key = error.path().to_string();
                    problems.push(format!("`{PREFIX}{key}`: {}", error.inner()));
                    if ours.remove(&key).is_none() {
                        break;
                    }
                }
            }
        }
        (Some(Keys::default()), Some(problems.join("; ")))
    }

    /// What the keys say the commit is; the error names the first key its kind needs and lacks.
    pub fn mark(&self) -> Result<Mark, String> {
        fn need<T: Clone>(value: &Option<T>, key: &str) -> Result<T, String> {
            value.clone().ok_or_else(|| format!("`{PREFIX}{key}` is missing"))
        }
        let slice = |index: &Option<usize>, key| -> Result<RecordedSlice, String> {
            Ok(RecordedSlice {
                index: need(index, key)?,
                first: need(&self.slice_first, "slice_first")?,
                last: need(&self.slice_last, "slice_last")?,
            })
        };
        if let Some(backfill_id) = &self.rollback_of {
            let step = match (self.rollback_slice, self.comment) {
                (Some(_), _) => RollbackStep::Slice(slice(&self.rollback_slice, "rollback_slice")?),
                (None, Some(true)) => RollbackStep::Comment,
                (None, _) => RollbackStep::Restore,
            };
            return Ok(Mark::Rollback {
                backfill_id: backfill_id.clone(),
                pre_version: need(&self.pre_version, "pre_version")?,
                reason: need(&self.reason, "reason")?,
                step,
            });
        }
        if let Some(backfill_id) = &self.backfill_id {
            let backfill = Backfill {
                backfill_id: backfill_id.clone(),
                plan_id: need(&self.plan_id, "plan_id")?,
                plan_sha256: need(&self.plan_sha256, "plan_sha256")?,
                pre_version: need(&self.pre_version, "pre_version")?,
                reason: need(&self.reason, "reason")?,
                window: Window {
                    start: need(&self.window_start, "window_start")?,
                    end: need(&self.window_end, "window_end")?,
                },
                date_column: need(&self.date_column, "date_column")?,
                slices: need(&self.slices, "slices")?,
                cascade: self.cascade.as_ref().map(|id| Cascade {
                    id: id.clone(),
                    upstream: self.upstream.clone(),
                    downstream: self.downstream.clone().unwrap_or_default(),
                }),
            };
            return match self.comment {
                Some(true) => Ok(Mark::Comment { backfill }),
                _ => Ok(Mark::Slice { slice: slice(&self.slice, "slice")?, backfill }),
            };
        }
        if let Some(version) = self.rollback_to {
            return Ok(Mark::RestoredTo { version });
        }
        if let Some(rehearsal_of) = &self.rehearsal_of {
            return Ok(Mark::Clone {
                rehearsal_of: rehearsal_of.clone(),
                source_version: need(&self.source_version, "source_version")?,
            });
        }
        if self.rehearsal == Some(true) {
            return Ok(Mark::Rehearsal {
                plan_id: need(&self.plan_id, "plan_id")?,
                slice: need(&self.slice, "slice")?,
            });
        }
        Err(format!("its keys ({}) name no backfill, rollback or rehearsal", self.names().join(", ")))
    }

    fn names(&self) -> Vec<String> {
        match serde_json::to_value(self) {
            Ok(Value::Object(keys)) => keys.keys().map(|k| format!("{PREFIX}{k}")).collect(),
            _ => Vec::new(),
        }
    }
}

/// A backfill as the table's history records it: found there alone, without `.bf/`.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub backfill: Backfill,
    /// The slices its commits wrote, each with the version that wrote it.
    pub slices: Vec<(RecordedSlice, u64)>,
    /// Whether its comment commit, the last of an apply, is in the table.
    pub commented: bool,
}

/// Backfill `backfill_id` as `entries` (the table's history, oldest first) record it, found there
/// alone; `None` when no commit names it. A commit naming it whose keys cannot be read is an error.
pub fn recorded(entries: &[Entry], backfill_id: &str) -> Result<Option<Recorded>, Malformed> {
    let mut found: Option<Recorded> = None;
    for entry in entries.iter().filter(|e| e.keys.backfill_id.as_deref() == Some(backfill_id)) {
        let (backfill, slice) = match entry.mark()? {
            Some(Mark::Slice { backfill, slice }) => (backfill, Some(*slice)),
            Some(Mark::Comment { backfill }) => (backfill, None),
            _ => continue,
        };
        let recorded = found.get_or_insert_with(|| Recorded {
            backfill: backfill.clone(),
            slices: Vec::new(),
            commented: false,
        });
        match slice {
            Some(slice) => recorded.slices.push((slice, entry.version)),
            None => recorded.commented = true,
        }
    }
    Ok(found)
}

/// The backfill ids a plan's applies recorded, in the order of their first commits (a rerun's
/// `-r10` after `-r9`, whatever their names sort as).
pub async fn backfills_of_plan(table: &DeltaTable, plan_id: &str) -> Result<Vec<String>, LedgerError> {
    Ok(backfill_ids(&commits_after(table, 0).await?, plan_id))
}

/// The backfill ids of `plan_id` among `entries`, in the order their first commits appear.
pub fn backfill_ids(entries: &[Entry], plan_id: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for backfill in entries.iter().filter_map(Entry::backfill).filter(|b| b.plan_id == plan_id) {
        if !ids.contains(&backfill.backfill_id) {
            ids.push(backfill.backfill_id.clone());
        }
    }
    ids
}

/// The commit properties of a rollback commit of `backfill`: which backfill it undoes and why it was
/// done. A window-only slice also carries its own transaction, so it is written exactly once.
pub fn rollback_commit(backfill: &Backfill, step: RollbackStep) -> CommitProperties {
    let properties = rollback_keys(backfill, step).commit();
    match step {
        RollbackStep::Slice(slice) => properties.with_application_transaction(Transaction::new(
            rollback_app_id(&backfill.backfill_id, slice.index),
            slice.index as i64,
        )),
        RollbackStep::Restore | RollbackStep::Comment => properties,
    }
}

fn rollback_keys(backfill: &Backfill, step: RollbackStep) -> Keys {
    let keys = Keys {
        rollback_of: Some(backfill.backfill_id.clone()),
        pre_version: Some(backfill.pre_version),
        reason: Some(backfill.reason.clone()),
        ..Keys::default()
    };
    match step {
        RollbackStep::Restore => keys,
        RollbackStep::Comment => Keys { comment: Some(true), ..keys },
        RollbackStep::Slice(slice) => Keys {
            rollback_slice: Some(slice.index),
            slice_first: Some(slice.first),
            slice_last: Some(slice.last),
            ..keys
        },
    }
}

/// The app id of a window-only rollback's slice transaction.
pub fn rollback_app_id(backfill_id: &str, slice: usize) -> String {
    format!("bf-rollback:{backfill_id}:{slice}")
}

/// The commit properties of `bf rollback --to-version`'s RESTORE.
pub fn restore_to_commit(version: u64) -> CommitProperties {
    Keys { rollback_to: Some(version), ..Keys::default() }.commit()
}

/// The keys of a rehearsal's first commit: what marks a folder as a bf rehearsal.
pub fn clone_metadata(rehearsal_of: &str, source_version: u64) -> HashMap<String, Value> {
    Keys {
        rehearsal_of: Some(rehearsal_of.to_owned()),
        source_version: Some(source_version),
        ..Keys::default()
    }
    .metadata()
}

/// The commit properties of a slice written into a rehearsal.
pub fn rehearsal_commit(plan_id: &str, slice: usize) -> CommitProperties {
    Keys { plan_id: Some(plan_id.to_owned()), slice: Some(slice), rehearsal: Some(true), ..Keys::default() }
        .commit()
}

/// Whether a commitInfo (as JSON) is a bf rehearsal's clone commit.
pub fn is_clone_commit(commit_info: &Value) -> bool {
    let Some(info) = commit_info.as_object() else { return false };
    let info: HashMap<String, Value> = info.clone().into_iter().collect();
    matches!(Keys::read(&info).map(|keys| keys.map(|k| k.mark())), Ok(Some(Ok(Mark::Clone { .. }))))
}

/// Reading the ledger failed: the log could not be read, or a commit's keys could not.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error(transparent)]
    Delta(#[from] DeltaTableError),
    #[error(transparent)]
    Malformed(#[from] Malformed),
}

/// One commit of the table's history, with bf's keys when bf made it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub version: u64,
    pub timestamp: Option<i64>,
    pub operation: String,
    pub predicate: Option<String>,
    /// Rows the commit wrote, from its operation metrics (delta-rs or Spark names).
    pub rows_written: Option<u64>,
    /// bf's keys without the `bf.` prefix; empty for other writers' commits.
    #[serde(rename = "bf")]
    pub keys: Keys,
    /// Why the keys do not read as a bf commit, when they do not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
    #[serde(skip)]
    mark: Option<Mark>,
}

impl Entry {
    fn new(
        version: u64,
        timestamp: Option<i64>,
        operation: String,
        predicate: Option<String>,
        rows_written: Option<u64>,
        info: &HashMap<String, Value>,
    ) -> Entry {
        let (keys, malformed) = Keys::read_lenient(info);
        let (mark, malformed) = match (&keys, malformed) {
            (_, Some(problem)) => (None, Some(problem)),
            (None, None) => (None, None),
            (Some(keys), None) => match keys.mark() {
                Ok(mark) => (Some(mark), None),
                Err(problem) => (None, Some(problem)),
            },
        };
        let keys = keys.unwrap_or_default();
        Entry { version, timestamp, operation, predicate, rows_written, keys, malformed, mark }
    }

    /// What bf recorded in this commit: `None` for another writer's, an error naming the commit
    /// when its keys cannot be read.
    pub fn mark(&self) -> Result<Option<&Mark>, Malformed> {
        match &self.malformed {
            Some(problem) => Err(Malformed { version: self.version, problem: problem.clone() }),
            None => Ok(self.mark.as_ref()),
        }
    }

    /// The backfill an apply's commit (a slice or the comment) belongs to.
    pub fn backfill(&self) -> Option<&Backfill> {
        match &self.mark {
            Some(Mark::Slice { backfill, .. } | Mark::Comment { backfill }) => Some(backfill),
            _ => None,
        }
    }

    /// Whether this commit is an apply's commit of the given backfill.
    pub fn is_of(&self, backfill_id: &str) -> bool {
        self.backfill().is_some_and(|b| b.backfill_id == backfill_id)
    }

    /// The slice of a backfill this commit wrote.
    pub fn slice(&self) -> Option<&RecordedSlice> {
        match &self.mark {
            Some(Mark::Slice { slice, .. }) => Some(slice),
            _ => None,
        }
    }

    /// Whether this commit is a slice of the given backfill.
    pub fn is_slice_of(&self, backfill_id: &str) -> bool {
        self.is_of(backfill_id) && self.slice().is_some()
    }

    /// Whether this commit is the comment that ended the given backfill's apply.
    pub fn is_comment_of(&self, backfill_id: &str) -> bool {
        matches!(&self.mark, Some(Mark::Comment { backfill }) if backfill.backfill_id == backfill_id)
    }

    /// The rollback step this commit is, of the given backfill.
    pub fn rollback_step_of(&self, backfill_id: &str) -> Option<RollbackStep> {
        match &self.mark {
            Some(Mark::Rollback { backfill_id: of, step, .. }) if of == backfill_id => Some(*step),
            _ => None,
        }
    }
}

/// The data files a commit added, with their partition values and statistics, read from its log entry.
pub async fn added_files(table: &DeltaTable, version: u64) -> Result<Vec<Value>, DeltaTableError> {
    let Some(bytes) = table.log_store().read_commit_entry(version as _).await? else { return Ok(Vec::new()) };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok()?.get("add").cloned())
        .collect())
}

/// One commit as the log holds it: its entry in the history, and its actions (adds, removes,
/// metadata…) for what needs to know what it did to the table.
#[derive(Debug, Clone)]
pub struct Logged {
    pub entry: Entry,
    pub actions: Vec<Value>,
}

impl Logged {
    fn parse(version: u64, bytes: &[u8]) -> Result<Logged, DeltaTableError> {
        let unreadable = |problem: String| {
            DeltaTableError::Generic(format!(
                "version {version} of the table's log cannot be read: {problem}"
            ))
        };
        let text = std::str::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?;
        let actions: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| unreadable(e.to_string())))
            .collect::<Result<_, _>>()?;
        let info: HashMap<String, Value> = actions
            .iter()
            .find_map(|a| a.get("commitInfo")?.as_object().cloned())
            .map(|info| info.into_iter().collect())
            .unwrap_or_default();
        let predicate = info.get("operationParameters").and_then(|p| p.get("predicate")).map(|p| match p {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        let metrics = info.get("operationMetrics");
        let rows_written =
            ["num_added_rows", "numOutputRows", "num_target_rows_inserted"].iter().find_map(|k| {
                let value = metrics?.get(*k)?;
                value.as_u64().or_else(|| value.as_str()?.parse().ok())
            });
        let entry = Entry::new(
            version,
            info.get("timestamp").and_then(Value::as_i64),
            // A commit without commitInfo (some writers omit it) still has a place in the history.
            info.get("operation").and_then(Value::as_str).unwrap_or("(no commitInfo)").to_owned(),
            predicate,
            rows_written,
            &info,
        );
        Ok(Logged { entry, actions })
    }
}

/// The commits `versions` of the table, read from the log by their version numbers, oldest first.
/// A version whose file the log no longer holds (cleaned up behind a checkpoint) is left out.
///
/// Versions come from the log's file names, never from counting: a commit without commitInfo, or
/// one landing while the history is read, cannot shift another commit's number.
pub async fn read_log(
    table: &DeltaTable,
    versions: std::ops::RangeInclusive<u64>,
) -> Result<Vec<Logged>, DeltaTableError> {
    let log_store = table.log_store();
    let reads = versions.map(|version| {
        let log_store = log_store.clone();
        async move {
            match log_store.read_commit_entry(version as _).await? {
                Some(bytes) => Logged::parse(version, &bytes).map(Some),
                None => Ok(None),
            }
        }
    });
    let read: Vec<Option<Logged>> = futures::stream::iter(reads).buffered(16).try_collect().await?;
    Ok(read.into_iter().flatten().collect())
}

/// The table's commits after `after_version` up to the version `table` was loaded at, oldest first.
pub async fn commits_after(table: &DeltaTable, after_version: u64) -> Result<Vec<Entry>, DeltaTableError> {
    let latest = table.version().unwrap_or(0);
    if latest <= after_version {
        return Ok(Vec::new());
    }
    Ok(read_log(table, after_version + 1..=latest).await?.into_iter().map(|l| l.entry).collect())
}

/// The table's last `limit` commits (all without a limit), newest first.
pub async fn history(table: &DeltaTable, limit: Option<usize>) -> Result<Vec<Entry>, DeltaTableError> {
    let latest = table.version().unwrap_or(0);
    let first = limit.map_or(0, |limit| (latest + 1).saturating_sub(limit as u64));
    let mut entries: Vec<Entry> =
        read_log(table, first..=latest).await?.into_iter().map(|l| l.entry).collect();
    entries.reverse();
    Ok(entries)
}

/// ` at 2026-11-29 15:44:48 UTC`, from a commit's timestamp in milliseconds; empty without one.
pub fn at(timestamp: Option<i64>) -> String {
    timestamp
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format(" at %Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// Commits as a list for messages: `  - version 6: WRITE (order_date = …) at 2026-11-29 15:44:48 UTC`.
pub fn describe<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> String {
    entries
        .into_iter()
        .map(|e| {
            let predicate = e.predicate.as_ref().map(|p| format!(" ({p})")).unwrap_or_default();
            format!("  - version {}: {}{predicate}{}", e.version, e.operation, at(e.timestamp))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backfill() -> Backfill {
        let day = |d: &str| d.parse().unwrap();
        Backfill {
            backfill_id: "b1".into(),
            plan_id: "p1".into(),
            plan_sha256: "abc".into(),
            pre_version: 5,
            reason: "Fix March.".into(),
            window: Window { start: day("2026-03-01"), end: day("2026-03-31") },
            date_column: "order_date".into(),
            slices: 1,
            cascade: None,
        }
    }

    #[test]
    fn a_backfill_of_a_chain_reads_back_with_its_neighbours() {
        let cascade = Cascade {
            id: "p0".into(),
            upstream: Some("file:///w/orders_silver/".into()),
            downstream: vec!["file:///w/revenue_by_day/".into(), "file:///w/kpis/".into()],
        };
        let chained = Backfill { cascade: Some(cascade.clone()), ..backfill() };
        let first = chained.window.start;
        let written = chained.slice_keys(&Slice { index: 1, first, last: first, run_date: first }).metadata();
        assert_eq!(written["bf.cascade"], "p0");
        let Mark::Slice { backfill: read, .. } = Keys::read(&written).unwrap().unwrap().mark().unwrap()
        else {
            panic!("a slice commit reads as a slice")
        };
        assert_eq!(read.cascade, Some(cascade));
        let alone =
            backfill().slice_keys(&Slice { index: 1, first, last: first, run_date: first }).metadata();
        assert!(!alone.contains_key("bf.cascade") && !alone.contains_key("bf.downstream"));
    }

    #[test]
    fn what_is_written_reads_back_as_the_same_mark() {
        let backfill = backfill();
        let (first, last) = (backfill.window.start, backfill.window.end);
        let slice = Slice { index: 1, first, last, run_date: first };
        let written = backfill.slice_keys(&slice).metadata();
        let keys = Keys::read(&written).unwrap().unwrap();
        let recorded = RecordedSlice { index: 1, first, last };
        assert_eq!(keys.mark().unwrap(), Mark::Slice { backfill: backfill.clone(), slice: recorded });
        let user: Value = serde_json::from_str(written["userMetadata"].as_str().unwrap()).unwrap();
        assert_eq!(user["bf.pre_version"], 5, "userMetadata holds the same keys");
        let comment = backfill.comment_keys().metadata();
        assert_eq!(
            Keys::read(&comment).unwrap().unwrap().mark().unwrap(),
            Mark::Comment { backfill: backfill.clone() }
        );
        for step in [RollbackStep::Restore, RollbackStep::Comment, RollbackStep::Slice(recorded)] {
            let written = rollback_keys(&backfill, step).metadata();
            let mark = Keys::read(&written).unwrap().unwrap().mark().unwrap();
            assert!(matches!(mark, Mark::Rollback { step: s, pre_version: 5, .. } if s == step), "{mark:?}");
        }
    }

    #[test]
    fn a_missing_or_mistyped_key_is_an_error_naming_it_never_a_default() {
        let mut keys = backfill().comment_keys().metadata();
        keys.remove("bf.pre_version");
        let problem = Keys::read(&keys).unwrap().unwrap().mark().unwrap_err();
        assert!(problem.contains("`bf.pre_version` is missing"), "{problem}");
        keys.insert("bf.pre_version".into(), Value::from("five"));
        let problem = Keys::read(&keys).unwrap_err();
        assert!(problem.contains("`bf.pre_version`") && problem.contains("invalid type"), "{problem}");
        let spark = HashMap::from([("engineInfo".to_owned(), Value::from("Apache-Spark/3.5.1"))]);
        assert_eq!(Keys::read(&spark).unwrap(), None);
        let entry = Entry::new(7, None, "WRITE".into(), None, None, &keys);
        let error = entry.mark().unwrap_err();
        assert_eq!(error.version, 7);
        assert!(error.to_string().contains("version 7"), "{error}");
    }

    #[test]
    fn backfills_are_ordered_by_their_commits_not_their_names() {
        let mut entries = Vec::new();
        for (version, id) in ["p", "p-r2", "p-r9", "p-r10"].into_iter().enumerate() {
            let backfill = Backfill { backfill_id: id.into(), plan_id: "p".into(), ..backfill() };
            entries.push(Entry::new(
                version as u64 + 6,
                None,
                "WRITE".into(),
                None,
                None,
                &backfill.comment_keys().metadata(),
            ));
        }
        assert_eq!(backfill_ids(&entries, "p"), ["p", "p-r2", "p-r9", "p-r10"]);
        assert_eq!(backfill_ids(&entries, "other"), Vec::<String>::new());
    }
}
