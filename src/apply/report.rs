//! What an apply tells: each slice's outcome as it lands, to whoever watches (the terminal, the
//! lineage events), and the report of the whole apply (the summary, `--json`, the notice).

use serde::Serialize;

use crate::rehearse::plan::Plan;
use crate::window::Slice;

/// What became of a slice in an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SliceStatus {
    /// This run committed it.
    Committed,
    /// An earlier run of the same backfill had committed it.
    Skipped,
}

/// What one slice's apply did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceOutcome {
    pub index: usize,
    pub first: String,
    pub last: String,
    pub status: SliceStatus,
    pub version: Option<u64>,
    pub rows: Option<u64>,
    pub source_rows: Option<u64>,
    /// What the slice's commit added, as the log records it; none for a slice committed before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<crate::delta::publish::Written>,
}

impl SliceOutcome {
    /// A slice committed before this run (by an earlier run, or another process).
    pub(super) fn skipped(slice: &Slice) -> SliceOutcome {
        SliceOutcome {
            index: slice.index,
            first: slice.first.to_string(),
            last: slice.last.to_string(),
            status: SliceStatus::Skipped,
            version: None,
            rows: None,
            source_rows: None,
            written: None,
        }
    }
}

/// What an apply did, for the summary and `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplyReport {
    pub backfill_id: String,
    pub table: String,
    pub pre_version: u64,
    pub post_version: u64,
    pub slices: Vec<SliceOutcome>,
    pub comment: Option<String>,
    /// The change log table the backfill was recorded in, if the plan names one.
    pub log_table: Option<String>,
    /// Whether an earlier run had applied the whole backfill: this one wrote nothing.
    pub already_applied: bool,
    /// Until when the backfill can be rolled back, as `bf status` says it; none for one task of a
    /// fan-out (its `--finish` says it), for a run that found the backfill applied already, or
    /// where the store could not tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<crate::rollback::Horizon>,
}

/// Told when the writing starts (the preflight passed), and about each slice as it starts and lands.
pub trait ApplyProgress: Sync {
    /// The apply will write under this backfill id (the plan's, or a rerun's).
    fn writing(&self, _plan: &Plan, _backfill_id: &str) {}
    /// A slice not in the table yet is about to be checked and written.
    fn slice_started(&self, _slice: &Slice) {}
    fn slice_done(&self, _outcome: &SliceOutcome) {}
}

/// Two watchers told the same things, in order (the terminal and the lineage).
impl<A: ApplyProgress + ?Sized, B: ApplyProgress + ?Sized> ApplyProgress for (&A, &B) {
    fn writing(&self, plan: &Plan, backfill_id: &str) {
        self.0.writing(plan, backfill_id);
        self.1.writing(plan, backfill_id);
    }
    fn slice_started(&self, slice: &Slice) {
        self.0.slice_started(slice);
        self.1.slice_started(slice);
    }
    fn slice_done(&self, outcome: &SliceOutcome) {
        self.0.slice_done(outcome);
        self.1.slice_done(outcome);
    }
}

/// Progress nobody watches.
pub struct Silent;
impl ApplyProgress for Silent {}
