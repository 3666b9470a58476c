//! Reviewed in a pull request: the plan comment a reviewer decides on (section by section, under
//! GitHub's comment limit at any size), the terminal layout of long plans, the pre-commit hook run
//! by the real `pre-commit`, and the CI workflow example checked against GitHub's workflow schema.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{VALID_PLAN, bf_in, demo_workspace, repo, write_plan};

/// What a successful bf printed (exit 0, or 2 for a plan that changes data).
fn stdout(output: &std::process::Output) -> String {
    assert!(matches!(output.status.code(), Some(0 | 2)), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_markdown_comment_holds_what_a_reviewer_decides_on() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = stdout(
        &bf_in(root).args(["plan", "plans/march.toml", "-q", "--format", "markdown"]).output().unwrap(),
    );
    assert!(march.starts_with("## ✅ Backfill of 2 tables"), "the chain's status first: {march}");
    assert!(
        march.contains(
            "| 1 | `orders_silver` | `march.toml` | Plan: 1 slice to replace; rows 412 → 409 (−0.7%)"
        ),
        "{march}"
    );
    assert!(march.contains("\n#### ✅ Plan: 1 slice to replace; rows 412 → 409 (−0.7%)"), "{march}");
    assert!(
        march.contains("### 2. `revenue_by_day`")
            && march.contains("31 rows before and after: 31 changed; orders 412 → 409"),
        "{march}"
    );
    assert!(
        march.contains("**Table** `../bf-demo/warehouse/orders_silver` at version 5"),
        "named as the plan names it"
    );
    assert!(!march.contains(&root.display().to_string()), "no path of the machine that planned:\n{march}");
    assert!(
        march.contains("**`bf apply`** writes 1 commit") && march.contains("returns the table to version 5")
    );
    assert!(march.contains("| slice | days | rows | revenue | added / removed / changed |"), "{march}");
    assert!(march.contains("| +0 / −3 / ~287 |"), "the row changes: {march}");
    assert!(
        march.contains("**Where the change is**") && march.contains("currency = USD → EUR"),
        "the breakdown"
    );
    assert!(
        march.contains(
            "<details><summary>Changed rows in slice 1 (2026-03-01..2026-03-31): 8 of 290</summary>"
        )
    );
    assert!(march.contains("```diff\n  order_id | customer | amount | currency | amount_eur | order_date\n- 780 | C21 | 23.2 | USD | 21.34 | 2026-03-01\n+ 780 | C21 | 23.2 | EUR | 23.2 | 2026-03-01"), "{march}");
    assert!(
        march.contains("- ✅ guard `max_change_pct.revenue`")
            && march.contains("**Outside the window** unchanged ✅")
    );
    assert!(march.trim_end().ends_with("<!-- bf plan -->"), "the marker a CI job finds its comment by");

    // September: 30 slices from nothing; an empty "before" reads as —, not NULL.
    let september = stdout(
        &bf_in(root).args(["plan", "plans/september.toml", "-q", "--format", "markdown"]).output().unwrap(),
    );
    assert!(september.contains("revenue — → 6,487.85"), "{september}");
    assert!(!september.contains("NULL"), "{september}");
    assert!(september.contains("10 of 30 slices shown, those with the most changes"), "{september}");
    // What the table leaves out is a row of its own: how many, and how they changed.
    let left_out = september
        .lines()
        .find(|l| l.starts_with("| … | 20 more slices | "))
        .unwrap_or_else(|| panic!("{september}"));
    assert!(
        left_out.starts_with("| … | 20 more slices | 20 from none | 20 from none | +")
            && left_out.contains(" / −0 / ~0 | 0 → 20 (0 B → "),
        "every one of them from an empty day: {left_out}"
    );
    assert_eq!(september.matches("<details>").count(), 3, "the changed rows of the three largest slices");
    let all =
        stdout(&bf_in(root).args(["show", "--format", "markdown", "--detail", "all"]).output().unwrap());
    assert_eq!(all.matches("<details>").count(), 30, "--detail all: every slice's changed rows");
}

#[test]
fn a_long_plan_prints_its_summary_first_and_fits_a_screen() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let text = stdout(&bf_in(root).args(["plan", "plans/september.toml", "-q"]).output().unwrap());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 60, "{} lines:\n{text}", lines.len());
    let summary = lines.iter().position(|l| l.starts_with("Plan: 30 slices to replace")).unwrap();
    let checks = lines.iter().position(|l| *l == "Checks").unwrap();
    let table = lines.iter().position(|l| l.contains("added / removed / changed")).unwrap();
    assert!(summary < checks && checks < table, "summary, then checks, then slices:\n{text}");
    assert!(text.contains("revenue — → 6,487.85") && !text.contains("NULL"));
    let every = stdout(&bf_in(root).args(["show", "--detail", "all"]).output().unwrap());
    assert_eq!(every.matches("Changed rows in slice").count(), 30);
    let slices = stdout(&bf_in(root).args(["show", "--detail", "slices"]).output().unwrap());
    let rows = slices.lines().filter(|l| l.starts_with('│') && l.contains(" 2026-09-")).count();
    assert_eq!(rows, 31, "every slice's row and the total:\n{slices}");
}

#[test]
fn the_comment_of_a_365_slice_plan_stays_under_githubs_limit_and_says_what_it_cut() {
    let workspace = demo_workspace();
    let root = workspace.path();
    bf_in(root).args(["plan", "plans/september.toml", "-q", "--out", "september.json"]).assert().code(0);
    // A year of one-day slices, each with twenty long changed rows: the saved plan, grown.
    let mut plan: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("september.json")).unwrap()).unwrap();
    let template = plan["slices"][0].clone();
    let first: chrono::NaiveDate = "2026-01-01".parse().unwrap();
    let slices: Vec<Value> = (0..365u64)
        .map(|i| {
            let mut slice = template.clone();
            let day = (first + chrono::Days::new(i)).to_string();
            slice["index"] = (i + 1).into();
            slice["first"] = day.clone().into();
            slice["last"] = day.clone().into();
            let sample = serde_json::json!({"change": "added", "before": null, "after": [format!("{i:06}"), "C".repeat(60), "12.50", day]});
            slice["changes"]["samples"] = Value::Array(vec![sample; 20]);
            slice["changes"]["added"] = (20 + i).into();
            slice
        })
        .collect();
    plan["slices"] = Value::Array(slices);
    // Every slice failing a check, a problem each, and a value that tries to close the code block.
    let failed = serde_json::json!({"name": "one row per order", "kind": "unique", "slice": 1, "passed": false,
        "offending": 2, "sample": [], "detail": "2 rows share order_id = 7"});
    plan["checks"] = Value::Array(
        (1..=365)
            .map(|i| {
                let mut c = failed.clone();
                c["slice"] = i.into();
                c
            })
            .collect(),
    );
    plan["problems"] = Value::Array(
        (1..=365).map(|i| Value::from(format!("check `one row per order` failed on slice {i}"))).collect(),
    );
    plan["slices"][0]["changes"]["samples"][0]["after"][1] = "```\n</details> <b>not markdown</b>".into();
    std::fs::write(root.join("year.json"), plan.to_string()).unwrap();
    let markdown = stdout(
        &bf_in(root).args(["show", "year.json", "--format", "markdown", "--detail", "all"]).output().unwrap(),
    );
    assert!(markdown.chars().count() < 65_536, "{} characters", markdown.chars().count());
    assert!(markdown.starts_with("### ❌ Plan: 365 slices to replace"), "the summary is never cut");
    assert!(
        markdown.contains("- … and 355 more (`bf show --json` lists them all)"),
        "problems listed ten at a time"
    );
    assert!(markdown.contains("failed on 355 more slices"), "failures of a check, ten at a time");
    assert!(
        markdown.contains("````diff") && markdown.contains("```\\n</details>"),
        "the value stays inside its block"
    );
    assert!(markdown.contains("**Checks and guards**") && markdown.contains("| 365 | 2026-12-31 |"));
    assert!(markdown.contains("Cut here to stay under GitHub's 65,536 characters"), "and it says so");
}

/// Twenty days, each of whose amounts the backfill raises by 10% — but one, which it leaves alone:
/// the comment lists ten slices, the unchanged day among them as the outlier it is, and says in
/// the table what the other ten did.
#[tokio::test(flavor = "multi_thread")]
async fn a_comment_listing_some_slices_shows_the_outliers_and_says_what_it_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    // The table's rows name their day as `&'static str`: twenty small strings, leaked for the test.
    let days: Vec<&'static str> = (1..=20).map(|d| &*format!("2026-09-{d:02}").leak()).collect();
    let rows: Vec<crate::common::OrderRow> =
        days.iter().enumerate().map(|(i, day)| (i as i64 + 1, "C01", 100.0, "EUR", *day)).collect();
    crate::common::orders_table(&dir.path().join("orders"), true, &[&rows]).await;
    let mut csv = String::from("order_id,customer,amount,currency,order_date\n");
    for (i, day) in days.iter().enumerate() {
        let amount = if i + 1 == 7 { 100.0 } else { 110.0 };
        csv.push_str(&format!("{},C01,{amount},EUR,{day}\n", i + 1));
    }
    std::fs::write(dir.path().join("days.csv"), csv).unwrap();
    let text = VALID_PLAN
        .replace("../warehouse/orders_silver", "orders")
        .replace("orders.csv", "days.csv")
        .replace("start = 2026-03-01", "start = 2026-09-01")
        .replace("end = 2026-03-31", "end = 2026-09-20")
        .replace("every = \"month\"", "every = \"day\"")
        .replace("date_column = \"order_date\"", "date_column = \"order_date\"\nkey = [\"order_id\"]")
        .replace(
            "SELECT order_id, amount, order_date FROM orders",
            "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders",
        )
        + "\n[[metrics]]\nname = \"revenue\"\nsql = \"SUM(amount)\"\n";
    write_plan(dir.path(), "days.toml", &text);
    let markdown = stdout(
        &bf_in(dir.path()).args(["plan", "days.toml", "-q", "--format", "markdown"]).output().unwrap(),
    );
    assert!(
        markdown
            .contains("10 of 20 slices shown, those with the most changes and the 1 furthest from the rest"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| 7 | 2026-09-07 | 1 (=) | 100 (=) |"),
        "the unchanged day is shown: {markdown}"
    );
    assert!(
        markdown.contains("| … | 10 more slices | all unchanged | all +10.0% | +0 / −0 / ~10 |"),
        "what the ten left out did: {markdown}"
    );
}

/// A venv with the Python tools these tests drive (`pre-commit`, `check-jsonschema`), from PyPI,
/// made once per machine like the benchmark's.
pub(crate) fn tools() -> PathBuf {
    crate::common::python_venv(
        "BF_TOOLS_VENV",
        "bf-tools-venv",
        "import pre_commit, check_jsonschema",
        &["pre-commit==4.2.0", "check-jsonschema==0.33.0"],
    )
}

/// `check-jsonschema` with `args`, failing the test with its report when a file does not validate.
pub(crate) fn check_jsonschema(args: &[PathBuf]) {
    let checked = Command::new(tools().join("check-jsonschema")).args(args).output().unwrap();
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// `git` in `dir`, as a test user, failing the test when it fails.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    crate::common::clean(Command::new("git"))
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bf test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "bf test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("PATH", path_with_tools())
        .env("PRE_COMMIT_HOME", dir.join(".pre-commit-home"))
        .output()
        .unwrap()
}

/// PATH with the test's `bf` and the tools' venv first.
fn path_with_tools() -> std::ffi::OsString {
    let bf = assert_cmd::cargo::cargo_bin("bf");
    let mut paths = vec![bf.parent().unwrap().to_owned(), tools()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(paths).unwrap()
}

#[test]
fn the_pre_commit_hook_refuses_a_bad_plan_with_its_line_and_lets_a_good_one_through() {
    // The hook repository: this repository's manifest, committed.
    let hooks = tempfile::tempdir().unwrap();
    git(hooks.path(), &["init", "-q"]);
    std::fs::copy(repo(".pre-commit-hooks.yaml"), hooks.path().join(".pre-commit-hooks.yaml")).unwrap();
    git(hooks.path(), &["add", "."]);
    assert!(git(hooks.path(), &["commit", "-qm", "hooks"]).status.success());
    let rev = String::from_utf8(git(hooks.path(), &["rev-parse", "HEAD"]).stdout).unwrap();

    // A repository of plans that uses it.
    let plans = tempfile::tempdir().unwrap();
    let root = plans.path();
    git(root, &["init", "-q"]);
    std::fs::write(
        root.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {}\n    hooks:\n      - id: bf-validate\n",
            hooks.path().display(),
            rev.trim()
        ),
    )
    .unwrap();
    let installed = Command::new(tools().join("pre-commit"))
        .arg("install")
        .current_dir(root)
        .env("PRE_COMMIT_HOME", root.join(".pre-commit-home"))
        .output()
        .unwrap();
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    std::fs::create_dir(root.join("plans")).unwrap();
    let plan = write_plan(&root.join("plans"), "march.toml", &VALID_PLAN.replace("[window]", "[windw]"));
    git(root, &["add", ".pre-commit-config.yaml", "plans"]);
    let refused = git(root, &["commit", "-m", "a bad plan"]);
    let said =
        format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(!refused.status.success(), "the commit went through:\n{said}");
    assert!(said.contains("plans/march.toml:") && said.contains("unknown key `windw`"), "{said}");

    std::fs::write(&plan, VALID_PLAN).unwrap();
    git(root, &["add", "plans"]);
    let passed = git(root, &["commit", "-m", "a good plan"]);
    let said =
        format!("{}{}", String::from_utf8_lossy(&passed.stdout), String::from_utf8_lossy(&passed.stderr));
    assert!(passed.status.success(), "{said}");
    assert!(said.contains("bf validate") && said.contains("Passed"), "{said}");
}

#[test]
fn the_ci_workflow_example_is_a_valid_workflow_and_calls_only_what_bf_has() {
    let workflow = repo("examples/ci/github-actions.yml");
    check_jsonschema(&["--builtin-schema".into(), "vendor.github-workflows".into(), workflow.clone()]);

    // Every `bf <verb> --flag` it runs is a verb and a flag bf has.
    let text = std::fs::read_to_string(&workflow).unwrap();
    let mut calls = 0;
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some(at) = line.find("bf ").filter(|&i| {
            i == 0 || !line.as_bytes()[i - 1].is_ascii_alphanumeric() && line.as_bytes()[i - 1] != b'/'
        }) else {
            continue;
        };
        let words: Vec<&str> = line[at + 3..].split_whitespace().collect();
        let Some(verb) = words.first().filter(|v| v.chars().all(|c| c.is_ascii_lowercase())) else {
            continue;
        };
        let help = crate::common::bf().args([verb, "--help"]).output().unwrap();
        assert!(help.status.success(), "`bf {verb}` in the workflow is not a bf verb");
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        let known: Vec<&str> = help.split(|c: char| c.is_whitespace() || ",[]<>=".contains(c)).collect();
        let is_flag =
            |w: &&&str| w.starts_with("--") && w[2..].chars().all(|c| c.is_ascii_lowercase() || c == '-');
        for flag in words.iter().filter(is_flag) {
            assert!(known.contains(flag), "`bf {verb} {flag}` in the workflow: bf has no such flag");
        }
        calls += 1;
    }
    assert!(calls >= 3, "validate, plan and apply: {calls} calls found");
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    assert!(readme.contains("examples/ci/github-actions.yml") && readme.contains(".pre-commit-hooks.yaml"));
}
