//! Spark's operators where DataFusion's mean otherwise, planned as the SQL is: `/` of two integers
//! is a DOUBLE (DataFusion keeps the whole part: `7 / 2` is 3), `+`, `-` and `*` of integers fail
//! on overflow (ANSI mode; DataFusion wraps around), and `arr[i]` counts from 0 (DataFusion's from
//! 1) and fails past the array's end (ANSI mode).

use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array};
use deltalake::arrow::compute::kernels::numeric;
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue, exec_err};
use deltalake::datafusion::logical_expr::expr::ScalarFunction;
use deltalake::datafusion::logical_expr::planner::{
    ExprPlanner, PlannerResult, RawBinaryExpr, RawFieldAccessExpr,
};
use deltalake::datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, GetFieldAccess, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, cast,
};
use deltalake::datafusion::sql::sqlparser::ast::BinaryOperator;

/// The planner of Spark's operators, consulted before DataFusion's.
#[derive(Debug, Default)]
pub struct SparkOperators;

impl ExprPlanner for SparkOperators {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> Result<PlannerResult<RawBinaryExpr>> {
        let types = (spark_type(&expr.left, schema), spark_type(&expr.right, schema));
        let (Ok(left), Ok(right)) = types else { return Ok(PlannerResult::Original(expr)) };
        let integers = left.is_integer() && right.is_integer();
        let planned = match (&expr.op, integers) {
            (BinaryOperator::Divide, true) => Expr::BinaryExpr(BinaryExpr::new(
                Box::new(cast(expr.left, DataType::Float64)),
                Operator::Divide,
                Box::new(cast(expr.right, DataType::Float64)),
            )),
            (BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply, true) => {
                let op = match expr.op {
                    BinaryOperator::Plus => Checked::Add,
                    BinaryOperator::Minus => Checked::Subtract,
                    _ => Checked::Multiply,
                };
                // In the wider of the two types, as Spark computes: INT * INT overflows past INT.
                let wider = wider(&left, &right);
                call(checked(op), vec![cast(expr.left, wider.clone()), cast(expr.right, wider)])
            }
            // `a DIV b`: the integral part of the quotient, as a BIGINT.
            (BinaryOperator::MyIntegerDivide, true) => Expr::BinaryExpr(BinaryExpr::new(
                Box::new(cast(expr.left, DataType::Int64)),
                Operator::Divide,
                Box::new(cast(expr.right, DataType::Int64)),
            )),
            (BinaryOperator::MyIntegerDivide, false) => {
                return exec_err!("`DIV` of values that are not integers is not in bf's Spark dialect");
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        Ok(PlannerResult::Planned(planned))
    }

    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawFieldAccessExpr>> {
        let list =
            expr.expr.get_type(schema).is_ok_and(|t| matches!(t, DataType::List(_) | DataType::LargeList(_)));
        match expr.field_access {
            GetFieldAccess::ListIndex { key } if list => {
                Ok(PlannerResult::Planned(call(element_at(), vec![expr.expr, cast(*key, DataType::Int64)])))
            }
            field_access => Ok(PlannerResult::Original(RawFieldAccessExpr { field_access, expr: expr.expr })),
        }
    }
}

/// An operand's type as Spark types it: an integer literal that fits an INT is an INT (DataFusion
/// reads every integer literal as a BIGINT, so `user_id * 2147483647` did not overflow as an INT).
fn spark_type(expr: &Expr, schema: &DFSchema) -> Result<DataType> {
    match expr {
        Expr::Literal(ScalarValue::Int64(Some(n)), _) if i32::try_from(*n).is_ok() => Ok(DataType::Int32),
        _ => expr.get_type(schema),
    }
}

/// The wider of two integer types, as Spark widens them (an unsigned one, which Spark has not,
/// as a BIGINT).
fn wider(left: &DataType, right: &DataType) -> DataType {
    let width = |t: &DataType| match t {
        DataType::Int8 => 1,
        DataType::Int16 => 2,
        DataType::Int32 => 4,
        _ => 8,
    };
    match width(left).max(width(right)) {
        1 => DataType::Int8,
        2 => DataType::Int16,
        4 => DataType::Int32,
        _ => DataType::Int64,
    }
}

/// The functions the operators are planned into: what a cluster's worker must find by name.
pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![checked(Checked::Add), checked(Checked::Subtract), checked(Checked::Multiply), element_at()]
}

fn call(function: ScalarUDF, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(function), args))
}

/// Integer arithmetic that fails on overflow, as Spark's in ANSI mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Checked {
    Add,
    Subtract,
    Multiply,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedArithmetic {
    op: Checked,
    signature: Signature,
}

fn checked(op: Checked) -> ScalarUDF {
    ScalarUDF::new_from_impl(CheckedArithmetic { op, signature: Signature::any(2, Volatility::Immutable) })
}

impl ScalarUDFImpl for CheckedArithmetic {
    fn name(&self) -> &str {
        match self.op {
            Checked::Add => "spark_checked_add",
            Checked::Subtract => "spark_checked_subtract",
            Checked::Multiply => "spark_checked_multiply",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (left, right) = (&arrays[0], &arrays[1]);
        let result = match self.op {
            Checked::Add => numeric::add(left, right),
            Checked::Subtract => numeric::sub(left, right),
            Checked::Multiply => numeric::mul(left, right),
        };
        result.map(ColumnarValue::Array).map_err(|_| {
            DataFusionError::Execution(
                "an integer operation overflowed (Spark's ANSI mode: ARITHMETIC_OVERFLOW)".to_owned(),
            )
        })
    }
}

/// `arr[i]` as Spark reads it: counted from 0, NULL for a NULL array or index, an error past the end.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ElementAt {
    signature: Signature,
}

fn element_at() -> ScalarUDF {
    ScalarUDF::new_from_impl(ElementAt { signature: Signature::any(2, Volatility::Immutable) })
}

impl ScalarUDFImpl for ElementAt {
    fn name(&self) -> &str {
        "spark_array_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match &arg_types[0] {
            DataType::List(field) | DataType::LargeList(field) => Ok(field.data_type().clone()),
            other => exec_err!("[] reads an array, not {other}"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let indices: &Int64Array = arrays[1].as_primitive();
        let lists = &arrays[0];
        let value_type = self.return_type(&[lists.data_type().clone()])?;
        let mut values: Vec<ScalarValue> = Vec::with_capacity(lists.len());
        for row in 0..lists.len() {
            if lists.is_null(row) || indices.is_null(row) {
                values.push(ScalarValue::try_from(&value_type)?);
                continue;
            }
            let element: ArrayRef = match lists.data_type() {
                DataType::LargeList(_) => lists.as_list::<i64>().value(row),
                _ => lists.as_list::<i32>().value(row),
            };
            let index = indices.value(row);
            if index < 0 || index as usize >= element.len() {
                return exec_err!(
                    "an array index is out of its array's bounds (Spark's ANSI mode: INVALID_ARRAY_INDEX)"
                );
            }
            values.push(ScalarValue::try_from_array(&element, index as usize)?);
        }
        Ok(ColumnarValue::Array(
            ScalarValue::iter_to_array(values)
                .or_else(|_| ScalarValue::try_from(&value_type).and_then(|null| null.to_array_of_size(0)))?,
        ))
    }
}

/// Spark's `size`: an array's or a map's length, NULL for NULL (Spark 4's default; the legacy -1
/// is what `datafusion-spark`'s gave).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Size {
    signature: Signature,
}

pub fn size() -> ScalarUDF {
    ScalarUDF::new_from_impl(Size { signature: Signature::any(1, Volatility::Immutable) })
}

impl ScalarUDFImpl for Size {
    fn name(&self) -> &str {
        "size"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let values = &arrays[0];
        let length = |row: usize| -> Result<i32> {
            Ok(match values.data_type() {
                DataType::List(_) => values.as_list::<i32>().value_length(row),
                DataType::LargeList(_) => values.as_list::<i64>().value_length(row) as i32,
                DataType::Map(..) => values.as_map().value_length(row),
                other => return exec_err!("size reads an array or a map, not {other}"),
            })
        };
        let sizes: Result<Int32Array> = (0..values.len())
            .map(|row| if values.is_null(row) { Ok(None) } else { length(row).map(Some) })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(sizes?)))
    }
}
