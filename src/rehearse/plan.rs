//! The saved plan: what `bf plan` found, as data (Terraform's plan-as-a-value).
//!
//! A plan is built once by the rehearsal, saved as JSON, shown by `bf show`, and later checked by
//! `bf apply` against the world: the plan file's text (sha256), the target's version, the inputs'
//! fingerprints. Its field names are a contract (documented in the README); `format` changes when
//! they do.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::delta::store::{Location, Stores};
use crate::plan_file::WriteMode;
pub use crate::rehearse::blast_radius::BlastRadius;
use crate::rehearse::checks::CheckResult;
use crate::rehearse::clone::CloneMetrics;
use crate::rehearse::diff::{BreakdownRow, Measures, RowChanges, RowCounts};
pub use crate::rehearse::fingerprint::{InputFingerprint, fingerprint_all};
use crate::rehearse::guards::GuardResult;
use crate::source::run::{DeltaInput, FolderListing, SourceCounts};
use crate::window::Window;

/// The version of the saved plan's layout: 3 added downstream plans, which a bf reading format 2
/// would silently leave unapplied; 5 records which table each version it relies on is of, and
/// each slice's publication and blast radius; 6 the deleted keys a plan with a key brings back; 7
/// the days outside the window the queries return rows for; 8 the trend the charts draw.
pub const PLAN_FORMAT: u32 = 8;

/// The first format recording each slice's publication and blast radius.
pub const PUBLICATION_FORMAT: u32 = 5;

/// The first format recording the deleted keys a plan with a key brings back.
pub const DELETED_KEYS_FORMAT: u32 = 6;

/// The first format recording the days outside the window the queries return rows for.
pub const OUTSIDE_DAYS_FORMAT: u32 = 7;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    pub format: u32,
    /// Unique per `bf plan` run; the backfill id `bf apply` records derives from it.
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub plan_file: PlanFileRecord,
    pub reason: String,
    pub target: TargetRecord,
    pub window: Window,
    pub every: String,
    pub mode: WriteMode,
    pub rehearsal: RehearsalRecord,
    pub inputs: Vec<InputFingerprint>,
    /// The folders inputs read and the files in them: a file added after `bf plan` makes it stale.
    #[serde(default)]
    pub input_folders: Vec<FolderListing>,
    /// The Delta tables inputs read, at the version apply reads them at too.
    #[serde(default)]
    pub delta_inputs: Vec<DeltaInput>,
    /// In execution order.
    pub slices: Vec<SliceReport>,
    /// The whole window, before and after.
    pub total: BeforeAfter,
    /// The rows the backfill adds, removes and changes, its slices' summed: what the headline
    /// counts. Absent when its slices were not compared row by row (no `target.key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_changes: Option<RowCounts>,
    /// The deletes in the table's history whose keys the backfill's added rows bring back, and
    /// what of the history could not be checked; absent without `target.key` (and in plans saved
    /// before bf looked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_keys: Option<crate::rehearse::deleted_keys::DeletedKeys>,
    /// The days inside a slice of several days the backfill leaves without rows where the table
    /// holds some, with the rows they held: `allow_empty_slices` weighs them as it weighs slices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emptied_days: Vec<EmptiedDay>,
    /// The days outside the window the queries return rows for, which no slice writes:
    /// `allow_rows_outside_window` weighs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_days: Vec<crate::source::routes::OutsideDay>,
    /// Everything outside the window: must be equal before and after.
    pub outside_window: OutsideWindow,
    /// The `[diff] by` columns, and the window's change broken down by them, largest first.
    pub breakdown_by: Vec<String>,
    pub breakdown: Vec<BreakdownRow>,
    /// Rows and metrics before and after, period by period over the window and a few periods
    /// either side: what the charts draw. Absent from plans saved before format 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend: Option<crate::rehearse::diff::Trend>,
    pub checks: Vec<CheckResult>,
    pub guards: Vec<GuardResult>,
    /// What the whole backfill rewrites in the table: its slices' together.
    #[serde(default)]
    pub blast_radius: BlastRadius,
    /// The periods frozen on the table (`bf freeze`) that the window rewrites, and the plan's
    /// approval to rewrite them (`[guards] unfreeze`): a plan shows both, and a backfill records it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frozen: Vec<crate::delta::freeze::Frozen>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfreeze: Option<crate::delta::freeze::Unfreeze>,
    /// What the `--policy` folder's Rego policies decided about this plan, when it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Decision>,
    /// Why the plan cannot be applied; empty when it can.
    pub problems: Vec<String>,
    /// What a reviewer should know before applying, e.g. a retention shorter than `keep_undo_for`.
    pub warnings: Vec<String>,
    /// Where the rehearsal's time went.
    #[serde(default)]
    pub timings: PlanTimings,
    /// The plans of the tables built from this one (`[[downstream]]`), rehearsed on this plan's
    /// rehearsal, in apply order; each may have its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downstream: Vec<Plan>,
    /// The plan whose rehearsal this one's replaced, when that plan was never applied: a saved copy
    /// of it can no longer be published. Known to the `bf plan` run only; never saved.
    #[serde(skip)]
    pub replaced_rehearsal_of: Option<String>,
    /// Set on a preview (`bf plan --sample N`): which of the plan's slices it rehearsed. Its slices,
    /// totals and comparison are theirs alone; `bf apply` refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<crate::rehearse::sample::Preview>,
    /// Where the slices' source queries ran when not in bf's process: the operator's cluster
    /// (`BF_CLUSTER`), with the workers it had. The same engine and SQL either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ran_on: Option<crate::cluster::RanOn>,
}

/// Where `bf plan`'s time went, step by step, in milliseconds: what to make cheaper, measured on
/// every plan (`bf show --json`, and the benchmarks read it). Each slice is compared (and checked)
/// while the next one is written, so those steps overlap the writes and all of them may add up to
/// more than `total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanTimings {
    /// Opening the target, the writer gate, the change log's.
    pub open: u64,
    /// The shallow clone.
    pub clone: u64,
    /// Running the slices' source queries: where their rows fall, and a merge's key checks.
    pub source: u64,
    /// Writing the slices into the rehearsal.
    pub write: u64,
    /// Reading each slice's rehearsal commit and hashing its files, for `bf apply` to publish.
    pub record: u64,
    /// Before vs after: each slice's measures and row changes, the window, outside it, the breakdown.
    pub compare: u64,
    /// The plan's checks and the reconcile.
    pub checks: u64,
    /// The inputs' fingerprints.
    pub fingerprint: u64,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanFileRecord {
    pub path: String,
    pub sha256: String,
    pub text: String,
}

impl PlanFileRecord {
    /// Whether the plan file at `path` still holds the text this record pins (`sha256`).
    pub fn unchanged_on_disk(&self) -> bool {
        std::fs::read(&self.path).is_ok_and(|text| sha256_hex(&text) == self.sha256)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetRecord {
    pub uri: String,
    /// The table as the plan file names it (a path relative to the plan file, or a URI): how a
    /// pull-request comment names it, rather than the planning machine's absolute path.
    #[serde(default)]
    pub table: String,
    /// The version the plan was made against, and the one a rollback restores.
    pub pre_version: u64,
    /// The table's id when planned: a table dropped and created again at `uri` has another, and
    /// its versions are another table's (`delta::same_table`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_id: Option<String>,
    /// The sha256 of the pre-version's commit: a log rewound and written again has another commit
    /// under that number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_commit_sha256: Option<String>,
    pub date_column: String,
    pub key: Option<Vec<String>>,
    pub partition_columns: Vec<String>,
    /// The catalog's record of the table when the plan names it by its catalog name: `bf apply`
    /// refuses when the name has come to mean another table since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<crate::delta::catalog::CatalogTable>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RehearsalRecord {
    pub uri: String,
    /// The rehearsal's version after its last slice.
    pub version: u64,
    /// The rehearsal's table id: a rehearsal made again by another `bf plan` has another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_id: Option<String>,
    pub clone: CloneMetrics,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SliceReport {
    pub index: usize,
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub run_date: NaiveDate,
    pub predicate: String,
    pub source: SourceCounts,
    /// The slices whose queries return rows for this slice's days from files its own does not
    /// read, which this slice writes after its own ([`crate::source::routes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lenders: Vec<crate::source::routes::Lender>,
    pub before: Measures,
    pub after: Measures,
    /// With `target.key`: rows added, removed, changed.
    pub changes: Option<RowChanges>,
    /// What publishing the rehearsed slice into the target takes (`bf apply`); absent in plans
    /// saved by a bf that did not publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication: Option<crate::delta::publish::Publication>,
    /// What the slice's commit rewrites in the table; absent in plans saved before bf measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blast_radius: Option<BlastRadius>,
}

/// A day the backfill empties inside a slice of several days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EmptiedDay {
    pub day: NaiveDate,
    /// The rows the table holds on it at the pre-version.
    pub before: u64,
}

impl SliceReport {
    /// The slice it reports on.
    pub fn slice(&self) -> crate::window::Slice {
        crate::window::Slice {
            index: self.index,
            first: self.first,
            last: self.last,
            run_date: self.run_date,
        }
    }

    /// The slices lending it rows, among the plan's `slices`.
    pub fn lending(&self, slices: &[SliceReport]) -> Vec<crate::window::Slice> {
        slices
            .iter()
            .filter(|s| self.lenders.iter().any(|l| l.slice == s.index))
            .map(SliceReport::slice)
            .collect()
    }

    /// Its days and rows before and after, as the guards weigh them.
    pub fn rows(&self) -> crate::rehearse::guards::SliceRows {
        crate::rehearse::guards::SliceRows {
            first: self.first,
            last: self.last,
            before: self.before.rows,
            after: self.after.rows,
        }
    }
}

/// What Rego policies decided about a saved plan (`bf plan --policy`): `deny` stops it, `warn` is
/// shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decision {
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub warn: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BeforeAfter {
    pub before: Measures,
    pub after: Measures,
}

/// Rows outside the window, which a backfill must not move. Only files the slices rewrote can hold
/// such rows differently: every other file the rehearsal shares with the target is the same file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutsideWindow {
    /// The rows outside the window in the compared files: the target's files the slices replaced…
    pub before: Measures,
    /// …and the rehearsal's files that replaced them. All files, when they cannot be told apart.
    pub after: Measures,
    pub unchanged: bool,
    /// Files the target and the rehearsal share, not compared: they are the same files.
    #[serde(default)]
    pub shared_files: u64,
    #[serde(default)]
    pub replaced_files: u64,
    #[serde(default)]
    pub written_files: u64,
    /// Metrics that differ by no more than their floating-point rounding error, and by how much.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub within_error: Vec<String>,
}

impl OutsideWindow {
    /// The rows outside the window measured before and after: unchanged when they agree as far as
    /// the data can tell ([`Measures::same_as`]).
    pub fn compared(before: Measures, after: Measures) -> OutsideWindow {
        OutsideWindow {
            unchanged: before.same_as(&after),
            within_error: before.within_error(&after),
            before,
            after,
            ..OutsideWindow::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error(
        "no saved plan at {}: run `bf plan PLAN_FILE` first (a plan is saved in the state dir of the folder \
         `bf plan` ran in, `.bf/`, or where its `--out` said: run bf from that folder, or name it with \
         `--state-dir DIR`, or the file itself)",
        .0.display()
    )]
    Missing(PathBuf),
    #[error("cannot read the saved plan {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not a bf saved plan: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{} was saved by a bf with plan format {found}; this bf reads formats 1 to {PLAN_FORMAT}: run `bf plan` again", path.display())]
    Format { path: PathBuf, found: u32 },
    #[error("the saved plan's [storage] settings cannot be read: {0}")]
    Storage(String),
    #[error(
        "the saved plan's [storage] settings are not the operator's to use, so bf connects nowhere by them: {0}"
    )]
    StorageRefused(String),
    #[error("cannot save the plan to {}: {}", path.display(), crate::words::io_problem(path, source))]
    Write { path: PathBuf, source: std::io::Error },
}

/// The saved plan's JSON Schema, as committed in `schema/saved-plan.schema.json`: what conftest,
/// OPA and other tools read the saved plan by. Its `format` says which shape a saved plan has; the
/// number goes up with every change of the shape.
pub fn json_schema() -> String {
    let mut schema =
        schemars::generate::SchemaSettings::draft07().into_generator().into_root_schema_for::<Plan>();
    schema.insert("title".into(), "bf saved plan".into());
    schema.insert(
        "description".into(),
        format!("A plan `bf plan` saved (format {PLAN_FORMAT}): the rehearsal's outcome, which `bf apply` applies.").into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema is plain JSON");
    text.push('\n');
    text
}

impl Plan {
    /// The days another writer's commit must not touch for `slice` to be written: its own, or,
    /// for a plan that rewrites only some days of its window (`[slicing] only`), the whole window,
    /// days between included — what the README promises such a plan is watched over.
    pub fn watched(&self, slice: &crate::window::Slice) -> crate::window::Slice {
        let rewritten: i64 = self.slices.iter().map(|s| (s.last - s.first).num_days() + 1).sum();
        match rewritten < self.window.days() {
            true => crate::window::Slice { first: self.window.start, last: self.window.end, ..*slice },
            false => *slice,
        }
    }

    /// What `allow_empty_slices` weighs: each slice's rows before and after, and each day the
    /// backfill empties inside a slice of several days, as a slice of its own.
    pub fn emptied_rows(&self) -> Vec<crate::rehearse::guards::SliceRows> {
        let slices: Vec<_> = self.slices.iter().map(SliceReport::rows).collect();
        // A day of a slice emptied whole is named by its slice.
        let emptied_whole = |day: NaiveDate| {
            slices.iter().any(|s| s.first <= day && day <= s.last && s.after == 0 && s.before > 0)
        };
        let days = self.emptied_days.iter().filter(|d| !emptied_whole(d.day)).map(|d| {
            crate::rehearse::guards::SliceRows { first: d.day, last: d.day, before: d.before, after: 0 }
        });
        slices.iter().copied().chain(days).collect()
    }

    /// The source rows no slice writes because their day is outside the window: the days' counts,
    /// or in plans saved before they were recorded, the most any slice's query returned.
    pub fn rows_outside_window(&self) -> u64 {
        match self.outside_days.is_empty() {
            false => self.outside_days.iter().map(|d| d.rows).sum(),
            true => self.slices.iter().map(|s| s.source.outside_window).max().unwrap_or(0),
        }
    }

    /// How each column of the changed rows changed over the whole backfill, its slices' summed.
    pub fn column_changes(&self) -> Vec<crate::rehearse::diff::ColumnChange> {
        crate::rehearse::diff::ColumnChange::sum(
            self.slices.iter().filter_map(|s| s.changes.as_ref()).map(|c| c.column_changes.as_slice()),
        )
    }

    /// Whether `bf apply` may apply this plan and every plan downstream of it.
    pub fn appliable(&self) -> bool {
        self.chain().iter().all(|p| p.problems.is_empty())
    }

    /// Whether the rehearsal proved that applying this plan (downstream plans included) changes
    /// no row: every slice's rows compared one by one on the key, none added, removed or changed,
    /// and every measure the same. Without a key nothing is proven.
    pub fn proven_unchanged(&self) -> bool {
        self.chain().iter().all(|p| p.rows_proven_unchanged())
    }

    /// [`Plan::proven_unchanged`] for this plan's table alone.
    /// The rows its slices add, remove and change, summed; `None` when a slice was not compared by key.
    pub fn row_counts(&self) -> Option<RowCounts> {
        RowCounts::sum(self.slices.iter().map(|s| s.changes.as_ref()))
    }

    pub fn rows_proven_unchanged(&self) -> bool {
        self.slices.iter().all(|s| {
            s.before.same_as(&s.after)
                && s.changes.as_ref().is_some_and(|c| c.added + c.removed + c.changed == 0)
        })
    }

    /// Whether applying it (downstream plans included) would change any row.
    pub fn changes_data(&self) -> bool {
        self.chain().iter().flat_map(|p| &p.slices).any(|s| {
            !s.before.same_as(&s.after)
                || s.changes.as_ref().is_some_and(|c| c.added + c.removed + c.changed > 0)
        })
    }

    /// Leaves out every value read from the data — changed rows, a check's offending rows, the
    /// breakdown's groups, the group a column's changes sit in, the deleted keys brought back —
    /// keeping counts and metrics: for a plan of a pull request whose data a
    /// runner must not post (`--samples none`).
    pub fn keep_counts_only(&mut self) {
        for slice in &mut self.slices {
            if let Some(changes) = &mut slice.changes {
                changes.samples.clear();
                changes.column_changes.iter_mut().for_each(|c| c.within = None);
            }
        }
        for check in &mut self.checks {
            check.sample.clear();
        }
        self.breakdown.clear();
        for found in self.deleted_keys.iter_mut().flat_map(|d| &mut d.found) {
            found.samples.clear();
        }
        // The guard on them said which keys: said again without.
        for guard in self.guards.iter_mut().filter(|g| g.name == "allow_deleted_keys_back") {
            let Some(fresh) =
                crate::rehearse::guards::deleted_keys_back(guard.passed, self.deleted_keys.as_ref())
            else {
                continue;
            };
            let failed = |detail: &str| format!("guard {} failed: {detail}", guard.name);
            for problem in self.problems.iter_mut().filter(|p| **p == failed(&guard.detail)) {
                *problem = failed(&fresh.detail);
            }
            guard.detail = fresh.detail;
        }
        for downstream in &mut self.downstream {
            downstream.keep_counts_only();
        }
    }

    /// This plan and every plan downstream of it, in apply order (upstream first, then each
    /// downstream depth first).
    pub fn chain(&self) -> Vec<&Plan> {
        let mut all = vec![self];
        for downstream in &self.downstream {
            all.extend(downstream.chain());
        }
        all
    }

    /// Saves the plan as JSON, atomically: a reader never sees half a plan.
    pub fn save(&self, path: &Path) -> Result<(), SavedPlanError> {
        write_saved(path, serde_json::to_string_pretty(self).expect("a plan serializes"))
    }

    /// Asks the target's catalog, when the plan names the table by its catalog name, for the
    /// credentials its folder needs (lent to the stores, in memory). A location needs nothing.
    pub async fn reach_target(&self) -> Result<(), crate::delta::catalog::CatalogError> {
        let pinned = self.target.catalog.as_ref();
        if let Some(name) = pinned.and_then(crate::delta::catalog::CatalogTable::catalog_name) {
            crate::delta::catalog::resolve(&name).await?;
        }
        Ok(())
    }

    /// The stores the plan's tables and inputs are in, with the `[storage]` settings it was made
    /// with. A plan whose text no longer reads is an error, not the environment's defaults: those
    /// could reach another endpoint's bucket of the same name.
    ///
    /// The settings are the operator's to allow, as they are when a plan file is loaded: a saved
    /// plan planted in a state folder, read by `bf status`, `bf clean` or `bf rollback`, must not
    /// send the runner's credentials to an endpoint of its own.
    pub fn stores(&self) -> Result<Stores, SavedPlanError> {
        let planned = toml::from_str::<crate::plan_file::PlanFile>(&self.plan_file.text)
            .map_err(|e| SavedPlanError::Storage(e.message().to_owned()))?;
        let policy = crate::plan_file::confine::Policy::from_env(None)
            .map_err(|e| SavedPlanError::StorageRefused(e.to_string()))?;
        if let Some(issue) = policy.storage_issues(&planned.storage).into_iter().next() {
            return Err(SavedPlanError::StorageRefused(format!(
                "`{}`: {}; {}",
                issue.key,
                issue.message,
                issue.help.unwrap_or_default()
            )));
        }
        Ok(Stores::new(&planned.storage))
    }

    /// The plan's `[notify]`: who is told of its apply and rollback (a chain's first plan speaks for
    /// the chain).
    pub fn notify(&self) -> Option<crate::plan_file::Notify> {
        toml::from_str::<crate::plan_file::PlanFile>(&self.plan_file.text).ok()?.notify
    }

    /// The folder of the plan file, which its relative paths start from.
    pub fn plan_dir(&self) -> &Path {
        Path::new(&self.plan_file.path).parent().unwrap_or(Path::new("."))
    }

    /// The saved inputs as `(input, file)` pairs, to fingerprint them again.
    pub fn input_files(&self) -> Vec<(String, Location)> {
        self.inputs.iter().map(|i| (i.input.clone(), Location::resolve(Path::new("/"), &i.path))).collect()
    }

    pub fn load(path: &Path) -> Result<Plan, SavedPlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SavedPlanError::Missing(path.to_owned()),
            _ => SavedPlanError::Read { path: path.to_owned(), source },
        })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|source| SavedPlanError::Parse { path: path.to_owned(), source })?;
        let found = value.get("format").and_then(|f| f.as_u64()).unwrap_or(0) as u32;
        if !(1..=PLAN_FORMAT).contains(&found) {
            return Err(SavedPlanError::Format { path: path.to_owned(), found });
        }
        let mut plan: Plan = serde_json::from_value(value)
            .map_err(|source| SavedPlanError::Parse { path: path.to_owned(), source })?;
        // An apply an older bf started can still be resumed; say what it cannot check.
        if found == 1 {
            plan.warnings.push(
                "this plan was saved by an older bf (format 1): files added to input folders and commits to Delta \
                 inputs since `bf plan` are not detected; run `bf plan` again to record them"
                    .to_owned(),
            );
        }
        if found < 5 {
            plan.warnings.push(format!(
                "this plan was saved by an older bf (format {found}): the target or a Delta input dropped and \
                 created again at its place since `bf plan` is not detected; run `bf plan` again to record them"
            ));
        }
        Ok(plan)
    }
}

/// sha256 of a text, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes a saved plan's `text` to `path` whole or not at all (a partial file, then a rename).
pub(crate) fn write_saved(path: &Path, text: String) -> Result<(), SavedPlanError> {
    crate::rehearse::own_files::replace_file(path, (text + "\n").as_bytes())
        .map_err(|source| SavedPlanError::Write { path: path.to_owned(), source })
}
