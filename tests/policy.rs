//! Policy as code on the saved plan: Rego policies evaluated by `bf plan --policy`, and a policy
//! folder's fixtures run by `bf policy test`.

use std::path::Path;

use crate::common::{bf_in, demo_workspace, repo};

fn copy_policies(to: &Path) {
    std::fs::create_dir_all(to.join("fixtures")).unwrap();
    for folder in ["", "fixtures"] {
        for entry in std::fs::read_dir(repo("examples/policies").join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, to.join(folder).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
}

/// Writes `rego` as `policies/silver.rego` in `root`: the folder `--policy`/`BF_POLICY` names.
fn policies_in(root: &Path, rego: &str) {
    std::fs::create_dir(root.join("policies")).unwrap();
    std::fs::write(root.join("policies/silver.rego"), rego).unwrap();
}

#[test]
fn the_example_policies_decide_their_fixtures_and_a_broken_one_is_caught() {
    let output = bf_in(&repo("")).args(["policy", "test", "examples/policies"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("7 fixtures: all decided as expected"), "{stdout}");
    assert!(stdout.contains("ok    fixtures/march-60-gib.json"), "{stdout}");

    // The size limit broken on purpose: 50 bytes instead of 50 GiB.
    let dir = tempfile::tempdir().unwrap();
    copy_policies(dir.path());
    let rego = dir.path().join("bytes_rewritten.rego");
    let text = std::fs::read_to_string(&rego).unwrap();
    std::fs::write(&rego, text.replace("> 50 * gib", "> 50")).unwrap();
    let output = bf_in(dir.path()).args(["policy", "test", "."]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("FAIL  fixtures/march.json"), "{stdout}");
    assert!(stdout.contains("decided   deny [\"the backfill writes 0 GiB, more than 50 GiB"), "{stdout}");
    assert!(stdout.contains("ok    fixtures/march-60-gib.json"), "a fixture it already denied: {stdout}");
}

#[test]
fn a_denying_policy_makes_the_plan_fail_in_every_rendering_and_unappliable() {
    let dir = demo_workspace();
    let root = dir.path();
    policies_in(
        root,
        r#"package main

import rego.v1

deny contains msg if {
	endswith(input.target.table, "/orders_silver")
	input.blast_radius.files_removed > 0
	msg := sprintf("%s is rewritten by the data platform team only", [input.target.table])
}

warn contains "reviewed by policy" if true
"#,
    );
    let planned = bf_in(root).args(["plan", "plans/march.toml", "--policy", "policies"]).output().unwrap();
    let text = String::from_utf8_lossy(&planned.stdout);
    assert!(!planned.status.success(), "a denied plan fails: {text}");
    let denied =
        "policy denies: ../bf-demo/warehouse/orders_silver is rewritten by the data platform team only";
    assert!(text.contains(denied), "{text}");
    assert!(text.contains("policy warns: reviewed by policy"), "{text}");
    let markdown =
        String::from_utf8(bf_in(root).args(["show", "--format", "markdown"]).output().unwrap().stdout)
            .unwrap();
    assert!(markdown.contains("is rewritten by the data platform team only"), "{markdown}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(
        saved["policy"]["deny"][0],
        "../bf-demo/warehouse/orders_silver is rewritten by the data platform team only"
    );
    // revenue_by_day, downstream, is decided on its own: nothing of it is removed by this policy.
    assert_eq!(saved["downstream"][0]["policy"]["deny"], serde_json::json!([]));
    let versions = crate::common::commit_infos(&root.join("bf-demo/warehouse/orders_silver")).len();
    let applied = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(!applied.status.success());
    assert!(String::from_utf8_lossy(&applied.stderr).contains("policy denies"), "the refusal says why");
    assert_eq!(crate::common::commit_infos(&root.join("bf-demo/warehouse/orders_silver")).len(), versions);
}

#[test]
fn a_policy_that_does_not_parse_is_named_before_anything_is_rehearsed() {
    let dir = demo_workspace();
    let root = dir.path();
    std::fs::create_dir(root.join("policies")).unwrap();
    std::fs::write(root.join("policies/broken.rego"), "package main\n\ndeny contains msg if {\n").unwrap();
    let planned = bf_in(root).args(["plan", "plans/march.toml", "--policy", "policies"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&planned.stderr);
    assert!(!planned.status.success());
    assert!(stderr.contains("broken.rego"), "{stderr}");
    assert!(!root.join("bf-demo/warehouse/orders_silver__rehearsal").exists(), "nothing rehearsed");
    assert!(!root.join(".bf/plan.json").exists(), "nothing saved");
    let empty = root.join("nothing");
    std::fs::create_dir(&empty).unwrap();
    let planned = bf_in(root).args(["plan", "plans/march.toml", "--policy", "nothing"]).output().unwrap();
    assert!(String::from_utf8_lossy(&planned.stderr).contains("holds no Rego policy"));
}

/// With the operator's policies in `BF_POLICY`, a saved plan is decided again at apply: a denial
/// erased from the saved plan (and its problem) is made again, and nothing is written.
#[test]
fn an_erased_policy_denial_is_decided_again_at_apply() {
    let dir = demo_workspace();
    let root = dir.path();
    policies_in(
        root,
        "package main\n\nimport rego.v1\n\ndeny contains \"orders_silver is the platform team's\" if {\n\tendswith(input.target.table, \"/orders_silver\")\n}\n",
    );
    let planned = bf_in(root).args(["plan", "plans/march.toml", "--policy", "policies"]).output().unwrap();
    assert!(!planned.status.success(), "denied");
    let path = root.join(".bf/plan.json");
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    saved["policy"]["deny"] = serde_json::json!([]);
    saved["problems"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_string_pretty(&saved).unwrap()).unwrap();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let versions = crate::common::commit_infos(&silver).len();
    let applied =
        bf_in(root).args(["apply", "--auto-approve"]).env("BF_POLICY", "policies").output().unwrap();
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(!applied.status.success(), "{stderr}");
    assert!(stderr.contains("policy denies: orders_silver is the platform team's"), "{stderr}");
    assert_eq!(crate::common::commit_infos(&silver).len(), versions, "nothing was written");
}
