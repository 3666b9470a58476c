//! The ledger's record and its meaning: [`Keys`] spells every `bf.*` key once, for writing into a
//! commitInfo and for reading back, and [`Mark`] is what a commit's keys say it is. Reading is
//! strict: a key of the wrong type, or one a kind of commit needs and lacks, is an error, never a
//! default. It builds no commit and reads no table: that is `commit` and `log`.

use std::collections::HashMap;

use chrono::NaiveDate;
use deltalake::kernel::transaction::CommitProperties;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::periods::{Approval, Frozen, Unfreeze};
use crate::window::Window;

/// The prefix of every key bf writes into commitInfo.
const PREFIX: &str = "bf.";

/// Every key bf writes into a commit, spelled once. Stored as `bf.<field>` at the top level of
/// commitInfo and as one JSON object in `userMetadata`. Which keys a commit holds says what it is
/// ([`Mark`]); this record only carries them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Keys {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_column: Option<String>,
    /// How many slices the backfill has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slices: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_first: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_last: Option<NaiveDate>,
    /// The commit that sets the table comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<bool>,
    /// The backfill a rollback commit undoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_slice: Option<usize>,
    /// The version a `--to-version` RESTORE went back to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u64>,
    /// On a rehearsal's first commit: the table it rehearses, and at which version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rehearsal_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_version: Option<u64>,
    /// On a rehearsal's slice commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rehearsal: Option<bool>,
    /// On a slice commit: who committed it — the Airflow task (`airflow:<dag>/<task>#<try>`) when
    /// one ran it, else `<host>:<pid>` — for `bf status` when slices run as separate tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_by: Option<String>,
    /// On a slice commit: the receipt of the state dir that committed it (sha256 of that state
    /// dir's key and the backfill's id), by which `bf rollback` knows a backfill was applied from
    /// there, whatever a saved plan planted in it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// A backfill in a chain: the chain's id (its first plan's id)…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade: Option<String>,
    /// …the table it is built from, when it is downstream…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// …and the tables built from it, which a rollback must not leave built from undone rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downstream: Option<Vec<String>>,
    /// On a backfill's commits: the approval to rewrite frozen days it was applied with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfreeze: Option<Unfreeze>,
    /// A freeze's commit: the period frozen (`bf freeze`)…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frozen: Option<Frozen>,
    /// …or lifted (`bf unfreeze`), with who lifted it, when and why…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfrozen: Option<Frozen>,
    /// …or opened to one approved backfill (`bf unfreeze --approved-by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<Approval>,
}

/// What a commit bf made is, read from its keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Mark {
    /// One slice of a backfill applied to the table.
    Slice { backfill: Backfill, slice: RecordedSlice },
    /// The metadata commit that ends an apply: the table comment.
    Comment { backfill: Backfill },
    /// A step of undoing a backfill.
    Rollback { backfill_id: String, pre_version: u64, reason: String, step: RollbackStep },
    /// A RESTORE of an explicit version (`bf rollback --to-version`).
    RestoredTo { version: u64 },
    /// A rehearsal's first commit, the shallow clone.
    Clone { rehearsal_of: String, source_version: u64 },
    /// A slice written into a rehearsal.
    Rehearsal { plan_id: String, slice: usize },
    /// A period frozen (`bf freeze`), or lifted (`bf unfreeze`).
    Freeze { period: Frozen, lifted: bool },
    /// Frozen days opened to one approved backfill (`bf unfreeze --approved-by`).
    Approved { approval: Approval },
}

/// Which step of a rollback a commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackStep {
    /// The RESTORE of the pre-version.
    Restore,
    /// The comment that says the backfill was rolled back.
    Comment,
    /// One slice of a window-only rollback.
    Slice(RecordedSlice),
}

/// A slice as a commit records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordedSlice {
    pub index: usize,
    pub first: NaiveDate,
    pub last: NaiveDate,
}

/// `slice 3 (2026-03-15..2026-03-21)`, as a [`crate::window::Slice`] reads.
impl std::fmt::Display for RecordedSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slice {} ({})", self.index, crate::words::days(self.first, self.last))
    }
}

/// What identifies a backfill in the table's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backfill {
    pub backfill_id: String,
    pub plan_id: String,
    pub plan_sha256: String,
    pub pre_version: u64,
    pub reason: String,
    pub window: Window,
    /// The column the slices' predicates filter on: what a rollback puts back by.
    pub date_column: String,
    pub slices: usize,
    /// Its place in a chain of backfills, when its plan has downstream plans or is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade: Option<Cascade>,
    /// The approval to rewrite frozen days its plan carried, recorded in each of its commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfreeze: Option<Unfreeze>,
    /// The receipt of the state dir applying it, recorded in each slice commit it makes (each
    /// commit of a fanned-out apply carries its own task's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// A backfill's place in a chain: the tables above and below it were backfilled with it, and are
/// found again from the table's history alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cascade {
    /// The chain's id: its first plan's id, on every backfill of the chain.
    pub id: String,
    /// The table it is built from (a URI), when it is downstream.
    pub upstream: Option<String>,
    /// The tables built from it (URIs), in apply order.
    pub downstream: Vec<String>,
}

impl Keys {
    /// The commitInfo entries the keys are written as: `bf.<key>` entries and a `userMetadata`
    /// JSON string holding them all.
    pub fn metadata(&self) -> HashMap<String, Value> {
        let Value::Object(keys) = serde_json::to_value(self).expect("keys serialize") else {
            unreachable!("a struct serializes to an object")
        };
        let prefixed: serde_json::Map<String, Value> =
            keys.into_iter().map(|(k, v)| (format!("{PREFIX}{k}"), v)).collect();
        let user_metadata = Value::Object(prefixed.clone()).to_string();
        let mut metadata: HashMap<String, Value> = prefixed.into_iter().collect();
        metadata.insert("userMetadata".to_owned(), Value::String(user_metadata));
        metadata
    }

    /// Every commit bf makes to a table carries its keys, and leaves the table's log alone: deltalake
    /// would otherwise delete commits older than the log retention after it, and the log is the
    /// history a rollback and an audit read (and, under `checkpointProtection`, not bf's to delete).
    pub(super) fn commit(&self) -> CommitProperties {
        CommitProperties::default().with_metadata(self.metadata()).with_cleanup_expired_logs(Some(false))
    }

    /// The `bf.*` keys of a commitInfo, typed; `Ok(None)` when it has none (another writer's
    /// commit), an error naming the key when one holds a value of the wrong type.
    pub fn read(commit_info: &HashMap<String, Value>) -> Result<Option<Keys>, String> {
        match Keys::read_lenient(commit_info) {
            (keys, None) => Ok(keys),
            (_, Some(problem)) => Err(problem),
        }
    }

    /// The keys that read, and what is wrong with those that do not: a commit whose `bf.pre_version`
    /// is text still says whose it is, so the error can be reported for the right backfill.
    pub(super) fn read_lenient(commit_info: &HashMap<String, Value>) -> (Option<Keys>, Option<String>) {
        let mut ours: serde_json::Map<String, Value> = commit_info
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(PREFIX).map(|k| (k.to_owned(), v.clone())))
            .collect();
        if ours.is_empty() {
            return (None, None);
        }
        let mut problems = Vec::new();
        // Each round drops the key that failed; there are no more rounds than keys.
        for _ in 0..=ours.len() {
            match serde_path_to_error::deserialize::<_, Keys>(Value::Object(ours.clone())) {
                Ok(keys) => {
                    let problem = (!problems.is_empty()).then(|| problems.join("; "));
                    return (Some(keys), problem);
                }
                Err(error) => {
                    let key = error.path().to_string();
                    problems.push(format!("`{PREFIX}{key}`: {}", error.inner()));
                    if ours.remove(&key).is_none() {
                        break;
                    }
                }
            }
        }
        (Some(Keys::default()), Some(problems.join("; ")))
    }

    /// What the keys say the commit is; the error names the first key its kind needs and lacks.
    pub fn mark(&self) -> Result<Mark, String> {
        fn need<T: Clone>(value: &Option<T>, key: &str) -> Result<T, String> {
            value.clone().ok_or_else(|| format!("`{PREFIX}{key}` is missing"))
        }
        let slice = |index: &Option<usize>, key| -> Result<RecordedSlice, String> {
            Ok(RecordedSlice {
                index: need(index, key)?,
                first: need(&self.slice_first, "slice_first")?,
                last: need(&self.slice_last, "slice_last")?,
            })
        };
        if let Some(backfill_id) = &self.rollback_of {
            let step = match (self.rollback_slice, self.comment) {
                (Some(_), _) => RollbackStep::Slice(slice(&self.rollback_slice, "rollback_slice")?),
                (None, Some(true)) => RollbackStep::Comment,
                (None, _) => RollbackStep::Restore,
            };
            return Ok(Mark::Rollback {
                backfill_id: backfill_id.clone(),
                pre_version: need(&self.pre_version, "pre_version")?,
                reason: need(&self.reason, "reason")?,
                step,
            });
        }
        if let Some(backfill_id) = &self.backfill_id {
            let backfill = Backfill {
                backfill_id: backfill_id.clone(),
                plan_id: need(&self.plan_id, "plan_id")?,
                plan_sha256: need(&self.plan_sha256, "plan_sha256")?,
                pre_version: need(&self.pre_version, "pre_version")?,
                reason: need(&self.reason, "reason")?,
                window: Window {
                    start: need(&self.window_start, "window_start")?,
                    end: need(&self.window_end, "window_end")?,
                },
                date_column: need(&self.date_column, "date_column")?,
                slices: need(&self.slices, "slices")?,
                cascade: self.cascade.as_ref().map(|id| Cascade {
                    id: id.clone(),
                    upstream: self.upstream.clone(),
                    downstream: self.downstream.clone().unwrap_or_default(),
                }),
                unfreeze: self.unfreeze.clone(),
                receipt: self.receipt.clone(),
            };
            return match self.comment {
                Some(true) => Ok(Mark::Comment { backfill }),
                _ => Ok(Mark::Slice { slice: slice(&self.slice, "slice")?, backfill }),
            };
        }
        if let Some(version) = self.rollback_to {
            return Ok(Mark::RestoredTo { version });
        }
        if let Some(rehearsal_of) = &self.rehearsal_of {
            return Ok(Mark::Clone {
                rehearsal_of: rehearsal_of.clone(),
                source_version: need(&self.source_version, "source_version")?,
            });
        }
        if self.rehearsal == Some(true) {
            return Ok(Mark::Rehearsal {
                plan_id: need(&self.plan_id, "plan_id")?,
                slice: need(&self.slice, "slice")?,
            });
        }
        if let Some(period) = &self.frozen {
            return Ok(Mark::Freeze { period: period.clone(), lifted: false });
        }
        if let Some(period) = &self.unfrozen {
            return Ok(Mark::Freeze { period: period.clone(), lifted: true });
        }
        if let Some(approval) = &self.approved {
            return Ok(Mark::Approved { approval: approval.clone() });
        }
        Err(format!("its keys ({}) name no backfill, rollback, rehearsal or freeze", self.names().join(", ")))
    }

    fn names(&self) -> Vec<String> {
        match serde_json::to_value(self) {
            Ok(Value::Object(keys)) => keys.keys().map(|k| format!("{PREFIX}{k}")).collect(),
            _ => Vec::new(),
        }
    }
}
