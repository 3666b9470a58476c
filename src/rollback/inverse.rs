//! A window-only rollback on a table whose commits bf completes itself (in-commit timestamps, row
//! ids, identity marks, domains: `delta/commit.rs`). deltalake's replaceWhere cannot commit to such
//! a table, so each of the backfill's slice commits is undone file by file instead: the files it
//! added removed, the files it removed added back as they were — statistics, deletion vectors and
//! row ids included — in one commit through `delta/commit.rs`, the last slice first (a slice may
//! have rewritten a file an earlier slice wrote). No row is rewritten: every row of the window
//! comes back exactly as the pre-version held it, with its row id.
//!
//! It works while the backfill's files are still the table's own. Another writer's commit that
//! removed one of them (a DELETE, an OPTIMIZE) or brought back one it removed leaves nothing to undo
//! file by file, and is refused naming the file; another writer's rows in the window are refused
//! before (`others_in_window`), `--force` or not, since undoing bf's files would not put the window
//! back over them.

use std::collections::HashMap;

use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add};
use deltalake::protocol::{DeltaOperation, SaveMode};
use futures::TryStreamExt;
use serde_json::Value;

use super::{RollbackError, RollbackPlan, RollbackReport, slice_of};
use crate::delta::ledger::{self, RollbackStep};
use crate::delta::predicate::slice_predicate;
use crate::delta::store::Stores;
use crate::fault::fault;

impl RollbackPlan {
    /// [`window_only`](Self::window_only) on a table whose commits bf completes itself: each slice
    /// commit undone file by file (`rollback/inverse.rs`), the last slice first, exactly once by its
    /// own transaction.
    pub(super) async fn window_only_file_by_file(
        &self,
        mut table: DeltaTable,
        rows_before: u64,
    ) -> Result<RollbackReport, RollbackError> {
        let in_window = self.others_in_window(&table).await?;
        if !in_window.is_empty() {
            return Err(RollbackError::Delta(format!(
                "other writers wrote inside the window after backfill {}; on this table bf rolls the window \
                 back by undoing its own commits file by file, which cannot put the window back under \
                 theirs:\n{}\nNothing was written.",
                self.backfill_id(),
                ledger::describe(&in_window)
            )));
        }
        let done = self.slices_put_back(&table).await?;
        let mut undo: Vec<_> =
            self.backfill.slices.iter().filter(|(s, _)| !done.contains(&s.index)).collect();
        undo.sort_by_key(|(_, version)| std::cmp::Reverse(*version));
        let date_column = &self.backfill.backfill.date_column;
        let mut wrote = Vec::new();
        for (recorded, version) in undo {
            let slice = slice_of(recorded);
            fault(&format!("rollback-before-slice:{}", slice.index));
            let predicate = slice_predicate(date_column, &slice).to_string();
            let commit = ledger::rollback_commit(&self.backfill.backfill, RollbackStep::Slice(*recorded));
            table = undo_slice(&self.stores, table, *version, predicate, commit).await?;
            wrote.push(table.version().unwrap_or(0));
            fault(&format!("rollback-after-commit:{}", slice.index));
        }
        let rows_after = self.verify(&table).await?;
        Ok(self.report(true, table.version().unwrap_or(0), wrote, rows_before, rows_after))
    }
}

/// Undoes the slice commit at `version` on `table`: one commit of `properties` through
/// `delta/commit.rs`. Returns the table after it.
pub(super) async fn undo_slice(
    stores: &Stores,
    table: DeltaTable,
    version: u64,
    predicate: String,
    properties: deltalake::kernel::transaction::CommitProperties,
) -> Result<DeltaTable, RollbackError> {
    let (added, removed) = files_of(&table, version).await?;
    let live: HashMap<String, _> = table
        .get_active_add_actions_by_predicate(None)
        .map_ok(|file| (file.path().into_owned(), file))
        .try_collect()
        .await?;
    let gone = |path: &str, why: &str| {
        RollbackError::Delta(format!(
            "the window cannot be rolled back file by file: {path}, which version {version} (a slice of the \
             backfill) {why}. Nothing more was written; roll the whole backfill back with `bf rollback` \
             (a RESTORE) where no other writer committed since"
        ))
    };
    let deleted_at = chrono::Utc::now().timestamp_millis();
    let mut actions = Vec::new();
    for path in &added {
        let file = live.get(path).ok_or_else(|| gone(path, "added, is no longer in the table"))?;
        let mut remove = file.remove_action(true);
        remove.deletion_timestamp = Some(deleted_at);
        actions.push(Action::Remove(remove));
    }
    let mut before = table.clone();
    before.load_version(version - 1).await?;
    let then: HashMap<String, Add> = before
        .get_active_add_actions_by_predicate(None)
        .map_ok(|file| {
            #[allow(deprecated)] // The whole add, as committed: deltalake has no other public way.
            let add = file.add_action();
            (file.path().into_owned(), add)
        })
        .try_collect()
        .await?;
    for path in &removed {
        if live.contains_key(path) {
            return Err(gone(path, "removed, is in the table again"));
        }
        let add = then.get(path).ok_or_else(|| gone(path, "removed, is not in the version before it"))?;
        let url = crate::delta::store::join(table.table_url(), path);
        if !stores.exists(&url).await? {
            return Err(gone(path, "removed, was deleted since (VACUUM)"));
        }
        actions.push(Action::Add(Add { data_change: true, ..add.clone() }));
    }
    let partition_by = crate::delta::table::partition_columns(&table);
    let operation = DeltaOperation::Write {
        mode: SaveMode::Overwrite,
        partition_by: (!partition_by.is_empty()).then_some(partition_by),
        predicate: Some(predicate),
    };
    let name = crate::delta::store::display_url(table.table_url());
    crate::delta::commit::commit(table, actions, operation, properties).await.map_err(|e| {
        match crate::delta::commit::lost_race(&e) {
            true => RollbackError::Moved { table: name },
            false => e.into(),
        }
    })
}

/// The paths (decoded) of the data files commit `version` added and removed, from its log entry.
async fn files_of(table: &DeltaTable, version: u64) -> Result<(Vec<String>, Vec<String>), RollbackError> {
    let bytes = table.log_store().read_commit_entry(version).await?.ok_or_else(|| {
        RollbackError::Delta(format!(
            "version {version}, a slice of the backfill, is no longer in the table's log (cleaned up): the \
             window cannot be rolled back file by file"
        ))
    })?;
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for line in String::from_utf8_lossy(&bytes).lines() {
        let Ok(action) = serde_json::from_str::<Value>(line) else { continue };
        let decoded =
            |path: &str| percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned();
        if let Some(path) = action.pointer("/add/path").and_then(Value::as_str) {
            added.push(decoded(path));
        }
        if let Some(path) = action.pointer("/remove/path").and_then(Value::as_str) {
            removed.push(decoded(path));
        }
    }
    Ok((added, removed))
}
