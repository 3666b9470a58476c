//! Crashes at every fault point of apply and rollback: each crash lands exactly where its name says
//! (the commits in the table at the crash prove it), and after a rerun the table is what an
//! uninterrupted run leaves, no commit is written twice, and the ledger is complete.

use std::path::Path;

use serde_json::Value;

use crate::common::{bf_in, commit_infos, demo_workspace};

/// September's first six days: six slices keep each run short.
fn week_plan(root: &Path) {
    let week = crate::common::september_plan(root, "week.toml", 6, |text| text);
    bf_in(root).args(["plan", &week, "-q"]).assert().success();
}

async fn contents(table: &Path) -> Vec<String> {
    crate::common::rows_at(table, None, "true").await
}

/// What the table's log holds of bf's work, read raw: apply slices, apply comments, RESTOREs of a
/// rollback, rollback comments, window-only rollback slices.
#[derive(Debug, PartialEq)]
struct Landed {
    slices: Vec<u64>,
    comments: usize,
    restores: usize,
    rollback_comments: usize,
    rollback_slices: Vec<u64>,
}

fn landed(table: &Path) -> Landed {
    let infos: Vec<Value> = commit_infos(table).into_iter().map(|(_, info)| info).collect();
    let apply = |i: &&Value| i.get("bf.backfill_id").is_some();
    let rollback = |i: &&Value| i.get("bf.rollback_of").is_some();
    let number = |i: &Value, k: &str| i.get(k).and_then(Value::as_u64);
    Landed {
        slices: infos.iter().filter(apply).filter_map(|i| number(i, "bf.slice")).collect(),
        comments: infos.iter().filter(apply).filter(|i| i.get("bf.comment").is_some()).count(),
        restores: infos.iter().filter(rollback).filter(|i| i["operation"] == "RESTORE").count(),
        rollback_comments: infos.iter().filter(rollback).filter(|i| i.get("bf.comment").is_some()).count(),
        rollback_slices: infos
            .iter()
            .filter(rollback)
            .filter_map(|i| number(i, "bf.rollback_slice"))
            .collect(),
    }
}

fn upto(n: u64) -> Vec<u64> {
    (1..=n).collect()
}

/// Every crash point of a six-slice apply and of both kinds of rollback, with what the table must
/// hold at the crash.
fn all_points() -> Vec<(String, Landed)> {
    let applied = |slices: u64, comments| Landed {
        slices: upto(slices),
        comments,
        restores: 0,
        rollback_comments: 0,
        rollback_slices: Vec::new(),
    };
    let rolled = |restores, rollback_comments, rollback_slices: u64| Landed {
        restores,
        rollback_comments,
        rollback_slices: upto(rollback_slices),
        ..applied(6, 1)
    };
    let mut points = Vec::new();
    for slice in 1..=6 {
        points.push((format!("before-slice:{slice}"), applied(slice - 1, 0)));
        // The slice's files placed in the table, not yet committed: unreferenced files only.
        points.push((format!("before-publish-commit:{slice}"), applied(slice - 1, 0)));
        points.push((format!("after-commit:{slice}"), applied(slice, 0)));
        points.push((format!("rollback-before-slice:{slice}"), rolled(0, 0, slice - 1)));
        points.push((format!("rollback-after-commit:{slice}"), rolled(0, 0, slice)));
    }
    points.push(("before-comment".into(), applied(6, 0)));
    points.push(("rollback-before-restore".into(), rolled(0, 0, 0)));
    points.push(("rollback-before-comment".into(), rolled(1, 0, 0)));
    points
}

#[tokio::test(flavor = "multi_thread")]
async fn crashes_at_every_point_of_apply_and_rollback_land_there_and_are_recovered() {
    let reference = demo_workspace();
    week_plan(reference.path());
    bf_in(reference.path()).args(["apply", "--auto-approve", "-q"]).assert().success();
    let applied = contents(&reference.path().join("bf-demo/warehouse/orders_daily")).await;
    assert_eq!(applied.len(), 4 + 5 + 5 + 4 + 4 + 5, "orders of 1 to 6 September");

    let points = all_points();
    assert_eq!(points.len(), 33);
    for (point, at_crash) in &points {
        let rollback = point.starts_with("rollback");
        // The slice points belong to a window-only rollback; the others to a full one.
        let window_only = rollback && (point.contains("slice") || point.contains("after-commit"));
        let mut undo = vec!["rollback", "--auto-approve"];
        if window_only {
            undo.push("--window-only");
        }
        if rollback {
            let workspace = demo_workspace();
            let root = workspace.path();
            let daily = root.join("bf-demo/warehouse/orders_daily");
            week_plan(root);
            bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
            bf_in(root).args(&undo).env(bf::fault::FAULT_ENV, point).assert().failure();
            assert_eq!(&landed(&daily), at_crash, "{point}: where the crash landed");
            let rerun = bf_in(root).args(&undo).output().unwrap();
            assert!(rerun.status.success(), "{point}: {}", String::from_utf8_lossy(&rerun.stderr));
            if !window_only {
                // The window's rows before the RESTORE, read at the version it was built on, also
                // when an earlier run made the RESTORE.
                let said = String::from_utf8_lossy(&rerun.stdout);
                let rows = format!("(0 rows in the window, {} before the rollback)", applied.len());
                assert!(said.contains(&rows), "{point}: {said}");
            }
            assert!(contents(&daily).await.is_empty(), "{point}: the rollback ends at the empty pre-version");
            let done = if window_only {
                Landed { rollback_slices: upto(6), ..landed_applied() }
            } else {
                Landed { restores: 1, rollback_comments: 1, ..landed_applied() }
            };
            assert_eq!(
                landed(&daily),
                done,
                "{point}: the rerun finished the rollback, writing nothing twice"
            );
            // A third run finds it done and writes nothing.
            let versions = commit_infos(&daily).len();
            bf_in(root).args(&undo).assert().success();
            assert_eq!(commit_infos(&daily).len(), versions, "{point}: a finished rollback writes nothing");
        } else {
            // Publishing (the default), and running the slices' queries again: the same guarantees.
            for recompute in [false, true] {
                if recompute && point.starts_with("before-publish-commit") {
                    continue;
                }
                let workspace = demo_workspace();
                let root = workspace.path();
                let daily = root.join("bf-demo/warehouse/orders_daily");
                week_plan(root);
                let mut apply = vec!["apply", "--auto-approve", "-q"];
                if recompute {
                    apply.push("--recompute");
                }
                bf_in(root).args(&apply).env(bf::fault::FAULT_ENV, point).assert().failure();
                assert_eq!(
                    &landed(&daily),
                    at_crash,
                    "{point}, recompute {recompute}: where the crash landed"
                );
                if !recompute {
                    assert_eq!(
                        published_at_crash(root, &daily, point),
                        expected_published(root, point),
                        "{point}: the slice's rehearsed files (in the table, named by a commit)"
                    );
                }
                bf_in(root).args(&apply).assert().success();
                assert_eq!(contents(&daily).await, applied, "{point}, recompute {recompute}");
                assert_eq!(landed(&daily), landed_applied(), "{point}: each slice and the comment once");
            }
        }
    }
    eprintln!("{} crash points recovered", points.len());
}

/// The slice a point names (`before-slice:3` → 3), if it names one.
fn slice_of(point: &str) -> Option<usize> {
    point.rsplit_once(':')?.1.parse().ok()
}

/// For a point naming slice N: of slice N's rehearsed files (as the saved plan records them), how
/// many are in the table with the rehearsed bytes, and how many a commit names.
fn published_at_crash(root: &Path, table: &Path, point: &str) -> Option<(usize, usize)> {
    let slice = slice_of(point)?;
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    Some(crate::common::published_files_in(table, &plan["slices"][slice - 1]["publication"]))
}

/// What [`published_at_crash`] must find: nothing before the slice; after `before-publish-commit`
/// every file placed and none committed (the one thing that tells it from `before-slice`); after
/// the commit, every file placed and committed.
fn expected_published(root: &Path, point: &str) -> Option<(usize, usize)> {
    let slice = slice_of(point)?;
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let adds = plan["slices"][slice - 1]["publication"]["adds"].as_array().unwrap().len();
    assert!(adds > 0, "slice {slice} publishes files");
    Some(match point.split(':').next().unwrap() {
        "before-slice" => (0, 0),
        "before-publish-commit" => (adds, 0),
        _ => (adds, adds),
    })
}

fn landed_applied() -> Landed {
    Landed { slices: upto(6), comments: 1, restores: 0, rollback_comments: 0, rollback_slices: Vec::new() }
}

/// Corruptions made on purpose at the point each check guards: the check must stop bf, naming the
/// slice, with exit 1. A check nobody ever saw fire proves nothing.
#[tokio::test(flavor = "multi_thread")]
async fn each_corruption_is_caught_by_the_check_that_guards_against_it() {
    // The reconcile: the rehearsal's slice 2 (2 September, 5 orders) loses a row on the way.
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    crate::common::september_plan(root, "week.toml", 6, |text| text);
    let output = bf_in(root)
        .args(["plan", "plans/week.toml", "--json", "-q"])
        .env(bf::fault::FAULT_ENV, "drop-row:2")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    let failed: Vec<&Value> =
        plan["checks"].as_array().unwrap().iter().filter(|c| c["passed"] == false).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!((failed[0]["kind"].as_str(), failed[0]["slice"].as_u64()), (Some("reconcile"), Some(2)));
    assert!(plan["problems"][0].as_str().unwrap().contains("check `reconcile` failed on slice 2"), "{plan}");
    bf_in(root).args(["apply", "--auto-approve"]).assert().code(1);
    assert!(slices_of(&daily).is_empty(), "a plan that failed its reconcile is not applied");
    // Its problems erased from the saved plan, the failed check it records still refuses it.
    crate::common::refused_with_its_problems_erased(root, &daily, "check `reconcile` failed on slice 2");
    assert!(slices_of(&daily).is_empty(), "nor with its problems erased");

    // Apply's verification, recomputing: the real table's slice 2 loses a row; slice 1 stays,
    // nothing after it.
    bf_in(root).args(["plan", "plans/week.toml", "-q"]).assert().success();
    let output = bf_in(root)
        .args(["apply", "--auto-approve", "--recompute"])
        .env(bf::fault::FAULT_ENV, "drop-row:2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "slice 2 (2026-09-02): the table holds 4 rows of it after the commit, but the rehearsal held 5"
        ),
        "{stderr}"
    );
    assert_eq!(slices_of(&daily), [1, 2], "it stopped at the slice that failed verification");

    // The rollback's verification: its comparison sees a row the pre-version lacks.
    let output = bf_in(root)
        .args(["rollback", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "rollback-verify")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // The rows of slice 1 (4) and what slice 2 kept (4): the version before the RESTORE.
    assert!(
        stderr.contains("after the rollback, the window differs from version 0: 8 rows that were not there"),
        "{stderr}"
    );
}

/// Publishing checks every file it placed in the table against the checksum the plan recorded,
/// before the commit: a copy that is not the rehearsed file is never committed.
#[tokio::test(flavor = "multi_thread")]
async fn a_published_copy_that_is_not_the_rehearsed_file_is_not_committed() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    crate::common::september_plan(root, "week.toml", 6, |text| text);
    // The publish's checksum: the copy of slice 2's file in the table is not the rehearsed file;
    // slice 1 stays, and slice 2 is not committed.
    bf_in(root).args(["plan", "plans/week.toml", "-q"]).assert().success();
    let output = bf_in(root)
        .args(["apply", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "corrupt-published:2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("slice 2 (2026-09-02) was not published")
            && stderr.contains("its copy in the target is not the rehearsed file"),
        "{stderr}"
    );
    assert_eq!(slices_of(&daily), [1], "it stopped before committing the slice whose copy differs");
    // Published again, the slices land as rehearsed.
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(slices_of(&daily), [1, 2, 3, 4, 5, 6]);
}

/// On a disk, the next slice's files are read while a slice commits, and that reading stands for the
/// published file only while nothing wrote to it. A rehearsed file written over in place (same size,
/// same inode, so the table's hard link would carry the new bytes) after it was read ahead is checked
/// again once placed, and its slice is not committed.
#[tokio::test(flavor = "multi_thread")]
async fn a_rehearsed_file_written_over_after_it_was_read_ahead_is_not_published() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let week = crate::common::september_plan(root, "week.toml", 6, |text| text);
    bf_in(root).args(["plan", &week, "--out", "week.json", "-q"]).assert().success();
    let saved: Value = serde_json::from_slice(&std::fs::read(root.join("week.json")).unwrap()).unwrap();
    let rehearsal =
        url::Url::parse(saved["rehearsal"]["uri"].as_str().unwrap()).unwrap().to_file_path().unwrap();
    let third = saved["slices"].as_array().unwrap().iter().find(|s| s["index"] == 3).unwrap();
    let file = rehearsal.join(third["publication"]["adds"][0]["path"].as_str().unwrap());
    // Files changed within the last tick of the filesystem's clock (two seconds, for one that keeps
    // whole seconds) are never read ahead: past it, slice 3's file is read while slice 2 commits.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let output = crate::common::apply_paused(root, &["week.json"], 3, "before", async {
        let mut bytes = std::fs::read(&file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        use std::io::{Seek, Write};
        let mut over = std::fs::File::options().write(true).open(&file).unwrap();
        over.seek(std::io::SeekFrom::Start(middle as u64)).unwrap();
        over.write_all(&bytes[middle..=middle]).unwrap();
    })
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("slice 3 (2026-09-03) was not published")
            && stderr.contains("its copy in the target is not the rehearsed file"),
        "{stderr}"
    );
    assert_eq!(slices_of(&daily), [1, 2], "slices 1 and 2 only; the written-over file is in no commit");
    let committed = std::fs::read_dir(daily.join("_delta_log")).unwrap().filter_map(|e| {
        let name = e.unwrap().file_name().into_string().unwrap();
        name.ends_with(".json").then(|| std::fs::read_to_string(daily.join("_delta_log").join(name)).unwrap())
    });
    let name = file.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(committed.into_iter().all(|log| !log.contains(&name)), "{name} is in no commit of the table");
}

fn slices_of(table: &Path) -> Vec<u64> {
    crate::common::slices_committed(table)
}
