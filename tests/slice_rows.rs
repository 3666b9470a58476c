//! Apply verifies every committed slice by counting the table's rows on the slice's days, from the
//! log's per-file statistics when they settle it (`bf::delta::table::rows_in_slice`). A wrong count there
//! would stop a good apply or pass a bad one, so: the log's answer, when it gives one, must equal the
//! rows read back with the slice's predicate, for tables of every layout, null days included; and for
//! the layouts bf writes, the log must actually answer (or the shortcut is dead code). A file the log
//! cannot settle has its date column read alone, never the table through deltalake's scan.

use std::path::Path;
use std::sync::Arc;

use bf::delta::predicate::slice_predicate;
use bf::delta::table::{rows_in_slice, rows_in_slice_from_files, rows_in_slice_from_log};
use bf::deltalake::DeltaTable;
use bf::deltalake::arrow::array::{ArrayRef, Date32Array, Int64Array, RecordBatch};
use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Date32Type, Field, Schema};
use bf::deltalake::datafusion::prelude::SessionContext;
use bf::deltalake::kernel::{DataType, StructField};
use bf::deltalake::protocol::SaveMode;
use bf::window::Slice;
use chrono::NaiveDate;
use proptest::prelude::*;

use crate::common::new_table_with;

/// Days as offsets from 2026-03-01; `None` is a row whose date is null.
type Day = Option<u8>;

fn date(offset: u8) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 1).unwrap() + chrono::Days::new(offset.into())
}

fn slice(first: u8, last: u8) -> Slice {
    Slice { index: 1, first: date(first), last: date(last), run_date: date(first) }
}

/// A table of (id, order_date), one commit per group of days.
async fn table(dir: &Path, partitioned: bool, stats: bool, commits: &[Vec<Day>]) -> DeltaTable {
    let columns = vec![
        StructField::new("id", DataType::LONG, true),
        StructField::new("order_date", DataType::DATE, true),
    ];
    let partitions: &[&str] = if partitioned { &["order_date"] } else { &[] };
    // `delta.dataSkippingNumIndexedCols = 0`: files carry no column statistics at all.
    let no_stats = [("delta.dataSkippingNumIndexedCols", "0")];
    let mut table = new_table_with(dir, columns, partitions, if stats { &[] } else { &no_stats }).await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", ArrowType::Int64, true),
        Field::new("order_date", ArrowType::Date32, true),
    ]));
    for (n, days) in commits.iter().enumerate() {
        let ids = (0..days.len()).map(|i| (n * 1000 + i) as i64);
        let dates = days.iter().map(|d| d.map(|d| Date32Type::from_naive_date(date(d))));
        let columns: Vec<ArrayRef> =
            vec![Arc::new(Int64Array::from_iter_values(ids)), Arc::new(Date32Array::from_iter(dates))];
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        table = table.write(vec![batch]).with_save_mode(SaveMode::Append).await.unwrap();
    }
    table
}

/// The slice's rows as DataFusion reads them: the answer every shortcut must give.
async fn read_back(table: &DeltaTable, slice: &Slice) -> u64 {
    let ctx = SessionContext::new();
    let rows = ctx.read_table(table.table_provider().await.unwrap()).unwrap();
    rows.filter(slice_predicate("order_date", slice)).unwrap().count().await.unwrap() as u64
}

#[tokio::test]
async fn the_log_counts_a_slice_of_a_table_whose_files_each_hold_one_day() {
    let dir = tempfile::tempdir().unwrap();
    // Days 0..=4, one commit (one file) each, two null days in the day-2 file.
    let commits: Vec<Vec<Day>> =
        (0..5).map(|d| if d == 2 { vec![Some(2), None, Some(2), None] } else { vec![Some(d); 3] }).collect();
    let table = table(dir.path(), false, true, &commits).await;
    let days_1_to_3 = slice(1, 3);
    assert_eq!(read_back(&table, &days_1_to_3).await, 3 + 2 + 3);
    assert_eq!(rows_in_slice_from_log(&table, "order_date", &days_1_to_3).await.unwrap(), Some(8));
    assert_eq!(rows_in_slice(&table, "order_date", &days_1_to_3).await.unwrap(), 8);
}

#[tokio::test]
async fn the_log_counts_a_slice_of_a_table_partitioned_by_day_null_partition_included() {
    let dir = tempfile::tempdir().unwrap();
    let commits = vec![vec![Some(0), Some(1), Some(1), None, Some(4)], vec![Some(1), Some(2), None]];
    let table = table(dir.path(), true, true, &commits).await;
    let days_1_to_2 = slice(1, 2);
    assert_eq!(read_back(&table, &days_1_to_2).await, 4);
    assert_eq!(rows_in_slice_from_log(&table, "order_date", &days_1_to_2).await.unwrap(), Some(4));
}

#[tokio::test]
async fn a_file_straddling_the_slice_or_without_statistics_has_its_date_column_read_in_the_table_folder() {
    let dir = tempfile::tempdir().unwrap();
    // One file holds days 0 to 3: its statistics cannot say how many of its rows are on days 1..=2.
    let straddling =
        table(&dir.path().join("straddling"), false, true, &[vec![Some(0), Some(1), Some(2), Some(3)]]).await;
    assert_eq!(rows_in_slice_from_log(&straddling, "order_date", &slice(1, 2)).await.unwrap(), None);
    assert_eq!(rows_in_slice_from_files(&straddling, "order_date", &slice(1, 2)).await.unwrap(), Some(2));
    assert_eq!(rows_in_slice(&straddling, "order_date", &slice(1, 2)).await.unwrap(), 2);

    // A shallow clone references that file in the table's folder: deltalake's scan counts it.
    let clone_dir = dir.path().join("clone");
    let stores = bf::delta::store::Stores::from_environment();
    let url = bf::delta::store::folder_url(&clone_dir).unwrap();
    bf::rehearse::clone::ShallowClone::new(&straddling, url, &stores).execute().await.unwrap();
    let clone = crate::common::open_table(&clone_dir).await;
    assert_eq!(rows_in_slice_from_files(&clone, "order_date", &slice(1, 2)).await.unwrap(), None);
    assert_eq!(rows_in_slice(&clone, "order_date", &slice(1, 2)).await.unwrap(), 2);

    // `delta.dataSkippingNumIndexedCols = 0`: no column statistics at all.
    let bare = table(&dir.path().join("bare"), false, false, &[vec![Some(1); 3], vec![Some(5); 2]]).await;
    assert_eq!(rows_in_slice_from_log(&bare, "order_date", &slice(1, 2)).await.unwrap(), None);
    assert_eq!(rows_in_slice_from_files(&bare, "order_date", &slice(1, 2)).await.unwrap(), Some(3));
    assert_eq!(rows_in_slice(&bare, "order_date", &slice(1, 2)).await.unwrap(), 3);
}

/// A commit's days: often one day and some nulls (a file the statistics settle), else any mix.
fn commit() -> impl Strategy<Value = Vec<Day>> {
    prop_oneof![
        (0u8..8, 1usize..5, 0usize..3).prop_map(|(day, rows, nulls)| {
            std::iter::repeat_n(Some(day), rows).chain(std::iter::repeat_n(None, nulls)).collect()
        }),
        prop::collection::vec(prop::option::weighted(0.9, 0u8..8), 0..6),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the layout, the count apply verifies with is the count of the rows read back, and
    /// none of these layouts needs deltalake's scan to count it.
    #[test]
    fn the_count_equals_the_rows_read_back(
        commits in prop::collection::vec(commit(), 1..4),
        partitioned in any::<bool>(),
        stats in any::<bool>(),
        first in 0u8..8,
        length in 0u8..4,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (logged, from_files, counted, read) = runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let table = table(dir.path(), partitioned, stats, &commits).await;
            let slice = slice(first, first + length);
            (
                rows_in_slice_from_log(&table, "order_date", &slice).await.unwrap(),
                rows_in_slice_from_files(&table, "order_date", &slice).await.unwrap(),
                rows_in_slice(&table, "order_date", &slice).await.unwrap(),
                read_back(&table, &slice).await,
            )
        });
        prop_assert_eq!(counted, read);
        prop_assert_eq!(from_files, Some(read));
        if let Some(logged) = logged {
            prop_assert_eq!(logged, read);
        }
    }
}
