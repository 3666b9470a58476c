//! bf makes a backfill of a Delta Lake table a reviewed, rehearsed and reversible change.
//!
//! The modules follow the path a backfill takes:
//! 1. [`plan_file`]: the TOML plan a team reviews — window, table, reason, source, checks, guards —
//!    confined by [`confine`] to what the operator lets a plan reach;
//!    [`chain`]: a plan with the plans of the tables built from it (`[[downstream]]`).
//! 2. [`window`]: the window and the slices it is cut into; one slice is one run and one commit.
//! 3. [`store`]: where tables and files live — local folders, S3, Azure, GCS — and how bf reaches
//!    them; [`table`]: the facts about the target later steps rely on (version, date column), and
//!    [`compat`]: whether bf may write it at all.
//! 4. [`source`]: where a slice's corrected rows come from; plan SQL is read-only.
//! 5. [`rehearsal`]: a [`clone`] of the target (shallow), every slice written into it.
//! 6. [`slice_writer`] with [`predicate`]: the one way bf writes a slice — one commit; [`row_rules`]
//!    names the table rule a refused row broke.
//! 7. [`diff`] and [`checks`]: before vs after, row changes, checks, guards.
//! 8. [`plan`]: the saved plan, the value `bf apply` will apply, [`seal`]ed to the plan text that
//!    was reviewed.
//! 9. [`apply`] with [`publish`] and [`ledger`]: the rehearsed slices' files published into the real
//!    table, one recorded commit each, and
//!    [`change_log`]: one row per finished backfill in a log table.
//! 10. [`rollback`]: undoing a backfill from the ledger — a RESTORE, or the window only.
//! 11. [`cascade`]: a chain applied upstream first and rolled back downstream first, and
//!     [`notify`]: the notice that tells the people who read its tables.
//!
//! [`markdown`] is the one escaper of text from a plan or from data on its way into a comment or a
//! notice.
//!
//! [`shop`] builds the example shop the demo and the tests run on.

pub mod apply;
pub mod cascade;
pub mod chain;
pub mod change_log;
pub mod checks;
pub mod clone;
pub mod compat;
pub mod confine;
pub mod diff;
pub mod exact_sum;
pub mod fault;
pub mod ledger;
pub mod markdown;
pub mod notify;
pub mod plan;
pub mod plan_file;
pub mod predicate;
pub mod publish;
pub mod rehearsal;
pub mod rollback;
pub mod row_rules;
pub mod seal;
pub mod shop;
pub mod slice_writer;
pub mod source;
pub mod staleness;
pub mod store;
pub mod table;
pub mod window;

/// deltalake, as bf builds against it, for tests and tools that inspect bf's tables.
pub use deltalake;
