//! Column mapping: a backfill by logical names writes the physical ones.

use super::*;

/// Renames a column of a column-mapped table the way Spark's RENAME COLUMN does: a metaData
/// action that changes the logical name and keeps the physical name and id.
fn rename_column(table: &Path, from: &str, to: &str) {
    crate::common::alter_table_with(table, None, |metadata| {
        let mut schema: Value = serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
        for field in schema["fields"].as_array_mut().unwrap() {
            if field["name"] == from {
                field["name"] = Value::from(to);
            }
        }
        metadata["schemaString"] = Value::from(schema.to_string());
    });
}

/// Column mapping, by name (partitioned by the date) and by id (unpartitioned), on tables the
/// Python `deltalake` package created, with a column renamed afterwards as Spark renames one: the
/// plan's SQL names the columns as users see them; the Parquet files bf's slices write name them by
/// their physical names with their field ids, and partition values are keyed by physical name; the
/// rehearsal keeps the mapping; another reader sees the logical columns before, after and after
/// the rollback — a replace rolled back by RESTORE, a merge rolled back window-only.
#[tokio::test(flavor = "multi_thread")]
async fn column_mapped_tables_backfill_by_logical_name_and_write_physical_names() {
    use bf::deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    for (mode, partitioned, write, rollback) in [
        ("id", false, "replace", FULL),
        ("id", false, "merge", WINDOW_ONLY),
        ("name", true, "replace", FULL),
        ("name", true, "merge", WINDOW_ONLY),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        python(
            &format!(
                "import deltalake, pyarrow as pa, datetime as d\n\
                 t = pa.table({{'order_id': [1, 2, 3, 4], 'amount': [10.0, 20.0, 30.0, 40.0],\n\
                   'order_date': [d.date(2026, 3, 1), d.date(2026, 3, 1), d.date(2026, 3, 2), d.date(2026, 3, 3)]}})\n\
                 deltalake.write_deltalake({0:?}, t, partition_by={1:?}, configuration={{'delta.columnMapping.mode': '{mode}'}})\n\
                 later = pa.table({{'order_id': [6], 'amount': [60.0], 'order_date': [d.date(2026, 3, 10)]}})\n\
                 deltalake.write_deltalake({0:?}, later, mode='append')\n",
                table.to_str().unwrap(),
                if partitioned { vec!["order_date"] } else { vec![] },
            ),
            &[],
        );
        rename_column(&table, "amount", "net_amount");
        let mapping = column_mapping(&table);
        assert_eq!(mapping[1].0, "net_amount");
        // The Python package's pyarrow reader (1.6.6) reads every value of a column-mapped table as
        // None, its own tables too; its SQL reader maps the columns. Both modes are also read raw.
        let read = |table: &Path| {
            let rows = python_sql_rows(table, "order_id,net_amount,order_date");
            // DuckDB 1.5.5's Delta extension reads the partition column of a column-mapped table
            // as NULL (the log keys partition values by physical name, as the protocol says, and
            // deltalake's own tables are read so too): there it is compared without that column.
            let (sql, mut expected) = if partitioned {
                let rest = rows.iter().map(|r| r.rsplit_once('|').unwrap().0.to_owned()).collect();
                ("SELECT order_id, net_amount FROM t", rest)
            } else {
                ("SELECT order_id, net_amount, order_date FROM t", rows.clone())
            };
            expected.sort();
            assert_eq!(
                duckdb_rows(table, sql),
                expected,
                "DuckDB reads the logical names as the Python package does"
            );
            rows
        };
        let original = read(&table);
        assert_eq!(
            original,
            [
                "1|10.0|2026-03-01",
                "2|20.0|2026-03-01",
                "3|30.0|2026-03-02",
                "4|40.0|2026-03-03",
                "6|60.0|2026-03-10"
            ]
        );
        assert_eq!(raw_rows(&table, mode, &["order_id", "net_amount", "order_date"]), original);

        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,net_amount,order_date\n1,11.0,2026-03-01\n5,50.0,2026-03-01\n3,33.0,2026-03-02\n",
        )
        .unwrap();
        reload_plan(dir.path(), write, "order_id, net_amount, CAST(order_date AS DATE) AS order_date");
        let planned = ok(dir.path(), &["plan", "plan.toml", "--json", "-q"]);
        let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
        // Outside the window: orders 4 and 6, read with their dates (not NULL, as the files read
        // without the mapping would show them); partitioned by the date, whole days are replaced
        // and the partition values, keyed by physical name, say no row outside was touched.
        let outside = &saved["outside_window"];
        assert_eq!(
            (&outside["before"]["rows"], &outside["unchanged"]),
            (&Value::from(if partitioned { 0 } else { 2 }), &Value::Bool(true)),
            "{outside}"
        );
        // The clone read the statistics under the date's physical name: the file of March 10 is
        // referenced, not copied (partitioned by the date, the clone copies nothing).
        let clone = &saved["rehearsal"]["clone"];
        assert_eq!(clone["files_referenced"], if partitioned { 4 } else { 1 }, "{clone}");
        assert_eq!(
            column_mapping(&dir.path().join("orders__rehearsal")),
            mapping,
            "the clone keeps the mapping"
        );
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        // A merge keeps order 2, which the source lacks.
        let mut after = vec![
            "1|11.0|2026-03-01",
            "3|33.0|2026-03-02",
            "4|40.0|2026-03-03",
            "5|50.0|2026-03-01",
            "6|60.0|2026-03-10",
        ];
        if write == "merge" {
            after.insert(1, "2|20.0|2026-03-01");
        }
        assert_eq!(read(&table), after, "{mode}");
        assert_eq!(raw_rows(&table, mode, &["order_id", "net_amount", "order_date"]), after, "{mode}");
        assert_eq!(column_mapping(&table), mapping, "{mode}: the mapping is unchanged");

        // The files the slices added, read raw: physical names, field ids, physical partition keys.
        let version = open_table(&table).await.version().unwrap();
        let added: Vec<Value> = (3..=version)
            .flat_map(|v| {
                std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json")))
                    .unwrap()
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok()?.get("add").cloned())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(!added.is_empty());
        let stored: Vec<(String, String, i64)> =
            mapping.iter().filter(|(name, ..)| !(partitioned && name == "order_date")).cloned().collect();
        for add in &added {
            let path =
                percent_encoding::percent_decode_str(add["path"].as_str().unwrap()).decode_utf8().unwrap();
            let file = std::fs::File::open(table.join(path.as_ref())).unwrap();
            let schema = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().schema().clone();
            let columns: Vec<(String, i64)> = schema
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.metadata()["PARQUET:field_id"].parse().unwrap()))
                .collect();
            let expected: Vec<(String, i64)> =
                stored.iter().map(|(_, physical, id)| (physical.clone(), *id)).collect();
            assert_eq!(columns, expected, "{mode}: {add}");
            if partitioned {
                let physical = &mapping[2].1;
                assert!(add["partitionValues"].get(physical).is_some(), "{mode}: {add}");
                assert!(add["stats"].as_str().is_none_or(|s| !s.contains("\"net_amount\"")), "{add}");
            }
        }

        ok(dir.path(), rollback);
        assert_eq!(read(&table), original, "{mode}, {write}");
        assert_eq!(raw_rows(&table, mode, &["order_id", "net_amount", "order_date"]), original, "{mode}");
    }
}

/// A column renamed after the backfill, as Spark renames one (the logical name changes, the physical
/// one stays): matched by name alone, the window-only rollback took the column for one added since
/// and put the window back with NULL in it — and its verification, comparing the columns both
/// versions name, agreed. It is refused now, naming the rename and `--to-version`; nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_renamed_after_the_backfill_stops_the_window_only_rollback_before_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    python(
        &format!(
            "import deltalake, pyarrow as pa, datetime as d\n\
             t = pa.table({{'order_id': [1, 2, 3], 'amount': [10.0, 20.0, 30.0],\n\
               'order_date': [d.date(2026, 3, 1), d.date(2026, 3, 1), d.date(2026, 3, 2)]}})\n\
             deltalake.write_deltalake({:?}, t, configuration={{'delta.columnMapping.mode': 'name'}})\n",
            table.to_str().unwrap()
        ),
        &[],
    );
    std::fs::write(
        dir.path().join("fixed.csv"),
        "order_id,amount,order_date\n1,11.0,2026-03-01\n3,33.0,2026-03-02\n",
    )
    .unwrap();
    reload_plan(dir.path(), "replace", "order_id, amount, CAST(order_date AS DATE) AS order_date");
    ok(dir.path(), &["plan", "plan.toml", "-q"]);
    ok(dir.path(), &["apply", "--auto-approve", "-q"]);
    rename_column(&table, "amount", "net_amount");
    let untouched = snapshot(&table);
    let refused = run(dir.path(), &["rollback", "--auto-approve", "--window-only"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("columns were renamed since (amount → net_amount)")
            && stderr.contains("Nothing was written"),
        "{stderr}"
    );
    assert_eq!(snapshot(&table), untouched, "the refused rollback wrote nothing");

    // Two columns swapping names keep both names: only their physical names tell.
    rename_column(&table, "net_amount", "swap");
    rename_column(&table, "order_id", "net_amount");
    rename_column(&table, "swap", "order_id");
    let refused = run(dir.path(), &["rollback", "--auto-approve", "--window-only"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("order_id → net_amount") && stderr.contains("amount → order_id"), "{stderr}");
}
