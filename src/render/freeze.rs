//! What `bf freeze` and `bf unfreeze` print.

use bf::delta::freeze::Frozen;

/// `Froze ..2026-03-31 of orders_silver at version 7: Q1 closed (FIN-204).`
pub fn done(verb: &str, period: &Frozen, table: &str, version: u64) -> String {
    format!("{verb} {} of {table} at version {version}: {}\n", period.period(), period.reason)
}

/// The frozen periods of a table, one line each, for `bf status`.
pub fn periods(frozen: &[Frozen]) -> String {
    frozen.iter().map(|period| format!("  frozen     {period}\n")).collect()
}
