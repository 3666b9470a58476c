//! The predicate a slice's replaceWhere commit uses.
//!
//! Built as a DataFusion expression from typed DATE literals, never by pasting dates into SQL text:
//! the same value serves the write, the before/after metrics and the text shown to reviewers, which is
//! rendered by deltalake's own formatter so `bf slices` prints exactly what the table's history will
//! record.

use deltalake::arrow::datatypes::Date32Type;
use deltalake::datafusion::common::{Column, ScalarValue};
use deltalake::datafusion::logical_expr::{Expr, lit};
use deltalake::delta_datafusion::expr::fmt_expr_to_sql;

use crate::window::{Slice, Window};

/// `date_column >= first AND date_column <= last`, inclusive on both ends like the slice; for a
/// one-day slice `date_column = day`, which is also what deltalake simplifies the range to and
/// records in the history.
pub fn slice_predicate(date_column: &str, slice: &Slice) -> Expr {
    // An unqualified column: a name with a dot or capitals must not be parsed as `table.column`.
    let column = Expr::Column(Column::new_unqualified(date_column));
    let day = |d| lit(ScalarValue::Date32(Some(Date32Type::from_naive_date(d))));
    if slice.first == slice.last {
        return column.eq(day(slice.first));
    }
    column.clone().gt_eq(day(slice.first)).and(column.lt_eq(day(slice.last)))
}

/// The whole window, for totals and for checking nothing outside it changed.
pub fn window_predicate(date_column: &str, window: &Window) -> Expr {
    let whole = Slice { index: 0, first: window.start, last: window.end, run_date: window.start };
    slice_predicate(date_column, &whole)
}

/// The predicate as SQL text, for people: reports, `bf slices`, commit metadata.
pub fn slice_predicate_sql(date_column: &str, slice: &Slice) -> String {
    let expr = slice_predicate(date_column, slice);
    fmt_expr_to_sql(&expr).unwrap_or_else(|_| format!("{expr}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_typed_dates_and_quotes_odd_columns() {
        let day = |t: &str| t.parse().unwrap();
        let slice = Slice {
            index: 1,
            first: day("2026-03-01"),
            last: day("2026-03-31"),
            run_date: day("2026-03-01"),
        };
        assert_eq!(
            slice_predicate_sql("order_date", &slice),
            "order_date >= '2026-03-01'::date AND order_date <= '2026-03-31'::date"
        );
        assert!(slice_predicate_sql("Order Date", &slice).starts_with("\"Order Date\" >= "));
        let day = Slice { last: slice.first, ..slice };
        assert_eq!(slice_predicate_sql("order_date", &day), "order_date = '2026-03-01'::date");
    }
}
