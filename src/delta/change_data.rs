//! Change-data files bf writes itself, where deltalake writes none.
//!
//! A table with the change data feed on records each commit's row changes in `_change_data/`
//! files, and a reader takes a commit that holds any from those files alone (PROTOCOL.md, "Change
//! Data Files"). deltalake writes them for a replaceWhere that removes rows, never for an append.
//! The rehearsal of a row-tracked table writes a slice in two commits — the rows its files carry,
//! then its own rows, appended — and `bf apply` publishes them as one commit, which holds the
//! first one's change-data files: without the appended rows' inserts among them, the feed would
//! lose them. [`insert_changes`] writes those inserts, in a commit of their own in the rehearsal,
//! published with the other two.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::DeltaTableError;
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Action, AddCDCFile};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, Path};
use futures::TryStreamExt;
use serde_json::Value;

/// The column a change-data file names each row's change in.
const CHANGE_TYPE: &str = "_change_type";

/// Writes an `insert` change-data file for each data file commit `version` of `table` added, and
/// commits them (and nothing else) with `properties`; returns the table after that commit.
pub async fn insert_changes(
    table: DeltaTable,
    version: u64,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    let logged = crate::delta::ledger::read_log(&table, version..=version).await?;
    let adds: Vec<&Value> = logged.iter().flat_map(|l| &l.actions).filter_map(|a| a.get("add")).collect();
    let store = table.log_store().object_store(None);
    let mut actions = Vec::with_capacity(adds.len());
    for add in adds {
        let path = add.get("path").and_then(Value::as_str).unwrap_or_default();
        let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned();
        let size = add.get("size").and_then(Value::as_u64).unwrap_or_default();
        let to = format!("_change_data/cdc-{}.c000.snappy.parquet", uuid::Uuid::new_v4());
        let written =
            inserts_of(store.clone(), Path::from(decoded.as_str()), size, Path::from(to.as_str())).await?;
        let partition_values: HashMap<String, Option<String>> =
            serde_json::from_value(add.get("partitionValues").cloned().unwrap_or_default())
                .unwrap_or_default();
        actions.push(Action::Cdc(AddCDCFile {
            path: to,
            size: written as i64,
            partition_values,
            data_change: false,
            tags: None,
        }));
    }
    if actions.is_empty() {
        return Ok(table);
    }
    let operation = DeltaOperation::Write { mode: SaveMode::Append, partition_by: None, predicate: None };
    crate::delta::commit::commit(table, actions, operation, properties).await
}

/// The rows of the data file at `from` as a change-data file at `to`: each row as written, and
/// `_change_type` = `insert`. Streamed batch by batch; returns the file's size.
async fn inserts_of(
    store: Arc<dyn deltalake::ObjectStore>,
    from: Path,
    size: u64,
    to: Path,
) -> Result<u64, DeltaTableError> {
    use deltalake::datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
    use deltalake::datafusion::parquet::arrow::async_writer::AsyncArrowWriter;
    use object_store::ObjectStoreExt;
    let fail = |e: &dyn std::fmt::Display| DeltaTableError::Generic(e.to_string());
    let reader = crate::delta::data_file::file_reader(store.clone(), from, size)?;
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let mut fields: Vec<Arc<Field>> = builder.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(CHANGE_TYPE, DataType::Utf8, true)));
    let schema = Arc::new(Schema::new_with_metadata(fields, builder.schema().metadata().clone()));
    let sink = object_store::buffered::BufWriter::new(store.clone(), to.clone());
    let mut writer = AsyncArrowWriter::try_new(sink, schema.clone(), None)?;
    let mut batches = builder.build()?;
    while let Some(batch) = batches.try_next().await? {
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns.push(Arc::new(StringArray::from(vec!["insert"; batch.num_rows()])));
        writer.write(&RecordBatch::try_new(schema.clone(), columns)?).await?;
    }
    writer.close().await?;
    Ok(store.head(&to).await.map_err(|e| fail(&e))?.size)
}
