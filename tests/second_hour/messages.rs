//! What bf says when something stops it or is off in the inputs: where, and what to do.

use super::{august, bf, edit_day, said, workspace};

/// Ctrl-C during an apply says how many slices are in (each a whole commit) and where `bf apply`
/// resumes, exit 130; the resume's question says which slices are committed already; and once the
/// backfill is applied, `bf apply` says so without asking anything.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_says_what_is_committed_and_the_resume_says_what_is_in() {
    let (dir, table) = workspace();
    let root = dir.path();
    std::fs::write(root.join("plans/august.toml"), august("pay_date", "payment_id", "")).unwrap();
    assert!(bf(root, &["plan", "plans/august.toml", "-q"]).status.success());

    let stopped = crate::common::apply_interrupted_after(root, &table, 3, &[]);
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

    let (_, question) = crate::common::answered_after(root, "apply", "no", async {}).await;
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
    let (dir, _) = workspace();
    let root = dir.path();
    edit_day(root, "2026-08-02", |_, cells| cells[1].clear());
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
    let (dir, _) = workspace();
    let root = dir.path();
    edit_day(root, "2026-08-02", |row, cells| {
        if row == 3 {
            cells[2] = "n/a".to_owned();
        }
    });
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

/// The small messages of the path: a key written as one value shows the array it should be; `bf
/// init --out` into a folder that does not exist names the folder; `bf clean` says which rehearsal it keeps for
/// the saved plan; a rollback lists its versions as ranges and says its rows are the window's.
#[test]
fn the_small_messages_say_what_to_do() {
    let (dir, _) = workspace();
    let root = dir.path();
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

/// A slice of several days is named by all of them wherever bf names it, its reconcile too.
#[test]
fn a_slice_of_several_days_is_reconciled_under_all_its_days() {
    let (dir, _) = workspace();
    let root = dir.path();
    let weekly = august("pay_date", "payment_id", "")
        .replace("every = \"day\"", "every = \"week\"")
        .replace("../landing/payments/{date}.csv", "../landing/payments");
    std::fs::write(root.join("plans/august.toml"), weekly).unwrap();
    let out = bf(root, &["plan", "plans/august.toml", "--json"]);
    assert!(out.status.success(), "{}", said(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &plan["slices"][0];
    assert_ne!(first["first"], first["last"], "a slice of several days: {first}");
    let reconcile =
        plan["checks"].as_array().unwrap().iter().find(|c| c["kind"] == "reconcile" && c["slice"] == 1);
    let detail = reconcile.unwrap()["detail"].as_str().unwrap().to_owned();
    let days = format!("ok {}..{}: ", first["first"].as_str().unwrap(), first["last"].as_str().unwrap());
    assert!(detail.starts_with(&days), "{detail}");
}

/// A day's file with a column the table does not have, read by `SELECT *`: refused naming the
/// column, the slice and the file it came from.
#[test]
fn an_extra_column_names_the_file_it_came_from() {
    let (dir, _) = workspace();
    let root = dir.path();
    edit_day(root, "2026-08-02", |_, cells| cells.push("late".into()));
    let day = root.join("landing/payments/2026-08-02.csv");
    let text = std::fs::read_to_string(&day).unwrap().replacen("pay_date\n", "pay_date,note\n", 1);
    std::fs::write(&day, text).unwrap();
    let plan = august("pay_date", "payment_id", "")
        .replace("end = 2026-08-29", "end = 2026-08-03")
        .replace("SELECT payment_id, customer, amount, currency, CAST(pay_date AS DATE) AS pay_date, CAST(0.25 AS DOUBLE) AS fee FROM corrected", "SELECT *, CAST(0.25 AS DOUBLE) AS fee FROM corrected");
    std::fs::write(root.join("plans/august.toml"), plan).unwrap();
    let out = bf(root, &["plan", "plans/august.toml"]);
    let said = said(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("`note` (")
            && said.contains("is in the query but not in the table")
            && said.contains("(found in slice 2 (2026-08-02: ")
            && said.contains("2026-08-02.csv))"),
        "{said}"
    );
}
