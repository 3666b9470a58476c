//! `bf rollback`, `bf history`, `bf status`, `bf clean`: the undo button and the ledger, and what
//! each of them leaves alone.

use std::path::Path;

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{
    append_outside_march, bf_in, demo_workspace, duckdb_count, duckdb_rows, open_table, snapshot,
};

use crate::common::rows_at as rows;

const MARCH: &str = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";

fn plan_and_apply(root: &Path) -> String {
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    saved["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_restores_the_pre_version_and_records_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let before_read_by_duckdb = duckdb_rows(&silver, "SELECT * FROM t");
    let id = plan_and_apply(root);
    assert_ne!(rows(&silver, None, MARCH).await, rows(&silver, Some(5), MARCH).await);
    assert_ne!(duckdb_rows(&silver, "SELECT * FROM t"), before_read_by_duckdb);
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .success()
        .stdout(predicate::str::contains("equal to version 5"));
    assert_eq!(
        rows(&silver, None, "true").await,
        rows(&silver, Some(5), "true").await,
        "row by row, the pre-version"
    );
    // A second reader, DuckDB's Delta extension (delta-kernel-rs), reads the pre-version's rows.
    assert_eq!(duckdb_rows(&silver, "SELECT * FROM t"), before_read_by_duckdb, "read by DuckDB");
    let table = open_table(&silver).await;
    assert_eq!(table.version(), Some(9), "RESTORE and its comment after the backfill's two commits");
    let description = table.snapshot().unwrap().metadata().description().unwrap().to_owned();
    assert!(description.starts_with(&format!("Backfill {id} rolled back on ")), "{description}");
    let history: Value = serde_json::from_slice(
        &bf_in(root)
            .args(["history", "bf-demo/warehouse/orders_silver", "--json", "--limit", "2"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(history[1]["version"], 8);
    assert_eq!(history[1]["operation"], "RESTORE");
    assert_eq!(history[1]["bf"]["rollback_of"], id.as_str());
    assert_eq!(history[1]["bf"]["pre_version"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn after_another_writer_only_the_window_can_be_rolled_back() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let march_read_by_duckdb = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));
    plan_and_apply(root);
    append_outside_march(&silver, 1).await;
    let untouched = snapshot(&silver);
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("a full RESTORE would silently discard them"))
        .stderr(predicate::str::contains("version 8: WRITE"))
        .stderr(predicate::str::contains("--window-only"));
    assert_eq!(snapshot(&silver), untouched, "a refused rollback wrote nothing");
    bf_in(root).args(["rollback", "--cascade", "--window-only", "--auto-approve"]).assert().success();
    assert_eq!(
        rows(&silver, None, MARCH).await,
        rows(&silver, Some(5), MARCH).await,
        "March is as before the backfill"
    );
    assert_eq!(rows(&silver, None, "order_id = 9001").await.len(), 1, "the other writer's row stays");
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), march_read_by_duckdb);
    assert_eq!(duckdb_count(&silver, "SELECT count(*) FROM t WHERE order_id = 9001"), 1, "read by DuckDB");
    let outside = "order_date NOT BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    assert_eq!(
        rows(&silver, None, outside).await,
        rows(&silver, Some(8), outside).await,
        "nothing outside March moved"
    );
}

/// A RESTORE loses nobody's work by undoing maintenance: a real OPTIMIZE (files rewritten with
/// `dataChange: false`) does not block the full rollback. But a commit is not maintenance because
/// it says "OPTIMIZE": another writer's order appended outside March, its commit named OPTIMIZE,
/// blocks it like any other write — before, the RESTORE discarded the order, silently.
#[tokio::test(flavor = "multi_thread")]
async fn only_an_optimize_that_changed_no_row_is_maintenance_a_restore_may_undo() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    let (_, metrics) = open_table(&silver).await.optimize().await.unwrap();
    assert!(metrics.num_files_removed > 0, "the OPTIMIZE compacted files");
    bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).assert().success();
    assert_eq!(rows(&silver, None, MARCH).await, rows(&silver, Some(5), MARCH).await, "March as before");

    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    append_outside_march(&silver, 1).await;
    let commit = silver.join("_delta_log/00000000000000000008.json");
    let text = std::fs::read_to_string(&commit).unwrap();
    assert!(text.contains("\"operation\":\"WRITE\""), "{text}");
    std::fs::write(&commit, text.replace("\"operation\":\"WRITE\"", "\"operation\":\"OPTIMIZE\"")).unwrap();
    let untouched = snapshot(&silver);
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("a full RESTORE would silently discard them"))
        .stderr(predicate::str::contains("version 8: OPTIMIZE"));
    assert_eq!(snapshot(&silver), untouched, "a refused rollback wrote nothing");
    assert_eq!(duckdb_count(&silver, "SELECT count(*) FROM t WHERE order_id = 9001"), 1, "the order stays");
}

/// A table lives for years and its schema moves: another writer adds a column after the backfill
/// (an ALTER TABLE ADD COLUMNS, by the Python package). The full rollback is refused — a RESTORE
/// would drop the column — and the window-only one puts March back as the pre-version held it, the
/// new column NULL in its rows, everything outside March as the other writer left it. Before, it
/// stopped at its first slice on a raw Arrow error ("number of fields does not match"), and only
/// `--to-version`, dropping the column, was left.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_another_writer_added_after_the_backfill_does_not_stop_the_window_only_rollback() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let march_before = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));
    plan_and_apply(root);
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\nfrom deltalake.schema import Field\n\
             DeltaTable({:?}).alter.add_columns([Field('note', 'string', nullable=True)])",
            silver.to_str().unwrap()
        ),
        &[],
    );
    let outside = "order_date NOT BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    let outside_before = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {outside}"));
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("a full RESTORE would silently discard them"));
    let output =
        bf_in(root).args(["rollback", "--cascade", "--window-only", "--auto-approve"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let columns = "order_id, customer, amount, currency, amount_eur, order_date";
    assert_eq!(
        duckdb_rows(&silver, &format!("SELECT {columns} FROM t WHERE {MARCH}")),
        march_before,
        "March as the pre-version held it"
    );
    assert_eq!(
        duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {MARCH} AND note IS NOT NULL")),
        0
    );
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {outside}")), outside_before);
}

/// Another writer deletes an April order after the March reload, on a table not partitioned by the
/// day: its commit removes a file whose action names no days (deltalake and Spark write removes
/// without statistics). That is no write inside March: the file's add says it held April only. So
/// the window-only rollback needs no `--force` (which would also override real writes inside the
/// window), puts March back, and the deleted order stays deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_delete_outside_the_window_is_no_write_inside_it_for_a_window_only_rollback() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let march_before = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));
    plan_and_apply(root);
    let april =
        duckdb_rows(&silver, "SELECT order_id FROM t WHERE order_date = DATE '2026-04-10' ORDER BY 1");
    assert!(!april.is_empty());
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\nDeltaTable({:?}).delete(\"order_id = {}\")",
            silver.to_str().unwrap(),
            april[0]
        ),
        &[],
    );
    let removes: Vec<Value> = std::fs::read_dir(silver.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let text = std::fs::read_to_string(&path)
                .ok()
                .filter(|_| path.extension().is_some_and(|e| e == "json"))?;
            text.contains("\"DELETE\"").then_some(text)
        })
        .flat_map(|text| text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).collect::<Vec<_>>())
        .filter_map(|action| action.get("remove").cloned())
        .collect();
    assert!(!removes.is_empty() && removes.iter().all(|r| r.get("stats").is_none()), "{removes:?}");
    bf_in(root).args(["rollback", "--cascade", "--window-only", "--auto-approve"]).assert().success();
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), march_before);
    let deleted = format!("SELECT count(*) FROM t WHERE order_id = {}", april[0]);
    assert_eq!(duckdb_count(&silver, &deleted), 0, "the other writer's delete stays");
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_after_vacuum_is_refused_and_touches_nothing() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let id = plan_and_apply(root);
    open_table(&silver)
        .await
        .vacuum()
        .with_retention_period(chrono::Duration::zero())
        .with_enforce_retention_duration(false)
        .await
        .unwrap();
    let untouched = snapshot(&silver);
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve", "--backfill", &id])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("version 5 of"))
        .stderr(predicate::str::contains("VACUUM removed"))
        .stderr(predicate::str::contains("delta.deletedFileRetentionDuration"));
    assert_eq!(snapshot(&silver), untouched, "byte for byte");
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_from_anywhere_with_the_table_and_the_backfill_id() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let id = plan_and_apply(root);
    let elsewhere = tempfile::tempdir().unwrap();
    bf_in(elsewhere.path())
        .args(["rollback", "--cascade", "--auto-approve", "--backfill", &id, "--table"])
        .arg(&silver)
        .assert()
        .success();
    assert!(!elsewhere.path().join(".bf").exists());
    assert_eq!(rows(&silver, None, "true").await, rows(&silver, Some(5), "true").await);
    bf_in(elsewhere.path())
        .args(["rollback", "--auto-approve", "--backfill", "no-such-backfill", "--table"])
        .arg(&silver)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no commit of"));
}

#[tokio::test(flavor = "multi_thread")]
async fn history_lists_every_commit_with_the_ledger() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let id = plan_and_apply(root);
    let output = bf_in(root).args(["history", "bf-demo/warehouse/orders_silver", "--json"]).output().unwrap();
    assert!(output.status.success());
    let history: Value = serde_json::from_slice(&output.stdout).unwrap();
    let entries = history.as_array().unwrap();
    let logs = std::fs::read_dir(root.join("bf-demo/warehouse/orders_silver/_delta_log"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(entries.len(), logs, "one entry per commit");
    let versions: Vec<u64> = entries.iter().map(|e| e["version"].as_u64().unwrap()).collect();
    assert_eq!(versions, (0..logs as u64).rev().collect::<Vec<_>>(), "newest first");
    for entry in entries {
        for key in ["version", "timestamp", "operation", "predicate", "rows_written", "bf"] {
            assert!(entry.get(key).is_some(), "{key} missing in {entry}");
        }
    }
    assert_eq!(entries[1]["operation"], "WRITE");
    assert_eq!(entries[1]["rows_written"], 409);
    assert_eq!(entries[1]["bf"]["backfill_id"], id.as_str());
    assert_eq!(entries[1]["bf"]["slice"], 1);
    assert_eq!(entries[1]["bf"]["date_column"], "order_date", "what a rollback puts back by");
    assert_eq!(entries[0]["bf"]["comment"], true);
    let text =
        bf_in(root).args(["history", "bf-demo/warehouse/orders_silver", "--limit", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("UPDATE TABLE METADATA") && text.contains("order_date >= '2026-03-01'::date"),
        "{text}"
    );
    assert!(!text.contains("CREATE TABLE"), "--limit 2 shows two commits:\n{text}");
}

#[test]
fn status_follows_an_interrupted_apply() {
    let workspace = demo_workspace();
    let root = workspace.path();
    bf_in(root).args(["plan", "plans/september.toml", "-q"]).assert().success();
    bf_in(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("not applied yet: 0 of 30 slices committed"));
    bf_in(root)
        .args(["apply", "--auto-approve", "-q"])
        .env(bf::fault::FAULT_ENV, "before-slice:4")
        .assert()
        .failure();
    bf_in(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("3 of 30 slices committed"))
        .stdout(predicate::str::contains("pending: 2026-09-04, 2026-09-05"));
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    bf_in(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("done: every slice committed and the comment set"));
}

#[test]
fn clean_deletes_rehearsals_only() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let warehouse = root.join("bf-demo/warehouse");
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    let rehearsal = warehouse.join("orders_silver__rehearsal");
    assert!(rehearsal.is_dir());
    bf_in(root).arg("clean").assert().success().stdout(predicate::str::contains("no rehearsal to delete"));
    assert!(rehearsal.is_dir(), "the saved plan is not applied: its rehearsal is still needed");
    let silver = warehouse.join("orders_silver");
    let untouched = snapshot(&silver);
    // The real table is refused, even named explicitly.
    bf_in(root)
        .arg("clean")
        .arg(&silver)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a bf rehearsal"));
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let applied = snapshot(&silver);
    bf_in(root).arg("clean").assert().success().stdout(predicate::str::contains("deleted"));
    assert!(!rehearsal.exists());
    assert_eq!(snapshot(&silver), applied, "the rehearsal's references into the target were not followed");
    assert_ne!(applied, untouched);

    // The September daily backfill applied one day of thirty: its other days publish from it.
    bf_in(root).args(["plan", "plans/september.toml", "-q"]).assert().success();
    let rehearsal = warehouse.join("orders_daily__rehearsal");
    bf_in(root).args(["apply", "--auto-approve", "-q", "--slice", "1"]).assert().success();
    bf_in(root).arg("clean").assert().success().stdout(predicate::str::contains("no rehearsal to delete"));
    assert!(rehearsal.is_dir(), "one slice applied: the rehearsal is still needed");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_inside_the_window_needs_force_and_to_version_restores_any_version() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    // Another writer corrects a March order after the backfill.
    let table = open_table(&silver).await;
    let (table, _) =
        table.update().with_predicate("order_id = 780").with_update("amount", "99.0").await.unwrap();
    assert_eq!(table.version(), Some(8));
    let untouched = snapshot(&silver);
    bf_in(root)
        .args(["rollback", "--cascade", "--window-only", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("other writers wrote inside the window"))
        .stderr(predicate::str::contains("version 8: UPDATE"))
        .stderr(predicate::str::contains("--force"));
    assert_eq!(snapshot(&silver), untouched);
    bf_in(root)
        .args(["rollback", "--cascade", "--window-only", "--force", "--auto-approve"])
        .assert()
        .success();
    assert_eq!(rows(&silver, None, MARCH).await, rows(&silver, Some(5), MARCH).await);
    // An explicit version, from the table alone.
    bf_in(root)
        .args([
            "rollback",
            "--to-version",
            "3",
            "--auto-approve",
            "--table",
            "bf-demo/warehouse/orders_silver",
        ])
        .assert()
        .success();
    assert_eq!(rows(&silver, None, "true").await, rows(&silver, Some(3), "true").await);
}

/// A rollback's question may wait minutes for its answer. What it weighed before asking is read
/// again after the answer: a May order appended while the full rollback asks is not discarded by
/// the RESTORE (refused, the order kept, March still the backfill's), and an UPDATE of a March order
/// while the window-only rollback asks is not overwritten (refused, the new amount kept). Each
/// outcome read by DuckDB.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_landing_while_the_rollback_asks_is_weighed_after_the_answer() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    let backfilled = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));

    let (code, said) =
        crate::common::answered_after(root, "rollback --cascade", "yes", append_outside_march(&silver, 1))
            .await;
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("a full RESTORE would silently discard them"), "{said}");
    assert_eq!(
        duckdb_count(&silver, "SELECT count(*) FROM t WHERE order_id = 9001"),
        1,
        "the May order stays"
    );
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), backfilled);

    let update = async {
        let table = open_table(&silver).await;
        table.update().with_predicate("order_id = 780").with_update("amount", "99.0").await.unwrap();
    };
    let (code, said) =
        crate::common::answered_after(root, "rollback --cascade --window-only", "yes", update).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("other writers wrote inside the window"), "{said}");
    assert_eq!(
        duckdb_rows(&silver, "SELECT amount FROM t WHERE order_id = 780"),
        ["99.0"],
        "the update stays"
    );
}

/// Two rollbacks of one backfill (#68, hole 1): A shows its plan and waits for its answer; B
/// (`--auto-approve`) restores and comments; the daily job appends a May order; A is answered "yes".
/// A finds the backfill rolled back by B and writes nothing: one RESTORE in the log, the May order
/// kept (read by DuckDB), March the pre-version's.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_answered_after_another_rolled_the_backfill_back_restores_nothing_again() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let march_before = rows(&silver, None, MARCH).await;
    plan_and_apply(root);
    let meanwhile = async {
        bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).assert().success();
        append_outside_march(&silver, 1).await;
    };
    let (code, said) = crate::common::answered_after(root, "rollback --cascade", "yes", meanwhile).await;
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        duckdb_count(&silver, "SELECT count(*) FROM t WHERE order_id = 9001"),
        1,
        "the May order appended after the first rollback stays: {said}"
    );
    let restores = crate::common::commit_infos(&silver)
        .iter()
        .filter(|(_, info)| info["operation"] == "RESTORE")
        .count();
    assert_eq!(restores, 1, "one RESTORE for one backfill: {said}");
    assert_eq!(rows(&silver, None, MARCH).await, march_before);
}

/// After a rollback the saved plan's backfill is not "already applied": its commits are in the log,
/// its rows are not in the table. `bf apply` of it is refused, naming the rollback and the way out,
/// and writes nothing; planned again, the reload applies again (read by DuckDB).
#[tokio::test(flavor = "multi_thread")]
async fn applying_a_rolled_back_backfill_again_is_refused_with_the_way_out() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    let backfilled = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));
    bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).assert().success();
    let rolled_back = snapshot(&silver);
    bf_in(root)
        .args(["apply", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("of this plan was rolled back at version"))
        .stderr(
            predicate::str::contains("run `bf plan").and(predicate::str::contains("plans/march.toml` again")),
        )
        // One command moves on; a resume would be refused the same way.
        .stderr(predicate::str::contains("run `bf apply` again").not());
    assert_eq!(snapshot(&silver), rolled_back, "the refused apply wrote nothing");
    assert_ne!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), backfilled);
    plan_and_apply(root);
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), backfilled, "applied again");
}

/// Another job reloads the whole table after the backfill (an overwrite without a predicate, which
/// removes March's files with the rest): a window-only rollback would bring March's rows back over
/// that reload. A remove of a file holding window days is a write inside the window: refused
/// without `--force`, nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_overwrite_of_the_whole_table_is_a_write_inside_the_window() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan_and_apply(root);
    let at = crate::common::overwrite_with_a_may_order(&silver).await;
    let reloaded = snapshot(&silver);
    bf_in(root)
        .args(["rollback", "--cascade", "--window-only", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("other writers wrote inside the window"))
        .stderr(predicate::str::contains(format!("version {at}: WRITE")));
    assert_eq!(snapshot(&silver), reloaded, "the refused rollback wrote nothing");
    assert_eq!(
        duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {MARCH}")),
        0,
        "March stays reloaded away"
    );
}

/// A `--rerun all` backfill is undone on its own: rolling it back puts back the first apply's
/// March (its pre-version is the version it started at, not the plan's), and the first apply then
/// rolls back in its turn to the March before both (read by DuckDB).
#[tokio::test(flavor = "multi_thread")]
async fn a_rerun_rolls_back_to_the_first_apply_and_the_first_apply_after_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let before = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}"));
    let first = plan_and_apply(root);
    let applied = crate::common::commit_files(&silver).last().unwrap().0;
    bf_in(root).args(["apply", "--auto-approve", "-q", "--rerun", "all"]).assert().success();
    bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).assert().success();
    assert_eq!(
        rows(&silver, None, MARCH).await,
        rows(&silver, Some(applied), MARCH).await,
        "the rerun undone: the first apply's March"
    );
    bf_in(root).args(["rollback", "--cascade", "--auto-approve", "--backfill", &first]).assert().success();
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {MARCH}")), before, "both undone");
}

/// Two backfills of one table on days apart (August 1–3, then August 10–12), then the first rolled
/// back inside its window. Its rollback is a commit after the second's: the second's full RESTORE
/// would take it away and bring the first backfill's rows back, so it is refused, nothing written;
/// the second rolled back inside its own window leaves August 1–3 rolled back.
#[test]
fn a_restore_never_undoes_an_earlier_backfills_rollback_committed_after() {
    use crate::second_hour::{august, bf, said, workspace};
    let (dir, table) = workspace();
    let root = dir.path();
    let days = |first: &str, last: &str| {
        august("pay_date", "payment_id", "")
            .replace("start = 2026-08-01", &format!("start = 2026-08-{first}"))
            .replace("end = 2026-08-29", &format!("end = 2026-08-{last}"))
    };
    std::fs::write(root.join("plans/first.toml"), days("01", "03")).unwrap();
    std::fs::write(root.join("plans/second.toml"), days("10", "12")).unwrap();
    let ok = |args: &[&str]| {
        let out = bf(root, args);
        assert!(out.status.success(), "{args:?}: {}", said(&out));
    };
    ok(&["plan", "plans/first.toml", "-q"]);
    ok(&["apply", "--auto-approve"]);
    ok(&["plan", "plans/second.toml", "-q", "--state-dir", "second"]);
    ok(&["apply", "--auto-approve", "--state-dir", "second"]);
    ok(&["rollback", "--auto-approve", "--window-only"]);
    // Tenths of the amount, read by DuckDB: cents ×10, or euros ×10.
    let amount = |id: i64| {
        let sql = format!("SELECT CAST(amount * 10 AS BIGINT) FROM t WHERE payment_id = {id}");
        crate::common::duckdb_count(&table, &sql)
    };
    assert_eq!(
        (amount(610), amount(700)),
        (71500, 805),
        "the first rolled back to cents; the second in euros"
    );

    let untouched = crate::common::snapshot(&table);
    let refused = bf(root, &["rollback", "--auto-approve", "--state-dir", "second"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert_eq!(crate::common::snapshot(&table), untouched, "nothing written");
    ok(&["rollback", "--auto-approve", "--window-only", "--state-dir", "second"]);
    assert_eq!((amount(610), amount(700)), (71500, 80500), "both rolled back, each in its window");
}

/// `orders` as its first commit holds them — what Spark's `CREATE TABLE AS SELECT` and a first
/// `write_deltalake` make — written by the Python `deltalake` package: order id, amount and day
/// each (customer `C<id>`, EUR).
fn written_in_one_commit(table: &Path, orders: &[(i64, f64, &str)]) {
    let column = |values: Vec<String>| values.join(", ");
    crate::common::servers::python(
        &format!(
            "import deltalake, pyarrow as pa, datetime as d\n\
             t = pa.table({{'order_id': [{}], 'customer': [{}], 'amount': [{}], 'currency': ['EUR'] * {},\n\
               'order_date': [{}]}})\n\
             deltalake.write_deltalake({:?}, t)\n",
            column(orders.iter().map(|o| o.0.to_string()).collect()),
            column(orders.iter().map(|o| format!("'C{}'", o.0)).collect()),
            column(orders.iter().map(|o| format!("{:?}", o.1)).collect()),
            orders.len(),
            column(orders.iter().map(|o| format!("d.date.fromisoformat('{}')", o.2)).collect()),
            table.to_str().unwrap()
        ),
        &[],
    );
}

/// A table whose first commit holds its rows — what Spark's `CREATE TABLE AS SELECT` and a first
/// `write_deltalake` make — has its backfills' pre-version at 0. A backfill of 40 daily slices
/// there is more than the rollback's first look back reads (32 commits): it finds the backfill's
/// last slices there, reads on back to version 0, and puts the window back as version 0 held it,
/// the daily job's orders since kept (read by DuckDB).
#[tokio::test(flavor = "multi_thread")]
async fn a_backfill_whose_pre_version_is_the_tables_first_commit_rolls_back_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("orders");
    written_in_one_commit(
        &table,
        &[(1, 10.0, "2026-05-01"), (2, 20.0, "2026-05-01"), (3, 30.0, "2026-05-02"), (4, 40.0, "2026-05-03")],
    );
    let all = "SELECT order_id, amount FROM t ORDER BY order_id";
    let created = duckdb_rows(&table, all);
    std::fs::write(
        root.join("may.csv"),
        "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-05-01\n2,C2,22.0,EUR,2026-05-01\n\
         3,C3,33.0,EUR,2026-05-02\n4,C4,44.0,EUR,2026-05-03\n",
    )
    .unwrap();
    crate::common::write_plan(
        root,
        "may.toml",
        "reason = \"The amounts were net.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
         key = [\"order_id\"]\n[window]\nstart = 2026-05-01\nend = 2026-06-09\n[slicing]\nevery = \"day\"\n\
         [source]\ninputs.fixed = { path = \"may.csv\", format = \"csv\" }\n\
         query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM fixed\"\n",
    );
    bf_in(root).args(["plan", "may.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(duckdb_rows(&table, all), ["1|11.0", "2|22.0", "3|33.0", "4|44.0"]);
    assert_eq!(crate::common::slices_committed(&table).len(), 40);
    let info = &crate::common::commit_infos(&table)[1].1;
    assert_eq!(info["bf.pre_version"], 0, "{info}");
    let daily: Vec<crate::common::OrderRow> =
        (0..5).map(|i| (100 + i, "C9", 5.0, "EUR", "2026-07-01")).collect();
    for order in &daily {
        crate::common::append_orders(&table, std::slice::from_ref(order)).await;
    }
    bf_in(root)
        .args(["rollback", "--window-only", "--auto-approve"])
        .assert()
        .success()
        .stdout(predicate::str::contains("equal to version 0"));
    let mut expected: Vec<String> =
        created.into_iter().chain((100..105).map(|id| format!("{id}|5.0"))).collect();
    expected.sort();
    assert_eq!(
        duckdb_rows(&table, all),
        expected,
        "version 0's May and the daily job's July, read by DuckDB"
    );
}

/// The rollback's verification tells rows apart by how many times each is there: a day that held
/// order 1 twice and order 2 once, backfilled to order 1 once and order 2 twice, is not the
/// pre-version's though it has as many rows and the same distinct ones. With the comparison made to
/// read the backfilled table (`BF_FAULT=rollback-verify`), the rollback says so.
#[test]
fn the_rollbacks_verification_counts_each_rows_copies() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("orders");
    written_in_one_commit(
        &table,
        &[(1, 10.0, "2026-05-01"), (1, 10.0, "2026-05-01"), (2, 20.0, "2026-05-01")],
    );
    std::fs::write(
        root.join("may.csv"),
        "order_id,customer,amount,currency,order_date\n1,C1,10.0,EUR,2026-05-01\n2,C2,20.0,EUR,2026-05-01\n\
         2,C2,20.0,EUR,2026-05-01\n",
    )
    .unwrap();
    crate::common::write_plan(
        root,
        "may.toml",
        "reason = \"The copies were of the wrong order.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
         [window]\nstart = 2026-05-01\nend = 2026-05-01\n[slicing]\nevery = \"day\"\n\
         [source]\ninputs.fixed = { path = \"may.csv\", format = \"csv\" }\n\
         query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM fixed\"\n",
    );
    bf_in(root).args(["plan", "may.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let all = "SELECT order_id FROM t ORDER BY order_id";
    assert_eq!(duckdb_rows(&table, all), ["1", "2", "2"]);
    let output = bf_in(root)
        .args(["rollback", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "rollback-verify")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("after the rollback, the window differs from version 0"), "{stderr}");
    // Without the fault, the same rollback verifies: the window is version 0's, copies and all.
    bf_in(root).args(["rollback", "--auto-approve"]).assert().success();
    assert_eq!(duckdb_rows(&table, all), ["1", "1", "2"]);
}

/// Another writer commits while a rollback waits between its checks and its RESTORE (an April
/// order, outside the window). The RESTORE is committed on exactly the version checked or not at
/// all: the rollback stops saying another writer committed, writes nothing, and the April order
/// stays; run again, it weighs that commit like any other (and refuses the full rollback over it).
/// Red when the RESTORE is made on the table read again after the check; the RESTORE's
/// `with_max_retries(0)` alone is not what holds it (deltalake does not rebase a RESTORE either).
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_landing_between_a_rollbacks_check_and_its_restore_stops_it() {
    use crate::common::{append_orders, march_orders_plan, orders_table, write_plan};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in [".git", "plans", "landing"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    let table = root.join("warehouse/orders");
    orders_table(
        &table,
        false,
        &[&[(1, "C01", 10.0, "USD", "2026-03-02"), (2, "C02", 20.0, "USD", "2026-04-02")]],
    )
    .await;
    std::fs::write(
        root.join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n1,C01,9.0,EUR,2026-03-02\n",
    )
    .unwrap();
    let plan = march_orders_plan(
        "inputs.orders = { path = \"../landing/orders.csv\", format = \"csv\" }\n\
         query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders\"",
    );
    write_plan(&root.join("plans"), "march.toml", &plan);
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let applied = snapshot(&table);

    let out = crate::common::rollback_paused_before_restore(root, async {
        assert_eq!(snapshot(&table), applied, "nothing restored yet");
        append_orders(&table, &[(3, "C03", 30.0, "EUR", "2026-04-20")]).await;
    })
    .await;
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("another writer committed to") && said.contains("nothing was written"), "{said}");
    assert_eq!(duckdb_count(&table, "SELECT count(*) FROM t WHERE order_id = 3"), 1, "the April order stays");
    let restores =
        crate::common::commit_infos(&table).iter().filter(|(_, info)| info["operation"] == "RESTORE").count();
    assert_eq!(restores, 0, "no RESTORE committed");
    bf_in(root)
        .args(["rollback", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--window-only"));
}
