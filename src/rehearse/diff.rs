//! Before vs after: the numbers a reviewer reads.
//!
//! "Before" is the target at the plan's pre-version, "after" is the rehearsal once every slice is
//! written. Both are registered in one DataFusion session and every comparison filters them with the
//! slice's typed predicate first, so partition pruning and file statistics keep a one-month plan on a
//! three-year table about as cheap as on a one-month table.
//!
//! - [`Comparison::measure`]: row count and each declared metric (an aggregate) over a predicate.
//! - [`Comparison::slice_changes`]: with a key, rows added, removed and changed, and samples. Rows are
//!   paired by key and by their rank among rows sharing the key, so a duplicated row that goes away
//!   counts as removed rather than hiding behind its twin.
//! - [`Comparison::breakdown`]: each metric's change split by columns (`[diff] by`): with a key, by
//!   the values a row had before and after ("currency = USD → EUR").

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::DeltaTable;
use deltalake::arrow::array::{Array, RecordBatch};
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::common::Column;
use deltalake::datafusion::common::ScalarValue;
use deltalake::datafusion::datasource::empty::EmptyTable;
use deltalake::datafusion::datasource::file_format::parquet::ParquetFormat;
use deltalake::datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::functions_aggregate::expr_fn::count;
use deltalake::datafusion::logical_expr::{Expr, col, lit};
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use serde::{Deserialize, Serialize};

use crate::plan_file::Metric;
use crate::plan_file::read_only::Summed;
use crate::source::run::read_only_options;

/// Row count and metric values of some rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    pub rows: u64,
    /// Metric name → value; `None` when the aggregate is NULL (e.g. SUM of no rows).
    pub metrics: BTreeMap<String, Option<f64>>,
    /// For a metric that sums floating-point values (`SUM` or `AVG` of a DOUBLE or FLOAT): how far
    /// its value can be from the exact one. A `SUM` is summed exactly ([`crate::rehearse::exact_sum`]), so
    /// only its last rounding: half an ulp. An `AVG` can move when the same values are summed in
    /// another order, γ(n)·Σ|x| (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2).
    /// Other metrics are exact.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error: BTreeMap<String, f64>,
}

impl Measures {
    /// The measures of rows split into `parts`, from the parts' own, when every metric is a `SUM`
    /// (sums of parts add up; an average, a maximum or a distinct count does not): the window's
    /// totals without reading the window again. The rounding error of adding the parts'
    /// floating-point sums joins theirs: γ(k−1)·Σ|Sᵢ| for k parts.
    pub fn sum_of(parts: &[&Measures], metrics: &[Metric]) -> Option<Measures> {
        if !metrics
            .iter()
            .all(|m| matches!(crate::plan_file::read_only::summed(&m.sql), Some(Summed::Sum(_))))
        {
            return None;
        }
        let mut total = Measures { rows: parts.iter().map(|p| p.rows).sum(), ..Measures::default() };
        for metric in metrics {
            let name = &metric.name;
            let partial: Vec<f64> =
                parts.iter().filter_map(|p| p.metrics.get(name).copied().flatten()).collect();
            total.metrics.insert(name.clone(), (!partial.is_empty()).then(|| partial.iter().sum()));
            let errors: Vec<f64> = parts.iter().filter_map(|p| p.error.get(name).copied()).collect();
            if !errors.is_empty() {
                let additions = partial.len().saturating_sub(1) as u64;
                let magnitude: f64 = partial.iter().map(|v| v.abs()).sum();
                let added = gamma(additions, f64::EPSILON / 2.0) * magnitude;
                total.error.insert(name.clone(), errors.iter().sum::<f64>() + added);
            }
        }
        Some(total)
    }

    /// Whether two measures of what should be the same rows agree as far as the data can tell:
    /// the same row count, and each metric equal — floating-point sums within the rounding error
    /// of summing in another order (a file rewritten, a merge, parallel scans), everything else
    /// exactly.
    pub fn same_as(&self, other: &Measures) -> bool {
        self.rows == other.rows
            && self.metrics.len() == other.metrics.len()
            && self.metrics.iter().all(|(name, value)| {
                other.metrics.get(name).is_some_and(|theirs| match (value, theirs) {
                    (Some(a), Some(b)) => a == b || (a - b).abs() <= self.tolerance(name, other),
                    (a, b) => a == b,
                })
            })
    }

    /// The metrics that differ, by no more than their rounding error: what a reviewer should
    /// see was compared with a tolerance, and how large it was.
    pub fn within_error(&self, other: &Measures) -> Vec<String> {
        self.metrics
            .iter()
            .filter_map(|(name, value)| {
                let (Some(a), Some(Some(b))) = (value, other.metrics.get(name)) else { return None };
                let tolerance = self.tolerance(name, other);
                (a != b && (a - b).abs() <= tolerance).then(|| {
                    format!(
                        "{name}: {a} and {b} differ by {:.3e}, within the {tolerance:.3e} that summing the same floating-point values in another order can move it",
                        (a - b).abs()
                    )
                })
            })
            .collect()
    }

    fn tolerance(&self, name: &str, other: &Measures) -> f64 {
        self.error.get(name).copied().unwrap_or(0.0) + other.error.get(name).copied().unwrap_or(0.0)
    }
}

/// γ(n) = nε/(1 − nε): the relative bound on the error of n floating-point additions.
fn gamma(n: u64, epsilon: f64) -> f64 {
    let ne = n as f64 * epsilon;
    if ne >= 1.0 { f64::INFINITY } else { ne / (1.0 - ne) }
}

/// Which table a comparison reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    /// The view of this side of the slice [`Comparison::focus`] registered.
    fn slice_view(self) -> &'static str {
        match self {
            Side::Before => SLICE_BEFORE,
            Side::After => SLICE_AFTER,
        }
    }
}

/// Row-level changes of a slice, by key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RowChanges {
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    pub unchanged: u64,
    pub samples: Vec<SampleRow>,
}

/// One row that changed, as text fields in the table's column order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    /// `added`, `removed` or `changed`.
    pub change: String,
    pub before: Option<Vec<String>>,
    pub after: Option<Vec<String>>,
}

/// One metric's change in one group of `[diff] by` values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakdownRow {
    pub metric: String,
    /// The `by` values before (for rows that existed) and after (for rows that exist).
    pub from: Option<Vec<String>>,
    pub to: Option<Vec<String>>,
    pub before: f64,
    pub after: f64,
}

/// The `by` values of a group of rows; `None` where a value is NULL.
type Labels = Vec<Option<String>>;

/// What the comparison's queries may hold in memory before spilling to disk.
const MEMORY_POOL: usize = 512 * 1024 * 1024;

const BEFORE: &str = "__bf_before";
const AFTER: &str = "__bf_after";
/// The two sides of the slice being compared.
const SLICE_BEFORE: &str = "__bf_bs";
const SLICE_AFTER: &str = "__bf_as";

/// The target before and the rehearsal after, side by side in one session.
pub struct Comparison {
    ctx: SessionContext,
    schema: SchemaRef,
    /// Whether the focused slice's two sides are held in memory ([`Comparison::focus`]).
    in_memory: bool,
}

impl Comparison {
    pub async fn new(
        stores: &crate::delta::store::Stores,
        before: &DeltaTable,
        after: &DeltaTable,
        schema: SchemaRef,
    ) -> deltalake::DeltaResult<Self> {
        // A bounded memory pool that sorts and aggregations spill from, and sort-merge joins (which
        // spill) instead of hash joins (which hold a whole side): pairing the rows of a 10M-row
        // slice held 2.3 GB otherwise (docs/BENCHMARKS.md, W3).
        let state =
            deltalake::delta_datafusion::create_session_state_with_spill_config(Some(MEMORY_POOL), None);
        let ctx = SessionContext::new_with_state(state);
        ctx.state_ref().write().config_mut().options_mut().optimizer.prefer_hash_join = false;
        ctx.register_udaf(crate::rehearse::exact_sum::udaf());
        // The rehearsal reads the target's files by their absolute URLs, from the target's store.
        for table in [before, after] {
            stores
                .register(&ctx, table.table_url())
                .map_err(|e| deltalake::DeltaTableError::Generic(e.to_string()))?;
        }
        ctx.register_table(BEFORE, before.table_provider().await?)?;
        ctx.register_table(AFTER, after.table_provider().await?)?;
        Ok(Comparison { ctx, schema, in_memory: false })
    }

    /// Registers `side` filtered by `predicate` as the view `name`.
    async fn view(&self, name: &str, side: Side, predicate: Expr) -> DfResult<()> {
        let table = match side {
            Side::Before => BEFORE,
            Side::After => AFTER,
        };
        let rows = self.ctx.table(table).await?.filter(predicate)?;
        self.ctx.deregister_table(name)?;
        self.ctx.register_table(name, rows.into_view())?;
        Ok(())
    }

    /// A session where `slice` is `side` filtered by `predicate`, for checks that need it.
    pub async fn register_slice(&self, ctx: &SessionContext, side: Side, predicate: Expr) -> DfResult<()> {
        let table = match side {
            Side::Before => BEFORE,
            Side::After => AFTER,
        };
        let rows = self.ctx.table(table).await?.filter(predicate)?;
        ctx.deregister_table("slice")?;
        ctx.register_table("slice", rows.into_view())?;
        Ok(())
    }

    /// Registers both sides' rows matching `predicate` (a slice's) as the views the slice's
    /// queries read: [`Comparison::measure_slice`], [`Comparison::slice_changes`],
    /// [`Comparison::slice_key_report`]. With `in_memory`, each side is read once and held for all
    /// of them; else each query reads it again (the measures, the duplicate-key check, the pairing
    /// and each kind's samples: up to seven reads of a side).
    pub async fn focus(&mut self, predicate: Expr, in_memory: bool) -> DfResult<()> {
        // Sides held in memory are paired by a hash join, which holds a side too, and faster.
        self.in_memory = in_memory;
        self.ctx.state_ref().write().config_mut().options_mut().optimizer.prefer_hash_join = in_memory;
        for (name, table) in [(SLICE_BEFORE, BEFORE), (SLICE_AFTER, AFTER)] {
            let mut rows = self.ctx.table(table).await?.filter(predicate.clone())?;
            if in_memory {
                rows = rows.cache().await?;
            }
            self.ctx.deregister_table(name)?;
            self.ctx.register_table(name, rows.into_view())?;
        }
        Ok(())
    }

    /// Row count and metrics of one side of the slice [`Comparison::focus`] registered.
    pub async fn measure_slice(&self, side: Side, metrics: &[Metric]) -> DfResult<Measures> {
        let rows = self.ctx.table(side.slice_view()).await?;
        self.ctx.deregister_table("__bf_measured")?;
        self.ctx.register_table("__bf_measured", rows.into_view())?;
        self.measure_view(metrics).await
    }

    /// How one side of the focused slice uses `key` (see [`key_report`]).
    pub async fn slice_key_report(&self, side: Side, key: &[String], limit: usize) -> DfResult<KeyReport> {
        key_report(self.ctx.table(side.slice_view()).await?, key, limit).await
    }

    /// Row count and metrics of `side`'s rows matching `predicate`.
    pub async fn measure(&self, side: Side, predicate: Expr, metrics: &[Metric]) -> DfResult<Measures> {
        self.view("__bf_measured", side, predicate).await?;
        self.measure_view(metrics).await
    }

    /// Row count and metrics of the rows matching `predicate` in some Parquet files of a table
    /// without partition columns (so each file holds every column), read as plain Parquet.
    pub async fn measure_files(
        &self,
        files: &[String],
        predicate: Expr,
        metrics: &[Metric],
    ) -> DfResult<Measures> {
        let urls = files
            .iter()
            .map(|f| ListingTableUrl::parse(crate::delta::store::listing_location(f)))
            .collect::<DfResult<Vec<_>>>()?;
        let provider: Arc<dyn TableProvider> = if urls.is_empty() {
            Arc::new(EmptyTable::new(self.schema.clone()))
        } else {
            let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension("");
            let config = ListingTableConfig::new_with_multi_paths(urls)
                .with_listing_options(options)
                .with_schema(self.schema.clone());
            Arc::new(ListingTable::try_new(config)?)
        };
        let rows = self.ctx.read_table(provider)?.filter(predicate)?;
        self.ctx.deregister_table("__bf_measured")?;
        self.ctx.register_table("__bf_measured", rows.into_view())?;
        self.measure_view(metrics).await
    }

    /// Row count and metrics of the view `__bf_measured`, with the rounding error of each metric
    /// that sums floating-point values: its magnitude Σ|x| is computed in the same pass.
    async fn measure_view(&self, metrics: &[Metric]) -> DfResult<Measures> {
        // Metric SQL was checked to be one expression without subqueries (`bf validate`).
        let values = metrics.iter().map(|m| format!("({})", m.sql)).collect::<Vec<_>>();
        let types: Vec<DataType> = if values.is_empty() {
            Vec::new()
        } else {
            let planned = self
                .ctx
                .sql_with_options(
                    &format!("SELECT {} FROM __bf_measured", values.join(", ")),
                    read_only_options(),
                )
                .await?;
            planned.schema().fields().iter().map(|f| f.data_type().clone()).collect()
        };
        // Column 0 counts the rows, columns 1..=n are the metrics, then the magnitudes averages need.
        let mut select = vec!["COUNT(*)".to_owned()];
        select.extend(values.iter().map(|v| format!("CAST({v} AS DOUBLE)")));
        // (metric, ε, its magnitude's column) for averages; (metric, column) for exact sums.
        let mut bounded = Vec::new();
        let mut exact = Vec::new();
        for (i, (metric, data_type)) in metrics.iter().zip(&types).enumerate() {
            let epsilon = match data_type {
                DataType::Float64 => f64::EPSILON / 2.0,
                DataType::Float32 | DataType::Float16 => f64::from(f32::EPSILON) / 2.0,
                _ => continue,
            };
            match crate::plan_file::read_only::summed(&metric.sql) {
                // Summed exactly, the value is the same whatever the order: only its last rounding.
                Some(Summed::Sum(e)) => {
                    select[i + 1] = format!("{}(CAST(({e}) AS DOUBLE))", crate::rehearse::exact_sum::NAME);
                    exact.push((metric.name.clone(), i + 1));
                }
                Some(Summed::Avg(e)) => {
                    bounded.push((metric.name.clone(), epsilon, select.len()));
                    select.push(format!("AVG(ABS(CAST(({e}) AS DOUBLE)))"));
                }
                None => {}
            }
        }
        let sql = format!("SELECT {} FROM __bf_measured", select.join(", "));
        let batch = self.one_batch(&sql).await?;
        let value = |column: usize| scalar(&batch, column, 0).and_then(|v| as_f64(&v));
        let rows = value(0).map_or(0, |n| n as u64);
        let metrics = metrics.iter().enumerate().map(|(i, m)| (m.name.clone(), value(i + 1))).collect();
        let mut error: BTreeMap<String, f64> = bounded
            .into_iter()
            .map(|(name, epsilon, column)| {
                // An average of n terms: n − 1 additions and the division.
                (name, gamma(rows, epsilon) * value(column).unwrap_or(0.0))
            })
            .collect();
        error.extend(exact.into_iter().map(|(name, column)| {
            (name, crate::rehearse::exact_sum::ExactSum::error(value(column).unwrap_or(0.0)))
        }));
        Ok(Measures { rows, metrics, error })
    }

    /// Added, removed and changed rows between the two sides of the slice [`Comparison::focus`]
    /// registered, paired by `key`.
    pub async fn slice_changes(&self, key: &[String], samples: usize) -> DfResult<RowChanges> {
        let columns: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        let (with, join) = self.paired(key).await?;
        let differs =
            columns.iter().map(|c| format!("(b.{0} IS DISTINCT FROM a.{0})", ident(c))).collect::<Vec<_>>();
        // Each side's columns under names of their own; only the sampled rows become text.
        let sides = |alias: &str| {
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{alias}.{} AS __bf_{alias}{i}", ident(c)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Nested values (structs, lists, maps, variants) have no CAST to text: Arrow's display
        // renders them once fetched.
        let texts = |alias: &str| {
            self.schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| match f.data_type().is_nested() {
                    true => format!("__bf_{alias}{i}"),
                    false => format!("CAST(__bf_{alias}{i} AS VARCHAR)"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let order =
            key.iter().map(|k| format!("COALESCE(b.{0}, a.{0})", ident(k))).collect::<Vec<_>>().join(", ");
        let joined = format!(
            "{with} \
             SELECT CASE WHEN b.__bf_rn IS NULL THEN 'added' WHEN a.__bf_rn IS NULL THEN 'removed' \
                         WHEN ({}) THEN 'changed' ELSE 'same' END AS __bf_change, \
                    {}, {}, {order} AS __bf_order \
             FROM b FULL OUTER JOIN a ON {join}",
            differs.join(" OR "),
            sides("b"),
            sides("a"),
        );
        // Sides in memory are paired once, and the counts and each kind's samples read the pairs;
        // otherwise each query pairs them again rather than hold every pair of a big slice.
        let joined = if self.in_memory {
            let pairs = self.ctx.sql(&joined).await?.cache().await?;
            self.ctx.deregister_table("__bf_pairs")?;
            self.ctx.register_table("__bf_pairs", pairs.into_view())?;
            "SELECT * FROM __bf_pairs".to_owned()
        } else {
            joined
        };
        let counts = self
            .batches(&format!("SELECT __bf_change, COUNT(*) FROM ({joined}) GROUP BY __bf_change"))
            .await?;
        let mut changes = RowChanges::default();
        for batch in &counts {
            for row in 0..batch.num_rows() {
                let kind = array_value_to_string(batch.column(0), row).unwrap_or_default();
                let n = scalar(batch, 1, row).and_then(|v| as_f64(&v)).map_or(0, |n| n as u64);
                match kind.as_str() {
                    "added" => changes.added = n,
                    "removed" => changes.removed = n,
                    "changed" => changes.changed = n,
                    _ => changes.unchanged = n,
                }
            }
        }
        // Up to `samples` rows of each kind, a query per kind: a few removed duplicates must not hide
        // behind hundreds of changed rows, and ORDER BY … LIMIT keeps only those rows in memory (a
        // top-k), where numbering every changed row of a 10M-row slice sorted all of them with their
        // text (docs/BENCHMARKS.md, W3). The rows become text after the top-k, not every changed row
        // before it: a 200,000-row slice's row changes took 177–206 ms instead of 242 ms.
        let kinds = [("changed", changes.changed), ("added", changes.added), ("removed", changes.removed)];
        for (kind, _) in kinds.into_iter().filter(|(_, n)| samples > 0 && *n > 0) {
            let sample_sql = format!(
                "SELECT __bf_change, {}, {} FROM \
                 (SELECT * FROM ({joined}) WHERE __bf_change = '{kind}' ORDER BY __bf_order LIMIT {samples}) \
                 ORDER BY __bf_order",
                texts("b"),
                texts("a"),
            );
            let n = columns.len();
            for batch in self.batches(&sample_sql).await? {
                for row in 0..batch.num_rows() {
                    let text = |i: usize| {
                        let column = batch.column(i);
                        (!column.is_null(row)).then(|| array_value_to_string(column, row).unwrap_or_default())
                    };
                    let change = text(0).unwrap_or_default();
                    let side = |offset: usize| -> Vec<String> {
                        (0..n).map(|i| text(offset + i).unwrap_or_else(|| "NULL".into())).collect()
                    };
                    changes.samples.push(SampleRow {
                        before: (change != "added").then(|| side(1)),
                        after: (change != "removed").then(|| side(1 + n)),
                        change,
                    });
                }
            }
        }
        Ok(changes)
    }

    /// Each metric's (and the row count's) change within `predicate`, split by the `by` columns.
    pub async fn breakdown(
        &self,
        predicate: Expr,
        key: Option<&[String]>,
        by: &[String],
        metrics: &[Metric],
    ) -> DfResult<Vec<BreakdownRow>> {
        self.view("__bf_bs", Side::Before, predicate.clone()).await?;
        self.view("__bf_as", Side::After, predicate).await?;
        let mut measured: Vec<(String, String)> = vec![("rows".into(), "COUNT(*)".into())];
        measured.extend(metrics.iter().map(|m| (m.name.clone(), m.sql.clone())));
        let values =
            measured.iter().map(|(_, sql)| format!("CAST(({sql}) AS DOUBLE)")).collect::<Vec<_>>().join(", ");
        let labels = |alias: &str, prefix: &str| {
            by.iter()
                .enumerate()
                .map(|(i, c)| format!("CAST({alias}{} AS VARCHAR) AS {prefix}{i}", ident(c)))
                .collect::<Vec<_>>()
        };
        let label_columns = |prefix: &str| (0..by.len()).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
        let (before_sql, after_sql, width) = match key {
            Some(key) => {
                let (with, join) = self.paired(key).await?;
                let keys = key
                    .iter()
                    .enumerate()
                    .map(|(i, k)| format!("COALESCE(b.{0}, a.{0}) AS __bf_k{i}", ident(k)))
                    .collect::<Vec<_>>();
                let transitions = format!(
                    "SELECT {}, COALESCE(b.__bf_rn, a.__bf_rn) AS __bf_trn, {}, {} FROM b FULL OUTER JOIN a ON {join}",
                    keys.join(", "),
                    labels("b.", "__bf_from").join(", "),
                    labels("a.", "__bf_to").join(", "),
                );
                let with = format!("{with}, t AS ({transitions})");
                let group: Vec<String> =
                    label_columns("t.__bf_from").into_iter().chain(label_columns("t.__bf_to")).collect();
                let side_sql = |side: &str| {
                    let on = key
                        .iter()
                        .enumerate()
                        .map(|(i, k)| format!("{side}.{} = t.__bf_k{i}", ident(k)))
                        .chain([format!("{side}.__bf_rn = t.__bf_trn")])
                        .collect::<Vec<_>>()
                        .join(" AND ");
                    format!(
                        "{with} SELECT {}, {values} FROM {side} JOIN t ON {on} GROUP BY {}",
                        group.join(", "),
                        group.join(", ")
                    )
                };
                (side_sql("b"), side_sql("a"), 2 * by.len())
            }
            None => {
                let side_sql = |view: &str| {
                    let group = labels("", "__bf_from");
                    let names = label_columns("__bf_from");
                    format!("SELECT {}, {values} FROM {view} GROUP BY {}", group.join(", "), names.join(", "))
                };
                (side_sql("__bf_bs"), side_sql("__bf_as"), by.len())
            }
        };
        // (from, to) → per measured value: (before, after)
        let mut groups: BTreeMap<(Labels, Labels), Vec<(f64, f64)>> = BTreeMap::new();
        for (sql, is_after) in [(before_sql, false), (after_sql, true)] {
            for batch in self.batches(&sql).await? {
                for row in 0..batch.num_rows() {
                    let label = |i: usize| {
                        let c = batch.column(i);
                        (!c.is_null(row)).then(|| array_value_to_string(c, row).unwrap_or_default())
                    };
                    let from: Vec<Option<String>> = (0..by.len()).map(label).collect();
                    let to: Vec<Option<String>> = if key.is_some() {
                        (by.len()..2 * by.len()).map(label).collect()
                    } else {
                        from.clone()
                    };
                    let entry = groups.entry((from, to)).or_insert_with(|| vec![(0.0, 0.0); measured.len()]);
                    for (m, slot) in entry.iter_mut().enumerate() {
                        let value = scalar(&batch, width + m, row).and_then(|v| as_f64(&v)).unwrap_or(0.0);
                        if is_after { slot.1 += value } else { slot.0 += value }
                    }
                }
            }
        }
        let present = |labels: &Vec<Option<String>>| {
            labels.iter().all(Option::is_some).then(|| labels.iter().flatten().cloned().collect())
        };
        let mut rows = Vec::new();
        for ((from, to), values) in groups {
            for ((name, _), (before, after)) in measured.iter().zip(values) {
                if before != after {
                    rows.push(BreakdownRow {
                        metric: name.clone(),
                        from: present(&from),
                        to: present(&to),
                        before,
                        after,
                    });
                }
            }
        }
        rows.sort_by(|a, b| (b.after - b.before).abs().total_cmp(&(a.after - a.before).abs()));
        Ok(rows)
    }

    /// `WITH b AS (…), a AS (…)`: the before and after slices (the views `__bf_bs` and `__bf_as`)
    /// with each row's rank among the rows sharing its key, and the join condition that pairs them
    /// by key and rank. Ranking sorts each side by every column, which for a large slice is most of
    /// a plan's time and memory; where no key repeats on either side (checked with one aggregation
    /// each) every row is rank 1 and nothing is sorted.
    async fn paired(&self, key: &[String]) -> DfResult<(String, String)> {
        let keys = key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ");
        let mut unique = true;
        for side in ["__bf_bs", "__bf_as"] {
            let repeated = format!(
                "SELECT COUNT(*) FROM (SELECT {keys} FROM {side} GROUP BY {keys} HAVING COUNT(*) > 1)"
            );
            let batch = self.one_batch(&repeated).await?;
            unique &= scalar(&batch, 0, 0).and_then(|v| as_f64(&v)).is_some_and(|n| n == 0.0);
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
    fn orderable_columns(&self) -> Vec<String> {
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

    async fn batches(&self, sql: &str) -> DfResult<Vec<RecordBatch>> {
        self.ctx.sql_with_options(sql, read_only_options()).await?.collect().await
    }

    async fn one_batch(&self, sql: &str) -> DfResult<RecordBatch> {
        let batches = self.batches(sql).await?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| Arc::new(deltalake::arrow::datatypes::Schema::empty()));
        deltalake::arrow::compute::concat_batches(&schema, &batches).map_err(Into::into)
    }
}

/// How the rows of a slice use a key, from one pass over them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyReport {
    /// Rows with a NULL in a key column: a merge cannot match them to anything.
    pub null_rows: u64,
    /// Keys (without NULLs) that several rows share…
    pub repeated: u64,
    /// …and some of them as text (`order_id = 780 (2 rows)`), most repeated first.
    pub samples: Vec<String>,
}

/// Counts `rows` per key once, then reads NULL keys and repeated keys off the counts.
pub async fn key_report(rows: DataFrame, key: &[String], limit: usize) -> DfResult<KeyReport> {
    let columns: Vec<Expr> = key.iter().map(|k| col(Column::new_unqualified(k))).collect();
    let copies = col("__bf_copies");
    let counted = rows.aggregate(columns, vec![count(lit(1)).alias("__bf_copies")])?.cache().await?;
    let nulls = counted
        .clone()
        .filter(has_key(key).is_not_true())?
        .aggregate(vec![], vec![deltalake::datafusion::functions_aggregate::expr_fn::sum(copies.clone())])?
        .collect()
        .await?;
    let null_rows =
        nulls.first().and_then(|b| scalar(b, 0, 0)).and_then(|v| as_f64(&v)).map_or(0, |n| n as u64);
    let repeated = counted.filter(has_key(key).and(copies.clone().gt(lit(1i64))))?;
    let total = repeated.clone().count().await? as u64;
    let sample = repeated.sort(vec![copies.sort(false, false)])?.limit(0, Some(limit))?.collect().await?;
    let mut samples = Vec::new();
    for batch in &sample {
        for row in 0..batch.num_rows() {
            let values: Vec<String> = key
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    format!("{k} = {}", array_value_to_string(batch.column(i), row).unwrap_or_default())
                })
                .collect();
            let copies = array_value_to_string(batch.column(key.len()), row).unwrap_or_default();
            samples.push(format!("{} ({copies} rows)", values.join(", ")));
        }
    }
    Ok(KeyReport { null_rows, repeated: total, samples })
}

/// Every key column is set.
fn has_key(key: &[String]) -> Expr {
    key.iter()
        .map(|k| col(Column::new_unqualified(k)).is_not_null())
        .reduce(Expr::and)
        .unwrap_or_else(|| lit(true))
}

/// A column name quoted for SQL.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn scalar(batch: &RecordBatch, column: usize, row: usize) -> Option<ScalarValue> {
    (column < batch.num_columns() && row < batch.num_rows())
        .then(|| ScalarValue::try_from_array(batch.column(column), row).ok())
        .flatten()
}

fn as_f64(value: &ScalarValue) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_totals_are_the_slices_sums_only_when_every_metric_is_a_sum() {
        let metric = |sql: &str| Metric { name: "revenue".into(), sql: sql.into() };
        let (a, b) = (revenue(0.1), revenue(0.2));
        let empty = Measures {
            rows: 0,
            metrics: BTreeMap::from([("revenue".to_owned(), None)]),
            ..Measures::default()
        };
        let total = Measures::sum_of(&[&a, &b, &empty], &[metric("SUM(amount)")]).unwrap();
        assert_eq!(total.rows, 2_000);
        assert_eq!(total.metrics["revenue"], Some(0.1 + 0.2));
        // The parts' errors, and one addition's rounding of |0.1| + |0.2|.
        let expected = a.error["revenue"] + b.error["revenue"] + gamma(1, f64::EPSILON / 2.0) * 0.3;
        assert!((total.error["revenue"] - expected).abs() < 1e-18, "{total:?}");
        for sql in ["AVG(amount)", "MAX(amount)", "COUNT(DISTINCT amount)", "SUM(amount) / 2"] {
            assert_eq!(Measures::sum_of(&[&a, &b], &[metric(sql)]), None, "{sql} does not add up");
        }
        let none = Measures::sum_of(&[&empty], &[metric("SUM(amount)")]).unwrap();
        assert_eq!(none.metrics["revenue"], None, "a SUM of no rows is NULL");
    }

    /// A metric summed over 1,000 DOUBLE values totalling 4,517,298 (the flake the issue saw).
    fn revenue(value: f64) -> Measures {
        Measures {
            rows: 1_000,
            metrics: BTreeMap::from([("revenue".to_owned(), Some(value))]),
            error: BTreeMap::from([("revenue".to_owned(), gamma(999, f64::EPSILON / 2.0) * 4_517_298.0)]),
        }
    }

    #[test]
    fn a_sum_in_another_order_is_the_same_and_a_cent_is_a_change() {
        let before = revenue(4_517_298.0);
        let reordered = revenue(4_517_298.000000002);
        assert!(before.same_as(&reordered));
        assert_eq!(before.within_error(&reordered).len(), 1, "the tolerance is shown when it was used");
        assert!(!before.same_as(&revenue(4_517_298.01)), "one cent is far above the rounding error");
        assert!(!before.same_as(&Measures { rows: 999, ..reordered }), "row counts compare exactly");
    }

    #[test]
    fn metrics_without_a_rounding_error_compare_exactly() {
        let exact = |value: f64| Measures {
            rows: 3,
            metrics: BTreeMap::from([("orders".to_owned(), Some(value))]),
            error: BTreeMap::new(),
        };
        assert!(exact(3.0).same_as(&exact(3.0)));
        assert!(!exact(3.0).same_as(&exact(3.000000000000001)));
        let none = Measures { metrics: BTreeMap::from([("orders".to_owned(), None)]), ..exact(0.0) };
        assert!(none.same_as(&none.clone()) && !none.same_as(&exact(0.0)));
    }
}
