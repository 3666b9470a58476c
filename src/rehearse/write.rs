//! Step 3 of the rehearsal: every slice's source run, written into the rehearsal table through the
//! same [`SliceWriter`] `bf apply` uses, recorded for publishing, and handed to its comparison.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::DeltaTable;

use crate::delta::store;
use crate::delta::table;
use crate::plan_file::{PlanDocument, WriteMode};
use crate::rehearse::compare::{Compared, SliceComparison, finished};
use crate::rehearse::error::{RehearsalError, query_error};
use crate::rehearse::plan::PlanTimings;
use crate::rehearse::progress::{Progress, Stopwatch};
use crate::rehearse::slice_writer::SliceWriter;
use crate::rehearse::target::Target;
use crate::source::routes::Routes;
use crate::source::run::{SliceSource, Source};

/// Slices of at most this many rows (the log's bound on the table's, plus the source's) are compared
/// from memory: each side read once instead of once per query. Bigger ones are read as often as
/// the queries need, so `bf plan`'s memory does not grow with a slice (docs/BENCHMARKS.md, W3).
const IN_MEMORY_ROWS: u64 = 1_000_000;

/// What writing the slices into the rehearsal needs.
pub(crate) struct SliceRun<'a, 's> {
    pub(crate) document: &'a PlanDocument,
    pub(crate) stores: &'a store::Stores,
    pub(crate) target: &'a Target,
    pub(crate) writer: SliceWriter,
    pub(crate) id: &'a str,
    pub(crate) source: &'a Source<'s>,
    pub(crate) schema: deltalake::arrow::datatypes::SchemaRef,
    pub(crate) localized: &'a BTreeMap<String, String>,
    pub(crate) progress: &'a dyn Progress,
}

impl SliceRun<'_, '_> {
    /// Step 3: each slice's source run, written into the rehearsal in one commit, recorded for
    /// publishing, and compared with the target on a task of its own while the next one is written:
    /// deltalake's write of an unpartitioned slice keeps one core busy, the comparison the other.
    /// One slice's comparison at a time, so at most two slices are held in memory. `written` holds
    /// the checksums of the files the rehearsal's writer writes ([`store::Stores::open_checksummed`]).
    pub(crate) async fn write_slices(
        &self,
        slices: &[crate::window::Slice],
        routes: &Routes,
        mut rehearsal: DeltaTable,
        written: &store::Written,
        timings: &mut PlanTimings,
        watch: &mut Stopwatch,
    ) -> Result<(DeltaTable, Vec<Compared>), RehearsalError> {
        let spec = &self.document.plan;
        let column = spec.target.date_column.as_str();
        self.progress.slices(slices.len());
        // Unreadable bounds only mean every slice is read by each query, as big ones are.
        let bounds = table::RowBounds::read(&self.target.table, column).await.ok();
        let shared_spec = Arc::new(spec.clone());
        let mut comparing: Option<tokio::task::JoinHandle<Result<Compared, RehearsalError>>> = None;
        let mut compared: Vec<Compared> = Vec::with_capacity(slices.len());
        for slice in slices {
            watch.lap();
            let lenders: Vec<_> = routes.lenders(slice.index).to_vec();
            let lending: Vec<_> =
                slices.iter().filter(|s| lenders.iter().any(|l| l.slice == s.index)).copied().collect();
            let rows = self.source.for_slice_with(slice, &lending).await?;
            let counts = routes.counts(slice.index);
            check_merge_keys(spec, slice, &rows).await?;
            timings.source += watch.lap();
            let commit = crate::delta::ledger::rehearsal_commit(self.id, slice.index);
            let first = rehearsal.version().map_or(0, |v| v + 1);
            rehearsal = self.writer.write(rehearsal, slice, &rows, commit).await?;
            rehearsal = table::checkpoint_when_due(rehearsal).await;
            timings.write += watch.lap();
            // What `bf apply` will publish: this commit's files, and the target's files it replaces.
            let version = rehearsal.version().unwrap_or(0);
            let publication = crate::delta::publish::record(
                self.stores,
                &rehearsal,
                first..=version,
                &self.target.url,
                self.localized,
                written,
            )
            .await
            .map_err(|e| RehearsalError::Query {
                what: slice.to_string(),
                message: format!("recording what publishing it takes: {e}"),
            })?;
            timings.record += watch.lap();
            self.progress.slice_written(slice.index, &slice.first.to_string());
            if let Some(previous) = comparing.take() {
                compared.push(finished(previous).await?);
            }
            // The rehearsal at this slice's commit holds the slice's rows as its last version will:
            // slices never share a day.
            let before_rows = bounds.as_ref().and_then(|b| b.in_slice(slice));
            let in_memory = before_rows.is_some_and(|before| before + counts.written() <= IN_MEMORY_ROWS);
            let job = SliceComparison {
                sides: (
                    self.stores.clone(),
                    self.target.table.clone(),
                    rehearsal.clone(),
                    self.schema.clone(),
                ),
                spec: shared_spec.clone(),
                slice: *slice,
                rows,
                counts,
                lenders,
                publication,
                in_memory,
            };
            comparing = Some(tokio::spawn(job.run()));
            // Waiting for the comparison before is not a step of its own: the task times itself.
            watch.lap();
        }
        if let Some(last) = comparing.take() {
            compared.push(finished(last).await?);
        }
        Ok((rehearsal, compared))
    }

    /// Every slice's query surveyed, in slice order, before anything is written: which slice
    /// writes each row ([`Routes`]). One at a time: the operator's bound on bytes read is counted
    /// as the slices are, and refuses the same slice whatever the timing.
    pub(crate) async fn routes(&self, slices: &[crate::window::Slice]) -> Result<Routes, RehearsalError> {
        let mut surveys = Vec::with_capacity(slices.len());
        for slice in slices {
            surveys.push(self.source.survey(slice).await?);
        }
        Ok(Routes::new(&surveys, &self.document.plan.window()))
    }
}

/// A merge slice's source must hold one row per key, none of them NULL.
async fn check_merge_keys(
    spec: &crate::plan_file::PlanFile,
    slice: &crate::window::Slice,
    rows: &SliceSource,
) -> Result<(), RehearsalError> {
    let (WriteMode::Merge, Some(key)) = (spec.write.mode, &spec.target.key) else { return Ok(()) };
    let what = slice.to_string();
    let keys =
        crate::rehearse::diff::key_report(rows.rows.clone(), key, 5).await.map_err(query_error(&what))?;
    let refused = |why: String| RehearsalError::Refused(format!("{slice}: {why}"));
    // A NULL key matches nothing: each rerun of the merge would add the row again.
    if keys.null_rows > 0 {
        return Err(refused(format!(
            "{} a NULL in the key ({}), and a merge matches rows by key",
            match keys.null_rows {
                1 => "1 source row has".to_owned(),
                n => format!("{n} source rows have"),
            },
            key.join(", ")
        )));
    }
    // A merge takes one source row per key; two would leave the slice's result to chance.
    if keys.repeated > 0 {
        return Err(refused(format!(
            "the source has several rows for {}, and a merge needs one row per key: {}",
            crate::words::count(keys.repeated, "key"),
            keys.samples.join("; ")
        )));
    }
    Ok(())
}
