//! What changed, per column: for every column, the rows whose value changed, and the shape of the
//! change where one shape explains them all or most — scaled by a constant factor, shifted by a
//! constant, rounded or truncated, set to or from NULL, trimmed, case changed — and the `[diff] by`
//! group they all sit in, when they do. A reviewer reads "amount: 193 rows divided by exactly 100,
//! all country = DE" where the samples showed five rows and the totals a sum.
//!
//! One pass over the slice's changed pairs (rows paired by key whose values differ), streamed:
//! each column's tally keeps counters, never the rows.

use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::error::ArrowError;
use deltalake::datafusion::error::Result as DfResult;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::session::Comparison;

mod tally;
use tally::Tally;

/// How one column changed in a slice, or over a backfill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ColumnChange {
    pub column: String,
    /// The changed rows whose value in this column differs.
    pub rows: u64,
    /// The shape that explains all or most of them, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    /// The one group of `[diff] by` all those rows are in, as `country = DE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
}

/// A shape of change: `divided by exactly 100`, and how many of the column's changed rows it
/// explains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shape {
    pub what: String,
    pub rows: u64,
}

impl ColumnChange {
    /// `amount: 193 rows divided by exactly 100, all country = DE`, or `note: 12 rows changed`.
    pub fn describe(&self) -> String {
        let rows = crate::words::count(self.rows as usize, "row");
        let what = match &self.shape {
            Some(shape) if shape.rows == self.rows => format!("{rows} {}", shape.what),
            Some(shape) => format!("{rows} changed, {} of them {}", shape.rows, shape.what),
            None => format!("{rows} changed"),
        };
        match &self.within {
            Some(group) => format!("{}: {what}, all {group}", self.column),
            None => format!("{}: {what}", self.column),
        }
    }

    /// The backfill's column changes from its slices': rows summed, a shape kept where the slices'
    /// shapes agree on most of the rows, a group kept where every slice names the same.
    pub fn sum<'a>(slices: impl IntoIterator<Item = &'a [ColumnChange]>) -> Vec<ColumnChange> {
        let mut columns: Vec<(ColumnChange, Vec<Shape>, Vec<Option<String>>)> = Vec::new();
        for change in slices.into_iter().flatten() {
            let at = match columns.iter().position(|(c, _, _)| c.column == change.column) {
                Some(at) => at,
                None => {
                    columns.push((
                        ColumnChange { rows: 0, shape: None, within: None, ..change.clone() },
                        vec![],
                        vec![],
                    ));
                    columns.len() - 1
                }
            };
            let (sum, shapes, groups) = &mut columns[at];
            sum.rows += change.rows;
            shapes.extend(change.shape.clone());
            groups.push(change.within.clone());
        }
        let mut summed: Vec<ColumnChange> = columns
            .into_iter()
            .map(|(mut sum, shapes, groups)| {
                sum.shape = most_rows(&shapes).filter(|s| s.rows * 2 > sum.rows);
                sum.within = groups
                    .first()
                    .cloned()
                    .flatten()
                    .filter(|g| groups.iter().all(|o| o.as_ref() == Some(g)));
                sum
            })
            .collect();
        most_changed_first(&mut summed);
        summed
    }
}

/// The order a reviewer reads columns in: most changed rows first, then by name.
fn most_changed_first(changes: &mut [ColumnChange]) {
    changes.sort_by(|x, y| y.rows.cmp(&x.rows).then_with(|| x.column.cmp(&y.column)));
}

/// Of shapes, the one explaining most rows, with every row it explains summed.
fn most_rows(shapes: &[Shape]) -> Option<Shape> {
    let mut summed: Vec<Shape> = Vec::new();
    for shape in shapes {
        match summed.iter_mut().find(|s| s.what == shape.what) {
            Some(s) => s.rows += shape.rows,
            None => summed.push(shape.clone()),
        }
    }
    summed.into_iter().max_by_key(|s| s.rows)
}

/// The tallies of a slice's columns (or of a part of one), fed the values of its changed pairs:
/// by the in-memory pairing as it gathers them, or by SQL.
pub(super) struct Tallies {
    /// The columns compared (all but the key's and nested ones), by their place in the schema.
    columns: Vec<(usize, String, Tally)>,
    /// The `[diff] by` columns, by their place in the schema.
    groups: Vec<(usize, String)>,
}

impl Tallies {
    /// `key_at`: the key's columns, never compared; `by`: the `[diff] by` columns, whose values
    /// name the group a column's changes sit in (none when the plan shows no values).
    pub(super) fn new(schema: &Schema, key_at: &[usize], by: &[String]) -> Tallies {
        let fields = schema.fields();
        let columns = (0..fields.len())
            .filter(|i| !key_at.contains(i) && !fields[*i].data_type().is_nested())
            .map(|i| (i, fields[i].name().clone(), Tally::new(fields[i].data_type(), by.len())))
            .collect();
        let groups = by.iter().filter_map(|b| Some((schema.index_of(b).ok()?, b.clone()))).collect();
        Tallies { columns, groups }
    }

    /// The schema's columns whose values [`Tallies::add`] takes: the compared ones.
    pub(super) fn compared(&self) -> Vec<usize> {
        self.columns.iter().map(|(i, _, _)| *i).collect()
    }

    /// The schema's columns naming the groups, in the order [`Tallies::add`] takes them.
    pub(super) fn grouped_by(&self) -> Vec<usize> {
        self.groups.iter().map(|(i, _)| *i).collect()
    }

    /// Counts changed pairs: `values(i)` gives schema column `i`'s values before and after, and
    /// `groups` the `[diff] by` columns' before and after (any type), pair by pair. A pair's group
    /// is its value (`USD`), or where the backfill moves it, both (`USD → EUR`).
    pub(super) fn add(
        &mut self,
        mut values: impl FnMut(usize) -> Result<(ArrayRef, ArrayRef), ArrowError>,
        groups: &[(ArrayRef, ArrayRef)],
    ) -> Result<(), ArrowError> {
        let named: Vec<ArrayRef> = groups.iter().map(|(b, a)| moved(b, a)).collect::<Result<_, _>>()?;
        for (i, _, tally) in &mut self.columns {
            let (before, after) = values(*i)?;
            tally.add(&before, &after, &named)?;
        }
        Ok(())
    }

    /// Adds another part's tallies of the same columns.
    pub(super) fn merge(&mut self, other: Tallies) {
        for ((_, _, tally), (_, _, more)) in self.columns.iter_mut().zip(other.columns) {
            tally.merge(more);
        }
    }

    /// Each column with a changed value, and how it changed, most changed first.
    pub(super) fn finish(self) -> Vec<ColumnChange> {
        let names: Vec<&String> = self.groups.iter().map(|(_, name)| name).collect();
        let mut changes: Vec<ColumnChange> = self
            .columns
            .into_iter()
            .filter(|(_, _, tally)| tally.rows > 0)
            .map(|(i, column, tally)| {
                // A column's own values name no group of its changes.
                let own = self.groups.iter().position(|(g, _)| *g == i);
                tally.finish(&column, &names, own)
            })
            .collect();
        most_changed_first(&mut changes);
        changes
    }
}

impl Comparison {
    /// Each column's changes over the focused slice's pairs (the [`Comparison::pairs`] query), for
    /// a slice the in-memory pairing could not pair: the pairs streamed through [`Tallies`].
    pub(super) async fn column_changes(
        &self,
        joined: &str,
        key: &[String],
        by: &[String],
    ) -> DfResult<Vec<ColumnChange>> {
        let key_at: Vec<usize> = key.iter().filter_map(|k| self.schema.index_of(k).ok()).collect();
        let mut tallies = Tallies::new(&self.schema, &key_at, by);
        let compared = tallies.compared();
        let grouped = tallies.grouped_by();
        let selected: Vec<String> =
            compared
                .iter()
                .flat_map(|i| [format!("__bf_b{i}"), format!("__bf_a{i}")])
                .chain(grouped.iter().enumerate().flat_map(|(g, i)| {
                    [format!("__bf_b{i} AS __bf_gb{g}"), format!("__bf_a{i} AS __bf_ga{g}")]
                }))
                .collect();
        if compared.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {} FROM ({joined}) WHERE __bf_change = 'changed'", selected.join(", "));
        let mut batches = self.ours(&sql).await?.execute_stream().await?;
        while let Some(batch) = batches.try_next().await? {
            let side = |g: usize, after: usize| batch.column(2 * compared.len() + 2 * g + after).clone();
            let groups: Vec<(ArrayRef, ArrayRef)> =
                (0..grouped.len()).map(|g| (side(g, 0), side(g, 1))).collect();
            let at = |i: usize| compared.iter().position(|c| *c == i).expect("a compared column");
            tallies.add(
                |i| Ok((batch.column(2 * at(i)).clone(), batch.column(2 * at(i) + 1).clone())),
                &groups,
            )?;
        }
        Ok(tallies.finish())
    }
}

/// A group column's values as text, `before → after` where they differ.
fn moved(before: &ArrayRef, after: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let (b, a) = (cast(before, &DataType::Utf8)?, cast(after, &DataType::Utf8)?);
    let (b, a) = (b.as_string::<i32>(), a.as_string::<i32>());
    let text = |side: &deltalake::arrow::array::StringArray, row: usize| match side.is_null(row) {
        true => "NULL".to_owned(),
        false => side.value(row).to_owned(),
    };
    let labels: deltalake::arrow::array::StringArray = (0..b.len())
        .map(|row| match (text(b, row), text(a, row)) {
            (x, y) if x == y => Some(x),
            (x, y) => Some(format!("{x} → {y}")),
        })
        .collect();
    Ok(std::sync::Arc::new(labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_agreeing_on_a_shape_sum_it_and_disagreeing_ones_keep_the_larger_when_most() {
        let change = |rows, what: &str, shaped, within: Option<&str>| ColumnChange {
            column: "amount".into(),
            rows,
            shape: Some(Shape { what: what.into(), rows: shaped }),
            within: within.map(str::to_owned),
        };
        let first = [change(10, "divided by exactly 100", 10, Some("country = DE"))];
        let second = [change(5, "divided by exactly 100", 5, Some("country = DE"))];
        let summed = ColumnChange::sum([&first[..], &second[..]]);
        assert_eq!(summed[0].describe(), "amount: 15 rows divided by exactly 100, all country = DE");
        let third = [change(20, "rounded to whole units", 20, None)];
        let summed = ColumnChange::sum([&first[..], &third[..]]);
        assert_eq!(summed[0].describe(), "amount: 30 rows changed, 20 of them rounded to whole units");
    }
}
