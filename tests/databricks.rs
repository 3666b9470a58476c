//! The tables Databricks makes today: in-commit timestamps, domain metadata, liquid clustering.
//! Each table is made here the way PROTOCOL.md describes it — a table written by deltalake, then
//! one commit, written by hand, that upgrades its protocol and turns the features on, as an
//! `ALTER TABLE … CLUSTER BY` with in-commit timestamps enabled does — and every outcome is judged
//! from the raw log by the protocol's rules, and the rows read by DuckDB and the Python package.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{OrderRow, bf_in, commit_files, orders_table, snapshot, write_plan};

/// February to April, with files holding days inside and outside March (unpartitioned: a slice
/// rewrites them and carries their other rows).
pub(crate) const ROWS: [&[OrderRow]; 2] = [
    &[
        (1, "C1", 10.0, "EUR", "2026-02-27"),
        (2, "C2", 20.0, "USD", "2026-03-02"),
        (3, "C3", 30.0, "USD", "2026-03-09"),
        (4, "C4", 40.0, "EUR", "2026-04-02"),
    ],
    &[
        (5, "C1", 50.0, "USD", "2026-03-16"),
        (6, "C2", 60.0, "USD", "2026-03-31"),
        (7, "C3", 70.0, "EUR", "2026-04-01"),
    ],
];

/// March corrected: every currency EUR.
pub(crate) const CORRECTED: &str = "order_id,customer,amount,currency,order_date\n\
    2,C2,20.0,EUR,2026-03-02\n3,C3,30.0,EUR,2026-03-09\n5,C1,50.0,EUR,2026-03-16\n6,C2,60.0,EUR,2026-03-31\n";

/// The in-commit timestamp the upgrade commit carries: 2030-01-01T00:00:00Z, later than any clock
/// here, so a commit whose timestamp were only "now" would be earlier than it.
pub(crate) const UPGRADED_AT: i64 = 1_893_456_000_000;

/// How the upgrade clusters the table.
#[derive(Debug, Clone, Copy)]
enum Clustering {
    None,
    /// The protocol's `clustering` feature and `delta.clustering` domain.
    Clustered,
    /// Databricks' `liquid` preview feature and its `delta.liquid` domain.
    Liquid,
}

/// Appends to `table`'s log the commit that makes it a Databricks table of today: writer version 7
/// with `inCommitTimestamp` and `domainMetadata` (and the clustering feature), in-commit timestamps
/// enabled from this version on (PROTOCOL.md, In-Commit Timestamps: the enablement version and
/// timestamp set), the clustering domain, and a domain of the team's own that no engine knows.
/// Returns the commit's version.
fn upgrade(table: &Path, clustering: Clustering) -> u64 {
    upgrade_with(table, clustering, &[])
}

/// [`upgrade`], setting `properties` too.
fn upgrade_with(table: &Path, clustering: Clustering, properties: &[(&str, &str)]) -> u64 {
    let version = commit_files(table).last().unwrap().0 + 1;
    let metadata = commit_files(table)
        .iter()
        .rev()
        .flat_map(|(_, p)| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .find_map(|l| serde_json::from_str::<Value>(&l).ok()?.get("metaData").cloned())
        .unwrap();
    let mut metadata = metadata;
    let configuration = metadata["configuration"].as_object_mut().unwrap();
    configuration.insert("delta.enableInCommitTimestamps".into(), "true".into());
    configuration.insert("delta.inCommitTimestampEnablementVersion".into(), version.to_string().into());
    configuration.insert("delta.inCommitTimestampEnablementTimestamp".into(), UPGRADED_AT.to_string().into());
    for (key, value) in properties {
        configuration.insert((*key).into(), (*value).into());
    }
    let mut features = vec!["appendOnly", "invariants", "inCommitTimestamp", "domainMetadata"];
    let mut domains = vec![
        json!({"domain": "com.acme.ownership", "configuration": "{\"team\":\"finance\"}", "removed": false}),
    ];
    match clustering {
        Clustering::None => {}
        Clustering::Clustered => {
            features.push("clustering");
            domains.push(json!({"domain": "delta.clustering",
                "configuration": "{\"clusteringColumns\":[[\"customer\"]]}", "removed": false}));
        }
        Clustering::Liquid => {
            features.push("liquid");
            domains.push(json!({"domain": "delta.liquid",
                "configuration": "{\"clusteringColumns\":[{\"physicalName\":[\"customer\"]}]}", "removed": false}));
        }
    }
    let mut actions = vec![
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "inCommitTimestamp": UPGRADED_AT,
            "operation": "ALTER TABLE", "operationParameters": {}, "engineInfo": "the test's own hand"}}),
        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}}),
        json!({"metaData": metadata}),
    ];
    actions.extend(domains.into_iter().map(|d| json!({"domainMetadata": d})));
    let text: Vec<String> = actions.iter().map(Value::to_string).collect();
    std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
    version
}

/// Every action of each commit from `from` on, raw, by version.
pub(crate) fn commits_from(table: &Path, from: u64) -> Vec<(u64, Vec<Value>)> {
    commit_files(table)
        .into_iter()
        .filter(|(v, _)| *v >= from)
        .map(|(v, p)| {
            let actions = std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (v, actions)
        })
        .collect()
}

/// The protocol's rules for every commit since the upgrade: commitInfo first, carrying an
/// in-commit timestamp greater than the commit before's; no domain written or removed after the
/// upgrade; the protocol never changed. Returns how many commits followed the upgrade.
fn judge_log(table: &Path, upgraded: u64) -> usize {
    let commits = commits_from(table, upgraded);
    let mut previous = None;
    for (version, actions) in &commits {
        let first = &actions[0];
        let at = first.pointer("/commitInfo/inCommitTimestamp").and_then(Value::as_i64);
        let at = at.unwrap_or_else(|| {
            panic!("version {version} does not start with an in-commit timestamp: {first}")
        });
        if let Some(previous) = previous {
            assert!(at > previous, "version {version}: {at} is not after {previous}");
        }
        previous = Some(at);
        if *version > upgraded {
            for action in actions {
                assert!(
                    action.get("domainMetadata").is_none(),
                    "version {version} writes a domain: {action}"
                );
                assert!(action.get("protocol").is_none(), "version {version} changes the protocol: {action}");
            }
        }
    }
    commits.len() - 1
}

/// The domains in force at the last checkpoint after version `after` (the checkpoint Parquet read by
/// pyarrow), or, with `None`, those the log states (the upgrade's). Sorted, `domain=configuration`.
pub(crate) fn domains_of_last_checkpoint(table: &Path, after: Option<u64>) -> Vec<String> {
    let Some(after) = after else {
        let mut domains: Vec<String> = commits_from(table, 0)
            .iter()
            .flat_map(|(_, actions)| actions.iter().filter_map(|a| a.get("domainMetadata").cloned()))
            .map(|d| format!("{}={}", d["domain"].as_str().unwrap(), d["configuration"].as_str().unwrap()))
            .collect();
        domains.sort();
        return domains;
    };
    let script = format!(
        "import glob, json, pyarrow.parquet as pq\n\
         found = sorted(glob.glob({:?} + '/_delta_log/*.checkpoint.parquet'))\n\
         last = found[-1]\n\
         assert int(last.split('/')[-1].split('.')[0]) > {after}, last\n\
         rows = pq.read_table(last).to_pylist()\n\
         print('\\n'.join(sorted(r['domainMetadata']['domain'] + '=' + r['domainMetadata']['configuration'] \
         for r in rows if r.get('domainMetadata') and not r['domainMetadata']['removed'])))\n",
        table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]).lines().map(str::to_owned).collect()
}

/// `table`'s rows, `order_id|currency|order_date`, sorted, read by the Python `deltalake` package and
/// checked to be what DuckDB reads.
pub(crate) fn rows(table: &Path) -> Vec<String> {
    let columns = "order_id, currency, order_date";
    let duckdb = crate::common::duckdb_rows(table, &format!("SELECT {columns} FROM t"));
    let script = format!(
        "import deltalake\nt = deltalake.DeltaTable({:?}).to_pyarrow_table().to_pylist()\n\
         print('\\n'.join(sorted('|'.join(str(r[c]) for c in ['order_id', 'currency', 'order_date']) for r in t)))\n",
        table.to_str().unwrap()
    );
    let python: Vec<String> =
        crate::common::servers::python(&script, &[]).lines().map(str::to_owned).collect();
    assert_eq!(duckdb, python, "DuckDB and the Python package read {} alike", table.display());
    python
}

/// Writes `march.toml` in `dir`: the March reload of `orders` from `march.csv`, slices `every`.
pub(crate) fn march_plan(dir: &Path, every: &str) {
    write_plan(
        dir,
        "march.toml",
        &format!(
            "reason = \"Reload March: currencies were wrong.\"\n[target]\ntable = \"orders\"\n\
             date_column = \"order_date\"\nkey = [\"order_id\"]\n[window]\nstart = 2026-03-01\nend = 2026-03-31\n\
             [slicing]\nevery = \"{every}\"\n[source]\ninputs.src = {{ path = \"march.csv\", format = \"csv\" }}\n\
             query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM src\"\n"
        ),
    );
}

pub(crate) fn bf(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    bf_in(dir).args(args).envs(env.iter().copied()).output().unwrap()
}

pub(crate) fn said(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The March reload, weekly slices, on a table with in-commit timestamps, a domain no engine knows
/// and (unpartitioned) clustering by its protocol name or Databricks' `liquid`: planned on a clone
/// (the table untouched); `--recompute` refused (deltalake would write rows without what the
/// features ask); applied with a crash after slice 2's commit and resumed; every commit since the
/// upgrade judged by the protocol's rules; March corrected and the rest as it was, read by DuckDB
/// and Python; `bf history` showing the commits' own times; rolled back window-only (bf's commits
/// undone file by file) or by a RESTORE, by the same rules.
#[tokio::test(flavor = "multi_thread")]
async fn in_commit_timestamps_domains_and_clustering_survive_plan_apply_resume_and_rollback() {
    for (partitioned, clustering) in
        [(false, Clustering::Clustered), (false, Clustering::Liquid), (true, Clustering::None)]
    {
        let case = format!("partitioned {partitioned}, {clustering:?}");
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table(&table, partitioned, &ROWS).await;
        // A checkpoint every third version: the checkpoints deltalake writes after bf's commits
        // must keep the domains too.
        let upgraded = upgrade_with(&table, clustering, &[("delta.checkpointInterval", "3")]);
        let domains = domains_of_last_checkpoint(&table, None);
        let before = rows(&table);
        std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
        march_plan(dir.path(), "week");
        let untouched = snapshot(&table);
        let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
        assert!(planned.status.success(), "{case}: {}", said(&planned));
        assert!(
            said(&planned).contains("`inCommitTimestamp`, `domainMetadata`")
                && said(&planned).contains("`bf apply --recompute` is refused on it"),
            "{case}: the reviewer is told: {}",
            said(&planned)
        );
        assert_eq!(snapshot(&table), untouched, "{case}: the plan wrote to the table");

        let recomputed = bf(dir.path(), &["apply", "--auto-approve", "--recompute"], &[]);
        assert_eq!(recomputed.status.code(), Some(1), "{case}: {}", said(&recomputed));
        assert!(said(&recomputed).contains("bf cannot recompute slices on"), "{case}: {}", said(&recomputed));
        assert_eq!(snapshot(&table), untouched, "{case}: the refused apply wrote");

        let crashed = bf(dir.path(), &["apply", "--auto-approve"], &[("BF_FAULT", "after-commit:2")]);
        assert!(!crashed.status.success(), "{case}: {}", said(&crashed));
        let resumed = bf(dir.path(), &["apply", "--auto-approve"], &[]);
        assert!(resumed.status.success(), "{case}: {}", said(&resumed));
        // Five weekly slices holding March's days (one of them empty of rows in both), the comment.
        let applied = judge_log(&table, upgraded);
        assert!(applied >= 5, "{case}: {applied} commits after the upgrade");
        let expected: Vec<String> = before
            .iter()
            .map(|row| match row.split('|').collect::<Vec<_>>()[..] {
                [id, _, day] if day.starts_with("2026-03") => format!("{id}|EUR|{day}"),
                _ => row.clone(),
            })
            .collect();
        assert_eq!(rows(&table), expected, "{case}: March corrected, February and April as they were");
        assert_eq!(domains_of_last_checkpoint(&table, Some(upgraded)), domains, "{case}: every domain kept");

        // The commits' times are their in-commit timestamps: the upgrade's is in 2030.
        let history = bf(dir.path(), &["history", "orders", "--json"], &[]);
        let history: Vec<Value> = serde_json::from_slice(&history.stdout).unwrap();
        let upgrade_entry = history.iter().find(|e| e["version"] == upgraded).unwrap();
        assert_eq!(upgrade_entry["timestamp"], UPGRADED_AT, "{case}: {upgrade_entry}");
        assert!(
            history
                .iter()
                .all(|e| e["version"].as_u64() < Some(upgraded)
                    || e["timestamp"].as_i64() >= Some(UPGRADED_AT))
        );

        // A window-only rollback undoes bf's commits file by file; the other cases RESTORE.
        let window_only = matches!(clustering, Clustering::Clustered) || partitioned;
        let mut rollback = vec!["rollback", "--auto-approve"];
        if window_only {
            rollback.push("--window-only");
        }
        let rolled_back = bf(dir.path(), &rollback, &[]);
        assert!(rolled_back.status.success(), "{case}: {}", said(&rolled_back));
        assert!(judge_log(&table, upgraded) > applied, "{case}: the rollback committed");
        assert_eq!(rows(&table), before, "{case}: rolled back row for row");
        assert_eq!(domains_of_last_checkpoint(&table, Some(upgraded)), domains, "{case}: every domain kept");
    }
}

/// A clustered table needs statistics of its clustering columns in every file added; bf does not
/// read which columns those are, so a table whose statistics settings leave any column out is
/// refused at the plan, naming why, before anything is cloned.
#[tokio::test(flavor = "multi_thread")]
async fn a_clustered_table_whose_statistics_leave_columns_out_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    upgrade_with(&table, Clustering::Clustered, &[("delta.dataSkippingNumIndexedCols", "2")]);
    std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
    march_plan(dir.path(), "month");
    let untouched = snapshot(dir.path());
    let refused = bf(dir.path(), &["plan", "march.toml"], &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused).contains("statistics for every column of a clustered table"),
        "{}",
        said(&refused)
    );
    assert_eq!(snapshot(dir.path()), untouched, "nothing written, no rehearsal made");
}

/// Another writer commits between a slice's check and its commit (a streaming job's progress, with
/// its own in-commit timestamp): bf's commit, never rebased by deltalake on such a table, finds
/// the table moved, checks it again and commits after it — its in-commit timestamp greater than
/// the other writer's, every slice in, the other commit kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_by_another_writer_between_slices_is_followed_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    let upgraded = upgrade(&table, Clustering::Clustered);
    std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
    march_plan(dir.path(), "week");
    let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
    assert!(planned.status.success(), "{}", said(&planned));
    let foreign = std::cell::Cell::new(0u64);
    let output = crate::common::apply_paused(dir.path(), &[], 2, "after-check", async {
        let version = commit_files(&table).last().unwrap().0 + 1;
        let previous = commits_from(&table, version - 1)[0].1[0]["commitInfo"]["inCommitTimestamp"].as_i64().unwrap();
        let commit = [
            json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "inCommitTimestamp": previous + 1,
                "operation": "STREAMING UPDATE", "operationParameters": {}}}),
            json!({"txn": {"appId": "orders-stream", "version": 41}}),
        ];
        let text: Vec<String> = commit.iter().map(Value::to_string).collect();
        std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
        foreign.set(version);
    })
    .await;
    assert!(output.status.success(), "{}", said(&output));
    judge_log(&table, upgraded);
    let foreign = foreign.get();
    let kept = commits_from(&table, foreign);
    assert!(
        kept[0].1.iter().any(|a| a.pointer("/txn/appId").and_then(Value::as_str) == Some("orders-stream"))
    );
    let slices_after: Vec<u64> = crate::common::slices_committed(&table);
    assert_eq!(slices_after, [1, 2, 3, 4, 5, 6], "every slice committed once");
    let slice_2 = kept
        .iter()
        .find(|(_, actions)| actions[0].pointer("/commitInfo/bf.slice").and_then(Value::as_u64) == Some(2));
    assert!(slice_2.is_some_and(|(v, _)| *v > foreign), "slice 2 committed after the other writer");
}

/// A catalog-managed table (Unity Catalog managed: `catalogManaged`, or its preview name
/// `catalogOwned-preview`) takes its commits through its catalog; bf cannot, and refuses it at the
/// plan, naming the feature and what writing it takes, before anything is cloned or written.
#[tokio::test(flavor = "multi_thread")]
async fn a_catalog_managed_table_is_refused_naming_what_writing_it_takes() {
    for feature in ["catalogManaged", "catalogOwned-preview"] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table(&table, false, &ROWS).await;
        let upgraded = upgrade(&table, Clustering::None);
        let version = upgraded + 1;
        let commit = [
            json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "inCommitTimestamp": UPGRADED_AT + 1,
                "operation": "ALTER TABLE", "operationParameters": {}}}),
            json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature],
                "writerFeatures": ["appendOnly", "invariants", "inCommitTimestamp", "domainMetadata", feature]}}),
        ];
        let text: Vec<String> = commit.iter().map(Value::to_string).collect();
        std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
        std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
        march_plan(dir.path(), "month");
        let untouched = snapshot(dir.path());
        let refused = bf(dir.path(), &["plan", "march.toml"], &[]);
        assert_eq!(refused.status.code(), Some(1), "{feature}: {}", said(&refused));
        assert!(said(&refused).contains(&format!("`{feature}`")), "{feature}: {}", said(&refused));
        assert!(
            !said(&refused).contains("Max catalog version"),
            "{feature}: in bf's words: {}",
            said(&refused)
        );
        assert!(said(&refused).contains("through its catalog"), "{feature}: {}", said(&refused));
        assert_eq!(snapshot(dir.path()), untouched, "{feature}: nothing written");
    }
}

/// A table whose `amount` was widened (`typeWidening`, a reader and writer feature: `FLOAT` to
/// `DOUBLE`, recorded in the column's `delta.typeChanges`): deltalake does not read such a table, so
/// bf cannot rehearse or write it. `bf plan` refuses it naming the feature and why, and `bf init`'s
/// plan says so at its top; nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_with_widened_types_is_refused_naming_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    let version = commit_files(&table).last().unwrap().0 + 1;
    let mut metadata = last_metadata(&table);
    let mut schema: Value = serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
    let amount = schema["fields"].as_array_mut().unwrap().iter_mut().find(|f| f["name"] == "amount").unwrap();
    amount["metadata"] = json!({"delta.typeChanges": [{"fromType": "float", "toType": "double"}]});
    metadata["schemaString"] = Value::from(schema.to_string());
    metadata["configuration"]["delta.enableTypeWidening"] = Value::from("true");
    let commit = [
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "operation": "ALTER TABLE",
            "operationParameters": {}}}),
        json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
            "writerFeatures": ["appendOnly", "invariants", "typeWidening"]}}),
        json!({"metaData": metadata}),
    ];
    let text: Vec<String> = commit.iter().map(Value::to_string).collect();
    std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
    std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
    march_plan(dir.path(), "month");
    let untouched = snapshot(dir.path());
    for (args, code) in [(&["plan", "march.toml"][..], 1), (&["init", "--table", "orders"][..], 0)] {
        let out = bf(dir.path(), args, &[]);
        let said = said(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {said}");
        assert!(
            said.contains("bf cannot write") && said.contains("`typeWidening` (deltalake does not read"),
            "{args:?}: {said}"
        );
        assert_eq!(snapshot(dir.path()), untouched, "{args:?}: nothing written");
    }
}

/// `bf init` tells the plan's author and reviewer what a table's writer features mean for bf: on a
/// table whose commits bf completes, a note at the top of the plan it writes; on Databricks' own
/// clustered table with row tracking (the corpus's, which has no DATE column), what bf does with
/// its row ids, beside the missing DATE column.
#[tokio::test(flavor = "multi_thread")]
async fn bf_init_says_what_a_tables_features_mean() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    upgrade(&table, Clustering::Liquid);
    let init = bf(dir.path(), &["init", "--table", "orders"], &[]);
    assert!(init.status.success(), "{}", said(&init));
    let plan = String::from_utf8_lossy(&init.stdout);
    assert!(
        plan.contains("# Note: the table's writer features `inCommitTimestamp`, `domainMetadata`, `liquid`"),
        "{plan}"
    );
    toml::from_str::<toml::Value>(&plan).expect("the note is a comment");

    let corpus = dir.path().join("liquid");
    crate::corpus::copy_dir(
        &crate::common::repo("tests/data/delta-corpus/rs_table_with_liquid_clustering"),
        &corpus,
    );
    let init = bf(dir.path(), &["init", "--table", "liquid"], &[]);
    assert!(!init.status.success(), "{}", said(&init));
    let stderr = String::from_utf8_lossy(&init.stderr);
    assert!(
        stderr.contains("`rowTracking`") && stderr.contains("the old ones kept for the rows it copies"),
        "{stderr}"
    );
    assert!(!stderr.contains("bf cannot write"), "{stderr}");
    assert!(stderr.to_lowercase().contains("date column"), "{stderr}");
}

/// The last `metaData` action of the log, raw.
pub(crate) fn last_metadata(table: &Path) -> Value {
    commits_from(table, 0)
        .iter()
        .rev()
        .find_map(|(_, actions)| actions.iter().find_map(|a| a.get("metaData").cloned()))
        .unwrap()
}

/// Where bf checks concurrent commits itself (in-commit timestamps), a slice whose commit loses
/// every race (`BF_FAULT=lose-races:2`: a writer that always commits first) is tried a bounded
/// number of times and then stops the apply with the commit's error — exit 1, never a panic or a
/// loop — slice 1 committed, slice 2 not; the next apply resumes and finishes.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_that_loses_every_race_stops_the_apply_after_bounded_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    upgrade(&table, Clustering::None);
    std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
    march_plan(dir.path(), "week");
    let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
    assert!(planned.status.success(), "{}", said(&planned));
    let lost = bf(dir.path(), &["apply", "--auto-approve"], &[("BF_FAULT", "lose-races:2")]);
    assert_eq!(lost.status.code(), Some(1), "{}", said(&lost));
    assert!(said(&lost).contains("another writer committed first at each of 16 attempts"), "{}", said(&lost));
    assert_eq!(crate::common::slices_committed(&table), [1]);
    let resumed = bf(dir.path(), &["apply", "--auto-approve"], &[]);
    assert!(resumed.status.success(), "{}", said(&resumed));
    assert_eq!(crate::common::slices_committed(&table), [1, 2, 3, 4, 5, 6]);
}

/// A table a Spark engine writes is a Databricks team's: `bf init` writes `dialect = "spark"` in
/// its plan, saying why, quotes names as Spark does and says the CSV input's columns (the table's,
/// in Spark's types); a table deltalake writes gets none.
#[tokio::test(flavor = "multi_thread")]
async fn bf_init_writes_the_spark_dialect_for_a_table_spark_writes() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    let init = bf(dir.path(), &["init", "--table", "orders"], &[]);
    assert!(init.status.success(), "{}", said(&init));
    assert!(!String::from_utf8_lossy(&init.stdout).contains("dialect"), "{}", said(&init));
    // Spark sets a table property, as `ALTER TABLE … SET TBLPROPERTIES` does.
    let version = commit_files(&table).last().unwrap().0 + 1;
    let mut metadata = last_metadata(&table);
    metadata["configuration"]["owner"] = Value::from("finance");
    let commit = [
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "operation": "SET TBLPROPERTIES",
            "operationParameters": {}, "engineInfo": "Apache-Spark/4.0.1 Delta-Lake/4.0.0"}}),
        json!({"metaData": metadata}),
    ];
    let text: Vec<String> = commit.iter().map(Value::to_string).collect();
    std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
    let init = bf(dir.path(), &["init", "--table", "orders"], &[]);
    assert!(init.status.success(), "{}", said(&init));
    let plan = String::from_utf8_lossy(&init.stdout);
    assert!(plan.contains("# The table is written by Apache-Spark/4.0.1 Delta-Lake/4.0.0"), "{plan}");
    let parsed = toml::from_str::<toml::Value>(&plan).expect("a plan");
    assert_eq!(parsed["source"]["dialect"].as_str(), Some("spark"), "{plan}");
    // The CSV input says its columns, as a Spark SQL plan's must: the table's, in Spark's types.
    assert_eq!(
        parsed["source"]["inputs"]["corrected"]["schema"].as_str(),
        Some("order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, order_date DATE"),
        "{plan}"
    );
    // With what only the author knows written in (the path, the reason, the window), the plan
    // validates: its CSV schema as `bf init` wrote it.
    std::fs::write(dir.path().join("march.csv"), "order_id,customer,amount,currency,order_date\n").unwrap();
    let quoted = |text: &str| format!("\"{text}\"");
    let written = [
        (quoted(parsed["source"]["inputs"]["corrected"]["path"].as_str().unwrap()), "\"march.csv\""),
        (quoted(parsed["reason"].as_str().unwrap()), "\"Reload March from the export.\""),
        (quoted(parsed["window"]["start"].as_str().unwrap()), "2026-03-01"),
        (quoted(parsed["window"]["end"].as_str().unwrap()), "2026-03-31"),
    ];
    let filled =
        written.iter().fold(plan.to_string(), |text, (placeholder, value)| text.replace(placeholder, value));
    std::fs::write(dir.path().join("init.toml"), filled).unwrap();
    let validated = bf(dir.path(), &["validate", "init.toml"], &[]);
    assert!(validated.status.success(), "{}", said(&validated));
}
