//! A rollback as OpenLineage runs: each table's rollback is a run of the job `<table>/rollback`,
//! naming the backfill it undoes (its id and its run's id, in the `bf` facet) and the version it
//! put back; START before it writes, COMPLETE with the version it left, FAIL naming why.

use chrono::Utc;

use super::event::{self, DatasetVersion, ErrorMessage, EventType, RunEvent};
use super::facet::{BfRunFacet, Days, Operation, RollbackFacts};
use super::runs::{self, Lineage};
use crate::rollback::{RollbackPlan, RollbackReport};

/// One table's rollback: what its events say whatever happens.
#[derive(Debug, Clone)]
pub struct RollbackRun {
    run_id: uuid::Uuid,
    table: String,
    url: url::Url,
    facet: BfRunFacet,
}

impl RollbackRun {
    /// The rollback of `plan`'s backfill.
    pub fn of(plan: &RollbackPlan, window_only: bool) -> RollbackRun {
        let backfill = &plan.backfill.backfill;
        let table =
            runs::job_table(plan.catalog.as_ref().map(ToString::to_string).as_deref(), plan.url.as_str());
        RollbackRun {
            run_id: runs::run_id(&["bf", "rollback", &backfill.backfill_id]),
            table,
            url: plan.url.clone(),
            facet: BfRunFacet {
                operation: Operation::Rollback,
                backfill_id: Some(backfill.backfill_id.clone()),
                backfill_run_id: Some(runs::backfill_run_id(&backfill.backfill_id)),
                plan_id: Some(backfill.plan_id.clone()),
                reason: backfill.reason.clone(),
                table: plan.catalog.as_ref().map_or_else(|| plan.table.clone(), ToString::to_string),
                window: Some(Days { first: backfill.window.start, last: backfill.window.end }),
                slice: None,
                chain: backfill.cascade.as_ref().map(|c| c.id.clone()),
                pre_version: Some(backfill.pre_version),
                post_version: None,
                plan_sha256: Some(backfill.plan_sha256.clone()),
                plan_file: None,
                rollback: Some(RollbackFacts {
                    restored_version: backfill.pre_version,
                    window_only,
                    commits: 0,
                }),
                pull_request: None,
            },
        }
    }

    /// A RESTORE of `version` of the table at `url`, no backfill's.
    pub fn to_version(url: &url::Url, version: u64) -> RollbackRun {
        RollbackRun {
            run_id: uuid::Uuid::new_v4(),
            table: runs::url_table_name(url.as_str()),
            url: url.clone(),
            facet: BfRunFacet {
                operation: Operation::Rollback,
                backfill_id: None,
                backfill_run_id: None,
                plan_id: None,
                reason: format!("bf rollback --to-version {version}"),
                table: crate::delta::store::display_url(url),
                window: None,
                slice: None,
                chain: None,
                pre_version: None,
                post_version: None,
                plan_sha256: None,
                plan_file: None,
                rollback: Some(RollbackFacts { restored_version: version, window_only: false, commits: 0 }),
                pull_request: None,
            },
        }
    }

    /// Which backfill this run undoes.
    pub fn backfill_id(&self) -> Option<&str> {
        self.facet.backfill_id.as_deref()
    }

    pub fn start(&self, lineage: &Lineage) -> RunEvent {
        self.event(lineage, EventType::Start, &self.facet)
    }

    /// COMPLETE: the version the rollback left and the commits it wrote.
    pub fn complete(&self, lineage: &Lineage, report: &RollbackReport) -> RunEvent {
        let mut facet = self.facet.clone();
        facet.post_version = Some(report.new_version);
        facet.rollback = Some(RollbackFacts {
            restored_version: report.restored_version,
            window_only: report.window_only,
            commits: report.wrote.len(),
        });
        let mut event = self.event(lineage, EventType::Complete, &facet);
        let version = DatasetVersion { dataset_version: report.new_version.to_string() };
        let output = &mut event.outputs[0];
        event::put(
            &mut output.facets,
            DatasetVersion::KEY,
            DatasetVersion::schema_url(),
            &lineage.producer,
            version,
        );
        event
    }

    pub fn fail(&self, lineage: &Lineage, message: &str) -> RunEvent {
        let mut event = self.event(lineage, EventType::Fail, &self.facet);
        let error = ErrorMessage { message: message.to_owned(), programming_language: "Rust" };
        event::put(
            &mut event.run.facets,
            ErrorMessage::KEY,
            ErrorMessage::schema_url(),
            &lineage.producer,
            error,
        );
        event
    }

    fn event(&self, lineage: &Lineage, event_type: EventType, facet: &BfRunFacet) -> RunEvent {
        let facet = BfRunFacet { pull_request: lineage.pull_request.clone(), ..facet.clone() };
        let run = lineage.run(self.run_id, lineage.caller.clone(), &facet);
        let job = lineage.job(&self.table, "rollback");
        let mut event = lineage.event(event_type, Utc::now(), run, job, "ROLLBACK");
        event.outputs = vec![lineage.dataset(&self.url)];
        event
    }
}
