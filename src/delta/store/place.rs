//! Placing a file into a table's folder: [`Stores::place`] puts a rehearsed file where the
//! target will reference it and [`Stores::replace`] swaps out a file no reader uses. It must never
//! clobber a live file, and a placed file is never seen half-written under its final name: a hard
//! link or a partial copy linked into place on a filesystem, `copy_if_not_exists` in a bucket.

use std::path::{Path, PathBuf};

use object_store::ObjectStoreExt;
use url::Url;

use super::access::Stores;
use super::error::StoreError;
use super::location::{display_url, local_path};

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
    /// `to` is absent (where the store cannot promise that, or across buckets, after a look).
    pub async fn place(&self, from: &Url, to: &Url) -> Result<Placed, StoreError> {
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
