//! Names people really have: a table folder with spaces and non-ASCII letters, partition values
//! with `=`, `%`, `/`-free punctuation, spaces and unicode. Delta escapes them in file paths, and an
//! add and a remove that spell one path two ways leave an old file live (see docs/RELIABILITY.md,
//! dat_multi_partitioned). So: plan, apply and roll back such a table, and compare every row.

use std::path::Path;
use std::sync::Arc;

use bf::deltalake::DeltaTable;
use bf::deltalake::arrow::array::{
    Array, ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Date32Type, Field, Schema};
use bf::deltalake::datafusion::prelude::SessionContext;
use bf::deltalake::kernel::{DataType, StructField};

use predicates::prelude::*;

use crate::common::{bf_in, new_table, open_table, snapshot, write_plan};

/// Partitioned by day, then by region.
const PARTITION_COLUMNS: [&str; 2] = ["order_date", "region"];

/// (order_id, region, amount, day).
type Order = (i64, &'static str, f64, String);

/// Regions as they come from a source system, each a partition value.
const REGIONS: [&str; 6] = ["Zürich", "a=b", "100%", "東京 east", "%2F not a slash", "plain"];

/// (order_id, region, amount, day) for `days`, a few orders per region and day.
fn orders(days: &[&str], first_id: i64, amount: f64) -> Vec<Order> {
    let mut rows = Vec::new();
    for day in days {
        for region in REGIONS {
            let id = first_id + rows.len() as i64;
            rows.push((id, region, amount + id as f64 + 0.25, (*day).to_owned()));
        }
    }
    rows
}

async fn write_orders(table: DeltaTable, rows: &[Order]) -> DeltaTable {
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("region", ArrowType::Utf8, true),
        Field::new("amount", ArrowType::Float64, true),
        Field::new("order_date", ArrowType::Date32, true),
    ]));
    let day = |d: &str| Date32Type::from_naive_date(d.parse().unwrap());
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| day(&r.3)))),
    ];
    table.write(vec![RecordBatch::try_new(schema, columns).unwrap()]).await.unwrap()
}

/// Every row as `id|region|amount|day`, sorted.
async fn rows(table: &Path) -> Vec<String> {
    let ctx = SessionContext::new();
    ctx.register_table("t", open_table(table).await.table_provider().await.unwrap()).unwrap();
    let sql = "SELECT CONCAT_WS('|', order_id, region, amount, order_date) FROM t ORDER BY order_id";
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches
        .iter()
        .flat_map(|b| {
            let column = b.column(0).as_any().downcast_ref::<StringArray>().unwrap().clone();
            (0..column.len()).map(move |i| column.value(i).to_owned())
        })
        .collect()
}

fn as_text(rows: &[Order]) -> Vec<String> {
    rows.iter().map(|r| format!("{}|{}|{}|{}", r.0, r.1, r.2, r.3)).collect()
}

/// The orders table in `folder`, partitioned by day and region, holding March 1–3 and April 1.
async fn orders_by_region(folder: &Path) -> (Vec<Order>, Vec<Order>) {
    let columns = vec![
        StructField::new("order_id", DataType::LONG, true),
        StructField::new("region", DataType::STRING, true),
        StructField::new("amount", DataType::DOUBLE, true),
        StructField::new("order_date", DataType::DATE, true),
    ];
    let table = new_table(folder, columns, &PARTITION_COLUMNS).await;
    let march = orders(&["2026-03-01", "2026-03-02", "2026-03-03"], 1, 10.0);
    let april = orders(&["2026-04-01"], 100, 10.0);
    write_orders(table, &[march.clone(), april.clone()].concat()).await;
    (march, april)
}

/// A plan replacing March 1–3 of the table at `table` from `corrected.csv`.
fn march_plan(dir: &Path, table: &str) -> std::path::PathBuf {
    let plan = format!(
        r#"reason = "Amounts for March were off by ten; région names kept as the till sends them."

[target]
table = "{table}"
date_column = "order_date"
key = ["order_id"]

[window]
start = 2026-03-01
end = 2026-03-03

[slicing]
every = "day"

[source]
inputs.corrected = {{ path = "corrected.csv", format = "csv" }}
query = "SELECT order_id, region, amount, CAST(order_date AS DATE) AS order_date FROM corrected"

# A metric makes the rehearsal read the files outside the window through the clone's absolute URLs.
[[metrics]]
name = "revenue"
sql = "SUM(amount)"
"#
    );
    write_plan(dir, "march.toml", &plan)
}

/// Rewrites a table deltalake wrote the way Spark spells the same files: folder names escape only
/// Hive's characters (`region=Zürich`, `region=a%3Db`), and the log's paths keep non-ASCII
/// characters raw, as `java.net.URI` does (`region=Zürich/…`, `region=a%253Db/…`).
fn spell_like_spark(table: &Path) {
    use percent_encoding::percent_decode_str;
    let hive = |value: &str| -> String {
        value
            .chars()
            .map(|c| {
                if c.is_ascii_control() || "\"#%'*/:=?\\{[]^".contains(c) {
                    format!("%{:02X}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    let java_uri = |path: &str| -> String {
        path.chars()
            .map(|c| {
                if !c.is_ascii() || c.is_ascii_alphanumeric() || "/=-_.~!$&'()*+,;:@".contains(c) {
                    c.to_string()
                } else {
                    format!("%{:02X}", c as u32)
                }
            })
            .collect()
    };
    for entry in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let log = entry.unwrap().path();
        if log.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let mut lines = Vec::new();
        for line in std::fs::read_to_string(&log).unwrap().lines() {
            let mut action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(add) = action.get_mut("add") {
                let on_disk =
                    percent_decode_str(add["path"].as_str().unwrap()).decode_utf8().unwrap().into_owned();
                let file_name = on_disk.rsplit('/').next().unwrap();
                let folders: Vec<String> = PARTITION_COLUMNS
                    .iter()
                    .map(|c| format!("{c}={}", hive(add["partitionValues"][c].as_str().unwrap())))
                    .collect();
                let spark = format!("{}/{file_name}", folders.join("/"));
                std::fs::create_dir_all(table.join(&spark).parent().unwrap()).unwrap();
                std::fs::rename(table.join(&on_disk), table.join(&spark)).unwrap();
                add["path"] = java_uri(&spark).into();
            }
            lines.push(action.to_string());
        }
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn partition_values_with_escapes_and_unicode_round_trip_through_apply_and_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("lake ✓/orders by région");
    let (march, april) = orders_by_region(&folder).await;
    let partition_folders: Vec<String> = std::fs::read_dir(folder.join("order_date=2026-03-01"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(partition_folders.len(), REGIONS.len(), "one folder per region: {partition_folders:?}");
    let original = rows(&folder).await;
    assert_eq!(original, as_text(&[march.clone(), april.clone()].concat()));

    // The corrected March: new amounts, and one day loses a region.
    let corrected: Vec<_> = orders(&["2026-03-01", "2026-03-02", "2026-03-03"], 1, 20.0)
        .into_iter()
        .filter(|r| !(r.3 == "2026-03-02" && r.1 == "a=b"))
        .collect();
    write_csv(&dir.path().join("corrected.csv"), &corrected);
    let plan = march_plan(dir.path(), "lake ✓/orders by région");

    let untouched = snapshot(&folder);
    bf_in(dir.path()).arg("plan").arg(&plan).arg("-q").assert().success();
    assert_eq!(snapshot(&folder), untouched, "bf plan wrote into the target");

    bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(rows(&folder).await, as_text(&[corrected, april].concat()));

    bf_in(dir.path()).args(["rollback", "--auto-approve"]).assert().success();
    assert_eq!(rows(&folder).await, original);
}

/// Found here: on a table Spark wrote with non-ASCII partition values, deltalake's replace removed
/// `region=Z%C3%BCrich/…` where the log had added `region=Zürich/…`, the old file stayed live, and
/// slice 1 held 8 rows for the source's 6 (bf's post-commit check stopped the apply). bf now
/// refuses such a table before the rehearsal.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_spark_wrote_with_non_ascii_partition_values_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("orders");
    let (march, april) = orders_by_region(&folder).await;
    spell_like_spark(&folder);
    assert!(folder.join("order_date=2026-03-01/region=Zürich").is_dir());
    assert_eq!(rows(&folder).await, as_text(&[march.clone(), april].concat()), "deltalake reads it");

    write_csv(&dir.path().join("corrected.csv"), &march);
    let plan = march_plan(dir.path(), "orders");
    let untouched = snapshot(&folder);
    bf_in(dir.path())
        .arg("plan")
        .arg(&plan)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("file paths with non-ASCII characters such as `order_date=2026-0"))
        .stderr(predicate::str::contains("Nothing was written"));
    assert_eq!(snapshot(&folder), untouched);
    assert!(!dir.path().join(".bf/plan.json").exists());
}

fn write_csv(path: &Path, rows: &[Order]) {
    let csv: String = std::iter::once("order_id,region,amount,order_date".to_owned())
        .chain(rows.iter().map(|r| format!("{},\"{}\",{},{}", r.0, r.1, r.2, r.3)))
        .map(|line| line + "\n")
        .collect();
    std::fs::write(path, csv).unwrap();
}
