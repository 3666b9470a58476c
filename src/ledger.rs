//! The ledger: what bf writes into every commit it makes, so the table's own history says what was
//! done, when, why, and which version to go back to — readable by `bf`, by `DESCRIBE HISTORY` in
//! Spark and Databricks, and on any machine, without `.bf/`.
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
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::window::{Slice, Window};

/// The prefix of every key bf writes into commitInfo.
pub const PREFIX: &str = "bf.";

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
    pub bf: HashMap<String, Value>,
}

impl Backfill {
    /// The app id of a slice's Delta transaction.
    pub fn app_id(&self, slice: usize) -> String {
        format!("bf:{}:{slice}", self.backfill_id)
    }

    /// The commit properties of one slice: ledger keys, `userMetadata`, app transaction.
    pub fn slice_commit(&self, slice: &Slice) -> CommitProperties {
        let mut keys = self.keys();
        keys.extend([
            ("slice".to_owned(), json!(slice.index)),
            ("slice_first".to_owned(), json!(slice.first)),
            ("slice_last".to_owned(), json!(slice.last)),
        ]);
        with_keys(CommitProperties::default(), keys)
            .with_application_transaction(Transaction::new(self.app_id(slice.index), slice.index as i64))
    }

    /// The commit properties of the comment commit that ends an apply.
    pub fn comment_commit(&self) -> CommitProperties {
        let mut keys = self.keys();
        keys.push(("comment".to_owned(), json!(true)));
        with_keys(CommitProperties::default(), keys)
    }

    fn keys(&self) -> Vec<(String, Value)> {
        vec![
            ("backfill_id".to_owned(), json!(self.backfill_id)),
            ("plan_id".to_owned(), json!(self.plan_id)),
            ("plan_sha256".to_owned(), json!(self.plan_sha256)),
            ("pre_version".to_owned(), json!(self.pre_version)),
            ("reason".to_owned(), json!(self.reason)),
            ("window_start".to_owned(), json!(self.window.start)),
            ("window_end".to_owned(), json!(self.window.end)),
            ("date_column".to_owned(), json!(self.date_column)),
            ("slices".to_owned(), json!(self.slices)),
        ]
    }

    /// The slice numbers of this backfill already committed to `table` (by their transactions).
    /// Each lookup replays the log on a blocking thread, so they run side by side.
    pub async fn committed_slices(
        &self,
        table: &DeltaTable,
        slices: &[Slice],
    ) -> Result<Vec<usize>, DeltaTableError> {
        let state = table.snapshot()?;
        let log_store = table.log_store();
        let lookups = slices.iter().map(|slice| {
            let app_id = self.app_id(slice.index);
            let log_store = log_store.clone();
            async move {
                let version = state.transaction_version(log_store.as_ref(), app_id).await?;
                Ok::<_, DeltaTableError>(version.map(|_| slice.index))
            }
        });
        let found = futures::future::try_join_all(lookups).await?;
        Ok(found.into_iter().flatten().collect())
    }
}

impl Recorded {
    /// The app id of a window-only rollback's slice transaction.
    pub fn rollback_app_id(&self, slice: u64) -> String {
        format!("bf-rollback:{}:{slice}", self.backfill_id)
    }

    /// The commit properties of a rollback commit: which backfill it undoes and why it was done.
    pub fn rollback_commit(&self, slice: Option<(u64, NaiveDate, NaiveDate)>) -> CommitProperties {
        let mut keys = vec![
            ("rollback_of".to_owned(), json!(self.backfill_id)),
            ("pre_version".to_owned(), json!(self.pre_version)),
            ("reason".to_owned(), json!(self.reason)),
        ];
        let properties = match slice {
            Some((index, first, last)) => {
                keys.extend([
                    ("rollback_slice".to_owned(), json!(index)),
                    ("slice_first".to_owned(), json!(first)),
                    ("slice_last".to_owned(), json!(last)),
                ]);
                CommitProperties::default()
                    .with_application_transaction(Transaction::new(self.rollback_app_id(index), index as i64))
            }
            None => CommitProperties::default(),
        };
        with_keys(properties, keys)
    }
}

/// `bf.<key>` entries and a `userMetadata` JSON string holding them all.
fn with_keys(properties: CommitProperties, keys: Vec<(String, Value)>) -> CommitProperties {
    let user_metadata: serde_json::Map<String, Value> =
        keys.iter().map(|(k, v)| (format!("{PREFIX}{k}"), v.clone())).collect();
    let mut metadata: Vec<(String, Value)> =
        keys.into_iter().map(|(k, v)| (format!("{PREFIX}{k}"), v)).collect();
    metadata.push(("userMetadata".to_owned(), Value::String(Value::Object(user_metadata).to_string())));
    properties.with_metadata(metadata)
}

/// A backfill as the table's history records it: found there alone, without `.bf/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    pub backfill_id: String,
    pub plan_id: Option<String>,
    pub pre_version: u64,
    pub reason: String,
    pub date_column: String,
    /// The slices its commits wrote: (slice number, first day, last day, version).
    pub slices: Vec<(u64, NaiveDate, NaiveDate, u64)>,
    /// Versions of all its commits (slices and comment).
    pub versions: Vec<u64>,
}

/// Reads backfill `backfill_id` from the table's history; `None` when no commit names it.
pub async fn find_backfill(
    table: &DeltaTable,
    backfill_id: &str,
) -> Result<Option<Recorded>, DeltaTableError> {
    let entries = commits_after(table, 0).await?;
    let ours: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.bf.get("backfill_id").and_then(Value::as_str) == Some(backfill_id))
        .collect();
    let Some(first) = ours.first() else { return Ok(None) };
    let text = |e: &Entry, k: &str| e.bf.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(Some(Recorded {
        backfill_id: backfill_id.to_owned(),
        plan_id: text(first, "plan_id"),
        pre_version: first.bf.get("pre_version").and_then(Value::as_u64).unwrap_or(0),
        reason: text(first, "reason").unwrap_or_default(),
        date_column: text(first, "date_column").unwrap_or_default(),
        slices: ours
            .iter()
            .filter_map(|e| {
                let (first, last) = e.slice_bounds()?;
                Some((e.slice()? as u64, first, last, e.version))
            })
            .collect(),
        versions: ours.iter().map(|e| e.version).collect(),
    }))
}

/// The backfill ids a plan's applies recorded, oldest first.
pub async fn backfills_of_plan(table: &DeltaTable, plan_id: &str) -> Result<Vec<String>, DeltaTableError> {
    let mut ids: Vec<String> = Vec::new();
    for entry in commits_after(table, 0).await? {
        if entry.bf.get("plan_id").and_then(Value::as_str) == Some(plan_id)
            && let Some(id) = entry.bf.get("backfill_id").and_then(Value::as_str)
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_owned());
        }
    }
    Ok(ids)
}

/// The data files a commit added, with their partition values and statistics, read from its log entry.
pub async fn added_files(table: &DeltaTable, version: u64) -> Result<Vec<Value>, DeltaTableError> {
    let Some(bytes) = table.log_store().read_commit_entry(version as _).await? else { return Ok(Vec::new()) };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok()?.get("add").cloned())
        .collect())
}

/// The table's commits after `after_version`, oldest first.
pub async fn commits_after(table: &DeltaTable, after_version: u64) -> Result<Vec<Entry>, DeltaTableError> {
    let latest = table.version().unwrap_or(0);
    if latest <= after_version {
        return Ok(Vec::new());
    }
    let mut entries = history(table, Some((latest - after_version) as usize)).await?;
    entries.reverse();
    Ok(entries)
}

/// The table's last `limit` commits (all without a limit), newest first, with versions: delta-rs's
/// history has none, so they are counted down from the latest (every commit delta-rs and Spark
/// write carries a commitInfo).
pub async fn history(table: &DeltaTable, limit: Option<usize>) -> Result<Vec<Entry>, DeltaTableError> {
    let latest = table.version().unwrap_or(0);
    let infos: Vec<_> = table.history(limit).try_collect().await?;
    let entries: Vec<Entry> = infos
        .into_iter()
        .zip((0..=latest).rev())
        .map(|(info, version)| {
            let bf = info
                .info
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(PREFIX).map(|k| (k.to_owned(), v.clone())))
                .collect();
            let predicate = info
                .operation_parameters
                .as_ref()
                .and_then(|p| p.get("predicate"))
                .and_then(|p| p.as_str().map(str::to_owned).or_else(|| Some(p.to_string())));
            let metrics = info.info.get("operationMetrics");
            let rows_written =
                ["num_added_rows", "numOutputRows", "num_target_rows_inserted"].iter().find_map(|k| {
                    let value = metrics?.get(*k)?;
                    value.as_u64().or_else(|| value.as_str()?.parse().ok())
                });
            Entry {
                version,
                timestamp: info.timestamp,
                operation: info.operation.unwrap_or_default(),
                predicate,
                rows_written,
                bf,
            }
        })
        .collect();
    Ok(entries)
}

/// Commits as a list for messages: `  - version 6: WRITE (order_date = …) at 2026-11-29 15:44:48 UTC`.
pub fn describe<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> String {
    entries
        .into_iter()
        .map(|e| {
            let predicate = e.predicate.as_ref().map(|p| format!(" ({p})")).unwrap_or_default();
            let when = e
                .timestamp
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format(" at %Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default();
            format!("  - version {}: {}{predicate}{when}", e.version, e.operation)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Entry {
    /// Whether this commit is a slice of the given backfill.
    pub fn is_slice_of(&self, backfill_id: &str) -> bool {
        self.bf.get("backfill_id").and_then(Value::as_str) == Some(backfill_id)
            && self.bf.contains_key("slice")
    }

    /// The slice number recorded in a slice commit.
    pub fn slice(&self) -> Option<usize> {
        self.bf.get("slice")?.as_u64().map(|n| n as usize)
    }

    /// The slice bounds recorded in a slice commit.
    pub fn slice_bounds(&self) -> Option<(NaiveDate, NaiveDate)> {
        let day = |k: &str| self.bf.get(k)?.as_str()?.parse().ok();
        Some((day("slice_first")?, day("slice_last")?))
    }
}
