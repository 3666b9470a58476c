//! Until when a backfill can be undone (`rollback/horizon.rs`): said by `bf apply`, `bf status` and
//! `bf history`, ended by VACUUM or log cleanup, and demanded by `[guards] keep_rollback_for`.

use serde_json::Value;

use crate::second_hour::{august, bf, said, workspace};

/// Plans August's first two days (`plans/august.toml`, a slice a day) in `root`; returns the plan's
/// pre-version.
fn plan_two_days(root: &std::path::Path) -> u64 {
    let text = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-02");
    std::fs::write(root.join("plans/august.toml"), text).unwrap();
    assert!(bf(root, &["plan", "plans/august.toml", "-q"]).status.success());
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    saved["target"]["pre_version"].as_u64().unwrap()
}

/// The payments table with August's first days reloaded through `last`, applied.
struct Applied {
    dir: tempfile::TempDir,
    table: std::path::PathBuf,
    applied: std::process::Output,
    pre_version: u64,
}

fn applied_august(last: &str) -> Applied {
    let (dir, table) = workspace();
    let root = dir.path();
    let text = august("pay_date", "payment_id", "").replace("end = 2026-08-29", &format!("end = {last}"));
    std::fs::write(root.join("plans/august.toml"), text).unwrap();
    assert!(bf(root, &["plan", "plans/august.toml", "-q"]).status.success());
    let applied = bf(root, &["apply", "--auto-approve"]);
    assert!(applied.status.success(), "{}", said(&applied));
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let pre_version = saved["target"]["pre_version"].as_u64().unwrap();
    Applied { dir, table, applied, pre_version }
}

/// Until when a backfill can be undone, judged from the raw log: the first file removed since the
/// pre-version plus `delta.deletedFileRetentionDuration` (7 days, then 1 day once the table says
/// so), said by `bf apply`, `bf status` (and in its JSON) and `bf history`; once a VACUUM deleted the
/// pre-version's files, "no longer possible", and `bf rollback` refuses.
#[test]
fn until_when_a_backfill_can_be_undone_is_said_and_a_vacuum_ends_it() {
    let Applied { dir, table, applied, pre_version } = applied_august("2026-08-03");
    let root = dir.path();
    let first_removed = crate::databricks::commits_from(&table, pre_version + 1)
        .iter()
        .flat_map(|(_, actions)| {
            actions.iter().filter_map(|a| a.pointer("/remove/deletionTimestamp")?.as_i64())
        })
        .min()
        .unwrap();
    let until = |days: i64| {
        let at =
            chrono::DateTime::from_timestamp_millis(first_removed).unwrap() + chrono::Duration::days(days);
        format!(
            "rollback: possible until at least {} (delta.deletedFileRetentionDuration is {days} days;",
            at.format("%Y-%m-%d %H:%M UTC")
        )
    };
    assert!(said(&applied).contains(&until(7)), "{}", said(&applied));
    let status = bf(root, &["status"]);
    assert!(said(&status).contains(&until(7)), "{}", said(&status));
    let history = String::from_utf8_lossy(&bf(root, &["history", "lake/payments"]).stdout).into_owned();
    let reason = history.lines().position(|l| l.contains("August's amounts were recorded in cents")).unwrap();
    assert!(
        history.lines().nth(reason + 1).unwrap().trim_start().starts_with(&until(7)),
        "under its reason:\n{history}"
    );

    let python = |statement: &str| {
        let script = format!(
            "from deltalake import DeltaTable\ndt = DeltaTable({:?})\n{statement}",
            table.to_str().unwrap()
        );
        crate::common::servers::python(&script, &[]);
    };
    python("dt.alter.set_table_properties({'delta.deletedFileRetentionDuration': 'interval 1 days'})");
    let status = bf(root, &["status", "--json"]);
    let json: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(json["rollback"]["state"], "possible_until", "{json}");
    assert_eq!(json["rollback"]["property"], "delta.deletedFileRetentionDuration", "{json}");
    assert_eq!(json["rollback"]["days"], 1.0, "{json}");
    assert!(said(&bf(root, &["status"])).contains(&until(1)));

    python("dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)");
    let status = bf(root, &["status"]);
    assert!(
        said(&status).contains(&format!(
            "rollback: no longer possible: VACUUM removed 3 of version {pre_version}'s data files"
        )),
        "{}",
        said(&status)
    );
    // The ALTER is another writer's commit: only the window can be rolled back, and not that either.
    let refused = bf(root, &["rollback", "--auto-approve", "--window-only"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(said(&refused).contains("VACUUM removed 3 of its data files"), "{}", said(&refused));
}

/// `[guards] keep_rollback_for = "30 days"` on a table that keeps removed files for 7 days: refused
/// before anything is rehearsed, at its line, naming the setting and the `ALTER TABLE` that would
/// do; once the table keeps them 30 days, as that statement says, the plan rehearses.
#[test]
fn a_plan_that_must_stay_undoable_longer_than_the_table_keeps_its_files_is_refused() {
    use crate::second_hour::line_of;
    let (dir, table) = workspace();
    let root = dir.path();
    let text = august("pay_date", "payment_id", "[guards]\nkeep_rollback_for = \"30 days\"\n")
        .replace("end = 2026-08-29", "end = 2026-08-02");
    std::fs::write(root.join("plans/august.toml"), &text).unwrap();
    let refused = bf(root, &["plan", "plans/august.toml"]);
    let said_refused = said(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said_refused}");
    assert!(
        said_refused.contains(&format!("--> plans/august.toml:{}:", line_of(&text, "keep_rollback_for"))),
        "{said_refused}"
    );
    assert!(said_refused.contains("delta.deletedFileRetentionDuration is 7.0 days"), "{said_refused}");
    assert!(
        !said_refused.contains("delta.logRetentionDuration is"),
        "the log is kept 30 days: {said_refused}"
    );
    let statement = said_refused.lines().find_map(|l| l.split("help: ").nth(1)).unwrap().to_owned();
    assert!(
        statement.starts_with("ALTER TABLE delta.`")
            && statement
                .ends_with("SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 30 days')"),
        "{statement}"
    );
    assert!(!root.join("lake/payments__rehearsal").exists(), "nothing rehearsed");

    let script = format!(
        "from deltalake import DeltaTable\nDeltaTable({:?}).alter.set_table_properties({{'delta.deletedFileRetentionDuration': 'interval 30 days'}})",
        table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]);
    let planned = bf(root, &["plan", "plans/august.toml", "-q"]);
    assert!(planned.status.success(), "{}", said(&planned));

    // Spark's other spellings of an interval are read as Spark reads them, never as the default;
    // one Spark would refuse is refused, naming the property.
    for (value, expect) in [
        ("1 hours", "delta.deletedFileRetentionDuration is 0.0 days"),
        ("INTERVAL 2 HOURS", "delta.deletedFileRetentionDuration is 0.1 days"),
        ("1 fortnight", "`delta.deletedFileRetentionDuration` is '1 fortnight', which bf cannot read"),
    ] {
        let script = format!(
            "from deltalake import DeltaTable\nDeltaTable({:?}).alter.set_table_properties({{'delta.deletedFileRetentionDuration': {value:?}}})",
            table.to_str().unwrap()
        );
        crate::common::servers::python(&script, &[]);
        let refused = bf(root, &["plan", "plans/august.toml"]);
        assert_eq!(refused.status.code(), Some(1), "{value}: {}", said(&refused));
        assert!(said(&refused).contains(expect), "{value}: {}", said(&refused));
    }
}

/// Log cleanup behind a checkpoint deletes the pre-version's commit once
/// `delta.logRetentionDuration` has passed (here 0 days): `bf status` says the rollback is no
/// longer possible and why, and how many slices the backfill committed (by their transactions,
/// which the checkpoint keeps) rather than "not applied yet"; `bf rollback` refuses, saying what
/// was cleaned up rather than "never applied", and writes nothing.
#[test]
fn a_log_cleaned_up_past_the_pre_version_ends_the_rollback() {
    let Applied { dir, table, applied, pre_version } = applied_august("2026-08-02");
    assert!(applied.status.success());
    let root = dir.path();
    let script = format!(
        "from deltalake import DeltaTable\ndt = DeltaTable({:?})\n\
         dt.alter.set_table_properties({{'delta.logRetentionDuration': 'interval 0 days'}})\n\
         dt = DeltaTable({0:?})\ndt.create_checkpoint()\ndt.cleanup_metadata()",
        table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]);
    let entry = table.join(format!("_delta_log/{pre_version:020}.json"));
    assert!(!entry.exists(), "the cleanup deleted the pre-version's commit");

    // The oldest commit the cleanup kept, read from the log's folder.
    let first_kept = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".json")?.parse::<u64>().ok())
        .min()
        .unwrap();
    let status = bf(root, &["status"]);
    let expected = format!(
        "rollback: no longer possible: the log entry of version {pre_version} was cleaned up (delta.logRetentionDuration)"
    );
    assert!(said(&status).contains(&expected), "{}", said(&status));
    assert!(
        said(&status).contains(&format!(
            "the table's log before version {} was cleaned up since the plan (delta.logRetentionDuration): 2 of 2 \
             slices committed, by their Delta transactions",
            first_kept
        )),
        "not \"not applied yet\": {}",
        said(&status)
    );
    let untouched = crate::common::snapshot(&table);
    let refused = bf(root, &["rollback", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused).contains(&format!(
            "the table's log before version {first_kept} was cleaned up (delta.logRetentionDuration): the backfills \
             applied after version {pre_version} can no longer be read"
        )),
        "not \"never applied\": {}",
        said(&refused)
    );
    assert_eq!(crate::common::snapshot(&table), untouched, "nothing written");
}

/// Between the plan and the apply another writer deletes a day outside the window and VACUUMs its
/// file away. Those commits block nothing, and the apply goes on from a table that is not the
/// pre-version any more: the horizon it tells counts the pre-version's files — one of them gone,
/// as the raw log and the disk say — not the files it started from: the full rollback is no longer
/// possible, the window-only one is (every file of the window's days is there), as `bf status`
/// says too; `bf rollback --window-only` then puts the window back.
#[test]
fn an_apply_after_another_writers_vacuum_outside_the_window_leaves_the_window_only_rollback() {
    let (dir, table) = workspace();
    let root = dir.path();
    let pre_version = plan_two_days(root);
    let script = format!(
        "from deltalake import DeltaTable\ndt = DeltaTable({:?})\ndt.delete(\"pay_date = '2026-07-15'\")\n\
         dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)",
        table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]);
    let removed: Vec<String> = crate::databricks::commits_from(&table, pre_version + 1)
        .iter()
        .flat_map(|(_, actions)| {
            actions.iter().filter_map(|a| Some(a.pointer("/remove/path")?.as_str()?.to_owned()))
        })
        .collect();
    assert!(!removed.is_empty(), "the delete removed July 15th's file");
    for path in &removed {
        let on_disk = table.join(path.replace("%3A", ":"));
        assert!(!on_disk.exists(), "VACUUM deleted {}", on_disk.display());
    }

    let payments =
        || crate::common::duckdb_rows(&table, "SELECT payment_id, amount FROM t ORDER BY payment_id");
    let before_apply = payments();
    let applied = bf(root, &["apply", "--auto-approve", "--json"]);
    assert!(applied.status.success(), "{}", said(&applied));
    assert_ne!(payments(), before_apply, "the backfill changed August");
    let json: Value = serde_json::from_slice(&applied.stdout).unwrap();
    let gone = format!(
        "VACUUM removed {} of version {pre_version}'s data files, none holding the window's days",
        removed.len()
    );
    assert_eq!(json["rollback"], serde_json::json!({"state": "window_only", "why": gone}), "{json}");
    let status = bf(root, &["status"]);
    assert!(
        said(&status).contains(&format!(
            "rollback: `bf rollback --window-only` only (the full rollback is no longer possible: {gone})"
        )),
        "{}",
        said(&status)
    );
    let full = bf(root, &["rollback", "--auto-approve"]);
    assert_eq!(full.status.code(), Some(1), "the full rollback would undo the delete: {}", said(&full));
    let window = bf(root, &["rollback", "--window-only", "--auto-approve"]);
    assert!(window.status.success(), "{}", said(&window));
    assert_eq!(payments(), before_apply, "the window put back, the delete outside it kept (DuckDB)");
}

/// A table keeping its log for no time: between the plan and the apply another writer deletes a day
/// outside the window and the log is cleaned up behind a checkpoint, the pre-version's commit with
/// it. No rollback could load that version any more, so the apply refuses before its first slice,
/// saying so — where it used to write every slice, name the version "to go back to", and then say
/// the rollback was no longer possible.
#[test]
fn an_apply_whose_pre_version_the_log_no_longer_holds_is_refused_before_it_writes() {
    let (dir, table) = workspace();
    let root = dir.path();
    let path = table.to_str().unwrap();
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\n\
             DeltaTable({path:?}).alter.set_table_properties({{'delta.logRetentionDuration': 'interval 0 days'}})"
        ),
        &[],
    );
    let pre_version = plan_two_days(root);
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\ndt = DeltaTable({path:?})\ndt.delete(\"pay_date = '2026-07-15'\")\n\
             dt = DeltaTable({path:?})\ndt.create_checkpoint()\ndt.cleanup_metadata()"
        ),
        &[],
    );
    let entry = table.join(format!("_delta_log/{pre_version:020}.json"));
    assert!(!entry.exists(), "the cleanup deleted the pre-version's commit");

    let untouched = crate::common::snapshot(&table);
    let refused = bf(root, &["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused).contains(&format!(
            "the table's log no longer holds version {pre_version} (cleaned up since `bf plan`"
        )) && said(&refused).contains("Nothing was written"),
        "{}",
        said(&refused)
    );
    assert_eq!(crate::common::snapshot(&table), untouched, "nothing written");
}

/// A writer whose clock ran ahead stamps the pre-version's commit in 2030. Log cleanup goes by the
/// commit file's age in the store, so the log horizon counts from the earlier of the two: a month
/// from now, not a month from 2030 — which would promise a rollback years after the log entry it
/// reads is gone. (The files' horizon is made longer here, a year, so that the log's is the one
/// told; it is said as log cleanup's, not VACUUM's.)
#[test]
fn the_log_horizon_counts_from_the_commit_files_age_not_a_clock_that_ran_ahead() {
    let (dir, table) = workspace();
    let root = dir.path();
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\n\
             DeltaTable({:?}).alter.set_table_properties({{'delta.deletedFileRetentionDuration': 'interval 365 days'}})",
            table.to_str().unwrap()
        ),
        &[],
    );
    let latest = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".json")?.parse::<u64>().ok())
        .max()
        .unwrap();
    let commit = table.join(format!("_delta_log/{latest:020}.json"));
    let ahead: String = std::fs::read_to_string(&commit)
        .unwrap()
        .lines()
        .map(|line| {
            let mut action: Value = serde_json::from_str(line).unwrap();
            if let Some(info) = action.get_mut("commitInfo") {
                info["timestamp"] = 1_893_456_000_000_i64.into();
            }
            format!("{action}\n")
        })
        .collect();
    std::fs::write(&commit, ahead).unwrap();
    plan_two_days(root);
    let applied = bf(root, &["apply", "--auto-approve"]);
    assert!(applied.status.success(), "{}", said(&applied));
    let in_a_month =
        |days| (chrono::Utc::now() + chrono::Duration::days(days)).format("%Y-%m-%d").to_string();
    let told = said(&applied);
    assert!(
        [in_a_month(30), in_a_month(31)]
            .iter()
            .any(|day| told.contains(&format!("rollback: possible until at least {day}")))
            && told.contains(
                "(delta.logRetentionDuration is 30 days; after that log cleanup may delete what it reads)"
            ),
        "{told}"
    );
    assert!(!told.contains("until at least 2030"), "{told}");
}

/// Between the plan and the apply another writer rewrites the window's second day without changing
/// a row (Z-ORDER: `dataChange` false) and VACUUMs the old file away. The pre-version's file of
/// that day is gone: no rollback, not even a window-only one, could put the window back, so the
/// apply refuses before its first slice, saying why (the watch of other writers' commits would
/// refuse the second day's slice too, for a file it replaces).
#[test]
fn an_apply_whose_pre_version_lost_a_file_of_the_window_is_refused_before_it_writes() {
    let (dir, table) = workspace();
    let root = dir.path();
    let pre_version = plan_two_days(root);
    let script = format!(
        "from deltalake import DeltaTable\ndt = DeltaTable({path:?})\n\
         dt.optimize.z_order(['payment_id'], partition_filters=[('pay_date', '=', '2026-08-02')])\n\
         DeltaTable({path:?}).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)",
        path = table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]);
    let removed: Vec<(String, bool)> = crate::databricks::commits_from(&table, pre_version + 1)
        .iter()
        .flat_map(|(_, actions)| {
            actions.iter().filter_map(|a| {
                let remove = a.get("remove")?;
                Some((remove["path"].as_str()?.to_owned(), remove["dataChange"].as_bool().unwrap_or(true)))
            })
        })
        .collect();
    assert!(!removed.is_empty(), "the Z-ORDER rewrote August 2nd's file");
    for (path, data_change) in &removed {
        assert!(path.contains("2026-08-02") && !data_change, "{path}: a rewrite of the window's second day");
        assert!(!table.join(path.replace("%3A", ":")).exists(), "VACUUM deleted {path}");
    }

    let untouched = crate::common::snapshot(&table);
    let refused = bf(root, &["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused).contains(&format!(
            "VACUUM removed {} of version {pre_version}'s data files holding the window's days since `bf plan`",
            removed.len()
        )) && said(&refused).contains("Nothing was written"),
        "{}",
        said(&refused)
    );
    assert_eq!(crate::common::snapshot(&table), untouched, "nothing written");
}

/// Another writer appends a payment on the second day of a two-day plan after `bf plan`. The apply
/// checks every slice against the commits since the plan before it writes any: it refuses naming
/// the second slice, and the first day's slice, which nothing touched, is not committed either —
/// a stale plan is not half applied.
#[test]
fn a_stale_later_slice_stops_the_apply_before_its_first_slice() {
    let (dir, table) = workspace();
    let root = dir.path();
    plan_two_days(root);
    crate::common::servers::python(
        &format!(
            "import datetime, pyarrow as pa\nfrom deltalake import DeltaTable, write_deltalake\n\
             t = DeltaTable({path:?})\nschema = t.schema().to_arrow()\n\
             row = {{f.name: [None] for f in schema}}\n\
             row.update(payment_id=[9999], pay_date=[datetime.date(2026, 8, 2)])\n\
             write_deltalake({path:?}, pa.table(row, schema=pa.schema(schema)), mode='append')",
            path = table.to_str().unwrap()
        ),
        &[],
    );
    let untouched = crate::common::snapshot(&table);
    let refused = bf(root, &["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused)
            .contains("slice 2 (2026-08-02) was not written: since the plan, other commits touch its rows")
            && said(&refused).contains("No slice of this backfill is committed"),
        "{}",
        said(&refused)
    );
    assert_eq!(crate::common::snapshot(&table), untouched, "slice 1 was not committed either");
}
