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

/// An error's text without the data values it quotes, for `--samples none` (a plan of a fork's
/// pull request, whose comment anyone reads): the engine quotes a value it could not cast or parse
/// in single quotes (`Cannot cast string 'aws_access_key_id = AKIA…' to value of Float64 type`),
/// and a row that breaks a table rule is shown as `the row (column = value, …)`. Each is replaced
/// by `…`; the rest of the message, which says what to fix, stays.
pub fn without_values(message: &str) -> String {
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
                "Cast error: Cannot cast string 'aws_access_key_id = AKIA123' to value of Float64 type"
            ),
            "Cast error: Cannot cast string '…' to value of Float64 type"
        );
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
