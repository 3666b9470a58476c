//! Delta Spark as the other writer while bf works, on a table laid out as Databricks lays it out
//! (row tracking, deletion vectors, column mapping by id, in-commit timestamps): between bf's
//! slices, and between a rollback's check and its RESTORE. What Spark writes outside the window
//! lets bf go on; what rewrites a slice's files or the table's schema stops bf before that slice,
//! naming Spark's commit; nothing Spark wrote is lost, and no row bf only carried changes its
//! row id — as Delta Spark itself reads the table afterwards.

use super::{checkout, rows, write_march_plan};
use crate::common::spark::spark_sql;
use crate::common::{apply_paused, bf_in};

/// Makes the orders table with Spark: February and March in one file, April in another.
fn make_orders(at: &str) {
    let made = spark_sql(&[
        format!(
            "CREATE TABLE {at} (order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, \
             order_date DATE) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true', \
             'delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'id', \
             'delta.enableInCommitTimestamps' = 'true')"
        ),
        format!(
            "INSERT INTO {at} VALUES (1, 'C01', 10.0, 'USD', DATE'2026-02-27'), \
             (2, 'C02', 20.0, 'USD', DATE'2026-03-02'), (3, 'C03', 30.0, 'USD', DATE'2026-03-16'), \
             (6, 'C06', 60.0, 'USD', DATE'2026-03-09'), (7, 'C07', 70.0, 'USD', DATE'2026-03-30')"
        ),
        format!(
            "INSERT INTO {at} VALUES (4, 'C04', 40.0, 'USD', DATE'2026-04-01'), \
             (8, 'C08', 80.0, 'EUR', DATE'2026-04-02'), (9, 'C09', 90.0, 'EUR', DATE'2026-04-03')"
        ),
    ]);
    for (index, answer) in made.iter().enumerate() {
        rows(answer, &format!("making the table, statement {index}"));
    }
}

/// The March corrections: every March order was in EUR.
fn write_corrections(repo: &std::path::Path) {
    std::fs::write(
        repo.join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-02\n3,C03,30.0,EUR,2026-03-16\n\
         6,C06,60.0,EUR,2026-03-09\n7,C07,70.0,EUR,2026-03-30\n",
    )
    .unwrap();
}

/// Every row as Delta Spark reads it: id, currency, amount, day, and the row's id.
fn every_row(at: &str) -> String {
    format!(
        "SELECT order_id, currency, amount, CAST(order_date AS STRING), _metadata.row_id FROM {at} ORDER BY order_id"
    )
}

/// Between slices 2 and 3 of the weekly March reload, Spark MERGEs April (an order updated, one
/// inserted) and DELETEs an April order (a deletion vector): bf goes on and finishes. Spark then
/// adds a column and writes it in April, and the window-only rollback puts March back in the
/// columns the table has now. At each step Delta Spark reads March as bf wrote it, April as Spark
/// left it, and the February order bf only carried with the row id it always had.
#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_merging_and_deleting_april_between_slices_keeps_its_rows_and_row_ids() {
    let (_dir, repo, table) = checkout();
    let at = format!("delta.`{}`", table.display());
    make_orders(&at);
    let before = rows(&spark_sql(&[every_row(&at)])[0], "the table before");
    write_corrections(&repo);
    write_march_plan(&repo, "week");
    bf_in(&repo).args(["plan", "plans/march.toml", "-q"]).assert().success();

    let applied = apply_paused(&repo, &["-q"], 3, "before", async {
        let merged = spark_sql(&[
            format!(
                "MERGE INTO {at} t USING (SELECT * FROM VALUES (8L, 'C08', 88.0D, 'EUR', DATE'2026-04-02'), \
                 (10L, 'C10', 100.0D, 'EUR', DATE'2026-04-05') AS s(order_id, customer, amount, currency, order_date)) s \
                 ON t.order_id = s.order_id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            ),
            format!("DELETE FROM {at} WHERE order_id = 9"),
        ]);
        rows(&merged[0], "Spark's MERGE");
        rows(&merged[1], "Spark's DELETE");
    })
    .await;
    assert!(
        applied.status.success(),
        "Spark's April between slices: {}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let after = rows(&spark_sql(&[every_row(&at)])[0], "the table after the apply");
    let cells = |table: &[Vec<String>]| -> Vec<String> { table.iter().map(|r| r[..4].join("|")).collect() };
    assert_eq!(
        cells(&after),
        [
            "1|USD|10.0|2026-02-27",
            "2|EUR|20.0|2026-03-02",
            "3|EUR|30.0|2026-03-16",
            "4|USD|40.0|2026-04-01",
            "6|EUR|60.0|2026-03-09",
            "7|EUR|70.0|2026-03-30",
            "8|EUR|88.0|2026-04-02",
            "10|EUR|100.0|2026-04-05",
        ],
        "March as corrected, April as Spark left it"
    );
    let row_id = |table: &[Vec<String>], order: &str| -> String {
        table.iter().find(|r| r[0] == order).map(|r| r[4].clone()).unwrap_or_else(|| panic!("order {order}"))
    };
    assert_eq!(
        row_id(&after, "1"),
        row_id(&before, "1"),
        "the February order, carried by slice 1, keeps its row id"
    );
    assert_eq!(row_id(&after, "4"), row_id(&before, "4"), "April's order 4 keeps its row id");

    let added = spark_sql(&[
        format!("ALTER TABLE {at} ADD COLUMNS (note STRING)"),
        format!("UPDATE {at} SET note = 'late' WHERE order_id = 10"),
    ]);
    rows(&added[0], "Spark's ADD COLUMNS");
    rows(&added[1], "Spark's UPDATE of the new column");
    let full = bf_in(&repo).args(["rollback", "--auto-approve"]).output().unwrap();
    assert!(!full.status.success(), "a full rollback would undo Spark's commits");
    assert!(
        String::from_utf8_lossy(&full.stderr).contains("--window-only"),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    let window = bf_in(&repo).args(["rollback", "--window-only", "--auto-approve"]).output().unwrap();
    assert!(window.status.success(), "{}", String::from_utf8_lossy(&window.stderr));

    let judged = spark_sql(&[
        every_row(&at),
        format!("SELECT order_id, note FROM {at} WHERE note IS NOT NULL OR order_id = 2 ORDER BY order_id"),
    ]);
    let rolled_back = rows(&judged[0], "the table after the rollback");
    assert_eq!(
        cells(&rolled_back),
        [
            "1|USD|10.0|2026-02-27",
            "2|USD|20.0|2026-03-02",
            "3|USD|30.0|2026-03-16",
            "4|USD|40.0|2026-04-01",
            "6|USD|60.0|2026-03-09",
            "7|USD|70.0|2026-03-30",
            "8|EUR|88.0|2026-04-02",
            "10|EUR|100.0|2026-04-05",
        ],
        "March as before the reload, April as Spark left it"
    );
    assert_eq!(
        rows(&judged[1], "the added column"),
        [vec!["2".to_owned(), "NULL".to_owned()], vec!["10".to_owned(), "late".to_owned()]],
        "March's rows put back read NULL in Spark's new column; April's value stays"
    );
    for order in ["1", "4", "8", "10"] {
        assert_eq!(
            row_id(&rolled_back, order),
            row_id(&after, order),
            "order {order} outside March keeps its row id"
        );
    }
}

/// What stops bf: Spark's OPTIMIZE of the files slice 2 replaces, between slices 1 and 2, stops the
/// apply before slice 2 naming Spark's commit; Spark's ADD COLUMNS between the slices of the next
/// plan stops that one the same way. A third plan, made on the table Spark compacted (its rows'
/// ids now written in the files), lands, each carried row keeping its id. Spark's MERGE of April
/// between the full rollback's check and its RESTORE stops the rollback, nothing written; the
/// window-only rollback then puts March back. Nothing Spark wrote is lost at any step.
#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_compacting_or_altering_mid_apply_stops_bf_and_merging_mid_rollback_stops_the_restore() {
    let (_dir, repo, table) = checkout();
    let at = format!("delta.`{}`", table.display());
    make_orders(&at);
    let before = rows(&spark_sql(&[every_row(&at)])[0], "the table before");
    write_corrections(&repo);
    write_march_plan(&repo, "week");

    // Spark's OPTIMIZE, then its ADD COLUMNS, each between two slices of a plan of its own.
    for (what, statement, expect) in [
        ("OPTIMIZE", format!("OPTIMIZE {at}"), "a file the slice replaces"),
        ("ADD COLUMNS", format!("ALTER TABLE {at} ADD COLUMNS (note STRING)"), "changes the table's schema"),
    ] {
        let planned = bf_in(&repo).args(["plan", "plans/march.toml", "-q"]).output().unwrap();
        assert!(planned.status.success(), "{what}: {}", String::from_utf8_lossy(&planned.stderr));
        let stopped = apply_paused(&repo, &["-q"], 2, "before", async {
            rows(&spark_sql(std::slice::from_ref(&statement))[0], what);
        })
        .await;
        let said = String::from_utf8_lossy(&stopped.stderr);
        assert_eq!(stopped.status.code(), Some(1), "{what}:\n{said}");
        assert!(said.contains("slice 2 (2026-03-02..2026-03-08) was not written"), "{what}:\n{said}");
        assert!(said.contains(expect), "{what}: missing {expect:?} in:\n{said}");
        let now = rows(&spark_sql(&[every_row(&at)])[0], what);
        let ids: Vec<&str> = now.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "6", "7", "8", "9"], "{what}: no row lost");
    }

    // The backfill Spark's new column stopped can never finish (its plan predates the column): its
    // first slice is undone, before a plan with the column may replace its rehearsal.
    let undone = bf_in(&repo).args(["rollback", "--window-only", "--auto-approve"]).output().unwrap();
    assert!(undone.status.success(), "{}", String::from_utf8_lossy(&undone.stderr));
    // The plan as its author updates it for Spark's new column, made on the table Spark compacted.
    let plan = repo.join("plans/march.toml");
    let text = std::fs::read_to_string(&plan).unwrap();
    let with_note = text.replace(" AS order_date FROM", " AS order_date, CAST(NULL AS STRING) AS note FROM");
    std::fs::write(&plan, with_note).unwrap();
    let planned = bf_in(&repo).args(["plan", "plans/march.toml", "-q"]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let applied = bf_in(&repo).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let after = rows(&spark_sql(&[every_row(&at)])[0], "the table after the apply");
    let currencies: Vec<String> = after.iter().map(|r| format!("{}|{}", r[0], r[1])).collect();
    assert_eq!(currencies, ["1|USD", "2|EUR", "3|EUR", "4|USD", "6|EUR", "7|EUR", "8|EUR", "9|EUR"]);
    for order in ["1", "4", "8", "9"] {
        let id = |table: &[Vec<String>]| table.iter().find(|r| r[0] == order).unwrap()[4].clone();
        assert_eq!(
            id(&after),
            id(&before),
            "order {order} outside March keeps its row id through the compaction"
        );
    }

    let stopped = crate::common::rollback_paused_before_restore(&repo, async {
        let merged = spark_sql(&[format!(
            "MERGE INTO {at} t USING (SELECT 11L AS order_id, 'C11' AS customer, 110.0D AS amount, 'EUR' AS currency, \
             DATE'2026-04-20' AS order_date, CAST(NULL AS STRING) AS note) s ON t.order_id = s.order_id \
             WHEN NOT MATCHED THEN INSERT *"
        )]);
        rows(&merged[0], "Spark's MERGE during the rollback");
    })
    .await;
    let said = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(1), "{said}");
    assert!(said.contains("another writer committed to") && said.contains("nothing was written"), "{said}");

    let window = bf_in(&repo).args(["rollback", "--window-only", "--auto-approve"]).output().unwrap();
    assert!(window.status.success(), "{}", String::from_utf8_lossy(&window.stderr));
    let judged = spark_sql(&[every_row(&at), format!("DESCRIBE HISTORY {at}")]);
    let currencies: Vec<String> =
        rows(&judged[0], "the table after").iter().map(|r| format!("{}|{}", r[0], r[1])).collect();
    assert_eq!(
        currencies,
        ["1|USD", "2|USD", "3|USD", "4|USD", "6|USD", "7|USD", "8|EUR", "9|EUR", "11|EUR"],
        "March as before the reload, Spark's order of the rollback's moment kept"
    );
    let operations: Vec<String> = rows(&judged[1], "history").into_iter().map(|h| h[4].clone()).collect();
    assert!(!operations.iter().any(|o| o == "RESTORE"), "no RESTORE committed: {operations:?}");
}
