//! The order published slices must land in: on a table not partitioned by the date, a slice's
//! rehearsal rewrote files the slices before it wrote, so it is published only after them, and
//! only after them *as published* (not recomputed). Both refusals come before anything is written.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures::TryStreamExt;

use super::{Apply, ApplyError, Preflight};
use crate::window::Slice;

impl Apply<'_> {
    /// The slices each slice's published files wait for ([`crate::apply::staleness::predecessors`]).
    fn waits(&self) -> BTreeMap<usize, Vec<usize>> {
        crate::apply::staleness::predecessors(
            self.plan.slices.iter().filter_map(|r| Some((r.index, r.publication.as_ref()?))),
        )
    }

    /// Refuses, before anything is written, pending slices whose published files would rewrite files
    /// slices neither committed nor applied in this run write.
    pub(super) fn refuse_out_of_order(
        &self,
        preflight: &Preflight,
        pending: &[&Slice],
    ) -> Result<(), ApplyError> {
        if preflight.recompute {
            return Ok(());
        }
        let waits = self.waits();
        let running: BTreeSet<usize> = pending.iter().map(|s| s.index).collect();
        let blocked: Vec<(Slice, Vec<usize>)> = pending
            .iter()
            .filter_map(|slice| {
                let missing: Vec<usize> = waits
                    .get(&slice.index)?
                    .iter()
                    .filter(|before| !preflight.done.contains_key(before) && !running.contains(before))
                    .copied()
                    .collect();
                (!missing.is_empty()).then_some((**slice, missing))
            })
            .collect();
        match blocked.is_empty() {
            true => Ok(()),
            false => Err(ApplyError::OutOfOrder(blocked)),
        }
    }

    /// A slice to publish that rewrites files an earlier slice's rehearsal wrote, where that slice
    /// is committed but its files are not in the table: it was written with `--recompute` (or by
    /// a crash's resume under it), so its files are other files. Publishing would remove files the
    /// table does not hold; only recomputing can follow. Refused before anything is written, with
    /// that way out.
    pub(super) async fn refuse_after_recomputed(
        &self,
        preflight: &Preflight,
        pending: &[&Slice],
    ) -> Result<(), ApplyError> {
        if preflight.recompute {
            return Ok(());
        }
        let publication = |index: usize| {
            self.plan.slices.iter().find(|r| r.index == index).and_then(|r| r.publication.as_ref())
        };
        let waits = self.waits();
        let mut live: Option<HashSet<String>> = None;
        let mut blocked = Vec::new();
        for slice in pending {
            let Some(removes) = publication(slice.index).map(|p| &p.removes) else { continue };
            let done_before =
                waits.get(&slice.index).into_iter().flatten().filter(|b| preflight.done.contains_key(b));
            let mut recomputed = Vec::new();
            for before in done_before {
                let written: HashSet<&str> = publication(*before)
                    .into_iter()
                    .flat_map(|p| p.adds.iter().map(|f| f.path.as_str()))
                    .collect();
                if live.is_none() {
                    let files: Vec<_> =
                        preflight.target.get_active_add_actions_by_predicate(None).try_collect().await?;
                    live = Some(files.iter().map(|f| f.path().into_owned()).collect());
                }
                let held = live.as_ref().expect("read above");
                if removes.iter().any(|r| written.contains(r.as_str()) && !held.contains(r)) {
                    recomputed.push(*before);
                }
            }
            if !recomputed.is_empty() {
                blocked.push((**slice, recomputed));
            }
        }
        match blocked.is_empty() {
            true => Ok(()),
            false => Err(ApplyError::AfterRecomputed(blocked)),
        }
    }
}
