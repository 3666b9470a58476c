//! A newcomer's second hour: a payments table of one's own, made by another writer, and the
//! mistakes people make on the way from `bf init` to `bf rollback` — each caught where it was made,
//! at its file and line, all of a round's at once.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::bf_in;

mod messages;
mod paths;

/// A `payments` table written by the Python `deltalake` package, as another team's job writes it:
/// 90 days from June 1, 2026, three payments a day, partitioned by `pay_date`, one commit a week;
/// then a DELETE of payment 12 and a week written with a column added (`fee`). August's amounts
/// were recorded in cents. Returns the table's folder (`lake/payments` under `root`).
fn payments(root: &Path) -> PathBuf {
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
fn corrections(root: &Path) {
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

/// A workspace of one's own: the payments table another writer made (`lake/payments`), August's
/// corrections (`landing/payments/`) and an empty `plans/`. Returns it and the table's folder.
pub(crate) fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = payments(dir.path());
    corrections(dir.path());
    std::fs::create_dir(dir.path().join("plans")).unwrap();
    (dir, table)
}

/// Rewrites the corrections file of `day`, each row's cells through `edit` with its line number
/// (the header, line 1, kept).
pub(crate) fn edit_day(root: &Path, day: &str, edit: impl Fn(usize, &mut Vec<String>)) {
    let path = root.join(format!("landing/payments/{day}.csv"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().take(1).map(str::to_owned).collect();
    for (i, line) in text.lines().enumerate().skip(1) {
        let mut cells: Vec<String> = line.split(',').map(str::to_owned).collect();
        edit(i + 1, &mut cells);
        lines.push(cells.join(","));
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

pub(crate) fn bf(root: &Path, args: &[&str]) -> Output {
    bf_in(root).args(args).output().unwrap()
}

pub(crate) fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The line of `text` that holds `needle`, counted from 1.
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} in:\n{text}")) + 1
}

/// A plan for August's reload, as a newcomer writes it.
pub(crate) fn august(date_column: &str, key: &str, extra: &str) -> String {
    august_every("day", date_column, key, extra)
}

/// [`august`], sliced `every`.
pub(crate) fn august_every(every: &str, date_column: &str, key: &str, extra: &str) -> String {
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
    let (dir, _) = workspace();
    let root = dir.path();
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
    let (dir, table) = workspace();
    let root = dir.path();
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
