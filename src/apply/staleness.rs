//! Whether the table is still the one the plan saw, slice by slice.
//!
//! A live table keeps being written while a backfill waits for review and while it runs: the daily
//! job loads today, another job appends, someone deletes a customer. Those commits must never be
//! lost or published over, and a commit that has nothing to do with a slice must never block it.
//! So staleness is judged per slice, against what each commit since the plan did, read from the log:
//!
//! A commit since the plan that is not one of this plan's own applies (its slices and comment, under
//! any backfill id) makes a slice stale when it
//! 1. changes the table's schema, properties or protocol (a `metaData` or `protocol` action): every
//!    slice is stale, since what the rehearsal wrote may no longer fit the table;
//! 2. removes a file the slice's publication removes (whatever its `dataChange`): the rows the
//!    rehearsal rewrote are not the table's any more — a rewrite, a compaction, a deletion vector;
//! 3. adds or removes, as a data change, a file that may hold rows of the slice's days — by its date
//!    partition, else by its statistics; a file with neither may hold any day.
//!
//! Commits that touch none of that — other days' appends, an OPTIMIZE of other days, a VACUUM —
//! never block. [`Watch`] reads each commit once and is asked before every slice's commit; commits
//! landing between that question and the commit itself are deltalake's conflict check's to catch.

use std::collections::{BTreeMap, HashMap, HashSet};

use deltalake::DeltaTable;
use tokio::sync::Mutex;

use crate::delta::footprint::{Footprint, files_at};
use crate::delta::ledger::{self, Logged};
use crate::delta::table::FileDates;
use crate::window::Slice;

/// Why `commit` makes the plan stale for `slice`, if it does (the rules above). `removes` are the
/// target's files the slice's publication removes (none when the slice is recomputed); `dates_of`
/// says the days of a removed file its action does not.
fn touches(
    commit: &Footprint,
    slice: &Slice,
    removes: &HashSet<&str>,
    dates_of: &dyn Fn(&str) -> FileDates,
) -> Option<String> {
    if let Some(change) = commit.table_change() {
        return Some(format!("changes the table's {change}"));
    }
    if let Some(path) = commit.removed().find(|path| removes.contains(path)) {
        return Some(format!("removes {path}, a file the slice replaces"));
    }
    commit.touches_days(slice.first, slice.last, dates_of)
}

/// The commits that make a slice stale, each with what it did; empty when the slice may commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overtaken(pub Vec<String>);

impl Overtaken {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Overtaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.iter().map(|c| format!("  - {c}")).collect::<Vec<_>>().join("\n"))
    }
}

/// The table's commits since the plan, read once each as the apply goes, and judged per slice.
pub struct Watch {
    plan_id: String,
    plan_version: u64,
    /// The date column as the log names it.
    column: String,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// The last version read.
    through: u64,
    /// Commits of other writers (and of other plans), oldest first.
    foreign: Vec<Footprint>,
    /// The days of every file added since the plan, by path.
    added: HashMap<String, FileDates>,
    /// The days of the files live at the plan's version, read only when a remove needs them.
    at_plan: Option<HashMap<String, FileDates>>,
    /// The slices this plan's applies committed, by backfill and slice number: a slice another
    /// process committed since this one read the table is done, not to be written twice.
    own_slices: HashMap<(String, usize), u64>,
}

impl Watch {
    /// Watches `table` (which names the date column by its physical name) for a plan made at
    /// `plan_version`.
    pub fn new(plan_id: &str, plan_version: u64, table: &DeltaTable, date_column: &str) -> Watch {
        Watch {
            plan_id: plan_id.to_owned(),
            plan_version,
            column: crate::delta::table::physical_name(table, date_column),
            seen: Mutex::new(Seen { through: plan_version, ..Seen::default() }),
        }
    }

    /// Reads the commits up to the version `table` is loaded at, and says which of those after
    /// version `after` make `slice` stale. `removes` are the target's files the slice's publication
    /// removes.
    pub async fn check(
        &self,
        table: &DeltaTable,
        slice: &Slice,
        removes: &[String],
        after: u64,
    ) -> Result<Overtaken, ledger::WholeLogError> {
        let mut seen = self.seen.lock().await;
        self.read_through(&mut seen, table).await?;
        let removes: HashSet<&str> = removes.iter().map(String::as_str).collect();
        // A file's days are its add's. Spark re-adds a file it gives a deletion vector under the same
        // path, often without statistics: the add at the plan's version then says.
        let known = |dates: &&FileDates| dates.names_days();
        if seen.at_plan.is_none()
            && seen
                .foreign
                .iter()
                .flat_map(|f| f.undated_removes())
                .any(|p| seen.added.get(p).filter(known).is_none())
        {
            seen.at_plan = Some(files_at(table, self.plan_version, &self.column).await?);
        }
        let dates_of = |path: &str| {
            let at_plan = || seen.at_plan.as_ref()?.get(path).filter(known);
            seen.added.get(path).filter(known).or_else(at_plan).copied().unwrap_or(FileDates::Unknown)
        };
        Ok(Overtaken(
            seen.foreign
                .iter()
                .filter(|f| f.version > after)
                .filter_map(|f| {
                    Some(format!("{}: {}", f.describe(), touches(f, slice, &removes, &dates_of)?))
                })
                .collect(),
        ))
    }

    /// The version that committed slice `index` of `backfill_id`, among the commits read so far
    /// (those up to the version of the last table checked).
    pub async fn committed(&self, backfill_id: &str, index: usize) -> Option<u64> {
        self.seen.lock().await.own_slices.get(&(backfill_id.to_owned(), index)).copied()
    }

    /// Every commit, or an error: a version cleaned up from the log could have touched any slice.
    async fn read_through(&self, seen: &mut Seen, table: &DeltaTable) -> Result<(), ledger::WholeLogError> {
        let latest = table.version().unwrap_or(0);
        if latest <= seen.through {
            return Ok(());
        }
        let commits = ledger::read_log_whole(table, seen.through + 1..=latest).await?;
        self.note(seen, &commits, latest);
        Ok(())
    }

    /// Takes in commits the caller already read from the log, through version `through`: the
    /// apply's preflight reads the commits since the plan once, for its ledger and for this watch.
    pub async fn absorb(&self, commits: &[Logged], through: u64) {
        let mut seen = self.seen.lock().await;
        self.note(&mut seen, commits, through);
    }

    fn note(&self, seen: &mut Seen, commits: &[Logged], through: u64) {
        for commit in commits.iter().filter(|c| c.entry.version > seen.through) {
            let footprint = Footprint::of(commit, &self.column);
            seen.added.extend(footprint.added().map(|(p, d)| (p.to_owned(), d)));
            let own = commit.entry.backfill().filter(|b| b.plan_id == self.plan_id);
            match (own, commit.entry.slice()) {
                // A slice of this plan's, with the slice's own transaction: bf wrote it, once.
                (Some(backfill), Some(slice)) if commit.has_transaction(&backfill.app_id(slice.index)) => {
                    seen.own_slices.insert((backfill.backfill_id.clone(), slice.index), commit.entry.version);
                }
                (Some(_), None) => {}
                // Another writer's, a commit that only copies bf's properties among them: a resume
                // that took one for its slice would skip a slice the table never got.
                _ => seen.foreign.push(footprint),
            }
        }
        seen.through = seen.through.max(through);
    }
}

/// The slices each slice must wait for when its files are published: a slice that removes a file
/// an earlier slice's rehearsal wrote (slices sharing the files of a table not partitioned by the
/// date) can only land after it. Keyed by slice number; only slices with predecessors appear.
pub fn predecessors<'p>(
    publications: impl IntoIterator<Item = (usize, &'p crate::delta::publish::Publication)>,
) -> BTreeMap<usize, Vec<usize>> {
    let publications: Vec<(usize, &crate::delta::publish::Publication)> = publications.into_iter().collect();
    let written_by: HashMap<&str, usize> = publications
        .iter()
        .flat_map(|(index, p)| p.adds.iter().map(move |f| (f.path.as_str(), *index)))
        .collect();
    let direct: BTreeMap<usize, Vec<usize>> = publications
        .iter()
        .map(|(index, p)| {
            let mut before: Vec<usize> =
                p.removes.iter().filter_map(|r| written_by.get(r.as_str()).copied()).collect();
            before.sort_unstable();
            before.dedup();
            (*index, before)
        })
        .filter(|(_, before)| !before.is_empty())
        .collect();
    // Waiting for a slice is waiting for what it waits for.
    direct
        .keys()
        .map(|index| {
            let mut all = Vec::new();
            let mut todo = direct[index].clone();
            while let Some(next) = todo.pop() {
                if !all.contains(&next) {
                    all.push(next);
                    todo.extend(direct.get(&next).into_iter().flatten().copied());
                }
            }
            all.sort_unstable();
            (*index, all)
        })
        .collect()
}
