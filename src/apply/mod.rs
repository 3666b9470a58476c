//! Stage: apply. In: a saved plan ([`crate::rehearse::plan::Plan`]) and the real table. Out: the
//! rehearsed slices committed to it, one recorded commit each, a change log row, an
//! [`ApplyReport`]. It may use every stage below it, rollback included (a [`cascade`] rolls a chain
//! back when one of its tables fails); nothing below uses it.
//!
//! Applying a saved plan to the real table: exactly once per slice, resumable, recorded.
//!
//! 1. Refuse a stale plan ([`check_stale`]): the plan file edited since `bf plan`, an input file
//!    changed, a file added to or removed from an input folder, a commit to a Delta input, or a check
//!    or guard that failed; and a change log table bf may not write.
//! 2. Read which slices of this backfill the table already holds (their Delta transactions): after a
//!    crash, those are skipped and the apply resumes at the first slice not committed. Each of them
//!    is counted again: a slice whose rows differ from the rehearsal's stops every resume, retry and
//!    finish ([`ApplyError::Unverified`]).
//! 3. Refuse, naming them, the pending slices another writer's commits since the plan touch
//!    ([`Watch`], the rule in [`crate::apply::staleness`]), and published slices whose files' predecessors
//!    are not committed. Commits that touch no pending slice never block.
//! 4. For each remaining slice, in the plan's order (N at a time with `parallel = N`, which `bf plan`
//!    only allows on tables partitioned by the date column): check again that no commit touches it,
//!    then publish the files its rehearsal wrote ([`Publisher`]: exactly what the plan showed) — or,
//!    with `--recompute` or on a rerun, run the source query and write the slice through the
//!    [`SliceWriter`] the rehearsal used — in one commit carrying the ledger and the slice's
//!    transaction, then verify the table holds as many rows of the slice as the rehearsal did.
//! 5. Last, in its own metadata commit, set the table comment from `[record] comment`. Never while
//!    slices run: a metadata commit makes concurrent writers fail.
//!
//! Every write is one Delta commit or nothing, so a crash at any point leaves the table at a slice
//! boundary, and the ledger says which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use deltalake::DeltaTable;
use futures::{StreamExt, TryStreamExt};

pub mod cascade;
pub mod change_log;
mod error;
mod order;
pub mod receipt;
mod report;
mod sign_off;
mod slice_run;
mod stale;
mod start;
use slice_run::SliceRun;
use stale::{TableNow, delta_input_versions};
use start::{refuse_older_format_unless_resuming, refuse_what_no_rollback_undoes};
pub mod staleness;
mod state;

pub use error::{ApplyError, Unverified};
pub use report::{ApplyProgress, ApplyReport, Silent, SliceOutcome, SliceStatus};
pub use sign_off::comment_text;
use sign_off::sign_off;
pub use stale::{Now, check_stale};
pub use state::{ApplyState, Status, cannot_publish, state, status};

use crate::apply::staleness::{Overtaken, Watch};
use crate::delta::ledger::{self, Backfill, Entry, Logged};
use crate::delta::publish::{Publisher, Recorded};
use crate::delta::store::{Stores, display_url};
use crate::delta::table;
use crate::plan_file;
use crate::rehearse::plan::{self, Plan};
use crate::rehearse::slice_writer::SliceWriter;
use crate::source::run::Source;
use crate::window::Slice;

/// Applies a saved plan.
pub struct Apply<'a> {
    plan: &'a Plan,
    rerun: bool,
    recompute: bool,
    /// Where the queries of slices written by their queries run: the operator's cluster.
    cluster: Option<crate::cluster::Cluster>,
    cascade: Option<ledger::Cascade>,
    /// Only these slices, by number: one task of a fan-out. The end of the apply waits for `finish`.
    only: Option<BTreeSet<usize>>,
    /// No slice: the end of an apply whose slices were applied one task each.
    finish: bool,
    /// The key of the state dir applying, whose receipt each slice commit records.
    key: Option<receipt::StateKey>,
}

/// What an apply found before writing: the plan as reviewed, the target, and its commits since the
/// plan, which the stale check held to be this plan's own.
struct Preflight {
    document: plan_file::PlanDocument,
    stores: Stores,
    target: DeltaTable,
    since: Vec<Entry>,
    log_url: Option<url::Url>,
    backfill: Backfill,
    /// The backfill's slices the table holds, each with the version that committed it.
    done: BTreeMap<usize, u64>,
    /// Whether slices are written by running their queries again: asked for, or because an earlier
    /// backfill of this plan already published the rehearsed files (a rerun).
    recompute: bool,
    watch: Watch,
}

impl<'a> Apply<'a> {
    pub fn new(plan: &'a Plan) -> Self {
        Apply {
            plan,
            rerun: false,
            recompute: false,
            cluster: None,
            cascade: None,
            only: None,
            finish: false,
            key: None,
        }
    }

    /// Applies only these slices (by number), each with every guarantee of a full apply; a slice
    /// already committed, by this process or another, is a success. The table comment and the
    /// change-log row wait for [`Apply::finishing`]: an orchestrator runs slices as its tasks.
    pub fn with_only(mut self, slices: Option<BTreeSet<usize>>) -> Self {
        self.only = slices;
        self
    }

    /// Writes no slice: refuses, naming them, while any slice is not committed, and then writes
    /// the table comment and the change-log row, once.
    pub fn finishing(mut self, finish: bool) -> Self {
        self.finish = finish;
        self
    }

    /// Records the receipt of the state dir `key` is of in each slice commit: what lets `bf
    /// rollback` there undo the backfill without being told which.
    pub fn with_receipts(mut self, key: Option<receipt::StateKey>) -> Self {
        self.key = key;
        self
    }

    /// Records the backfill's place in a chain in each of its commits.
    pub fn with_cascade(mut self, cascade: Option<ledger::Cascade>) -> Self {
        self.cascade = cascade;
        self
    }

    /// Runs each slice's query again and writes its rows, instead of publishing the rehearsed files.
    pub fn with_recompute(mut self, recompute: bool) -> Self {
        self.recompute = recompute;
        self
    }

    /// Runs the queries of slices written by their queries on `cluster`.
    pub fn on_cluster(mut self, cluster: Option<&crate::cluster::Reached>) -> Self {
        self.cluster = cluster.map(|c| c.cluster.clone());
        self
    }

    /// Re-applies every slice under a new backfill id, even those already committed.
    pub fn with_rerun(mut self, rerun: bool) -> Self {
        self.rerun = rerun;
        self
    }

    /// Refuses a stale plan, or a table bf may not write, without writing anything.
    pub async fn check(&self) -> Result<(), ApplyError> {
        self.preflight().await.map(drop)
    }

    async fn preflight(&self) -> Result<Preflight, ApplyError> {
        let plan = self.plan;
        // The plan as reviewed, read from the saved text (the file on disk was checked to match).
        let document = plan_file::parse(Path::new(&plan.plan_file.path), plan.plan_file.text.clone())
            .map_err(|e| ApplyError::Stale(format!("the saved plan's text no longer parses:\n{e}")))?;
        let url = url_of(plan)?;
        if let Some(pinned) = &plan.target.catalog {
            // The name must still mean the table rehearsed; resolving it lends its credentials too.
            crate::delta::catalog::check_pinned(pinned).await?;
        }
        let stores = document.stores();
        stores.require_safe_commits(&url)?;
        let several = match (&self.only, document.plan.slicing.parallel > 1) {
            (Some(_), _) => Some("slices applied as separate tasks (`--slice`, `--slices`)"),
            (None, true) => Some("`slicing.parallel` slices at once"),
            (None, false) => None,
        };
        stores.require_one_writer(&url, several)?;
        // The inputs are fingerprinted while the table's log is read.
        let files = plan.input_files();
        let hashing = {
            let stores = stores.clone();
            tokio::spawn(async move { plan::fingerprint_all(&stores, &files).await })
        };
        let target = stores.open(&url, None).await?;
        let target_now = TableNow::read(&target, plan.target.pre_version).await.map_err(ApplyError::Delta)?;
        stale::check_same_target(plan, &target_now)?;

        crate::delta::compat::check_writable(&target).await?;
        // The change log is written after the last slice: a log table bf may not write is refused
        // before the first.
        let log_url = match &document.plan.record.log_table {
            Some(written) => Some(crate::delta::catalog::locate(document.dir(), written).await?.url),
            None => None,
        };
        if let Some(log_url) = &log_url {
            stores.require_safe_commits(log_url)?;
            crate::delta::compat::check_log_table(&stores, log_url).await?;
        }
        // The commits since the plan, read once: the ledger's entries here, their files for the watch.
        let latest = target.version().unwrap_or(0);
        // Whole: a version cleaned up since the plan could have touched any slice.
        let logged = ledger::logged_after_whole(&target, plan.target.pre_version).await?;
        let since: Vec<Entry> = logged.iter().map(|l| l.entry.clone()).collect();
        let inputs_now =
            hashing.await.map_err(|e| ApplyError::Delta(format!("fingerprinting the inputs: {e}")))?;
        let folders_now = futures::future::join_all(plan.input_folders.iter().map(|f| f.now(&stores))).await;
        let delta_now = delta_input_versions(&stores, &plan.delta_inputs).await;
        check_stale(plan, &since, &Now { inputs: &inputs_now, folders: &folders_now, delta: &delta_now })?;

        let mut backfill = backfill_for(plan, &since, self.rerun, latest);
        backfill.cascade = self.cascade.clone();
        backfill.receipt = self.key.as_ref().map(|key| key.receipt(&backfill.backfill_id));
        // Days frozen since the plan, frozen beyond the plan's approval, or opened by an approval
        // another backfill used, stop it before any write.
        let what = format!("the saved plan's window {}", plan.window);
        let unfreeze = plan.unfreeze.as_ref();
        crate::delta::freeze::check(&target, &plan.window, unfreeze, Some(&backfill.backfill_id), &what)
            .await?;
        // A backfill undone since is not "already applied": its slices' commits are in the log, the
        // rows they wrote are not in the table.
        if let Some(recorded) =
            ledger::recorded(&since, &backfill.backfill_id).map_err(ledger::LedgerError::from)?
            && let Some(at) = ledger::undone_at(&since, &recorded)
        {
            return Err(ApplyError::RolledBack {
                backfill: backfill.backfill_id.clone(),
                at,
                plan_file: plan.plan_file.path.clone(),
            });
        }
        let slices = document.plan.slices();
        self.refuse_unknown_slices(&slices)?;
        let done = committed(&logged, &backfill, &slices);
        refuse_older_format_unless_resuming(plan, &since)?;
        // A backfill starts only while it can be undone. (One already begun is finished: stopping it
        // would leave the window half written, with no way back either.)
        if done.is_empty() {
            refuse_what_no_rollback_undoes(plan, &stores, &url, &target, &target_now).await?;
        }
        // An earlier backfill of this plan published the rehearsed files already: they are the
        // table's now, and what a rerun rewrites is whatever the table holds on those days.
        let republishing = since
            .iter()
            .filter_map(Entry::backfill)
            .any(|b| b.plan_id == plan.id && b.backfill_id != backfill.backfill_id);
        let recompute = self.recompute || republishing;
        if recompute {
            crate::delta::compat::check_deltalake_writes(
                &target,
                "recompute slices",
                "apply a saved plan as it was rehearsed (without --recompute), or plan again for a rerun",
            )?;
        }
        let watch = Watch::new(&plan.id, plan.target.pre_version, &target, &plan.target.date_column);
        watch.absorb(&logged, latest).await;
        let preflight =
            Preflight { document, stores, target, since, log_url, backfill, done, recompute, watch };
        let pending: Vec<&Slice> =
            slices.iter().filter(|s| !preflight.done.contains_key(&s.index) && self.chosen(s)).collect();
        self.refuse_out_of_order(&preflight, &pending)?;
        let mut overtaken = Vec::new();
        for slice in &pending {
            let watched = plan.watched(slice);
            let by =
                preflight.watch.check(&preflight.target, &watched, preflight.removes(plan, slice), 0).await?;
            if !by.is_empty() {
                overtaken.push((**slice, by));
            }
        }
        if !overtaken.is_empty() {
            return Err(self.overtaken(overtaken, preflight.done.len()));
        }
        // A slice committed but not as rehearsed stays a failure on every resume, retry and finish.
        let which = |s: &Slice| self.finish || self.chosen(s);
        let unverified =
            verify_committed(&preflight.target, &preflight.watch, &preflight.done, plan, &slices, which)
                .await?;
        if !unverified.is_empty() {
            return Err(ApplyError::Unverified(unverified));
        }
        // After the verification: a slice that differs from its rehearsal is named first.
        self.refuse_after_recomputed(&preflight, &pending).await?;
        Ok(preflight)
    }

    /// `--slice`/`--slices` naming a slice the plan does not have.
    fn refuse_unknown_slices(&self, slices: &[Slice]) -> Result<(), ApplyError> {
        let Some(only) = &self.only else { return Ok(()) };
        let unknown: Vec<String> =
            only.iter().filter(|i| !slices.iter().any(|s| s.index == **i)).map(usize::to_string).collect();
        match unknown.is_empty() {
            true => Ok(()),
            false => Err(ApplyError::NoSuchSlice { count: slices.len(), missing: unknown.join(", ") }),
        }
    }

    fn chosen(&self, slice: &Slice) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(&slice.index))
    }

    fn overtaken(&self, slices: Vec<(Slice, Overtaken)>, committed: usize) -> ApplyError {
        ApplyError::Overtaken { slices, committed, plan_file: self.plan.plan_file.path.clone() }
    }

    pub async fn execute(self, progress: &dyn ApplyProgress) -> Result<ApplyReport, ApplyError> {
        let started_at = chrono::Utc::now();
        let plan = self.plan;
        let preflight = self.preflight().await?;
        let url = url_of(plan)?;
        progress.writing(plan, &preflight.backfill.backfill_id);
        let finished_before =
            preflight.since.iter().any(|e| e.is_comment_of(&preflight.backfill.backfill_id));
        let (target, mut outcomes) = self.write_slices(&preflight, progress).await?;
        outcomes.sort_by_key(|o| o.index);
        let (target, comment, log_table) = match self.only {
            // One task of a fan-out: the comment and the change log are `finish`'s.
            Some(_) => (target, None, None),
            None => {
                let (target, comment, log_table) = sign_off(plan, &preflight, target, started_at).await?;
                (target, Some(comment), log_table)
            }
        };
        let pre_version = preflight.backfill.pre_version;
        let already_applied = finished_before && outcomes.iter().all(|o| o.status == SliceStatus::Skipped);
        // Until when it can be undone, said by the apply that finished the backfill: not by one task
        // of a fan-out, nor by a run that found it applied (`bf status` says it). From the tables in
        // hand: the one the apply ends with, and the one it started from, which is the pre-version
        // when nothing was committed between the plan and this apply. What cannot be told now is
        // left out, never an error: the backfill is applied.
        let rollback = match self.only.is_none() && !already_applied {
            false => None,
            true => {
                let within =
                    crate::rollback::Within { date_column: &plan.target.date_column, window: plan.window };
                crate::rollback::horizon_of(
                    &preflight.stores,
                    &target,
                    pre_version,
                    Some(&preflight.target),
                    within,
                )
                .await
                .ok()
            }
        };
        Ok(ApplyReport {
            backfill_id: preflight.backfill.backfill_id,
            table: display_url(&url),
            pre_version,
            post_version: target.version().unwrap_or(0),
            already_applied,
            slices: outcomes,
            comment,
            log_table,
            rollback,
        })
    }

    /// The slices this apply is asked for: those the table holds already reported as skipped, the
    /// others written one commit each (in order, or `slicing.parallel` at a time), each checked
    /// against what moved in the table before its commit. Returns the table after the last.
    async fn write_slices(
        &self,
        preflight: &Preflight,
        progress: &dyn ApplyProgress,
    ) -> Result<(DeltaTable, Vec<SliceOutcome>), ApplyError> {
        let plan = self.plan;
        let slices = preflight.document.plan.slices();
        let done = &preflight.done;
        let schema = table::arrow_schema(&preflight.target)?;
        let spec = &preflight.document.plan;
        let writer = SliceWriter::for_plan(spec);
        let generated = crate::delta::row_rules::generated_columns(&preflight.target);
        let source = Source::new(&preflight.document, schema)
            .with_computed_columns(generated.iter().map(String::as_str))
            .with_delta_inputs(&plan.delta_inputs)
            .on_cluster(self.cluster.as_ref());
        if self.finish {
            let missing: Vec<String> = slices
                .iter()
                .filter(|s| !done.contains_key(&s.index))
                .map(|s| format!("{} ({})", s.index, s.first))
                .collect();
            if !missing.is_empty() {
                return Err(ApplyError::Unfinished { count: missing.len(), missing: missing.join(", ") });
            }
        }
        let mut outcomes = Vec::with_capacity(slices.len());
        for slice in slices.iter().filter(|s| done.contains_key(&s.index) && self.chosen(s)) {
            let outcome = SliceOutcome::skipped(slice);
            progress.slice_done(&outcome);
            outcomes.push(outcome);
        }
        let pending: Vec<&Slice> =
            slices.iter().filter(|s| !done.contains_key(&s.index) && self.chosen(s)).collect();
        // Nothing pending (a resume of a finished apply, `--finish`) needs no rehearsal.
        let publisher = match preflight.recompute || pending.is_empty() {
            true => None,
            false => Some(
                publisher(
                    &preflight.stores,
                    plan,
                    pending.iter().map(|s| s.index),
                    Some(preflight.target.table_url()),
                )
                .await
                .map_err(ApplyError::Unpublishable)?,
            ),
        };
        let parallel = spec.slicing.parallel.max(1) as usize;
        let run = SliceRun {
            plan,
            preflight,
            source: &source,
            writer: &writer,
            publisher: publisher.as_ref(),
            progress,
            committed: Default::default(),
        };
        let mut target = preflight.target.clone();
        if parallel == 1 {
            // Each slice writes on the table the previous one returned: commits follow one another.
            for slice in pending {
                let (table, outcome) = run.apply(slice, target).await?;
                target = table;
                outcomes.push(outcome);
            }
        } else {
            // Each slice replaces its own partitions; deltalake rebases such commits on one another.
            let results: Vec<(DeltaTable, SliceOutcome)> =
                futures::stream::iter(pending.into_iter().map(|slice| run.apply(slice, target.clone())))
                    .buffer_unordered(parallel)
                    .try_collect()
                    .await?;
            outcomes.extend(results.into_iter().map(|(_, outcome)| outcome));
            target.load().await?;
        }
        Ok((target, outcomes))
    }
}

/// The backfill's slices the table holds, each with the version that committed it: named by the
/// backfill's commits since the plan, each confirmed by the slice's transaction in that same commit.
/// The commits since the plan are read once anyway; looking each transaction up in the table's
/// state instead replayed the whole log once per committed slice, which was most of a resume.
fn committed(since: &[Logged], backfill: &Backfill, slices: &[Slice]) -> BTreeMap<usize, u64> {
    since
        .iter()
        .filter(|l| l.entry.is_slice_of(&backfill.backfill_id))
        .filter_map(|l| Some((l.entry.slice()?.index, l)))
        .filter(|(index, _)| slices.iter().any(|s| s.index == *index))
        .filter(|(index, l)| l.has_transaction(&backfill.app_id(*index)))
        .map(|(index, l)| (index, l.entry.version))
        .collect()
}

/// Counts the rows of each committed slice `which` picks and returns those that differ from the
/// rehearsal's. A slice is counted in the table as it is now, unless a later commit of another
/// writer touched its days: then at the version that committed it, from that version's log alone.
/// An old version's data files may be gone (VACUUM) and its log cleaned up: where the log cannot
/// say, the count is unknown, and an unknown count never blocks a resume, a finish or a status.
async fn verify_committed(
    target: &DeltaTable,
    watch: &Watch,
    done: &BTreeMap<usize, u64>,
    plan: &Plan,
    slices: &[Slice],
    which: impl Fn(&Slice) -> bool,
) -> Result<Vec<Unverified>, ApplyError> {
    let mut unverified = Vec::new();
    for slice in slices.iter().filter(|s| which(s)) {
        let Some(&version) = done.get(&slice.index) else { continue };
        let Some(rehearsed) = plan.slices.iter().find(|r| r.index == slice.index) else { continue };
        let touched_since = !watch.check(target, slice, &[], version).await?.is_empty();
        let found = if touched_since {
            let mut then = target.clone();
            match then.load_version(version as _).await {
                Ok(()) => table::rows_in_slice_from_log(&then, &plan.target.date_column, slice).await?,
                Err(_) => None,
            }
        } else {
            Some(table::rows_in_slice(target, &plan.target.date_column, slice).await?)
        };
        let Some(found) = found else { continue };
        if found != rehearsed.after.rows {
            unverified.push(Unverified { slice: *slice, version, expected: rehearsed.after.rows, found });
        }
    }
    Ok(unverified)
}

fn url_of(plan: &Plan) -> Result<url::Url, ApplyError> {
    url::Url::parse(&plan.target.uri)
        .map_err(|e| ApplyError::Delta(format!("the saved plan's target URI: {e}")))
}

/// The publisher of the rehearsed slices, once it is sure it can publish every pending one: the
/// rehearsal the plan reviewed, unchanged, holding every file to publish. An apply names its
/// target, and the pending slices' files start being read ahead for it; `bf status` names none.
async fn publisher<'s>(
    stores: &'s Stores,
    plan: &Plan,
    pending: impl Iterator<Item = usize>,
    read_ahead_into: Option<&url::Url>,
) -> Result<Publisher<'s>, String> {
    let publications: Vec<&crate::delta::publish::Publication> = pending
        .map(|index| {
            plan.slices.iter().find(|r| r.index == index).and_then(|r| r.publication.as_ref()).ok_or_else(
                || {
                    "this plan was saved by a bf that did not record the rehearsed files to publish"
                        .to_owned()
                },
            )
        })
        .collect::<Result<_, _>>()?;
    let table_id =
        plan.rehearsal.table_id.as_deref().ok_or("the plan does not record its rehearsal's table id")?;
    let rehearsal =
        url::Url::parse(&plan.rehearsal.uri).map_err(|e| format!("the saved rehearsal URI: {e}"))?;
    let recorded = Recorded {
        plan_id: &plan.id,
        table_id,
        version: plan.rehearsal.version,
        date_column: &plan.target.date_column,
    };
    let publisher = Publisher::open(stores, &rehearsal, recorded, &plan.target.partition_columns).await?;
    publisher.check(publications.iter().copied()).await?;
    if let Some(target) = read_ahead_into {
        publisher.read_ahead(target, publications);
    }
    Ok(publisher)
}

/// The backfill this apply continues or starts. A resume keeps the id of the plan's latest backfill
/// in commit order (`-r10` after `-r9`, whatever their names sort as), and its pre-version; a first
/// apply takes the plan's id and the version the plan was made at; `--rerun` takes a new id and
/// the table's version as it starts (`latest`): undoing a rerun puts back the table it rewrote,
/// the first apply's rows, and leaves the first apply to be undone in its turn.
fn backfill_for(plan: &Plan, since: &[Entry], rerun: bool, latest: u64) -> Backfill {
    let earlier = ledger::backfill_ids(since, &plan.id);
    let (backfill_id, pre_version) = match (rerun, earlier.last()) {
        (false, Some(last)) => {
            let recorded = ledger::recorded(since, last).ok().flatten();
            (last.clone(), recorded.map_or(plan.target.pre_version, |r| r.backfill.pre_version))
        }
        (false, None) => (plan.id.clone(), plan.target.pre_version),
        (true, _) => (format!("{}-r{}", plan.id, earlier.len() + 1), latest),
    };
    Backfill {
        backfill_id,
        plan_id: plan.id.clone(),
        plan_sha256: plan.plan_file.sha256.clone(),
        pre_version,
        reason: plan.reason.clone(),
        window: plan.window,
        date_column: plan.target.date_column.clone(),
        slices: plan.slices.len(),
        cascade: None,
        unfreeze: plan.unfreeze.clone(),
        receipt: None,
    }
}
