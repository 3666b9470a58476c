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
}

impl RehearsalError {
    /// The key of the plan file this error is about, and a suggestion when one is known: what
    /// `bf plan` points at, as `bf validate` does. `None` for what no key of the plan says.
    pub fn place(&self) -> Option<(String, Option<String>)> {
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
