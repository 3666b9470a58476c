//! Row counts and metrics: what the reviewer compares per slice, over the window and outside it,
//! each floating-point sum with the rounding error it may carry, so a reordered sum is not a change.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::datasource::empty::EmptyTable;
use deltalake::datafusion::datasource::file_format::parquet::ParquetFormat;
use deltalake::datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use deltalake::datafusion::error::{DataFusionError, Result as DfResult};
use deltalake::datafusion::logical_expr::Expr;
use serde::{Deserialize, Serialize};

use super::session::{Comparison, Side, as_f64, scalar};
use crate::plan_file::Metric;
use crate::plan_file::read_only::Summed;
use crate::source::run::read_only_options;

/// Row count and metric values of some rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
pub(super) fn gamma(n: u64, epsilon: f64) -> f64 {
    let ne = n as f64 * epsilon;
    if ne >= 1.0 { f64::INFINITY } else { ne / (1.0 - ne) }
}

impl Comparison {
    /// Row count and metrics of both sides of the slice [`Comparison::focus`] registered, before
    /// and after, in one query: a small slice's comparison is mostly the fixed cost of its queries.
    pub async fn measure_slice(&self, metrics: &[Metric]) -> DfResult<(Measures, Measures)> {
        let (before, after) = (Side::Before.slice_view(), Side::After.slice_view());
        let measuring = self.measuring(before, metrics).await?;
        let select = measuring.select.join(", ");
        let sql = format!(
            "SELECT 0 AS __bf_after, {select} FROM {before} UNION ALL SELECT 1, {select} FROM {after}"
        );
        let batch = self.one_batch(&sql).await?;
        let row = |after: f64| {
            (0..batch.num_rows()).find(|&row| scalar(&batch, 0, row).and_then(|v| as_f64(&v)) == Some(after))
        };
        let measured = |row: Option<usize>| match row {
            Some(row) => Ok(measuring.read(&batch, row, 1, metrics)),
            None => Err(DataFusionError::Internal("a side of the slice was not measured".into())),
        };
        Ok((measured(row(0.0))?, measured(row(1.0))?))
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

    /// Row count and metrics of the view `__bf_measured`.
    async fn measure_view(&self, metrics: &[Metric]) -> DfResult<Measures> {
        let measuring = self.measuring("__bf_measured", metrics).await?;
        let batch =
            self.one_batch(&format!("SELECT {} FROM __bf_measured", measuring.select.join(", "))).await?;
        Ok(measuring.read(&batch, 0, 0, metrics))
    }

    /// The select list measuring `metrics` over `view`, with the rounding error of each metric
    /// that sums floating-point values: its magnitude Σ|x| is computed in the same pass.
    pub(super) async fn measuring(&self, view: &str, metrics: &[Metric]) -> DfResult<Measuring> {
        // Metric SQL was checked to be one expression without subqueries (`bf validate`).
        let values = metrics.iter().map(|m| format!("({})", m.sql)).collect::<Vec<_>>();
        let types: Vec<DataType> = if values.is_empty() {
            Vec::new()
        } else {
            let planned = self
                .ctx
                .sql_with_options(&format!("SELECT {} FROM {view}", values.join(", ")), read_only_options())
                .await?;
            planned.schema().fields().iter().map(|f| f.data_type().clone()).collect()
        };
        // Column 0 counts the rows, columns 1..=n are the metrics, then the magnitudes averages need.
        let mut select = vec!["COUNT(*)".to_owned()];
        select.extend(values.iter().map(|v| format!("CAST({v} AS DOUBLE)")));
        let (mut bounded, mut exact) = (Vec::new(), Vec::new());
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
        Ok(Measuring { select, bounded, exact })
    }
}

/// A query's select list that measures rows, and where in it each metric's error is bounded.
pub(super) struct Measuring {
    pub(super) select: Vec<String>,
    /// (metric, ε, the column of its magnitude) for averages.
    bounded: Vec<(String, f64, usize)>,
    /// (metric, its column) for exact sums.
    exact: Vec<(String, usize)>,
}

impl Measuring {
    /// The measures in `row` of `batch`, whose select list starts at column `from`.
    pub(super) fn read(&self, batch: &RecordBatch, row: usize, from: usize, metrics: &[Metric]) -> Measures {
        let value = |column: usize| scalar(batch, from + column, row).and_then(|v| as_f64(&v));
        let rows = value(0).map_or(0, |n| n as u64);
        let values = metrics.iter().enumerate().map(|(i, m)| (m.name.clone(), value(i + 1))).collect();
        let mut error: BTreeMap<String, f64> = self
            .bounded
            .iter()
            .map(|(name, epsilon, column)| {
                // An average of n terms: n − 1 additions and the division.
                (name.clone(), gamma(rows, *epsilon) * value(*column).unwrap_or(0.0))
            })
            .collect();
        error.extend(self.exact.iter().map(|(name, column)| {
            (name.clone(), crate::rehearse::exact_sum::ExactSum::error(value(*column).unwrap_or(0.0)))
        }));
        Measures { rows, metrics: values, error }
    }
}
