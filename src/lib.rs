//! bf makes a backfill of a Delta Lake table a reviewed, rehearsed and reversible change.
//!
//! The modules follow the path a backfill takes:
//! 1. [`plan_file`]: the TOML plan a team reviews — window, table, reason, source, checks, guards.
//! 2. [`window`]: the window and the slices it is cut into; one slice is one run and one commit.
//! 3. [`predicate`]: the replaceWhere predicate of a slice, from typed dates.
//! 4. [`source`]: where a slice's corrected rows come from, and the rule that plan SQL is read-only.
//!
//! [`shop`] builds the example shop the demo and the tests run on.

pub mod plan_file;
pub mod predicate;
pub mod shop;
pub mod source;
pub mod window;

/// deltalake, as bf builds against it, for tests and tools that inspect bf's tables.
pub use deltalake;
