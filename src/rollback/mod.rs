//! Undoing a backfill, safely, from the table's history alone.
//!
//! 1. Find the backfill in the ledger: its pre-version, its slices, its commits.
//! 2. List every commit after the pre-version, split into this backfill's and other writers'.
//! 3. Full rollback (the default): refuse when other writers committed since — a RESTORE would
//!    silently discard their work — and offer `--window-only`; refuse when VACUUM removed a data file
//!    the pre-version needs (naming them and the retention settings), never restoring with missing
//!    files ignored. Then one RESTORE commit recorded with `bf.rollback_of`, and the comment.
//! 4. Window-only rollback: refuse when another writer wrote inside the window after the backfill
//!    (unless forced); then, per slice, one replaceWhere commit with the rows the slice held at the
//!    pre-version (time travel), exactly once by its own transaction. Writes outside the window stay
//!    (`window.rs`). On a table whose commits bf completes itself, each slice commit is undone file
//!    by file instead (`inverse.rs`).
//! 5. Verify: the window now equals the pre-version's, row by row; a mismatch is an error.
//!
//! Exactly once: a rollback reads its own earlier commits (the RESTORE, the comment, window-only
//! slices by their transactions) and writes only what an interrupted run left out. Finishing a full
//! rollback whose RESTORE committed first checks that the window is still the pre-version's.

use std::collections::BTreeSet;

use deltalake::datafusion::prelude::SessionContext;
use deltalake::{DeltaTable, DeltaTableError};
use serde::Serialize;
use url::Url;

use crate::delta::catalog::CatalogName;
use crate::delta::ledger::{self, Entry, Recorded, RollbackStep};
use crate::delta::store::{StoreError, Stores, display_url};
use crate::delta::table;
use crate::fault::fault;
use crate::window::Window;

mod files;
mod history;
mod horizon;
mod inverse;
mod verify;
mod window;

pub use files::{Within, check_files_exist};
pub use history::{Applied, backfills};
use history::{bf_backfill_of, undone_since};
pub use horizon::{Horizon, horizon, horizon_of};
use verify::same_rows;

#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error("no commit of {table} belongs to backfill {backfill}")]
    UnknownBackfill { table: String, backfill: String },
    #[error(
        "other writers committed to {table} after backfill {backfill}; a full RESTORE would silently discard them:\n{commits}\n\
         {advice}"
    )]
    OthersCommitted { table: String, backfill: String, commits: String, advice: String },
    #[error(
        "other writers wrote inside the window after backfill {backfill}; putting back the pre-version's rows would undo their work too:\n{commits}\n\
         Pass `--force` to roll the window back anyway."
    )]
    OthersInWindow { backfill: String, commits: String },
    #[error(
        "version {version} of {table} cannot be restored: VACUUM removed {count} of its data files:\n{files}\n\
         The table keeps removed files for {retention} (delta.deletedFileRetentionDuration). Nothing was written."
    )]
    MissingFiles { table: String, version: u64, count: usize, files: String, retention: String },
    #[error(
        "the window cannot be put back as version {version} held it: the table's rules changed since, and \
         rows of that version break them:\n{broken}\n\
         Nothing was written. Relax the rule, then run `bf rollback --window-only` again; or leave the backfill in place."
    )]
    RulesBroken { version: u64, broken: String },
    #[error(
        "the window cannot be put back as version {version} held it: columns were renamed since ({renamed}), and \
         the rows put back would leave their values out. Nothing was written. `bf rollback --to-version {version}` \
         restores that version whole (and the old names with it)."
    )]
    Renamed { version: u64, renamed: String },
    #[error("after the rollback, the window differs from version {version}: {detail}")]
    Verify { version: u64, detail: String },
    #[error(
        "backfill {backfill} was rolled back at version {restored}, but the window has changed since ({detail}):\n{commits}\n\
         Nothing was written. `bf rollback --to-version N` restores any version."
    )]
    ChangedSinceRollback { backfill: String, restored: u64, detail: String, commits: String },
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(transparent)]
    Open(#[from] crate::delta::store::OpenError),
    #[error(transparent)]
    Catalog(#[from] crate::delta::catalog::CatalogError),
    #[error(transparent)]
    Frozen(#[from] crate::delta::freeze::FreezeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    UnsafeCommits(#[from] crate::delta::store::UnsafeCommits),
    #[error(transparent)]
    Write(#[from] crate::rehearse::slice_writer::WriteError),
    #[error("{0}")]
    Delta(String),
    #[error(transparent)]
    Unsupported(#[from] crate::delta::compat::Unsupported),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error(
        "another writer committed to {table} while the rollback was being written; nothing was written. \
         Run `bf rollback` again: it weighs that commit like any other"
    )]
    Moved { table: String },
}

impl From<DeltaTableError> for RollbackError {
    fn from(error: DeltaTableError) -> Self {
        RollbackError::Delta(error.to_string())
    }
}

impl From<deltalake::datafusion::error::DataFusionError> for RollbackError {
    fn from(error: deltalake::datafusion::error::DataFusionError) -> Self {
        RollbackError::Delta(error.to_string())
    }
}

/// What a rollback will do, shown before asking.
#[derive(Debug, Clone)]
pub struct RollbackPlan {
    pub table: String,
    pub url: Url,
    /// The table's catalog name, when it was named by one: the rollback's comment goes there too.
    pub catalog: Option<CatalogName>,
    stores: Stores,
    pub backfill: Recorded,
    /// The backfill's commits, which the rollback undoes.
    pub ours: Vec<Entry>,
    /// Commits of an earlier rollback of this backfill that stopped before its end: a rerun
    /// finishes what is missing and writes nothing twice.
    pub earlier: Vec<Entry>,
    /// Other writers' commits since the pre-version: bf backfills still in place among them.
    pub others: Vec<Entry>,
    /// Later bf backfills that were rolled back since, and their rollbacks: commits that cancel
    /// out, so nobody's work a RESTORE of the pre-version would lose.
    pub cancelled: Vec<Entry>,
    /// The window the backfill's slices cover.
    pub window: Window,
    /// The table as read: every check of this reading judges this one table, and a rollback
    /// commits on its version or not at all (in a bucket each load reads the log since its last
    /// checkpoint again).
    as_read: DeltaTable,
}

/// What a rollback did.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackReport {
    pub backfill_id: String,
    pub table: String,
    pub restored_version: u64,
    pub window_only: bool,
    pub new_version: u64,
    /// The versions this run wrote; fewer than a whole rollback when it finished an earlier one,
    /// none when the backfill was already rolled back.
    pub wrote: Vec<u64>,
    /// Window rows before the rollback and after (equal to the pre-version's).
    pub rows_before: u64,
    pub rows_after: u64,
}

/// Reads what undoing `backfill_id` on the table at `url` involves.
pub async fn prepare(stores: &Stores, url: &Url, backfill_id: &str) -> Result<RollbackPlan, RollbackError> {
    stores.require_safe_commits(url)?;
    let table = stores.open(url, None).await?;
    crate::delta::compat::check_writable(&table).await?;
    let name = display_url(url);
    // What undoing it weighs all follows its pre-version, which any of its commits names: the log
    // is read back from the newest commit until one is found, then down to the pre-version.
    let history = ledger::commits_back(&table, |read| {
        read.iter()
            .find_map(|e| e.backfill().filter(|b| b.backfill_id == backfill_id))
            .map(|b| b.pre_version + 1)
    })
    .await?;
    let backfill = ledger::recorded(&history, backfill_id)
        .map_err(ledger::LedgerError::from)?
        .filter(|b| !b.slices.is_empty())
        .ok_or_else(|| RollbackError::UnknownBackfill {
            table: name.clone(),
            backfill: backfill_id.to_owned(),
        })?;
    let pre_version = backfill.backfill.pre_version;
    let undone = undone_since(&history, pre_version, backfill_id);
    let since = history.into_iter().filter(|e| e.version > pre_version);
    let mut plan = RollbackPlan {
        table: name,
        url: url.clone(),
        catalog: None,
        stores: stores.clone(),
        window: Window {
            start: backfill.slices.iter().map(|(s, _)| s.first).min().expect("a backfill has slices"),
            end: backfill.slices.iter().map(|(s, _)| s.last).max().expect("a backfill has slices"),
        },
        backfill,
        ours: Vec::new(),
        earlier: Vec::new(),
        others: Vec::new(),
        cancelled: Vec::new(),
        as_read: table,
    };
    for entry in since {
        if entry.keys.rollback_of.as_deref() == Some(backfill_id) {
            // A rollback step of this backfill must read: it decides what a rerun skips.
            entry.mark().map_err(ledger::LedgerError::from)?;
        }
        if entry.is_of(backfill_id) {
            plan.ours.push(entry);
        } else if entry.rollback_step_of(backfill_id).is_some() {
            plan.earlier.push(entry);
        } else if bf_backfill_of(&entry).is_some_and(|id| undone.contains(id)) {
            plan.cancelled.push(entry);
        } else if !entry.is_maintenance() {
            // Maintenance that changes no row (VACUUM, OPTIMIZE) is nobody's work a RESTORE would
            // lose; what VACUUM deleted is caught by the file check instead.
            plan.others.push(entry);
        }
    }
    Ok(plan)
}

impl RollbackPlan {
    /// What to do instead of a full rollback that other writers' commits block: roll back a later
    /// bf backfill first, put back the window only, or restore a version whatever came since.
    fn advice(&self) -> String {
        let later: BTreeSet<&str> =
            self.others.iter().filter_map(|e| e.backfill().map(|b| b.backfill_id.as_str())).collect();
        let mut ways = Vec::new();
        for id in &later {
            ways.push(format!(
                "roll back backfill {id} first, which is still in place (`bf rollback --table {} --backfill {id}`); then this one",
                self.table
            ));
        }
        ways.push(
            "`--window-only` puts back only this backfill's window and keeps the others' work".to_owned(),
        );
        ways.push(format!(
            "`bf rollback --table {} --to-version {}` restores that version whatever came since, discarding the commits above",
            self.table, self.backfill.backfill.pre_version
        ));
        format!("Instead:\n{}", ways.iter().map(|w| format!("  - {w}")).collect::<Vec<_>>().join("\n"))
    }

    pub(super) fn backfill_id(&self) -> &str {
        &self.backfill.backfill.backfill_id
    }

    /// A commit refused because the table moved past the version it was built on is another
    /// writer's: said as such.
    fn moved(&self, error: DeltaTableError) -> RollbackError {
        match error {
            DeltaTableError::Transaction {
                source: deltalake::kernel::transaction::TransactionError::MaxCommitAttempts(0),
            } => RollbackError::Moved { table: self.table.clone() },
            other => other.into(),
        }
    }

    /// The version of an earlier run's RESTORE of this backfill, if one committed.
    pub fn restored_at(&self) -> Option<u64> {
        self.earlier.iter().find(|e| self.is_restore(e) && e.operation == "RESTORE").map(|e| e.version)
    }

    /// Whether an earlier run wrote the rollback's comment. bf before the typed ledger marked its
    /// rollback comment like its RESTORE; the operation tells them apart.
    fn commented(&self) -> bool {
        self.earlier.iter().any(|e| {
            e.rollback_step_of(self.backfill_id()) == Some(RollbackStep::Comment)
                || (self.is_restore(e) && e.operation != "RESTORE")
        })
    }

    fn is_restore(&self, entry: &Entry) -> bool {
        entry.rollback_step_of(self.backfill_id()) == Some(RollbackStep::Restore)
    }

    /// Every reason the rollback ([`restore`](Self::restore), or [`window_only`](Self::window_only)
    /// with `force`) would refuse before writing, found without writing, on the log as it is now
    /// (read again: what was read before a prompt may be minutes old). Returns the table it
    /// checked, at the version it read: the one a rollback writes on. A chain checks each of its
    /// tables before it rolls back any, and each again as it is rolled back; a single table, once.
    pub async fn check(&self, window_only: bool, force: bool) -> Result<DeltaTable, RollbackError> {
        // This rollback read from the log again, as the table is now: what was shown before a
        // prompt may be minutes old when it is answered, and another writer's commit meanwhile
        // must be weighed like one before it. Every check decides on this reading.
        let now = prepare(&self.stores, &self.url, self.backfill_id()).await?;
        now.check_as_read(window_only, force).await?;
        Ok(now.as_read)
    }

    async fn check_as_read(&self, window_only: bool, force: bool) -> Result<(), RollbackError> {
        // Undoing a backfill rewrites its window: frozen days there need the approval it was
        // applied with, as its plan needed it.
        let table = &self.as_read;
        let what = format!("rolling back backfill {} (window {})", self.backfill_id(), self.window);
        let (unfreeze, by) = (self.backfill.backfill.unfreeze.as_ref(), Some(self.backfill_id()));
        crate::delta::freeze::check(table, &self.window, unfreeze, by, &what).await?;
        if window_only {
            let in_window = self.others_in_window(table).await?;
            if !in_window.is_empty() && !force {
                return Err(RollbackError::OthersInWindow {
                    backfill: self.backfill_id().to_owned(),
                    commits: ledger::describe(&in_window),
                });
            }
        } else if self.restored_at().is_some() {
            // An earlier run restored: finishing it is checked against the window itself.
            return Ok(());
        } else if !self.others.is_empty() {
            return Err(RollbackError::OthersCommitted {
                table: self.table.clone(),
                backfill: self.backfill_id().to_owned(),
                commits: ledger::describe(&self.others),
                advice: self.advice(),
            });
        }
        // A window-only rollback reads the pre-version's files of the window's days, no other: one
        // of another day gone (another writer's reload outside the window, vacuumed) stops only the
        // full rollback.
        let within = window_only
            .then_some(Within { date_column: &self.backfill.backfill.date_column, window: self.window });
        check_files_exist(&self.stores, &self.url, self.backfill.backfill.pre_version, within).await
    }

    /// Whether the backfill is undone: restored, or every slice put back by a window-only rollback.
    pub fn undone(&self) -> bool {
        ledger::undone_at(&self.earlier, &self.backfill).is_some()
    }

    /// Whether a full rollback has nothing left to write.
    pub fn finished(&self) -> bool {
        self.restored_at().is_some() && self.commented()
    }

    /// RESTORE the pre-version in one commit, then record the rollback in the comment. Exactly once:
    /// a rerun after a crash writes only the steps no earlier run committed.
    ///
    /// Decided on the log as it is now, not as it was shown: while this rollback waited for its
    /// answer, another rollback of the same backfill may have restored it and another writer
    /// committed after that. Taking the earlier reading's "not restored yet" would RESTORE a second
    /// time and discard that writer's commit (#68, hole 1).
    pub async fn restore(&self) -> Result<RollbackReport, RollbackError> {
        let mut now = prepare(&self.stores, &self.url, self.backfill_id()).await?;
        now.catalog = self.catalog.clone();
        now.restore_as_read().await
    }

    /// [`restore`](Self::restore), on this reading of the log.
    async fn restore_as_read(&self) -> Result<RollbackReport, RollbackError> {
        let pre_version = self.backfill.backfill.pre_version;
        let mut wrote = Vec::new();
        // (the table, the RESTORE's version, the window's rows if already verified, the table the
        // RESTORE was built on if this run made it)
        let (mut table, restored, verified, before) = match self.restored_at() {
            Some(version) => {
                // An earlier run restored. Finishing it claims the window is the pre-version's
                // again: true only if nothing since has changed it. The comment it may still
                // write changes no row, so this check is the rollback's verification.
                let table = self.stores.open(&self.url, None).await?;
                let rows = match self.verify(&table).await {
                    Ok(rows) => rows,
                    Err(RollbackError::Verify { detail, .. }) => {
                        return Err(RollbackError::ChangedSinceRollback {
                            backfill: self.backfill_id().to_owned(),
                            restored: version,
                            detail,
                            commits: ledger::describe(self.others.iter().filter(|e| e.version > version)),
                        });
                    }
                    Err(other) => return Err(other),
                };
                (table, version, Some(rows), None)
            }
            None => {
                self.check_as_read(false, false).await?;
                let table = self.as_read.clone();
                let before = table.clone();
                fault("rollback-before-restore");
                crate::fault::pause_before_restore();
                // On exactly the version checked: a commit landing after the check fails the
                // RESTORE instead of being discarded by it.
                let commit = ledger::rollback_commit(&self.backfill.backfill, RollbackStep::Restore);
                let table = crate::delta::commit::restore(table, pre_version, commit.with_max_retries(0))
                    .await
                    .map_err(|error| self.moved(error))?;
                let version = table.version().unwrap_or(0);
                wrote.push(version);
                (table, version, None, Some(before))
            }
        };
        if !self.commented() {
            // RESTORE brought back the old comment; say in it what happened. The reason is inert
            // markdown, as in the apply's comment: catalogs render the comment.
            let comment = format!(
                "Backfill {} rolled back on {}: {}",
                self.backfill_id(),
                chrono::Utc::now().date_naive(),
                crate::markdown::text(&self.backfill.backfill.reason)
            );
            fault("rollback-before-comment");
            table = crate::delta::commit::set_description(
                table,
                comment.chars().take(4000).collect(),
                ledger::rollback_commit(&self.backfill.backfill, RollbackStep::Comment),
            )
            .await?;
            wrote.push(table.version().unwrap_or(0));
        }
        if let Some(name) = &self.catalog {
            // The catalog shows what the table's description says now, on a rerun too.
            let description = table.snapshot()?.metadata().description().map(str::to_owned);
            crate::delta::catalog::set_comment(name, &description.unwrap_or_default()).await?;
        }
        // The window's rows before the RESTORE undid the backfill, and now.
        let before = match before {
            Some(before) => before,
            None => self.stores.open(&self.url, Some(restored - 1)).await?,
        };
        let rows_before = self.window_rows(&before).await?;
        let rows_after = match verified {
            Some(rows) => rows,
            None => self.verify(&table).await?,
        };
        Ok(self.report(false, table.version().unwrap_or(0), wrote, rows_before, rows_after))
    }

    pub(super) fn report(
        &self,
        window_only: bool,
        new_version: u64,
        wrote: Vec<u64>,
        rows_before: u64,
        rows_after: u64,
    ) -> RollbackReport {
        RollbackReport {
            backfill_id: self.backfill_id().to_owned(),
            table: self.table.clone(),
            restored_version: self.backfill.backfill.pre_version,
            window_only,
            new_version,
            wrote,
            rows_before,
            rows_after,
        }
    }
}

/// RESTORE an explicit version (`--to-version`): the same file check, one commit, and the whole
/// table verified equal to that version.
pub async fn restore_version(
    stores: &Stores,
    url: &Url,
    version: u64,
) -> Result<RollbackReport, RollbackError> {
    stores.require_safe_commits(url)?;
    let table = stores.open(url, None).await?;
    crate::delta::compat::check_writable(&table).await?;
    // A RESTORE rewrites every day the table changed since: no frozen period may stand.
    let every_day = Window { start: chrono::NaiveDate::MIN, end: chrono::NaiveDate::MAX };
    let what = format!("a RESTORE of version {version}, which may rewrite any day,");
    crate::delta::freeze::check(&table, &every_day, None, None, &what).await?;
    check_files_exist(stores, url, version, None).await?;
    let ctx = SessionContext::new();
    let rows_before = ctx.read_table(table.table_provider().await?)?.count().await? as u64;
    let table = crate::delta::commit::restore(table, version, ledger::restore_to_commit(version)).await?;
    let old = stores.open(url, Some(version)).await?;
    let rows_after =
        same_rows(&table, &old, None).await.map_err(|detail| RollbackError::Verify { version, detail })?;
    let new_version = table.version().unwrap_or(0);
    Ok(RollbackReport {
        backfill_id: String::new(),
        table: display_url(url),
        restored_version: version,
        window_only: false,
        new_version,
        wrote: vec![new_version],
        rows_before,
        rows_after,
    })
}
