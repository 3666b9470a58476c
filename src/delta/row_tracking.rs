//! Row tracking (`rowTracking`): every row of a table has a stable id and the version that last
//! changed it, which Databricks' change tracking, incremental refreshes and audits key on.
//!
//! PROTOCOL.md (Row Tracking) asks three things of a writer, and bf answers each:
//! - every file a commit adds carries `baseRowId` — its rows' fresh ids are `baseRowId` plus their
//!   position in the file — above the table's high-water mark (the `delta.rowTracking` domain),
//!   which the same commit raises, and `defaultRowCommitVersion`, the commit's version. bf assigns
//!   both when it commits ([`complete`]), against the table as it is then: a rehearsal's ids would
//!   be the clone's, and a commit that loses a race is written again from the table that won;
//! - a remove, and a file added back (a RESTORE), carry the `baseRowId` and
//!   `defaultRowCommitVersion` of the file's last add, so a restored row has its old id again;
//! - where row tracking is enabled, rows a writer *copies* keep their stable ids and commit
//!   versions, written to the table's materialized columns (hidden: not in the schema). A slice
//!   that rewrites a file keeps that file's rows outside its days, and a merge keeps the rows the
//!   source does not name: the clone materializes the stable ids of every file a slice may rewrite
//!   into its copy of it ([`materialize`]), the rehearsal carries them through, and the published
//!   file holds them. New rows are written with no materialized value: their fresh id is theirs.
//!
//! Every id bf hands out is above every id handed out before it, so ids stay unique with any other
//! writer; the high-water mark is never lowered, a RESTORE's commit included.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::kernel::{Action, DomainMetadata};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use serde_json::Value;

/// The domain holding the table's row-id high-water mark.
pub const DOMAIN: &str = "delta.rowTracking";
/// The table property that turns row tracking on (ids preserved when rows are copied).
pub const ENABLE: &str = "delta.enableRowTracking";
/// The table property that stops writers assigning ids.
const SUSPENDED: &str = "delta.rowTrackingSuspended";
/// The table properties naming the hidden columns that hold copied rows' ids and commit versions.
pub const ROW_ID_COLUMN: &str = "delta.rowTracking.materializedRowIdColumnName";
pub const COMMIT_VERSION_COLUMN: &str = "delta.rowTracking.materializedRowCommitVersionColumnName";
/// The commitInfo tag saying every row the commit copied kept its id and commit version.
pub const PRESERVED_TAG: &str = "delta.rowTracking.preserved";

/// The hidden columns of a table with row tracking enabled, by their names in the Parquet files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Materialized {
    pub row_id: String,
    pub commit_version: String,
}

impl Materialized {
    /// Read from a table's properties: both names, when row tracking is enabled. A rehearsal keeps
    /// the names (not the property turning it on), so its readers know the columns to hide.
    pub fn named(configuration: &HashMap<String, String>) -> Option<Materialized> {
        Some(Materialized {
            row_id: configuration.get(ROW_ID_COLUMN)?.clone(),
            commit_version: configuration.get(COMMIT_VERSION_COLUMN)?.clone(),
        })
    }

    pub fn columns(&self) -> [&str; 2] {
        [&self.row_id, &self.commit_version]
    }
}

/// What row tracking asks of the commits to a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowTracking {
    /// Where copied rows keep their ids: `None` when the feature is supported but not enabled,
    /// and writers assign ids without preserving any.
    pub materialized: Option<Materialized>,
}

impl RowTracking {
    /// Read from the table's protocol and properties: `None` when writers assign no ids (no
    /// feature, or suspended).
    pub fn of(state: &deltalake::table::state::DeltaTableState) -> Option<RowTracking> {
        let protocol = crate::delta::table::WriterProtocol::of(state).ok()?;
        let configuration = state.metadata().configuration();
        let on = |key: &str| configuration.get(key).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !protocol.requires("rowTracking") || on(SUSPENDED) {
            return None;
        }
        Some(RowTracking { materialized: on(ENABLE).then(|| Materialized::named(configuration)).flatten() })
    }
}

/// The rehearsal's metadata for a table with row tracking: without the properties that turn it on
/// or suspend it (the rehearsal's protocol does not list the feature; bf's commits to the table do
/// what it asks), and, where it is enabled, with the hidden columns as nullable columns of the
/// rehearsal's own schema, so that the rows a slice copies carry their ids through deltalake's
/// writes. Under column mapping each gets a field id of its own and its name as physical name.
pub fn rehearsal_metadata(
    metadata: deltalake::kernel::Metadata,
    materialized: Option<&Materialized>,
) -> Result<deltalake::kernel::Metadata, DeltaTableError> {
    use deltalake::kernel::{ColumnMetadataKey, MetadataExt, MetadataValue, StructField, StructType};
    let generic = |e: &dyn std::fmt::Display| DeltaTableError::Generic(e.to_string());
    let mut metadata = metadata;
    for key in [ENABLE, SUSPENDED] {
        if metadata.configuration().contains_key(key) {
            metadata = metadata.remove_config_key(key).map_err(|e| generic(&e))?;
        }
    }
    let Some(materialized) = materialized else { return Ok(metadata) };
    let schema = metadata.parse_schema().map_err(|e| generic(&e))?;
    let configuration = metadata.configuration().clone();
    let maps = configuration.get("delta.columnMapping.mode").is_some_and(|m| !m.eq_ignore_ascii_case("none"));
    let mut max_id: i64 = configuration.get(MAX_COLUMN_ID).and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut fields: Vec<StructField> = schema.fields().cloned().collect();
    for name in materialized.columns() {
        let mut field = StructField::nullable(name, deltalake::kernel::DataType::LONG);
        if maps {
            max_id += 1;
            field = field.with_metadata([
                (ColumnMetadataKey::ColumnMappingId.as_ref(), MetadataValue::Number(max_id)),
                (
                    ColumnMetadataKey::ColumnMappingPhysicalName.as_ref(),
                    MetadataValue::String(name.to_owned()),
                ),
            ]);
        }
        fields.push(field);
    }
    let schema = StructType::try_new(fields).map_err(|e| generic(&e))?;
    metadata = metadata.with_schema(&schema).map_err(|e| generic(&e))?;
    if maps {
        metadata =
            metadata.add_config_key(MAX_COLUMN_ID.to_owned(), max_id.to_string()).map_err(|e| generic(&e))?;
    }
    Ok(metadata)
}

/// The table property every column mapping id stays at or under.
const MAX_COLUMN_ID: &str = "delta.columnMapping.maxColumnId";

/// The metadata a commit adding `actions` to `table` must carry so that its
/// `delta.columnMapping.maxColumnId` covers the field ids the files it adds carry: under column
/// mapping a rehearsal gives its hidden columns ids above the table's ([`rehearsal_metadata`]),
/// and the files bf publishes hold them, so the next column any writer adds must get another id —
/// else a reader resolving columns by id reads row ids as that column's values. Based on the
/// commit's own `metaData` when it carries one (a RESTORE's), and never below the table's own
/// maximum (a file published before keeps its ids). `None` when nothing is to be raised. The first
/// file added is read for its ids: a commit's files are written alike.
pub async fn column_ids_covered(
    table: &DeltaTable,
    actions: &[Action],
) -> Result<Option<deltalake::kernel::Metadata>, DeltaTableError> {
    use deltalake::kernel::MetadataExt;
    let state = table.snapshot()?;
    let configuration = state.metadata().configuration();
    let maps = configuration.get("delta.columnMapping.mode").is_some_and(|m| !m.eq_ignore_ascii_case("none"));
    let Some(first) = actions.iter().find_map(|a| match a {
        Action::Add(add) => Some(add),
        _ => None,
    }) else {
        return Ok(None);
    };
    if !maps {
        return Ok(None);
    }
    let carried = actions.iter().find_map(|a| match a {
        Action::Metadata(m) => Some(m.clone()),
        _ => None,
    });
    let base = carried.clone().unwrap_or_else(|| state.metadata().clone());
    let max_of = |c: &HashMap<String, String>| c.get(MAX_COLUMN_ID).and_then(|v| v.parse::<i64>().ok());
    let written = max_of(base.configuration());
    let path =
        deltalake::Path::from_url_path(&first.path).map_err(|e| DeltaTableError::Generic(e.to_string()))?;
    let store = table.log_store().object_store(None);
    let reader = crate::delta::data_file::file_reader(store, path, first.size as u64)?;
    let footer = deltalake::datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder::new(reader).await?;
    let needed = [max_of(configuration), written, highest_field_id(footer.schema().fields())]
        .into_iter()
        .flatten()
        .max();
    match needed {
        Some(needed) if Some(needed) != written => Ok(Some(
            base.add_config_key(MAX_COLUMN_ID.to_owned(), needed.to_string())
                .map_err(|e| DeltaTableError::Generic(e.to_string()))?,
        )),
        _ => Ok(carried),
    }
}

/// The highest Parquet field id among `fields` and the fields nested in them.
fn highest_field_id(fields: &deltalake::arrow::datatypes::Fields) -> Option<i64> {
    use deltalake::arrow::datatypes::DataType as Arrow;
    fields
        .iter()
        .flat_map(|field| {
            let own = field.metadata().get("PARQUET:field_id").and_then(|id| id.parse::<i64>().ok());
            let nested = match field.data_type() {
                Arrow::Struct(inner) => highest_field_id(inner),
                Arrow::List(item) | Arrow::LargeList(item) | Arrow::Map(item, _) => {
                    highest_field_id(&std::iter::once(item.clone()).collect())
                }
                _ => None,
            };
            [own, nested]
        })
        .flatten()
        .max()
}

/// The hidden columns a rehearsal holds as columns (a table's own schema never names them): what
/// its readers leave out, and what a slice written into it fills for the rows it copies.
pub fn rehearsal_columns(table: &DeltaTable) -> Option<Materialized> {
    let state = table.snapshot().ok()?;
    let materialized = Materialized::named(state.metadata().configuration())?;
    let schema = state.schema();
    materialized.columns().iter().all(|name| schema.field(name).is_some()).then_some(materialized)
}

/// `table` as its readers see it: a rehearsal's hidden columns left out, so a comparison, a check
/// or a downstream plan reads the columns of the table it stands for.
pub async fn visible(
    table: &DeltaTable,
) -> Result<Arc<dyn deltalake::datafusion::catalog::TableProvider>, DeltaTableError> {
    use deltalake::datafusion::prelude::{SessionContext, ident};
    let provider = table.table_provider().await?;
    let Some(hidden) = rehearsal_columns(table) else { return Ok(provider) };
    let rows = SessionContext::new().read_table(provider)?;
    let shown: Vec<_> = rows
        .schema()
        .fields()
        .iter()
        .filter(|f| !hidden.columns().contains(&f.name().as_str()))
        .map(|f| ident(f.name()))
        .collect();
    Ok(rows.select(shown)?.into_view())
}

/// The table's row-id high-water mark, from its `delta.rowTracking` domain; `None` before any id
/// was handed out. Read by the Delta kernel (deltalake refuses to read `delta.*` domains).
pub async fn high_water_mark(table: &DeltaTable) -> Result<Option<i64>, DeltaTableError> {
    let engine = table.log_store().engine(None);
    let url = table.table_url().clone();
    let version = table.version().unwrap_or(0);
    let configuration = tokio::task::spawn_blocking(move || {
        let snapshot = delta_kernel::snapshot::Snapshot::builder_for(url.as_str())
            .at_version(version)
            .build(engine.as_ref())?;
        snapshot.get_domain_metadata_internal(DOMAIN, engine.as_ref())
    })
    .await
    .map_err(|e| DeltaTableError::Generic(e.to_string()))?
    .map_err(DeltaTableError::KernelError)?;
    let Some(configuration) = configuration else { return Ok(None) };
    let parsed: Value = serde_json::from_str(&configuration)?;
    parsed.get("rowIdHighWaterMark").and_then(Value::as_i64).map(Some).ok_or_else(|| {
        DeltaTableError::Generic(format!(
            "the table's {DOMAIN} domain holds no high-water mark: {configuration}"
        ))
    })
}

/// Completes `actions`, to be committed to `table` as its next version, as row tracking asks:
/// each file added without ids gets a `baseRowId` above every id handed out and the commit's
/// version as `defaultRowCommitVersion`; a file added back keeps its own; each remove carries its
/// file's; the high-water mark is raised past the new ids in the same commit. Returns the commit's
/// tags: where the table preserves ids, that the rows bf copied kept theirs.
pub async fn complete(
    table: &DeltaTable,
    tracking: &RowTracking,
    actions: &mut Vec<Action>,
) -> Result<HashMap<String, String>, DeltaTableError> {
    let version = table.version().unwrap_or(0) + 1;
    let live: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await?;
    let mut ids: HashMap<String, (Option<i64>, Option<i64>)> = HashMap::new();
    // Above the mark and above every live file's fresh ids: a writer that forgot to raise the mark
    // never makes bf hand out an id twice.
    let mut handed_out = high_water_mark(table).await?.unwrap_or(-1);
    for file in &live {
        #[allow(deprecated)] // The whole add, as committed: deltalake has no other public way.
        let add = file.add_action();
        if let Some(base) = add.base_row_id {
            let rows = file.num_records().unwrap_or(0) as i64;
            handed_out = handed_out.max(base + rows - 1);
        }
        ids.insert(file.path().into_owned(), (add.base_row_id, add.default_row_commit_version));
    }
    let mark = handed_out;
    let mut next = handed_out + 1;
    for action in actions.iter_mut() {
        match action {
            Action::Add(add) if add.base_row_id.is_none() => {
                let rows = records(add.stats.as_deref()).ok_or_else(|| {
                    DeltaTableError::Generic(format!(
                        "{} carries no row count in its statistics, which row tracking needs to give its \
                         rows ids",
                        add.path
                    ))
                })?;
                add.base_row_id = Some(next);
                add.default_row_commit_version = Some(version as i64);
                next += rows;
            }
            Action::Remove(remove) if remove.base_row_id.is_none() => {
                if let Some((base, commit)) = ids.get(&remove.path) {
                    remove.base_row_id = *base;
                    remove.default_row_commit_version = *commit;
                }
            }
            _ => {}
        }
    }
    if next - 1 > mark {
        actions.push(Action::DomainMetadata(DomainMetadata {
            domain: DOMAIN.to_owned(),
            configuration: serde_json::json!({ "rowIdHighWaterMark": next - 1 }).to_string(),
            removed: false,
        }));
    }
    let adds = actions.iter().any(|a| matches!(a, Action::Add(_)));
    Ok(match &tracking.materialized {
        Some(_) if adds => HashMap::from([(PRESERVED_TAG.to_owned(), "true".to_owned())]),
        _ => HashMap::new(),
    })
}

/// What a reviewer should know of a plan on a table with row tracking, whose slices write
/// `written` rows from the source into files holding `in_files` rows: the others are copied from
/// the files the slices rewrite, each keeping its id; the source's get new ids when published.
/// `None` for a table without it.
pub fn note(table: &DeltaTable, written: u64, in_files: u64) -> Option<String> {
    let tracking = RowTracking::of(table.snapshot().ok()?)?;
    let copied = in_files.saturating_sub(written);
    Some(match tracking.materialized {
        Some(_) => format!(
            "row tracking: row ids kept for {} the slices copy from the files they rewrite; the {} from \
             the source get new ids when published (in a merge, a row matching a key keeps that row's id)",
            crate::words::count(copied, "carried row"),
            crate::words::count(written, "row"),
        ),
        None => format!(
            "row tracking is supported but not enabled: the {} bf writes get new row ids when published, \
             and rows it copies are given new ones too, as the protocol allows",
            crate::words::count(written + copied, "row"),
        ),
    })
}

/// `numRecords` of an add's statistics.
fn records(stats: Option<&str>) -> Option<i64> {
    serde_json::from_str::<Value>(stats?).ok()?.get("numRecords")?.as_i64()
}

/// The batch of a file's rows (all of them, in file order, `first` the position of the batch's
/// first row) with its rows' stable ids and commit versions in the materialized columns: the value
/// a column already holds, else the fresh one (`baseRowId` + position, `defaultRowCommitVersion`).
pub fn materialize(
    batch: &RecordBatch,
    first: i64,
    columns: &Materialized,
    base_row_id: i64,
    commit_version: i64,
) -> Result<RecordBatch, DeltaTableError> {
    let existing =
        |name: &str| batch.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<Int64Array>());
    let ids: Int64Array = (0..batch.num_rows())
        .map(|row| {
            Some(match existing(&columns.row_id) {
                Some(held) if held.is_valid(row) => held.value(row),
                _ => base_row_id + first + row as i64,
            })
        })
        .collect();
    let versions: Int64Array = (0..batch.num_rows())
        .map(|row| {
            Some(match existing(&columns.commit_version) {
                Some(held) if held.is_valid(row) => held.value(row),
                _ => commit_version,
            })
        })
        .collect();
    let mut fields: Vec<Arc<Field>> = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        if !columns.columns().contains(&field.name().as_str()) {
            fields.push(field.clone());
            arrays.push(array.clone());
        }
    }
    for (name, values) in [(&columns.row_id, ids), (&columns.commit_version, versions)] {
        fields.push(Arc::new(Field::new(name, DataType::Int64, true)));
        arrays.push(Arc::new(values));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// Writes at `to` a copy of the Parquet file at `from` whose rows carry their stable ids and commit
/// versions in the materialized `columns` ([`materialize`]), from the file's `baseRowId` and
/// `defaultRowCommitVersion`; every row in its place, so a deletion vector of the file holds for
/// the copy. Streamed batch by batch. Returns the copy's size.
pub async fn materialize_file(
    stores: &crate::delta::store::Stores,
    from: &url::Url,
    to: &url::Url,
    columns: &Materialized,
    base_row_id: i64,
    commit_version: i64,
) -> Result<u64, DeltaTableError> {
    use deltalake::datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
    use deltalake::datafusion::parquet::arrow::async_writer::AsyncArrowWriter;
    use object_store::ObjectStoreExt;
    let fail = |e: &dyn std::fmt::Display| DeltaTableError::Generic(e.to_string());
    let (source, from_key) = stores.object_store(from).map_err(|e| fail(&e))?;
    let (destination, to_key) = stores.object_store(to).map_err(|e| fail(&e))?;
    let size = source.head(&from_key).await.map_err(|e| fail(&e))?.size;
    let reader = crate::delta::data_file::file_reader(source, from_key, size)?;
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let empty = RecordBatch::new_empty(builder.schema().clone());
    let schema = materialize(&empty, 0, columns, base_row_id, commit_version)?.schema();
    let sink = object_store::buffered::BufWriter::new(destination.clone(), to_key.clone());
    let mut writer = AsyncArrowWriter::try_new(sink, schema, None)?;
    let mut batches = builder.build()?;
    let mut first = 0i64;
    while let Some(batch) = batches.try_next().await? {
        writer.write(&materialize(&batch, first, columns, base_row_id, commit_version)?).await?;
        first += batch.num_rows() as i64;
    }
    writer.close().await?;
    Ok(destination.head(&to_key).await.map_err(|e| fail(&e))?.size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::StringArray;

    fn columns() -> Materialized {
        Materialized { row_id: "_row-id-col-1".into(), commit_version: "_row-commit-version-col-1".into() }
    }

    #[test]
    fn materialized_ids_are_kept_and_fresh_ones_follow_the_rows_position() {
        let batch = RecordBatch::try_from_iter([
            ("customer", Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef),
            ("_row-id-col-1", Arc::new(Int64Array::from(vec![None, Some(3), None])) as ArrayRef),
        ])
        .unwrap();
        let out = materialize(&batch, 10, &columns(), 100, 4).unwrap();
        let column = |name: &str| {
            out.column_by_name(name).unwrap().as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
        };
        assert_eq!(column("_row-id-col-1"), [110, 3, 112], "a held id kept, the others base + position");
        assert_eq!(column("_row-commit-version-col-1"), [4, 4, 4]);
        let names: Vec<_> = out.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["customer", "_row-id-col-1", "_row-commit-version-col-1"]);
    }
}
