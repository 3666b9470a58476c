//! Every store bf writes to: the March reload on Azure Blob Storage, and a denied request or an
//! unreachable endpoint said in one line naming the fix, on S3, GCS and Azure.

use super::*;

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
    // An endpoint holding a password: named in the refusal, never with its password.
    s3.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    s3.push(("AWS_ENDPOINT_URL", nowhere.replace("http://", &format!("http://minio:{SECRET}@"))));
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
