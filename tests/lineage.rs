//! OpenLineage: the March reload (with revenue_by_day downstream) and the September daily backfill
//! as RunEvents collected by a receiver on 127.0.0.1, each validated against the official
//! OpenLineage schemas vendored in tests/data/openlineage (and the `bf` facet's own schema), the
//! parent/child structure, nominal times and statistics checked against the tables' logs read raw;
//! an endpoint that is down changes nothing but a warning, and `bf lineage resend` delivers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{Receiver, bf_in, commit_files, demo_workspace, python_venv, repo, september_plan};

const SILVER: &str = "bf-demo/warehouse/orders_silver";
const REVENUE: &str = "bf-demo/warehouse/revenue_by_day";
const ORDERS: &str = "bf-demo/warehouse/orders_daily";

/// bf in `root` with exactly these OpenLineage settings (none inherited from the machine).
fn run(root: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = bf_in(root);
    for variable in [
        "OPENLINEAGE_URL",
        "OPENLINEAGE_ENDPOINT",
        "OPENLINEAGE_API_KEY",
        "OPENLINEAGE_NAMESPACE",
        "OPENLINEAGE_CONFIG",
        "OPENLINEAGE_DISABLED",
        "OPENLINEAGE_PARENT_ID",
        "OPENLINEAGE_ROOT_PARENT_ID",
        "FINANCE_BACKFILL_WEBHOOK",
    ] {
        command.env_remove(variable);
    }
    command.args(args).envs(env.iter().copied()).output().unwrap()
}

fn ok(root: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let out = run(root, args, env);
    assert!(
        out.status.success(),
        "bf {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A venv with `jsonschema` and its format checkers (uuid, date-time, uri), from PyPI.
fn validator_venv() -> PathBuf {
    python_venv(
        "BF_LINEAGE_VENV",
        "bf-lineage-venv",
        "import jsonschema, referencing, rfc3339_validator, rfc3986_validator",
        &["jsonschema[format-nongpl]==4.25.1"],
    )
}

/// Every event valid against the vendored OpenLineage schemas and bf's facet schema, each facet
/// against the schema its `_schemaURL` names (tests/data/openlineage/validate.py).
pub fn assert_valid(events: &[Value]) {
    assert!(!events.is_empty(), "no events to validate");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = std::process::Command::new(validator_venv().join("python"))
        .arg(repo("tests/data/openlineage/validate.py"))
        .arg(&file)
        .arg(repo("tests/data/openlineage/spec"))
        .arg(repo("schema/lineage"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the events are not valid OpenLineage:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run_id(event: &Value) -> &str {
    event["run"]["runId"].as_str().unwrap()
}

fn job(event: &Value) -> &str {
    event["job"]["name"].as_str().unwrap()
}

fn kind(event: &Value) -> &str {
    event["eventType"].as_str().unwrap()
}

fn bf_facet(event: &Value) -> &Value {
    &event["run"]["facets"]["bf"]
}

/// The events of one job, in the order they came.
fn of_job<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| job(e) == name).collect()
}

/// What commit `version` added, read raw from the log: (bytes, rows).
fn added(table: &Path, version: u64) -> (u64, u64) {
    let (_, path) = commit_files(table).into_iter().find(|(v, _)| *v == version).expect("the commit's file");
    let mut total = (0, 0);
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let action: Value = serde_json::from_str(line).unwrap();
        if let Some(add) = action.get("add") {
            let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
            total.0 += add["size"].as_u64().unwrap();
            total.1 += stats["numRecords"].as_u64().unwrap();
        }
    }
    total
}

/// The commitInfo of commit `version`, read raw.
fn commit_info(table: &Path, version: u64) -> Value {
    let (_, path) = commit_files(table).into_iter().find(|(v, _)| *v == version).expect("the commit's file");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok()?.get("commitInfo").cloned())
        .unwrap()
}

/// (bytes, rows) of an event's output statistics.
fn statistics(event: &Value) -> (u64, u64) {
    let stats = &event["outputs"][0]["outputFacets"]["outputStatistics"];
    (stats["size"].as_u64().unwrap(), stats["rowCount"].as_u64().unwrap())
}

fn latest_version(table: &Path) -> u64 {
    commit_files(table).last().unwrap().0
}

/// Checks a table's backfill run and its slice runs against the table's log: one START and one
/// COMPLETE each, every slice a child of the backfill with its days as its nominal time and the
/// statistics of the commit its `postVersion` names. Returns the backfill's COMPLETE.
fn assert_backfill<'a>(events: &'a [Value], table: &Path, name: &str, days: &[(&str, &str)]) -> &'a Value {
    let backfill = of_job(events, &format!("{name}/backfill"));
    assert_eq!(backfill.iter().map(|e| kind(e)).collect::<Vec<_>>(), ["START", "COMPLETE"], "{name}");
    let (start, complete) = (backfill[0], backfill[1]);
    assert_eq!(run_id(start), run_id(complete));
    let slices = of_job(events, &format!("{name}/backfill/slice"));
    let runs: BTreeSet<&str> = slices.iter().map(|e| run_id(e)).collect();
    assert_eq!(runs.len(), days.len(), "one run per slice of {name}");
    let position = |e: &Value| events.iter().position(|x| x == e).unwrap();
    let mut total = (0, 0);
    for (first, last) in days {
        let of_slice: Vec<&&Value> = slices
            .iter()
            .filter(|e| bf_facet(e)["slice"]["first"] == *first && bf_facet(e)["slice"]["last"] == *last)
            .collect();
        assert_eq!(
            of_slice.iter().map(|e| kind(e)).collect::<Vec<_>>(),
            ["START", "COMPLETE"],
            "{name} {first}"
        );
        for event in &of_slice {
            let parent = &event["run"]["facets"]["parent"];
            assert_eq!(parent["run"]["runId"].as_str(), Some(run_id(start)), "a child of the backfill");
            assert_eq!(parent["job"]["name"], format!("{name}/backfill"));
            let nominal = &event["run"]["facets"]["nominalTime"];
            assert_eq!(nominal["nominalStartTime"], format!("{first}T00:00:00.000Z"));
            let next = chrono::NaiveDate::parse_from_str(last, "%Y-%m-%d").unwrap().succ_opt().unwrap();
            assert_eq!(nominal["nominalEndTime"], format!("{next}T00:00:00.000Z"));
            assert!(position(start) < position(event) && position(event) < position(complete));
        }
        let done = of_slice[1];
        let version = bf_facet(done)["postVersion"].as_u64().unwrap();
        let info = commit_info(table, version);
        assert_eq!(info["bf.slice_first"], *first, "version {version} is the slice's commit");
        assert_eq!(info["bf.backfill_id"], bf_facet(done)["backfillId"]);
        let log = added(table, version);
        assert_eq!(statistics(done), log, "{name} {first}: the statistics of commit {version}");
        assert_eq!(done["outputs"][0]["facets"]["version"]["datasetVersion"], version.to_string());
        total = (total.0 + log.0, total.1 + log.1);
    }
    assert_eq!(statistics(complete), total, "{name}: the backfill's statistics are its slices'");
    let version = latest_version(table);
    assert_eq!(complete["outputs"][0]["facets"]["version"]["datasetVersion"], version.to_string());
    assert_eq!(bf_facet(complete)["postVersion"], version);
    complete
}

/// The March reload with its downstream table: two backfill runs, their slices as children, the
/// statistics of each commit, the checks as assertions, revenue_by_day reading orders_silver as
/// the dataset orders_silver's backfill wrote; then the cascade rollback as rollback runs naming
/// the backfills they undo. Nothing is emitted by `bf plan`.
#[test]
fn the_march_reload_and_its_downstream_as_valid_openlineage_runs() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let receiver = Receiver::start(200);
    let base = receiver.base();
    let env = [
        ("OPENLINEAGE_URL", base.as_str()),
        ("OPENLINEAGE_NAMESPACE", "finance"),
        ("OPENLINEAGE_API_KEY", "ol-key-7731"),
    ];
    ok(root, &["plan", "plans/march.toml"], &env);
    assert!(receiver.requests().is_empty(), "bf plan emits nothing");
    let applied = ok(root, &["apply", "--auto-approve"], &env);
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(!stderr.contains("ol-key-7731"), "{stderr}");
    let requests = receiver.requests();
    assert!(requests.iter().all(|r| r.url == "/api/v1/lineage"), "posted to the standard endpoint");
    assert!(requests.iter().all(|r| r.authorization.as_deref() == Some("Bearer ol-key-7731")));
    let events = receiver.bodies();
    assert_valid(&events);
    assert!(stderr.contains(&format!("{} OpenLineage events sent", events.len())), "{stderr}");
    assert!(events.iter().all(|e| e["job"]["namespace"] == "finance"));

    let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
    let march = [("2026-03-01", "2026-03-31")];
    let silver_done = assert_backfill(&events, &silver, "orders_silver", &march);
    let revenue_done = assert_backfill(&events, &revenue, "revenue_by_day", &march);
    let plan_text = std::fs::read(root.join("plans/march.toml")).unwrap();
    let bf = bf_facet(silver_done);
    assert_eq!(bf["operation"], "backfill");
    assert!(bf["reason"].as_str().unwrap().starts_with("Reloading orders_silver for March 2026"));
    assert_eq!(bf["window"], serde_json::json!({"first": "2026-03-01", "last": "2026-03-31"}));
    assert_eq!(bf["planSha256"], hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&plan_text)));
    assert_eq!(bf["chain"], bf_facet(revenue_done)["chain"], "one chain");
    let pre = bf["preVersion"].as_u64().unwrap();
    assert_eq!(commit_info(&silver, pre + 1)["bf.pre_version"], pre, "the pre-version the ledger records");
    // The checks, as the rehearsal of what landed passed them.
    let assertions = &silver_done["outputs"][0]["facets"]["dataQualityAssertions"]["assertions"];
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let checks: BTreeSet<(&str, &str)> = plan["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["kind"].as_str().unwrap()))
        .collect();
    let asserted: BTreeSet<(&str, &str)> = assertions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["assertion"].as_str().unwrap()))
        .collect();
    assert_eq!(asserted, checks, "each of the plan's checks, once");
    assert!(assertions.as_array().unwrap().iter().all(|a| a["success"] == true), "{assertions}");
    // revenue_by_day reads the dataset orders_silver's backfill wrote: lineage joins them.
    let written = &silver_done["outputs"][0];
    let read = revenue_done["inputs"].as_array().unwrap();
    assert!(
        read.iter().any(|i| i["namespace"] == written["namespace"] && i["name"] == written["name"]),
        "{read:?} reads {written}"
    );
    assert_eq!(written["namespace"], "file");
    assert_eq!(written["name"], silver.canonicalize().unwrap().to_str().unwrap());
    // The landing file the reload read.
    let inputs = silver_done["inputs"].as_array().unwrap();
    assert!(inputs.iter().any(|i| i["name"].as_str().unwrap().contains("landing")), "{inputs:?}");

    let before = receiver.requests().len();
    ok(root, &["rollback", "--cascade", "--auto-approve"], &env);
    let events = receiver.bodies()[before..].to_vec();
    assert_valid(&events);
    for (name, table, done) in
        [("orders_silver", &silver, silver_done), ("revenue_by_day", &revenue, revenue_done)]
    {
        let rollback = of_job(&events, &format!("{name}/rollback"));
        assert_eq!(rollback.iter().map(|e| kind(e)).collect::<Vec<_>>(), ["START", "COMPLETE"], "{name}");
        let facet = bf_facet(rollback[1]);
        assert_eq!(facet["operation"], "rollback");
        assert_eq!(facet["backfillId"], bf_facet(done)["backfillId"], "names the backfill it undoes");
        assert_eq!(facet["backfillRunId"].as_str(), Some(run_id(done)), "and that backfill's run");
        assert_eq!(facet["rollback"]["restoredVersion"], bf_facet(done)["preVersion"]);
        let version = latest_version(table);
        assert_eq!(rollback[1]["outputs"][0]["facets"]["version"]["datasetVersion"], version.to_string());
        let applied = bf_facet(done)["postVersion"].as_u64().unwrap();
        let restored =
            (applied + 1..=version).filter(|v| commit_info(table, *v)["operation"] == "RESTORE").count();
        assert_eq!(restored, 1, "{name}: one RESTORE since the backfill, then its comment");
    }
    // Downstream first, as the rollback ran.
    let first_done =
        |name: &str| events.iter().position(|e| job(e) == name && kind(e) == "COMPLETE").unwrap();
    assert!(first_done("revenue_by_day/rollback") < first_done("orders_silver/rollback"));
}

/// The September backfill, one run per day: thirty slice runs, each its own day, children of one
/// backfill run; first with the endpoint down (the apply as without lineage, a warning, the events
/// saved in order), then `bf lineage resend` delivers them all, valid, and leaves none.
#[test]
fn september_daily_runs_survive_an_endpoint_that_is_down_and_are_resent() {
    let workspace = demo_workspace();
    let root = workspace.path();
    // A port nothing listens on, held for the test.
    let (_held, port) = crate::common::refusing_port();
    let down = format!("http://127.0.0.1:{port}");
    let env = [("OPENLINEAGE_URL", down.as_str())];
    ok(root, &["plan", "plans/september.toml"], &env);
    let applied = ok(root, &["apply", "--auto-approve"], &env);
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(stderr.contains("Warning:") && stderr.contains("bf lineage resend"), "{stderr}");
    let orders = root.join(ORDERS);
    let committed = commit_files(&orders)
        .iter()
        .filter(|(v, _)| commit_info(&orders, *v).get("bf.slice").is_some())
        .count();
    assert_eq!(committed, 30, "every slice committed, the endpoint down or not");
    let spool = root.join(".bf/lineage");
    let saved = std::fs::read_dir(&spool).unwrap().count();
    assert_eq!(saved, 2 + 2 * 30, "every event saved: the backfill's and each slice's START and COMPLETE");

    // Nothing to send to: refused, nothing lost.
    let nowhere = run(root, &["lineage", "resend"], &[]);
    assert!(!nowhere.status.success());
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("OPENLINEAGE_URL"));
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), saved);

    let receiver = Receiver::start(200);
    let base = receiver.base();
    let resent = ok(root, &["lineage", "resend"], &[("OPENLINEAGE_URL", base.as_str())]);
    assert!(String::from_utf8_lossy(&resent.stderr).contains(&format!("{saved} OpenLineage events sent")));
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0, "none left");
    let events = receiver.bodies();
    assert_valid(&events);
    assert_eq!(events.first().map(kind), Some("START"));
    assert_eq!(job(&events[0]), "orders_daily/backfill");
    let days: Vec<(String, String)> =
        (1..=30).map(|d| (format!("2026-09-{d:02}"), format!("2026-09-{d:02}"))).collect();
    let days: Vec<(&str, &str)> = days.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_backfill(&events, &orders, "orders_daily", &days);
    let again = ok(root, &["lineage", "resend"], &[("OPENLINEAGE_URL", base.as_str())]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("No OpenLineage events wait"));
    assert_eq!(receiver.bodies().len(), events.len(), "nothing sent twice");
}

/// An endpoint that refuses (500) is a warning too, and the apply's outcome is the same as
/// without lineage: the same rows in the same versions.
#[test]
fn an_endpoint_answering_500_changes_nothing_but_a_warning() {
    let with = demo_workspace();
    let without = demo_workspace();
    let refusing = Receiver::start(500);
    let base = refusing.base();
    let plan = |root: &Path| september_plan(root, "first-week.toml", 7, |t| t);
    let env = [("OPENLINEAGE_URL", base.as_str())];
    for (root, env) in [(with.path(), &env[..]), (without.path(), &[][..])] {
        let path = plan(root);
        ok(root, &["plan", &path], env);
        let applied = ok(root, &["apply", "--auto-approve"], env);
        let stderr = String::from_utf8_lossy(&applied.stderr);
        assert_eq!(stderr.contains("answered 500"), !env.is_empty(), "{stderr}");
    }
    assert_eq!(refusing.requests().len(), 1, "the first refusal holds back the rest, in order");
    let rows = |root: &Path| {
        let orders = root.join(ORDERS);
        commit_files(&orders).iter().map(|(v, _)| (*v, added(&orders, *v).1)).collect::<BTreeMap<_, _>>()
    };
    assert_eq!(rows(with.path()), rows(without.path()));
    assert_eq!(std::fs::read_dir(with.path().join(".bf/lineage")).unwrap().count(), 2 + 2 * 7);
}

/// `OPENLINEAGE_CONFIG` naming an `openlineage.yml`: a file transport gets every event, one per
/// line; a file bf cannot use is a warning that never shows its text (it may hold a key), and the
/// events wait in the state dir.
#[test]
fn an_openlineage_yml_file_transport_and_a_broken_one() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let config = root.join("openlineage.yml");
    let events_file = root.join("lineage-events.jsonl");
    std::fs::write(
        &config,
        format!("transport:\n  type: file\n  log_file_path: {}\n  append: true\n", events_file.display()),
    )
    .unwrap();
    let path = september_plan(root, "two-days.toml", 2, |t| t);
    let env = [("OPENLINEAGE_CONFIG", config.to_str().unwrap())];
    ok(root, &["plan", &path], &env);
    ok(root, &["apply", "--auto-approve"], &env);
    let events: Vec<Value> = std::fs::read_to_string(&events_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2 + 2 * 2);
    assert_valid(&events);
    assert_eq!(events[0]["job"]["namespace"], "bf", "the default namespace");

    std::fs::write(&config, "transport:\n  type: kafka\n  apiKey: yml-secret-99\n").unwrap();
    let path = september_plan(root, "two-more-days.toml", 4, |t| {
        t.replace("start = 2026-09-01", "start = 2026-09-03")
    });
    ok(root, &["plan", &path], &env);
    let applied = ok(root, &["apply", "--auto-approve"], &env);
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(stderr.contains("kafka") && stderr.contains("openlineage.yml"), "{stderr}");
    assert!(!stderr.contains("yml-secret-99"), "{stderr}");
    assert_eq!(std::fs::read_dir(root.join(".bf/lineage")).unwrap().count(), 2 + 2 * 2);
}

/// The `bf` facet's schema in the repository is the one bf writes.
#[test]
fn the_bf_facet_schema_is_committed_as_bf_writes_it() {
    let written = bf_in(&repo(".")).args(["schema", "--lineage-facet"]).output().unwrap();
    assert!(written.status.success());
    let committed = std::fs::read_to_string(repo("schema/lineage/BfRunFacet-1-0-0.json")).unwrap();
    assert_eq!(
        String::from_utf8(written.stdout).unwrap(),
        committed,
        "schema/lineage/BfRunFacet-1-0-0.json is stale: regenerate it with `bf schema --lineage-facet`"
    );
}

/// An apply that stops at a slice: that slice's run and the backfill's FAIL with the error, the
/// slice before it COMPLETE; the resume (recomputing the slices left) continues the same runs
/// (their ids come from the backfill id) and completes them, each with its commit's statistics. A malformed `OPENLINEAGE_PARENT_ID` is a warning, never a stop.
#[test]
fn a_failed_slice_fails_its_run_and_the_backfill_and_the_resume_completes_them() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let receiver = Receiver::start(200);
    let base = receiver.base();
    let path = september_plan(root, "three-days.toml", 3, |t| t);
    let env = [("OPENLINEAGE_URL", base.as_str()), ("OPENLINEAGE_PARENT_ID", "not-a-run")];
    ok(root, &["plan", &path], &env);
    let broken: Vec<(&str, &str)> =
        env.iter().copied().chain([("BF_FAULT", "corrupt-published:2")]).collect();
    let failed = run(root, &["apply", "--auto-approve"], &broken);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("OPENLINEAGE_PARENT_ID"), "{stderr}");
    let events = receiver.bodies();
    assert_valid(&events);
    let seen: Vec<(String, &str)> =
        events.iter().map(|e| (format!("{} {}", job(e), bf_facet(e)["slice"]["index"]), kind(e))).collect();
    let expected = [
        ("orders_daily/backfill null", "START"),
        ("orders_daily/backfill/slice 1", "START"),
        ("orders_daily/backfill/slice 1", "COMPLETE"),
        ("orders_daily/backfill/slice 2", "START"),
        ("orders_daily/backfill/slice 2", "FAIL"),
        ("orders_daily/backfill null", "FAIL"),
    ];
    assert_eq!(seen.iter().map(|(j, k)| (j.as_str(), *k)).collect::<Vec<_>>(), expected);
    let message = events[4]["run"]["facets"]["errorMessage"]["message"].as_str().unwrap();
    assert!(stderr.contains(message.lines().next().unwrap()), "the error bf printed: {message}");
    assert!(events.iter().all(|e| e["run"]["facets"]["parent"]["job"]["name"] != "not-a-run"));

    // Resumed with the slices' queries run again: their statistics are read from their commits.
    ok(root, &["apply", "--auto-approve", "--recompute"], &env[..1]);
    let resumed = receiver.bodies()[events.len()..].to_vec();
    assert_valid(&resumed);
    assert_eq!(run_id(&resumed[0]), run_id(&events[0]), "the same backfill run");
    let kinds: Vec<&str> = resumed.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["START", "START", "COMPLETE", "START", "COMPLETE", "COMPLETE"],
        "slices 2 and 3, then the backfill"
    );
    assert_eq!(run_id(&resumed[1]), run_id(&events[3]), "slice 2's run again");
    for done in [&resumed[2], &resumed[4]] {
        let version = bf_facet(done)["postVersion"].as_u64().unwrap();
        assert_eq!(
            statistics(done),
            added(&root.join(ORDERS), version),
            "the statistics of commit {version}"
        );
    }

    // A RESTORE of a version, no backfill's: a rollback run without a window.
    let pre = bf_facet(&events[0])["preVersion"].as_u64().unwrap().to_string();
    let before = receiver.requests().len();
    ok(root, &["rollback", "--to-version", &pre, "--auto-approve"], &env[..1]);
    let restore = receiver.bodies()[before..].to_vec();
    assert_valid(&restore);
    assert_eq!(
        restore.iter().map(|e| (job(e), kind(e))).collect::<Vec<_>>(),
        [("orders_daily/rollback", "START"), ("orders_daily/rollback", "COMPLETE")]
    );
    let facet = bf_facet(&restore[1]);
    assert_eq!(facet["rollback"]["restoredVersion"].to_string(), pre);
    assert!(facet.get("window").is_none() && facet.get("backfillId").is_none(), "{facet}");
    let version = latest_version(&root.join(ORDERS));
    assert_eq!(restore[1]["outputs"][0]["facets"]["version"]["datasetVersion"], version.to_string());
}

/// The September backfill stopped by Ctrl-C after a few slices: the run of a slice it was writing,
/// if any, and the backfill's run fail, saying how to go on; no slice's run is left open. The
/// resume continues the same backfill run and completes it.
#[test]
fn an_apply_stopped_by_ctrl_c_fails_its_runs_and_the_resume_completes_them() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let receiver = Receiver::start(200);
    let base = receiver.base();
    let env = [("OPENLINEAGE_URL", base.as_str())];
    ok(root, &["plan", "plans/september.toml", "-q"], &env);
    let table = root.join(ORDERS);
    let stopped = crate::common::apply_interrupted_after(root, &table, 3, &env);
    assert_eq!(stopped.status.code(), Some(130), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(crate::common::slices_committed(&table).len() < 30, "stopped before the end");

    let events = receiver.bodies();
    assert_valid(&events);
    let last = events.last().unwrap();
    assert_eq!((job(last), kind(last)), ("orders_daily/backfill", "FAIL"), "{events:#?}");
    let message = last["run"]["facets"]["errorMessage"]["message"].as_str().unwrap();
    assert!(message.contains("interrupted (Ctrl-C)"), "{message}");
    let slices: Vec<&Value> = events.iter().filter(|e| job(e) == "orders_daily/backfill/slice").collect();
    let open = slices.iter().filter(|e| kind(e) == "START").count();
    let closed = slices.iter().filter(|e| kind(e) != "START").count();
    assert_eq!(open, closed, "every slice's run that started ended: {slices:#?}");

    ok(root, &["apply", "--auto-approve"], &env);
    let resumed = receiver.bodies()[events.len()..].to_vec();
    assert_valid(&resumed);
    assert_eq!(run_id(&resumed[0]), run_id(&events[0]), "the same backfill run");
    let end = resumed.last().unwrap();
    assert_eq!((job(end), kind(end)), ("orders_daily/backfill", "COMPLETE"));
}
