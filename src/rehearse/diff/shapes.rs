//! What changed, per column: for every column, the rows whose value changed, and the shape of the
//! change where one shape explains them all or most — scaled by a constant factor, shifted by a
//! constant, rounded or truncated, set to or from NULL, trimmed, case changed — and the `[diff] by`
//! group they all sit in, when they do. A reviewer reads "amount: 193 rows divided by exactly 100,
//! all country = DE" where the samples showed five rows and the totals a sum.
//!
//! One pass over the slice's changed pairs (rows paired by key whose values differ), streamed:
//! each column's tally keeps counters, never the rows.

use std::collections::HashMap;

use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Float64Type, Int64Type, Schema, TimeUnit};
use deltalake::arrow::error::ArrowError;
use deltalake::datafusion::error::Result as DfResult;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::session::Comparison;

/// The most distinct factors or offsets a column's tally follows: a change with more is no one
/// shape.
const CANDIDATES: usize = 16;

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

/// What one column's values were turned into, counted over the changed pairs.
struct Tally {
    kind: Kind,
    /// Pairs whose value in this column differs.
    rows: u64,
    to_null: u64,
    from_null: u64,
    /// After ÷ before, and after − before (days, microseconds or the number), by how often.
    factors: Counter,
    offsets: Counter,
    /// Numbers: rounded / truncated to 0..=4 decimals. Timestamps: truncated to the second,
    /// minute, hour, day.
    rounded: [u64; 5],
    truncated: [u64; 5],
    trimmed: u64,
    upper: u64,
    lower: u64,
    /// For each `[diff] by` column, the value the changed rows have.
    groups: Vec<Group>,
}

/// The value of a `[diff] by` column the changed rows have: none seen yet, one (NULL is one), or
/// several.
#[derive(Clone, PartialEq)]
enum Group {
    Unseen,
    One(Option<String>),
    Several,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Number,
    Days,
    Micros,
    Text,
    Other,
}

impl Tally {
    fn new(data_type: &DataType, groups: usize) -> Tally {
        let kind = match data_type {
            t if t.is_numeric() => Kind::Number,
            DataType::Date32 | DataType::Date64 => Kind::Days,
            DataType::Timestamp(_, _) => Kind::Micros,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text,
            _ => Kind::Other,
        };
        Tally {
            kind,
            rows: 0,
            to_null: 0,
            from_null: 0,
            factors: Counter::default(),
            offsets: Counter::default(),
            rounded: [0; 5],
            truncated: [0; 5],
            trimmed: 0,
            upper: 0,
            lower: 0,
            groups: vec![Group::Unseen; groups],
        }
    }

    /// Counts the pairs of this column's values, each in its group (`groups`: the `[diff] by`
    /// columns' values as text).
    fn add(&mut self, before: &ArrayRef, after: &ArrayRef, groups: &[ArrayRef]) -> Result<(), ArrowError> {
        let rows = before.len();
        match self.kind {
            Kind::Number => {
                let (b, a) = (cast(before, &DataType::Float64)?, cast(after, &DataType::Float64)?);
                let (b, a) = (b.as_primitive::<Float64Type>(), a.as_primitive::<Float64Type>());
                for row in 0..rows {
                    if self.nulls(b.is_null(row), a.is_null(row), groups, row) || b.value(row) == a.value(row)
                    {
                        continue;
                    }
                    self.number(b.value(row), a.value(row));
                    self.group(groups, row);
                }
            }
            Kind::Days | Kind::Micros => {
                let unit = match self.kind {
                    Kind::Days => DataType::Date32,
                    _ => DataType::Timestamp(TimeUnit::Microsecond, None),
                };
                let as_int = |side| cast(&cast(side, &unit)?, &DataType::Int64);
                let (b, a) = (as_int(before)?, as_int(after)?);
                let (b, a) = (b.as_primitive::<Int64Type>(), a.as_primitive::<Int64Type>());
                for row in 0..rows {
                    if self.nulls(b.is_null(row), a.is_null(row), groups, row) || b.value(row) == a.value(row)
                    {
                        continue;
                    }
                    self.instant(b.value(row), a.value(row));
                    self.group(groups, row);
                }
            }
            Kind::Text => {
                let (b, a) = (cast(before, &DataType::Utf8)?, cast(after, &DataType::Utf8)?);
                let (b, a) = (b.as_string::<i32>(), a.as_string::<i32>());
                for row in 0..rows {
                    if self.nulls(b.is_null(row), a.is_null(row), groups, row) || b.value(row) == a.value(row)
                    {
                        continue;
                    }
                    self.text(b.value(row), a.value(row));
                    self.group(groups, row);
                }
            }
            Kind::Other => {
                // Arrow's `IS DISTINCT FROM`, the kernel the pairing asks whether a pair changed.
                let differs = deltalake::arrow::compute::kernels::cmp::distinct(before, after)?;
                for row in 0..rows {
                    if self.nulls(before.is_null(row), after.is_null(row), groups, row) || !differs.value(row)
                    {
                        continue;
                    }
                    self.rows += 1;
                    self.group(groups, row);
                }
            }
        }
        Ok(())
    }

    /// Counts a pair with a NULL on either side (set to NULL, filled from NULL), in its group:
    /// whether it has one, so the caller goes on to the next pair.
    fn nulls(&mut self, before_null: bool, after_null: bool, groups: &[ArrayRef], row: usize) -> bool {
        match (before_null, after_null) {
            (false, false) => return false,
            (true, true) => return true,
            (false, true) => self.to_null += 1,
            (true, false) => self.from_null += 1,
        }
        self.rows += 1;
        self.group(groups, row);
        true
    }

    fn number(&mut self, before: f64, after: f64) {
        self.rows += 1;
        if before != 0.0 {
            self.factors.add(after / before);
        }
        self.offsets.add(after - before);
        for decimals in 0..5 {
            let scale = 10f64.powi(decimals as i32);
            if close((before * scale).round() / scale, after) {
                self.rounded[decimals] += 1;
            }
            if close((before * scale).trunc() / scale, after) {
                self.truncated[decimals] += 1;
            }
        }
    }

    /// Days (dates) or microseconds (timestamps).
    fn instant(&mut self, before: i64, after: i64) {
        self.rows += 1;
        self.offsets.add((after - before) as f64);
        if self.kind == Kind::Micros {
            for (at, unit) in
                [1_000_000i64, 60_000_000, 3_600_000_000, 86_400_000_000].into_iter().enumerate()
            {
                if before.div_euclid(unit) * unit == after {
                    self.truncated[at] += 1;
                }
            }
        }
    }

    fn text(&mut self, before: &str, after: &str) {
        self.rows += 1;
        self.trimmed += u64::from(before.trim() == after);
        self.upper += u64::from(before.to_uppercase() == after);
        self.lower += u64::from(before.to_lowercase() == after);
    }

    fn group(&mut self, groups: &[ArrayRef], row: usize) {
        for (group, column) in self.groups.iter_mut().zip(groups) {
            let column = column.as_string::<i32>();
            let value = (!column.is_null(row)).then(|| column.value(row).to_owned());
            *group = match std::mem::replace(group, Group::Several) {
                Group::Unseen => Group::One(value),
                Group::One(seen) if seen == value => Group::One(seen),
                _ => Group::Several,
            };
        }
    }

    /// Adds another part's counts of the same column.
    fn merge(&mut self, other: Tally) {
        self.rows += other.rows;
        self.to_null += other.to_null;
        self.from_null += other.from_null;
        self.factors.merge(other.factors);
        self.offsets.merge(other.offsets);
        for at in 0..5 {
            self.rounded[at] += other.rounded[at];
            self.truncated[at] += other.truncated[at];
        }
        self.trimmed += other.trimmed;
        self.upper += other.upper;
        self.lower += other.lower;
        for (group, more) in self.groups.iter_mut().zip(other.groups) {
            *group = match (std::mem::replace(group, Group::Several), more) {
                (Group::Unseen, more) => more,
                (seen, Group::Unseen) => seen,
                (Group::One(x), Group::One(y)) if x == y => Group::One(x),
                _ => Group::Several,
            };
        }
    }

    /// The column's change, with the shape that explains most of its rows (at least half), and
    /// the group all its rows are in, of the `[diff] by` columns but its own (`own`).
    fn finish(self, column: &str, group_names: &[&String], own: Option<usize>) -> ColumnChange {
        let mut shapes: Vec<Shape> = Vec::new();
        let mut shape = |rows: u64, what: String| shapes.push(Shape { what, rows });
        shape(self.to_null, "set to NULL".into());
        shape(self.from_null, "filled in where they were NULL".into());
        match self.kind {
            Kind::Number => {
                if let Some((factor, rows)) = self.factors.top() {
                    shape(rows, scaled(factor));
                }
                if let Some((offset, rows)) = self.offsets.top() {
                    shape(
                        rows,
                        format!(
                            "{} by {}",
                            if offset > 0.0 { "raised" } else { "lowered" },
                            figure(offset.abs())
                        ),
                    );
                }
                // Fewest decimals first: a value rounded to whole units is rounded to 2 decimals too.
                for decimals in 0..5 {
                    let places = match decimals {
                        0 => "whole units".to_owned(),
                        1 => "1 decimal".to_owned(),
                        n => format!("{n} decimals"),
                    };
                    shape(self.truncated[decimals], format!("truncated to {places}"));
                    shape(self.rounded[decimals], format!("rounded to {places}"));
                }
            }
            Kind::Days => {
                if let Some((days, rows)) = self.offsets.top() {
                    shape(
                        rows,
                        format!("moved {} {}", crate::words::count(days.abs() as usize, "day"), later(days)),
                    );
                }
            }
            Kind::Micros => {
                for (at, unit) in [
                    "lost their milliseconds",
                    "truncated to the minute",
                    "truncated to the hour",
                    "truncated to the day",
                ]
                .into_iter()
                .enumerate()
                {
                    shape(self.truncated[at], unit.to_owned());
                }
                if let Some((micros, rows)) = self.offsets.top() {
                    shape(rows, format!("moved {} {}", duration(micros.abs()), later(micros)));
                }
            }
            Kind::Text => {
                shape(self.trimmed, "trimmed of spaces".into());
                shape(self.upper, "upper-cased".into());
                shape(self.lower, "lower-cased".into());
            }
            Kind::Other => {}
        }
        // The first shape explaining the most rows: the order above puts the plainer first.
        let best =
            shapes.iter().filter(|s| s.rows * 2 > self.rows).fold(None::<&Shape>, |best, s| match best {
                Some(b) if b.rows >= s.rows => Some(b),
                _ => Some(s),
            });
        let within =
            self.groups.iter().zip(group_names).enumerate().filter(|(at, _)| Some(*at) != own).find_map(
                |(_, (group, name))| match group {
                    Group::One(Some(value)) => Some(format!("{name} = {value}")),
                    Group::One(None) => Some(format!("{name} = NULL")),
                    _ => None,
                },
            );
        ColumnChange { column: column.to_owned(), rows: self.rows, shape: best.cloned(), within }
    }
}

/// Values counted by how often they occur, at most [`CANDIDATES`] distinct (equal to 9
/// significant digits); a value beyond those is not counted.
#[derive(Default)]
struct Counter {
    seen: HashMap<String, (f64, u64)>,
}

impl Counter {
    fn add(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        let key = format!("{value:.8e}");
        let room = self.seen.len() < CANDIDATES;
        match self.seen.get_mut(&key) {
            Some((_, n)) => *n += 1,
            None if room => {
                self.seen.insert(key, (value, 1));
            }
            None => {}
        }
    }

    /// Adds another counter's counts, as many of its values as there is room for.
    fn merge(&mut self, other: Counter) {
        for (key, (value, n)) in other.seen {
            let room = self.seen.len() < CANDIDATES;
            match self.seen.get_mut(&key) {
                Some((_, count)) => *count += n,
                None if room => {
                    self.seen.insert(key, (value, n));
                }
                None => {}
            }
        }
    }

    /// The most frequent value and its count.
    fn top(&self) -> Option<(f64, u64)> {
        self.seen.values().copied().max_by_key(|(_, n)| *n)
    }
}

/// Whether two numbers are equal but for floating-point noise.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// `divided by exactly 100`, `multiplied by exactly 100`, `multiplied by 1.19`.
fn scaled(factor: f64) -> String {
    let whole = |x: f64| close(x, x.round()) && x.round() >= 2.0;
    if whole(factor) {
        format!("multiplied by exactly {}", figure(factor.round()))
    } else if factor != 0.0 && whole(1.0 / factor) {
        format!("divided by exactly {}", figure((1.0 / factor).round()))
    } else {
        format!("multiplied by {}", figure(factor))
    }
}

/// A number as people write it: `100`, `0.5`, `1.19`.
fn figure(x: f64) -> String {
    let text = format!("{:.6}", x);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn later(offset: f64) -> &'static str {
    if offset > 0.0 { "later" } else { "earlier" }
}

/// `1 hour`, `30 minutes`, `2 days`, `1.5 seconds`, from microseconds.
fn duration(micros: f64) -> String {
    let units = [
        (86_400_000_000.0, "day"),
        (3_600_000_000.0, "hour"),
        (60_000_000.0, "minute"),
        (1_000_000.0, "second"),
    ];
    for (size, unit) in units {
        if micros >= size && close((micros / size).round(), micros / size) {
            return crate::words::count((micros / size).round() as usize, unit);
        }
    }
    format!("{} seconds", figure(micros / 1_000_000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_is_named_as_people_say_it() {
        assert_eq!(scaled(0.01), "divided by exactly 100");
        assert_eq!(scaled(100.0), "multiplied by exactly 100");
        assert_eq!(scaled(1.19), "multiplied by 1.19");
        assert_eq!(duration(3_600_000_000.0), "1 hour");
        assert_eq!(duration(1_500_000.0), "1.5 seconds");
    }

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
