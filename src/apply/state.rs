//! How far applying a saved plan got, read from the table alone: for `bf status` and `bf clean`.

use std::collections::{BTreeMap, BTreeSet};

use deltalake::DeltaTable;
use serde::Serialize;

use super::{ApplyError, Unverified, backfill_for, committed, publisher, url_of, verify_committed};
use crate::apply::staleness::Watch;
use crate::delta::ledger;
use crate::delta::store::display_url;
use crate::rehearse::plan::{Plan, SliceReport};
use crate::rollback::{Horizon, horizon_of};
use crate::window::Slice;

/// How far applying a saved plan got, read from the table alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyState {
    pub table: String,
    pub table_version: u64,
    /// The plan's latest backfill in the table (commit order), if any of its slices committed.
    pub backfill_id: Option<String>,
    /// The version that backfill's rollback returns to: the one its commits record (`--rerun all`
    /// starts a backfill of its own, after the first one's commits), or the plan's before any.
    pub pre_version: u64,
    /// The numbers of the slices that backfill committed, in plan order.
    pub committed: Vec<usize>,
    /// The first days of the slices it has not committed, in plan order.
    pub pending: Vec<chrono::NaiveDate>,
    /// Whether its comment commit, the last of an apply, is in the table.
    pub commented: bool,
    /// The version at which a rollback undid it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<u64>,
    /// Who committed each slice, where its commit says (`bf.applied_by`): an Airflow task, or a
    /// host and process.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub committed_by: BTreeMap<usize, String>,
    /// The periods frozen on the table (`bf freeze`), whatever the window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frozen: Vec<crate::delta::freeze::Frozen>,
    /// Which backfill used each approval recorded on those periods (each opens its days to one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approval_uses: Vec<crate::delta::freeze::Use>,
    /// Set when the log since the plan was cleaned up before this version: the committed slices
    /// are then known by their Delta transactions (which checkpoints keep), whether the apply
    /// finished or was rolled back is not, and `bf apply` refuses the plan as stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_cleaned_before: Option<u64>,
}

impl ApplyState {
    /// Whether the plan's latest backfill committed every slice (its comment may still be missing).
    pub fn all_committed(&self) -> bool {
        self.backfill_id.is_some() && self.pending.is_empty()
    }
}

/// What `bf status` tells of a saved plan, read from one load of its table and one read of the
/// table's log since the plan: each part loading the table again read a long log three times.
#[derive(Debug)]
pub struct Status {
    pub state: ApplyState,
    /// Why `bf apply` cannot publish the pending slices' rehearsed files ([`cannot_publish`]).
    pub cannot_publish: Option<String>,
    /// Committed slices whose rows are not the rehearsal's: the backfill cannot be finished.
    pub unverified: Vec<Unverified>,
    /// Until when `bf rollback` can undo the plan's backfill in place: for a backfill applied and
    /// not rolled back, and a store that can tell now (`bf rollback` says what it finds).
    pub rollback: Option<Horizon>,
}

/// Reads what `bf status` tells of the saved plan.
pub async fn status(plan: &Plan) -> Result<Status, ApplyError> {
    let url = url_of(plan)?;
    plan.reach_target().await?;
    let stores = plan.stores().map_err(|e| ApplyError::Stale(e.to_string()))?;
    let target = stores.open(&url, None).await?;
    let since = ledger::logged_after_whole(&target, plan.target.pre_version).await;
    let state = state_of(plan, &url, &target, &since).await?;
    let cannot_publish = cannot_publish(plan, &state).await;
    let unverified = match (state.committed.is_empty(), since) {
        (true, _) => Vec::new(),
        (false, Ok(logged)) => unverified_of(plan, &target, &logged).await?,
        // Cleaned up behind a checkpoint: the commits still held.
        (false, Err(_)) => {
            unverified_of(plan, &target, &ledger::logged_after(&target, plan.target.pre_version).await?)
                .await?
        }
    };
    let rollback = match (&state.backfill_id, state.rolled_back) {
        (Some(_), None) => horizon_of(
            &stores,
            &target,
            state.pre_version,
            None,
            crate::rollback::Within { date_column: &plan.target.date_column, window: plan.window },
        )
        .await
        .ok(),
        _ => None,
    };
    Ok(Status { state, cannot_publish, unverified, rollback })
}

/// Reads how far the saved plan's apply got.
pub async fn state(plan: &Plan) -> Result<ApplyState, ApplyError> {
    let url = url_of(plan)?;
    plan.reach_target().await?;
    let target = plan.stores().map_err(|e| ApplyError::Stale(e.to_string()))?.open(&url, None).await?;
    let since = ledger::logged_after_whole(&target, plan.target.pre_version).await;
    state_of(plan, &url, &target, &since).await
}

/// [`state`] from the table `target` and its log since the plan, `since`.
async fn state_of(
    plan: &Plan,
    url: &url::Url,
    target: &DeltaTable,
    since: &Result<Vec<ledger::Logged>, ledger::WholeLogError>,
) -> Result<ApplyState, ApplyError> {
    // One read of the history answers both: which backfill, and what it committed. The plan's
    // backfills, and their rollbacks, all follow the version it was made at. Read whole: a
    // backfill whose commits were cleaned up is not "not applied".
    let history: Vec<ledger::Entry> = match since {
        Ok(logged) => logged.iter().map(|l| l.entry.clone()).collect(),
        Err(ledger::WholeLogError::Cleaned { first_kept }) => {
            return by_transactions(plan, url, target, *first_kept).await;
        }
        Err(ledger::WholeLogError::Delta(error)) => return Err(ApplyError::Delta(error.to_string())),
    };
    let backfill_id = ledger::backfill_ids(&history, &plan.id).pop();
    let recorded = match &backfill_id {
        Some(id) => ledger::recorded(&history, id).map_err(ledger::LedgerError::from)?,
        None => None,
    };
    let committed: BTreeSet<usize> =
        recorded.iter().flat_map(|r| r.slices.iter().map(|(s, _)| s.index)).collect();
    let frozen = crate::delta::freeze::frozen(target)?;
    let committed_by = match &backfill_id {
        Some(id) => history
            .iter()
            .filter(|e| e.is_slice_of(id))
            .filter_map(|e| Some((e.slice()?.index, e.keys.applied_by.clone()?)))
            .collect(),
        None => BTreeMap::new(),
    };
    Ok(ApplyState {
        table: display_url(url),
        table_version: target.version().unwrap_or(0),
        backfill_id,
        pre_version: recorded.as_ref().map_or(plan.target.pre_version, |r| r.backfill.pre_version),
        committed: plan.slices.iter().map(|s| s.index).filter(|i| committed.contains(i)).collect(),
        pending: plan.slices.iter().filter(|s| !committed.contains(&s.index)).map(|s| s.first).collect(),
        rolled_back: recorded.as_ref().and_then(|r| ledger::undone_at(&history, r)),
        commented: recorded.is_some_and(|r| r.commented),
        committed_by,
        approval_uses: crate::delta::freeze::uses_of_all(target, &frozen).await,
        frozen,
        log_cleaned_before: None,
    })
}

/// [`state`] when the commits since the plan were cleaned up behind a checkpoint: the plan's first
/// backfill's slices are found by their Delta transactions, which checkpoints keep; its comment and
/// any rollback, recorded in commits only, cannot be read.
async fn by_transactions(
    plan: &Plan,
    url: &url::Url,
    target: &deltalake::DeltaTable,
    first_kept: u64,
) -> Result<ApplyState, ApplyError> {
    let backfill = backfill_for(plan, &[], false, plan.target.pre_version);
    let slices: Vec<Slice> = plan.slices.iter().map(SliceReport::slice).collect();
    let committed: BTreeSet<usize> = backfill.committed_slices(target, &slices).await?.into_iter().collect();
    Ok(ApplyState {
        table: display_url(url),
        table_version: target.version().unwrap_or(0),
        backfill_id: (!committed.is_empty()).then_some(backfill.backfill_id),
        pre_version: plan.target.pre_version,
        committed: plan.slices.iter().map(|s| s.index).filter(|i| committed.contains(i)).collect(),
        pending: plan.slices.iter().filter(|s| !committed.contains(&s.index)).map(|s| s.first).collect(),
        commented: false,
        rolled_back: None,
        committed_by: BTreeMap::new(),
        approval_uses: Vec::new(),
        frozen: crate::delta::freeze::frozen(target)?,
        log_cleaned_before: Some(first_kept),
    })
}

/// The committed slices of the plan's latest backfill whose rows are not the rehearsal's: what stops
/// its resume, its retries and its finish. Counts rows, so only what reports it asks.
async fn unverified_of(
    plan: &Plan,
    target: &DeltaTable,
    logged: &[ledger::Logged],
) -> Result<Vec<Unverified>, ApplyError> {
    let since: Vec<_> = logged.iter().map(|l| l.entry.clone()).collect();
    let backfill = backfill_for(plan, &since, false, target.version().unwrap_or(0));
    let slices: Vec<Slice> = plan.slices.iter().map(SliceReport::slice).collect();
    let done = committed(logged, &backfill, &slices);
    let watch = Watch::new(&plan.id, plan.target.pre_version, target, &plan.target.date_column);
    verify_committed(target, &watch, &done, plan, &slices, |_| true).await
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
    publisher(&stores, plan, pending, None).await.err()
}
