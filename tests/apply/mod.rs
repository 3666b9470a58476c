//! `bf apply`: the scenarios' backfills on the demo shop, exactly once, resumable after a crash, refused
//! when the plan is stale — and what it did not touch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{
    OrderRow, bf_in, commit_infos, commits_with, count, demo_workspace, duckdb_count, duckdb_rows,
    open_table, slices_committed, snapshot, wait_for, write_plan,
};

mod guards;
mod resume;
mod seeds;
mod writers;

fn apply(root: &Path) -> Output {
    bf_in(root).args(["apply", "--auto-approve"]).output().unwrap()
}

fn plan(root: &Path, plan: &str) {
    bf_in(root).args(["plan", plan, "-q"]).assert().success();
}

async fn rows_where(table: &Path, predicate: &str) -> Vec<String> {
    crate::common::rows_at(table, None, predicate).await
}

async fn contents(table: &Path) -> Vec<String> {
    rows_where(table, "true").await
}

/// orders_daily's rows once September is applied without interruption, in a shop of its own: what
/// every crashed, killed or tampered-with run must end as.
async fn september_uninterrupted() -> Vec<String> {
    let reference = demo_workspace();
    plan(reference.path(), "plans/september.toml");
    assert!(apply(reference.path()).status.success());
    contents(&reference.path().join("bf-demo/warehouse/orders_daily")).await
}

/// The data files the table's current version reads for each day (from the log).
async fn files_by_day(table: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let table = open_table(table).await;
    let mut days: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    use futures::TryStreamExt;
    let files: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await.unwrap();
    for file in files {
        // A partition value, or else the file's statistics (these tables hold one day per file).
        let day = match file.partition_values_map().get("order_date") {
            Some(Some(day)) => day.clone(),
            _ => {
                let stats: Value = serde_json::from_str(&file.stats().unwrap()).unwrap();
                stats["minValues"]["order_date"].as_str().unwrap().to_owned()
            }
        };
        days.entry(day).or_default().insert(file.path().into_owned());
    }
    days
}

/// Starts `bf apply` of the saved plan in `root` as a child process (its output piped).
fn spawn_apply(root: &Path, envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    spawn_apply_saying(root, &["-q"], envs)
}

/// [`spawn_apply`] with other arguments (`-q` left out, it prints a line per slice).
fn spawn_apply_saying(root: &Path, args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    crate::common::bf_process()
        .args(["apply", "--auto-approve"])
        .args(args)
        .current_dir(root)
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) async fn append_silver(silver: &Path, rows: &[OrderRow]) {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType, Date32Type, Field, Schema};
    let day = |d: &str| Date32Type::from_naive_date(d.parse().unwrap());
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| day(r.4)))),
    ];
    let schema = Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("currency", DataType::Utf8, true),
        Field::new("amount_eur", DataType::Float64, true),
        Field::new("order_date", DataType::Date32, true),
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    open_table(silver).await.write(vec![batch]).await.unwrap();
}

async fn append_daily(daily: &Path, id: i64, day: &str) {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType, Date32Type, Field, Schema};
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![id])),
        Arc::new(StringArray::from(vec!["C99"])),
        Arc::new(Float64Array::from(vec![1.0])),
        Arc::new(Date32Array::from(vec![Date32Type::from_naive_date(day.parse().unwrap())])),
    ];
    let schema = Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("order_date", DataType::Date32, true),
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    open_table(daily).await.write(vec![batch]).await.unwrap();
}

/// `text` as a TOML basic string.
fn toml_basic_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// The rows of `rows` (as [`contents`] gives them) whose first field, the order id, is `id`.
fn rows_where_in(rows: &[String], id: &str) -> Vec<String> {
    let found: Vec<String> = rows.iter().filter(|r| r.split('|').next() == Some(id)).cloned().collect();
    assert_eq!(found.len(), 1, "order {id}: {found:?}");
    found
}

/// The first six days of September, with `edit` applied to the September plan's text.
fn week_plan_with(root: &Path, name: &str, edit: impl Fn(String) -> String) -> String {
    crate::common::september_plan(root, name, 6, edit)
}
