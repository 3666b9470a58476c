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

/// CHECK constraints and invariants are deltalake's to enforce on every row it writes; bf's part
/// is that `bf plan` fails at the rehearsal — not `bf apply` — and says which rule and which row,
/// where deltalake only says "1 rows failed validation check".
#[tokio::test(flavor = "multi_thread")]
async fn a_row_breaking_a_check_constraint_or_an_invariant_fails_the_plan_naming_both() {
    for partitioned in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        let mut columns = orders_columns();
        columns[3] = StructField::new("currency", DataType::STRING, true).with_metadata([(
            "delta.invariants",
            r#"{"expression":{"expression":"currency IN ('EUR', 'USD')"}}"#,
        )]);
        orders_table_with(&table, partitioned, columns, &[], &[&ORDERS]).await;
        open_table(&table)
            .await
            .add_constraint()
            .with_constraint("positive_amount", "amount > 0")
            .await
            .unwrap();
        let protocol = last_protocol(&table);
        assert!(protocol["minWriterVersion"].as_i64().unwrap() >= 3, "{protocol}");
        let original = python_rows(&table, "order_id,amount,currency,order_date");

        let broken = [
            (
                "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
                 3,C3,-5.0,USD,2026-03-02\n",
                ["slice 2 (2026-03-02", "CHECK constraint `positive_amount` (amount > 0)", "order_id = 3"],
            ),
            (
                "order_id,customer,amount,currency,order_date\n1,C1,11.0,GBP,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
                 3,C3,33.0,USD,2026-03-02\n",
                [
                    "slice 1 (2026-03-01",
                    "invariant on `currency` (currency IN ('EUR', 'USD'))",
                    "currency = GBP",
                ],
            ),
        ];
        for (csv, fragments) in broken {
            std::fs::write(dir.path().join("fixed.csv"), csv).unwrap();
            for mode in ["replace", "merge"] {
                reload_plan(dir.path(), mode, ORDER_COLUMNS);
                let untouched = snapshot(&table);
                let planned = run(dir.path(), &["plan", "plan.toml", "-q"]);
                assert_eq!(planned.status.code(), Some(1), "partitioned {partitioned}, {mode}");
                let stderr = String::from_utf8_lossy(&planned.stderr);
                for fragment in fragments {
                    assert!(stderr.contains(fragment), "{mode}: `{fragment}` in: {stderr}");
                }
                assert_eq!(snapshot(&table), untouched, "a refused plan leaves the table as it was");
            }
        }

        // Rows that keep the rules go through; the rules still hold in what was written.
        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
             3,C3,33.0,USD,2026-03-02\n",
        )
        .unwrap();
        reload_plan(dir.path(), "replace", ORDER_COLUMNS);
        ok(dir.path(), &["plan", "plan.toml", "-q"]);
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        assert_eq!(
            python_rows(&table, "order_id,amount,currency,order_date"),
            [
                "1|11.0|EUR|2026-03-01",
                "2|22.0|EUR|2026-03-01",
                "3|33.0|USD|2026-03-02",
                "4|40.0|USD|2026-03-03"
            ]
        );
        ok(dir.path(), &["rollback", "--auto-approve"]);
        assert_eq!(python_rows(&table, "order_id,amount,currency,order_date"), original);
    }
}

/// A generated column: a query that leaves it out gets it computed by the table, for the new rows
/// and the rows a merge keeps; a query that supplies a value the table would not compute is
/// refused at the rehearsal, naming the column. A generation that is not a function of its row
/// (`now()`) is refused before anything is cloned: rows a slice keeps would no longer match it.
#[tokio::test(flavor = "multi_thread")]
async fn a_generated_column_is_computed_when_left_out_and_a_wrong_value_is_refused() {
    let cents = || {
        let mut columns = orders_columns();
        columns.push(
            StructField::new("amount_cents", DataType::LONG, true)
                .with_metadata([("delta.generationExpression", "CAST(amount * 100 AS BIGINT)")]),
        );
        columns
    };
    for partitioned in [false, true] {
        for (mode, after) in [
            ("replace", &["1|11.0|1100", "3|33.0|3300", "4|40.0|4000"][..]),
            ("merge", &["1|11.0|1100", "2|20.0|2000", "3|33.0|3300", "4|40.0|4000"][..]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("orders");
            orders_table_with(&table, partitioned, cents(), &[], &[&ORDERS]).await;
            let original = python_rows(&table, "order_id,amount,amount_cents");
            assert_eq!(original, ["1|10.0|1000", "2|20.0|2000", "3|30.0|3000", "4|40.0|4000"]);

            // A wrong value is refused, naming the column and the row.
            std::fs::write(
                dir.path().join("fixed.csv"),
                "order_id,customer,amount,currency,order_date,amount_cents\n1,C1,11.0,EUR,2026-03-01,1100\n\
                 3,C3,33.0,USD,2026-03-02,3000\n",
            )
            .unwrap();
            reload_plan(dir.path(), mode, &format!("{ORDER_COLUMNS}, amount_cents"));
            let untouched = snapshot(&table);
            let refused = run(dir.path(), &["plan", "plan.toml", "-q"]);
            assert_eq!(refused.status.code(), Some(1));
            let stderr = String::from_utf8_lossy(&refused.stderr);
            assert!(
                stderr.contains(
                    "generated column `amount_cents` (GENERATED ALWAYS AS CAST(amount * 100 AS BIGINT))"
                ) && stderr.contains("order_id = 3")
                    && stderr.contains("amount_cents = 3000"),
                "{stderr}"
            );
            assert_eq!(snapshot(&table), untouched);

            // Left out, it is computed.
            reload_plan(dir.path(), mode, ORDER_COLUMNS);
            ok(dir.path(), &["plan", "plan.toml", "-q"]);
            ok(dir.path(), &["apply", "--auto-approve", "-q"]);
            assert_eq!(python_rows(&table, "order_id,amount,amount_cents"), after, "{mode}");
            ok(dir.path(), &["rollback", "--auto-approve", "--window-only"]);
            assert_eq!(python_rows(&table, "order_id,amount,amount_cents"), original, "{mode}");
        }
    }

    // A generation that is not a function of its row.
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    let mut columns = orders_columns();
    columns.push(
        StructField::new("loaded_on", DataType::DATE, true)
            .with_metadata([("delta.generationExpression", "CAST(now() AS DATE)")]),
    );
    orders_table_with(&table, false, columns, &[], &[&ORDERS]).await;
    std::fs::write(dir.path().join("fixed.csv"), "order_id,customer,amount,currency,order_date\n").unwrap();
    reload_plan(dir.path(), "replace", ORDER_COLUMNS);
    let untouched = snapshot(&table);
    let refused = run(dir.path(), &["plan", "plan.toml", "-q"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("bf cannot write")
            && stderr.contains("generated column `loaded_on` (GENERATED ALWAYS AS CAST(now() AS DATE))")
            && stderr.contains("not a function of the row"),
        "{stderr}"
    );
    assert_eq!(snapshot(&table), untouched);
    assert!(!dir.path().join("orders__rehearsal").exists(), "refused before the clone");
}

/// One row of a change feed: the commit version, the change type and the row (`order_id|amount`).
type Change = (u64, String, String);

/// The table's change feed over `from..=to`, as the Python `deltalake` package reads it, sorted.
fn python_feed(table: &Path, from: u64, to: u64) -> Vec<Change> {
    let out = python(
        &format!(
            "import deltalake, pyarrow as pa\n\
             t = pa.table(deltalake.DeltaTable({:?}).load_cdf(starting_version={from}, ending_version={to})).to_pylist()\n\
             for r in t: print(r['_commit_version'], r['_change_type'], f\"{{r['order_id']}}|{{r['amount']}}\")\n",
            table.to_str().unwrap()
        ),
        &[],
    );
    let mut feed: Vec<Change> = out
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let version = parts.next().unwrap().parse().unwrap();
            (version, parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned())
        })
        .collect();
    feed.sort();
    feed
}

/// The same feed through deltalake's own CDF reader.
async fn deltalake_feed(table: &Path, from: u64, to: u64) -> Vec<Change> {
    use bf::deltalake::arrow::util::display::array_value_to_string;
    use bf::deltalake::datafusion::prelude::SessionContext;
    use bf::deltalake::delta_datafusion::DeltaCdfTableProvider;
    let builder = open_table(table).await.scan_cdf().with_starting_version(from).with_ending_version(to);
    let ctx = SessionContext::new();
    ctx.register_table("feed", std::sync::Arc::new(DeltaCdfTableProvider::try_new(builder).unwrap()))
        .unwrap();
    let batches = ctx
        .sql("SELECT _commit_version, _change_type, order_id, amount FROM feed")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut feed: Vec<Change> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |i| {
                let text = |c: usize| array_value_to_string(b.column(c), i).unwrap();
                (
                    text(0).parse().unwrap(),
                    text(1),
                    format!("{}|{:.1}", text(2), text(3).parse::<f64>().unwrap()),
                )
            })
        })
        .collect();
    feed.sort();
    feed
}

/// What a consumer of the feed holds after following it from `start`: each version's deletes and
/// pre-images taken out (one row each), its inserts and post-images put in.
fn follow(start: &[String], feed: &[Change]) -> Vec<String> {
    let mut rows = start.to_vec();
    let mut versions: Vec<u64> = feed.iter().map(|c| c.0).collect();
    versions.dedup();
    for version in versions {
        let changes = feed.iter().filter(|c| c.0 == version);
        for (_, kind, row) in changes.clone().filter(|c| c.1 == "delete" || c.1 == "update_preimage") {
            let at = rows
                .iter()
                .position(|r| r == row)
                .unwrap_or_else(|| panic!("v{version} {kind} {row}: not held"));
            rows.remove(at);
        }
        rows.extend(changes.filter(|c| c.1 == "insert" || c.1 == "update_postimage").map(|c| c.2.clone()));
    }
    rows.sort();
    rows
}

fn of_kind(feed: &[Change], kind: &str) -> Vec<String> {
    let mut rows: Vec<String> = feed.iter().filter(|c| c.1 == kind).map(|c| c.2.clone()).collect();
    rows.sort();
    rows
}

/// A table with the change data feed on: after a backfill its feed holds the window's old rows as
/// deletes and the slices' rows as inserts (a merge rewrites its slices, so a row it keeps is a
/// delete and an insert of the same values); the comment adds nothing; a rollback's feed takes the
/// backfill's rows out and puts the old ones back. Read by deltalake's CDF reader and by the Python
/// `deltalake` package alike, a consumer following the feed holds exactly the table's rows.
#[tokio::test(flavor = "multi_thread")]
async fn the_change_data_feed_shows_what_a_backfill_and_its_rollback_changed() {
    let changes = "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n\
                   5,C5,50.0,EUR,2026-03-01\n3,C3,33.0,USD,2026-03-02\n";
    for partitioned in [false, true] {
        for (mode, rollback, inserted) in [
            ("replace", &["rollback", "--auto-approve"][..], &["1|11.0", "3|33.0", "5|50.0"][..]),
            (
                "merge",
                &["rollback", "--auto-approve", "--window-only"][..],
                &["1|11.0", "2|20.0", "3|33.0", "5|50.0"][..],
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("orders");
            orders_table_with(
                &table,
                partitioned,
                orders_columns(),
                &[("delta.enableChangeDataFeed", "true")],
                &[&ORDERS],
            )
            .await;
            let before = python_rows(&table, "order_id,amount");
            let pre = open_table(&table).await.version().unwrap();
            std::fs::write(dir.path().join("fixed.csv"), changes).unwrap();
            reload_plan(dir.path(), mode, ORDER_COLUMNS);
            ok(dir.path(), &["plan", "plan.toml", "-q"]);
            ok(dir.path(), &["apply", "--auto-approve", "-q"]);
            let applied = open_table(&table).await.version().unwrap();
            let after = python_rows(&table, "order_id,amount");

            let feed = python_feed(&table, pre + 1, applied);
            assert_eq!(deltalake_feed(&table, pre + 1, applied).await, feed, "the two readers agree");
            let context = format!("{mode}, partitioned {partitioned}: {feed:?}");
            assert_eq!(of_kind(&feed, "delete"), ["1|10.0", "2|20.0", "3|30.0"], "{context}");
            assert_eq!(of_kind(&feed, "insert"), inserted, "{context}");
            assert_eq!(follow(&before, &feed), after, "{context}");
            // The comment is the last commit and changes no row.
            assert!(feed.iter().all(|c| c.0 < applied), "{context}");
            if !partitioned {
                // deltalake wrote the feed's files: the rows a slice rescued are not in them.
                assert!(table.join("_change_data").is_dir(), "{context}");
            }

            ok(dir.path(), rollback);
            let rolled = open_table(&table).await.version().unwrap();
            let feed = python_feed(&table, applied + 1, rolled);
            assert_eq!(deltalake_feed(&table, applied + 1, rolled).await, feed, "the two readers agree");
            assert_eq!(python_rows(&table, "order_id,amount"), before);
            assert_eq!(follow(&after, &feed), before, "{mode}, partitioned {partitioned}: {feed:?}");
        }
    }
}

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

/// A variant value as Parquet stores it unshredded: the metadata (version 1, an empty dictionary)
/// and the value (a basic short string, `"hello"` style).
fn variant_string(text: &str) -> (Vec<u8>, Vec<u8>) {
    let metadata = vec![0x01, 0x00, 0x00];
    let mut value = vec![((text.len() as u8) << 2) | 0x01];
    value.extend_from_slice(text.as_bytes());
    (metadata, value)
}

/// Variant columns (unshredded, as `struct<metadata: binary, value: binary>`): a backfill whose
/// source copies the column from a Delta input writes the same bytes back; the files bf's slices
/// write hold the variant's two binary fields, read raw; rollback restores the old values.
#[tokio::test(flavor = "multi_thread")]
async fn a_variant_column_is_carried_through_a_backfill_byte_for_byte() {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, BinaryArray, Date32Array, Int64Array, RecordBatch, StructArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType as Arrow, Date32Type, Field, Fields, Schema};
    use bf::deltalake::protocol::SaveMode;
    for (partitioned, write, rollback) in [
        (false, "replace", FULL),
        (false, "merge", WINDOW_ONLY),
        (true, "replace", FULL),
        (true, "merge", WINDOW_ONLY),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("events");
        let columns = vec![
            StructField::new("id", DataType::LONG, true),
            StructField::new("payload", DataType::unshredded_variant(), true),
            StructField::new("day", DataType::DATE, true),
        ];
        let parts: &[&str] = if partitioned { &["day"] } else { &[] };
        let created = crate::common::new_table(&table, columns, parts).await;
        let protocol = last_protocol(&table);
        assert!(protocol["writerFeatures"].to_string().contains("variantType"), "{protocol}");
        let rows = |texts: &[(i64, &str, &str)]| {
            let fields = Fields::from(vec![
                Field::new("metadata", Arrow::Binary, false),
                Field::new("value", Arrow::Binary, false),
            ]);
            let encoded: Vec<(Vec<u8>, Vec<u8>)> = texts.iter().map(|t| variant_string(t.1)).collect();
            let payload = StructArray::new(
                fields.clone(),
                vec![
                    Arc::new(BinaryArray::from_iter_values(encoded.iter().map(|e| e.0.clone()))) as ArrayRef,
                    Arc::new(BinaryArray::from_iter_values(encoded.iter().map(|e| e.1.clone()))),
                ],
                None,
            );
            let schema = Schema::new(vec![
                Field::new("id", Arrow::Int64, true),
                Field::new("payload", Arrow::Struct(fields), true),
                Field::new("day", Arrow::Date32, true),
            ]);
            RecordBatch::try_new(
                Arc::new(schema),
                vec![
                    Arc::new(Int64Array::from_iter_values(texts.iter().map(|t| t.0))),
                    Arc::new(payload),
                    Arc::new(Date32Array::from_iter_values(
                        texts.iter().map(|t| Date32Type::from_naive_date(t.2.parse().unwrap())),
                    )),
                ],
            )
            .unwrap()
        };
        created
            .write(vec![rows(&[(1, "a", "2026-03-01"), (2, "b", "2026-03-02"), (3, "c", "2026-03-03")])])
            .with_save_mode(SaveMode::Append)
            .await
            .unwrap();
        let fixed = dir.path().join("fixed");
        crate::common::new_table(
            &fixed,
            vec![
                StructField::new("id", DataType::LONG, true),
                StructField::new("payload", DataType::unshredded_variant(), true),
                StructField::new("day", DataType::DATE, true),
            ],
            &[],
        )
        .await
        .write(vec![rows(&[(1, "fixed-a", "2026-03-01"), (2, "fixed-b", "2026-03-02")])])
        .with_save_mode(SaveMode::Append)
        .await
        .unwrap();
        write_plan(
            dir.path(),
            "plan.toml",
            &format!(
                "reason = \"Fix the payloads.\"\n[target]\ntable = \"events\"\ndate_column = \"day\"\nkey = [\"id\"]\n\
             [window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n[write]\nmode = \"{write}\"\n\
             [source]\ninputs.src = {{ path = \"fixed\", format = \"delta\" }}\nquery = \"SELECT * FROM src\"\n"
            ),
        );
        let hex = |text: &str| {
            let (metadata, value) = variant_string(text);
            let hex = |bytes: Vec<u8>| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
            format!("{{metadata: {}, value: {}}}", hex(metadata), hex(value))
        };
        let read = |table: &Path| raw_rows(table, "name", &["id", "payload", "day"]);
        let original = [
            format!("1|{}|2026-03-01", hex("a")),
            format!("2|{}|2026-03-02", hex("b")),
            format!("3|{}|2026-03-03", hex("c")),
        ];
        assert_eq!(read(&table), original);
        let planned = ok(dir.path(), &["plan", "plan.toml", "--json", "-q"]);
        let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
        for slice in saved["slices"].as_array().unwrap() {
            assert_eq!(slice["changes"]["changed"], 1, "one payload changed a day: {slice}");
        }
        let sample = saved["slices"][0]["changes"]["samples"][0].to_string();
        let fixed_a = hex("fixed-a");
        let value = fixed_a.split("value: ").nth(1).unwrap().trim_end_matches('}');
        assert!(sample.contains(value), "the diff shows the new value: {sample}");
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        assert_eq!(
            read(&table),
            [
                format!("1|{}|2026-03-01", hex("fixed-a")),
                format!("2|{}|2026-03-02", hex("fixed-b")),
                format!("3|{}|2026-03-03", hex("c"))
            ],
            "partitioned {partitioned}"
        );
        ok(dir.path(), rollback);
        assert_eq!(read(&table), original, "partitioned {partitioned}, {write}");
    }
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
