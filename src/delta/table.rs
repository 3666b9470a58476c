//! Opening the Delta tables a plan names, and the facts about them every later step relies on.
//!
//! Opening is strict on purpose: a path that is not a Delta table, or a date column that is missing
//! or not a DATE, is refused here with a message naming the table and column, before anything is
//! cloned, read or written.

use chrono::NaiveDate;
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::LogicalFileView;
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use serde_json::Value;

pub use crate::delta::needed_files::{absolute_deletion_vector, files_needed, files_needed_within};
use crate::delta::predicate::slice_predicate;
use crate::delta::store::{OpenError, display_url};
use crate::window::Slice;

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The table could not be found or opened where the plan says it is.
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("cannot read the Delta table {location}: {source}")]
    Snapshot { location: String, source: Box<DeltaTableError> },
    #[error("the table {table} has no column `{column}`; its columns are {columns}")]
    NoDateColumn { table: String, column: String, columns: String },
    #[error(
        "the table {table}'s `{property}` is '{value}', which bf cannot read as Delta reads it ({problem}); how long a \
         rollback stays possible depends on it: set it to an interval such as 'interval 7 days'"
    )]
    Retention { table: String, property: &'static str, value: String, problem: String },
    #[error(
        "`{column}` in {table} is {found}, but the window filters on a DATE column; \
         use a DATE column as target.date_column{hint}"
    )]
    DateColumnType { table: String, column: String, found: String, hint: &'static str },
}

/// The table's Arrow schema.
pub fn arrow_schema(table: &DeltaTable) -> Result<SchemaRef, TableError> {
    let location = display_url(table.table_url());
    let snapshot = table
        .snapshot()
        .map_err(|source| TableError::Snapshot { location: location.clone(), source: Box::new(source) })?;
    Ok(snapshot.snapshot().arrow_schema())
}

/// The Spark engine that wrote the table, by its latest commits' `engineInfo` (`Apache-Spark/4.0.1
/// Delta-Lake/4.0.0`, `Databricks-Runtime/15.4`): its team writes Spark SQL.
pub async fn written_by_spark(table: &DeltaTable) -> Option<String> {
    use futures::StreamExt;
    let commits: Vec<_> = table.history(Some(20)).collect().await;
    commits.into_iter().filter_map(|commit| commit.ok()?.engine_info).find(|engine| {
        let engine = engine.to_ascii_lowercase();
        engine.starts_with("apache-spark") || engine.starts_with("databricks")
    })
}

/// Refuses a date column that is missing or is not a DATE.
pub fn check_date_column(table: &DeltaTable, column: &str) -> Result<(), TableError> {
    let schema = arrow_schema(table)?;
    let name = display_url(table.table_url());
    match schema.field_with_name(column) {
        Err(_) => Err(TableError::NoDateColumn {
            table: name,
            column: column.to_owned(),
            columns: schema.fields().iter().map(|f| format!("`{}`", f.name())).collect::<Vec<_>>().join(", "),
        }),
        Ok(field) if field.data_type() == &DataType::Date32 => Ok(()),
        Ok(field) => Err(TableError::DateColumnType {
            table: name,
            column: column.to_owned(),
            found: sql_type(field.data_type()),
            hint: date_column_hint(field.data_type()),
        }),
    }
}

/// Why the obvious alternatives are not taken, for the types people try.
fn date_column_hint(found: &DataType) -> &'static str {
    match found {
        // Which day an instant falls on depends on a time zone; replaceWhere, the rehearsal's
        // clone pruning and rollback would each have to agree on it. A DATE column (partitioning
        // by it makes slices cheap) says the day once, when the row is written.
        DataType::Timestamp(..) => {
            " (slicing a timestamp would make each slice's rows depend on a time zone: add a DATE \
             column, e.g. written as CAST(ts AS DATE) in UTC, and partition by it)"
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            " (text dates compare as text: '2026-3-1' sorts after '2026-03-31'; store them as DATE)"
        }
        _ => "",
    }
}

/// The partition columns of the table's latest metadata.
pub fn partition_columns(table: &DeltaTable) -> Vec<String> {
    table.snapshot().map(|s| s.metadata().partition_columns().to_vec()).unwrap_or_default()
}

/// A type name as SQL users write it.
pub fn sql_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BINARY".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP_NTZ".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Null => "NULL".into(),
        other => other.to_string(),
    }
}

/// How many of bf's commits the log may grow by past a checkpoint (deltalake writes its own every
/// `delta.checkpointInterval`, 100 by default). A deltalake commit reads the log since the last
/// checkpoint, so a run of slices paid more for each slice the longer it ran: 12 ms a slice of a
/// 365-day apply after a checkpoint, 22 ms before the next (docs/BENCHMARKS.md, W5).
pub const CHECKPOINT_EVERY: u64 = 20;

/// Writes a checkpoint of `table` (at its version) when the version is one in [`CHECKPOINT_EVERY`],
/// and returns the table to carry on with. Where deltalake's own commit wrote one there (the
/// table's interval), the kernel finds it and writes nothing. A checkpoint holds the state the log
/// already has, changes no row, and any writer may write one at any version. One that cannot be
/// written leaves the log as deltalake would have, longer to read: the slice is committed either
/// way, so its error is not the apply's.
///
/// After a checkpoint the table is loaded again from it, at the same version — not the latest: the
/// apply records this version as the slice's commit and, recomputing, reads the files that commit
/// wrote from it, so another writer's commit landing meanwhile would be taken for the slice's. A
/// table carried from commit to commit keeps, in deltalake 1.1, every commit's replayed files as a
/// batch of their own and replays them all again at the next write or scan: a year of daily slices
/// replayed 25 batches a slice at its start and 57 at its end, and each slice cost more the later
/// it came (docs/BENCHMARKS.md, "W5: the carried table's replay"). Loaded from the checkpoint it
/// starts again from one. A load that fails keeps the table as it was, which is the same state.
pub async fn checkpoint_when_due(table: DeltaTable) -> DeltaTable {
    let Some(version) = table.version() else { return table };
    if !(version + 1).is_multiple_of(CHECKPOINT_EVERY)
        || deltalake::checkpoints::create_checkpoint(&table, None).await.is_err()
    {
        return table;
    }
    let mut reloaded = DeltaTable::new(table.log_store());
    match reloaded.load_version(version).await {
        Ok(()) => reloaded,
        Err(_) => table,
    }
}

/// Brings `table` to the latest version of its log, as deltalake's `update_incremental` does, but
/// asks first whether there is one. Asked before every slice, when most often nothing has moved:
/// deltalake's update then still lists the log since its checkpoint and reads `_last_checkpoint`
/// again, two requests in a bucket, one a listing, which costs a server more than a read
/// (docs/BENCHMARKS.md, "S3: what the server's CPU says"). Versions follow one another with no gap — a commit writes
/// version N+1 only where it is absent — so no file for the next version means nothing newer:
/// one read answers. A read that fails (a store that refuses it) leaves it to deltalake's update.
pub async fn catch_up(table: &mut DeltaTable) -> Result<(), DeltaTableError> {
    if let Some(version) = table.version()
        && let Ok(None) = table.log_store().read_commit_entry(version + 1).await
    {
        return Ok(());
    }
    table.update_incremental(None).await
}

/// How many rows of `table` fall on the slice's days.
///
/// Apply asks after every commit, and reading the table back through deltalake cost 8% of an apply,
/// and 14% of a year of daily slices' (docs/BENCHMARKS.md), so the log answers when it can answer
/// exactly: from each file's date partition, or from its statistics when they put every row inside
/// the slice or none of them. A file the log cannot settle so (its range straddles the slice, as a
/// day's commit leaves the rest of a month's file; its statistics are missing) has its date column
/// alone read. Where that would not be the table's answer (a deletion vector hides some of a file's
/// rows, a file lies outside the table's folder, a partition value is not a day) deltalake reads
/// the table back.
pub async fn rows_in_slice(
    table: &DeltaTable,
    date_column: &str,
    slice: &Slice,
) -> Result<u64, DeltaTableError> {
    match rows_in_slice_from_files(table, date_column, slice).await? {
        Some(rows) => Ok(rows),
        None => read_back(table, date_column, slice).await,
    }
}

/// The slice's row count from the log and the date column of the files it does not settle, or
/// `None` when only deltalake's reader can count them.
pub async fn rows_in_slice_from_files(
    table: &DeltaTable,
    date_column: &str,
    slice: &Slice,
) -> Result<Option<u64>, DeltaTableError> {
    let Some(logged) = LogCount::read(table, date_column, slice).await? else { return Ok(None) };
    let store = table.log_store().object_store(None);
    let column = physical_name(table, date_column);
    let mut rows = logged.rows;
    for (path, size) in logged.unsettled {
        match rows_in_file(store.clone(), path, size, &column, slice).await? {
            Some(found) => rows += found,
            None => return Ok(None),
        }
    }
    Ok(Some(rows))
}

/// The slice's row count from the log alone, or `None` when some file's share is not in it.
pub async fn rows_in_slice_from_log(
    table: &DeltaTable,
    date_column: &str,
    slice: &Slice,
) -> Result<Option<u64>, DeltaTableError> {
    let logged = LogCount::read(table, date_column, slice).await?;
    Ok(logged.filter(|logged| logged.unsettled.is_empty()).map(|logged| logged.rows))
}

/// What one pass over the log settles of a slice's rows.
struct LogCount {
    /// The rows of the files the log settles.
    rows: u64,
    /// The files it does not, by path and size, each of which has the slice's days in its date
    /// column: each holds some rows of the slice, or may.
    unsettled: Vec<(deltalake::Path, u64)>,
}

impl LogCount {
    /// `None` at the first file whose rows in the slice only deltalake's scan can count: a deletion
    /// vector hides some of them (`numRecords` counts those too), its days are a partition's value
    /// (not in the file) that is not a day, or it lies outside the table's folder (a clone's).
    async fn read(
        table: &DeltaTable,
        date_column: &str,
        slice: &Slice,
    ) -> Result<Option<LogCount>, DeltaTableError> {
        let by_partition = partition_columns(table).iter().any(|c| c == date_column);
        let date_column = &physical_name(table, date_column);
        let mut files = table.get_active_add_actions_by_predicate(None);
        let mut logged = LogCount { rows: 0, unsettled: Vec::new() };
        while let Some(file) = files.try_next().await? {
            if file.deletion_vector_descriptor().is_some() {
                return Ok(None);
            }
            let share = if by_partition {
                partition_share(&file, date_column, slice)
            } else {
                statistics_share(&file, date_column, slice)
            };
            match share {
                Some(share) => logged.rows += share,
                None if by_partition || file.path().contains("://") => return Ok(None),
                None => logged.unsettled.push((file.object_store_path(), file.size() as u64)),
            }
        }
        Ok(Some(logged))
    }
}

/// How many rows of one data file fall on the slice's days, from its date column alone (a DATE is
/// a Date32 in Parquet, compared as the slice's predicate compares it: NULL is on no day). `None`
/// when the file has no such column by that name: the table's reader, which maps columns, answers.
async fn rows_in_file(
    store: std::sync::Arc<dyn deltalake::ObjectStore>,
    path: deltalake::Path,
    size: u64,
    column: &str,
    slice: &Slice,
) -> Result<Option<u64>, DeltaTableError> {
    let mut rows = 0;
    let found = crate::delta::data_file::each_day(store, path, size, column, |day| {
        if slice.first <= day && day <= slice.last {
            rows += 1;
        }
    })
    .await?;
    Ok(found.then_some(rows))
}

/// The slice's rows as deltalake's reader reads the table: the answer for any file.
async fn read_back(table: &DeltaTable, date_column: &str, slice: &Slice) -> Result<u64, DeltaTableError> {
    let rows = SessionContext::new()
        .read_table(table.table_provider().await?)?
        .filter(slice_predicate(date_column, slice))?
        .count()
        .await?;
    Ok(rows as u64)
}

/// What the log says of each live file's days and row count on one date column, read once: how
/// many rows each slice of a plan can hold at most is then a sum, not another pass over the log.
pub struct RowBounds(Vec<(FileDates, Option<u64>)>);

impl RowBounds {
    pub async fn read(table: &DeltaTable, date_column: &str) -> Result<RowBounds, DeltaTableError> {
        let column = &physical_name(table, date_column);
        let files: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await?;
        Ok(RowBounds(
            files
                .iter()
                .map(|file| {
                    let dates =
                        FileDates::read(&file.partition_values_map(), file.stats().as_deref(), column);
                    (dates, file.num_records().map(|n| n as u64))
                })
                .collect(),
        ))
    }

    /// At most how many rows the table holds in the slice: the row counts of every file that may
    /// hold some. `None` when such a file's count is not in the log.
    pub fn in_slice(&self, slice: &Slice) -> Option<u64> {
        self.0
            .iter()
            .filter(|(dates, _)| dates.may_overlap(slice.first, slice.last))
            .map(|(_, rows)| *rows)
            .sum()
    }
}

fn partition_share(file: &LogicalFileView, column: &str, slice: &Slice) -> Option<u64> {
    let share = FileDates::read(&file.partition_values_map(), None, column).share(slice.first, slice.last)?;
    // The share of a file in the slice's days is all its rows.
    if share == Share::All { file.num_records().map(|n| n as u64) } else { share.rows() }
}

fn statistics_share(file: &LogicalFileView, column: &str, slice: &Slice) -> Option<u64> {
    let stats = file.stats();
    FileDates::read(&std::collections::HashMap::new(), stats.as_deref(), column)
        .share(slice.first, slice.last)?
        .rows()
}

/// What a file's log entry says about the days of its rows on one date column: its partition value
/// when the table is partitioned by the column, else its statistics. The one reader of both, for
/// the clone (which files may hold a window's rows) and the slice counts (how many rows a file has
/// in a slice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileDates {
    /// Partitioned by the column: every row has this day (`None`: the NULL partition).
    Partition(Option<NaiveDate>),
    /// From statistics: rows, NULL dates and the range of the others, as far as they are recorded.
    Statistics { records: Option<u64>, nulls: Option<u64>, min: Option<NaiveDate>, max: Option<NaiveDate> },
    /// Neither: the file may hold any day.
    Unknown,
}

/// How much of a file falls on some days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    /// None of its rows.
    None,
    /// All its rows (a partition's file: the count is its `numRecords`).
    All,
    /// This many rows, from statistics.
    Rows(u64),
}

impl Share {
    fn rows(self) -> Option<u64> {
        match self {
            Share::None => Some(0),
            Share::Rows(n) => Some(n),
            Share::All => None,
        }
    }
}

impl FileDates {
    pub(crate) fn read(
        partition_values: &std::collections::HashMap<String, Option<String>>,
        stats: Option<&str>,
        column: &str,
    ) -> FileDates {
        // A value that does not parse as a day is treated as unknown, never as "no rows".
        if let Some(value) = partition_values.get(column) {
            return match value {
                None => FileDates::Partition(None),
                Some(day) => day.parse().map_or(FileDates::Unknown, |day| FileDates::Partition(Some(day))),
            };
        }
        let Some(stats) = stats.and_then(|s| serde_json::from_str::<Value>(s).ok()) else {
            return FileDates::Unknown;
        };
        // Statistics of a DATE are `YYYY-MM-DD`; of a timestamp, they start with it.
        let day = |key: &str| stats.get(key)?.get(column)?.as_str()?.get(..10)?.parse::<NaiveDate>().ok();
        FileDates::Statistics {
            records: stats.get("numRecords").and_then(Value::as_u64),
            nulls: stats.get("nullCount").and_then(|n| n.get(column)).and_then(Value::as_u64),
            min: day("minValues"),
            max: day("maxValues"),
        }
    }

    /// Whether these say which days the file's rows have: a date partition, or statistics with
    /// both a least and a greatest day.
    pub(crate) fn names_days(self) -> bool {
        matches!(self, FileDates::Partition(_) | FileDates::Statistics { min: Some(_), max: Some(_), .. })
    }

    /// Whether the file may hold rows of the days `first..=last`.
    pub(crate) fn may_overlap(self, first: NaiveDate, last: NaiveDate) -> bool {
        match self {
            FileDates::Partition(None) => false,
            FileDates::Partition(Some(day)) => first <= day && day <= last,
            FileDates::Statistics { min: Some(min), max: Some(max), .. } => min <= last && first <= max,
            FileDates::Statistics { .. } | FileDates::Unknown => true,
        }
    }

    /// The days the log gives the file, for messages: `(rows dated 2026-05-01 to 2026-05-07)`.
    pub(crate) fn describe(self) -> String {
        match self {
            FileDates::Partition(Some(day)) => format!("(rows dated {day})"),
            FileDates::Partition(None) => "(rows without a date)".to_owned(),
            FileDates::Statistics { min: Some(min), max: Some(max), .. } if min == max => {
                format!("(rows dated {min})")
            }
            FileDates::Statistics { min: Some(min), max: Some(max), .. } => {
                format!("(rows dated {min} to {max})")
            }
            FileDates::Statistics { .. } | FileDates::Unknown => {
                "(the log does not say which days its rows have, so it may hold any)".to_owned()
            }
        }
    }

    /// How many of the file's rows fall on the days `first..=last`, when the log settles it.
    fn share(self, first: NaiveDate, last: NaiveDate) -> Option<Share> {
        match self {
            FileDates::Partition(_) if !self.may_overlap(first, last) => Some(Share::None),
            FileDates::Partition(_) => Some(Share::All),
            FileDates::Statistics { records: Some(records), nulls, min, max } => match (min, max) {
                (Some(min), Some(max)) if max < first || min > last => Some(Share::None),
                // Null dates are in no slice; every other row lies between min and max.
                (Some(min), Some(max)) if first <= min && max <= last => {
                    records.checked_sub(nulls?).map(Share::Rows)
                }
                (None, None) if nulls == Some(records) => Some(Share::None),
                _ => None,
            },
            FileDates::Statistics { records: None, .. } | FileDates::Unknown => None,
        }
    }
}

/// The writer features each legacy writer version (before 7) implies, by the version that brought it.
const LEGACY_FEATURES: [(i64, &str); 7] = [
    (2, "appendOnly"),
    (2, "invariants"),
    (3, "checkConstraints"),
    (4, "changeDataFeed"),
    (4, "generatedColumns"),
    (5, "columnMapping"),
    (6, "identityColumns"),
];

/// What a table's protocol asks of its writers: the writer version and, from version 7, the named
/// writer features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterProtocol {
    pub version: i64,
    pub features: Vec<String>,
}

impl WriterProtocol {
    /// Read from the table's protocol action, as the log states it.
    pub fn of(state: &deltalake::table::state::DeltaTableState) -> Result<WriterProtocol, String> {
        let protocol = serde_json::to_value(state.protocol()).map_err(|e| e.to_string())?;
        let version = protocol
            .get("minWriterVersion")
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("no minWriterVersion in {protocol}"))?;
        let features = protocol
            .get("writerFeatures")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        Ok(WriterProtocol { version, features })
    }

    /// The features writers must honour: the named ones at version 7, and before it the ones each
    /// legacy version implies, whether or not the table uses them.
    pub fn required(&self) -> Vec<String> {
        if self.version >= 7 {
            return self.features.clone();
        }
        LEGACY_FEATURES
            .iter()
            .filter(|(since, _)| self.version >= *since)
            .map(|(_, f)| (*f).to_owned())
            .collect()
    }

    /// Whether writers must honour `feature`.
    pub fn requires(&self, feature: &str) -> bool {
        self.required().iter().any(|f| f == feature)
    }
}

/// Whether the table's files name their columns by physical names (column mapping by name or id):
/// read on their own, without the log's mapping, they do not show the table's columns.
pub fn maps_columns(table: &DeltaTable) -> bool {
    table.snapshot().is_ok_and(|state| {
        state
            .metadata()
            .configuration()
            .get("delta.columnMapping.mode")
            .is_some_and(|mode| !mode.eq_ignore_ascii_case("none"))
    })
}

/// Whether the log keys some partition value by a name other than its column's: column mapping
/// with a partition column whose physical name is not its name. deltalake 1.1's conflict check
/// panics on such a table (it looks partition values up by the column's name), so bf's writers
/// never let it run there.
pub fn partition_values_by_physical_name(table: &DeltaTable) -> bool {
    maps_columns(table) && partition_columns(table).iter().any(|c| physical_name(table, c) != *c)
}

/// The name `column` has in the table's files and in the log's partition values and statistics:
/// its physical name under column mapping, else the column itself.
pub fn physical_name(table: &DeltaTable, column: &str) -> String {
    use deltalake::kernel::MetadataValue;
    let physical = table.snapshot().ok().filter(|_| maps_columns(table)).and_then(|state| {
        match state.schema().field(column)?.metadata().get("delta.columnMapping.physicalName")? {
            MetadataValue::String(name) => Some(name.clone()),
            _ => None,
        }
    });
    physical.unwrap_or_else(|| column.to_owned())
}
