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
//!   counts as removed rather than hiding behind its twin. A slice held in memory whose keys do not
//!   repeat is paired in one pass over its rows instead of by queries (`pairing`); a bigger one
//!   likewise, split by key into parts on disk and paired a few parts at a time (`parts`).
//! - [`Comparison::trend`]: rows and metrics period by period over the window and its neighbours,
//!   what the charts draw.
//! - [`Comparison::breakdown`]: each metric's change split by columns (`[diff] by`): with a key, by
//!   the values a row had before and after ("currency = USD → EUR").

mod breakdown;
mod changes;
mod measures;
mod pairing;
mod parts;
mod session;
mod shapes;
mod trend;

pub use breakdown::{BreakdownRow, MAX_GROUPS};
pub use changes::{KeyReport, RowChanges, RowCounts, SampleRow, key_report};
pub use measures::Measures;
pub use session::{Comparison, Side, ident};
pub use shapes::{ColumnChange, Shape};
pub use trend::{Day, MAX_POINTS, Measured, Period, Trend, TrendPoint, periods};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::measures::gamma;
    use super::*;
    use crate::plan_file::Metric;

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
