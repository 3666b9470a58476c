//! The query's columns against the table's: which it may write, cast how, and which it must cast
//! itself. A rule of the source, apart from running it (`run.rs`).

use deltalake::arrow::compute::can_cast_types;
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use deltalake::datafusion::common::{Column, DFSchema};
use deltalake::datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, cast};
use deltalake::datafusion::prelude::DataFrame;

use crate::delta::table::sql_type;
use crate::source::run::SourceError;

/// Selects the target's columns from the query, in the target's order and types. A `computed`
/// column the query leaves out is left to the table to compute; a column `made_by_writers` must be
/// left out (its values are made as the slice is written).
pub(crate) fn align(
    query: DataFrame,
    target: &SchemaRef,
    computed: &[String],
    made_by_writers: &[String],
) -> Result<DataFrame, SourceError> {
    let produced = query.schema().clone();
    let mut problems = Vec::new();
    let mut columns = Vec::new();
    for field in target.fields() {
        let found = produced.qualified_field_with_unqualified_name(field.name());
        if made_by_writers.contains(field.name()) {
            if found.is_ok() {
                problems.push(format!(
                    "  - `{}` is an identity column GENERATED ALWAYS: only the table's writers make its values \
                     (bf, for the rows a slice writes), so leave it out of the query",
                    field.name()
                ));
            }
            continue;
        }
        match found {
            Err(_) if computed.contains(field.name()) => {}
            Err(_) => problems.push(format!(
                "  - `{}` ({}) is in the table but not in the query",
                field.name(),
                sql_type(field.data_type())
            )),
            Ok((qualifier, found)) => {
                if !can_cast_types(found.data_type(), field.data_type()) {
                    problems.push(format!(
                        "  - `{}` is {} in the query but {} in the table, and cannot be cast",
                        field.name(),
                        sql_type(found.data_type()),
                        sql_type(field.data_type())
                    ));
                } else if let TypeChange::Lossy(why) = type_change(found.data_type(), field.data_type()) {
                    problems.push(format!(
                        "  - `{name}` is {} in the query but {} in the table: {why}; bf does not convert it \
                         silently. Cast it in the query if that is meant: CAST(… AS {}) AS {name}",
                        sql_type(found.data_type()),
                        sql_type(field.data_type()),
                        sql_type(field.data_type()),
                        name = field.name(),
                    ));
                }
                let column = Expr::Column(Column::new(qualifier.cloned(), found.name()));
                let value = match column.get_type(&produced) {
                    Ok(t) if &t == field.data_type() => column,
                    _ => cast(column, field.data_type().clone()),
                };
                columns.push(value.alias(field.name()));
            }
        }
    }
    for field in produced.fields() {
        if target.field_with_name(field.name()).is_err() {
            problems.push(format!(
                "  - `{}` ({}) is in the query but not in the table",
                field.name(),
                sql_type(field.data_type())
            ));
        }
    }
    if !problems.is_empty() {
        return Err(SourceError::Schema(problems.join("\n")));
    }
    query.select(columns).map_err(|e| SourceError::Schema(e.to_string()))
}

/// What writing a query's column into a table column of another type does to its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeChange {
    Same,
    /// Converted without loss, but worth a look (the reason).
    Converted(String),
    /// Values change or fail on the way (the reason): refused unless the query casts itself.
    Lossy(&'static str),
}

/// How a `from` value lands in a `to` column.
pub fn type_change(from: &DataType, to: &DataType) -> TypeChange {
    use DataType::*;
    let integer = |t: &DataType| t.is_integer();
    let fractional =
        |t: &DataType| matches!(t, Float16 | Float32 | Float64 | Decimal128(..) | Decimal256(..));
    let text = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    match (from, to) {
        (a, b) if a == b => TypeChange::Same,
        // Two layouts of one SQL type (Utf8 and Utf8View, Binary and BinaryView): nothing changes.
        (a, b) if sql_type(a) == sql_type(b) => TypeChange::Same,
        (a, b) if text(a) && (b.is_numeric()) => {
            TypeChange::Lossy("text becomes a number, or NULL where it is not one")
        }
        (a, b) if fractional(a) && integer(b) => TypeChange::Lossy("the fraction is cut off"),
        (Timestamp(..), Date32 | Date64) => TypeChange::Lossy("the time of day is dropped"),
        (Null, _) => TypeChange::Converted(
            "the input holds no value of it (an empty column reads as NULL): every row gets NULL".to_owned(),
        ),
        (a, b) if integer(a) && fractional(b) => TypeChange::Converted(
            "computed as an integer — integer division? (`amount_cents / 100` is whole cents dropped)"
                .to_owned(),
        ),
        _ => TypeChange::Converted("converted on write".to_owned()),
    }
}

/// The query's columns whose type differs from the table's, each as a warning naming both types:
/// what `bf plan` shows in every output. Lossy ones are errors of [`align`] instead.
pub fn type_warnings(query: &DFSchema, target: &SchemaRef) -> Vec<String> {
    target
        .fields()
        .iter()
        .filter_map(|field| {
            let (_, found) = query.qualified_field_with_unqualified_name(field.name()).ok()?;
            match type_change(found.data_type(), field.data_type()) {
                TypeChange::Converted(why) => Some(format!(
                    "`{}` is {} in the query but {} in the table: {why}",
                    field.name(),
                    sql_type(found.data_type()),
                    sql_type(field.data_type())
                )),
                _ => None,
            }
        })
        .collect()
}

/// The type warnings of the slices planned so far: each once, and, when not every slice's query
/// gave it, the slices that did — a warning about their input, which names them and their files.
#[derive(Debug, Default)]
pub struct TypeWarnings {
    /// Each warning, and the slices (by number) whose query gave it, each as where it was found.
    found: std::collections::BTreeMap<String, std::collections::BTreeMap<usize, String>>,
    /// Every slice whose query was planned.
    planned: std::collections::BTreeSet<usize>,
}

impl TypeWarnings {
    /// The `warnings` of slice `slice`, found at `place` (its first day and the files it read).
    pub fn note(&mut self, slice: usize, place: &str, warnings: Vec<String>) {
        self.planned.insert(slice);
        for warning in warnings {
            self.found.entry(warning).or_default().entry(slice).or_insert_with(|| place.to_owned());
        }
    }

    /// Every warning, those of some slices only naming where (the first three).
    pub fn warnings(&self) -> Vec<String> {
        const SHOWN: usize = 3;
        self.found
            .iter()
            .map(|(warning, slices)| {
                if slices.len() == self.planned.len() {
                    return warning.clone();
                }
                let mut places: Vec<String> = slices.values().take(SHOWN).cloned().collect();
                if slices.len() > SHOWN {
                    places.push(format!("and {} more", slices.len() - SHOWN));
                }
                format!(
                    "{warning} — in {} of {} slices, from their input: {}",
                    slices.len(),
                    self.planned.len(),
                    places.join("; ")
                )
            })
            .collect()
    }
}

/// Divisions of an integer by an integer that the query then makes fractional (a CAST to DECIMAL,
/// DOUBLE or FLOAT): DataFusion keeps the whole part (`7 / 2` is 3) before the cast, so
/// `CAST(revenue_cents / 100 AS DECIMAL(18,2))` turns 1999 into 19.00, where Spark's `/` would give
/// 19.99. Each is a warning naming the division, for every output of `bf plan`, with the line of
/// the query it is on where its columns' places are known (`sql_parser.collect_spans`).
pub fn integer_divisions(plan: &LogicalPlan) -> Vec<(String, Option<usize>)> {
    let mut found = std::collections::BTreeSet::new();
    let _ = plan.apply(|node| {
        let schemas: Vec<&DFSchema> = node.inputs().iter().map(|input| input.schema().as_ref()).collect();
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Some(division) = integer_division_cast(e, &schemas) {
                    found.insert(division);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    found.into_iter().collect()
}

/// The warning for `e` when it casts an integer division to a fractional type, and the line of the
/// query its first column is on.
fn integer_division_cast(e: &Expr, schemas: &[&DFSchema]) -> Option<(String, Option<usize>)> {
    use deltalake::datafusion::logical_expr::{BinaryExpr, Cast, Operator, TryCast};
    let (inner, to) = match e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            (expr, field.data_type())
        }
        _ => return None,
    };
    let fractional = matches!(
        to,
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Decimal256(..)
    );
    let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Divide, right }) = inner.as_ref() else {
        return None;
    };
    let empty = DFSchema::empty();
    let integer = |side: &Expr| {
        schemas
            .iter()
            .copied()
            .chain([&empty])
            .any(|schema| side.get_type(schema).is_ok_and(|t| t.is_integer()))
    };
    (fractional && integer(left.as_ref()) && integer(right.as_ref())).then(|| {
        let warning = format!(
            "`{}` divides an integer by an integer: the fraction is cut off (7 / 2 is 3) before it becomes {}; \
             divide by a decimal (`/ 100.0`) or cast a side first if the fraction is meant",
            inner.human_display(),
            sql_type(to)
        );
        (warning, first_line(inner))
    })
}

/// The line of the query the first column `e` reads is written on, where the parser kept it.
fn first_line(e: &Expr) -> Option<usize> {
    let mut line = None;
    let _ = e.apply(|e| {
        if let Expr::Column(column) = e
            && let Some(span) = column.spans().first()
        {
            line = Some(span.start.line as usize);
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_of_one_sql_type_are_no_change_and_other_types_are() {
        assert_eq!(type_change(&DataType::Utf8View, &DataType::Utf8), TypeChange::Same);
        assert_eq!(type_change(&DataType::LargeUtf8, &DataType::Utf8View), TypeChange::Same);
        assert_eq!(type_change(&DataType::BinaryView, &DataType::Binary), TypeChange::Same);
        assert!(matches!(type_change(&DataType::Int64, &DataType::Float64), TypeChange::Converted(_)));
        assert!(matches!(type_change(&DataType::Utf8View, &DataType::Float64), TypeChange::Lossy(_)));
    }
}
