//! The sha256 of the next slice's files, read while a slice commits.
//!
//! Publishing checks every file it places against the sha256 the plan recorded. On a disk that held
//! one core ~2.5 ms for a 4 MiB file, slice after slice, while the other idled (docs/BENCHMARKS.md).
//! So while one slice is placed and committed, the files of the next are read on a thread of their
//! own, and the check of a placed file takes that reading only when it provably holds for the bytes
//! that land:
//! - the placed file is the inode that was read (a hard link to it, not a copy);
//! - that file's size, modification and change times were the same before and after the reading,
//!   and are the same just before it is linked. A write to a file sets its change time, which no
//!   one can set back (short of the system clock);
//! - its change time was older than a tick of the filesystem's clock when the reading began: a
//!   write in the same tick as the change before it would leave the times as they were.
//!
//! Any other file — copied, in a bucket, changed since, or changed too recently — is read once it is
//! placed, as every file was before.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;

/// What tells a file's bytes apart on a disk without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Identity {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let found = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        Some(Identity {
            device: found.dev(),
            inode: found.ino(),
            size: found.size(),
            modified: (found.mtime(), found.mtime_nsec()),
            changed: (found.ctime(), found.ctime_nsec()),
        })
    }

    /// Elsewhere nothing is read ahead: every file is read once placed.
    #[cfg(not(unix))]
    fn of(_: &Path) -> Option<Identity> {
        None
    }

    /// Whether the file's last change is more than a tick of its filesystem's clock before `now`.
    /// Times in whole seconds are a filesystem that keeps no finer ones (ext4's small inodes, HFS+,
    /// FAT: up to two seconds a tick); others tick every jiffy on Linux (10 ms at the most).
    fn settled(&self, now: SystemTime) -> bool {
        let tick = match self.changed.1 {
            0 => Duration::from_secs(2),
            _ => Duration::from_millis(100),
        };
        let (Ok(seconds), Ok(nanos)) = (u64::try_from(self.changed.0), u32::try_from(self.changed.1)) else {
            return false;
        };
        UNIX_EPOCH + Duration::new(seconds, nanos) + tick < now
    }
}

/// A file read ahead of its slice: its sha256, and the file as it was while it was read.
#[derive(Debug, Clone)]
pub(super) struct Read {
    identity: Identity,
    pub(super) sha256: String,
}

impl Read {
    /// Reads the file at `path`; `None` when it cannot be read, changed while it was read, or
    /// changed too recently for a later write to show in its times.
    pub(super) fn file(path: &Path) -> Option<Read> {
        let now = SystemTime::now();
        let before = Identity::of(path).filter(|found| found.settled(now))?;
        let (size, sha256) = crate::delta::store::sha256_file(path).ok()?;
        let after = Identity::of(path)?;
        (after == before && size == before.size).then_some(Read { identity: before, sha256 })
    }

    /// Whether the file at `path` is still the one read: asked just before it is linked.
    pub(super) fn unchanged(&self, path: &Path) -> bool {
        Identity::of(path) == Some(self.identity)
    }

    /// Whether the file at `path` is a link to the one read, once placed (placing moved its times).
    pub(super) fn linked_at(&self, path: &Path) -> bool {
        let Identity { device, inode, size, .. } = self.identity;
        Identity::of(path).is_some_and(|f| (f.device, f.inode, f.size) == (device, inode, size))
    }

    pub(super) fn size(&self) -> u64 {
        self.identity.size
    }
}

/// The files of the slices still to publish, read one slice ahead, in the order they publish.
#[derive(Default)]
pub(super) struct ReadAhead {
    /// By the rehearsal's version of each slice's commit: the local files it places, not started.
    waiting: Mutex<VecDeque<(u64, Vec<PathBuf>)>>,
    started: Mutex<HashMap<u64, JoinHandle<HashMap<PathBuf, Read>>>>,
    /// Readings waited for before their slice was taken ([`ReadAhead::settle`]).
    settled: Mutex<HashMap<u64, HashMap<PathBuf, Read>>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ReadAhead {
    /// Queues the slices to publish, in order, and starts reading the first one's files.
    pub(super) fn queue(&self, slices: impl IntoIterator<Item = (u64, Vec<PathBuf>)>) {
        locked(&self.waiting).extend(slices.into_iter().filter(|(_, files)| !files.is_empty()));
        self.start_next();
    }

    /// The files of the slice whose rehearsal commit is `version`, as read ahead (none when their
    /// reading never started: a slice written again after a lost race is read once placed), and the
    /// next slice's reading started beside this one's publishing. On one thread, so the other core
    /// is left to the commit.
    pub(super) async fn take(&self, version: u64) -> HashMap<PathBuf, Read> {
        if let Some(read) = locked(&self.settled).remove(&version) {
            locked(&self.waiting).retain(|(waiting, _)| *waiting != version);
            self.start_next();
            return read;
        }
        let own = locked(&self.started).remove(&version);
        locked(&self.waiting).retain(|(waiting, _)| *waiting != version);
        self.start_next();
        match own {
            Some(reading) => reading.await.unwrap_or_default(),
            None => HashMap::new(),
        }
    }

    /// Waits until the reading of the slice whose rehearsal commit is `version` is over, keeping
    /// what it read for [`ReadAhead::take`]: only for a test that pauses before the slice, so that
    /// what it does in the pause happens after the reading.
    pub(super) async fn settle(&self, version: u64) {
        let Some(reading) = locked(&self.started).remove(&version) else { return };
        let read = reading.await.unwrap_or_default();
        locked(&self.settled).insert(version, read);
    }

    fn start_next(&self) {
        let Some((version, files)) = locked(&self.waiting).pop_front() else { return };
        let reading = tokio::task::spawn_blocking(move || {
            files.into_iter().filter_map(|path| Some((path.clone(), Read::file(&path)?))).collect()
        });
        locked(&self.started).insert(version, reading);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Long enough for the change time of a file written now to be a tick older on any filesystem
    /// whose times have fractions of a second.
    const PAST_A_TICK: Duration = Duration::from_millis(150);

    fn settled_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::thread::sleep(PAST_A_TICK);
        path
    }

    #[test]
    fn a_reading_holds_for_the_file_read_and_its_links_only_while_nothing_wrote_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = settled_file(dir.path(), "part-0.parquet", b"the rehearsed bytes");
        let read = Read::file(&path).expect("a settled file is read ahead");
        let (_, sha256) = crate::delta::store::sha256_file(&path).unwrap();
        assert_eq!((read.sha256.as_str(), read.size()), (sha256.as_str(), 19));
        assert!(read.unchanged(&path));
        let linked = dir.path().join("table-part-0.parquet");
        std::fs::hard_link(&path, &linked).unwrap();
        assert!(read.linked_at(&linked), "a hard link is the file read");
        let copied = dir.path().join("copied.parquet");
        std::fs::copy(&path, &copied).unwrap();
        assert!(!read.linked_at(&copied), "a copy is another file, read once placed");

        // The same number of bytes written over, then the modification time set back by hand: the
        // change time still tells.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"the REHEARSED bytes").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
        assert!(!read.unchanged(&path), "a file written since is read again");
    }

    #[test]
    fn a_file_changed_within_a_tick_or_replaced_is_not_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh.parquet");
        std::fs::write(&fresh, b"just written").unwrap();
        assert!(Read::file(&fresh).is_none(), "a write in the same tick would not show");

        let path = settled_file(dir.path(), "part-1.parquet", b"first");
        let read = Read::file(&path).unwrap();
        let other = settled_file(dir.path(), "other.parquet", b"other");
        std::fs::rename(&other, &path).unwrap();
        assert!(!read.unchanged(&path), "another file at the path is not the one read");
        assert!(Read::file(&dir.path().join("missing.parquet")).is_none());
    }

    #[tokio::test]
    async fn slices_are_read_one_ahead_in_the_order_they_publish() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> =
            (0..3).map(|i| settled_file(dir.path(), &format!("{i}.parquet"), &[i as u8; 64])).collect();
        let ahead = ReadAhead::default();
        ahead.queue([
            (10, vec![files[0].clone()]),
            (11, vec![files[1].clone()]),
            (12, vec![files[2].clone()]),
        ]);
        assert_eq!(locked(&ahead.started).keys().copied().collect::<Vec<_>>(), vec![10]);
        let first = ahead.take(10).await;
        assert!(first.contains_key(&files[0]) && first.len() == 1);
        assert_eq!(
            locked(&ahead.started).keys().copied().collect::<Vec<_>>(),
            vec![11],
            "the next slice only"
        );
        // A slice taken out of order (slices written side by side) is dropped from the queue.
        assert!(ahead.take(12).await.is_empty(), "never started: read once placed");
        assert!(ahead.take(11).await.contains_key(&files[1]));
        assert!(locked(&ahead.waiting).is_empty() && locked(&ahead.started).is_empty());

        // Settled before it is taken (a test pausing before the slice): the reading is over and
        // kept, and taking it starts the next one.
        ahead.queue([(20, vec![files[0].clone()]), (21, vec![files[1].clone()])]);
        ahead.settle(20).await;
        assert!(locked(&ahead.started).is_empty(), "the reading is over");
        assert!(ahead.take(20).await.contains_key(&files[0]), "and kept for its slice");
        assert_eq!(locked(&ahead.started).keys().copied().collect::<Vec<_>>(), vec![21]);
        assert!(ahead.take(21).await.contains_key(&files[1]));
        assert!(locked(&ahead.settled).is_empty());
    }
}
