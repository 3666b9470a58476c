//! Downstream tables: the March reload with `revenue_by_day` built from `orders_silver`, rehearsed
//! on the reloaded silver's rehearsal, applied after it, rolled back before it, and the notice that
//! tells the people who read them. Outcomes are read raw (the log) or by the Python `deltalake`
//! package, and the expected numbers are computed here from the landing CSVs.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

mod stops;

use crate::common::servers::python_sql_rows;
use crate::common::{
    Receiver, bf_in, commit_infos, commits_with, demo_workspace, duckdb_count, duckdb_rows, rows_at,
    slices_committed, snapshot, write_plan,
};

const SILVER: &str = "bf-demo/warehouse/orders_silver";
const REVENUE: &str = "bf-demo/warehouse/revenue_by_day";
const MARCH: &str = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";

fn run(root: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    bf_in(root).env_remove("FINANCE_BACKFILL_WEBHOOK").args(args).envs(env.iter().copied()).output().unwrap()
}

fn ok(root: &Path, args: &[&str]) -> String {
    let out = run(root, args, &[]);
    assert!(
        out.status.success(),
        "bf {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// March's revenue in EUR and order count per day, as the corrected landing files say: each order
/// converted at its currency's rate and rounded to the cent, each day's sum rounded to the cent.
fn march_by_day_from_csvs(root: &Path) -> BTreeMap<String, (f64, i64)> {
    let landing = root.join("bf-demo/landing");
    let rates: BTreeMap<String, f64> = crate::common::fx_rates(&landing).into_iter().collect();
    let mut days: BTreeMap<String, (f64, i64)> = BTreeMap::new();
    for line in std::fs::read_to_string(landing.join("orders_march.csv")).unwrap().lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let (amount, currency, at) = (fields[2].parse::<f64>().unwrap(), fields[3], fields[4]);
        let day = days.entry(at[..10].to_owned()).or_default();
        day.0 += (amount * rates[currency] * 100.0).round() / 100.0;
        day.1 += 1;
    }
    days.values_mut().for_each(|(revenue, _)| *revenue = (*revenue * 100.0).round() / 100.0);
    days
}

/// How many RESTOREs the table's log holds (read raw).
fn restores(table: &Path) -> usize {
    commit_infos(table).iter().filter(|(_, i)| i["operation"] == "RESTORE").count()
}

/// What a table's log holds of an apply, read raw: its slice commits and its comments.
fn applied(table: &Path) -> (Vec<u64>, usize) {
    (slices_committed(table), commits_with(table, "comment"))
}

/// Crashes `bf rollback --cascade` at `point` (`NAME/rollback-before-restore`) and returns how many
/// RESTOREs each of `tables` holds then: the tables rolled back before the crash, in the order the
/// cascade runs them. Timestamps cannot show that order: two commits in one millisecond tie.
fn restores_at_crash(root: &Path, point: &str, tables: &[&Path]) -> Vec<usize> {
    let crashed = run(root, &["rollback", "--cascade", "--auto-approve"], &[("BF_FAULT", point)]);
    assert_eq!(
        crashed.status.code(),
        None,
        "{point}: the rollback was meant to abort there, not exit: {}",
        String::from_utf8_lossy(&crashed.stderr)
    );
    for t in tables {
        eprintln!(
            "DEBUG {point} {}: {:?}",
            t.display(),
            commit_infos(t).iter().map(|(v, i)| (*v, i["operation"].clone())).collect::<Vec<_>>()
        );
    }
    tables.iter().map(|t| restores(t)).collect()
}

fn saved_plan(root: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap()
}

#[test]
fn the_march_reload_rehearses_revenue_by_day_on_the_reloaded_silver_and_writes_neither() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let (silver, revenue) = (snapshot(&root.join(SILVER)), snapshot(&root.join(REVENUE)));
    let shown = ok(root, &["plan", "plans/march.toml"]);
    assert_eq!(snapshot(&root.join(SILVER)), silver, "orders_silver is byte for byte as before");
    assert_eq!(snapshot(&root.join(REVENUE)), revenue, "revenue_by_day is byte for byte as before");
    assert!(shown.contains("── downstream of orders_silver: revenue_by_day ──"), "{shown}");
    assert!(shown.contains("`silver` = orders_silver as its backfill leaves it"), "{shown}");
    assert!(shown.contains("Chain of 2 tables, applied in this order:"), "{shown}");

    let plan = saved_plan(root);
    let downstream = &plan["downstream"][0];
    let expected = march_by_day_from_csvs(root);
    let revenue_after: f64 = expected.values().map(|(r, _)| r).sum();
    let after = &downstream["total"]["after"];
    assert!((after["metrics"]["revenue"].as_f64().unwrap() - revenue_after).abs() < 0.005, "{after}");
    assert_eq!(after["metrics"]["orders"], 409.0, "March's 409 orders, the 3 duplicates gone");
    assert_eq!(after["rows"], 31, "one row per day of March");
    // Before: what the dashboards show today, the wrong silver summed by the Python reader.
    let wrong: f64 = python_sql_rows(&root.join(SILVER), "amount_eur,order_date")
        .iter()
        .filter(|r| r.contains("|2026-03-"))
        .map(|r| r.split('|').next().unwrap().parse::<f64>().unwrap())
        .sum();
    let before = downstream["total"]["before"]["metrics"]["revenue"].as_f64().unwrap();
    assert!((before - wrong).abs() < 0.01, "before {before}, the silver's March {wrong}");
    // The downstream read the upstream's rehearsal at its final version, as the plan records.
    let read = &downstream["delta_inputs"][0];
    assert_eq!(read["uri"], plan["rehearsal"]["uri"]);
    assert_eq!(read["version"], plan["rehearsal"]["version"]);
    assert_eq!(read["stands_for"], plan["target"]["uri"]);

    let markdown = ok(root, &["show", "--format", "markdown"]);
    assert!(markdown.starts_with("## ✅ Backfill of 2 tables"), "{markdown}");
    assert!(markdown.contains("### 2. `revenue_by_day`"), "{markdown}");
    assert_eq!(markdown.matches("<!-- bf plan -->").count(), 1, "one marker for the CI job to find");

    // The downstream's read of the upstream's rehearsal, edited in the saved plan to read the real
    // silver table (what it stands for) instead, is not what the chain rehearsed: refused.
    let mut edited = plan.clone();
    edited["downstream"][0]["delta_inputs"][0]["uri"] = plan["target"]["uri"].clone();
    std::fs::write(root.join(".bf/plan.json"), edited.to_string()).unwrap();
    let refused = run(root, &["apply", "--auto-approve"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    let recorded = format!(
        "Delta input `silver` is recorded as {}, which its text does not name",
        plan["target"]["uri"].as_str().unwrap()
    );
    assert!(stderr.contains(&recorded), "{stderr}");
    assert_eq!(snapshot(&root.join(SILVER)), silver, "orders_silver untouched");
    assert_eq!(snapshot(&root.join(REVENUE)), revenue, "revenue_by_day untouched");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chain_applies_upstream_first_and_a_rollback_needs_cascade_to_undo_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
    ok(root, &["plan", "plans/march.toml", "-q"]);
    let applied: Value = serde_json::from_str(&ok(root, &["apply", "--auto-approve", "--json"])).unwrap();
    assert_eq!(applied["pre_version"], 5);
    assert_eq!(applied["downstream"][0]["pre_version"], 4);

    // revenue_by_day's March, read by the Python package, is the corrected landing files' March.
    let expected: Vec<String> = march_by_day_from_csvs(root)
        .iter()
        .map(|(day, (revenue, orders))| format!("{day}|{revenue}|{orders}"))
        .collect();
    let march: Vec<String> = python_sql_rows(&revenue, "order_date,revenue,orders")
        .into_iter()
        .filter(|r| r.starts_with("2026-03-"))
        .collect();
    assert_eq!(march, expected);
    // The seed's numbers agree across the chain: March by day sums to the silver's March.
    let silver_march: f64 = python_sql_rows(&silver, "amount_eur,order_date")
        .iter()
        .filter(|r| r.contains("|2026-03-"))
        .map(|r| r.split('|').next().unwrap().parse::<f64>().unwrap())
        .sum();
    let by_day: f64 = march.iter().map(|r| r.split('|').nth(1).unwrap().parse::<f64>().unwrap()).sum();
    assert!((silver_march - by_day).abs() < 0.01, "silver {silver_march}, by day {by_day}");

    // Each table its own backfill, linked by bf.cascade, read from the raw log.
    let chain = saved_plan(root)["id"].as_str().unwrap().to_owned();
    let slice_of = |table: &Path| -> Value {
        commit_infos(table).into_iter().map(|(_, i)| i).find(|i| i.get("bf.slice").is_some()).unwrap()
    };
    let (up, down) = (slice_of(&silver), slice_of(&revenue));
    assert_eq!((up["bf.cascade"].as_str(), down["bf.cascade"].as_str()), (Some(&*chain), Some(&*chain)));
    assert_ne!(up["bf.backfill_id"], down["bf.backfill_id"]);
    assert!(down["bf.upstream"].as_str().unwrap().ends_with("/orders_silver/"), "{down}");
    assert!(up["bf.downstream"][0].as_str().unwrap().ends_with("/revenue_by_day/"), "{up}");
    assert!(up.get("bf.upstream").is_none() && down["bf.downstream"] == Value::Array(Vec::new()));
    // Upstream first, and rolled back downstream first: proven by where the crashes of
    // `a_crash_anywhere_in_the_chain_resumes_where_it_stopped_exactly_once` strike (commit
    // timestamps, in milliseconds, cannot tell two commits of one millisecond apart).
    assert_eq!((commits_with(&silver, "comment"), commits_with(&revenue, "comment")), (1, 1));

    // Without --cascade, the upstream's rollback is refused and writes nothing.
    let (before_silver, before_revenue) = (snapshot(&silver), snapshot(&revenue));
    let refused = run(root, &["rollback", "--auto-approve"], &[]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("has downstream backfills still in place"), "{stderr}");
    assert!(stderr.contains("revenue_by_day") && stderr.contains("--cascade"), "{stderr}");
    assert_eq!((snapshot(&silver), snapshot(&revenue)), (before_silver, before_revenue));

    let rolled: Value =
        serde_json::from_str(&ok(root, &["rollback", "--cascade", "--auto-approve", "--json"])).unwrap();
    assert_eq!(rolled["restored_version"], 5);
    assert_eq!(rolled["downstream"][0]["restored_version"], 4);
    for (table, version) in [(&silver, 5), (&revenue, 4)] {
        assert_eq!(rows_at(table, None, "true").await, rows_at(table, Some(version), "true").await);
    }
}

/// Crashes at every table boundary and inside each table, each then resumed by `bf apply` again:
/// both tables end as an uninterrupted apply leaves them, each slice and comment committed once.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_anywhere_in_the_chain_resumes_where_it_stopped_exactly_once() {
    let reference = demo_workspace();
    ok(reference.path(), &["plan", "plans/march.toml", "-q"]);
    ok(reference.path(), &["apply", "--auto-approve", "-q"]);
    let want_silver = rows_at(&reference.path().join(SILVER), None, "true").await;
    let want_revenue = rows_at(&reference.path().join(REVENUE), None, "true").await;
    // `--recompute` runs both tables' queries again — the downstream's on the upstream's rehearsal,
    // as planned — and lands the same rows.
    let recomputed = demo_workspace();
    ok(recomputed.path(), &["plan", "plans/march.toml", "-q"]);
    ok(recomputed.path(), &["apply", "--auto-approve", "-q", "--recompute"]);
    assert_eq!(rows_at(&recomputed.path().join(SILVER), None, "true").await, want_silver);
    assert_eq!(rows_at(&recomputed.path().join(REVENUE), None, "true").await, want_revenue);
    // Each point with what the logs hold when the process dies there, read raw: orders_silver's
    // slice commits and comments, revenue_by_day's, and the change-log rows (orders_silver's plan
    // records one when its table is done; revenue_by_day's records none).
    let silver_done = (vec![1], 1);
    let none = (Vec::new(), 0);
    for (point, silver_at, revenue_at, logged) in [
        ("before-table:1", &silver_done, &none, 1),
        ("orders_silver/after-commit:1", &(vec![1], 0), &none, 0),
        ("orders_silver/before-comment", &(vec![1], 0), &none, 0),
        ("revenue_by_day/before-slice:1", &silver_done, &none, 1),
        ("revenue_by_day/before-publish-commit:1", &silver_done, &none, 1),
        ("revenue_by_day/after-commit:1", &silver_done, &(vec![1], 0), 1),
        ("revenue_by_day/before-comment", &silver_done, &(vec![1], 0), 1),
    ] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
        ok(root, &["plan", "plans/march.toml", "-q"]);
        let crashed = run(root, &["apply", "--auto-approve", "-q"], &[("BF_FAULT", point)]);
        assert_eq!(
            crashed.status.code(),
            None,
            "{point}: aborted there: {}",
            String::from_utf8_lossy(&crashed.stderr)
        );
        assert_eq!(&applied(&silver), silver_at, "{point}: orders_silver at the crash");
        assert_eq!(&applied(&revenue), revenue_at, "{point}: revenue_by_day at the crash");
        // The change log is made by its first row.
        let log = root.join("bf-demo/warehouse/backfill_log");
        let rows = if log.exists() { rows_at(&log, None, "true").await.len() } else { 0 };
        assert_eq!(rows, logged, "{point}: change-log rows at the crash");
        // Publishing places revenue_by_day's files before its commit: at that point they are in
        // the table with the rehearsed bytes and no commit names them; before the slice, not there.
        let publication = &saved_plan(root)["downstream"][0]["slices"][0]["publication"];
        let adds = publication["adds"].as_array().unwrap().len();
        assert!(adds > 0, "{publication}");
        let expected = match point {
            "revenue_by_day/before-publish-commit:1" => (adds, 0),
            _ if revenue_at.0.is_empty() => (0, 0),
            _ => (adds, adds),
        };
        assert_eq!(
            crate::common::published_files_in(&revenue, publication),
            expected,
            "{point}: revenue_by_day's files to publish (in the table, named by a commit)"
        );

        let resumed = ok(root, &["apply", "--auto-approve"]);
        for (table, want) in [(SILVER, &want_silver), (REVENUE, &want_revenue)] {
            let table = root.join(table);
            assert_eq!(&rows_at(&table, None, "true").await, want, "{point}: {}", table.display());
            assert_eq!(slices_committed(&table), [1], "{point}: one slice commit in {}", table.display());
            assert_eq!(commits_with(&table, "comment"), 1, "{point}: one comment in {}", table.display());
        }
        assert!(resumed.contains("revenue_by_day"), "{point}: {resumed}");
        // A second reader (DuckDB's Delta extension, delta-kernel-rs) reads March by day as the
        // corrected landing files say.
        let expected: Vec<String> = march_by_day_from_csvs(root)
            .iter()
            .map(|(day, (revenue, orders))| format!("{day}|{revenue}|{orders}"))
            .collect();
        let read = duckdb_rows(&revenue, &format!("SELECT order_date, revenue, orders FROM t WHERE {MARCH}"));
        assert_eq!(read, expected, "{point}: revenue_by_day's March read by DuckDB");
        assert_eq!(duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {MARCH}")), 409, "{point}");
    }

    // Rolled back downstream first: crashed before orders_silver's RESTORE, revenue_by_day's is
    // already there; crashed before revenue_by_day's, neither is.
    let workspace = demo_workspace();
    let root = workspace.path();
    let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
    ok(root, &["plan", "plans/march.toml", "-q"]);
    ok(root, &["apply", "--auto-approve", "-q"]);
    let tables = [&*revenue, &*silver];
    assert_eq!(restores_at_crash(root, "revenue_by_day/rollback-before-restore", &tables), [0, 0]);
    assert_eq!(restores_at_crash(root, "orders_silver/rollback-before-restore", &tables), [1, 0]);
    ok(root, &["rollback", "--cascade", "--auto-approve"]);
    assert_eq!((restores(&revenue), restores(&silver)), (1, 1), "each table restored once");
    assert_eq!(rows_at(&silver, None, "true").await, rows_at(&silver, Some(5), "true").await);
    assert_eq!(rows_at(&revenue, None, "true").await, rows_at(&revenue, Some(4), "true").await);
    assert_eq!(
        duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {MARCH}")),
        412,
        "read by DuckDB"
    );
}

#[test]
fn one_notice_per_apply_and_per_rollback_with_the_numbers_and_never_the_url() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let receiver = Receiver::start(200);
    let hook = [("FINANCE_BACKFILL_WEBHOOK", receiver.url())];
    let env: Vec<(&str, &str)> = hook.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let planned = run(root, &["plan", "plans/march.toml"], &env);
    assert!(planned.status.success());
    let applied = run(root, &["apply", "--auto-approve"], &env);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let bodies = receiver.bodies();
    assert_eq!(bodies.len(), 1, "one POST per apply of the chain");
    let notice = &bodies[0];
    assert_eq!(notice["event"], "applied");
    assert_eq!(notice["owners"], serde_json::json!(["finance-analytics", "bi-dashboards"]));
    let tables = notice["tables"].as_array().unwrap();
    assert_eq!(
        tables.iter().map(|t| t["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["orders_silver", "revenue_by_day"]
    );
    assert_eq!((tables[0]["rows_before"].as_u64(), tables[0]["rows_after"].as_u64()), (Some(412), Some(409)));
    assert_eq!((tables[0]["from_version"].as_u64(), tables[0]["to_version"].as_u64()), (Some(5), Some(7)));
    let revenue_after: f64 = march_by_day_from_csvs(root).values().map(|(r, _)| r).sum();
    let metric = |t: &Value, name: &str| {
        t["metrics"].as_array().unwrap().iter().find(|m| m["name"] == name).cloned().unwrap()
    };
    assert!((metric(&tables[1], "revenue")["after"].as_f64().unwrap() - revenue_after).abs() < 0.005);
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("Backfill applied: orders_silver → revenue_by_day for 2026-03-01..2026-03-31"),
        "{text}"
    );
    assert!(text.contains("rows 412 → 409") && text.contains("bf rollback --cascade"), "{text}");
    let file = std::fs::read_to_string(root.join("bf-demo/notices/march-reload.md")).unwrap();
    assert!(file.contains("| `orders_silver` |") && file.contains("412 → 409"), "{file}");

    let rolled = run(root, &["rollback", "--cascade", "--auto-approve"], &env);
    assert!(rolled.status.success(), "{}", String::from_utf8_lossy(&rolled.stderr));
    let bodies = receiver.bodies();
    assert_eq!(bodies.len(), 2, "one more POST for the rollback");
    assert_eq!(bodies[1]["event"], "rolled_back");
    let undone = bodies[1]["tables"].as_array().unwrap();
    assert_eq!((undone[0]["rows_before"].as_u64(), undone[0]["rows_after"].as_u64()), (Some(409), Some(412)));
    assert_eq!((undone[0]["from_version"].as_u64(), undone[0]["to_version"].as_u64()), (Some(7), Some(9)));
    // The plan's numbers read the other way round: revenue_by_day back to the wrong March.
    let revenue = metric(&undone[1], "revenue");
    assert!((revenue["before"].as_f64().unwrap() - revenue_after).abs() < 0.005, "{revenue}");
    assert_eq!(revenue["after"], metric(&tables[1], "revenue")["before"]);
    assert!(receiver.requests().iter().all(|r| r.url == "/hooks/T0SECRET/B0SECRET"));
    for out in [&planned, &applied, &rolled] {
        let shown =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!shown.contains("SECRET"), "the webhook URL is never printed: {shown}");
    }
    assert!(!std::fs::read_to_string(root.join(".bf/plan.json")).unwrap().contains("SECRET"));
}

/// A webhook that answers 500, or is down: the backfill lands, exit 0, and the warning and the
/// notice are printed for passing on by hand.
#[tokio::test(flavor = "multi_thread")]
async fn a_notice_that_cannot_be_delivered_is_a_warning_never_an_undo() {
    let failing = Receiver::start(500);
    let down = {
        let gone = Receiver::start(200);
        gone.url()
    };
    for (url, why) in [(failing.url(), "it answered 500"), (down, "error sending request")] {
        let workspace = demo_workspace();
        let root = workspace.path();
        ok(root, &["plan", "plans/march.toml", "-q"]);
        let applied = run(root, &["apply", "--auto-approve"], &[("FINANCE_BACKFILL_WEBHOOK", &url)]);
        let stderr = String::from_utf8_lossy(&applied.stderr);
        assert_eq!(applied.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("Warning: notice NOT delivered to the webhook in FINANCE_BACKFILL_WEBHOOK"),
            "{stderr}"
        );
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(
            stderr.contains("The notice, to pass on by hand:") && stderr.contains("rows 412 → 409"),
            "{stderr}"
        );
        assert!(!stderr.contains("SECRET"), "{stderr}");
        assert_eq!(slices_committed(&root.join(SILVER)), [1]);
        assert_eq!(slices_committed(&root.join(REVENUE)), [1]);
        assert_eq!(rows_at(&root.join(SILVER), None, MARCH).await.len(), 409);
    }
    assert_eq!(failing.bodies().len(), 1, "the failing webhook was asked once");
}

/// A folder of plans for the validation tests: an upstream over `../warehouse/orders` and a
/// downstream over `../warehouse/daily` reading it, each changed by the test.
fn chain_plans(dir: &Path, upstream_extra: &str, downstream: &str) {
    let upstream = format!(
        "reason = \"Fix March.\"\n[target]\ntable = \"../warehouse/orders\"\ndate_column = \"order_date\"\n\
         [window]\nstart = 2026-03-01\nend = 2026-03-31\n[slicing]\nevery = \"month\"\n\
         [source]\ninputs.orders = {{ path = \"orders.csv\", format = \"csv\" }}\n\
         query = \"SELECT order_id, order_date FROM orders\"\n{upstream_extra}"
    );
    write_plan(dir, "up.toml", &upstream);
    write_plan(dir, "down.toml", downstream);
}

fn downstream_plan(table: &str, reads: &str, window: (&str, &str), extra: &str) -> String {
    format!(
        "reason = \"Rebuild daily.\"\n[target]\ntable = \"{table}\"\ndate_column = \"order_date\"\n\
         [window]\nstart = {}\nend = {}\n[slicing]\nevery = \"month\"\n\
         [source]\ninputs.up = {{ path = \"{reads}\", format = \"delta\" }}\n\
         query = \"SELECT order_date, COUNT(*) AS orders FROM up GROUP BY order_date\"\n{extra}",
        window.0, window.1
    )
}

#[test]
fn a_broken_chain_is_refused_by_validate_at_its_line() {
    let march = ("2026-03-01", "2026-03-31");
    let cases: [(&str, String, &str, &str); 5] = [
        ("[[downstream]]\nplan = \"missing.toml\"\n", String::new(), "does not exist", "missing.toml"),
        (
            "[[downstream]]\nplan = \"down.toml\"\n",
            downstream_plan(
                "../warehouse/daily",
                "../warehouse/orders",
                march,
                "[[downstream]]\nplan = \"up.toml\"\n",
            ),
            "a cycle",
            "down.toml",
        ),
        (
            "[[downstream]]\nplan = \"down.toml\"\n",
            downstream_plan("../warehouse/daily", "../warehouse/elsewhere", march, ""),
            "reads no table upstream of it",
            "down.toml",
        ),
        (
            "[[downstream]]\nplan = \"down.toml\"\n",
            downstream_plan("../warehouse/daily", "../warehouse/orders", ("2026-02-15", "2026-03-31"), ""),
            "is not inside this plan's window 2026-03-01..2026-03-31",
            "down.toml",
        ),
        (
            "[[downstream]]\nplan = \"down.toml\"\n",
            downstream_plan("../warehouse/orders", "../warehouse/orders", march, ""),
            "a table is backfilled once per chain",
            "down.toml",
        ),
    ];
    for (upstream_extra, downstream, message, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        chain_plans(dir.path(), upstream_extra, &downstream);
        let out = bf_in(dir.path()).args(["validate", "up.toml"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{message}: {stderr}");
        assert!(stderr.contains(message) && stderr.contains(named), "{message}: {stderr}");
        // The line of the `plan = ...` key that names the broken link: in the file that closes a
        // cycle, in the upstream file otherwise.
        let file = if message == "a cycle" { "down.toml" } else { "up.toml" };
        let line = plan_key_line(&dir.path().join(file));
        assert!(stderr.contains(&format!("{file}:{line}:")), "{message}: file:line in\n{stderr}");
    }
    // The chain as it should be validates, both files listed.
    let dir = tempfile::tempdir().unwrap();
    chain_plans(
        dir.path(),
        "[[downstream]]\nplan = \"down.toml\"\n",
        &downstream_plan("../warehouse/daily", "../warehouse/orders", march, ""),
    );
    let listed =
        String::from_utf8(bf_in(dir.path()).args(["validate", "up.toml"]).output().unwrap().stdout).unwrap();
    assert!(
        listed.contains("ok ") && listed.contains("downstream: ok ") && listed.contains("down.toml"),
        "{listed}"
    );
}

/// The 1-based line of `plan = ` in a plan file.
fn plan_key_line(file: &Path) -> usize {
    std::fs::read_to_string(file).unwrap().lines().position(|l| l.starts_with("plan = ")).unwrap() + 1
}

#[test]
fn a_plan_that_reads_the_table_but_is_not_downstream_is_warned_about() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let kpis = std::fs::read_to_string(root.join("plans/march-revenue-by-day.toml"))
        .unwrap()
        .replace("warehouse/revenue_by_day", "warehouse/weekly_kpis");
    write_plan(&root.join("plans"), "weekly-kpis.toml", &kpis);
    let out = run(root, &["plan", "plans/march.toml"], &[]);
    let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        shown.contains("weekly-kpis.toml reads orders_silver but is not downstream of this backfill"),
        "{shown}"
    );
    assert!(!shown.contains("march-revenue-by-day.toml reads orders_silver but"), "{shown}");
}

/// A downstream of a downstream: `big_days` (March's days over 600 EUR) is built from
/// `revenue_by_day`, rehearsed on its rehearsal, applied last and rolled back first.
#[tokio::test(flavor = "multi_thread")]
async fn a_chain_three_tables_deep_applies_in_order_and_rolls_back_from_the_bottom() {
    use bf::deltalake::kernel::{DataType, StructField};
    let workspace = demo_workspace();
    let root = workspace.path();
    let big = root.join("bf-demo/warehouse/big_days");
    crate::common::new_table(
        &big,
        vec![
            StructField::new("order_date", DataType::DATE, true),
            StructField::new("revenue", DataType::DOUBLE, true),
        ],
        &[],
    )
    .await;
    write_plan(
        &root.join("plans"),
        "march-big-days.toml",
        "reason = \"Days over 600 EUR, from revenue_by_day.\"\n[target]\ntable = \"../bf-demo/warehouse/big_days\"\n\
         date_column = \"order_date\"\n[window]\nstart = 2026-03-01\nend = 2026-03-31\n[slicing]\nevery = \"month\"\n\
         [source]\ninputs.daily = { path = \"../bf-demo/warehouse/revenue_by_day\", format = \"delta\" }\n\
         query = \"SELECT order_date, revenue FROM daily WHERE order_date BETWEEN $start AND $end AND revenue > 600\"\n",
    );
    let middle = root.join("plans/march-revenue-by-day.toml");
    let text = std::fs::read_to_string(&middle).unwrap();
    std::fs::write(&middle, format!("{text}\n[[downstream]]\nplan = \"march-big-days.toml\"\n")).unwrap();

    let shown = ok(root, &["plan", "plans/march.toml"]);
    assert!(shown.contains("── downstream of revenue_by_day: big_days ──"), "{shown}");
    let plan = saved_plan(root);
    let bottom = &plan["downstream"][0]["downstream"][0];
    assert_eq!(bottom["delta_inputs"][0]["stands_for"], plan["downstream"][0]["target"]["uri"]);
    ok(root, &["apply", "--auto-approve", "-q"]);
    let expected: Vec<String> = march_by_day_from_csvs(root)
        .into_iter()
        .filter(|(_, (revenue, _))| *revenue > 600.0)
        .map(|(day, (revenue, _))| format!("{day}|{revenue}"))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(python_sql_rows(&big, "order_date,revenue"), expected, "the corrected March's big days");

    // revenue_by_day alone, from its history: refused while big_days is built from it.
    let middle_id = plan["downstream"][0]["id"].as_str().unwrap().to_owned();
    let refused =
        run(root, &["rollback", "--auto-approve", "--table", REVENUE, "--backfill", &middle_id], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("revenue_by_day's backfill") && stderr.contains("big_days ("), "{stderr}");

    // Bottom-up: each crash before a table's RESTORE finds the tables below it restored and
    // those above not (read raw; commit timestamps in milliseconds could tie).
    let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
    let tables = [&*big, &*revenue, &*silver];
    assert_eq!(restores_at_crash(root, "big_days/rollback-before-restore", &tables), [0, 0, 0]);
    assert_eq!(restores_at_crash(root, "revenue_by_day/rollback-before-restore", &tables), [1, 0, 0]);
    assert_eq!(restores_at_crash(root, "orders_silver/rollback-before-restore", &tables), [1, 1, 0]);
    ok(root, &["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(tables.map(restores), [1, 1, 1], "each table restored once");
    assert!(rows_at(&big, None, "true").await.is_empty(), "big_days as it was: empty");
    assert_eq!(rows_at(&revenue, None, "true").await, rows_at(&revenue, Some(4), "true").await);
    assert_eq!(rows_at(&silver, None, "true").await, rows_at(&silver, Some(5), "true").await);
}

/// Rolling back only the table downstream (by its backfill, from the chain's folder) still tells
/// the chain's readers: the notice's destination comes from the saved chain, whose text cannot be
/// checked against a backfill of the upstream here — so against the plan file, unchanged.
#[test]
fn a_rollback_of_the_downstream_table_alone_still_sends_the_chains_notice() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let receiver = Receiver::start(200);
    let hook = [("FINANCE_BACKFILL_WEBHOOK", receiver.url())];
    let env: Vec<(&str, &str)> = hook.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert!(run(root, &["plan", "plans/march.toml", "-q"], &env).status.success());
    let applied = run(root, &["apply", "--auto-approve", "-q"], &env);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let revenue = root.join("bf-demo/warehouse/revenue_by_day");
    let backfill = crate::common::commit_infos(&revenue)
        .iter()
        .rev()
        .find_map(|(_, info)| info["bf.backfill_id"].as_str().map(str::to_owned))
        .unwrap();
    let rolled = run(
        root,
        &["rollback", "--table", revenue.to_str().unwrap(), "--backfill", &backfill, "--auto-approve"],
        &env,
    );
    assert!(rolled.status.success(), "{}", String::from_utf8_lossy(&rolled.stderr));
    let bodies = receiver.bodies();
    assert_eq!(bodies.len(), 2, "one POST for the apply, one for the rollback");
    assert_eq!(bodies[1]["event"], "rolled_back");
    let undone = bodies[1]["tables"].as_array().unwrap();
    assert_eq!(undone.iter().map(|t| t["name"].as_str().unwrap()).collect::<Vec<_>>(), ["revenue_by_day"]);
}
