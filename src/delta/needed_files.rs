//! The files a version of a table reads from: its data files and the deletion vectors stored
//! beside them, named by absolute URL — what a clone references, a rollback restores and the
//! horizon checks VACUUM has left. Within a range of days, only the files whose partition values or
//! statistics may hold them (a window-only rollback reads no other).

use chrono::NaiveDate;
use deltalake::DeltaTable;
use deltalake::kernel::{DeletionVectorDescriptor, LogicalFileView, StorageType};
use futures::TryStreamExt;

use crate::delta::store::display_url;
use crate::delta::table::{FileDates, physical_name};

/// A file's deletion vector as the clone must name it. One stored beside the source table (`'u'`:
/// a Z85-encoded UUID, relative to the table's root) would be looked for under the clone's root, so
/// it is named by its absolute URL (`'p'`); inline (`'i'`) and absolute ones name the same rows from
/// anywhere. A localized copy holds the same rows in the same order, so the same vector applies.
pub fn absolute_deletion_vector(
    dv: DeletionVectorDescriptor,
    source_root: &url::Url,
) -> Result<DeletionVectorDescriptor, String> {
    if dv.storage_type != StorageType::UuidRelativePath {
        return Ok(dv);
    }
    let encoded = &dv.path_or_inline_dv;
    let cut = encoded
        .len()
        .checked_sub(20)
        .filter(|cut| encoded.is_char_boundary(*cut))
        .ok_or_else(|| format!("`{encoded}` is not a prefix and a 20-character UUID"))?;
    let (prefix, z85_uuid) = encoded.split_at(cut);
    let bytes = z85::decode(z85_uuid).map_err(|e| format!("`{z85_uuid}` is not Z85: {e}"))?;
    let uuid = uuid::Uuid::from_slice(&bytes).map_err(|e| e.to_string())?;
    let file = match prefix {
        "" => format!("deletion_vector_{uuid}.bin"),
        prefix => format!("{prefix}/deletion_vector_{uuid}.bin"),
    };
    Ok(DeletionVectorDescriptor {
        storage_type: StorageType::AbsolutePath,
        path_or_inline_dv: crate::delta::store::join(source_root, &file).to_string(),
        ..dv
    })
}

/// Every file the table's version needs, each with how a message names it: its data files, and
/// the deletion vectors stored beside them, by URL (an inline vector is in the log itself). What a
/// RESTORE of the version needs to find, and what a plan reading the table may reach.
pub async fn files_needed(table: &DeltaTable) -> Result<Vec<(String, url::Url)>, String> {
    files_needed_within(table, None).await
}

/// [`files_needed`], of the files that may hold rows of `days` only (the date column and the
/// first and last day, by the log's partition values or statistics): what reading those days back
/// needs — a window-only rollback's.
pub async fn files_needed_within(
    table: &DeltaTable,
    days: Option<(&str, NaiveDate, NaiveDate)>,
) -> Result<Vec<(String, url::Url)>, String> {
    use crate::delta::store;
    let root = table.table_url().clone();
    let files: Vec<_> =
        table.get_active_add_actions_by_predicate(None).try_collect().await.map_err(|e| e.to_string())?;
    let column = days.map(|(column, ..)| physical_name(table, column));
    let within = |file: &LogicalFileView| match (days, &column) {
        (Some((_, first, last)), Some(column)) => {
            FileDates::read(&file.partition_values_map(), file.stats().as_deref(), column)
                .may_overlap(first, last)
        }
        _ => true,
    };
    let mut needed = Vec::with_capacity(files.len());
    for file in files.iter().filter(|f| within(f)) {
        let path = file.path().into_owned();
        let file_url = store::uri(&path).unwrap_or_else(|| store::join(&root, &path));
        if let Some(dv) = file.deletion_vector_descriptor()
            && dv.storage_type != deltalake::kernel::StorageType::Inline
        {
            let dv = absolute_deletion_vector(dv, &root)?;
            if let Ok(dv_url) = url::Url::parse(&dv.path_or_inline_dv) {
                needed.push((format!("{} (the deletion vector of {path})", display_url(&dv_url)), dv_url));
            }
        }
        needed.push((path, file_url));
    }
    Ok(needed)
}
