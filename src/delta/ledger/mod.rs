//! The ledger: what bf writes into every commit it makes, so the table's own history says what was
//! done, when, why, and which version to go back to — readable by `bf`, by `DESCRIBE HISTORY` in
//! Spark and Databricks, and on any machine, without `.bf/`.
//!
//! This module is the one owner of the `bf.*` keys: [`Keys`] spells them once, for writing and for
//! reading, and [`Mark`] is what a commit's keys mean. A commit whose keys are missing one its kind
//! needs, or hold a value of the wrong type (another tool, a hand edit, a future format), is an error
//! naming the commit, never a default: a default pre-version is "restore version 0".
//!
//! Each slice commit carries:
//! - `bf.*` keys at the top level of commitInfo (backfill id, plan id and sha256, pre-version,
//!   reason, window, slice index and bounds);
//! - the same as one JSON string in `userMetadata`, the column DESCRIBE HISTORY shows;
//! - a Delta application transaction (`txn`) with app id `bf:<backfill id>:<slice>` and the slice
//!   number as version. Delta keeps the last version per app id, and slices may commit in any order
//!   (backward, in parallel), so each slice has its own app id: "is slice 17 committed?" is then a
//!   lookup, and two writers racing for the same slice conflict instead of both committing.
//!
//! The files: `periods` (the frozen periods and approvals the keys record), `keys` (the record and
//! what a commit's keys mean), `commit` (the commits bf makes and their transactions) and `log`
//! (the ledger read back from a table's history), the last two using the first two only. Callers name everything through this module.

mod commit;
mod keys;
mod log;
mod periods;

pub use commit::{
    approval_commit, clone_metadata, committed, freeze_commit, is_clone_commit, rehearsal_commit,
    restore_to_commit, rollback_app_id, rollback_commit, user,
};
pub use keys::{Backfill, Cascade, Keys, Mark, RecordedSlice, RollbackStep};
pub use log::{
    Entry, LedgerError, Logged, Malformed, Recorded, WholeLogError, added_files, at, backfill_ids,
    commits_after, commits_back, describe, entries_since_plan, history, logged_after, logged_after_whole,
    read_log, read_log_whole, recorded, undone_at,
};
pub use periods::{Approval, Frozen, Unfreeze};

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::Value;

    use super::commit::rollback_keys;
    use super::*;
    use crate::window::{Slice, Window};

    fn backfill() -> Backfill {
        let day = |d: &str| d.parse().unwrap();
        Backfill {
            backfill_id: "b1".into(),
            plan_id: "p1".into(),
            plan_sha256: "abc".into(),
            pre_version: 5,
            reason: "Fix March.".into(),
            window: Window { start: day("2026-03-01"), end: day("2026-03-31") },
            date_column: "order_date".into(),
            slices: 1,
            cascade: None,
            unfreeze: None,
            receipt: None,
        }
    }

    #[test]
    fn a_backfill_of_a_chain_reads_back_with_its_neighbours() {
        let cascade = Cascade {
            id: "p0".into(),
            upstream: Some("file:///w/orders_silver/".into()),
            downstream: vec!["file:///w/revenue_by_day/".into(), "file:///w/kpis/".into()],
        };
        let chained = Backfill { cascade: Some(cascade.clone()), ..backfill() };
        let first = chained.window.start;
        let written = chained.slice_keys(&Slice { index: 1, first, last: first, run_date: first }).metadata();
        assert_eq!(written["bf.cascade"], "p0");
        let Mark::Slice { backfill: read, .. } = Keys::read(&written).unwrap().unwrap().mark().unwrap()
        else {
            panic!("a slice commit reads as a slice")
        };
        assert_eq!(read.cascade, Some(cascade));
        let alone =
            backfill().slice_keys(&Slice { index: 1, first, last: first, run_date: first }).metadata();
        assert!(!alone.contains_key("bf.cascade") && !alone.contains_key("bf.downstream"));
    }

    #[test]
    fn what_is_written_reads_back_as_the_same_mark() {
        let backfill = backfill();
        let (first, last) = (backfill.window.start, backfill.window.end);
        let slice = Slice { index: 1, first, last, run_date: first };
        let written = backfill.slice_keys(&slice).metadata();
        let keys = Keys::read(&written).unwrap().unwrap();
        let recorded = RecordedSlice { index: 1, first, last };
        assert_eq!(keys.mark().unwrap(), Mark::Slice { backfill: backfill.clone(), slice: recorded });
        let user: Value = serde_json::from_str(written["userMetadata"].as_str().unwrap()).unwrap();
        assert_eq!(user["bf.pre_version"], 5, "userMetadata holds the same keys");
        let comment = backfill.comment_keys().metadata();
        assert_eq!(
            Keys::read(&comment).unwrap().unwrap().mark().unwrap(),
            Mark::Comment { backfill: backfill.clone() }
        );
        for step in [RollbackStep::Restore, RollbackStep::Comment, RollbackStep::Slice(recorded)] {
            let written = rollback_keys(&backfill, step).metadata();
            let mark = Keys::read(&written).unwrap().unwrap().mark().unwrap();
            assert!(matches!(mark, Mark::Rollback { step: s, pre_version: 5, .. } if s == step), "{mark:?}");
        }
    }

    #[test]
    fn a_missing_or_mistyped_key_is_an_error_naming_it_never_a_default() {
        let mut keys = backfill().comment_keys().metadata();
        keys.remove("bf.pre_version");
        let problem = Keys::read(&keys).unwrap().unwrap().mark().unwrap_err();
        assert!(problem.contains("`bf.pre_version` is missing"), "{problem}");
        keys.insert("bf.pre_version".into(), Value::from("five"));
        let problem = Keys::read(&keys).unwrap_err();
        assert!(problem.contains("`bf.pre_version`") && problem.contains("invalid type"), "{problem}");
        let spark = HashMap::from([("engineInfo".to_owned(), Value::from("Apache-Spark/3.5.1"))]);
        assert_eq!(Keys::read(&spark).unwrap(), None);
        let entry = Entry::new(7, None, "WRITE".into(), None, None, &keys);
        let error = entry.mark().unwrap_err();
        assert_eq!(error.version, 7);
        assert!(error.to_string().contains("version 7"), "{error}");
    }

    #[test]
    fn backfills_are_ordered_by_their_commits_not_their_names() {
        let mut entries = Vec::new();
        for (version, id) in ["p", "p-r2", "p-r9", "p-r10"].into_iter().enumerate() {
            let backfill = Backfill { backfill_id: id.into(), plan_id: "p".into(), ..backfill() };
            entries.push(Entry::new(
                version as u64 + 6,
                None,
                "WRITE".into(),
                None,
                None,
                &backfill.comment_keys().metadata(),
            ));
        }
        assert_eq!(backfill_ids(&entries, "p"), ["p", "p-r2", "p-r9", "p-r10"]);
        assert_eq!(backfill_ids(&entries, "other"), Vec::<String>::new());
    }

    /// A table of versions 0..=`latest` written raw: its creation, then a commitInfo per commit.
    async fn table_of(dir: &std::path::Path, latest: u64) -> deltalake::DeltaTable {
        let log = dir.join("_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        let schema =
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}"#;
        let metadata = serde_json::json!({"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
            "schemaString": schema, "partitionColumns": [], "configuration": {}, "createdTime": 0}});
        let protocol = serde_json::json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}});
        for version in 0..=latest {
            let info = serde_json::json!({"commitInfo": {"timestamp": version, "operation": "WRITE"}});
            let actions = match version {
                0 => format!("{protocol}\n{metadata}\n{info}\n"),
                _ => format!("{info}\n"),
            };
            std::fs::write(log.join(format!("{version:020}.json")), actions).unwrap();
        }
        deltalake::open_table(url::Url::from_directory_path(dir).unwrap()).await.unwrap()
    }

    /// Reading back stops at the oldest version asked for, reads every version after it once, in
    /// order, and reads the whole log when nothing is ever asked for.
    #[tokio::test]
    async fn the_log_read_back_holds_every_commit_from_the_oldest_needed() {
        let dir = tempfile::tempdir().unwrap();
        let table = table_of(dir.path(), 99).await;
        let versions = |entries: Vec<Entry>| entries.iter().map(|e| e.version).collect::<Vec<_>>();
        assert_eq!(
            versions(commits_back(&table, |_| Some(90)).await.unwrap()),
            (90..=99).collect::<Vec<_>>()
        );
        assert_eq!(versions(commits_back(&table, |_| None).await.unwrap()), (0..=99).collect::<Vec<_>>());
        // Known only once a commit at or before 40 is read: read back by growing steps, then
        // down to 20 if a step stopped short of it.
        let read = versions(
            commits_back(&table, |read| read.first().is_some_and(|e| e.version <= 40).then_some(20))
                .await
                .unwrap(),
        );
        assert!(read.first().is_some_and(|first| *first <= 20), "{read:?}");
        assert_eq!(read, (read[0]..=99).collect::<Vec<_>>(), "each version once, in order");
        assert!(read[0] > 0, "the first steps stop short of version 0: {read:?}");
    }
}
