//! Why a rehearsal stopped. Every step of it returns this error, so the rehearsal's steps share it
//! from below rather than from the file that runs them.

use crate::delta::table::TableError;
use crate::rehearse::clone;

#[derive(Debug, thiserror::Error)]
pub enum RehearsalError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Frozen(#[from] crate::delta::freeze::FreezeError),
    #[error(transparent)]
    Open(#[from] crate::delta::store::OpenError),
    #[error(transparent)]
    Clone(#[from] clone::CloneError),
    #[error(transparent)]
    Source(#[from] crate::source::run::SourceError),
    #[error(transparent)]
    Write(#[from] crate::rehearse::slice_writer::WriteError),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Unsupported(#[from] crate::delta::compat::Unsupported),
    #[error("{what}: {message}")]
    Query { what: String, message: String },
    #[error("downstream plan {plan}: {source}")]
    Downstream { plan: String, source: Box<RehearsalError> },
    /// About what one key of the plan file says: shown at its line.
    #[error("{source}")]
    At { key: String, help: Option<String>, source: Box<RehearsalError> },
    /// Columns the plan names that the target does not hold (`plan_file/columns.rs`): each shown
    /// at its key's line.
    #[error("{}", .0.iter().map(|i| i.message.as_str()).collect::<Vec<_>>().join("; "))]
    Columns(Vec<crate::plan_file::Issue>),
}

impl RehearsalError {
    /// What this error says of the plan file's keys, each with its key and a suggestion when one
    /// is known: what `bf plan` points at, as `bf validate` does. Empty for what no key says.
    pub fn issues(&self) -> Vec<crate::plan_file::Issue> {
        if let RehearsalError::Columns(issues) = self {
            return issues.clone();
        }
        let message = crate::delta::store::redact(&self.to_string());
        self.place()
            .map(|(key, help)| {
                let help = help
                    .or_else(|| crate::delta::memory::hint(&message))
                    .or_else(|| crate::cluster::hint(&message));
                crate::plan_file::Issue { key, message, help }
            })
            .into_iter()
            .collect()
    }

    /// The key of the plan file this error is about, and a suggestion when one is known.
    fn place(&self) -> Option<(String, Option<String>)> {
        use crate::source::run::SourceError;
        match self {
            RehearsalError::At { key, help, .. } => Some((key.clone(), help.clone())),
            RehearsalError::Table(TableError::NoDateColumn { .. } | TableError::DateColumnType { .. }) => {
                Some(("target.date_column".to_owned(), None))
            }
            RehearsalError::Source(SourceError::Schema(_) | SourceError::Query { .. }) => {
                Some(("source.query".to_owned(), None))
            }
            RehearsalError::Source(
                SourceError::MissingInput { input, path, .. } | SourceError::Input { input, path, .. },
            ) => Some((
                format!("source.inputs.{}.path", crate::plan_file::key_segment(input)),
                crate::delta::store::nearest_existing(path),
            )),
            _ => None,
        }
    }

    /// The error itself, without the plan it came from (a downstream plan's).
    pub fn innermost(&self) -> &RehearsalError {
        match self {
            RehearsalError::Downstream { source, .. } => source.innermost(),
            other => other,
        }
    }
}

pub(crate) fn query_error(
    what: impl Into<String>,
) -> impl FnOnce(deltalake::datafusion::error::DataFusionError) -> RehearsalError {
    let what = what.into();
    move |e| RehearsalError::Query { what, message: e.to_string() }
}

/// An error's text without the data values it can quote, for `--samples none` (a plan of a fork's
/// pull request, whose comment anyone reads) — the value gate of docs/SECURITY.md:
///
/// - From the first mark of an error the engine raised while it *ran* the query over the data
///   (`Arrow error:`, `Execution error:`, `External error:`, …) to the message's end, only its
///   kind is kept: the chain of error kinds the engine wrote (`Arrow error: Compute error`) and,
///   where its first words are one of the engine's known phrases, that phrase ("Regular
///   expression did not compile"). What follows can be any value: the string a cast met, a
///   pattern made of a whole column (`regexp_like(x, (SELECT string_agg(…)))`), the operands of an
///   overflow. It is never shown, whatever quotes it holds.
/// - Before that, in bf's own words, a value quoted in single quotes and a row shown as
///   `the row (column = value, …)` are replaced by `…`; the rest, which says what to fix, stays.
pub fn without_values(message: &str) -> String {
    match running_error_at(message) {
        Some(at) => format!("{}{}", without_quoted(&message[..at]), kind_only(&message[at..])),
        None => without_quoted(message),
    }
}

/// How the engine's errors raised while running a query begin, in DataFusion's and Arrow's words.
const RUNNING: &[&str] = &[
    "Arrow error:",
    "Execution error:",
    "External error:",
    "ExecutionJoin error:",
    "Parquet error:",
    "Internal error:",
    "Json error:",
    "Csv error:",
    "Cast error:",
    "Compute error:",
    "Parser error:",
    "Invalid argument error:",
    "Shared error:",
];

/// The first words of the engine's messages that name what went wrong without any value.
const KNOWN: &[&str] = &[
    "Cannot cast",
    "Can't cast",
    "Failed to cast",
    "Regular expression did not compile",
    "regex parse error",
    "Overflow happened",
    "Arithmetic overflow",
    "Divide by zero",
    "Division by zero",
    "Error parsing",
    "Error while parsing",
    "Unable to parse",
    "Invalid",
    "Unsupported",
];

fn running_error_at(message: &str) -> Option<usize> {
    RUNNING.iter().filter_map(|mark| message.find(mark)).min()
}

/// An engine error reduced to its kind: its chain of `… error:` marks and its known first words.
fn kind_only(engine: &str) -> String {
    let mut kinds = Vec::new();
    let mut rest = engine.trim_start();
    while let Some(mark) = RUNNING.iter().find(|mark| rest.starts_with(*mark)) {
        kinds.push(mark.trim_end_matches(':'));
        rest = rest[mark.len()..].trim_start();
    }
    if let Some(known) = KNOWN.iter().find(|known| rest.starts_with(*known)) {
        kinds.push(known);
    }
    format!(
        "{}: … (what the engine said is withheld: it can quote the data, and samples are off)",
        kinds.join(": ")
    )
}

/// bf's own words without the values they quote: single-quoted text and `the row (…)`.
fn without_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    loop {
        let quote = rest.find('\'');
        let row = rest.find("the row (");
        match (quote, row) {
            (Some(q), r) if r.is_none_or(|r| q < r) => {
                out.push_str(&rest[..=q]);
                let after = &rest[q + 1..];
                match after.find('\'') {
                    Some(end) => {
                        out.push_str("…'");
                        rest = &after[end + 1..];
                    }
                    None => {
                        out.push_str(after);
                        return out;
                    }
                }
            }
            (_, Some(r)) => {
                let open = r + "the row (".len();
                out.push_str(&rest[..open]);
                let after = &rest[open..];
                // The row's closing parenthesis: the first `)` at depth zero.
                let mut depth = 0usize;
                let close = after.char_indices().find(|(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                });
                match close {
                    Some((end, _)) => {
                        out.push('…');
                        rest = &after[end..];
                    }
                    None => {
                        out.push('…');
                        return out;
                    }
                }
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(_), None) => unreachable!("handled above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_an_error_quotes_are_left_out() {
        assert_eq!(
            without_values(
                "source.query: Arrow error: Cast error: Cannot cast string 'aws_access_key_id = AKIA123' to value"
            ),
            "source.query: Arrow error: Cast error: Cannot cast: … (what the engine said is withheld: it can quote \
             the data, and samples are off)"
        );
        // A pattern made of a column, printed unquoted; a value holding a quote: nothing of either.
        for leaked in [
            "Arrow error: Compute error: Regular expression did not compile: Syntax(regex parse error:\n    \
             alice,123-45-6789,bob,987-65-4321(\n ^ error: unclosed group)",
            "Execution error: it's O'Brien',SECRET' here",
            "External error: SECRET",
        ] {
            let said = without_values(&format!("the query failed: {leaked}"));
            assert!(!said.contains("SECRET") && !said.contains("6789") && !said.contains("Brien"), "{said}");
            assert!(said.starts_with("the query failed: "), "{said}");
        }
        assert_eq!(
            without_values(
                "slice 1 was not written: the row (order_id = 7, note = f(x)) breaks the table's CHECK amount > 0"
            ),
            "slice 1 was not written: the row (…) breaks the table's CHECK amount > 0"
        );
        assert_eq!(without_values("no value here"), "no value here");
        assert_eq!(without_values("an 'unclosed quote"), "an 'unclosed quote");
    }
}
