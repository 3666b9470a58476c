//! The rehearsal in a bucket: copied inside the store, removed by `bf clean` alone, never inside the
//! target or at a bucket's root, and replaced when it stopped before its first commit.

use super::*;

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
