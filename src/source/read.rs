//! What a plan read, as the saved plan records it so `bf apply` can tell whether it changed: each
//! input file, each folder's listing (or a pattern's matches), and each Delta input's version.

use serde::{Deserialize, Serialize};
use url::Url;

use crate::delta::store::{self, Location, StoreError, Stores};
use crate::source::files::listing;

/// One file an input read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    pub input: String,
    pub url: Url,
}

/// A folder an input read, and the files the query reads in it (sorted, relative to the folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FolderListing {
    pub input: String,
    /// The folder's URL (`file://` for a local one). Plans saved before object stores held its
    /// path instead, relative to where bf ran.
    #[serde(alias = "path")]
    pub location: String,
    /// The extension of the files the query reads there.
    pub extension: String,
    /// For an input named by a pattern (`landing/**/*.jsonl`), the pattern the files' paths under
    /// the folder match, in place of an extension ([`crate::source::pattern`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    pub files: Vec<String>,
}

impl FolderListing {
    /// The folder's listing now, as the query would see it.
    pub async fn now(&self, stores: &Stores) -> Result<FolderListing, StoreError> {
        let url = match store::uri(&self.location) {
            Some(url) => url,
            None => Location::Path(self.location.clone().into())
                .url()
                .map_err(|e| StoreError { location: self.location.clone(), problem: e.to_string() })?,
        };
        match &self.pattern {
            Some(pattern) => {
                Ok(crate::source::pattern::matching(stores, &self.input, &url, pattern).await?.0)
            }
            None => listing(stores, &self.input, &url, &self.extension).await,
        }
    }
}

/// A Delta table an input read, and the version it read: every slice, in the rehearsal and in the
/// apply, reads that version, so commits to the input after `bf plan` change nothing bf writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeltaInput {
    pub input: String,
    pub uri: String,
    pub version: u64,
    /// The input's table id, and the sha256 of `version`'s commit, when the plan read it: the same
    /// number in a table made again, or a log rewound, is other rows (`delta::same_table`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_sha256: Option<String>,
    /// In a downstream plan: the upstream table the input names, which it reads the rehearsal of
    /// (`uri`) instead — the upstream as its backfill will leave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stands_for: Option<String>,
    /// The catalog's record of the input, when the plan names it by its catalog name: `bf apply`
    /// asks the catalog again and finds the input stale when the name has moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<crate::delta::catalog::CatalogTable>,
}

impl DeltaInput {
    /// Whether this is what an input naming the table at `url` reads.
    pub(super) fn serves(&self, url: &Url) -> bool {
        self.uri == url.as_str() || self.stands_for.as_deref() == Some(url.as_str())
    }
}
