//! The errors the store layer returns: a location that does not open, a store operation that
//! failed. Types only, so every file of `store/` can name them without depending on another; the
//! words that explain a store's error are in `explain`.

use deltalake::DeltaTableError;

/// Why a table or a file is not where a plan says, or cannot be opened there.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{location}: no such folder")]
    Missing { location: String },
    #[error("{location} is a file; a Delta table is a folder holding _delta_log/")]
    NotAFolder { location: String },
    #[error("{location} is not a Delta table (it has no _delta_log with commits)")]
    NotATable { location: String },
    #[error(
        "{location} is a catalog-managed table (`catalogManaged`, called `catalogOwned-preview` before \
         Delta 4.0.1): its commits go through its catalog (Unity Catalog ratifies each one), and \
         deltalake, which bf writes with, neither reads nor commits to such a table. Nothing was \
         written; backfill it with an engine that commits through the catalog (Databricks)"
    )]
    CatalogManaged { location: String },
    #[error("cannot open the Delta table {location}: {source}")]
    Open { location: String, source: Box<DeltaTableError> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A store operation that failed, in one line that names the location and the likely fix.
#[derive(Debug, thiserror::Error)]
#[error("{location}: {problem}")]
pub struct StoreError {
    pub location: String,
    pub problem: String,
}
