//! The change log: one row per finished backfill in a Delta table of its own (`[record] log_table`),
//! for the people who ask "what was backfilled, when, why" across many tables.
//!
//! 1. Open the log table, or create it on first use; refuse one bf may not append to (the writer
//!    gate, checked before the backfill's first slice too).
//! 2. Skip when it already has a row for this backfill id (an apply resumed after its last slice).
//! 3. Append the row in one commit.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType as ArrowType, Date32Type, Field, Schema, TimeUnit};
use deltalake::datafusion::prelude::{SessionContext, col, lit};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{DataType, StructField, Transaction};
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};
use url::Url;

use crate::delta::store::Stores;

use crate::rehearse::plan::Plan;

/// One finished backfill.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub backfill_id: String,
    pub table: String,
    pub plan: Plan,
    /// The version to go back to: the plan's, or for a rerun the version it started at.
    pub pre_version: u64,
    pub post_version: u64,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub user: String,
}

/// Appends `row` to the log table at `url` unless it already holds it; returns whether it wrote.
pub async fn record(stores: &Stores, url: &Url, row: &LogRow) -> Result<bool, DeltaTableError> {
    let table = match stores.open(url, None).await {
        Ok(table) => {
            crate::delta::compat::check_appendable(&table)
                .await
                .map_err(|e| DeltaTableError::Generic(e.to_string()))?;
            table
        }
        Err(
            crate::delta::store::OpenError::NotATable { .. } | crate::delta::store::OpenError::Missing { .. },
        ) => create(stores, url).await?,
        Err(other) => return Err(DeltaTableError::Generic(other.to_string())),
    };
    if holds(&table, &row.backfill_id).await? {
        return Ok(false);
    }
    // The row's own transaction: two finishers appending it at once conflict instead of both landing.
    let once = CommitProperties::default()
        .with_cleanup_expired_logs(Some(false))
        .with_application_transaction(Transaction::new(format!("bf-log:{}", row.backfill_id), 1));
    let fallback = table.clone();
    match table.write(vec![batch(row)?]).with_save_mode(SaveMode::Append).with_commit_properties(once).await {
        Ok(_) => Ok(true),
        Err(error) => {
            let mut table = fallback;
            table.update_incremental(None).await?;
            match holds(&table, &row.backfill_id).await? {
                true => Ok(false),
                false => Err(error),
            }
        }
    }
}

/// Whether the log table holds a row for the backfill.
async fn holds(table: &DeltaTable, backfill_id: &str) -> Result<bool, DeltaTableError> {
    let rows = SessionContext::new()
        .read_table(table.table_provider().await?)?
        .filter(col("backfill_id").eq(lit(backfill_id.to_owned())))?
        .count()
        .await?;
    Ok(rows > 0)
}

fn columns() -> Vec<(&'static str, DataType, ArrowType)> {
    let text = || (DataType::STRING, ArrowType::Utf8);
    let number = || (DataType::LONG, ArrowType::Int64);
    let day = || (DataType::DATE, ArrowType::Date32);
    let time = || (DataType::TIMESTAMP, ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
    [
        ("backfill_id", text()),
        ("table", text()),
        ("window_start", day()),
        ("window_end", day()),
        ("reason", text()),
        ("pre_version", number()),
        ("post_version", number()),
        ("slices", number()),
        ("rows_before", number()),
        ("rows_after", number()),
        ("metrics_before", text()),
        ("metrics_after", text()),
        ("started_at", time()),
        ("finished_at", time()),
        ("user", text()),
        ("plan_sha256", text()),
    ]
    .into_iter()
    .map(|(name, (delta, arrow))| (name, delta, arrow))
    .collect()
}

async fn create(stores: &Stores, url: &Url) -> Result<DeltaTable, DeltaTableError> {
    if let Some(path) = crate::delta::store::local_path(url) {
        std::fs::create_dir_all(path).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    }
    let fields: Vec<StructField> =
        columns().into_iter().map(|(name, delta, _)| StructField::new(name, delta, true)).collect();
    stores
        .builder(url)?
        .build()?
        .create()
        .with_columns(fields)
        .with_comment("bf change log: one row per finished backfill")
        .with_save_mode(SaveMode::ErrorIfExists)
        .await
}

fn batch(row: &LogRow) -> Result<RecordBatch, DeltaTableError> {
    let plan = &row.plan;
    let text = |v: &str| Arc::new(StringArray::from(vec![v.to_owned()])) as ArrayRef;
    let number = |v: u64| Arc::new(Int64Array::from(vec![v as i64])) as ArrayRef;
    let day = |d| Arc::new(Date32Array::from(vec![Date32Type::from_naive_date(d)])) as ArrayRef;
    let time = |t: DateTime<Utc>| {
        Arc::new(TimestampMicrosecondArray::from(vec![t.timestamp_micros()]).with_timezone("UTC")) as ArrayRef
    };
    let json = |m| serde_json::to_string(m).unwrap_or_default();
    let values = vec![
        text(&row.backfill_id),
        text(&row.table),
        day(plan.window.start),
        day(plan.window.end),
        text(&plan.reason),
        number(row.pre_version),
        number(row.post_version),
        number(plan.slices.len() as u64),
        number(plan.total.before.rows),
        number(plan.total.after.rows),
        text(&json(&plan.total.before.metrics)),
        text(&json(&plan.total.after.metrics)),
        time(row.started_at),
        time(row.finished_at),
        text(&row.user),
        text(&plan.plan_file.sha256),
    ];
    let schema = Schema::new(
        columns().into_iter().map(|(name, _, arrow)| Field::new(name, arrow, true)).collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), values).map_err(|e| DeltaTableError::Generic(e.to_string()))
}
