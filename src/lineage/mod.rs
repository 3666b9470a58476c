//! Stage: lineage, beside [`crate::notify`] at the top. In: a saved plan and what its apply or
//! rollback did, as it happens. Out: OpenLineage RunEvents, delivered where the operator's
//! OpenLineage settings say, or saved in the state dir to resend.
//!
//! Data platforms learn what changed from lineage — Marquez, DataHub, Unity Catalog, Airflow's own
//! provider all read OpenLineage — and a backfill that rewrote March is exactly the event they miss:
//! OpenLineage has no notion of a restated partition, so a consumer sees a mystery job write an old
//! day. bf says what it is: a run of `<table>/backfill` whose children, one per slice, carry the
//! days they rewrote as their `nominalTime`, the commit's statistics, the table's version, the
//! plan's checks, and a `bf` facet with the reason and the versions to roll back to.
//!
//! - [`event`] — the part of OpenLineage's model bf emits, and the standard facets it fills in.
//! - [`facet`] — the `bf` run facet and its JSON Schema.
//! - [`runs`] — namespace, job names, run ids (stable per backfill and slice), dataset names, and
//!   the orchestrator's run that started bf (`OPENLINEAGE_PARENT_ID`).
//! - [`apply`] — an apply's events, emitted as it goes ([`ApplyLineage`] is told as a progress is).
//! - [`rollback`] — a rollback's events.
//! - [`transport`] — the operator's settings, the [`Emitter`] that never fails a backfill, the
//!   spool of undelivered events and their resend.
//!
//! `bf plan` emits nothing: it changes no table, so there is nothing for lineage to record, and a
//! plan of an unreviewed pull request must not tell the outside world anything.

pub mod apply;
pub mod event;
pub mod facet;
pub mod rollback;
pub mod runs;
pub mod transport;

pub use apply::ApplyLineage;
pub use runs::Lineage;
pub use transport::{Delivery, Emitter, Transport};

/// Where undelivered events wait for `bf lineage resend`, under a state dir.
pub fn spool(state_dir: &std::path::Path) -> std::path::PathBuf {
    state_dir.join("lineage")
}
