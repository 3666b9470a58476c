//! Other writers and a failing store on S3: two appliers, slices at once, an outage mid-apply,
//! and what the plan read changing in the bucket before the apply.

use super::*;

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
