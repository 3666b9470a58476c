//! Spark's date and time functions, with Java's patterns, in the session time zone UTC and with
//! ANSI mode on (a value that does not parse is an error, never NULL): the ones `datafusion-spark`
//! lacks and DataFusion means otherwise (`date_format(ts, 'yyyy-MM')` read the text `yyyy-MM`).

use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime};
use deltalake::arrow::array::{
    Array, ArrayRef, Date32Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::compute::{CastOptions, cast_with_options};
use deltalake::arrow::datatypes::{DataType, TimeUnit};
use deltalake::datafusion::common::{DataFusionError, Result, exec_err};
use deltalake::datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::dialect::patterns::java_to_chrono;

/// Spark's default pattern of `from_unixtime` and `unix_timestamp`.
const DEFAULT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

/// Which of Spark's functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    DateFormat,
    ToDate,
    ToTimestamp,
    UnixTimestamp,
    FromUnixtime,
    Year,
    Month,
    DayOfMonth,
    DayOfWeek,
    WeekOfYear,
    Quarter,
    DateAdd,
    DateSub,
    AddMonths,
}

/// One of Spark's date functions, as a DataFusion function of the same name.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkDate {
    name: &'static str,
    kind: Kind,
    signature: Signature,
}

/// Every function of this file, to register in a Spark session over DataFusion's and
/// `datafusion-spark`'s of the same names.
pub fn functions() -> Vec<ScalarUDF> {
    [
        ("date_format", Kind::DateFormat),
        ("to_date", Kind::ToDate),
        ("to_timestamp", Kind::ToTimestamp),
        ("unix_timestamp", Kind::UnixTimestamp),
        ("from_unixtime", Kind::FromUnixtime),
        ("year", Kind::Year),
        ("month", Kind::Month),
        ("dayofmonth", Kind::DayOfMonth),
        ("day", Kind::DayOfMonth),
        ("dayofweek", Kind::DayOfWeek),
        ("weekofyear", Kind::WeekOfYear),
        ("quarter", Kind::Quarter),
        ("date_add", Kind::DateAdd),
        ("dateadd", Kind::DateAdd),
        ("date_sub", Kind::DateSub),
        ("add_months", Kind::AddMonths),
    ]
    .into_iter()
    .map(|(name, kind)| {
        ScalarUDF::new_from_impl(SparkDate {
            name,
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        })
    })
    .collect()
}

impl SparkDate {
    /// How many arguments the function takes, at least and at most.
    fn arity(&self) -> (usize, usize) {
        match self.kind {
            Kind::DateFormat => (2, 2),
            Kind::ToDate | Kind::ToTimestamp | Kind::FromUnixtime => (1, 2),
            Kind::UnixTimestamp => (1, 2),
            Kind::DateAdd | Kind::DateSub | Kind::AddMonths => (2, 2),
            _ => (1, 1),
        }
    }
}

impl ScalarUDFImpl for SparkDate {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let (least, most) = self.arity();
        if arg_types.len() < least || arg_types.len() > most {
            return exec_err!("{} takes {least} to {most} arguments, not {}", self.name, arg_types.len());
        }
        Ok(arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| match (i, self.kind) {
                (0, Kind::FromUnixtime) => DataType::Int64,
                (0, Kind::DateAdd | Kind::DateSub | Kind::AddMonths) => DataType::Date32,
                (1, Kind::DateAdd | Kind::DateSub | Kind::AddMonths) => DataType::Int64,
                (0, _) if is_time(t) => t.clone(),
                (0, _) => DataType::Utf8,
                _ => DataType::Utf8,
            })
            .collect())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::DateFormat | Kind::FromUnixtime => DataType::Utf8,
            Kind::ToDate | Kind::DateAdd | Kind::DateSub | Kind::AddMonths => DataType::Date32,
            Kind::ToTimestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Kind::UnixTimestamp => DataType::Int64,
            _ => DataType::Int32,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let pattern = |at: usize, default: Option<&str>| -> Result<Vec<Option<String>>> {
            match arrays.get(at) {
                Some(array) => {
                    // A literal pattern is every row's: converted once per call, not once per row.
                    let mut converted: std::collections::HashMap<String, String> = Default::default();
                    strings(array)?
                        .into_iter()
                        .map(|p| {
                            let Some(p) = p else { return Ok(None) };
                            if let Some(chrono) = converted.get(&p) {
                                return Ok(Some(chrono.clone()));
                            }
                            let chrono =
                                java_to_chrono(&p).map_err(|letters| unsupported(self.name, &p, &letters))?;
                            converted.insert(p, chrono.clone());
                            Ok(Some(chrono))
                        })
                        .collect()
                }
                None => Ok(vec![
                    default.map(|d| java_to_chrono(d).expect("the default pattern"));
                    arrays[0].len()
                ]),
            }
        };
        let result: ArrayRef = match self.kind {
            Kind::DateFormat => {
                let instants = instants(&arrays[0])?;
                let patterns = pattern(1, None)?;
                let formatted = instants
                    .iter()
                    .zip(&patterns)
                    .map(|(at, p)| Some(at.as_ref()?.format(p.as_ref()?).to_string()));
                Arc::new(formatted.collect::<StringArray>())
            }
            Kind::FromUnixtime => {
                let seconds = as_i64(&arrays[0])?;
                let patterns = pattern(1, Some(DEFAULT_PATTERN))?;
                let formatted = seconds.iter().zip(&patterns).map(|(s, p)| {
                    let at = DateTime::from_timestamp((*s)?, 0)?.naive_utc();
                    Some(at.format(p.as_ref()?).to_string())
                });
                Arc::new(formatted.collect::<StringArray>())
            }
            Kind::ToDate | Kind::ToTimestamp | Kind::UnixTimestamp => {
                let parsed: Vec<Option<NaiveDateTime>> = match (arrays.get(1), is_time(arrays[0].data_type()))
                {
                    (None, true) => instants(&arrays[0])?,
                    (None, false) => instants(&arrays[0])?,
                    (Some(_), _) => {
                        let texts = strings(&arrays[0])?;
                        let patterns = pattern(1, None)?;
                        texts
                            .iter()
                            .zip(&patterns)
                            .map(|(text, p)| match (text, p) {
                                (Some(text), Some(p)) => parse(self.name, text, p).map(Some),
                                _ => Ok(None),
                            })
                            .collect::<Result<_>>()?
                    }
                };
                match self.kind {
                    Kind::ToDate => Arc::new(
                        parsed.iter().map(|at| at.map(|at| days(at.date()))).collect::<Date32Array>(),
                    ),
                    Kind::ToTimestamp => Arc::new(
                        parsed
                            .iter()
                            .map(|at| at.map(|at| at.and_utc().timestamp_micros()))
                            .collect::<TimestampMicrosecondArray>()
                            .with_timezone("UTC"),
                    ),
                    _ => Arc::new(
                        parsed.iter().map(|at| at.map(|at| at.and_utc().timestamp())).collect::<Int64Array>(),
                    ),
                }
            }
            Kind::DateAdd | Kind::DateSub | Kind::AddMonths => {
                let dates = instants(&arrays[0])?;
                let counts = as_i64(&arrays[1])?;
                let moved: Result<Date32Array> = dates
                    .iter()
                    .zip(&counts)
                    .map(|(at, n)| {
                        let (Some(at), Some(n)) = (at, n) else { return Ok(None) };
                        let date = at.date();
                        let moved = match self.kind {
                            Kind::DateAdd => date.checked_add_signed(chrono::Duration::days(*n)),
                            Kind::DateSub => date.checked_sub_signed(chrono::Duration::days(*n)),
                            // Spark: a month later, the day cut to the month's last (31 Jan + 1 = 28 Feb).
                            _ => match u32::try_from(n.unsigned_abs()) {
                                Ok(months) if *n >= 0 => date.checked_add_months(chrono::Months::new(months)),
                                Ok(months) => date.checked_sub_months(chrono::Months::new(months)),
                                Err(_) => None,
                            },
                        };
                        moved.map(|d| Some(days(d))).ok_or_else(|| {
                            DataFusionError::Execution(format!("{}: the date is out of range", self.name))
                        })
                    })
                    .collect();
                Arc::new(moved?)
            }
            field => {
                let instants = instants(&arrays[0])?;
                let of = |at: &NaiveDateTime| -> i32 {
                    match field {
                        Kind::Year => at.year(),
                        Kind::Month => at.month() as i32,
                        Kind::DayOfMonth => at.day() as i32,
                        // Spark: Sunday is 1, Saturday 7.
                        Kind::DayOfWeek => at.weekday().number_from_sunday() as i32,
                        // Spark: the ISO week, Monday first, week 1 the one holding a Thursday.
                        Kind::WeekOfYear => at.iso_week().week() as i32,
                        _ => (at.month() as i32 - 1) / 3 + 1,
                    }
                };
                Arc::new(instants.iter().map(|at| at.as_ref().map(of)).collect::<Int32Array>())
            }
        };
        Ok(ColumnarValue::Array(result))
    }
}

fn is_time(t: &DataType) -> bool {
    matches!(t, DataType::Date32 | DataType::Date64 | DataType::Timestamp(..))
}

fn unsupported(function: &str, pattern: &str, letters: &str) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{function}: the pattern '{pattern}' holds {letters}, which bf's Spark dialect cannot read the way Spark does"
    ))
}

/// Days since 1970-01-01, as a DATE holds them.
fn days(date: NaiveDate) -> i32 {
    (date - NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date")).num_days() as i32
}

/// Text parsed by a chrono pattern as Spark parses with the Java one: a date and time, or a date
/// at midnight. With ANSI mode on, text that does not parse is an error naming the pattern.
fn parse(function: &str, text: &str, pattern: &str) -> Result<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, pattern)
        .or_else(|_| {
            NaiveDate::parse_from_str(text, pattern).map(|d| d.and_hms_opt(0, 0, 0).expect("midnight"))
        })
        .map_err(|_| {
            DataFusionError::Execution(format!(
                "{function}: a value does not match its pattern (Spark's ANSI mode: CANNOT_PARSE_TIMESTAMP)"
            ))
        })
}

/// A column of dates, timestamps or text as instants in UTC: a DATE at midnight, a timestamp's
/// wall clock in UTC, text cast as Spark casts it to a timestamp (an error where it does not).
fn instants(array: &ArrayRef) -> Result<Vec<Option<NaiveDateTime>>> {
    let strict = CastOptions { safe: false, ..CastOptions::default() };
    let micros = cast_with_options(array, &DataType::Timestamp(TimeUnit::Microsecond, None), &strict)?;
    let micros = micros.as_any().downcast_ref::<TimestampMicrosecondArray>().expect("cast to microseconds");
    Ok(micros
        .iter()
        .map(|v| v.and_then(|v| DateTime::from_timestamp_micros(v).map(|at| at.naive_utc())))
        .collect())
}

fn strings(array: &ArrayRef) -> Result<Vec<Option<String>>> {
    let text = cast_with_options(array, &DataType::Utf8, &CastOptions::default())?;
    let text = text.as_any().downcast_ref::<StringArray>().expect("cast to text");
    Ok(text.iter().map(|v| v.map(str::to_owned)).collect())
}

fn as_i64(array: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let strict = CastOptions { safe: false, ..CastOptions::default() };
    let numbers = cast_with_options(array, &DataType::Int64, &strict)?;
    Ok(numbers.as_any().downcast_ref::<Int64Array>().expect("cast to BIGINT").iter().collect())
}
