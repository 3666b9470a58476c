//! The inputs that are files: a folder listed as DataFusion lists it (its files of the format's
//! extension, and those of `key=value` partition folders), and an input — a file, a folder or a
//! Delta table — registered under its name in a slice's session (and its cluster session).

use std::sync::Arc;

use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::prelude::{CsvReadOptions, JsonReadOptions, ParquetReadOptions, SessionContext};
use url::Url;

use super::run::FolderListing;
use crate::delta::store::{StoreError, Stores};
use crate::plan_file::Format;

/// A Delta input at the version the plan reads.
pub(super) struct PinnedDelta {
    /// The table as bf's session reads it.
    pub provider: Arc<dyn TableProvider>,
    /// Where it is, and at which version: what a cluster opens it by.
    pub url: Url,
    pub version: u64,
    /// Its live files at that version, by path, with their sizes.
    pub files: Vec<(String, u64)>,
}

/// An input to register in a slice's session once its size is known.
pub(super) enum Registration {
    Delta(PinnedDelta),
    /// The files a pattern matched, each read at its URL.
    Listed {
        urls: Vec<Url>,
        format: Format,
        schema: Option<SchemaRef>,
    },
    /// Files, read at their absolute `url`, here and on a cluster, with the plan's columns when
    /// it says them.
    Files {
        url: String,
        format: Format,
        extension: String,
        schema: Option<SchemaRef>,
    },
}

impl Registration {
    /// Registers the input as `name` in `here`, bf's session, and in `there`, the cluster's, when
    /// the query runs on one: every node reads files by their absolute URL, and opens a Delta
    /// input itself at the same version.
    pub(super) async fn register(
        self,
        name: &str,
        here: &SessionContext,
        there: Option<&SessionContext>,
    ) -> Result<(), String> {
        match self {
            Registration::Delta(pinned) => {
                let schema = pinned.provider.schema();
                here.register_table(name, pinned.provider).map_err(|e| e.to_string())?;
                let Some(there) = there else { return Ok(()) };
                let provider = crate::cluster::delta_input(pinned.url, pinned.version, pinned.files, schema)
                    .map_err(|e| e.to_string())?;
                there.register_table(name, provider).map(drop).map_err(|e| e.to_string())
            }
            Registration::Listed { urls, format, schema } => {
                for session in std::iter::once(here).chain(there) {
                    let table = listed_table(session, &urls, format, schema.clone()).await?;
                    session.register_table(name, table).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            Registration::Files { url, format, extension, schema } => {
                register(here, name, &url, format, &extension, schema.as_deref()).await?;
                match there {
                    Some(there) => register(there, name, &url, format, &extension, schema.as_deref()).await,
                    None => Ok(()),
                }
            }
        }
    }
}

async fn register(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    format: Format,
    extension: &str,
    schema: Option<&Schema>,
) -> Result<(), String> {
    let result = match format {
        Format::Csv => {
            let options = CsvReadOptions::new().has_header(true).file_extension(extension);
            let options = match schema {
                Some(schema) => options.schema(schema),
                None => options,
            };
            ctx.register_csv(name, path, options).await
        }
        Format::Parquet => {
            ctx.register_parquet(
                name,
                path,
                ParquetReadOptions { file_extension: extension, ..Default::default() },
            )
            .await
        }
        Format::Json => {
            let options = JsonReadOptions { file_extension: extension, schema, ..Default::default() };
            ctx.register_json(name, path, options).await
        }
        Format::Delta => unreachable!("Delta inputs are registered at their pinned version"),
    };
    result.map_err(|e| e.to_string())
}

/// A table of exactly the files `urls`, read as `format` (with `schema`, or the one the first
/// file's rows make).
async fn listed_table(
    ctx: &SessionContext,
    urls: &[Url],
    format: Format,
    schema: Option<SchemaRef>,
) -> Result<Arc<dyn TableProvider>, String> {
    use deltalake::datafusion::datasource::file_format::options::ReadOptions;
    use deltalake::datafusion::datasource::listing::{ListingTable, ListingTableConfig, ListingTableUrl};
    let (config, table_options) = (ctx.copied_config(), ctx.copied_table_options());
    // Any file name: the pattern chose them.
    let options = match format {
        Format::Csv => CsvReadOptions::new()
            .has_header(true)
            .file_extension("")
            .to_listing_options(&config, table_options),
        Format::Json => JsonReadOptions { file_extension: "", ..Default::default() }
            .to_listing_options(&config, table_options),
        Format::Parquet => ParquetReadOptions { file_extension: "", ..Default::default() }
            .to_listing_options(&config, table_options),
        Format::Delta => return Err("a Delta input is a table, never a pattern of files".into()),
    };
    let paths = urls.iter().map(|u| ListingTableUrl::parse(u.as_str())).collect::<Result<Vec<_>, _>>();
    let listing = ListingTableConfig::new_with_multi_paths(paths.map_err(|e| e.to_string())?)
        .with_listing_options(options);
    let listing = match schema {
        Some(schema) => listing.with_schema(schema),
        None => listing.infer_schema(&ctx.state()).await.map_err(|e| e.to_string())?,
    };
    Ok(Arc::new(ListingTable::try_new(listing).map_err(|e| e.to_string())?))
}

/// The extension of the files a folder input of `format` is read by.
pub(super) fn format_extension(format: Format) -> &'static str {
    match format {
        Format::Csv => ".csv",
        Format::Parquet => ".parquet",
        Format::Json => ".json",
        Format::Delta => "",
    }
}

/// The files a folder input reads, with the extension they end in: the plan's `extension`, or the
/// format's — for JSON the first of `.json`, `.jsonl` and `.ndjson` the folder holds (exports
/// write all three). None found is an error naming what was looked for.
pub(super) async fn folder_files(
    stores: &Stores,
    name: &str,
    folder: &Url,
    input: &crate::plan_file::Input,
) -> Result<(String, FolderListing, u64), String> {
    let candidates: Vec<String> = match (&input.extension, input.format) {
        (Some(extension), _) => vec![extension.clone()],
        (None, Format::Json) => [".json", ".jsonl", ".ndjson"].map(str::to_owned).to_vec(),
        (None, format) => vec![format_extension(format).to_owned()],
    };
    for extension in &candidates {
        let (listing, size) = listed(stores, name, folder, extension).await.map_err(|e| e.problem)?;
        if !listing.files.is_empty() {
            return Ok((extension.clone(), listing, size));
        }
    }
    Err(format!(
        "the folder holds no file ending in {} (nor in a `key=value` folder in it); set the input's `extension` to \
         read files of another ending",
        candidates.join(", ")
    ))
}

/// The files under a folder with the extension the query reads, sorted, relative to the folder: its
/// own files and those of `key=value` partition folders, as DataFusion lists a folder (it skips
/// other sub-folders, `listing_table_ignore_subdirectory`). A listing by prefix: nothing is read.
pub(super) async fn listing(
    stores: &Stores,
    input: &str,
    folder: &Url,
    extension: &str,
) -> Result<FolderListing, StoreError> {
    Ok(listed(stores, input, folder, extension).await?.0)
}

/// [`listing`], and the bytes of the files listed.
pub(super) async fn listed(
    stores: &Stores,
    input: &str,
    folder: &Url,
    extension: &str,
) -> Result<(FolderListing, u64), StoreError> {
    let (files, sizes): (Vec<String>, Vec<u64>) = stores
        .list(folder)
        .await?
        .into_iter()
        .filter(|(relative, _)| {
            let mut parts: Vec<&str> = relative.split('/').collect();
            let file = parts.pop().unwrap_or_default();
            file.ends_with(extension) && parts.iter().all(|p| p.contains('='))
        })
        .map(|(relative, meta)| (relative, meta.size))
        .unzip();
    let listing = FolderListing {
        input: input.to_owned(),
        location: folder.to_string(),
        extension: extension.to_owned(),
        pattern: None,
        files,
    };
    Ok((listing, sizes.iter().sum()))
}
