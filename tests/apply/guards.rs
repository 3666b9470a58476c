//! What an apply refuses, warns about or keeps out: a short retention, no terminal to ask, a
//! hostile reason, credentials, a log table or an append-only table it may not write; and the
//! checkpoints it writes.

use super::*;

#[test]
fn a_retention_shorter_than_the_undo_is_warned_about() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    write_plan(
        &root.join("plans"),
        "long_undo.toml",
        &march.replace("[record]", "[record]\nkeep_undo_for = \"60 days\""),
    );
    bf_in(root)
        .args(["plan", "plans/long_undo.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Warning: delta.logRetentionDuration is 30.0 days, less than [record] keep_undo_for = 60 days",
        ))
        .stdout(predicate::str::contains("Warning: delta.deletedFileRetentionDuration is 7.0 days"));
    bf_in(root)
        .args(["apply", "--auto-approve"])
        .assert()
        .success()
        .stderr(predicate::str::contains("Warning: delta.logRetentionDuration"));
}

#[test]
fn apply_asks_and_refuses_without_a_terminal() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan(root, "plans/march.toml");
    let untouched = snapshot(&silver);
    bf_in(root).arg("apply").assert().code(1).stderr(predicate::str::contains("pass --auto-approve"));
    assert_eq!(snapshot(&silver), untouched);
    // A plan file planned and applied in one go.
    bf_in(root)
        .args(["apply", "plans/correction-2026-09-15.toml", "--auto-approve"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("This plan cannot be applied"));
    bf_in(root)
        .args(["apply", "plans/september.toml", "--auto-approve", "-q"])
        .assert()
        .success()
        .stdout(predicate::str::contains("30 slices committed"));
}

#[test]
fn a_reason_with_quotes_newlines_and_unicode_survives_the_ledger() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let reason = "He said \"it's wrong\"; 'March' \\ USD → EUR.\nSecond line: ✓ ünïcode, tab\there.";
    let start = march.find("reason = ").unwrap();
    let end = start + march[start..].find('\n').unwrap();
    let toml_reason = format!("reason = {}", toml_basic_string(reason));
    write_plan(
        &root.join("plans"),
        "quoted.toml",
        &format!("{}{}{}", &march[..start], toml_reason, &march[end..]),
    );
    bf_in(root).args(["plan", "plans/quoted.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let output = bf_in(root)
        .args(["history", "bf-demo/warehouse/orders_silver", "--json", "--limit", "2"])
        .output()
        .unwrap();
    let history: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(history[1]["bf"]["reason"], reason);
    let info = std::fs::read_to_string(
        root.join("bf-demo/warehouse/orders_silver/_delta_log/00000000000000000006.json"),
    )
    .unwrap();
    let commit: Value =
        info.lines().find_map(|l| serde_json::from_str::<Value>(l).ok()?.get("commitInfo").cloned()).unwrap();
    let user: Value = serde_json::from_str(commit["userMetadata"].as_str().unwrap()).unwrap();
    assert_eq!(user["bf.reason"], reason);
}

#[test]
fn credentials_in_the_environment_never_reach_output_plans_or_commits() {
    let secret = "FAKE-SECRET-7f3a9c1e";
    let workspace = demo_workspace();
    let root = workspace.path();
    let with_secrets = |args: &[&str]| {
        bf_in(root)
            .args(args)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_ACCESS_KEY_ID", secret)
            .env("AZURE_STORAGE_ACCOUNT_KEY", secret)
            .env("GOOGLE_SERVICE_ACCOUNT_KEY", secret)
            .output()
            .unwrap()
    };
    let mut printed = Vec::new();
    for args in [
        &["plan", "plans/march.toml", "--json"][..],
        &["show", "--format", "markdown"],
        &["apply", "--auto-approve", "--json"],
        &["history", "bf-demo/warehouse/orders_silver", "--json"],
        &["status"],
        &["rollback", "--cascade", "--auto-approve", "--json"],
    ] {
        let output = with_secrets(args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        printed.extend(output.stdout);
        printed.extend(output.stderr);
    }
    assert!(!String::from_utf8_lossy(&printed).contains(secret), "a credential was printed");
    for (path, _) in snapshot(root) {
        let bytes = std::fs::read(root.join(&path)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "a credential was written to {}",
            path.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_log_table_bf_may_not_write_is_refused_before_any_slice() {
    use bf::deltalake::kernel::{DataType, StructField};
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let log = root.join("bf-demo/warehouse/change_log");
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let text = march.replace("warehouse/backfill_log", "warehouse/change_log");
    write_plan(&root.join("plans"), "logged.toml", &text);
    let foreign_log = || async {
        let columns = vec![StructField::new("backfill_id", DataType::STRING, true)];
        crate::common::new_table(&log, columns, &[]).await;
        let identity = serde_json::json!({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["identityColumns"]});
        crate::common::alter_table(&log, Some(identity), &[]);
    };
    // At plan time: the log table exists with a writer feature bf does not honour.
    foreign_log().await;
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["plan", "plans/logged.toml", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("change_log") && stderr.contains("`identityColumns`"), "{stderr}");
    // At apply time: planned while the log table did not exist, created before the apply.
    std::fs::remove_dir_all(&log).unwrap();
    plan(root, "plans/logged.toml");
    foreign_log().await;
    let logged = snapshot(&log);
    let output = apply(root);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`identityColumns`"), "{stderr}");
    assert_eq!(snapshot(&silver), untouched, "refused before the first slice");
    assert_eq!(snapshot(&log), logged);
}

/// `delta.appendOnly = true` promises readers that rows are only ever added: bf refuses to plan a
/// backfill of such a table (naming the property, before any clone), and appends its one row to a
/// change-log table that makes the promise, removing nothing from it.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_only_table_is_refused_for_rewrites_and_appended_to_as_a_log() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let log = root.join("bf-demo/warehouse/backfill_log");
    plan(root, "plans/march.toml");
    assert!(apply(root).status.success());
    crate::common::alter_table(&log, None, &[("delta.appendOnly", "true")]);
    let promised = std::fs::read_dir(log.join("_delta_log")).unwrap().count();
    assert!(bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap().status.success());
    plan(root, "plans/march.toml");
    assert!(apply(root).status.success());
    let appended = std::fs::read_to_string(log.join(format!("_delta_log/{promised:020}.json"))).unwrap();
    let actions: Vec<Value> = appended.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(actions.iter().filter(|a| a.get("add").is_some()).count(), 1, "one row, one file: {appended}");
    assert!(actions.iter().all(|a| a.get("remove").is_none()), "nothing removed: {appended}");
    assert!(!log.join(format!("_delta_log/{:020}.json", promised + 1)).exists(), "one commit");

    let silver = root.join("bf-demo/warehouse/orders_silver");
    crate::common::alter_table(&silver, None, &[("delta.appendOnly", "true")]);
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["plan", "plans/march.toml", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`delta.appendOnly = true`"), "{stderr}");
    assert_eq!(snapshot(&silver), untouched);
}

/// A checkpoint is written at every 20th version of a run of slices and at no other, read from
/// the log's own files, not through bf; and a second reader reads the table through it. The table
/// bf carries on with (loaded again from the checkpoint) is the one it had, at its version, though
/// another writer has committed since: the apply records that version as the slice's commit and
/// reads the slice's written files from it (the next slice's check reads the log again anyway).
#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_is_written_at_every_twentieth_version_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let rows: [OrderRow; 1] = [(1, "C1", 10.0, "EUR", "2026-03-01")];
    let at = |version: u64| dir.path().join(format!("v{version}"));
    for version in [18, 19] {
        let commits = vec![&rows[..]; version as usize];
        let table = open_table(&crate::common::orders_table(&at(version), false, &commits).await).await;
        assert_eq!(table.version(), Some(version as _));
        let files = table.get_file_uris().unwrap().collect::<Vec<_>>();
        let another = crate::common::append_orders(&at(version), &rows).await;
        assert_eq!(another, version + 1);
        let carried = bf::delta::table::checkpoint_when_due(table).await;
        assert_eq!(carried.version(), Some(version as _), "the table carried on moved past its own commit");
        assert_eq!(carried.get_file_uris().unwrap().collect::<Vec<_>>(), files);
        let log = at(version).join("_delta_log");
        let written = log.join(format!("{version:020}.checkpoint.parquet")).is_file();
        assert_eq!(written, version == 19, "version {version}");
        assert_eq!(log.join("_last_checkpoint").exists(), written);
    }
    assert_eq!(duckdb_count(&at(19), "SELECT count(*) FROM t"), 20);

    // Where the table's own interval put deltalake's checkpoint at that version, it is not written
    // a second time (the kernel finds it).
    let own = dir.path().join("own");
    let commits = vec![&rows[..]; 19];
    crate::common::orders_table_with(
        &own,
        false,
        crate::common::orders_columns(),
        &[("delta.checkpointInterval", "20")],
        &commits,
    )
    .await;
    let checkpoint = own.join(format!("_delta_log/{:020}.checkpoint.parquet", 19));
    let modified = || std::fs::metadata(&checkpoint).unwrap().modified().unwrap();
    let deltalakes = modified();
    bf::delta::table::checkpoint_when_due(open_table(&own).await).await;
    assert_eq!(modified(), deltalakes, "deltalake's checkpoint at 19 was written again");
}
