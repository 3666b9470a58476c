//! Window-only rollbacks of a row-tracking table, which undo bf's commits file by file, refused
//! whole when another writer left a file of the backfill nothing to undo with.

use serde_json::{Value, json};

use super::enable_row_tracking;
use crate::common::{orders_table, snapshot};
use crate::databricks::{CORRECTED, ROWS, bf, commits_from, march_plan, said};

/// What another writer did to a file of the March reload before a window-only rollback, which
/// undoes bf's commits file by file and has nothing to undo it with.
#[derive(Debug, Clone, Copy)]
enum Undone {
    /// Compacted a file a slice added (an OPTIMIZE: the file removed and its rows added back in a
    /// new file, `dataChange: false`, their ids kept).
    Compacted,
    /// Added back a file a slice removed, `dataChange: false` (a repair that claims no change of
    /// data: one that said so would be another writer's rows in the window, refused before).
    AddedBack,
    /// Deleted from storage a file one slice added and a later one removed (a VACUUM with a short
    /// retention; the pre-version's own files are checked before, as for any rollback).
    Vacuumed,
}

/// After the March reload (weekly slices), another writer compacts a file a slice added, adds back
/// a file a slice removed, or vacuums one a slice removed — each time of the first slice that has
/// one, which a rollback undoes last: the window-only rollback is refused naming the file and what
/// became of it, and nothing is written, not even the undo of the slices after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_window_only_rollback_with_a_backfilled_file_gone_or_back_is_refused() {
    for undone in [Undone::Compacted, Undone::AddedBack, Undone::Vacuumed] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table(&table, false, &ROWS).await;
        enable_row_tracking(&table, true, false);
        std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
        march_plan(dir.path(), "week");
        for args in [&["plan", "march.toml"][..], &["apply", "--auto-approve"][..]] {
            let out = bf(dir.path(), args, &[]);
            assert!(out.status.success(), "{undone:?} {args:?}: {}", said(&out));
        }
        let commits = commits_from(&table, 0);
        let version = commits.last().unwrap().0;
        let files = |actions: &Vec<Value>, kind: &str| -> Vec<Value> {
            actions.iter().filter_map(|a| a.get(kind).cloned()).collect()
        };
        let slices: Vec<&(u64, Vec<Value>)> =
            commits.iter().filter(|(_, a)| a[0].pointer("/commitInfo/bf.slice").is_some()).collect();
        let added_by_a_slice =
            |path: &Value| slices.iter().any(|(_, a)| files(a, "add").iter().any(|f| &f["path"] == path));
        let mut live = std::collections::BTreeMap::new();
        for (_, actions) in &commits {
            files(actions, "remove").iter().for_each(|f| drop(live.remove(&f["path"].to_string())));
            files(actions, "add").into_iter().for_each(|f| drop(live.insert(f["path"].to_string(), f)));
        }
        // The first slice with such a file, and the file.
        let (slice_version, file) = slices
            .iter()
            .find_map(|(v, actions)| {
                let found = match undone {
                    Undone::Compacted => {
                        files(actions, "add").into_iter().find(|f| live.contains_key(&f["path"].to_string()))
                    }
                    Undone::AddedBack => {
                        files(actions, "remove").into_iter().find(|f| !added_by_a_slice(&f["path"]))
                    }
                    Undone::Vacuumed => {
                        files(actions, "remove").into_iter().find(|f| added_by_a_slice(&f["path"]))
                    }
                };
                found.map(|f| (*v, f))
            })
            .unwrap_or_else(|| panic!("{undone:?}: a slice with such a file"));
        assert!(slice_version < slices.last().unwrap().0, "{undone:?}: slices after it are undone first");
        let path = file["path"].as_str().unwrap().to_owned();
        let last_time = commits
            .iter()
            .filter_map(|(_, a)| a[0].pointer("/commitInfo/inCommitTimestamp").and_then(Value::as_i64))
            .max()
            .unwrap();
        let info = |operation: &str| {
            json!({"commitInfo": {"timestamp": last_time + 1, "inCommitTimestamp": last_time + 1,
                "operation": operation, "operationParameters": {}, "engineInfo": "another writer"}})
        };
        let (why, actions) = match undone {
            Undone::Compacted => {
                let mut add = live[&file["path"].to_string()].clone();
                let compacted = format!("part-00000-compacted-{slice_version}.parquet");
                std::fs::copy(table.join(&path), table.join(&compacted)).unwrap();
                let remove = json!({"path": path, "deletionTimestamp": last_time + 1, "dataChange": false,
                    "extendedFileMetadata": false, "baseRowId": add["baseRowId"],
                    "defaultRowCommitVersion": add["defaultRowCommitVersion"]});
                add["path"] = json!(compacted);
                add["dataChange"] = json!(false);
                (
                    "added, is no longer in the table",
                    vec![info("OPTIMIZE"), json!({ "remove": remove }), json!({ "add": add })],
                )
            }
            Undone::AddedBack => {
                let mut again = commits
                    .iter()
                    .filter(|(v, _)| *v < slice_version)
                    .flat_map(|(_, actions)| files(actions, "add"))
                    .rfind(|a| a["path"] == file["path"])
                    .unwrap();
                again["dataChange"] = json!(false);
                ("removed, is in the table again", vec![info("REPAIR"), json!({ "add": again })])
            }
            Undone::Vacuumed => {
                std::fs::remove_file(table.join(&path)).unwrap();
                ("removed, was deleted since (VACUUM)", vec![])
            }
        };
        if !actions.is_empty() {
            let text: Vec<String> = actions.iter().map(Value::to_string).collect();
            let next = table.join(format!("_delta_log/{:020}.json", version + 1));
            std::fs::write(next, text.join("\n") + "\n").unwrap();
        }
        let untouched = snapshot(&table);
        let refused = bf(dir.path(), &["rollback", "--auto-approve", "--window-only"], &[]);
        assert_eq!(refused.status.code(), Some(1), "{undone:?}: {}", said(&refused));
        assert!(
            said(&refused)
                .contains(&format!("{path}, which version {slice_version} (a slice of the backfill) {why}")),
            "{undone:?}: {}",
            said(&refused)
        );
        assert_eq!(snapshot(&table), untouched, "{undone:?}: nothing written");
    }
}
