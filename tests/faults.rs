//! Crashes at seeded points of apply and rollback: after a rerun, the table is what an uninterrupted
//! run leaves, no slice is committed twice, and the ledger is complete.

use std::path::Path;

use crate::common::{bf_in, demo_workspace, open_table};

/// How many crash points a run tries, and the seed that picks them.
const POINTS: usize = 20;
const SEED: u64 = 0x5eed_0b0f;

/// September's first six days: six slices keep each run short.
fn week_plan(root: &Path) {
    let september = std::fs::read_to_string(root.join("plans/september.toml")).unwrap();
    std::fs::write(root.join("plans/week.toml"), september.replace("end = 2026-09-30", "end = 2026-09-06"))
        .unwrap();
    bf_in(root).args(["plan", "plans/week.toml", "-q"]).assert().success();
}

async fn contents(table: &Path) -> Vec<String> {
    crate::common::rows_at(table, None, "true").await
}

/// The bf key `key` of every commit that has it, oldest first.
async fn recorded(table: &Path, key: &str) -> Vec<u64> {
    bf::ledger::commits_after(&open_table(table).await, 0)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| e.bf.get(key)?.as_u64())
        .collect()
}

/// Every crash point of a six-slice apply and of both kinds of rollback.
fn all_points() -> Vec<String> {
    let mut points = Vec::new();
    for slice in 1..=6 {
        points.push(format!("before-slice:{slice}"));
        points.push(format!("after-commit:{slice}"));
        points.push(format!("rollback-before-slice:{slice}"));
        points.push(format!("rollback-after-commit:{slice}"));
    }
    points.extend(["before-comment", "rollback-before-restore", "rollback-before-comment"].map(String::from));
    points
}

/// A fixed-seed shuffle (xorshift64): the same points on every run, any of them on a new seed.
fn pick(mut points: Vec<String>, count: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in (1..points.len()).rev() {
        points.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    points.truncate(count);
    points
}

#[tokio::test(flavor = "multi_thread")]
async fn crashes_at_seeded_points_of_apply_and_rollback_are_recovered() {
    let reference = demo_workspace();
    week_plan(reference.path());
    bf_in(reference.path()).args(["apply", "--auto-approve", "-q"]).assert().success();
    let applied = contents(&reference.path().join("bf-demo/warehouse/orders_daily")).await;
    assert_eq!(applied.len(), 4 + 5 + 5 + 4 + 4 + 5, "orders of 1 to 6 September");

    let points = pick(all_points(), POINTS, SEED);
    assert_eq!(points.len(), POINTS);
    for point in &points {
        let workspace = demo_workspace();
        let root = workspace.path();
        let daily = root.join("bf-demo/warehouse/orders_daily");
        week_plan(root);
        let rollback = point.starts_with("rollback");
        // The slice points belong to a window-only rollback; the others to a full one.
        let window_only = rollback && (point.contains("slice") || point.contains("after-commit"));
        let mut undo = vec!["rollback", "--auto-approve"];
        if window_only {
            undo.push("--window-only");
        }
        if rollback {
            bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
            bf_in(root).args(&undo).env(bf::fault::FAULT_ENV, point).assert().failure();
            bf_in(root).args(&undo).assert().success();
            assert!(contents(&daily).await.is_empty(), "{point}: the rollback ends at the empty pre-version");
            if window_only {
                assert_eq!(
                    recorded(&daily, "rollback_slice").await,
                    (1..=6).collect::<Vec<u64>>(),
                    "{point}"
                );
            }
        } else {
            bf_in(root)
                .args(["apply", "--auto-approve", "-q"])
                .env(bf::fault::FAULT_ENV, point)
                .assert()
                .failure();
            bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
            assert_eq!(contents(&daily).await, applied, "{point}");
        }
        assert_eq!(
            recorded(&daily, "slice").await,
            (1..=6).collect::<Vec<u64>>(),
            "{point}: each slice once"
        );
        let comments = bf::ledger::commits_after(&open_table(&daily).await, 0)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.bf.contains_key("comment"))
            .count();
        assert_eq!(comments, 1, "{point}: the apply's comment, once");
    }
    eprintln!("{} crash points recovered: {}", points.len(), points.join(", "));
}
