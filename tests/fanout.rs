//! Slices as tasks: `bf apply --slice N` from several processes, in any order and twice at once,
//! then `--finish`; and the DAG `bf export airflow` writes, run by Airflow itself (`airflow dags
//! test`, from PyPI in a venv) with a slice task that crashes once and is retried.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};

use serde_json::Value;

use crate::common::{
    bf_in, commits_with, demo_workspace, python_venv, release_together, rows_at, september_plan,
    slices_committed,
};

const DAILY: &str = "bf-demo/warehouse/orders_daily";
/// The September backfill cut to its first six days: six one-day slices of an unpartitioned table.
const DAYS: u32 = 6;

fn run(root: &Path, args: &[&str]) -> Output {
    bf_in(root).args(args).output().unwrap()
}

fn ok(root: &Path, args: &[&str]) -> String {
    let out = run(root, args);
    assert!(out.status.success(), "bf {args:?}:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A shop with the six-day September plan saved.
fn planned() -> tempfile::TempDir {
    let workspace = demo_workspace();
    let plan = september_plan(workspace.path(), "september-6.toml", DAYS, |text| text);
    ok(workspace.path(), &["plan", &plan, "-q"]);
    workspace
}

/// The table one full `bf apply` of the same plan leaves.
async fn applied_in_one_go() -> Vec<String> {
    let reference = planned();
    ok(reference.path(), &["apply", "--auto-approve", "-q"]);
    rows_at(&reference.path().join(DAILY), None, "true").await
}

fn spawn_slice(root: &Path, slice: &str, pause: &Path) -> Child {
    crate::common::bf_process()
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .args(["apply", "--slice", slice, "--auto-approve", "-q"])
        .env(bf::fault::PAUSE_FILE_ENV, pause)
        .env(bf::fault::PAUSE_SLICE_ENV, slice)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn slices_applied_by_several_processes_in_any_order_end_as_one_apply() {
    let expected = applied_in_one_go().await;
    let workspace = planned();
    let root = workspace.path();
    let daily = root.join(DAILY);

    // Out of order, one process a slice or a range.
    ok(root, &["apply", "--slice", "4", "--auto-approve", "-q"]);
    ok(root, &["apply", "--slices", "1..2", "--auto-approve", "-q"]);
    ok(root, &["apply", "--slice", "6", "--auto-approve", "-q"]);
    assert_eq!(slices_committed(&daily), [4, 1, 2, 6]);
    assert_eq!(commits_with(&daily, "comment"), 0, "the comment waits for --finish");

    // The same slice by two processes at once: both paused before it, released together.
    let pauses = [root.join("paused-a"), root.join("paused-b")];
    let racing: Vec<Child> = pauses.iter().map(|pause| spawn_slice(root, "3", pause)).collect();
    for out in release_together("both processes to reach slice 3", &pauses, racing) {
        assert!(out.status.success(), "a racing task succeeds: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(slices_committed(&daily), [4, 1, 2, 6, 3], "slice 3 committed once");

    // Finishing before the last slice is refused, naming it, and writes nothing.
    let early = run(root, &["apply", "--finish", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&early.stderr);
    assert_eq!(early.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 of its slices are not committed yet: 5 (2026-09-05)"), "{stderr}");
    assert_eq!(commits_with(&daily, "comment"), 0);
    // A slice the plan does not have is refused.
    let unknown = run(root, &["apply", "--slice", "7", "--auto-approve"]);
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("the plan has slices 1 to 6; it has no slice 7")
    );

    ok(root, &["apply", "--slice", "5", "--auto-approve", "-q"]);
    // A slice already committed is a success that writes nothing.
    let again = ok(root, &["apply", "--slice", "5", "--auto-approve", "--json"]);
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["slices"][0]["status"], "skipped");
    ok(root, &["apply", "--finish", "--auto-approve", "-q"]);
    ok(root, &["apply", "--finish", "--auto-approve", "-q"]);
    assert_eq!(commits_with(&daily, "comment"), 1, "one comment, however often finish runs");
    let mut once = slices_committed(&daily);
    once.sort();
    assert_eq!(once, (1..=u64::from(DAYS)).collect::<Vec<_>>(), "each slice committed exactly once");
    assert_eq!(rows_at(&daily, None, "true").await, expected, "the table one full apply leaves");

    // bf status says which process committed each slice.
    let status: Value = serde_json::from_str(&ok(root, &["status", "--json"])).unwrap();
    let by = status["committed_by"].as_object().unwrap();
    assert_eq!(by.len(), DAYS as usize, "{status}");
    assert!(by.values().all(|w| w.as_str().unwrap().contains(':')), "{status}");
}

/// The venv holding Airflow 3, made once per machine (`BF_AIRFLOW_VENV`, default
/// `~/.cache/bf-airflow-venv`).
fn airflow_venv() -> PathBuf {
    python_venv(
        "BF_AIRFLOW_VENV",
        "bf-airflow-venv",
        "import airflow.providers.standard, airflow.providers.openlineage",
        &["apache-airflow==3.3.2", "apache-airflow-providers-openlineage==2.20.3"],
    )
}

/// `bf export airflow`'s DAG imported by Airflow: its tasks are the plan's slices then `finish`, one
/// after the other; `airflow dags test` runs it against the shop, one slice task crashing after its
/// commit on its first try, and Airflow's retry completes the backfill as one apply would. With
/// Airflow's OpenLineage provider and an endpoint on 127.0.0.1, each slice's run is a child of the
/// task that ran it, and `finish` emits the backfill's run.
#[tokio::test(flavor = "multi_thread")]
async fn an_exported_dag_runs_on_airflow_and_a_slice_that_crashed_is_retried_once() {
    let expected = applied_in_one_go().await;
    let workspace = planned();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let receiver = crate::common::Receiver::start(200);
    let dag_id = run_exported_dag(root, DAYS, &[("OPENLINEAGE_URL", receiver.base())]);
    lineage_is_airflows(&receiver.bodies(), &dag_id);
    let mut once = slices_committed(&daily);
    once.sort();
    assert_eq!(once, (1..=u64::from(DAYS)).collect::<Vec<_>>(), "each slice committed exactly once");
    assert_eq!(commits_with(&daily, "comment"), 1, "finish ran once every slice was in");
    assert_eq!(rows_at(&daily, None, "true").await, expected, "the table one full apply leaves");
    let status: Value = serde_json::from_str(&ok(root, &["status", "--json"])).unwrap();
    let by = &status["committed_by"]["3"];
    assert!(
        by.as_str().unwrap().starts_with(&format!("airflow:{dag_id}/slice_003_2026-09-03#1")),
        "{status}"
    );
}

/// bf's events under Airflow: every slice task's slice run has the task's run as its parent (the
/// provider's macro), the run of the provider's own events for that task; `finish`'s task is the
/// parent of the backfill's run; bf's events are valid OpenLineage.
fn lineage_is_airflows(events: &[Value], dag_id: &str) {
    let bf: Vec<&Value> = events.iter().filter(|e| e["run"]["facets"]["bf"].is_object()).collect();
    let slices: Vec<&&Value> = bf
        .iter()
        .filter(|e| e["job"]["name"] == "orders_daily/backfill/slice" && e["eventType"] == "COMPLETE")
        .collect();
    // Slice 3's first try crashed after its commit: its retry found it committed and wrote nothing.
    assert_eq!(slices.len(), DAYS as usize - 1, "{bf:#?}");
    for event in slices {
        let index = event["run"]["facets"]["bf"]["slice"]["index"].as_u64().unwrap();
        let parent = &event["run"]["facets"]["parent"];
        let task = format!("{dag_id}.slice_{index:03}_2026-09-{index:02}");
        assert_eq!(parent["job"]["name"], task.as_str(), "{event}");
        let run = parent["run"]["runId"].as_str().unwrap();
        assert!(uuid::Uuid::parse_str(run).is_ok(), "{run}");
        // The provider's own events for the task (its last try) are of the same run.
        let airflows: Vec<&Value> = events.iter().filter(|e| e["job"]["name"] == task.as_str()).collect();
        assert!(airflows.iter().any(|e| e["run"]["runId"].as_str() == Some(run)), "{task}: {airflows:#?}");
    }
    let backfill: Vec<&&Value> = bf.iter().filter(|e| e["job"]["name"] == "orders_daily/backfill").collect();
    assert_eq!(
        backfill.iter().map(|e| e["eventType"].as_str().unwrap()).collect::<Vec<_>>(),
        ["START", "COMPLETE"]
    );
    let parent = &backfill[1]["run"]["facets"]["parent"];
    assert_eq!(parent["job"]["name"], format!("{dag_id}.finish"));
    let finish = format!("{dag_id}.finish");
    assert!(
        events
            .iter()
            .any(|e| e["job"]["name"] == finish.as_str() && e["run"]["runId"] == parent["run"]["runId"])
    );
    let ours: Vec<Value> = bf.into_iter().cloned().collect();
    crate::lineage::assert_valid(&ours);
}

/// Exports the plan saved in `root` (the September backfill cut to `days` days) as a DAG, checks
/// Airflow imports it with the plan's slices in order then `finish`, and runs it with
/// `airflow dags test` — slice 3's task crashing after its commit on its first try — with `env`
/// (an object store's settings) reaching the tasks. Returns the DAG's id.
pub fn run_exported_dag(root: &Path, days: u32, env: &[(&str, String)]) -> String {
    let home = root.join("airflow");
    std::fs::create_dir_all(home.join("dags")).unwrap();
    let out = bf_in(root)
        .args(["export", "airflow", "--retry-delay", "1"])
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(home.join("dags/backfill_september.py"), &out.stdout).unwrap();
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let dag_id = format!("bf_backfill_orders_daily_{}", plan["id"].as_str().unwrap());

    // The bf the tasks run: the real binary, which crashes after slice 3's commit the first time.
    let marker = root.join("crashed-once");
    let wrapper = root.join("bf-once");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" --slice 3 \"*) if [ ! -e {marker:?} ]; then touch {marker:?}; \
             export BF_FAULT=after-commit:3; fi;; esac\nexec {bf:?} \"$@\"\n",
            bf = assert_cmd::cargo::cargo_bin("bf"),
        ),
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&wrapper).status().unwrap();

    let venv = airflow_venv();
    let airflow = |args: &[&str]| {
        crate::common::clean(std::process::Command::new(venv.join("airflow")))
            .args(args)
            .current_dir(root)
            .env("AIRFLOW_HOME", &home)
            .env("AIRFLOW__CORE__DAGS_FOLDER", home.join("dags"))
            .env("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
            .env("BF_BIN", &wrapper)
            .env_remove("BF_STATE_DIR")
            .envs(env.iter().cloned())
            .output()
            .unwrap()
    };
    // The DAG file imports, and its graph is the plan's: slice 1 → 2 → …, each → finish.
    let graph = std::process::Command::new(venv.join("python"))
        .arg("-c")
        .arg(format!(
            "import importlib.util, json\n\
             spec = importlib.util.spec_from_file_location('dag', {:?})\n\
             module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n\
             dag = module.dag\n\
             print(json.dumps({{'id': dag.dag_id, 'max_active_tasks': dag.max_active_tasks, 'tags': sorted(dag.tags),\n\
               'tasks': {{t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}}}}))",
            home.join("dags/backfill_september.py")
        ))
        .output()
        .unwrap();
    assert!(graph.status.success(), "the DAG imports: {}", String::from_utf8_lossy(&graph.stderr));
    let graph: Value = serde_json::from_slice(&graph.stdout).unwrap();
    assert_eq!(graph["id"], dag_id.as_str());
    assert_eq!(graph["max_active_tasks"], 1, "one slice at a time on an unpartitioned table");
    assert!(graph["tags"].as_array().unwrap().iter().any(|t| t.as_str().unwrap().starts_with("backfill:")));
    let tasks = graph["tasks"].as_object().unwrap();
    assert_eq!(tasks.len(), days as usize + 1);
    for day in 1..=days {
        let task = format!("slice_{day:03}_2026-09-{day:02}");
        let mut next = vec!["finish".to_owned()];
        if day < days {
            next.push(format!("slice_{:03}_2026-09-{:02}", day + 1, day + 1));
        }
        next.sort();
        assert_eq!(tasks[&task], serde_json::json!(next), "{task}");
    }

    let migrated = airflow(&["db", "migrate"]);
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let ran = airflow(&["dags", "test", &dag_id]);
    let log = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    assert!(ran.status.success(), "airflow dags test:\n{log}");
    assert!(log.contains("state=success"), "the run succeeded:\n{log}");
    assert!(marker.exists(), "slice 3's first try crashed after its commit");
    dag_id
}

/// On a table partitioned by the date, slice tasks run at once as `parallel` allows: four
/// processes, each paused before its slice and released together, all commit (deltalake rebases
/// commits to other partitions), and the exported DAG lets four run at a time.
#[tokio::test(flavor = "multi_thread")]
async fn different_slices_at_once_on_a_table_partitioned_by_day_all_land() {
    use crate::common::{count, four_days_at_once};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let target = four_days_at_once(root).await;
    ok(root, &["plan", "days.toml", "-q"]);
    let dag = ok(root, &["export", "airflow"]);
    assert!(dag.contains("max_active_tasks=4,") && !dag.contains("previous >> task"), "{dag}");

    let pauses: Vec<PathBuf> = (1..=4).map(|n| root.join(format!("paused-{n}"))).collect();
    let tasks: Vec<Child> =
        pauses.iter().enumerate().map(|(i, pause)| spawn_slice(root, &(i + 1).to_string(), pause)).collect();
    for out in release_together("four slice tasks to reach their slices", &pauses, tasks) {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    ok(root, &["apply", "--finish", "--auto-approve", "-q"]);
    let mut slices = slices_committed(&target);
    slices.sort();
    assert_eq!(slices, [1, 2, 3, 4], "all four slices committed, each once");
    assert_eq!(count(&target, "SELECT CAST(SUM(amount) AS BIGINT) FROM t").await, 11 + 30 + 40 + 50 + 20);
    assert_eq!(commits_with(&target, "comment"), 1);
}
