//! What every test area needs: the bf binary, the repository's folders, temp plans, table reads.

pub mod browser;
pub mod duckdb;
pub mod servers;
pub mod spark;

use std::path::{Path, PathBuf};

pub use duckdb::{duckdb_count, duckdb_query, duckdb_rows};

use assert_cmd::Command;
use bf::deltalake::DeltaTable;
use bf::deltalake::datafusion::prelude::SessionContext;

/// The `bf` binary this test run built.
pub fn bf() -> Command {
    let mut command = Command::cargo_bin("bf").expect("the bf binary is built for integration tests");
    for name in inherited_settings() {
        command.env_remove(name);
    }
    command
}

/// The real binary as a process a test drives itself (spawned, paused, killed), without the
/// settings the shell running the tests holds ([`inherited_settings`]).
pub fn bf_process() -> std::process::Command {
    clean(std::process::Command::new(assert_cmd::cargo::cargo_bin("bf")))
}

/// `command` (a shell, a terminal, a harness that runs bf) without the settings the shell running
/// the tests holds ([`inherited_settings`]).
pub fn clean(mut command: std::process::Command) -> std::process::Command {
    for name in inherited_settings() {
        command.env_remove(name);
    }
    command
}

/// bf's settings and OpenLineage's in the environment the tests run in (`BF_SAMPLES`,
/// `BF_CLUSTER`, `OPENLINEAGE_URL`…): never handed to the binary a test runs, which gets only
/// what the test sets, so a developer's shell cannot turn a test red or green.
pub fn inherited_settings() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| name.starts_with("BF_") || name.starts_with("OPENLINEAGE_"))
        .collect()
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

/// A plan reloading March of `../warehouse/orders` (the orders table, keyed by `order_id`) in one
/// month slice, its `[source]` section's keys `source` (inputs, query, dialect).
pub fn march_orders_plan(source: &str) -> String {
    format!(
        "reason = \"Reload March.\"\n\n[target]\ntable = \"../warehouse/orders\"\ndate_column = \"order_date\"\n\
         key = [\"order_id\"]\n\n[window]\nstart = 2026-03-01\nend = 2026-03-31\n\n[slicing]\nevery = \"month\"\n\n\
         [source]\n{source}\n"
    )
}

/// Opens the Delta table in `dir` at its latest version.
pub async fn open_table(dir: &Path) -> DeltaTable {
    open_table_at(dir, None).await
}

/// Opens the Delta table in `dir` at `version`, or its latest.
pub async fn open_table_at(dir: &Path, version: Option<u64>) -> DeltaTable {
    let url = url::Url::from_directory_path(dir.canonicalize().expect("table folder exists"))
        .expect("a folder URL");
    let mut builder = bf::deltalake::DeltaTableBuilder::from_url(url).expect("a table URL");
    if let Some(version) = version {
        builder = builder.with_version(version as _);
    }
    builder.load().await.expect("the table loads")
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

/// Every file under `dir` with a hash of its bytes: two equal snapshots mean not one byte changed.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, u64> {
    use std::hash::{Hash, Hasher};
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).expect("a readable folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&path).expect("a readable file").hash(&mut hasher);
                files.insert(path.strip_prefix(dir).unwrap().to_owned(), hasher.finish());
            }
        }
    }
    files
}

/// A folder holding `bf-demo/` (the example shop, untouched: `--shop-only`) and `plans/` (the
/// repository's plans), as the repository looks after `cargo run -- demo --shop-only`. bf runs in it, so `.bf/` lands there too.
pub fn demo_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    bf().args(["demo", "--shop-only"]).arg(dir.path().join("bf-demo")).assert().success();
    std::fs::create_dir(dir.path().join("plans")).unwrap();
    for entry in std::fs::read_dir(repo("plans")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join("plans").join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// The September plan cut to its first `days` days, with `edit` applied to its text, written as
/// `plans/<name>` in a demo workspace; returns that relative path, for `bf plan`.
pub fn september_plan(root: &Path, name: &str, days: u32, edit: impl Fn(String) -> String) -> String {
    let september = std::fs::read_to_string(root.join("plans/september.toml")).expect("the September plan");
    let text = edit(september.replace("end = 2026-09-30", &format!("end = 2026-09-{days:02}")));
    write_plan(&root.join("plans"), name, &text);
    format!("plans/{name}")
}

/// The shop's exchange rates to EUR, `(currency, rate)`, read from `landing/fx_rates.csv` by the
/// test, not by bf.
pub fn fx_rates(landing: &Path) -> Vec<(String, f64)> {
    std::fs::read_to_string(landing.join("fx_rates.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let (currency, rate) = l.split_once(',').unwrap();
            (currency.to_owned(), rate.parse().unwrap())
        })
        .collect()
}

/// A plan file's text without its `[[downstream]]` plans: the March reload of `orders_silver` alone,
/// for tests that move its target elsewhere (a downstream that no longer reads it is refused).
pub fn without_downstream(text: &str) -> String {
    let mut kept = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "[[downstream]]" {
            lines.next();
        } else {
            kept.push(line);
        }
    }
    kept.join("\n") + "\n"
}

/// In `dir`: `orders`, a table partitioned by the day holding orders of 1 and 5 September, and
/// `days.toml`, a plan reloading 1–4 September from `days.csv` in one-day slices, four at once
/// (`parallel = 4`). Returns the table's folder.
pub async fn four_days_at_once(dir: &Path) -> PathBuf {
    let rows: [&[OrderRow]; 1] =
        [&[(1, "C01", 10.0, "EUR", "2026-09-01"), (2, "C02", 20.0, "EUR", "2026-09-05")]];
    let target = orders_table(&dir.join("orders"), true, &rows).await;
    std::fs::write(
        dir.join("days.csv"),
        "order_id,customer,amount,currency,order_date\n1,C01,11.0,EUR,2026-09-01\n3,C03,30.0,EUR,2026-09-02\n\
         4,C04,40.0,EUR,2026-09-03\n5,C05,50.0,EUR,2026-09-04\n",
    )
    .unwrap();
    let text = VALID_PLAN
        .replace("../warehouse/orders_silver", "orders")
        .replace("orders.csv", "days.csv")
        .replace("start = 2026-03-01", "start = 2026-09-01")
        .replace("end = 2026-03-31", "end = 2026-09-04")
        .replace("every = \"month\"", "every = \"day\"\nparallel = 4")
        .replace(
            "SELECT order_id, amount, order_date FROM orders",
            "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders",
        );
    write_plan(dir, "days.toml", &text);
    target
}

/// Runs `bf` in `dir`.
pub fn bf_in(dir: &Path) -> Command {
    let mut command = bf();
    command.current_dir(dir).env_remove("BF_STATE_DIR");
    command
}

/// One row of the orders tables the tests build: id, customer, amount, currency, day.
pub type OrderRow = (i64, &'static str, f64, &'static str, &'static str);

/// The columns of the orders tables the tests build.
pub fn orders_columns() -> Vec<bf::deltalake::kernel::StructField> {
    use bf::deltalake::kernel::{DataType, StructField};
    vec![
        StructField::new("order_id", DataType::LONG, true),
        StructField::new("customer", DataType::STRING, true),
        StructField::new("amount", DataType::DOUBLE, true),
        StructField::new("currency", DataType::STRING, true),
        StructField::new("order_date", DataType::DATE, true),
    ]
}

/// Writes an orders table (order_id, customer, amount, currency, order_date), optionally partitioned
/// by order_date, one commit per group of rows, and returns its folder.
pub async fn orders_table(dir: &Path, partitioned: bool, commits: &[&[OrderRow]]) -> PathBuf {
    orders_table_with(dir, partitioned, orders_columns(), &[], commits).await
}

/// [`orders_table`] with its own columns (the orders' five, with their metadata, and any column
/// the table generates) and table properties.
pub async fn orders_table_with(
    dir: &Path,
    partitioned: bool,
    columns: Vec<bf::deltalake::kernel::StructField>,
    properties: &[(&str, &str)],
    commits: &[&[OrderRow]],
) -> PathBuf {
    use bf::deltalake::protocol::SaveMode;

    let mut table =
        new_table_with(dir, columns, if partitioned { &["order_date"] } else { &[] }, properties).await;
    for rows in commits {
        table = table.write(vec![orders_batch(rows)]).with_save_mode(SaveMode::Append).await.unwrap();
    }
    dir.to_owned()
}

/// Appends `rows` to the orders table in `dir` in one commit, as another writer (the daily job)
/// would; returns the version it committed.
pub async fn append_orders(dir: &Path, rows: &[OrderRow]) -> u64 {
    use bf::deltalake::protocol::SaveMode;
    let table = open_table(dir).await.write(vec![orders_batch(rows)]).with_save_mode(SaveMode::Append).await;
    table.unwrap().version().unwrap() as u64
}

/// Appends one order of 2 May 2026 to the demo's silver table, outside the March reload's window,
/// `commits` times, a commit each: the daily job writing beside a backfill, or a long history.
pub async fn append_outside_march(silver: &Path, commits: usize) {
    let mut table = open_table(silver).await;
    for order in 0..commits {
        table = table.write(vec![may_order(9001 + order as i64)]).await.unwrap();
    }
}

/// Overwrites the demo's silver table whole (`mode="overwrite"`, no predicate) with one order of
/// 2 May 2026: another job's full reload, which removes every file, the window's too.
pub async fn overwrite_with_a_may_order(silver: &Path) -> u64 {
    use bf::deltalake::protocol::SaveMode;
    let table = open_table(silver).await.write(vec![may_order(9001)]).with_save_mode(SaveMode::Overwrite);
    table.await.unwrap().version().unwrap() as u64
}

/// Order `id` of 2 May 2026, as a batch of the demo's silver table.
fn may_order(id: i64) -> bf::deltalake::arrow::array::RecordBatch {
    silver_order(id, "2026-05-02")
}

/// Appends order `id` of `day` (`2026-03-16`) to the demo's silver table, in a commit of its own,
/// as the daily job would; returns the version it committed.
pub async fn append_to_silver(silver: &Path, id: i64, day: &str) -> u64 {
    let table = open_table(silver).await.write(vec![silver_order(id, day)]).await.unwrap();
    table.version().unwrap() as u64
}

/// Order `id` of customer C01 on `day`, 5 EUR, as the demo's silver table holds its rows.
fn silver_order(id: i64, day: &str) -> bf::deltalake::arrow::array::RecordBatch {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType, Date32Type, Field, Schema};
    let schema = Arc::new(Schema::new(
        [
            ("order_id", DataType::Int64),
            ("customer", DataType::Utf8),
            ("amount", DataType::Float64),
            ("currency", DataType::Utf8),
            ("amount_eur", DataType::Float64),
            ("order_date", DataType::Date32),
        ]
        .map(|(n, t)| Field::new(n, t, true))
        .to_vec(),
    ));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![id])),
        Arc::new(StringArray::from(vec!["C01"])),
        Arc::new(Float64Array::from(vec![5.0])),
        Arc::new(StringArray::from(vec!["EUR"])),
        Arc::new(Float64Array::from(vec![5.0])),
        Arc::new(Date32Array::from(vec![Date32Type::from_naive_date(day.parse().unwrap())])),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// The orders tables' five columns, as Arrow fields.
pub fn orders_schema() -> bf::deltalake::arrow::datatypes::SchemaRef {
    use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema};
    std::sync::Arc::new(Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("customer", ArrowType::Utf8, true),
        Field::new("amount", ArrowType::Float64, true),
        Field::new("currency", ArrowType::Utf8, true),
        Field::new("order_date", ArrowType::Date32, true),
    ]))
}

/// Orders as one batch of the orders tables' five columns.
fn orders_batch(rows: &[OrderRow]) -> bf::deltalake::arrow::array::RecordBatch {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::Date32Type;
    let schema = orders_schema();
    let day = |d: &str| Date32Type::from_naive_date(d.parse().unwrap());
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| day(r.4)))),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// Creates an empty Delta table in `dir` (made if missing) with `columns`, partitioned by `partitions`.
pub async fn new_table(
    dir: &Path,
    columns: Vec<bf::deltalake::kernel::StructField>,
    partitions: &[&str],
) -> DeltaTable {
    new_table_with(dir, columns, partitions, &[]).await
}

/// [`new_table`] with table properties, such as `("delta.appendOnly", "true")`.
pub async fn new_table_with(
    dir: &Path,
    columns: Vec<bf::deltalake::kernel::StructField>,
    partitions: &[&str],
    properties: &[(&str, &str)],
) -> DeltaTable {
    std::fs::create_dir_all(dir).unwrap();
    let url = url::Url::from_directory_path(dir.canonicalize().unwrap()).unwrap();
    let create = DeltaTable::try_from_url(url)
        .await
        .unwrap()
        .create()
        .with_columns(columns)
        .with_configuration(properties.iter().map(|(key, value)| (*key, Some(*value))));
    let create =
        if partitions.is_empty() { create } else { create.with_partition_columns(partitions.to_vec()) };
    create.await.unwrap()
}

/// The rows of a table at `version` (the latest with `None`) matching the SQL `predicate`, each as
/// text, sorted: two equal vectors mean equal contents, duplicates included.
pub async fn rows_at(table: &Path, version: Option<u64>, predicate: &str) -> Vec<String> {
    use bf::deltalake::arrow::util::display::array_value_to_string;
    let opened = open_table_at(table, version).await;
    let ctx = SessionContext::new();
    ctx.register_table("t", opened.table_provider().await.unwrap()).unwrap();
    let batches =
        ctx.sql(&format!("SELECT * FROM t WHERE {predicate}")).await.unwrap().collect().await.unwrap();
    let mut rows: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows())
                .map(|r| {
                    b.columns()
                        .iter()
                        .map(|c| array_value_to_string(c, r).unwrap())
                        .collect::<Vec<_>>()
                        .join("|")
                })
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

/// Every commit's commitInfo, read from the log's JSON files — not through bf's ledger — as
/// `(version, commitInfo)`, oldest first.
pub fn commit_infos(table: &Path) -> Vec<(u64, serde_json::Value)> {
    let log = table.join("_delta_log");
    let mut commits: Vec<(u64, serde_json::Value)> = std::fs::read_dir(&log)
        .expect("a _delta_log folder")
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let version: u64 = path.file_name()?.to_str()?.strip_suffix(".json")?.parse().ok()?;
            let text = std::fs::read_to_string(&path).unwrap();
            let info = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find_map(|action| action.get("commitInfo").cloned())
                .unwrap_or(serde_json::Value::Null);
            Some((version, info))
        })
        .collect();
    commits.sort_by_key(|(version, _)| *version);
    commits
}

/// The slice numbers of the commits that carry `bf.slice` and `bf.backfill_id` (an apply's slices),
/// in commit order, read from the raw log.
pub fn slices_committed(table: &Path) -> Vec<u64> {
    commit_infos(table)
        .iter()
        .filter(|(_, info)| info.get("bf.backfill_id").is_some())
        .filter_map(|(_, info)| info.get("bf.slice")?.as_u64())
        .collect()
}

/// How many commits carry `bf.<key>` (e.g. `comment`), read from the raw log.
pub fn commits_with(table: &Path, key: &str) -> usize {
    commit_infos(table).iter().filter(|(_, info)| info.get(format!("bf.{key}")).is_some()).count()
}

/// A port on 127.0.0.1 where nothing answers: a socket bound to it and never listening, so every
/// connection is refused and no other process can take the port while the socket lives. (A port
/// found free and closed again could be taken by another test's server before bf connects.)
pub fn refusing_port() -> (socket2::Socket, u16) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    (socket, port)
}

/// Waits, bounded (two minutes), until `done` holds: asked again after 2 ms, then less and less
/// often, up to every 50 ms. What is waited for is a paused bf (which stays paused) or a server's
/// state (asked over HTTP): at a steady 2 ms, a wait for the cluster to give a worker up kept a
/// core busy asking for 15 seconds.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut pause = std::time::Duration::from_millis(2);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// Runs `bf ARGS` on a pseudo-terminal (util-linux `script`), waits for its question, runs
/// `meanwhile`, then answers `answer`: a person at a terminal while the daily job runs. Returns the
/// exit code and what it printed.
pub async fn answered_after(
    root: &Path,
    args: &str,
    answer: &str,
    meanwhile: impl std::future::Future<Output = ()>,
) -> (Option<i32>, String) {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let bf = assert_cmd::cargo::cargo_bin("bf");
    let mut asked = clean(std::process::Command::new("script"))
        .args(["-qec", &format!("{} {args}", bf.display()), "/dev/null"])
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let printed = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = asked.stdout.take().unwrap();
    let reading = {
        let printed = printed.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                printed.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    };
    let said = || String::from_utf8_lossy(&printed.lock().unwrap()).into_owned();
    wait_for("the question", || said().contains("Only 'yes' will be accepted"));
    meanwhile.await;
    std::io::Write::write_all(asked.stdin.as_mut().unwrap(), format!("{answer}\n").as_bytes()).unwrap();
    let status = asked.wait().unwrap();
    reading.join().unwrap();
    (status.code(), said())
}

/// Releases processes paused each on its own file (`BF_PAUSE_FILE`) once every one of them waits
/// there, so that their next commits race; returns what each printed, in their order.
pub fn release_together(
    what: &str,
    pauses: &[PathBuf],
    children: Vec<std::process::Child>,
) -> Vec<std::process::Output> {
    wait_for(what, || pauses.iter().all(|p| p.exists()));
    for pause in pauses {
        std::fs::remove_file(pause).unwrap();
    }
    children.into_iter().map(|c| c.wait_with_output().unwrap()).collect()
}

/// Runs `bf apply ARGS`, paused at `point` of `slice` (`before`, `after-check`), runs `meanwhile`
/// there, lets it go on; returns what it printed.
pub async fn apply_paused<F: std::future::Future<Output = ()>>(
    dir: &Path,
    args: &[&str],
    slice: usize,
    point: &str,
    meanwhile: F,
) -> std::process::Output {
    let pause = dir.join(format!("paused-{slice}-{point}"));
    let child = crate::common::bf_process()
        .current_dir(dir)
        .env_remove("BF_STATE_DIR")
        .args(["apply", "--auto-approve"])
        .args(args)
        .env(bf::fault::PAUSE_FILE_ENV, &pause)
        .env(bf::fault::PAUSE_SLICE_ENV, slice.to_string())
        .env(bf::fault::PAUSE_POINT_ENV, point)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&format!("bf to pause at {point} slice {slice}"), || pause.exists());
    meanwhile.await;
    std::fs::remove_file(&pause).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `bf rollback --auto-approve` in `dir`, paused after its check and before its RESTORE,
/// runs `meanwhile` there, lets it go on; returns what it printed.
pub async fn rollback_paused_before_restore<F: std::future::Future<Output = ()>>(
    dir: &Path,
    meanwhile: F,
) -> std::process::Output {
    let pause = dir.join("paused-before-restore");
    let child = crate::common::bf_process()
        .current_dir(dir)
        .env_remove("BF_STATE_DIR")
        .args(["rollback", "--auto-approve"])
        .env(bf::fault::PAUSE_FILE_ENV, &pause)
        .env(bf::fault::PAUSE_POINT_ENV, "before-restore")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the rollback to pause before its RESTORE", || pause.exists());
    meanwhile.await;
    std::fs::remove_file(&pause).unwrap();
    child.wait_with_output().unwrap()
}

/// `~/.cache/<name>`, or the folder the environment variable `variable` names.
pub fn cache_dir(variable: &str, name: &str) -> PathBuf {
    std::env::var_os(variable).map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        home.join(".cache").join(name)
    })
}

/// The `bin` folder of a Python venv (`cache_dir(variable, name)`) holding `packages` from PyPI,
/// made once per machine, and again whenever `import` (a Python statement) fails in it. The import
/// is tried once per test process: at every call it cost half a second of CPU (moto's and Azure's
/// packages), 112 of the 151 CPU seconds Python spent in the stores' and catalogs' tests, and
/// held every other test waiting for a venv in line behind it.
pub fn python_venv(variable: &str, name: &str, import: &str, packages: &[&str]) -> PathBuf {
    static READY: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut ready_venvs = READY.lock().unwrap_or_else(|e| e.into_inner());
    let venv = cache_dir(variable, name);
    let bin = venv.join("bin");
    if ready_venvs.contains(&venv) {
        return bin;
    }
    let ready = std::process::Command::new(bin.join("python"))
        .args(["-c", import])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let made = std::process::Command::new("python3").arg("-m").arg("venv").arg(&venv).status().unwrap();
        assert!(made.success(), "python3 -m venv {}", venv.display());
        let installed = std::process::Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(packages)
            .status()
            .unwrap();
        assert!(installed.success(), "pip install {packages:?} (PyPI)");
    }
    ready_venvs.push(venv);
    bin
}

/// A table's commit files, by version, oldest first, read raw from `_delta_log`.
pub fn commit_files(table: &Path) -> Vec<(u64, PathBuf)> {
    let mut commits: Vec<(u64, PathBuf)> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| Some((p.file_name()?.to_str()?.strip_suffix(".json")?.parse().ok()?, p)))
        .collect();
    commits.sort();
    commits
}

/// The table's latest metaData action, read raw from its commits.
pub fn latest_metadata(table: &Path) -> serde_json::Value {
    commit_files(table)
        .iter()
        .rev()
        .find_map(|(_, p)| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("metaData").cloned())
        })
        .expect("a metaData action")
}

/// Changes a table the way an engine's ALTER TABLE does, in one commit of the next version written
/// raw: `protocol` (an upgrade, as JSON) if given, and the latest metaData with `properties` set.
pub fn alter_table(table: &Path, protocol: Option<serde_json::Value>, properties: &[(&str, &str)]) {
    alter_table_with(table, protocol, |metadata| {
        for (key, value) in properties {
            metadata["configuration"][*key] = serde_json::Value::from(*value);
        }
    });
}

/// [`alter_table`] with the change to the latest metaData action made by `edit`.
pub fn alter_table_with(
    table: &Path,
    protocol: Option<serde_json::Value>,
    edit: impl FnOnce(&mut serde_json::Value),
) {
    use serde_json::json;
    let next = commit_files(table).last().map_or(0, |(version, _)| version + 1);
    let mut metadata = latest_metadata(table);
    edit(&mut metadata);
    let mut lines =
        vec![json!({"commitInfo": {"timestamp": 1_700_000_000_000u64, "operation": "ALTER TABLE"}})];
    lines.extend(protocol.map(|p| json!({ "protocol": p })));
    lines.push(json!({ "metaData": metadata }));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(table.join(format!("_delta_log/{next:020}.json")), text).unwrap();
}

/// Deletes rows of one file of a table the way Spark's DELETE does with deletion vectors: a commit
/// that upgrades the protocol (with `upgrade`), removes the file and adds it back with an inline vector naming the
/// deleted row positions.
pub fn delete_with_vector(table: &Path, version: u64, file: &serde_json::Value, rows: &[u32], upgrade: bool) {
    use serde_json::Value;
    use std::io::Write;
    let mut bitmap = roaring::RoaringTreemap::new();
    bitmap.extend(rows.iter().map(|&r| u64::from(r)));
    let mut bytes = 1_681_511_377u32.to_le_bytes().to_vec();
    bitmap.serialize_into(&mut bytes).unwrap();
    let size = bytes.len();
    bytes.resize(size.div_ceil(4) * 4, 0); // Z85 encodes whole 4-byte blocks
    let vector = serde_json::json!({
        "storageType": "i",
        "pathOrInlineDv": z85::encode(&bytes),
        "sizeInBytes": size,
        "cardinality": rows.len(),
    });
    let now = 1_700_000_000_000u64;
    let removed = serde_json::json!({"path": file["path"], "deletionTimestamp": now, "dataChange": true,
        "extendedFileMetadata": true, "partitionValues": file["partitionValues"], "size": file["size"]});
    let mut added = file.clone();
    added["deletionVector"] = vector;
    added["dataChange"] = Value::Bool(true);
    let mut lines = vec![
        serde_json::json!({"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}}),
    ];
    if upgrade {
        lines.push(deletion_vectors_protocol());
    }
    lines.push(serde_json::json!({"remove": removed}));
    lines.push(serde_json::json!({"add": added}));
    let mut log = std::fs::File::create_new(table.join(format!("_delta_log/{version:020}.json"))).unwrap();
    for line in lines {
        writeln!(log, "{line}").unwrap();
    }
}

/// The protocol action that lets a table hold deletion vectors, as Spark upgrades one.
pub fn deletion_vectors_protocol() -> serde_json::Value {
    serde_json::json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}})
}

/// Of the files a slice's publication adds (`publication`, a slice's entry in the saved plan):
/// how many are in `table`'s folder with the bytes the plan recorded (sha256), and how many of
/// those a commit in the table's log adds (read raw).
pub fn published_files_in(table: &Path, publication: &serde_json::Value) -> (usize, usize) {
    use sha2::{Digest, Sha256};
    let named: std::collections::BTreeSet<String> = commit_files(table)
        .iter()
        .flat_map(|(_, p)| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter_map(|l| {
                    let action: serde_json::Value = serde_json::from_str(l).ok()?;
                    Some(action.get("add")?["path"].as_str()?.to_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut placed = 0;
    let mut committed = 0;
    for add in publication["adds"].as_array().expect("the publication's adds") {
        let path = add["path"].as_str().unwrap();
        let Ok(bytes) = std::fs::read(table.join(path)) else { continue };
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            add["sha256"].as_str().unwrap(),
            "{path} in the table is not the rehearsed file"
        );
        placed += 1;
        committed += usize::from(named.contains(path));
    }
    (placed, committed)
}

/// An HTTP receiver on 127.0.0.1 (a webhook, an OpenLineage endpoint) answering every request
/// with `status`; what it received is kept, in order. Stopped when dropped.
pub struct Receiver {
    server: std::sync::Arc<tiny_http::Server>,
    received: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// One request a [`Receiver`] took.
#[derive(Debug, Clone)]
pub struct Received {
    pub url: String,
    /// Its `Authorization` header, if it had one.
    pub authorization: Option<String>,
    pub body: String,
}

impl Receiver {
    pub fn start(status: u16) -> Receiver {
        let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let thread = {
            let (server, received) = (server.clone(), received.clone());
            std::thread::spawn(move || {
                for mut request in server.incoming_requests() {
                    let mut body = String::new();
                    std::io::Read::read_to_string(request.as_reader(), &mut body).unwrap();
                    let authorization = request
                        .headers()
                        .iter()
                        .find(|h| h.field.equiv("Authorization"))
                        .map(|h| h.value.to_string());
                    received.lock().unwrap().push(Received {
                        url: request.url().to_owned(),
                        authorization,
                        body,
                    });
                    let _ = request.respond(tiny_http::Response::empty(status));
                }
            })
        };
        Receiver { server, received, thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.server.server_addr().to_ip().unwrap())
    }

    /// A URL with a secret in it, as webhook URLs have.
    pub fn url(&self) -> String {
        format!("{}/hooks/T0SECRET/B0SECRET", self.base())
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.requests().iter().map(|r| serde_json::from_str(&r.body).unwrap()).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// `bf apply --auto-approve` in `root` with `env` (and the OpenLineage settings of the test's own
/// environment removed), stopped by a SIGINT — Ctrl-C — once `slices` slices of `table` are
/// committed (read from its log); returns what it said and its exit status.
pub fn apply_interrupted_after(
    root: &Path,
    table: &Path,
    slices: usize,
    env: &[(&str, &str)],
) -> std::process::Output {
    let child = crate::common::bf_process()
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .env_remove("OPENLINEAGE_CONFIG")
        .env_remove("OPENLINEAGE_DISABLED")
        .env_remove("OPENLINEAGE_PARENT_ID")
        .envs(env.iter().copied())
        .args(["apply", "--auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&format!("{slices} slices committed"), || slices_committed(table).len() >= slices);
    let signalled =
        std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    child.wait_with_output().unwrap()
}

/// The saved plan in `root` with its `problems` erased, its downstream plans' too (a hand edit), is still refused by
/// `bf apply`, saying `why` (the seal reads the failure from what the plan records beside it), and
/// writes nothing to `table`.
pub fn refused_with_its_problems_erased(root: &Path, table: &Path, why: &str) {
    let saved = root.join(".bf/plan.json");
    let mut erased: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    fn erase(plan: &mut serde_json::Value) {
        plan["problems"] = serde_json::Value::Array(Vec::new());
        for below in
            plan.get_mut("downstream").and_then(serde_json::Value::as_array_mut).into_iter().flatten()
        {
            erase(below);
        }
    }
    erase(&mut erased);
    std::fs::write(&saved, erased.to_string()).unwrap();
    let untouched = snapshot(table);
    bf_in(root).args(["apply", "--auto-approve"]).assert().code(1).stderr(predicates::str::contains(why));
    assert_eq!(snapshot(table), untouched);
}
