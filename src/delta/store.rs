//! Where tables and files live, and how bf reaches them: local folders, S3, Azure and GCS.
//!
//! This is the one place that knows about stores. It turns what a plan writes into a [`Location`],
//! knows the URL schemes, merges the plan's `[storage]` settings with the environment into the
//! options deltalake's stores read, opens tables, and does the few store operations bf needs beyond
//! deltalake's own: HEAD, list by prefix, the store's server-side copy, and removing a rehearsal's
//! prefix. Nothing else parses a URL scheme or builds store options; a local path is the `file` store.
//!
//! Credentials are never handled here: deltalake's builders find them where each cloud keeps them
//! (the environment, the AWS profile chain, the Azure CLI, Google's ADC), and bf only passes the
//! non-secret settings a plan may hold.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Once;

use deltalake::logstore::{ObjectStoreRef, StorageConfig};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path as Key;
use path_clean::PathClean;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

/// The kinds of store bf reaches, each with the URL schemes that name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Local,
    S3,
    Azure,
    Gcs,
}

/// The URL schemes bf opens, as deltalake's store handlers register them.
pub const SCHEMES: [(&str, Kind); 9] = [
    ("file", Kind::Local),
    ("s3", Kind::S3),
    ("s3a", Kind::S3),
    ("az", Kind::Azure),
    ("abfs", Kind::Azure),
    ("abfss", Kind::Azure),
    ("azure", Kind::Azure),
    ("adl", Kind::Azure),
    ("gs", Kind::Gcs),
];

impl Kind {
    pub fn of(url: &Url) -> Option<Kind> {
        SCHEMES.iter().find(|(scheme, _)| *scheme == url.scheme()).map(|(_, kind)| *kind)
    }

    /// The schemes, as a message lists them.
    pub fn schemes() -> String {
        SCHEMES.iter().map(|(s, _)| format!("`{s}://`")).collect::<Vec<_>>().join(", ")
    }
}

/// Where a path written in a plan points: plan paths are relative to the plan file's folder, so a
/// plan means the same thing whichever directory bf is run from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Path(PathBuf),
    Uri(Url),
}

impl Location {
    pub fn resolve(plan_dir: &Path, written: &str) -> Location {
        match uri(written) {
            Some(url) => Location::Uri(url),
            // Lexically cleaned (`plans/../warehouse` → `warehouse`) so messages show the path a person
            // would type; the folder may not exist yet, so it cannot be canonicalized.
            _ => Location::Path(plan_dir.join(written).clean()),
        }
    }

    /// The location as a URL: a local path becomes a `file://` URL of its absolute path.
    pub fn url(&self) -> Result<Url, OpenError> {
        match self {
            Location::Uri(url) => Ok(url.clone()),
            Location::Path(path) => file_url(path),
        }
    }
}

/// `written` as a URI, if it is one: a one-letter scheme is a Windows drive (`C:\data`), not a URI.
pub fn uri(written: &str) -> Option<Url> {
    Url::parse(written).ok().filter(|url| url.scheme().len() > 1)
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Path(path) => path.display().fmt(f),
            Location::Uri(url) => url.fmt(f),
        }
    }
}

/// Why a location written in a plan cannot be used, before anything is opened.
pub fn location_problem(written: &str) -> Option<String> {
    let url = uri(written)?;
    if Kind::of(&url).is_none() {
        return Some(format!(
            "`{}://` locations are not supported; bf reads and writes local paths and {}",
            url.scheme(),
            Kind::schemes()
        ));
    }
    // A store reads no query, so one can only be a signature or a token (a SAS, a presigned URL).
    if url.password().is_some() || url.query().is_some() {
        return Some(
            "the location holds a credential (a password or a query); a plan is reviewed and saved, so \
             credentials come from the environment or the cloud's credential chain"
                .to_owned(),
        );
    }
    None
}

/// The URL of a table location: folders get a trailing slash, which deltalake needs to join paths.
pub fn table_url(location: &Location) -> Result<Url, OpenError> {
    match location {
        Location::Uri(url) => {
            let mut url = url.clone();
            if !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            Ok(url)
        }
        Location::Path(path) => folder_url(path),
    }
}

/// The URL of a local folder that may not exist yet (a rehearsal about to be created).
pub fn folder_url(path: &Path) -> Result<Url, OpenError> {
    let absolute = absolute(path)?;
    if absolute.is_file() {
        return Err(OpenError::NotAFolder { location: path.display().to_string() });
    }
    Url::from_directory_path(&absolute)
        .map_err(|()| OpenError::Missing { location: path.display().to_string() })
}

/// The URL of a local file or folder, without a trailing slash.
fn file_url(path: &Path) -> Result<Url, OpenError> {
    Url::from_file_path(absolute(path)?)
        .map_err(|()| OpenError::Missing { location: path.display().to_string() })
}

/// `path` made absolute through its nearest existing parent, so its URL is stable.
fn absolute(path: &Path) -> Result<PathBuf, OpenError> {
    let missing = || OpenError::Missing { location: path.display().to_string() };
    match path.canonicalize() {
        Ok(absolute) => Ok(absolute),
        Err(_) => {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            Ok(parent.canonicalize().map_err(|_| missing())?.join(path.file_name().ok_or_else(missing)?))
        }
    }
}

/// A URL as people read it: a local path for `file://`, the URL otherwise.
pub fn display_url(url: &Url) -> String {
    match url.to_file_path() {
        Ok(path) if url.scheme() == "file" => path.display().to_string().trim_end_matches('/').to_owned(),
        _ => url.to_string(),
    }
}

/// The local path of a `file://` URL.
pub fn local_path(url: &Url) -> Option<PathBuf> {
    url.to_file_path().ok().filter(|_| url.scheme() == "file")
}

/// A file inside a folder URL, its path segments percent-encoded as a URL needs.
pub fn join(folder: &Url, relative: &str) -> Url {
    let mut url = folder.clone();
    url.path_segments_mut().expect("a store URL has a path").pop_if_empty().extend(relative.split('/'));
    url
}

/// Whether one of two folder URLs is the other or inside it, however the store is spelt
/// (`s3://` and `s3a://` are one store).
pub fn nested(a: &Url, b: &Url) -> bool {
    let place = |url: &Url| {
        let segments: Vec<String> = url
            .path_segments()
            .map(|s| {
                s.filter(|s| !s.is_empty())
                    .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        (Kind::of(url), url.username().to_owned(), url.host_str().map(str::to_owned), segments)
    };
    let ((kind_a, user_a, host_a, path_a), (kind_b, user_b, host_b, path_b)) = (place(a), place(b));
    kind_a == kind_b
        && user_a == user_b
        && host_a == host_b
        && (path_a.starts_with(&path_b) || path_b.starts_with(&path_a))
}

/// A file's location as DataFusion's listing reads it, from the decoded form the Delta log holds
/// (`s3://b/t/d=a b/x.parquet`): a local path, or a URL whose path is encoded once, so a `%`, `?`
/// or `#` in a name stays part of the name.
pub fn listing_location(decoded: &str) -> String {
    let Some((scheme, rest)) = decoded.split_once("://") else { return decoded.to_owned() };
    if scheme == "file" {
        return rest.to_owned();
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    match Url::parse(&format!("{scheme}://{authority}/")) {
        Ok(root) => join(&root, path).to_string(),
        Err(_) => decoded.to_owned(),
    }
}

/// Files up to this size are copied across stores in one request; bigger ones in parts.
const ONE_REQUEST: u64 = 64 << 20;

/// How commits to a table are kept from overwriting each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commits {
    /// The store creates an object only if it is absent (local files, Azure, GCS).
    Atomic,
    /// S3 with `If-None-Match` honoured, as the plan or the environment says.
    ConditionalPut,
    /// S3 not said to honour it, which the plan declares safe: nothing else writes the table.
    SingleWriter,
    /// S3 not said to honour it: two writers of the same version could both succeed.
    Unsafe,
    /// S3 with conditional put disabled: deltalake's commits need it, so none can be made.
    Impossible,
}

/// A local file's size and the sha256 of its bytes, read 64 KiB at a time.
pub fn sha256_file(path: &Path) -> std::io::Result<(u64, String)> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0; 1 << 16];
    loop {
        let read = std::io::Read::read(&mut file, &mut buffer)?;
        if read == 0 {
            break;
        }
        size += read as u64;
        hasher.update(&buffer[..read]);
    }
    Ok((size, hex::encode(hasher.finalize())))
}

/// Why a table or a file is not where a plan says, or cannot be opened there.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{location}: no such folder")]
    Missing { location: String },
    #[error("{location} is a file; a Delta table is a folder holding _delta_log/")]
    NotAFolder { location: String },
    #[error("{location} is not a Delta table (it has no _delta_log with commits)")]
    NotATable { location: String },
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

/// The plan's `[storage]` settings over the environment: what opens tables and files.
#[derive(Debug, Clone, Default)]
pub struct Stores {
    settings: Storage,
}

impl Stores {
    pub fn new(settings: &Storage) -> Stores {
        register_handlers();
        Stores { settings: settings.clone() }
    }

    /// The environment alone, for commands that have no plan (`bf history s3://…`).
    pub fn from_environment() -> Stores {
        Stores::new(&Storage::default())
    }

    /// The settings under the names `url`'s store reads. deltalake's builders read the environment
    /// themselves and let these win over it.
    pub fn options(&self, url: &Url) -> HashMap<String, String> {
        let s = &self.settings;
        let text = |v: &Option<String>| v.clone();
        let flag = |v: &Option<bool>| v.map(|b| b.to_string());
        let env = |name: &str| std::env::var(name).ok();
        let pairs: Vec<(&str, Option<String>)> = match Kind::of(url) {
            Some(Kind::S3) => vec![
                ("aws_region", text(&s.region)),
                ("aws_endpoint", text(&s.endpoint)),
                ("aws_allow_http", flag(&s.allow_http)),
                ("aws_virtual_hosted_style_request", flag(&s.virtual_hosted_style_request)),
                ("aws_skip_signature", flag(&s.skip_signature)),
                (
                    "aws_conditional_put",
                    s.conditional_put.map(|c| match c {
                        ConditionalPut::Etag => "etag".to_owned(),
                        ConditionalPut::Disabled => "disabled".to_owned(),
                    }),
                ),
            ],
            Some(Kind::Azure) => vec![
                ("azure_storage_account_name", text(&s.account_name)),
                ("azure_storage_endpoint", text(&s.endpoint)),
                ("azure_storage_use_emulator", flag(&s.use_emulator)),
                ("azure_allow_http", flag(&s.allow_http)),
                ("azure_skip_signature", flag(&s.skip_signature)),
            ],
            // deltalake's GCS store reads only credentials from the environment; bf reads the
            // rest, so that the environment alone reaches GCS as it reaches S3 and Azure.
            Some(Kind::Gcs) => vec![
                ("google_base_url", text(&s.endpoint).or_else(|| env("GOOGLE_BASE_URL"))),
                ("google_allow_http", flag(&s.allow_http).or_else(|| env("GOOGLE_ALLOW_HTTP"))),
                ("google_skip_signature", flag(&s.skip_signature).or_else(|| env("GOOGLE_SKIP_SIGNATURE"))),
            ],
            Some(Kind::Local) | None => vec![],
        };
        let retries = [
            ("max_retries", s.max_retries.map(|n| n.to_string())),
            ("retry_timeout", s.retry_timeout.clone()),
        ];
        pairs.into_iter().chain(retries).filter_map(|(k, v)| Some((k.to_owned(), v?))).collect()
    }

    /// A builder for the table at `url`, with the store options.
    pub fn builder(&self, url: &Url) -> Result<DeltaTableBuilder, DeltaTableError> {
        Ok(DeltaTableBuilder::from_url(url.clone())?.with_storage_options(self.options(url)))
    }

    /// Opens an existing Delta table at its latest version, or at `version`.
    pub async fn open(&self, url: &Url, version: Option<u64>) -> Result<DeltaTable, OpenError> {
        let location = display_url(url);
        if url.scheme() == "file" && !url.to_file_path().is_ok_and(|p| p.is_dir()) {
            return Err(OpenError::Missing { location });
        }
        let open_error = |source| match source {
            DeltaTableError::NotATable(_) => OpenError::NotATable { location: location.clone() },
            source => match explain(url, &source) {
                Some(problem) => OpenError::Store(StoreError { location: location.clone(), problem }),
                None => OpenError::Open { location: location.clone(), source: Box::new(source) },
            },
        };
        let mut builder = self.builder(url).map_err(open_error)?;
        if let Some(version) = version {
            builder = builder.with_version(version as _);
        }
        builder.load().await.map_err(open_error)
    }

    /// The store holding `url`, rooted at its bucket (or the filesystem root), and `url`'s key in it.
    pub fn object_store(&self, url: &Url) -> Result<(ObjectStoreRef, Key), StoreError> {
        // deltalake's own factory for the scheme, undecorated: `store_for` would root the store at
        // the URL's path, and bf moves files between paths of one bucket.
        let scheme = Url::parse(&format!("{}://", url.scheme())).map_err(|e| self.error(url, &e))?;
        let factory = deltalake::logstore::object_store_factories().get(&scheme).map(|f| f.value().clone());
        let Some(factory) = factory else {
            return Err(StoreError {
                location: display_url(url),
                problem: format!(
                    "`{}://` is not a store bf reaches; it reaches {}",
                    url.scheme(),
                    Kind::schemes()
                ),
            });
        };
        let config = StorageConfig::parse_options(self.options(url)).map_err(|e| self.error(url, &e))?;
        factory.parse_url_opts(url, &config).map_err(|e| self.error(url, &e))
    }

    /// Lets a DataFusion session read files at `url` (local files it reads already).
    pub fn register(
        &self,
        ctx: &deltalake::datafusion::prelude::SessionContext,
        url: &Url,
    ) -> Result<(), StoreError> {
        if url.scheme() == "file" {
            return Ok(());
        }
        let (store, _) = self.object_store(url)?;
        let root = Url::parse(&format!("{}://{}", url.scheme(), url.authority())).expect("a store URL");
        ctx.register_object_store(&root, store);
        Ok(())
    }

    /// What is at `url`: a file (with its size and ETag), a folder (a prefix holding files), or nothing.
    pub async fn find(&self, url: &Url) -> Result<Found, StoreError> {
        if local_path(url).is_some_and(|p| p.is_dir()) {
            return Ok(Found::Folder);
        }
        let (store, key) = self.object_store(url)?;
        match store.head(&key).await {
            Ok(meta) => return Ok(Found::File(meta)),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.error(url, &e)),
        }
        let first = store.list(Some(&key)).next().await;
        match first {
            None => Ok(Found::Nothing),
            Some(Ok(_)) => Ok(Found::Folder),
            Some(Err(object_store::Error::NotFound { .. })) => Ok(Found::Nothing),
            Some(Err(e)) => Err(self.error(url, &e)),
        }
    }

    /// Whether a file is at `url`. Only an answer counts: a denied or failed HEAD is an error.
    pub async fn exists(&self, url: &Url) -> Result<bool, StoreError> {
        let (store, key) = self.object_store(url)?;
        match store.head(&key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.error(url, &e)),
        }
    }

    /// Every file under the folder `url`, by its path relative to the folder, without reading any.
    pub async fn list(&self, folder: &Url) -> Result<Vec<(String, object_store::ObjectMeta)>, StoreError> {
        let (store, key) = self.object_store(folder)?;
        let prefix = key.as_ref().to_owned();
        let listed: Vec<_> = match store.list(Some(&key)).try_collect().await {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(self.error(folder, &e)),
        };
        let mut files: Vec<_> = listed
            .into_iter()
            .filter_map(|meta| {
                let relative =
                    meta.location.as_ref().strip_prefix(&prefix)?.trim_start_matches('/').to_owned();
                Some((relative, meta))
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    /// Copies a file: by the store's own copy when both are in one bucket (no byte passes through
    /// this machine), else streamed from one store to the other. Returns the bytes copied and
    /// whether the store copied them itself.
    pub async fn copy(&self, from: &Url, to: &Url) -> Result<(u64, bool), StoreError> {
        if let (Some(source), Some(destination)) = (local_path(from), local_path(to)) {
            // The filesystem's own copy: object_store's local copy links, which fails across mounts.
            let io = |e: std::io::Error| StoreError { location: display_url(to), problem: e.to_string() };
            if let Some(parent) = destination.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            return Ok((std::fs::copy(&source, &destination).map_err(io)?, true));
        }
        let (source, from_key) = self.object_store(from)?;
        let (destination, to_key) = self.object_store(to)?;
        let size = source.head(&from_key).await.map_err(|e| self.error(from, &e))?.size;
        if from.scheme() == to.scheme() && from.authority() == to.authority() {
            source.copy(&from_key, &to_key).await.map_err(|e| self.error(to, &e))?;
            return Ok((size, true));
        }
        let read = source.get(&from_key).await.map_err(|e| self.error(from, &e))?;
        if size <= ONE_REQUEST {
            let bytes = read.bytes().await.map_err(|e| self.error(from, &e))?;
            destination.put(&to_key, bytes.into()).await.map_err(|e| self.error(to, &e))?;
            return Ok((size, false));
        }
        // Streamed in parts, so a big file never sits in memory whole.
        let mut upload = object_store::WriteMultipart::new(
            destination.put_multipart(&to_key).await.map_err(|e| self.error(to, &e))?,
        );
        let mut chunks = read.into_stream();
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(chunk) => upload.write(&chunk),
                Err(e) => {
                    // The parts uploaded so far would be billed and invisible until aborted.
                    let _ = upload.abort().await;
                    return Err(self.error(from, &e));
                }
            }
        }
        upload.finish().await.map_err(|e| self.error(to, &e))?;
        Ok((size, false))
    }

    /// Puts the file at `from` at `to` as well, unless a file is there already, which it never
    /// replaces, moves or removes: the caller checks that one's bytes. A placed file is never seen
    /// under its final name half-written, and is fresh (a VACUUM running beside the apply judges
    /// files nothing references by their age).
    ///
    /// Locally: a hard link (no byte written), after setting the file's modification time to now (a
    /// link shares it); across filesystems, a copy under a temporary name beside `to`, then linked
    /// to `to` — a link, unlike a rename, fails when `to` exists. In a bucket: a copy made only when
    /// `to` is absent (where the store cannot promise that, after a look).
    pub async fn place(&self, from: &Url, to: &Url) -> Result<Placed, StoreError> {
        if let (Some(source), Some(destination)) = (local_path(from), local_path(to)) {
            return place_local(&source, &destination)
                .map_err(|e| StoreError { location: display_url(to), problem: e.to_string() });
        }
        if self.exists(to).await? {
            return Ok(Placed::Existing);
        }
        let (source, from_key) = self.object_store(from)?;
        let (_, to_key) = self.object_store(to)?;
        if from.scheme() != to.scheme() || from.authority() != to.authority() {
            // One PUT (or a completed multipart upload) makes the object visible whole.
            self.copy(from, to).await?;
            return Ok(Placed::New);
        }
        match source.copy_if_not_exists(&from_key, &to_key).await {
            Ok(()) => Ok(Placed::New),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Placed::Existing)
            }
            // S3 without a configured conditional copy: the look above found nothing there.
            Err(object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. }) => {
                source.copy(&from_key, &to_key).await.map_err(|e| self.error(to, &e))?;
                Ok(Placed::New)
            }
            Err(e) => Err(self.error(to, &e)),
        }
    }

    /// Puts the file at `from` at `to` in place of the file there, which no reader may be using (one
    /// the table does not reference): never seen half-written, as [`Stores::place`].
    pub async fn replace(&self, from: &Url, to: &Url) -> Result<(), StoreError> {
        if let (Some(source), Some(destination)) = (local_path(from), local_path(to)) {
            let io = |e: std::io::Error| StoreError { location: display_url(to), problem: e.to_string() };
            let partial = partial_beside(&destination);
            let placed = place_local(&source, &partial).and_then(|_| std::fs::rename(&partial, &destination));
            let _ = std::fs::remove_file(&partial);
            return placed.map_err(io);
        }
        // A copy (or a PUT) replaces an object whole.
        self.copy(from, to).await.map(|_| ())
    }

    /// A file's size and the sha256 of its bytes, streamed.
    pub async fn checksum(&self, url: &Url) -> Result<(u64, String), StoreError> {
        use sha2::{Digest, Sha256};
        if let Some(path) = local_path(url) {
            return sha256_file(&path)
                .map_err(|e| StoreError { location: display_url(url), problem: e.to_string() });
        }
        let (store, key) = self.object_store(url)?;
        let mut chunks = store.get(&key).await.map_err(|e| self.error(url, &e))?.into_stream();
        let (mut hasher, mut size) = (Sha256::new(), 0u64);
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| self.error(url, &e))?;
            size += chunk.len() as u64;
            hasher.update(&chunk);
        }
        Ok((size, hex::encode(hasher.finalize())))
    }

    /// Removes every file under the folder `url`, and nothing outside it.
    pub async fn remove_folder(&self, folder: &Url) -> Result<(), StoreError> {
        if let Some(path) = local_path(folder) {
            // remove_dir_all takes the empty folders too, and does not follow symlinks.
            return match std::fs::remove_dir_all(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(StoreError { location: display_url(folder), problem: e.to_string() })
                }
                _ => Ok(()),
            };
        }
        let (store, key) = self.object_store(folder)?;
        if key.as_ref().is_empty() {
            // A bucket's root is never one table's folder: refuse rather than empty the bucket.
            return Err(StoreError {
                location: display_url(folder),
                problem:
                    "is the root of a bucket, not a table's folder: bf removes only a rehearsal's own folder"
                        .to_owned(),
            });
        }
        // object_store lists by whole path segments: `orders__rehearsal` does not list
        // `orders__rehearsal_old/`.
        let listed = store.list(Some(&key)).map_ok(|meta| meta.location).boxed();
        store.delete_stream(listed).try_collect::<Vec<_>>().await.map_err(|e| self.error(folder, &e))?;
        Ok(())
    }

    /// How commits to `url` are kept from overwriting each other. deltalake 1.x commits to S3 by
    /// conditional put only (it dropped the DynamoDB lock), so that is what is asked about.
    pub fn commits(&self, url: &Url) -> Commits {
        if Kind::of(url) != Some(Kind::S3) {
            return Commits::Atomic;
        }
        let conditional_put = self.settings.conditional_put.or_else(|| {
            match std::env::var("AWS_CONDITIONAL_PUT").ok()?.trim().to_ascii_lowercase().as_str() {
                "etag" => Some(ConditionalPut::Etag),
                "disabled" => Some(ConditionalPut::Disabled),
                _ => None,
            }
        });
        match conditional_put {
            Some(ConditionalPut::Etag) => Commits::ConditionalPut,
            Some(ConditionalPut::Disabled) => Commits::Impossible,
            None if self.settings.s3_single_writer => Commits::SingleWriter,
            None => Commits::Unsafe,
        }
    }

    /// Refuses to write to `url` when two writers could both commit the same version, or when no
    /// commit can be made at all.
    pub fn require_safe_commits(&self, url: &Url) -> Result<(), UnsafeCommits> {
        let location = display_url(url);
        match self.commits(url) {
            Commits::Unsafe => Err(UnsafeCommits::NotSaid { location }),
            Commits::Impossible => Err(UnsafeCommits::Disabled { location }),
            Commits::Atomic | Commits::ConditionalPut | Commits::SingleWriter => Ok(()),
        }
    }

    /// Refuses `several` writers at once (`parallel` slices, fan-out tasks) to a table whose plan
    /// declared S3 commits safe only for a single writer.
    pub fn require_one_writer(&self, url: &Url, several: Option<&str>) -> Result<(), UnsafeCommits> {
        match (self.commits(url), several) {
            (Commits::SingleWriter, Some(several)) => Err(UnsafeCommits::SingleWriterInParallel {
                location: display_url(url),
                several: several.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    fn error(&self, url: &Url, error: &dyn std::error::Error) -> StoreError {
        StoreError {
            location: display_url(url),
            problem: explain(url, error).unwrap_or_else(|| chain(error)),
        }
    }
}

/// bf refuses to commit to S3 without a safe commit: the message says the ways to give it one.
#[derive(Debug, thiserror::Error)]
pub enum UnsafeCommits {
    #[error(
        "{location}: no safe commit is configured for S3, so two writers could both commit the same version \
         and one would silently overwrite the other; set `conditional_put = \"etag\"` in [storage] (or \
         AWS_CONDITIONAL_PUT=etag) if the store refuses to overwrite on `If-None-Match` (AWS S3, MinIO, R2 \
         do), or declare `s3_single_writer = true` in [storage] if nothing else ever writes this table \
         (deltalake 1.x no longer offers the DynamoDB lock)"
    )]
    NotSaid { location: String },
    #[error(
        "{location}: conditional put is disabled (`conditional_put = \"disabled\"` or AWS_CONDITIONAL_PUT), \
         and deltalake commits to S3 only with it: nothing could be committed; remove the setting, or set \
         it to \"etag\""
    )]
    Disabled { location: String },
    #[error(
        "{location}: `s3_single_writer = true` promises that one writer commits at a time, and {several} \
         would be several: two of bf's own commits could take the same version and one silently overwrite \
         the other. Apply with `parallel = 1` in one `bf apply`, or set `conditional_put = \"etag\"` in \
         [storage] if the store honours `If-None-Match`"
    )]
    SingleWriterInParallel { location: String, several: String },
}

/// What is at a location.
#[derive(Debug)]
pub enum Found {
    File(object_store::ObjectMeta),
    Folder,
    Nothing,
}

/// deltalake finds its store handlers in registries the program fills once.
fn register_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        deltalake::aws::register_handlers(None);
        deltalake::azure::register_handlers(None);
        deltalake::gcp::register_handlers(None);
    });
}

/// `text` with the query of every URL in it removed: a store's request URL can carry a signature
/// (an Azure SAS token, a presigned S3 URL), and errors quote request URLs.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start =
            rest[..at].rfind(|c: char| c.is_whitespace() || c == '(' || c == '"').map_or(0, |i| i + 1);
        let end = at
            + rest[at..].find(|c: char| c.is_whitespace() || c == ')' || c == '"').unwrap_or(rest.len() - at);
        let url = &rest[start..end];
        out.push_str(&rest[..start]);
        match url.find('?') {
            Some(query) => {
                out.push_str(&url[..query]);
                out.push_str("?…");
            }
            None => out.push_str(url),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// An error and its causes, in one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let more = next.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = next.source();
    }
    text
}

/// The likely cause and fix of a store error, when it is one people meet: a missing bucket, a
/// denied request, a wrong region, an endpoint that does not answer.
pub fn explain(url: &Url, error: &dyn std::error::Error) -> Option<String> {
    let text = chain(error);
    let lower = text.to_ascii_lowercase();
    let bucket = url.host_str().unwrap_or_default();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if Kind::of(url).is_none_or(|k| k == Kind::Local) {
        return None;
    }
    if has(&["url scheme is not allowed"]) {
        return Some(
            "the endpoint is plain http, which is refused unless told: set `allow_http = true` in [storage] \
             (or AWS_ALLOW_HTTP=true) for a local or private server"
                .to_owned(),
        );
    }
    if has(&["loading credentials", "no credentials", "missingcredentials"]) {
        return Some(
            "no credentials found: set them where the cloud's tools look (AWS_PROFILE or AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, `az login` or AZURE_STORAGE_ACCOUNT_KEY, GOOGLE_APPLICATION_CREDENTIALS), and \
             `endpoint` in [storage] or AWS_ENDPOINT_URL for a store that is not the cloud's own"
                .to_owned(),
        );
    }
    if has(&[
        "nosuchbucket",
        "bucket does not exist",
        "containernotfound",
        "container does not exist",
        "bucket not found",
    ]) {
        Some(format!("the bucket `{bucket}` does not exist: check its name in the plan, or create it"))
    } else if has(&[
        "permanentredirect",
        "authorizationheadermalformed",
        "wrong region",
        "incorrect region",
        "status: 301",
    ]) {
        Some(format!(
            "the bucket `{bucket}` is in another region: set `region` in [storage] or AWS_REGION ({})",
            first_line(&text)
        ))
    } else if has(&[
        "accessdenied",
        "access denied",
        "invalidaccesskeyid",
        "signaturedoesnotmatch",
        "authorizationfailure",
        "authenticationfailed",
        "forbidden",
        "status: 403",
        "status: 401",
        "unauthenticated",
        "permission denied",
    ]) {
        Some(format!(
            "access denied: check the credentials in the environment (AWS_PROFILE or AWS_ACCESS_KEY_ID, \
             AZURE_STORAGE_ACCOUNT_KEY or `az login`, GOOGLE_APPLICATION_CREDENTIALS) and that they may read \
             and write here ({})",
            first_line(&text)
        ))
    } else if has(&[
        "connection refused",
        "error sending request",
        "dns error",
        "timed out",
        "tcp connect",
        "connect error",
    ]) {
        Some(format!(
            "the store does not answer: check `endpoint` in [storage] (or AWS_ENDPOINT_URL, AZURE_STORAGE_ENDPOINT, \
             GOOGLE_BASE_URL) and the network ({})",
            first_line(&text)
        ))
    } else {
        None
    }
}

/// The first line of a message, bounded: store errors can carry whole XML bodies.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(240) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// What [`Stores::place`] found at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Nothing: the file is there now.
    New,
    /// A file was there already and was left as it was.
    Existing,
}

/// A name beside `destination` for a file being written: hidden, unique, never a table's file.
fn partial_beside(destination: &Path) -> PathBuf {
    let name = destination.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    destination.with_file_name(format!(".{name}.{}.bf-partial", uuid::Uuid::new_v4()))
}

fn place_local(source: &Path, destination: &Path) -> std::io::Result<Placed> {
    use std::io::ErrorKind;
    if let Some(parent) = destination.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if destination.symlink_metadata().is_ok() {
        return Ok(Placed::Existing);
    }
    std::fs::File::open(source)?.set_modified(std::time::SystemTime::now())?;
    match std::fs::hard_link(source, destination) {
        Ok(()) => return Ok(Placed::New),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(Placed::Existing),
        // Another filesystem, or one without links: copy.
        Err(_) => {}
    }
    let partial = partial_beside(destination);
    let placed = (|| {
        std::fs::copy(source, &partial)?;
        std::fs::File::open(&partial)?.sync_all()?;
        match std::fs::hard_link(&partial, destination) {
            Ok(()) => Ok(Placed::New),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(Placed::Existing),
            // No links at all: a rename, once more sure nothing is there.
            Err(_) if destination.symlink_metadata().is_err() => {
                std::fs::rename(&partial, destination)?;
                Ok(Placed::New)
            }
            Err(_) => Ok(Placed::Existing),
        }
    })();
    let _ = std::fs::remove_file(&partial);
    placed
}

/// How bf reaches tables and files in object stores.
///
/// A plan is reviewed, saved and shown, so it holds no secret: credentials come from where each
/// cloud keeps them (the environment, the AWS profile / SSO / instance chain, the Azure CLI or a
/// managed identity, Google's application default credentials). Every setting here can also come
/// from the environment variable named with it; a setting written here wins over the environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// S3: the buckets' region, e.g. `"eu-west-1"` (`AWS_REGION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The store's endpoint, for stores other than the cloud's own: MinIO, Ceph, R2, a local server
    /// (`AWS_ENDPOINT_URL`, `AZURE_STORAGE_ENDPOINT`, `GOOGLE_BASE_URL`), e.g. `"http://127.0.0.1:9000"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Allow an `http://` endpoint (`AWS_ALLOW_HTTP`, `AZURE_ALLOW_HTTP`, `GOOGLE_ALLOW_HTTP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_http: Option<bool>,
    /// S3: address buckets as `bucket.endpoint` rather than `endpoint/bucket`
    /// (`AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_hosted_style_request: Option<bool>,
    /// S3: `"etag"` says the store refuses to create an object that exists (`If-None-Match`), as AWS
    /// S3, MinIO and R2 do, so two writers committing the same version cannot both succeed
    /// (`AWS_CONDITIONAL_PUT`). `"disabled"` turns it off, and deltalake cannot commit without it:
    /// bf refuses to write then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditional_put: Option<ConditionalPut>,
    /// S3 without `conditional_put = "etag"`: `true` declares that nothing else writes these tables
    /// while bf applies or rolls back, the only case in which commits to a store that may not honour
    /// `If-None-Match` are safe. Without either, bf refuses to write to S3.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub s3_single_writer: bool,
    /// Azure: the storage account, when the URI does not name it (`AZURE_STORAGE_ACCOUNT_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_name: Option<String>,
    /// Azure: use the Azurite emulator on 127.0.0.1 (`AZURE_STORAGE_USE_EMULATOR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_emulator: Option<bool>,
    /// Send requests unsigned, for public buckets and emulators (`AWS_SKIP_SIGNATURE`,
    /// `AZURE_SKIP_SIGNATURE`, `GOOGLE_SKIP_SIGNATURE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_signature: Option<bool>,
    /// How many times a failed request is retried (deltalake's default: 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// How long a request is retried before bf gives up and stops, e.g. `"30s"` or `"3m"`
    /// (deltalake's default: 3 minutes). A slice that gives up is not committed; `bf apply` resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_timeout: Option<String>,
}

impl Storage {
    pub(crate) fn is_default(&self) -> bool {
        *self == Storage::default()
    }
}

/// See [`Storage::conditional_put`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConditionalPut {
    /// The store honours `If-None-Match: *` on create.
    Etag,
    /// No conditional put.
    Disabled,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Placing a file never replaces, moves or rewrites what is at the destination, and a placed file
    /// is fresh whatever the age of its source: linked on one filesystem, copied from another (a
    /// tmpfs), never seen half-written under its final name.
    #[test]
    fn placing_leaves_a_file_that_is_there_and_places_fresh_ones() {
        use std::os::unix::fs::MetadataExt;
        let disk = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 24 * 3600);
        let fresh = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let sources = [disk.path().to_owned(), tempfile::tempdir_in("/dev/shm").unwrap().keep()];
        for source_dir in &sources {
            let source = source_dir.join("part-0.parquet");
            std::fs::write(&source, b"rehearsed bytes").unwrap();
            std::fs::File::open(&source).unwrap().set_modified(old).unwrap();
            let table = disk.path().join(format!("t{}", source_dir.starts_with("/dev/shm") as u8));
            let placed = table.join("d=2026-05-01/part-0.parquet");
            assert_eq!(place_local(&source, &placed).unwrap(), Placed::New);
            assert_eq!(std::fs::read(&placed).unwrap(), b"rehearsed bytes");
            assert!(std::fs::metadata(&placed).unwrap().modified().unwrap() > fresh, "a fresh file");
            let leftovers: Vec<_> = std::fs::read_dir(placed.parent().unwrap()).unwrap().collect();
            assert_eq!(leftovers.len(), 1, "no partial copy is left beside it");
            // A file the table already references: left exactly as it is, whatever it holds.
            let live = table.join("d=2026-05-01/part-1.parquet");
            std::fs::write(&live, b"the table's own bytes").unwrap();
            let before = std::fs::metadata(&live).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(place_local(&source, &live).unwrap(), Placed::Existing);
            let after = std::fs::metadata(&live).unwrap();
            assert_eq!(
                (after.ino(), after.ctime(), after.ctime_nsec()),
                (before.ino(), before.ctime(), before.ctime_nsec())
            );
            assert_eq!(std::fs::read(&live).unwrap(), b"the table's own bytes");
        }
        let _ = std::fs::remove_dir_all(&sources[1]);
    }

    #[test]
    fn a_single_writer_s3_table_takes_no_parallel_slices_or_tasks() {
        let single = Stores::new(&Storage { s3_single_writer: true, ..Storage::default() });
        let s3 = Url::parse("s3://bucket/orders/").unwrap();
        if std::env::var_os("AWS_CONDITIONAL_PUT").is_none() {
            assert!(single.require_one_writer(&s3, None).is_ok(), "one apply, one slice at a time");
            let refused =
                single.require_one_writer(&s3, Some("`slicing.parallel` slices at once")).unwrap_err();
            assert!(refused.to_string().contains("promises that one writer commits at a time"), "{refused}");
        }
        let etag = Stores::new(&Storage {
            s3_single_writer: true,
            conditional_put: Some(ConditionalPut::Etag),
            ..Storage::default()
        });
        assert!(etag.require_one_writer(&s3, Some("tasks")).is_ok(), "conditional put makes races safe");
        let local = Url::parse("file:///lake/orders/").unwrap();
        assert!(single.require_one_writer(&local, Some("tasks")).is_ok(), "local commits are atomic");
    }

    #[test]
    fn schemes_name_their_store() {
        let kind = |u: &str| Kind::of(&Url::parse(u).unwrap());
        assert_eq!(kind("s3a://b/t"), Some(Kind::S3));
        assert_eq!(kind("abfss://c@a.dfs.core.windows.net/t"), Some(Kind::Azure));
        assert_eq!(kind("gs://b/t"), Some(Kind::Gcs));
        assert_eq!(kind("file:///t"), Some(Kind::Local));
        assert_eq!(kind("hdfs://n/t"), None);
    }

    #[test]
    fn locations_refuse_unknown_schemes_and_credentials() {
        assert!(location_problem("s3://b/t").is_none());
        assert!(location_problem("../warehouse/t").is_none());
        assert!(location_problem("hdfs://n/t").unwrap().contains("not supported"));
        assert!(location_problem("s3://AKIA:secret@b/t").unwrap().contains("credential"));
        assert!(
            location_problem("abfss://c@a.dfs.core.windows.net/t?sv=1&sig=x").unwrap().contains("credential")
        );
    }

    #[test]
    fn redaction_removes_the_queries_of_urls_and_nothing_else() {
        let error = "Error performing GET https://a.blob.core.windows.net/c/p?sv=1&sig=SECRET in 3ms (retry)";
        assert_eq!(
            redact(error),
            "Error performing GET https://a.blob.core.windows.net/c/p?… in 3ms (retry)"
        );
        assert_eq!(redact("s3://b/t: no such key? really"), "s3://b/t: no such key? really");
        assert_eq!(redact("(see \"http://h/x?token=T\")"), "(see \"http://h/x?…\")");
    }

    #[test]
    fn listing_locations_encode_decoded_names_once() {
        assert_eq!(listing_location("file:///lake/t/d=a b%/x.parquet"), "/lake/t/d=a b%/x.parquet");
        assert_eq!(listing_location("s3://b/t/d=a b%?#/x.parquet"), "s3://b/t/d=a%20b%25%3F%23/x.parquet");
    }

    #[test]
    fn folders_nest_whatever_the_spelling_of_their_store() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(nested(&url("s3://b/lake/t/"), &url("s3a://b/lake/t")));
        assert!(nested(&url("s3://b/lake/"), &url("s3://b/lake/t/")));
        assert!(nested(&url("s3://b/lake/t/_bf/r/"), &url("s3://b/lake/t/")));
        assert!(!nested(&url("s3://b/lake/t__rehearsal/"), &url("s3://b/lake/t/")));
        assert!(!nested(&url("s3://other/lake/t/"), &url("s3://b/lake/t/")));
        assert!(nested(&url("file:///lake/t%20x/"), &url("file:///lake/t x/r/")));
    }

    #[test]
    fn joined_files_encode_partition_values() {
        let root: Url = "file:///lake/t/".parse().unwrap();
        assert_eq!(join(&root, "d=a b%/part-0.parquet").as_str(), "file:///lake/t/d=a%20b%25/part-0.parquet");
    }

    #[test]
    fn settings_win_under_the_names_each_store_reads() {
        let stores = Stores::new(&Storage {
            region: Some("eu-west-1".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            conditional_put: Some(ConditionalPut::Etag),
            ..Storage::default()
        });
        let s3 = stores.options(&Url::parse("s3://b/t").unwrap());
        assert_eq!(s3.get("aws_region").map(String::as_str), Some("eu-west-1"));
        assert_eq!(s3.get("aws_conditional_put").map(String::as_str), Some("etag"));
        let gcs = stores.options(&Url::parse("gs://b/t").unwrap());
        assert_eq!(gcs.get("google_base_url").map(String::as_str), Some("http://127.0.0.1:9000"));
        assert!(!gcs.contains_key("aws_region"));
        assert!(stores.options(&Url::parse("file:///t").unwrap()).is_empty());
    }
}
