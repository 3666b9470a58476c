//! A newcomer's first hour: what a new user runs into with the demo, the September backfill and a
//! plan of their own, replayed through the real binary.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{bf_in, demo_workspace, slices_committed};

const DAILY: &str = "bf-demo/warehouse/orders_daily";

/// `bf apply 2>&1 | head -3`: the reader goes away after three lines. The apply is not stopped by
/// its output: every slice lands, once, and bf ends without a panic.
#[test]
fn a_reader_that_closes_the_pipe_never_stops_an_apply() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let planned = bf_in(root).args(["plan", "plans/september.toml", "--quiet"]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let mut apply = Command::new(assert_cmd::cargo::cargo_bin("bf"))
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .args(["apply", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = apply.stderr.take().unwrap();
    let read: Vec<String> = BufReader::new(stderr).lines().take(3).map(Result::unwrap).collect();
    assert_eq!(read.len(), 3, "{read:?}");
    // Both ends closed, as `2>&1 | head -3` leaves them.
    drop(apply.stdout.take());
    let status = apply.wait().unwrap();
    assert_eq!(status.code(), Some(0), "no panic, no failure: {status:?}");
    let mut committed = slices_committed(&root.join(DAILY));
    committed.sort();
    assert_eq!(committed, (1..=30).collect::<Vec<u64>>(), "every slice once");
}
