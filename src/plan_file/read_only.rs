//! Plan SQL is read-only.
//!
//! A plan is reviewed as a description of a backfill; a query that could also create, drop, copy or
//! change anything would make the review a lie. So every piece of SQL in a plan is parsed with
//! DataFusion's own parser before anything runs, and refused unless it is:
//! - for the source query and `sql` checks: exactly one `SELECT` (set operations, CTEs and subqueries
//!   allowed), with no data-modifying statement nested in it and no `SELECT … INTO`;
//! - for metrics: exactly one expression, without subqueries;
//! - for both: without a function that makes rows or values out of nothing (`generate_series`,
//!   `range`, any table function in `FROM`, a recursive CTE), nor one that makes a value as big as
//!   a number it is given unless that number is written in the SQL and small (`repeat`, `lpad`,
//!   `rpad`, `array_repeat`, `array_resize`; what `repeat` and `array_repeat` repeat written in the
//!   SQL too, or sizes multiply through a CTE), nor `unnest(…)` of anything but a column (or, in
//!   a SELECT list, an array written out);
//!   whatever the quoting of the name: a plan reads its inputs, and one such call can ask for
//!   billions of rows, or gigabytes in one value outside DataFusion's memory pool, before anyone
//!   reviewed it.
//!
//! Slice bounds are typed parameters (`$start`, `$end`, `$run_date`), bound as DATE values at run
//! time, so no date is ever pasted into SQL text. (Execution adds DataFusion's own `SQLOptions` guard
//! as a second layer; this one runs offline, in `bf validate`.)

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use deltalake::datafusion::sql::parser::{DFParser, Statement as DfStatement};

use crate::plan_file::Dialect;
use deltalake::datafusion::sql::resolve::resolve_table_references;
use deltalake::datafusion::sql::sqlparser::ast::{
    Expr, Query, SetExpr, Statement, TableFactor, Value, Visit, Visitor,
};

/// The parameters a query may use; each is bound to the slice's DATE.
pub const PARAMETERS: [&str; 3] = ["$start", "$end", "$run_date"];

/// What a read-only query reads: the tables it names (CTEs excluded) and the parameters it uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadOnlyQuery {
    pub tables: BTreeSet<String>,
    pub parameters: BTreeSet<String>,
}

/// Why a piece of plan SQL was refused; the text is shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SqlError(pub String);

/// Checks that `sql`, written in `dialect`, is exactly one read-only query.
pub fn check_query(sql: &str, dialect: Dialect) -> Result<ReadOnlyQuery, SqlError> {
    let mut statements = DFParser::parse_sql_with_dialect(sql, grammar(dialect))
        .map_err(|e| SqlError(format!("SQL does not parse: {e}")))?;
    let statement = match statements.len() {
        0 => return Err(SqlError("the query is empty".into())),
        1 => statements.pop_front().expect("one statement"),
        n => {
            return Err(SqlError(format!(
                "found {n} statements; plan SQL is exactly one SELECT (a `;` ends a statement, also after a comment)"
            )));
        }
    };
    let sql_statement = match &statement {
        DfStatement::Statement(inner) => inner.as_ref(),
        DfStatement::CreateExternalTable(_) => return Err(refused("CREATE EXTERNAL TABLE", "DDL")),
        DfStatement::CopyTo(_) => return Err(refused("COPY", "it writes files")),
        DfStatement::Explain(_) => return Err(refused("EXPLAIN", "it returns a plan, not rows")),
        DfStatement::Reset(_) => return Err(refused("RESET", "it changes session settings")),
    };
    let mut guard = Guard { dialect, ..Guard::default() };
    if let ControlFlow::Break(error) = sql_statement.visit(&mut guard) {
        return Err(error);
    }
    let (tables, _ctes) = resolve_table_references(&statement, true)
        .map_err(|e| SqlError(format!("cannot resolve the tables the query reads: {e}")))?;
    Ok(ReadOnlyQuery { tables: tables.iter().map(|t| t.to_string()).collect(), parameters: guard.parameters })
}

/// Checks that `sql`, written in `dialect`, is one expression without subqueries, as a metric is.
pub fn check_expression(sql: &str, dialect: Dialect) -> Result<(), SqlError> {
    let parsed = DFParser::parse_sql_into_expr_with_dialect(sql, grammar(dialect))
        .map_err(|e| SqlError(format!("SQL does not parse: {e}")))?;
    let mut guard = Guard { forbid_queries: true, dialect, ..Guard::default() };
    match parsed.expr.visit(&mut guard) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) if !guard.parameters.is_empty() => {
            Err(SqlError("a metric is computed over the table's rows and takes no parameters".into()))
        }
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// A metric that is one SUM or AVG of an expression, with that expression's SQL: the metrics whose
/// floating-point rounding bf can bound (see [`crate::rehearse::diff::Measures::same_as`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Summed {
    Sum(String),
    Avg(String),
}

/// What `sql` (a metric) sums, when it is exactly `SUM(e)` or `AVG(e)` over all rows.
pub fn summed(sql: &str) -> Option<Summed> {
    use deltalake::datafusion::sql::sqlparser::ast::{
        DuplicateTreatment, FunctionArg, FunctionArgExpr, FunctionArguments,
    };
    let parsed = DFParser::parse_sql_into_expr(sql).ok()?;
    let Expr::Function(function) = parsed.expr else { return None };
    if function.filter.is_some() || function.over.is_some() || !function.within_group.is_empty() {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else { return None };
    if list.duplicate_treatment.is_some_and(|d| d != DuplicateTreatment::All) || !list.clauses.is_empty() {
        return None;
    }
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(argument))] = list.args.as_slice() else { return None };
    match function.name.to_string().to_ascii_lowercase().as_str() {
        "sum" => Some(Summed::Sum(argument.to_string())),
        "avg" | "mean" => Some(Summed::Avg(argument.to_string())),
        _ => None,
    }
}

/// The grammar a dialect's SQL is parsed with: DataFusion's own, or Spark's (backticks, `DIV`).
fn grammar(dialect: Dialect) -> &'static dyn deltalake::datafusion::sql::sqlparser::dialect::Dialect {
    use deltalake::datafusion::sql::sqlparser::dialect::{GenericDialect, SparkSqlDialect};
    match dialect {
        Dialect::Datafusion => &GenericDialect {},
        Dialect::Spark => &SparkSqlDialect {},
    }
}

fn refused(what: &str, why: &str) -> SqlError {
    SqlError(format!("{what} is not allowed in a plan ({why}); plan SQL is exactly one read-only SELECT"))
}

/// The functions that make values out of nothing, as many as their arguments ask for.
const GENERATORS: [&str; 2] = ["generate_series", "range"];

/// The functions that make a value as big as one of their arguments (its position) asks: `repeat('x',
/// 1500000000)` is 1.5 GB in one call, which no memory pool sees. Padding an id to eight digits is
/// not generating: each is allowed with that argument a number written in the SQL, up to
/// [`MAX_SIZE_ARGUMENT`].
/// (`space` is the Spark dialect's: `space(1500000000)` is 1.5 GB of spaces.)
const SIZED: [(&str, usize); 6] =
    [("repeat", 1), ("lpad", 1), ("rpad", 1), ("array_repeat", 1), ("array_resize", 1), ("space", 0)];

/// The Spark dialect's functions that format a value by a pattern (`format_string('%0999999999d',
/// 1)`): the widths and precisions in it are sizes, so the pattern is written in the SQL and each
/// of them at most [`MAX_SIZE_ARGUMENT`].
const FORMATTING: [&str; 2] = ["format_string", "printf"];

/// Of the [`SIZED`] functions, those that repeat a value (the others pad or cut one to a length):
/// repeating a repeated value multiplies the sizes.
const MULTIPLYING: [&str; 2] = ["repeat", "array_repeat"];

/// The largest size a plan's SQL may give one of the [`SIZED`] functions.
const MAX_SIZE_ARGUMENT: u64 = 10_000;

fn generates(name: &str) -> SqlError {
    SqlError(format!(
        "`{name}(…)` is not allowed in a plan: it makes rows out of nothing, as many as it is asked for; plan SQL \
         reads the plan's inputs (a table of days or numbers can be an input file)"
    ))
}

/// Walks a parsed statement and stops at the first thing a read-only query must not hold.
#[derive(Default)]
struct Guard {
    parameters: BTreeSet<String>,
    forbid_queries: bool,
    dialect: Dialect,
}

impl Visitor for Guard {
    type Break = SqlError;

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<SqlError> {
        if matches!(statement, Statement::Query(_)) {
            return ControlFlow::Continue(());
        }
        let text = statement.to_string();
        let keyword = text.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
        let why = match keyword.as_str() {
            "INSERT" | "UPDATE" | "DELETE" | "MERGE" | "REPLACE" | "UPSERT" => "DML changes data",
            "CREATE" | "DROP" | "ALTER" | "TRUNCATE" | "RENAME" | "COMMENT" | "GRANT" | "REVOKE" => "DDL",
            "COPY" | "UNLOAD" | "EXPORT" => "it writes files",
            "SET" | "RESET" | "USE" => "it changes session settings",
            _ => "only SELECT is",
        };
        ControlFlow::Break(refused(&keyword, why))
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<SqlError> {
        if self.forbid_queries {
            return ControlFlow::Break(SqlError(
                "a metric is one expression over the table's columns, without subqueries".into(),
            ));
        }
        if let SetExpr::Select(select) = query.body.as_ref()
            && select.into.is_some()
        {
            return ControlFlow::Break(refused("SELECT … INTO", "it creates a table"));
        }
        if query.with.as_ref().is_some_and(|with| with.recursive) {
            return ControlFlow::Break(SqlError(
                "`WITH RECURSIVE` is not allowed in a plan: it makes rows out of nothing, as many as its recursion \
                 goes on; plan SQL reads the plan's inputs (a table of days or numbers can be an input file)"
                    .into(),
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<SqlError> {
        // `FROM unnest(…)` makes rows of an array: of an input's column, rows the input holds; of
        // anything else (`array_repeat(1, 10000)`, joined to itself), rows out of nothing.
        if let TableFactor::UNNEST { array_exprs, .. } = factor
            && !array_exprs.iter().all(|e| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)))
        {
            return ControlFlow::Break(SqlError(
                "`FROM unnest(…)` of anything but a column is not allowed in a plan: it makes rows out of nothing; \
                 unnest an input's column"
                    .into(),
            ));
        }
        let called = match factor {
            TableFactor::Table { name, args: Some(_), .. } => Some(name.to_string()),
            TableFactor::TableFunction { expr, .. } => Some(expr.to_string()),
            TableFactor::Function { name, .. } => Some(name.to_string()),
            _ => None,
        };
        match called {
            Some(name) => ControlFlow::Break(generates(&name)),
            None => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<SqlError> {
        if self.dialect == Dialect::Spark
            && let Some(error) = crate::plan_file::spark::expression_refusal(expr)
        {
            return ControlFlow::Break(error);
        }
        if let Expr::Function(function) = expr {
            let name = function.name.to_string().to_ascii_lowercase();
            let bare = called(function);
            if GENERATORS.contains(&bare.as_str()) {
                return ControlFlow::Break(generates(&name));
            }
            let differs = match self.dialect {
                Dialect::Datafusion => java_pattern(function, &bare),
                Dialect::Spark => crate::plan_file::spark::refusal(function, &bare),
            };
            if let Some(error) = differs {
                return ControlFlow::Break(error);
            }
            // `unnest(…)` in a SELECT list makes a row of each element: of an input's column, rows
            // the input holds; of an array written out, as many as it lists; of anything else
            // (`array_repeat(1, 10000)` through a chain of CTEs), rows out of nothing.
            if bare == "unnest" && !unnests_what_is_written(function) {
                return ControlFlow::Break(SqlError(
                    "`unnest(…)` of anything but a column or an array written out (`make_array(a, b)`, `[a, b]`) is \
                     not allowed in a plan: it makes rows out of nothing; unnest an input's column"
                        .into(),
                ));
            }
            if FORMATTING.contains(&bare.as_str()) && !small_widths(function) {
                return ControlFlow::Break(SqlError(format!(
                    "`{name}(…)` pads a value to the widths its pattern asks for: in a plan the pattern is written \
                     in the SQL, each width and precision at most {MAX_SIZE_ARGUMENT}"
                )));
            }
            if let Some(&(_, at)) = SIZED.iter().find(|(sized, _)| *sized == bare) {
                if !small_number(function, at) {
                    return ControlFlow::Break(SqlError(format!(
                        "`{name}(…)` makes a value as big as its size argument asks: in a plan that size is a \
                         number written in the SQL, at most {MAX_SIZE_ARGUMENT}"
                    )));
                }
                // A copy of a value made by copies (through a subquery, a CTE) multiplies the sizes.
                if MULTIPLYING.contains(&bare.as_str()) && !literal(function, 0) {
                    return ControlFlow::Break(SqlError(format!(
                        "`{name}(…)` repeats a value: in a plan the value repeated is one written in the SQL (a \
                         value that is itself made by repeating multiplies the sizes)"
                    )));
                }
            }
        }
        let Expr::Value(value) = expr else { return ControlFlow::Continue(()) };
        let Value::Placeholder(name) = &value.value else { return ControlFlow::Continue(()) };
        if !PARAMETERS.contains(&name.as_str()) {
            return ControlFlow::Break(SqlError(format!(
                "unknown parameter `{name}`: a query can use {}",
                PARAMETERS.join(", ")
            )));
        }
        self.parameters.insert(name.clone());
        ControlFlow::Continue(())
    }
}

/// The function a call names, as DataFusion finds it: the last part of its name, unquoted, in
/// lower case (`"repeat"` and `REPEAT` are `repeat`; `to_string` would keep the quotes).
fn called(function: &deltalake::datafusion::sql::sqlparser::ast::Function) -> String {
    function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .map(|i| i.value.to_ascii_lowercase())
        .unwrap_or_default()
}

/// A Java date pattern (`'yyyy-MM'`) handed to a function that reads chrono's (`'%Y-%m'`): it would
/// print its letters on every row, so it is refused with the pattern to write instead.
fn java_pattern(
    function: &deltalake::datafusion::sql::sqlparser::ast::Function,
    bare: &str,
) -> Option<SqlError> {
    use crate::dialect::patterns::{java_to_chrono, looks_java, takes_patterns};
    use deltalake::datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    if !takes_patterns(bare) {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else { return None };
    list.args.iter().skip(1).find_map(|arg| {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value))) = arg else { return None };
        let Value::SingleQuotedString(pattern) = &value.value else { return None };
        if !looks_java(pattern) {
            return None;
        }
        let instead = match java_to_chrono(pattern) {
            Ok(chrono) => format!("write '{chrono}'"),
            Err(letters) => format!("{letters} has no chrono spelling: compute that part another way"),
        };
        Some(SqlError(format!(
            "`{bare}(…, '{pattern}')`: '{pattern}' is a Java date pattern, as Spark writes them, and DataFusion reads \
             chrono's (a field is `%` and a letter; other letters are printed as they are, on every row): {instead}"
        )))
    })
}

/// Whether every argument of an `unnest` is a column, or an array whose elements are written out.
fn unnests_what_is_written(function: &deltalake::datafusion::sql::sqlparser::ast::Function) -> bool {
    use deltalake::datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return false };
    list.args.iter().all(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => match expr {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Array(_) => true,
            // `array(a, b)` is the Spark dialect's spelling.
            Expr::Function(inner) => matches!(called(inner).as_str(), "make_array" | "array"),
            _ => false,
        },
        _ => false,
    })
}

/// Whether `function`'s first argument is a pattern written in the SQL whose widths and
/// precisions (`%-10s`, `%08.2f`, `%1$5d`) are all at most [`MAX_SIZE_ARGUMENT`].
fn small_widths(function: &deltalake::datafusion::sql::sqlparser::ast::Function) -> bool {
    use deltalake::datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return false };
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value)))) = list.args.first() else {
        return false;
    };
    let Value::SingleQuotedString(pattern) = &value.value else { return false };
    // Every run of digits in a pattern is an argument's index, a width or a precision: none may be
    // a size above the bound (a literal `12345` in the text is refused too; write it as an argument).
    pattern
        .split(|c: char| !c.is_ascii_digit())
        .filter(|digits| !digits.is_empty())
        .all(|digits| digits.parse::<u64>().is_ok_and(|n| n <= MAX_SIZE_ARGUMENT))
}

/// Whether argument `at` of `function` is a value written in the SQL.
fn literal(function: &deltalake::datafusion::sql::sqlparser::ast::Function, at: usize) -> bool {
    use deltalake::datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return false };
    matches!(list.args.get(at), Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(_)))))
}

/// Whether argument `at` of `function` is a number written in the SQL, at most [`MAX_SIZE_ARGUMENT`].
fn small_number(function: &deltalake::datafusion::sql::sqlparser::ast::Function, at: usize) -> bool {
    use deltalake::datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return false };
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value)))) = list.args.get(at) else {
        return false;
    };
    matches!(&value.value, Value::Number(n, _) if n.parse::<u64>().is_ok_and(|n| n <= MAX_SIZE_ARGUMENT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_query_df(sql: &str) -> Result<ReadOnlyQuery, SqlError> {
        check_query(sql, Dialect::Datafusion)
    }

    fn check_expression_df(sql: &str) -> Result<(), SqlError> {
        check_expression(sql, Dialect::Datafusion)
    }

    fn refused_with(sql: &str, fragment: &str) {
        match check_query_df(sql) {
            Err(SqlError(message)) => assert!(message.contains(fragment), "{sql:?}: {message}"),
            Ok(query) => panic!("{sql:?} was accepted: {query:?}"),
        }
    }

    #[test]
    fn accepts_one_select_and_names_its_tables() {
        let query = check_query_df(
            "WITH fx AS (SELECT * FROM rates) SELECT o.*, fx.rate FROM orders o JOIN fx USING (currency) \
             WHERE o.day BETWEEN $start AND $end",
        )
        .unwrap();
        assert_eq!(query.tables, BTreeSet::from(["orders".to_owned(), "rates".to_owned()]));
        assert_eq!(query.parameters, BTreeSet::from(["$end".to_owned(), "$start".to_owned()]));
    }

    #[test]
    fn refuses_everything_that_writes_or_hides_a_second_statement() {
        refused_with("DROP TABLE orders", "DDL");
        refused_with("CREATE TABLE t AS SELECT 1", "DDL");
        refused_with("CREATE EXTERNAL TABLE t STORED AS CSV LOCATION 'x.csv'", "DDL");
        refused_with("INSERT INTO orders VALUES (1)", "DML");
        refused_with("DELETE FROM orders", "DML");
        refused_with("UPDATE orders SET amount = 0", "DML");
        refused_with("COPY orders TO 'out.csv'", "writes files");
        refused_with("SET datafusion.execution.batch_size = 1", "session settings");
        refused_with("SELECT 1; SELECT 2", "2 statements");
        refused_with("SELECT 1 /* harmless */; DROP TABLE orders", "2 statements");
        refused_with("SELECT 1 -- done\n; DELETE FROM orders", "2 statements");
        refused_with("SELECT * INTO copy FROM orders", "INTO");
        refused_with("SELECT $1", "unknown parameter");
        refused_with("", "empty");
        refused_with("SELEC 1", "does not parse");
        refused_with("SELECT * FROM generate_series(1, 3000000000)", "makes rows out of nothing");
        refused_with("SELECT * FROM orders JOIN range(1, 10) r ON true", "makes rows out of nothing");
        refused_with("SELECT unnest(range(1, 3000000000)) FROM orders", "makes rows out of nothing");
        refused_with("SELECT GENERATE_SERIES(1, 5)", "makes rows out of nothing");
        refused_with("SELECT date_format(started_at, 'yyyy-MM') FROM s", "write '%Y-%m'");
        refused_with("SELECT to_date(d, 'dd/MM/yyyy') FROM s", "write '%d/%m/%Y'");
        refused_with("SELECT to_char(d, 'yyyy QQQ') FROM s", "`QQQ` has no chrono spelling");
        assert!(
            check_query_df("SELECT date_format(started_at, '%Y-%m'), to_date(d, '%d/%m/%Y') FROM s").is_ok()
        );
        refused_with(
            "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT n FROM t",
            "`WITH RECURSIVE` is not allowed",
        );
        refused_with(
            "SELECT o.* FROM orders o WHERE o.id IN (WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) \
             SELECT n FROM t)",
            "`WITH RECURSIVE` is not allowed",
        );
        refused_with("SELECT unnest(array_repeat(1, 200000000)) FROM orders", "makes rows out of nothing");
        refused_with(
            "SELECT unnest(array_repeat(1, 10000)) AS u FROM orders",
            "`unnest(…)` of anything but a column",
        );
        refused_with(
            "WITH a AS (SELECT unnest(array_repeat(1, 10000)) AS u FROM orders) SELECT u FROM a",
            "`unnest(…)` of anything but a column",
        );
        refused_with("SELECT * FROM unnest(array_repeat(1, 200000000))", "`FROM unnest(…)` of anything");
        refused_with(
            "SELECT * FROM unnest(array_repeat(1, 10000))",
            "`FROM unnest(…)` of anything but a column",
        );
        refused_with(
            "SELECT repeat(repeat(repeat('x', 10000), 10000), 10000) AS c FROM orders",
            "the value repeated is one written in the SQL",
        );
        refused_with(
            "WITH a AS (SELECT repeat('x', 10000) AS s FROM orders), b AS (SELECT repeat(s, 10000) AS s FROM a) \
             SELECT s FROM b",
            "the value repeated is one written in the SQL",
        );
        refused_with("SELECT \"repeat\"('-', 1500000000) AS c FROM orders", "at most 10000");
        refused_with("SELECT unnest(\"range\"(1, 1000000000)) FROM orders", "makes rows out of nothing");
        refused_with("SELECT \"GENERATE_SERIES\"(1, 5)", "makes rows out of nothing");
        refused_with("SELECT repeat('x', 1500000000) AS customer FROM orders", "at most 10000");
        refused_with("SELECT repeat('x', amount) FROM orders", "a number written in the SQL");
        refused_with("SELECT lpad(customer, 10001, '0') FROM orders", "at most 10000");
        refused_with("SELECT array_resize(tags, 99999999) FROM orders", "at most 10000");
    }

    #[test]
    fn the_spark_dialects_own_sized_functions_are_bounded_too() {
        let spark = |sql: &str| check_query(sql, Dialect::Spark);
        let refused = |sql: &str, fragment: &str| {
            let error = spark(sql).expect_err(sql).0;
            assert!(error.contains(fragment), "{sql}: {error}");
        };
        refused("SELECT space(1500000000) AS s FROM orders", "at most 10000");
        refused("SELECT space(amount) AS s FROM orders", "a number written in the SQL");
        refused(
            "SELECT format_string('%01500000000d', 1) AS s FROM orders",
            "each width and precision at most",
        );
        refused(
            "SELECT printf('%1$.999999999f', amount) AS s FROM orders",
            "each width and precision at most",
        );
        refused("SELECT format_string(customer, 1) AS s FROM orders", "the pattern is written in the SQL");
        for allowed in [
            "SELECT space(2) AS s, format_string('%08.2f %-10s', amount, customer) AS f FROM orders",
            "SELECT printf('%1$s-%2$05d', customer, order_id) AS f FROM orders",
        ] {
            spark(allowed).unwrap_or_else(|e| panic!("{allowed}: {}", e.0));
        }
    }

    #[test]
    fn sized_functions_with_a_small_written_size_are_allowed() {
        for sql in [
            "SELECT lpad(CAST(order_id AS VARCHAR), 8, '0') AS id FROM orders",
            "SELECT rpad(customer, 12) AS c, repeat('-', 3) AS rule FROM orders",
            "SELECT array_repeat(0, 2) AS twice FROM orders",
            "SELECT rpad(lpad(customer, 8, '0'), 10, '-') AS padded FROM orders",
            "WITH t AS (SELECT * FROM orders) SELECT * FROM t",
            "SELECT lpad(customer, 8) AS a, rpad(customer, 8) AS b, repeat('-', 3) AS c FROM orders",
            "SELECT o.id, t.tag FROM orders o CROSS JOIN unnest(o.tags) AS t(tag)",
            "SELECT unnest(tags) AS tag, unnest(make_array(amount, fee)) AS part, unnest([1, 2]) AS n FROM orders",
        ] {
            assert!(check_query_df(sql).is_ok(), "{sql}: {:?}", check_query_df(sql));
        }
    }

    #[test]
    fn metrics_are_single_expressions() {
        assert!(check_expression_df("SUM(amount)").is_ok());
        assert!(check_expression_df("SUM(amount) FILTER (WHERE currency = 'EUR')").is_ok());
        assert!(check_expression_df("SUM(amount); DROP TABLE orders").is_err());
        assert!(check_expression_df("(SELECT SUM(amount) FROM other)").is_err());
        assert!(check_expression_df("SUM(amount) WHERE").is_err());
    }
}
