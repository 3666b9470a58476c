//! The one way bf commits to a table it backfills.
//!
//! deltalake's `CommitBuilder` refuses a table whose protocol lists a writer feature deltalake does
//! not implement. For some of them, what PROTOCOL.md asks of a writer is only something about each
//! commit, which bf adds itself:
//! - `inCommitTimestamp`: every commit starts with its `commitInfo`, carrying an `inCommitTimestamp`
//!   greater than the previous commit's (`max(now, previous + 1)`);
//! - `domainMetadata`: every domain is preserved — bf writes none (publishing refuses a rehearsal
//!   commit that carries one, a restore keeps them), so each stays as it was;
//! - `identityColumns`: each commit raises the columns' high-water marks past the values it adds
//!   (`delta/identity.rs`; a `GENERATED ALWAYS` column's values are made at the rehearsal);
//! - `rowTracking`: each file added gets its rows' ids above the table's high-water mark, which
//!   the commit raises; removes and files added back keep theirs (`delta/row_tracking.rs`); under
//!   column mapping, `maxColumnId` is raised past the field ids of the hidden columns that hold
//!   copied rows' ids in the files it adds;
//! - `clustering`, and `liquid`, Databricks' name for it before the protocol had one: the
//!   clustering domain is kept (as above), and every file added carries statistics for the
//!   clustering columns — deltalake writes them for every column, and [`check`] refuses a table
//!   whose statistics settings would leave a column without them. Files need not be clustered:
//!   the next OPTIMIZE clusters them.
//!
//! For those tables bf commits through a view of the table whose protocol leaves these features
//! out, so everything else deltalake checks at a commit (reader features, append-only) still runs,
//! and adds what each feature asks. Such a commit is never retried by deltalake: a rebase over
//! another writer's commit would keep an in-commit timestamp that may no longer be greater than
//! the winner's. A lost race is the caller's to write again from the table as it is then
//! ([`lost_race`]).
//!
//! deltalake's own operations that rewrite rows (a write with a predicate, RESTORE) build their
//! commits themselves; on these tables bf restores through [`restore`] and never writes rows
//! through deltalake (`compat::check_deltalake_writes`).

use std::collections::HashSet;

use delta_kernel::table_properties::TableProperties;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties, TableReference, TransactionError};
use deltalake::kernel::{Action, EagerSnapshot, Metadata, Protocol};
use deltalake::protocol::DeltaOperation;
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use serde_json::Value;

use crate::delta::row_tracking::RowTracking;

/// The writer features bf honours by what it adds to each commit it makes.
pub const HONOURED_IN_COMMITS: [&str; 6] =
    ["inCommitTimestamp", "domainMetadata", "clustering", "liquid", "identityColumns", "rowTracking"];

/// The table property that turns in-commit timestamps on (with the feature in the protocol).
const ENABLE_ICT: &str = "delta.enableInCommitTimestamps";

/// The table properties of in-commit timestamps: on, and since which version and time.
pub const IN_COMMIT_TIMESTAMP_PROPERTIES: [&str; 3] =
    [ENABLE_ICT, "delta.inCommitTimestampEnablementVersion", "delta.inCommitTimestampEnablementTimestamp"];

/// What commits to a table need beyond what deltalake writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Own {
    /// The writer features deltalake refuses that bf honours, as the protocol lists them.
    pub features: Vec<String>,
    /// Whether each commit carries an in-commit timestamp.
    pub in_commit_timestamps: bool,
    /// What row tracking asks of each commit, where writers assign row ids.
    pub row_tracking: Option<RowTracking>,
}

impl Own {
    /// Read from the table's protocol and properties. Empty for a table deltalake commits to alone.
    pub fn of(table: &DeltaTable) -> Own {
        let Ok(state) = table.snapshot() else { return Own::default() };
        let Ok(protocol) = crate::delta::table::WriterProtocol::of(state) else { return Own::default() };
        let features: Vec<String> =
            protocol.required().into_iter().filter(|f| HONOURED_IN_COMMITS.contains(&f.as_str())).collect();
        let enabled =
            state.metadata().configuration().get(ENABLE_ICT).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let in_commit_timestamps = enabled && features.iter().any(|f| f == "inCommitTimestamp");
        Own { features, in_commit_timestamps, row_tracking: RowTracking::of(state) }
    }

    /// Whether bf adds something to each commit (deltalake would refuse the table).
    pub fn needed(&self) -> bool {
        !self.features.is_empty()
    }

    /// What a reviewer should know of such a table, for the plan's notes; `None` for another.
    pub fn note(&self) -> Option<String> {
        if !self.needed() {
            return None;
        }
        let listed: Vec<String> = self.features.iter().map(|f| format!("`{f}`")).collect();
        let clustered = self.features.iter().any(|f| f == "clustering" || f == "liquid");
        let mut done = vec![if self.in_commit_timestamps {
            "in-commit timestamps, domains kept"
        } else {
            "domains kept"
        }];
        match &self.row_tracking {
            Some(RowTracking { materialized: Some(_) }) => {
                done.push("new row ids for the rows it writes, the old ones kept for the rows it copies")
            }
            Some(RowTracking { materialized: None }) => done.push("new row ids for the rows it adds"),
            None => {}
        }
        Some(format!(
            "the table's writer features {} are honoured in each commit bf makes to it ({}){}; \
             `bf apply --recompute` is refused on it, and `bf rollback --window-only` undoes bf's commits \
             file by file",
            listed.join(", "),
            done.join("; "),
            if clustered { ", and the files it adds are clustered by the next OPTIMIZE" } else { "" },
        ))
    }
}

/// The table as deltalake's commit checks see it: its protocol without the features bf honours
/// itself; everything else is the table's.
struct View<'a> {
    state: &'a deltalake::table::state::DeltaTableState,
    protocol: Protocol,
}

impl TableReference for View<'_> {
    fn config(&self) -> &TableProperties {
        TableReference::config(self.state)
    }

    fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    fn metadata(&self) -> &Metadata {
        TableReference::metadata(self.state)
    }

    fn eager_snapshot(&self) -> &EagerSnapshot {
        TableReference::eager_snapshot(self.state)
    }
}

/// `protocol` without the writer features bf honours in its commits. A legacy writer version that
/// implies one (6: identity columns) becomes version 7 naming the rest of what it implied.
pub fn without_own_features(protocol: &Protocol) -> Result<Protocol, DeltaTableError> {
    let mut value = serde_json::to_value(protocol)?;
    let own = |f: &str| HONOURED_IN_COMMITS.contains(&f);
    let version = value.get("minWriterVersion").and_then(Value::as_i64).unwrap_or(0);
    if version < 7 {
        let implied = crate::delta::table::WriterProtocol { version, features: Vec::new() }.required();
        if implied.iter().any(|f| own(f)) {
            // Column mapping is a reader feature too: named at reader version 3 where the table's
            // readers support it (version 2), left out where they cannot (1: no table maps columns).
            let maps = value.get("minReaderVersion").and_then(Value::as_i64).unwrap_or(1) >= 2;
            let kept: Vec<Value> = implied
                .into_iter()
                .filter(|f| !own(f) && (f != "columnMapping" || maps))
                .map(Value::from)
                .collect();
            if maps {
                value["minReaderVersion"] = Value::from(3);
                value["readerFeatures"] = Value::from(vec!["columnMapping"]);
            }
            value["minWriterVersion"] = Value::from(7);
            value["writerFeatures"] = Value::from(kept);
        }
    } else if let Some(Value::Array(features)) = value.get_mut("writerFeatures") {
        features.retain(|f| !f.as_str().is_some_and(own));
    }
    Ok(serde_json::from_value(value)?)
}

/// Commits `actions` to `table` as one commit of `operation`, adding what the table's protocol
/// asks of it; returns the table after it. On a table deltalake writes alone this is deltalake's
/// commit, retries and all; on one with features bf honours, a commit that finds the table moved
/// fails ([`lost_race`]).
pub async fn commit(
    table: DeltaTable,
    mut actions: Vec<Action>,
    operation: DeltaOperation,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    let own = Own::of(&table);
    let state = table.snapshot()?;
    let committed = if !own.needed() {
        CommitBuilder::from(properties)
            .with_actions(actions)
            .build(Some(state), table.log_store(), operation)
            .await?
    } else {
        let tags = match &own.row_tracking {
            Some(tracking) => crate::delta::row_tracking::complete(&table, tracking, &mut actions).await?,
            None => Default::default(),
        };
        if own.in_commit_timestamps || !tags.is_empty() {
            // bf writes the commitInfo itself; deltalake adds the commit's properties to it.
            let mut info = operation.get_commit_info();
            info.timestamp = Some(chrono::Utc::now().timestamp_millis());
            if own.in_commit_timestamps {
                let previous = in_commit_timestamp(&table, state.version()).await?;
                let at = info.timestamp.unwrap_or_default().max(previous + 1);
                info.timestamp = Some(at);
                info.in_commit_timestamp = Some(at);
            }
            if !tags.is_empty() {
                info.info.insert("tags".to_owned(), serde_json::json!(tags));
            }
            actions.retain(|a| !matches!(a, Action::CommitInfo(_)));
            actions.insert(0, Action::CommitInfo(info));
        }
        if own.features.iter().any(|f| f == "identityColumns")
            && let Some(metadata) = crate::delta::identity::marked(state.metadata(), &actions)
                .map_err(DeltaTableError::Generic)?
        {
            actions.retain(|a| !matches!(a, Action::Metadata(_)));
            actions.push(Action::Metadata(metadata));
        }
        // The field ids the files added carry stay at or under the table's maximum.
        if let Some(metadata) = crate::delta::row_tracking::column_ids_covered(&table, &actions).await? {
            actions.retain(|a| !matches!(a, Action::Metadata(_)));
            actions.push(Action::Metadata(metadata));
        }
        let view = View { state, protocol: without_own_features(state.protocol())? };
        CommitBuilder::from(properties)
            .with_actions(actions)
            .with_max_retries(0)
            .build(Some(&view), table.log_store(), operation)
            .await?
    };
    let mut table = table;
    table.state = Some(committed.snapshot);
    Ok(table)
}

/// Whether a commit failed only because another writer committed first: written again from the
/// table as it is then, it may succeed.
pub fn lost_race(error: &DeltaTableError) -> bool {
    matches!(
        error,
        DeltaTableError::Transaction {
            source: TransactionError::MaxCommitAttempts(0) | TransactionError::VersionAlreadyExists(_)
        }
    )
}

/// The in-commit timestamp of `version`, read from its commit as written. A table with in-commit
/// timestamps whose latest commit carries none (or whose commit is gone) is refused: the next
/// timestamp could not be proved greater.
pub async fn in_commit_timestamp(table: &DeltaTable, version: u64) -> Result<i64, DeltaTableError> {
    let missing = |why: &str| {
        DeltaTableError::Generic(format!(
            "{}: version {version} {why}, so bf cannot give its next commit a later in-commit timestamp",
            crate::delta::store::display_url(table.table_url())
        ))
    };
    let Some(bytes) = table.log_store().read_commit_entry(version).await? else {
        return Err(missing("is no longer in the log"));
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|action| action.pointer("/commitInfo/inCommitTimestamp").and_then(Value::as_i64))
        .ok_or_else(|| missing("carries no in-commit timestamp"))
}

/// Restores `table` to `version` in one commit: deltalake's RESTORE, or on a table it refuses
/// (features bf honours in its commits), [`restore_in_commit`].
pub async fn restore(
    table: DeltaTable,
    version: u64,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    if Own::of(&table).needed() {
        return restore_in_commit(table, version, properties).await;
    }
    let (table, _) =
        table.restore().with_version_to_restore(version as _).with_commit_properties(properties).await?;
    Ok(table)
}

/// Restores `table` to `version` as deltalake's RESTORE does — every file live at `version` and not
/// now added back, every file live now and not then removed, the version's metadata (the protocol
/// stays the table's: RESTORE keeps the greater of the two) — as one commit through [`commit`].
/// Files are told apart by path and deletion vector, as RESTORE does; domains are left as they are.
async fn restore_in_commit(
    table: DeltaTable,
    version: u64,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    let mut then = table.clone();
    then.load_version(version).await?;
    let key = |file: &deltalake::kernel::LogicalFileView| {
        let dv = file
            .deletion_vector_descriptor()
            .map(|dv| format!("{}{}@{:?}", dv.storage_type, dv.path_or_inline_dv, dv.offset));
        (file.path().into_owned(), dv)
    };
    let then_files: Vec<_> = then.get_active_add_actions_by_predicate(None).try_collect().await?;
    let now_files: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await?;
    let then_keys: HashSet<_> = then_files.iter().map(key).collect();
    let now_keys: HashSet<_> = now_files.iter().map(key).collect();
    let deleted_at = chrono::Utc::now().timestamp_millis();
    let mut actions = Vec::new();
    let (now_state, then_state) = (table.snapshot()?, then.snapshot()?);
    let (now_protocol, then_protocol) = (now_state.protocol(), then_state.protocol());
    if then_protocol.min_writer_version() > now_protocol.min_writer_version()
        || then_protocol.min_reader_version() > now_protocol.min_reader_version()
    {
        return Err(DeltaTableError::Generic(format!(
            "version {version}'s protocol is newer than the table's: bf does not restore a protocol"
        )));
    }
    // Metadata restored from before a feature was turned on would turn it off, which only the
    // table's owner decides.
    for (key, what) in
        [(ENABLE_ICT, "in-commit timestamps"), (crate::delta::row_tracking::ENABLE, "row tracking")]
    {
        let set = |state: &deltalake::table::state::DeltaTableState| {
            state.metadata().configuration().get(key).cloned()
        };
        if set(then_state) != set(now_state) {
            return Err(DeltaTableError::Generic(format!(
                "version {version} predates {what} on this table: restoring its metadata would turn it off"
            )));
        }
    }
    for file in then_files.iter().filter(|f| !now_keys.contains(&key(f))) {
        #[allow(deprecated)] // The whole add, as committed: deltalake has no other public way.
        let add = file.add_action();
        actions.push(Action::Add(deltalake::kernel::Add { data_change: true, ..add }));
    }
    for file in now_files.iter().filter(|f| !then_keys.contains(&key(f))) {
        #[allow(deprecated)]
        let add = file.add_action();
        let mut remove = file.remove_action(true);
        remove.deletion_timestamp = Some(deleted_at);
        remove.tags = add.tags;
        remove.base_row_id = add.base_row_id;
        remove.default_row_commit_version = add.default_row_commit_version;
        actions.push(Action::Remove(remove));
    }
    actions.push(Action::Metadata(then_state.metadata().clone()));
    let operation = DeltaOperation::Restore { version: Some(version), datetime: None };
    commit(table, actions, operation, properties).await
}

/// Sets the table's description (its comment) in one commit through [`commit`].
pub async fn set_description(
    table: DeltaTable,
    description: String,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    use deltalake::kernel::MetadataExt;
    use deltalake::operations::update_table_metadata::TableMetadataUpdate;
    let metadata = table.snapshot()?.metadata().clone().with_description(description.clone())?;
    let operation = DeltaOperation::UpdateTableMetadata {
        metadata_update: TableMetadataUpdate { name: None, description: Some(description) },
    };
    commit(table, vec![Action::Metadata(metadata)], operation, properties).await
}

/// Sets one table property in one commit through [`commit`].
pub async fn set_property(
    table: DeltaTable,
    key: &str,
    value: String,
    properties: CommitProperties,
) -> Result<DeltaTable, DeltaTableError> {
    use deltalake::kernel::MetadataExt;
    let metadata = table.snapshot()?.metadata().clone().add_config_key(key.to_owned(), value.clone())?;
    let operation = DeltaOperation::SetTableProperties {
        properties: std::collections::HashMap::from([(key.to_owned(), value)]),
    };
    commit(table, vec![Action::Metadata(metadata)], operation, properties).await
}
