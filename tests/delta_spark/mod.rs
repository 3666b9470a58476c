//! Delta Spark, the reference implementation, as writer and judge: it makes a table the way
//! Databricks does, bf backfills it, and Delta Spark reads what bf wrote — rows, the row ids and
//! row commit versions of the rows bf only carried, the table's features, its history, and a
//! column Spark adds afterwards. Spark runs in the session the tests share
//! (`common/spark.rs`).

mod features;
mod writers;

use std::path::Path;

use crate::common::bf_in;
use crate::common::spark::{SparkAnswer, spark_sql};

/// The rows of a statement that must have run.
fn rows(answer: &SparkAnswer, what: &str) -> Vec<Vec<String>> {
    answer.clone().unwrap_or_else(|error| panic!("{what}: {error}"))
}

/// A temp folder holding `repo/` (a git work tree: bf's root) with `landing/`, `plans/` and
/// `warehouse/`; and where the orders table goes.
fn checkout() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for folder in [".git", "landing", "plans", "warehouse"] {
        std::fs::create_dir_all(repo.join(folder)).unwrap();
    }
    let table = repo.join("warehouse/orders");
    (dir, repo, table)
}

/// `plans/march.toml`: the March reload of `warehouse/orders` from `landing/orders.csv`, sliced
/// `every`.
fn write_march_plan(repo: &Path, every: &str) {
    write_march_plan_from(
        repo,
        every,
        "inputs.orders = { path = \"../landing/orders.csv\", format = \"csv\" }\n\
         query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders\"",
    );
}

/// `plans/march.toml`: the March reload of `warehouse/orders`, sliced `every`, its `[source]`
/// table `source`.
fn write_march_plan_from(repo: &Path, every: &str, source: &str) {
    let plan = format!(
        r#"reason = "Reload March: EUR orders were recorded in USD."

[target]
table = "../warehouse/orders"
date_column = "order_date"
key = ["order_id"]

[window]
start = 2026-03-01
end = 2026-03-31

[slicing]
every = "{every}"

[source]
{source}
"#
    );
    std::fs::write(repo.join("plans/march.toml"), plan).unwrap();
}

/// Two inserts, each one file holding days of February, March and April: every weekly slice of
/// March rewrites both files, and carries the rows of the other days.
const ROWS: [&str; 2] = [
    "(1, 'C01', 10.0, 'USD', DATE'2026-02-27'), (2, 'C02', 20.0, 'USD', DATE'2026-03-02'), \
     (3, 'C03', 30.0, 'USD', DATE'2026-03-16'), (4, 'C04', 40.0, 'USD', DATE'2026-04-01')",
    "(5, 'C05', 50.0, 'EUR', DATE'2026-02-28'), (6, 'C06', 60.0, 'USD', DATE'2026-03-09'), \
     (7, 'C07', 70.0, 'USD', DATE'2026-03-30'), (8, 'C08', 80.0, 'EUR', DATE'2026-04-02')",
];

/// The March reload on a table Delta Spark made with row tracking and column mapping by id (the
/// layout of a Databricks table): the rows outside March, carried by every slice, keep the row ids
/// and row commit versions Spark gave them; each March row's commit version is its own slice's
/// (hole 3: a later slice carrying it gave it its own); a column Spark adds afterwards reads NULL in
/// every row bf wrote (hole 2: bf's hidden row-id columns carried the field ids the next column
/// would get); the features and properties are as Spark left them, and Spark's `DESCRIBE HISTORY`
/// reads bf's commits.
#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_reads_the_march_reload_of_its_row_tracked_column_mapped_table() {
    reload_judged_by_delta_spark(false).await;
}

/// The same with the change data feed on: Spark's `table_changes` of bf's commits holds, at each
/// slice's version, a delete of each old row of its days and an insert of each new one — and
/// nothing of the rows it only carried — and each March row keeps its own slice's commit version
/// there too (its inserts are change-data files bf writes: `delta::change_data`).
#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_reads_the_change_data_feed_of_the_march_reload() {
    reload_judged_by_delta_spark(true).await;
}

async fn reload_judged_by_delta_spark(change_data_feed: bool) {
    let (_dir, repo, table) = checkout();
    let at = format!("delta.`{}`", table.display());
    let ids = format!(
        "SELECT order_id, _metadata.row_id, _metadata.row_commit_version FROM {at} \
         WHERE order_date NOT BETWEEN DATE'2026-03-01' AND DATE'2026-03-31' ORDER BY order_id"
    );
    let made = spark_sql(&[
        format!(
            "CREATE TABLE {at} (order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, \
                 order_date DATE) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true', \
                 'delta.columnMapping.mode' = 'id', 'delta.enableChangeDataFeed' = '{change_data_feed}')"
        ),
        format!("INSERT INTO {at} VALUES {}", ROWS[0]),
        format!("INSERT INTO {at} VALUES {}", ROWS[1]),
        ids.clone(),
    ]);
    let before = rows(&made[3], "row ids before");
    assert_eq!(before.len(), 4, "{before:?}");

    // The corrected March: every USD order of March was in EUR.
    std::fs::write(
        repo.join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-02\n3,C03,30.0,EUR,2026-03-16\n\
         6,C06,60.0,EUR,2026-03-09\n7,C07,70.0,EUR,2026-03-30\n",
    )
    .unwrap();
    write_march_plan(&repo, "week");
    for args in [&["plan", "plans/march.toml", "-q"][..], &["apply", "--auto-approve", "-q"]] {
        let output = bf_in(&repo).args(args).output().unwrap();
        assert!(output.status.success(), "bf {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }

    // Each March row was written by the slice holding its day, and carried by the slices after it:
    // its row commit version is that slice's commit, as bf's ledger in the raw log records it.
    let slices: Vec<(u64, String, String)> = crate::common::commit_infos(&table)
        .into_iter()
        .filter(|(_, info)| info.get("bf.slice").is_some())
        .map(|(version, info)| {
            let day = |key: &str| info[key].as_str().unwrap().to_owned();
            (version, day("bf.slice_first"), day("bf.slice_last"))
        })
        .collect();
    assert_eq!(slices.len(), 6, "six weekly slices, the 1st a Sunday: {slices:?}");
    let (first_slice, last_slice) = (slices[0].0, slices[slices.len() - 1].0);
    let slice_of = |day: &str| {
        slices.iter().find(|(_, first, last)| first.as_str() <= day && day <= last.as_str()).unwrap()
    };
    let judged = spark_sql(&[
        format!("SELECT order_id, currency, CAST(order_date AS STRING) FROM {at} ORDER BY order_id"),
        ids,
        format!(
            "SELECT order_id, CAST(order_date AS STRING), _metadata.row_commit_version FROM {at} \
                 WHERE order_date BETWEEN DATE'2026-03-01' AND DATE'2026-03-31' ORDER BY order_id"
        ),
        format!(
            "SELECT _commit_version, order_id, _change_type FROM table_changes_by_path('{}', {first_slice}, {last_slice}) \
                 ORDER BY _commit_version, order_id, _change_type",
            table.display()
        ),
        // Last: a read of the change data feed across a schema change is Spark's to refuse.
        format!("ALTER TABLE {at} ADD COLUMNS (note STRING)"),
        format!("SELECT count(*) FROM {at} WHERE note IS NOT NULL"),
        format!("SHOW TBLPROPERTIES {at}"),
        format!("DESCRIBE HISTORY {at}"),
    ]);
    let currencies: Vec<(String, String)> =
        rows(&judged[0], "rows").into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let expected: Vec<(String, String)> = [
        ("1", "USD"),
        ("2", "EUR"),
        ("3", "EUR"),
        ("4", "USD"),
        ("5", "EUR"),
        ("6", "EUR"),
        ("7", "EUR"),
        ("8", "EUR"),
    ]
    .iter()
    .map(|(id, currency)| (id.to_string(), currency.to_string()))
    .collect();
    assert_eq!(currencies, expected, "the rows Delta Spark reads");
    assert_eq!(rows(&judged[1], "row ids after"), before, "the carried rows keep their row ids and versions");
    for row in rows(&judged[2], "March's row commit versions") {
        let (id, day, version) = (&row[0], &row[1], &row[2]);
        let slice = slice_of(day);
        assert_eq!(version, &slice.0.to_string(), "order {id} of {day}: written by the slice at {slice:?}");
    }
    rows(&judged[4], "ADD COLUMNS");
    assert_eq!(rows(&judged[5], "the added column"), vec![vec!["0".to_owned()]], "no value in a new column");
    let properties: Vec<Vec<String>> = rows(&judged[6], "properties");
    for (key, value) in [("delta.enableRowTracking", "true"), ("delta.columnMapping.mode", "id")] {
        assert!(properties.iter().any(|p| p[0] == key && p[1] == value), "{key} = {value} in {properties:?}");
    }
    // version, timestamp, userId, userName, operation, …
    let history = rows(&judged[7], "history");
    let operations: Vec<&str> = history.iter().map(|h| h[4].as_str()).collect();
    let written = operations.iter().filter(|o| **o == "WRITE").count();
    assert!(written >= 6, "bf's six slices in Delta Spark's history: {operations:?}");
    match change_data_feed {
        // Each March order was USD and is EUR: deleted and inserted at its slice's version.
        true => {
            let mut expected: Vec<Vec<String>> =
                [("2", "2026-03-02"), ("3", "2026-03-16"), ("6", "2026-03-09"), ("7", "2026-03-30")]
                    .iter()
                    .flat_map(|(id, day)| {
                        let version = slice_of(day).0.to_string();
                        ["delete", "insert"]
                            .map(|kind| vec![version.clone(), id.to_string(), kind.to_owned()])
                    })
                    .collect();
            expected.sort_by_key(|row| {
                (row[0].parse::<u64>().unwrap(), row[1].parse::<u64>().unwrap(), row[2].clone())
            });
            assert_eq!(rows(&judged[3], "table_changes"), expected, "the change data feed of bf's commits");
        }
        false => assert!(judged[3].is_err(), "no change data feed: {:?}", judged[3]),
    }
}

/// Delta Spark as the other writer: between `bf plan` and `bf apply` it deletes an April order
/// (a deletion vector) and updates another, in April's own file. The apply goes ahead (nothing of
/// March was touched); a full rollback is refused, since it would undo Spark's commits too; the
/// window-only rollback puts March back and keeps April as Spark left it — as Delta Spark reads it.
#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_writing_april_meanwhile_keeps_its_rows_through_the_march_reload_and_its_rollback() {
    let (_dir, repo, table) = checkout();
    let at = format!("delta.`{}`", table.display());
    let all =
        format!("SELECT order_id, currency, amount, CAST(order_date AS STRING) FROM {at} ORDER BY order_id");
    let made = spark_sql(&[
        format!(
            "CREATE TABLE {at} (order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, \
                 order_date DATE) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        ),
        format!(
            "INSERT INTO {at} VALUES (1, 'C01', 10.0, 'USD', DATE'2026-02-27'), \
                 (2, 'C02', 20.0, 'USD', DATE'2026-03-02'), (3, 'C03', 30.0, 'USD', DATE'2026-03-16')"
        ),
        format!(
            "INSERT INTO {at} VALUES (4, 'C04', 40.0, 'USD', DATE'2026-04-01'), \
                 (8, 'C08', 80.0, 'EUR', DATE'2026-04-02'), (9, 'C09', 90.0, 'EUR', DATE'2026-04-03')"
        ),
        all.clone(),
    ]);
    let before = rows(&made[3], "the table before");
    std::fs::write(
        repo.join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-02\n3,C03,30.0,EUR,2026-03-16\n",
    )
    .unwrap();
    write_march_plan(&repo, "month");
    let bf = |args: &[&str]| bf_in(&repo).args(args).output().unwrap();
    let planned = bf(&["plan", "plans/march.toml", "-q"]);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));

    let meanwhile = spark_sql(&[
        format!("DELETE FROM {at} WHERE order_id = 4"),
        format!("UPDATE {at} SET amount = 85.0 WHERE order_id = 8"),
    ]);
    rows(&meanwhile[0], "Spark's DELETE");
    rows(&meanwhile[1], "Spark's UPDATE");
    let applied = bf(&["apply", "--auto-approve", "-q"]);
    assert!(applied.status.success(), "another writer's April: {}", String::from_utf8_lossy(&applied.stderr));
    let full = bf(&["rollback", "--auto-approve"]);
    assert!(!full.status.success(), "a full rollback would undo Spark's commits");
    assert!(
        String::from_utf8_lossy(&full.stderr).contains("--window-only"),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    let window = bf(&["rollback", "--window-only", "--auto-approve"]);
    assert!(window.status.success(), "{}", String::from_utf8_lossy(&window.stderr));

    let judged = spark_sql(&[all, format!("DESCRIBE HISTORY {at}")]);
    let expected: Vec<Vec<String>> = before
        .into_iter()
        .filter(|row| row[0] != "4")
        .map(|row| match row[0].as_str() {
            "8" => vec![row[0].clone(), row[1].clone(), "85.0".to_owned(), row[3].clone()],
            _ => row,
        })
        .collect();
    assert_eq!(
        rows(&judged[0], "the table after"),
        expected,
        "March as before the reload, April as Spark left it"
    );
    let operations: Vec<String> = rows(&judged[1], "history").into_iter().map(|h| h[4].clone()).collect();
    for operation in ["DELETE", "UPDATE"] {
        assert!(operations.iter().any(|o| o == operation), "Spark's {operation} in {operations:?}");
    }
}
