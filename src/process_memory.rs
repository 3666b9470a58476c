//! The bound on what the whole process holds, under the operator's `BF_MEMORY_LIMIT`.
//!
//! The limit is the memory pool of every query bf runs: sorts, joins and aggregations spill or fail
//! inside it. But a scalar function's result is no pool's: three nested `replace()` asked for
//! 10^12 bytes under a 64 MiB limit, and a string concatenated with itself through a chain of CTEs
//! doubles at each step; neither is accounted for until the process is killed. So the binary's
//! allocator counts what bf holds and, where the operator set a limit, stops bf before an
//! allocation would take it past [`HEADROOM_TIMES`] the limit plus [`HEADROOM`] (the Delta log,
//! the writer's buffers, batches in flight: docs/BENCHMARKS.md measures what a run holds beside its
//! pool). Stopping is safe where it happens: every write of bf's is one Delta commit or nothing, so
//! a process that ends between two allocations leaves each table as a crash would — a rehearsal
//! half made, which the next `bf plan` replaces, or an apply that resumes.
//!
//! Unset, nothing is counted: the allocator is the system's, with one relaxed load beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// The process may hold this many times the operator's limit…
pub const HEADROOM_TIMES: usize = 4;
/// …and this much more, whatever the limit.
pub const HEADROOM: usize = 1 << 30;

/// The exit code of a process stopped at its bound.
const STOPPED: i32 = 3;

/// The allocator of the `bf` binary.
pub struct Counted;

static BOUND: AtomicUsize = AtomicUsize::new(0);
static HELD: AtomicIsize = AtomicIsize::new(0);
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Bounds the process by the operator's `BF_MEMORY_LIMIT`, where it is set and valid (an invalid
/// one is refused where the policy is read). Called first thing: what was held before is not
/// counted, and freeing it counts for nothing either.
pub fn bound_by_operator_limit() {
    if let Ok(Some(limit)) = bf::delta::memory::limit() {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        BOUND.store(limit.saturating_mul(HEADROOM_TIMES).saturating_add(HEADROOM), Ordering::SeqCst);
    }
}

/// Counts `size` more bytes held, stopping the process instead where they would pass the bound.
fn take(size: usize) {
    let bound = BOUND.load(Ordering::Relaxed);
    if bound == 0 {
        return;
    }
    let held = HELD.fetch_add(size as isize, Ordering::Relaxed).saturating_add(size as isize);
    if held > bound as isize && !STOPPING.swap(true, Ordering::SeqCst) {
        stop(held as usize, bound);
    }
}

fn give(size: usize) {
    if BOUND.load(Ordering::Relaxed) != 0 {
        HELD.fetch_sub(size as isize, Ordering::Relaxed);
    }
}

/// Says why, on stderr, without allocating, and ends the process. (Other threads allocating
/// meanwhile are let through: the first to pass the bound ends it.)
fn stop(held: usize, bound: usize) -> ! {
    let mut line = [0u8; 512];
    let mut cursor = std::io::Cursor::new(&mut line[..]);
    let _ = writeln!(
        cursor,
        "error: bf stopped before holding {} MiB, past its bound of {} MiB ({HEADROOM_TIMES} times {} and 1 GiB for \
         its own structures): a query builds values no memory pool accounts for (a nested replace(), a string \
         concatenated with itself through CTEs). Every write is one commit, so nothing was written half; the \
         operator raises the bound with {}.",
        held >> 20,
        bound >> 20,
        bf::delta::memory::MEMORY_LIMIT,
        bf::delta::memory::MEMORY_LIMIT,
    );
    let written = cursor.position() as usize;
    let _ = std::io::stderr().write_all(&line[..written]);
    std::process::exit(STOPPED)
}

unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        give(layout.size());
        // SAFETY: as for `dealloc`: `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match new_size >= layout.size() {
            true => take(new_size - layout.size()),
            false => give(layout.size() - new_size),
        }
        // SAFETY: as for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
