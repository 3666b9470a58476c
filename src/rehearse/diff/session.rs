//! The comparison's session: the target before and the rehearsal after, registered side by side
//! in one DataFusion session with a bounded memory pool, and the views each query reads. The
//! measures, row changes and breakdown are queries over it, each in a file of its own.

use std::sync::Arc;

use deltalake::DeltaTable;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::common::ScalarValue;
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::logical_expr::Expr;
use deltalake::datafusion::prelude::SessionContext;

use crate::source::run::read_only_options;

/// Which table a comparison reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    /// The view of this side of the slice [`Comparison::focus`] registered.
    pub(super) fn slice_view(self) -> &'static str {
        match self {
            Side::Before => SLICE_BEFORE,
            Side::After => SLICE_AFTER,
        }
    }
}

/// What the comparison's queries may hold in memory before spilling to disk.
const MEMORY_POOL: usize = 512 * 1024 * 1024;

pub(super) const BEFORE: &str = "__bf_before";
pub(super) const AFTER: &str = "__bf_after";
/// The two sides of the slice being compared.
const SLICE_BEFORE: &str = "__bf_bs";
const SLICE_AFTER: &str = "__bf_as";

/// The target before and the rehearsal after, side by side in one session.
pub struct Comparison {
    pub(super) ctx: SessionContext,
    pub(super) schema: SchemaRef,
    /// The focused slice's rows, before and after, when [`Comparison::focus`] holds them in
    /// memory: what the slice's queries read, and what [`super::pairing`] pairs without a query.
    pub(super) held: Option<(Vec<RecordBatch>, Vec<RecordBatch>)>,
}

impl Comparison {
    pub async fn new(
        stores: &crate::delta::store::Stores,
        before: &DeltaTable,
        after: &DeltaTable,
        schema: SchemaRef,
        dialect: crate::plan_file::Dialect,
    ) -> deltalake::DeltaResult<Self> {
        // A bounded memory pool that sorts and aggregations spill from, and sort-merge joins (which
        // spill) instead of hash joins (which hold a whole side): pairing the rows of a 10M-row
        // slice held 2.3 GB otherwise (docs/BENCHMARKS.md, W3).
        // The plan's metrics and `[diff] by` run here, in the plan's dialect.
        let state = crate::dialect::speaking(crate::delta::memory::session_state(Some(MEMORY_POOL)), dialect);
        let ctx = SessionContext::new_with_state(state);
        ctx.state_ref().write().config_mut().options_mut().optimizer.prefer_hash_join = false;
        ctx.register_udaf(crate::rehearse::exact_sum::udaf());
        // The rehearsal reads the target's files by their absolute URLs, from the target's store.
        for table in [before, after] {
            stores
                .register(&ctx, table.table_url())
                .map_err(|e| deltalake::DeltaTableError::Generic(e.to_string()))?;
        }
        ctx.register_table(BEFORE, crate::delta::row_tracking::visible(before).await?)?;
        ctx.register_table(AFTER, crate::delta::row_tracking::visible(after).await?)?;
        Ok(Comparison { ctx, schema, held: None })
    }

    /// Registers `side` filtered by `predicate` as the view `name`.
    pub(super) async fn view(&self, name: &str, side: Side, predicate: Expr) -> DfResult<()> {
        let table = match side {
            Side::Before => BEFORE,
            Side::After => AFTER,
        };
        let rows = self.ctx.table(table).await?.filter(predicate)?;
        self.ctx.deregister_table(name)?;
        self.ctx.register_table(name, rows.into_view())?;
        Ok(())
    }

    /// Registers `side` of the focused slice ([`Comparison::focus`]) in `ctx` as `slice`, for the
    /// checks: rows already held in memory are not read again.
    pub async fn register_slice(&self, ctx: &SessionContext, side: Side) -> DfResult<()> {
        let rows = self.ctx.table(side.slice_view()).await?;
        ctx.deregister_table("slice")?;
        ctx.register_table("slice", rows.into_view())?;
        Ok(())
    }

    /// Registers both sides' rows matching `predicate` (a slice's) as the views the slice's
    /// queries read: [`Comparison::measure_slice`], [`Comparison::slice_changes`],
    /// [`Comparison::slice_key_report`]. With `in_memory`, each side is read once and held for all
    /// of them, and paired by key without a query ([`super::pairing`]); else each query reads it
    /// again (the measures, the duplicate-key check, the pairing and each kind's samples: up to
    /// seven reads of a side).
    pub async fn focus(&mut self, predicate: Expr, in_memory: bool) -> DfResult<()> {
        // Sides held in memory that SQL must pair (a key repeats) are paired by a hash join, which
        // holds a side too, and faster.
        self.ctx.state_ref().write().config_mut().options_mut().optimizer.prefer_hash_join = in_memory;
        let mut held = Vec::new();
        for (name, table) in [(SLICE_BEFORE, BEFORE), (SLICE_AFTER, AFTER)] {
            let rows = self.ctx.table(table).await?.filter(predicate.clone())?;
            let view: Arc<dyn TableProvider> = if in_memory {
                let schema = Arc::new(rows.schema().as_arrow().clone());
                let partitions = rows.collect_partitioned().await?;
                held.push(partitions.iter().flatten().cloned().collect());
                Arc::new(MemTable::try_new(schema, partitions)?)
            } else {
                rows.into_view()
            };
            self.ctx.deregister_table(name)?;
            self.ctx.register_table(name, view)?;
        }
        let mut held = held.into_iter();
        self.held = held.next().zip(held.next());
        Ok(())
    }

    /// `WITH b AS (…), a AS (…)`: the before and after slices (the views `__bf_bs` and `__bf_as`)
    /// with each row's rank among the rows sharing its key, and the join condition that pairs them
    /// by key and rank. Ranking sorts each side by every column, which for a large slice is most of
    /// a plan's time and memory; where no key repeats on either side (checked with one aggregation
    /// each) every row is rank 1 and nothing is sorted.
    pub(super) async fn paired(&self, key: &[String]) -> DfResult<(String, String)> {
        let keys = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
        let mut unique = true;
        for side in ["__bf_bs", "__bf_as"] {
            let repeated = format!(
                "SELECT COUNT(*) FROM (SELECT {keys} FROM {side} GROUP BY {keys} HAVING COUNT(*) > 1)"
            );
            let batch = self.ours(&repeated).await?.collect().await?;
            let Some(batch) = batch.first() else { continue };
            unique &= scalar(batch, 0, 0).and_then(|v| as_f64(&v)).is_some_and(|n| n == 0.0);
        }
        let ranked = |side: &str| {
            if unique {
                format!("SELECT *, 1 AS __bf_rn FROM {side}")
            } else {
                format!(
                    "SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {}) AS __bf_rn FROM {side}",
                    self.orderable_columns().join(", ")
                )
            }
        };
        let with = format!("WITH b AS ({}), a AS ({})", ranked("__bf_bs"), ranked("__bf_as"));
        let join = key
            .iter()
            .map(|k| format!("b.{0} = a.{0}", ident(k)))
            .chain(["b.__bf_rn = a.__bf_rn".to_owned()])
            .collect::<Vec<_>>()
            .join(" AND ");
        Ok((with, join))
    }

    /// Columns a window can order by (nested types cannot be compared).
    pub(super) fn orderable_columns(&self) -> Vec<String> {
        let columns: Vec<String> = self
            .schema
            .fields()
            .iter()
            .filter(|f| {
                !matches!(
                    f.data_type(),
                    DataType::Struct(_) | DataType::List(_) | DataType::Map(..) | DataType::LargeList(_)
                )
            })
            .map(|f| ident(f.name()))
            .collect();
        if columns.is_empty() { vec!["1".into()] } else { columns }
    }

    /// The bytes the comparison's queries may hold: its own pool, or the operator's smaller bound.
    pub(super) fn pool(&self) -> usize {
        crate::delta::memory::pool(Some(MEMORY_POOL)).unwrap_or(MEMORY_POOL)
    }

    /// One of bf's own queries (pairing, samples, shapes), which quote names as DataFusion does
    /// ([`ident`]): parsed in DataFusion's dialect whatever the plan's, so that a Spark plan's
    /// session reads `"order_id"` as a column, not a string. Planned in this session, with its
    /// functions and read-only options.
    pub(super) async fn ours(&self, sql: &str) -> DfResult<deltalake::datafusion::prelude::DataFrame> {
        let state = self.ctx.state();
        let statement =
            state.sql_to_statement(sql, &deltalake::datafusion::common::config::Dialect::Generic)?;
        let plan = state.statement_to_plan(statement).await?;
        read_only_options().verify_plan(&plan)?;
        Ok(deltalake::datafusion::prelude::DataFrame::new(state, plan))
    }

    pub(super) async fn batches(&self, sql: &str) -> DfResult<Vec<RecordBatch>> {
        self.ctx.sql_with_options(sql, read_only_options()).await?.collect().await
    }

    pub(super) async fn one_batch(&self, sql: &str) -> DfResult<RecordBatch> {
        let batches = self.batches(sql).await?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| Arc::new(deltalake::arrow::datatypes::Schema::empty()));
        deltalake::arrow::compute::concat_batches(&schema, &batches).map_err(Into::into)
    }
}

/// A column name quoted for SQL.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub(super) fn scalar(batch: &RecordBatch, column: usize, row: usize) -> Option<ScalarValue> {
    (column < batch.num_columns() && row < batch.num_rows())
        .then(|| ScalarValue::try_from_array(batch.column(column), row).ok())
        .flatten()
}

pub(super) fn as_f64(value: &ScalarValue) -> Option<f64> {
    match value {
        ScalarValue::Float64(v) => *v,
        ScalarValue::Int64(v) => v.map(|n| n as f64),
        ScalarValue::UInt64(v) => v.map(|n| n as f64),
        other => other.cast_to(&DataType::Float64).ok().and_then(|v| match v {
            ScalarValue::Float64(v) => v,
            _ => None,
        }),
    }
}
