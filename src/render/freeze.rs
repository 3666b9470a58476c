//! What `bf freeze` and `bf unfreeze` print.

use bf::delta::freeze::{Approval, Frozen};

/// `Froze ..2026-03-31 of orders_silver at version 7: Q1 closed (FIN-204).`
pub fn done(verb: &str, period: &Frozen, table: &str, version: u64) -> String {
    format!("{verb} {} of {table} at version {version}: {}\n", period.period(), period.reason)
}

/// `Opened 2026-03-01..2026-03-31 of orders_silver (frozen ..2026-03-31) at version 8 to a plan whose
/// [guards] unfreeze names Dana Reyes and FIN-231.`
pub fn approved(approval: &Approval, opened: &[Frozen], table: &str, version: u64) -> String {
    let periods: Vec<String> = opened.iter().map(Frozen::period).collect();
    format!(
        "Opened {}..{} of {table} (frozen {}) at version {version} to a plan whose [guards] unfreeze names {} and \
         {}, with these days: the freeze stays for everything else.\n",
        approval.from,
        approval.to,
        periods.join(", "),
        approval.approved_by,
        approval.ticket
    )
}

/// The frozen periods of a table, one line each, with the approvals recorded on them, for
/// `bf status`.
pub fn periods(frozen: &[Frozen]) -> String {
    frozen
        .iter()
        .map(|period| {
            let approvals: String = period.approvals.iter().map(|a| format!("    approved {a}\n")).collect();
            format!("  frozen     {period}\n{approvals}")
        })
        .collect()
}
