//! The part of OpenLineage's model bf emits: RunEvents, their runs, jobs and datasets, and the
//! standard facets bf fills in. Each facet names the schema version it was written against; the
//! tests validate every event against those schemas, vendored under `tests/data/openlineage/`.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The core model's schema, which every event names.
pub const SPEC: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";

/// The standard facets' schemas, each at the version bf writes.
mod schema {
    const BASE: &str = "https://openlineage.io/spec/facets/";
    pub fn url(version: &str, facet: &str) -> String {
        format!("{BASE}{version}/{facet}.json#/$defs/{facet}")
    }
}

/// What a run's event says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    Start,
    Complete,
    Fail,
    Abort,
    Other,
}

/// One OpenLineage RunEvent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub event_type: EventType,
    #[serde(with = "event_time")]
    pub event_time: DateTime<Utc>,
    pub run: Run,
    pub job: Job,
    #[serde(default)]
    pub inputs: Vec<Dataset>,
    #[serde(default)]
    pub outputs: Vec<Dataset>,
    pub producer: String,
    #[serde(rename = "schemaURL")]
    pub schema_url: String,
}

/// Times as OpenLineage's examples write them: UTC, milliseconds, `Z`.
mod event_time {
    use super::*;

    pub fn serialize<S: serde::Serializer>(time: &DateTime<Utc>, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&time.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(from: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(from)?;
        DateTime::parse_from_rfc3339(&text).map(|t| t.with_timezone(&Utc)).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub run_id: uuid::Uuid,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub facets: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobId {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    #[serde(flatten)]
    pub id: JobId,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub facets: Map<String, Value>,
}

/// An input or an output: the facets a dataset has whatever its role, and those of its role
/// (`inputFacets` or `outputFacets`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dataset {
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub facets: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub input_facets: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub output_facets: Map<String, Value>,
}

/// Puts a facet under `key`: its fields, with the producer and the schema it follows.
pub fn put(
    facets: &mut Map<String, Value>,
    key: &str,
    schema_url: String,
    producer: &str,
    body: impl Serialize,
) {
    let mut value = serde_json::to_value(body).expect("a facet serializes");
    if let Value::Object(fields) = &mut value {
        fields.insert("_producer".into(), Value::String(producer.to_owned()));
        fields.insert("_schemaURL".into(), Value::String(schema_url));
    }
    facets.insert(key.to_owned(), value);
}

/// A run and its job, as a `parent` (or `root`) names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRef {
    pub run: RunIdOnly,
    pub job: JobId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunIdOnly {
    pub run_id: uuid::Uuid,
}

impl RunRef {
    pub fn new(run_id: uuid::Uuid, job: JobId) -> RunRef {
        RunRef { run: RunIdOnly { run_id }, job }
    }
}

/// `parent`: the run that started this one, and the root of the hierarchy when it is not that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Parent {
    #[serde(flatten)]
    pub parent: RunRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<RunRef>,
}

impl Parent {
    pub const KEY: &str = "parent";
    pub fn schema_url() -> String {
        schema::url("1-2-0", "ParentRunFacet")
    }
}

/// `nominalTime`: the days a run stands for, start included, end excluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NominalTime {
    pub nominal_start_time: String,
    pub nominal_end_time: String,
}

impl NominalTime {
    pub const KEY: &str = "nominalTime";
    pub fn schema_url() -> String {
        schema::url("1-0-0", "NominalTimeRunFacet")
    }

    /// Days `first` to `last`, as midnight UTC of the first to midnight after the last.
    pub fn days(first: NaiveDate, last: NaiveDate) -> NominalTime {
        let midnight = |day: NaiveDate| {
            day.and_hms_opt(0, 0, 0)
                .expect("midnight exists")
                .and_utc()
                .to_rfc3339_opts(SecondsFormat::Millis, true)
        };
        NominalTime {
            nominal_start_time: midnight(first),
            nominal_end_time: midnight(last.succ_opt().unwrap_or(last)),
        }
    }
}

/// `errorMessage`: why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorMessage {
    pub message: String,
    pub programming_language: &'static str,
}

impl ErrorMessage {
    pub const KEY: &str = "errorMessage";
    pub fn schema_url() -> String {
        schema::url("1-0-0", "ErrorMessageRunFacet")
    }
}

/// `jobType`: a batch job of bf's, and which of its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobType {
    pub processing_type: &'static str,
    pub integration: &'static str,
    pub job_type: &'static str,
}

impl JobType {
    pub const KEY: &str = "jobType";
    pub fn schema_url() -> String {
        schema::url("2-0-2", "JobTypeJobFacet")
    }
}

/// `version`: the version of a dataset a run read or wrote (a Delta table's version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatasetVersion {
    pub dataset_version: String,
}

impl DatasetVersion {
    pub const KEY: &str = "version";
    pub fn schema_url() -> String {
        schema::url("1-0-0", "DatasetVersionDatasetFacet")
    }
}

/// `outputStatistics`: what a run added to its output. The facet's schema requires the row count:
/// a run whose rows are not all counted carries no statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputStatistics {
    pub row_count: u64,
    pub size: u64,
}

impl OutputStatistics {
    pub const KEY: &str = "outputStatistics";
    pub fn schema_url() -> String {
        schema::url("1-0-0", "OutputStatisticsOutputDatasetFacet")
    }
}

/// `dataQualityAssertions`: the plan's checks, as the rehearsal of what landed passed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataQualityAssertions {
    pub assertions: Vec<Assertion>,
}

/// One check: its kind (`unique`, `not_null`, `sql`, `reconcile`), its name in the plan, whether it
/// held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assertion {
    pub assertion: String,
    pub success: bool,
    pub name: String,
}

impl DataQualityAssertions {
    pub const KEY: &str = "dataQualityAssertions";
    pub fn schema_url() -> String {
        schema::url("1-2-0", "DataQualityAssertionsDatasetFacet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominal_time_spans_the_days_end_excluded() {
        let day = |d: &str| d.parse::<NaiveDate>().unwrap();
        let time = NominalTime::days(day("2026-03-01"), day("2026-03-31"));
        assert_eq!(time.nominal_start_time, "2026-03-01T00:00:00.000Z");
        assert_eq!(time.nominal_end_time, "2026-04-01T00:00:00.000Z");
    }
}
