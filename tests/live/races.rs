//! Another writer at the moment between bf's last check of a slice and its commit: the race the
//! check cannot see, which the commit itself must settle.

use std::process::Stdio;

use super::{MAY_PLAN, may_reload, may_shop, mode, ok, order, planned, refused};
use crate::common::{
    append_orders, apply_paused, commits_with, duckdb_rows, release_together, rows_at, slices_committed,
};

/// An order written into slice 3's days after bf checked the slice and before it committed: bf's
/// commit conflicts with it (deltalake's check, on the slice's predicate), so the slice is not
/// written and the error names the commit it lost to, never this backfill's own; the order stays.
#[tokio::test(flavor = "multi_thread")]
async fn an_order_written_into_a_slice_between_its_check_and_its_commit_stops_that_slice() {
    for partitioned in [false, true] {
        for recompute in [false, true] {
            let case = format!("partitioned: {partitioned}, recompute: {recompute}");
            let (dir, table) = planned(partitioned).await;
            let root = dir.path();
            let mut at = 0;
            let out = apply_paused(root, mode(recompute), 3, "after-check", async {
                at = append_orders(&table, &[order(9001, 99.0, "2026-05-16")]).await;
            })
            .await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{case}:\n{stderr}");
            for said in [
                "slice 3 (2026-05-15..2026-05-21) conflicts with another writer's commit (it added rows where \
                 the slice writes), so it was not written",
                &format!("version {at}: WRITE"),
                "The slices committed before it stay recorded. Run `bf plan` again",
            ] {
                assert!(stderr.contains(said), "{case}: missing {said:?} in:\n{stderr}");
            }
            // deltalake's advice for its own API, and a resume the stale plan would refuse, are not
            // the way out.
            for unsaid in ["Snapshot Isolation", "to resume"] {
                assert!(!stderr.contains(unsaid), "{case}: {unsaid:?} in:\n{stderr}");
            }
            let own: Vec<u64> = crate::common::commit_infos(&table)
                .into_iter()
                .filter(|(_, info)| info.get("bf.slice").is_some())
                .map(|(version, _)| version)
                .collect();
            for version in own {
                assert!(
                    !stderr.contains(&format!("version {version}:")),
                    "{case}: names its own {version}:\n{stderr}"
                );
            }
            assert_eq!(slices_committed(&table), [1, 2], "{case}");
            let on_16 = "SELECT order_id FROM t WHERE order_date = DATE '2026-05-16' ORDER BY order_id";
            assert_eq!(
                duckdb_rows(&table, on_16),
                ["16", "9001"],
                "{case}: the old day and the order, by DuckDB"
            );
            assert_eq!(commits_with(&table, "comment"), 0, "{case}: never finished");
            // The plan is stale now: a resume is refused at that slice, as the error said.
            let again = refused(root, &[&["apply", "--auto-approve"][..], mode(recompute)].concat());
            assert!(again.contains("slice 3 (2026-05-15..2026-05-21) was not written"), "{case}:\n{again}");
            assert_eq!(slices_committed(&table), [1, 2], "{case}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_finishes_at_once_comment_and_log_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = may_shop(root, true).await;
    std::fs::write(
        root.join("may.toml"),
        MAY_PLAN.replace("[source]", "[record]\nlog_table = \"changes\"\n\n[source]"),
    )
    .unwrap();
    ok(root, &["plan", "may.toml", "-q"]);
    ok(root, &["apply", "--slices", "1..5", "--auto-approve", "-q"]);
    let pauses = [root.join("finish-a"), root.join("finish-b")];
    let finishing: Vec<_> = pauses
        .iter()
        .map(|pause| {
            crate::common::bf_process()
                .current_dir(root)
                .env_remove("BF_STATE_DIR")
                .args(["apply", "--finish", "--auto-approve", "-q"])
                .env(bf::fault::PAUSE_FILE_ENV, pause)
                .env(bf::fault::PAUSE_POINT_ENV, "before-comment")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for out in release_together("both finishes to reach the comment", &pauses, finishing) {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(commits_with(&table, "comment"), 1, "one comment");
    assert_eq!(rows_at(&root.join("changes"), None, "true").await.len(), 1, "one change-log row");
}

/// deltalake 1.1 panics checking a concurrent commit on a table whose log keys partition values by
/// physical names (column mapping by name, partitioned by the date): another writer committing
/// between bf's check and its commit used to end `bf apply` with exit 101. bf checks such commits
/// itself there and writes the slice again on the table as it then is.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_mapped_table_partitioned_by_its_date_is_written_beside_another_writer() {
    use crate::common::servers::python;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("orders");
    python(
        &format!(
            "import deltalake, pyarrow as pa, datetime as d\n\
             days = [d.date(2026, 5, 1) + d.timedelta(days=i) for i in range(31)]\n\
             t = pa.table({{'order_id': list(range(1, 32)), 'customer': [f'C{{i}}' for i in range(1, 32)],\n\
               'amount': [10.0 * i for i in range(1, 32)], 'currency': ['EUR'] * 31, 'order_date': days}})\n\
             deltalake.write_deltalake({0:?}, t, partition_by=['order_date'],\n\
               configuration={{'delta.columnMapping.mode': 'name'}})\n",
            table.to_str().unwrap()
        ),
        &[],
    );
    may_reload(root);
    ok(root, &["plan", "may.toml", "-q"]);
    let out = apply_paused(root, &[], 3, "after-check", async {
        python(
            &format!(
                "import deltalake, pyarrow as pa, datetime as d\n\
                 t = pa.table({{'order_id': [9001], 'customer': ['June'], 'amount': [5.0], 'currency': ['EUR'],\n\
                   'order_date': [d.date(2026, 6, 2)]}})\n\
                 deltalake.write_deltalake({:?}, t, mode='append')\n",
                table.to_str().unwrap()
            ),
            &[],
        );
    })
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}:\n{stderr}", out.status.code());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(slices_committed(&table), [1, 2, 3, 4, 5]);
    let rows = crate::common::servers::python_sql_rows(&table, "order_id,amount");
    assert_eq!(rows.len(), 32, "May's 31 orders and the other writer's: {rows:?}");
    assert!(rows.contains(&"9001|5.0".to_owned()) && rows.contains(&"20|220.0".to_owned()), "{rows:?}");
}
