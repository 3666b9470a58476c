//! Who is who in bf's lineage: the namespace its jobs live in, the jobs (one per table and kind of
//! run), the run ids (derived from the backfill id, so a resumed apply, a retried slice task and
//! `--finish` speak of the same runs), the datasets (named as OpenLineage's naming spec names
//! files, object stores and tables), and the run that started bf when an orchestrator did.

use chrono::{DateTime, Utc};
use serde_json::Map;
use sha2::{Digest, Sha256};
use url::Url;

use super::event::{self, Dataset, EventType, Job, JobId, JobType, Parent, Run, RunEvent, RunRef};
use super::facet::{self, BfRunFacet, PullRequest};
use crate::rehearse::plan::Plan;

/// The namespace bf's jobs are in when `OPENLINEAGE_NAMESPACE` names none.
pub const DEFAULT_NAMESPACE: &str = "bf";

/// What every event bf emits shares: where its jobs live, who produced it, the run that started bf.
#[derive(Debug, Clone)]
pub struct Lineage {
    pub namespace: String,
    pub producer: String,
    /// The run that started bf (an Airflow task's), from `OPENLINEAGE_PARENT_ID`: the parent of the
    /// outermost run bf emits, with `OPENLINEAGE_ROOT_PARENT_ID` as its root.
    pub caller: Option<Parent>,
    pub pull_request: Option<PullRequest>,
}

/// `OPENLINEAGE_PARENT_ID` that is not `namespace/name/runId`.
#[derive(Debug, thiserror::Error)]
#[error("{variable} is not `namespace/job name/run id` (a UUID): {problem}")]
pub struct CallerError {
    pub variable: &'static str,
    pub problem: String,
}

impl Lineage {
    /// From the standard client settings (`OPENLINEAGE_NAMESPACE`) and the variables an
    /// orchestrator passes a child process (`OPENLINEAGE_PARENT_ID`, `OPENLINEAGE_ROOT_PARENT_ID`,
    /// as dbt-ol reads them). A caller that cannot be read is left out, and said why.
    pub fn from_env() -> (Lineage, Option<CallerError>) {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let caller = || -> Result<Option<Parent>, CallerError> {
            let parent =
                var("OPENLINEAGE_PARENT_ID").map(|v| run_ref("OPENLINEAGE_PARENT_ID", &v)).transpose()?;
            let root = var("OPENLINEAGE_ROOT_PARENT_ID")
                .map(|v| run_ref("OPENLINEAGE_ROOT_PARENT_ID", &v))
                .transpose()?;
            Ok(parent.map(|parent| Parent { parent, root }))
        };
        let (caller, problem) = match caller() {
            Ok(caller) => (caller, None),
            Err(problem) => (None, Some(problem)),
        };
        let lineage = Lineage {
            namespace: var("OPENLINEAGE_NAMESPACE").unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
            producer: producer(),
            caller,
            pull_request: PullRequest::from_env(),
        };
        (lineage, problem)
    }

    /// A job of bf's on `table`: `orders_silver/backfill`, `orders_silver/backfill/slice`,
    /// `orders_silver/rollback`.
    pub fn job(&self, table: &str, kind: &str) -> JobId {
        JobId { namespace: self.namespace.clone(), name: format!("{table}/{kind}") }
    }

    /// An event of bf's with its job's facets, before its datasets.
    pub(super) fn event(
        &self,
        event_type: EventType,
        at: DateTime<Utc>,
        run: Run,
        job: JobId,
        job_type: &'static str,
    ) -> RunEvent {
        let mut facets = Map::new();
        let kind = JobType { processing_type: "BATCH", integration: "BF", job_type };
        event::put(&mut facets, JobType::KEY, JobType::schema_url(), &self.producer, kind);
        RunEvent {
            event_type,
            event_time: at,
            run,
            job: Job { id: job, facets },
            inputs: Vec::new(),
            outputs: Vec::new(),
            producer: self.producer.clone(),
            schema_url: event::SPEC.to_owned(),
        }
    }

    /// A run with the `bf` facet, and a `parent` when it has one.
    pub(super) fn run(&self, run_id: uuid::Uuid, parent: Option<Parent>, bf: &BfRunFacet) -> Run {
        let mut facets = Map::new();
        if let Some(parent) = parent {
            event::put(&mut facets, Parent::KEY, Parent::schema_url(), &self.producer, parent);
        }
        event::put(&mut facets, BfRunFacet::KEY, BfRunFacet::schema_url(), &self.producer, bf);
        Run { run_id, facets }
    }

    /// A dataset at `url` (a table, a folder or a file), named as OpenLineage names them.
    pub fn dataset(&self, url: &Url) -> Dataset {
        let (namespace, name) = dataset_name(url);
        Dataset { namespace, name, facets: Map::new(), input_facets: Map::new(), output_facets: Map::new() }
    }
}

/// `producer`: bf, at its version.
fn producer() -> String {
    format!("{}/tree/v{}", facet::PROJECT_URL, env!("CARGO_PKG_VERSION"))
}

/// `namespace/name/runId`; the name may hold slashes, the namespace and the run id do not.
fn run_ref(variable: &'static str, text: &str) -> Result<RunRef, CallerError> {
    let problem = |problem: &str| CallerError { variable, problem: problem.to_owned() };
    let (namespace, rest) = text.trim().split_once('/').ok_or_else(|| problem("no `/` in it"))?;
    let (name, run_id) = rest.rsplit_once('/').ok_or_else(|| problem("no job name in it"))?;
    if namespace.is_empty() || name.is_empty() {
        return Err(problem("its namespace or job name is empty"));
    }
    let run_id = uuid::Uuid::parse_str(run_id).map_err(|_| problem("its run id is not a UUID"))?;
    Ok(RunRef::new(run_id, JobId { namespace: namespace.to_owned(), name: name.to_owned() }))
}

/// The id of a run bf emits, the same for the same `parts` every time: a UUID (version 8) from
/// their sha256, so every process that speaks of a backfill's run speaks of one run.
pub fn run_id(parts: &[&str]) -> uuid::Uuid {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// A backfill's run.
pub fn backfill_run_id(backfill_id: &str) -> uuid::Uuid {
    run_id(&["bf", "backfill", backfill_id])
}

/// A slice's run, within its backfill.
pub fn slice_run_id(backfill_id: &str, slice: usize) -> uuid::Uuid {
    run_id(&["bf", "slice", backfill_id, &slice.to_string()])
}

/// The name people and jobs call a plan's table by: its catalog name when the plan names one
/// (`main.sales.orders`), else the last segment of its location (`orders_silver`).
pub fn table_name(plan: &Plan) -> String {
    job_table(plan.target.catalog.as_ref().map(|c| c.name.as_str()), &plan.target.uri)
}

/// A job's table: its catalog name without the scheme (`glue://sales.orders` → `sales.orders`),
/// else the last folder of its location.
pub(super) fn job_table(catalog: Option<&str>, uri: &str) -> String {
    match catalog {
        Some(name) => name.split_once("://").map_or(name, |(_, n)| n).to_owned(),
        None => url_table_name(uri),
    }
}

pub(super) fn url_table_name(uri: &str) -> String {
    Url::parse(uri).map(|u| crate::plan_file::chain::table_name(&u)).unwrap_or_else(|_| uri.to_owned())
}

/// OpenLineage's naming of a location: a local path is namespace `file` and its absolute path; in
/// an object store, the scheme and bucket (container, account) are the namespace and the path in it
/// the name. A folder's trailing slash is not part of its name.
pub fn dataset_name(url: &Url) -> (String, String) {
    let path = percent_encoding::percent_decode_str(url.path()).decode_utf8_lossy().into_owned();
    let path = match path.len() > 1 {
        true => path.trim_end_matches('/').to_owned(),
        false => path,
    };
    match url.scheme() {
        "file" => ("file".to_owned(), path),
        scheme => {
            let authority = match url.username() {
                "" => url.host_str().unwrap_or_default().to_owned(),
                user => format!("{user}@{}", url.host_str().unwrap_or_default()),
            };
            let authority = match url.port() {
                Some(port) => format!("{authority}:{port}"),
                None => authority,
            };
            (format!("{scheme}://{authority}"), path.trim_start_matches('/').to_owned())
        }
    }
}

/// A location an input names, as a URL: URLs as they are, paths made absolute.
pub(super) fn location_url(location: &str) -> Option<Url> {
    match Url::parse(location) {
        Ok(url) if url.scheme().len() > 1 => Some(url),
        _ => Url::from_file_path(std::path::absolute(location).ok()?).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_names_its_table_by_catalog_name_else_by_folder() {
        assert_eq!(job_table(Some("glue://sales.orders"), "s3://lake/orders/"), "sales.orders");
        assert_eq!(job_table(Some("main.sales.orders"), "s3://lake/orders/"), "main.sales.orders");
        assert_eq!(job_table(None, "s3://lake/warehouse/orders_silver/"), "orders_silver");
    }

    #[test]
    fn datasets_are_named_as_openlineage_names_them() {
        let named = |u: &str| dataset_name(&Url::parse(u).unwrap());
        assert_eq!(
            named("file:///tmp/shop/orders_silver/"),
            ("file".into(), "/tmp/shop/orders_silver".into())
        );
        assert_eq!(named("s3://lake/warehouse/orders/"), ("s3://lake".into(), "warehouse/orders".into()));
        assert_eq!(
            named("abfss://data@acct.dfs.core.windows.net/sales/orders"),
            ("abfss://data@acct.dfs.core.windows.net".into(), "sales/orders".into())
        );
    }

    #[test]
    fn a_caller_is_namespace_name_and_run_id() {
        let caller =
            run_ref("V", "default/bf_backfill.slice_001/01890f6e-0c7a-7d4b-9f3c-2d4c1b0e7a11").unwrap();
        assert_eq!(caller.job.namespace, "default");
        assert_eq!(caller.job.name, "bf_backfill.slice_001");
        let named_with_slashes =
            run_ref("V", "airflow/dags/x.y/01890f6e-0c7a-7d4b-9f3c-2d4c1b0e7a11").unwrap();
        assert_eq!(named_with_slashes.job.name, "dags/x.y");
        assert!(run_ref("V", "default/job/not-a-uuid").is_err());
        assert!(run_ref("V", "no-slashes").is_err());
    }

    #[test]
    fn run_ids_are_stable_uuids_and_differ_by_run() {
        assert_eq!(backfill_run_id("bf-1"), backfill_run_id("bf-1"));
        assert_ne!(backfill_run_id("bf-1"), backfill_run_id("bf-2"));
        assert_ne!(slice_run_id("bf-1", 1), slice_run_id("bf-1", 2));
        assert_eq!(backfill_run_id("bf-1").get_version_num(), 8);
    }
}
