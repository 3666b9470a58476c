//! Rows by key: which rows a slice adds, removes and changes (paired by key and by rank among the
//! rows sharing a key, so a duplicate that goes away counts as removed), and how rows use a key.

use deltalake::arrow::array::Array;
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::common::Column;
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::functions_aggregate::expr_fn::count;
use deltalake::datafusion::logical_expr::{Expr, col, lit};
use deltalake::datafusion::prelude::DataFrame;
use serde::{Deserialize, Serialize};

use super::session::{Comparison, Side, as_f64, ident, scalar};

/// Row-level changes of a slice, by key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowChanges {
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    pub unchanged: u64,
    pub samples: Vec<SampleRow>,
    /// The table's columns, in the order of each sample's fields: what a report heads them with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// What changed in each column of the changed rows, and how ([`super::shapes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub column_changes: Vec<super::shapes::ColumnChange>,
}

/// How many rows a backfill adds, removes and changes, by key: the sum of its slices' changes,
/// what the plan's headline counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowCounts {
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
}

impl RowCounts {
    /// The sum of every slice's changes; `None` when any slice was not compared by key.
    pub fn sum<'a>(changes: impl IntoIterator<Item = Option<&'a RowChanges>>) -> Option<RowCounts> {
        changes.into_iter().try_fold(RowCounts::default(), |sum, changes| {
            let c = changes?;
            Some(RowCounts {
                added: sum.added + c.added,
                removed: sum.removed + c.removed,
                changed: sum.changed + c.changed,
            })
        })
    }

    /// Whether no row is added, removed or changed.
    pub fn none(&self) -> bool {
        self.added + self.removed + self.changed == 0
    }
}

/// One row that changed, as text fields in the table's column order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampleRow {
    /// `added`, `removed` or `changed`.
    pub change: String,
    pub before: Option<Vec<String>>,
    pub after: Option<Vec<String>>,
}

impl Comparison {
    /// Added, removed and changed rows between the two sides of the slice [`Comparison::focus`]
    /// registered, paired by `key`, and how each column of the changed rows changed (`by`: the
    /// `[diff] by` columns naming the group they sit in).
    pub async fn slice_changes(&self, key: &[String], samples: usize, by: &[String]) -> DfResult<RowChanges> {
        let paired = match &self.held {
            Some((before, after)) => super::pairing::pair(&self.schema, before, after, key, samples, by)?,
            None => super::parts::pair(self, key, samples, by, self.pool()).await?,
        };
        match paired {
            Some(changes) => Ok(changes),
            None => {
                let mut changes = self.sql_changes(key, samples).await?;
                if changes.changed > 0 {
                    let pairs = self.pairs(key).await?;
                    changes.column_changes = self.column_changes(&pairs, key, by).await?;
                }
                Ok(changes)
            }
        }
    }

    /// The same, paired by SQL: where a key repeats (rows then pair by their rank among its rows),
    /// or a column cannot be compared in memory.
    pub(super) async fn sql_changes(&self, key: &[String], samples: usize) -> DfResult<RowChanges> {
        let joined = self.pairs(key).await?;
        let mut changes = self.count_changes(&joined).await?;
        // Up to `samples` rows of each kind, a query per kind: a few removed duplicates must not hide
        // behind hundreds of changed rows.
        let kinds = [("changed", changes.changed), ("added", changes.added), ("removed", changes.removed)];
        for (kind, _) in kinds.into_iter().filter(|(_, n)| samples > 0 && *n > 0) {
            let sampled = self.sample_changes(&joined, kind, samples).await?;
            changes.samples.extend(sampled);
        }
        if !changes.samples.is_empty() {
            changes.columns = self.schema.fields().iter().map(|f| f.name().clone()).collect();
        }
        Ok(changes)
    }

    /// A query of the slice's rows paired by key and rank: each pair's kind of change (`__bf_change`),
    /// both sides' columns under names of their own, and the key to order samples by.
    pub(super) async fn pairs(&self, key: &[String]) -> DfResult<String> {
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
        if self.held.is_none() {
            return Ok(joined);
        }
        let pairs = self.ours(&joined).await?.cache().await?;
        self.ctx.deregister_table("__bf_pairs")?;
        self.ctx.register_table("__bf_pairs", pairs.into_view())?;
        Ok("SELECT * FROM __bf_pairs".to_owned())
    }

    /// How many pairs of each kind the [`Comparison::pairs`] query holds.
    async fn count_changes(&self, joined: &str) -> DfResult<RowChanges> {
        let counts = self
            .ours(&format!("SELECT __bf_change, COUNT(*) FROM ({joined}) GROUP BY __bf_change"))
            .await?
            .collect()
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
        Ok(changes)
    }

    /// The first `samples` pairs of one kind, in key order, as text. ORDER BY … LIMIT keeps only those
    /// rows in memory (a top-k), where numbering every changed row of a 10M-row slice sorted all of
    /// them with their text (docs/BENCHMARKS.md, W3). The rows become text after the top-k, not every
    /// changed row before it: a 200,000-row slice's row changes took 177–206 ms instead of 242 ms.
    async fn sample_changes(&self, joined: &str, kind: &str, samples: usize) -> DfResult<Vec<SampleRow>> {
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
        let sample_sql = format!(
            "SELECT __bf_change, {}, {} FROM \
             (SELECT * FROM ({joined}) WHERE __bf_change = '{kind}' ORDER BY __bf_order LIMIT {samples}) \
             ORDER BY __bf_order",
            texts("b"),
            texts("a"),
        );
        let n = self.schema.fields().len();
        let mut sampled = Vec::new();
        for batch in self.ours(&sample_sql).await?.collect().await? {
            for row in 0..batch.num_rows() {
                let text = |i: usize| {
                    let column = batch.column(i);
                    (!column.is_null(row)).then(|| array_value_to_string(column, row).unwrap_or_default())
                };
                let change = text(0).unwrap_or_default();
                let side = |offset: usize| -> Vec<String> {
                    (0..n).map(|i| text(offset + i).unwrap_or_else(|| "NULL".into())).collect()
                };
                sampled.push(SampleRow {
                    before: (change != "added").then(|| side(1)),
                    after: (change != "removed").then(|| side(1 + n)),
                    change,
                });
            }
        }
        Ok(sampled)
    }

    /// How one side of the focused slice uses `key` (see [`key_report`]).
    pub async fn slice_key_report(&self, side: Side, key: &[String], limit: usize) -> DfResult<KeyReport> {
        key_report(self.ctx.table(side.slice_view()).await?, key, limit).await
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
