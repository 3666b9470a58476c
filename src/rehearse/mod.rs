//! Stage: rehearse. In: a validated plan document and the real table, read only. Out: a saved
//! [`Plan`] — every slice written into a shallow [`clone`] of the target, compared before vs after
//! ([`diff`]), checked and guarded ([`checks`]), and [`seal`]ed to the plan text that was reviewed.
//!
//! The [`slice_writer`] is the one way bf writes a slice: the rehearsal, apply and rollback all go
//! through it, so it lives in the lowest stage that writes.

pub mod blast_radius;
pub mod checks;
pub mod clone;
mod compare;
pub mod deleted_keys;
pub mod diff;
mod error;
pub mod exact_sum;
mod fingerprint;
pub mod guards;
pub mod own_files;
pub mod plan;
pub mod policy;
mod progress;
pub mod rehearsal;
pub mod sample;
pub mod seal;
pub mod slice_writer;
mod target;
mod write;

pub use plan::Plan;
