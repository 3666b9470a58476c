//! The `bf` run facet: what a lineage tool cannot read from OpenLineage's own facets — why the past
//! was rewritten, which backfill, which window, from which version to which, the plan's sha256 and
//! the pull request that reviewed it. Its JSON Schema is `schema/lineage/BfRunFacet-1-0-0.json`
//! (`bf schema --lineage-facet`), written as OpenLineage's own facet schemas are.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// Where bf's schemas are published; the facet's `_schemaURL` and the producer derive from it.
pub const PROJECT_URL: &str = env!("CARGO_PKG_REPOSITORY");

/// The version of the facet's schema: a change to its fields is a new version, never an edit.
pub const FACET_VERSION: &str = "1-0-0";

/// The run facet under the key `bf` on every run bf emits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    title = "bf run facet",
    description = "A backfill of a Delta table by bf: why the past was rewritten, which window, from which version to which."
)]
pub struct BfRunFacet {
    /// Which of bf's runs: a whole backfill of one table, one slice of it (one commit), or a rollback.
    pub operation: Operation,
    /// The backfill's id, as the table's commits record it (`bf.backfill_id`); for a rollback, the
    /// backfill it undoes (none for a rollback to a version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill_id: Option<String>,
    /// The run id of that backfill's own run: a slice's or a rollback's link to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("format" = "uuid"))]
    pub backfill_run_id: Option<uuid::Uuid>,
    /// The saved plan's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    /// The reason the plan file gives: why the data was rewritten.
    pub reason: String,
    /// The table (its location, or its catalog name).
    pub table: String,
    /// The backfill's window, both days included (none for a rollback to a version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Days>,
    /// The slice a slice run wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceDays>,
    /// The chain of backfills it is part of (its first plan's id), when its plan has downstream
    /// plans or is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The table's version before the backfill: what `bf rollback` restores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_version: Option<u64>,
    /// The table's version the run left (on COMPLETE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_version: Option<u64>,
    /// The sha256 of the plan file text that was reviewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    /// The plan file, as the saved plan names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<String>,
    /// What a rollback did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackFacts>,
    /// The pull request the run belongs to, when the CI running it says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequest>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Backfill,
    Slice,
    Rollback,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Days {
    pub first: NaiveDate,
    pub last: NaiveDate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SliceDays {
    /// The slice's number in the plan, from 1.
    pub index: usize,
    pub first: NaiveDate,
    pub last: NaiveDate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackFacts {
    /// The version whose rows it put back.
    pub restored_version: u64,
    /// Whether it put back the window only (other writers had committed since).
    pub window_only: bool,
    /// The commits it wrote.
    pub commits: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PullRequest {
    pub url: String,
}

impl PullRequest {
    /// The pull request CI names: `BF_PULL_REQUEST` (a URL), a GitHub Actions run for a pull
    /// request, or a GitLab merge request pipeline.
    pub fn from_env() -> Option<PullRequest> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(url) = var("BF_PULL_REQUEST") {
            return Some(PullRequest { url });
        }
        if let (Some(server), Some(repository), Some(reference)) =
            (var("GITHUB_SERVER_URL"), var("GITHUB_REPOSITORY"), var("GITHUB_REF"))
        {
            // `refs/pull/123/merge` on a pull request's run.
            if let Some(number) = reference.strip_prefix("refs/pull/").and_then(|r| r.split('/').next()) {
                return Some(PullRequest { url: format!("{server}/{repository}/pull/{number}") });
            }
        }
        match (var("CI_MERGE_REQUEST_PROJECT_URL"), var("CI_MERGE_REQUEST_IID")) {
            (Some(project), Some(iid)) => {
                Some(PullRequest { url: format!("{project}/-/merge_requests/{iid}") })
            }
            _ => None,
        }
    }
}

impl BfRunFacet {
    pub const KEY: &str = "bf";

    /// The facet's `_schemaURL`: its schema file in bf's repository, at the facet's version.
    pub fn schema_url() -> String {
        format!("{}#/$defs/BfRunFacet", schema_id())
    }
}

/// The facet schema's `$id`.
fn schema_id() -> String {
    format!("{PROJECT_URL}/blob/main/schema/lineage/{}", schema_file())
}

/// The facet's JSON Schema as `schema/lineage/` holds it: pretty, ending in a newline.
pub fn json_schema() -> String {
    let mut text = serde_json::to_string_pretty(&schema_value()).expect("a schema is plain JSON");
    text.push('\n');
    text
}

/// The schema's file name under `schema/lineage/`.
pub fn schema_file() -> String {
    format!("BfRunFacet-{FACET_VERSION}.json")
}

/// The facet's JSON Schema, shaped as OpenLineage's facet schemas are: the facet in `$defs`, built
/// on the core model's `RunFacet`, under the key it is sent with.
fn schema_value() -> Value {
    let mut generated = serde_json::to_value(schemars::schema_for!(BfRunFacet)).expect("a schema serializes");
    let defs = generated.as_object_mut().and_then(|s| s.remove("$defs")).unwrap_or_else(|| json!({}));
    let fields = generated.as_object_mut().expect("a schema is an object");
    fields.remove("$schema");
    let description = fields.remove("description");
    fields.remove("title");
    let mut all_defs = defs.as_object().cloned().unwrap_or_default();
    all_defs.insert(
        "BfRunFacet".into(),
        json!({
            "description": description,
            "allOf": [
                { "$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet" },
                generated,
            ],
            "type": "object",
        }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id(),
        "$defs": all_defs,
        "type": "object",
        "properties": { BfRunFacet::KEY: { "$ref": "#/$defs/BfRunFacet" } },
    })
}
