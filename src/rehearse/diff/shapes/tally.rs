//! One column's tally over a slice's changed pairs: what its values were turned into, counted
//! shape by shape, and the shape chosen from the counts ([`super::Tallies`] holds one per column).

use std::collections::HashMap;

use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use deltalake::arrow::error::ArrowError;

use super::{ColumnChange, Shape};

/// The most distinct factors or offsets a column's tally follows: a change with more is no one
/// shape.
const CANDIDATES: usize = 16;

/// What one column's values were turned into, counted over the changed pairs.
pub(super) struct Tally {
    kind: Kind,
    /// Pairs whose value in this column differs.
    pub(super) rows: u64,
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
    pub(super) fn new(data_type: &DataType, groups: usize) -> Tally {
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
    pub(super) fn add(
        &mut self,
        before: &ArrayRef,
        after: &ArrayRef,
        groups: &[ArrayRef],
    ) -> Result<(), ArrowError> {
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
    pub(super) fn merge(&mut self, other: Tally) {
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
    pub(super) fn finish(self, column: &str, group_names: &[&String], own: Option<usize>) -> ColumnChange {
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
}
