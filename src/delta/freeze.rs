//! Frozen periods: days of a table that a report was signed off against, which no backfill or
//! rollback may rewrite without a recorded approval.
//!
//! They live on the table itself, in the table property `bf.frozen` (a JSON list), so that any
//! engine reading the table reads them, and each freeze or unfreeze is one metadata commit carrying
//! the ledger's keys: who froze what, when and why, is the table's own history. A plan that must
//! rewrite frozen days says so in `[guards] unfreeze`, with who approved it and the ticket; the
//! override is shown in every rendering and written into every slice commit of the backfill.

use chrono::{NaiveDate, Utc};
use deltalake::DeltaTable;

use crate::delta::ledger;
pub use crate::delta::ledger::{Approval, Frozen, Unfreeze};
use crate::window::Window;

/// The table property holding the frozen periods.
pub const PROPERTY: &str = "bf.frozen";

#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    #[error(
        "{table}: {what} would rewrite frozen days:\n{periods}\n\
         A plan may rewrite them only with `[guards] unfreeze = {{ from = …, to = …, approved_by = \"…\", ticket = \"…\" }}` \
         covering those days; or `bf unfreeze` the period first (recorded in the table)."
    )]
    Frozen { table: String, what: String, periods: String },
    #[error(
        "{table}: {what} would rewrite frozen days:\n{periods}\n\
         {asked}"
    )]
    NotApproved { table: String, what: String, periods: String, asked: String },
    #[error("{table}: its `{PROPERTY}` property is not bf's list of frozen periods: {problem}")]
    Unreadable { table: String, problem: String },
    #[error("{table}: no frozen period {period}; it has {have}")]
    NoSuchPeriod { table: String, period: String, have: String },
    #[error("{table}: {problem}")]
    Refused { table: String, problem: String },
    #[error(transparent)]
    Delta(#[from] deltalake::DeltaTableError),
}

/// The table's frozen periods, as its latest metadata holds them.
pub fn frozen(table: &DeltaTable) -> Result<Vec<Frozen>, FreezeError> {
    let name = crate::delta::store::display_url(table.table_url());
    let snapshot = table.snapshot()?;
    let Some(text) = snapshot.metadata().configuration().get(PROPERTY) else { return Ok(Vec::new()) };
    serde_json::from_str(text).map_err(|e| FreezeError::Unreadable { table: name, problem: e.to_string() })
}

/// Refuses rewriting `window` of the table where it is frozen, unless `unfreeze` approves every
/// frozen day of it; returns the frozen periods the window touches (all of them approved).
/// `what` names the rewrite (`the plan's window 2026-03-01..2026-03-31`).
pub fn check(
    table: &DeltaTable,
    window: &Window,
    unfreeze: Option<&Unfreeze>,
    what: &str,
) -> Result<Vec<Frozen>, FreezeError> {
    let (mut touched, mut closed, mut unapproved) = (Vec::new(), Vec::new(), Vec::new());
    for period in frozen(table)? {
        let Some(days) = period.within(window) else { continue };
        match unfreeze.filter(|u| u.covers(&days)) {
            Some(asked) if period.approvals.iter().any(|a| a.grants(asked, &days)) => touched.push(period),
            Some(_) => unapproved.push(period),
            None => closed.push(period),
        }
    }
    let table_name = crate::delta::store::display_url(table.table_url());
    let listed =
        |periods: &[Frozen]| periods.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n");
    if !closed.is_empty() {
        return Err(FreezeError::Frozen {
            table: table_name,
            what: what.to_owned(),
            periods: listed(&closed),
        });
    }
    match (unfreeze, unapproved.is_empty()) {
        (Some(asked), false) => Err(FreezeError::NotApproved {
            asked: format!(
                "The plan asks to ([guards] unfreeze: {asked}), but the table records no such approval, and a plan \
                 can only ask: someone who can write the table records it, in a commit of its own, with\n  \
                 bf unfreeze {table_name} --from {} --to {} --approved-by {:?} --ticket {:?} --reason \"…\"\n\
                 then plans again.",
                asked.from, asked.to, asked.approved_by, asked.ticket
            ),
            table: table_name,
            what: what.to_owned(),
            periods: listed(&unapproved),
        }),
        _ => Ok(touched),
    }
}

/// Records `approval` on every frozen period it overlaps, in one metadata commit carrying the
/// ledger's keys: from then on a plan whose `[guards] unfreeze` names the same approver, ticket and
/// days may rewrite them. Returns the periods it opened; none overlapping is an error.
pub async fn approve(
    table: DeltaTable,
    approval: Approval,
) -> Result<(DeltaTable, Vec<Frozen>), FreezeError> {
    let name = crate::delta::store::display_url(table.table_url());
    if approval.from > approval.to {
        return Err(FreezeError::Refused {
            table: name,
            problem: format!("days from {} to {} are none", approval.from, approval.to),
        });
    }
    let mut periods = frozen(&table)?;
    let days = Window { start: approval.from, end: approval.to };
    let mut opened = Vec::new();
    for period in periods.iter_mut().filter(|p| p.within(&days).is_some()) {
        period.approvals.push(approval.clone());
        opened.push(period.clone());
    }
    if opened.is_empty() {
        let have = periods.iter().map(Frozen::period).collect::<Vec<_>>();
        return Err(FreezeError::NoSuchPeriod {
            table: name,
            period: format!("overlapping {}..{}", approval.from, approval.to),
            have: if have.is_empty() { "none".into() } else { have.join(", ") },
        });
    }
    let table = write(table, &periods, ledger::approval_commit(&approval)).await?;
    Ok((table, opened))
}

/// Records `period` as frozen, in one metadata commit carrying the ledger's keys.
pub async fn freeze(table: DeltaTable, period: Frozen) -> Result<DeltaTable, FreezeError> {
    let mut periods = frozen(&table)?;
    if let Some(from) = period.from
        && from > period.to
    {
        return Err(FreezeError::Refused {
            table: crate::delta::store::display_url(table.table_url()),
            problem: format!("a period from {from} to {} is empty", period.to),
        });
    }
    periods.push(period.clone());
    write(table, &periods, ledger::freeze_commit(&period, false)).await
}

/// Lifts the frozen period `from..to` (`from` `None`: the one frozen `--through` `to`), in one
/// metadata commit carrying the ledger's keys, who lifted it and why; returns the period lifted.
pub async fn unfreeze(
    table: DeltaTable,
    from: Option<NaiveDate>,
    to: NaiveDate,
    reason: &str,
    by: &str,
) -> Result<(DeltaTable, Frozen), FreezeError> {
    let mut periods = frozen(&table)?;
    let Some(found) = periods.iter().position(|p| p.from == from && p.to == to) else {
        let asked = Frozen {
            from,
            to,
            reason: String::new(),
            by: String::new(),
            at: Utc::now(),
            approvals: Vec::new(),
        };
        let have = periods.iter().map(Frozen::period).collect::<Vec<_>>();
        return Err(FreezeError::NoSuchPeriod {
            table: crate::delta::store::display_url(table.table_url()),
            period: asked.period(),
            have: if have.is_empty() { "none".into() } else { have.join(", ") },
        });
    };
    let lifted =
        Frozen { reason: reason.to_owned(), by: by.to_owned(), at: Utc::now(), ..periods.remove(found) };
    let table = write(table, &periods, ledger::freeze_commit(&lifted, true)).await?;
    Ok((table, lifted))
}

async fn write(
    table: DeltaTable,
    periods: &[Frozen],
    commit: deltalake::kernel::transaction::CommitProperties,
) -> Result<DeltaTable, FreezeError> {
    let value = serde_json::to_string(periods).expect("periods serialize");
    Ok(crate::delta::commit::set_property(table, PROPERTY, value, commit).await?)
}
