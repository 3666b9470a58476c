//! A window-only rollback on a table whose commits bf completes itself (in-commit timestamps, row
//! ids, identity marks, domains: `delta/commit.rs`). deltalake's replaceWhere cannot commit to such
//! a table, so each of the backfill's slice commits is undone file by file instead: the files it
//! added removed, the files it removed added back as they were — statistics, deletion vectors and
//! row ids included — in one commit through `delta/commit.rs`, the last slice first (a slice may
//! have rewritten a file an earlier slice wrote). No row is rewritten: every row of the window
//! comes back exactly as the pre-version held it, with its row id.
//!
//! It works while the backfill's files are still the table's own. Another writer's commit that
//! removed one of them (a DELETE, an OPTIMIZE) or brought back one it removed, or a VACUUM of one
//! it removed, leaves nothing to undo file by file: every undo is checked before the first is
//! written (`undos`), and the rollback is refused naming the file, nothing written. Another
//! writer's rows in the window are refused before that (`others_in_window`), `--force` or not,
//! since undoing bf's files would not put the window back over them.

use std::collections::{HashMap, HashSet};

use deltalake::DeltaTable;
use deltalake::kernel::{Action, Add};
use deltalake::protocol::{DeltaOperation, SaveMode};
use futures::TryStreamExt;
use serde_json::Value;

use super::window::slice_of;
use super::{RollbackError, RollbackPlan, RollbackReport};
use crate::delta::ledger::{self, RollbackStep};
use crate::delta::predicate::slice_predicate;
use crate::delta::store::Stores;
use crate::fault::fault;

impl RollbackPlan {
    /// [`window_only`](Self::window_only) on a table whose commits bf completes itself: each slice
    /// commit undone file by file (`rollback/inverse.rs`), the last slice first, exactly once by its
    /// own transaction. Another writer's rows in the window refuse it even when `forced`: unforced,
    /// the window-only check already refused them on this same reading.
    pub(super) async fn window_only_file_by_file(
        &self,
        mut table: DeltaTable,
        rows_before: u64,
        forced: bool,
    ) -> Result<RollbackReport, RollbackError> {
        let in_window = if forced { self.others_in_window(&table).await? } else { Vec::new() };
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
        // Every undo is checked before the first is written: one that could not be done, found
        // half way, would leave the window half rolled back, and every rerun stopped at it.
        let undos = undos(&self.stores, &table, undo.iter().map(|(_, version)| *version)).await?;
        let date_column = &self.backfill.backfill.date_column;
        let mut wrote = Vec::new();
        for ((recorded, _), undo) in undo.into_iter().zip(undos) {
            let slice = slice_of(recorded);
            fault(&format!("rollback-before-slice:{}", slice.index));
            let predicate = slice_predicate(date_column, &slice).to_string();
            let commit = ledger::rollback_commit(&self.backfill.backfill, RollbackStep::Slice(*recorded));
            table = undo.commit(table, predicate, commit).await?;
            wrote.push(table.version().unwrap_or(0));
            fault(&format!("rollback-after-commit:{}", slice.index));
        }
        let rows_after = self.verify(&table).await?;
        Ok(self.report(true, table.version().unwrap_or(0), wrote, rows_before, rows_after))
    }
}

/// What undoing one slice commit does: the files it added removed, the files it removed added
/// back.
pub(super) struct Undo {
    /// The slice commit's version.
    version: u64,
    remove: Vec<String>,
    add_back: Vec<String>,
}

/// The undo of each commit at `versions` (in the order they are undone) on `table` as it is now,
/// each checked against the table as the undos before it leave it: every file a commit added is
/// still in the table then, and every file it removed is not, and is still in storage.
pub(super) async fn undos(
    stores: &Stores,
    table: &DeltaTable,
    versions: impl IntoIterator<Item = u64>,
) -> Result<Vec<Undo>, RollbackError> {
    let mut live: HashSet<String> = table
        .get_active_add_actions_by_predicate(None)
        .map_ok(|file| file.path().into_owned())
        .try_collect()
        .await?;
    let mut undos = Vec::new();
    for version in versions {
        let (added, removed) = files_of(table, version).await?;
        let gone = |path: &str, why: &str| {
            RollbackError::Delta(format!(
                "the window cannot be rolled back file by file: {path}, which version {version} (a slice of the \
                 backfill) {why}. Nothing was written; roll the whole backfill back with `bf rollback` (a \
                 RESTORE) where no other writer committed since"
            ))
        };
        for path in &added {
            if !live.remove(path) {
                return Err(gone(path, "added, is no longer in the table"));
            }
        }
        for path in &removed {
            if live.contains(path) {
                return Err(gone(path, "removed, is in the table again"));
            }
            if !stores.exists(&crate::delta::store::join(table.table_url(), path)).await? {
                return Err(gone(path, "removed, was deleted since (VACUUM)"));
            }
            live.insert(path.clone());
        }
        undos.push(Undo { version, remove: added, add_back: removed });
    }
    Ok(undos)
}

impl Undo {
    /// Commits this undo to `table`: one commit of `properties` through `delta/commit.rs`, each
    /// file added back exactly as the version before the slice held it (statistics, deletion
    /// vector, row ids). Returns the table after it.
    async fn commit(
        self,
        table: DeltaTable,
        predicate: String,
        properties: deltalake::kernel::transaction::CommitProperties,
    ) -> Result<DeltaTable, RollbackError> {
        let version = self.version;
        let live: HashMap<String, _> = table
            .get_active_add_actions_by_predicate(None)
            .map_ok(|file| (file.path().into_owned(), file))
            .try_collect()
            .await?;
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
        // Checked by `undos` for the table as it was; a file missing here means the table moved
        // since, which the commit would find too.
        let moved = |path: &str| {
            RollbackError::Delta(format!(
                "{path}, which the undo of version {version} needs, is not where it was when the rollback \
                 checked the table: another writer committed meanwhile; run `bf rollback` again"
            ))
        };
        let deleted_at = chrono::Utc::now().timestamp_millis();
        let mut actions = Vec::new();
        for path in &self.remove {
            let mut remove = live.get(path).ok_or_else(|| moved(path))?.remove_action(true);
            remove.deletion_timestamp = Some(deleted_at);
            actions.push(Action::Remove(remove));
        }
        for path in &self.add_back {
            let add = then.get(path).ok_or_else(|| {
                RollbackError::Delta(format!(
                    "version {version} removed {path}, which version {} does not hold: the log is not one \
                     bf can undo file by file. Nothing more was written",
                    version - 1
                ))
            })?;
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
