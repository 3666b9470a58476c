//! `BF_CLUSTER`: slices' source queries on a Ballista cluster. Each test starts a scheduler and
//! its workers from bf's binary (`bf cluster scheduler`, `bf cluster worker`) on 127.0.0.1, on
//! ports the system picks, and stops them when it ends.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::common::servers::rows_by_day;
use crate::common::{bf_in, demo_workspace, duckdb_rows, snapshot, wait_for, write_plan};

/// A `bf cluster` process, killed when dropped.
struct Node {
    child: Child,
    printed: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let printed = dir.path().join("printed");
        let child = crate::common::bf_process()
            .args(args)
            .env_remove("BF_CLUSTER")
            .envs(env.iter().copied())
            .stdout(std::fs::File::create(&printed).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Node { child, printed, _dir: dir }
    }

    fn printed(&self) -> String {
        std::fs::read_to_string(&self.printed).unwrap_or_default()
    }

    /// Stops it the way a machine failing does: no goodbye to the scheduler.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scheduler and its workers.
struct Cluster {
    scheduler: Node,
    workers: Vec<Node>,
    /// `df://127.0.0.1:PORT`, as the scheduler printed it.
    address: String,
    /// Where each worker keeps the results of its tasks, a folder per job.
    work_dirs: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for dir in &self.work_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Cluster {
    /// A scheduler on a free port, and `workers` workers that have joined it.
    fn start(workers: usize) -> Cluster {
        Cluster::start_with(workers, &[])
    }

    /// [`Cluster::start`], every node with `env`.
    fn start_with(workers: usize, env: &[(&str, &str)]) -> Cluster {
        let mut cluster = Cluster::scheduler_with(env);
        for _ in 0..workers {
            cluster.add_worker(env);
        }
        cluster.wait_ready(workers);
        cluster
    }

    /// A scheduler on a free port, without workers.
    fn scheduler() -> Cluster {
        Cluster::scheduler_with(&[])
    }

    fn scheduler_with(env: &[(&str, &str)]) -> Cluster {
        let scheduler = Node::start(&["cluster", "scheduler", "--bind", "127.0.0.1:0"], env);
        wait_for("the scheduler to listen", || scheduler.printed().contains("listening on df://"));
        let printed = scheduler.printed();
        let address = printed
            .split_whitespace()
            .find(|w| w.starts_with("df://"))
            .map(|w| w.trim_end_matches(';').to_owned())
            .unwrap();
        Cluster { scheduler, workers: Vec::new(), address, work_dirs: Vec::new() }
    }

    /// Starts a worker with `env` for the scheduler (it joins in the background).
    fn add_worker(&mut self, env: &[(&str, &str)]) {
        let joining = self.address.trim_start_matches("df://").to_owned();
        let work = tempfile::tempdir().unwrap().keep();
        let work_dir = work.to_str().unwrap();
        let args =
            ["cluster", "worker", "--scheduler", &joining, "--bind", "127.0.0.1:0", "--work-dir", work_dir];
        self.workers.push(Node::start(&args, env));
        self.work_dirs.push(work);
    }

    /// `bf ARGS` in `root` with `BF_CLUSTER` naming this cluster.
    fn bf(&self, root: &std::path::Path, args: &[&str]) -> std::process::Output {
        bf_in(root).args(args).env("BF_CLUSTER", &self.address).output().unwrap()
    }

    /// What the scheduler's readiness probe says, as bf asks it.
    fn ready(&self) -> String {
        let Ok(mut stream) = std::net::TcpStream::connect(self.address.trim_start_matches("df://")) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        let _ = write!(stream, "GET /readyz HTTP/1.1\r\nHost: scheduler\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    }

    /// The jobs the workers ran tasks of, by the folders they keep their results in.
    fn jobs(&self) -> std::collections::BTreeSet<String> {
        let folders = self.work_dirs.iter().flat_map(|dir| std::fs::read_dir(dir).unwrap());
        folders.map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }

    fn wait_ready(&self, workers: usize) {
        let said = format!("ready: {workers} executors registered");
        wait_for(&said, || self.ready().contains(&said));
    }
}

/// `bf ARGS` in `root` with `BF_CLUSTER` naming `cluster`, running in the background.
fn started(root: &std::path::Path, args: &[&str], cluster: &Cluster) -> Child {
    crate::common::bf_process()
        .args(args)
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .env("BF_CLUSTER", &cluster.address)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn plan_json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "bf plan failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A plan's figures, and those of the plans downstream of it: totals, every slice's comparison,
/// changes and checks, the guards, the source's counts. Not the bytes of the files the rehearsal
/// wrote: the cluster hands the rows back in another order, which Parquet encodes in a few bytes
/// more or less.
fn figures(plan: &Value) -> Value {
    let slices: Vec<Value> = plan["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            let publication = s.as_object_mut().unwrap().remove("publication").unwrap();
            assert_eq!(publication["adds"].as_array().unwrap().len(), s["blast_radius"]["files_added"]);
            s["blast_radius"].as_object_mut().unwrap().remove("bytes_added");
            s
        })
        .collect();
    serde_json::json!({
        "total": plan["total"],
        "slices": slices,
        "checks": plan["checks"],
        "guards": plan["guards"],
        "outside_window": plan["outside_window"],
        "breakdown": plan["breakdown"],
        "problems": plan["problems"],
        "downstream": plan["downstream"].as_array().map(|d| d.iter().map(figures).collect::<Vec<_>>()),
    })
}

/// The March reload planned with `BF_CLUSTER` (a scheduler, two workers) gives the plan a run in
/// bf's process gives, figure for figure — for `orders_silver`, from the landing files, and for
/// `revenue_by_day` downstream, whose Delta input (the silver table's rehearsal, a shallow clone)
/// the workers read — and says where its source ran. `bf apply --recompute` writes the slices
/// from the cluster's rows, and DuckDB reads March as the landing files say. With every worker
/// gone, the same plan fails before anything is written, naming `BF_CLUSTER`; with the scheduler
/// gone too, it says it cannot be reached.
#[test]
fn the_march_reload_on_a_cluster_plans_and_applies_as_it_does_here() {
    let dir = demo_workspace();
    let root = dir.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let plan = "plans/march.toml";
    let here = plan_json(
        &bf_in(root).args(["plan", plan, "-q", "--json"]).env_remove("BF_CLUSTER").output().unwrap(),
    );
    assert!(here.get("source_ran_on").is_none(), "{}", here["source_ran_on"]);
    // The rehearsal's March, read by the Python `deltalake` package (DuckDB does not follow a
    // shallow clone's absolute paths).
    let rehearsed =
        || rows_by_day(here["rehearsal"]["uri"].as_str().unwrap(), None, "2026-03-01", "2026-03-31", &[]);
    let rehearsed_here = rehearsed();
    assert!(rehearsed_here.len() > 100, "{rehearsed_here:?}");

    let mut cluster = Cluster::start(2);
    let untouched = snapshot(&silver);
    let there = plan_json(&cluster.bf(root, &["plan", plan, "-q", "--json"]));
    assert_eq!(figures(&there), figures(&here));
    assert_eq!(there["downstream"].as_array().unwrap().len(), 1);
    assert_eq!(there["rehearsal"]["uri"], here["rehearsal"]["uri"]);
    assert_eq!(rehearsed(), rehearsed_here, "the rehearsals' rows differ");
    assert_eq!(there["source_ran_on"], serde_json::json!({ "cluster": cluster.address, "workers": 2 }));
    assert_eq!(snapshot(&silver), untouched, "bf plan wrote to the table");
    // Where the query ran: the workers hold its results (its rows counted by where their day
    // falls, and its rows).
    let jobs = cluster.jobs();
    assert!(jobs.len() >= 2, "the workers ran no job of the plan: {jobs:?}");
    let shown = bf_in(root).arg("show").output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains(&format!("  source     on cluster {}, 2 workers", cluster.address)), "{shown}");

    let applied = bf_in(root)
        .args(["apply", "--recompute", "--auto-approve", "--cluster", &cluster.address])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success(), "{said}");
    assert!(cluster.jobs().len() > jobs.len(), "the apply ran no job on the cluster");
    assert!(
        said.contains(&format!("Slices' source queries run on cluster {}, 2 workers.", cluster.address)),
        "{said}"
    );
    let march = duckdb_rows(
        &silver,
        "SELECT order_id, currency, CAST(ROUND(amount_eur * 100) AS BIGINT) FROM t \
         WHERE order_date BETWEEN '2026-03-01' AND '2026-03-31'",
    );
    let rates: std::collections::BTreeMap<String, f64> =
        crate::common::fx_rates(&root.join("bf-demo/landing")).into_iter().collect();
    let mut expected: Vec<String> = std::fs::read_to_string(root.join("bf-demo/landing/orders_march.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let cents = (f[2].parse::<f64>().unwrap() * rates[f[3]] * 100.0).round() as i64;
            format!("{}|{}|{cents}", f[0], f[3])
        })
        .collect();
    expected.sort();
    assert!(expected.len() > 100, "{} orders in March", expected.len());
    assert_eq!(march, expected);

    // No worker (once the scheduler has given them up): refused before anything is cloned or
    // written.
    for worker in &mut cluster.workers {
        worker.kill();
    }
    wait_for("the scheduler to give the workers up", || cluster.ready().contains("not ready: 0"));
    let after_apply = snapshot(&silver);
    std::fs::remove_file(root.join(".bf/plan.json")).unwrap();
    let no_workers = cluster.bf(root, &["plan", plan, "-q"]);
    let said = String::from_utf8_lossy(&no_workers.stderr);
    assert_eq!(no_workers.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("BF_CLUSTER={}: the scheduler has no worker", cluster.address))
            && said.contains("bf cluster worker --scheduler"),
        "{said}"
    );
    assert!(!root.join(".bf/plan.json").exists(), "a plan was saved");

    cluster.scheduler.kill();
    let down = cluster.bf(root, &["plan", plan, "-q"]);
    let said = String::from_utf8_lossy(&down.stderr);
    assert_eq!(down.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("BF_CLUSTER={}: the scheduler cannot be reached", cluster.address)),
        "{said}"
    );
    assert!(!root.join(".bf/plan.json").exists(), "a plan was saved");
    assert_eq!(snapshot(&silver), after_apply, "a refused plan wrote to the table");
}

/// A Delta input read on the cluster: `orders`, partitioned by day (a file a day), one of whose
/// files has two orders deleted by a deletion vector, as Spark deletes them. The workers open it at
/// the version the plan pinned and read their share of its files through the vector: planned on
/// the cluster the figures are those of a plan in bf's process, and `bf apply --recompute` on the
/// cluster leaves the target without the deleted orders, as DuckDB reads it.
#[tokio::test(flavor = "multi_thread")]
async fn a_delta_input_with_a_deletion_vector_is_read_on_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (target, expected) = orders_with_a_deletion_vector(root).await;
    let here = plan_json(
        &bf_in(root).args(["plan", "plan.toml", "-q", "--json"]).env_remove("BF_CLUSTER").output().unwrap(),
    );
    assert_eq!(here["total"]["after"]["rows"], 22, "the deleted orders are not read: {}", here["total"]);

    let cluster = Cluster::start(2);
    let there = plan_json(&cluster.bf(root, &["plan", "plan.toml", "-q", "--json"]));
    assert_eq!(figures(&there), figures(&here));
    assert!(!cluster.jobs().is_empty(), "the workers ran no job");
    let applied = cluster.bf(root, &["apply", "--recompute", "--auto-approve", "-q"]);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    assert_eq!(duckdb_rows(&target, "SELECT order_id, CAST(amount AS BIGINT) FROM t"), expected);
}

/// In `root`: `orders`, a Delta table partitioned by day (1–6 March, a file a day, 24 orders), whose
/// 1 March file has orders 1 and 7 deleted by a deletion vector, as Spark deletes them; `t`, the
/// target, holding the first 12 orders; and `plan.toml`, reloading the week from `orders` with
/// the amounts doubled, in two slices. Returns the target's folder and its rows once applied, as
/// `order_id|amount` (DuckDB's text).
async fn orders_with_a_deletion_vector(root: &std::path::Path) -> (PathBuf, Vec<String>) {
    use crate::common::{OrderRow, orders_table};
    const DAYS: [&str; 6] =
        ["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05", "2026-03-06"];
    let rows: Vec<OrderRow> =
        (0..24).map(|i| (i + 1, "C1", 10.0 + i as f64, "EUR", DAYS[i as usize % 6])).collect();
    let orders = orders_table(&root.join("orders"), true, &[&rows]).await;
    let target = orders_table(&root.join("t"), true, &[&rows[..12]]).await;
    let first_day = std::fs::read_to_string(orders.join("_delta_log/00000000000000000001.json"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?.get("add").cloned())
        .find(|a| a["partitionValues"]["order_date"] == "2026-03-01")
        .unwrap();
    // Orders 1 and 7, the first two rows of 1 March's file.
    crate::common::delete_with_vector(&orders, 2, &first_day, &[0, 1], true);
    let mut expected: Vec<String> = rows
        .iter()
        .filter(|r| ![1, 7].contains(&r.0))
        .map(|r| format!("{}|{}", r.0, (r.2 * 2.0) as i64))
        .collect();
    expected.sort();
    write_plan(
        root,
        "plan.toml",
        "reason = \"Reload the first week from orders.\"\n[target]\ntable = \"t\"\ndate_column = \"order_date\"\n\
         key = [\"order_id\"]\n[window]\nstart = 2026-03-01\nend = 2026-03-06\n[slicing]\nevery = \"week\"\n\
         [source]\ninputs.orders = { path = \"orders\", format = \"delta\" }\n\
         query = \"SELECT order_id, customer, amount * 2 AS amount, currency, order_date FROM orders \
         WHERE order_date BETWEEN $start AND $end\"\n",
    );
    (target, expected)
}

/// A worker killed mid-query. Planning: the only worker stops in the middle of reading a slice's
/// Delta input (`BF_PAUSE_POINT=worker-scan`) and is killed once a second worker has joined;
/// Ballista gives its tasks to the second, and the plan's figures are those of a plan in bf's
/// process. Applying: the only worker is killed in the same place with no other to take over; the
/// slice's query fails, nothing of the slice is committed, the way on is named, and once a
/// worker is back `bf apply --recompute` completes the backfill.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_killed_mid_query_is_replaced_or_the_slice_fails_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (target, expected) = orders_with_a_deletion_vector(root).await;
    let here = plan_json(
        &bf_in(root)
            .args(["plan", "plan.toml", "-q", "--json", "--out", "here.json"])
            .env_remove("BF_CLUSTER")
            .output()
            .unwrap(),
    );
    let untouched = snapshot(&target);

    let pause = root.join("worker-paused");
    let pausing = [("BF_PAUSE_FILE", pause.to_str().unwrap()), ("BF_PAUSE_POINT", "worker-scan")];
    let mut cluster = Cluster::scheduler();
    cluster.add_worker(&pausing);
    cluster.wait_ready(1);
    let planning = started(root, &["plan", "plan.toml", "-q", "--json"], &cluster);
    wait_for("the worker to stop in the middle of the query", || pause.exists());
    cluster.add_worker(&[]);
    cluster.wait_ready(2);
    cluster.workers[0].kill();
    let planned = planning.wait_with_output().unwrap();
    let there = if planned.status.success() {
        plan_json(&planned)
    } else {
        // Under a loaded machine, once in a full suite run, the plan came back refused (exit 1, no
        // error: a plan with problems), the slice's rows not those of the source. Refused is the
        // other outcome the issue allows: nothing of it may be applied, and planning again on the
        // worker left gives the plan made in bf's process.
        let refused: Value = serde_json::from_slice(&planned.stdout).unwrap_or_default();
        eprintln!("the plan over the killed worker was refused: {}", refused["problems"]);
        assert_eq!(planned.status.code(), Some(1), "{}", String::from_utf8_lossy(&planned.stderr));
        assert!(!refused["problems"].as_array().is_none_or(Vec::is_empty), "{refused}");
        let applied = cluster.bf(root, &["apply", "--auto-approve", "-q"]);
        assert_eq!(applied.status.code(), Some(1), "a refused plan was applied");
        plan_json(&cluster.bf(root, &["plan", "plan.toml", "-q", "--json"]))
    };
    assert_eq!(figures(&there), figures(&here));
    assert_eq!(snapshot(&target), untouched, "bf plan wrote to the table");

    // The apply's only worker dies mid-slice, and no other takes over.
    cluster.workers[1].kill();
    wait_for("the dead workers given up", || cluster.ready().contains("not ready: 0"));
    std::fs::remove_file(&pause).unwrap();
    cluster.add_worker(&pausing);
    cluster.wait_ready(1);
    let applying = started(root, &["apply", "--recompute", "--auto-approve"], &cluster);
    wait_for("the worker to stop in the middle of the slice", || pause.exists());
    cluster.workers[2].kill();
    let failed = applying.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("Slices' source queries run on cluster {}, 1 worker.", cluster.address)),
        "{said}"
    );
    assert!(
        said.contains("help: the cluster (BF_CLUSTER) lost the workers running this query. Nothing of the slice was written")
            && said.contains("run `bf apply` again"),
        "{said}"
    );
    assert_eq!(snapshot(&target), untouched, "a slice whose query failed wrote to the table");

    cluster.add_worker(&[]);
    cluster.wait_ready(1);
    let resumed = cluster.bf(root, &["apply", "--recompute", "--auto-approve", "-q"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(duckdb_rows(&target, "SELECT order_id, CAST(amount AS BIGINT) FROM t"), expected);
}

/// The September daily backfill on the cluster, a slice a day each reading its day's file: the
/// same plan as in bf's process, and applied, the days hold their files' orders (DuckDB).
#[test]
fn the_september_daily_backfill_on_a_cluster_plans_and_applies_as_it_does_here() {
    let dir = demo_workspace();
    let root = dir.path();
    let plan = crate::common::september_plan(root, "september-5.toml", 5, |text| text);
    let here = plan_json(
        &bf_in(root).args(["plan", &plan, "-q", "--json"]).env_remove("BF_CLUSTER").output().unwrap(),
    );
    assert_eq!(here["slices"].as_array().unwrap().len(), 5);

    let cluster = Cluster::start(2);
    let there = plan_json(&cluster.bf(root, &["plan", &plan, "-q", "--json"]));
    assert_eq!(figures(&there), figures(&here));
    assert!(cluster.jobs().len() >= 5, "a job a slice at least: {:?}", cluster.jobs());
    let applied = bf_in(root).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let mut expected: Vec<String> = (1..=5)
        .flat_map(|d| {
            let file = root.join(format!("bf-demo/landing/orders/2026-09-{d:02}.csv"));
            let text = std::fs::read_to_string(file).unwrap();
            text.lines()
                .skip(1)
                .map(|l| format!("{}|2026-09-{d:02}", l.split(',').next().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    expected.sort();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let read = duckdb_rows(&daily, "SELECT order_id, order_date FROM t WHERE order_date <= '2026-09-05'");
    assert_eq!(read, expected);
}

/// The March reload in a bucket (S3, a local moto server) on the cluster: the scheduler lists the
/// landing files and the workers read them, and the Delta inputs downstream, with their own
/// environment's settings, as bf reads them; the plan is the one bf makes in its own process, and
/// the apply lands March.
#[test]
fn the_march_reload_in_a_bucket_on_a_cluster_reads_with_each_nodes_own_store_settings() {
    let shop = crate::stores::S3Shop::new();
    let env = crate::common::servers::s3_env(&shop.server);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let here = plan_json(&shop.run(&["plan", "plans/march.toml", "-q", "--json"]));
    let cluster = Cluster::start_with(2, &env);
    let there = plan_json(
        &shop
            .bf()
            .args(["plan", "plans/march.toml", "-q", "--json"])
            .env("BF_CLUSTER", &cluster.address)
            .output()
            .unwrap(),
    );
    assert_eq!(figures(&there), figures(&here));
    assert_eq!(there["source_ran_on"]["workers"], 2);
    assert!(cluster.jobs().len() >= 2, "the workers ran no job: {:?}", cluster.jobs());
    let applied = shop
        .bf()
        .args(["apply", "--recompute", "--auto-approve", "-q"])
        .env("BF_CLUSTER", &cluster.address)
        .output()
        .unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    assert_eq!(shop.rows("orders_silver", None, "2026-03-01", "2026-03-31").len(), 409);
    assert_eq!(shop.rows("revenue_by_day", None, "2026-03-01", "2026-03-31").len(), 31);
}

/// A plan in Spark SQL on the cluster: the workers run the functions it was planned with — Spark's
/// `date_format` with a Java pattern, `/` of integers a DOUBLE, `split(…)[0]` from 0, integer `+`
/// failing on overflow, `avg` of a decimal — not DataFusion's of the same names. The rehearsal's
/// rows are those of the plan made in bf's process, and the apply on the cluster lands Spark's rows,
/// as DuckDB reads them.
#[tokio::test(flavor = "multi_thread")]
async fn a_spark_sql_plan_runs_on_the_cluster_with_sparks_functions() {
    use crate::common::{march_orders_plan, orders_table};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in [".git", "plans", "landing"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    let table = root.join("warehouse/orders");
    orders_table(&table, false, &[&[(1, "C01", 10.0, "USD", "2026-03-02")]]).await;
    std::fs::write(
        root.join("landing/orders.csv"),
        "order_id,revenue_cents,tags,order_date\n1,1999,\"EUR,USD\",2026-03-02\n2,7,GBP,2026-03-15\n",
    )
    .unwrap();
    let query = "SELECT order_id + 0 AS order_id, \
                 concat(date_format(`order_date`, 'yyyy-MM'), '/', \
                        CAST(avg(CAST(revenue_cents AS DECIMAL(10, 2))) OVER () AS STRING)) AS customer, \
                 revenue_cents / 100 AS amount, split(tags, ',')[0] AS currency, \
                 CAST(order_date AS DATE) AS order_date FROM orders";
    let plan = march_orders_plan(&format!(
        "dialect = \"spark\"\ninputs.orders = {{ path = \"../landing/orders.csv\", format = \"csv\", \
         schema = \"order_id BIGINT, revenue_cents BIGINT, tags STRING, order_date DATE\" }}\n\
         query = \"\"\"\n{query}\n\"\"\""
    ));
    write_plan(&root.join("plans"), "march.toml", &plan);
    let here = plan_json(
        &bf_in(root)
            .args(["plan", "plans/march.toml", "-q", "--json"])
            .env_remove("BF_CLUSTER")
            .output()
            .unwrap(),
    );
    // Read by the Python `deltalake` package (the rehearsal is a shallow clone).
    let rehearsal = here["rehearsal"]["uri"].as_str().unwrap().to_owned();
    let rows = |table: &str| rows_by_day(table, None, "2026-03-01", "2026-03-31", &[]);
    let rehearsed_here = rows(&rehearsal);
    assert_eq!(rehearsed_here.len(), 2, "{rehearsed_here:?}");
    let first = rehearsed_here.iter().find(|r| r.contains("\"order_id\": 1}")).unwrap();
    for spark in ["\"amount\": 19.99", "\"currency\": \"EUR\"", "\"customer\": \"2026-03/1003."] {
        assert!(first.contains(spark), "{spark} in {first}");
    }

    let cluster = Cluster::start(1);
    let untouched = snapshot(&table);
    let there = plan_json(&cluster.bf(root, &["plan", "plans/march.toml", "-q", "--json"]));
    assert_eq!(there["source_ran_on"]["workers"], 1, "{}", there["source_ran_on"]);
    assert_eq!(figures(&there), figures(&here));
    assert_eq!(rows(&rehearsal), rehearsed_here, "the rehearsals' rows differ");
    assert_eq!(snapshot(&table), untouched, "bf plan wrote to the table");
    let jobs = cluster.jobs();
    assert!(!jobs.is_empty(), "the worker ran no job of the plan");

    let applied = cluster.bf(root, &["apply", "--recompute", "--auto-approve", "-q"]);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    assert!(cluster.jobs().len() > jobs.len(), "the apply ran no job on the cluster");
    assert_eq!(rows(table.to_str().unwrap()), rehearsed_here, "the rows Spark writes");
    assert_eq!(
        duckdb_rows(&table, "SELECT order_id, amount, currency FROM t ORDER BY order_id"),
        ["1|19.99|EUR", "2|0.07|GBP"]
    );
}
