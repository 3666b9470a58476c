//! Reads of a bucket that take what the next reads will want: a query session's view of a store
//! that fetches the 512 KiB ending where a ranged read ends, and answers later reads inside them
//! from memory.
//!
//! DataFusion reads a Parquet file's footer with one request of its last 512 KiB (its metadata size
//! hint), which takes a small file whole; deltalake's scan builds its Parquet source without that
//! hint (deltalake-core 1.1.3, `table_provider/next/scan`), so each file costs a request for the
//! footer's last 8 bytes, one for the metadata, and one for the data. A table partitioned by day is
//! mostly small files and a plan reads each twice (the target before, the rehearsal after):
//! measured on W1 partitioned, 2,196 of the plan's 3,181 requests (docs/BENCHMARKS.md, "S3: where
//! the requests go"). Here the first ranged read of a file asks for up to [`AHEAD`] bytes ending
//! where it ends — the hint restored — and keeps them, so a small file is one request and a big
//! one's metadata comes with its footer. What is kept is bounded by [`HELD`], oldest first out. A
//! Delta data file never changes under its name, so what was read stays true for the session.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{
    Attributes, GetOptions, GetRange, GetResult, GetResultPayload, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use super::checksummed::Written;
use super::layer::layer;

/// How far back from a ranged read's end the first read of a file reaches: DataFusion's default
/// metadata size hint.
const AHEAD: u64 = 512 * 1024;
/// What all kept reads may hold together.
const HELD: usize = 64 << 20;

/// Bytes `range` of a file, with what the read that fetched them said about the file.
pub(super) struct Kept {
    location: Path,
    range: Range<u64>,
    meta: ObjectMeta,
    attributes: Attributes,
    bytes: Bytes,
}

impl Kept {
    /// A whole file, as it was written.
    pub(super) fn whole(meta: ObjectMeta, bytes: Bytes) -> Kept {
        let range = 0..bytes.len() as u64;
        Kept { location: meta.location.clone(), range, meta, attributes: Attributes::default(), bytes }
    }

    pub(super) fn holds(&self, location: &Path) -> bool {
        &self.location == location
    }

    pub(super) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The bytes `asked` of the file, if this holds them all.
    pub(super) fn answer(&self, asked: &GetRange) -> Option<GetResult> {
        let size = self.meta.size;
        let range = match asked {
            GetRange::Bounded(r) => r.start..r.end.min(size),
            GetRange::Offset(start) => *start..size,
            GetRange::Suffix(n) => size.saturating_sub(*n)..size,
        };
        if range.start >= range.end || range.start < self.range.start || range.end > self.range.end {
            return None;
        }
        let from = (range.start - self.range.start) as usize;
        let bytes = self.bytes.slice(from..from + (range.end - range.start) as usize);
        Some(GetResult {
            payload: GetResultPayload::Stream(Box::pin(futures::stream::once(async move { Ok(bytes) }))),
            meta: self.meta.clone(),
            range,
            attributes: self.attributes.clone(),
        })
    }
}

/// `inner`, reading ahead of a file's first ranged read and keeping what it read for the session;
/// a file this process wrote and still holds ([`Written`]) is not read at all.
pub(super) struct Prefetched {
    inner: Arc<dyn ObjectStore>,
    kept: Mutex<VecDeque<Arc<Kept>>>,
    written: Written,
}

impl Prefetched {
    pub(super) fn new(inner: Arc<dyn ObjectStore>, written: Written) -> Prefetched {
        Prefetched { inner, kept: Mutex::new(VecDeque::new()), written }
    }

    fn answer(&self, location: &Path, asked: &GetRange) -> Option<GetResult> {
        if let Some(answer) = self.written.answer(location, asked) {
            return Some(answer);
        }
        let kept = self.kept.lock().expect("no panic holds the lock");
        kept.iter().filter(|k| k.holds(location)).find_map(|k| k.answer(asked))
    }

    fn keep(&self, kept: Kept) {
        let mut all = self.kept.lock().expect("no panic holds the lock");
        all.push_back(Arc::new(kept));
        while all.iter().map(|k| k.bytes.len()).sum::<usize>() > HELD {
            all.pop_front();
        }
    }
}

/// Whether a read is a plain ranged one, which kept bytes can answer: no conditions, no version.
fn plain_range(options: &GetOptions) -> Option<&GetRange> {
    let plain = options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
        && options.version.is_none()
        && !options.head;
    options.range.as_ref().filter(|_| plain)
}

layer!(Prefetched {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let Some(asked) = plain_range(&options).cloned() else {
            return self.inner.get_opts(location, options).await;
        };
        if let Some(answer) = self.answer(location, &asked) {
            return Ok(answer);
        }
        // Only a bounded read, and one no longer than a read ahead, is widened: suffix reads are
        // not every store's (Azure refuses them).
        let wanted = match &asked {
            GetRange::Bounded(wanted) if wanted.end.saturating_sub(wanted.start) <= AHEAD => wanted,
            _ => return self.inner.get_opts(location, options).await,
        };
        let ahead = wanted.end.saturating_sub(AHEAD).min(wanted.start)..wanted.end;
        let read = self.inner.get_opts(location, GetOptions { range: Some(ahead.into()), ..options }).await?;
        let (range, meta, attributes) = (read.range.clone(), read.meta.clone(), read.attributes.clone());
        let kept = Kept { location: location.clone(), range, meta, attributes, bytes: read.bytes().await? };
        let answer = kept.answer(&asked);
        self.keep(kept);
        // A file shorter than the read asked for: the store's own answer, error included.
        match answer {
            Some(answer) => Ok(answer),
            None => {
                self.inner.get_opts(location, GetOptions { range: Some(asked), ..Default::default() }).await
            }
        }
    }
});

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;

    /// Every range reads as the store's own read of it, in a file shorter than a read ahead and
    /// one longer than two; a range past the end is the store's error.
    #[tokio::test]
    async fn every_range_reads_as_the_store_reads_it() {
        let inner = Arc::new(InMemory::new());
        let big: Vec<u8> = (0..AHEAD as usize * 2 + 77).map(|i| (i * 31 % 251) as u8).collect();
        let small = big[..1000].to_vec();
        for (name, data) in [("big", &big), ("small", &small)] {
            inner.put(&Path::from(name), data.clone().into()).await.unwrap();
        }
        let store = Prefetched::new(inner, Written::default());
        for (name, data) in [("big", &big), ("small", &small)] {
            let n = data.len() as u64;
            for range in [n - 8..n, n - 100..n - 8, 0..4, 4..n.min(5000), 0..n, n / 2..n / 2 + 10] {
                let read = store.get_range(&Path::from(name), range.clone()).await.unwrap();
                assert_eq!(&read[..], &data[range.start as usize..range.end as usize], "{name} {range:?}");
            }
            assert!(store.get_range(&Path::from(name), n + 1..n + 5).await.is_err(), "{name}");
        }
        let kept = store.kept.lock().unwrap();
        // The small file's first read (its last 8 bytes) took it whole; the big one's took 512 KiB.
        assert!(kept.iter().any(|k| k.location == Path::from("small") && k.range == (0..1000)));
        let n = big.len() as u64;
        assert!(kept.iter().any(|k| k.location == Path::from("big") && k.range == (n - AHEAD..n)));
    }
}
