//! A sum of floating-point values that can see a cent.
//!
//! The revenue a reviewer compares before and after is a `SUM` of DOUBLE amounts. Summed the usual
//! way, its value depends on the order of the rows (files, partitions, batches), so comparing two
//! sums needs a tolerance, γ(n)·Σ|x| — about 0.011 for 10⁶ rows averaging 100: a one-cent change in
//! a big slice read "unchanged". Summed exactly — Shewchuk's algorithm, as Python's `math.fsum`:
//! the running sum is kept as a few non-overlapping partial sums whose total is exact, and rounded
//! once at the end — the value is the exact sum correctly rounded, whatever the order, so two sums
//! of the same values are equal to the bit and the only error left is that last rounding: half an
//! ulp of the result, 7.5e-9 for a sum of 10⁸.
//!
//! [`udaf`] is the aggregate the comparison computes `SUM(e)` metrics with when `e` is a
//! floating-point column (`bf_exact_sum`, registered in the comparison's session only).

use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, ListArray};
use deltalake::arrow::datatypes::{DataType, Field, Float64Type};
use deltalake::datafusion::common::ScalarValue;
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::logical_expr::{Accumulator, AggregateUDF, Volatility, create_udaf};

/// The name the comparison's SQL calls the exact sum by.
pub const NAME: &str = "bf_exact_sum";

/// The exact sum of the values added so far, as non-overlapping partial sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExactSum {
    /// Non-overlapping, increasing in magnitude; their exact total is the sum of the finite values.
    partials: Vec<f64>,
    /// The sum of the infinite and NaN values, which have no exact sum to keep.
    special: f64,
    /// Whether a value that is not finite was added.
    nonfinite: bool,
    /// Whether any value was added: a sum of nothing is NULL, as SQL's.
    any: bool,
}

impl ExactSum {
    pub fn add(&mut self, value: f64) {
        self.any = true;
        if !value.is_finite() {
            self.special += value;
            self.nonfinite = true;
            return;
        }
        let mut x = value;
        let mut kept = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            // Two-sum: hi + lo == x + y exactly.
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        if x.is_infinite() {
            // The partial sums overflowed: no finite result exists to round to.
            self.special += x;
            self.nonfinite = true;
        }
        self.partials.truncate(kept);
        self.partials.push(x);
    }

    /// Adds what another accumulator summed (a partition's partial state).
    pub fn merge(&mut self, other: &ExactSum) {
        for &partial in &other.partials {
            self.add(partial);
        }
        self.any |= other.any;
        if other.nonfinite {
            self.special += other.special;
            self.nonfinite = true;
        }
    }

    /// The exact sum, correctly rounded to the nearest DOUBLE (ties to even); `None` for no values.
    pub fn value(&self) -> Option<f64> {
        if !self.any {
            return None;
        }
        if self.nonfinite {
            return Some(self.special);
        }
        let p = &self.partials;
        let Some(&last) = p.last() else { return Some(0.0) };
        let (mut hi, mut lo, mut n) = (last, 0.0, p.len() - 1);
        while n > 0 {
            let (x, y) = (hi, p[n - 1]);
            n -= 1;
            hi = x + y;
            lo = y - (hi - x);
            if lo != 0.0 {
                break;
            }
        }
        // Round half to even across partials: when the rest would tip a tie, take it into account.
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        Some(hi)
    }

    /// How far [`ExactSum::value`] can be from the exact sum: half an ulp of the value.
    pub fn error(value: f64) -> f64 {
        if value == 0.0 || !value.is_finite() { 0.0 } else { value.abs() * f64::EPSILON / 2.0 }
    }
}

impl Accumulator for ExactSum {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let values = values[0].as_primitive::<Float64Type>();
        for value in values.iter().flatten() {
            self.add(value);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Float64(self.value()))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.partials.capacity() * std::mem::size_of::<f64>()
    }

    /// The partials, the special values' sum, and whether anything was added.
    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let partials = ScalarValue::new_list_nullable(
            &self.partials.iter().map(|&p| ScalarValue::Float64(Some(p))).collect::<Vec<_>>(),
            &DataType::Float64,
        );
        Ok(vec![
            ScalarValue::List(partials),
            ScalarValue::Float64(self.nonfinite.then_some(self.special)),
            ScalarValue::Boolean(Some(self.any)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let partials: &ListArray = states[0].as_list::<i32>();
        let special: &Float64Array = states[1].as_primitive::<Float64Type>();
        let any: &BooleanArray = states[2].as_boolean();
        for row in 0..partials.len() {
            let mut other = ExactSum { any: any.value(row), ..ExactSum::default() };
            if !partials.is_null(row) {
                other.partials = partials.value(row).as_primitive::<Float64Type>().values().to_vec();
            }
            if special.is_valid(row) {
                other.special = special.value(row);
                other.nonfinite = true;
            }
            self.merge(&other);
        }
        Ok(())
    }
}

/// `bf_exact_sum(DOUBLE) → DOUBLE`: the exact sum, correctly rounded; NULL for no rows.
pub fn udaf() -> AggregateUDF {
    create_udaf(
        NAME,
        vec![DataType::Float64],
        Arc::new(DataType::Float64),
        Volatility::Immutable,
        Arc::new(|_| Ok(Box::new(ExactSum::default()))),
        Arc::new(vec![
            DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
            DataType::Float64,
            DataType::Boolean,
        ]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact sum of `values`; 0 for none (where SQL's is NULL, tested on its own).
    fn exact(values: impl IntoIterator<Item = f64>) -> f64 {
        let mut sum = ExactSum::default();
        values.into_iter().for_each(|v| sum.add(v));
        sum.value().unwrap_or(0.0)
    }

    /// Amounts in cents as integers, so their sum is known exactly.
    fn cents(n: usize, seed: u64) -> Vec<i64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // 0.01 to 199.99, averaging about 100.
                1 + (state >> 33) as i64 % 19_999
            })
            .collect()
    }

    #[test]
    fn a_cent_in_one_row_of_a_million_is_seen_where_the_plain_sum_bound_hides_it() {
        let amounts: Vec<f64> = cents(1_000_000, 7).iter().map(|&c| c as f64 / 100.0).collect();
        let mut changed = amounts.clone();
        changed[123_456] += 0.01;
        let (before, after) = (exact(amounts.iter().copied()), exact(changed.iter().copied()));
        assert!((after - before - 0.01).abs() < 1e-6, "{before} → {after}");
        // The bound a plain sum needs is larger than the change: it would have read "unchanged".
        let magnitude: f64 = amounts.iter().map(|a| a.abs()).sum();
        let n = amounts.len() as f64 - 1.0;
        let gamma = n * f64::EPSILON / 2.0 / (1.0 - n * f64::EPSILON / 2.0);
        assert!(gamma * magnitude > 0.01, "γ(n)·Σ|x| = {}", gamma * magnitude);
        // The exact sum's own bound is far below a cent.
        assert!(ExactSum::error(before) < 1e-7, "{}", ExactSum::error(before));
    }

    #[test]
    fn the_value_is_the_exact_sum_correctly_rounded_within_its_bound() {
        let cents = cents(100_000, 11);
        let total: i64 = cents.iter().sum();
        // Each amount is the DOUBLE nearest to cents/100; their exact sum is within n·ulp/2 of
        // total/100, and the result is that exact sum rounded once.
        let amounts: Vec<f64> = cents.iter().map(|&c| c as f64 / 100.0).collect();
        let value = exact(amounts.iter().copied());
        let per_value: f64 = amounts.iter().map(|a| a.abs() * f64::EPSILON / 2.0).sum();
        assert!((value - total as f64 / 100.0).abs() <= per_value + ExactSum::error(value), "{value}");
        // Integers are exact: the sum is exactly theirs.
        let integers: Vec<f64> = cents.iter().map(|&c| c as f64).collect();
        assert_eq!(exact(integers.iter().copied()), total as f64);
        // Classic cancellations a plain sum gets wrong.
        assert_eq!(exact([1e100, 1.0, -1e100]), 1.0);
        assert_eq!(exact([0.1; 10]), 1.0);
        assert_eq!(ExactSum::default().value(), None, "a sum of nothing is NULL");
        assert!(exact([f64::NAN, 1.0]).is_nan());
    }

    proptest! {
        #[test]
        fn any_order_and_any_split_gives_the_same_bits(
            values in proptest::collection::vec(-1e6f64..1e6, 0..300),
            split in 0usize..300,
            seed in any::<u64>(),
        ) {
            let whole = exact(values.iter().copied());
            let mut shuffled = values.clone();
            let mut state = seed;
            for i in (1..shuffled.len()).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                shuffled.swap(i, (state >> 33) as usize % (i + 1));
            }
            prop_assert_eq!(exact(shuffled.iter().copied()).to_bits(), whole.to_bits());
            // Partitions summed apart, then merged: what the aggregate does across files.
            let at = split.min(values.len());
            let (mut left, mut right) = (ExactSum::default(), ExactSum::default());
            values[..at].iter().for_each(|&v| left.add(v));
            values[at..].iter().for_each(|&v| right.add(v));
            left.merge(&right);
            prop_assert_eq!(left.value().map(f64::to_bits), (!values.is_empty()).then_some(whole.to_bits()));
        }
    }
}
