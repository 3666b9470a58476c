//! bf on tables in object stores: the seed scenarios on an S3 API server (moto), started on
//! 127.0.0.1 by each test. What landed is read back with the Python `deltalake` package, not bf.

use std::path::Path;
use std::process::Output;

use predicates::prelude::*;

use crate::common::servers::{self, Server};
use crate::common::{bf_in, september_plan, wait_for};

const SECRET: &str = "bf-test-secret-never-printed";

/// The example shop in a bucket: plans in `dir/shop/plans`, tables and files under
/// `s3://acme-lake/shop/`.
pub(crate) struct S3Shop {
    pub(crate) server: Server,
    dir: tempfile::TempDir,
}

impl S3Shop {
    pub(crate) fn new() -> S3Shop {
        let server = servers::s3();
        servers::create_bucket(&server, "acme-lake");
        let dir = tempfile::tempdir().unwrap();
        let shop = S3Shop { server, dir };
        shop.bf()
            .current_dir(shop.dir.path())
            .args(["demo", "--shop-only", "--store", "s3://acme-lake/shop", "shop"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Built the example shop in s3://acme-lake/shop"));
        shop
    }

    pub(crate) fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("shop")
    }

    /// `bf` in the shop, with the S3 server's environment (and a secret it must never print).
    pub(crate) fn bf(&self) -> assert_cmd::Command {
        let mut command = bf_in(&self.root());
        command.envs(servers::s3_env(&self.server));
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let output = self.bf().args(args).output().unwrap();
        for stream in [&output.stdout, &output.stderr] {
            assert!(!String::from_utf8_lossy(stream).contains(SECRET), "a credential was printed");
        }
        output
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "bf {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// The rows of a table in the bucket on the days `first..=last`, at `version` or the latest,
    /// read by the Python `deltalake` package: one sorted JSON text per row.
    pub(crate) fn rows(&self, table: &str, version: Option<u64>, first: &str, last: &str) -> Vec<String> {
        let uri = format!("s3://acme-lake/shop/warehouse/{table}");
        servers::rows_by_day(&uri, version, first, last, &servers::s3_env(&self.server))
    }

    /// The single integer `sql` returns over a table in the bucket (as `t`), read by DuckDB's Delta
    /// extension (delta-kernel-rs), which reaches the server through a secret of its own.
    pub(crate) fn duckdb_count(&self, table: &str, sql: &str) -> i64 {
        let secret = format!(
            "CREATE SECRET (TYPE S3, KEY_ID 'bf-test-key-id', SECRET '{SECRET}', REGION 'us-east-1', \
             ENDPOINT '127.0.0.1:{}', URL_STYLE 'path', USE_SSL false)",
            self.server.port
        );
        let uri = format!("s3://acme-lake/shop/warehouse/{table}");
        let rows = crate::common::duckdb_query(&uri, &[secret], sql);
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        rows[0].parse().unwrap()
    }

    /// The table's commits, oldest first, from its log read raw in the bucket: (version, operation).
    pub(crate) fn history(&self, table: &str) -> Vec<(u64, String)> {
        let script = format!(
            r#"
import boto3, json
s3 = boto3.client("s3")
prefix = "shop/warehouse/{table}/_delta_log/"
keys = sorted(o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-lake", Prefix=prefix)
              for o in page.get("Contents", []) if o["Key"].endswith(".json"))
for key in keys:
    body = s3.get_object(Bucket="acme-lake", Key=key)["Body"].read().decode()
    info = [json.loads(l)["commitInfo"] for l in body.splitlines() if '"commitInfo"' in l]
    print(int(key[len(prefix):-5]), info[0]["operation"] if info else "-")
"#
        );
        servers::python(&script, &servers::s3_env(&self.server))
            .lines()
            .map(|l| {
                let (version, operation) = l.split_once(' ').unwrap();
                (version.parse().unwrap(), operation.to_owned())
            })
            .collect()
    }
}

#[test]
fn the_s3_server_refuses_to_overwrite_an_object_on_if_none_match() {
    // bf's commits on S3 rest on this: a second writer of the same log version gets 412. A server
    // that ignored the header would let both commit, and the tests below would prove nothing.
    let server = servers::s3();
    servers::create_bucket(&server, "acme-lake");
    let answered = servers::python(
        r#"
import boto3, botocore
s3 = boto3.client("s3")
s3.put_object(Bucket="acme-lake", Key="_delta_log/00000000000000000001.json", Body=b"first")
try:
    s3.put_object(Bucket="acme-lake", Key="_delta_log/00000000000000000001.json", Body=b"second", IfNoneMatch="*")
    print("overwritten")
except botocore.exceptions.ClientError as e:
    print(e.response["ResponseMetadata"]["HTTPStatusCode"])
print(s3.get_object(Bucket="acme-lake", Key="_delta_log/00000000000000000001.json")["Body"].read().decode())
s3.put_object(Bucket="acme-lake", Key="_delta_log/00000000000000000002.json", Body=b"new", IfNoneMatch="*")
print("created")
"#,
        &servers::s3_env(&server),
    );
    assert_eq!(answered.lines().collect::<Vec<_>>(), ["412", "first", "created"]);
}

#[test]
fn the_march_reload_is_planned_applied_and_rolled_back_on_s3() {
    let shop = S3Shop::new();
    let march = |version| shop.rows("orders_silver", version, "2026-03-01", "2026-03-31");
    let before = march(None);
    assert_eq!(before.len(), 412);
    let versions = shop.history("orders_silver");
    let pre_version = versions.last().unwrap().0;
    let revenue_versions = shop.history("revenue_by_day");

    let planned = shop.ok(&["plan", "plans/march.toml"]);
    assert!(planned.contains("412 → 409"), "{planned}");
    assert_eq!(shop.history("orders_silver"), versions, "bf plan wrote to the real table");
    // The rehearsal is beside the table, in the same bucket.
    let saved = std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap();
    assert!(saved.contains("s3://acme-lake/shop/warehouse/orders_silver__rehearsal/"), "{saved}");
    assert!(!saved.contains(SECRET));

    let in_march = "SELECT count(*) FROM t WHERE order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    shop.ok(&["apply", "--auto-approve"]);
    let after = march(None);
    assert_eq!(after.len(), 409);
    assert_eq!(shop.duckdb_count("orders_silver", in_march), 409, "read by DuckDB from the bucket");
    assert!(after.iter().any(|r| r.contains("\"currency\": \"EUR\"")), "the corrected currency landed");
    // Outside March, not a row moved.
    for (first, last) in [("2026-01-01", "2026-02-28"), ("2026-04-01", "2026-04-30")] {
        assert_eq!(
            shop.rows("orders_silver", None, first, last),
            shop.rows("orders_silver", Some(pre_version), first, last)
        );
    }
    let history = shop.history("orders_silver");
    assert_eq!(history.len(), versions.len() + 2, "one slice commit and the comment: {history:?}");

    let listed = shop.ok(&["history", "s3://acme-lake/shop/warehouse/orders_silver", "--json"]);
    let listed: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let slice = listed.iter().find(|c| c["version"] == history[history.len() - 2].0).unwrap();
    assert_eq!(slice["operation"], "WRITE", "{slice}");
    assert!(slice.to_string().contains("2026-03-01"), "bf history reads the ledger on S3: {slice}");

    // revenue_by_day, downstream, was rehearsed on the rehearsal in the bucket and applied after it.
    let revenue = |version| shop.rows("revenue_by_day", version, "2026-03-01", "2026-03-31");
    assert_eq!(revenue(None).len(), 31);
    assert_ne!(revenue(None), revenue(Some(revenue_versions.last().unwrap().0)), "its March was rebuilt");
    assert_eq!(shop.history("revenue_by_day").len(), revenue_versions.len() + 2);

    shop.ok(&["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(march(None), before, "the rollback restored March row for row");
    assert_eq!(shop.duckdb_count("orders_silver", in_march), 412, "read by DuckDB from the bucket");
    assert_eq!(revenue(None), revenue(Some(revenue_versions.last().unwrap().0)), "and revenue_by_day's");
    assert_eq!(shop.history("orders_silver").last().unwrap().1, "UPDATE TABLE METADATA");
    assert!(shop.history("orders_silver").iter().any(|(_, op)| op == "RESTORE"));

    // No object bf wrote — commits, the change log, the rehearsal — holds the credential.
    let holding = servers::python(
        &format!(
            r#"
import boto3
s3 = boto3.client("s3")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-lake"):
    for o in page.get("Contents", []):
        if b"{SECRET}" in s3.get_object(Bucket="acme-lake", Key=o["Key"])["Body"].read():
            print(o["Key"])
"#
        ),
        &servers::s3_env(&shop.server),
    );
    assert_eq!(holding, "", "objects holding the credential");
    assert!(!std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap().contains(SECRET));
}

#[test]
fn a_september_backfill_on_s3_resumes_after_a_crash_and_a_kill_9() {
    let shop = S3Shop::new();
    let root = shop.root();
    let plan = september_plan(&root, "september-12.toml", 12, |t| t);
    shop.ok(&["plan", &plan]);
    let crashed =
        shop.bf().args(["apply", "--auto-approve"]).env("BF_FAULT", "after-commit:3").output().unwrap();
    assert!(!crashed.status.success());
    let slices = |shop: &S3Shop| shop.history("orders_daily").iter().filter(|(_, op)| op == "WRITE").count();
    assert_eq!(slices(&shop), 3);

    // A real kill -9, once the apply reports its fifth slice committed (its progress lines: the
    // kill follows the apply, not a clock).
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bf"))
        .args(["apply", "--auto-approve"])
        .current_dir(&root)
        .envs(servers::s3_env(&shop.server))
        .env_remove("BF_STATE_DIR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let progress = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut committed = 0;
    for line in std::io::BufRead::lines(progress) {
        committed += usize::from(line.unwrap().starts_with("ok "));
        // Slices 4 and 5: the crash left three.
        if committed == 2 {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let at_kill = slices(&shop);
    assert!((5..12).contains(&at_kill), "the kill landed at {at_kill} of 12 slices");

    let resumed = shop.run(&["apply", "--auto-approve"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("skip ")).count(), at_kill, "{stderr}");
    assert_eq!(slices(&shop), 12, "each slice committed exactly once");
    let rows = shop.rows("orders_daily", None, "2026-09-01", "2026-09-12");
    assert_eq!(rows.len(), root_orders(&shop, 12));
    let read =
        shop.duckdb_count("orders_daily", "SELECT count(*) FROM t WHERE order_date <= DATE '2026-09-12'");
    assert_eq!(read as usize, root_orders(&shop, 12), "read by DuckDB from the bucket");
}

/// The orders of the first `days` days of September, as the shop's till files hold them.
/// The September backfill in the bucket run as Airflow tasks: the DAG `bf export airflow` writes,
/// run by `airflow dags test` with the store's settings in the tasks' environment, one slice task
/// crashing after its commit and retried; each slice lands once, then the comment.
#[test]
fn the_september_backfill_on_s3_runs_as_an_airflow_dag() {
    let shop = S3Shop::new();
    let root = shop.root();
    let plan = september_plan(&root, "september-5.toml", 5, |t| t);
    shop.ok(&["plan", &plan]);
    let dag_id = crate::fanout::run_exported_dag(&root, 5, &servers::s3_env(&shop.server));
    let history = shop.history("orders_daily");
    let writes = history.iter().filter(|(v, op)| *v > 0 && op == "WRITE").count();
    assert_eq!(writes, 5, "each slice committed once: {history:?}");
    assert_eq!(history.last().unwrap().1, "UPDATE TABLE METADATA", "then finish's comment");
    assert_eq!(shop.rows("orders_daily", None, "2026-09-01", "2026-09-05").len(), root_orders(&shop, 5));
    let status: serde_json::Value = serde_json::from_str(&shop.ok(&["status", "--json"])).unwrap();
    let by = status["committed_by"]["3"].as_str().unwrap();
    assert!(by.starts_with(&format!("airflow:{dag_id}/slice_003_2026-09-03#1")), "{status}");
}

pub(crate) fn root_orders(shop: &S3Shop, days: u32) -> usize {
    let script = format!(
        r#"
import boto3
s3 = boto3.client("s3")
n = 0
for day in range(1, {days} + 1):
    body = s3.get_object(Bucket="acme-lake", Key=f"shop/landing/orders/2026-09-{{day:02}}.csv")["Body"].read().decode()
    n += len([l for l in body.splitlines()[1:] if l.strip()])
print(n)
"#
    );
    servers::python(&script, &servers::s3_env(&shop.server)).trim().parse().unwrap()
}

#[test]
fn without_a_safe_commit_bf_refuses_to_write_to_s3_unless_the_plan_says_it_is_the_only_writer() {
    let shop = S3Shop::new();
    let unsafe_env = |command: &mut assert_cmd::Command| {
        command.env_remove("AWS_CONDITIONAL_PUT");
    };
    let mut plan = shop.bf();
    unsafe_env(&mut plan);
    plan.args(["plan", "plans/march.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no safe commit"));
    let versions = shop.history("orders_silver");
    let mut apply = shop.bf();
    unsafe_env(&mut apply);
    apply
        .args(["apply", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no safe commit is configured for S3"))
        .stderr(predicate::str::contains("conditional_put = \"etag\""));
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");

    // Declared the only writer, it applies.
    for plan in ["march.toml", "march-revenue-by-day.toml"] {
        let path = shop.root().join("plans").join(plan);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{text}\n[storage]\ns3_single_writer = true\n")).unwrap();
    }
    let mut plan = shop.bf();
    unsafe_env(&mut plan);
    plan.args(["plan", "plans/march.toml"]).assert().success();
    let mut apply = shop.bf();
    unsafe_env(&mut apply);
    apply.args(["apply", "--auto-approve"]).assert().success();
    assert_eq!(shop.history("orders_silver").len(), versions.len() + 2);

    // Conditional put disabled: deltalake cannot commit at all, so bf refuses before writing, even
    // for a single writer.
    let versions = shop.history("orders_silver");
    shop.bf()
        .env("AWS_CONDITIONAL_PUT", "disabled")
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("conditional put is disabled"));
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");
}

#[test]
fn a_missing_bucket_is_named_with_the_fix_and_nothing_is_written() {
    let shop = S3Shop::new();
    let path = shop.root().join("plans/march.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        crate::common::without_downstream(&text)
            .replace("s3://acme-lake/shop/warehouse/orders_silver", "s3://no-such-lake/orders"),
    )
    .unwrap();
    let output = shop.run(&["plan", "plans/march.toml"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("s3://no-such-lake/orders"), "{stderr}");
    assert!(stderr.contains("the bucket `no-such-lake` does not exist"), "{stderr}");
}

/// Spawns `bf apply --auto-approve` in the shop reaching the store at `endpoint`, paused before
/// `slice` on the file `pause`.
fn spawn_paused_apply_at(shop: &S3Shop, pause: &Path, slice: usize, endpoint: &str) -> std::process::Child {
    spawn_paused_apply_command(shop, pause, slice, endpoint).spawn().unwrap()
}

/// The command [`spawn_paused_apply_at`] runs, to add to.
fn spawn_paused_apply_command(
    shop: &S3Shop,
    pause: &Path,
    slice: usize,
    endpoint: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("bf"));
    command
        .args(["apply", "--auto-approve"])
        .current_dir(shop.root())
        .envs(servers::s3_env(&shop.server))
        .env("AWS_ENDPOINT_URL", endpoint)
        .env_remove("BF_STATE_DIR")
        .env(bf::fault::PAUSE_FILE_ENV, pause)
        .env(bf::fault::PAUSE_SLICE_ENV, slice.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

#[test]
fn two_appliers_on_s3_commit_each_slice_once_and_the_loser_finds_it_committed() {
    let shop = S3Shop::new();
    let root = shop.root();
    let plan = september_plan(&root, "september-5.toml", 5, |t| t);
    shop.ok(&["plan", &plan]);
    // Both paused between slice 1's check and its commit, then released together: they build on
    // the same version and race for the same commit, which only S3's conditional put decides. The
    // loser finds the winner's commit and skips the slice; without the conditional put, both
    // would think they committed it.
    let pauses = [root.join("paused-a"), root.join("paused-b")];
    let children: Vec<_> = pauses
        .iter()
        .map(|p| {
            let mut child = spawn_paused_apply_command(&shop, p, 1, &shop.server.endpoint());
            child.env(bf::fault::PAUSE_POINT_ENV, "after-check").spawn().unwrap()
        })
        .collect();
    wait_for("both applies to reach slice 1", || pauses.iter().all(|p| p.exists()));
    for pause in &pauses {
        std::fs::remove_file(pause).unwrap();
    }
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let stderrs: Vec<String> =
        outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect();
    for (out, stderr) in outputs.iter().zip(&stderrs) {
        assert!(out.status.success() || stderr.contains("conflicts with another writer"), "{stderr}");
    }
    let skipped = stderrs.iter().filter(|s| s.contains("skip 2026-09-01: already committed")).count();
    assert_eq!(
        skipped, 1,
        "exactly one of two racing applies lost slice 1 and found it committed: {stderrs:?}"
    );
    let writes = shop.history("orders_daily").iter().filter(|(_, op)| op == "WRITE").count();
    assert_eq!(writes, 5, "every slice committed exactly once");
    assert_eq!(shop.rows("orders_daily", None, "2026-09-01", "2026-09-05").len(), root_orders(&shop, 5));
}

#[test]
fn a_table_partitioned_by_the_date_on_s3_takes_four_slices_at_once() {
    let shop = S3Shop::new();
    // orders_by_day: orders_daily's columns, partitioned by the day, made by the Python package.
    servers::python(
        r#"
import os
import pyarrow as pa
from deltalake import write_deltalake
options = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
schema = pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()), ("order_date", pa.date32())])
write_deltalake("s3://acme-lake/shop/warehouse/orders_by_day", schema.empty_table(), partition_by=["order_date"], storage_options=options)
"#,
        &servers::s3_env(&shop.server),
    );
    let plan = september_plan(&shop.root(), "september-by-day.toml", 12, |t| {
        t.replace("warehouse/orders_daily", "warehouse/orders_by_day").replace("parallel = 1", "parallel = 4")
    });
    shop.ok(&["plan", &plan]);
    let recorder = Recorder::start(&shop);
    shop.ok(&["apply", "--auto-approve"]);
    // Publishing a file is two requests: one GET of the rehearsal's file, whose bytes are checked
    // against the plan's sha256, and one conditional PUT of them into the table — no HEAD first,
    // no multipart copy (three requests), no read-back; the rehearsal's files are found by one
    // listing, not a HEAD each.
    let published = recorder.data_requests("orders_by_day/");
    let files: std::collections::BTreeSet<&str> = published.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(files.len(), 12, "one file a day: {published:?}");
    for file in &files {
        let asked: Vec<&str> =
            published.iter().filter(|r| r.key == *file).map(|r| r.method.as_str()).collect();
        assert_eq!(asked, ["PUT"], "{file} placed by one PUT: {published:?}");
    }
    let looked_up = recorder.data_requests("orders_by_day__rehearsal/");
    for file in &files {
        let rehearsed = file.replacen("orders_by_day/", "orders_by_day__rehearsal/", 1);
        let asked: Vec<&str> =
            looked_up.iter().filter(|r| r.key == rehearsed).map(|r| r.method.as_str()).collect();
        assert_eq!(asked, ["GET"], "{rehearsed} read once: {looked_up:?}");
    }
    recorder.assert_logs_listed_from_a_version(&["orders_by_day"]);
    // Version 0 is the Python package's create, a WRITE too.
    let writes = shop.history("orders_by_day").iter().filter(|(v, op)| *v > 0 && op == "WRITE").count();
    assert_eq!(writes, 12);
    // Planned again, each of the table's day files is read once, by the comparison: its metadata
    // and rows in one request (deltalake's scan alone takes three). The rehearsal's are not read
    // back at all: their checksums and the comparison's reads are taken from the bytes written.
    let recorder = Recorder::start(&shop);
    shop.ok(&["plan", &plan]);
    recorder.assert_logs_listed_from_a_version(&["orders_by_day", "orders_by_day__rehearsal"]);
    let reads: Vec<Recorded> =
        recorder.data_requests("orders_by_day/").into_iter().filter(|r| r.method == "GET").collect();
    let files: std::collections::BTreeSet<&str> = reads.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(files.len(), 12, "{reads:?}");
    for file in files {
        assert_eq!(reads.iter().filter(|r| r.key == file).count(), 1, "{file}: {reads:?}");
    }
    let rehearsed = recorder.data_requests("orders_by_day__rehearsal/");
    assert_eq!(rehearsed.iter().filter(|r| r.method == "PUT").count(), 12, "one file a day: {rehearsed:?}");
    assert!(rehearsed.iter().all(|r| r.method == "PUT"), "written, never read: {rehearsed:?}");
    assert_eq!(shop.rows("orders_by_day", None, "2026-09-01", "2026-09-12").len(), root_orders(&shop, 12));
    let listed = servers::python(
        r#"
import boto3
s3 = boto3.client("s3")
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="acme-lake", Prefix="shop/warehouse/orders_by_day/")["Contents"]]
print(sorted({k.split("/")[3] for k in keys if k.endswith(".parquet")}))
"#,
        &servers::s3_env(&shop.server),
    );
    assert!(listed.contains("order_date=2026-09-12"), "each day in its own partition: {listed}");
}

/// moto's request recorder, started when made: what bf asked of the server since.
struct Recorder<'s> {
    shop: &'s S3Shop,
}

/// One request to a data file of the shop's warehouse, as moto recorded it.
#[derive(Debug)]
struct Recorded {
    method: String,
    /// The file's key below `shop/warehouse/`.
    key: String,
}

impl<'s> Recorder<'s> {
    fn start(shop: &'s S3Shop) -> Recorder<'s> {
        servers::python(
            r#"
import os, urllib.request
for step in ("reset-recording", "start-recording"):
    urllib.request.urlopen(urllib.request.Request(os.environ["AWS_ENDPOINT_URL"] + "/moto-api/recorder/" + step, method="POST"))
"#,
            &servers::s3_env(&shop.server),
        );
        Recorder { shop }
    }

    /// One line per recorded request, in order: what `each` prints of it, a Python statement
    /// given the request as `r` (moto's JSON: `method`, `url`…) and `urllib.parse`.
    fn recorded(&self, each: &str) -> String {
        let script = format!(
            r#"
import json, os, urllib.parse, urllib.request
text = urllib.request.urlopen(os.environ["AWS_ENDPOINT_URL"] + "/moto-api/recorder/download-recording").read().decode()
for line in text.splitlines():
    r = json.loads(line)
    {each}
"#
        );
        servers::python(&script, &servers::s3_env(&self.shop.server))
    }

    /// The requests to Parquet files under `shop/warehouse/{table}` (ending in `/`), in order.
    fn data_requests(&self, table: &str) -> Vec<Recorded> {
        let text = self.recorded(
            r#"path = urllib.parse.unquote(urllib.parse.urlsplit(r["url"]).path)
    if path.startswith("/acme-lake/shop/warehouse/") and path.endswith(".parquet"):
        print(r["method"], path[len("/acme-lake/shop/warehouse/"):])"#,
        );
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, key)| key.starts_with(table))
            .map(|(method, key)| Recorded { method: method.to_owned(), key: key.to_owned() })
            .collect()
    }

    /// Every listing of each table's log names the version it lists after (S3's `start-after`):
    /// the log is read from where bf's copy of it ends, so a commit costs as much at the
    /// three-hundredth slice as at the first. Listed from its start, each commit would list every
    /// commit before it.
    fn assert_logs_listed_from_a_version(&self, tables: &[&str]) {
        let text = self.recorded(
            r#"query = urllib.parse.parse_qs(urllib.parse.urlsplit(r["url"]).query)
    if r["method"] == "GET" and "list-type" in query:
        print(query.get("prefix", [""])[0], query.get("start-after", ["-"])[0])"#,
        );
        for table in tables {
            let log = format!("shop/warehouse/{table}/_delta_log/");
            let listings: Vec<&str> = text.lines().filter(|l| l.starts_with(&log)).collect();
            assert!(!listings.is_empty(), "{table}'s log was never listed: {text}");
            let from_the_start: Vec<&&str> = listings.iter().filter(|l| l.ends_with(" -")).collect();
            assert!(from_the_start.is_empty(), "{table}'s log listed from its start: {from_the_start:?}");
        }
    }
}

#[test]
fn the_rehearsal_copies_the_window_s_files_inside_the_store_and_bf_clean_removes_only_its_own() {
    let shop = S3Shop::new();
    let env = servers::s3_env(&shop.server);
    servers::python(
        "import urllib.request, os; urllib.request.urlopen(urllib.request.Request(os.environ['AWS_ENDPOINT_URL'] + '/moto-api/recorder/start-recording', method='POST'))",
        &env,
    );
    shop.ok(&["plan", "plans/march.toml"]);
    // moto's recorder holds every request with its headers: the rehearsal's localized files were
    // created by CopyObject (a PUT with x-amz-copy-source and no body), never uploaded.
    let recorded = servers::python(
        r#"
import json, os, urllib.request
text = urllib.request.urlopen(os.environ["AWS_ENDPOINT_URL"] + "/moto-api/recorder/download-recording").read().decode()
for line in text.splitlines():
    r = json.loads(line)
    if r["method"] == "PUT" and "/orders_silver__rehearsal/bf-localized/" in r["url"]:
        print("copy" if "X-Amz-Copy-Source" in r["headers"] and not r["body"] else "upload", r["url"])
"#,
        &env,
    );
    let kinds: std::collections::BTreeSet<&str> = recorded.lines().collect();
    assert!(!kinds.is_empty(), "the unpartitioned table's March files were localized");
    assert!(kinds.iter().all(|k| k.starts_with("copy ")), "{kinds:?}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["rehearsal"]["clone"]["files_copied_by_store"], kinds.len());

    let objects = |prefix: &str| -> Vec<String> {
        servers::python(
            &format!(
                r#"
import boto3
s3 = boto3.client("s3")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-lake", Prefix="{prefix}"):
    for o in page.get("Contents", []):
        print(o["Key"], o["ETag"])
"#
            ),
            &env,
        )
        .lines()
        .map(str::to_owned)
        .collect()
    };
    let silver = objects("shop/warehouse/orders_silver/");
    assert!(!objects("shop/warehouse/orders_silver__rehearsal/").is_empty());
    // The saved plan still needs its rehearsal: a plain `bf clean` keeps it; naming it removes it.
    shop.ok(&["clean", "s3://acme-lake/shop/warehouse/orders_silver__rehearsal"]);
    assert!(objects("shop/warehouse/orders_silver__rehearsal/").is_empty());
    assert_eq!(objects("shop/warehouse/orders_silver/"), silver, "not one file of the table was touched");
    // A table that is not a rehearsal is refused, and nothing is deleted.
    let refused = shop.run(&["clean", "s3://acme-lake/shop/warehouse/orders_silver"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(objects("shop/warehouse/orders_silver/"), silver);
}

#[test]
fn an_endpoint_outage_mid_apply_stops_it_and_the_resume_commits_each_slice_once() {
    let shop = S3Shop::new();
    let root = shop.root();
    let relay = servers::Relay::to(&shop.server);
    // Retried for two seconds, not deltalake's three minutes, so the outage outlasts them.
    let plan = september_plan(&root, "september-6.toml", 6, |t| {
        format!("{t}\n[storage]\nmax_retries = 2\nretry_timeout = \"2s\"\n")
    });
    shop.bf().env("AWS_ENDPOINT_URL", relay.endpoint()).args(["plan", &plan]).assert().success();
    let pause = root.join("paused");
    let child = spawn_paused_apply_at(&shop, &pause, 4, &relay.endpoint());
    wait_for("the apply to reach slice 4", || pause.exists());
    relay.down();
    std::fs::remove_file(&pause).unwrap();
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(1), "{}", String::from_utf8_lossy(&stopped.stderr));
    let writes = |shop: &S3Shop| shop.history("orders_daily").iter().filter(|(_, op)| op == "WRITE").count();
    assert_eq!(writes(&shop), 3, "the slices before the outage stay committed, the fourth did not land");

    relay.up();
    let resumed = shop
        .bf()
        .env("AWS_ENDPOINT_URL", relay.endpoint())
        .args(["apply", "--auto-approve"])
        .output()
        .unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("skip ")).count(), 3, "{stderr}");
    assert_eq!(writes(&shop), 6, "each slice committed exactly once");
    assert_eq!(shop.rows("orders_daily", None, "2026-09-01", "2026-09-06").len(), root_orders(&shop, 6));
}

#[test]
fn the_march_reload_is_planned_applied_and_rolled_back_on_azure_blob_storage() {
    let server = servers::azurite();
    servers::create_container(&server, "lake");
    let env = servers::azurite_env(&server);
    let dir = tempfile::tempdir().unwrap();
    let bf = |dir: &Path, args: &[&str]| {
        let output = bf_in(dir).envs(env.iter().map(|(k, v)| (*k, v.as_str()))).args(args).output().unwrap();
        for stream in [&output.stdout, &output.stderr] {
            assert!(
                !String::from_utf8_lossy(stream).contains(servers::AZURITE_KEY),
                "a credential was printed"
            );
        }
        assert!(output.status.success(), "bf {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    bf(dir.path(), &["demo", "--shop-only", "--store", "az://lake/shop", "shop"]);
    let root = dir.path().join("shop");
    // Read by the Python `deltalake` package, on the emulator's account.
    let march = |version: Option<u64>| -> Vec<String> {
        let script = format!(
            r#"
import datetime, json
from deltalake import DeltaTable
import pyarrow.dataset as ds
t = DeltaTable("az://lake/shop/warehouse/orders_silver", version={}, storage_options={{"use_emulator": "true"}})
day = ds.field("order_date")
rows = t.to_pyarrow_dataset().to_table(
    filter=(day >= datetime.date(2026, 3, 1)) & (day <= datetime.date(2026, 3, 31))).to_pylist()
for row in sorted(json.dumps(r, default=str, sort_keys=True) for r in rows):
    print(row)
"#,
            version.map_or("None".to_owned(), |v| v.to_string())
        );
        servers::python(&script, &env).lines().map(str::to_owned).collect()
    };
    let before = march(None);
    assert_eq!(before.len(), 412);
    assert!(bf(&root, &["plan", "plans/march.toml"]).contains("412 → 409"));
    assert_eq!(march(None), before, "bf plan wrote to the real table");
    bf(&root, &["apply", "--auto-approve"]);
    let after = march(None);
    assert_eq!(after.len(), 409);
    assert!(after.iter().any(|r| r.contains("\"currency\": \"EUR\"")));
    bf(&root, &["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(march(None), before, "the rollback restored March row for row");
}

/// A plan of the March reload whose target is `table`, written beside a CSV input, in a temp dir.
fn plan_on(dir: &Path, table: &str, storage: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("orders.csv"), "order_id,amount,order_date\n1,2.5,2026-03-01\n").unwrap();
    crate::common::write_plan(
        dir,
        "march.toml",
        &format!(
            "{}\n{storage}\n",
            crate::common::VALID_PLAN.replace("\"../warehouse/orders_silver\"", &format!("\"{table}\""))
        ),
    )
}

#[test]
fn denied_requests_and_unreachable_endpoints_are_one_line_naming_the_fix_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |plan: &Path, env: &[(&str, String)], expected: &str| {
        let output = bf_in(dir.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(["plan"])
            .arg(plan)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(expected), "expected {expected:?} in:\n{stderr}");
        assert!(
            !stderr.contains(SECRET) && !stderr.contains(servers::AZURITE_KEY),
            "a credential was printed"
        );
        assert!(!dir.path().join(".bf/plan.json").exists(), "no plan was saved");
    };
    // A server that knows no credentials: 403.
    let denying = servers::s3_denying();
    let plan = plan_on(dir.path(), "s3://acme-lake/silver/orders", "");
    refused(&plan, &servers::s3_env(&denying), "access denied: check the credentials in the environment");

    // Nothing listens on the endpoint: retried for a second, then one line. GCS and Azure too,
    // with credentials that need no token server (GCS: a key with `disable_oauth`).
    let (_held, closed) = crate::common::refusing_port();
    let nowhere = format!("http://127.0.0.1:{closed}");
    let quick = "[storage]\nmax_retries = 1\nretry_timeout = \"1s\"";
    let mut s3 = servers::s3_env(&denying);
    s3.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    s3.push(("AWS_ENDPOINT_URL", nowhere.clone()));
    let plan = plan_on(dir.path(), "s3://acme-lake/silver/orders", quick);
    refused(&plan, &s3, "the store does not answer");
    let gcs = vec![
        ("GOOGLE_BASE_URL", nowhere.clone()),
        ("GOOGLE_ALLOW_HTTP", "true".to_owned()),
        (
            "GOOGLE_SERVICE_ACCOUNT_KEY",
            format!(
                r#"{{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": "{SECRET}"}}"#
            ),
        ),
    ];
    let plan = plan_on(dir.path(), "gs://acme-lake/silver/orders", quick);
    refused(&plan, &gcs, "the store does not answer");
    let azure = vec![
        ("AZURE_STORAGE_USE_EMULATOR", "true".to_owned()),
        ("AZURITE_BLOB_STORAGE_URL", nowhere),
        ("AZURE_STORAGE_ACCOUNT_KEY", servers::AZURITE_KEY.to_owned()),
    ];
    let plan = plan_on(dir.path(), "az://lake/silver/orders", quick);
    refused(&plan, &azure, "the store does not answer");
}

#[test]
fn what_the_plan_read_changed_in_the_bucket_stops_the_apply_an_input_by_its_etag_a_rehearsed_file_by_its_bytes()
 {
    let shop = S3Shop::new();
    shop.ok(&["plan", "plans/march.toml"]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap()).unwrap();
    let orders = saved["inputs"].as_array().unwrap().iter().find(|i| i["input"] == "orders").unwrap();
    assert_eq!(orders["path"], "s3://acme-lake/shop/landing/orders_march.csv");
    assert!(orders["etag"].is_string() && orders["sha256"].is_null(), "fingerprinted by its ETag: {orders}");
    // An object recorded beside the one the text names (edited in the saved plan) is refused.
    let before = shop.history("orders_silver");
    let at = saved["inputs"].as_array().unwrap().iter().position(|i| i["input"] == "orders").unwrap();
    let mut edited = saved.clone();
    edited["inputs"][at]["path"] = "s3://acme-lake/shop/landing/fx_rates.csv".into();
    std::fs::write(shop.root().join(".bf/plan.json"), edited.to_string()).unwrap();
    let refused = shop.run(&["apply", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "is recorded at s3://acme-lake/shop/landing/fx_rates.csv, which its text does not name"
        ),
        "{stderr}"
    );
    std::fs::write(shop.root().join(".bf/plan.json"), saved.to_string()).unwrap();
    let versions = shop.history("orders_silver");
    assert_eq!(versions.len(), before.len(), "the refused apply wrote nothing: {versions:?}");
    // The same size, one currency changed: only the content differs.
    servers::python(
        r#"
import boto3
s3 = boto3.client("s3")
key = "shop/landing/orders_march.csv"
body = s3.get_object(Bucket="acme-lake", Key=key)["Body"].read().decode()
s3.put_object(Bucket="acme-lake", Key=key, Body=body.replace("EUR", "GBP", 1).encode())
"#,
        &servers::s3_env(&shop.server),
    );
    let refused = shop.run(&["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr
            .contains("input `orders` changed since `bf plan`: s3://acme-lake/shop/landing/orders_march.csv"),
        "{stderr}"
    );
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");

    // Planned again, a file the rehearsal wrote is changed instead: publishing checks the bytes it
    // reads from the rehearsal before it puts them, so nothing lands.
    shop.ok(&["plan", "plans/march.toml"]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap()).unwrap();
    let rehearsal = saved["rehearsal"]["uri"]
        .as_str()
        .unwrap()
        .strip_prefix("s3://acme-lake/")
        .unwrap()
        .trim_end_matches('/');
    let file = saved["slices"][0]["publication"]["adds"][0]["path"].as_str().unwrap();
    let in_the_table = || {
        let script = format!(
            r#"
import boto3
s3 = boto3.client("s3")
try:
    s3.head_object(Bucket="acme-lake", Key="shop/warehouse/orders_silver/{file}")
    print("placed")
except s3.exceptions.ClientError:
    print("absent")
"#
        );
        servers::python(&script, &servers::s3_env(&shop.server)).trim() == "placed"
    };
    assert!(!in_the_table(), "{file} is the rehearsal's until the apply");
    let script = format!(
        r#"
import boto3
s3 = boto3.client("s3")
key = "{rehearsal}/{file}"
body = bytearray(s3.get_object(Bucket="acme-lake", Key=key)["Body"].read())
body[-1] ^= 0xFF
s3.put_object(Bucket="acme-lake", Key=key, Body=bytes(body))
"#
    );
    servers::python(&script, &servers::s3_env(&shop.server));
    let refused = shop.run(&["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let named = format!("adds {file}, and the rehearsal's file is not the rehearsed file");
    assert!(stderr.contains(&named), "{stderr}");
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");
    assert!(!in_the_table(), "the changed file was not placed in the table");
}

#[test]
fn a_rollback_on_s3_refuses_when_a_file_it_needs_is_gone_and_writes_nothing() {
    let shop = S3Shop::new();
    shop.ok(&["plan", "plans/march.toml"]);
    shop.ok(&["apply", "--auto-approve"]);
    let status = shop.ok(&["status"]);
    assert!(status.contains("done: every slice committed and the comment set"), "{status}");
    assert!(
        status.contains("rollback: possible until at least")
            && status.contains("(delta.deletedFileRetentionDuration is 7 days;"),
        "the horizon, from the bucket: {status}"
    );
    // What VACUUM does to a file the pre-version needs and the backfill removed: delete it.
    let deleted = servers::python(
        r#"
import boto3, json
s3 = boto3.client("s3")
log = s3.get_object(Bucket="acme-lake", Key="shop/warehouse/orders_silver/_delta_log/00000000000000000006.json")["Body"].read().decode()
removed = [json.loads(l)["remove"]["path"] for l in log.splitlines() if '"remove"' in l]
s3.delete_object(Bucket="acme-lake", Key="shop/warehouse/orders_silver/" + removed[0])
print(removed[0])
"#,
        &servers::s3_env(&shop.server),
    );
    let versions = shop.history("orders_silver");
    let recorder = Recorder::start(&shop);
    let refused = shop.run(&["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("VACUUM removed 1 of its data files"), "{stderr}");
    assert!(stderr.contains(deleted.trim()), "names the file: {stderr}");
    // The pre-version's files are found missing or there by a listing of the table's folder, not
    // by a HEAD each: a request per file on a table of thousands.
    let heads: Vec<Recorded> =
        recorder.data_requests("orders_silver/").into_iter().filter(|r| r.method == "HEAD").collect();
    assert!(heads.is_empty(), "{heads:?}");
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");
    let status = shop.ok(&["status"]);
    assert!(status.contains("rollback: no longer possible: VACUUM removed 1 of version"), "{status}");
}

#[test]
fn a_rehearsal_inside_the_target_or_at_a_bucket_root_is_refused_before_anything_is_written() {
    let shop = S3Shop::new();
    let path = shop.root().join("plans/march.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let versions = shop.history("orders_silver");
    for (rehearsal, expected) in [
        (
            "s3a://acme-lake/shop/warehouse/orders_silver/_bf",
            "is the target table, or inside it, or holds it",
        ),
        ("s3://acme-lake/shop/warehouse", "is the target table, or inside it, or holds it"),
        ("s3://acme-lake", "is the root of a bucket"),
    ] {
        std::fs::write(&path, format!("{text}\n[rehearsal]\ntable = \"{rehearsal}\"\n")).unwrap();
        let refused = shop.run(&["plan", "plans/march.toml"]);
        assert_eq!(refused.status.code(), Some(1), "{rehearsal}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(expected), "{rehearsal}: {stderr}");
    }
    assert_eq!(shop.history("orders_silver"), versions, "nothing was written");
    let objects = servers::python(
        r#"
import boto3
s3 = boto3.client("s3")
print(len([o for p in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-lake", Prefix="shop/warehouse/orders_silver/") for o in p.get("Contents", [])]))
"#,
        &servers::s3_env(&shop.server),
    );
    assert_eq!(
        objects.trim(),
        (versions.len() + 5).to_string(),
        "the log's files and the five data files, nothing added"
    );
}

#[test]
fn a_clone_that_stopped_before_its_first_commit_is_replaced_by_the_next_plan() {
    let shop = S3Shop::new();
    // What a crash between copying the window's files and committing the clone leaves.
    servers::python(
        r#"
import boto3
boto3.client("s3").put_object(Bucket="acme-lake", Key="shop/warehouse/orders_silver__rehearsal/bf-localized/0.parquet", Body=b"partial")
"#,
        &servers::s3_env(&shop.server),
    );
    assert!(shop.ok(&["plan", "plans/march.toml"]).contains("412 → 409"));
}
