//! The inputs that are files: a folder listed as DataFusion lists it (its files of the format's
//! extension, and those of `key=value` partition folders), and a file or folder registered under
//! the input's name in a slice's session.

use deltalake::datafusion::prelude::{CsvReadOptions, JsonReadOptions, ParquetReadOptions, SessionContext};
use url::Url;

use super::run::FolderListing;
use crate::delta::store::{StoreError, Stores};
use crate::plan_file::Format;

pub(super) async fn register(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    format: Format,
    extension: &str,
) -> Result<(), String> {
    let result = match format {
        Format::Csv => {
            ctx.register_csv(name, path, CsvReadOptions::new().has_header(true).file_extension(extension))
                .await
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
            ctx.register_json(name, path, JsonReadOptions { file_extension: extension, ..Default::default() })
                .await
        }
        Format::Delta => unreachable!("Delta inputs are registered at their pinned version"),
    };
    result.map_err(|e| e.to_string())
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
        files,
    };
    Ok((listing, sizes.iter().sum()))
}
