//! A newcomer's first hour: what a new user runs into with the demo, the September backfill and a
//! plan of their own, replayed through the real binary.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{bf_in, demo_workspace, slices_committed};

const DAILY: &str = "bf-demo/warehouse/orders_daily";

/// `bf apply 2>&1 | head -3`: the reader goes away after three lines. The apply is not stopped by
/// its output: every slice lands, once, and bf ends without a panic.
#[test]
fn a_reader_that_closes_the_pipe_never_stops_an_apply() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let planned = bf_in(root).args(["plan", "plans/september.toml", "--quiet"]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let mut apply = crate::common::bf_process()
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .args(["apply", "--auto-approve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = apply.stderr.take().unwrap();
    let read: Vec<String> = BufReader::new(stderr).lines().take(3).map(Result::unwrap).collect();
    assert_eq!(read.len(), 3, "{read:?}");
    // Both ends closed, as `2>&1 | head -3` leaves them.
    drop(apply.stdout.take());
    let status = apply.wait().unwrap();
    assert_eq!(status.code(), Some(0), "no panic, no failure: {status:?}");
    let mut committed = slices_committed(&root.join(DAILY));
    committed.sort();
    assert_eq!(committed, (1..=30).collect::<Vec<u64>>(), "every slice once");
}

/// A `payments` table partitioned by its date, March 1–3, with 2 wrong amounts on the 2nd; and the
/// corrected files, one per day, in `landing/payments/`.
async fn payments(root: &std::path::Path) -> std::path::PathBuf {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{Date32Array, Int64Array, RecordBatch, StringArray};
    use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema};
    use bf::deltalake::kernel::{DataType, StructField};
    use bf::deltalake::protocol::SaveMode;

    let dir = root.join("warehouse/payments");
    let columns = vec![
        StructField::new("payment_id", DataType::LONG, true),
        StructField::new("customer", DataType::STRING, true),
        StructField::new("amount_cents", DataType::LONG, true),
        StructField::new("currency", DataType::STRING, true),
        StructField::new("paid_on", DataType::DATE, true),
    ];
    let table = crate::common::new_table_with(&dir, columns, &["paid_on"], &[]).await;
    let day = |d: &str| {
        (chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap() - chrono::NaiveDate::default()).num_days()
            as i32
    };
    let rows: [(i64, &str, i64, &str, &str); 6] = [
        (1, "C1", 1000, "EUR", "2026-03-01"),
        (2, "C2", 2500, "EUR", "2026-03-01"),
        (3, "C1", 990, "EUR", "2026-03-02"),
        (4, "C3", 12000, "EUR", "2026-03-02"),
        (5, "C2", 700, "EUR", "2026-03-03"),
        (6, "C4", 4200, "EUR", "2026-03-04"),
    ];
    let schema = Arc::new(Schema::new(vec![
        Field::new("payment_id", ArrowType::Int64, true),
        Field::new("customer", ArrowType::Utf8, true),
        Field::new("amount_cents", ArrowType::Int64, true),
        Field::new("currency", ArrowType::Utf8, true),
        Field::new("paid_on", ArrowType::Date32, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| day(r.4)))),
        ],
    )
    .unwrap();
    table.write(vec![batch]).with_save_mode(SaveMode::Append).await.unwrap();
    let landing = root.join("landing/payments");
    std::fs::create_dir_all(&landing).unwrap();
    let header = "payment_id,customer,amount_cents,currency,paid_on\n";
    for (file, body) in [
        ("2026-03-01.csv", "1,C1,1000,EUR,2026-03-01\n2,C2,2500,EUR,2026-03-01\n"),
        ("2026-03-02.csv", "3,C1,1990,EUR,2026-03-02\n4,C3,1200,EUR,2026-03-02\n"),
        ("2026-03-03.csv", "5,C2,700,EUR,2026-03-03\n"),
    ] {
        std::fs::write(landing.join(file), format!("{header}{body}")).unwrap();
    }
    dir
}

/// The README's "Your first plan", command by command, on a table of one's own: `bf init` writes
/// the plan; `bf validate` points at each placeholder; written in, the plan validates, rehearses,
/// applies (the two wrong amounts corrected, the 4th untouched) and rolls back to the table as it
/// was.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_first_plan_from_init_to_rollback_on_a_table_of_ones_own() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A git work tree: the root plans reach within.
    assert!(Command::new("git").arg("init").arg("-q").arg(root).status().unwrap().success());
    std::fs::create_dir(root.join("plans")).unwrap();
    let table = payments(root).await;
    let before = crate::common::rows_at(&table, None, "true").await;

    let readme = std::fs::read_to_string(crate::common::repo("README.md")).unwrap();
    let section = readme.split("## Your first plan").nth(1).unwrap();
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let commands: Vec<Vec<String>> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| l.starts_with("bf "))
        .map(|l| l.split_whitespace().skip(1).map(str::to_owned).collect())
        .collect();
    assert_eq!(commands.len(), 6, "{block}");
    let mut validations = 0;
    for command in commands {
        let (args, into) = match command.iter().position(|a| a == ">") {
            Some(at) => (command[..at].to_vec(), Some(command[at + 1].clone())),
            None => (command.clone(), None),
        };
        let mut args = args;
        if matches!(args[0].as_str(), "apply" | "rollback") {
            args.push("--auto-approve".into()); // no terminal here to say yes on
        }
        let mut bf = crate::common::bf_process();
        bf.current_dir(root).env_remove("BF_STATE_DIR").args(&args);
        if let Some(into) = &into {
            bf.stdout(std::fs::File::create(root.join(into)).unwrap());
        }
        let out = bf.output().unwrap();
        let said =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if args[0] == "validate" {
            validations += 1;
        }
        if args[0] == "validate" && validations == 1 {
            // The placeholders, each at its line; then written in, as the author would.
            assert!(!out.status.success(), "{said}");
            for key in ["reason", "window.start", "window.end", "source.inputs.corrected.path"] {
                assert!(said.contains(&format!("`{key}` is still the placeholder")), "{key}:\n{said}");
            }
            let path = root.join("plans/payments.toml");
            let plan = std::fs::read_to_string(&path).unwrap();
            assert!(plan.contains("table = \"../warehouse/payments\""), "relative to the plan:\n{plan}");
            assert!(plan.contains("date_column = \"paid_on\" # guessed"), "{plan}");
            assert!(plan.contains("key = [\"payment_id\"] # guessed"), "{plan}");
            let written = plan
                .replace(
                    "\"<why these days are rewritten: what was wrong, and where the corrected rows come from>\"",
                    "\"Two amounts of March 2 were entered wrong by the till; the corrected files are from finance.\"",
                )
                .replace("\"<the first day to rewrite, as a date without quotes: 2026-03-01>\"", "2026-03-01")
                .replace("\"<the last day to rewrite (included), as a date without quotes: 2026-03-31>\"", "2026-03-03")
                .replace("<the path of the corrected rows, e.g. ../landing/payments/{date}.csv>", "../landing/payments/{date}.csv");
            std::fs::write(&path, written).unwrap();
            continue;
        }
        assert!(out.status.success(), "bf {args:?}:\n{said}");
        if args[0] == "apply" {
            let after = crate::common::rows_at(&table, None, "true").await;
            assert!(
                after.iter().any(|r| r.contains("1990")) && after.iter().any(|r| r.contains("1200")),
                "{after:?}"
            );
            assert!(!after.iter().any(|r| r.contains("12000")), "{after:?}");
            assert!(after.iter().any(|r| r.contains("4200")), "the 4th is outside the window: {after:?}");
        }
    }
    assert_eq!(
        crate::common::rows_at(&table, None, "true").await,
        before,
        "rolled back to the table as it was"
    );
}

/// "No changes" is an outcome of its own: a plan whose corrected rows are the table's says so (and
/// `--detailed-exitcode` exits 0), `bf apply` writes nothing and says so; and a plan applied twice
/// says the second time that it is already applied, nothing written.
#[test]
fn a_plan_that_changes_nothing_says_so_and_a_finished_apply_writes_nothing_again() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let path = crate::common::september_plan(root, "first-week.toml", 7, |t| t);
    let run = |args: &[&str]| bf_in(root).args(args).output().unwrap();
    assert!(run(&["plan", &path, "--quiet"]).status.success());
    assert!(run(&["apply", "--auto-approve"]).status.success());
    let commits = crate::common::commit_files(&daily).len();

    let again = run(&["apply", "--auto-approve"]);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success());
    assert!(said.contains("is already applied to") && said.contains("nothing written"), "{said}");
    assert!(!said.contains("rollback:"), "one line, the horizon left to `bf status`: {said}");
    assert_eq!(crate::common::commit_files(&daily).len(), commits, "nothing written");

    // The same files planned again: the table holds exactly these rows already.
    let replanned = run(&["plan", &path, "--detailed-exitcode"]);
    let shown = String::from_utf8_lossy(&replanned.stdout);
    assert_eq!(replanned.status.code(), Some(0), "no changes: exit 0\n{shown}");
    assert!(shown.contains("Plan: no changes. Every slice's rows equal the table's (7 slices,"), "{shown}");
    assert!(!shown.contains("slices to replace"), "{shown}");
    let applied = run(&["apply", "--auto-approve"]);
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success(), "{said}");
    assert!(said.contains("Nothing to apply") && said.contains("Nothing written"), "{said}");
    assert_eq!(crate::common::commit_files(&daily).len(), commits, "no backfill of identical rows");
}

/// Stacked backfills roll back in turn: the September backfill (A), then the 15th corrected (B).
/// Rolling back A while B is in place is refused naming B as a bf backfill and what works instead;
/// once B is rolled back, A rolls back (B's commits and its rollback cancel out). Without a
/// backfill named, `bf rollback --table` lists the table's backfills, newest first, with what
/// became of each; `bf status` says the saved plan's backfill was rolled back.
#[test]
fn stacked_backfills_roll_back_in_turn_and_rollback_lists_what_it_can_undo() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let run = |args: &[&str]| {
        let out = bf_in(root).args(args).output().unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let ok = |args: &[&str]| {
        let (success, said) = run(args);
        assert!(success, "bf {args:?}:\n{said}");
        said
    };
    ok(&["plan", "plans/september.toml", "--quiet"]);
    ok(&["apply", "--auto-approve"]);
    let late = root.join("bf-demo/landing/orders/2026-09-15.csv");
    let mut text = std::fs::read_to_string(&late).unwrap();
    text.push_str("2131,C07,42.50,2026-09-15T23:58:00\n");
    std::fs::write(&late, text).unwrap();
    ok(&["plan", "plans/correction-2026-09-15.toml", "--quiet"]);
    ok(&["apply", "--auto-approve"]);
    let ids: Vec<String> = crate::common::commit_infos(&daily)
        .iter()
        .filter_map(|(_, info)| info.get("bf.backfill_id")?.as_str().map(str::to_owned))
        .fold(Vec::new(), |mut ids, id| {
            if !ids.contains(&id) {
                ids.push(id);
            }
            ids
        });
    let [a, b] = [ids[0].clone(), ids[1].clone()];
    let table = "bf-demo/warehouse/orders_daily";

    let (refused, said) = run(&["rollback", "--table", table, "--backfill", &a, "--auto-approve"]);
    assert!(!refused, "{said}");
    assert!(said.contains(&format!("bf backfill {b}, slice 1 (2026-09-15)")), "B named as bf's:\n{said}");
    assert!(said.contains(&format!("roll back backfill {b} first")), "{said}");
    assert!(said.contains("--to-version 0"), "{said}");

    // From a folder without a saved plan for the table (`--state-dir` elsewhere), no backfill named:
    // a list to choose from, not a rollback.
    let listed = run(&["rollback", "--table", table, "--state-dir", "elsewhere"]);
    assert!(!listed.0, "{}", listed.1);
    let (at_b, at_a) = (listed.1.find(&b).unwrap(), listed.1.find(&a).unwrap());
    assert!(at_b < at_a, "newest first:\n{}", listed.1);
    assert!(listed.1.contains("applied"), "{}", listed.1);

    ok(&["rollback", "--auto-approve"]); // the saved plan's: B
    let again = ok(&["rollback", "--auto-approve"]);
    assert!(
        again.contains("It was rolled back already") && again.contains("was already rolled back"),
        "{again}"
    );
    assert!(!again.contains("stopped"), "a finished rollback is not one that stopped:\n{again}");
    let status = ok(&["status"]);
    assert!(status.contains(&format!("backfill {b}: rolled back at version")), "{status}");
    // One command moves on, the one `bf apply`'s refusal of this plan names too.
    let next: Vec<&str> = status.lines().filter(|l| l.trim_start().starts_with("next:")).collect();
    assert_eq!(next.len(), 1, "{status}");
    assert!(next[0].contains("`bf plan ") && !next[0].contains("bf apply"), "{status}");
    let refused = run(&["apply", "--auto-approve"]).1;
    let command = next[0].split('`').nth(1).unwrap();
    assert!(refused.contains(&format!("run `{command}` again")), "{refused}");
    let listed = run(&["rollback", "--table", table, "--state-dir", "elsewhere"]).1;
    assert!(listed.contains("rolled back at version"), "{listed}");

    let undone = ok(&["rollback", "--table", table, "--backfill", &a, "--auto-approve"]);
    assert!(undone.contains("applied and rolled back since"), "{undone}");
    assert_eq!(
        crate::common::duckdb_count(&daily, "SELECT count(*) FROM t"),
        0,
        "back to the empty table, read by DuckDB"
    );
}

/// Errors found at plan time about what the plan file says point at its file, line and key, as
/// `bf validate`'s do, with "did you mean" for a misspelt path: the table, an input, a query missing
/// a column of the table, a date column that is not a DATE. Nothing is saved.
#[test]
fn plan_time_errors_point_at_the_plan_file_line_and_key() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let september = std::fs::read_to_string(root.join("plans/september.toml")).unwrap();
    let line_of = |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases = [
        (
            "table.toml",
            "warehouse/orders_daily",
            "warehouse/orders_dialy",
            "target.table",
            "table =",
            Some("warehouse/orders_daily?"),
        ),
        (
            "input.toml",
            "landing/orders/{date}",
            "landing/order/{date}",
            "source.inputs.orders.path",
            "inputs.orders",
            Some("landing/orders/2026-09-01.csv?"),
        ),
        (
            "query.toml",
            "SELECT order_id, customer, amount,",
            "SELECT order_id, amount,",
            "source.query",
            "query =",
            None,
        ),
        (
            "date.toml",
            "date_column = \"order_date\"",
            "date_column = \"customer\"",
            "target.date_column",
            "date_column",
            None,
        ),
    ];
    for (name, from, to, key, at, meant) in cases {
        let text = september.replace(from, to);
        std::fs::write(root.join("plans").join(name), &text).unwrap();
        let out = bf_in(root).args(["plan", &format!("plans/{name}")]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{said}");
        let line = line_of(&text, at);
        assert!(said.contains(&format!("--> plans/{name}:{line}:")), "{name}: at line {line}:\n{said}");
        assert!(said.contains(key), "{name}: names `{key}`:\n{said}");
        if let Some(meant) = meant {
            assert!(said.contains("did you mean") && said.contains(meant), "{name}:\n{said}");
        }
        assert!(said.contains("no plan was saved"), "{said}");
    }
}

/// A crash half way through the September backfill, then a plan of another plan on the same table:
/// refused, naming the half-applied backfill and the ways out, the rehearsal the backfill publishes
/// from left alone; `bf status` gives one next step, and the resume publishes the rehearsed files.
#[test]
fn another_plan_never_rebuilds_the_rehearsal_of_a_half_applied_backfill() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = bf_in(root).args(args).envs(env.iter().copied()).output().unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    assert!(run(&["plan", "plans/september.toml", "--quiet"], &[]).0);
    let crashed = run(&["apply", "--auto-approve"], &[("BF_FAULT", "before-slice:5")]);
    assert!(!crashed.0);
    assert_eq!(slices_committed(&daily).len(), 4, "{}", crashed.1);
    let rehearsal = root.join("bf-demo/warehouse/orders_daily__rehearsal");
    let before = crate::common::commit_files(&rehearsal).len();

    let (planned, said) = run(&["plan", "plans/correction-2026-09-15.toml", "--out", "other.json"], &[]);
    assert!(!planned, "{said}");
    assert!(said.contains("is half applied") && said.contains("4 of 30 slices committed"), "{said}");
    assert!(said.contains("[rehearsal] table") && said.contains("bf rollback --table"), "{said}");
    assert!(!root.join("other.json").exists(), "nothing saved");
    assert_eq!(crate::common::commit_files(&rehearsal).len(), before, "the rehearsal untouched");

    let (_, status) = run(&["status"], &[]);
    assert_eq!(status.matches("next:").count(), 1, "one next step:\n{status}");
    assert!(status.contains("next: `bf apply` publishes the rehearsed files"), "{status}");
    let (resumed, said) = run(&["apply", "--auto-approve"], &[]);
    assert!(resumed, "{said}");
    assert_eq!(slices_committed(&daily).len(), 30);
    let (planned, said) = run(&["plan", "plans/correction-2026-09-15.toml", "--quiet"], &[]);
    assert!(planned, "once the backfill is finished, the other plan rehearses: {said}");
}

/// Types the query and the table disagree on are never converted in silence: an integer landing in
/// a DOUBLE column is a warning in every output ("integer division?"); text landing in a number
/// column is an error at the query's line, unless the query casts it itself.
#[test]
fn a_column_whose_type_changes_on_the_way_is_named() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let run = |args: &[&str]| bf_in(root).args(args).output().unwrap();
    let integer = crate::common::september_plan(root, "cents.toml", 2, |t| {
        t.replace(
            "SELECT order_id, customer, amount,",
            "SELECT order_id, customer, CAST(amount * 100 AS BIGINT) / 100 AS amount,",
        )
    });
    let out = run(&["plan", &integer]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let warning =
        "`amount` is BIGINT in the query but DOUBLE in the table: computed as an integer — integer division?";
    assert!(text.contains(warning), "{text}");
    let markdown = String::from_utf8_lossy(&run(&["show", "--format", "markdown"]).stdout).into_owned();
    assert!(markdown.contains("integer division?"), "{markdown}");
    let json: serde_json::Value = serde_json::from_slice(&run(&["show", "--json"]).stdout).unwrap();
    assert!(
        json["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains(warning)),
        "{json}"
    );

    let text_typed = crate::common::september_plan(root, "text.toml", 2, |t| {
        t.replace(
            "SELECT order_id, customer, amount,",
            "SELECT order_id, customer, CAST(amount AS VARCHAR) AS amount,",
        )
    });
    let out = run(&["plan", &text_typed]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("`amount` is STRING in the query but DOUBLE in the table: text becomes a number"),
        "{said}"
    );
    assert!(said.contains("source.query") && said.contains("CAST(… AS DOUBLE) AS amount"), "{said}");
    let cast = crate::common::september_plan(root, "cast.toml", 2, |t| {
        t.replace(
            "SELECT order_id, customer, amount,",
            "SELECT order_id, customer, CAST(CAST(amount AS VARCHAR) AS DOUBLE) AS amount,",
        )
    });
    assert!(run(&["plan", &cast, "--quiet"]).status.success(), "cast in the query: planned");
}

/// An input without its `format` is refused at its line with the formats there are.
#[test]
fn a_missing_format_lists_the_formats() {
    let dir = tempfile::tempdir().unwrap();
    let text = crate::common::VALID_PLAN.replace(", format = \"csv\"", "");
    assert_ne!(text, crate::common::VALID_PLAN, "the plan had a format to remove");
    crate::common::write_plan(dir.path(), "plan.toml", &text);
    let out = bf_in(dir.path()).args(["validate", "plan.toml"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("missing key `format`"), "{said}");
    assert!(said.contains("write one of \"csv\", \"parquet\", \"json\", \"delta\""), "{said}");
}

/// The question before an apply names the plan and the table it writes (asked on a terminal: a
/// pseudo-terminal from util-linux `script`); an answer other than "yes" writes nothing.
#[test]
fn the_apply_prompt_names_the_plan_and_the_table() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let path = crate::common::september_plan(root, "two-days.toml", 2, |t| t);
    assert!(bf_in(root).args(["plan", &path, "--quiet"]).output().unwrap().status.success());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let bf = assert_cmd::cargo::cargo_bin("bf");
    let mut asked = crate::common::clean(Command::new("script"))
        .args(["-qec", &format!("{} apply", bf.display()), "/dev/null"])
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(asked.stdin.as_mut().unwrap(), b"no\n").unwrap();
    let out = asked.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let table = daily.canonicalize().unwrap();
    let question =
        format!("Do you want to apply plan {} to {}?", saved["id"].as_str().unwrap(), table.display());
    assert!(said.contains(&question), "{question}\n{said}");
    assert!(said.contains("Apply cancelled; nothing was written."), "{said}");
    assert!(slices_committed(&daily).is_empty());
}

/// The first two days of September applied, then planned again with each order's amount computed
/// as `amount` (SQL over the till's `amount`), the change broken down `by` a column when given:
/// what `bf plan` printed.
fn two_days_replanned(root: &std::path::Path, amount: &str, by: Option<&str>) -> std::process::Output {
    let path = crate::common::september_plan(root, "two-days.toml", 2, |t| t);
    assert!(bf_in(root).args(["plan", &path, "--quiet"]).output().unwrap().status.success());
    assert!(bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    let again = crate::common::september_plan(root, "again.toml", 2, |t| {
        let breakdown = by.map(|column| format!("\n[diff]\nby = [\"{column}\"]\n")).unwrap_or_default();
        t.replace(
            "SELECT order_id, customer, amount,",
            &format!("SELECT order_id, customer, {amount} AS amount,"),
        ) + &breakdown
    });
    bf_in(root).args(["plan", &again]).output().unwrap()
}

/// Each part of the revenue's change in the saved plan's breakdown (after − before), in its order.
fn revenue_parts(root: &std::path::Path) -> Vec<f64> {
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    saved["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["metric"] == "revenue")
        .map(|row| row["after"].as_f64().unwrap() - row["before"].as_f64().unwrap())
        .collect()
}

/// Large changes read as every other number: thousands grouped, `+9,900.0%`.
#[test]
fn a_large_change_groups_its_thousands() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let out = two_days_replanned(root, "amount * 100", None);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("+9,900.0%"), "{shown}");
    assert!(!shown.contains("9900.0%"), "{shown}");
}

/// Where the change is: each measure's net change, then its parts. When every part moves the same
/// way each carries its share (they add up to 100%); the parts past the fifth are summed on one line.
#[test]
fn a_breakdown_whose_parts_all_rise_gives_shares_that_add_up() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let out = two_days_replanned(root, "amount * 2", Some("customer"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout);
    let parts = revenue_parts(root);
    assert!(parts.len() > 6 && parts.iter().all(|d| *d > 0.0), "{parts:?}");
    let section = shown.split("Where the change is:\n").nth(1).expect(&shown);
    let lines: Vec<&str> = section.lines().take_while(|l| l.starts_with("  ")).collect();
    assert!(lines[0].starts_with("  revenue +") && lines[0].ends_with(" in all:"), "{section}");
    let shares: Vec<f64> = lines[1..6]
        .iter()
        .map(|l| {
            assert!(l.starts_with("    +"), "{l}");
            l.split_once(" (").unwrap().1.split_once("%)").unwrap().0.parse().unwrap()
        })
        .collect();
    let named: f64 = parts[..5].iter().sum();
    let total: f64 = parts.iter().sum();
    let expected_share = (named / total * 100.0).round();
    assert!((shares.iter().sum::<f64>() - expected_share).abs() <= 3.0, "{shares:?} {expected_share}");
    assert!(
        lines[6].starts_with("    +")
            && lines[6].ends_with(&format!(" in the other {} groups", parts.len() - 5)),
        "{section}"
    );
    assert!(!section.contains("cancel"), "{section}");
}

/// 0.90 moved from one order to two others: revenue is unchanged in all, and says its rises and
/// falls cancel out — not "−0.00 in all … partly cancel out", which the floating-point sums of
/// these parts (+0.3 and +0.6 against −0.9) would read as.
#[test]
fn a_breakdown_whose_parts_cancel_out_says_unchanged() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let moved = "CASE WHEN order_id = 2001 THEN amount + 0.3 WHEN order_id = 2002 THEN amount + 0.6 \
                 WHEN order_id = 2003 THEN amount - 0.9 ELSE amount END";
    let out = two_days_replanned(root, moved, Some("customer"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(
            "Where the change is:\n  revenue unchanged in all (rises of +0.90 and falls of −0.90 cancel out):\n    \
             −0.90 in customer = C22\n    +0.60 in customer = C15\n    +0.30 in customer = C08\n"
        ),
        "{shown}"
    );
}

/// The March reload's revenue rises (the EUR orders sent as USD) and falls (the duplicates
/// removed): no share is shown — "112%" and "−7%" explain nothing — but how much went each way.
#[test]
fn a_breakdown_whose_parts_rise_and_fall_says_so() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let out = bf_in(root).args(["plan", "plans/march.toml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout);
    let revenue = revenue_parts(root);
    let rises: f64 = revenue.iter().filter(|d| **d > 0.0).sum();
    let falls: f64 = revenue.iter().filter(|d| **d < 0.0).sum();
    assert!((rises - 1210.20).abs() < 0.005 && (falls + 126.17).abs() < 0.005, "{revenue:?}");
    let expected = "Where the change is:
  rows −3 in all:
    −2 (67%) in currency = USD, rows removed
    −1 (33%) in currency = GBP, rows removed
  revenue +1,084.03 in all (rises of +1,210.20 and falls of −126.17 partly cancel out):
    +1,210.20 in currency = USD → EUR
    −80.53 in currency = USD, rows removed
    −45.64 in currency = GBP, rows removed
";
    assert!(shown.contains(expected), "{shown}");
    assert!(!shown.contains("112%"), "{shown}");
    let comment =
        String::from_utf8(bf_in(root).args(["show", "--format", "markdown"]).output().unwrap().stdout)
            .unwrap();
    assert!(
        comment.contains("- revenue +1,084.03 in all (rises of +1,210.20 and falls of −126.17 partly cancel out):\n  - \\+1,210.20 in currency = USD → EUR\n"),
        "{comment}"
    );
}

/// A pull-request comment names its plan file, plan id and inputs (two plans in one pull request
/// are told apart), and its headings go down one level at a time, a chain's included.
#[test]
fn a_plan_comment_names_its_plan_and_inputs_and_its_headings_are_in_order() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let out = bf_in(root).args(["plan", "plans/march.toml", "--quiet"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let comment =
        String::from_utf8(bf_in(root).args(["show", "--format", "markdown"]).output().unwrap().stdout)
            .unwrap();
    let id = saved["id"].as_str().unwrap();
    assert!(
        comment.contains(&format!("**Plan** `plans/march.toml` · **id** `{id}` · **inputs** ")),
        "{comment}"
    );
    assert!(comment.contains("`orders` (1 file)") || comment.contains("`orders` ("), "{comment}");
    assert!(comment.contains("`silver` (Delta table orders_silver, as its backfill leaves it)"), "{comment}");
    assert!(
        comment.contains("\n  order_id | customer | amount | currency | amount_eur | order_date\n"),
        "{comment}"
    );
    let levels: Vec<usize> = comment
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.chars().take_while(|c| *c == '#').count())
        .collect();
    assert!(!levels.is_empty());
    for pair in levels.windows(2) {
        assert!(pair[1] <= pair[0] + 1, "a heading skips a level: {levels:?}\n{comment}");
    }
}

/// A long plan's summary lists the slices that change something, and counts the ones that change
/// nothing instead of listing them: September planned again after its apply, with one order the
/// till sent late for the 15th, shows the 15th alone.
#[test]
fn unchanged_slices_are_counted_not_listed() {
    let workspace = demo_workspace();
    let root = workspace.path();
    assert!(bf_in(root).args(["plan", "plans/september.toml", "--quiet"]).output().unwrap().status.success());
    assert!(bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    let late = root.join("bf-demo/landing/orders/2026-09-15.csv");
    let mut text = std::fs::read_to_string(&late).unwrap();
    text.push_str("2131,C07,42.50,2026-09-15T23:58:00\n");
    std::fs::write(&late, text).unwrap();
    let out = bf_in(root).args(["plan", "plans/september.toml"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        shown.contains("1 of 30 slices shown, those with the most changes and the 1 furthest from the rest (29 slices change nothing)"),
        "{shown}"
    );
    assert!(shown.contains("2026-09-15") && !shown.contains("2026-09-14 "), "{shown}");
    // Changed rows under their columns' names.
    assert!(
        shown.contains("    order_id | customer | amount | order_date\n  + 2131 | C07 | 42.5 | 2026-09-15"),
        "{shown}"
    );
}

/// A corrected day whose file holds only its header would empty that day: the plan says so first,
/// as a failed guard naming the slice, and cannot be applied; with `[guards] allow_empty_slices =
/// true` the same plan shows the slice and applies, emptying the day (read raw by DuckDB).
#[test]
fn a_source_day_without_rows_fails_the_plan_unless_the_plan_allows_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let path = crate::common::september_plan(root, "two-days.toml", 2, |t| t);
    assert!(bf_in(root).args(["plan", &path, "--quiet"]).output().unwrap().status.success());
    assert!(bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    let on_the_2nd = "SELECT count(*) FROM t WHERE order_date = DATE '2026-09-02'";
    let held = crate::common::duckdb_count(&daily, on_the_2nd);
    assert!(held > 0, "the 2nd holds orders");
    let file = root.join("bf-demo/landing/orders/2026-09-02.csv");
    let header = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_owned();
    std::fs::write(&file, format!("{header}\n")).unwrap();

    let planned = bf_in(root).args(["plan", &path]).output().unwrap();
    let said = String::from_utf8_lossy(&planned.stdout);
    assert_eq!(planned.status.code(), Some(1), "{said}");
    assert!(said.contains("allow_empty_slices"), "{said}");
    assert!(said.contains(&format!("2026-09-02 ({held} → 0)")), "{said}");
    let refused = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("guard allow_empty_slices failed"));
    assert_eq!(crate::common::duckdb_count(&daily, on_the_2nd), held, "the day was not emptied");

    let allowed = crate::common::september_plan(root, "two-days.toml", 2, |t| {
        t.replace("[[metrics]]", "[guards]\nallow_empty_slices = true\n\n[[metrics]]")
    });
    let planned = bf_in(root).args(["plan", &allowed]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stdout));
    assert!(String::from_utf8_lossy(&planned.stdout).contains("allowed: `allow_empty_slices = true`"));
    assert!(bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    assert_eq!(crate::common::duckdb_count(&daily, on_the_2nd), 0, "the day emptied, as allowed");
}

/// A day inside a slice of several days, emptied by its source, is weighed as a slice would be
/// (#68, hole 11): five September days in one slice, read from the till's folder, with the 3rd's
/// file holding only its header. The plan names the day first and cannot be applied; the table
/// keeps the day (read by DuckDB).
#[test]
fn an_empty_day_inside_a_slice_of_several_days_fails_the_plan_unless_the_plan_allows_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let path = crate::common::september_plan(root, "five-days.toml", 5, |t| t);
    assert!(bf_in(root).args(["plan", &path, "--quiet"]).output().unwrap().status.success());
    assert!(bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    let on_the_3rd = "SELECT count(*) FROM t WHERE order_date = DATE '2026-09-03'";
    let held = crate::common::duckdb_count(&daily, on_the_3rd);
    assert!(held > 0, "the 3rd holds orders");
    let file = root.join("bf-demo/landing/orders/2026-09-03.csv");
    let header = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_owned();
    std::fs::write(&file, format!("{header}\n")).unwrap();

    let one_slice = |t: String| {
        t.replace("every = \"day\"", "every = \"month\"")
            .replace("/orders/{date}.csv\"", "/orders\"")
            .replace("FROM orders\n", "FROM orders\nWHERE CAST(ordered_at AS DATE) BETWEEN $start AND $end\n")
    };
    let path = crate::common::september_plan(root, "one-slice.toml", 5, one_slice);
    let planned = bf_in(root).args(["plan", &path]).output().unwrap();
    let said = String::from_utf8_lossy(&planned.stdout);
    assert_eq!(planned.status.code(), Some(1), "{said}");
    let guard =
        format!("guard allow_empty_slices failed: the source leaves 2026-09-03 ({held} → 0) without rows");
    assert!(said.contains(&guard), "{said}");
    assert!(!bf_in(root).args(["apply", "--auto-approve"]).output().unwrap().status.success());
    assert_eq!(crate::common::duckdb_count(&daily, on_the_3rd), held, "the day was not emptied");
}

/// Answered "yes" on a terminal, the apply's question applies the plan: each slice once, the
/// comment set (the slices read from the raw log).
#[tokio::test(flavor = "multi_thread")]
async fn the_apply_prompt_answered_yes_applies() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join(DAILY);
    let path = crate::common::september_plan(root, "two-days.toml", 2, |t| t);
    assert!(bf_in(root).args(["plan", &path, "--quiet"]).output().unwrap().status.success());
    let (code, said) = crate::common::answered_after(root, "apply", "yes", async {}).await;
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(slices_committed(&daily), [1, 2], "{said}");
    assert_eq!(crate::common::commits_with(&daily, "comment"), 1);
}
