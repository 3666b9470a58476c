//! bf makes a backfill of a Delta Lake table a reviewed, rehearsed and reversible change.
//!
//! The library is cut into stages, in the order a backfill takes them; a stage uses the stages
//! below it and never one above (docs/ARCHITECTURE.md draws the map):
//! 1. [`plan_file`]: the TOML plan a team reviews — window, table, reason, source, checks, guards —
//!    confined by [`plan_file::confine`] to what the operator lets a plan reach;
//!    [`plan_file::chain`]: a plan with the plans of the tables built from it (`[[downstream]]`).
//! 2. [`window`]: the window and the slices it is cut into; one slice is one run and one commit.
//! 3. [`delta`], the bottom of the engine: [`delta::store`], where tables and files live — local
//!    folders, S3, Azure, GCS — and how bf reaches them; [`delta::table`], the facts about the target
//!    later steps rely on (version, date column); [`delta::compat`], whether bf may write it at all;
//!    [`delta::predicate`], a slice as a typed predicate; [`delta::publish`], files committed into a
//!    table at once; [`delta::ledger`], what every commit bf makes records.
//! 4. [`source`]: where a slice's corrected rows come from; plan SQL is read-only
//!    ([`plan_file::read_only`]) and in the plan's [`dialect`] (DataFusion's SQL or Spark's).
//!    [`cluster`], below it: the slice's query run on an Apache DataFusion Ballista cluster when
//!    the operator names one (`BF_CLUSTER`), its rows streamed back.
//! 5. [`rehearse`]: a [`rehearse::clone`] of the target (shallow), every slice written into it by the
//!    [`rehearse::slice_writer`] — the one way bf writes a slice, one commit; then [`rehearse::diff`]
//!    and [`rehearse::checks`]: before vs after, row changes, checks, guards. What leaves is
//!    [`rehearse::plan`], the saved plan `bf apply` will apply, [`rehearse::seal`]ed to the plan text
//!    that was reviewed.
//! 6. [`rollback`]: undoing a backfill from the ledger — a RESTORE, or the window only.
//! 7. [`apply`]: the rehearsed slices' files published into the real table, one recorded commit
//!    each; [`apply::change_log`]: one row per finished backfill in a log table;
//!    [`apply::cascade`]: a chain applied upstream first and rolled back downstream first.
//! 8. [`notify`]: the notice that tells the people who read its tables. [`markdown`], a leaf
//!    below every stage, is the one escaper of text from a plan or from data on its way into a
//!    comment, a notice, a DAG's docs or the table comment.
//!    [`lineage`], beside it: the apply and the rollback as OpenLineage runs, for the tools that
//!    learn what changed from lineage.
//!
//! [`gaps`] comes before a plan and uses the stages below it: which days of a table need a backfill
//! (days without rows, days far below their usual level, from [`delta::days`]; backfills left
//! unfinished, from the ledger as [`rollback`] reads it), and a plan for exactly those days.
//!
//! Rollback sits below apply although it runs after it: it needs nothing of apply, and a cascade
//! that fails half way rolls back what it applied.
//!
//! [`fault`] holds the test hooks (faults, pauses) and [`shop`] builds the example shop the demo and
//! the tests run on, apart from the engine; [`words`] is how every message words a count or a span of
//! days; [`write_gate`] is the one rule for every file and folder bf writes on a local disk.

pub mod apply;
pub mod cluster;
pub mod delta;
pub mod dialect;
pub mod fault;
pub mod gaps;
pub mod lineage;
pub mod markdown;
pub mod notify;
pub mod plan_file;
pub mod rehearse;
pub mod rollback;
pub mod shop;
pub mod source;
pub mod window;
pub mod words;
pub mod write_gate;

/// deltalake, as bf builds against it, for tests and tools that inspect bf's tables.
pub use deltalake;
