//! The writer features of README's table ("Which tables bf writes"), each on a table Delta Spark
//! makes, judged by Delta Spark: the March reload lands the rows the plan says; the table keeps
//! every feature and property Spark gave it, its clustering and partitioning, and the rows it only
//! carried their row ids; Spark writes it afterwards as it did before (a new column reading NULL
//! in bf's files; an identity value, a row id, a generated value, a CHECK constraint each still its
//! own); and the window-only rollback puts March back under Spark's later column and row. The two
//! features bf refuses are refused before anything is written.

use super::{checkout, rows, write_march_plan_from};
use crate::common::bf_in;
use crate::common::spark::{spark_create, spark_detail, spark_sql};
use serde_json::json;

/// A table Delta Spark makes, and what the March reload's plan says for it.
struct Shape {
    name: &'static str,
    /// The table as Delta Spark's `DeltaTableBuilder` makes it (`spark_create`), its location
    /// left out: the orders' five columns and others, partitioning or clustering, properties.
    table: serde_json::Value,
    /// The plan's slicing: weekly, or daily as the September backfill slices.
    every: &'static str,
    /// Statements run after the CREATE, before any row is written.
    alter: &'static [&'static str],
    /// The columns the INSERTs name beyond the orders' five, and each row's values for them.
    extra: (&'static str, fn(u32) -> String),
    /// The plan's query over `orders` (the corrections file), or over `fixed`.
    query: &'static str,
    /// A query Spark writes the corrections from, as the Delta table `fixed` the plan reads (for a
    /// column no file format holds).
    fixed: Option<&'static str>,
    /// The writer features the table holds (`delta.feature.*` of its properties), before and after.
    features: &'static [&'static str],
    /// What Spark checks after bf's apply, after its own insert and after bf's rollback, each
    /// statement answering one row `[want]`.
    invariants: &'static [(&'static str, &'static str)],
}

/// The orders' five columns, then `more`.
fn columns(more: serde_json::Value) -> serde_json::Value {
    let mut all = json!([
        {"name": "order_id", "type": "BIGINT"},
        {"name": "customer", "type": "STRING"},
        {"name": "amount", "type": "DOUBLE"},
        {"name": "currency", "type": "STRING"},
        {"name": "order_date", "type": "DATE"},
    ]);
    all.as_array_mut().unwrap().extend(more.as_array().unwrap().iter().cloned());
    all
}

const ORDERS: &str = "order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date";

fn none(_: u32) -> String {
    String::new()
}

/// A clustered table as Databricks makes it: row tracking, deletion vectors, column mapping by id,
/// in-commit timestamps, the change data feed, an identity column always generated, a generated
/// column and a CHECK constraint.
fn clustered() -> Shape {
    Shape {
        name: "clustered, row-tracked, mapped by id, in-commit timestamps, change feed, identity, generated, CHECK",
        table: json!({
            "columns": columns(json!([
                {"name": "line_no", "type": "BIGINT", "always": "identity"},
                {"name": "amount_cents", "type": "BIGINT", "always": "CAST(amount * 100 AS BIGINT)"},
            ])),
            "cluster_by": ["order_date"],
            "properties": {
                "delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true",
                "delta.columnMapping.mode": "id", "delta.enableInCommitTimestamps": "true",
                "delta.enableChangeDataFeed": "true",
            },
        }),
        every: "week",
        alter: &["ALTER TABLE {t} ADD CONSTRAINT positive_amount CHECK (amount > 0)"],
        extra: ("", none),
        query: "SELECT {ORDERS} FROM orders",
        fixed: None,
        features: &[
            "clustering",
            "domainMetadata",
            "rowTracking",
            "deletionVectors",
            "columnMapping",
            "inCommitTimestamp",
            "changeDataFeed",
            "identityColumns",
            "generatedColumns",
            "checkConstraints",
        ],
        invariants: &[
            ("SELECT count(*) = count(DISTINCT line_no) FROM {t}", "true"),
            ("SELECT count(*) = count(DISTINCT _metadata.row_id) FROM {t}", "true"),
            ("SELECT count(*) FROM {t} WHERE amount_cents <> CAST(amount * 100 AS BIGINT)", "0"),
        ],
    }
}

/// A table partitioned by day, sliced by day as the September backfill is: mapped by name, with
/// deletion vectors, the change data feed, a `timestamp_ntz` column, an identity column generated
/// by default and a CHECK constraint.
fn partitioned() -> Shape {
    Shape {
        name: "partitioned by day, mapped by name, deletion vectors, change feed, timestamp_ntz, identity by default",
        table: json!({
            "columns": columns(json!([
                {"name": "updated_at", "type": "TIMESTAMP_NTZ"},
                {"name": "line_no", "type": "BIGINT", "by_default": "identity"},
            ])),
            "partitioned_by": ["order_date"],
            "properties": {
                "delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true",
                "delta.enableChangeDataFeed": "true",
            },
        }),
        every: "day",
        alter: &["ALTER TABLE {t} ADD CONSTRAINT positive_amount CHECK (amount > 0)"],
        extra: (", updated_at, line_no", |id| format!(", TIMESTAMP_NTZ'2026-04-30 12:00:00', {}", id * 10)),
        query: "SELECT {ORDERS}, CAST('2026-12-01 10:00:00' AS TIMESTAMP) AS updated_at, order_id * 10 AS line_no \
                FROM orders",
        fixed: None,
        features: &[
            "columnMapping",
            "deletionVectors",
            "changeDataFeed",
            "timestampNtz",
            "identityColumns",
            "checkConstraints",
        ],
        invariants: &[
            ("SELECT count(*) = count(DISTINCT line_no) FROM {t}", "true"),
            (
                "SELECT count(*) FROM {t} WHERE order_date BETWEEN DATE'2026-03-01' AND DATE'2026-03-31' \
                 AND line_no <> order_id * 10",
                "0",
            ),
        ],
    }
}

/// A table checkpointed in v2 every other commit, protecting its checkpoints after a feature was
/// dropped, with a variant column whose values bf carries and writes.
fn checkpointed() -> Shape {
    Shape {
        name: "v2 checkpoints every other commit, checkpoint protection (a feature dropped), variant",
        table: json!({
            "columns": columns(json!([{"name": "payload", "type": "VARIANT"}])),
            "properties": {
                "delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2",
                "delta.enableDeletionVectors": "true",
            },
        }),
        every: "week",
        alter: &["ALTER TABLE {t} DROP FEATURE deletionVectors"],
        extra: (", payload", |id| format!(", parse_json('{{\"n\": {id}, \"tags\": [\"a\", null]}}')")),
        query: "SELECT * FROM fixed",
        fixed: Some(
            "SELECT order_id, customer, amount, currency, order_date, \
             parse_json(concat('{\"n\": ', order_id, ', \"fixed\": true}')) AS payload FROM VALUES \
             (2L, 'C02', 20.0D, 'EUR', DATE'2026-03-02'), (3L, 'C03', 30.0D, 'EUR', DATE'2026-03-16'), \
             (6L, 'C06', 60.0D, 'EUR', DATE'2026-03-09'), (7L, 'C07', 70.0D, 'EUR', DATE'2026-03-30') \
             AS s(order_id, customer, amount, currency, order_date)",
        ),
        features: &["v2Checkpoint", "checkpointProtection", "variantType"],
        invariants: &[
            ("SELECT count(*) FROM {t} WHERE variant_get(payload, '$.n', 'bigint') <> order_id", "0"),
            (
                "SELECT count(*) FROM {t} WHERE order_date NOT BETWEEN DATE'2026-03-01' AND DATE'2026-03-31' \
                 AND order_id < 20 AND to_json(payload) <> concat('{\"n\":', order_id, ',\"tags\":[\"a\",null]}')",
                "0",
            ),
        ],
    }
}

/// The orders as Spark writes them: February and March in one INSERT (one file, or one per day
/// when partitioned), April in another.
const FEBRUARY_AND_MARCH: [(u32, &str, &str); 5] = [
    (1, "10.0", "2026-02-27"),
    (2, "20.0", "2026-03-02"),
    (3, "30.0", "2026-03-16"),
    (6, "60.0", "2026-03-09"),
    (7, "70.0", "2026-03-30"),
];
const APRIL: [(u32, &str, &str); 2] = [(4, "40.0", "2026-04-01"), (8, "80.0", "2026-04-02")];

fn insert(at: &str, shape: &Shape, orders: &[(u32, &str, &str)], currency: &str) -> String {
    let (columns, values) = shape.extra;
    let rows: Vec<String> = orders
        .iter()
        .map(|(id, amount, day)| {
            format!("({id}, 'C{id:02}', {amount}, '{currency}', DATE'{day}'{})", values(*id))
        })
        .collect();
    format!(
        "INSERT INTO {at} (order_id, customer, amount, currency, order_date{columns}) VALUES {}",
        rows.join(", ")
    )
}

/// The table's features (`delta.feature.*`) and properties as Delta Spark lists them.
fn properties(at: &str) -> Vec<(String, String)> {
    let listed = rows(&spark_sql(&[format!("SHOW TBLPROPERTIES {at}")])[0], "SHOW TBLPROPERTIES");
    listed.into_iter().map(|p| (p[0].clone(), p[1].clone())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_judges_the_march_reload_and_its_rollback_on_a_clustered_databricks_table() {
    judge(&clustered()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_judges_a_daily_march_reload_and_its_rollback_on_a_table_partitioned_by_day() {
    judge(&partitioned()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn delta_spark_judges_the_march_reload_and_its_rollback_on_v2_checkpoints_and_variants() {
    judge(&checkpointed()).await;
}

async fn judge(shape: &Shape) {
    let (_dir, repo, table) = checkout();
    let at = format!("delta.`{}`", table.display());
    let (properties_before, detail_before) = make_table(shape, &table, &at);
    let tracked = shape.features.contains(&"rowTracking");
    let ids_outside_march = || {
        let sql = format!(
            "SELECT order_id, _metadata.row_id, _metadata.row_commit_version FROM {at} \
             WHERE order_date NOT BETWEEN DATE'2026-03-01' AND DATE'2026-03-31' AND order_id < 20 ORDER BY order_id"
        );
        rows(&spark_sql(&[sql])[0], "row ids outside March")
    };
    let ids_before = if tracked { ids_outside_march() } else { Vec::new() };
    write_plan(shape, &repo);
    for args in [&["plan", "plans/march.toml", "-q"][..], &["apply", "--auto-approve", "-q"]] {
        let output = bf_in(&repo).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{}: bf {args:?}: {}",
            shape.name,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let currencies = |what: &str| -> Vec<String> {
        let all = spark_sql(&[format!("SELECT order_id, currency FROM {at} ORDER BY order_id")]);
        rows(&all[0], what).into_iter().map(|r| r.join("|")).collect()
    };
    assert_eq!(
        currencies("after the apply"),
        ["1|USD", "2|EUR", "3|EUR", "4|USD", "6|EUR", "7|EUR", "8|USD"],
        "{}: March as corrected",
        shape.name
    );
    // The table as Spark made it: features, properties, layout. bf raises only what a writer must
    // (the column-mapping ids past its hidden columns' field ids: `row_tracking.rs`).
    let kept = |listed: Vec<(String, String)>| -> Vec<(String, String)> {
        listed.into_iter().filter(|(key, _)| key != "delta.columnMapping.maxColumnId").collect()
    };
    assert_eq!(kept(properties(&at)), kept(properties_before), "{}: properties", shape.name);
    let detail = spark_detail(&at);
    for field in
        ["partitionColumns", "clusteringColumns", "minReaderVersion", "minWriterVersion", "tableFeatures"]
    {
        assert_eq!(detail.get(field), detail_before.get(field), "{}: DESCRIBE DETAIL's {field}", shape.name);
    }
    check_invariants(shape, &at, "after the apply");
    if shape.features.contains(&"v2Checkpoint") {
        assert_v2_checkpoint_after_bf(&table, shape);
    }
    if tracked {
        assert_eq!(ids_outside_march(), ids_before, "{}: the rows bf carried keep their ids", shape.name);
    }
    spark_writes_after_bf(shape, &at);

    let rolled_back = bf_in(&repo).args(["rollback", "--window-only", "--auto-approve"]).output().unwrap();
    assert!(rolled_back.status.success(), "{}: {}", shape.name, String::from_utf8_lossy(&rolled_back.stderr));
    assert_eq!(
        currencies("after the rollback"),
        ["1|USD", "2|USD", "3|USD", "4|USD", "6|USD", "7|USD", "8|USD", "20|EUR"],
        "{}: March as before, Spark's later row kept",
        shape.name
    );
    check_invariants(shape, &at, "after the rollback");
    if tracked {
        assert_eq!(ids_outside_march(), ids_before, "{}: rows outside March keep their ids", shape.name);
    }
    // Last, since a window-only rollback is refused once another writer rewrote the backfill's
    // files: Spark clusters the table bf wrote by the columns it always had.
    if detail_before["clusteringColumns"] != "[]" {
        rows(&spark_sql(&[format!("OPTIMIZE {at}")])[0], "Spark's OPTIMIZE of the clustered table");
        assert_eq!(
            spark_detail(&at)["clusteringColumns"],
            detail_before["clusteringColumns"],
            "{}",
            shape.name
        );
    }
}

/// Spark makes the table and writes its orders; returns its properties and `DESCRIBE DETAIL`,
/// having checked it holds every feature the shape names.
fn make_table(
    shape: &Shape,
    table: &std::path::Path,
    at: &str,
) -> (Vec<(String, String)>, std::collections::BTreeMap<String, String>) {
    let mut made = shape.table.clone();
    made["location"] = table.display().to_string().into();
    spark_create(made);
    let mut making: Vec<String> = shape.alter.iter().map(|sql| sql.replace("{t}", at)).collect();
    making.push(insert(at, shape, &FEBRUARY_AND_MARCH, "USD"));
    making.push(insert(at, shape, &APRIL, "USD"));
    for (index, answer) in spark_sql(&making).iter().enumerate() {
        rows(answer, &format!("{}: making the table, statement {index}", shape.name));
    }
    let properties_before = properties(at);
    for feature in shape.features {
        let key = format!("delta.feature.{feature}");
        assert!(
            properties_before.iter().any(|(k, _)| *k == key),
            "{}: Spark made the table without {feature}: {properties_before:?}",
            shape.name
        );
    }
    (properties_before, spark_detail(at))
}

/// The corrections (a CSV file, or a Delta table Spark writes) and the March reload's plan.
fn write_plan(shape: &Shape, repo: &std::path::Path) {
    std::fs::write(
        repo.join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-02\n3,C03,30.0,EUR,2026-03-16\n\
         6,C06,60.0,EUR,2026-03-09\n7,C07,70.0,EUR,2026-03-30\n",
    )
    .unwrap();
    let query = shape.query.replace("{ORDERS}", ORDERS);
    let input = match shape.fixed {
        None => "orders = { path = \"../landing/orders.csv\", format = \"csv\" }",
        Some(select) => {
            let fixed = format!(
                "CREATE TABLE delta.`{}` USING delta AS {select}",
                repo.join("landing/fixed").display()
            );
            rows(&spark_sql(&[fixed])[0], &format!("{}: the corrections as a Delta table", shape.name));
            "fixed = { path = \"../landing/fixed\", format = \"delta\" }"
        }
    };
    write_march_plan_from(repo, shape.every, &format!("inputs.{input}\nquery = \"{query}\""));
}

/// Spark writes the table after bf: a column, which reads NULL in every row (no field id or
/// physical name of bf's files taken for it), a row (its identity, row id and generated values its
/// own), and a row breaking the CHECK constraint, refused.
fn spark_writes_after_bf(shape: &Shape, at: &str) {
    let added = spark_sql(&[
        format!("ALTER TABLE {at} ADD COLUMNS (note STRING)"),
        format!("SELECT count(*) FROM {at} WHERE note IS NOT NULL"),
    ]);
    rows(&added[0], &format!("{}: Spark's ADD COLUMNS after bf", shape.name));
    assert_eq!(rows(&added[1], "the new column"), [vec!["0".to_owned()]], "{}: the new column", shape.name);
    let spark_row = insert(at, shape, &[(20, "200.0", "2026-04-10")], "EUR");
    rows(&spark_sql(&[spark_row])[0], &format!("{}: Spark's INSERT after bf", shape.name));
    if shape.features.contains(&"checkConstraints") {
        let negative = insert(at, shape, &[(21, "-5.0", "2026-04-11")], "EUR");
        let refusal = spark_sql(&[negative]).remove(0).expect_err("a row breaking the CHECK constraint");
        assert!(refusal.contains("positive_amount"), "{}: {refusal}", shape.name);
    }
    check_invariants(shape, at, "after Spark's insert");
}

/// The table's last checkpoint, read raw, is one bf's commits made (a slice's or the comment's),
/// in the v2 form the table's policy asks: it holds a `checkpointMetadata` action (deltalake names
/// it `NNN.checkpoint.parquet`, the classic name a v2 checkpoint may carry) — and Spark has just
/// read the table through it.
fn assert_v2_checkpoint_after_bf(table: &std::path::Path, shape: &Shape) {
    use bf::deltalake::parquet::file::reader::{FileReader, SerializedFileReader};
    let bf_versions: Vec<u64> = crate::common::commit_infos(table)
        .into_iter()
        .filter(|(_, info)| info.get("bf.slice").is_some())
        .map(|(version, _)| version)
        .collect();
    let last: serde_json::Value =
        serde_json::from_slice(&std::fs::read(table.join("_delta_log/_last_checkpoint")).unwrap()).unwrap();
    let version = last["version"].as_u64().unwrap();
    assert!(
        bf_versions.first().is_some_and(|first| version >= *first),
        "{}: the last checkpoint, at {version}, made by bf's commits {bf_versions:?} or its comment",
        shape.name
    );
    let file =
        std::fs::File::open(table.join(format!("_delta_log/{version:020}.checkpoint.parquet"))).unwrap();
    let schema = SerializedFileReader::new(file).unwrap().metadata().file_metadata().schema_descr_ptr();
    let columns: Vec<&str> = schema.root_schema().get_fields().iter().map(|f| f.name()).collect();
    assert!(
        columns.contains(&"checkpointMetadata"),
        "{}: a v2 checkpoint at {version}: {columns:?}",
        shape.name
    );
}

fn check_invariants(shape: &Shape, at: &str, when: &str) {
    let statements: Vec<String> = shape.invariants.iter().map(|(sql, _)| sql.replace("{t}", at)).collect();
    for ((sql, want), answer) in shape.invariants.iter().zip(spark_sql(&statements)) {
        let got = rows(&answer, &format!("{}: {sql}", shape.name));
        assert_eq!(got, [vec![want.to_string()]], "{} {when}: {sql}", shape.name);
    }
}

/// The two features bf cannot write, on tables Spark makes: refused at `bf plan`, naming them,
/// before anything is cloned; the table's history holds Spark's commits only.
#[tokio::test(flavor = "multi_thread")]
async fn tables_spark_makes_with_type_widening_or_append_only_are_refused_untouched() {
    for (name, making, expect) in [
        (
            "type widening",
            vec![
                "CREATE TABLE {t} (order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, \
                 order_date DATE, quantity INT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
                "INSERT INTO {t} VALUES (2, 'C02', 20.0, 'USD', DATE'2026-03-02', 1)",
                "ALTER TABLE {t} CHANGE COLUMN quantity TYPE BIGINT",
            ],
            "typeWidening",
        ),
        (
            "append only",
            vec![
                "CREATE TABLE {t} (order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, \
                 order_date DATE) USING delta TBLPROPERTIES ('delta.appendOnly' = 'true')",
                "INSERT INTO {t} VALUES (2, 'C02', 20.0, 'USD', DATE'2026-03-02')",
            ],
            "delta.appendOnly",
        ),
    ] {
        let (_dir, repo, table) = checkout();
        let at = format!("delta.`{}`", table.display());
        let statements: Vec<String> = making.iter().map(|sql| sql.replace("{t}", &at)).collect();
        for answer in spark_sql(&statements) {
            rows(&answer, name);
        }
        std::fs::write(
            repo.join("landing/orders.csv"),
            "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-02\n",
        )
        .unwrap();
        let query = if name == "type widening" {
            format!("SELECT {ORDERS}, CAST(1 AS BIGINT) AS quantity FROM orders")
        } else {
            format!("SELECT {ORDERS} FROM orders")
        };
        write_march_plan_from(
            &repo,
            "month",
            &format!(
                "inputs.orders = {{ path = \"../landing/orders.csv\", format = \"csv\" }}\nquery = \"{query}\""
            ),
        );
        let history = format!("DESCRIBE HISTORY {at}");
        let versions_before = rows(&spark_sql(std::slice::from_ref(&history))[0], name).len();
        let planned = bf_in(&repo).args(["plan", "plans/march.toml"]).output().unwrap();
        let said = String::from_utf8_lossy(&planned.stderr);
        assert_eq!(planned.status.code(), Some(1), "{name}: {said}");
        assert!(said.contains(expect), "{name}: missing {expect:?} in {said}");
        assert!(!repo.join("warehouse/orders__rehearsal").exists(), "{name}: no rehearsal cloned");
        let versions = rows(&spark_sql(&[history])[0], name).len();
        assert_eq!(versions, versions_before, "{name}: no commit of bf's");
    }
}
