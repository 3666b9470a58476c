//! What every test area needs: the bf binary, the repository's folders, temp plans, table reads.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use bf::deltalake::DeltaTable;
use bf::deltalake::datafusion::prelude::SessionContext;

/// The `bf` binary this test run built.
pub fn bf() -> Command {
    Command::cargo_bin("bf").expect("the bf binary is built for integration tests")
}

/// A path inside the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A valid plan file's text, for tests that change one thing in it.
pub const VALID_PLAN: &str = r#"reason = "Fix March."

[target]
table = "../warehouse/orders_silver"
date_column = "order_date"

[window]
start = 2026-03-01
end = 2026-03-31

[slicing]
every = "month"

[source]
inputs.orders = { path = "orders.csv", format = "csv" }
query = "SELECT order_id, amount, order_date FROM orders"
"#;

/// Writes `text` as `name` in `dir` and returns its path.
pub fn write_plan(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a plan");
    path
}

/// Opens the Delta table in `dir` at its latest version.
pub async fn open_table(dir: &Path) -> DeltaTable {
    let url = url::Url::from_directory_path(dir.canonicalize().expect("table folder exists"))
        .expect("a folder URL");
    let mut table =
        bf::deltalake::DeltaTableBuilder::from_url(url).expect("a table URL").build().expect("a table");
    table.load().await.expect("the table loads");
    table
}

/// Runs `sql` over the Delta table in `dir`, registered as `t`, and returns the single integer it yields.
pub async fn count(dir: &Path, sql: &str) -> i64 {
    let table = open_table(dir).await;
    let ctx = SessionContext::new();
    ctx.register_table("t", table.table_provider().await.expect("a table provider")).expect("register");
    let batches = ctx.sql(sql).await.expect("valid SQL").collect().await.expect("the query runs");
    let column = batches[0].column(0);
    let values = column
        .as_any()
        .downcast_ref::<bf::deltalake::arrow::array::Int64Array>()
        .unwrap_or_else(|| panic!("{sql} returns one BIGINT, not {:?}", column.data_type()));
    values.value(0)
}
