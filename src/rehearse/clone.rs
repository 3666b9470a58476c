//! A shallow clone of the target: the table a plan is rehearsed on.
//!
//! deltalake has no clone operation (delta-rs #2456), so bf writes the clone's first commit itself:
//! 1. refuse a destination that exists and is not a bf rehearsal; remove one that is (a rehearsal is
//!    replaced by every plan, never appended to);
//! 2. read the target's protocol, metadata and live files at one version;
//! 3. localize the files a write on the clone would have to rewrite: deltalake cannot rewrite a file
//!    outside the table's root, so on a table not partitioned by the date column, the files whose
//!    statistics overlap the window are copied into the clone (replace and merge slices are both
//!    replaceWheres of their days). Every other file is referenced by its absolute URL: cost follows
//!    the window, not the table;
//! 4. commit version 0 of the clone: the target's protocol, its metadata under a new table id, one
//!    `add` per file, and a commitInfo with operation `CLONE` naming the source and its version, as
//!    Spark's SHALLOW CLONE records it.
//!
//! Nothing is written under the target's folder; a clone's later commits only remove the target's
//! files from the clone's own log. In an object store the localized files are copied by the store
//! itself (S3 CopyObject, Azure Copy Blob, GCS rewrite): no table data passes through this machine.

use std::collections::HashMap;

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::{Action, Add, CommitInfo, LogicalFileView, MetadataExt};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use serde::Serialize;
use serde_json::{Value, json};
use url::Url;

use crate::delta::row_tracking::{self, Materialized, RowTracking};
use crate::delta::store::{self, StoreError, Stores, display_url};
use crate::window::Window;

/// The folder of a clone that holds the files copied in from the source.
pub use crate::delta::publish::LOCALIZED;

/// Builds a shallow clone of `source` at `destination`.
pub struct ShallowClone<'a> {
    source: &'a DeltaTable,
    destination: Url,
    stores: &'a Stores,
    localize: Localize,
}

/// Which of the source's files are copied into the clone rather than referenced.
enum Localize {
    Nothing,
    /// Files that may hold rows of these day ranges on this date column: the window, or the
    /// slices a preview rehearses.
    Window(String, Vec<Window>),
}

/// What a clone cost: files referenced in place and files copied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CloneMetrics {
    pub source_version: u64,
    pub files_referenced: usize,
    pub files_localized: usize,
    pub bytes_localized: u64,
    /// Of the localized files, those the store copied itself, without this machine reading them.
    #[serde(default)]
    pub files_copied_by_store: usize,
    /// Wall time of the clone: it should not grow with the data, only with the number of files.
    #[serde(default)]
    pub millis: u64,
    /// Each file copied into the clone (its path there) and the target's path for it: publishing
    /// a slice removes the target's file where the rehearsal removed the copy.
    #[serde(skip)]
    pub localized: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    #[error(
        "{0} exists and is not a bf rehearsal, so bf does not remove it (a plan names another [rehearsal] table)"
    )]
    NotARehearsal(String),
    #[error(
        "{folder} holds files a rehearsal does not ({files}), so bf does not remove it (a plan names another \
         [rehearsal] table)"
    )]
    NotOnlyARehearsal { folder: String, files: String },
    #[error("cannot replace the previous rehearsal: {0}")]
    Remove(StoreError),
    #[error("cannot clone {file}'s deletion vector: {problem}")]
    DeletionVector { file: String, problem: String },
    #[error("cannot clone {table}: {source}")]
    Delta { table: String, source: Box<DeltaTableError> },
    #[error("cannot copy {file} into the rehearsal: {source}")]
    Copy { file: String, source: StoreError },
    #[error(
        "cannot keep the row ids of {file}: its add action carries no baseRowId or \
         defaultRowCommitVersion, which a table with row tracking enabled gives every file"
    )]
    RowIds { file: String },
}

impl<'a> ShallowClone<'a> {
    pub fn new(source: &'a DeltaTable, destination: Url, stores: &'a Stores) -> Self {
        ShallowClone { source, destination, stores, localize: Localize::Nothing }
    }

    /// Copies the files that hold rows of `ranges` (the window, or a preview's slices) on
    /// `date_column` into the clone, so that writes to them can rewrite those files.
    pub fn with_localized_days(mut self, date_column: &str, ranges: Vec<Window>) -> Self {
        self.localize = Localize::Window(date_column.to_owned(), ranges);
        self
    }

    /// Makes the clone: one commit at the destination. The caller opens it as it needs it (the
    /// rehearsal through a store that checksums its writes).
    pub async fn execute(self) -> Result<CloneMetrics, CloneError> {
        let started = std::time::Instant::now();
        let source_name = display_url(self.source.table_url());
        let delta = |source| CloneError::Delta { table: source_name.clone(), source: Box::new(source) };
        replace_previous_rehearsal(self.stores, &self.destination).await?;

        let snapshot = self.source.snapshot().map_err(delta)?;
        let source_version = snapshot.version();
        // The rehearsal is bf's own table, written by deltalake: the features bf honours only in
        // the commits it makes to the target (in-commit timestamps, domains, clustering) are left
        // out, so deltalake writes it; publishing adds what they ask to each commit it makes.
        let protocol = crate::delta::commit::without_own_features(snapshot.protocol()).map_err(delta)?;
        let mut metadata = snapshot
            .metadata()
            .clone()
            .with_table_id(uuid::Uuid::new_v4().to_string())
            .map_err(|e| delta(DeltaTableError::Generic(e.to_string())))?;
        for key in crate::delta::commit::IN_COMMIT_TIMESTAMP_PROPERTIES {
            if metadata.configuration().contains_key(key) {
                metadata = metadata
                    .remove_config_key(key)
                    .map_err(|e| delta(DeltaTableError::Generic(e.to_string())))?;
            }
        }
        let materialized = RowTracking::of(snapshot).and_then(|t| t.materialized);
        let metadata = row_tracking::rehearsal_metadata(metadata, materialized.as_ref()).map_err(delta)?;
        let files: Vec<_> =
            self.source.get_active_add_actions_by_predicate(None).try_collect().await.map_err(delta)?;

        let destination = self.stores.builder(&self.destination).map_err(delta)?.build().map_err(delta)?;
        let mut metrics = CloneMetrics { source_version, ..CloneMetrics::default() };
        let mut actions = vec![Action::Protocol(protocol.clone()), Action::Metadata(metadata.clone())];
        // The log keys partition values and statistics by the column's physical name.
        let physical = match &self.localize {
            Localize::Window(column, _) => crate::delta::table::physical_name(self.source, column),
            Localize::Nothing => String::new(),
        };
        for file in &files {
            actions.push(Action::Add(
                self.clone_file(file, &physical, materialized.as_ref(), &mut metrics).await?,
            ));
        }
        let operation = DeltaOperation::Create {
            mode: SaveMode::ErrorIfExists,
            location: self.destination.clone(),
            protocol,
            metadata,
        };
        self.commit(&destination, actions, operation, source_version).await.map_err(delta)?;
        metrics.millis = started.elapsed().as_millis() as u64;
        Ok(metrics)
    }

    /// One of the source's files as the clone's log names it: by its absolute URL, or, for a file
    /// of the window being localized, by the name of a copy inside the clone. On a table that keeps
    /// row ids (`materialized`), the copy holds each row's stable id and commit version, which the
    /// rows a slice copies carry into the files it writes.
    async fn clone_file(
        &self,
        file: &LogicalFileView,
        physical: &str,
        materialized: Option<&Materialized>,
        metrics: &mut CloneMetrics,
    ) -> Result<Add, CloneError> {
        // The deprecated view is the only public way to the file's tags and row ids.
        #[allow(deprecated)]
        let original = file.add_action();
        let source_root = self.source.table_url();
        let decoded = file.path().into_owned();
        // Files of a table that is itself a clone are already absolute.
        let absolute = match Url::parse(&decoded) {
            Ok(url) if url.scheme().len() > 1 => url,
            _ => store::join(source_root, &decoded),
        };
        let partition_values = file.partition_values_map();
        let inside_source = absolute.as_str().starts_with(source_root.as_str());
        let mut localized_size = None;
        let localize = match &self.localize {
            Localize::Window(_, ranges) => {
                let stats = file.stats();
                inside_source
                    && ranges
                        .iter()
                        .any(|range| overlaps(range, physical, &partition_values, stats.as_deref()))
            }
            Localize::Nothing => false,
        };
        let path = if localize {
            // A plain name: partition values live in the add action, and a name without
            // escapes cannot be decoded differently by whoever reads it. It is its original's
            // hash, so that publishing knows which target file a removed copy stands for.
            let copy = crate::delta::publish::localized_name(&decoded);
            let to = store::join(&self.destination, &copy);
            let (bytes, by_store) = match materialized {
                None => self
                    .stores
                    .copy(&absolute, &to)
                    .await
                    .map_err(|source| CloneError::Copy { file: decoded.clone(), source })?,
                Some(columns) => {
                    let (Some(base), Some(version)) =
                        (original.base_row_id, original.default_row_commit_version)
                    else {
                        return Err(CloneError::RowIds { file: decoded.clone() });
                    };
                    let size =
                        row_tracking::materialize_file(self.stores, &absolute, &to, columns, base, version)
                            .await
                            .map_err(|source| CloneError::Delta {
                                table: decoded.clone(),
                                source: Box::new(source),
                            })?;
                    (size, false)
                }
            };
            localized_size = Some(bytes);
            metrics.bytes_localized += bytes;
            metrics.files_localized += 1;
            metrics.files_copied_by_store += usize::from(by_store);
            metrics.localized.insert(copy.clone(), decoded.clone());
            copy
        } else {
            metrics.files_referenced += 1;
            // The URL decoded once: deltalake encodes an add's path when it writes the log and
            // reads an absolute one back as a file path. Given the encoded URL, a table folder
            // named `lake ✓` was looked for as `lake%20%E2%9C%93` (tests/partitions.rs).
            percent_encoding::percent_decode_str(absolute.as_str()).decode_utf8_lossy().into_owned()
        };
        let deletion_vector = original
            .deletion_vector
            .map(|dv| crate::delta::table::absolute_deletion_vector(dv, source_root))
            .transpose()
            .map_err(|problem| CloneError::DeletionVector { file: decoded.clone(), problem })?;
        let size = localized_size.map_or(original.size, |bytes| bytes as i64);
        Ok(Add { path, partition_values, deletion_vector, size, ..original })
    }

    /// The clone's first commit: the source's protocol and metadata (a table id of its own), its
    /// files, and a `CLONE` commitInfo naming the source and version, as Delta's own clones do.
    async fn commit(
        &self,
        destination: &DeltaTable,
        mut actions: Vec<Action>,
        operation: DeltaOperation,
        source_version: u64,
    ) -> Result<(), DeltaTableError> {
        let source_root = self.source.table_url();
        actions.push(Action::CommitInfo(CommitInfo {
            timestamp: Some(chrono::Utc::now().timestamp_millis()),
            operation: Some("CLONE".into()),
            operation_parameters: Some(HashMap::from([
                ("source".to_owned(), json!(source_root.as_str())),
                ("sourceVersion".to_owned(), json!(source_version)),
                ("isShallow".to_owned(), json!(true)),
            ])),
            ..CommitInfo::default()
        }));
        let app_metadata = crate::delta::ledger::clone_metadata(source_root.as_str(), source_version);
        CommitBuilder::default()
            .with_actions(actions)
            .with_app_metadata(app_metadata)
            .build(None, destination.log_store(), operation)
            .await?;
        Ok(())
    }
}

/// Whether the table at `url` is a bf rehearsal (its first commit says so).
pub async fn is_rehearsal(stores: &Stores, url: &Url) -> bool {
    let first = store::join(url, &format!("_delta_log/{:020}.json", 0));
    let Ok((store, key)) = stores.object_store(&first) else { return false };
    let Ok(found) = store.get(&key).await else { return false };
    let Ok(bytes) = found.bytes().await else { return false };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|action| action.get("commitInfo").is_some_and(crate::delta::ledger::is_clone_commit))
}

/// Removes the previous rehearsal at `destination`, and refuses to touch anything else there.
async fn replace_previous_rehearsal(stores: &Stores, destination: &Url) -> Result<(), CloneError> {
    if !removable(stores, destination).await? {
        return Ok(());
    }
    // Only the rehearsal's own folder goes: files it references in the target are absolute URLs in
    // its log and are never followed.
    stores.remove_folder(destination).await.map_err(CloneError::Remove)
}

/// Whether the folder at `url` is a rehearsal bf may remove whole (`false` when it holds nothing),
/// or why not. `bf plan` replacing its rehearsal and `bf clean` both ask it.
///
/// The folder is removed whole, and its log is text whoever can write the folder writes: a plan in
/// a pull request pointing `[rehearsal] table` at a folder holding a copied clone commit, or a
/// `.bf/rehearsals` list committed beside it naming the checkout, would have that folder emptied.
/// So what it holds must be a rehearsal's by its shape, whatever the log says, and then its first
/// commit must say it is one.
pub async fn removable(stores: &Stores, url: &Url) -> Result<bool, CloneError> {
    let files: Vec<String> = match crate::delta::store::local_path(url) {
        // What `remove_dir_all` would take: every entry, hidden or not, links not followed.
        Some(folder) => every_file(&folder).map_err(|e| {
            CloneError::Remove(StoreError { location: display_url(url), problem: e.to_string() })
        })?,
        None => stores.list(url).await.map_err(CloneError::Remove)?.into_iter().map(|(f, _)| f).collect(),
    };
    if files.is_empty() {
        return Ok(false);
    }
    let foreign: Vec<&String> = files.iter().filter(|f| !rehearsal_shaped(f)).collect();
    if !foreign.is_empty() {
        let mut named: Vec<String> = foreign.iter().take(5).map(|f| f.to_string()).collect();
        if foreign.len() > named.len() {
            named.push(format!("{} more", foreign.len() - named.len()));
        }
        return Err(CloneError::NotOnlyARehearsal { folder: display_url(url), files: named.join(", ") });
    }
    // A clone that stopped after copying files in and before its first commit left only those.
    let unfinished = files.iter().all(|relative| relative.starts_with(&format!("{LOCALIZED}/")));
    if !unfinished && !is_rehearsal(stores, url).await {
        return Err(CloneError::NotARehearsal(display_url(url)));
    }
    Ok(true)
}

/// Whether a file, named relative to a rehearsal's folder, is one a rehearsal holds: its log (at the
/// top, as a table's), and Parquet files (the slices' data, the files it localized, change data),
/// with the staging copy the local store writes before naming one (`….parquet#1`) that a stopped
/// write leaves. Nothing hidden (`.git`, `.bf`) but the Finder's `.DS_Store`, no other kind of
/// file, no other table's log below it.
fn rehearsal_shaped(relative: &str) -> bool {
    let parts: Vec<&str> = relative.split('/').collect();
    let (file, folders) = parts.split_last().expect("a path has a last part");
    if *file == ".DS_Store" {
        return folders.iter().all(|f| !f.starts_with('.'));
    }
    let hidden = parts.iter().any(|part| part.starts_with('.'));
    let staged = file.rsplit_once('#').is_some_and(|(name, n)| {
        name.ends_with(".parquet") && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
    });
    !hidden && (relative.starts_with("_delta_log/") || file.ends_with(".parquet") || staged)
}

/// Every file (and link) under a local folder, relative to it, links not followed.
fn every_file(folder: &std::path::Path) -> std::io::Result<Vec<String>> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == folder => return Ok(files),
            entries => entries?,
        };
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(folder).unwrap_or(&path);
                files.push(relative.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/"));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a file may hold rows of `window`: decided from its partition value, else its statistics;
/// a file without either may hold anything.
pub(crate) fn overlaps(
    window: &Window,
    column: &str,
    partition_values: &HashMap<String, Option<String>>,
    stats: Option<&str>,
) -> bool {
    crate::delta::table::FileDates::read(partition_values, stats, column)
        .may_overlap(window.start, window.end)
}

#[cfg(test)]
mod tests {
    use deltalake::kernel::{DeletionVectorDescriptor, StorageType};

    use super::*;

    #[test]
    fn a_rehearsal_holds_its_log_parquet_files_and_what_a_stopped_write_or_the_finder_leaves() {
        for held in [
            "_delta_log/00000000000000000000.json",
            "_delta_log/_last_checkpoint",
            "part-0001.snappy.parquet",
            "order_date=2026-03-01/part-0001.snappy.parquet",
            "bf-localized/ab12.parquet",
            "_change_data/cdc-0001.snappy.parquet",
            "part-0001.snappy.parquet#1",
            ".DS_Store",
            "order_date=2026-03-01/.DS_Store",
        ] {
            assert!(rehearsal_shaped(held), "{held}");
        }
        for foreign in [
            "keep.txt",
            ".git/config",
            ".bf/plan.json",
            "plans/march.toml",
            "orders/_delta_log/00000000000000000000.json",
            ".git/.DS_Store",
            "part-0001.snappy.parquet#x",
            "notes.parquet.txt",
        ] {
            assert!(!rehearsal_shaped(foreign), "{foreign}");
        }
    }
    use crate::delta::table::absolute_deletion_vector;

    #[test]
    fn a_deletion_vector_beside_its_table_is_named_by_its_absolute_url() {
        let root: Url = "s3://lake/t/".parse().unwrap();
        // dat_deletion_vectors' vector (no prefix): deletion_vector_8aebe228-….bin at the root.
        let dv = DeletionVectorDescriptor {
            storage_type: StorageType::UuidRelativePath,
            path_or_inline_dv: "ITfmIXOK!>U^L:if1E+a".to_owned(),
            offset: Some(1),
            size_in_bytes: 40,
            cardinality: 4,
        };
        let absolute = absolute_deletion_vector(dv.clone(), &root).unwrap();
        assert_eq!(absolute.storage_type, StorageType::AbsolutePath);
        assert_eq!((absolute.offset, absolute.size_in_bytes, absolute.cardinality), (Some(1), 40, 4));
        let file = "deletion_vector_8aebe228-b96c-4831-b0b6-22882eb9a3d3.bin";
        assert_eq!(absolute.path_or_inline_dv, format!("s3://lake/t/{file}"));
        let prefixed = DeletionVectorDescriptor {
            path_or_inline_dv: format!("ab{}", dv.path_or_inline_dv),
            ..dv.clone()
        };
        let prefixed = absolute_deletion_vector(prefixed, &root).unwrap();
        assert_eq!(prefixed.path_or_inline_dv, format!("s3://lake/t/ab/{file}"));
        let inline = DeletionVectorDescriptor { storage_type: StorageType::Inline, ..dv };
        assert_eq!(absolute_deletion_vector(inline.clone(), &root).unwrap(), inline);
    }

    #[test]
    fn overlap_follows_partition_values_then_statistics() {
        let day = |t: &str| t.parse().unwrap();
        let march = Window { start: day("2026-03-01"), end: day("2026-03-31") };
        let partition = |v: &str| HashMap::from([("d".to_owned(), Some(v.to_owned()))]);
        assert!(overlaps(&march, "d", &partition("2026-03-05"), None));
        assert!(!overlaps(&march, "d", &partition("2026-04-01"), None));
        let stats = |min: &str, max: &str| {
            format!(r#"{{"numRecords":3,"minValues":{{"d":"{min}"}},"maxValues":{{"d":"{max}"}}}}"#)
        };
        assert!(overlaps(&march, "d", &HashMap::new(), Some(&stats("2026-02-20", "2026-03-01"))));
        assert!(!overlaps(&march, "d", &HashMap::new(), Some(&stats("2026-01-01", "2026-02-28"))));
        assert!(overlaps(&march, "d", &HashMap::new(), None), "no statistics: may hold anything");
    }
}
