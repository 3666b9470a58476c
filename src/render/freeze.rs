//! What `bf freeze` and `bf unfreeze` print.

use bf::delta::freeze::{Approval, Frozen, Use};

/// `Froze ..2026-03-31 of orders_silver at version 7: Q1 closed (FIN-204).`
pub fn done(verb: &str, period: &Frozen, table: &str, version: u64) -> String {
    format!("{verb} {} of {table} at version {version}: {}\n", period.period(), period.reason)
}

/// `Opened 2026-03-01..2026-03-31 of orders_silver (frozen ..2026-03-31) at version 8 to one backfill: the
/// first applied from a plan whose [guards] unfreeze names Dana Reyes and FIN-231, …`
pub fn approved(approval: &Approval, opened: &[Frozen], table: &str, version: u64) -> String {
    let periods: Vec<String> = opened.iter().map(Frozen::period).collect();
    format!(
        "Opened {}..{} of {table} (frozen {}) at version {version} to one backfill: the first applied from a plan \
         whose [guards] unfreeze names {} and {}, with these days. It may resume and be rolled back under this \
         approval; another backfill needs one of its own. The freeze stays for everything else.\n",
        approval.from,
        approval.to,
        periods.join(", "),
        approval.approved_by,
        approval.ticket
    )
}

/// The frozen periods of a table, one line each, with the approvals recorded on them and the
/// backfill that used each, for `bf status`.
pub fn periods(frozen: &[Frozen], uses: &[Use]) -> String {
    frozen
        .iter()
        .map(|period| {
            let approvals: String = period
                .approvals
                .iter()
                .map(|a| match uses.iter().find(|u| &u.approval == a) {
                    Some(used) => format!(
                        "    approved {a}; used by backfill {} (version {})\n",
                        used.backfill_id, used.version
                    ),
                    None => format!("    approved {a}; not used yet\n"),
                })
                .collect();
            format!("  frozen     {period}\n{approvals}")
        })
        .collect()
}
