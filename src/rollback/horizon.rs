//! Until when a backfill can be rolled back. A rollback reads its pre-version: the data files that
//! version holds, which VACUUM may delete once a commit removed them and
//! `delta.deletedFileRetentionDuration` (7 days by default) has passed since, and the version's log
//! entry, which log cleanup may delete `delta.logRetentionDuration` (30 days by default) after it
//! was written, once a later checkpoint stands for it. The horizon is the earlier of the two: the
//! first file removed after the pre-version, plus the file retention; the pre-version's commit,
//! plus the log retention. Both rollbacks read the same version, so one date holds for both.
//!
//! What has already happened is checked, not predicted: a file of the pre-version gone, or its
//! log entry, makes the rollback no longer possible, whatever the dates say — the full rollback:
//! a window-only rollback reads only the pre-version's files of the window's days, and stays
//! possible while they are all there.

use chrono::{DateTime, Utc};
use deltalake::DeltaTable;
use object_store::ObjectStoreExt;
use serde_json::Value;
use url::Url;

use super::RollbackError;
use super::files::{Within, check_files_exist_in};
use crate::delta::ledger;
use crate::delta::store::Stores;

/// Whether and until when a backfill can be rolled back.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Horizon {
    /// Possible until `until` at least; after it, `property` (`days` long) lets VACUUM or log
    /// cleanup take what the rollback reads.
    PossibleUntil { until: DateTime<Utc>, property: &'static str, days: f64 },
    /// Possible with no end in sight: nothing was removed since, and the log is kept for ever.
    Possible,
    /// The full rollback is no longer possible (why), and `--window-only` still is: every file of
    /// the pre-version that holds the window's days is there.
    WindowOnly { why: String },
    /// No longer possible: why.
    Gone { why: String },
}

/// Until when the pre-version `pre_version` of the table at `url` can be restored: what a
/// rollback of a backfill applied after it needs; `within`, the backfill's window, which a
/// window-only rollback reads alone.
pub async fn horizon(
    stores: &Stores,
    url: &Url,
    pre_version: u64,
    within: Within<'_>,
) -> Result<Horizon, RollbackError> {
    let latest = stores.open(url, None).await?;
    horizon_of(stores, &latest, pre_version, None, within).await
}

/// [`horizon`] from the tables a caller holds already: the table as it is now, and the table at
/// the pre-version if it has that too. An apply has both, the table it ends with and the one it
/// started from; loading them again read the log twice more, the second time from its last
/// checkpoint before the pre-version, two reads a commit (a third of an apply's log reads in a
/// bucket, docs/BENCHMARKS.md). `at_pre` at any other version is not used: its files are not the
/// pre-version's.
pub async fn horizon_of(
    stores: &Stores,
    latest: &DeltaTable,
    pre_version: u64,
    at_pre: Option<&DeltaTable>,
    within: Within<'_>,
) -> Result<Horizon, RollbackError> {
    let url = latest.table_url();
    let Some(pre) = ledger::read_log(latest, pre_version..=pre_version).await?.pop() else {
        return Ok(Horizon::Gone {
            why: format!(
                "the log entry of version {pre_version} was cleaned up (delta.logRetentionDuration)"
            ),
        });
    };
    let at_pre = match at_pre.filter(|t| t.version() == Some(pre_version)) {
        Some(at_pre) => at_pre.clone(),
        None => stores.open(url, Some(pre_version)).await?,
    };
    match check_files_exist_in(stores, url, &at_pre, None).await {
        Ok(()) => {}
        Err(RollbackError::MissingFiles { count, .. }) => {
            let why = format!("VACUUM removed {count} of version {pre_version}'s data files");
            return match check_files_exist_in(stores, url, &at_pre, Some(within)).await {
                Ok(()) => Ok(Horizon::WindowOnly { why: format!("{why}, none holding the window's days") }),
                Err(RollbackError::MissingFiles { count, .. }) => {
                    Ok(Horizon::Gone { why: format!("{why}, {count} of them holding the window's days") })
                }
                Err(other) => Err(other),
            };
        }
        Err(other) => return Err(other),
    }
    let [(files_property, files_days), (log_property, log_days)] =
        crate::delta::retention::of(latest).map_err(|e| RollbackError::Delta(e.to_string()))?;
    // VACUUM counts from each remove's deletion time; a remove without one, from its commit's.
    let removed = ledger::logged_after(latest, pre_version)
        .await?
        .into_iter()
        .flat_map(|logged| {
            let committed = logged.entry.timestamp;
            logged.actions.into_iter().filter_map(move |action| {
                let remove = action.get("remove")?;
                remove.get("deletionTimestamp").and_then(Value::as_i64).or(committed)
            })
        })
        .min();
    // Log cleanup goes by the commit file's age in the store, not by the time the commit states (a
    // writer's clock, or an in-commit timestamp that a clock running ahead moved on for good): the
    // earlier of the two.
    let stored = latest
        .log_store()
        .object_store(None)
        .head(&object_store::path::Path::from(format!("_delta_log/{pre_version:020}.json")))
        .await
        .ok()
        .map(|meta| meta.last_modified.timestamp_millis());
    let written = [pre.entry.timestamp, stored].into_iter().flatten().min();
    let ends = [(removed, files_property, files_days), (written, log_property, log_days)];
    let end = ends
        .into_iter()
        .filter_map(|(from, property, days)| {
            let kept = chrono::Duration::milliseconds((days * 86_400_000.0).min(i64::MAX as f64) as i64);
            let until = DateTime::from_timestamp_millis(from?)?.checked_add_signed(kept)?;
            Some((until, property, days))
        })
        .min_by_key(|(until, ..)| *until);
    Ok(match end {
        Some((until, property, days)) => Horizon::PossibleUntil { until, property, days },
        None => Horizon::Possible,
    })
}
