//! Catalog names: a table named the way Databricks and AWS users name it — `uc://main.sales.orders`
//! (Unity Catalog), `glue://sales.orders` (AWS Glue) — instead of by its storage path.
//!
//! A name is resolved before anything opens the table: the catalog says where the table lives, what
//! it is (a Delta table, not a view or a Parquet or Iceberg table) and its identity, and Unity
//! Catalog vends short-lived credentials for its folder, which are lent to the stores in memory
//! ([`crate::delta::store::lend`]) and never written. From there on bf works on the location, as
//! for a table named by path; the name travels beside it ([`CatalogTable`]) so that the saved plan
//! pins it, `bf apply` refuses a name that now resolves elsewhere, and the comment people read in
//! the catalog is set with the Delta description.
//!
//! bf resolves `uc://` itself (two REST calls, each with a timeout) rather than through deltalake's
//! `uc://` handler: that handler's response types do not parse the open-source servers' answers,
//! and opening through it could hang. Where the catalog is and who asks come from the environment
//! only, as Databricks and AWS tools read them; never from a plan.

mod glue;
mod unity;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::delta::store::{Location, OpenError, StoreError, table_url};

/// How long one request to a catalog may take before bf gives up on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A table's name in a catalog, as written in a plan or on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogName {
    /// `uc://catalog.schema.table`
    Unity { catalog: String, schema: String, table: String },
    /// `glue://database.table`
    Glue { database: String, table: String },
}

impl CatalogName {
    /// `written` as a catalog name: `None` when it is not one (a path or a store URL), an error when
    /// it starts like one but is not well-formed.
    pub fn parse(written: &str) -> Option<Result<CatalogName, String>> {
        let (scheme, rest) = written.split_once("://")?;
        let parts: Vec<&str> = rest.split('.').collect();
        let well_formed = |n: usize| parts.len() == n && parts.iter().all(|p| is_identifier(p));
        Some(match scheme {
            "uc" if well_formed(3) => Ok(CatalogName::Unity {
                catalog: parts[0].to_owned(),
                schema: parts[1].to_owned(),
                table: parts[2].to_owned(),
            }),
            "uc" => Err(format!(
                "`{written}` is not a Unity Catalog name: write `uc://catalog.schema.table`, three names of \
                 letters, digits, `_` or `-`"
            )),
            "glue" if well_formed(2) => {
                Ok(CatalogName::Glue { database: parts[0].to_owned(), table: parts[1].to_owned() })
            }
            "glue" => Err(format!(
                "`{written}` is not an AWS Glue name: write `glue://database.table`, two names of letters, \
                 digits, `_` or `-`"
            )),
            _ => return None,
        })
    }

    /// Which catalog, as a message names it.
    pub fn catalog(&self) -> &'static str {
        match self {
            CatalogName::Unity { .. } => "Unity Catalog",
            CatalogName::Glue { .. } => "AWS Glue",
        }
    }
}

impl std::fmt::Display for CatalogName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogName::Unity { catalog, schema, table } => write!(f, "uc://{catalog}.{schema}.{table}"),
            CatalogName::Glue { database, table } => write!(f, "glue://{database}.{table}"),
        }
    }
}

/// Catalog names are case-insensitive in both catalogs; bf keeps them as written and compares them
/// folded.
fn is_identifier(part: &str) -> bool {
    !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A table as its catalog said it was when bf resolved it: what a saved plan pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CatalogTable {
    /// The name as written (`uc://main.sales.orders`).
    pub name: String,
    /// Where the catalog said the table lives (a URL with a trailing slash).
    pub location: String,
    /// The catalog's identity of the table: Unity Catalog's table id; in Glue, which has none, the
    /// time the table was created. A table dropped and created again under the name has another.
    pub id: String,
}

impl CatalogTable {
    /// The name the record pins, parsed again (a saved plan holds it as text).
    pub fn catalog_name(&self) -> Option<CatalogName> {
        CatalogName::parse(&self.name)?.ok()
    }
}

/// A table name resolved to where the table lives.
#[derive(Debug, Clone)]
pub struct Located {
    pub url: Url,
    /// The catalog's record, when the table was named by its catalog name.
    pub catalog: Option<CatalogTable>,
}

/// Why a catalog name could not be used, in one line naming the name and the way out.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{name}: {problem}")]
    Refused { name: String, problem: String },
    #[error("{name}: {catalog} is not reachable at {endpoint}: {problem}")]
    Unreachable { name: String, catalog: &'static str, endpoint: String, problem: String },
}

impl From<CatalogError> for OpenError {
    fn from(error: CatalogError) -> OpenError {
        let (location, problem) = match error {
            CatalogError::Refused { name, problem } => (name, problem),
            CatalogError::Unreachable { name, catalog, endpoint, problem } => {
                (name, format!("{catalog} is not reachable at {endpoint}: {problem}"))
            }
        };
        OpenError::Store(StoreError { location, problem })
    }
}

/// Where the table `written` (relative to `dir`) lives: a path or a store URL as it is, a catalog
/// name as its catalog says — checked to be a Delta table, its credentials lent to the stores.
pub async fn locate(dir: &std::path::Path, written: &str) -> Result<Located, OpenError> {
    match CatalogName::parse(written) {
        None => Ok(Located { url: table_url(&Location::resolve(dir, written))?, catalog: None }),
        Some(Err(problem)) => Err(OpenError::Store(StoreError { location: written.to_owned(), problem })),
        Some(Ok(name)) => {
            let table = resolve(&name).await?;
            let url = Url::parse(&table.location).expect("a resolved location is a URL");
            Ok(Located { url, catalog: Some(table) })
        }
    }
}

/// Asks the catalog where `name` lives and lends the stores its credentials.
pub async fn resolve(name: &CatalogName) -> Result<CatalogTable, CatalogError> {
    match name {
        CatalogName::Unity { .. } => unity::Unity::from_environment(name)?.resolve(name).await,
        CatalogName::Glue { .. } => glue::Glue::from_environment().await.resolve(name).await,
    }
}

/// Sets the table's comment in its catalog, where people browsing the catalog read it.
pub async fn set_comment(name: &CatalogName, comment: &str) -> Result<(), CatalogError> {
    match name {
        CatalogName::Unity { .. } => unity::Unity::from_environment(name)?.set_comment(name, comment).await,
        CatalogName::Glue { .. } => glue::Glue::from_environment().await.set_comment(name, comment).await,
    }
}

/// `bf apply`'s check that a pinned name still means the table the plan was made against.
pub async fn check_pinned(pinned: &CatalogTable) -> Result<(), CatalogError> {
    let Some(name) = pinned.catalog_name() else {
        return Err(CatalogError::Refused {
            name: pinned.name.clone(),
            problem: "the saved plan's catalog name is not one; plan again".into(),
        });
    };
    let now = resolve(&name).await?;
    if now.location != pinned.location || now.id != pinned.id {
        return Err(CatalogError::Refused {
            name: pinned.name.clone(),
            problem: format!(
                "the name moved since the plan: it was the table at {} (id {}), it is now the table at {} \
                 (id {}). The plan was rehearsed against the other table: plan again",
                pinned.location, pinned.id, now.location, now.id
            ),
        });
    }
    Ok(())
}

/// The location a catalog gave, as a table URL (a trailing slash), checked to be a store bf reaches.
fn location_url(name: &CatalogName, location: &str) -> Result<Url, CatalogError> {
    let refused = |problem: String| CatalogError::Refused { name: name.to_string(), problem };
    let url = Url::parse(location).map_err(|e| {
        refused(format!("{} gives the location `{location}`, which is not a URL: {e}", name.catalog()))
    })?;
    if let Some(problem) = crate::delta::store::location_problem(url.as_str()) {
        return Err(refused(format!("{} gives the location {location}: {problem}", name.catalog())));
    }
    table_url(&Location::Uri(url)).map_err(|e| refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_strictly_and_paths_are_not_names() {
        assert_eq!(
            CatalogName::parse("uc://main.sales.orders_silver").unwrap().unwrap(),
            CatalogName::Unity {
                catalog: "main".into(),
                schema: "sales".into(),
                table: "orders_silver".into()
            }
        );
        assert_eq!(
            CatalogName::parse("glue://sales.orders").unwrap().unwrap().to_string(),
            "glue://sales.orders"
        );
        for bad in
            ["uc://main.sales", "uc://a.b.c.d", "uc://a..c", "glue://db", "glue://db.t/x", "uc://a.b.c d"]
        {
            assert!(CatalogName::parse(bad).unwrap().is_err(), "{bad} is refused");
        }
        for not_a_name in ["s3://bucket/orders", "../warehouse/orders", "file:///tmp/orders"] {
            assert!(CatalogName::parse(not_a_name).is_none(), "{not_a_name} is a location");
        }
    }
}
