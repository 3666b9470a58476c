//! Before a RESTORE: the files the restored version needs are still there. VACUUM deletes what
//! no version within its retention references, and a RESTORE of an older version would commit a
//! table pointing at deleted files; a rollback refuses instead, naming them.

use deltalake::DeltaTable;
use deltalake::table::config::TablePropertiesExt;
use futures::StreamExt;
use url::Url;

use super::RollbackError;
use crate::delta::store::{StoreError, Stores, display_url};

/// The days a rollback puts back, when it puts back only a window: the date column and the window.
/// A window-only rollback reads the pre-version's files that may hold those days, and no other.
#[derive(Debug, Clone, Copy)]
pub struct Within<'a> {
    pub date_column: &'a str,
    pub window: crate::window::Window,
}

/// Refuses a restore whose data files VACUUM has removed: every file of `version`, or `within` a
/// window, the files that may hold its days.
/// In a bucket one listing of the table's folder answers for every file under it
/// ([`Stores::keys_under`]). A file elsewhere (a shallow clone's), every file on a disk, and every
/// file when the store will not list (a caller without ListBucket) get a HEAD each, sixteen at a
/// time.
pub async fn check_files_exist(
    stores: &Stores,
    url: &Url,
    version: u64,
    within: Option<Within<'_>>,
) -> Result<(), RollbackError> {
    let old = stores.open(url, Some(version)).await?;
    check_files_exist_in(stores, url, &old, within).await
}

/// [`check_files_exist`] for the version `old`, the table at `url`, was loaded at.
pub(super) async fn check_files_exist_in(
    stores: &Stores,
    url: &Url,
    old: &DeltaTable,
    within: Option<Within<'_>>,
) -> Result<(), RollbackError> {
    let version = old.version().unwrap_or(0);
    let root = old.table_url().clone();
    let days = within.map(|w| (w.date_column, w.window.start, w.window.end));
    let needed = crate::delta::table::files_needed_within(old, days)
        .await
        .map_err(|problem| StoreError { location: display_url(url), problem })?;
    // A listing answers for every file under the table's folder; a store that will not list is
    // asked about each file instead.
    let listed = stores.keys_under(&root).await.ok().flatten();
    let folder = format!("{}/", root.as_str().trim_end_matches('/'));
    let (listed, folder) = (&listed, &folder);
    // Only an answer proves a file is there: a store that denies the HEAD (S3 answers 403 for a
    // missing key to a caller without ListBucket) proves nothing, and restoring then could commit a
    // version that points at deleted files.
    let heads = needed.iter().map(|(name, file)| async move {
        if let Some(listed) = listed.as_ref().filter(|_| file.as_str().starts_with(folder.as_str())) {
            let (_, key) = stores.object_store(file)?;
            return Ok((!listed.contains(&key)).then(|| name.clone()));
        }
        match stores.exists(file).await {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(name.clone())),
            Err(e) => Err(StoreError {
                location: display_url(url),
                problem: format!(
                    "cannot check that version {version}'s file {name} is still there, so nothing was restored: {}",
                    e.problem
                ),
            }),
        }
    });
    let answers: Vec<Result<Option<String>, StoreError>> =
        futures::stream::iter(heads).buffered(16).collect().await;
    let mut missing = Vec::new();
    for answer in answers {
        missing.extend(answer?);
    }
    missing.sort();
    if missing.is_empty() {
        return Ok(());
    }
    let latest = stores.open(url, None).await?;
    let retention = latest.snapshot()?.table_config().deleted_file_retention_duration();
    Err(RollbackError::MissingFiles {
        table: display_url(url),
        version,
        count: missing.len(),
        files: missing.iter().take(20).map(|f| format!("  - {f}")).collect::<Vec<_>>().join("\n"),
        retention: format!("{:.1} days", retention.as_secs_f64() / 86_400.0),
    })
}
