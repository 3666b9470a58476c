//! Step 4 of a rollback, the window only: per slice, one replaceWhere commit with the rows the slice
//! held at the pre-version, in the table's columns as they are now, exactly once by its own
//! transaction; outside the window, other writers' work stays. Refused before the first write
//! where it could not finish or would be wrong: another writer wrote inside the window (unless
//! forced), a column was renamed since, or rows of the pre-version break the table's rules now.

use std::collections::BTreeSet;

use deltalake::DeltaTable;

use super::{RollbackError, RollbackPlan, RollbackReport};
use crate::delta::ledger::{self, Entry, RollbackStep};
use crate::delta::predicate::slice_predicate;
use crate::delta::table;
use crate::fault::fault;
use crate::rehearse::slice_writer::SliceWriter;
use crate::source::run::SliceSource;
use crate::window::Slice;

impl RollbackPlan {
    /// Put back the window's rows slice by slice, keeping other writers' work outside it.
    ///
    /// Decided on the log as it is now, not as it was shown, as [`restore`](Self::restore) is:
    /// another writer's commit inside the window while this rollback waited for its answer is
    /// weighed like one before it. On a table rolled back file by file, the earlier reading's list
    /// of other writers missed it, undid bf's files under its rows and left the window not the
    /// pre-version's, found only by the verification after the commits.
    pub async fn window_only(&self, force: bool) -> Result<RollbackReport, RollbackError> {
        let now = super::prepare(&self.stores, &self.url, self.backfill_id()).await?;
        now.window_only_as_read(force).await
    }

    /// [`window_only`](Self::window_only), on this reading of the log.
    async fn window_only_as_read(&self, force: bool) -> Result<RollbackReport, RollbackError> {
        self.check_as_read(true, force).await?;
        // From the version checked: each slice's replaceWhere then fails on a commit landing in its
        // days since (deltalake's conflict check reads its predicate), never writes over it.
        let mut table = self.as_read.clone();
        let pre_version = self.backfill.backfill.pre_version;
        let rows_before = self.window_rows(&table).await?;
        if crate::delta::commit::Own::of(&table).needed() {
            return self.window_only_file_by_file(table, rows_before, force).await;
        }
        let date_column = self.backfill.backfill.date_column.clone();
        let writer = SliceWriter::replace(&date_column);
        let old = self.stores.open(&self.url, Some(pre_version)).await?;
        let renamed = renamed_since(&old, &table);
        if !renamed.is_empty() {
            return Err(RollbackError::Renamed { version: pre_version, renamed: renamed.join(", ") });
        }
        let done = self.slices_put_back(&table).await?;
        let pending: Vec<&ledger::RecordedSlice> =
            self.backfill.slices.iter().map(|(s, _)| s).filter(|s| !done.contains(&s.index)).collect();
        // Rows the pre-version held that the table's rules forbid now (a constraint another writer
        // added since) would stop the rollback at their slice, the slices before it put back: every
        // slice is checked before the first is written.
        let rules = crate::delta::row_rules::RowRules::of(table.snapshot()?);
        let mut broken = Vec::new();
        for slice in pending.iter().map(|recorded| slice_of(recorded)).filter(|_| !rules.rules().is_empty()) {
            let rows = pre_version_rows(&old, &table, &date_column, &slice).await?.rows;
            if let Some(rule) = rules.first_broken(&rows).await? {
                broken.push(format!("  - {slice}: {rule}"));
            }
        }
        if !broken.is_empty() {
            return Err(RollbackError::RulesBroken { version: pre_version, broken: broken.join("\n") });
        }
        let mut wrote = Vec::new();
        for recorded in pending {
            let slice = slice_of(recorded);
            let source = pre_version_rows(&old, &table, &date_column, &slice).await?;
            fault(&format!("rollback-before-slice:{}", slice.index));
            let mut commit = ledger::rollback_commit(&self.backfill.backfill, RollbackStep::Slice(*recorded));
            if crate::delta::table::partition_values_by_physical_name(&table) {
                // deltalake 1.1 panics checking a concurrent commit on such a table: a slice that
                // finds the table moved fails instead, and `bf rollback` again goes on from it.
                commit = commit.with_max_retries(0);
            }
            table = writer.write(table, &slice, &source, commit).await?;
            wrote.push(table.version().unwrap_or(0));
            fault(&format!("rollback-after-commit:{}", slice.index));
        }
        let rows_after = self.verify(&table).await?;
        Ok(self.report(true, table.version().unwrap_or(0), wrote, rows_before, rows_after))
    }

    /// The slices an earlier run of a window-only rollback of this backfill already put back, each
    /// known by its own transaction.
    pub(super) async fn slices_put_back(&self, table: &DeltaTable) -> Result<BTreeSet<usize>, RollbackError> {
        let slices = self
            .backfill
            .slices
            .iter()
            .map(|(s, _)| (s.index, ledger::rollback_app_id(self.backfill_id(), s.index)));
        Ok(ledger::committed(table, slices).await?.into_iter().collect())
    }

    /// Other writers' commits since the backfill that added or removed, as a change of data, a file
    /// that may hold window rows: by its partition value or statistics, and a remove that names
    /// neither by its add's — in a commit since the pre-version, or among the pre-version's files
    /// (`delta::footprint`, the apply's rule too) — and changed a row of the window, or are a later
    /// backfill's slices over its days. A DELETE of April on a table not partitioned by the day is
    /// no write inside March; a remove whose add cannot be found may hold any day (an overwrite
    /// without a predicate removes every file).
    pub(super) async fn others_in_window(&self, table: &DeltaTable) -> Result<Vec<Entry>, RollbackError> {
        use std::collections::HashMap;

        use crate::delta::footprint::{Footprint, files_at};
        use crate::delta::table::FileDates;
        // The log keys partition values and statistics by the column's physical name.
        let column = &crate::delta::table::physical_name(table, &self.backfill.backfill.date_column);
        let pre_version = self.backfill.backfill.pre_version;
        let latest = table.version().unwrap_or(0);
        // Every commit since the pre-version, read once: the others', and the adds of all of them.
        let since: HashMap<u64, Footprint> = match latest > pre_version {
            true => ledger::read_log(table, pre_version + 1..=latest)
                .await?
                .iter()
                .map(|logged| (logged.entry.version, Footprint::of(logged, column)))
                .collect(),
            false => HashMap::new(),
        };
        let added: HashMap<&str, FileDates> = since.values().flat_map(Footprint::added).collect();
        let others: Vec<(&Entry, Option<&Footprint>)> =
            self.others.iter().map(|entry| (entry, since.get(&entry.version))).collect();
        let unresolved = others
            .iter()
            .filter_map(|(_, footprint)| *footprint)
            .flat_map(Footprint::undated_removes)
            .any(|path| !added.contains_key(path));
        let at_pre = match unresolved {
            true => files_at(table, pre_version, column).await?,
            false => HashMap::new(),
        };
        let dates_of =
            |path: &str| added.get(path).or_else(|| at_pre.get(path)).copied().unwrap_or(FileDates::Unknown);
        let may_touch: Vec<&Entry> = others
            .into_iter()
            .filter(|(_, footprint)| match footprint {
                // Its log entry was cleaned up: what it did cannot be told, so it may have.
                None => true,
                Some(footprint) => {
                    footprint.touches_days(self.window.start, self.window.end, &dates_of).is_some()
                }
            })
            .map(|(entry, _)| entry)
            .collect();
        let mut touched = Vec::new();
        for entry in may_touch {
            if self.later_backfill_here(entry) || self.changes_window_rows(entry.version).await {
                touched.push(entry.clone());
            }
        }
        Ok(touched)
    }

    /// Whether `entry` is a slice of a later bf backfill, still in place, over some of the
    /// window's days. Such a slice is a reviewed change whether or not it changed a row (a
    /// `--rerun all` writes the same rows again): putting the window back under it would leave it
    /// recorded as applied over rows it no longer holds, and its own rollback would then bring
    /// this backfill's rows back. It is rolled back first, as a full rollback's advice says.
    fn later_backfill_here(&self, entry: &Entry) -> bool {
        entry.slice().is_some_and(|slice| slice.first <= self.window.end && self.window.start <= slice.last)
    }

    /// Whether the commit at `version` changed a row of the window. Its files' days only say it
    /// may have: a DELETE of April rewrites a file of March and April (an unpartitioned table)
    /// keeping March's rows as they were (#68, hole 10). The window's rows just before it and just
    /// after it, compared as multisets; where either cannot be read (a file vacuumed, a column
    /// added), it may have.
    async fn changes_window_rows(&self, version: u64) -> bool {
        let differs = async {
            let before = self.stores.open(&self.url, Some(version.checked_sub(1)?)).await.ok()?;
            let after = self.stores.open(&self.url, Some(version)).await.ok()?;
            let rows = |table: DeltaTable| async move {
                let ctx = deltalake::datafusion::prelude::SessionContext::new_with_state(
                    crate::delta::memory::session_state(None),
                );
                self.stores.register(&ctx, table.table_url()).ok()?;
                let provider = crate::delta::row_tracking::visible(&table).await.ok()?;
                let whole = crate::window::Slice {
                    index: 0,
                    first: self.window.start,
                    last: self.window.end,
                    run_date: self.window.start,
                };
                ctx.read_table(provider)
                    .ok()?
                    .filter(slice_predicate(&self.backfill.backfill.date_column, &whole))
                    .ok()
            };
            let (before, after) = (rows(before).await?, rows(after).await?);
            let gone = before.clone().except(after.clone()).ok()?.count().await.ok()?;
            let new = after.except(before).ok()?.count().await.ok()?;
            Some(gone + new > 0)
        };
        differs.await.unwrap_or(true)
    }
}

/// A slice as the backfill's commits recorded it.
pub(super) fn slice_of(recorded: &ledger::RecordedSlice) -> Slice {
    Slice { index: recorded.index, first: recorded.first, last: recorded.last, run_date: recorded.first }
}

/// The columns of `now` that `old` held under another name (`old name → new name`): under column
/// mapping a column is its physical name, and a rename keeps it. Matched by name alone, a renamed
/// column would look added since, and the rows put back would hold NULL in it.
fn renamed_since(old: &DeltaTable, now: &DeltaTable) -> Vec<String> {
    if !table::maps_columns(now) {
        return Vec::new();
    }
    let (Ok(then), Ok(current)) = (table::arrow_schema(old), table::arrow_schema(now)) else {
        return Vec::new();
    };
    // Every column by its physical name: two swapped, or one renamed onto a dropped one's name,
    // keep the names and move the values.
    current
        .fields()
        .iter()
        .filter_map(|field| {
            let physical = table::physical_name(now, field.name());
            let was = then.fields().iter().find(|f| table::physical_name(old, f.name()) == physical)?;
            (was.name() != field.name()).then(|| format!("{} → {}", was.name(), field.name()))
        })
        .collect()
}

/// The rows `old` (the pre-version) held in `slice`'s days, as a slice's source, in the columns of
/// `now` (the table as it is): a column another writer added since is NULL in them, one it widened
/// is read as its new type. A table lives for years; its schema moves under its backfills.
async fn pre_version_rows(
    old: &DeltaTable,
    now: &DeltaTable,
    date_column: &str,
    slice: &Slice,
) -> Result<SliceSource, RollbackError> {
    use deltalake::datafusion::common::{Column, ScalarValue};
    use deltalake::datafusion::logical_expr::{Expr, ExprSchemable};
    let ctx = deltalake::delta_datafusion::create_session().into_inner();
    ctx.register_table("__bf_pre_version", old.table_provider().await?)?;
    let rows = ctx.table("__bf_pre_version").await?.filter(slice_predicate(date_column, slice))?;
    let then = rows.schema().clone();
    let columns: Vec<Expr> = table::arrow_schema(now)?
        .fields()
        .iter()
        .map(|field| {
            let column = Column::from_name(field.name());
            let value = match then.field_with_unqualified_name(field.name()) {
                Ok(held) if held.data_type() == field.data_type() => return Ok(Expr::Column(column)),
                Ok(_) => Expr::Column(column),
                Err(_) => Expr::Literal(ScalarValue::Null, None),
            };
            Ok(value.cast_to(field.data_type(), &then)?.alias(field.name()))
        })
        .collect::<Result<_, RollbackError>>()?;
    let rows = rows.select(columns)?;
    Ok(SliceSource { ctx, rows, files: Vec::new(), folders: Vec::new() })
}
