//! Writing one slice: the single code path by which bf changes a table.
//!
//! `bf plan` writes every slice into the rehearsal through this writer and `bf apply` writes them into
//! the target through it, so the rehearsal proves what apply will do. A slice is exactly one commit,
//! a replaceWhere on `date_column >= first AND date_column <= last`:
//! - `replace`: every row of those days is swapped for the source's; a row outside them makes the
//!   whole write fail;
//! - `merge`: the slice's rows become the source's rows plus the target's rows of the slice whose key
//!   the source lacks (with `delete_missing`, only the source's). That is a MERGE on the key restricted
//!   to the slice — matched rows take the source's values, new keys are inserted, the rest are kept —
//!   written as the slice's replaceWhere. deltalake's own MERGE cannot run on a rehearsal: it
//!   resolves every live file of the table against the table's root, and a shallow clone's files
//!   outside the window live in the target's folder ("merge remove … is outside table root"). As a
//!   replaceWhere, a merge slice reads and rewrites only the files of its days, on every layout,
//!   in the rehearsal and in the real table alike. Target rows sharing a key with a source row are
//!   all replaced by that one row: a merge never multiplies rows.
//!
//! The commit carries the caller's `CommitProperties` (bf's ledger keys, the app transaction), so
//! whoever reads the table's history can tell which backfill and slice wrote it.

use deltalake::datafusion::common::{JoinType, ScalarValue};
use deltalake::datafusion::prelude::DataFrame;
use deltalake::datafusion::prelude::{cast, ident, lit};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use crate::delta::predicate::slice_predicate;
use crate::delta::row_rules::{Broken, RowRules};
use crate::plan_file::{PlanFile, WriteMode};
use crate::source::run::{SliceSource, session_state};
use crate::window::Slice;

/// How slices are written to a table.
#[derive(Debug, Clone)]
pub struct SliceWriter {
    pub date_column: String,
    pub mode: WriteMode,
    /// The key a merge matches rows on.
    pub key: Vec<String>,
    /// Whether a merge also deletes the slice's rows whose key the source lacks.
    pub delete_missing: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("slice {slice} ({first}..{last}) was not written: {}", match (broken, at) {
    (Some(broken), _) => format!("{broken}. Fix the source so every row keeps the table's rules."),
    (None, Some(at)) => format!("{source} ({at})"),
    (None, None) => source.to_string(),
})]
pub struct WriteError {
    pub slice: usize,
    pub first: String,
    pub last: String,
    /// The table rule a row broke, when that is why deltalake refused the write.
    pub broken: Option<Box<Broken>>,
    /// Where in the slice's input files a value the engine could not cast is (`file:line`).
    pub at: Option<String>,
    #[source]
    pub source: Box<DeltaTableError>,
}

impl SliceWriter {
    /// The writer a plan's slices are written with, in the rehearsal and in the real table.
    pub fn for_plan(spec: &PlanFile) -> SliceWriter {
        SliceWriter {
            date_column: spec.target.date_column.clone(),
            mode: spec.write.mode,
            key: spec.target.key.clone().unwrap_or_default(),
            delete_missing: spec.write.delete_missing,
        }
    }

    /// A writer that replaces slices of `date_column` (a window-only rollback).
    pub fn replace(date_column: &str) -> SliceWriter {
        SliceWriter {
            date_column: date_column.to_owned(),
            mode: WriteMode::Replace,
            key: Vec::new(),
            delete_missing: false,
        }
    }

    /// Writes `source`'s rows for `slice` into `table` as one commit and returns the table after it.
    pub async fn write(
        &self,
        table: DeltaTable,
        slice: &Slice,
        source: &SliceSource,
        commit: CommitProperties,
    ) -> Result<DeltaTable, WriteError> {
        let error = |source| WriteError {
            slice: slice.index,
            first: slice.first.to_string(),
            last: slice.last.to_string(),
            broken: None,
            at: None,
            source: Box::new(source),
        };
        let predicate = slice_predicate(&self.date_column, slice);
        let mut rows = source.rows.clone();
        if crate::fault::corrupt(&format!("drop-row:{}", slice.index)) {
            // A test hook: one row of the slice is lost on the way to the table.
            rows = rows.limit(1, None).map_err(|e| error(e.into()))?;
        }
        // A rehearsal of a table keeping row ids: the source's rows are new, with no ids of their
        // own until the commit that publishes them gives them fresh ones.
        let hidden = crate::delta::row_tracking::rehearsal_columns(&table);
        for column in hidden.iter().flat_map(|h| h.columns()) {
            rows = rows.with_column(column, lit(ScalarValue::Int64(None))).map_err(|e| error(e.into()))?;
        }
        // What an update keeps of the row it replaces: its row id, and the values only the table
        // makes (a `GENERATED ALWAYS` identity column, whose new rows get new values here).
        let mut kept_on_update: Vec<String> = hidden.iter().map(|h| h.row_id.clone()).collect();
        for identity in
            crate::delta::identity::always(&table).map_err(|e| error(DeltaTableError::Generic(e)))?
        {
            rows = with_new_identities(&table, rows, &identity).await.map_err(error)?;
            kept_on_update.push(identity.column);
        }
        if self.mode == WriteMode::Merge {
            rows =
                self.merged(&table, source, rows, predicate.clone(), &kept_on_update).await.map_err(error)?;
        }
        let rules = RowRules::of(table.snapshot().map_err(&error)?);
        // A rehearsal keeping row ids: the rows of the files the slice rewrites that it carries
        // (other days' rows, each with its id) and the slice's own rows go into files apart, one
        // commit each, published as one. In one file, a later slice of the same backfill rewriting
        // it would carry the slice's rows again, and publishing them as rehearsed gives them new
        // ids: the ids the slice's own commit gave them would be lost. With the change data feed
        // on, the appended rows' inserts are written as change-data files in a third commit
        // (`delta::change_data`): the published commit holds the first one's change-data files, and
        // a reader takes it from those alone.
        let written = match hidden.is_some() {
            false => write_rows(table, &rows, Some(predicate), source, commit).await,
            true => write_apart(table, &rows, predicate, source, commit).await,
        };
        match written {
            Ok(table) => Ok(table),
            // deltalake says how many rows broke a rule, not which rule: find it, and the row.
            Err(refused) if refused.to_string().contains("Invalid data found") => {
                let broken = rules.first_broken(&rows).await.ok().flatten().map(Box::new);
                Err(WriteError { broken, ..error(refused) })
            }
            Err(other) => {
                let at = crate::source::found::uncastable(&other.to_string(), &source.files);
                Err(WriteError { at, ..error(other) })
            }
        }
    }

    /// The slice's rows after a merge: the source's, and (unless `delete_missing`) the target's whose
    /// key the source lacks. A kept row carries every column it has (in a rehearsal keeping row ids,
    /// its id and commit version); a source row matching a target row takes that row's value of each
    /// column `kept_on_update` names — with `delete_missing` too: an update keeps the row's id and
    /// its identity value (its commit version is the publishing commit's).
    async fn merged(
        &self,
        table: &DeltaTable,
        source: &SliceSource,
        rows: DataFrame,
        predicate: deltalake::datafusion::logical_expr::Expr,
        kept_on_update: &[String],
    ) -> Result<DataFrame, DeltaTableError> {
        if self.delete_missing && kept_on_update.is_empty() {
            return Ok(rows);
        }
        let key: Vec<&str> = self.key.iter().map(String::as_str).collect();
        // The source's columns: a generated column it leaves out is computed for kept rows too.
        let columns: Vec<String> = rows.schema().fields().iter().map(|f| f.name().clone()).collect();
        let target = source.ctx.read_table(table.table_provider().await?)?.filter(predicate)?;
        let kept = target.clone().select(columns.iter().map(ident).collect::<Vec<_>>())?.join(
            rows.clone(),
            JoinType::LeftAnti,
            &key,
            &key,
            None,
        )?;
        let rows = match kept_on_update.is_empty() {
            true => rows,
            false => updated_keep(rows, target, &key, kept_on_update, &columns)?,
        };
        match self.delete_missing {
            true => Ok(rows),
            false => Ok(kept.union(rows)?),
        }
    }
}

/// Whether `table` records its changes in a change data feed (`delta.enableChangeDataFeed`).
fn change_data_feed(table: &DeltaTable) -> bool {
    use deltalake::table::config::TablePropertiesExt;
    table.snapshot().is_ok_and(|state| state.table_config().enable_change_data_feed())
}

/// A slice of a rehearsal keeping row ids, written apart: its replaceWhere with no rows (the files
/// of its days removed, their other days' rows carried), then its own rows appended, and with the
/// change data feed on their inserts' change-data files — commits published as one.
async fn write_apart(
    table: DeltaTable,
    rows: &DataFrame,
    predicate: deltalake::datafusion::logical_expr::Expr,
    source: &SliceSource,
    commit: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    let feed = change_data_feed(&table);
    let carried = rows.clone().limit(0, Some(0))?;
    let table = write_rows(table, &carried, Some(predicate), source, commit.clone()).await?;
    let table = write_rows(table, rows, None, source, commit.clone()).await?;
    if !feed {
        return Ok(table);
    }
    let appended = table.version().unwrap_or(0);
    crate::delta::change_data::insert_changes(table, appended, commit).await
}

/// `rows` written in one commit: as the slice's replaceWhere on `predicate` (the files of its days
/// removed, their other days' rows carried into new files with `rows`), or appended without one.
async fn write_rows(
    table: DeltaTable,
    rows: &DataFrame,
    predicate: Option<deltalake::datafusion::logical_expr::Expr>,
    source: &SliceSource,
    commit: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    let write = table
        .write(vec![])
        .with_input_plan(rows.logical_plan().clone())
        .with_session_state(session_state(&source.ctx))
        .with_commit_properties(commit);
    match predicate {
        Some(predicate) => write.with_save_mode(SaveMode::Overwrite).with_replace_where(predicate).await,
        None => write.with_save_mode(SaveMode::Append).await,
    }
}

/// The source's rows of a merge, each matching a target row with that row's value in each of the
/// `kept` columns (the smallest, where several target rows share its key and are all replaced by
/// it); a row matching none keeps its own.
fn updated_keep(
    rows: DataFrame,
    target: DataFrame,
    key: &[&str],
    kept: &[String],
    columns: &[String],
) -> Result<DataFrame, DeltaTableError> {
    use deltalake::datafusion::functions::expr_fn::coalesce;
    use deltalake::datafusion::functions_aggregate::expr_fn::min;
    let matched: Vec<String> = (0..key.len()).map(|i| format!("__bf_key_{i}")).collect();
    let held = |i: usize| format!("__bf_kept_{i}");
    let values = target.aggregate(
        key.iter().zip(&matched).map(|(k, m)| ident(*k).alias(m)).collect(),
        kept.iter().enumerate().map(|(i, c)| min(ident(c)).alias(held(i))).collect(),
    )?;
    let matched: Vec<&str> = matched.iter().map(String::as_str).collect();
    let joined = rows.join(values, JoinType::Left, key, &matched, None)?;
    let select = columns.iter().map(|c| match kept.iter().position(|k| k == c) {
        Some(i) => coalesce(vec![ident(held(i)), ident(c)]).alias(c),
        None => ident(c),
    });
    Ok(joined.select(select.collect::<Vec<_>>())?)
}

/// `rows` with new values of a `GENERATED ALWAYS` identity column: `start + k × step` beyond every
/// value `table` holds or its mark names ([`crate::delta::identity::generated_after`]), one per row.
async fn with_new_identities(
    table: &DeltaTable,
    rows: DataFrame,
    identity: &crate::delta::identity::Identity,
) -> Result<DataFrame, DeltaTableError> {
    use deltalake::arrow::datatypes::DataType;
    use deltalake::datafusion::functions_window::expr_fn::row_number;
    let after =
        crate::delta::identity::generated_after(table, identity).await.map_err(DeltaTableError::Generic)?;
    let schema =
        crate::delta::table::arrow_schema(table).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    let column_type = schema.field_with_name(&identity.column)?.data_type().clone();
    let nth = cast(row_number(), DataType::Int64);
    let value = lit(after) + lit(identity.step) * nth;
    Ok(rows.with_column(&identity.column, cast(value, column_type))?)
}
