//! A newcomer's second hour: a payments table of one's own, made by another writer, and the
//! mistakes people make on the way from `bf init` to `bf rollback` — each caught where it was made,
//! at its file and line, all of a round's at once.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::bf_in;

/// A `payments` table written by the Python `deltalake` package, as another team's job writes it:
/// 90 days from June 1, 2026, three payments a day, partitioned by `pay_date`, one commit a week;
/// then a DELETE of payment 12 and a week written with a column added (`fee`). August's amounts
/// were recorded in cents. Returns the table's folder (`lake/payments` under `root`).
pub(crate) fn payments(root: &Path) -> PathBuf {
    let table = root.join("lake/payments");
    let script = format!(
        r#"import datetime, pyarrow as pa
from deltalake import write_deltalake, DeltaTable
t = {table:?}
def rows(days, fee):
    ids, customers, amounts, currencies, dates, fees = [], [], [], [], [], []
    for d in days:
        day = datetime.date(2026, 6, 1) + datetime.timedelta(days=d)
        for k in range(3):
            ids.append(d * 10 + k)
            customers.append('C%d' % k)
            amount = 10.5 + k + d
            amounts.append(amount * 100 if day.month == 8 else amount)
            currencies.append('EUR')
            dates.append(day)
            fees.append(0.25)
    columns = {{'payment_id': pa.array(ids, pa.int64()), 'customer': customers, 'amount': amounts,
        'currency': currencies, 'pay_date': pa.array(dates, pa.date32())}}
    if fee:
        columns['fee'] = fees
    return pa.table(columns)
for week in range(12):
    write_deltalake(t, rows(range(week * 7, week * 7 + 7), False), mode='append', partition_by=['pay_date'])
DeltaTable(t).delete('payment_id = 12')
write_deltalake(t, rows(range(84, 90), True), mode='append', schema_mode='merge')
"#,
        table = table.to_str().unwrap()
    );
    crate::common::servers::python(&script, &[]);
    table
}

/// The corrected August, one CSV per day in `landing/payments/`, amounts in euros.
pub(crate) fn corrections(root: &Path) {
    let landing = root.join("landing/payments");
    std::fs::create_dir_all(&landing).unwrap();
    for d in 61..90 {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 6, 1).unwrap() + chrono::Days::new(d);
        let mut text = String::from("payment_id,customer,amount,currency,pay_date\n");
        for k in 0..3 {
            text.push_str(&format!("{},C{k},{},EUR,{day}\n", d * 10 + k, 10.5 + (k + d) as f64));
        }
        std::fs::write(landing.join(format!("{day}.csv")), text).unwrap();
    }
}

fn bf(root: &Path, args: &[&str]) -> Output {
    bf_in(root).args(args).output().unwrap()
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The line of `text` that holds `needle`, counted from 1.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} in:\n{text}")) + 1
}

/// A plan for August's reload, as a newcomer writes it.
fn august(date_column: &str, key: &str, extra: &str) -> String {
    august_every("day", date_column, key, extra)
}

/// [`august`], sliced `every`.
fn august_every(every: &str, date_column: &str, key: &str, extra: &str) -> String {
    format!(
        "reason = \"August's amounts were recorded in cents; finance sent the corrected days.\"\n\
         [target]\ntable = \"../lake/payments\"\ndate_column = \"{date_column}\"\nkey = [\"{key}\"]\n\
         [window]\nstart = 2026-08-01\nend = 2026-08-29\n[slicing]\nevery = \"{every}\"\n\
         [source]\ninputs.corrected = {{ path = \"../landing/payments/{{date}}.csv\", format = \"csv\" }}\n\
         query = \"SELECT payment_id, customer, amount, currency, CAST(pay_date AS DATE) AS pay_date, \
         CAST(0.25 AS DOUBLE) AS fee FROM corrected\"\n{extra}"
    )
}

/// Columns misspelt in the key, the date column, a metric's SQL, a check's SQL, a check's columns
/// and `[diff] by`, in a plan that also slices by week with a `{date}` path: `bf validate` reports
/// every one in one run, each at its file and line with the nearest of the table's columns (read
/// offline from the table's own schema). With the slicing fixed, `bf plan` reports the columns the
/// same way before it clones anything — never an engine's error about a view of its own. Written
/// right, the plan validates and rehearses.
#[test]
fn every_column_a_plan_names_is_checked_against_the_table_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    let mistakes = |every: &str| {
        august_every(
            every,
            "paydate",
            "paymentid",
            "[[metrics]]\nname = \"amount\"\nsql = \"SUM(amont)\"\n\
         [[checks]]\nname = \"positive\"\nsql = \"SELECT * FROM slice WHERE amuont <= 0\"\n\
         [[checks]]\nname = \"one per payment\"\nunique = [\"payment_id\", \"custmer\"]\n\
         [diff]\nby = [\"curency\"]\n",
        )
    };
    let weekly = mistakes("week");
    std::fs::write(root.join("plans/august.toml"), &weekly).unwrap();
    let expected = [
        ("target.date_column", "paydate", "date_column =", "pay_date"),
        ("target.key", "paymentid", "key =", "payment_id"),
        ("checks[1].unique", "custmer", "unique =", "customer"),
        ("diff.by", "curency", "by =", "currency"),
        ("metrics[0].sql", "amont", "SUM(amont)", "amount"),
        ("checks[0].sql", "amuont", "amuont <= 0", "amount"),
    ];
    for command in ["validate", "plan"] {
        if command == "validate" {
            let out = bf(root, &["validate", "plans/august.toml"]);
            let said = said(&out);
            assert_eq!(out.status.code(), Some(1), "{said}");
            let line = line_of(&weekly, "inputs.corrected");
            assert!(said.contains("`{date}` names one day, but slices are `week` long"), "{said}");
            assert!(said.contains(&format!("--> plans/august.toml:{line}:")), "{said}");
            assert!(said.contains("7 problems found"), "{said}");
            for (_, typed, _, _) in expected {
                assert!(said.contains(&format!("the table has no column `{typed}`")), "{typed}: {said}");
            }
        }
        let wrong = mistakes("day");
        std::fs::write(root.join("plans/august.toml"), &wrong).unwrap();
        let out = bf(root, &[command, "plans/august.toml"]);
        let said = said(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {said}");
        for (key, typed, at, meant) in expected {
            let line = line_of(&wrong, at);
            let found = said.find(&format!("the table has no column `{typed}`")).unwrap_or_else(|| {
                panic!("{command}: `{typed}` at `{key}`:\n{said}");
            });
            let after = &said[found..];
            assert!(
                after.contains(&format!("--> plans/august.toml:{line}:")),
                "{command}: {key} at {line}:\n{said}"
            );
            assert!(after.contains(&format!("did you mean `{meant}`?")), "{command}: {key}:\n{said}");
        }
        assert!(!said.contains("__bf_"), "{command}: no view of bf's own:\n{said}");
    }
    assert!(!root.join("lake/payments__rehearsal").exists(), "nothing cloned");
    assert!(!root.join(".bf/plan.json").exists(), "no plan saved");

    let right = august(
        "pay_date",
        "payment_id",
        "[[metrics]]\nname = \"amount\"\nsql = \"SUM(amount)\"\n\
         [[checks]]\nname = \"positive\"\nsql = \"SELECT * FROM slice WHERE amount <= 0\"\n\
         [[checks]]\nname = \"one per payment\"\nunique = [\"payment_id\", \"customer\"]\n\
         [diff]\nby = [\"currency\"]\n",
    );
    std::fs::write(root.join("plans/august.toml"), &right).unwrap();
    for command in ["validate", "plan"] {
        let out = bf(root, &[command, "plans/august.toml"]);
        assert!(out.status.success(), "{command}: {}", said(&out));
    }
}

/// The saved plan, its rehearsal and the next command agree whatever the folder and `--out`: a plan
/// saved with `--out` says to apply that file; planning again elsewhere names the saved plan whose
/// rehearsal it rebuilt (the state dir's, or one in another folder or `--out` file); a folder with
/// no saved plan says where plans are saved and how to name one.
#[test]
fn the_saved_plan_its_rehearsal_and_the_next_command_agree_whatever_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A git work tree: the root plans reach within, from any of its folders.
    assert!(std::process::Command::new("git").arg("init").arg("-q").arg(root).status().unwrap().success());
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-02");
    std::fs::write(root.join("plans/august.toml"), plan).unwrap();
    let id_of = |saved: &Path| -> String {
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
        json["id"].as_str().unwrap().to_owned()
    };

    let first = bf(root, &["plan", "plans/august.toml"]);
    assert!(first.status.success(), "{}", said(&first));
    assert!(said(&first).contains("apply it with `bf apply`."), "{}", said(&first));
    assert!(
        !said(&first).contains("rebuilt the rehearsal"),
        "nothing to say the first time: {}",
        said(&first)
    );
    let default_id = id_of(&root.join(".bf/plan.json"));
    let again = bf(root, &["plan", "plans/august.toml"]);
    assert!(
        !said(&again).contains("rebuilt the rehearsal"),
        "the saved plan replaced with it: {}",
        said(&again)
    );
    let default_id_again = id_of(&root.join(".bf/plan.json"));
    assert_ne!(default_id, default_id_again);

    let out = bf(root, &["plan", "plans/august.toml", "--out", "other.json"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("apply it with `bf apply other.json`."), "{}", said(&out));
    assert!(
        said(&out).contains(&format!(
            "rebuilt the rehearsal of plan {default_id_again}, the plan saved at .bf/plan.json"
        )),
        "{}",
        said(&out)
    );

    let elsewhere = bf_in(&root.join("plans")).args(["plan", "august.toml"]).output().unwrap();
    assert!(elsewhere.status.success(), "{}", said(&elsewhere));
    let other_id = id_of(&root.join("other.json"));
    assert!(
        said(&elsewhere).contains(&format!(
            "rebuilt the rehearsal of plan {other_id}, a plan saved in another folder or with `--out`"
        )),
        "{}",
        said(&elsewhere)
    );
    let applied = bf_in(&root.join("plans")).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(applied.status.success(), "{}", said(&applied));

    let lost = bf_in(&root.join("lake")).args(["apply", "--auto-approve"]).output().unwrap();
    assert_eq!(lost.status.code(), Some(1), "{}", said(&lost));
    assert!(
        said(&lost).contains("no saved plan at .bf/plan.json") && said(&lost).contains("--state-dir"),
        "{}",
        said(&lost)
    );
}

/// Paths written from where one stands: `bf init` piped (`| tee plans/x.toml`) cannot know the
/// plan's folder, says so and takes `--plan-dir`; a plan naming its table from the folder bf runs in
/// gets the path it meant, at its line, from `bf plan` (and a note from `bf validate`); a missing
/// day's file is named, never "did you mean" another day's.
#[test]
fn paths_written_from_the_wrong_folder_are_answered_with_the_path_meant() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();

    let piped = bf(root, &["init", "--table", "lake/payments"]);
    assert!(piped.status.success(), "{}", said(&piped));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("table = \"lake/payments\""), "{}", said(&piped));
    assert!(String::from_utf8_lossy(&piped.stderr).contains("pass `--plan-dir DIR`"), "{}", said(&piped));
    let placed = bf(root, &["init", "--table", "lake/payments", "--plan-dir", "plans"]);
    assert!(
        String::from_utf8_lossy(&placed.stdout).contains("table = \"../lake/payments\""),
        "{}",
        said(&placed)
    );
    assert!(!String::from_utf8_lossy(&placed.stderr).contains("--plan-dir"), "{}", said(&placed));

    let text = august("pay_date", "payment_id", "")
        .replace("table = \"../lake/payments\"", "table = \"lake/payments\"")
        .replace("end = 2026-08-29", "end = 2026-08-03");
    std::fs::write(root.join("plans/august.toml"), &text).unwrap();
    let validated = bf(root, &["validate", "plans/august.toml"]);
    assert!(
        said(&validated).contains(
            "note: there is no table at plans/lake/payments: did you mean `../lake/payments`? A plan's paths are \
             relative to its own folder (plans)"
        ),
        "{}",
        said(&validated)
    );
    let planned = bf(root, &["plan", "plans/august.toml"]);
    assert_eq!(planned.status.code(), Some(1), "{}", said(&planned));
    let line = line_of(&text, "table =");
    assert!(said(&planned).contains(&format!("--> plans/august.toml:{line}:")), "{}", said(&planned));
    assert!(said(&planned).contains("did you mean `../lake/payments`?"), "{}", said(&planned));

    std::fs::write(
        root.join("plans/august.toml"),
        text.replace("table = \"lake/payments\"", "table = \"../lake/payments\""),
    )
    .unwrap();
    std::fs::remove_file(root.join("landing/payments/2026-08-02.csv")).unwrap();
    let missing = bf(root, &["plan", "plans/august.toml"]);
    assert_eq!(missing.status.code(), Some(1), "{}", said(&missing));
    assert!(said(&missing).contains("2026-08-02.csv"), "{}", said(&missing));
    assert!(
        !said(&missing).contains("did you mean"),
        "another day's file is no typo's fix: {}",
        said(&missing)
    );
}

/// Ctrl-C during an apply says how many slices are in (each a whole commit) and where `bf apply`
/// resumes, exit 130; the resume's question says which slices are committed already; and once the
/// backfill is applied, `bf apply` says so without asking anything.
#[test]
fn ctrl_c_says_what_is_committed_and_the_resume_says_what_is_in() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    std::fs::write(root.join("plans/august.toml"), august("pay_date", "payment_id", "")).unwrap();
    assert!(bf(root, &["plan", "plans/august.toml", "-q"]).status.success());

    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("bf"))
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .args(["apply", "--auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_for("three slices committed", || crate::common::slices_committed(&table).len() >= 3);
    let signalled =
        std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    let stopped = child.wait_with_output().unwrap();
    let said_stopping = said(&stopped);
    assert_eq!(stopped.status.code(), Some(130), "{said_stopping}");
    let committed = crate::common::slices_committed(&table);
    let n = committed.len();
    assert!(n < 29, "stopped before the end: {said_stopping}");
    assert_eq!(committed, (1..=n as u64).collect::<Vec<_>>(), "slices land in order");
    assert!(
        said_stopping.contains(&format!("Interrupted. {n} of 29 slices are committed to"))
            && said_stopping.contains("nothing is half written")
            && said_stopping.contains(&format!("`bf apply` resumes at slice {}", n + 1)),
        "{said_stopping}"
    );

    let bf_path = assert_cmd::cargo::cargo_bin("bf");
    let mut asked = std::process::Command::new("script")
        .args(["-qec", &format!("{} apply", bf_path.display()), "/dev/null"])
        .current_dir(root)
        .env_remove("BF_STATE_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(asked.stdin.as_mut().unwrap(), b"no\n").unwrap();
    let asked = asked.wait_with_output().unwrap();
    let question = String::from_utf8_lossy(&asked.stdout);
    assert!(
        question.contains(&format!("{n} of 29 slices are committed already (backfill"))
            && question.contains(&format!("this apply goes on from slice {}", n + 1)),
        "{question}"
    );
    assert_eq!(crate::common::slices_committed(&table).len(), n, "answered no: nothing written");

    let finished = bf(root, &["apply", "--auto-approve"]);
    assert!(finished.status.success(), "{}", said(&finished));
    // No terminal to answer on: a question would be refused; an applied backfill asks none.
    let again = bf(root, &["apply"]);
    assert!(again.status.success(), "{}", said(&again));
    assert!(
        said(&again).contains("is already applied") && !said(&again).contains("Do you want"),
        "{}",
        said(&again)
    );
}

/// A day's corrections file with a column left empty (read as NULL): the plan warns once, naming
/// the slice and the file it came from — not once per slice, and not without where.
#[test]
fn a_type_warning_of_one_days_input_names_that_day_and_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    let day = root.join("landing/payments/2026-08-02.csv");
    let emptied: String = std::fs::read_to_string(&day)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, line)| match i {
            0 => format!("{line}\n"),
            _ => {
                let cells: Vec<&str> = line.split(',').collect();
                format!("{},,{},{},{}\n", cells[0], cells[2], cells[3], cells[4])
            }
        })
        .collect();
    std::fs::write(&day, emptied).unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-03");
    std::fs::write(root.join("plans/august.toml"), plan).unwrap();
    let out = bf(root, &["plan", "plans/august.toml"]);
    let said = said(&out);
    assert!(out.status.success(), "{said}");
    let warning = "`customer` is NULL in the query but STRING in the table";
    assert_eq!(said.matches(warning).count(), 1, "once:\n{said}");
    let line = said.lines().find(|l| l.contains(warning)).unwrap();
    assert!(
        line.contains("every row gets NULL — in 1 of 3 slices, from their input: slice 2 (2026-08-02: ")
            && line.contains("landing/payments/2026-08-02.csv)"),
        "{line}"
    );
}

/// Text in a day's `amount` (`n/a` on its second row): the plan is refused naming the slice and the
/// file whose column reads as text, with the CAST that would take it; once the query casts, the
/// cast's failure names the file and the line holding the value.
#[test]
fn a_value_that_is_not_a_number_is_named_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    let day = root.join("landing/payments/2026-08-02.csv");
    let text = std::fs::read_to_string(&day).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let cells: Vec<&str> = lines[2].split(',').collect();
    lines[2] = format!("{},{},n/a,{},{}", cells[0], cells[1], cells[3], cells[4]);
    std::fs::write(&day, lines.join("\n") + "\n").unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-03");
    std::fs::write(root.join("plans/august.toml"), &plan).unwrap();

    let refused = bf(root, &["plan", "plans/august.toml"]);
    let said_refused = said(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said_refused}");
    assert!(
        said_refused.contains("`amount` is STRING in the query but DOUBLE in the table")
            && said_refused.contains("(found in slice 2 (2026-08-02: ")
            && said_refused.contains("landing/payments/2026-08-02.csv))"),
        "{said_refused}"
    );

    let cast = plan.replace("customer, amount,", "customer, CAST(amount AS DOUBLE) AS amount,");
    std::fs::write(root.join("plans/august.toml"), cast).unwrap();
    let failed = bf(root, &["plan", "plans/august.toml"]);
    let said_failed = said(&failed);
    assert_eq!(failed.status.code(), Some(1), "{said_failed}");
    assert!(
        said_failed.contains("'n/a' is at ") && said_failed.contains("2026-08-02.csv:3"),
        "{said_failed}"
    );
    assert!(said_failed.contains("slice 2 (2026-08-02"), "{said_failed}");
}

/// A window past the corrections (to September 30, the files ending August 29) with a day missing
/// inside: the first missing file is named with how many of the window's days have none, which,
/// and the last day that has one — not one day per run.
#[test]
fn a_window_past_the_data_says_how_many_days_have_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    std::fs::remove_file(root.join("landing/payments/2026-08-10.csv")).unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-09-30");
    std::fs::write(root.join("plans/august.toml"), &plan).unwrap();
    let out = bf(root, &["plan", "plans/august.toml"]);
    let said = said(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("slice 10 (2026-08-10): input `corrected` reads ")
            && said.contains(
                "2026-08-10.csv, which does not exist; 33 of the window's 61 slices have no file for it \
                 (2026-08-10, 2026-08-30..2026-09-30), the last one found is for 2026-08-29"
            ),
        "{said}"
    );
}

/// The small messages of the path: a key written as one value shows the array it should be; `bf
/// init --out` into a folder that does not exist names the folder; `bf clean` says which rehearsal it keeps for
/// the saved plan; a rollback lists its versions as ranges and says its rows are the window's.
#[test]
fn the_small_messages_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-03");

    let single = plan.replace("key = [\"payment_id\"]", "key = \"payment_id\"");
    std::fs::write(root.join("plans/single.toml"), &single).unwrap();
    let out = bf(root, &["validate", "plans/single.toml"]);
    assert!(said(&out).contains("write it as an array: key = [\"payment_id\"]"), "{}", said(&out));

    std::fs::write(root.join("plans/august.toml"), &plan).unwrap();
    let out = bf(root, &["init", "--table", "lake/payments", "--out", "newplans/p.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("the folder newplans does not exist; make it first"), "{}", said(&out));
    assert!(!said(&out).contains("os error"), "{}", said(&out));

    assert!(bf(root, &["plan", "plans/august.toml", "-q"]).status.success());
    let cleaned = bf(root, &["clean"]);
    assert!(
        said(&cleaned).contains("kept ")
            && said(&cleaned)
                .contains("payments__rehearsal: the saved plan (.bf/plan.json) is not applied yet"),
        "{}",
        said(&cleaned)
    );
    assert!(bf(root, &["apply", "--auto-approve"]).status.success());
    let rolled = bf(root, &["rollback", "--auto-approve"]);
    let said_rolled = said(&rolled);
    assert!(rolled.status.success(), "{said_rolled}");
    assert!(said_rolled.contains("It wrote versions 14–17 (4 commits) after version 13."), "{said_rolled}");
    assert!(said_rolled.contains("(9 rows in the window, 9 before the rollback)"), "{said_rolled}");

    // The history at 100 columns: a line a commit, the reason whole, once, the time's zone said.
    let history = bf(root, &["history", "lake/payments"]);
    let text = String::from_utf8_lossy(&history.stdout).into_owned();
    assert!(history.status.success(), "{}", said(&history));
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    let table: Vec<&str> = text.split("\n\n").next().unwrap().lines().collect();
    assert!(
        table.iter().all(|l| l.chars().count() <= 100),
        "a table line over 100 columns ({widest}):\n{text}"
    );
    assert_eq!(
        table.len(),
        1 + 20,
        "a header and a line per commit (14 before, 3 slices, a comment, 2 undoing):\n{text}"
    );
    assert!(table[0].contains("time (UTC)"), "{text}");
    let reason = "August's amounts were recorded in cents; finance sent the corrected days.";
    assert_eq!(text.matches(reason).count(), 1, "{text}");
    assert!(text.contains("undo: restore"), "{text}");
}

/// The amounts of payments 600 (July 31, outside the window), 610 and 892 (August 1 and 29), read
/// by the Python `deltalake` package, not by bf.
fn amounts(table: &Path) -> Vec<f64> {
    let script = format!(
        "from deltalake import DeltaTable\nt = DeltaTable({:?}).to_pyarrow_table().to_pylist()\n\
         by = {{r['payment_id']: r['amount'] for r in t}}\nprint(by[600], by[610], by[892])",
        table.to_str().unwrap()
    );
    let out = crate::common::servers::python(&script, &[]);
    out.split_whitespace().map(|v| v.parse().unwrap()).collect()
}

/// The newcomer's path, end to end, on a table another writer made: `bf init` writes the plan;
/// `bf validate` names the placeholders; written in with three mistakes (weekly slices over a
/// `{date}` path, a misspelt breakdown column, a misspelt column in a check's SQL), one
/// `bf validate` names all three at their lines; fixed (and the query given the `fee` the files
/// lack), it validates, plans, applies — August in euros, July untouched, read by Python — and
/// rolls back to the cents.
#[test]
fn the_newcomers_path_from_init_to_rollback_takes_one_validate_per_round() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = payments(root);
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    assert_eq!(amounts(&table), [70.5, 7150.0, 10150.0], "as the other writer left it");
    let init = bf(root, &["init", "--table", "lake/payments", "--out", "plans/august.toml"]);
    assert!(init.status.success(), "{}", said(&init));
    let path = root.join("plans/august.toml");
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("table = \"../lake/payments\""), "{written}");

    let placeholders = bf(root, &["validate", "plans/august.toml"]);
    assert_eq!(placeholders.status.code(), Some(1), "{}", said(&placeholders));
    assert!(said(&placeholders).contains("4 problems found"), "{}", said(&placeholders));

    let filled = written
        .replace(
            "\"<why these days are rewritten: what was wrong, and where the corrected rows come from>\"",
            "\"August's amounts were recorded in cents; finance sent the corrected days.\"",
        )
        .replace("\"<the first day to rewrite, as a date without quotes: 2026-03-01>\"", "2026-08-01")
        .replace(
            "\"<the last day to rewrite (included), as a date without quotes: 2026-03-31>\"",
            "2026-08-29",
        )
        .replace(
            "<the path of the corrected rows, e.g. ../landing/payments/{date}.csv>",
            "../landing/payments/{date}.csv",
        );
    let mistaken = filled.replace("every = \"day\"", "every = \"week\"")
        + "\n[[checks]]\nname = \"positive\"\nsql = \"SELECT * FROM slice WHERE amont <= 0\"\n\n[diff]\nby = [\"curency\"]\n";
    std::fs::write(&path, &mistaken).unwrap();
    let round = bf(root, &["validate", "plans/august.toml"]);
    let said_round = said(&round);
    assert_eq!(round.status.code(), Some(1), "{said_round}");
    assert!(said_round.contains("3 problems found"), "{said_round}");
    for (message, at) in [
        ("`{date}` names one day, but slices are `week` long", "inputs.corrected"),
        ("the table has no column `amont`", "amont <= 0"),
        ("the table has no column `curency`", "by = "),
    ] {
        assert!(said_round.contains(message), "{message}: {said_round}");
        let line = line_of(&mistaken, at);
        assert!(
            said_round.contains(&format!("--> plans/august.toml:{line}:")),
            "{message} at {line}: {said_round}"
        );
    }

    let fixed = mistaken
        .replace("every = \"week\"", "every = \"day\"")
        .replace("amont <= 0", "amount <= 0")
        .replace("[\"curency\"]", "[\"currency\"]")
        .replace("       fee\nFROM corrected", "       CAST(0.25 AS DOUBLE) AS fee\nFROM corrected");
    std::fs::write(&path, &fixed).unwrap();
    for args in [
        &["validate", "plans/august.toml"][..],
        &["plan", "plans/august.toml", "-q"],
        &["apply", "--auto-approve"],
    ] {
        let out = bf(root, args);
        assert!(out.status.success(), "{args:?}: {}\n{fixed}", said(&out));
    }
    assert_eq!(amounts(&table), [70.5, 71.5, 101.5], "August in euros, July untouched");
    let rolled = bf(root, &["rollback", "--auto-approve"]);
    assert!(rolled.status.success(), "{}", said(&rolled));
    assert_eq!(amounts(&table), [70.5, 7150.0, 10150.0], "rolled back to the cents");
}
