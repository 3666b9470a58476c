//! An apply as OpenLineage runs, emitted as it goes: the backfill of each table is a run of the job
//! `<table>/backfill` (START once the apply passed its preflight, COMPLETE or FAIL at the end), and
//! each slice a child run of `<table>/backfill/slice` with the `parent` and `nominalTime` facets
//! (START before its commit, COMPLETE with the commit's statistics, FAIL naming why).
//!
//! One task of a fanned-out run (`bf apply --slice N`) emits its slices' runs only, children of the
//! task that ran them when the orchestrator passed its run (`OPENLINEAGE_PARENT_ID`), else of the
//! backfill's run; `--finish` emits the backfill's run.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::event::{
    self, Assertion, DataQualityAssertions, Dataset, DatasetVersion, ErrorMessage, EventType, NominalTime,
    OutputStatistics, Parent, RunEvent, RunRef,
};
use super::facet::{BfRunFacet, Days, Operation, SliceDays};
use super::runs::{self, Lineage};
use super::transport::Emitter;
use crate::apply::cascade::{ChainApplyError, ChainProgress};
use crate::apply::{ApplyProgress, ApplyReport, SliceOutcome, SliceStatus};
use crate::delta::publish::Written;
use crate::rehearse::plan::Plan;
use crate::window::Slice;

/// Told about an apply as it goes, it emits the runs' events through an [`Emitter`].
pub struct ApplyLineage<'a> {
    lineage: Lineage,
    emitter: &'a Emitter,
    root: &'a Plan,
    /// What every event of a table of the chain repeats, read once: by place in the chain.
    tables: Vec<Table<'a>>,
    fan_out: bool,
    state: Mutex<State>,
}

/// A table of the chain as its events name it.
struct Table<'a> {
    plan: &'a Plan,
    name: String,
    inputs: Vec<Dataset>,
    output: Dataset,
}

#[derive(Default)]
struct State {
    /// The table being applied: its place in the chain, and its backfill id.
    current: Option<(usize, String)>,
    /// Slices started and not done.
    started: BTreeMap<usize, Slice>,
}

impl<'a> ApplyLineage<'a> {
    /// `fan_out`: one task's slices of a fanned-out run (`--slice`), whose backfill's run is
    /// `--finish`'s.
    pub fn new(lineage: Lineage, emitter: &'a Emitter, root: &'a Plan, fan_out: bool) -> ApplyLineage<'a> {
        let tables = root
            .chain()
            .into_iter()
            .map(|plan| Table {
                plan,
                name: runs::table_name(plan),
                inputs: inputs(&lineage, plan),
                output: lineage.dataset(&url(&plan.target.uri)),
            })
            .collect();
        ApplyLineage { lineage, emitter, root, tables, fan_out, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn table(&self, position: usize) -> &Table<'a> {
        &self.tables[position.min(self.tables.len() - 1)]
    }

    /// The apply finished: each table's backfill completes with what it wrote.
    pub fn completed(&self, reports: &[ApplyReport]) {
        if self.fan_out || !self.emitter.is_on() {
            return;
        }
        for (position, report) in reports.iter().enumerate() {
            self.emitter.emit(self.backfill_complete(self.table(position), report, Utc::now()));
        }
    }

    /// The apply stopped: the slices it was writing and its table's backfill fail with `message`;
    /// the tables of the chain applied before it complete.
    pub fn failed(&self, stopped: &ChainApplyError, message: &str) {
        if !self.emitter.is_on() {
            return;
        }
        let at = Utc::now();
        let current = self.fail_slices(message, at);
        if self.fan_out {
            return;
        }
        for (position, report) in stopped.applied.iter().enumerate() {
            self.emitter.emit(self.backfill_complete(self.table(position), report, at));
        }
        if let Some((position, backfill_id)) = current.filter(|(p, _)| *p == stopped.position) {
            self.fail_backfill(position, &backfill_id, message, at);
        }
    }

    /// The operator stopped the apply (Ctrl-C): the slices it was writing and the backfill of the
    /// table it was at fail with `message`. The resume continues the same runs and completes them.
    pub fn interrupted(&self, message: &str) {
        if !self.emitter.is_on() {
            return;
        }
        let at = Utc::now();
        let current = self.fail_slices(message, at);
        if let Some((position, backfill_id)) = current.filter(|_| !self.fan_out) {
            self.fail_backfill(position, &backfill_id, message, at);
        }
    }

    /// Fails the slices the apply started and did not finish; returns the table it was at (its
    /// position) and its backfill.
    fn fail_slices(&self, message: &str, at: chrono::DateTime<Utc>) -> Option<(usize, String)> {
        let (current, started) = {
            let mut state = self.state();
            (state.current.clone(), std::mem::take(&mut state.started))
        };
        if let Some((position, backfill_id)) = &current {
            for slice in started.values() {
                let mut event =
                    self.slice_event(self.table(*position), backfill_id, slice, EventType::Fail, at);
                failure(&mut event, &self.lineage.producer, message);
                self.emitter.emit(event);
            }
        }
        current
    }

    fn fail_backfill(&self, position: usize, backfill_id: &str, message: &str, at: chrono::DateTime<Utc>) {
        let mut event = self.backfill_event(self.table(position), backfill_id, EventType::Fail, at);
        failure(&mut event, &self.lineage.producer, message);
        self.emitter.emit(event);
    }

    /// The `bf` facet of a run of a table's backfill.
    fn facet(&self, table: &Table, backfill_id: &str, operation: Operation) -> BfRunFacet {
        let plan = table.plan;
        BfRunFacet {
            operation,
            backfill_id: Some(backfill_id.to_owned()),
            backfill_run_id: (operation == Operation::Slice).then(|| runs::backfill_run_id(backfill_id)),
            plan_id: Some(plan.id.clone()),
            reason: plan.reason.clone(),
            table: plan
                .target
                .catalog
                .as_ref()
                .map_or_else(|| crate::delta::store::display_url(&url(&plan.target.uri)), |c| c.name.clone()),
            window: Some(Days { first: plan.window.start, last: plan.window.end }),
            slice: None,
            chain: (self.tables.len() > 1).then(|| self.root.id.clone()),
            pre_version: Some(plan.target.pre_version),
            post_version: None,
            plan_sha256: Some(plan.plan_file.sha256.clone()),
            plan_file: Some(plan.plan_file.path.clone()),
            rollback: None,
            pull_request: self.lineage.pull_request.clone(),
        }
    }

    fn backfill_job(&self, table: &Table) -> event::JobId {
        self.lineage.job(&table.name, "backfill")
    }

    /// An event of a table's backfill run: its inputs and the table it writes.
    fn backfill_event(
        &self,
        table: &Table,
        backfill_id: &str,
        event_type: EventType,
        at: DateTime<Utc>,
    ) -> RunEvent {
        let bf = self.facet(table, backfill_id, Operation::Backfill);
        let run = self.lineage.run(runs::backfill_run_id(backfill_id), self.lineage.caller.clone(), &bf);
        let job = self.backfill_job(table);
        let mut event = self.lineage.event(event_type, at, run, job, "BACKFILL");
        event.inputs = table.inputs.clone();
        event.outputs = vec![table.output.clone()];
        event
    }

    /// A slice's run: a child of the backfill's run, or of the task that ran it in a fan-out.
    fn slice_event(
        &self,
        table: &Table,
        backfill_id: &str,
        slice: &Slice,
        event_type: EventType,
        at: DateTime<Utc>,
    ) -> RunEvent {
        let mut bf = self.facet(table, backfill_id, Operation::Slice);
        bf.slice = Some(SliceDays { index: slice.index, first: slice.first, last: slice.last });
        let backfill = RunRef::new(runs::backfill_run_id(backfill_id), self.backfill_job(table));
        let parent = match (self.fan_out, self.lineage.caller.clone()) {
            (true, Some(caller)) => caller,
            (_, caller) => {
                // The root of the hierarchy: the orchestrator's root, else the run that started bf.
                let root = caller.map(|c| c.root.unwrap_or(c.parent));
                Parent { parent: backfill, root }
            }
        };
        let mut run = self.lineage.run(runs::slice_run_id(backfill_id, slice.index), Some(parent), &bf);
        let nominal = NominalTime::days(slice.first, slice.last);
        event::put(
            &mut run.facets,
            NominalTime::KEY,
            NominalTime::schema_url(),
            &self.lineage.producer,
            nominal,
        );
        let job = self.lineage.job(&table.name, "backfill/slice");
        let mut event = self.lineage.event(event_type, at, run, job, "SLICE");
        event.inputs = table.inputs.clone();
        event.outputs = vec![table.output.clone()];
        event
    }

    /// The backfill's COMPLETE: the version it left, what its slices wrote, and its checks.
    fn backfill_complete(&self, table: &Table, report: &ApplyReport, at: DateTime<Utc>) -> RunEvent {
        let plan = table.plan;
        let mut event = self.backfill_event(table, &report.backfill_id, EventType::Complete, at);
        if let Some(bf) = event.run.facets.get_mut(BfRunFacet::KEY) {
            bf["postVersion"] = report.post_version.into();
        }
        // Slices an earlier run committed wrote the rehearsal's files too: the plan knows them.
        let written: Vec<Option<Written>> = report
            .slices
            .iter()
            .map(|outcome| {
                outcome.written.or_else(|| {
                    let rehearsed = plan.slices.iter().find(|s| s.index == outcome.index)?;
                    rehearsed.publication.as_ref().map(Written::of)
                })
            })
            .collect();
        let output = &mut event.outputs[0];
        statistics(&self.lineage.producer, output, written.iter().copied(), report.post_version);
        // A check holds when it held in every slice it ran in.
        let mut held: Vec<Assertion> = Vec::new();
        for check in &plan.checks {
            match held.iter_mut().find(|a| a.name == check.name) {
                Some(assertion) => assertion.success &= check.passed,
                None => held.push(Assertion {
                    assertion: serde_json::to_value(check.kind)
                        .ok()
                        .and_then(|k| k.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    success: check.passed,
                    name: check.name.clone(),
                }),
            }
        }
        let assertions = DataQualityAssertions { assertions: held };
        if !assertions.assertions.is_empty() {
            let producer = &self.lineage.producer;
            let url = DataQualityAssertions::schema_url();
            event::put(&mut output.facets, DataQualityAssertions::KEY, url, producer, assertions);
        }
        event
    }
}

impl ApplyProgress for ApplyLineage<'_> {
    fn writing(&self, plan: &Plan, backfill_id: &str) {
        if !self.emitter.is_on() {
            return;
        }
        let position = self.tables.iter().position(|t| t.plan.id == plan.id).unwrap_or(0);
        self.state().current = Some((position, backfill_id.to_owned()));
        if !self.fan_out {
            let event = self.backfill_event(self.table(position), backfill_id, EventType::Start, Utc::now());
            self.emitter.emit(event);
        }
    }

    fn slice_started(&self, slice: &Slice) {
        let Some((position, backfill_id)) = self.state().current.clone() else { return };
        self.state().started.insert(slice.index, *slice);
        self.emitter.emit(self.slice_event(
            self.table(position),
            &backfill_id,
            slice,
            EventType::Start,
            Utc::now(),
        ));
    }

    fn slice_done(&self, outcome: &SliceOutcome) {
        let Some((position, backfill_id)) = self.state().current.clone() else { return };
        // A slice committed by an earlier run was that run's to tell.
        let Some(slice) = self.state().started.remove(&outcome.index) else { return };
        let table = self.table(position);
        let mut event = self.slice_event(table, &backfill_id, &slice, EventType::Complete, Utc::now());
        if let (SliceStatus::Committed, Some(version)) = (outcome.status, outcome.version) {
            if let Some(bf) = event.run.facets.get_mut(BfRunFacet::KEY) {
                bf["postVersion"] = version.into();
            }
            statistics(
                &self.lineage.producer,
                &mut event.outputs[0],
                std::iter::once(outcome.written),
                version,
            );
        }
        self.emitter.emit(event);
    }
}

impl ChainProgress for ApplyLineage<'_> {}

/// `outputStatistics` and `version` on an output: the sum of what `written` added — none where a
/// part's rows are not known, as the facet requires its row count — and the version the run left.
fn statistics(
    producer: &str,
    output: &mut Dataset,
    written: impl Iterator<Item = Option<Written>>,
    version: u64,
) {
    let total = written.map(|part| part.and_then(|p| Some((p.rows?, p.bytes)))).try_fold(
        OutputStatistics { row_count: 0, size: 0 },
        |total, part| {
            let (rows, bytes) = part?;
            Some(OutputStatistics { row_count: total.row_count + rows, size: total.size + bytes })
        },
    );
    if let Some(total) = total {
        event::put(
            &mut output.output_facets,
            OutputStatistics::KEY,
            OutputStatistics::schema_url(),
            producer,
            total,
        );
    }
    let version = DatasetVersion { dataset_version: version.to_string() };
    event::put(&mut output.facets, DatasetVersion::KEY, DatasetVersion::schema_url(), producer, version);
}

/// `errorMessage` on a failed run's event.
fn failure(event: &mut RunEvent, producer: &str, message: &str) {
    let error = ErrorMessage { message: message.to_owned(), programming_language: "Rust" };
    event::put(&mut event.run.facets, ErrorMessage::KEY, ErrorMessage::schema_url(), producer, error);
}

fn url(uri: &str) -> url::Url {
    url::Url::parse(uri).unwrap_or_else(|_| url::Url::parse("file:///").expect("a URL"))
}

/// What a backfill reads: its Delta inputs at the version it pinned (a downstream plan's upstream
/// table, not the rehearsal it read it from), its folders, and the files of its other inputs,
/// one dataset per input — the folder holding its files when they are several.
pub(super) fn inputs(lineage: &Lineage, plan: &Plan) -> Vec<Dataset> {
    let mut named: BTreeMap<String, Dataset> = BTreeMap::new();
    for input in &plan.delta_inputs {
        let (uri, version) = match &input.stands_for {
            Some(upstream) => (upstream.as_str(), None),
            None => (input.uri.as_str(), Some(input.version)),
        };
        let mut dataset = lineage.dataset(&url(uri));
        if let Some(version) = version {
            let version = DatasetVersion { dataset_version: version.to_string() };
            event::put(
                &mut dataset.facets,
                DatasetVersion::KEY,
                DatasetVersion::schema_url(),
                &lineage.producer,
                version,
            );
        }
        named.insert(input.input.clone(), dataset);
    }
    for folder in &plan.input_folders {
        if let Some(location) = runs::location_url(&folder.location) {
            named.entry(folder.input.clone()).or_insert_with(|| lineage.dataset(&location));
        }
    }
    let mut files: BTreeMap<&str, Vec<url::Url>> = BTreeMap::new();
    for file in &plan.inputs {
        if let Some(location) = runs::location_url(&file.path) {
            files.entry(file.input.as_str()).or_default().push(location);
        }
    }
    for (input, locations) in files {
        if let Some(location) = common_folder(&locations) {
            named.entry(input.to_owned()).or_insert_with(|| lineage.dataset(&location));
        }
    }
    named.into_values().collect()
}

/// One file's URL, or the deepest folder holding all of them.
fn common_folder(locations: &[url::Url]) -> Option<url::Url> {
    let first = locations.first()?;
    if locations.len() == 1 {
        return Some(first.clone());
    }
    let mut common = first.join(".").ok()?;
    while !locations.iter().all(|l| l.as_str().starts_with(common.as_str())) {
        let parent = common.join("..").ok()?;
        if parent == common {
            return None;
        }
        common = parent;
    }
    Some(common)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statistics facet of an output that `written` made, if any.
    fn facet(written: &[Option<Written>]) -> Option<serde_json::Value> {
        let mut output = Dataset {
            namespace: "file".into(),
            name: "/t".into(),
            facets: Default::default(),
            input_facets: Default::default(),
            output_facets: Default::default(),
        };
        statistics("bf", &mut output, written.iter().copied(), 7);
        assert_eq!(output.facets["version"]["datasetVersion"], "7");
        output.output_facets.get(OutputStatistics::KEY).cloned()
    }

    #[test]
    fn statistics_sum_the_parts_and_are_left_out_where_a_part_s_rows_are_unknown() {
        let part = |rows: Option<u64>, bytes: u64| Some(Written { files: 1, bytes, rows });
        let summed = facet(&[part(Some(3), 100), part(Some(4), 50)]).expect("both parts counted");
        assert_eq!((summed["rowCount"].as_u64(), summed["size"].as_u64()), (Some(7), Some(150)));
        assert_eq!(facet(&[part(Some(3), 100), part(None, 50)]), None, "the schema requires rowCount");
        assert_eq!(facet(&[part(Some(3), 100), None]), None);
        assert_eq!(facet(&[]).map(|f| f["rowCount"].clone()), Some(0.into()));
    }
}
