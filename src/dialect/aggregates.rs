//! Spark's `avg`: of a DECIMAL(p,s) a DECIMAL(p+4,s+4) rounded half up, as Spark's (DataFusion's
//! cuts the last digit off: 226341.6216666… read .621666 where Spark writes .621667); of anything
//! else DataFusion's, a DOUBLE as Spark's is.

use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, AsArray};
use deltalake::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type};
use deltalake::datafusion::common::{DataFusionError, Result, ScalarValue};
use deltalake::datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use deltalake::datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature};

/// The most digits a DECIMAL holds.
const MAX_PRECISION: u8 = 38;

#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkAvg {
    /// DataFusion's `avg`, for everything but decimals.
    inner: AggregateUDF,
}

/// Spark's `avg`, to register over DataFusion's and `datafusion-spark`'s.
pub fn avg() -> AggregateUDF {
    AggregateUDF::new_from_impl(SparkAvg {
        inner: (*deltalake::datafusion::functions_aggregate::average::avg_udaf()).clone(),
    })
}

/// The type of a DECIMAL(p,s)'s average: DECIMAL(p+4,s+4), at most 38 digits.
fn widened(precision: u8, scale: i8) -> (u8, i8) {
    ((precision + 4).min(MAX_PRECISION), (scale + 4).min(MAX_PRECISION as i8))
}

impl AggregateUDFImpl for SparkAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Decimal128(precision, scale)] => {
                let (precision, scale) = widened(*precision, *scale);
                Ok(DataType::Decimal128(precision, scale))
            }
            _ => self.inner.return_type(arg_types),
        }
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match args.expr_fields[0].data_type() {
            DataType::Decimal128(precision, scale) => {
                Ok(Box::new(DecimalAvg { sum: 0, count: 0, precision: *precision, scale: *scale }))
            }
            _ => self.inner.accumulator(args),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        match args.input_fields[0].data_type() {
            DataType::Decimal128(_, scale) => Ok(vec![
                Arc::new(Field::new("sum", DataType::Decimal128(MAX_PRECISION, *scale), true)),
                Arc::new(Field::new("count", DataType::Int64, true)),
            ]),
            _ => self.inner.state_fields(args),
        }
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !matches!(args.expr_fields[0].data_type(), DataType::Decimal128(..))
            && self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn deltalake::datafusion::logical_expr::GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }
}

/// The exact sum and count of a DECIMAL column.
#[derive(Debug)]
struct DecimalAvg {
    sum: i128,
    count: i64,
    precision: u8,
    scale: i8,
}

fn overflow() -> DataFusionError {
    DataFusionError::Execution(
        "avg: the sum of a DECIMAL overflowed (Spark's ANSI mode: ARITHMETIC_OVERFLOW)".into(),
    )
}

impl Accumulator for DecimalAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for value in values[0].as_primitive::<Decimal128Type>().iter().flatten() {
            self.sum = self.sum.checked_add(value).ok_or_else(overflow)?;
            self.count += 1;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let sums = states[0].as_primitive::<Decimal128Type>();
        let counts = states[1].as_primitive::<Int64Type>();
        for (sum, count) in sums.iter().zip(counts.iter()) {
            self.sum = self.sum.checked_add(sum.unwrap_or(0)).ok_or_else(overflow)?;
            self.count += count.unwrap_or(0);
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Decimal128(Some(self.sum), MAX_PRECISION, self.scale),
            ScalarValue::Int64(Some(self.count)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let (precision, scale) = widened(self.precision, self.scale);
        if self.count == 0 {
            return Ok(ScalarValue::Decimal128(None, precision, scale));
        }
        let shift = 10i128.pow((scale - self.scale) as u32);
        let scaled = self.sum.checked_mul(shift).ok_or_else(overflow)?;
        let count = i128::from(self.count);
        let (quotient, remainder) = (scaled / count, scaled % count);
        // Half up, away from zero, as Java's BigDecimal.ROUND_HALF_UP.
        let rounded = match remainder.abs() * 2 >= count {
            true => quotient + scaled.signum(),
            false => quotient,
        };
        Ok(ScalarValue::Decimal128(Some(rounded), precision, scale))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
