//! Test hooks: points where bf can be made to crash or wait, so tests can prove what a crash or a
//! concurrent writer at exactly that point does. Each is read from the environment only at its point;
//! unset, they cost one lookup. They exist only in a build with the `test-hooks` feature, which the
//! tests' build turns on: in the binary a user builds or installs, every point is inert, whatever
//! the environment says (a variable left in a shell cannot make bf drop a row or wait).

use std::path::Path;

/// Names a point where bf aborts the process, like a `kill -9` there: `before-slice:N`,
/// `after-commit:N`, `before-comment` (apply); `rollback-before-restore`, `rollback-before-comment`,
/// `rollback-before-slice:N`, `rollback-after-commit:N` (rollback). Or a corruption bf's own checks
/// must catch: `drop-row:N` (the slice writer loses one row of slice N, in the rehearsal or the
/// real table), `corrupt-published:N` (the copy of a file slice N publishes is not the rehearsed
/// one) and `rollback-verify` (the rollback's comparison reads the table as the backfill left it).
/// `before-publish-commit:N` aborts after slice N's files are placed in the target, before its
/// commit. `lose-races:N` makes every attempt at slice N's commit, on a table where bf checks
/// concurrent commits itself, lose to a writer that committed first (nothing is committed). In a chain, `before-table:N` aborts before its Nth table (from 0), and `NAME/POINT`
/// names a point in the table called NAME only (`revenue_by_day/before-comment`).
pub const FAULT_ENV: &str = "BF_FAULT";

/// Names a file: before writing slice N (`BF_PAUSE_SLICE=N`), bf creates it and waits while it exists
/// (at most five minutes: a test may wait there for its turn at the tests' shared Spark session),
/// the first time the process reaches that point only.
pub const PAUSE_FILE_ENV: &str = "BF_PAUSE_FILE";
pub const PAUSE_SLICE_ENV: &str = "BF_PAUSE_SLICE";
/// Where the pause is: `before` (the default: before slice N's staleness check), `after-check`
/// (between slice N's check and its commit, where only the commit's conflict check stands),
/// `before-comment` (before the comment commit that ends an apply; no slice named), or
/// `worker-scan` (a cluster worker, as a task of its starts reading a Delta input: a worker that
/// dies mid-query).
pub const PAUSE_POINT_ENV: &str = "BF_PAUSE_POINT";

/// The table of a chain being applied, so `BF_FAULT=NAME/POINT` crashes at POINT in that table only.
static TABLE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// While it lives, fault points are in the table `name` of a chain.
pub(crate) struct InTable;

impl Drop for InTable {
    fn drop(&mut self) {
        *TABLE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

pub(crate) fn in_table(name: &str) -> InTable {
    *TABLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.to_owned());
    InTable
}

/// Aborts the process at a named point when `BF_FAULT` names it: a crash exactly there.
pub(crate) fn fault(point: &str) {
    if corrupt(point) {
        std::process::abort();
    }
}

/// Whether `BF_FAULT` names `point`: for a corruption, the caller corrupts on purpose, so a test
/// proves the check that should catch it does.
pub(crate) fn corrupt(point: &str) -> bool {
    if !cfg!(feature = "test-hooks") {
        return false;
    }
    let Ok(wanted) = std::env::var(FAULT_ENV) else { return false };
    wanted == point
        || TABLE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|table| wanted == format!("{table}/{point}"))
}

/// Waits while the pause file of `BF_PAUSE_FILE` exists, when `BF_PAUSE_SLICE` names this slice.
pub(crate) fn pause_before(index: usize) {
    pause_at("before", Some(index));
}

/// Waits as [`pause_before`] does, with `BF_PAUSE_POINT=after-check`.
pub(crate) fn pause_after_check(index: usize) {
    pause_at("after-check", Some(index));
}

/// Waits while the pause file exists, with `BF_PAUSE_POINT=before-comment`.
pub(crate) fn pause_before_comment() {
    pause_at("before-comment", None);
}

/// Waits while the pause file exists, with `BF_PAUSE_POINT=before-restore`: a rollback checked, its
/// RESTORE not yet committed.
pub(crate) fn pause_before_restore() {
    pause_at("before-restore", None);
}

/// Waits while the pause file exists, with `BF_PAUSE_POINT=worker-scan`, in a cluster worker.
#[cfg(feature = "cluster")]
pub(crate) fn pause_in_worker() {
    pause_at("worker-scan", None);
}

/// Whether bf will pause before slice `index`: what bf reads ahead for it is read first, so the
/// test that changes a file during the pause changes it after it was read.
pub(crate) fn pausing_before(index: usize) -> bool {
    pausing("before", Some(index))
}

fn pausing(point: &str, index: Option<usize>) -> bool {
    if !cfg!(feature = "test-hooks") {
        return false;
    }
    let at = std::env::var(PAUSE_POINT_ENV).unwrap_or_else(|_| "before".to_owned());
    let slice = std::env::var(PAUSE_SLICE_ENV).ok();
    std::env::var_os(PAUSE_FILE_ENV).is_some()
        && at == point
        && index.is_none_or(|index| slice == Some(index.to_string()))
}

fn pause_at(point: &str, index: Option<usize>) {
    let Ok(file) = std::env::var(PAUSE_FILE_ENV) else { return };
    if !pausing(point, index) {
        return;
    }
    // Once per process: a slice written again after a lost race passes its point again, and a
    // second pause, which no test releases, waited out its bound.
    static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if PAUSED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let file = Path::new(&file);
    if std::fs::write(file, b"paused").is_err() {
        return;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
