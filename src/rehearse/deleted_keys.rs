//! Deleted keys brought back: rows the backfill adds whose key a DELETE (or a MERGE's delete) in
//! the table's history removed.
//!
//! A reload from a raw export re-inserts what the export still holds, and an export made before a
//! deletion on request (GDPR) still holds the deleted user. Nothing in the rows says so; the
//! table's history does. For each delete in the log bf can still read, newest first, the keys it
//! removed within the days the backfill rewrites (the table just before it, less the table just
//! after it) are matched against the rows the backfill adds (keys the table does not hold at the
//! pre-version). Reading the table at those versions is what the change data feed would give for
//! the same commits, and needs no feed; where a version's files were vacuumed or its commits
//! cleaned up, the plan says what could not be checked instead of guessing.
//!
//! A finding fails the plan unless `[guards] allow_deleted_keys_back = true`, which shows it as a
//! warning.

use deltalake::DeltaTable;
use deltalake::datafusion::common::JoinType;
use deltalake::datafusion::logical_expr::Expr;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use serde::{Deserialize, Serialize};

use crate::delta::ledger::{self, Logged};
use crate::delta::predicate::window_predicate;
use crate::delta::store::Stores;
use crate::rehearse::error::RehearsalError;
use crate::window::Window;

/// How many commits back from the pre-version are read for deletes: a long history is read in
/// one request per commit, and the plan says where it stopped.
const COMMITS_READ: u64 = 2_000;

/// Key values shown per finding.
const SAMPLES: usize = 3;

/// What the history says about the keys the backfill adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeletedKeys {
    /// Each delete whose keys the backfill brings back, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub found: Vec<DeletedBack>,
    /// What of the history could not be checked, and why: `the log before version 12 was cleaned
    /// up`, `version 40's files were vacuumed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<String>,
}

/// One delete the backfill undoes in part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeletedBack {
    /// The delete's commit.
    pub version: u64,
    /// Its time, in milliseconds since the epoch, when its commit says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// `DELETE` or `MERGE`.
    pub operation: String,
    /// The rows the backfill adds whose key it removed.
    pub rows: u64,
    /// Some of those keys, as `order_id = 4242`.
    pub samples: Vec<String>,
}

impl DeletedBack {
    /// `51 rows re-add keys the DELETE of 2026-09-05 (version 311) removed (user_id = 4242)`.
    pub fn describe(&self) -> String {
        let when = self
            .timestamp
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| format!(" of {}", t.format("%Y-%m-%d")))
            .unwrap_or_default();
        let keys = match self.samples.is_empty() {
            true => String::new(),
            false => format!(
                " ({}{})",
                self.samples.join("; "),
                if self.rows as usize > self.samples.len() { "; …" } else { "" }
            ),
        };
        format!(
            "{} re-add{} keys the {}{when} (version {}) removed{keys}",
            crate::words::count(self.rows as usize, "row"),
            if self.rows == 1 { "s" } else { "" },
            self.operation,
            self.version,
        )
    }
}

/// Where the search runs: the target at the pre-version, the rehearsal, the key, and the days the
/// backfill rewrites.
pub struct Search<'a> {
    pub stores: &'a Stores,
    pub target: &'a DeltaTable,
    pub rehearsal: &'a DeltaTable,
    pub key: &'a [String],
    pub date_column: &'a str,
    pub rewritten: &'a [Window],
}

impl Search<'_> {
    /// The deletes in the history the backfill's added rows undo. `added`: the rows the
    /// comparison found added; none means nothing to look for.
    pub async fn run(&self, added: u64) -> Result<DeletedKeys, RehearsalError> {
        let mut result = DeletedKeys::default();
        if added == 0 || self.rewritten.is_empty() {
            return Ok(result);
        }
        let pre = self.target.version().unwrap_or(0);
        let first = (pre + 1).saturating_sub(COMMITS_READ);
        let logged = ledger::read_log(self.target, first..=pre).await.map_err(refused)?;
        let oldest = logged.first().map_or(pre + 1, |l| l.entry.version);
        if oldest > 0 {
            result.unchecked.push(match oldest > first {
                true => format!("the log before version {oldest} was cleaned up: deletes before it are not checked"),
                false => format!("only the last {COMMITS_READ} commits are read: deletes before version {oldest} are not checked"),
            });
        }
        let ctx = self.session().map_err(query)?;
        let brought_back = self.added_rows(&ctx).await.map_err(query)?;
        for delete in logged.iter().rev().filter(|l| deletes_rows(l)) {
            let (version, operation) = (delete.entry.version, &delete.entry.operation);
            match self.brought_back_from(&ctx, brought_back.clone(), version).await {
                Ok(None) => {}
                Ok(Some((rows, samples))) => result.found.push(DeletedBack {
                    version,
                    timestamp: delete.entry.timestamp,
                    operation: operation.clone(),
                    rows,
                    samples,
                }),
                // A version whose files were vacuumed, or whose commit was cleaned up.
                Err(problem) => result.unchecked.push(format!(
                    "the {operation} of version {version} cannot be checked: the table just before it cannot be \
                     read ({problem})"
                )),
            }
        }
        Ok(result)
    }

    /// The session the search reads in, reaching the target's and the rehearsal's stores.
    fn session(&self) -> deltalake::datafusion::error::Result<SessionContext> {
        let ctx = SessionContext::new_with_state(crate::delta::memory::session_state(None));
        for table in [self.target, self.rehearsal] {
            self.stores
                .register(&ctx, table.table_url())
                .map_err(|e| deltalake::datafusion::error::DataFusionError::External(e.problem.into()))?;
        }
        Ok(ctx)
    }

    /// How many of `added` rows re-add a key commit `version` removed, and some of those keys.
    async fn brought_back_from(
        &self,
        ctx: &SessionContext,
        added: DataFrame,
        version: u64,
    ) -> Result<Option<(u64, Vec<String>)>, String> {
        let url = self.target.table_url();
        let before = self.stores.open(url, Some(version - 1)).await.map_err(|e| e.to_string())?;
        let after = self.stores.open(url, Some(version)).await.map_err(|e| e.to_string())?;
        let found = async {
            let before = self.key_columns(self.rows(ctx, &before, "before_delete").await?)?;
            let after = self.key_columns(self.rows(ctx, &after, "after_delete").await?)?;
            let removed = before.except(after)?;
            let back = added.join(removed, JoinType::LeftSemi, &self.keys(), &self.keys(), None)?;
            let rows = back.clone().count().await? as u64;
            match rows {
                0 => Ok(None),
                _ => Ok(Some((rows, self.samples(back).await?))),
            }
        };
        found.await.map_err(|e: deltalake::datafusion::error::DataFusionError| e.to_string())
    }

    fn keys(&self) -> Vec<&str> {
        self.key.iter().map(String::as_str).collect()
    }

    /// The days rewritten, as one predicate.
    fn in_rewritten(&self) -> Expr {
        let mut runs = self.rewritten.iter().map(|w| window_predicate(self.date_column, w));
        let first = runs.next().expect("at least one run of days");
        runs.fold(first, Expr::or)
    }

    /// `table`'s rows within the rewritten days.
    /// Named `name`, so that two sides of a join never share a column's qualified name.
    async fn rows(
        &self,
        ctx: &SessionContext,
        table: &DeltaTable,
        name: &str,
    ) -> deltalake::datafusion::error::Result<DataFrame> {
        let provider = crate::delta::row_tracking::visible(table).await?;
        ctx.read_table(provider)?.alias(name)?.filter(self.in_rewritten())
    }

    fn key_columns(&self, rows: DataFrame) -> deltalake::datafusion::error::Result<DataFrame> {
        rows.select(self.key.iter().map(|k| key_column(k)).collect::<Vec<_>>())
    }

    /// The rows the rehearsal holds in the rewritten days whose key the pre-version does not.
    async fn added_rows(&self, ctx: &SessionContext) -> deltalake::datafusion::error::Result<DataFrame> {
        let after = self.rows(ctx, self.rehearsal, "rehearsal").await?;
        let before = self.key_columns(self.rows(ctx, self.target, "pre_version").await?)?;
        after.join(before, JoinType::LeftAnti, &self.keys(), &self.keys(), None)
    }

    /// Some of the keys found, as `order_id = 4242, day = 2026-03-01`.
    async fn samples(&self, back: DataFrame) -> deltalake::datafusion::error::Result<Vec<String>> {
        let sorted = self.key.iter().map(|k| key_column(k).sort(true, false));
        let keys = self
            .key_columns(back)?
            .distinct()?
            .sort(sorted.collect())?
            .limit(0, Some(SAMPLES))?
            .collect()
            .await?;
        let mut samples = Vec::new();
        for batch in keys {
            for row in 0..batch.num_rows() {
                let values: Vec<String> = self
                    .key
                    .iter()
                    .enumerate()
                    .map(|(i, name)| {
                        let value =
                            deltalake::datafusion::common::ScalarValue::try_from_array(batch.column(i), row)
                                .map(|v| v.to_string())
                                .unwrap_or_default();
                        format!("{name} = {value}")
                    })
                    .collect();
                samples.push(values.join(", "));
            }
        }
        Ok(samples)
    }
}

/// Whether another writer's commit removed rows by deleting them: a DELETE, or a MERGE whose
/// metrics count deleted target rows (one that does not say is read as one that may have).
fn deletes_rows(logged: &Logged) -> bool {
    let metric = |name: &str| {
        logged.actions.iter().find_map(|a| {
            let metrics = a.get("commitInfo")?.get("operationMetrics")?;
            let value = metrics.get(name)?;
            value.as_u64().or_else(|| value.as_str()?.parse().ok())
        })
    };
    match logged.entry.operation.as_str() {
        "DELETE" => metric("num_deleted_rows").or_else(|| metric("numDeletedRows")).is_none_or(|n| n > 0),
        "MERGE" => {
            metric("num_target_rows_deleted").or_else(|| metric("numTargetRowsDeleted")).is_none_or(|n| n > 0)
        }
        _ => false,
    }
}

/// A key column by its name, whatever its characters.
fn key_column(name: &str) -> Expr {
    Expr::Column(deltalake::datafusion::common::Column::new_unqualified(name))
}

fn refused(e: deltalake::DeltaTableError) -> RehearsalError {
    RehearsalError::Refused(format!("reading the table's history for deleted keys: {e}"))
}

fn query(e: impl std::fmt::Display) -> RehearsalError {
    RehearsalError::Query {
        what: "looking for deleted keys the backfill brings back".into(),
        message: e.to_string(),
    }
}
