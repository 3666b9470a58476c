//! A table's writes checksummed as they are written: the rehearsal's data files get the sha256 the
//! saved plan records from the bytes deltalake's writer hands the store, instead of a read of
//! every file it wrote (in a bucket a whole GET a file: 366 of a partitioned W1 plan's requests,
//! docs/BENCHMARKS.md). The bytes are the ones sent; `bf apply` checks what it publishes against
//! them (the bytes read from the rehearsal before it puts them, or what landed in the table), so
//! a store that kept other bytes is still caught.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, MultipartUpload, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result, UploadPart,
};
use sha2::{Digest, Sha256};

use super::layer::layer;

/// The files written through a [`Checksummed`] store, by key: their size and sha256 (hex).
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<HashMap<Path, (u64, String)>>>);

impl Written {
    /// The size and sha256 of the file last written at `key`, if one was.
    pub fn get(&self, key: &Path) -> Option<(u64, String)> {
        self.0.lock().expect("no panic holds the lock").get(key).cloned()
    }

    fn put(&self, key: &Path, size: u64, hasher: Sha256) {
        let sha256 = hex::encode(hasher.finalize());
        self.0.lock().expect("no panic holds the lock").insert(key.clone(), (size, sha256));
    }
}

impl fmt::Debug for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} files written", self.0.lock().map(|m| m.len()).unwrap_or(0))
    }
}

/// `inner`, noting the size and sha256 of every file written through it.
pub(super) struct Checksummed {
    inner: Arc<dyn ObjectStore>,
    written: Written,
}

impl Checksummed {
    pub(super) fn new(inner: Arc<dyn ObjectStore>, written: Written) -> Checksummed {
        Checksummed { inner, written }
    }
}

fn hash(hasher: &mut Sha256, payload: &PutPayload) -> u64 {
    payload
        .iter()
        .map(|chunk| {
            hasher.update(chunk);
            chunk.len() as u64
        })
        .sum()
}

/// A multipart upload whose parts are hashed in the order they are handed over, which is the
/// order the store joins them in.
#[derive(Debug)]
struct Upload {
    inner: Box<dyn MultipartUpload>,
    key: Path,
    hasher: Sha256,
    size: u64,
    written: Written,
}

#[async_trait::async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.size += hash(&mut self.hasher, &data);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let done = self.inner.complete().await?;
        self.written.put(&self.key, self.size, std::mem::take(&mut self.hasher));
        Ok(done)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

layer!(Checksummed {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let mut hasher = Sha256::new();
        let size = hash(&mut hasher, &payload);
        let done = self.inner.put_opts(location, payload, opts).await?;
        self.written.put(location, size, hasher);
        Ok(done)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(Upload {
            inner,
            key: location.clone(),
            hasher: Sha256::new(),
            size: 0,
            written: self.written.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
});

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, WriteMultipart};

    use super::*;

    /// What is noted is the sha256 of the bytes that landed, for a PUT and for an upload in parts.
    #[tokio::test]
    async fn the_noted_checksum_is_the_landed_file_s() {
        let inner = Arc::new(InMemory::new());
        let written = Written::default();
        let store = Checksummed::new(inner.clone(), written.clone());
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        store.put(&Path::from("one"), bytes[..1000].to_vec().into()).await.unwrap();
        let mut upload = WriteMultipart::new_with_chunk_size(
            store.put_multipart(&Path::from("parts")).await.unwrap(),
            1 << 20,
        );
        upload.write(&bytes);
        upload.finish().await.unwrap();
        for name in ["one", "parts"] {
            let landed = inner.get(&Path::from(name)).await.unwrap().bytes().await.unwrap();
            let expected = (landed.len() as u64, hex::encode(Sha256::digest(&landed)));
            assert_eq!(written.get(&Path::from(name)), Some(expected), "{name}");
        }
        assert_eq!(written.get(&Path::from("never")), None);
    }
}
