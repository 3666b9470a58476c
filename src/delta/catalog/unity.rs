//! Unity Catalog over its REST API: the table (`GET /tables/{full_name}`), credentials vended for
//! its folder (`POST /temporary-table-credentials`), and its comment (the Delta REST API's
//! `set-table-comment`). Answers are read tolerantly: Databricks and the open-source servers differ
//! in field spellings (`error_code` / `errorCode`) and in what they leave out.
//!
//! The workspace and token come from the environment as Databricks tools read them:
//! `DATABRICKS_HOST` (or `UNITY_WORKSPACE_URL`, `UNITY_HOST`) and `DATABRICKS_TOKEN` (or
//! `UNITY_ACCESS_TOKEN`). The token is sent to that host only and never shown.

use std::collections::HashMap;

use serde_json::{Value, json};
use url::Url;

use super::{CatalogError, CatalogName, CatalogTable, REQUEST_TIMEOUT, location_url};

const HOSTS: [&str; 3] = ["DATABRICKS_HOST", "UNITY_WORKSPACE_URL", "UNITY_HOST"];
const TOKENS: [&str; 2] = ["DATABRICKS_TOKEN", "UNITY_ACCESS_TOKEN"];

/// A Unity Catalog workspace, reached with the environment's token.
pub(super) struct Unity {
    /// `…/api/2.1/unity-catalog/`
    api: Url,
    token: Option<String>,
    client: reqwest::Client,
    name: String,
}

impl Unity {
    pub(super) fn from_environment(name: &CatalogName) -> Result<Unity, CatalogError> {
        let refused = |problem: String| CatalogError::Refused { name: name.to_string(), problem };
        let host = HOSTS.iter().find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()));
        let Some(host) = host else {
            return Err(refused(format!(
                "no Unity Catalog workspace is set: set {} to the workspace URL (e.g. \
                 https://dbc-1234.cloud.databricks.com) and {} to a token",
                HOSTS[0], TOKENS[0]
            )));
        };
        let host = if host.contains("://") { host } else { format!("https://{host}") };
        let mut api = Url::parse(&host).map_err(|e| refused(format!("{} is not a URL: {e}", HOSTS[0])))?;
        if !api.path().contains("/api/2.1/unity-catalog") {
            api = api.join("api/2.1/unity-catalog/").map_err(|e| refused(e.to_string()))?;
        } else if !api.path().ends_with('/') {
            api.set_path(&format!("{}/", api.path()));
        }
        let token = TOKENS.iter().find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()));
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| refused(format!("cannot make an HTTP client: {e}")))?;
        Ok(Unity { api, token, client, name: name.to_string() })
    }

    pub(super) async fn resolve(&self, name: &CatalogName) -> Result<CatalogTable, CatalogError> {
        let table = self.table(name).await?;
        let text = |key: &str| table.get(key).and_then(Value::as_str).map(str::to_owned);
        let kind = text("table_type").unwrap_or_default();
        if kind.eq_ignore_ascii_case("VIEW")
            || kind.eq_ignore_ascii_case("MATERIALIZED_VIEW")
            || kind.eq_ignore_ascii_case("METRIC_VIEW")
        {
            return Err(self.refused(format!(
                "Unity Catalog says it is a {kind}, not a table: a backfill writes the Delta table the view \
                 reads; name that table"
            )));
        }
        let format = text("data_source_format").unwrap_or_else(|| "DELTA".into());
        if !format.eq_ignore_ascii_case("DELTA") {
            return Err(self.refused(format!(
                "Unity Catalog says it is a {format} table, not a Delta table: bf backfills Delta tables only"
            )));
        }
        let (Some(location), Some(id)) = (text("storage_location"), text("table_id")) else {
            return Err(self.refused(
                "Unity Catalog gives no storage location or table id for it: bf needs both to open and pin it"
                    .into(),
            ));
        };
        let url = location_url(name, &location)?;
        crate::delta::store::lend(&url, self.credentials(&id).await?);
        Ok(CatalogTable { name: name.to_string(), location: url.to_string(), id })
    }

    /// The Delta REST API's `set-table-comment`, the one way to set a comment over REST (the
    /// classic API updates a table's owner only), asserting the table's id: a table created again
    /// under the name meanwhile is not the one commented.
    pub(super) async fn set_comment(&self, name: &CatalogName, comment: &str) -> Result<(), CatalogError> {
        let CatalogName::Unity { catalog, schema, table } = name else {
            unreachable!("a Unity Catalog name")
        };
        let id = self.table(name).await?.get("table_id").and_then(Value::as_str).map(str::to_owned);
        // Names are letters, digits, `_` and `-` (CatalogName::parse): safe in a path as they are.
        let path = format!("delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}");
        let body = json!({
            "requirements": id.map(|uuid| json!({ "type": "assert-table-uuid", "uuid": uuid })).into_iter().collect::<Vec<_>>(),
            "updates": [{ "action": "set-table-comment", "comment": comment }],
        });
        self.call(reqwest::Method::POST, &path, Some(body)).await.map(drop)
    }

    async fn table(&self, name: &CatalogName) -> Result<Value, CatalogError> {
        let CatalogName::Unity { catalog, schema, table } = name else {
            unreachable!("a Unity Catalog name")
        };
        self.call(reqwest::Method::GET, &format!("tables/{catalog}.{schema}.{table}"), None).await
    }

    /// Credentials for the table's folder, as the options deltalake's stores read: S3 and Azure. A
    /// local table gets none (the answer holds only its URL); for GCS the environment's are used.
    async fn credentials(&self, table_id: &str) -> Result<HashMap<String, String>, CatalogError> {
        let body = json!({ "table_id": table_id, "operation": "READ_WRITE" });
        let answer = self.call(reqwest::Method::POST, "temporary-table-credentials", Some(body)).await?;
        Ok(store_options(&answer))
    }

    /// One request; a refusal by the server becomes one line naming the name and the fix.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CatalogError> {
        let url = self.api.join(path).map_err(|e| self.refused(e.to_string()))?;
        let mut request = self.client.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let unreachable = |e: reqwest::Error| CatalogError::Unreachable {
            name: self.name.clone(),
            catalog: "Unity Catalog",
            endpoint: self.endpoint(),
            // Without the URL: it is the endpoint above, and a query could hold a token.
            problem: e.without_url().to_string(),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(unreachable)?;
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(answer);
        }
        // `{"error_code", "message"}` (Databricks), `{"errorCode", …}` (open-source servers), or the
        // Delta REST API's `{"error": {"type", "message"}}`.
        let error = answer.get("error").unwrap_or(&answer);
        let code =
            ["error_code", "errorCode", "type"].iter().find_map(|k| error.get(*k)).and_then(Value::as_str);
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
        let said = format!(
            "Unity Catalog answered {status}{}{}",
            code.map(|c| format!(" {c}")).unwrap_or_default(),
            if message.is_empty() {
                String::new()
            } else {
                format!(": {}", one_line(message).trim_end_matches('.'))
            }
        );
        Err(self.refused(match status.as_u16() {
            401 => format!(
                "{said}. The token in {} is not accepted: it is missing, expired, or for another workspace",
                TOKENS[0]
            ),
            403 => format!(
                "{said}. The token in {} may not use this table: it needs SELECT and MODIFY on it, and \
                 EXTERNAL USE SCHEMA on its schema for credentials to be vended",
                TOKENS[0]
            ),
            404 => format!("{said}. Check the catalog, schema and table names (`uc://catalog.schema.table`)"),
            _ => said,
        }))
    }

    fn refused(&self, problem: String) -> CatalogError {
        CatalogError::Refused { name: self.name.clone(), problem }
    }

    fn endpoint(&self) -> String {
        format!("{}://{}", self.api.scheme(), self.api.authority())
    }
}

/// A server's message on one line, cut short: it is shown, not parsed.
fn one_line(message: &str) -> String {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 300 {
        format!("{}…", line.chars().take(300).collect::<String>())
    } else {
        line
    }
}

/// A `temporary-table-credentials` answer as the options deltalake's stores read, in the shapes
/// Databricks documents: `aws_temp_credentials`, `azure_user_delegation_sas`.
fn store_options(answer: &Value) -> HashMap<String, String> {
    let pairs = [
        ("aws_temp_credentials", "access_key_id", "aws_access_key_id"),
        ("aws_temp_credentials", "secret_access_key", "aws_secret_access_key"),
        ("aws_temp_credentials", "session_token", "aws_session_token"),
        ("azure_user_delegation_sas", "sas_token", "azure_storage_sas_token"),
    ];
    pairs
        .iter()
        .filter_map(|(group, field, option)| {
            let value = answer.get(*group)?.get(*field)?.as_str()?;
            Some(((*option).to_owned(), value.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vended_credentials_become_the_stores_options_and_a_local_table_gets_none() {
        let aws = json!({
            "aws_temp_credentials": {"access_key_id": "AKIA1", "secret_access_key": "s3cr3t", "session_token": "tok"},
            "expiration_time": 1_796_000_000_000_u64,
            "url": "s3://lake/orders",
        });
        let options = store_options(&aws);
        assert_eq!(options["aws_access_key_id"], "AKIA1");
        assert_eq!(options["aws_secret_access_key"], "s3cr3t");
        assert_eq!(options["aws_session_token"], "tok");
        let azure = json!({"azure_user_delegation_sas": {"sas_token": "sv=2024&sig=x"}});
        assert_eq!(store_options(&azure)["azure_storage_sas_token"], "sv=2024&sig=x");
        assert!(store_options(&json!({"url": "file:///lake/orders"})).is_empty());
    }
}
