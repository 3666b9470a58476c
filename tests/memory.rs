//! `BF_MEMORY_LIMIT`: the operator's bound on what bf's queries hold in memory.

use serde_json::Value;

use crate::common::{bf_in, demo_workspace, snapshot};

fn plan(root: &std::path::Path, limit: Option<&str>) -> std::process::Output {
    let mut command = bf_in(root);
    command.args(["plan", "plans/march.toml", "-q", "--json"]);
    match limit {
        Some(limit) => command.env("BF_MEMORY_LIMIT", limit),
        None => command.env_remove("BF_MEMORY_LIMIT"),
    };
    command.output().unwrap()
}

/// The March reload with its downstream table, planned with a bound that fits (64 MiB: joins as
/// sort-merge joins, sorts that may spill) gives the plan an unbounded run gives, figure for
/// figure; a bound too small for its source's join (1 KiB) stops the plan with DataFusion's
/// "Resources exhausted" and what to change, naming the setting, nothing saved; a value that is
/// not a size is refused before anything is read. The table is untouched throughout.
#[test]
fn a_memory_bound_gives_the_same_plan_or_says_what_to_change() {
    let dir = demo_workspace();
    let root = dir.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let untouched = snapshot(&silver);
    let figures = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let chain = std::iter::once(&plan).chain(plan["downstream"].as_array().unwrap());
        chain.map(|p| (p["total"].clone(), p["slices"].as_array().unwrap().len())).collect::<Vec<_>>()
    };
    let unbounded = figures(&plan(root, None));
    assert_eq!(figures(&plan(root, Some("64 MiB"))), unbounded);

    std::fs::remove_file(root.join(".bf/plan.json")).unwrap();
    let exhausted = plan(root, Some("1KiB"));
    let said = String::from_utf8_lossy(&exhausted.stderr);
    assert_eq!(exhausted.status.code(), Some(1), "{said}");
    assert!(said.contains("Resources exhausted"), "{said}");
    assert!(
        said.contains("help: bf's queries may hold 1.0 KiB in memory (BF_MEMORY_LIMIT)")
            && said.contains("Raise BF_MEMORY_LIMIT, or cut the slices smaller"),
        "{said}"
    );
    assert!(!root.join(".bf/plan.json").exists(), "no plan saved");

    let refused = plan(root, Some("lots"));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("BF_MEMORY_LIMIT: `lots` is not a size"), "{said}");
    assert_eq!(snapshot(&silver), untouched);
}
