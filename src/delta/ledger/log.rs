//! Reading the ledger back from a table's log: each commit as an [`Entry`] (bf's keys, or none for
//! another writer's), the log read by version numbers, and a backfill found in the history alone
//! ([`Recorded`]). A commit whose keys cannot be read is an error naming its version. It writes
//! nothing, and reads keys only through [`Keys`].

use std::collections::HashMap;

use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use serde_json::Value;

use super::keys::{Backfill, Keys, Mark, RecordedSlice, RollbackStep};

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

/// The table's commits after the version a plan was made at, `planned_at`, where its backfills
/// are. Read whole: commits cleaned up since may have been the plan's, and "never applied" would
/// be a guess.
pub async fn entries_since_plan(table: &DeltaTable, planned_at: u64) -> Result<Vec<Entry>, LedgerError> {
    let logged = logged_after_whole(table, planned_at).await.map_err(|source| match source {
        WholeLogError::Delta(error) => LedgerError::Delta(error),
        cleaned => LedgerError::Cleaned { after: planned_at, source: cleaned },
    })?;
    Ok(logged.into_iter().map(|l| l.entry).collect())
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

/// Reading the ledger failed: the log could not be read, or a commit's keys could not.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error(transparent)]
    Delta(#[from] DeltaTableError),
    #[error(transparent)]
    Malformed(#[from] Malformed),
    /// The commits after `after` were cleaned up: which backfills they hold cannot be read, nor
    /// version `after` restored.
    #[error(
        "{source}: the backfills applied after version {after} can no longer be read from the table's history, \
         nor version {after} restored. `bf history TABLE` lists the versions left; `bf rollback --to-version N` \
         restores one of them"
    )]
    Cleaned { after: u64, source: WholeLogError },
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
    /// Whether the commit changed no row and no part of the table's definition: no file added or
    /// removed as a change of data, no `metaData`, `protocol` or change-data action (`None` where
    /// its actions were not read).
    #[serde(skip)]
    keeps_data: Option<bool>,
}

impl Entry {
    pub(super) fn new(
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
        Entry {
            version,
            timestamp,
            operation,
            predicate,
            rows_written,
            keys,
            malformed,
            mark,
            keeps_data: None,
        }
    }

    /// Whether the commit is maintenance a RESTORE loses nobody's work by undoing: VACUUM, or an
    /// OPTIMIZE that, as its actions say, changed no row (files rewritten with `dataChange: false`).
    /// The operation's name alone proves nothing: any writer names its commit.
    pub fn is_maintenance(&self) -> bool {
        matches!(self.operation.as_str(), "VACUUM START" | "VACUUM END" | "OPTIMIZE")
            && self.keeps_data == Some(true)
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

/// The version at which the backfill `recorded` was undone — its rollback's RESTORE, or the last of
/// its slices put back one by one — when it was.
pub fn undone_at(history: &[Entry], recorded: &Recorded) -> Option<u64> {
    let id = recorded.backfill.backfill_id.as_str();
    let steps: Vec<&Entry> = history.iter().filter(|e| e.rollback_step_of(id).is_some()).collect();
    let restore = steps
        .iter()
        .find(|e| e.rollback_step_of(id) == Some(RollbackStep::Restore) && e.operation == "RESTORE");
    if let Some(restore) = restore {
        return Some(restore.version);
    }
    let put_back = |index: usize| {
        steps
            .iter()
            .find(|e| matches!(e.rollback_step_of(id), Some(RollbackStep::Slice(s)) if s.index == index))
    };
    let versions: Option<Vec<u64>> =
        recorded.slices.iter().map(|(s, _)| put_back(s.index).map(|e| e.version)).collect();
    versions.and_then(|v| v.into_iter().max())
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
    /// Whether this commit carries the Delta transaction `app_id` (a `txn` action): the mark of a
    /// commit made exactly once, read from the commit itself rather than by replaying the log.
    pub fn has_transaction(&self, app_id: &str) -> bool {
        self.actions
            .iter()
            .any(|a| a.get("txn").and_then(|t| t.get("appId")).and_then(Value::as_str) == Some(app_id))
    }

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
            // Where the table has in-commit timestamps, the commit's time is its own (PROTOCOL.md):
            // the file's time and the writer's clock in `timestamp` may say otherwise.
            info.get("inCommitTimestamp").or_else(|| info.get("timestamp")).and_then(Value::as_i64),
            // A commit without commitInfo (some writers omit it) still has a place in the history.
            info.get("operation").and_then(Value::as_str).unwrap_or("(no commitInfo)").to_owned(),
            predicate,
            rows_written,
            &info,
        );
        let changes = |action: &Value| {
            ["metaData", "protocol", "cdc"].iter().any(|kind| action.get(kind).is_some())
                || ["add", "remove"].iter().any(|kind| {
                    // `dataChange` is required of both; one that does not say is taken as a change.
                    action
                        .get(kind)
                        .is_some_and(|file| file.get("dataChange").and_then(Value::as_bool) != Some(false))
                })
        };
        let entry = Entry { keeps_data: Some(!actions.iter().any(changes)), ..entry };
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

/// The log since some version could not be read whole: a commit's file is gone.
#[derive(Debug, thiserror::Error)]
pub enum WholeLogError {
    /// The oldest versions were cleaned up behind a checkpoint (`delta.logRetentionDuration`, 30
    /// days by default): what those commits did cannot be known any more.
    #[error("the table's log before version {first_kept} was cleaned up (delta.logRetentionDuration)")]
    Cleaned { first_kept: u64 },
    #[error(transparent)]
    Delta(#[from] DeltaTableError),
}

/// [`read_log`], every commit of it: where any of those versions' file is gone, what happened in
/// them cannot be told, and a reader judging that must not guess.
pub async fn read_log_whole(
    table: &DeltaTable,
    versions: std::ops::RangeInclusive<u64>,
) -> Result<Vec<Logged>, WholeLogError> {
    let logged = read_log(table, versions.clone()).await?;
    let held: std::collections::BTreeSet<u64> = logged.iter().map(|l| l.entry.version).collect();
    if let Some(missing) = versions.clone().find(|v| !held.contains(v)) {
        // Cleanup removes the oldest files: the first version still held is after the gap.
        let first_kept = held.range(missing..).next().copied().unwrap_or(versions.end() + 1);
        return Err(WholeLogError::Cleaned { first_kept });
    }
    Ok(logged)
}

/// [`logged_after`], every commit of it ([`read_log_whole`]).
pub async fn logged_after_whole(
    table: &DeltaTable,
    after_version: u64,
) -> Result<Vec<Logged>, WholeLogError> {
    let latest = table.version().unwrap_or(0);
    if latest <= after_version {
        return Ok(Vec::new());
    }
    read_log_whole(table, after_version + 1..=latest).await
}

/// The table's commits after `after_version` up to the version `table` was loaded at, oldest first.
pub async fn commits_after(table: &DeltaTable, after_version: u64) -> Result<Vec<Entry>, DeltaTableError> {
    Ok(logged_after(table, after_version).await?.into_iter().map(|l| l.entry).collect())
}

/// [`commits_after`] with each commit's actions.
pub async fn logged_after(table: &DeltaTable, after_version: u64) -> Result<Vec<Logged>, DeltaTableError> {
    let latest = table.version().unwrap_or(0);
    if latest <= after_version {
        return Ok(Vec::new());
    }
    read_log(table, after_version + 1..=latest).await
}

/// How many commits the first step of [`commits_back`] reads; each further step reads twice as
/// many, so a long way back takes few rounds.
const FIRST_STEP: u64 = 32;

/// The table's commits from the newest back to the oldest `needs` asks for, oldest first, as
/// [`commits_after`] returns them. `needs` sees the commits read so far and answers with the
/// oldest version its reader needs once it can tell (a backfill's pre-version, found on any of
/// its commits), `None` while it cannot, and reading goes on back to version 0.
///
/// For a reader that knows only what it looks for, not where: a table's log holds years of
/// commits, one request each in a bucket, and what a backfill's rollback needs follows its
/// pre-version.
pub async fn commits_back(
    table: &DeltaTable,
    needs: impl Fn(&[Entry]) -> Option<u64>,
) -> Result<Vec<Entry>, DeltaTableError> {
    let Some(latest) = table.version() else { return Ok(Vec::new()) };
    let mut entries: Vec<Entry> = Vec::new();
    // Every version from `from` to `latest` has been read.
    let mut from = latest + 1;
    let mut step = FIRST_STEP;
    while from > 0 {
        let oldest = match needs(&entries) {
            Some(oldest) if oldest >= from => break,
            Some(oldest) => oldest,
            None => from.saturating_sub(step),
        };
        let older = read_log(table, oldest..=from - 1).await?;
        entries.splice(0..0, older.into_iter().map(|l| l.entry));
        from = oldest;
        step = step.saturating_mul(2);
    }
    Ok(entries)
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
            // bf's own commits are named as such: a reader must tell them from another writer's.
            let whose = match (&e.mark, &e.keys.rollback_of) {
                (Some(Mark::Slice { backfill, slice }), _) => {
                    format!(" — bf backfill {}, {slice}", backfill.backfill_id)
                }
                (Some(Mark::Comment { backfill }), _) => {
                    format!(" — bf backfill {}, its comment", backfill.backfill_id)
                }
                (_, Some(of)) => format!(" — bf rollback of backfill {of}"),
                _ => String::new(),
            };
            format!("  - version {}: {}{predicate}{}{whose}", e.version, e.operation, at(e.timestamp))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
