//! Spark's string functions where DataFusion's (or none) mean otherwise: `split` (a regex, giving
//! an array), `regexp_replace` (every match, not the first), `regexp_extract` (a group of the first
//! match, `''` where none), `initcap` (a capital after a space only: `o'brien` is `O'brien`).
//! Patterns are read by Rust's `regex`, which shares Java's syntax but for lookaround and
//! backreferences in the pattern: a pattern using those does not compile, and the query fails.

use std::sync::Arc;

use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder,
};
use deltalake::arrow::compute::{CastOptions, cast_with_options};
use deltalake::arrow::datatypes::{DataType, Field};
use deltalake::datafusion::common::{DataFusionError, Result, exec_err};
use deltalake::datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use regex::Regex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Split,
    RegexpReplace,
    RegexpExtract,
    Initcap,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SparkString {
    name: &'static str,
    kind: Kind,
    signature: Signature,
}

/// Every function of this file, to register over DataFusion's of the same names.
pub fn functions() -> Vec<ScalarUDF> {
    [
        ("split", Kind::Split),
        ("regexp_replace", Kind::RegexpReplace),
        ("regexp_extract", Kind::RegexpExtract),
        ("initcap", Kind::Initcap),
    ]
    .into_iter()
    .map(|(name, kind)| {
        ScalarUDF::new_from_impl(SparkString {
            name,
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        })
    })
    .collect()
}

impl ScalarUDFImpl for SparkString {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let (least, most, numbered) = match self.kind {
            Kind::Split => (2, 3, Some(2)),
            Kind::RegexpReplace => (3, 3, None),
            Kind::RegexpExtract => (2, 3, Some(2)),
            Kind::Initcap => (1, 1, None),
        };
        if arg_types.len() < least || arg_types.len() > most {
            return exec_err!("{} takes {least} to {most} arguments, not {}", self.name, arg_types.len());
        }
        Ok((0..arg_types.len())
            .map(|i| if Some(i) == numbered { DataType::Int64 } else { DataType::Utf8 })
            .collect())
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Split => DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let text = |at: usize| -> Result<Vec<Option<String>>> { strings(&arrays[at]) };
        let rows = arrays[0].len();
        // A literal pattern is every row's: compiled once per call, not once per row.
        let mut regexes = Compiled::default();
        let result: ArrayRef = match self.kind {
            Kind::Initcap => {
                Arc::new(text(0)?.iter().map(|s| s.as_deref().map(initcap)).collect::<StringArray>())
            }
            Kind::Split => {
                let (texts, patterns) = (text(0)?, text(1)?);
                let limits = numbers(arrays.get(2), rows)?;
                let mut built = ListBuilder::new(StringBuilder::new());
                for row in 0..rows {
                    match (&texts[row], &patterns[row]) {
                        (Some(text), Some(pattern)) => {
                            let regex = regexes.get(pattern)?;
                            let limit = limits[row].unwrap_or(-1);
                            let parts: Vec<&str> = match limit > 0 {
                                true => regex.splitn(text, limit as usize).collect(),
                                false => regex.split(text).collect(),
                            };
                            for part in parts {
                                built.values().append_value(part);
                            }
                            built.append(true);
                        }
                        _ => built.append(false),
                    }
                }
                Arc::new(built.finish())
            }
            Kind::RegexpReplace => {
                let (texts, patterns, replacements) = (text(0)?, text(1)?, text(2)?);
                let replaced: Result<StringArray> = (0..rows)
                    .map(|row| match (&texts[row], &patterns[row], &replacements[row]) {
                        (Some(text), Some(pattern), Some(with)) => {
                            Ok(Some(regexes.get(pattern)?.replace_all(text, with.as_str()).into_owned()))
                        }
                        _ => Ok(None),
                    })
                    .collect();
                Arc::new(replaced?)
            }
            Kind::RegexpExtract => {
                let (texts, patterns) = (text(0)?, text(1)?);
                let groups = numbers(arrays.get(2), rows)?;
                let extracted: Result<StringArray> = (0..rows)
                    .map(|row| match (&texts[row], &patterns[row]) {
                        (Some(text), Some(pattern)) => {
                            let regex = regexes.get(pattern)?;
                            let group = groups[row].unwrap_or(1);
                            if group < 0 || group as usize >= regex.captures_len() {
                                return exec_err!("regexp_extract: the regex has no group {group}");
                            }
                            let found = regex.captures(text).and_then(|c| c.get(group as usize));
                            Ok(Some(found.map_or(String::new(), |m| m.as_str().to_owned())))
                        }
                        _ => Ok(None),
                    })
                    .collect();
                Arc::new(extracted?)
            }
        };
        Ok(ColumnarValue::Array(result))
    }
}

/// Spark's `initcap`: every letter lower case, but the first of the text and each one after a space.
fn initcap(text: &str) -> String {
    let mut after_space = true;
    text.chars()
        .flat_map(|c| {
            let shown: Vec<char> =
                if after_space { c.to_uppercase().collect() } else { c.to_lowercase().collect() };
            after_space = c == ' ';
            shown
        })
        .collect()
}

/// The regexes of one call, each compiled the first time a row uses it.
#[derive(Default)]
struct Compiled(std::collections::HashMap<String, Regex>);

impl Compiled {
    fn get(&mut self, pattern: &str) -> Result<&Regex> {
        if !self.0.contains_key(pattern) {
            self.0.insert(pattern.to_owned(), compile(pattern)?);
        }
        Ok(&self.0[pattern])
    }
}

fn compile(pattern: &str) -> Result<Regex> {
    Regex::new(pattern).map_err(|_| {
        DataFusionError::Execution(
            "a regular expression did not compile (bf's Spark dialect reads Java's syntax without lookaround \
             or backreferences)"
                .to_owned(),
        )
    })
}

fn strings(array: &ArrayRef) -> Result<Vec<Option<String>>> {
    let text = cast_with_options(array, &DataType::Utf8, &CastOptions::default())?;
    Ok(text.as_string::<i32>().iter().map(|v| v.map(str::to_owned)).collect())
}

fn numbers(array: Option<&ArrayRef>, rows: usize) -> Result<Vec<Option<i64>>> {
    match array {
        None => Ok(vec![None; rows]),
        Some(array) => {
            let numbers = cast_with_options(array, &DataType::Int64, &CastOptions::default())?;
            Ok(numbers.as_any().downcast_ref::<Int64Array>().expect("BIGINT").iter().collect())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn initcap_capitalises_after_spaces_only() {
        assert_eq!(super::initcap("o'brien mIXED  case"), "O'brien Mixed  Case");
    }
}
