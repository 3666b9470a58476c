//! Reaching a store: the [`Stores`] handle that opens tables with the plan's settings, and the few
//! object-store operations bf needs beyond deltalake's own — HEAD, list by prefix, copy (the
//! store's own when it can), checksum, removing a rehearsal's prefix — and whether commits to a
//! table are safe. Placing a file into a live table is not here: that is `place`, which must never
//! clobber a file the table holds.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, Once};

use deltalake::kernel::Snapshot;
use deltalake::logstore::{ObjectStoreRef, StorageConfig};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path as Key;
use url::Url;

use super::checksummed::{Checksummed, Written};
use super::error::{OpenError, StoreError};
use super::explain::{chain, explain};
use super::location::{Kind, display_url, local_path};
use super::prefetch::Prefetched;
use super::settings::{Commits, Storage, UnsafeCommits};

/// Files up to this size are copied across stores in one request; bigger ones in parts.
const ONE_REQUEST: u64 = 64 << 20;

/// The bucket `url` is in, as a URL (`s3://acme-lake`): what a query session registers a store
/// for, and what [`Stores::object_store`] roots its keys at.
fn bucket_root(url: &Url) -> Url {
    Url::parse(&format!("{}://{}", url.scheme(), url.authority())).expect("a store URL")
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

/// The plan's `[storage]` settings over the environment: what opens tables and files.
#[derive(Debug, Clone, Default)]
pub struct Stores {
    settings: Storage,
    /// The stores made so far, by bucket and options: making one builds an HTTP client (its
    /// certificates parsed) and may resolve credentials, which once per file was most of a
    /// publish's CPU in a bucket (docs/BENCHMARKS.md).
    made: Made,
    /// The files this process wrote through a checksummed table ([`Stores::open_checksummed`]), by
    /// bucket (`s3://acme-lake`): their checksums, and the small ones' bytes, which a query
    /// session's reads of that bucket take instead of a request ([`Stores::register`]).
    written: WrittenIn,
}

/// [`Written`] by bucket, shared by every clone of a [`Stores`]: the process's writes.
#[derive(Clone, Default)]
struct WrittenIn(Arc<Mutex<HashMap<String, Written>>>);

impl WrittenIn {
    fn bucket(&self, root: &Url) -> Written {
        let mut all = self.0.lock().expect("no panic holds the lock");
        all.entry(root.as_str().to_owned()).or_default().clone()
    }
}

impl std::fmt::Debug for WrittenIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} buckets written", self.0.lock().map(|m| m.len()).unwrap_or(0))
    }
}

/// The stores made, by bucket and the options they were made with (which may hold a vended
/// credential: never printed).
#[derive(Clone, Default)]
struct Made(Arc<Mutex<HashMap<MadeFor, ObjectStoreRef>>>);

/// A bucket (`s3://acme-lake`) and the options, sorted, its store was made with.
type MadeFor = (String, Vec<(String, String)>);

impl std::fmt::Debug for Made {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} stores", self.0.lock().map(|m| m.len()).unwrap_or(0))
    }
}

impl Stores {
    pub fn new(settings: &Storage) -> Stores {
        register_handlers();
        Stores { settings: settings.clone(), made: Made::default(), written: WrittenIn::default() }
    }

    /// The environment alone, for commands that have no plan (`bf history s3://…`).
    pub fn from_environment() -> Stores {
        Stores::new(&Storage::default())
    }

    /// The settings under the names `url`'s store reads. deltalake's builders read the environment
    /// themselves and let these win over it.
    pub fn options(&self, url: &Url) -> HashMap<String, String> {
        self.settings.options(url)
    }

    /// A builder for the table at `url`, with the store options.
    pub fn builder(&self, url: &Url) -> Result<DeltaTableBuilder, DeltaTableError> {
        Ok(DeltaTableBuilder::from_url(url.clone())?.with_storage_options(self.options(url)))
    }

    /// Opens an existing Delta table at its latest version, or at `version`.
    pub async fn open(&self, url: &Url, version: Option<u64>) -> Result<DeltaTable, OpenError> {
        self.open_through(url, version, None).await
    }

    /// Opens an existing Delta table, at its latest version, whose writes note each file's size
    /// and sha256 as they are written: the rehearsal, whose files the saved plan records. In a
    /// bucket the small files' bytes are kept too, for the comparison that reads them next.
    pub async fn open_checksummed(&self, url: &Url) -> Result<(DeltaTable, Written), OpenError> {
        let (store, _) = self.object_store(url).map_err(OpenError::Store)?;
        let written = self.written.bucket(&bucket_root(url));
        let keep = url.scheme() != "file";
        let store: ObjectStoreRef = Arc::new(Checksummed::new(store, written.clone(), keep));
        Ok((self.open_through(url, None, Some(store)).await?, written))
    }

    /// The table at `url` unloaded, and its latest snapshot without the list of its files: what
    /// reading its commits one by one, or its id and version, need. deltalake's load reads
    /// the log a second time to list every file, nearly a third of `bf apply`'s time before its first
    /// slice for the rehearsal of a table partitioned by day (docs/BENCHMARKS.md).
    pub async fn open_log(&self, url: &Url) -> Result<(DeltaTable, Snapshot), OpenError> {
        let open_error = refused_open(url)?;
        let table = self.builder(url).and_then(DeltaTableBuilder::build).map_err(&open_error)?;
        let snapshot = Snapshot::try_new(table.log_store().as_ref(), None).await.map_err(open_error)?;
        Ok((table, snapshot))
    }

    async fn open_through(
        &self,
        url: &Url,
        version: Option<u64>,
        store: Option<ObjectStoreRef>,
    ) -> Result<DeltaTable, OpenError> {
        let open_error = refused_open(url)?;
        let mut builder = self.builder(url).map_err(&open_error)?;
        if let Some(store) = store {
            builder = builder.with_storage_backend(store, url.clone());
        }
        if let Some(version) = version {
            builder = builder.with_version(version as _);
        }
        builder.load().await.map_err(open_error)
    }

    /// The store holding `url`, rooted at its bucket (or the filesystem root), and `url`'s key in it.
    /// A bucket's store is made once and shared, where the key the factory gives is the URL's path
    /// (checked when the store is made).
    pub fn object_store(&self, url: &Url) -> Result<(ObjectStoreRef, Key), StoreError> {
        let options = self.options(url);
        let mut named: Vec<(String, String)> = options.clone().into_iter().collect();
        named.sort();
        let made_for = (format!("{}://{}", url.scheme(), url.authority()), named);
        let key = Key::from_url_path(url.path()).ok();
        if let Some(key) = &key
            && let Some(store) = self.made.0.lock().expect("no panic holds the lock").get(&made_for)
        {
            return Ok((store.clone(), key.clone()));
        }
        let (store, factory_key) = self.make_store(url, options)?;
        if key.as_ref() == Some(&factory_key) {
            self.made.0.lock().expect("no panic holds the lock").insert(made_for, store.clone());
        }
        Ok((store, factory_key))
    }

    fn make_store(
        &self,
        url: &Url,
        options: HashMap<String, String>,
    ) -> Result<(ObjectStoreRef, Key), StoreError> {
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
        let config = StorageConfig::parse_options(options).map_err(|e| self.error(url, &e))?;
        factory.parse_url_opts(url, &config).map_err(|e| self.error(url, &e))
    }

    /// Lets a DataFusion session read files at `url` (local files it reads already), a small file
    /// with one request however many ranges the session reads of it, and one this process has just
    /// written with none ([`Prefetched`]).
    pub fn register(
        &self,
        ctx: &deltalake::datafusion::prelude::SessionContext,
        url: &Url,
    ) -> Result<(), StoreError> {
        if url.scheme() == "file" {
            return Ok(());
        }
        let (store, _) = self.object_store(url)?;
        let root = bucket_root(url);
        let written = self.written.bucket(&root);
        ctx.register_object_store(&root, Arc::new(Prefetched::new(store, written)));
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

    /// The keys of every file under the folder `url` in a bucket, by one listing: a page per
    /// thousand keys answers "is this file there?" for them all, where a HEAD each is a request per
    /// file. Looked up by [`Stores::object_store`]'s key for a file, so a partition value's encoding
    /// cannot make a file look missing. `None` on a disk, where looking at a file is a stat.
    pub async fn keys_under(&self, folder: &Url) -> Result<Option<HashSet<Key>>, StoreError> {
        if local_path(folder).is_some() {
            return Ok(None);
        }
        Ok(Some(self.list(folder).await?.into_iter().map(|(_, meta)| meta.location).collect()))
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

    /// A file's size and the sha256 of its bytes, streamed.
    pub async fn checksum(&self, url: &Url) -> Result<(u64, String), StoreError> {
        use sha2::{Digest, Sha256};
        if let Some(path) = local_path(url) {
            // On a thread of its own: a slice's files are checked side by side, over every core.
            let hashed = tokio::task::spawn_blocking(move || sha256_file(&path)).await;
            let problem = |problem: String| StoreError { location: display_url(url), problem };
            return hashed.map_err(|e| problem(e.to_string()))?.map_err(|e| problem(e.to_string()));
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
        self.settings.commits(url)
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

    pub(super) fn error(&self, url: &Url, error: &dyn std::error::Error) -> StoreError {
        StoreError {
            location: display_url(url),
            problem: explain(url, error).unwrap_or_else(|| chain(error)),
        }
    }
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

/// Why the table at `url` cannot be opened, named for the user: a folder that is not there is
/// refused before deltalake looks; the error mapping names what deltalake found instead.
fn refused_open(url: &Url) -> Result<impl Fn(DeltaTableError) -> OpenError + '_, OpenError> {
    let location = display_url(url);
    if url.scheme() == "file" && !url.to_file_path().is_ok_and(|p| p.is_dir()) {
        return Err(OpenError::Missing { location });
    }
    Ok(move |source| match source {
        DeltaTableError::NotATable(_) => OpenError::NotATable { location: location.clone() },
        // The kernel refuses to load a catalog-managed table without the catalog's latest version.
        DeltaTableError::KernelError(delta_kernel::Error::MaxCatalogVersion(_)) => {
            OpenError::CatalogManaged { location: location.clone() }
        }
        source => match explain(url, &source) {
            Some(problem) => OpenError::Store(StoreError { location: location.clone(), problem }),
            None => OpenError::Open { location: location.clone(), source: Box::new(source) },
        },
    })
}
