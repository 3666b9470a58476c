//! A plan's `[source]`: where the corrected rows come from (its inputs and their formats), the
//! one read-only query over them, and the SQL dialect it, the metrics and the checks are written in.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dialect::Dialect;

/// Where the corrected rows come from: named inputs, and one read-only SQL query over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Files or tables registered under their name as tables for `query`, e.g.
    /// `inputs.orders = { path = "../landing/orders.csv", format = "csv" }`.
    pub inputs: BTreeMap<String, Input>,
    /// One read-only `SELECT` (in the `dialect`'s SQL) producing the table's columns for a slice. It
    /// may use the slice's bounds as typed DATE parameters `$start`, `$end` and `$run_date`, never as
    /// pasted text. Each row is written by the slice owning its day: rows a slice's query returns for
    /// another slice's days from files that slice's query does not read (late events in the next
    /// day's file) are written by that slice, and the plan says how many.
    #[schemars(length(min = 1))]
    pub query: String,
    /// The SQL the query, metrics, checks and `[diff] by` are written in: `"datafusion"` (the default,
    /// DataFusion's SQL) or `"spark"` (Spark SQL as Spark 4 and Databricks run it: parsed with
    /// Databricks' grammar, Spark's functions, `/` on integers a DOUBLE, arrays indexed from 0,
    /// date patterns Java's, ANSI mode on). What bf cannot make mean what Spark means is refused
    /// at `bf validate`, naming it.
    #[serde(default, skip_serializing_if = "Dialect::is_datafusion")]
    pub dialect: Dialect,
    /// An older spelling of `[guards] allow_rows_outside_window`: `"skip"` is `true`, `"refuse"` (the
    /// default) `false`. Read into the guard when the plan file is loaded.
    #[serde(default, skip_serializing_if = "OutsideRows::is_refuse")]
    pub outside_window: OutsideRows,
}

/// What source rows outside the window mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutsideRows {
    /// They fail the plan: nothing would write them.
    #[default]
    Refuse,
    /// They are counted and left out.
    Skip,
}

impl OutsideRows {
    fn is_refuse(&self) -> bool {
        *self == OutsideRows::Refuse
    }
}

/// One named input of the source query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// A file, folder or table, relative to this plan file unless it is a URI. May contain `{start}`,
    /// `{end}` and `{run_date}` (the slice's first day, last day and run date, as `YYYY-MM-DD`), and
    /// `{date}` when slices are one day long, so that each slice reads its own files. A Delta input
    /// may be named by its catalog name (`uc://catalog.schema.table`, `glue://database.table`).
    #[schemars(length(min = 1))]
    pub path: String,
    /// The input's format.
    pub format: Format,
    /// The ending of the files a folder input reads, e.g. `".jsonl"`; by default the format's:
    /// `.csv`, `.parquet`, and for JSON `.json`, `.jsonl` or `.ndjson`, whichever the folder holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// A CSV or JSON input's columns in the files' order, as SQL writes them (Spark's
    /// `DataFrameReader.schema` string), e.g. `"order_id BIGINT, code STRING, amount DECIMAL(10,2),
    /// ordered_at TIMESTAMP"`: every file is read with these types instead of those inferred from
    /// its first rows (where `00742` is the number 742).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

/// File formats an input can be read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Comma-separated values with a header row.
    Csv,
    /// Apache Parquet.
    Parquet,
    /// Newline-delimited JSON.
    Json,
    /// A Delta table (read at its latest version).
    Delta,
}
