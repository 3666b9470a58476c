//! Frozen periods: days of a table that a report was signed off against, which no backfill or
//! rollback may rewrite without a recorded approval.
//!
//! They live on the table itself, in the table property `bf.frozen` (a JSON list), so that any
//! engine reading the table reads them, and each freeze or unfreeze is one metadata commit carrying
//! the ledger's keys: who froze what, when and why, is the table's own history. A plan that must
//! rewrite frozen days says so in `[guards] unfreeze`, with who approved it and the ticket; the
//! override is shown in every rendering and written into every slice commit of the backfill.
//!
//! An approval opens its days to one backfill: the first whose slice commits carry it, as the
//! table's log records them after the approval's own commit. That backfill may resume and be rolled
//! back under it; any other plan, or a rerun, needs an approval of its own. (Approver, ticket and
//! days are public: were an approval a standing grant, any later pull request repeating them
//! would rewrite the signed-off days.)

use chrono::{NaiveDate, Utc};
use deltalake::DeltaTable;

use crate::delta::ledger::{self, Entry, Mark};
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
    #[error(
        "{table}: {what} would rewrite frozen days:\n{periods}\n\
         The approval the plan names was used already, and an approval opens its days to one backfill:\n{used}\n\
         Someone who can write the table records another for this backfill (`bf unfreeze --approved-by … --ticket …`), \
         then plans again."
    )]
    Spent { table: String, what: String, periods: String, used: String },
    #[error(
        "{table}: whether the approval {approval} was used cannot be told: its commit is no longer in the \
         table's log (delta.logRetentionDuration). Record it again (`bf unfreeze --approved-by … --ticket …`), \
         then plan again."
    )]
    ApprovalCleaned { table: String, approval: String },
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

/// Refuses rewriting `window` of the table where it is frozen, unless `unfreeze` is approved for
/// every frozen day of it by an approval no other backfill used; returns the frozen periods the
/// window touches (all of them approved). `by` is the backfill rewriting them — an apply resuming,
/// a rollback — or `None` for a plan not applied yet. `what` names the rewrite (`the plan's window
/// 2026-03-01..2026-03-31`).
pub async fn check(
    table: &DeltaTable,
    window: &Window,
    unfreeze: Option<&Unfreeze>,
    by: Option<&str>,
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
        (Some(asked), true) if !touched.is_empty() => {
            let spent = spent_periods(table, &touched, window, asked, by).await?;
            match spent.is_empty() {
                true => Ok(touched),
                false => Err(FreezeError::Spent {
                    table: table_name,
                    what: what.to_owned(),
                    periods: listed(&spent.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()),
                    used: spent
                        .iter()
                        .flat_map(|(_, used)| used)
                        .map(|u| format!("  - {u}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                }),
            }
        }
        _ => Ok(touched),
    }
}

/// One backfill's use of an approval: the first of its slice commits after the approval's own.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Use {
    pub approval: Approval,
    pub backfill_id: String,
    pub version: u64,
}

impl std::fmt::Display for Use {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} was used by backfill {} (version {})", self.approval, self.backfill_id, self.version)
    }
}

/// The periods of `touched` whose every approval granting `asked` some other backfill than `by`
/// used, each with those uses.
async fn spent_periods(
    table: &DeltaTable,
    touched: &[Frozen],
    window: &Window,
    asked: &Unfreeze,
    by: Option<&str>,
) -> Result<Vec<(Frozen, Vec<Use>)>, FreezeError> {
    let granting = |period: &Frozen| -> Vec<Approval> {
        let days = period.within(window).expect("a touched period holds days of the window");
        period.approvals.iter().filter(|a| a.grants(asked, &days)).cloned().collect()
    };
    let approvals: Vec<Approval> = touched.iter().flat_map(granting).collect();
    let uses = uses(table, &approvals).await?;
    let spent = |approval: &Approval| {
        uses.iter().find(|u| &u.approval == approval).filter(|u| Some(u.backfill_id.as_str()) != by).cloned()
    };
    Ok(touched
        .iter()
        .filter_map(|period| {
            let used: Option<Vec<Use>> = granting(period).iter().map(spent).collect();
            used.map(|used| (period.clone(), used))
        })
        .collect())
}

/// Which backfill used each of `approvals`, read from the table's log back to the oldest
/// approval's commit. Approvals are taken in the order they were recorded, and each backfill's
/// first slice commit carrying a matching `[guards] unfreeze` uses the oldest unused one recorded
/// before it: two identical approvals open their days to two backfills.
pub async fn uses(table: &DeltaTable, approvals: &[Approval]) -> Result<Vec<Use>, FreezeError> {
    if approvals.is_empty() {
        return Ok(Vec::new());
    }
    let recorded_at = |entries: &[Entry], approval: &Approval| {
        entries.iter().find_map(|e| match e.mark() {
            Ok(Some(Mark::Approved { approval: recorded })) if recorded == approval => Some(e.version),
            _ => None,
        })
    };
    let oldest = |entries: &[Entry]| -> Option<u64> {
        let found: Option<Vec<u64>> = approvals.iter().map(|a| recorded_at(entries, a)).collect();
        found.and_then(|versions| versions.into_iter().min())
    };
    let entries = ledger::commits_back(table, oldest).await?;
    let mut recorded: Vec<(u64, &Approval)> = Vec::new();
    for approval in approvals {
        let Some(version) = recorded_at(&entries, approval) else {
            return Err(FreezeError::ApprovalCleaned {
                table: crate::delta::store::display_url(table.table_url()),
                approval: approval.to_string(),
            });
        };
        recorded.push((version, approval));
    }
    // An approval overlapping two periods is recorded on both, in one commit.
    recorded.sort_by_key(|(version, _)| *version);
    recorded.dedup();
    let mut uses: Vec<Use> = Vec::new();
    for entry in &entries {
        let Some(backfill) = entry.backfill().filter(|_| entry.slice().is_some()) else { continue };
        let Some(asked) = &backfill.unfreeze else { continue };
        if uses.iter().any(|u| u.backfill_id == backfill.backfill_id) {
            continue;
        }
        let unused = recorded.iter().find(|(version, approval)| {
            *version < entry.version
                && approval.matches(asked)
                && !uses.iter().any(|u| &u.approval == *approval)
        });
        if let Some((_, approval)) = unused {
            uses.push(Use {
                approval: (*approval).clone(),
                backfill_id: backfill.backfill_id.clone(),
                version: entry.version,
            });
        }
    }
    Ok(uses)
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

/// The uses of every approval recorded on the table's frozen periods, for `bf status`: none where
/// the log no longer tells (an approval's commit cleaned up).
pub async fn uses_of_all(table: &DeltaTable, frozen: &[Frozen]) -> Vec<Use> {
    let approvals: Vec<Approval> = frozen.iter().flat_map(|p| p.approvals.iter().cloned()).collect();
    uses(table, &approvals).await.unwrap_or_default()
}
