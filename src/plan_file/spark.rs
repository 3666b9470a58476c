//! What a plan written in Spark SQL (`[source] dialect = "spark"`) may not say: the functions bf's
//! Spark dialect would run with another meaning than Spark's. Each is refused at validation,
//! naming the function and why — never run. The list is what the Spark corpus found
//! (tests/spark/, docs/SPARK.md): each entry is a query Spark answered otherwise.

use deltalake::datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
};

use crate::dialect::patterns::java_to_chrono;
use crate::plan_file::read_only::SqlError;

/// The functions whose arguments after the first are Java date patterns, in Spark.
const PATTERNED: [&str; 5] = ["date_format", "to_date", "to_timestamp", "unix_timestamp", "from_unixtime"];

/// Spark functions that bf's Spark dialect would run with another meaning, and why.
const DIFFERS: &[(&str, &str)] = &[
    ("to_char", "Spark's `to_char` formats numbers and dates by Oracle-style patterns bf does not implement"),
    ("to_varchar", "Spark's `to_varchar` formats by Oracle-style patterns bf does not implement"),
    (
        "format_number",
        "Spark's `format_number` rounds half-even and groups digits in ways bf does not implement",
    ),
    ("sort_array", "bf's Spark dialect has no `sort_array`"),
];

/// Why `function` (its bare name, lower case) is refused in Spark SQL, if it is.
pub fn refusal(function: &Function, bare: &str) -> Option<SqlError> {
    if let Some((_, why)) = DIFFERS.iter().find(|(name, _)| *name == bare) {
        return Some(SqlError(format!(
            "`{bare}(…)`: {why}; bf refuses it rather than run it with another meaning"
        )));
    }
    if !PATTERNED.contains(&bare) {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else { return None };
    list.args.iter().skip(1).find_map(|arg| {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value))) = arg else { return None };
        let Value::SingleQuotedString(pattern) = &value.value else { return None };
        java_to_chrono(pattern).err().map(|letters| {
            SqlError(format!(
                "`{bare}(…, '{pattern}')`: bf's Spark dialect reads Java patterns made of years, months, days, \
                 hours, minutes, seconds, fractions, AM/PM, weekdays and offsets; {letters} is not one of them"
            ))
        })
    })
}

/// Why an expression is refused in Spark SQL, if it is: `a DIV b + 1`, which Spark reads as
/// `(a DIV b) + 1` and the parser bf uses as `a DIV (b + 1)` (it reads everything after `DIV` as
/// one expression). Written with parentheses, either way, it is read as written.
pub fn expression_refusal(expr: &Expr) -> Option<SqlError> {
    use deltalake::datafusion::sql::sqlparser::ast::BinaryOperator;
    let Expr::BinaryOp { op: BinaryOperator::MyIntegerDivide, right, .. } = expr else { return None };
    matches!(
        right.as_ref(),
        Expr::BinaryOp { .. } | Expr::IsNull(_) | Expr::IsNotNull(_) | Expr::Between { .. }
    )
    .then(|| {
        SqlError(format!(
            "`{expr}`: Spark reads `DIV` before the operator after it, the parser bf uses after it; write \
                 parentheses to say which: `(a DIV b) + c` or `a DIV (b + c)`"
        ))
    })
}
