//! How many rows a table holds on each day of a range: where `bf gaps` looks for missing and thin
//! days, and how `bf plan --sample` finds the window's largest slice.
//!
//! The log answers for most files without reading them: a file of a date partition holds its
//! `numRecords` on its day, and a file whose statistics put every row on one day holds them there.
//! A file whose days straddle (a month's file of an unpartitioned table) has its date column alone
//! read. Where neither would be the table's answer — a deletion vector hides rows the statistics
//! count, a file lies outside the table's folder (a clone's), a partition value is not a day, a
//! count is missing — deltalake's reader counts the whole range, grouped by day.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use deltalake::datafusion::functions_aggregate::expr_fn::count;
use deltalake::datafusion::prelude::{SessionContext, lit};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;

use crate::delta::data_file::each_day;
use crate::delta::predicate::slice_predicate;
use crate::delta::table::{FileDates, partition_columns, physical_name};
use crate::window::Slice;

/// The rows `table` holds on each day from `first` to `last` that has any (a day without rows is
/// not in the map), and how they were counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayCounts {
    pub rows: BTreeMap<NaiveDate, u64>,
    /// The data files whose date column was read, or `None` when deltalake's reader counted every
    /// day (the log could not settle some file).
    pub files_read: Option<usize>,
}

impl DayCounts {
    /// The rows on the days `first..=last`.
    pub fn between(&self, first: NaiveDate, last: NaiveDate) -> u64 {
        self.rows.range(first..=last).map(|(_, rows)| rows).sum()
    }
}

/// Counts the rows of `table` (at its loaded version) on each day from `first` to `last`.
pub async fn rows_per_day(
    table: &DeltaTable,
    date_column: &str,
    first: NaiveDate,
    last: NaiveDate,
) -> Result<DayCounts, DeltaTableError> {
    match from_files(table, date_column, first, last).await? {
        Some(counted) => Ok(counted),
        None => read_back(table, date_column, first, last).await,
    }
}

/// From the log, and the date column of the files it does not settle; `None` when some file's rows
/// only deltalake's reader can count.
async fn from_files(
    table: &DeltaTable,
    date_column: &str,
    first: NaiveDate,
    last: NaiveDate,
) -> Result<Option<DayCounts>, DeltaTableError> {
    let by_partition = partition_columns(table).iter().any(|c| c == date_column);
    let column = physical_name(table, date_column);
    let mut rows: HashMap<NaiveDate, u64> = HashMap::new();
    let mut unsettled = Vec::new();
    let mut files = table.get_active_add_actions_by_predicate(None);
    while let Some(file) = files.try_next().await? {
        let dates = match by_partition {
            true => FileDates::read(&file.partition_values_map(), None, &column),
            false => FileDates::read(&HashMap::new(), file.stats().as_deref(), &column),
        };
        if !dates.may_overlap(first, last) {
            continue;
        }
        if file.deletion_vector_descriptor().is_some() || file.path().contains("://") {
            return Ok(None);
        }
        let records = file.num_records().map(|n| n as u64);
        match (dates, records) {
            (FileDates::Partition(Some(day)), Some(records)) => *rows.entry(day).or_default() += records,
            (
                FileDates::Statistics { min: Some(min), max: Some(max), nulls: Some(nulls), .. },
                Some(records),
            ) if min == max => *rows.entry(min).or_default() += records.saturating_sub(nulls),
            _ if by_partition => return Ok(None),
            _ => unsettled.push((file.object_store_path(), file.size() as u64)),
        }
    }
    let store = table.log_store().object_store(None);
    let files_read = unsettled.len();
    for (path, size) in unsettled {
        let read = each_day(store.clone(), path, size, &column, |day| {
            *rows.entry(day).or_default() += 1;
        })
        .await?;
        if !read {
            return Ok(None);
        }
    }
    let rows = rows.into_iter().filter(|(day, n)| first <= *day && *day <= last && *n > 0).collect();
    Ok(Some(DayCounts { rows, files_read: Some(files_read) }))
}

/// The range's rows as deltalake's reader reads the table, grouped by day: the answer for any file.
async fn read_back(
    table: &DeltaTable,
    date_column: &str,
    first: NaiveDate,
    last: NaiveDate,
) -> Result<DayCounts, DeltaTableError> {
    use deltalake::arrow::array::{AsArray, Int64Array};
    use deltalake::arrow::datatypes::Date32Type;
    use deltalake::datafusion::common::Column;
    use deltalake::datafusion::logical_expr::Expr;

    let range = Slice { index: 0, first, last, run_date: first };
    let day = Expr::Column(Column::new_unqualified(date_column));
    let batches = SessionContext::new()
        .read_table(table.table_provider().await?)?
        .filter(slice_predicate(date_column, &range))?
        .aggregate(vec![day], vec![count(lit(1)).alias("rows")])?
        .collect()
        .await?;
    let mut rows = BTreeMap::new();
    for batch in &batches {
        let days = batch.column(0).as_primitive::<Date32Type>();
        let counts = batch.column(1).as_any().downcast_ref::<Int64Array>();
        for (at, found) in days.iter().enumerate() {
            let (Some(found), Some(counts)) = (found, counts) else { continue };
            if let Some(found) = Date32Type::to_naive_date_opt(found) {
                rows.insert(found, counts.value(at) as u64);
            }
        }
    }
    Ok(DayCounts { rows, files_read: None })
}
