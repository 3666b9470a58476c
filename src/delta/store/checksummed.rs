//! A table's writes checksummed as they are written: the rehearsal's data files get the sha256 the
//! saved plan records from the bytes deltalake's writer hands the store, instead of a read of
//! every file it wrote (in a bucket a whole GET a file: 366 of a partitioned W1 plan's requests,
//! docs/BENCHMARKS.md). The bytes are the ones sent; `bf apply` checks what it publishes against
//! them (the bytes read from the rehearsal before it puts them, or what landed in the table), so
//! a store that kept other bytes is still caught.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result, UploadPart,
};
use sha2::{Digest, Sha256};

use super::layer::layer;
use super::prefetch::Kept;

/// The biggest file whose bytes [`Written`] keeps.
const KEEP_FILE: u64 = 8 << 20;
/// What the kept files may hold together: a slice's files are compared while the next slice's
/// are written, so two slices' worth is what is read again (a month of W1 is 2.7 MB).
const KEPT: u64 = 32 << 20;

/// The files written through a [`Checksummed`] store: each one's size and sha256 (hex) by key, and
/// the bytes of the last ones written whole in a bucket, which the reads that follow a write
/// ([`Written::answer`]) take from memory.
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<Noted>>);

#[derive(Default)]
struct Noted {
    sums: HashMap<Path, (u64, String)>,
    /// Files put whole (one PUT of at most [`KEEP_FILE`] bytes), newest last, at most [`KEPT`]
    /// bytes in all. The comparison reads each slice's files right after they are written; in a
    /// bucket each read is a request (a partitioned W1 plan read its 366 day files back,
    /// docs/BENCHMARKS.md). A Delta data file never changes under its name, so the bytes sent are
    /// the file for as long as the process lives.
    kept: VecDeque<Arc<Kept>>,
}

impl Written {
    /// The size and sha256 of the file last written at `key`, if one was.
    pub fn get(&self, key: &Path) -> Option<(u64, String)> {
        self.lock().sums.get(key).cloned()
    }

    /// Bytes `asked` of the file at `key`, when it is one of the files kept.
    pub(super) fn answer(&self, key: &Path, asked: &GetRange) -> Option<GetResult> {
        self.lock().kept.iter().filter(|k| k.holds(key)).find_map(|k| k.answer(asked))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.0.lock().expect("no panic holds the lock")
    }

    fn put(&self, key: &Path, size: u64, hasher: Sha256) {
        let sha256 = hex::encode(hasher.finalize());
        self.lock().sums.insert(key.clone(), (size, sha256));
    }

    fn keep(&self, meta: ObjectMeta, bytes: Bytes) {
        let mut noted = self.lock();
        noted.kept.retain(|k| !k.holds(&meta.location));
        noted.kept.push_back(Arc::new(Kept::whole(meta, bytes)));
        while noted.kept.iter().map(|k| k.len()).sum::<u64>() > KEPT {
            noted.kept.pop_front();
        }
    }
}

impl fmt::Debug for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} files written", self.0.lock().map(|m| m.sums.len()).unwrap_or(0))
    }
}

/// `inner`, noting the size and sha256 of every file written through it (and, with `keep`, the
/// bytes of the small ones).
pub(super) struct Checksummed {
    inner: Arc<dyn ObjectStore>,
    written: Written,
    keep: bool,
}

impl Checksummed {
    pub(super) fn new(inner: Arc<dyn ObjectStore>, written: Written, keep: bool) -> Checksummed {
        Checksummed { inner, written, keep }
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
        // Data files only: a file of the log may be written again under its name
        // (`_last_checkpoint`).
        let data = !location.parts().any(|part| part.as_ref() == "_delta_log");
        let kept = (self.keep && data && size <= KEEP_FILE).then(|| payload.clone());
        let done = self.inner.put_opts(location, payload, opts).await?;
        self.written.put(location, size, hasher);
        if let Some(payload) = kept {
            // When it landed as far as this process can tell: the store's own time is not returned.
            let meta = ObjectMeta {
                location: location.clone(),
                last_modified: chrono::Utc::now(),
                size,
                e_tag: done.e_tag.clone(),
                version: done.version.clone(),
            };
            // Copied whole into a buffer of its own size: the writer's chunks may be slices of
            // bigger buffers, which keeping them would keep.
            let mut whole = Vec::with_capacity(size as usize);
            payload.iter().for_each(|chunk| whole.extend_from_slice(chunk));
            self.written.keep(meta, whole.into());
        }
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

    /// `bytes` written at `name` through `store` as an upload of 1 MiB parts.
    async fn put_in_parts(store: &Checksummed, name: &str, bytes: &[u8]) {
        let mut upload = WriteMultipart::new_with_chunk_size(
            store.put_multipart(&Path::from(name)).await.unwrap(),
            1 << 20,
        );
        upload.write(bytes);
        upload.finish().await.unwrap();
    }

    /// What is noted is the sha256 of the bytes that landed, for a PUT and for an upload in parts.
    #[tokio::test]
    async fn the_noted_checksum_is_the_landed_file_s() {
        let inner = Arc::new(InMemory::new());
        let written = Written::default();
        let store = Checksummed::new(inner.clone(), written.clone(), false);
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        store.put(&Path::from("one"), bytes[..1000].to_vec().into()).await.unwrap();
        put_in_parts(&store, "parts", &bytes).await;
        for name in ["one", "parts"] {
            let landed = inner.get(&Path::from(name)).await.unwrap().bytes().await.unwrap();
            let expected = (landed.len() as u64, hex::encode(Sha256::digest(&landed)));
            assert_eq!(written.get(&Path::from(name)), Some(expected), "{name}");
        }
        assert_eq!(written.get(&Path::from("never")), None);
    }

    /// A session's reads of a small data file this process wrote are answered from the bytes it
    /// sent — the store is not asked (the file is gone from it here) — for every range, as the
    /// store would; a file put in parts, a file of the log, or one pushed out by newer ones, is
    /// read from the store.
    #[tokio::test]
    async fn reads_of_a_file_just_written_take_the_bytes_sent() {
        let inner = Arc::new(InMemory::new());
        let written = Written::default();
        let store = Checksummed::new(inner.clone(), written.clone(), true);
        let reader = super::super::prefetch::Prefetched::new(inner.clone(), written.clone());
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        store.put(&Path::from("day"), bytes.clone().into()).await.unwrap();
        store.put(&Path::from("t/_delta_log/_last_checkpoint"), b"{}".to_vec().into()).await.unwrap();
        put_in_parts(&store, "parts", &bytes).await;
        for name in ["day", "parts"] {
            assert!(written.get(&Path::from(name)).is_some(), "{name}'s checksum noted");
        }
        inner.delete(&Path::from("day")).await.unwrap();
        let n = bytes.len() as u64;
        for range in [n - 8..n, 0..4, 1000..200_000, 0..n] {
            let read = reader.get_range(&Path::from("day"), range.clone()).await.unwrap();
            assert_eq!(&read[..], &bytes[range.start as usize..range.end as usize], "{range:?}");
        }
        assert!(
            reader.get_range(&Path::from("day"), n..n + 4).await.is_err(),
            "past the end: not answered from the kept bytes"
        );
        inner.delete(&Path::from("parts")).await.unwrap();
        inner.delete(&Path::from("t/_delta_log/_last_checkpoint")).await.unwrap();
        assert!(
            reader.get_range(&Path::from("t/_delta_log/_last_checkpoint"), 0..2).await.is_err(),
            "a file of the log is not kept"
        );
        assert!(
            reader.get_range(&Path::from("parts"), 10..20).await.is_err(),
            "an upload in parts is not kept"
        );

        // Newer files push the oldest out once the kept bytes pass their bound.
        let big = vec![7u8; KEEP_FILE as usize];
        for i in 0..=KEPT / KEEP_FILE {
            store.put(&Path::from(format!("big-{i}")), big.clone().into()).await.unwrap();
        }
        inner.delete(&Path::from("big-1")).await.unwrap();
        assert!(reader.get_range(&Path::from("big-1"), 0..4).await.is_ok(), "still kept");
        assert!(reader.get_range(&Path::from("day"), 0..4).await.is_err(), "pushed out: read from the store");
        assert!(written.lock().kept.iter().map(|k| k.len()).sum::<u64>() <= KEPT);
    }
}
