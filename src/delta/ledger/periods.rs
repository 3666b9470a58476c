//! The periods the ledger records: days frozen on a table ([`Frozen`], also the value of the
//! table's `bf.frozen` property) and a plan's approval to rewrite some of them ([`Unfreeze`]).

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::window::Window;

/// Days of a table closed for rewriting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Frozen {
    /// The first frozen day; `None`: every day up to `to` (`bf freeze --through`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<NaiveDate>,
    pub to: NaiveDate,
    pub reason: String,
    /// Who froze it (the user running `bf freeze`), and when.
    pub by: String,
    pub at: DateTime<Utc>,
    /// Rewrites of some of these days an operator approved on the table (`bf unfreeze --approved-by`),
    /// each recorded in its own commit: what a plan's `[guards] unfreeze` must match. A plan file
    /// arrives in a pull request, so it can only ask; only someone who can write the table grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
}

/// An approval, recorded on the table, to rewrite frozen days for one ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// The first and last frozen day a backfill may rewrite under it.
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Who approved, and the ticket, as the plan's `[guards] unfreeze` must name them.
    pub approved_by: String,
    pub ticket: String,
    pub reason: String,
    /// Who recorded it (the user running `bf unfreeze`), and when.
    pub by: String,
    pub at: DateTime<Utc>,
}

impl Approval {
    /// Whether it grants what `asked` asks, for the frozen `days`: the same approver and ticket,
    /// and every one of those days.
    pub fn grants(&self, asked: &Unfreeze, days: &Window) -> bool {
        self.approved_by == asked.approved_by
            && self.ticket == asked.ticket
            && self.from <= days.start
            && days.end <= self.to
    }

    /// Whether a backfill recorded as asking `asked` was applied under this approval: the same
    /// approver and ticket, over some of its days.
    pub fn matches(&self, asked: &Unfreeze) -> bool {
        self.approved_by == asked.approved_by
            && self.ticket == asked.ticket
            && asked.from <= self.to
            && self.from <= asked.to
    }
}

impl std::fmt::Display for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}..{} approved by {} ({}), recorded by {} on {}",
            self.from,
            self.to,
            self.approved_by,
            self.ticket,
            self.by,
            self.at.format("%Y-%m-%d %H:%M UTC")
        )
    }
}

impl Frozen {
    /// The frozen days inside `window`, if any.
    pub fn within(&self, window: &Window) -> Option<Window> {
        let start = self.from.map_or(window.start, |from| from.max(window.start));
        let end = self.to.min(window.end);
        (start <= end).then_some(Window { start, end })
    }

    /// `2026-01-01..2026-03-31`, or `..2026-03-31` for a freeze through a day.
    pub fn period(&self) -> String {
        match self.from {
            Some(from) => format!("{from}..{}", self.to),
            None => format!("..{}", self.to),
        }
    }
}

impl std::fmt::Display for Frozen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (\"{}\", frozen by {} on {})",
            self.period(),
            self.reason,
            self.by,
            self.at.format("%Y-%m-%d %H:%M UTC")
        )
    }
}

/// A plan's approval to rewrite frozen days: the days it may rewrite, who approved, the ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unfreeze {
    /// The first and last frozen day the plan may rewrite.
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Who approved rewriting them, e.g. `"Dana Reyes (finance data lead)"`.
    pub approved_by: String,
    /// Where the approval is recorded, e.g. `"FIN-231"`.
    pub ticket: String,
}

impl Unfreeze {
    pub fn covers(&self, days: &Window) -> bool {
        self.from <= days.start && days.end <= self.to
    }
}

impl std::fmt::Display for Unfreeze {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{} approved by {} ({})", self.from, self.to, self.approved_by, self.ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    #[test]
    fn frozen_days_inside_a_window_and_the_approvals_that_cover_them() {
        let q1 = Frozen {
            from: None,
            to: day("2026-03-31"),
            reason: "Q1".into(),
            by: "dana".into(),
            at: Utc::now(),
            approvals: Vec::new(),
        };
        let march = Window { start: day("2026-03-01"), end: day("2026-03-31") };
        let april = Window { start: day("2026-04-01"), end: day("2026-04-30") };
        let straddling = Window { start: day("2026-03-25"), end: day("2026-04-05") };
        assert_eq!(q1.within(&march), Some(march));
        assert_eq!(q1.within(&april), None);
        assert_eq!(q1.within(&straddling), Some(Window { start: day("2026-03-25"), end: day("2026-03-31") }));
        let approved = Unfreeze {
            from: day("2026-03-01"),
            to: day("2026-03-31"),
            approved_by: "lead".into(),
            ticket: "FIN-1".into(),
        };
        assert!(approved.covers(&q1.within(&march).unwrap()));
        assert!(approved.covers(&q1.within(&straddling).unwrap()));
        let too_short = Unfreeze { to: day("2026-03-30"), ..approved };
        assert!(!too_short.covers(&q1.within(&march).unwrap()));
    }
}
