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
}

pub(crate) fn query_error(
    what: impl Into<String>,
) -> impl FnOnce(deltalake::datafusion::error::DataFusionError) -> RehearsalError {
    let what = what.into();
    move |e| RehearsalError::Query { what, message: e.to_string() }
}
