//! `bf plan`: the rehearsal proves the backfill without touching the target, and every number it
//! prints is checked here against a computation of the test's own.

use std::collections::BTreeSet;
use std::path::Path;

use bf::deltalake::arrow::array::{Array, Float64Array};
use bf::deltalake::arrow::datatypes::Date32Type;
use bf::deltalake::datafusion::prelude::{ParquetReadOptions, SessionContext, col, lit};
use bf::deltalake::datafusion::scalar::ScalarValue;
use predicates::prelude::*;
use serde_json::Value;

use crate::common::{OrderRow, bf_in, count, demo_workspace, open_table, orders_table, snapshot, write_plan};

mod column_shapes;
mod compare;
mod deleted_keys;
mod idioms;
mod late_rows;
mod refusals;
mod rehearsal;

/// The corrected March from the shop's landing files, computed by hand: (order_id, currency, amount in EUR).
fn corrected_march(shop: &Path) -> Vec<(i64, String, f64)> {
    let rates = crate::common::fx_rates(&shop.join("landing"));
    std::fs::read_to_string(shop.join("landing/orders_march.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            let rate = rates.iter().find(|(c, _)| c == fields[3]).unwrap().1;
            let amount: f64 = fields[2].parse().unwrap();
            (fields[0].parse().unwrap(), fields[3].to_owned(), (amount * rate * 100.0).round() / 100.0)
        })
        .collect()
}

async fn sum(table: &Path, sql: &str) -> f64 {
    let provider = open_table(table).await.table_provider().await.unwrap();
    let ctx = SessionContext::new();
    ctx.register_table("t", provider).unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches[0].column(0).as_any().downcast_ref::<Float64Array>().unwrap().value(0)
}

fn plan_json(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "bf plan failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("bf plan --json prints one JSON document")
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}
