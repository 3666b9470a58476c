//! AWS Glue: the table (`GetTable`) and its `Description`, the comment the Glue and Athena consoles
//! show (`UpdateTable`, guarded by the version read). Glue vends no credentials: the table's files
//! are reached with the same AWS credential chain that reaches Glue, from the environment (with
//! `AWS_ENDPOINT_URL` for a Glue other than AWS's own).

use aws_sdk_glue::config::http::HttpResponse;
use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{Table, TableInput};

use super::{CatalogError, CatalogName, CatalogTable, REQUEST_TIMEOUT, location_url};

pub(super) struct Glue {
    client: aws_sdk_glue::Client,
    endpoint: String,
}

impl Glue {
    pub(super) async fn from_environment() -> Glue {
        let timeouts =
            aws_config::timeout::TimeoutConfig::builder().operation_timeout(REQUEST_TIMEOUT).build();
        let config =
            aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(timeouts).load().await;
        let endpoint = match (config.endpoint_url(), config.region()) {
            (Some(endpoint), _) => endpoint.to_owned(),
            (None, Some(region)) => format!("AWS Glue in {region}"),
            (None, None) => "AWS Glue (no region set: AWS_REGION)".to_owned(),
        };
        Glue { client: aws_sdk_glue::Client::new(&config), endpoint }
    }

    pub(super) async fn resolve(&self, name: &CatalogName) -> Result<CatalogTable, CatalogError> {
        let table = self.table(name).await?;
        let refused = |problem: String| CatalogError::Refused { name: name.to_string(), problem };
        if table.table_type().is_some_and(|t| t.eq_ignore_ascii_case("VIRTUAL_VIEW")) {
            return Err(refused(
                "AWS Glue says it is a view, not a table: a backfill writes the Delta table the view reads; name \
                 that table"
                    .into(),
            ));
        }
        if let Some(format) = not_delta(&table) {
            return Err(refused(format!(
                "AWS Glue says it is a {format} table, not a Delta table: bf backfills Delta tables only"
            )));
        }
        let Some(location) = location(&table) else {
            return Err(refused("AWS Glue gives no storage location for it: bf needs one to open it".into()));
        };
        // Glue has no table id: the creation time tells a table dropped and created again apart.
        let Some(created) = table.create_time() else {
            return Err(refused("AWS Glue gives no creation time for it: bf needs one to pin it".into()));
        };
        let id = created
            .fmt(aws_sdk_glue::primitives::DateTimeFormat::DateTime)
            .unwrap_or_else(|_| created.as_nanos().to_string());
        let url = location_url(name, &location)?;
        Ok(CatalogTable { name: name.to_string(), location: url.to_string(), id })
    }

    /// Glue replaces a table's definition whole: the one read, with the new description, sent back
    /// with the version read, so a change made meanwhile is not overwritten.
    pub(super) async fn set_comment(&self, name: &CatalogName, comment: &str) -> Result<(), CatalogError> {
        let CatalogName::Glue { database, .. } = name else { unreachable!("a Glue name") };
        let table = self.table(name).await?;
        let input = TableInput::builder()
            .name(table.name())
            .description(comment)
            .set_owner(table.owner.clone())
            .set_last_access_time(table.last_access_time)
            .set_last_analyzed_time(table.last_analyzed_time)
            .retention(table.retention)
            .set_storage_descriptor(table.storage_descriptor.clone())
            .set_partition_keys(table.partition_keys.clone())
            .set_view_original_text(table.view_original_text.clone())
            .set_view_expanded_text(table.view_expanded_text.clone())
            .set_table_type(table.table_type.clone())
            .set_parameters(table.parameters.clone())
            .set_target_table(table.target_table.clone())
            .build()
            .map_err(|e| CatalogError::Refused { name: name.to_string(), problem: e.to_string() })?;
        self.client
            .update_table()
            .database_name(database)
            .table_input(input)
            .set_version_id(table.version_id.clone())
            .send()
            .await
            .map_err(|e| self.error(name, e))?;
        Ok(())
    }

    async fn table(&self, name: &CatalogName) -> Result<Table, CatalogError> {
        let CatalogName::Glue { database, table } = name else { unreachable!("a Glue name") };
        let answer = self
            .client
            .get_table()
            .database_name(database)
            .name(table)
            .send()
            .await
            .map_err(|e| self.error(name, e))?;
        answer.table.ok_or_else(|| CatalogError::Refused {
            name: name.to_string(),
            problem: "AWS Glue answered without the table".into(),
        })
    }

    fn error<E>(&self, name: &CatalogName, error: SdkError<E, HttpResponse>) -> CatalogError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let refused = |problem: String| CatalogError::Refused { name: name.to_string(), problem };
        let Some(service) = error.as_service_error() else {
            return CatalogError::Unreachable {
                name: name.to_string(),
                catalog: "AWS Glue",
                endpoint: self.endpoint.clone(),
                problem: aws_sdk_glue::error::DisplayErrorContext(&error).to_string(),
            };
        };
        let status = error.raw_response().map(|r| r.status().as_u16());
        let said = format!(
            "AWS Glue answered {}{}",
            service.code().map_or_else(|| format!("HTTP {}", status.unwrap_or_default()), str::to_owned),
            service.message().map(|m| format!(": {}", m.trim_end_matches('.'))).unwrap_or_default()
        );
        match service.code() {
            Some("EntityNotFoundException") => {
                refused(format!("{said}. Check the database and table names (`glue://database.table`)"))
            }
            // Credentials AWS does not accept (an unknown key, an expired token) or that may not
            // use the table.
            code if code == Some("AccessDeniedException") || matches!(status, Some(401 | 403)) => {
                refused(format!(
                    "{said}. The AWS credentials in the environment are not accepted, or may not use this table: \
                     they need glue:GetTable (and glue:UpdateTable to set its description)"
                ))
            }
            Some("ConcurrentModificationException") => {
                refused(format!("{said}. Someone changed the table meanwhile: run the command again"))
            }
            _ => refused(said),
        }
    }
}

/// The format of a table that is not Delta, as Glue records it; `None` for a Delta table. Delta
/// tables carry `table_type = DELTA` (delta-rs, Athena), `spark.sql.sources.provider = delta`
/// (Spark) or `classification = delta` (Glue's crawlers).
fn not_delta(table: &Table) -> Option<String> {
    const SAYING: [&str; 3] = ["table_type", "spark.sql.sources.provider", "classification"];
    let parameters = table.parameters();
    let said: Vec<String> = SAYING
        .iter()
        .filter_map(|key| parameters.and_then(|p| p.get(*key)).map(|v| v.to_ascii_lowercase()))
        .collect();
    if said.iter().any(|format| format == "delta") {
        return None;
    }
    Some(said.first().map(|f| f.to_uppercase()).unwrap_or_else(|| "non-Delta".into()))
}

/// Where the table's files are. Spark registers a Delta table with a placeholder location and the
/// real one as the SerDe's `path`.
fn location(table: &Table) -> Option<String> {
    let descriptor = table.storage_descriptor()?;
    let path = descriptor.serde_info().and_then(|s| s.parameters()).and_then(|p| p.get("path")).cloned();
    match descriptor.location() {
        Some(location) if !location.contains("__PLACEHOLDER__") => Some(location.to_owned()),
        _ => path,
    }
}
