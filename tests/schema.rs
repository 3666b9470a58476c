//! The committed JSON Schemas are the ones the types generate: the plan file's, and the saved
//! plan's, which every shape of saved plan the tests make validates against (read by
//! `check-jsonschema`, not by bf).

use crate::common::{bf, repo};

#[test]
fn committed_schema_matches_the_plan_types() {
    let committed =
        std::fs::read_to_string(repo("schema/plan.schema.json")).expect("schema/plan.schema.json exists");
    let generated = bf::plan_file::json_schema();
    assert!(
        committed == generated,
        "schema/plan.schema.json is stale; regenerate it with `cargo run -- schema > schema/plan.schema.json`"
    );
    bf().arg("schema").assert().success().stdout(generated);
}

#[test]
fn every_key_is_documented_and_unknown_keys_are_refused() {
    let schema: serde_json::Value = serde_json::from_str(&bf::plan_file::json_schema()).unwrap();
    let mut objects = vec![("plan".to_owned(), &schema)];
    objects.extend(schema["definitions"].as_object().unwrap().iter().map(|(name, s)| (name.clone(), s)));
    for (name, object) in objects {
        let Some(properties) = object["properties"].as_object() else { continue };
        assert_eq!(object["additionalProperties"], false, "{name} must refuse unknown keys");
        for (key, property) in properties {
            assert!(
                property["description"].as_str().is_some_and(|d| d.len() > 10),
                "{name}.{key} has no description"
            );
        }
    }
}

#[test]
fn committed_saved_plan_schema_matches_the_saved_plan_types() {
    let committed = std::fs::read_to_string(repo("schema/saved-plan.schema.json"))
        .expect("schema/saved-plan.schema.json exists");
    let generated = bf::rehearse::plan::json_schema();
    assert!(
        committed == generated,
        "schema/saved-plan.schema.json is stale; regenerate it with `cargo run -- schema --saved-plan > schema/saved-plan.schema.json`"
    );
    bf().args(["schema", "--saved-plan"]).assert().success().stdout(generated);
}

/// Saved plans of every shape the suite makes — a chain with a key, a breakdown and a change log;
/// thirty daily slices; a merge; a plan that fails its guards; counts only; frozen days approved;
/// a policy's decision — and the policy fixtures, each checked against the committed schema.
#[test]
fn every_shape_of_saved_plan_validates_against_the_saved_plan_schema() {
    let dir = crate::common::demo_workspace();
    let root = dir.path();
    let plans = root.join("plans");
    let saved = root.join("saved");
    std::fs::create_dir(&saved).unwrap();
    let march = std::fs::read_to_string(plans.join("march.toml")).unwrap();
    let variants = [
        ("march", march.clone()),
        (
            "failing",
            march.replace("max_change_pct = { rows = 5, revenue = 10 }", "max_change_pct = { rows = 0.1 }"),
        ),
        (
            "merge",
            crate::common::without_downstream(&march).replace("mode = \"replace\"", "mode = \"merge\""),
        ),
    ];
    let mut written = Vec::new();
    for (name, text) in &variants {
        let plan = crate::common::write_plan(&plans, &format!("{name}.toml"), text);
        let out = saved.join(format!("{name}.json"));
        crate::common::bf_in(root).arg("plan").arg(&plan).arg("--out").arg(&out).output().unwrap();
        written.push(out);
    }
    let out = saved.join("september.json");
    crate::common::bf_in(root).args(["plan", "plans/september.toml", "--out"]).arg(&out).assert().success();
    written.push(out);
    let out = saved.join("counts-only.json");
    crate::common::bf_in(root)
        .args(["plan", "plans/march.toml", "--samples", "none", "--out"])
        .arg(&out)
        .assert()
        .success();
    written.push(out);
    let out = saved.join("policy.json");
    crate::common::bf_in(root)
        .args(["plan", "plans/march.toml", "--policy"])
        .arg(repo("examples/policies"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    written.push(out);
    crate::common::bf_in(root)
        .args([
            "freeze",
            "bf-demo/warehouse/orders_silver",
            "--through",
            "2026-03-31",
            "--reason",
            "Q1 closed",
        ])
        .assert()
        .success();
    // The approval the plan asks for, recorded on the table: the saved plan then holds a period
    // with its approvals.
    crate::common::bf_in(root)
        .args(["unfreeze", "bf-demo/warehouse/orders_silver", "--from", "2026-03-01", "--to", "2026-03-31"])
        .args(["--approved-by", "Dana", "--ticket", "FIN-1", "--reason", "restatement"])
        .assert()
        .success();
    let approved = march.replace(
        "\n[guards]\n",
        "\n[guards]\nunfreeze = { from = 2026-03-01, to = 2026-03-31, approved_by = \"Dana\", ticket = \"FIN-1\" }\n",
    );
    let plan = crate::common::write_plan(&plans, "approved.toml", &approved);
    let out = saved.join("approved.json");
    crate::common::bf_in(root).arg("plan").arg(&plan).arg("--out").arg(&out).assert().success();
    written.push(out);
    for file in &written {
        assert!(file.is_file(), "{} was saved", file.display());
    }
    let fixtures = std::fs::read_dir(repo("examples/policies/fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with(".expected.json"));
    let mut args = vec!["--schemafile".into(), repo("schema/saved-plan.schema.json")];
    args.extend(written.into_iter().chain(fixtures));
    crate::review::check_jsonschema(&args);
}
