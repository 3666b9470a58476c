//! Tables named as their catalog names them. AWS Glue: moto's Glue, beside its S3, on 127.0.0.1;
//! the shop's tables registered there with boto3, as a Glue crawler or Spark would. What bf wrote is
//! read back with the Python `deltalake` package and the Glue description with boto3, not with bf.

use crate::common::september_plan;
use crate::common::servers;
use crate::stores::{S3Shop, root_orders};

const ORDERS: &str = "s3://acme-lake/shop/warehouse/orders_silver";

/// Runs `script` with a boto3 Glue client (`glue`) against the shop's server; returns its stdout.
fn glue(shop: &S3Shop, script: &str) -> String {
    let script =
        format!("import boto3, json\nglue = boto3.client('glue', region_name='us-east-1')\n{script}");
    servers::python(&script, &servers::s3_env(&shop.server))
}

/// Registers `database.table` at `location` as `kind` (`EXTERNAL_TABLE`, `VIRTUAL_VIEW`) with
/// `parameters` (a Python dict), as Spark or a crawler would.
fn register(shop: &S3Shop, database: &str, table: &str, location: &str, kind: &str, parameters: &str) {
    glue(
        shop,
        &format!(
            r#"
try:
    glue.create_database(DatabaseInput={{"Name": "{database}"}})
except glue.exceptions.AlreadyExistsException:
    pass
glue.create_table(DatabaseName="{database}", TableInput={{
    "Name": "{table}", "TableType": "{kind}", "Parameters": {parameters},
    "StorageDescriptor": {{"Location": "{location}"}},
}})
"#
        ),
    );
}

const DELTA: &str = r#"{"table_type": "DELTA", "EXTERNAL": "TRUE"}"#;

/// The table's Description in Glue ("" when it has none).
fn description(shop: &S3Shop, database: &str, table: &str) -> String {
    glue(
        shop,
        &format!(
            "print(glue.get_table(DatabaseName='{database}', Name='{table}')['Table'].get('Description', ''), end='')"
        ),
    )
}

/// The Delta table's description, read from its log by the Python `deltalake` package.
fn delta_description(shop: &S3Shop, location: &str) -> String {
    servers::python(
        &format!(
            r#"
import os
from deltalake import DeltaTable
options = {{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
print(DeltaTable("{location}", storage_options=options).metadata().description or "", end="")
"#
        ),
        &servers::s3_env(&shop.server),
    )
}

/// The shop's March reload naming orders_silver by its Glue name, without its downstream plan.
fn march_alone(shop: &S3Shop) -> &'static str {
    let march = std::fs::read_to_string(shop.root().join("plans/march.toml")).unwrap();
    let by_name = march
        .replace(&format!("table = \"{ORDERS}\""), "table = \"glue://sales.orders_silver\"")
        .replace("[[downstream]]\nplan = \"march-revenue-by-day.toml\"\n", "");
    assert!(by_name.contains("glue://sales.orders_silver") && !by_name.contains("[[downstream]]"));
    std::fs::write(shop.root().join("plans/march-alone.toml"), by_name).unwrap();
    "plans/march-alone.toml"
}

/// The shop's March reload with every table named by its Glue name: orders_silver, the change log,
/// and revenue_by_day downstream, which reads orders_silver by that name too. Each is registered.
fn march_by_name(shop: &S3Shop) -> &'static str {
    let warehouse = "s3://acme-lake/shop/warehouse";
    for table in ["orders_silver", "revenue_by_day", "backfill_log"] {
        // The change log does not exist yet: registered, bf creates it on first use.
        register(shop, "sales", table, &format!("{warehouse}/{table}"), "EXTERNAL_TABLE", DELTA);
    }
    let rename = |file: &str, renames: &[(&str, &str)]| {
        let path = shop.root().join("plans").join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (table, field) in renames {
            let by_location = format!("{field} = \"{warehouse}/{table}\"");
            assert!(text.contains(&by_location), "{file} names {table} by location: {text}");
            text = text.replace(&by_location, &format!("{field} = \"glue://sales.{table}\""));
        }
        std::fs::write(&path, text).unwrap();
    };
    rename("march.toml", &[("orders_silver", "table"), ("backfill_log", "log_table")]);
    rename(
        "march-revenue-by-day.toml",
        &[("revenue_by_day", "table"), ("orders_silver", "inputs.silver = { path")],
    );
    "plans/march.toml"
}

#[test]
fn the_march_reload_runs_by_its_glue_name_and_glue_shows_the_reason() {
    let shop = S3Shop::new();
    let march = |version| shop.rows("orders_silver", version, "2026-03-01", "2026-03-31");
    let revenue = |version| shop.rows("revenue_by_day", version, "2026-03-01", "2026-03-31");
    let before = march(None);
    assert_eq!(before.len(), 412);
    let (versions, revenue_versions) = (shop.history("orders_silver"), shop.history("revenue_by_day"));
    let revenue_before = revenue(None);
    let plan = march_by_name(&shop);

    let planned = shop.ok(&["plan", plan]);
    assert!(planned.contains("412 → 409"), "{planned}");
    assert!(
        planned.contains("glue://sales.orders_silver at s3://"),
        "the review names the table as the plan does"
    );
    assert_eq!(shop.history("orders_silver"), versions, "bf plan wrote to the real table");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap()).unwrap();
    let pinned = &saved["target"]["catalog"];
    assert_eq!(pinned["name"], "glue://sales.orders_silver", "{pinned}");
    assert_eq!(pinned["location"], format!("{ORDERS}/"), "{pinned}");
    assert!(pinned["id"].as_str().is_some_and(|id| !id.is_empty()), "pinned by its creation time: {pinned}");
    // Downstream, revenue_by_day read orders_silver's rehearsal: the input named by its Glue name
    // was redirected like one named by its location.
    let read = &saved["downstream"][0]["delta_inputs"][0];
    assert_eq!(read["catalog"]["name"], "glue://sales.orders_silver", "{read}");
    assert_eq!(read["stands_for"], format!("{ORDERS}/"), "{read}");
    assert!(read["uri"].as_str().unwrap().contains("orders_silver__rehearsal"), "{read}");
    assert_eq!(description(&shop, "sales", "orders_silver"), "", "nothing set in Glue by a plan");

    shop.ok(&["apply", "--auto-approve"]);
    let after = march(None);
    assert_eq!(after.len(), 409);
    assert!(after.iter().any(|r| r.contains("\"currency\": \"EUR\"")), "the corrected currency landed");
    assert_ne!(revenue(None), revenue_before, "revenue_by_day's March was rebuilt");
    assert_eq!(revenue(None).len(), 31);
    let reason = delta_description(&shop, ORDERS);
    assert!(reason.contains("Reloading orders_silver for March 2026"), "{reason}");
    assert_eq!(description(&shop, "sales", "orders_silver"), reason, "Glue shows the table's comment");
    let downstream = delta_description(&shop, "s3://acme-lake/shop/warehouse/revenue_by_day");
    assert!(downstream.contains("Rebuilding revenue_by_day"), "{downstream}");
    assert_eq!(description(&shop, "sales", "revenue_by_day"), downstream);
    // The change log, named by its Glue name, was created where Glue says it is.
    let log_rows = servers::python(
        r#"
import os
from deltalake import DeltaTable
options = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
print(DeltaTable("s3://acme-lake/shop/warehouse/backfill_log", storage_options=options).to_pyarrow_table().num_rows)
"#,
        &servers::s3_env(&shop.server),
    );
    assert_eq!(log_rows.trim(), "1", "the March reload's row (revenue_by_day's plan keeps no log)");

    let history = shop.ok(&["history", "glue://sales.orders_silver", "--limit", "3"]);
    assert!(
        history.starts_with(&format!("glue://sales.orders_silver is the table at {ORDERS}/\n")),
        "{history}"
    );
    assert!(history.contains("comment"), "{history}");

    shop.ok(&["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(march(None), before, "the rollback restored March row for row");
    assert_eq!(revenue(None), revenue(Some(revenue_versions.last().unwrap().0)), "and revenue_by_day's");
    let rolled_back = delta_description(&shop, ORDERS);
    assert!(rolled_back.contains("rolled back"), "{rolled_back}");
    assert_eq!(description(&shop, "sales", "orders_silver"), rolled_back, "and Glue says so");
    let downstream = delta_description(&shop, "s3://acme-lake/shop/warehouse/revenue_by_day");
    assert!(downstream.contains("rolled back"), "{downstream}");
    assert_eq!(description(&shop, "sales", "revenue_by_day"), downstream, "downstream too");
}

#[test]
fn the_daily_september_backfill_runs_by_its_glue_name() {
    let shop = S3Shop::new();
    let daily = "s3://acme-lake/shop/warehouse/orders_daily";
    register(&shop, "sales", "orders_daily", daily, "EXTERNAL_TABLE", DELTA);
    let root = shop.root();
    let plan = september_plan(&root, "september-by-name.toml", 6, |t| {
        let by_name = t.replace(&format!("\"{daily}\""), "\"glue://sales.orders_daily\"");
        assert_ne!(by_name, t, "the plan named the table by its location");
        by_name
    });
    shop.ok(&["plan", &plan]);
    shop.ok(&["apply", "--auto-approve"]);
    let writes = shop.history("orders_daily").iter().filter(|(v, op)| *v > 0 && op == "WRITE").count();
    assert_eq!(writes, 6, "one commit per day");
    assert_eq!(shop.rows("orders_daily", None, "2026-09-01", "2026-09-06").len(), root_orders(&shop, 6));
    let reason = delta_description(&shop, daily);
    assert!(!reason.is_empty());
    assert_eq!(description(&shop, "sales", "orders_daily"), reason);
}

#[test]
fn a_glue_name_that_moved_between_plan_and_apply_is_refused_naming_both_tables() {
    let shop = S3Shop::new();
    register(&shop, "sales", "orders_silver", ORDERS, "EXTERNAL_TABLE", DELTA);
    let plan = march_alone(&shop);
    shop.ok(&["plan", plan]);
    let versions = shop.history("orders_silver");
    // Dropped and registered again, at another location: the name now means another table.
    let elsewhere = "s3://acme-lake/shop/warehouse/orders_daily";
    glue(&shop, "glue.delete_table(DatabaseName='sales', Name='orders_silver')");
    register(&shop, "sales", "orders_silver", elsewhere, "EXTERNAL_TABLE", DELTA);
    let daily = shop.history("orders_daily");

    let refused = shop.run(&["apply", "--auto-approve"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("glue://sales.orders_silver: the name moved since the plan"), "{stderr}");
    assert!(stderr.contains(&format!("{ORDERS}/")) && stderr.contains(&format!("{elsewhere}/")), "{stderr}");
    assert!(stderr.contains("plan again"), "{stderr}");
    assert_eq!(shop.history("orders_silver"), versions, "nothing written to the table planned");
    assert_eq!(shop.history("orders_daily"), daily, "nor to the one the name means now");
    assert_eq!(description(&shop, "sales", "orders_silver"), "");
}

#[test]
fn glue_names_bf_cannot_backfill_are_refused_in_one_line_naming_the_fix() {
    let shop = S3Shop::new();
    register(&shop, "sales", "orders_silver", ORDERS, "EXTERNAL_TABLE", DELTA);
    register(&shop, "sales", "orders_view", ORDERS, "VIRTUAL_VIEW", "{}");
    register(&shop, "sales", "orders_parquet", ORDERS, "EXTERNAL_TABLE", r#"{"classification": "parquet"}"#);
    let march = std::fs::read_to_string(shop.root().join("plans/march.toml")).unwrap();
    let versions = shop.history("orders_silver");
    // (the name, the environment over the server's, what the refusal says)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    // The operator allows Glue's `sales` database and the plan's other locations, but not where
    // the name leads.
    let allowed = "glue://sales,s3://acme-lake/shop/landing/,s3://acme-lake/shop/warehouse/backfill_log";
    let cases: [Case; 6] = [
        (
            "glue://sales.orders_silver",
            &[("BF_ALLOWED_LOCATIONS", allowed)],
            "is the table at s3://acme-lake/shop/warehouse/orders_silver/, which is not under a location the operator allows",
        ),
        ("glue://sales.orders_gold", &[], "EntityNotFoundException"),
        ("glue://nowhere.orders_silver", &[], "Check the database and table names"),
        ("glue://sales.orders_view", &[], "is a view, not a table"),
        ("glue://sales.orders_parquet", &[], "is a PARQUET table, not a Delta table"),
        // Nothing listens there: the catalog is named as unreachable, with its endpoint.
        (
            "glue://sales.orders_silver",
            &[("AWS_ENDPOINT_URL", "http://127.0.0.1:9")],
            "AWS Glue is not reachable at http://127.0.0.1:9",
        ),
    ];
    for (name, env, expected) in cases {
        let text = march
            .replace(&format!("table = \"{ORDERS}\""), &format!("table = \"{name}\""))
            .replace("[[downstream]]\nplan = \"march-revenue-by-day.toml\"\n", "");
        std::fs::write(shop.root().join("plans/refused.toml"), text).unwrap();
        let output =
            shop.bf().args(["plan", "plans/refused.toml"]).envs(env.iter().copied()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: {stderr}");
        assert!(stderr.contains(name) && stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains("bf-test-secret-never-printed"));
    }
    assert_eq!(shop.history("orders_silver"), versions);
    let rehearsals = servers::python(
        r#"
import boto3
s3 = boto3.client("s3")
print(sum(1 for p in s3.get_paginator("list_objects_v2").paginate(Bucket="acme-lake", Prefix="shop/warehouse/")
          for o in p.get("Contents", []) if "__rehearsal" in o["Key"]))
"#,
        &servers::s3_env(&shop.server),
    );
    assert_eq!(rehearsals.trim(), "0", "no rehearsal was made");
}

#[test]
fn a_catalog_name_is_checked_at_its_line_before_any_catalog_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let plan = |name: &str, text: String| crate::common::write_plan(dir.path(), name, &text);
    let named = |table: &str| {
        crate::common::VALID_PLAN.replace("\"../warehouse/orders_silver\"", &format!("\"{table}\""))
    };
    for table in ["uc://main.sales.orders_silver", "glue://sales.orders_silver"] {
        let path = plan("named.toml", named(table));
        crate::common::bf_in(dir.path()).args(["validate"]).arg(&path).assert().success();
    }
    let cases = [
        (named("uc://main.orders_silver"), "target.table", "write `uc://catalog.schema.table`"),
        (named("glue://sales.orders.silver"), "target.table", "write `glue://database.table`"),
        (
            format!("{}\n[rehearsal]\ntable = \"glue://sales.scratch\"\n", crate::common::VALID_PLAN),
            "rehearsal.table",
            "glue://sales.scratch is a catalog name, and catalogs name tables",
        ),
    ];
    for (text, key, message) in cases {
        let path = plan("refused.toml", text);
        // No catalog is reachable from here: the refusal comes from the text alone.
        let output = crate::common::bf_in(dir.path())
            .args(["validate"])
            .arg(&path)
            .env("DATABRICKS_HOST", "http://127.0.0.1:9")
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(message) && stderr.contains("refused.toml:"), "{key}: {stderr}");
    }
}

/// The example shop on local disk with its tables registered in a Unity Catalog server that may
/// reach the shop's folder; `bf` asks it with a token it must never print.
struct UnityShop {
    server: servers::Server,
    dir: tempfile::TempDir,
}

const UC_TOKEN: &str = "bf-test-uc-token-never-printed";

impl UnityShop {
    fn new() -> UnityShop {
        let dir = tempfile::tempdir().unwrap();
        crate::common::bf_in(dir.path()).args(["demo", "--shop-only", "shop"]).assert().success();
        let server = servers::unity_catalog(&dir.path().join("shop"));
        UnityShop { server, dir }
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("shop").canonicalize().unwrap()
    }

    fn table(&self, name: &str) -> std::path::PathBuf {
        self.root().join("warehouse").join(name)
    }

    fn register(&self, name: &str, format: &str) -> String {
        let table = servers::uc_register(&self.server, name, &self.table(name), format);
        table["table_id"].as_str().unwrap().to_owned()
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let output = crate::common::bf_in(&self.root())
            .args(args)
            .env("DATABRICKS_HOST", self.server.endpoint())
            .env("DATABRICKS_TOKEN", UC_TOKEN)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        for stream in [&output.stdout, &output.stderr] {
            assert!(!String::from_utf8_lossy(stream).contains(UC_TOKEN), "the token was printed");
        }
        output
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args, &[]);
        assert!(output.status.success(), "bf {args:?} failed:\n{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    /// The table's comment as Unity Catalog's REST API gives it.
    fn comment(&self, name: &str) -> String {
        let table = servers::uc_call(
            &self.server,
            "GET",
            &format!("tables/main.sales.{name}"),
            &serde_json::Value::Null,
        );
        table["comment"].as_str().unwrap_or_default().to_owned()
    }

    /// The rows of a local table on the days `first..=last`, read by the Python `deltalake`
    /// package, at `version` or the latest: one sorted JSON text per row.
    fn rows(&self, name: &str, version: Option<u64>, first: &str, last: &str) -> Vec<String> {
        servers::rows_by_day(&self.table(name).display().to_string(), version, first, last, &[])
    }

    fn description(&self, name: &str) -> String {
        let script = format!(
            "from deltalake import DeltaTable\nprint(DeltaTable('{}').metadata().description or '', end='')",
            self.table(name).display()
        );
        servers::python(&script, &[])
    }

    /// Renames, in the shop's plan `file`, each (table, key) written by its location to its Unity
    /// Catalog name.
    fn rename(&self, file: &str, renames: &[(&str, &str)]) {
        let path = self.root().join("plans").join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (table, key) in renames {
            let by_location = format!("{key} = \"../warehouse/{table}\"");
            assert!(text.contains(&by_location), "{file} names {table} by location");
            text = text.replace(&by_location, &format!("{key} = \"uc://main.sales.{table}\""));
        }
        std::fs::write(&path, text).unwrap();
    }
}

#[test]
fn the_march_reload_runs_by_its_unity_catalog_name_and_the_catalog_shows_the_reason() {
    let shop = UnityShop::new();
    for table in ["orders_silver", "revenue_by_day", "backfill_log"] {
        shop.register(table, "DELTA");
    }
    shop.rename("march.toml", &[("orders_silver", "table"), ("backfill_log", "log_table")]);
    shop.rename(
        "march-revenue-by-day.toml",
        &[("revenue_by_day", "table"), ("orders_silver", "inputs.silver = { path")],
    );
    let march = |version| shop.rows("orders_silver", version, "2026-03-01", "2026-03-31");
    let revenue = |version| shop.rows("revenue_by_day", version, "2026-03-01", "2026-03-31");
    let before = march(None);
    assert_eq!(before.len(), 412);
    let revenue_before = revenue(None);
    let versions = crate::common::commit_files(&shop.table("orders_silver")).len();

    let planned = shop.ok(&["plan", "plans/march.toml"]);
    assert!(planned.contains("412 → 409"), "{planned}");
    assert!(planned.contains("uc://main.sales.orders_silver at "), "{planned}");
    assert_eq!(crate::common::commit_files(&shop.table("orders_silver")).len(), versions, "bf plan wrote");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shop.root().join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["target"]["catalog"]["name"], "uc://main.sales.orders_silver");
    assert_eq!(saved["downstream"][0]["delta_inputs"][0]["catalog"]["name"], "uc://main.sales.orders_silver");
    assert_eq!(shop.comment("orders_silver"), "", "nothing set in the catalog by a plan");

    shop.ok(&["apply", "--auto-approve"]);
    assert_eq!(march(None).len(), 409);
    assert_ne!(revenue(None), revenue_before, "revenue_by_day's March was rebuilt from the reload");
    let reason = shop.description("orders_silver");
    assert!(reason.contains("Reloading orders_silver for March 2026"), "{reason}");
    assert_eq!(shop.comment("orders_silver"), reason, "Unity Catalog shows the table's comment");
    assert_eq!(shop.comment("revenue_by_day"), shop.description("revenue_by_day"));
    assert!(
        shop.table("backfill_log").join("_delta_log").is_dir(),
        "the change log was created where it is registered"
    );

    let history = shop.ok(&["history", "uc://main.sales.orders_silver", "--limit", "2"]);
    assert!(history.starts_with("uc://main.sales.orders_silver is the table at "), "{history}");
    let status = shop.ok(&["status"]);
    assert!(status.contains("comment"), "{status}");

    shop.ok(&["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(march(None), before, "the rollback restored March row for row");
    assert_eq!(revenue(None), revenue_before, "and revenue_by_day's");
    let rolled_back = shop.description("orders_silver");
    assert!(rolled_back.contains("rolled back"), "{rolled_back}");
    assert_eq!(shop.comment("orders_silver"), rolled_back, "and Unity Catalog says so");
    assert_eq!(shop.comment("revenue_by_day"), shop.description("revenue_by_day"));
}

#[test]
fn the_daily_september_backfill_and_a_moved_name_by_unity_catalog() {
    let shop = UnityShop::new();
    let id = shop.register("orders_daily", "DELTA");
    let root = shop.root();
    let plan = september_plan(&root, "september-by-name.toml", 4, |t| {
        let by_name = t.replace("\"../warehouse/orders_daily\"", "\"uc://main.sales.orders_daily\"");
        assert_ne!(by_name, t);
        by_name
    });
    shop.ok(&["plan", &plan]);
    shop.ok(&["apply", "--auto-approve"]);
    let writes = crate::common::commit_files(&shop.table("orders_daily")).len();
    assert_eq!(shop.comment("orders_daily"), shop.description("orders_daily"));
    assert!(!shop.comment("orders_daily").is_empty());

    // Planned again. The saved plan pins the name its text names: its pin edited to another name
    // is refused, offline, before any catalog is asked where that name leads.
    shop.ok(&["plan", &plan]);
    let saved = root.join(".bf/plan.json");
    let text = std::fs::read_to_string(&saved).unwrap();
    let mut edited: serde_json::Value = serde_json::from_str(&text).unwrap();
    edited["target"]["catalog"]["name"] = "uc://main.sales.orders_silver".into();
    std::fs::write(&saved, edited.to_string()).unwrap();
    let refused = shop.run(&["apply", "--auto-approve", "--rerun", "all"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("its text names uc://main.sales.orders_daily, which the saved plan does not pin"),
        "{stderr}"
    );
    assert_eq!(crate::common::commit_files(&shop.table("orders_daily")).len(), writes, "nothing written");
    std::fs::write(&saved, text).unwrap();

    // Then the name is dropped and created again (same folder, a new table id).
    servers::uc_call(&shop.server, "DELETE", "tables/main.sales.orders_daily", &serde_json::Value::Null);
    let again = shop.register("orders_daily", "DELTA");
    assert_ne!(again, id);
    let refused = shop.run(&["apply", "--auto-approve", "--rerun", "all"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("uc://main.sales.orders_daily: the name moved since the plan"), "{stderr}");
    assert!(stderr.contains(&again), "the new table id is named: {stderr}");
    assert_eq!(crate::common::commit_files(&shop.table("orders_daily")).len(), writes, "nothing written");
}

/// A Delta input named by its catalog name is pinned by the table the name was at the plan: the
/// name dropped and created again over the same folder (a new table id) makes the saved plan stale,
/// and the apply writes nothing.
#[test]
fn a_delta_input_named_by_unity_catalog_that_moved_makes_the_plan_stale() {
    let shop = UnityShop::new();
    let id = shop.register("orders_silver", "DELTA");
    // The March reload of orders_silver alone, applied: revenue_by_day now has rows to change.
    let march = shop.root().join("plans/march.toml");
    let alone = crate::common::without_downstream(&std::fs::read_to_string(&march).unwrap());
    std::fs::write(shop.root().join("plans/march-alone.toml"), alone).unwrap();
    shop.ok(&["plan", "plans/march-alone.toml"]);
    shop.ok(&["apply", "--auto-approve"]);
    shop.rename("march-revenue-by-day.toml", &[("orders_silver", "path")]);
    shop.ok(&["plan", "plans/march-revenue-by-day.toml"]);
    let writes = crate::common::commit_files(&shop.table("revenue_by_day")).len();

    servers::uc_call(&shop.server, "DELETE", "tables/main.sales.orders_silver", &serde_json::Value::Null);
    let again = shop.register("orders_silver", "DELTA");
    assert_ne!(again, id);
    let refused = shop.run(&["apply", "--auto-approve"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("uc://main.sales.orders_silver: the name moved since the plan"), "{stderr}");
    assert!(stderr.contains(&again), "the new table id is named: {stderr}");
    assert_eq!(crate::common::commit_files(&shop.table("revenue_by_day")).len(), writes, "nothing written");
}

#[test]
fn unity_catalog_names_bf_cannot_backfill_are_refused_in_one_line_naming_the_fix() {
    let shop = UnityShop::new();
    shop.register("orders_silver", "DELTA");
    shop.register("orders_daily", "PARQUET");
    let march = std::fs::read_to_string(shop.root().join("plans/march.toml")).unwrap();
    let versions = crate::common::commit_files(&shop.table("orders_silver")).len();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        ("uc://main.sales.orders_gold", &[], "404 Not Found RESOURCE_NOT_FOUND"),
        ("uc://main.sales.orders_daily", &[], "is a PARQUET table, not a Delta table"),
        (
            "uc://main.sales.orders_silver",
            &[("DATABRICKS_HOST", "http://127.0.0.1:9")],
            "Unity Catalog is not reachable at http://127.0.0.1:9",
        ),
        ("uc://main.sales.orders_silver", &[("DATABRICKS_HOST", "")], "no Unity Catalog workspace is set"),
    ];
    for (name, env, expected) in cases {
        let text = march
            .replace("table = \"../warehouse/orders_silver\"", &format!("table = \"{name}\""))
            .replace("[[downstream]]\nplan = \"march-revenue-by-day.toml\"\n", "");
        std::fs::write(shop.root().join("plans/refused.toml"), text).unwrap();
        let output = shop.run(&["plan", "plans/refused.toml"], env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: {stderr}");
        assert!(stderr.contains(name) && stderr.contains(expected), "{name}: {stderr}");
        assert!(stderr.lines().any(|l| l.contains(name) && l.contains(expected)), "one line: {stderr}");
    }
    assert_eq!(crate::common::commit_files(&shop.table("orders_silver")).len(), versions);
    assert!(!shop.root().join("warehouse/orders_silver__rehearsal").exists(), "no rehearsal was made");
}

#[test]
fn a_glue_request_the_catalog_denies_is_one_line_naming_the_credentials() {
    // moto checking credentials, and knowing none: every request is refused, as with a key that
    // AWS does not know.
    let server = servers::s3_denying();
    let dir = tempfile::tempdir().unwrap();
    let plan = crate::common::write_plan(
        dir.path(),
        "march.toml",
        &crate::common::VALID_PLAN
            .replace("\"../warehouse/orders_silver\"", "\"glue://sales.orders_silver\""),
    );
    let output = crate::common::bf_in(dir.path())
        .arg("plan")
        .arg(&plan)
        .envs(servers::s3_env(&server))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("glue://sales.orders_silver")).unwrap_or_default();
    assert!(line.contains("credentials in the environment"), "{stderr}");
    assert!(!stderr.contains("bf-test-secret-never-printed"));
    assert!(!dir.path().join("warehouse").exists(), "nothing was written");
}

#[test]
fn a_unity_catalog_request_the_catalog_refuses_is_one_line_naming_the_token() {
    let server = servers::unity_catalog_denying();
    let dir = tempfile::tempdir().unwrap();
    let plan = crate::common::write_plan(
        dir.path(),
        "march.toml",
        &crate::common::VALID_PLAN
            .replace("\"../warehouse/orders_silver\"", "\"uc://main.sales.orders_silver\""),
    );
    let output = crate::common::bf_in(dir.path())
        .arg("plan")
        .arg(&plan)
        .env("DATABRICKS_HOST", server.endpoint())
        .env("DATABRICKS_TOKEN", UC_TOKEN)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("uc://main.sales.orders_silver")).unwrap_or_default();
    assert!(
        line.contains("401 Unauthorized UNAUTHENTICATED") && line.contains("DATABRICKS_TOKEN"),
        "{stderr}"
    );
    assert!(!stderr.contains(UC_TOKEN), "the token is never shown");
    assert!(!dir.path().join("warehouse").exists(), "nothing was written");
}
