//! Other writers: a stale plan refused, another writer beside the backfill or inside its window,
//! two applies at once, slices at once on a table partitioned by day.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_plan_is_refused_and_nothing_is_written() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let refused = |fragments: &[&str]| {
        let untouched = snapshot(&silver);
        let output = apply(root);
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        for fragment in fragments {
            assert!(stderr.contains(fragment), "missing {fragment:?} in:\n{stderr}");
        }
        assert_eq!(snapshot(&silver), untouched, "a refused apply wrote to the table");
    };

    // The plan file edited since `bf plan`: the diff is shown.
    plan(root, "plans/march.toml");
    let path = root.join("plans/march.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("revenue = 10", "revenue = 50")).unwrap();
    refused(&[
        "the plan file",
        "changed since `bf plan`",
        "-max_change_pct = { rows = 5, revenue = 10 }",
        "+max_change_pct = { rows = 5, revenue = 50 }",
        "Run `bf plan",
    ]);
    std::fs::write(&path, &text).unwrap();

    // An input changed.
    plan(root, "plans/march.toml");
    let csv = root.join("bf-demo/landing/orders_march.csv");
    let original = std::fs::read_to_string(&csv).unwrap();
    std::fs::write(&csv, original.replacen("EUR", "GBP", 1)).unwrap();
    refused(&["input `orders` changed since `bf plan`"]);
    std::fs::write(&csv, &original).unwrap();

    // Another writer added an order to March since the plan: the slice is not written, the commit
    // is named with the day it touches.
    plan(root, "plans/march.toml");
    let rows: [&[OrderRow]; 1] = [&[(9001, "C01", 1.0, "EUR", "2026-03-05")]];
    append_silver(&silver, rows[0]).await;
    refused(&[
        "slice 1 (2026-03-01..2026-03-31) was not written: since the plan, other commits touch its rows",
        "version 6: WRITE",
        "(rows dated 2026-03-05)",
        "No slice of this backfill is committed. Run `bf plan",
    ]);

    // A failed check.
    let strict = write_plan(
        &root.join("plans"),
        "strict.toml",
        &text.replace("WHERE amount <= 0", "WHERE amount > 0"),
    );
    bf_in(root).arg("plan").arg(&strict).arg("-q").assert().code(1);
    refused(&["this plan cannot be applied", "amounts are positive"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn four_slices_at_once_on_a_table_partitioned_by_day() {
    let dir = tempfile::tempdir().unwrap();
    let target = crate::common::four_days_at_once(dir.path()).await;
    bf_in(dir.path()).args(["plan", "days.toml", "-q"]).assert().success();
    let untouched_day = files_by_day(&target).await.get("2026-09-05").cloned();
    let output = bf_in(dir.path()).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut slices = slices_committed(&target);
    slices.sort();
    assert_eq!(slices, [1, 2, 3, 4], "all four slices committed");
    assert_eq!(count(&target, "SELECT count(*) FROM t").await, 5);
    assert_eq!(count(&target, "SELECT CAST(SUM(amount) AS BIGINT) FROM t").await, 11 + 30 + 40 + 50 + 20);
    assert_eq!(files_by_day(&target).await.get("2026-09-05").cloned(), untouched_day, "outside the window");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_outside_the_window_lands_beside_the_backfill() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let output =
        crate::common::apply_paused(root, &[], 5, "before", append_daily(&daily, 9001, "2026-10-01")).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        count(&daily, "SELECT count(*) FROM t").await,
        131,
        "130 backfilled and the other writer's order"
    );
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9001").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_inside_the_window_stops_the_apply_cleanly() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let output =
        crate::common::apply_paused(root, &[], 5, "before", append_daily(&daily, 9002, "2026-09-05")).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("slice 5 (2026-09-05) was not written: since the plan, other commits touch"),
        "{stderr}"
    );
    assert!(stderr.contains("version 5: WRITE") && stderr.contains("(rows dated 2026-09-05)"), "{stderr}");
    assert!(stderr.contains("The 4 slices of this backfill already committed stay recorded"), "{stderr}");
    assert!(!stderr.contains("run `bf apply` again to resume"), "no resume can write it: {stderr}");
    // Slices 1-4 stay, the other writer's row stays, nothing of slice 5 was written.
    assert_eq!(slices_committed(&daily), [1, 2, 3, 4]);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-09-05'").await, 1);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9002").await, 1);
    // Applying the old plan again is refused as stale: someone else wrote since it was made.
    bf_in(root)
        .args(["apply", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("version 5: WRITE"));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_applies_at_once_commit_each_slice_once() {
    let reference = demo_workspace();
    plan(reference.path(), "plans/september.toml");
    assert!(apply(reference.path()).status.success());
    let expected = rows_where(&reference.path().join("bf-demo/warehouse/orders_daily"), "true").await;

    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    // Both paused between slice 1's check and its commit, each on its own pause file, then released
    // together: they race for the same commit.
    let pauses = [root.join("paused-a"), root.join("paused-b")];
    let children: Vec<_> = pauses
        .iter()
        .map(|pause| {
            spawn_apply_saying(
                root,
                &[],
                &[
                    (bf::fault::PAUSE_FILE_ENV, pause.as_os_str()),
                    (bf::fault::PAUSE_SLICE_ENV, std::ffi::OsStr::new("1")),
                    (bf::fault::PAUSE_POINT_ENV, std::ffi::OsStr::new("after-check")),
                ],
            )
        })
        .collect();
    wait_for("both applies to reach slice 1", || pauses.iter().all(|p| p.exists()));
    assert!(slices_committed(&daily).is_empty(), "neither wrote before the release");
    let outputs = crate::common::release_together("both applies to reach slice 1", &pauses, children);
    // Both built slice 1's commit on the same version: one lands, the other finds it committed and
    // skips it; later slices may race the same way, each ending committed once.
    let stderrs: Vec<String> =
        outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect();
    for (out, stderr) in outputs.iter().zip(&stderrs) {
        assert!(out.status.success() || stderr.contains("conflicts with another writer"), "{stderr}");
    }
    let skipped = stderrs.iter().filter(|s| s.contains("skip 2026-09-01: already committed")).count();
    assert_eq!(skipped, 1, "exactly one lost slice 1 and found it committed: {stderrs:?}");
    let mut committed = slices_committed(&daily);
    committed.sort();
    assert_eq!(committed, (1..=30).collect::<Vec<u64>>(), "every slice committed exactly once");
    assert_eq!(commits_with(&daily, "comment"), 1, "one comment");
    assert_eq!(rows_where(&daily, "true").await, expected);
}

/// The table a plan read is dropped and created again at its place between plan and apply, or its
/// folder is restored from a backup taken before the plan: its version numbers are then another
/// history's, and the plan's pre-version would name rows nobody reviewed. The apply refuses before
/// it writes, saying which, whether the table made again is behind the plan's version or past it,
/// and whether the rewound log stops short of it or was written again past it. Not one byte of
/// the folder changes; the table the plan read, put back, applies.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_made_again_or_rewound_since_the_plan_is_refused_as_another_table() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let backup = root.join("backup");
    crate::corpus::copy_dir(&silver, &backup);
    // The version the plan reads is one after the backup's.
    append_silver(&silver, &[(9001, "C01", 1.0, "EUR", "2026-02-05")]).await;
    plan(root, "plans/march.toml");
    let pre_version = open_table(&silver).await.version().unwrap() as u64;
    let planned = root.join("planned");
    std::fs::rename(&silver, &planned).unwrap();
    let refused = |fragment: &str| {
        let untouched = snapshot(&silver);
        let output = apply(root);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("is not the one the plan was made against") && stderr.contains(fragment),
            "{stderr}"
        );
        assert!(stderr.contains("Nothing was written"), "{stderr}");
        assert_eq!(snapshot(&silver), untouched, "a refused apply wrote to the table");
        assert_eq!(slices_committed(&silver), Vec::<u64>::new());
    };

    // Made again by another job, with the same rows: another id, a log behind the plan's version.
    let other = tempfile::tempdir().unwrap();
    crate::common::bf().args(["demo", "--shop-only"]).arg(other.path()).assert().success();
    std::fs::rename(other.path().join("warehouse/orders_silver"), &silver).unwrap();
    assert!((open_table(&silver).await.version().unwrap() as u64) < pre_version);
    refused("(it was dropped and created again, or replaced)");
    // Written on past the plan's version: still another table.
    for day in ["2026-02-06", "2026-02-07", "2026-02-08"] {
        append_silver(&silver, &[(9002, "C02", 2.0, "EUR", day)]).await;
    }
    assert!((open_table(&silver).await.version().unwrap() as u64) > pre_version);
    refused("(it was dropped and created again, or replaced)");

    // The backup restored: the same id, its log ending before the plan's version.
    std::fs::remove_dir_all(&silver).unwrap();
    crate::corpus::copy_dir(&backup, &silver);
    refused(&format!(
        "its log ends at version {}, before version {pre_version} the plan read",
        pre_version - 1
    ));
    // And written again: the plan's version is another commit now.
    append_silver(&silver, &[(9003, "C03", 3.0, "EUR", "2026-02-05")]).await;
    assert_eq!(open_table(&silver).await.version().unwrap() as u64, pre_version);
    refused(&format!("its version {pre_version} is another commit than the one the plan read"));

    // The table the plan read, put back: applied.
    std::fs::remove_dir_all(&silver).unwrap();
    std::fs::rename(&planned, &silver).unwrap();
    let output = apply(root);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(slices_committed(&silver), [1]);
}

/// Two backfills of one table, planned side by side over days of their own, each with its own
/// rehearsal: the comment that ends the first one's apply changes no row and no column, so the
/// second applies (it was refused as "changes the table's schema or properties"). Its own rows are
/// the rehearsal's, and the first one's are still there.
#[tokio::test(flavor = "multi_thread")]
async fn another_backfills_comment_does_not_make_a_plan_stale() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let september = std::fs::read_to_string(root.join("plans/september.toml")).unwrap();
    for (name, start, end) in [("early", "2026-09-01", "2026-09-10"), ("late", "2026-09-20", "2026-09-30")] {
        let text = september
            .replace("start = 2026-09-01", &format!("start = {start}"))
            .replace("end = 2026-09-30", &format!("end = {end}"))
            + &format!("\n[rehearsal]\ntable = \"../bf-demo/warehouse/orders_daily__{name}\"\n");
        write_plan(&root.join("plans"), &format!("{name}.toml"), &text);
        let out = root.join(format!("{name}.json"));
        bf_in(root).args(["plan", &format!("plans/{name}.toml"), "-q", "--out"]).arg(&out).assert().success();
    }
    bf_in(root).args(["apply", "early.json", "--auto-approve", "-q"]).assert().success();
    let output = bf_in(root).args(["apply", "late.json", "--auto-approve"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let days = |sql: &str| crate::common::duckdb_count(&daily, sql);
    assert_eq!(days("SELECT count(DISTINCT order_date) FROM t WHERE order_date <= DATE '2026-09-10'"), 10);
    assert_eq!(days("SELECT count(DISTINCT order_date) FROM t WHERE order_date >= DATE '2026-09-20'"), 11);
    assert_eq!(
        days("SELECT count(*) FROM t WHERE order_date BETWEEN DATE '2026-09-11' AND DATE '2026-09-19'"),
        0
    );
}
