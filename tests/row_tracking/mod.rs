//! Row tracking, as Databricks turns it on: every row has a stable id and the version that last
//! changed it. The table is written by deltalake, then upgraded by one commit written by hand from
//! PROTOCOL.md (Row Tracking) — the feature, the property, the materialized columns' names, every
//! live file given its ids again and the high-water mark — as `ALTER TABLE … SET TBLPROPERTIES
//! ('delta.enableRowTracking' = true)` does. Every outcome is judged from the raw log by the
//! protocol's rules, and each row's stable id and commit version read from the log and the Parquet
//! files by pyarrow, not by bf's code; the rows by DuckDB and the Python package.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{commit_files, orders_table, snapshot, write_plan};
use crate::databricks::{
    CORRECTED, ROWS, UPGRADED_AT, bf, commits_from, last_metadata, march_plan, rows, said,
};

mod undo;

const ROW_ID: &str = "_row-id-col-7f1c2a90-3a4e-4b8e-9d61-0b7c3e5a2f11";
const COMMIT_VERSION: &str = "_row-commit-version-col-c4d2e8b1-5f37-4e0a-8c9b-6a1d2f3e4b50";

/// Appends the commit that turns row tracking on: writer version 7 with `rowTracking`,
/// `domainMetadata` and `inCommitTimestamp` (and `clustering` on `customer`, unpartitioned),
/// `delta.enableRowTracking` with both materialized columns named, every live file added again
/// (`dataChange: false`) with its `baseRowId` — the rows numbered from 0 in log order — and this
/// version as `defaultRowCommitVersion`, and the high-water mark at the last id. `mapped`: column
/// mapping by name on too (each column's physical name its own, as Spark maps an existing table).
/// Returns the commit's version.
fn enable_row_tracking(table: &Path, clustered: bool, mapped: bool) -> u64 {
    let version = commit_files(table).last().unwrap().0 + 1;
    let mut metadata = last_metadata(table);
    if mapped {
        let mut schema: Value = serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
        let fields = schema["fields"].as_array_mut().unwrap();
        for (id, field) in fields.iter_mut().enumerate() {
            field["metadata"] = json!({"delta.columnMapping.id": id + 1,
                "delta.columnMapping.physicalName": field["name"].clone()});
        }
        let count = fields.len();
        metadata["schemaString"] = Value::from(schema.to_string());
        let configuration = metadata["configuration"].as_object_mut().unwrap();
        configuration.insert("delta.columnMapping.mode".into(), "name".into());
        configuration.insert("delta.columnMapping.maxColumnId".into(), count.to_string().into());
    }
    let configuration = metadata["configuration"].as_object_mut().unwrap();
    for (key, value) in [
        ("delta.enableRowTracking", "true"),
        ("delta.rowTracking.materializedRowIdColumnName", ROW_ID),
        ("delta.rowTracking.materializedRowCommitVersionColumnName", COMMIT_VERSION),
        ("delta.enableInCommitTimestamps", "true"),
        ("delta.inCommitTimestampEnablementVersion", &version.to_string()),
        ("delta.inCommitTimestampEnablementTimestamp", &UPGRADED_AT.to_string()),
    ] {
        configuration.insert(key.into(), value.into());
    }
    let mut features = vec!["appendOnly", "invariants", "inCommitTimestamp", "domainMetadata", "rowTracking"];
    let mut actions = vec![
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(), "inCommitTimestamp": UPGRADED_AT,
            "operation": "SET TBLPROPERTIES", "operationParameters": {}, "engineInfo": "the test's own hand"}}),
    ];
    if clustered {
        features.push("clustering");
    }
    if mapped {
        features.push("columnMapping");
    }
    let reader = if mapped { 2 } else { 1 };
    actions.push(
        json!({"protocol": {"minReaderVersion": reader, "minWriterVersion": 7, "writerFeatures": features}}),
    );
    actions.push(json!({"metaData": metadata}));
    let mut next = 0;
    for (_, commit) in commits_from(table, 0) {
        for add in commit.iter().filter_map(|a| a.get("add")) {
            let mut add = add.clone();
            let records = stats_records(&add);
            add["baseRowId"] = json!(next);
            add["defaultRowCommitVersion"] = json!(version);
            add["dataChange"] = json!(false);
            next += records;
            actions.push(json!({ "add": add }));
        }
    }
    let mut domains = vec![json!({"domain": "delta.rowTracking",
        "configuration": json!({"rowIdHighWaterMark": next - 1}).to_string(), "removed": false})];
    if clustered {
        domains.push(json!({"domain": "delta.clustering",
            "configuration": "{\"clusteringColumns\":[[\"customer\"]]}", "removed": false}));
    }
    actions.extend(domains.into_iter().map(|d| json!({ "domainMetadata": d })));
    let text: Vec<String> = actions.iter().map(Value::to_string).collect();
    std::fs::write(table.join(format!("_delta_log/{version:020}.json")), text.join("\n") + "\n").unwrap();
    version
}

fn stats_records(add: &Value) -> i64 {
    let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
    stats["numRecords"].as_i64().unwrap()
}

/// Each live row's stable id and commit version by `order_id`, as PROTOCOL.md defines them: the
/// materialized column's value where the file has one, else `baseRowId` + the row's position and
/// `defaultRowCommitVersion`. The log replayed and the files read by pyarrow.
fn stable_ids(table: &Path) -> BTreeMap<i64, (i64, i64)> {
    let script = format!(
        r#"import glob, json, os, urllib.parse, pyarrow.parquet as pq
t = {table:?}
live = {{}}
for f in sorted(glob.glob(t + '/_delta_log/*.json')):
    for line in open(f):
        a = json.loads(line)
        if 'remove' in a: live.pop(a['remove']['path'], None)
        if 'add' in a: live[a['add']['path']] = a['add']
for path, add in live.items():
    assert not add.get('deletionVector'), path
    data = pq.read_table(os.path.join(t, urllib.parse.unquote(path)))
    n = data.num_rows
    ids = data.column('order_id').to_pylist()
    rid = data.column({ROW_ID:?}).to_pylist() if {ROW_ID:?} in data.column_names else [None] * n
    rcv = data.column({COMMIT_VERSION:?}).to_pylist() if {COMMIT_VERSION:?} in data.column_names else [None] * n
    for i in range(n):
        r = rid[i] if rid[i] is not None else add['baseRowId'] + i
        v = rcv[i] if rcv[i] is not None else add['defaultRowCommitVersion']
        print(ids[i], r, v)
"#,
        table = table.to_str().unwrap()
    );
    let mut found = BTreeMap::new();
    for line in crate::common::servers::python(&script, &[]).lines() {
        let parts: Vec<i64> = line.split(' ').map(|p| p.parse().unwrap()).collect();
        assert!(found.insert(parts[0], (parts[1], parts[2])).is_none(), "order {} twice", parts[0]);
    }
    let mut ids: Vec<i64> = found.values().map(|(id, _)| *id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), found.len(), "every row's id is its own: {found:?}");
    found
}

/// The protocol's rules for row tracking over every commit from `from` on: each file added as a
/// data change at a path new to the table has `baseRowId` above the high-water mark before its
/// commit and `defaultRowCommitVersion` equal to the commit's version, and the commit raises the
/// mark past its last new id; a path added again (a RESTORE) and every remove carry the ids of the
/// path's last add; the mark never goes down; each commit starts with an in-commit timestamp
/// greater than the one before. Returns the mark at the end.
fn judge_row_ids(table: &Path, from: u64) -> i64 {
    let mut mark = -1;
    let mut last_add: HashMap<String, (i64, i64)> = HashMap::new();
    let mut previous_time = 0;
    for (version, actions) in commits_from(table, 0) {
        if version >= from {
            let at = actions[0].pointer("/commitInfo/inCommitTimestamp").and_then(Value::as_i64);
            let at =
                at.unwrap_or_else(|| panic!("version {version} does not start with an in-commit timestamp"));
            assert!(
                at > previous_time,
                "version {version}: in-commit timestamp {at} not after {previous_time}"
            );
            previous_time = at;
        }
        let raised = actions
            .iter()
            .filter_map(|a| a.get("domainMetadata"))
            .filter(|d| d["domain"] == "delta.rowTracking")
            .map(|d| serde_json::from_str::<Value>(d["configuration"].as_str().unwrap()).unwrap())
            .map(|c| c["rowIdHighWaterMark"].as_i64().unwrap())
            .next_back();
        let mut new_ids = mark;
        for action in &actions {
            let Some((add, kind)) =
                action.get("add").map(|a| (a, "add")).or_else(|| action.get("remove").map(|r| (r, "remove")))
            else {
                continue;
            };
            let path = add["path"].as_str().unwrap().to_owned();
            let ids = (add["baseRowId"].as_i64(), add["defaultRowCommitVersion"].as_i64());
            if version < from {
                if let (Some(base), Some(commit)) = ids {
                    last_add.insert(path, (base, commit));
                }
                continue;
            }
            let (Some(base), Some(commit)) = ids else {
                panic!("version {version}: a {kind} without its row ids: {add}")
            };
            match (kind, last_add.get(&path)) {
                ("remove", Some(known)) => assert_eq!((base, commit), *known, "version {version}: {add}"),
                ("remove", None) => panic!("version {version} removes a file never added: {add}"),
                (_, Some(known)) if version > from => {
                    assert_eq!((base, commit), *known, "version {version} adds back a file with other ids");
                }
                _ if version > from => {
                    assert!(base > mark, "version {version}: baseRowId {base} not above the mark {mark}");
                    assert_eq!(commit, version as i64, "version {version}: defaultRowCommitVersion");
                    new_ids = new_ids.max(base + stats_records(add) - 1);
                }
                _ => {}
            }
            if kind == "add" {
                last_add.insert(path, (base, commit));
            }
        }
        if let Some(raised) = raised {
            assert!(raised >= mark, "version {version} lowers the mark from {mark} to {raised}");
            mark = raised;
        }
        assert!(new_ids <= mark, "version {version} hands out ids up to {new_ids} past the mark {mark}");
    }
    mark
}

/// The March reload on a table keeping row ids, weekly slices, unpartitioned (clustered; the two
/// files straddle March, so the slices rewrite them and copy their February and April rows) and
/// partitioned by the day: planned on a clone, applied with a crash after slice 2's commit and
/// resumed, rolled back by RESTORE or window-only (bf's commits undone file by file, last slice
/// first). Judged from the log, each commit by the protocol's rules; each row's id and commit
/// version read raw: a copied row keeps both, a reloaded row has a new id above every id before it
/// and its slice's version; either rollback gives every row its old id back and never lowers the
/// mark. A reloaded order keeps the id and version of its own slice's commit, whatever later slices
/// rewrite. Under column mapping too, each field id the files hold within the table's maximum.
#[tokio::test(flavor = "multi_thread")]
async fn row_tracking_keeps_every_rows_id_through_plan_apply_resume_and_rollback() {
    let cases = [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (true, true, false),
        (false, false, true),
    ];
    for (partitioned, window_only, mapped) in cases {
        let case = format!("partitioned {partitioned}, window only {window_only}, mapped {mapped}");
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table(&table, partitioned, &ROWS).await;
        let upgraded = enable_row_tracking(&table, !partitioned, mapped);
        let mark = judge_row_ids(&table, upgraded);
        let before = stable_ids(&table);
        assert_eq!(before.len(), 7);
        let rows_before = rows(&table);
        std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
        march_plan(dir.path(), "week");
        let untouched = snapshot(&table);
        let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
        assert!(planned.status.success(), "{case}: {}", said(&planned));
        assert_eq!(snapshot(&table), untouched, "{case}: the plan wrote to the table");

        let crashed = bf(dir.path(), &["apply", "--auto-approve"], &[("BF_FAULT", "after-commit:2")]);
        assert!(!crashed.status.success(), "{case}: {}", said(&crashed));
        let resumed = bf(dir.path(), &["apply", "--auto-approve"], &[]);
        assert!(resumed.status.success(), "{case}: {}", said(&resumed));
        let applied_mark = judge_row_ids(&table, upgraded);
        assert!(applied_mark > mark, "{case}: the reload handed out new ids");
        let after = stable_ids(&table);
        // Each reloaded order keeps the id and version its own slice's commit gave it: a later
        // slice rewriting a file never carries them again (orders 2, 3, 5 and 6 are in four slices).
        let versions: Vec<i64> = [2, 3, 5, 6].iter().map(|order| after[order].1).collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{case}: each order its own slice's version: {versions:?}"
        );
        let march = |id: &i64| [2, 3, 5, 6].contains(id);
        for (order, (id, version)) in &after {
            if march(order) {
                assert!(*id > mark, "{case}: reloaded order {order} has a new id, {id}");
                assert!(*version > upgraded as i64, "{case}: order {order} changed at its slice's version");
            } else {
                assert_eq!((*id, *version), before[order], "{case}: copied order {order} keeps its id");
            }
        }
        let expected: Vec<String> = rows_before
            .iter()
            .map(|row| match row.split('|').collect::<Vec<_>>()[..] {
                [id, _, day] if day.starts_with("2026-03") => format!("{id}|EUR|{day}"),
                _ => row.clone(),
            })
            .collect();
        assert_eq!(rows(&table), expected, "{case}: March corrected, the rest as it was");
        if mapped {
            field_ids_under_the_maximum(&table);
        }
        let applied_version = commits_from(&table, 0).last().unwrap().0;

        let mut rollback = vec!["rollback", "--auto-approve"];
        if window_only {
            rollback.push("--window-only");
            // Crashed once the last two slices are undone (the last slice first); the rerun
            // undoes the other three, each once (judged below: a file removed twice fails).
            let crashed = bf(dir.path(), &rollback, &[("BF_FAULT", "rollback-after-commit:4")]);
            assert!(!crashed.status.success(), "{case}: {}", said(&crashed));
        }
        let rolled_back = bf(dir.path(), &rollback, &[]);
        assert!(rolled_back.status.success(), "{case}: {}", said(&rolled_back));
        assert_eq!(judge_row_ids(&table, upgraded), applied_mark, "{case}: the mark stays where it went");
        assert_eq!(stable_ids(&table), before, "{case}: every row has its id and version back");
        assert_eq!(rows(&table), rows_before, "{case}: rolled back row for row");
        // A rollback changes data: a streaming reader skips a file that says it does not.
        for (version, actions) in commits_from(&table, applied_version + 1) {
            for (kind, file) in actions.iter().flat_map(|a| ["add", "remove"].map(|k| (k, a.get(k)))) {
                if let Some(file) = file {
                    assert_eq!(
                        file["dataChange"],
                        json!(true),
                        "{case}: version {version}'s {kind} {}",
                        file["path"]
                    );
                }
            }
        }
    }
}

/// A merge on a table keeping row ids (unpartitioned): the source names two March orders (one
/// changed) and a new one. The March orders it does not name are copied and keep their ids and
/// versions; the orders it names keep their ids (an update) and take the slice's version; the new
/// order gets a new id. The commit says the rows it copied kept their ids. With and without column
/// mapping (the rehearsal's hidden columns then mapped too, by their own names).
#[tokio::test(flavor = "multi_thread")]
async fn a_merge_keeps_the_ids_of_the_rows_it_copies_and_updates() {
    for mapped in [false, true] {
        merge_keeps_ids(mapped).await;
    }
}

async fn merge_keeps_ids(mapped: bool) {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    let upgraded = enable_row_tracking(&table, true, mapped);
    let mark = judge_row_ids(&table, upgraded);
    let before = stable_ids(&table);
    let source = "order_id,customer,amount,currency,order_date\n\
        2,C2,20.0,EUR,2026-03-02\n5,C1,50.0,USD,2026-03-16\n8,C4,80.0,EUR,2026-03-20\n";
    std::fs::write(dir.path().join("march.csv"), source).unwrap();
    march_plan(dir.path(), "month");
    let plan = std::fs::read_to_string(dir.path().join("march.toml")).unwrap();
    write_plan(dir.path(), "march.toml", &format!("{plan}[write]\nmode = \"merge\"\n"));
    let validated = bf(dir.path(), &["validate", "march.toml"], &[]);
    assert!(validated.status.success(), "{}", said(&validated));
    assert!(
        said(&validated).contains("note: the table's writer features")
            && said(&validated).contains("`rowTracking`")
            && said(&validated).contains("the old ones kept for the rows it copies"),
        "{}",
        said(&validated)
    );
    let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
    assert!(planned.status.success(), "{}", said(&planned));
    // Orders 1, 4 and 7 (outside March) and 3 and 6 (March, not in the source) are copied.
    assert!(
        said(&planned).contains("row ids kept for 5 carried rows the slices copy from the files they rewrite; the 3 rows from the source get new ids"),
        "{}",
        said(&planned)
    );
    let applied = bf(dir.path(), &["apply", "--auto-approve"], &[]);
    assert!(applied.status.success(), "{}", said(&applied));
    judge_row_ids(&table, upgraded);
    let after = stable_ids(&table);
    let slice_version = commits_from(&table, upgraded + 1)
        .iter()
        .find(|(_, actions)| actions.iter().any(|a| a.get("add").is_some()))
        .map(|(v, actions)| {
            let info = actions[0]["commitInfo"].clone();
            assert_eq!(info["tags"]["delta.rowTracking.preserved"], "true", "{info}");
            *v as i64
        })
        .unwrap();
    for order in [1, 3, 4, 6, 7] {
        assert_eq!(after[&order], before[&order], "order {order}, copied, keeps its id and version");
    }
    for order in [2, 5] {
        assert_eq!(after[&order], (before[&order].0, slice_version), "order {order}, updated, keeps its id");
    }
    assert!(after[&8].0 > mark && after[&8].1 == slice_version, "the new order: {:?}", after[&8]);
    assert_eq!(rows(&table).len(), 8);
    if mapped {
        field_ids_under_the_maximum(&table);
    }
}

/// Every Parquet field id the table's live files carry is at most its
/// `delta.columnMapping.maxColumnId`, read by the Python `deltalake` package and pyarrow: else the
/// next column a writer adds is given an id a file already uses (the hidden row-id column's), and a
/// reader resolving columns by id reads row ids as its values.
fn field_ids_under_the_maximum(table: &Path) {
    let script = format!(
        "import deltalake, pyarrow.parquet as pq\n\
         t = deltalake.DeltaTable({path:?})\n\
         top = int(t.metadata().configuration['delta.columnMapping.maxColumnId'])\n\
         def ids(fields):\n\
         \x20   for f in fields:\n\
         \x20       if f.metadata and b'PARQUET:field_id' in f.metadata:\n\
         \x20           yield f.name, int(f.metadata[b'PARQUET:field_id'])\n\
         for uri in t.file_uris():\n\
         \x20   for name, fid in ids(pq.read_schema(uri.replace('file://', ''))):\n\
         \x20       print(f'{{name}} {{fid}} {{top}}')\n",
        path = table.to_str().unwrap()
    );
    let listed = crate::common::servers::python(&script, &[]);
    let mut hidden = 0;
    for line in listed.lines() {
        let [name, id, top] = line.split(' ').collect::<Vec<_>>()[..] else { panic!("{line}") };
        let (id, top): (i64, i64) = (id.parse().unwrap(), top.parse().unwrap());
        assert!(id <= top, "{name} carries field id {id}, above maxColumnId {top}:\n{listed}");
        hidden += usize::from(name == ROW_ID || name == COMMIT_VERSION);
    }
    assert!(hidden > 0, "the published files hold the hidden columns, with ids:\n{listed}");
}

/// What another writer does while bf waits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Other {
    /// Appends, raising the mark as the protocol asks.
    Appends,
    /// Appends, then deletes what it appended: the mark stays above every live file's ids.
    AppendsThenDeletes,
    /// Appends and forgets to raise the mark, against the protocol.
    ForgetsTheMark,
}

/// Another writer, not bf nor deltalake (Python and pyarrow, from PROTOCOL.md): appends two October
/// orders to the demo's `orders_daily` in one commit, their file's `baseRowId` above the mark the
/// log states, the mark raised (unless it forgets), an in-commit timestamp after the last; then,
/// if asked, removes the file in a second commit.
fn another_writer(table: &Path, does: Other) {
    let script = format!(
        r#"import datetime, glob, json, os, time, uuid, pyarrow as pa, pyarrow.parquet as pq
t = {table:?}
files = sorted(glob.glob(t + '/_delta_log/*.json'))
version = int(os.path.basename(files[-1]).split('.')[0]) + 1
mark, last = -1, 0
for f in files:
    for line in open(f):
        a = json.loads(line)
        d = a.get('domainMetadata')
        if d and d['domain'] == 'delta.rowTracking':
            mark = json.loads(d['configuration'])['rowIdHighWaterMark']
        last = max(last, (a.get('commitInfo') or {{}}).get('inCommitTimestamp') or 0)
name = 'part-00000-another-writer-' + str(uuid.uuid4()) + '.parquet'
day = datetime.date(2026, 10, 5)
pq.write_table(pa.table({{'order_id': pa.array([9001, 9002], pa.int64()), 'customer': ['Z1', 'Z2'],
    'amount': [1.0, 2.0], 'order_date': pa.array([day, day], pa.date32())}}), os.path.join(t, name))
stats = {{'numRecords': 2, 'minValues': {{'order_id': 9001, 'customer': 'Z1', 'amount': 1.0, 'order_date': '2026-10-05'}},
    'maxValues': {{'order_id': 9002, 'customer': 'Z2', 'amount': 2.0, 'order_date': '2026-10-05'}},
    'nullCount': {{'order_id': 0, 'customer': 0, 'amount': 0, 'order_date': 0}}}}
now = int(time.time() * 1000)
actions = [
    {{'commitInfo': {{'timestamp': now, 'inCommitTimestamp': max(now, last + 1), 'operation': 'WRITE',
        'operationParameters': {{'mode': 'Append'}}, 'engineInfo': 'another writer'}}}},
    {{'add': {{'path': name, 'partitionValues': {{}}, 'size': os.path.getsize(os.path.join(t, name)),
        'modificationTime': now, 'dataChange': True, 'stats': json.dumps(stats), 'baseRowId': mark + 1,
        'defaultRowCommitVersion': version}}}},
]
if {raises}:
    actions.append({{'domainMetadata': {{'domain': 'delta.rowTracking',
        'configuration': json.dumps({{'rowIdHighWaterMark': mark + 2}}), 'removed': False}}}})
with open(t + '/_delta_log/%020d.json' % version, 'x') as log:
    log.write('\n'.join(json.dumps(a) for a in actions) + '\n')
if {deletes}:
    removed = {{'path': name, 'deletionTimestamp': now, 'dataChange': True, 'baseRowId': mark + 1,
        'defaultRowCommitVersion': version}}
    info = {{'timestamp': now, 'inCommitTimestamp': max(now, last + 1) + 1, 'operation': 'DELETE',
        'operationParameters': {{}}, 'engineInfo': 'another writer'}}
    with open(t + '/_delta_log/%020d.json' % (version + 1), 'x') as log:
        log.write(json.dumps({{'commitInfo': info}}) + '\n' + json.dumps({{'remove': removed}}) + '\n')
"#,
        table = table.to_str().unwrap(),
        raises = if does == Other::ForgetsTheMark { "False" } else { "True" },
        deletes = if does == Other::AppendsThenDeletes { "True" } else { "False" },
    );
    crate::common::servers::python(&script, &[]);
}

/// The September daily backfill (thirty one-day slices) into the demo's `orders_daily` with row
/// tracking on, while another writer appends October orders before slice 10 — and, once, deletes
/// them again; once, forgetting to raise the mark. Every slice lands, the other writer's rows stay
/// where it left them, and every id is unique: the ones bf gives after the other writer's are above
/// both the mark and every live file's ids, judged from the log; DuckDB reads every row.
#[tokio::test(flavor = "multi_thread")]
async fn the_september_daily_backfill_beside_another_writer_keeps_row_ids_disjoint() {
    for does in [Other::Appends, Other::AppendsThenDeletes, Other::ForgetsTheMark] {
        let workspace = crate::common::demo_workspace();
        let root = workspace.path();
        let table = root.join("bf-demo/warehouse/orders_daily");
        let upgraded = enable_row_tracking(&table, false, false);
        let planned = bf(root, &["plan", "plans/september.toml", "-q"], &[]);
        assert!(planned.status.success(), "{does:?}: {}", said(&planned));
        let out =
            crate::common::apply_paused(root, &[], 10, "before", async { another_writer(&table, does) })
                .await;
        assert!(out.status.success(), "{does:?}: {}", said(&out));
        assert_eq!(crate::common::slices_committed(&table), (1..=30).collect::<Vec<u64>>(), "{does:?}");
        let infos = crate::common::commit_infos(&table);
        let version_of = |found: &dyn Fn(&Value) -> bool| infos.iter().find(|(_, i)| found(i)).unwrap().0;
        let other = version_of(&|i| i["engineInfo"] == "another writer");
        let slice = |n: u64| move |i: &Value| i["bf.slice"].as_u64() == Some(n);
        assert!(
            version_of(&slice(9)) < other && other < version_of(&slice(10)),
            "{does:?}: between 9 and 10"
        );
        if does != Other::ForgetsTheMark {
            judge_row_ids(&table, upgraded);
        }
        // Every live row's id its own, whatever the other writer did.
        let ids = stable_ids(&table);
        let kept = does != Other::AppendsThenDeletes;
        assert_eq!(
            ids.contains_key(&9001) && ids.contains_key(&9002),
            kept,
            "{does:?}: the other writer's rows"
        );
        let read = crate::common::duckdb_count(&table, "SELECT count(*) FROM t");
        assert_eq!(read as usize, ids.len(), "{does:?}: DuckDB reads every row");
    }
}

/// A rehearsal whose slice commit was edited after the plan to give its files row ids (0, the ids
/// the table's first rows hold): publishing gives the files ids of the table's own, above the mark,
/// never the rehearsal's, so no id is handed out twice.
#[tokio::test(flavor = "multi_thread")]
async fn row_ids_written_into_a_rehearsal_are_never_published() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    orders_table(&table, false, &ROWS).await;
    let upgraded = enable_row_tracking(&table, true, false);
    let mark = judge_row_ids(&table, upgraded);
    std::fs::write(dir.path().join("march.csv"), CORRECTED).unwrap();
    march_plan(dir.path(), "month");
    let planned = bf(dir.path(), &["plan", "march.toml"], &[]);
    assert!(planned.status.success(), "{}", said(&planned));
    let rehearsal = dir.path().join("orders__rehearsal");
    let (version, actions) = commits_from(&rehearsal, 1).pop().unwrap();
    let edited: Vec<String> = actions
        .into_iter()
        .map(|mut action| {
            if let Some(add) = action.get_mut("add") {
                add["baseRowId"] = json!(0);
                add["defaultRowCommitVersion"] = json!(0);
            }
            action.to_string()
        })
        .collect();
    std::fs::write(rehearsal.join(format!("_delta_log/{version:020}.json")), edited.join("\n") + "\n")
        .unwrap();
    let applied = bf(dir.path(), &["apply", "--auto-approve"], &[]);
    assert!(applied.status.success(), "{}", said(&applied));
    assert!(judge_row_ids(&table, upgraded) > mark, "new ids above the mark");
    stable_ids(&table);
}
