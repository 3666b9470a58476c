//! What a rehearsal's slices read and return, against the operator's bounds (`BF_MAX_READ_BYTES`,
//! `BF_MAX_WRITE_ROWS`, `plan_file::bounds`): a plan in an unreviewed pull request cannot keep a
//! runner reading a lake for days, nor make rows out of nothing and write them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use deltalake::datafusion::common::tree_node::TreeNodeRecursion;
use deltalake::datafusion::logical_expr::LogicalPlan;

use crate::plan_file::bounds::Bounds;
use crate::source::run::SourceError;
use crate::window::Slice;

/// The bytes the slices planned so far read and the rows they return; unbounded without the
/// operator's bounds (`bf apply --recompute` of a reviewed plan).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    bounds: Option<Bounds>,
    read: AtomicU64,
    /// The slices counted: a slice's query is planned again to be written (and to lend rows to
    /// another), and counted once.
    counted: Mutex<BTreeSet<usize>>,
    returned: AtomicU64,
}

impl Budget {
    /// A budget held to `bounds`.
    pub(crate) fn within(bounds: Bounds) -> Budget {
        Budget { bounds: Some(bounds), ..Budget::default() }
    }

    /// Refuses the slice, before its inputs are registered (which reads their schemas), when its
    /// `bytes` of input, read once, would already take the rehearsal past the operator's bound.
    pub(crate) fn refuse_past_bound(&self, slice: &Slice, bytes: u64) -> Result<(), SourceError> {
        let Some(max) = self.bounds.as_ref().map(Bounds::max_read_bytes) else { return Ok(()) };
        if self.counted.lock().expect("not poisoned").contains(&slice.index) {
            return Ok(());
        }
        within_read_bound(slice, self.read.load(Ordering::SeqCst).saturating_add(bytes), max)
    }

    /// Adds the `bytes` a slice's query scans to what the rehearsal has read, refusing the slice,
    /// before its query runs, when the total would pass the operator's bound. Counted once a slice.
    pub(crate) fn count_read(&self, slice: &Slice, bytes: u64) -> Result<(), SourceError> {
        let Some(max) = self.bounds.as_ref().map(Bounds::max_read_bytes) else { return Ok(()) };
        if !self.counted.lock().expect("not poisoned").insert(slice.index) {
            return Ok(());
        }
        within_read_bound(slice, self.read.fetch_add(bytes, Ordering::SeqCst).saturating_add(bytes), max)
    }

    /// Adds the `rows` a slice's query returns to what the rehearsal will write, refusing the slice,
    /// before anything is written, when the total passes the operator's bound (or, unset, a bound
    /// that grows with the bytes the queries scanned: rows made out of nothing pass it).
    pub(crate) fn count_rows(&self, slice: &Slice, rows: u64) -> Result<(), SourceError> {
        let Some(bounds) = &self.bounds else { return Ok(()) };
        let total = self.returned.fetch_add(rows, Ordering::SeqCst).saturating_add(rows);
        let (max, why) = bounds.max_write_rows(self.read.load(Ordering::SeqCst));
        match total <= max {
            true => Ok(()),
            false => Err(SourceError::TooManyRows {
                slice: slice.index,
                first: slice.first.to_string(),
                total,
                max,
                why,
            }),
        }
    }
}

/// The bytes a query's plan scans: each scan of an input (a table scan of its name, in the query
/// or a subquery of it) counts the input's `sizes` once more.
pub(crate) fn scanned_bytes(plan: &LogicalPlan, sizes: &BTreeMap<String, u64>) -> u64 {
    let mut scanned = 0u64;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && let Some((_, size)) =
                sizes.iter().find(|(name, _)| name.eq_ignore_ascii_case(scan.table_name.table()))
        {
            scanned = scanned.saturating_add(*size);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    scanned
}

/// The slice's refusal when the rehearsal's `total` bytes of input pass `max`.
fn within_read_bound(slice: &Slice, total: u64, max: u64) -> Result<(), SourceError> {
    match total <= max {
        true => Ok(()),
        false => {
            Err(SourceError::TooMuchInput { slice: slice.index, first: slice.first.to_string(), total, max })
        }
    }
}
