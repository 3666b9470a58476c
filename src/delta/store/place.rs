//! Placing a file into a table's folder: [`Stores::place`] puts a rehearsed file where the
//! target will reference it and [`Stores::replace`] swaps out a file no reader uses. It must never
//! clobber a live file, and a placed file is never seen half-written under its final name: a hard
//! link or a partial copy linked into place on a filesystem, a conditional PUT or
//! `copy_if_not_exists` in a bucket.

use std::path::{Path, PathBuf};

use deltalake::logstore::ObjectStoreRef;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutMode, PutOptions};
use url::Url;

use super::access::Stores;
use super::error::StoreError;
use super::location::{display_url, local_path};
use super::settings::Commits;

/// The biggest file [`Stores::place`] puts from its bytes in a bucket rather than copying: it is
/// held in memory whole, and eight are placed at once.
const PUT_FROM_BYTES: u64 = 8 << 20;

/// What [`Stores::place`] found at the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Nothing: the file is there now. Its bytes are the caller's to check.
    New,
    /// A file was there already and was left as it was.
    Existing,
    /// Nothing: the file is there now, put from bytes read and found to be the expected ones, so
    /// what landed needs no reading back.
    Checked,
    /// The source is not the expected file (its size and sha256 as found): nothing was placed.
    Differs(u64, String),
}

/// A name beside `destination` for a file being written: hidden, unique, never a table's file.
fn partial_beside(destination: &Path) -> PathBuf {
    let name = destination.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    destination.with_file_name(format!(".{name}.{}.bf-partial", uuid::Uuid::new_v4()))
}

pub(super) fn place_local(source: &Path, destination: &Path) -> std::io::Result<Placed> {
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

impl Stores {
    /// Puts the file at `from` at `to` as well, unless a file is there already, which it never
    /// replaces, moves or removes: the caller checks that one's bytes. A placed file is never seen
    /// under its final name half-written, and is fresh (a VACUUM running beside the apply judges
    /// files nothing references by their age).
    ///
    /// Locally: a hard link (no byte written), after setting the file's modification time to now (a
    /// link shares it); across filesystems, a copy under a temporary name beside `to`, then linked
    /// to `to` — a link, unlike a rename, fails when `to` exists. In a bucket: a copy made only when
    /// `to` is absent (where the store cannot promise that, or across buckets, after a look) — or,
    /// for a small file in S3 with conditional puts, its bytes read, checked against `expected`
    /// (size, sha256) and put only when `to` is absent ([`Placed::Checked`]).
    pub async fn place(&self, from: &Url, to: &Url, expected: (u64, &str)) -> Result<Placed, StoreError> {
        if let (Some(source), Some(destination)) = (local_path(from), local_path(to)) {
            return place_local(&source, &destination)
                .map_err(|e| StoreError { location: display_url(to), problem: e.to_string() });
        }
        let (source, from_key) = self.object_store(from)?;
        let (_, to_key) = self.object_store(to)?;
        if from.scheme() != to.scheme() || from.authority() != to.authority() {
            if self.exists(to).await? {
                return Ok(Placed::Existing);
            }
            // One PUT (or a completed multipart upload) makes the object visible whole.
            self.copy(from, to).await?;
            return Ok(Placed::New);
        }
        if expected.0 <= PUT_FROM_BYTES
            && matches!(self.commits(to), Commits::ConditionalPut)
            && let Some(placed) =
                self.put_checked(&source, (from, &from_key), (to, &to_key), expected).await?
        {
            return Ok(placed);
        }
        // The conditional copy is the look: no HEAD first, a request saved per published file.
        match source.copy_if_not_exists(&from_key, &to_key).await {
            Ok(()) => Ok(Placed::New),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Placed::Existing)
            }
            // S3 without a configured conditional copy: look, then copy.
            Err(object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. }) => {
                if self.exists(to).await? {
                    return Ok(Placed::Existing);
                }
                source.copy(&from_key, &to_key).await.map_err(|e| self.error(to, &e))?;
                Ok(Placed::New)
            }
            Err(e) => Err(self.error(to, &e)),
        }
    }

    /// Reads the file at `from`, checks it is `expected` and puts its bytes at `to` unless a file is
    /// there: two requests, where S3's conditional copy is three (a one-part multipart copy) and its
    /// result a fourth to read back. `None` when the store turns the conditional PUT down: the
    /// caller copies.
    async fn put_checked(
        &self,
        store: &ObjectStoreRef,
        (from, from_key): (&Url, &Key),
        (to, to_key): (&Url, &Key),
        expected: (u64, &str),
    ) -> Result<Option<Placed>, StoreError> {
        use sha2::{Digest, Sha256};
        let read = store.get(from_key).await.map_err(|e| self.error(from, &e))?;
        let bytes = read.bytes().await.map_err(|e| self.error(from, &e))?;
        let found = (bytes.len() as u64, hex::encode(Sha256::digest(&bytes)));
        if (found.0, found.1.as_str()) != expected {
            return Ok(Some(Placed::Differs(found.0, found.1)));
        }
        let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match store.put_opts(to_key, bytes.into(), create).await {
            Ok(_) => Ok(Some(Placed::Checked)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(Some(Placed::Existing))
            }
            Err(object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. }) => {
                Ok(None)
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
}
