//! The seed scenarios on S3: the March reload planned, applied and rolled back, the daily
//! September backfill resumed after a crash and run as an Airflow DAG, and what bf refuses to do to
//! a bucket (no safe commit, no bucket, a restore whose files are gone).

use super::*;

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
    let mut child = crate::common::bf_process()
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
