//! Crashes, kills and reruns: each resume lands on the same table, each slice exactly once.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_point_resumes_to_the_same_table() {
    let expected = september_uninterrupted().await;

    // Each point, with the slices the table holds when the process dies there.
    for (point, at_crash) in [
        ("before-slice:1", 0),
        ("after-commit:1", 1),
        ("before-slice:7", 6),
        ("after-commit:16", 16),
        ("after-commit:30", 30),
        ("before-comment", 30),
    ] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let daily = root.join("bf-demo/warehouse/orders_daily");
        plan(root, "plans/september.toml");
        let crashed =
            bf_in(root).args(["apply", "--auto-approve"]).env(bf::fault::FAULT_ENV, point).output().unwrap();
        assert!(!crashed.status.success(), "{point}: the process was meant to die");
        assert_eq!(slices_committed(&daily), (1..=at_crash).collect::<Vec<u64>>(), "{point}: where it died");
        assert_eq!(commits_with(&daily, "comment"), 0, "{point}: no comment before the last slice");
        let resumed = apply(root);
        assert!(resumed.status.success(), "{point}: {}", String::from_utf8_lossy(&resumed.stderr));
        // A resume that writes only the comment still finishes the backfill: not "already applied".
        let said = String::from_utf8_lossy(&resumed.stdout);
        assert!(said.contains("Applied backfill") && !said.contains("is already applied"), "{point}: {said}");
        assert_eq!(contents(&daily).await, expected, "{point}: the resumed table differs");
        assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "{point}: read by DuckDB");
        assert_eq!(
            slices_committed(&daily),
            (1..=30).collect::<Vec<u64>>(),
            "{point}: every slice exactly once"
        );
        assert_eq!(commits_with(&daily, "comment"), 1, "{point}: one comment");
        let infos = commit_infos(&daily);
        let backfills: BTreeSet<&str> =
            infos.iter().filter_map(|(_, i)| i.get("bf.backfill_id")?.as_str()).collect();
        assert_eq!(backfills.len(), 1, "{point}: the resume continued the same backfill");
    }
}

/// A resume takes a slice as committed only when the commit that names it carries the slice's own
/// Delta transaction: a commit whose commitInfo merely claims slice 4 (copied by a tool that copies
/// commit properties, or by hand) does not make bf skip slice 4.
#[tokio::test(flavor = "multi_thread")]
async fn a_resume_skips_only_the_slices_whose_commits_carry_their_transactions() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let crashed = bf_in(root)
        .args(["apply", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "after-commit:3")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    let infos = commit_infos(&daily);
    let (third, info) = infos.iter().find(|(_, i)| i["bf.slice"] == 3).unwrap().clone();
    let raw = std::fs::read_to_string(daily.join(format!("_delta_log/{third:020}.json"))).unwrap();
    assert!(raw.contains("\"txn\""), "bf's slice commit carries its transaction:\n{raw}");
    let mut claim = info.clone();
    claim["bf.slice"] = 4.into();
    claim["bf.slice_first"] = "2026-09-04".into();
    claim["bf.slice_last"] = "2026-09-04".into();
    let next = infos.last().unwrap().0 + 1;
    std::fs::write(
        daily.join(format!("_delta_log/{next:020}.json")),
        serde_json::json!({ "commitInfo": claim }).to_string() + "\n",
    )
    .unwrap();
    let resumed = apply(root);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.starts_with("skip ")).collect();
    assert_eq!(skipped.len(), 3, "slices 1 to 3 are skipped, the claimed 4th is written:\n{stderr}");
    let written: Vec<u64> = commit_infos(&daily)
        .iter()
        .filter(|(v, i)| *v > next && i.get("bf.slice").is_some())
        .filter_map(|(_, i)| i["bf.slice"].as_u64())
        .collect();
    assert_eq!(written, (4..=30).collect::<Vec<u64>>());
    let expected = september_uninterrupted().await;
    assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "read by DuckDB");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_mid_run_resumes_to_the_same_table() {
    let expected = september_uninterrupted().await;
    // Killed once the log shows this many slices: early, middle, late in the slice loop. The kill
    // follows the table, not a clock, so it lands mid-apply on a fast machine and a slow one.
    for after in [1usize, 12, 24] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let daily = root.join("bf-demo/warehouse/orders_daily");
        plan(root, "plans/september.toml");
        let mut child = spawn_apply(root, &[]);
        wait_for(&format!("{after} slices"), || slices_committed(&daily).len() >= after);
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        let at_kill = slices_committed(&daily).len();
        assert!(!status.success(), "after {after} slices: the apply finished before the kill");
        assert!(
            (after..30).contains(&at_kill),
            "the kill after {after} slices landed at {at_kill} of 30: not mid-apply"
        );
        let resumed = apply(root);
        assert!(resumed.status.success(), "after {after}: {}", String::from_utf8_lossy(&resumed.stderr));
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("skip ")).count(),
            at_kill,
            "the resume skips what the killed run committed:\n{stderr}"
        );
        assert_eq!(contents(&daily).await, expected, "after {after}");
        assert_eq!(slices_committed(&daily), (1..=30).collect::<Vec<u64>>(), "after {after}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rerun_all_applies_every_slice_again_under_a_new_backfill_id() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    assert!(apply(root).status.success());
    let first = rows_where(&daily, "true").await;
    let output = bf_in(root).args(["apply", "--auto-approve", "--rerun", "all", "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(report["backfill_id"], format!("{}-r2", saved["id"].as_str().unwrap()));
    // The version to go back to is the rerun's own: the first run's table, not the plan's version.
    assert_eq!(report["pre_version"], 31, "the first run's last commit");
    assert_eq!(report["post_version"], 62, "31 commits of the first run, 31 of the rerun");
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 30);
    assert!(slices.iter().all(|s| s["status"] == "committed"));
    assert_eq!(rows_where(&daily, "true").await, first, "replacing a day with the same rows changes nothing");
}
