//! What each input file was when `bf plan` read it: its fingerprint, which `bf apply` takes again
//! to tell an input changed since the plan — a local file's content hash (under 1 GiB, streamed
//! on one thread per core), an object's ETag and version.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::delta::store::{Found, Location, Stores};

/// Files bigger than this are fingerprinted by size and modification time only.
const HASH_LIMIT: u64 = 1 << 30;

/// What an input file was when the plan read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InputFingerprint {
    pub input: String,
    pub path: String,
    pub size: u64,
    pub modified: Option<DateTime<Utc>>,
    /// sha256 of the content, for local files under 1 GiB.
    pub sha256: Option<String>,
    /// In an object store: the store's ETag, which changes with the content; bf does not download
    /// a file to hash it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// In a versioned bucket: the object's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl InputFingerprint {
    /// Whether `now` is the same file as this one, as far as its fingerprint can tell.
    pub fn matches(&self, now: &InputFingerprint) -> bool {
        match (&self.sha256, &self.etag) {
            (Some(sha), _) => now.sha256.as_ref() == Some(sha),
            (None, Some(etag)) => {
                now.etag.as_ref() == Some(etag) && now.size == self.size && now.version == self.version
            }
            (None, None) => now.size == self.size && now.modified == self.modified,
        }
    }
}

/// Fingerprints `(input, file)` pairs, in their order: local files hashed on one thread per core
/// (hashing a month of daily inputs is most of what an apply does before its first slice,
/// docs/BENCHMARKS.md, W4), files in object stores by a HEAD each, sixteen at a time.
pub async fn fingerprint_all(
    stores: &Stores,
    files: &[(String, Location)],
) -> Vec<Result<InputFingerprint, String>> {
    // Every file lands in exactly one list, by its position: the stale check pairs the answers
    // with the saved fingerprints in order.
    let (mut local, mut remote, mut found) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (input, location)) in files.iter().enumerate() {
        match location {
            Location::Path(path) => local.push((i, input.clone(), path.clone())),
            Location::Uri(url) => {
                match (crate::delta::store::Kind::of(url), crate::delta::store::local_path(url)) {
                    (_, Some(path)) => local.push((i, input.clone(), path)),
                    (Some(crate::delta::store::Kind::Local), None) => {
                        found.push((i, Err(format!("{url} is not a local file"))))
                    }
                    _ => remote.push((i, input.clone(), url.clone())),
                }
            }
        }
    }
    let hashing = tokio::task::spawn_blocking(move || {
        let hashed = hash_all(&local);
        local.into_iter().map(|(i, ..)| i).zip(hashed).collect::<Vec<_>>()
    });
    let remote = remote.into_iter().map(|(i, input, url)| async move {
        let found = stores.find(&url).await.map_err(|e| e.to_string());
        let fingerprint = match found {
            Ok(Found::File(meta)) => Ok(InputFingerprint {
                input,
                path: url.to_string(),
                size: meta.size,
                modified: Some(meta.last_modified),
                sha256: None,
                etag: meta.e_tag,
                version: meta.version,
            }),
            Ok(_) => Err(format!("{url} does not exist")),
            Err(e) => Err(e),
        };
        (i, fingerprint)
    });
    found.extend(futures::stream::iter(remote).buffer_unordered(16).collect::<Vec<_>>().await);
    match hashing.await {
        Ok(hashed) => found.extend(hashed.into_iter().map(|(i, f)| (i, f.map_err(|e| e.to_string())))),
        Err(e) => return files.iter().map(|_| Err(format!("hashing the inputs: {e}"))).collect(),
    }
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, f)| f).collect()
}

/// Hashes local files on one thread per core, in their order.
fn hash_all(files: &[(usize, String, PathBuf)]) -> Vec<std::io::Result<InputFingerprint>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk.iter().map(|(_, input, path)| fingerprint(input, path)).collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("hashing a file does not panic")).collect()
    })
}

/// Fingerprints a local file: size, modification time and (under 1 GiB) content hash, streamed.
fn fingerprint(input: &str, path: &Path) -> std::io::Result<InputFingerprint> {
    let metadata = std::fs::metadata(path)?;
    let modified = metadata.modified().ok().map(DateTime::<Utc>::from);
    let sha256 =
        if metadata.len() < HASH_LIMIT { Some(crate::delta::store::sha256_file(path)?.1) } else { None };
    Ok(InputFingerprint {
        input: input.to_owned(),
        path: path.display().to_string(),
        size: metadata.len(),
        modified,
        sha256,
        etag: None,
        version: None,
    })
}
