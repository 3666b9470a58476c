//! Publishing a rehearsed slice: the files the rehearsal wrote for it become the target's, in one
//! commit — write, audit, publish. What lands is exactly what was reviewed, and nothing is computed
//! or written twice.
//!
//! 1. At `bf plan`, after each slice's rehearsal commit, [`record`] reads that commit and keeps, in
//!    the saved plan, what publishing it takes ([`Publication`]): the files it added (their path
//!    relative to the table root, size and sha256) and the target's files it removed (mapped back to
//!    the target's own paths: the clone's references name them by URL, and the files it copied into
//!    the rehearsal are named as the target names them).
//! 2. At `bf apply`, [`Publisher::check`] makes sure the rehearsal is the one the plan recorded
//!    (same table, same version) and still holds every file to publish.
//! 3. [`Publisher::publish`] places each added file and change-data file under the target's root at
//!    the same relative path ([`Stores::place`]: a fresh hard link locally, the store's copy in a
//!    bucket, or in S3 the file's bytes put; never over a file that is there), checks its bytes
//!    against the recorded checksum (as they are put, or read back once placed), then commits the
//!    rehearsal's add actions (statistics included) with removes of the target's own files
//!    (their deletion vectors included) and the change-data files, as one commit carrying the slice's
//!    ledger keys and transaction. A crash before the commit leaves only unreferenced files, which
//!    the resumed apply finds in place and checks again. A rehearsal commit that would change the
//!    table itself (metadata, protocol, domain metadata) is refused: publishing carries data only.
//!    On a disk, the next slice's files are read while a slice commits (`publish/ahead.rs`).

mod ahead;
mod removes;

use removes::Removes;
pub use removes::{LOCALIZED, localized_name};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Action, Add, AddCDCFile};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use crate::delta::store::{self, StoreError, Stores, display_url};
use crate::window::Slice;

/// How many files are placed, or checksummed, at once: requests to a bucket overlap their round
/// trips.
const AT_ONCE: usize = 8;

/// What publishing one rehearsed slice takes, recorded by `bf plan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Publication {
    /// The rehearsal's version holding the slice's commit (its last, when it took several).
    pub rehearsal_version: u64,
    /// The first of the rehearsal's versions holding the slice, when it took several: on a table
    /// keeping row ids, the rows the slice carries and its own are written apart, with the change
    /// data feed on the own rows' inserts a third (`rehearse::slice_writer`), published as one commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rehearsal_first_version: Option<u64>,
    /// The files the slice adds, as the rehearsal wrote them.
    pub adds: Vec<PublishedFile>,
    /// The target's files the slice removes: their paths relative to the target's root, decoded.
    pub removes: Vec<String>,
    /// The change-data files the slice's commit writes (tables with the change data feed on),
    /// checked like its data files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdc: Vec<PublishedFile>,
    /// The bytes of the target's files the slice removes, as its commit's remove actions size them.
    #[serde(default)]
    pub removed_bytes: u64,
    /// The partitions the commit touches (`order_date=2026-03-01`), from its actions' partition
    /// values; none for an unpartitioned table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<String>,
    /// The rows in the files the commit adds, by their statistics: the slice's rows and whatever
    /// else the rewritten files held (deltalake's `num_added_rows` counts the slice's only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_written: Option<u64>,
}

/// What one commit added to a table — files, bytes and rows by the files' statistics — as its log
/// records it: what lineage reports as a write's output statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Written {
    pub files: u64,
    pub bytes: u64,
    /// `None` when a file the commit added carries no row count in its statistics.
    pub rows: Option<u64>,
}

impl Written {
    /// A published slice's: the rehearsal's commit, whose files land unchanged.
    pub fn of(publication: &Publication) -> Written {
        Written {
            files: publication.adds.len() as u64,
            bytes: publication.adds.iter().map(|f| f.size).sum(),
            rows: publication.rows_written,
        }
    }

    /// Commit `version` of `table`'s, read from its log entry.
    pub async fn read(table: &DeltaTable, version: u64) -> Result<Written, DeltaTableError> {
        let adds = crate::delta::ledger::added_files(table, version).await?;
        let records = |add: &Value| -> Option<u64> {
            let stats: Value = serde_json::from_str(add.get("stats")?.as_str()?).ok()?;
            stats.get("numRecords")?.as_u64()
        };
        Ok(Written {
            files: adds.len() as u64,
            bytes: adds.iter().filter_map(|a| a.get("size")?.as_u64()).sum(),
            rows: adds.iter().map(records).sum(),
        })
    }
}

/// A file the rehearsal wrote, by its path relative to the table root (decoded), which is also where
/// it lands in the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PublishedFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Delta(#[from] DeltaTableError),
    #[error("the rehearsal's commit {version} {problem}")]
    Commit { version: u64, problem: String },
}

/// The actions of one commit of a table's log, read raw.
/// The actions of the rehearsal's commits `versions`, in order: what one slice publishes.
async fn slice_actions(
    table: &DeltaTable,
    versions: std::ops::RangeInclusive<u64>,
) -> Result<Vec<Value>, PublishError> {
    let mut actions = Vec::new();
    for version in versions {
        actions.extend(commit_actions(table, version).await?);
    }
    Ok(actions)
}

async fn commit_actions(table: &DeltaTable, version: u64) -> Result<Vec<Value>, PublishError> {
    let problem = |problem: String| PublishError::Commit { version, problem };
    let bytes = table
        .log_store()
        .read_commit_entry(version as _)
        .await?
        .ok_or_else(|| problem("is not in the rehearsal's log".into()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| problem(e.to_string()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| problem(format!("does not parse: {e}"))))
        .collect()
}

fn decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned()
}

/// What publishing the rehearsal's commits `versions` (one slice's: one commit, or two) takes.
/// `localized` maps the files the clone copied into the rehearsal to the target's paths for them;
/// `written` holds the checksums of the files the rehearsal's writer wrote, which are not read
/// again.
pub async fn record(
    stores: &Stores,
    rehearsal: &DeltaTable,
    versions: std::ops::RangeInclusive<u64>,
    target_root: &Url,
    localized: &BTreeMap<String, String>,
    written: &store::Written,
) -> Result<Publication, PublishError> {
    let (first, version) = (*versions.start(), *versions.end());
    let actions = slice_actions(rehearsal, versions).await?;
    let root = decoded(target_root.as_str());
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    let mut cdc = Vec::new();
    let mut removed_bytes = 0;
    let mut partitions = BTreeSet::new();
    for action in &actions {
        for kind in ["add", "remove"] {
            if let Some(Value::Object(values)) = action.pointer(&format!("/{kind}/partitionValues")) {
                let part: Vec<String> =
                    values.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("__NULL__"))).collect();
                if !part.is_empty() {
                    partitions.insert(part.join("/"));
                }
            }
        }
        removed_bytes += action.pointer("/remove/size").and_then(Value::as_u64).unwrap_or(0);
        if let Some(path) = action.pointer("/add/path").and_then(Value::as_str) {
            adds.push(decoded(path));
        }
        if let Some(path) = action.pointer("/cdc/path").and_then(Value::as_str) {
            cdc.push(decoded(path));
        }
        if let Some(path) = action.pointer("/remove/path").and_then(Value::as_str) {
            let path = decoded(path);
            let target_path = if let Some(relative) = path.strip_prefix(&root) {
                // A file the clone referenced in the target.
                relative.to_owned()
            } else if let Some(original) = localized.get(&path) {
                original.clone()
            } else if store::uri(&path).is_none() {
                // A file an earlier slice wrote: published there under the same path.
                path
            } else {
                return Err(PublishError::Commit {
                    version,
                    problem: format!("removes {path}, which is not a file of the target"),
                });
            };
            removes.push(target_path);
        }
    }
    let records = |a: &Value| -> Option<u64> {
        let stats: Value = serde_json::from_str(a.pointer("/add/stats")?.as_str()?).ok()?;
        stats.get("numRecords")?.as_u64()
    };
    let added = actions.iter().filter(|a| a.get("add").is_some());
    let rows_written = added.clone().map(records).sum::<Option<u64>>();
    // Each file's size and sha256 as the writer wrote it, else read back, side by side (in a
    // bucket, a round trip each).
    let recorded = |paths: Vec<String>| {
        futures::stream::iter(paths)
            .map(|path| async move {
                let url = store::join(rehearsal.table_url(), &path);
                let (_, key) = stores.object_store(&url)?;
                let (size, sha256) = match written.get(&key) {
                    Some(noted) => noted,
                    None => stores.checksum(&url).await?,
                };
                Ok::<_, PublishError>(PublishedFile { path, size, sha256 })
            })
            .buffered(AT_ONCE)
            .try_collect::<Vec<_>>()
    };
    Ok(Publication {
        rehearsal_version: version,
        rehearsal_first_version: (first < version).then_some(first),
        adds: recorded(adds).await?,
        removes,
        cdc: recorded(cdc).await?,
        removed_bytes,
        partitions: partitions.into_iter().collect(),
        rows_written,
    })
}

impl Publication {
    /// The rehearsal's versions holding the slice.
    pub fn versions(&self) -> std::ops::RangeInclusive<u64> {
        self.rehearsal_first_version.unwrap_or(self.rehearsal_version)..=self.rehearsal_version
    }
}

/// What the saved plan says of its rehearsal, each checked against the rehearsal itself.
pub struct Recorded<'r> {
    pub plan_id: &'r str,
    /// The rehearsal's table id: another `bf plan` makes a new one.
    pub table_id: &'r str,
    /// The rehearsal's version after its last slice.
    pub version: u64,
    pub date_column: &'r str,
}

/// Publishes rehearsed slices into the target.
pub struct Publisher<'a> {
    stores: &'a Stores,
    rehearsal: DeltaTable,
    /// The saved plan's id, which each rehearsal commit to publish must carry.
    plan_id: String,
    /// The date column, by its name: what a slice removes must hold the slice's days on it.
    date_column: String,
    /// The operation each commit is recorded as, which is also what deltalake's conflict check
    /// reads: an overwrite of the slice's days, as a replaceWhere of them is.
    partition_by: Option<Vec<String>>,
    ahead: ahead::ReadAhead,
}

impl<'a> Publisher<'a> {
    /// Opens the rehearsal the saved plan recorded and checks it is still that rehearsal.
    pub async fn open(
        stores: &'a Stores,
        rehearsal: &Url,
        recorded: Recorded<'_>,
        partition_columns: &[String],
    ) -> Result<Publisher<'a>, String> {
        let Recorded { plan_id, table_id, version, date_column } = recorded;
        let at = display_url(rehearsal);
        // Publishing reads the rehearsal's commits one by one, never its list of files.
        let (opened, snapshot) = stores
            .open_log(rehearsal)
            .await
            .map_err(|e| format!("the rehearsal {at} cannot be opened ({e})"))?;
        if snapshot.metadata().id() != table_id {
            return Err(format!("the rehearsal {at} was made again since this plan (another `bf plan`)"));
        }
        let found = snapshot.version();
        if found != version {
            return Err(format!(
                "the rehearsal {at} is at version {found}, not the version {version} this plan reviewed"
            ));
        }
        let partition_by = (!partition_columns.is_empty()).then(|| partition_columns.to_vec());
        Ok(Publisher {
            stores,
            rehearsal: opened,
            plan_id: plan_id.to_owned(),
            date_column: date_column.to_owned(),
            partition_by,
            ahead: Default::default(),
        })
    }

    /// Why the publications cannot be published, if a file they add is gone from the rehearsal.
    /// In a bucket one listing of the rehearsal's folder answers for every file
    /// ([`Stores::keys_under`]); on a disk each file is looked at.
    pub async fn check<'p>(
        &self,
        publications: impl IntoIterator<Item = &'p Publication>,
    ) -> Result<(), String> {
        let root = self.rehearsal.table_url();
        let listed = self.stores.keys_under(root).await.map_err(|e| e.to_string())?;
        for file in publications.into_iter().flat_map(|p| &p.adds) {
            let url = store::join(root, &file.path);
            let held = match &listed {
                None => store::local_path(&url).is_some_and(|path| path.is_file()),
                Some(listed) => {
                    listed.contains(&self.stores.object_store(&url).map_err(|e| e.to_string())?.1)
                }
            };
            if !held {
                return Err(format!(
                    "the rehearsal no longer holds {} (VACUUM, or removed by hand)",
                    display_url(&url)
                ));
            }
        }
        Ok(())
    }

    /// Starts reading the files of the slices to publish on a disk, one slice ahead of the slice
    /// being published, in the order given (`publish/ahead.rs`). Into a bucket, a file is checked as it is
    /// put there or read back, never from a reading taken beforehand: nothing is read ahead.
    pub fn read_ahead<'p>(&self, target_root: &Url, publications: impl IntoIterator<Item = &'p Publication>) {
        if store::local_path(target_root).is_none() {
            return;
        }
        let root = self.rehearsal.table_url();
        self.ahead.queue(publications.into_iter().map(|publication| {
            let files = publication.adds.iter().chain(&publication.cdc);
            let local = files.filter_map(|file| store::local_path(&store::join(root, &file.path)));
            (publication.rehearsal_version, local.collect())
        }));
    }

    /// Waits for the reading ahead of `publication`'s files, when a test pauses before its slice.
    pub async fn settle_before_pause(&self, slice: &Slice, publication: &Publication) {
        if crate::fault::pausing_before(slice.index) {
            self.ahead.settle(publication.rehearsal_version).await;
        }
    }

    /// Publishes one slice: its files placed and checked, then one commit. Returns the table after
    /// it.
    pub async fn publish(
        &self,
        table: DeltaTable,
        slice: &Slice,
        publication: &Publication,
        predicate: String,
        commit: impl FnOnce(HashMap<String, Value>) -> CommitProperties,
    ) -> Result<DeltaTable, PublishError> {
        let version = publication.rehearsal_version;
        let actions = slice_actions(&self.rehearsal, publication.versions()).await?;
        let metrics = operation_metrics(&actions);
        data_only(version, &actions)?;
        // The table's own files: a file at one of their paths is never replaced.
        let live: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await?;
        let referenced: HashSet<String> = live.iter().map(|f| f.path().into_owned()).collect();
        // What the slice removes is settled before a file is placed: a refused slice leaves nothing.
        let rule = Removes { slice, version, plan_id: &self.plan_id, target_root: table.table_url() };
        let column = crate::delta::table::physical_name(&table, &self.date_column);
        let removes = rule.actions(&actions, publication, &live, &column)?;
        let mut published =
            self.place_files(table.table_url(), slice, publication, &actions, &referenced).await?;
        published.extend(removes);
        let operation = DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: self.partition_by.clone(),
            predicate: Some(predicate),
        };
        crate::fault::fault(&format!("before-publish-commit:{}", slice.index));
        // The snapshot the commit left, as deltalake's own writers return it: reading the log again
        // replayed every file's statistics once more per slice (docs/BENCHMARKS.md).
        Ok(crate::delta::commit::commit(table, published, operation, commit(metrics)).await?)
    }

    /// Places every file the rehearsal's commit adds (data and change data) and returns the actions
    /// that add them to the target. Every file must be one the plan recorded, so what lands is
    /// what was reviewed.
    async fn place_files(
        &self,
        target_root: &Url,
        slice: &Slice,
        publication: &Publication,
        actions: &[Value],
        referenced: &HashSet<String>,
    ) -> Result<Vec<Action>, PublishError> {
        let version = publication.rehearsal_version;
        let mut published: Vec<Action> = Vec::new();
        let mut to_place: Vec<&PublishedFile> = Vec::new();
        let recorded: HashMap<&str, &PublishedFile> =
            publication.adds.iter().map(|f| (f.path.as_str(), f)).collect();
        let recorded_cdc: HashMap<&str, &PublishedFile> =
            publication.cdc.iter().map(|f| (f.path.as_str(), f)).collect();
        // Files are looked up by the path their raw action holds, decoded once, as `record` did.
        let raw_path = |action: &Value, kind: &str| {
            action.pointer(&format!("/{kind}/path")).and_then(Value::as_str).map(decoded).unwrap_or_default()
        };
        for action in actions {
            if let Some(add) = action.get("add") {
                let add: Add = serde_json::from_value(add.clone()).map_err(|e| commit_problem(version, e))?;
                let Some(expected) = recorded.get(raw_path(action, "add").as_str()) else {
                    return Err(commit_problem(
                        version,
                        format!("adds {} which the plan did not record", add.path),
                    ));
                };
                to_place.push(expected);
                // A file new to the table: its row ids, where the table tracks them, are the
                // publishing commit's to give (`delta/row_tracking.rs`), never the rehearsal's.
                let add =
                    Add { data_change: true, base_row_id: None, default_row_commit_version: None, ..add };
                published.push(Action::Add(add));
            }
            if let Some(cdc) = action.get("cdc") {
                let cdc: AddCDCFile =
                    serde_json::from_value(cdc.clone()).map_err(|e| commit_problem(version, e))?;
                let Some(expected) = recorded_cdc.get(raw_path(action, "cdc").as_str()) else {
                    return Err(commit_problem(
                        version,
                        format!("writes the change-data file {} which the plan did not record", cdc.path),
                    ));
                };
                to_place.push(expected);
                published.push(Action::Cdc(cdc));
            }
        }
        let read = self.ahead.take(version).await;
        // Files are placed and checked side by side: in a bucket each is a few round trips.
        futures::stream::iter(to_place)
            .map(|file| self.place(target_root, file, &read, referenced, slice, version))
            .buffer_unordered(AT_ONCE)
            .try_collect::<Vec<()>>()
            .await?;
        if published.iter().filter(|a| matches!(a, Action::Add(_))).count() != publication.adds.len() {
            return Err(commit_problem(version, "does not add every file the plan recorded"));
        }
        Ok(published)
    }
}

/// The history reads as it would for a write: the rows the rehearsal's write added and removed.
/// A slice written in two rehearsal commits publishes their counts added up.
fn operation_metrics(actions: &[Value]) -> HashMap<String, Value> {
    let mut summed: Option<serde_json::Map<String, Value>> = None;
    for metrics in actions.iter().filter_map(|a| a.pointer("/commitInfo/operationMetrics")?.as_object()) {
        let Some(sum) = summed.as_mut() else {
            summed = Some(metrics.clone());
            continue;
        };
        for (name, value) in metrics {
            match (sum.get(name).and_then(Value::as_u64), value.as_u64()) {
                (Some(a), Some(b)) => {
                    sum.insert(name.clone(), Value::from(a + b));
                }
                _ => {
                    sum.entry(name.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
    summed.map(|m| ("operationMetrics".to_owned(), Value::Object(m))).into_iter().collect()
}

/// What publishing carries over is data: a commit that would also change the table's schema,
/// properties or protocol is not this slice's to make.
fn data_only(version: u64, actions: &[Value]) -> Result<(), PublishError> {
    let carried = ["commitInfo", "add", "remove", "cdc", "txn"];
    if let Some(kind) = actions
        .iter()
        .filter_map(|a| a.as_object()?.keys().next().cloned())
        .find(|k| !carried.contains(&k.as_str()))
    {
        return Err(commit_problem(
            version,
            format!(
                "holds a `{kind}` action: it changes the table itself, which publishing the slice's files \
                 cannot carry; nothing was committed (`bf apply --recompute` writes the slice instead)"
            ),
        ));
    }
    Ok(())
}

impl Publisher<'_> {
    /// Places one rehearsed file beside the table's own files and checks its bytes before anything
    /// commits. A file already at its path that the table does not reference and that is not the
    /// rehearsed file (a copy a crash or a fault left) is replaced whole; one the table references
    /// is never touched.
    async fn place(
        &self,
        target_root: &Url,
        file: &PublishedFile,
        read: &HashMap<PathBuf, ahead::Read>,
        referenced: &HashSet<String>,
        slice: &Slice,
        version: u64,
    ) -> Result<(), PublishError> {
        let from = store::join(self.rehearsal.table_url(), &file.path);
        let to = store::join(target_root, &file.path);
        // A reading taken ahead holds only for the file as it is now, just before it is linked.
        let read = store::local_path(&from).and_then(|path| read.get(&path).filter(|r| r.unchanged(&path)));
        if let (Some(table), Some(path)) = (store::local_path(target_root), store::local_path(&to)) {
            // A partition folder the table holds as a link would take the file elsewhere.
            crate::write_gate::WriteGate::within([&table])
                .check_file(&path)
                .map_err(|refused| commit_problem(version, format!("{refused}; nothing was committed")))?;
        }
        let placed = self.stores.place(&from, &to, (file.size, &file.sha256)).await?;
        match placed {
            // In a bucket: the bytes put were checked as they were read from the rehearsal.
            store::Placed::Checked => return Ok(()),
            store::Placed::Differs(size, sha256) => {
                return Err(not_rehearsed(version, file, "the rehearsal's file is not", size, &sha256));
            }
            store::Placed::New | store::Placed::Existing => {}
        }
        if crate::fault::corrupt(&format!("corrupt-published:{}", slice.index)) {
            // A test hook: the copy in the target is not the rehearsed file.
            if let Some(path) = store::local_path(&to) {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::write(&path, b"not the rehearsed file");
            }
        }
        let linked = |read: &ahead::Read| store::local_path(&to).is_some_and(|path| read.linked_at(&path));
        let mut found = match read {
            Some(read) if placed == store::Placed::New && linked(read) => (read.size(), read.sha256.clone()),
            _ => self.stores.checksum(&to).await?,
        };
        if found != (file.size, file.sha256.clone())
            && placed == store::Placed::Existing
            && !referenced.contains(&file.path)
        {
            self.stores.replace(&from, &to).await?;
            found = self.stores.checksum(&to).await?;
        }
        let (size, sha256) = found;
        if (size, sha256.as_str()) != (file.size, file.sha256.as_str()) {
            return Err(not_rehearsed(version, file, "its copy in the target is not", size, &sha256));
        }
        Ok(())
    }
}

/// A file to publish whose bytes, found where `which` says, are not those the plan recorded.
fn not_rehearsed(version: u64, file: &PublishedFile, which: &str, size: u64, sha256: &str) -> PublishError {
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    commit_problem(
        version,
        format!(
            "adds {}, and {which} the rehearsed file ({size} bytes, sha256 {}…; the plan recorded {} bytes, \
             sha256 {}…); nothing was committed",
            file.path,
            short(sha256),
            file.size,
            short(&file.sha256)
        ),
    )
}

fn commit_problem(version: u64, problem: impl ToString) -> PublishError {
    PublishError::Commit { version, problem: problem.to_string() }
}
