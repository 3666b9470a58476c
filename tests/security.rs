//! Untrusted pull requests: a plan file written by anyone who can open one, run by `bf plan` on a
//! machine holding the lake's credentials, and data values written by anyone who can load a row.
//! Each attack runs through the real binary in a temp folder holding a fake secret beside the
//! repository (`secret.csv`, `secret.txt`) and the repository (`repo/`, with a `.git` folder), and
//! each must be refused or inert: the secret in no output, comment or saved plan, no request to a
//! hostile endpoint (a listener on 127.0.0.1 counts connections), nothing written outside the root,
//! a tampered saved plan writing no table.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use proptest::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};
use serde_json::Value;

use crate::common::{bf, orders_table, snapshot, write_plan};

/// The fake secret: a value no output of bf may hold.
const SECRET: &str = "FAKE-SECRET-wJalrXUtnFEMI-K7MDENG";

/// A temp folder holding the secrets and, beside them, the repository a CI job would check out.
struct Checkout {
    dir: tempfile::TempDir,
}

impl Checkout {
    /// `secret.csv` and `secret.txt` beside `repo/`; in `repo/`: `.git/`, the table
    /// `warehouse/orders` (March, one currency wrong), `landing/orders.csv` (the corrected March)
    /// and `plans/`.
    async fn new() -> Checkout {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("secret.csv"),
            format!("order_id,customer,amount,currency,order_date\n1,{SECRET},1.0,EUR,2026-03-02\n"),
        )
        .unwrap();
        std::fs::write(root.join("secret.txt"), format!("[default]\naws_secret_access_key = {SECRET}\n"))
            .unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("landing")).unwrap();
        std::fs::create_dir_all(repo.join("plans")).unwrap();
        orders_table(
            &repo.join("warehouse/orders"),
            false,
            &[&[(1, "C01", 10.0, "USD", "2026-03-02"), (2, "C02", 20.0, "EUR", "2026-03-03")]],
        )
        .await;
        std::fs::write(
            repo.join("landing/orders.csv"),
            "order_id,customer,amount,currency,order_date\n1,C01,10.0,EUR,2026-03-02\n2,C02,20.0,EUR,2026-03-03\n",
        )
        .unwrap();
        Checkout { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// Writes `plans/<name>` with the good plan's text changed by `edit`; returns its path.
    fn plan(&self, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
        write_plan(&self.repo().join("plans"), name, &edit(GOOD_PLAN.to_owned()))
    }

    /// Runs bf in the repository, as a CI job does, with no operator setting from the test's
    /// environment.
    fn bf(&self, args: &[&str]) -> Output {
        self.bf_with(args, &[])
    }

    fn bf_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = bf();
        command.current_dir(self.repo());
        for name in [
            "BF_STATE_DIR",
            "BF_ROOT",
            "BF_ALLOWED_LOCATIONS",
            "BF_ALLOWED_ENDPOINTS",
            "BF_PLAN_KEY",
            "BF_SAMPLES",
            "BF_MAX_SLICES",
            "BF_MAX_READ_BYTES",
        ] {
            command.env_remove(name);
        }
        command.args(args).envs(env.iter().copied()).output().unwrap()
    }

    /// Every file of the temp folder outside the repository, and the table's: what nothing may change.
    fn untouched(&self) -> (Vec<PathBuf>, std::collections::BTreeMap<PathBuf, u64>) {
        let mut outside: Vec<PathBuf> =
            std::fs::read_dir(self.root()).unwrap().map(|e| e.unwrap().path()).collect();
        outside.sort();
        (outside, snapshot(&self.repo().join("warehouse")))
    }
}

const GOOD_PLAN: &str = r#"reason = "Fix March's currency."

[target]
table = "../warehouse/orders"
date_column = "order_date"
key = ["order_id"]

[window]
start = 2026-03-01
end = 2026-03-31

[slicing]
every = "month"

[source]
inputs.orders = { path = "../landing/orders.csv", format = "csv" }
query = "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders"
"#;

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Refused with exit 1 at `line` of `plan`, the secret nowhere in what bf said, no plan saved.
fn refused_at(checkout: &Checkout, output: &Output, plan: &Path, line: usize, expect: &str) {
    let text = said(output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains(expect), "expected {expect:?} in:\n{text}");
    let at = format!("{}:{line}:", plan.strip_prefix(checkout.repo()).unwrap_or(plan).display());
    assert!(text.contains(&at), "expected {at} in:\n{text}");
    assert!(!text.contains(SECRET), "the secret was printed:\n{text}");
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
}

#[tokio::test(flavor = "multi_thread")]
async fn inputs_outside_the_root_are_refused_before_they_are_read() {
    let checkout = Checkout::new().await;
    let secret = checkout.root().join("secret.csv");
    std::os::unix::fs::symlink(&secret, checkout.repo().join("landing/linked.csv")).unwrap();
    std::fs::create_dir(checkout.repo().join("landing/folder")).unwrap();
    std::os::unix::fs::symlink(&secret, checkout.repo().join("landing/folder/orders.csv")).unwrap();
    // A template's folder is inside; the file its one slice reads is a link out of it.
    std::fs::create_dir(checkout.repo().join("landing/daily")).unwrap();
    std::os::unix::fs::symlink(&secret, checkout.repo().join("landing/daily/2026-03-01.csv")).unwrap();
    let landing = checkout.repo().join("landing").canonicalize().unwrap();
    let before = checkout.untouched();
    let attacks = [
        ("absolute", secret.display().to_string()),
        ("climbing", "../../secret.csv".to_owned()),
        ("uri", format!("file://{}", secret.display())),
        ("linked", "../landing/linked.csv".to_owned()),
        ("folder", "../landing/folder/".to_owned()),
        ("template", "../landing/daily/{start}.csv".to_owned()),
        ("template_uri", format!("file://{}/daily/{{start}}.csv", landing.display())),
    ];
    for (name, path) in attacks {
        let plan = checkout.plan(&format!("{name}.toml"), |t| t.replace("../landing/orders.csv", &path));
        let plan_arg = plan.display().to_string();
        for verb in [&["validate", &plan_arg][..], &["plan", &plan_arg, "--format", "markdown"]] {
            let output = checkout.bf(verb);
            refused_at(&checkout, &output, &plan, 16, "outside the root");
            let help = "help: keep the inputs inside the root (or under an allowed store location); links out of \
                        it are not followed; the root is the git work tree holding the plan file";
            assert!(said(&output).contains(help), "{name}: {}", said(&output));
        }
    }
    // The same template, its slice's file inside the root, in either spelling, is read.
    std::fs::remove_file(checkout.repo().join("landing/daily/2026-03-01.csv")).unwrap();
    std::fs::copy(
        checkout.repo().join("landing/orders.csv"),
        checkout.repo().join("landing/daily/2026-03-01.csv"),
    )
    .unwrap();
    for path in [
        "../landing/daily/{start}.csv".to_owned(),
        format!("file://{}/daily/{{start}}.csv", landing.display()),
    ] {
        let plan = checkout.plan("inside.toml", |t| t.replace("../landing/orders.csv", &path));
        let output = checkout.bf(&["validate", &plan.display().to_string()]);
        assert!(output.status.success(), "{path}: {}", said(&output));
    }
    assert_eq!(checkout.untouched(), before, "nothing written outside the repository, the table untouched");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_outside_the_root_are_refused_and_nothing_is_written() {
    let checkout = Checkout::new().await;
    let outside = checkout.root().join("outside");
    let before = checkout.untouched();
    let attacks: [(&str, String, usize); 5] = [
        ("rehearsal", format!("{GOOD_PLAN}\n[rehearsal]\ntable = \"../../outside/rehearsal\"\n"), 20),
        ("log", format!("{GOOD_PLAN}\n[record]\nlog_table = \"{}\"\n", outside.join("log").display()), 20),
        ("notice", format!("{GOOD_PLAN}\n[notify]\nfile = \"../../outside/notice.md\"\n"), 20),
        ("downstream", format!("{GOOD_PLAN}\n[[downstream]]\nplan = \"../../outside/next.toml\"\n"), 20),
        ("target", GOOD_PLAN.replace("\"../warehouse/orders\"", "\"../../outside/orders\""), 4),
    ];
    for (name, text, line) in attacks {
        let plan = checkout.plan(&format!("{name}.toml"), |_| text.clone());
        let output = checkout.bf(&["plan", &plan.display().to_string()]);
        refused_at(&checkout, &output, &plan, line, "is outside the root");
        let help = if name == "target" || name == "rehearsal" || name == "log" {
            "help: keep the plan's tables inside the root (or under an allowed store location); the root is"
        } else {
            "help: keep the plan's files inside the root; the root is"
        };
        assert!(said(&output).contains(help), "{name}: {}", said(&output));
    }
    // The target at the root itself: its rehearsal would land beside the repository.
    let plan = checkout.plan("rooted.toml", |t| t.replace("\"../warehouse/orders\"", "\"..\""));
    let output = checkout.bf(&["plan", &plan.display().to_string()]);
    refused_at(&checkout, &output, &plan, 4, "would be outside the root");
    assert_eq!(checkout.untouched(), before, "nothing written outside the repository, the table untouched");
    assert!(!outside.exists());
}

/// The work a plan can ask for before review is bounded by the operator: `max_slices = 4294967295`
/// over 9,999 years of days, with a `{date}` input (a file lookup per day), is refused at its line
/// at once; the operator raises the bound with `BF_MAX_SLICES`.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_cannot_ask_for_more_slices_than_the_operator_allows() {
    let checkout = Checkout::new().await;
    let endless = |t: String, max: &str| {
        t.replace("start = 2026-03-01", "start = 0001-01-01")
            .replace("end = 2026-03-31", "end = 9999-12-31")
            .replace("every = \"month\"", "every = \"day\"")
            .replace("../landing/orders.csv", "../landing/{date}.csv")
            + &format!("\n[guards]\nmax_slices = {max}\n")
    };
    let plan = checkout.plan("endless.toml", |t| endless(t, "4294967295"));
    let output = checkout.bf(&["validate", &plan.display().to_string()]);
    refused_at(
        &checkout,
        &output,
        &plan,
        20,
        "`max_slices = 4294967295` is more than the operator allows (10000)",
    );
    let plan = checkout.plan("raised.toml", |t| endless(t, "20000"));
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &[("BF_MAX_SLICES", "20000")]);
    assert!(!said(&output).contains("more than the operator allows"), "{}", said(&output));
}

/// The bytes a rehearsal reads are bounded too: a plan reading the whole corrections file for each
/// of March's 31 days reads it 31 times, and with the bound at three and a half times the file the
/// fourth day is refused before it is read (no plan saved, the table as it was); at exactly 31
/// times it plans. A Delta input counts its version's live files. A bound that is not a size is
/// the operator's mistake, named.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_cannot_read_more_than_the_operator_allows() {
    let checkout = Checkout::new().await;
    let file = std::fs::metadata(checkout.repo().join("landing/orders.csv")).unwrap().len();
    let daily = checkout.plan("daily.toml", |t| t.replace("every = \"month\"", "every = \"day\""));
    let before = checkout.untouched();
    let bound = (file * 7 / 2).to_string();
    let output = checkout.bf_with(&["plan", &daily.display().to_string()], &[("BF_MAX_READ_BYTES", &bound)]);
    let text = said(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("slice 4 (2026-03-04): the plan's inputs would have read")
            && text.contains("the operator raises the bound with BF_MAX_READ_BYTES"),
        "{text}"
    );
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
    // The rehearsal beside it holds slices 1 to 3; the table and everything outside are as they were.
    let (outside, mut files) = checkout.untouched();
    files.retain(|path, _| path.starts_with("orders"));
    assert_eq!((outside, files), before, "something changed");
    let exact = (file * 31).to_string();
    let output = checkout.bf_with(&["plan", &daily.display().to_string()], &[("BF_MAX_READ_BYTES", &exact)]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));

    // A Delta input: the bytes of its version's data files, whichever the query keeps.
    let input = checkout.repo().join("warehouse/corrections");
    orders_table(
        &input,
        false,
        &[&[(1, "C01", 10.0, "EUR", "2026-03-02")], &[(2, "C02", 20.0, "EUR", "2026-03-03")]],
    )
    .await;
    let parquet: u64 = std::fs::read_dir(&input)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let delta = checkout.plan("delta.toml", |t| {
        t.replace(
            "{ path = \"../landing/orders.csv\", format = \"csv\" }",
            "{ path = \"../warehouse/corrections\", format = \"delta\" }",
        )
    });
    let one_short = (parquet - 1).to_string();
    let output =
        checkout.bf_with(&["plan", &delta.display().to_string()], &[("BF_MAX_READ_BYTES", &one_short)]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(
        said(&output).contains("slice 1 (2026-03-01): the plan's inputs would have read"),
        "{}",
        said(&output)
    );
    let output = checkout
        .bf_with(&["plan", &delta.display().to_string()], &[("BF_MAX_READ_BYTES", &parquet.to_string())]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));

    let output = checkout.bf_with(&["plan", &daily.display().to_string()], &[("BF_MAX_READ_BYTES", "lots")]);
    assert_ne!(output.status.code(), Some(0), "{}", said(&output));
    assert!(said(&output).contains("BF_MAX_READ_BYTES: `lots` is not a size"), "{}", said(&output));
}

/// Every file bf reads on a plan's behalf is confined, not only the paths the plan writes: a
/// folder input whose `x=1` subfolder links to a folder (inside the root) holding a link out of it;
/// a target whose data file is a link out of the root; a target whose `_delta_log` is a link to
/// another table's log outside it; a Delta input whose log adds a file by an absolute `file:///`
/// path outside it; and `.git/config` (where actions/checkout leaves its token)
/// as a CSV input. Each is refused before its rows are read: the secret is never shown, no table
/// is written, no plan saved.
#[tokio::test(flavor = "multi_thread")]
async fn files_a_plan_reaches_through_folders_tables_and_logs_stay_inside_the_root() {
    let checkout = Checkout::new().await;
    let (repo, root) = (checkout.repo(), checkout.root().to_owned());
    let secret_csv = root.join("secret.csv");
    // A folder input: x=1 links to a folder inside the root, which links out.
    std::fs::create_dir_all(repo.join("landing/parts")).unwrap();
    std::fs::create_dir_all(repo.join("landing/inner")).unwrap();
    std::os::unix::fs::symlink(repo.join("landing/inner"), repo.join("landing/parts/x=1")).unwrap();
    std::os::unix::fs::symlink(&secret_csv, repo.join("landing/inner/leak.csv")).unwrap();
    // A target whose data file is a link to the same rows copied outside the root.
    let linked = repo.join("warehouse/linked");
    orders_table(&linked, false, &[&[(1, "C01", 10.0, "USD", "2026-03-02")]]).await;
    let part = std::fs::read_dir(&linked)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let moved = root.join("moved.parquet");
    std::fs::rename(&part, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &part).unwrap();
    // A Delta input whose log names a table outside the root by its absolute path.
    let outside = root.join("outside_table");
    orders_table(&outside, false, &[&[(7, SECRET, 1.0, "EUR", "2026-03-02")]]).await;
    let feed = repo.join("warehouse/feed");
    std::fs::create_dir_all(feed.join("_delta_log")).unwrap();
    let commits: Vec<String> = (0..2)
        .map(|v| std::fs::read_to_string(outside.join(format!("_delta_log/{v:020}.json"))).unwrap())
        .collect();
    let absolute: String = commits
        .iter()
        .flat_map(|commit| commit.lines())
        .filter(|line| !line.contains("\"commitInfo\""))
        .map(|line| {
            let mut action: Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action.pointer_mut("/add/path") {
                *path = url::Url::from_file_path(outside.join(path.as_str().unwrap()))
                    .unwrap()
                    .to_string()
                    .into();
            }
            format!("{action}\n")
        })
        .collect();
    std::fs::write(feed.join("_delta_log/00000000000000000000.json"), absolute).unwrap();
    std::fs::write(
        repo.join(".git/config"),
        format!("[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n"),
    )
    .unwrap();
    // A target whose log folder is a link to the log of the table outside the root.
    let logged = repo.join("warehouse/logged");
    std::fs::create_dir_all(&logged).unwrap();
    std::os::unix::fs::symlink(outside.join("_delta_log"), logged.join("_delta_log")).unwrap();

    let attacks = [
        (
            "folder",
            GOOD_PLAN.replace("\"../landing/orders.csv\"", "\"../landing/parts\""),
            "leads outside the root",
        ),
        (
            "linked",
            GOOD_PLAN.replace("\"../warehouse/orders\"", "\"../warehouse/linked\""),
            "which is outside the root",
        ),
        (
            "feed",
            GOOD_PLAN.replace(
                "inputs.orders = { path = \"../landing/orders.csv\", format = \"csv\" }",
                "inputs.orders = { path = \"../warehouse/feed\", format = \"delta\" }",
            ),
            "which is outside the root",
        ),
        ("git", GOOD_PLAN.replace("\"../landing/orders.csv\"", "\"../.git/config\""), "never a plan's input"),
        (
            "log",
            GOOD_PLAN.replace("\"../warehouse/orders\"", "\"../warehouse/logged\""),
            "names the file its log",
        ),
    ];
    let tables = || ["orders", "linked", "feed", "logged"].map(|t| snapshot(&repo.join("warehouse").join(t)));
    let before = tables();
    for (name, text, expect) in attacks {
        assert_ne!(text, GOOD_PLAN, "{name}: the attack changed the plan");
        let plan = checkout.plan(&format!("{name}.toml"), |_| text.clone());
        let output = checkout.bf(&["plan", &plan.display().to_string()]);
        let said = said(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {said}");
        assert!(said.contains(expect), "{name}: expected {expect:?} in:\n{said}");
        assert!(!said.contains(SECRET), "{name}: the secret was shown:\n{said}");
        assert!(!repo.join(".bf/plan.json").exists(), "{name}: a plan was saved");
        // Refused before the rehearsal is made: nothing is cloned for a plan that reaches out.
        let rehearsals: Vec<_> = std::fs::read_dir(repo.join("warehouse"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with("__rehearsal"))
            .collect();
        assert!(rehearsals.is_empty(), "{name}: {rehearsals:?} made before the refusal");
    }
    assert_eq!(tables(), before, "no table was written");
}

/// A checkout may hold links where bf writes its own files: at the saved plan `--out` names, at a
/// name like the partial file it once wrote first (`<name>.json.partial`), at the state dir's list
/// of rehearsals. Each points outside the repository; `bf plan` replaces the link with its file and
/// never writes through one: the files outside keep their bytes.
#[tokio::test(flavor = "multi_thread")]
async fn links_planted_where_bf_writes_are_replaced_never_written_through() {
    let checkout = Checkout::new().await;
    let repo = checkout.repo();
    let victims: Vec<PathBuf> = (0..3).map(|i| checkout.root().join(format!("victim-{i}.sh"))).collect();
    for victim in &victims {
        std::fs::write(victim, "#!/bin/sh\necho untouched\n").unwrap();
    }
    std::fs::create_dir_all(repo.join("saved")).unwrap();
    std::fs::create_dir_all(repo.join(".bf")).unwrap();
    std::os::unix::fs::symlink(&victims[0], repo.join("saved/p.json")).unwrap();
    std::os::unix::fs::symlink(&victims[1], repo.join("saved/p.json.partial")).unwrap();
    std::os::unix::fs::symlink(&victims[2], repo.join(".bf/rehearsals")).unwrap();
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q", "--out", "saved/p.json"]);
    assert!(output.status.success(), "{}", said(&output));
    for victim in &victims {
        assert_eq!(std::fs::read_to_string(victim).unwrap(), "#!/bin/sh\necho untouched\n", "{victim:?}");
    }
    let saved = std::fs::symlink_metadata(repo.join("saved/p.json")).unwrap();
    assert!(saved.is_file(), "the saved plan is a file of its own now");
    assert!(std::fs::read_to_string(repo.join("saved/p.json")).unwrap().contains("\"plan_file\""));
    assert!(std::fs::symlink_metadata(repo.join(".bf/rehearsals")).unwrap().is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_is_not_a_plan_or_is_outside_the_root_is_never_quoted() {
    let checkout = Checkout::new().await;
    let secret = checkout.root().join("secret.txt");
    // A credentials file copied into the repository as a plan, a link to one, one named outside.
    std::fs::copy(&secret, checkout.repo().join("plans/creds.toml")).unwrap();
    std::os::unix::fs::symlink(&secret, checkout.repo().join("plans/linked.toml")).unwrap();
    for plan in ["plans/creds.toml", "plans/linked.toml"] {
        for verb in ["validate", "plan", "slices"] {
            let output = checkout.bf(&[verb, plan]);
            let text = said(&output);
            assert_eq!(output.status.code(), Some(1), "{text}");
            assert!(!text.contains(SECRET) && !text.contains("aws_secret_access_key"), "quoted:\n{text}");
        }
    }
    let output = checkout.bf(&["validate", "plans/creds.toml"]);
    assert!(said(&output).contains("not a bf plan file"), "{}", said(&output));
    let output = checkout.bf(&["validate", "plans/linked.toml"]);
    assert!(said(&output).contains("is outside the root"), "{}", said(&output));
    // The operator's root: a plan file outside it is not read at all.
    let output = checkout.bf(&["--root", ".", "validate", "../secret.txt"]);
    assert!(said(&output).contains("is outside the root") && !said(&output).contains(SECRET));
    let output = checkout.bf_with(&["validate", "../secret.txt"], &[("BF_ROOT", ".")]);
    assert!(said(&output).contains("is outside the root") && !said(&output).contains(SECRET));
    // A secret-looking key is named, its value never shown, though the line is quoted.
    let plan = checkout.plan("key.toml", |t| format!("{t}\n[storage]\nsecret_access_key = \"{SECRET}\"\n"));
    let output = checkout.bf(&["validate", &plan.display().to_string()]);
    refused_at(&checkout, &output, &plan, 20, "`secret_access_key` looks like a secret");
    assert!(said(&output).contains("secret_access_key = ****"), "{}", said(&output));
}

/// A server on 127.0.0.1 that counts the connections it is offered.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    fn start() -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let port = socket.local_addr().unwrap().port();
        let (connections, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (counted, stopping) = (connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match socket.accept() {
                    Ok(_) => {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Listener { port, connections, stop }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        std::thread::sleep(std::time::Duration::from_millis(50));
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plans_endpoint_receives_nothing_unless_the_operator_allows_it() {
    let checkout = Checkout::new().await;
    let listener = Listener::start();
    let endpoint = listener.endpoint();
    // The runner's credentials, which the plan's endpoint would receive.
    let credentials = [
        ("AWS_ACCESS_KEY_ID", "AKIAFAKEKEYID"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_SESSION_TOKEN", SECRET),
        ("AWS_REGION", "us-east-1"),
        ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
        ("AZURE_STORAGE_ACCOUNT_KEY", "a2V5"),
    ];
    let on_store = |t: String, table: &str, storage: &str| {
        format!(
            "{}\n[storage]\n{storage}\nmax_retries = 0\nretry_timeout = \"1s\"\n",
            t.replace("../warehouse/orders", table)
        )
    };
    let attacks = [
        (
            "s3",
            "s3://lake/orders",
            format!("endpoint = \"{endpoint}\"\nallow_http = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "unsigned",
            "s3://lake/orders",
            format!("endpoint = \"{endpoint}\"\nskip_signature = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "azure",
            "az://lake/orders",
            format!("endpoint = \"{endpoint}\"\nuse_emulator = true\nallow_http = true"),
            20,
            "endpoint is not one the operator allows",
        ),
        (
            "http",
            "s3://lake/orders",
            "allow_http = true".to_owned(),
            20,
            "`allow_http = true` changes how bf connects",
        ),
        (
            "emulator",
            "az://lake/orders",
            "use_emulator = true".to_owned(),
            20,
            "`use_emulator = true` changes how bf connects",
        ),
        (
            "unsigned alone",
            "s3://lake/orders",
            "skip_signature = true".to_owned(),
            20,
            "`skip_signature = true` changes how bf connects",
        ),
    ];
    for (name, table, storage, line, expect) in attacks {
        let plan = checkout.plan(&format!("{name}.toml"), |t| on_store(t, table, &storage));
        for verb in ["validate", "plan"] {
            let output = checkout.bf_with(&[verb, &plan.display().to_string()], &credentials);
            refused_at(&checkout, &output, &plan, line, expect);
        }
    }
    // A setting that names a place is part of a request's URL: S3's host is built from the region,
    // Azure's from the account. Holding `@host/`, it would send the credentials there, with the
    // store locations limited as well.
    let host = endpoint.trim_start_matches("http://");
    let named = [
        ("region", "s3://lake/orders", format!("region = \"x@{host}/\""), "the region is not a region name"),
        (
            "account",
            "az://lake/orders",
            format!("account_name = \"x@{host}/\""),
            "the account is not a storage account name",
        ),
        (
            "virtual",
            "s3://lake/orders",
            "virtual_hosted_style_request = true".to_owned(),
            "`virtual_hosted_style_request = true` changes how bf connects",
        ),
    ];
    let limited: Vec<(&str, &str)> =
        credentials.iter().copied().chain([("BF_ALLOWED_LOCATIONS", "s3://lake/,az://lake/")]).collect();
    for (name, table, storage, expect) in named {
        let plan = checkout.plan(&format!("{name}.toml"), |t| on_store(t, table, &storage));
        for verb in ["validate", "plan"] {
            let output = checkout.bf_with(&[verb, &plan.display().to_string()], &limited);
            refused_at(&checkout, &output, &plan, 20, expect);
        }
    }
    assert_eq!(listener.connections(), 0, "a request reached the plan's endpoint");
    // The listener counts what reaches it: a zero above means nothing did.
    drop(std::net::TcpStream::connect(("127.0.0.1", listener.port)).unwrap());
    crate::common::wait_for("the listener to count a connection", || listener.connections() == 1);

    // The operator may allow it; `bf validate` still sends nothing.
    let plan = checkout.plan("allowed.toml", |t| {
        on_store(t, "s3://lake/orders", &format!("endpoint = \"{endpoint}/\"\nallow_http = true"))
    });
    let allowed = [("BF_ALLOWED_ENDPOINTS", endpoint.as_str())];
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &allowed);
    assert!(output.status.success(), "{}", said(&output));
    assert_eq!(listener.connections(), 1, "validate sent nothing");
    // Endpoints the operator lists, none of them the plan's: refused, the allowed ones named.
    let others = [("BF_ALLOWED_ENDPOINTS", "http://127.0.0.1:1/, https://s3.internal.example:9000")];
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &others);
    refused_at(&checkout, &output, &plan, 20, "endpoint is not one the operator allows");
    let listed = "; allowed: http://127.0.0.1:1, https://s3.internal.example:9000";
    assert!(said(&output).contains(listed), "{}", said(&output));

    // Store locations may be limited: the target outside the allowed prefixes is refused.
    let plan = checkout.plan("bucket.toml", |t| t.replace("../warehouse/orders", "s3://other-lake/orders"));
    let limited = [("BF_ALLOWED_LOCATIONS", "s3://lake/, gs://lake/")];
    let output = checkout.bf_with(&["plan", &plan.display().to_string()], &limited);
    refused_at(&checkout, &output, &plan, 4, "is not under a location the operator allows");
    let listed = "`s3://other-lake/orders` is not under a location the operator allows (BF_ALLOWED_LOCATIONS: \
                  s3://lake/, gs://lake/)";
    assert!(said(&output).contains(listed), "{}", said(&output));
    // On Azure the account `[storage]` names receives the runner's token: it must be one allowed.
    let plan = checkout.plan("account.toml", |t| {
        t.replace("../warehouse/orders", "az://lake/orders") + "\n[storage]\naccount_name = \"elsewhere\"\n"
    });
    let azure = [("BF_ALLOWED_LOCATIONS", "az://lake/, abfss://lake@acct.dfs.core.windows.net/")];
    // A bucket whose name begins with the account's is not the account either.
    let bucket = [(
        "BF_ALLOWED_LOCATIONS",
        "az://lake/, abfss://lake@acct.dfs.core.windows.net/, s3://elsewhere.lake/",
    )];
    for allowed in [&azure, &bucket] {
        let output = checkout.bf_with(&["plan", &plan.display().to_string()], allowed);
        let expect = "the storage account `elsewhere` is not in a location the operator allows";
        refused_at(&checkout, &output, &plan, 20, expect);
    }
    // The account an allowed Azure location names may be the plan's.
    let plan = checkout.plan("allowed_account.toml", |t| {
        t.replace("../warehouse/orders", "az://lake/orders") + "\n[storage]\naccount_name = \"acct\"\n"
    });
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &azure);
    assert!(output.status.success(), "{}", said(&output));
    let plan =
        checkout.plan("in_bucket.toml", |t| t.replace("../warehouse/orders", "s3a://lake/silver/orders"));
    let output = checkout.bf_with(&["validate", &plan.display().to_string()], &limited);
    assert!(output.status.success(), "{}", said(&output));
}

/// Every HTML a comment may hold is bf's own: the changed rows' `<details>` and the marker.
fn assert_inert(markdown: &str) {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => {
                let html = html.trim();
                let own = html == "</details>"
                    || html == "<!-- bf plan -->"
                    || (html.starts_with("<details><summary>Changed rows in slice ")
                        && html.ends_with("</summary>")
                        && html.matches('<').count() == 3);
                assert!(own, "HTML that is not bf's: {html:?}\n{markdown}");
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                panic!("a link or image to {dest_url}:\n{markdown}")
            }
            _ => {}
        }
    }
    // What GitHub finds in text after parsing — bare URLs, mentions — must not be in the text as
    // written, outside code (which GitHub leaves alone).
    let mut in_code = false;
    for (event, range) in Parser::new_ext(markdown, options).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(pulldown_cmark::TagEnd::CodeBlock) => in_code = false,
            Event::Text(_) if !in_code => {
                let written = &markdown[range];
                let lower = written.to_ascii_lowercase();
                assert!(
                    !lower.contains("://") && !lower.contains("www."),
                    "a bare link in {written:?}:\n{markdown}"
                );
                assert!(
                    written
                        .match_indices('@')
                        .all(|(at, _)| written[at + 1..].starts_with(bf::notify::markdown::JOINER)),
                    "an @mention in {written:?}:\n{markdown}"
                );
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_values_and_reasons_render_inert_and_samples_none_posts_no_value() {
    let checkout = Checkout::new().await;
    let hostile = "ACME</details><img src=\"https://evil.example/x.png\"><!--";
    std::fs::write(
        checkout.repo().join("landing/orders.csv"),
        format!(
            "order_id,customer,amount,currency,order_date\n1,\"{}\",10.0,EUR,2026-03-02\n2,C02,20.0,EUR,2026-03-03\n",
            hostile.replace('"', "\"\"")
        ),
    )
    .unwrap();
    let reason = "![x](https://evil.example/p.png) @octocat <!-- hide | `x` www.evil.example";
    let plan = checkout.plan("hostile.toml", |t| {
        t.replace("Fix March's currency.", reason) + "\n[diff]\nby = [\"customer\"]\n"
    });
    let output = checkout.bf(&["plan", &plan.display().to_string(), "--format", "markdown", "-q"]);
    let markdown = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert!(
        markdown.contains("ACME") && markdown.contains("octocat"),
        "the values are shown, as text:\n{markdown}"
    );
    assert_inert(&markdown);
    let shown = bf_show(&checkout, &[]);
    assert_inert(&shown);

    // Counts and metrics only: no value of the data in the comment or the saved plan.
    for (args, env) in [(&["--samples", "none"][..], &[][..]), (&[][..], &[("BF_SAMPLES", "none")][..])] {
        let mut all = vec!["plan", "plans/hostile.toml", "--format", "markdown", "-q"];
        all.extend_from_slice(args);
        let output = checkout.bf_with(&all, env);
        let text = said(&output);
        assert!(output.status.success(), "{text}");
        assert!(!text.contains("ACME") && text.contains("+0 / −0 / ~1"), "a value was shown:\n{text}");
        let saved = std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap();
        assert!(!saved.contains("ACME"), "a value was saved");
    }
}

fn bf_show(checkout: &Checkout, env: &[(&str, &str)]) -> String {
    let output = checkout.bf_with(&["show", "--format", "markdown", "--detail", "all"], env);
    assert!(output.status.success(), "{}", said(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Plans `plans/march.toml` (the good plan) and returns the saved plan.
async fn planned(checkout: &Checkout, env: &[(&str, &str)]) -> Value {
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf_with(&["plan", &plan.display().to_string(), "-q"], env);
    assert!(output.status.success(), "{}", said(&output));
    serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap()).unwrap()
}

fn save(checkout: &Checkout, plan: &Value) {
    std::fs::write(checkout.repo().join(".bf/plan.json"), serde_json::to_string_pretty(plan).unwrap())
        .unwrap();
}

/// Saves `plan` as the saved plan and applies it: refused (exit 1) saying `why`, `warehouse/orders`
/// as it was.
fn apply_refused(checkout: &Checkout, plan: &Value, why: &str, what: &str) {
    let orders = snapshot(&checkout.repo().join("warehouse/orders"));
    save(checkout, plan);
    let output = checkout.bf(&["apply", "--auto-approve"]);
    assert_eq!(output.status.code(), Some(1), "{what}: {}", said(&output));
    assert!(said(&output).contains(why), "{what}: {}", said(&output));
    assert_eq!(snapshot(&checkout.repo().join("warehouse/orders")), orders, "{what}: the table was written");
}

/// An edit of a saved plan between `bf plan` and `bf apply`.
type Tamper<'a> = Box<dyn Fn(&mut Value) + 'a>;

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_saved_plan_writes_no_table() {
    let checkout = Checkout::new().await;
    orders_table(&checkout.repo().join("warehouse/gold"), false, &[&[(9, "C09", 90.0, "EUR", "2026-03-09")]])
        .await;
    let original = planned(&checkout, &[]).await;
    let gold = url::Url::from_directory_path(checkout.repo().join("warehouse/gold").canonicalize().unwrap())
        .unwrap();
    // The blast radius a guard weighs, changed in one field of the slice's and the plan's alike (so
    // the two still agree): each must still be the files the slice publishes.
    let radius = |field: &'static str| -> Tamper {
        Box::new(move |p: &mut Value| {
            for at in [format!("/slices/0/blast_radius/{field}"), format!("/blast_radius/{field}")] {
                let value = p.pointer_mut(&at).unwrap();
                *value = (value.as_u64().unwrap() + 1).into();
            }
        })
    };
    // Each edit, and the reason the refusal gives for it: every rule of the seal holds on its own.
    let radius_differs = "its blast radius is not its slices' files";
    let beside = checkout.repo().join("landing/prices.csv");
    std::fs::write(&beside, "sku,price\n").unwrap();
    let beside = beside.canonicalize().unwrap().display().to_string();
    let tampers: [(&str, Tamper, &str); 15] = [
        ("the bytes it adds", radius("bytes_added"), radius_differs),
        ("the files it adds", radius("files_added"), radius_differs),
        ("the files it removes", radius("files_removed"), radius_differs),
        ("another target", Box::new(|p| p["target"]["uri"] = gold.to_string().into()), "it targets "),
        (
            "another table as its text's",
            Box::new(|p| p["target"]["table"] = "../warehouse/gold".into()),
            "it targets ",
        ),
        (
            "another date column",
            Box::new(|p| p["target"]["date_column"] = "shipped_on".into()),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another key",
            Box::new(|p| p["target"]["key"] = serde_json::json!(["customer"])),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another reason",
            Box::new(|p| p["reason"] = "Approved by finance.".into()),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another rehearsal",
            Box::new(|p| p["rehearsal"]["uri"] = gold.to_string().into()),
            "its rehearsal is ",
        ),
        (
            "a guard its text does not declare",
            Box::new(|p| {
                p["guards"] =
                    serde_json::json!([{"name": "max_change_pct.rows", "passed": true, "detail": "ok"}]);
            }),
            "its guards are not the ones its text declares",
        ),
        (
            "a check erased",
            Box::new(|p| {
                let checks = p["checks"].as_array_mut().unwrap();
                checks.retain(|c| c["name"] != "reconcile");
            }),
            "check `reconcile` of slice 1 is not recorded",
        ),
        (
            "another plan text",
            Box::new(|p| {
                let text = p["plan_file"]["text"]
                    .as_str()
                    .unwrap()
                    .replace("../warehouse/orders", "../warehouse/gold");
                p["plan_file"]["text"] = text.into();
            }),
            "its text is not the text its sha256 pins",
        ),
        (
            "an input outside",
            Box::new(|p| p["inputs"][0]["path"] = "/etc/hostname".into()),
            "which its text does not name",
        ),
        (
            "an input beside the one named",
            Box::new(|p| p["inputs"][0]["path"] = beside.clone().into()),
            "which its text does not name",
        ),
        (
            "rows outside the window moved, called unchanged",
            Box::new(|p| {
                let rows = p["outside_window"]["before"]["rows"].as_u64().unwrap();
                p["outside_window"]["after"]["rows"] = (rows + 1).into();
            }),
            "rows outside the window changed",
        ),
    ];
    let before = (snapshot(&checkout.repo().join("warehouse")), checkout.untouched());
    for (what, tamper, reason) in &tampers {
        let mut plan = original.clone();
        tamper(&mut plan);
        save(&checkout, &plan);
        for verb in [&["apply", "--auto-approve"][..], &["export", "airflow"]] {
            let output = checkout.bf(verb);
            let text = said(&output);
            assert_eq!(output.status.code(), Some(1), "{what}: {verb:?}\n{text}");
            let why = if what.contains("outside the window") {
                "rows outside the window changed"
            } else {
                "is not what its plan text says"
            };
            assert!(text.contains(why) && text.contains(reason), "{what}: {verb:?}\n{text}");
        }
        assert_eq!(
            (snapshot(&checkout.repo().join("warehouse")), checkout.untouched()),
            before,
            "{what}: a table was written"
        );
    }

    // A guard's verdict is made again from the numbers beside it: a failed guard flipped to
    // `passed`, its problem erased, is refused as failed.
    let capped = checkout.plan("capped.toml", |t| t + "\n[guards]\nmax_bytes_rewritten = \"1 B\"\n");
    let output = checkout.bf(&["plan", &capped.display().to_string(), "-q"]);
    assert_eq!(output.status.code(), Some(1), "the guard fails: {}", said(&output));
    let mut flipped: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    assert_eq!(flipped["guards"][0]["passed"], false, "{}", flipped["guards"]);
    flipped["guards"][0]["passed"] = true.into();
    flipped["problems"] = serde_json::json!([]);
    apply_refused(&checkout, &flipped, "guard max_bytes_rewritten failed", "a guard flipped");

    // A check erased from one slice of several is caught as from the only one.
    let daily = checkout.plan("daily.toml", |t| {
        t.replace("start = 2026-03-01", "start = 2026-03-02")
            .replace("end = 2026-03-31", "end = 2026-03-03")
            .replace("every = \"month\"", "every = \"day\"")
    });
    let output = checkout.bf(&["plan", &daily.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let mut erased: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    let daily_plan = erased.clone();
    erased["checks"].as_array_mut().unwrap().retain(|c| c["slice"] != 2);
    apply_refused(&checkout, &erased, "check `reconcile` of slice 2 is not recorded", "a check erased");

    // The slices are the ones its text makes, each bound on its own: one dropped (its checks and its
    // blast radius with it), or one's first or last day moved.
    let edits: [(&str, Tamper); 3] = [
        (
            "the last slice dropped",
            Box::new(|p| {
                p["slices"].as_array_mut().unwrap().pop();
                p["checks"].as_array_mut().unwrap().retain(|c| c["slice"] != 2);
                p["blast_radius"] = p["slices"][0]["blast_radius"].clone();
            }),
        ),
        ("a slice's first day moved", Box::new(|p| p["slices"][1]["first"] = "2026-03-02".into())),
        ("a slice's last day moved", Box::new(|p| p["slices"][0]["last"] = "2026-03-03".into())),
    ];
    for (what, edit) in &edits {
        let mut plan = daily_plan.clone();
        edit(&mut plan);
        apply_refused(&checkout, &plan, "its slices are not the ones its text makes", what);
    }

    // An input spelt as a `file:` URL is a local path all the same, compared through its links: a
    // file recorded under its template's folder, through a link leading out of the root, is refused.
    let repo = checkout.repo().canonicalize().unwrap();
    std::fs::copy(repo.join("landing/orders.csv"), repo.join("landing/orders_2026-03-01.csv")).unwrap();
    let templated = checkout.plan("templated.toml", |t| {
        let url = format!("\"file://{}/landing/orders_{{start}}.csv\"", repo.display());
        let by_url = t.replace("\"../landing/orders.csv\"", &url);
        assert_ne!(by_url, t);
        by_url
    });
    let output = checkout.bf(&["plan", &templated.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let mut through_a_link: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".bf/plan.json")).unwrap()).unwrap();
    std::os::unix::fs::symlink(checkout.root(), repo.join("landing/out")).unwrap();
    through_a_link["inputs"][0]["path"] = format!("file://{}/landing/out/secret.csv", repo.display()).into();
    let through = "landing/out/secret.csv, which its text does not name";
    apply_refused(&checkout, &through_a_link, through, "a file: URL through a link");
    std::fs::remove_file(repo.join("landing/out")).unwrap();

    // Signed: any change to the saved plan, and an unsigned one, is refused; the signed one applies.
    let key = [("BF_PLAN_KEY", "operator-key-not-in-the-repo")];
    let signed = planned(&checkout, &key).await;
    let tables = snapshot(&checkout.repo().join("warehouse"));
    assert!(signed["signature"].as_str().is_some_and(|s| s.starts_with("hmac-sha256:")), "{signed}");
    let mut altered = signed.clone();
    altered["slices"][0]["after"]["rows"] = 5.into();
    let mut unsigned = signed.clone();
    unsigned.as_object_mut().unwrap().remove("signature");
    for plan in [altered, unsigned] {
        save(&checkout, &plan);
        for verb in [&["apply", "--auto-approve"][..], &["export", "airflow"]] {
            let output = checkout.bf_with(verb, &key);
            assert_eq!(output.status.code(), Some(1), "{}", said(&output));
            assert!(said(&output).contains("is not signed with the key in BF_PLAN_KEY"), "{}", said(&output));
        }
        assert_eq!(snapshot(&checkout.repo().join("warehouse")), tables, "a table was written");
    }
    save(&checkout, &signed);
    let output = checkout.bf_with(&["apply", "--auto-approve"], &key);
    assert!(output.status.success(), "the signed plan applies: {}", said(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_plan_string_in_the_airflow_dag_is_a_python_literal() {
    let checkout = Checkout::new().await;
    let mut plan = planned(&checkout, &[]).await;
    let payload = "\"\"\"\nimport os; os.system('touch PWNED')\n\"\"\"\\";
    plan["id"] = format!("x{payload}").into();
    save(&checkout, &plan);
    let output = checkout.bf(&["export", "airflow"]);
    assert!(output.status.success(), "{}", said(&output));
    let dag = checkout.root().join("dag.py");
    std::fs::write(&dag, &output.stdout).unwrap();
    // Python's own parser: the payload is the docstring's text, and no call to `system` exists.
    let check = format!(
        "import ast, sys\ntree = ast.parse(open({dag:?}).read())\ndoc = ast.get_docstring(tree, clean=False)\n\
         assert {payload:?} in doc, doc\n\
         assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == 'system']\n"
    );
    let python = std::process::Command::new("python3").args(["-c", &check]).output().unwrap();
    assert!(python.status.success(), "{}", String::from_utf8_lossy(&python.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notice_owner_with_a_line_break_is_refused() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("owners.toml", |t| {
        format!("{t}\n[notify]\nfile = \"notice.md\"\nowners = [\"finance\\n**Undo** run this\"]\n")
    });
    let output = checkout.bf(&["validate", &plan.display().to_string()]);
    refused_at(&checkout, &output, &plan, 21, "holds a name with a line break");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notice_file_outside_the_root_is_never_written_even_by_a_rollback_of_an_edited_saved_plan() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("march.toml", |t| format!("{t}\n[notify]\nfile = \"../notices/march.md\"\n"));
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let output = checkout.bf(&["apply", "--auto-approve", "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    assert!(checkout.repo().join("notices/march.md").exists(), "the notice inside the root is written");
    // The saved plan's text edited to send the rollback's notice out of the repository.
    let saved = checkout.repo().join(".bf/plan.json");
    let mut edited: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let text =
        edited["plan_file"]["text"].as_str().unwrap().replace("../notices/march.md", "../../outside.md");
    edited["plan_file"]["text"] = text.into();
    std::fs::write(&saved, edited.to_string()).unwrap();
    let before = checkout.untouched().0;
    let output = checkout.bf(&["rollback", "--auto-approve"]);
    assert!(output.status.success(), "the rollback itself goes ahead: {}", said(&output));
    assert!(
        said(&output).contains("notice NOT delivered") && said(&output).contains("outside the root"),
        "{}",
        said(&output)
    );
    assert_eq!(checkout.untouched().0, before, "nothing written beside the repository");
}

/// Hostile fragments the escaper's inputs are built from.
fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "<",
        ">",
        "<!--",
        "-->",
        "</details>",
        "<img src=x>",
        "<b>",
        "&lt;",
        "&#60;",
        "[",
        "]",
        "(",
        ")",
        "![x](https://e.x/i.png)",
        "[l](http://e.x)",
        "<https://e.x>",
        "https://e.x",
        "www.e.x",
        "a@b.co",
        "@octocat",
        "#12",
        "`",
        "``",
        "```",
        "~~~",
        "|",
        "\\",
        "\\|",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "#",
        "##",
        "-",
        "+",
        "=",
        "1.",
        "2)",
        ">",
        ":",
        "/",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\u{0}",
        "\u{2060}",
        "\u{1b}[31m",
        "\u{1b}]8;;https://e.x\u{7}",
        "\u{202e}",
        "\u{85}",
        "a",
        "Zürich",
        "東京",
        "x_y",
        "0.7%",
        "—",
    ]);
    prop::collection::vec(pieces, 0..12).prop_map(|p| p.concat())
}

/// The text a CommonMark parser makes of `markdown`, after checking it holds no markup but the
/// frame's: no HTML, link, image, emphasis, code block; `cells` table cells per row when a table.
fn rendered(markdown: &str, frame_code: bool) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut text = String::new();
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Text(t) => text.push_str(&t),
            Event::Code(c) => {
                assert!(frame_code, "an unexpected code span in {markdown:?}");
                text.push_str(&c)
            }
            Event::Html(h) | Event::InlineHtml(h) => panic!("HTML {h:?} in {markdown:?}"),
            Event::Start(tag) => match tag {
                Tag::Paragraph
                | Tag::Item
                | Tag::List(None)
                | Tag::Table(_)
                | Tag::TableHead
                | Tag::TableRow
                | Tag::TableCell
                | Tag::Strong => {}
                other => panic!("markup {other:?} in {markdown:?}"),
            },
            Event::End(_) => {}
            Event::SoftBreak | Event::HardBreak => panic!("a line break in {markdown:?}"),
            other => panic!("{other:?} in {markdown:?}"),
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_escaper_makes_any_string_inert_text_that_reads_back_as_written(value in hostile()) {
        use bf::notify::markdown::{JOINER, code, text};
        // What a reader must see, computed here and not by bf: the value on one line, each control
        // character and each character that reorders text a space, the ends trimmed.
        let reorders = |c: char| matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        let flat: String = value.chars().map(|c| if c.is_control() || reorders(c) { ' ' } else { c }).collect();
        let expected = flat.trim().replace(JOINER, "");
        let read = |rendered: String, frame: &str| {
            let got = rendered.replace(JOINER, "");
            let got = got.strip_prefix(frame).unwrap_or(&got).trim().to_owned();
            assert_eq!(got, expected.trim(), "{value:?}");
        };
        for escaped in [text(&value), code(&value)] {
            let is_code = escaped.starts_with('`') && !value.is_empty();
            // In a paragraph after a label, in a list item, in a table cell.
            read(rendered(&format!("**Reason** {escaped}\n"), is_code), "Reason");
            read(rendered(&format!("- {escaped}\n"), is_code), "");
            let table = format!("| a | b |\n|---|---|\n| {escaped} | end |\n");
            let cells = rendered(&table, is_code);
            prop_assert!(cells.ends_with("end"), "the cell was broken: {table:?}");
            read(cells.strip_suffix("end").unwrap().to_owned(), "ab");
            if !is_code {
                // GitHub links bare URLs and mentions in text (never in code): none is left whole.
                let lower = escaped.to_ascii_lowercase();
                prop_assert!(!lower.contains("://") && !lower.contains("www."), "{escaped:?}");
                prop_assert!(escaped.match_indices('@').all(|(at, _)| escaped[at + 1..].starts_with(JOINER)));
            }
        }
    }
}
