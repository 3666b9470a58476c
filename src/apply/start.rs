//! What must hold before a backfill's first slice, beside the plan being fresh (`stale.rs`): a
//! rollback could undo it, and a saved plan of an older format only finishes what an older bf
//! began.

use deltalake::DeltaTable;

use super::error::ApplyError;
use super::stale::TableNow;
use crate::delta::ledger::{self, Entry};
use crate::rehearse::plan::Plan;

/// Refuses to start a backfill no rollback could undo: with the pre-version's commit cleaned up
/// and no checkpoint standing for it, no rollback could load it; with a file of the pre-version
/// holding the window's days vacuumed (another writer replaced it since the plan), not even a
/// window-only rollback could put the window back. A file of another day gone stops only the full
/// rollback: `bf status` says so once applied.
pub(super) async fn refuse_what_no_rollback_undoes(
    plan: &Plan,
    stores: &crate::delta::store::Stores,
    url: &url::Url,
    target: &DeltaTable,
    target_now: &TableNow,
) -> Result<(), ApplyError> {
    let (pre, file) = (plan.target.pre_version, &plan.plan_file.path);
    if target_now.commit_sha256.is_none() && stores.open(url, Some(pre)).await.is_err() {
        return Err(ApplyError::Stale(format!(
            "the table's log no longer holds version {pre} (cleaned up since `bf plan`: \
             delta.logRetentionDuration), so no rollback could go back to it. Nothing was written. Run `bf plan \
             {file}` again: the new plan goes back to a version the log holds."
        )));
    }
    // The pre-version's files are the table's own while nothing was committed since.
    if target.version() == Some(pre) {
        return Ok(());
    }
    let within = crate::rollback::Within { date_column: &plan.target.date_column, window: plan.window };
    match crate::rollback::check_files_exist(stores, url, pre, Some(within)).await {
        Err(crate::rollback::RollbackError::MissingFiles { count, .. }) => Err(ApplyError::Stale(format!(
            "VACUUM removed {count} of version {pre}'s data files holding the window's days since `bf plan` \
             (another writer rewrote them, an OPTIMIZE say), so no rollback could put the window back. Nothing was written. Run \
             `bf plan {file}` again: the new plan goes back to the table as it is."
        ))),
        Err(other) => Err(ApplyError::Delta(other.to_string())),
        Ok(()) => Ok(()),
    }
}

/// A saved plan of an older format lacks records this bf's checks compare (the table's identity,
/// every input's fingerprint): accepted only to finish a backfill the table's ledger already holds
/// — an apply an older bf began. Otherwise editing `format` down would switch those checks off.
pub(super) fn refuse_older_format_unless_resuming(plan: &Plan, since: &[Entry]) -> Result<(), ApplyError> {
    if plan.format >= crate::rehearse::plan::PLAN_FORMAT || !ledger::backfill_ids(since, &plan.id).is_empty()
    {
        return Ok(());
    }
    Err(ApplyError::Stale(format!(
        "the saved plan is of an older format ({}; this bf writes {}), and the table holds no backfill of it to \
         finish: an older plan resumes a backfill already begun, it does not start one. Nothing was written. Run \
         `bf plan {}` again and review it.",
        plan.format,
        crate::rehearse::plan::PLAN_FORMAT,
        plan.plan_file.path
    )))
}
