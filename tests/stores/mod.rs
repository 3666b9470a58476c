//! bf on tables in object stores: the seed scenarios on an S3 API server (moto), started on
//! 127.0.0.1 by each test. What landed is read back with the Python `deltalake` package, not bf.

use std::path::Path;
use std::process::Output;

use predicates::prelude::*;

use crate::common::servers::{self, Server};
use crate::common::{bf_in, september_plan, wait_for};

mod every_store;
mod rehearsal;
mod seeds;
mod writers;

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

/// How many orders the landing files of the first `days` days of September hold, read from the
/// bucket by Python.
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
    let mut command = crate::common::bf_process();
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
