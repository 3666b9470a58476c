//! A chain of backfills applied and undone as one: upstream first on the way in, downstream first
//! on the way out.
//!
//! Each table of a chain is its own backfill — own id, own ledger, own comment, its own exactly-once
//! slices — so a crash anywhere resumes where it stopped by applying the chain again: the tables
//! already applied skip every slice. What links them is `bf.cascade` (the chain's id) in every
//! commit, with `bf.upstream` and `bf.downstream` naming the neighbours, so a rollback finds the
//! tables built from the one it undoes from the tables' histories alone.

use url::Url;

use crate::apply::{Apply, ApplyError, ApplyProgress, ApplyReport};
use crate::delta::ledger::{self, Cascade};
use crate::delta::store::Stores;
use crate::fault::{fault, in_table};
use crate::rehearse::plan::Plan;
use crate::rollback::{self, RollbackError, RollbackPlan, RollbackReport};

/// Applies a saved plan and the plans downstream of it.
pub struct ChainApply<'a> {
    root: &'a Plan,
    rerun: bool,
    recompute: bool,
    cluster: Option<crate::cluster::Reached>,
    only: Option<std::collections::BTreeSet<usize>>,
    finish: bool,
    key: Option<super::receipt::StateKey>,
}

/// A chain's apply that stopped: at which table, and what the tables before it got.
#[derive(Debug, thiserror::Error)]
#[error("{table}: {source}")]
pub struct ChainApplyError {
    /// The table it stopped at (its name).
    pub table: String,
    /// Its position in the chain, from 0.
    pub position: usize,
    /// The tables applied before it, in apply order.
    pub applied: Vec<ApplyReport>,
    pub source: ApplyError,
}

/// Told when each table of a chain starts.
pub trait ChainProgress: ApplyProgress {
    fn table_started(&self, _plan: &Plan, _position: usize, _tables: usize) {}
}

impl ChainProgress for crate::apply::Silent {}

impl<A: ChainProgress + ?Sized, B: ChainProgress + ?Sized> ChainProgress for (&A, &B) {
    fn table_started(&self, plan: &Plan, position: usize, tables: usize) {
        self.0.table_started(plan, position, tables);
        self.1.table_started(plan, position, tables);
    }
}

impl<'a> ChainApply<'a> {
    pub fn new(root: &'a Plan) -> Self {
        ChainApply {
            root,
            rerun: false,
            recompute: false,
            cluster: None,
            only: None,
            finish: false,
            key: None,
        }
    }

    /// Each table's slice commits record the receipt of the state dir `key` is of
    /// ([`Apply::with_receipts`]).
    pub fn with_receipts(mut self, key: Option<super::receipt::StateKey>) -> Self {
        self.key = key;
        self
    }

    /// Only these slices of a plan without downstream plans ([`Apply::with_only`]).
    pub fn with_only(mut self, slices: Option<std::collections::BTreeSet<usize>>) -> Self {
        self.only = slices;
        self
    }

    /// The end of an apply whose slices ran as separate tasks ([`Apply::finishing`]).
    pub fn finishing(mut self, finish: bool) -> Self {
        self.finish = finish;
        self
    }

    pub fn with_rerun(mut self, rerun: bool) -> Self {
        self.rerun = rerun;
        self
    }

    pub fn with_recompute(mut self, recompute: bool) -> Self {
        self.recompute = recompute;
        self
    }

    /// Runs the queries of slices written by their queries on `cluster`.
    pub fn on_cluster(mut self, cluster: Option<crate::cluster::Reached>) -> Self {
        self.cluster = cluster;
        self
    }

    /// Every table's stale check first — a chain is not started that would stop at its second
    /// table — then each table's apply, in order. Fault points `before-table:N` (N from 0) crash
    /// between tables; `NAME/POINT` crashes at an apply point of the table named NAME only.
    pub async fn execute(self, progress: &dyn ChainProgress) -> Result<Vec<ApplyReport>, ChainApplyError> {
        let links = links(self.root);
        let stop = |position: usize, applied: Vec<ApplyReport>, source| ChainApplyError {
            table: name(&links[position].0.target.uri),
            position,
            applied,
            source,
        };
        if (self.only.is_some() || self.finish) && links.len() > 1 {
            return Err(stop(0, Vec::new(), ApplyError::FanOutChain));
        }
        // A chain of one is checked by its apply, once.
        for (position, (plan, cascade)) in links.iter().enumerate().filter(|_| links.len() > 1) {
            self.apply(plan, cascade).check().await.map_err(|e| stop(position, Vec::new(), e))?;
        }
        let mut applied = Vec::with_capacity(links.len());
        for (position, (plan, cascade)) in links.iter().enumerate() {
            fault(&format!("before-table:{position}"));
            progress.table_started(plan, position, links.len());
            let _table = in_table(&name(&plan.target.uri));
            match self.apply(plan, cascade).execute(progress).await {
                Ok(report) => applied.push(report),
                Err(error) => return Err(stop(position, applied, error)),
            }
        }
        Ok(applied)
    }

    fn apply<'p>(&self, plan: &'p Plan, cascade: &Option<Cascade>) -> Apply<'p> {
        Apply::new(plan)
            .with_rerun(self.rerun)
            .with_recompute(self.recompute)
            .on_cluster(self.cluster.as_ref())
            .with_cascade(cascade.clone())
            .with_only(self.only.clone())
            .finishing(self.finish)
            .with_receipts(self.key.clone())
    }
}

/// Each plan of the chain in apply order with its place in it; a plan without downstream plans
/// is a chain of one, and its commits carry no cascade keys.
fn links(root: &Plan) -> Vec<(&Plan, Option<Cascade>)> {
    if root.downstream.is_empty() {
        return vec![(root, None)];
    }
    fn walk<'p>(
        plan: &'p Plan,
        upstream: Option<&Plan>,
        id: &str,
        out: &mut Vec<(&'p Plan, Option<Cascade>)>,
    ) {
        out.push((
            plan,
            Some(Cascade {
                id: id.to_owned(),
                upstream: upstream.map(|u| u.target.uri.clone()),
                downstream: plan.downstream.iter().map(|d| d.target.uri.clone()).collect(),
            }),
        ));
        for downstream in &plan.downstream {
            walk(downstream, Some(plan), id, out);
        }
    }
    let mut out = Vec::new();
    walk(root, None, &root.id, &mut out);
    out
}

/// A backfill of a chain still in place on a table built from the one being rolled back.
struct Live {
    table: Url,
    backfill_id: String,
}

/// The chain's backfills still in place on the tables built from `plan`'s table (directly or
/// further down), in the order to undo them: the last applied first. A table that has no backfill
/// of the chain, or has one already rolled back, is not listed.
async fn live_downstream(
    plan: &RollbackPlan,
    stores_for: &(dyn Fn(&Url) -> Stores + Sync),
) -> Result<Vec<Live>, RollbackError> {
    let mut found = Vec::new();
    let Some(cascade) = &plan.backfill.backfill.cascade else { return Ok(found) };
    let mut pending: Vec<String> = cascade.downstream.clone();
    // Breadth of the walk is bounded by the chain recorded in the commits: each table once.
    let mut seen: Vec<String> = Vec::new();
    while let Some(uri) = pending.first().cloned() {
        pending.remove(0);
        if seen.contains(&uri) {
            continue;
        }
        seen.push(uri.clone());
        let url =
            Url::parse(&uri).map_err(|e| RollbackError::Delta(format!("a downstream table's URI: {e}")))?;
        let stores = stores_for(&url);
        let table = stores.open(&url, None).await?;
        // The chain's latest backfill of this table: the log read back until one is found.
        let of_chain = |e: &ledger::Entry| {
            e.backfill().is_some_and(|b| b.cascade.as_ref().is_some_and(|c| c.id == cascade.id))
        };
        let history =
            ledger::commits_back(&table, |read| read.iter().find(|e| of_chain(e)).map(|e| e.version)).await?;
        let Some(backfill_id) =
            history.iter().rfind(|e| of_chain(e)).and_then(|e| e.backfill()).map(|b| b.backfill_id.clone())
        else {
            continue;
        };
        let below = rollback::prepare(&stores, &url, &backfill_id).await?;
        if below.undone() {
            continue;
        }
        if let Some(theirs) = &below.backfill.backfill.cascade {
            pending.extend(theirs.downstream.iter().cloned());
        }
        found.push(Live { table: url, backfill_id });
    }
    // Found upstream first, level by level; undone the other way round.
    found.reverse();
    Ok(found)
}

/// Runs the rollbacks of `undo` (as [`with_downstream`] returns them) in order, once each has been
/// checked: a refusal on any table stops them all before the first writes. Each rollback verifies
/// its table; a failure after the first says which tables were rolled back.
pub async fn roll_back(
    undo: &[RollbackPlan],
    window_only: bool,
    force: bool,
) -> Result<Vec<RollbackReport>, RollbackError> {
    // Each rollback checks its table again as it starts: one table alone needs no check before.
    if undo.len() > 1 {
        for step in undo {
            step.check(window_only, force).await?;
        }
    }
    let mut reports: Vec<RollbackReport> = Vec::with_capacity(undo.len());
    for step in undo {
        let _table = in_table(&name(step.url.as_str()));
        let report = if window_only { step.window_only(force).await } else { step.restore().await };
        match report {
            Ok(report) => reports.push(report),
            Err(error) if reports.is_empty() => return Err(error),
            Err(error) => {
                let done: Vec<&str> = reports.iter().map(|r| r.table.as_str()).collect();
                return Err(RollbackError::Delta(format!(
                    "rolling back {}: {error}\nRolled back before it: {}. `bf rollback --cascade` again finishes the chain.",
                    step.table,
                    done.join(", ")
                )));
            }
        }
    }
    Ok(reports)
}

/// The rollbacks that undo `plan`'s backfill and the chain's backfills still in place below it, in
/// the order to run them: the last table applied first, `plan`'s own last.
pub async fn with_downstream(
    plan: RollbackPlan,
    stores_for: &(dyn Fn(&Url) -> Stores + Sync),
) -> Result<Vec<RollbackPlan>, RollbackError> {
    let live = live_downstream(&plan, stores_for).await?;
    let mut undo = Vec::with_capacity(live.len() + 1);
    for below in &live {
        undo.push(rollback::prepare(&stores_for(&below.table), &below.table, &below.backfill_id).await?);
    }
    undo.push(plan);
    Ok(undo)
}

/// Why a rollback is refused while tables built from the rows it would undo stay backfilled:
/// `undo` as [`with_downstream`] returns it.
pub fn refusal(undo: &[RollbackPlan]) -> String {
    let (plan, live) = undo.split_last().expect("the rollback's own table");
    let listed: Vec<String> = live
        .iter()
        .rev()
        .map(|l| {
            format!("  {} ({}): backfill {}", name(l.url.as_str()), l.table, l.backfill.backfill.backfill_id)
        })
        .collect();
    format!(
        "{}'s backfill {} has downstream backfills still in place, built from the rows this rollback would undo:\n{}\n\
         Roll them back first, or run `bf rollback --cascade` to roll back the chain, downstream first. Nothing was written.",
        name(plan.url.as_str()),
        plan.backfill.backfill.backfill_id,
        listed.join("\n")
    )
}

fn name(uri: &str) -> String {
    Url::parse(uri).map(|u| crate::plan_file::chain::table_name(&u)).unwrap_or_else(|_| uri.to_owned())
}
