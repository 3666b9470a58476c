//! The commits bf makes, as the ledger has them carry their keys: a slice's, the comment's, a
//! rollback's, a RESTORE's, a rehearsal's — each with the Delta transaction that makes it happen
//! once, and the lookup of that transaction ("is slice 17 committed?"). It writes no key by name:
//! it fills [`Keys`], which spells them.

use std::collections::HashMap;

use deltalake::kernel::Transaction;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::{DeltaTable, DeltaTableError};
use serde_json::Value;

use super::keys::{Backfill, Keys, Mark, RollbackStep};
use super::periods::Frozen;
use crate::window::Slice;

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

    pub(super) fn slice_keys(&self, slice: &Slice) -> Keys {
        Keys {
            slice: Some(slice.index),
            slice_first: Some(slice.first),
            slice_last: Some(slice.last),
            applied_by: Some(worker()),
            receipt: self.receipt.clone(),
            ..self.keys()
        }
    }

    /// The commit properties of the comment commit that ends an apply.
    pub fn comment_commit(&self) -> CommitProperties {
        self.comment_keys().commit()
    }

    pub(super) fn comment_keys(&self) -> Keys {
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
            unfreeze: self.unfreeze.clone(),
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

/// Who is running bf: the user of the process (recorded with a freeze and in the change log).
pub fn user() -> String {
    std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into())
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

pub(super) fn rollback_keys(backfill: &Backfill, step: RollbackStep) -> Keys {
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

/// The commit properties of a freeze (`lifted`: of lifting one).
pub fn freeze_commit(period: &Frozen, lifted: bool) -> CommitProperties {
    match lifted {
        false => Keys { frozen: Some(period.clone()), ..Keys::default() },
        true => Keys { unfrozen: Some(period.clone()), ..Keys::default() },
    }
    .commit()
}

/// The commit properties of an approval to rewrite frozen days (`bf unfreeze --approved-by`).
pub fn approval_commit(approval: &super::periods::Approval) -> CommitProperties {
    Keys { approved: Some(approval.clone()), ..Keys::default() }.commit()
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
