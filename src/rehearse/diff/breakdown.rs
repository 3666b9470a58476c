//! The `[diff] by` breakdown: each metric's change over the window split by columns, with a key by
//! the values a row had before and after ("currency = USD → EUR").

use std::collections::BTreeMap;

use deltalake::arrow::array::Array;
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::logical_expr::Expr;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::session::{Comparison, Side, as_f64, ident, scalar};
use crate::plan_file::Metric;

/// One metric's change in one group of `[diff] by` values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// The most groups of `[diff] by` values a breakdown holds: each is a line a reviewer could read, and
/// every one is held in memory and saved in the plan, outside any memory pool. A column with a
/// value per row (an id, a timestamp) says nothing by groups, and is refused.
pub const MAX_GROUPS: usize = 10_000;

/// One query per side, grouping its rows by the `by` values (with a key: before and after) and
/// measuring each group; `width` is how many label columns come before the measured values.
struct GroupQueries {
    before: String,
    after: String,
    width: usize,
}

impl Comparison {
    /// Each metric's (and the row count's) change within `predicate`, split by the `by` columns;
    /// `None` when the rows fall in more than [`MAX_GROUPS`] groups.
    pub async fn breakdown(
        &self,
        predicate: Expr,
        key: Option<&[String]>,
        by: &[String],
        metrics: &[Metric],
    ) -> DfResult<Option<Vec<BreakdownRow>>> {
        self.view("__bf_bs", Side::Before, predicate.clone()).await?;
        self.view("__bf_as", Side::After, predicate).await?;
        let mut measured: Vec<(String, String)> = vec![("rows".into(), "COUNT(*)".into())];
        measured.extend(metrics.iter().map(|m| (m.name.clone(), m.sql.clone())));
        let values =
            measured.iter().map(|(_, sql)| format!("CAST(({sql}) AS DOUBLE)")).collect::<Vec<_>>().join(", ");
        let queries = match key {
            Some(key) => self.transition_queries(key, by, &values).await?,
            None => group_queries(by, &values),
        };
        let Some(groups) = self.group_sums(&queries, by.len(), key.is_some(), measured.len()).await? else {
            return Ok(None);
        };
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
        Ok(Some(rows))
    }

    /// With a key, rows are paired (as for the row changes) and each pair's `by` values before and
    /// after label it, so a row that moved from USD to EUR shows as `USD → EUR`.
    async fn transition_queries(
        &self,
        key: &[String],
        by: &[String],
        values: &str,
    ) -> DfResult<GroupQueries> {
        let (with, join) = self.paired(key).await?;
        let keys = key
            .iter()
            .enumerate()
            .map(|(i, k)| format!("COALESCE(b.{0}, a.{0}) AS __bf_k{i}", ident(k)))
            .collect::<Vec<_>>();
        let transitions = format!(
            "SELECT {}, COALESCE(b.__bf_rn, a.__bf_rn) AS __bf_trn, {}, {} FROM b FULL OUTER JOIN a ON {join}",
            keys.join(", "),
            labels(by, "b.", "__bf_from").join(", "),
            labels(by, "a.", "__bf_to").join(", "),
        );
        let with = format!("{with}, t AS ({transitions})");
        let group: Vec<String> =
            label_columns(by, "t.__bf_from").into_iter().chain(label_columns(by, "t.__bf_to")).collect();
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
        Ok(GroupQueries { before: side_sql("b"), after: side_sql("a"), width: 2 * by.len() })
    }

    /// The measured values of each group, summed per side: (from, to) → per value (before, after);
    /// `None` as soon as there are more than [`MAX_GROUPS`]. Streamed: the groups are read a batch
    /// at a time, and never more than the bound are held.
    async fn group_sums(
        &self,
        queries: &GroupQueries,
        by: usize,
        keyed: bool,
        measured: usize,
    ) -> DfResult<Option<BTreeMap<(Labels, Labels), Vec<(f64, f64)>>>> {
        let mut groups: BTreeMap<(Labels, Labels), Vec<(f64, f64)>> = BTreeMap::new();
        for (sql, is_after) in [(&queries.before, false), (&queries.after, true)] {
            // bf's own SQL, its names double-quoted: read as DataFusion reads it, whatever the plan's
            // dialect (the metrics it holds read alike: a backtick quotes a name in both).
            let mut batches = self.ours(sql).await?.execute_stream().await?;
            while let Some(batch) = batches.try_next().await? {
                // At most a batch (8,192 rows) past the bound is ever held.
                if groups.len() > MAX_GROUPS {
                    return Ok(None);
                }
                for row in 0..batch.num_rows() {
                    let label = |i: usize| {
                        let c = batch.column(i);
                        (!c.is_null(row)).then(|| array_value_to_string(c, row).unwrap_or_default())
                    };
                    let from: Vec<Option<String>> = (0..by).map(label).collect();
                    let to: Vec<Option<String>> =
                        if keyed { (by..2 * by).map(label).collect() } else { from.clone() };
                    let entry = groups.entry((from, to)).or_insert_with(|| vec![(0.0, 0.0); measured]);
                    for (m, slot) in entry.iter_mut().enumerate() {
                        let value =
                            scalar(&batch, queries.width + m, row).and_then(|v| as_f64(&v)).unwrap_or(0.0);
                        if is_after { slot.1 += value } else { slot.0 += value }
                    }
                }
            }
        }
        Ok((groups.len() <= MAX_GROUPS).then_some(groups))
    }
}

/// Without a key, each side is grouped by its own `by` values: a group's rows before and after.
fn group_queries(by: &[String], values: &str) -> GroupQueries {
    let side_sql = |view: &str| {
        let group = labels(by, "", "__bf_from");
        let names = label_columns(by, "__bf_from");
        format!("SELECT {}, {values} FROM {view} GROUP BY {}", group.join(", "), names.join(", "))
    };
    GroupQueries { before: side_sql("__bf_bs"), after: side_sql("__bf_as"), width: by.len() }
}

/// The `by` columns of a side (`alias`), as text, named `{prefix}{i}`.
fn labels(by: &[String], alias: &str, prefix: &str) -> Vec<String> {
    by.iter()
        .enumerate()
        .map(|(i, c)| format!("CAST({alias}{} AS VARCHAR) AS {prefix}{i}", ident(c)))
        .collect()
}

fn label_columns(by: &[String], prefix: &str) -> Vec<String> {
    (0..by.len()).map(|i| format!("{prefix}{i}")).collect()
}
