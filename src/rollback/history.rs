//! The table's bf backfills as its history tells them: which there are and what became of each
//! (`bf rollback --table T` lists them), and which later ones cancel out with their rollbacks.

use std::collections::BTreeSet;

use serde::Serialize;
use url::Url;

use super::RollbackError;
use crate::delta::ledger::{self, Entry};
use crate::delta::store::Stores;
use crate::window::Window;

/// One backfill of a table as its history tells it: what `bf rollback --table T` lists to choose
/// from.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub backfill_id: String,
    pub reason: String,
    pub window: Window,
    /// The date column its slices are cut on.
    pub date_column: String,
    pub pre_version: u64,
    /// Its first and last slice commits.
    pub versions: (u64, u64),
    pub slices: usize,
    /// The slices its plan has: more than `slices` while its apply is unfinished.
    pub planned: usize,
    /// Whether its apply finished (its comment is in the table).
    pub finished: bool,
    /// The version at which a rollback undid it.
    pub rolled_back_at: Option<u64>,
}

impl Applied {
    /// The days its window-only rollback reads back.
    pub fn within(&self) -> super::Within<'_> {
        super::Within { date_column: &self.date_column, window: self.window }
    }
}

/// The backfills of the table at `url`, newest first.
pub async fn backfills(stores: &Stores, url: &Url) -> Result<Vec<Applied>, RollbackError> {
    let table = stores.open(url, None).await?;
    let history = ledger::commits_after(&table, 0).await?;
    let mut ids: Vec<&str> = Vec::new();
    for entry in history.iter().rev() {
        if let Some(id) = entry.backfill().map(|b| b.backfill_id.as_str()).filter(|id| !ids.contains(id)) {
            ids.push(id);
        }
    }
    let mut applied = Vec::new();
    for id in ids {
        let Some(recorded) = ledger::recorded(&history, id).map_err(ledger::LedgerError::from)? else {
            continue;
        };
        let versions: Vec<u64> = recorded.slices.iter().map(|(_, v)| *v).collect();
        applied.push(Applied {
            backfill_id: id.to_owned(),
            reason: recorded.backfill.reason.clone(),
            window: recorded.backfill.window,
            date_column: recorded.backfill.date_column.clone(),
            pre_version: recorded.backfill.pre_version,
            versions: (
                versions.iter().copied().min().unwrap_or_default(),
                versions.iter().copied().max().unwrap_or_default(),
            ),
            slices: recorded.slices.len(),
            planned: recorded.backfill.slices,
            finished: recorded.commented,
            rolled_back_at: ledger::undone_at(&history, &recorded),
        });
    }
    Ok(applied)
}

/// The bf backfill a commit is part of: one of its slices or its comment, or a step of its rollback.
pub(super) fn bf_backfill_of(entry: &Entry) -> Option<&str> {
    entry.backfill().map(|b| b.backfill_id.as_str()).or(entry.keys.rollback_of.as_deref())
}

/// The bf backfills applied after version `after` (other than `own`) that were rolled back since:
/// by a RESTORE of their pre-version, or slice by slice. Their commits and their rollbacks' cancel
/// out: the table is as if neither had happened.
pub(super) fn undone_since(history: &[Entry], after: u64, own: &str) -> BTreeSet<String> {
    let since: Vec<&Entry> = history.iter().filter(|e| e.version > after).collect();
    let ids: BTreeSet<&str> =
        since.iter().filter_map(|e| bf_backfill_of(e)).filter(|id| *id != own).collect();
    ids.into_iter()
        .filter(|id| {
            let Ok(Some(recorded)) = ledger::recorded(history, id) else { return false };
            // One applied before `after` reaches back past it: undoing it is not cancelling out.
            if recorded.backfill.pre_version < after {
                return false;
            }
            ledger::undone_at(history, &recorded).is_some()
        })
        .map(str::to_owned)
        .collect()
}
