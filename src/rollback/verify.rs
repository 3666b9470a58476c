//! Step 5 of a rollback: the window it put back equals the pre-version's, row by row, each row as
//! many times; and, for `--to-version`, the whole table equals the version restored. A mismatch is
//! an error, never a warning: a rollback that cannot show it undid the backfill did not.

use deltalake::DeltaTable;
use deltalake::datafusion::logical_expr::Expr;
use deltalake::datafusion::prelude::SessionContext;

use super::{RollbackError, RollbackPlan};
use crate::delta::predicate::window_predicate;

impl RollbackPlan {
    /// How many rows `table` holds in the backfill's window.
    pub(super) async fn window_rows(&self, table: &DeltaTable) -> Result<u64, RollbackError> {
        let window = window_predicate(&self.backfill.backfill.date_column, &self.window);
        let ctx = SessionContext::new();
        Ok(ctx.read_table(table.table_provider().await?)?.filter(window)?.count().await? as u64)
    }

    /// The window of `table` equals the pre-version's, row by row, each row as many times (`same_rows`);
    /// returns its row count.
    pub(super) async fn verify(&self, table: &DeltaTable) -> Result<u64, RollbackError> {
        let pre_version = self.backfill.backfill.pre_version;
        let corrupted;
        let table = if crate::fault::corrupt("rollback-verify") {
            // A test hook: the comparison reads the table as the backfill left it.
            let backfilled = self.ours.iter().map(|e| e.version).max();
            corrupted = self.stores.open(&self.url, backfilled).await?;
            &corrupted
        } else {
            table
        };
        let window = window_predicate(&self.backfill.backfill.date_column, &self.window);
        let old = self.stores.open(&self.url, Some(pre_version)).await?;
        same_rows(table, &old, Some(window))
            .await
            .map_err(|detail| RollbackError::Verify { version: pre_version, detail })
    }
}

/// Compares two versions row by row, within `filter` when given: each distinct row with the number
/// of times it is there, compared both ways. (DataFusion's `EXCEPT ALL` is an anti join: a row
/// there twice for once, and another once for twice, would pass it.) Returns the row count, or
/// what differs.
///
/// Rows are compared in the columns `then` held, read as `now` types them: a column another writer
/// added since (NULL in the rows put back) was no part of `then`, and one it dropped is no part of
/// `now` to compare.
pub(super) async fn same_rows(
    now: &DeltaTable,
    then: &DeltaTable,
    filter: Option<Expr>,
) -> Result<u64, String> {
    use deltalake::datafusion::functions_aggregate::expr_fn::count;
    use deltalake::datafusion::prelude::{DataFrame, lit};
    let compare = async {
        let ctx = SessionContext::new();
        let mut now = ctx.read_table(now.table_provider().await?)?;
        let mut then = ctx.read_table(then.table_provider().await?)?;
        if let Some(filter) = filter {
            now = now.filter(filter.clone())?;
            then = then.filter(filter)?;
        }
        let (now_schema, then_schema) = (now.schema().clone(), then.schema().clone());
        let shared: Vec<_> = then_schema
            .fields()
            .iter()
            .filter_map(|field| {
                Some((field.name(), now_schema.field_with_unqualified_name(field.name()).ok()?))
            })
            .collect();
        let same_types = shared.iter().all(|(name, typed)| {
            then_schema
                .field_with_unqualified_name(name)
                .is_ok_and(|held| held.data_type() == typed.data_type())
        });
        if shared.len() != then_schema.fields().len()
            || shared.len() != now_schema.fields().len()
            || !same_types
        {
            use deltalake::datafusion::common::Column;
            use deltalake::datafusion::logical_expr::ExprSchemable;
            let column = |name: &str| Expr::Column(Column::from_name(name));
            now = now.select(shared.iter().map(|(name, _)| column(name)).collect::<Vec<_>>())?;
            let as_now = shared
                .iter()
                .map(|(name, typed)| Ok(column(name).cast_to(typed.data_type(), &then_schema)?.alias(*name)))
                .collect::<deltalake::datafusion::error::Result<Vec<_>>>()?;
            then = then.select(as_now)?;
        }
        let counted = |rows: DataFrame| {
            let columns: Vec<Expr> = rows.schema().columns().into_iter().map(Expr::Column).collect();
            rows.aggregate(columns, vec![count(lit(1)).alias("__bf_copies")])
        };
        let (now_counted, then_counted) = (counted(now.clone())?, counted(then.clone())?);
        let extra = now_counted.clone().except(then_counted.clone())?.count().await?;
        let lost = then_counted.except(now_counted)?.count().await?;
        let (rows_now, rows_then) = (now.count().await? as u64, then.count().await? as u64);
        Ok::<_, deltalake::datafusion::error::DataFusionError>((extra, lost, rows_now, rows_then))
    };
    let (extra, lost, rows_now, rows_then) = compare.await.map_err(|e| e.to_string())?;
    if extra > 0 || lost > 0 || rows_now != rows_then {
        return Err(format!(
            "{extra} rows that were not there (or not as often), {lost} rows missing (or there less often), \
             {rows_now} rows for {rows_then}"
        ));
    }
    Ok(rows_now)
}
