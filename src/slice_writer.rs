//! Writing one slice: the single code path by which bf changes a table.
//!
//! `bf plan` writes every slice into the rehearsal through this writer and `bf apply` writes them into
//! the target through it, so the rehearsal proves what apply will do. A slice is exactly one commit:
//! - `replace`: a replaceWhere on `date_column >= first AND date_column <= last`; every row of those days
//!   is swapped for the source's, and a row outside them makes the whole write fail;
//! - `merge`: a MERGE on the key, with the target side restricted to the slice's days: matched rows are
//!   updated, new ones inserted, others in the slice kept.
//!
//! The commit carries the caller's `CommitProperties` (bf's ledger keys, the app transaction), so
//! whoever reads the table's history can tell which backfill and slice wrote it.

use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::Expr;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use crate::plan_file::WriteMode;
use crate::predicate::slice_predicate;
use crate::source::run::{SliceSource, session_state};
use crate::window::Slice;

/// How slices are written to a table.
#[derive(Debug, Clone)]
pub struct SliceWriter {
    pub date_column: String,
    pub mode: WriteMode,
    pub key: Vec<String>,
    /// Columns of the table, for the merge's update and insert clauses.
    pub columns: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("slice {slice} ({first}..{last}) was not written: {source}")]
pub struct WriteError {
    pub slice: usize,
    pub first: String,
    pub last: String,
    #[source]
    pub source: Box<DeltaTableError>,
}

impl SliceWriter {
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
            source: Box::new(source),
        };
        let predicate = slice_predicate(&self.date_column, slice);
        let mut rows = source.rows.clone();
        if crate::fault::corrupt(&format!("drop-row:{}", slice.index)) {
            // A test hook: one row of the slice is lost on the way to the table.
            rows = rows.limit(1, None).map_err(|e| error(e.into()))?;
        }
        match self.mode {
            WriteMode::Replace => table
                .write(vec![])
                .with_input_plan(rows.logical_plan().clone())
                .with_session_state(session_state(&source.ctx))
                .with_save_mode(SaveMode::Overwrite)
                .with_replace_where(predicate)
                .with_commit_properties(commit)
                .await
                .map_err(error),
            WriteMode::Merge => {
                let side = |name: &str, column: &str| Expr::Column(Column::new(Some(name), column));
                let on_key = self
                    .key
                    .iter()
                    .map(|k| side("target", k).eq(side("source", k)))
                    .reduce(Expr::and)
                    .expect("merge plans have a key (validated)");
                let target_slice = slice_predicate(&self.date_column, slice);
                let target_slice = qualify(target_slice, "target");
                let (merged, _metrics) = table
                    .merge(rows, on_key.and(target_slice))
                    .with_source_alias("source")
                    .with_target_alias("target")
                    .with_session_state(session_state(&source.ctx))
                    .with_commit_properties(commit)
                    .when_matched_update(|update| {
                        self.columns.iter().fold(update, |u, c| u.update(c.as_str(), side("source", c)))
                    })
                    .and_then(|m| {
                        m.when_not_matched_insert(|insert| {
                            self.columns.iter().fold(insert, |i, c| i.set(c.as_str(), side("source", c)))
                        })
                    })
                    .map_err(error)?
                    .await
                    .map_err(error)?;
                Ok(merged)
            }
        }
    }
}

/// The slice predicate with its column qualified by the merge's target alias.
fn qualify(predicate: Expr, alias: &str) -> Expr {
    use deltalake::datafusion::common::tree_node::{Transformed, TreeNode};
    predicate
        .transform(|e| match e {
            Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new(Some(alias), c.name)))),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
        .expect("rewriting column references cannot fail")
}
