//! What one commit did to a table's files and days, read from its log entry: the facts both the
//! apply's watch (`apply/staleness.rs`: is a slice still the plan's?) and a window-only rollback
//! (`rollback`: did another writer write inside the window?) judge by. A remove rarely repeats its
//! add's statistics, so the days of a removed file come from its add: in a commit read since, or
//! among the files live at an earlier version ([`files_at`]).

use std::collections::HashMap;

use chrono::NaiveDate;
use deltalake::{DeltaTable, DeltaTableError};
use serde_json::Value;

use crate::delta::ledger::{self, Logged};
use crate::delta::table::FileDates;

/// Whether a commit is the comment that ends another backfill's apply or rollback: bf sets the
/// table's description there and nothing else (deltalake's `UPDATE TABLE METADATA` of the
/// description), which changes no row and no column a slice writes. Planned side by side, the
/// April backfill was refused as stale over the March one's comment.
fn sets_a_comment_only(commit: &Logged) -> bool {
    use crate::delta::ledger::{Mark, RollbackStep};
    let comment = matches!(
        commit.entry.mark(),
        Ok(Some(Mark::Comment { .. } | Mark::Rollback { step: RollbackStep::Comment, .. }))
    );
    let only_metadata =
        commit.actions.iter().all(|a| a.get("metaData").is_some() || a.get("commitInfo").is_some());
    comment && commit.entry.operation == "UPDATE TABLE METADATA" && only_metadata
}

/// What one commit did to the table, as far as a slice cares.
#[derive(Debug, Clone)]
pub(crate) struct Footprint {
    pub(crate) version: u64,
    pub(crate) operation: String,
    pub(crate) timestamp: Option<i64>,
    /// What it changed of the table itself: `schema or properties`, `protocol`.
    table_changes: Vec<&'static str>,
    files: Vec<Touched>,
}

/// A file a commit added or removed.
#[derive(Debug, Clone)]
struct Touched {
    path: String,
    added: bool,
    data_change: bool,
    /// `None`: the action does not say (a remove without partition values or statistics); the file's
    /// add elsewhere in the log does.
    dates: Option<FileDates>,
}

impl Footprint {
    /// Reads a commit's actions; `column` is the date column's name in the log (its physical name
    /// under column mapping).
    pub(crate) fn of(commit: &Logged, column: &str) -> Footprint {
        let mut table_changes = Vec::new();
        let mut files = Vec::new();
        let comment_only = sets_a_comment_only(commit);
        for action in &commit.actions {
            if action.get("metaData").is_some() && !comment_only {
                table_changes.push("schema or properties");
            }
            if action.get("protocol").is_some() {
                table_changes.push("protocol");
            }
            for (kind, added) in [("add", true), ("remove", false)] {
                let Some(file) = action.get(kind) else { continue };
                let Some(path) = file.get("path").and_then(Value::as_str) else { continue };
                let partitions: HashMap<String, Option<String>> = file
                    .get("partitionValues")
                    .and_then(|p| serde_json::from_value(p.clone()).ok())
                    .unwrap_or_default();
                let stats = file.get("stats").and_then(Value::as_str);
                let dates = match FileDates::read(&partitions, stats, column) {
                    // A remove rarely repeats its add's statistics (Spark's keeps `numRecords`
                    // alone): its add says.
                    dates if !added && !dates.names_days() => None,
                    dates => Some(dates),
                };
                files.push(Touched {
                    path: decoded(path),
                    added,
                    data_change: file.get("dataChange").and_then(Value::as_bool).unwrap_or(true),
                    dates,
                });
            }
        }
        Footprint {
            version: commit.entry.version,
            operation: commit.entry.operation.clone(),
            timestamp: commit.entry.timestamp,
            table_changes,
            files,
        }
    }

    /// What it changed of the table itself, if anything: `schema or properties`, `protocol`.
    pub(crate) fn table_change(&self) -> Option<&'static str> {
        self.table_changes.first().copied()
    }

    /// The files it removed, whatever its `dataChange`.
    pub(crate) fn removed(&self) -> impl Iterator<Item = &str> {
        self.files.iter().filter(|f| !f.added).map(|f| f.path.as_str())
    }

    /// Whether it added or removed, as a change of data, a file that may hold rows of the days
    /// `first..=last` — by its date partition, else its statistics, else (a remove that names
    /// neither) by `dates_of`, the days of that file's add; a file of unknown days may hold any.
    /// Says which file and its days.
    pub(crate) fn touches_days(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        dates_of: &dyn Fn(&str) -> FileDates,
    ) -> Option<String> {
        self.files.iter().filter(|f| f.data_change).find_map(|file| {
            let dates = file.dates.unwrap_or_else(|| dates_of(&file.path));
            let verb = if file.added { "adds" } else { "removes" };
            dates.may_overlap(first, last).then(|| format!("{verb} {} {}", file.path, dates.describe()))
        })
    }

    /// The files it added, with their days: a later remove of one names no days of its own.
    pub(crate) fn added(&self) -> impl Iterator<Item = (&str, FileDates)> {
        self.files.iter().filter(|f| f.added).filter_map(|f| Some((f.path.as_str(), f.dates?)))
    }

    /// The files it removed whose action names no days: their adds say.
    pub(crate) fn undated_removes(&self) -> impl Iterator<Item = &str> {
        self.files.iter().filter(|f| !f.added && f.dates.is_none()).map(|f| f.path.as_str())
    }

    /// `version 7: WRITE at 2026-05-30 10:00:00 UTC`.
    pub(crate) fn describe(&self) -> String {
        format!("version {}: {}{}", self.version, self.operation, ledger::at(self.timestamp))
    }
}

fn decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned()
}

/// The days of each file live in the table at `version`, by path.
pub(crate) async fn files_at(
    table: &DeltaTable,
    version: u64,
    column: &str,
) -> Result<HashMap<String, FileDates>, DeltaTableError> {
    use futures::TryStreamExt;
    let mut then = table.clone();
    then.load_version(version as _).await?;
    let files: Vec<_> = then.get_active_add_actions_by_predicate(None).try_collect().await?;
    Ok(files
        .iter()
        .map(|f| {
            (
                decoded(f.path().as_ref()),
                FileDates::read(&f.partition_values_map(), f.stats().as_deref(), column),
            )
        })
        .collect())
}
