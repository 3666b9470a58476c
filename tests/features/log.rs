//! The log bf leaves: protected checkpoints kept, v2 checkpoints where the table asks for them,
//! and the features deltalake refuses that bf writes itself.

use super::*;

/// Turns on v2 checkpoints and checkpoint protection as Spark's ALTER TABLE does, with a log
/// retention of zero, so deltalake would clean up every commit before its latest checkpoint, and a
/// checkpoint every two commits.
fn protect_checkpoints(table: &Path, version: u64) {
    let protocol = serde_json::json!({"minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["v2Checkpoint"], "writerFeatures": ["v2Checkpoint", "checkpointProtection"]});
    let version = version.to_string();
    crate::common::alter_table(
        table,
        Some(protocol),
        &[
            ("delta.checkpointPolicy", "v2"),
            ("delta.checkpointInterval", "2"),
            ("delta.logRetentionDuration", "interval 0 seconds"),
            ("delta.requireCheckpointProtectionBeforeVersion", &version),
        ],
    );
}

/// The log's file names.
fn log_files(table: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// deltalake deletes a table's commits older than its log retention after every commit, and does
/// not read `delta.requireCheckpointProtectionBeforeVersion`; bf's commits tell it not to, so a
/// backfill and its rollback leave every commit and checkpoint in place, protected or not. The
/// checkpoints deltalake writes on a v2-checkpoint table are v2 checkpoints, and another reader
/// reads the table through them (the Python package's SQL reader: its pyarrow reader refuses the
/// `v2Checkpoint` reader feature).
#[tokio::test(flavor = "multi_thread")]
async fn bf_never_removes_log_entries_so_protected_checkpoints_stay() {
    use bf::deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    for (partitioned, rollback) in [(false, FULL), (true, WINDOW_ONLY)] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table_with(&table, partitioned, orders_columns(), &[], &[&ORDERS]).await;
        protect_checkpoints(&table, 2);
        let original = python_sql_rows(&table, "order_id,amount");
        let before = log_files(&table);
        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n3,C3,33.0,USD,2026-03-02\n",
        )
        .unwrap();
        reload_plan(dir.path(), "replace", ORDER_COLUMNS);
        ok(dir.path(), &["plan", "plan.toml", "-q"]);
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        let applied = log_files(&table);
        for name in &before {
            assert!(applied.contains(name), "partitioned {partitioned}: {name} was removed: {applied:?}");
        }
        let checkpoints: Vec<&String> = applied.iter().filter(|n| n.contains(".checkpoint")).collect();
        assert!(!checkpoints.is_empty(), "deltalake checkpointed every two commits: {applied:?}");
        for checkpoint in &checkpoints {
            let file = std::fs::File::open(table.join("_delta_log").join(checkpoint)).unwrap();
            let schema =
                SerializedFileReader::new(file).unwrap().metadata().file_metadata().schema_descr_ptr();
            let columns: Vec<&str> = schema.root_schema().get_fields().iter().map(|f| f.name()).collect();
            assert!(columns.contains(&"checkpointMetadata"), "{checkpoint} is a v2 checkpoint: {columns:?}");
        }
        assert_eq!(python_sql_rows(&table, "order_id,amount"), ["1|11.0", "3|33.0", "4|40.0"]);
        let duckdb = duckdb_rows(&table, "SELECT order_id, amount FROM t");
        assert_eq!(duckdb, ["1|11.0", "3|33.0", "4|40.0"], "DuckDB reads through the checkpoints too");

        ok(dir.path(), rollback);
        let rolled = log_files(&table);
        for name in &applied {
            assert!(rolled.contains(name), "partitioned {partitioned}: {name} was removed: {rolled:?}");
        }
        assert_eq!(python_sql_rows(&table, "order_id,amount"), original);
        assert_eq!(duckdb_rows(&table, "SELECT order_id, amount FROM t"), original, "read by DuckDB");
    }
}

/// The checkpoints bf asks deltalake for (at every 20th version of a run of slices) follow a
/// v2-checkpoint table's policy as deltalake's own do: the one at version 19 is a v2 checkpoint,
/// and two other readers read the table through it.
#[tokio::test(flavor = "multi_thread")]
async fn the_checkpoints_bf_asks_for_follow_a_v2_checkpoint_policy() {
    use bf::deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table_with(&table, false, orders_columns(), &[], &[&ORDERS]).await;
    let protocol = serde_json::json!({"minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["v2Checkpoint"], "writerFeatures": ["v2Checkpoint"]});
    crate::common::alter_table(&table, Some(protocol), &[("delta.checkpointPolicy", "v2")]);
    let mut version = 0;
    for id in 100.. {
        version = crate::common::append_orders(&table, &[(id, "C9", 1.0, "EUR", "2026-03-03")]).await;
        if version == 19 {
            break;
        }
    }
    let rows = python_sql_rows(&table, "order_id,amount");
    bf::delta::table::checkpoint_when_due(crate::common::open_table(&table).await).await;
    let written: Vec<String> = log_files(&table)
        .into_iter()
        .filter(|n| n.starts_with(&format!("{version:020}.checkpoint")))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let file = std::fs::File::open(table.join("_delta_log").join(&written[0])).unwrap();
    let schema = SerializedFileReader::new(file).unwrap().metadata().file_metadata().schema_descr_ptr();
    let columns: Vec<&str> = schema.root_schema().get_fields().iter().map(|f| f.name()).collect();
    assert!(columns.contains(&"checkpointMetadata"), "{} is a v2 checkpoint: {columns:?}", written[0]);
    assert_eq!(python_sql_rows(&table, "order_id,amount"), rows, "read through the checkpoint");
    assert_eq!(duckdb_rows(&table, "SELECT order_id, amount FROM t"), rows, "read by DuckDB");
}

/// The features deltalake refuses to write, shown on Spark's tables by writing them with deltalake
/// directly, past bf's gate: identity columns, row tracking and clustering — it assigns no identity
/// values, no row ids, and keeps no clustering metadata. bf honours domains, clustering and row ids
/// and identity values in the commits it makes itself (`tests/databricks.rs`, `tests/row_tracking.rs`,
/// `tests/identity.rs`), so its gate lets both tables through.
#[tokio::test(flavor = "multi_thread")]
async fn deltalake_refuses_identity_row_tracking_and_clustering_and_bf_writes_them() {
    use bf::deltalake::datafusion::prelude::SessionContext;
    use bf::deltalake::protocol::SaveMode;
    for (name, features) in [
        ("rs_checkpoint_v2_table", &["identityColumns"][..]),
        ("rs_table_with_liquid_clustering", &["domainMetadata", "rowTracking", "liquid"][..]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join(name);
        crate::corpus::copy_dir(&crate::common::repo("tests/data/delta-corpus").join(name), &table);
        let untouched = snapshot(&table);
        // Past bf's gate: deltalake asked to append a copy of the table's own rows.
        let opened = open_table(&table).await;
        let ctx = SessionContext::new();
        let rows = ctx.read_table(opened.table_provider().await.unwrap()).unwrap().collect().await.unwrap();
        let refused = opened.write(rows).with_save_mode(SaveMode::Append).await.expect_err(name).to_string();
        for feature in features {
            let named = feature.to_lowercase();
            assert!(refused.to_lowercase().contains(&named), "{name}: deltalake names {feature}: {refused}");
        }
        assert_eq!(snapshot(&table), untouched, "{name}");
        // And bf, before any clone.
        let gate = bf::delta::compat::check_writable(&open_table(&table).await).await;
        assert!(gate.is_ok(), "{name}: bf honours {features:?}: {gate:?}");
    }
}
