//! The committed JSON Schema is the one the plan types generate.

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
