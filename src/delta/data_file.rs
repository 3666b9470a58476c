//! One data file of a table read directly, without the table's reader: its footer and the
//! columns asked for, as DataFusion's scans read it. Where a count needs only a file's date column
//! (a slice's rows after a commit, a day's rows for `bf gaps`) or its bytes as written (row ids
//! materialized into a copy), this is cheaper than a scan of the table.

use chrono::NaiveDate;
use deltalake::DeltaTableError;
use deltalake::arrow::datatypes::DataType;
use futures::TryStreamExt;

/// The bytes read with a file's footer on the first request: its metadata, and a small file whole.
const FOOTER_HINT: usize = 512 * 1024;

/// Calls `each` with the day of every row of one data file that has one, reading its date column
/// alone (a DATE is a Date32 in Parquet; NULL is on no day). `false` when the file has no such
/// column by that name: the table's reader, which maps columns, answers.
pub(crate) async fn each_day(
    store: std::sync::Arc<dyn deltalake::ObjectStore>,
    path: deltalake::Path,
    size: u64,
    column: &str,
    mut each: impl FnMut(NaiveDate),
) -> Result<bool, DeltaTableError> {
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::Date32Type;
    use deltalake::datafusion::parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

    let file = ParquetRecordBatchStreamBuilder::new(file_reader(store, path, size)?).await?;
    let found = file.schema().fields().iter().position(|field| field.name() == column);
    let Some(index) = found.filter(|&i| file.schema().field(i).data_type() == &DataType::Date32) else {
        return Ok(false);
    };
    let projection = ProjectionMask::roots(file.parquet_schema(), [index]);
    let mut batches = file.with_projection(projection).build()?;
    while let Some(batch) = batches.try_next().await? {
        let dates = batch.column(0).as_primitive::<Date32Type>();
        for day in dates.iter().flatten() {
            if let Some(day) = Date32Type::to_naive_date_opt(day) {
                each(day);
            }
        }
    }
    Ok(true)
}

/// A reader of the Parquet file at `path`, `size` bytes: the one DataFusion's scans use, a small
/// file one request with its footer.
pub(crate) fn file_reader(
    store: std::sync::Arc<dyn deltalake::ObjectStore>,
    path: deltalake::Path,
    size: u64,
) -> Result<Box<dyn deltalake::datafusion::parquet::arrow::async_reader::AsyncFileReader>, DeltaTableError> {
    use deltalake::ObjectMeta;
    use deltalake::datafusion::datasource::listing::PartitionedFile;
    use deltalake::datafusion::datasource::physical_plan::parquet::{
        DefaultParquetFileReaderFactory, ParquetFileReaderFactory,
    };
    use deltalake::datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
    let meta =
        ObjectMeta { location: path, last_modified: Default::default(), size, e_tag: None, version: None };
    Ok(DefaultParquetFileReaderFactory::new(store).create_reader(
        0,
        PartitionedFile::from(meta),
        Some(FOOTER_HINT),
        &ExecutionPlanMetricsSet::new(),
    )?)
}
