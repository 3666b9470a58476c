//! The ledger read strictly: a malformed `bf.*` key is an error naming the commit, never a default;
//! backfills are told apart by commit order, not by name; a rollback is exactly once; and every
//! verb's `--json` prints one JSON document and nothing else.

use std::path::Path;

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{bf_in, commit_infos, demo_workspace, slices_committed, snapshot};

/// Rewrites the commitInfo of `version` in the table's log with `edit` (a hand edit, another tool).
fn edit_commit_info(table: &Path, version: u64, edit: impl Fn(&mut serde_json::Map<String, Value>)) {
    let path = table.join(format!("_delta_log/{version:020}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut action: Value = serde_json::from_str(line).unwrap();
            if let Some(info) = action.get_mut("commitInfo").and_then(Value::as_object_mut) {
                edit(info);
            }
            action.to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_malformed_pre_version_is_an_error_naming_the_commit_never_version_0() {
    for (what, edit) in [
        (
            "missing",
            Box::new(|i: &mut serde_json::Map<String, Value>| drop(i.remove("bf.pre_version")))
                as Box<dyn Fn(&mut serde_json::Map<String, Value>)>,
        ),
        (
            "not a number",
            Box::new(|i: &mut serde_json::Map<String, Value>| {
                i.insert("bf.pre_version".into(), Value::from("five"));
            }),
        ),
    ] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let silver = root.join("bf-demo/warehouse/orders_silver");
        bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
        bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
        // Version 6 is the March slice; the comment commit (7) keeps its keys.
        edit_commit_info(&silver, 6, &edit);
        let untouched = snapshot(&silver);
        let output = bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
        assert!(
            stderr.contains("version 6 of the table carries bf keys that bf cannot read"),
            "{what}: {stderr}"
        );
        assert!(stderr.contains("`bf.pre_version`"), "{what}: {stderr}");
        assert_eq!(snapshot(&silver), untouched, "{what}: a refused rollback wrote nothing");
        // The history still shows every commit, the unreadable one marked.
        bf_in(root)
            .args(["history", "bf-demo/warehouse/orders_silver"])
            .assert()
            .success()
            .stdout(predicate::str::contains("unreadable bf keys"));
    }
}

#[test]
fn the_tenth_rerun_resumes_itself_not_the_ninth() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let two_days = crate::common::september_plan(root, "two.toml", 2, |text| text);
    bf_in(root).args(["plan", &two_days, "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    for _ in 2..=9 {
        bf_in(root).args(["apply", "--auto-approve", "-q", "--rerun", "all"]).assert().success();
    }
    // The tenth dies after its first slice; `-r10` sorts before `-r9` as text.
    bf_in(root)
        .args(["apply", "--auto-approve", "-q", "--rerun", "all"])
        .env(bf::fault::FAULT_ENV, "after-commit:1")
        .assert()
        .failure();
    let output = bf_in(root).args(["apply", "--auto-approve", "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["backfill_id"].as_str().unwrap().ends_with("-r10"), "{report}");
    let statuses: Vec<&str> =
        report["slices"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["skipped", "committed"], "the resume wrote only the tenth run's missing slice");
    assert_eq!(slices_committed(&daily).len(), 2 * 10, "ten backfills of two slices");
}

/// The March reload applied (versions 6 and 7), then a rollback that crashed after its RESTORE
/// (version 8), before its comment.
fn march_rollback_crashed_after_its_restore(root: &Path) {
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "orders_silver/rollback-before-comment")
        .assert()
        .failure();
}

#[test]
fn a_rollback_that_crashed_after_its_restore_only_writes_the_comment_when_rerun() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    march_rollback_crashed_after_its_restore(root);
    assert_eq!(commit_infos(&silver).len(), 9, "versions 0-8: the RESTORE (8) committed, the comment not");
    let output = bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("It wrote versions 6–7 (2 commits) after version 5."),
        "its own RESTORE is not the backfill's: {stderr}"
    );
    assert!(stderr.contains("An earlier rollback of it committed version 8 and stopped"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("wrote version 9"));
    let operations: Vec<String> = commit_infos(&silver)
        .iter()
        .map(|(_, i)| i["operation"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        operations.iter().filter(|o| *o == "RESTORE").count(),
        1,
        "one RESTORE for one rollback: {operations:?}"
    );
    assert_eq!(operations.len(), 10, "and only the comment after it");
}

/// The RESTORE of a rollback that crashed before its comment, its `bf.pre_version` removed by
/// hand: the rerun must read each step of this backfill's rollback to know what to skip, so it
/// stops naming the commit and the key, and writes nothing.
#[test]
fn an_earlier_rollback_step_with_an_unreadable_key_stops_the_rerun_naming_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    march_rollback_crashed_after_its_restore(root);
    edit_commit_info(&silver, 8, |info| drop(info.remove("bf.pre_version")));
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("version 8 of the table carries bf keys that bf cannot read"), "{stderr}");
    assert!(stderr.contains("`bf.pre_version`"), "{stderr}");
    assert_eq!(snapshot(&silver), untouched, "nothing written");
}

/// The September backfill's first two days applied to `orders_daily`, then a window-only rollback
/// that crashed after putting back the first; returns the table.
fn two_days_and_a_window_only_rollback_crashed_after_the_first(root: &Path) -> std::path::PathBuf {
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let two_days = crate::common::september_plan(root, "two.toml", 2, |text| text);
    bf_in(root).args(["plan", &two_days, "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    bf_in(root)
        .args(["rollback", "--window-only", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "rollback-after-commit:1")
        .assert()
        .failure();
    daily
}

/// A window-only rollback of two September days that crashed after its first day, then a full
/// rollback: its RESTORE and its comment are both written — the window-only step before them is
/// neither — and the table's comment says the backfill was rolled back.
#[test]
fn a_full_rollback_after_a_crashed_window_only_one_writes_its_restore_and_its_comment() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = two_days_and_a_window_only_rollback_crashed_after_the_first(root);
    let crashed = commit_infos(&daily).len();
    bf_in(root).args(["rollback", "--auto-approve"]).assert().success();
    let written: Vec<Value> = commit_infos(&daily).into_iter().skip(crashed).map(|(_, info)| info).collect();
    let operations: Vec<&str> = written.iter().map(|i| i["operation"].as_str().unwrap()).collect();
    assert_eq!(operations.len(), 2, "the RESTORE and the comment: {written:?}");
    assert_eq!(operations[0], "RESTORE");
    assert!(written.iter().all(|i| i.get("bf.rollback_of").is_some()), "{written:?}");
    let comment =
        crate::common::latest_metadata(&daily)["description"].as_str().unwrap_or_default().to_owned();
    assert!(comment.contains("rolled back"), "{comment}");
}

/// A window-only rollback of two September days that crashed after putting back the first: the
/// rerun puts back the second only, each day once, known by its transaction.
#[test]
fn a_window_only_rollback_that_crashed_after_a_slice_puts_back_only_the_rest_when_rerun() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = two_days_and_a_window_only_rollback_crashed_after_the_first(root);
    bf_in(root).args(["rollback", "--window-only", "--auto-approve"]).assert().success();
    let put_back: Vec<u64> =
        commit_infos(&daily).iter().filter_map(|(_, info)| info.get("bf.rollback_slice")?.as_u64()).collect();
    assert_eq!(put_back, [1, 2], "each day put back once, in order");
}

#[test]
fn a_rollback_is_not_finished_over_a_window_that_changed_since_its_restore() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    march_rollback_crashed_after_its_restore(root);
    // Someone brings the backfill's rows back (version 7: the slice and the comment) before the rerun.
    bf_in(root).args(["rollback", "--auto-approve", "--to-version", "7"]).assert().success();
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("was rolled back at version 8, but the window has changed since"), "{stderr}");
    // Named in the error itself, not only in what the rollback showed before it.
    let error = &stderr[stderr.find("but the window has changed since").unwrap()..];
    assert!(error.contains("version 9: RESTORE"), "the commit since is named: {stderr}");
    assert_eq!(snapshot(&silver), untouched, "nothing written");
}

/// Each verb with `--json`, run in a workspace where it has something to say: stdout must parse as
/// exactly one JSON document (serde_json refuses trailing text).
#[test]
fn every_json_flag_prints_one_json_document_and_nothing_else() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let json = |args: &[&str]| {
        let output = bf_in(root).args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<Value>(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: stdout is not one JSON document ({e}):\n{}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    };
    json(&["slices", "plans/march.toml", "--json"]);
    json(&["plan", "plans/march.toml", "--json"]);
    json(&["show", "--json"]);
    json(&["status", "--json"]);
    let applied = json(&["apply", "plans/march.toml", "--auto-approve", "--json"]);
    assert_eq!(applied["slices"][0]["status"], "committed");
    json(&["status", "--json"]);
    json(&["history", "bf-demo/warehouse/orders_silver", "--json"]);
    let rolled = json(&["rollback", "--cascade", "--auto-approve", "--json"]);
    assert_eq!(rolled["restored_version"], 5);
    json(&["apply", "plans/september.toml", "--auto-approve", "--json", "-q"]);
}

/// Versions come from the log's file names, never from counting commits down from the latest: a
/// commit without commitInfo (some writers write none) used to shift the version of every commit
/// before it, so the ledger named the wrong commit for a slice.
#[test]
fn a_commit_without_commit_info_shifts_no_version() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let infos = commit_infos(&silver);
    let (comment, _) = infos.iter().rev().find(|(_, info)| info.get("bf.comment").is_some()).unwrap().clone();
    let next = infos.last().unwrap().0 + 1;
    // A commit holding only an application transaction, as a streaming writer's checkpoint may.
    std::fs::write(
        silver.join(format!("_delta_log/{next:020}.json")),
        "{\"txn\":{\"appId\":\"another-writer\",\"version\":1}}\n",
    )
    .unwrap();
    let out = bf_in(root).args(["history", silver.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let history: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(history[0]["version"], next, "the newest is the commit without commitInfo");
    let commented = history.iter().find(|e| e["bf"]["comment"] == true).unwrap();
    assert_eq!(commented["version"], comment, "the comment keeps its own version");
}

/// A table's log holds years of commits, a request each in a bucket; what a plan's backfill needs
/// follows the version it was planned at. Here the silver table has a long history (the demo's six
/// commits and 40 of the daily job's), opened from a checkpoint as a long-lived table is, and its
/// oldest commits are made unreadable: a tripwire for any read from the table's first commit.
/// Status, apply, rollback (by the saved plan, and by the backfill's id alone, read back from the
/// newest commit) and planning again over the rehearsal never touch them; `bf history`, which
/// shows everything, trips.
#[tokio::test(flavor = "multi_thread")]
async fn a_backfill_reads_the_log_from_its_plan_on_not_the_tables_whole_history() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    crate::common::append_outside_march(&silver, 40).await;
    let table = crate::common::open_table(&silver).await;
    bf::deltalake::checkpoints::create_checkpoint(&table, None).await.unwrap();
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["target"]["pre_version"], 45, "the demo's six commits, then the daily job's 40");
    for version in 0..=5 {
        std::fs::write(silver.join(format!("_delta_log/{version:020}.json")), "a tripwire, not a commit\n")
            .unwrap();
    }

    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    bf_in(root)
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("done: every slice committed and the comment set"));
    bf_in(root)
        .args(["rollback", "--cascade", "--auto-approve"])
        .assert()
        .success()
        .stdout(predicate::str::contains("equal to version 45"));
    let backfill = commit_infos(&silver)
        .into_iter()
        .find_map(|(_, info)| info.get("bf.backfill_id")?.as_str().map(str::to_owned))
        .unwrap();
    bf_in(root)
        .args(["rollback", "--table", "bf-demo/warehouse/orders_silver", "--backfill", &backfill])
        .arg("--auto-approve")
        .assert()
        .success()
        .stdout(predicate::str::contains("already rolled back"));
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();

    bf_in(root)
        .args(["history", "bf-demo/warehouse/orders_silver"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("of the table's log cannot be read"));
}
