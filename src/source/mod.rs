//! Stage: source. In: a plan document and a slice (or the window). Out: the slice's corrected rows
//! — the plan's named inputs registered and its read-only query run — with what was read
//! ([`run::SourceCounts`], the inputs' versions and listings). Plan SQL is checked read-only when the
//! plan file is validated ([`crate::plan_file::read_only`]) and runs under DataFusion's read-only
//! options here; slice bounds reach it as typed values, never as text.

pub mod align;
mod budget;
mod files;
pub mod found;
pub mod pattern;
mod read;
pub mod routes;
pub mod run;
