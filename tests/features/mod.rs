//! The writer features bf's gate lets through (`src/delta/compat.rs`, `HONOURED`), each proven here on a
//! table with a DATE column, unpartitioned and partitioned by it, through the real binary: plan,
//! apply, rollback. Outcomes are read by the Python `deltalake` package or from the raw log, not by
//! bf's own code path.

use std::path::Path;

use bf::deltalake::kernel::{DataType, StructField};
use serde_json::Value;

use crate::common::servers::{python, python_sql_rows};
use crate::common::{
    OrderRow, bf_in, commit_files, duckdb_rows, open_table, orders_columns, orders_table_with, snapshot,
    write_plan,
};

mod change_feed;
mod log;
mod mapped_columns;
mod row_rules;

/// Two days of orders: the window the tests reload.
const ORDERS: [OrderRow; 4] = [
    (1, "C1", 10.0, "EUR", "2026-03-01"),
    (2, "C2", 20.0, "EUR", "2026-03-01"),
    (3, "C3", 30.0, "USD", "2026-03-02"),
    (4, "C4", 40.0, "USD", "2026-03-03"),
];

/// A plan reloading 2026-03-01..02, one slice a day, from `fixed.csv` (written by the caller).
fn reload_plan(dir: &Path, mode: &str, columns: &str) {
    write_plan(
        dir,
        "plan.toml",
        &format!(
            "reason = \"Fix the amounts.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
             key = [\"order_id\"]\n[window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n\
             [write]\nmode = \"{mode}\"\n[source]\ninputs.src = {{ path = \"fixed.csv\", format = \"csv\" }}\n\
             query = \"SELECT {columns} FROM src\"\n"
        ),
    );
}

/// The two rollbacks: a RESTORE of the pre-version, and the window only.
const FULL: &[&str] = &["rollback", "--auto-approve"];

const WINDOW_ONLY: &[&str] = &["rollback", "--auto-approve", "--window-only"];

const ORDER_COLUMNS: &str = "order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date";

/// The table's rows as the Python `deltalake` package reads them: `columns` joined by `|`, sorted;
/// checked to be what DuckDB's Delta extension (delta-kernel-rs, a second implementation) reads.
fn python_rows(table: &Path, columns: &str) -> Vec<String> {
    let rows = python_package_rows(table, columns);
    assert_eq!(
        duckdb_rows(table, &format!("SELECT {columns} FROM t")),
        rows,
        "DuckDB reads {} as the Python package does",
        table.display()
    );
    rows
}

fn python_package_rows(table: &Path, columns: &str) -> Vec<String> {
    let out = python(
        &format!(
            "import deltalake\nt = deltalake.DeltaTable({:?}).to_pyarrow_table().to_pylist()\n\
             rows = sorted('|'.join(str(r[c]) for c in {:?}.split(',')) for r in t)\nprint('\\n'.join(rows))\n",
            table.to_str().unwrap(),
            columns
        ),
        &[],
    );
    out.lines().map(str::to_owned).collect()
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    bf_in(dir).args(args).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "bf {args:?}: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// The protocol the table's log states last, read raw.
fn last_protocol(table: &Path) -> Value {
    commit_files(table)
        .iter()
        .rev()
        .map(|(_, p)| p)
        .flat_map(|p| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok()?.get("protocol").cloned())
        .next()
        .expect("a protocol action")
}

/// One row of a change feed: the commit version, the change type and the row (`order_id|amount`).
type Change = (u64, String, String);

/// The physical name and id of each column, from the table's last metaData action, read raw (a
/// table without column mapping: its names, id 0).
fn column_mapping(table: &Path) -> Vec<(String, String, i64)> {
    let metadata = crate::common::latest_metadata(table);
    let schema: Value = serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
    schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let m = &f["metadata"];
            let name = f["name"].as_str().unwrap().to_owned();
            let physical = m["delta.columnMapping.physicalName"].as_str().map_or(name.clone(), str::to_owned);
            (name, physical, m["delta.columnMapping.id"].as_i64().unwrap_or(0))
        })
        .collect()
}

/// The table's live rows read raw, as a reader outside deltalake would: the JSON log replayed
/// (adds minus removes), each live Parquet file's columns matched to the logical names by field id
/// (`id` mode) or physical name (`name` mode), partition values by their physical keys. `columns`
/// are logical names; rows are joined by `|`, sorted.
fn raw_rows(table: &Path, mode: &str, columns: &[&str]) -> Vec<String> {
    use bf::deltalake::arrow::util::display::array_value_to_string;
    use bf::deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mapping = column_mapping(table);
    let mut live: std::collections::BTreeMap<String, Value> = Default::default();
    for (_, log) in commit_files(table) {
        for line in std::fs::read_to_string(log).unwrap().lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            if let Some(add) = action.get("add") {
                live.insert(add["path"].as_str().unwrap().to_owned(), add.clone());
            }
            if let Some(remove) = action.get("remove") {
                live.remove(remove["path"].as_str().unwrap());
            }
        }
    }
    let mut rows = Vec::new();
    for (path, add) in live {
        let path = percent_encoding::percent_decode_str(&path).decode_utf8().unwrap().into_owned();
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(table.join(path)).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            for i in 0..batch.num_rows() {
                let value = |logical: &str| {
                    let (_, physical, id) = mapping.iter().find(|(name, ..)| name == logical).unwrap();
                    if let Some(v) = add["partitionValues"].get(physical) {
                        return v.as_str().unwrap().to_owned();
                    }
                    let at = batch
                        .schema()
                        .fields()
                        .iter()
                        .position(|f| match mode {
                            "id" => f.metadata().get("PARQUET:field_id") == Some(&id.to_string()),
                            _ => f.name() == physical,
                        })
                        .unwrap_or_else(|| panic!("no column for `{logical}` in {:?}", batch.schema()));
                    array_value_to_string(batch.column(at), i).unwrap()
                };
                rows.push(columns.iter().map(|c| value(c)).collect::<Vec<_>>().join("|"));
            }
        }
    }
    rows.sort();
    rows
}
