//! Everything a plan names stays inside the root: inputs, writes, folders, tables and logs
//! reached through them, links planted where bf writes, and files that are not plans, never quoted;
//! and the operator's bounds on slices and bytes read.

use super::*;

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
        let help = match name {
            "target" | "rehearsal" | "log" => {
                "help: keep the plan's tables inside the root (or under an allowed store location); the root is"
            }
            "notice" => {
                "help: keep the notice file inside the root, outside `.git` and reached through no link"
            }
            _ => "help: keep the plan's files inside the root; the root is",
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

    // Each scan counts: the month's file read once passes a bound of its size, and scanned five
    // times (a CTE named in five arms of a UNION ALL) it is refused before the query runs.
    let once = file.to_string();
    let monthly = checkout.plan("monthly.toml", |t| t);
    let output = checkout.bf_with(&["plan", &monthly.display().to_string()], &[("BF_MAX_READ_BYTES", &once)]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    let scans = checkout.plan("scans.toml", |t| {
        let query =
            "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders";
        let arms = vec![format!("SELECT * FROM o WHERE order_id < 0"); 4].join(" UNION ALL ");
        t.replace(query, &format!("WITH o AS ({query}) SELECT * FROM o UNION ALL {arms}"))
    });
    let output = checkout.bf_with(&["plan", &scans.display().to_string()], &[("BF_MAX_READ_BYTES", &once)]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    let expected =
        format!("slice 1 (2026-03-01): the plan's inputs would have read {}", bf::plan_file::Size(file * 5));
    assert!(said(&output).contains(&expected), "{expected}: {}", said(&output));

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

/// What a rehearsal writes is bounded before anything is written: by the operator's
/// `BF_MAX_WRITE_ROWS`, else by a million rows and ten for every byte the queries scan — a query
/// joining its two-row input to itself 21 times (2,097,152 rows out of 2) is refused, naming the
/// bound, with no plan saved and the table as it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_rehearsal_writes_no_more_rows_than_its_bound() {
    let checkout = Checkout::new().await;
    let before = checkout.untouched();
    let good = checkout.plan("good.toml", |t| t);
    let output = checkout.bf_with(&["plan", &good.display().to_string()], &[("BF_MAX_WRITE_ROWS", "2")]);
    assert_eq!(output.status.code(), Some(0), "two rows within a bound of two: {}", said(&output));
    let query =
        "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders";
    let doubled = checkout.plan("doubled.toml", |t| t.replace(query, &format!("{query} UNION ALL {query}")));
    let output = checkout.bf_with(&["plan", &doubled.display().to_string()], &[("BF_MAX_WRITE_ROWS", "2")]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(
        said(&output).contains("slice 1 (2026-03-01): the plan's queries return 4 rows by this slice, more than the 2 rows a rehearsal may write (the operator's bound)"),
        "{}",
        said(&output)
    );
    let joins: String = (1..=20).map(|i| format!(" CROSS JOIN orders j{i}")).collect();
    let joined = checkout.plan("joined.toml", |t| {
        t.replace(
            query,
            &format!(
                "SELECT o.order_id, o.customer, o.amount, o.currency, CAST(o.order_date AS DATE) AS order_date \
                 FROM orders o{joins}"
            ),
        )
    });
    std::fs::remove_file(checkout.repo().join(".bf/plan.json")).unwrap();
    let output = checkout.bf(&["plan", &joined.display().to_string()]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(
        said(&output).contains("the plan's queries return 2,097,152 rows by this slice, more than the")
            && said(&output).contains("1,000,000 rows and 10 for every byte the queries scanned"),
        "{}",
        said(&output)
    );
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
    let (outside, mut files) = checkout.untouched();
    files.retain(|path, _| path.starts_with("orders"));
    assert_eq!((outside, files), before, "something changed");
}

/// `[diff] by` a column with a value per row held every group in memory, outside any pool, and saved
/// them all in the plan (957 MB held, a 197 MB plan): a breakdown holds at most 10,000 groups, read
/// as they stream, and one with more is refused at its key, with no plan saved.
#[tokio::test(flavor = "multi_thread")]
async fn a_breakdown_by_a_column_with_a_value_per_row_is_refused() {
    let checkout = Checkout::new().await;
    let rows: String =
        (1..=10_050).map(|i| format!("{i},C{i},{}.0,EUR,2026-03-{:02}\n", i % 97, i % 28 + 1)).collect();
    std::fs::write(
        checkout.repo().join("landing/orders.csv"),
        format!("order_id,customer,amount,currency,order_date\n{rows}"),
    )
    .unwrap();
    let by_currency = checkout.plan("by-currency.toml", |t| t + "\n[diff]\nby = [\"currency\"]\n");
    let output = checkout.bf(&["plan", &by_currency.display().to_string(), "-q"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    std::fs::remove_file(checkout.repo().join(".bf/plan.json")).unwrap();
    let by_id = checkout.plan("by-id.toml", |t| t + "\n[diff]\nby = [\"customer\"]\n");
    let output = checkout.bf(&["plan", &by_id.display().to_string()]);
    let text = said(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("by-id.toml:"), "at the plan's line: {text}");
    assert!(text.contains("the window's rows fall in more than 10,000 groups of (customer)"), "{text}");
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
}

/// A scalar function's result is no memory pool's: three nested `replace()` asked for 10^12 bytes
/// under `BF_MEMORY_LIMIT=64MiB` and were killed at 3.3 GB. Under a limit, the process now stops
/// before holding four times the limit and 1 GiB, saying why (exit 3), with no plan saved and the
/// table as it was. (`prlimit` caps the address space at 8 GiB: were the bound gone, the test fails
/// on an abort instead of taking the machine.)
#[tokio::test(flavor = "multi_thread")]
async fn a_query_building_giant_values_stops_at_the_process_bound() {
    let checkout = Checkout::new().await;
    let before = checkout.untouched();
    let wide = "lpad(customer, 10000)";
    let giant = format!("replace(replace({wide}, ' ', {wide}), ' ', {wide})");
    let plan = checkout.plan("giant.toml", |t| {
        t.replace("SELECT order_id, customer,", &format!("SELECT order_id, {giant} AS customer,"))
    });
    let output = crate::common::clean(std::process::Command::new("prlimit"))
        .arg(format!("--as={}", 8u64 << 30))
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin("bf"))
        .args(["plan", &plan.display().to_string()])
        .env("BF_MEMORY_LIMIT", "64MiB")
        .current_dir(checkout.repo())
        .output()
        .unwrap();
    let text = said(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("error: bf stopped before holding"), "{text}");
    assert!(text.contains("past its bound of 1280 MiB (4 times BF_MEMORY_LIMIT and 1 GiB"), "{text}");
    assert!(!checkout.repo().join(".bf/plan.json").exists(), "a plan was saved");
    let (outside, mut files) = checkout.untouched();
    files.retain(|path, _| !path.starts_with("orders__rehearsal"));
    let (_, mut was) = before.clone();
    was.retain(|path, _| !path.starts_with("orders__rehearsal"));
    assert_eq!((outside, files), (before.0, was), "something changed");
}

/// A query cannot make rows, or giant values, out of nothing: a recursive CTE counting for ever,
/// an array of 200,000,000 elements unnested, a 1.5 GB string from `repeat`. Each ran (or held
/// gigabytes, `BF_MEMORY_LIMIT` or not: a scalar's allocation is no memory pool's) before it was
/// reviewed; each is now refused at the query's line by `bf validate` — asked first, so the test
/// never runs one — and by `bf plan` before anything is read or cloned.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_cannot_make_rows_or_giant_values_out_of_nothing() {
    let checkout = Checkout::new().await;
    let before = checkout.untouched();
    let columns = "CAST(1 AS BIGINT) AS order_id, 'C01' AS customer, 1.0 AS amount, 'EUR' AS currency, \
                   DATE '2026-03-02' AS order_date";
    let attacks = [
        (
            "recursive",
            format!(
                "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT {} FROM t",
                columns.replace("CAST(1 AS BIGINT)", "CAST(n AS BIGINT)")
            ),
            "`WITH RECURSIVE` is not allowed",
        ),
        (
            "unnest",
            format!("SELECT {columns} FROM unnest(array_repeat(1, 200000000)) AS x(u)"),
            "`FROM unnest(…)` of anything but a column is not allowed in a plan",
        ),
        (
            "repeat",
            format!("SELECT {columns}, repeat('x', 1500000000) AS note FROM orders"),
            "`repeat(…)` makes a value as big as its size argument asks",
        ),
    ];
    for (name, query, expect) in attacks {
        let plan = checkout.plan(&format!("{name}.toml"), |t| {
            let line = t.lines().find(|l| l.starts_with("query = ")).unwrap().to_owned();
            t.replace(&line, &format!("query = \"{query}\""))
        });
        let plan_arg = plan.display().to_string();
        for verb in [&["validate", &plan_arg][..], &["plan", &plan_arg]] {
            refused_at(&checkout, &checkout.bf(verb), &plan, 17, expect);
        }
    }
    // The Spark dialect's own: `space(n)` and the widths of a `format_string` pattern are sizes too.
    let spark = [
        (
            "space",
            format!("SELECT {columns}, space(1500000000) AS note FROM orders"),
            "`space(…)` makes a value",
        ),
        (
            "format-string",
            format!("SELECT {columns}, format_string('%01500000000d', 1) AS note FROM orders"),
            "`format_string(…)` pads a value to the widths its pattern asks for",
        ),
    ];
    for (name, query, expect) in spark {
        let plan = checkout.plan(&format!("{name}.toml"), |t| {
            let line = t.lines().find(|l| l.starts_with("query = ")).unwrap().to_owned();
            t.replace(&line, &format!("query = \"{query}\""))
                .replace("[source]\n", "[source]\ndialect = \"spark\"\n")
                .replace(
                    "format = \"csv\" }",
                    "format = \"csv\", schema = \"order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, order_date DATE\" }",
                )
        });
        let plan_arg = plan.display().to_string();
        for verb in [&["validate", &plan_arg][..], &["plan", &plan_arg]] {
            refused_at(&checkout, &checkout.bf(verb), &plan, 18, expect);
        }
    }
    assert_eq!(checkout.untouched(), before, "nothing cloned, nothing written");
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
            GOOD_PLAN.replace(
                "inputs.orders = { path = \"../landing/orders.csv\", format = \"csv\" }",
                "inputs.orders = { path = \"../warehouse/logged\", format = \"delta\" }",
            ),
            "leads outside the root",
        ),
        // The same table as the target: a table bf writes is refused by the write gate first.
        (
            "logged target",
            GOOD_PLAN.replace("\"../warehouse/orders\"", "\"../warehouse/logged\""),
            "_delta_log is a link, and bf never writes through one",
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

/// `.git/config` holds the token actions/checkout leaves there; an input never reads it, however it
/// is reached from inside the root: a link in an input folder, or a template's slice file, that
/// resolves into `.git`. And a pattern (`*.csv`) reads only inside the root: the folder it lists is
/// walked whole as the plan is loaded, so a link out of the root beside its files is refused at the
/// input's line and nothing is read (when DataFusion expanded `*?[` in a path handed as text, it
/// listed the folder, followed the link, and counted none of it against the bound on bytes read).
#[tokio::test(flavor = "multi_thread")]
async fn an_input_never_reads_git_through_a_link_nor_through_a_pattern() {
    let checkout = Checkout::new().await;
    let repo = checkout.repo();
    std::fs::write(
        repo.join(".git/config"),
        format!("[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(repo.join("landing/gitleak")).unwrap();
    std::os::unix::fs::symlink("../../.git/config", repo.join("landing/gitleak/a.csv")).unwrap();
    std::fs::create_dir_all(repo.join("landing/daily")).unwrap();
    std::os::unix::fs::symlink("../../.git/config", repo.join("landing/daily/2026-03-01.csv")).unwrap();
    let before = checkout.untouched();
    for (name, path) in [("folder", "../landing/gitleak"), ("template", "../landing/daily/{start}.csv")] {
        let plan = checkout.plan(&format!("{name}.toml"), |t| t.replace("../landing/orders.csv", path));
        let plan_arg = plan.display().to_string();
        for verb in [&["validate", &plan_arg][..], &["plan", &plan_arg, "--format", "markdown"]] {
            let output = checkout.bf(verb);
            refused_at(&checkout, &output, &plan, 16, "into a `.git` folder");
        }
    }
    assert_eq!(checkout.untouched(), before, "nothing written outside the repository, the table untouched");

    // A pattern (`*.csv`, which here also names a file: the corrected March), and beside the file a
    // link to the secret outside: the pattern's folder is walked whole and refused, nothing read.
    std::fs::create_dir_all(repo.join("landing/glob")).unwrap();
    std::fs::copy(repo.join("landing/orders.csv"), repo.join("landing/glob/*.csv")).unwrap();
    std::os::unix::fs::symlink(checkout.root().join("secret.csv"), repo.join("landing/glob/leak.csv"))
        .unwrap();
    let table = snapshot(&repo.join("warehouse/orders"));
    let plan = checkout.plan("glob.toml", |t| t.replace("../landing/orders.csv", "../landing/glob/*.csv"));
    let output =
        checkout.bf_with(&["plan", &plan.display().to_string(), "--json"], &[("BF_MAX_READ_BYTES", "200")]);
    refused_at(&checkout, &output, &plan, 16, "leads outside the root");
    // Without the link, the pattern reads what it matches: the file named `*.csv`, two rows.
    std::fs::remove_file(repo.join("landing/glob/leak.csv")).unwrap();
    let output =
        checkout.bf_with(&["plan", &plan.display().to_string(), "--json"], &[("BF_MAX_READ_BYTES", "200")]);
    assert!(output.status.success(), "{}", said(&output));
    let saved = std::fs::read_to_string(repo.join(".bf/plan.json")).unwrap();
    let planned: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(planned["slices"][0]["after"]["rows"], 2, "{saved}");
    assert_eq!(checkout.untouched().0, before.0, "nothing written outside the repository");
    assert_eq!(snapshot(&repo.join("warehouse/orders")), table, "the table untouched");
}

/// `bf plan` replaces its previous rehearsal whole, and a rehearsal is known by its first commit —
/// text that whoever writes the folder writes. A pull request copying a clone commit into a folder
/// of the checkout, or into the checkout's top, and pointing `[rehearsal] table` there would have
/// that folder emptied before anyone reviewed it. A folder holding anything a rehearsal does not
/// (a note, a plan, `.git`, another table's log) is refused, named, and keeps every byte.
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_passed_off_as_an_old_rehearsal_is_never_emptied() {
    let checkout = Checkout::new().await;
    let repo = checkout.repo();
    let good = checkout.plan("good.toml", |t| t);
    assert!(checkout.bf(&["plan", &good.display().to_string(), "-q"]).status.success());
    let clone_commit = repo.join("warehouse/orders__rehearsal/_delta_log/00000000000000000000.json");
    std::fs::create_dir_all(repo.join("notes/_delta_log")).unwrap();
    std::fs::copy(&clone_commit, repo.join("notes/_delta_log/00000000000000000000.json")).unwrap();
    std::fs::write(repo.join("notes/keep.txt"), "a note nobody may delete\n").unwrap();
    std::fs::create_dir_all(repo.join("_delta_log")).unwrap();
    std::fs::copy(&clone_commit, repo.join("_delta_log/00000000000000000000.json")).unwrap();
    std::fs::create_dir_all(repo.join("plans/_delta_log")).unwrap();
    std::fs::copy(&clone_commit, repo.join("plans/_delta_log/00000000000000000000.json")).unwrap();
    let cases = [
        ("notes", "../notes", "holds files a rehearsal does not (keep.txt)"),
        ("plans", ".", "holds files a rehearsal does not (good.toml, notes.toml, plans.toml, top.toml)"),
        ("top", "..", "is the target table, or inside it, or holds it"),
    ];
    let plans: Vec<PathBuf> = cases
        .iter()
        .map(|(name, folder, _)| {
            checkout.plan(&format!("{name}.toml"), |t| format!("{t}\n[rehearsal]\ntable = \"{folder}\"\n"))
        })
        .collect();
    let before = snapshot(&repo);
    for ((name, _, expect), plan) in cases.iter().zip(&plans) {
        let output = checkout.bf(&["plan", &plan.display().to_string()]);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", said(&output));
        assert!(said(&output).contains(expect), "{name}: {}", said(&output));
        assert_eq!(snapshot(&repo), before, "{name}: a file of the checkout changed");
    }
    // The same folders listed as rehearsals this folder made, as a pull request can commit
    // `.bf/rehearsals` beside them: `bf clean` removes none, and says why.
    let listed: String =
        ["notes", "plans", ""].iter().map(|f| format!("file://{}/\n", repo.join(f).display())).collect();
    std::fs::write(repo.join(".bf/rehearsals"), listed).unwrap();
    let before = snapshot(&repo);
    for args in [&["clean", "--dry-run"][..], &["clean"]] {
        let output = checkout.bf(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", said(&output));
        for expect in
            ["not a bf rehearsal, so not deleted (nothing was deleted)", "(keep.txt)", "(.bf/", "good.toml"]
        {
            assert!(said(&output).contains(expect), "{args:?}: {expect} in {}", said(&output));
        }
        assert_eq!(snapshot(&repo), before, "{args:?}: a file of the checkout changed");
    }
    assert!(repo.join("notes/keep.txt").exists());
}

/// A checkout may hold `.bf` itself as a link to a folder outside it: bf would keep its saved plan
/// and its list of rehearsals there. `bf plan` refuses to write through it, naming the link and the
/// way out; the folder outside stays empty. (`--state-dir` names a folder of the operator's.)
#[tokio::test(flavor = "multi_thread")]
async fn a_state_dir_that_is_a_link_is_never_written_through() {
    let checkout = Checkout::new().await;
    let outside = checkout.root().join("outside-state");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, checkout.repo().join(".bf")).unwrap();
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert_ne!(output.status.code(), Some(0), "{}", said(&output));
    assert!(
        said(&output).contains(".bf is a link, and bf keeps its state only in a folder of its own"),
        "{}",
        said(&output)
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside");
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q", "--state-dir", "state"]);
    assert!(output.status.success(), "{}", said(&output));
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

/// A target outside the root is refused and never read: not even its columns are listed (a plan
/// naming a column it lacks used to be told the other table's columns), directly or through a link.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_outside_the_root_is_never_read_even_to_list_its_columns() {
    let checkout = Checkout::new().await;
    orders_table(&checkout.root().join("other/orders"), false, &[&[(1, "C01", 1.0, "EUR", "2026-03-02")]])
        .await;
    std::os::unix::fs::symlink(checkout.root().join("other/orders"), checkout.repo().join("warehouse/other"))
        .unwrap();
    for (name, table) in [("outside", "../../other/orders"), ("linked", "../warehouse/other")] {
        let plan = checkout.plan(&format!("{name}.toml"), |t| {
            t.replace("\"../warehouse/orders\"", &format!("\"{table}\""))
                .replace("key = [\"order_id\"]", "key = [\"nope\"]")
        });
        let output = checkout.bf(&["validate", &plan.display().to_string()]);
        let text = said(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {text}");
        assert!(text.contains("outside the root"), "{name}: {text}");
        assert!(!text.contains("its columns are"), "{name}: the table outside was read:\n{text}");
    }
}

/// Files a CI job leaves in the workspace holding credentials (google-github-actions/auth's
/// `gha-creds-*.json`, a `.env`, a key) are never a plan's input, named or in a folder it reads.
#[tokio::test(flavor = "multi_thread")]
async fn a_credentials_file_in_the_checkout_is_never_an_input() {
    let checkout = Checkout::new().await;
    let repo = checkout.repo();
    std::fs::write(repo.join("gha-creds-1a2b3c.json"), format!("{{\"private_key\": \"{SECRET}\"}}")).unwrap();
    std::fs::create_dir_all(repo.join("landing/all")).unwrap();
    std::fs::copy(repo.join("landing/orders.csv"), repo.join("landing/all/orders.csv")).unwrap();
    std::fs::write(repo.join("landing/all/.env"), format!("TOKEN={SECRET}\n")).unwrap();
    for (name, input) in [
        ("named", "{ path = \"../gha-creds-1a2b3c.json\", format = \"json\" }"),
        ("in a folder", "{ path = \"../landing/all\", format = \"csv\" }"),
    ] {
        let plan = checkout.plan("creds.toml", |t| {
            t.replace("{ path = \"../landing/orders.csv\", format = \"csv\" }", input)
        });
        let output = checkout.bf(&["plan", &plan.display().to_string()]);
        let text = said(&output);
        assert_eq!(output.status.code(), Some(1), "{name}: {text}");
        assert!(text.contains("holds credentials"), "{name}: {text}");
        assert!(!text.contains(SECRET), "{name}: {text}");
    }
}
