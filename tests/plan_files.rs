//! Plan files: the bundled plans are valid, every bad plan under tests/plans/bad/ is refused with its
//! key and line, and all of a plan's problems are reported at once.

use std::path::{Path, PathBuf};

use bf::plan_file::{self, Location};
use predicates::prelude::*;

use crate::common::{VALID_PLAN, bf, repo, write_plan};

/// A bad plan and what `bf validate` must say about it, read from the plan's first two lines:
/// `# expect: <fragment of the message>` and `# line: <line it points at>`.
struct BadPlan {
    path: PathBuf,
    expect: String,
    line: usize,
}

fn bad_plans() -> Vec<BadPlan> {
    let mut plans: Vec<BadPlan> = std::fs::read_dir(repo("tests/plans/bad"))
        .expect("tests/plans/bad exists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable plan");
            let header = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(&format!("# {name}: ")))
                    .unwrap_or_else(|| panic!("{} has no `# {name}:` line", path.display()))
                    .to_owned()
            };
            let line = header("line").parse().expect("`# line:` holds a number");
            let expect = header("expect");
            assert!(!expect.trim().is_empty(), "{}: `# expect:` names no fragment", path.display());
            BadPlan { expect, line, path }
        })
        .collect();
    plans.sort_by(|a, b| a.path.cmp(&b.path));
    plans
}

#[test]
fn every_bad_plan_is_refused_naming_its_key_and_line() {
    let plans = bad_plans();
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    assert!(
        readme.contains(&format!("tests/plans/bad/, {} bad plans", plans.len())),
        "the README's count of bad plans is not {}",
        plans.len()
    );
    let mut failures = Vec::new();
    for plan in &plans {
        let output = bf().arg("validate").arg(&plan.path).output().expect("bf runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let location = format!("{}:{}:", plan.path.display(), plan.line);
        if output.status.code() != Some(1) {
            failures.push(format!("{}: exit {:?}, expected 1", plan.path.display(), output.status.code()));
        }
        if !stderr.contains(&plan.expect) {
            failures.push(format!("{}: message lacks {:?}:\n{stderr}", plan.path.display(), plan.expect));
        }
        if !stderr.contains(&location) {
            failures
                .push(format!("{}: message does not point at {location}:\n{stderr}", plan.path.display()));
        }
        if !output.stdout.is_empty() {
            failures.push(format!("{}: printed a result for an invalid plan", plan.path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn bundled_plans_declare_the_schema_and_are_valid() {
    let mut plans: Vec<PathBuf> = std::fs::read_dir(repo("plans"))
        .expect("plans/ exists")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    plans.sort();
    assert_eq!(
        plans.len(),
        4,
        "march and its downstream revenue by day, september and the 15 September correction"
    );
    for plan in &plans {
        let text = std::fs::read_to_string(plan).expect("readable");
        assert!(
            text.starts_with("#:schema ../schema/plan.schema.json\n"),
            "{} must start with the #:schema line",
            plan.display()
        );
    }
    let assert = bf().arg("validate").args(&plans).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("march.toml: 1 slice of `month` over 2026-03-01..2026-03-31"), "{stdout}");
    assert!(stdout.contains("september.toml: 30 slices of `day` over 2026-09-01..2026-09-30"), "{stdout}");
    assert!(
        stdout.contains("correction-2026-09-15.toml: 1 slice of `day` over 2026-09-15..2026-09-15"),
        "{stdout}"
    );
}

#[test]
fn all_problems_of_a_plan_are_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID_PLAN
        .replace("reason = \"Fix March.\"", "reason = \"\"")
        .replace("end = 2026-03-31", "end = 2026-02-28")
        .replace("FROM orders", "FROM ordrs");
    let plan = write_plan(dir.path(), "three.toml", &text);
    let path = plan.display().to_string();
    bf().arg("validate")
        .arg(&plan)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("3 problems found"))
        .stderr(
            predicate::str::contains(format!("{path}:1:")).and(predicate::str::contains("`reason` is empty")),
        )
        .stderr(
            predicate::str::contains(format!("{path}:9:")).and(predicate::str::contains("the window ends")),
        )
        .stderr(
            predicate::str::contains(format!("{path}:16:")).and(predicate::str::contains("reads `ordrs`")),
        );
}

/// A newcomer's four typos — `windw`, `date_colum`, `formt`, `every = "days"` — are four problems of
/// one `bf validate` run, each at its line with the key it was meant to be, and none of the keys
/// the typos leave missing said again. A key missing for its own sake is still said beside a typo.
#[test]
fn every_misspelt_key_and_wrong_value_is_reported_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID_PLAN
        .replace("[window]", "[windw]")
        .replace("date_column =", "date_colum =")
        .replace("format = \"csv\"", "formt = \"csv\"")
        .replace("every = \"month\"", "every = \"days\"");
    let plan = write_plan(dir.path(), "typos.toml", &text);
    let path = plan.display().to_string();
    let out = bf().arg("validate").arg(&plan).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (line, said) in [
        (5, "unknown key `date_colum` in [target] — did you mean `date_column`?"),
        (7, "unknown key `windw` — did you mean `window`?"),
        (12, "`slicing.every`: `days` is not a slicing"),
        (15, "unknown key `formt` in [source.inputs.orders] — did you mean `format`?"),
    ] {
        assert!(stderr.contains(&format!("{path}:{line}:")) && stderr.contains(said), "{said}:\n{stderr}");
    }
    assert!(stderr.contains("4 problems found") && !stderr.contains("missing key"), "{stderr}");

    let text =
        VALID_PLAN.replace("date_column =", "date_colum =").replace("[slicing]\nevery = \"month\"\n", "");
    let plan = write_plan(dir.path(), "missing.toml", &text);
    let out = bf().arg("validate").arg(&plan).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown key `date_colum`") && stderr.contains("missing key `slicing`"),
        "{stderr}"
    );
    assert!(stderr.contains("2 problems found"), "{stderr}");
}

#[test]
fn validate_reports_each_file_and_fails_if_any_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_plan(dir.path(), "good.toml", VALID_PLAN);
    let bad = write_plan(dir.path(), "bad.toml", &VALID_PLAN.replace("[window]", "[windw]"));
    let missing = dir.path().join("missing.toml");
    bf().arg("validate")
        .args([&good, &bad, &missing])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!("ok {}", good.display())))
        .stderr(predicate::str::contains("unknown key `windw` — did you mean `window`?"))
        .stderr(predicate::str::contains(format!("cannot read plan file {}", missing.display())))
        .stderr(predicate::str::contains("2 of 3 plan files are invalid"));
}

#[test]
fn a_file_that_is_not_a_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("data.parquet");
    std::fs::write(&binary, [0x50, 0x41, 0x52, 0x31, 0xff, 0xfe, 0x00]).unwrap();
    bf().arg("validate")
        .arg(&binary)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot read plan file"));
    let folder = dir.path();
    bf().arg("validate")
        .arg(folder)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot read plan file"));
    let empty = write_plan(dir.path(), "empty.toml", "");
    bf().arg("validate")
        .arg(&empty)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("missing key `reason`"));
}

#[test]
fn plan_paths_are_relative_to_the_plan_file() {
    let text = VALID_PLAN.replace("../warehouse/orders_silver", "file:///lake/orders_silver");
    let document = plan_file::parse(Path::new("repo/plans/march.toml"), VALID_PLAN.to_owned()).unwrap();
    assert_eq!(
        document.resolve(&document.plan.target.table),
        Location::Path(PathBuf::from("repo/warehouse/orders_silver"))
    );
    assert_eq!(document.resolve("orders.csv"), Location::Path(PathBuf::from("repo/plans/orders.csv")));
    let uri = plan_file::parse(Path::new("repo/plans/march.toml"), text).unwrap();
    assert_eq!(
        uri.resolve(&uri.plan.target.table),
        Location::Uri("file:///lake/orders_silver".parse().unwrap())
    );
}

#[test]
fn defaults_are_those_the_schema_documents() {
    let document = plan_file::parse(Path::new("plan.toml"), VALID_PLAN.to_owned()).unwrap();
    let plan = &document.plan;
    assert_eq!(plan.guards.max_slices, 100);
    assert_eq!(plan.slicing.parallel, 1);
    assert_eq!(plan.slicing.run_offset.to_string(), "0 days");
    assert_eq!(plan.slicing.order.to_string(), "forward");
    assert_eq!(plan.write.mode, plan_file::WriteMode::Replace);
    assert_eq!(plan.rehearsal.table, None);
    let schema: serde_json::Value = serde_json::from_str(&plan_file::json_schema()).unwrap();
    assert_eq!(schema["definitions"]["Guards"]["properties"]["max_slices"]["default"], 100);
    assert_eq!(schema["definitions"]["Slicing"]["properties"]["parallel"]["default"], 1);
}

#[test]
fn the_readme_plan_is_a_valid_plan() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let start = readme.find("```toml\n").expect("the README shows a plan") + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let text = readme[start..end].to_owned();
    if let Err(error) = plan_file::parse(&repo("plans/readme.toml"), text) {
        panic!("the README's plan is invalid:\n{error}");
    }
}

#[test]
fn every_bad_plan_is_refused_by_bf_plan_too_and_the_table_is_untouched() {
    // The bad plans name `../warehouse/orders_silver`; give them a real one there.
    let workspace = crate::common::demo_workspace();
    let root = workspace.path();
    std::os::unix::fs::symlink(root.join("bf-demo/warehouse"), root.join("warehouse")).unwrap();
    let silver = root.join("warehouse/orders_silver");
    let untouched = crate::common::snapshot(&silver);
    for plan in bad_plans() {
        let copy = root.join("plans").join(plan.path.file_name().unwrap());
        std::fs::copy(&plan.path, &copy).unwrap();
        let output = crate::common::bf_in(root).arg("plan").arg(&copy).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{}: {stderr}", plan.path.display());
        assert!(stderr.contains(&plan.expect), "{}: {stderr}", plan.path.display());
        let location = format!("{}:{}:", copy.display(), plan.line);
        assert!(
            stderr.contains(&location),
            "{}: does not point at {location}: {stderr}",
            plan.path.display()
        );
        assert!(!root.join(".bf/plan.json").exists(), "{}: a plan was saved", plan.path.display());
        assert!(
            !root.join("warehouse/orders_silver__rehearsal").exists(),
            "{}: a rehearsal was made",
            plan.path.display()
        );
    }
    assert_eq!(crate::common::snapshot(&silver), untouched);
}
