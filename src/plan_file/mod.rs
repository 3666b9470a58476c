//! Stage: the plan file. In: TOML text (one file, or a chain of them through `[[downstream]]`) and
//! the operator's [`confine::Policy`]. Out: a validated [`PlanDocument`] — or every issue, each at
//! its line — and a [`chain::Chain`]. Offline: it reads files, never a table.
//!
//! The plan file: the backfill a team reviews in a pull request, before anything runs.
//!
//! These types are the contract. serde reads a plan with them and schemars turns the same types, doc
//! comments included, into `schema/plan.schema.json`, so the file an editor checks against and the file
//! bf reads cannot drift apart.
//!
//! Reading a plan goes in two steps, like a compiler:
//! 1. [`load`] parses the TOML into these types. A syntax error, a wrong type or an unknown key stops
//!    here, with the file, line and column (and a "did you mean" for misspelt keys) — every such
//!    problem of the file at once: each is read past as if fixed (a misspelt key as the key it was
//!    meant to be, anything else blanked out) and the file read again.
//! 2. [`validate`](PlanFile::validate) checks every rule that needs the whole plan — window order, slice
//!    count against the guard, read-only SQL, metric names, … — and collects *all* the issues, each
//!    tied to the key it is about so the loader can point at its line.
//!
//! Nothing here touches a table: a plan can be checked offline, in CI, on a laptop without credentials.

pub mod bounds;
pub mod chain;
pub mod columns;
pub mod confine;
pub mod input_schema;
mod load;
pub mod read_only;
pub mod root;
pub mod scaffold;
mod schema;
mod source;
mod spans;
pub mod spark;
pub mod template;

pub(crate) use spans::key_segment;
mod validate;

use std::collections::BTreeMap;
use std::fmt;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::window::{Cadence, Order, RunOffset, Slice, Window};

pub use crate::dialect::Dialect;
pub use load::{PlanDocument, PlanFileError, load, parse, parse_within, written_from_here};
pub use schema::json_schema;
pub use source::{Format, Input, OutsideRows, Source};
pub use validate::Issue;

pub use crate::delta::store::{ConditionalPut, Location, Storage};

/// A backfill: which part of which Delta table is rewritten, why, from what, and how it is checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "bf plan file")]
pub struct PlanFile {
    /// Why the past is being rewritten, in one or two sentences (1 to 4000 characters). It is recorded
    /// in every commit bf makes and becomes the table's comment, so the person asking in June why March
    /// changed finds the answer in the table itself.
    #[schemars(length(min = 1, max = 4000))]
    pub reason: String,
    /// The Delta table to backfill.
    pub target: Target,
    /// The days the backfill may rewrite. Nothing outside them is written.
    pub window: WindowSpec,
    /// How the window is cut into slices: one slice is one run and one commit.
    pub slicing: Slicing,
    /// Where the corrected rows come from.
    pub source: Source,
    /// How each slice is written to the table.
    #[serde(default)]
    pub write: Write,
    /// Numbers compared before vs after for every slice. The row count is always compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Metric>,
    /// Rules the rehearsed slices must satisfy before the plan can be applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// How `bf plan` shows the changes row by row.
    #[serde(default)]
    pub diff: DiffSpec,
    /// Limits that stop a plan which is bigger or moves numbers more than expected.
    #[serde(default)]
    pub guards: Guards,
    /// Where `bf plan` rehearses the backfill.
    #[serde(default)]
    pub rehearsal: Rehearsal,
    /// What `bf apply` records in the table besides its commits.
    #[serde(default)]
    pub record: Record,
    /// How to reach tables and files in object stores (S3, Azure, GCS): non-secret settings only.
    #[serde(default, skip_serializing_if = "Storage::is_default")]
    pub storage: Storage,
    /// Tables built from this one that read the window, each a plan file of its own: rehearsed on
    /// this plan's rehearsal, shown with it, applied after it and rolled back before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downstream: Vec<Downstream>,
    /// Who is told, once per chain, when the backfill is applied or rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
}

/// A table built from this plan's target, backfilled with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Downstream {
    /// Its plan file, relative to this one: a complete plan, valid on its own, whose source reads
    /// this plan's target as a Delta input. `bf plan` runs it on this plan's rehearsal.
    #[schemars(length(min = 1))]
    pub plan: String,
}

/// Where the notice of an apply or a rollback goes. Give `webhook_env`, `file` or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Notify {
    /// The environment variable holding the webhook URL (Slack, Teams, Google Chat or any receiver
    /// of a JSON POST), e.g. `"FINANCE_BACKFILL_WEBHOOK"`. The URL is a secret: it never appears in
    /// a plan, a saved plan or bf's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_env: Option<String>,
    /// Who reads the tables, named in the notice, e.g. `["finance-analytics", "bi-dashboards"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
    /// A markdown file (relative to this plan file) the notice is also written to, replaced each time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The Delta table to backfill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The table's location: a folder path (relative to this plan file), or a URI: `file://`,
    /// `s3://bucket/path` (or `s3a://`), `abfss://container@account.dfs.core.windows.net/path` (or
    /// `az://`, `abfs://`, `azure://`), `gs://bucket/path`. Or its catalog name:
    /// `uc://catalog.schema.table` (Unity Catalog: `DATABRICKS_HOST` and `DATABRICKS_TOKEN` in the
    /// environment) or `glue://database.table` (AWS Glue: the AWS credentials in the environment).
    #[schemars(length(min = 1))]
    pub table: String,
    /// The column holding the business-event date (not the load time) that the window and the slices
    /// filter on, e.g. `order_date`. Its type in the table must be DATE.
    #[schemars(length(min = 1))]
    pub date_column: String,
    /// Columns that identify a row, e.g. `["order_id"]`. Enables the row-level diff (added, removed,
    /// changed rows) and is required by `write.mode = "merge"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub key: Option<Vec<String>>,
}

/// An inclusive range of days, written as TOML dates (`2026-03-01`, no quotes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// First day of the window, inclusive.
    pub start: PlanDate,
    /// Last day of the window, inclusive.
    pub end: PlanDate,
}

/// How the window is cut into slices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Slicing {
    /// The length of one slice: `"day"`, `"week"` (ISO weeks, Monday to Sunday), `"month"`,
    /// `"quarter"`, `"year"` or `"<N> days"`. Calendar units follow the calendar; the first and last
    /// slices are clipped to the window.
    pub every: Cadence,
    /// Each slice's run date is its first day plus this offset, e.g. `"1 day"` for a daily job that
    /// runs the day after the day it loads. Shown in `bf slices` and available to inputs as
    /// `{run_date}`. Default `"0 days"`.
    #[serde(default)]
    pub run_offset: RunOffset,
    /// The order slices run in: `"forward"` (oldest first, the default) or `"backward"`.
    #[serde(default)]
    pub order: Order,
    /// How many slices `bf apply` writes at once (default 1). More than 1 needs a target partitioned
    /// by `target.date_column`, so that each slice replaces its own partitions; otherwise concurrent
    /// replaceWhere commits conflict.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub parallel: u32,
    /// Only the window's slices holding one of these days run, e.g. `only = [2026-03-14,
    /// 2026-07-04]`: the days `bf gaps --write-plan` found missing or thin, without rewriting the
    /// days between them. Each day must lie in the window. Empty (the default): every slice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<PlanDate>,
}

/// How each slice is written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Write {
    /// `"replace"` (default): each slice is one replaceWhere commit that swaps all the table's rows of
    /// those days for the source's. `"merge"`: each slice is one commit merging the source into the
    /// slice on `target.key` (matched rows take the source's values, new keys are inserted, the
    /// slice's other rows are kept).
    #[serde(default)]
    pub mode: WriteMode,
    /// With `mode = "merge"`: also delete the slice's rows whose key the source lacks (the key-based
    /// equivalent of replace). Default false: they are kept.
    #[serde(default)]
    pub delete_missing: bool,
}

/// See [`Write::mode`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    /// Replace the slice's days (Delta replaceWhere).
    #[default]
    Replace,
    /// Merge on `target.key` within the slice's days.
    Merge,
}

/// A number compared before vs after, per slice and in total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// A short name for reports and guards, e.g. `"revenue"`. `rows` is taken by the row count.
    #[schemars(length(min = 1))]
    pub name: String,
    /// A SQL aggregate over the table's columns, e.g. `"SUM(amount)"`.
    #[schemars(length(min = 1))]
    pub sql: String,
}

/// A rule every rehearsed slice must satisfy. Give exactly one of `unique`, `not_null` or `sql`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// What the check protects, shown in reports, e.g. `"one row per order"`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// These columns together identify at most one row of the slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub unique: Option<Vec<String>>,
    /// None of these columns is NULL in the slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub not_null: Option<Vec<String>>,
    /// A read-only query over the table `slice` that returns the offending rows; no rows means pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
}

/// How `bf plan` shows the changes row by row (needs `target.key` for added / removed / changed rows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffSpec {
    /// Columns to break each metric's change down by, largest part first, e.g. `["currency"]`
    /// shows "+1,210.20 in currency = USD → EUR" under the revenue's change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// How many changed rows to show per slice (default 5, at most 1000).
    #[serde(default = "default_samples")]
    #[schemars(range(max = 1000))]
    pub samples: u32,
}

impl Default for DiffSpec {
    fn default() -> Self {
        DiffSpec { by: Vec::new(), samples: default_samples() }
    }
}

const fn default_samples() -> u32 {
    5
}

/// Limits that stop a plan before it is applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Guards {
    /// The most slices this plan may have (default 100, like Databricks' backfill limit). A plan
    /// that needs more must say so here, so a typo in the window cannot start thousands of runs.
    #[serde(default = "default_max_slices")]
    #[schemars(range(min = 1))]
    pub max_slices: u32,
    /// Largest allowed change, in percent, per metric across the window (`rows` is the row count),
    /// e.g. `{ rows = 10, revenue = 5 }`. A bigger change fails the plan.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_change_pct: BTreeMap<String, f64>,
    /// Approval to rewrite days frozen on the table (`bf freeze`): the frozen days the window may
    /// rewrite, who approved it and the ticket, e.g. `{ from = 2026-03-01, to = 2026-03-31,
    /// approved_by = "Dana Reyes", ticket = "FIN-231" }`. Shown in every rendering of the plan and
    /// recorded in every commit of the backfill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfreeze: Option<Unfreeze>,
    /// The most bytes the backfill may write into the table (the files its slices add), e.g.
    /// `"50 GiB"`; a rehearsal that writes more fails the plan. The plan shows what each slice
    /// removes and adds either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_rewritten: Option<Size>,
    /// Let a slice end without rows where the table holds some: a corrections file holding only its
    /// header, or a day's file missing behind a folder input, empties its days. Off by default, so
    /// such a slice fails the plan (shown first); `true` when emptying those days is the fix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_empty_slices: bool,
    /// Let the backfill add rows whose key a DELETE (or a MERGE's delete) in the table's history
    /// removed: a reload from an export made before a deletion on request brings the deleted rows
    /// back. Off by default, so such rows fail the plan (shown first, naming the delete and some
    /// keys); `true` when bringing them back is the fix. Needs `target.key`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_deleted_keys_back: bool,
    /// Let the queries return rows for days outside the window, which no slice writes: inputs that
    /// knowingly cover more than the window. Off by default, so such rows fail the plan (shown
    /// first, naming their days), since they are usually a bug in the query — a time zone
    /// shifting dates, a missing filter. (`[source] outside_window = "skip"` is an older spelling.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_rows_outside_window: bool,
    /// How long `bf rollback` must stay possible after the apply, e.g. `"30 days"`. A table that
    /// keeps removed files (`delta.deletedFileRetentionDuration`) or its log
    /// (`delta.logRetentionDuration`) for less is refused before anything is rehearsed, with the
    /// `ALTER TABLE … SET TBLPROPERTIES` that would keep them long enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_rollback_for: Option<DayCount>,
}

/// A size as people write it: `"50 GiB"`, `"1 KiB"`, `"1.5 GB"`, or a number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        bytesize::ByteSize(self.0).display().iec().fmt(f)
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(deserializer)? {
            toml::Value::Integer(bytes) if bytes >= 0 => Ok(Size(bytes as u64)),
            toml::Value::String(text) => {
                text.parse::<bytesize::ByteSize>().map(|size| Size(size.as_u64())).map_err(|_| {
                    D::Error::custom(format!("\"{text}\" is not a size: write one like \"50 GiB\""))
                })
            }
            other => Err(D::Error::custom(format!("expected a size like \"50 GiB\", found {other}"))),
        }
    }
}

/// A plan's approval to rewrite frozen days, as the plan writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unfreeze {
    /// The first frozen day the plan may rewrite.
    pub from: PlanDate,
    /// The last frozen day the plan may rewrite.
    pub to: PlanDate,
    /// Who approved rewriting them, e.g. `"Dana Reyes (finance data lead)"`.
    #[schemars(length(min = 1))]
    pub approved_by: String,
    /// Where the approval is recorded, e.g. `"FIN-231"`.
    #[schemars(length(min = 1))]
    pub ticket: String,
}

impl Unfreeze {
    /// The approval as the saved plan and the backfill's commits record it.
    pub fn approval(&self) -> crate::delta::freeze::Unfreeze {
        crate::delta::freeze::Unfreeze {
            from: self.from.0,
            to: self.to.0,
            approved_by: self.approved_by.clone(),
            ticket: self.ticket.clone(),
        }
    }
}

/// Where the rehearsal runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rehearsal {
    /// The shallow clone `bf plan` rehearses on. Default: beside the target, named
    /// `<table>__rehearsal`. It is replaced by every `bf plan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
}

/// What `bf apply` records in the table besides its commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The table comment set after the last slice, in its own commit. Placeholders: `{reason}`,
    /// `{window}` (`2026-03-01..2026-03-31`), `{start}`, `{end}`, `{date}` (the day it was applied) and
    /// `{backfill_id}`. Cut to 4000 characters, the most a Delta table comment holds.
    #[serde(default = "default_comment")]
    pub comment: String,
    /// How long the undo must stay possible, e.g. `"7 days"` (the default). `bf plan` warns when the
    /// table keeps removed files (`delta.deletedFileRetentionDuration`) or its log
    /// (`delta.logRetentionDuration`) for less: once VACUUM runs past it, a rollback is impossible.
    #[serde(default = "default_keep_undo_for")]
    pub keep_undo_for: DayCount,
    /// A Delta table (a path relative to this plan, a URI, or a catalog name) that gets one row per
    /// finished backfill: id, table, window, reason, versions, metrics before and after, times,
    /// user. Created on first use (named by a catalog name, it must be registered first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_table: Option<String>,
}

/// A whole number of days, written `"7 days"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DayCount(pub u32);

impl TryFrom<String> for DayCount {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        match text.split_whitespace().collect::<Vec<_>>().as_slice() {
            [n, "day" | "days"] => {
                n.parse().map(DayCount).map_err(|_| format!("`{n}` is not a whole number of days"))
            }
            _ => Err(format!("`{text}` is not a number of days: write e.g. \"7 days\"")),
        }
    }
}

impl From<DayCount> for String {
    fn from(days: DayCount) -> String {
        format!("{} day{}", days.0, if days.0 == 1 { "" } else { "s" })
    }
}

const fn default_keep_undo_for() -> DayCount {
    DayCount(7)
}

/// The placeholders a comment template may use.
pub const COMMENT_PLACEHOLDERS: [&str; 6] = ["reason", "window", "start", "end", "date", "backfill_id"];

fn default_comment() -> String {
    "{reason} (backfill {backfill_id} of {window}, applied on {date})".to_owned()
}

impl Default for Record {
    fn default() -> Self {
        Record { comment: default_comment(), keep_undo_for: default_keep_undo_for(), log_table: None }
    }
}

/// A calendar day in a plan. TOML dates (`2026-03-01`) are the way to write it; a quoted
/// `"2026-03-01"` is accepted too, since editors and generators often produce one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanDate(pub NaiveDate);

const fn one() -> u32 {
    1
}

const fn default_max_slices() -> u32 {
    100
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            max_slices: default_max_slices(),
            max_change_pct: BTreeMap::new(),
            unfreeze: None,
            max_bytes_rewritten: None,
            allow_empty_slices: false,
            allow_deleted_keys_back: false,
            allow_rows_outside_window: false,
            keep_rollback_for: None,
        }
    }
}

impl PlanFile {
    pub fn window(&self) -> Window {
        Window { start: self.window.start.0, end: self.window.end.0 }
    }

    /// The plan's slices in execution order: the window's, or those holding a day of
    /// `slicing.only`, numbered 1, 2, … in calendar order either way.
    pub fn slices(&self) -> Vec<Slice> {
        let made = self.window().slices(self.slicing.every, self.slicing.run_offset);
        let only: std::collections::BTreeSet<NaiveDate> = self.slicing.only.iter().map(|day| day.0).collect();
        let slices = match only.last() {
            None => made.collect(),
            // Each slice asks the sorted days once, and the walk ends at the last day named: a long
            // `only` over a long window stays linear (every slice against every day was quadratic).
            Some(&last) => made
                .take_while(|slice| slice.first <= last)
                .filter(|slice| only.range(slice.first..=slice.last).next().is_some())
                .enumerate()
                .map(|(at, slice)| Slice { index: at + 1, ..slice })
                .collect(),
        };
        self.slicing.order.arrange(slices)
    }
}

impl fmt::Display for PlanDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// "an integer", "a string": TOML type names with their article.
fn article(noun: &str) -> String {
    let vowel = noun.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {noun}", if vowel { "an" } else { "a" })
}

/// `a`, `b`, `c`: how messages list names a user can write.
fn quoted(words: &[&str]) -> String {
    words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
}

impl Serialize for PlanDate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PlanDate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let example = "write a date like 2026-03-01";
        match toml::Value::deserialize(deserializer)? {
            toml::Value::Datetime(value) => match (value.date, value.time, value.offset) {
                (Some(date), None, None) => {
                    NaiveDate::from_ymd_opt(i32::from(date.year), u32::from(date.month), u32::from(date.day))
                        .map(PlanDate)
                        .ok_or_else(|| D::Error::custom(format!("{value} is not a day in the calendar")))
                }
                _ => Err(D::Error::custom(format!(
                    "`{value}` has a time of day, but windows are whole days: {example}"
                ))),
            },
            toml::Value::String(text) => text
                .parse::<NaiveDate>()
                .map(PlanDate)
                .map_err(|_| D::Error::custom(format!("\"{text}\" is not a date: {example}"))),
            other => Err(D::Error::custom(format!(
                "expected a date, found {}: {example}",
                article(other.type_str())
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_picks_the_slices_holding_its_days_numbered_in_calendar_order() {
        let text = "reason = \"r\"\n[target]\ntable = \"t\"\ndate_column = \"d\"\n[window]\nstart = 2026-01-01\n\
                    end = 2026-12-31\n[slicing]\nevery = \"week\"\nonly = [2026-03-25, 2026-03-05, 2026-03-06, 2026-03-05]\n\
                    [source]\ninputs = {}\nquery = \"SELECT 1\"\n";
        let plan: PlanFile = toml::from_str(text).unwrap();
        let slices = plan.slices();
        let firsts: Vec<(usize, String)> = slices.iter().map(|s| (s.index, s.first.to_string())).collect();
        // 03-05 and 03-06 share a week; the walk stops after the week of the last day named.
        assert_eq!(firsts, [(1, "2026-03-02".to_owned()), (2, "2026-03-23".to_owned())]);
    }
}
