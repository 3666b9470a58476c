//! The saved plan against the world it was made in: its text, its inputs, its Delta inputs. (The
//! table's own commits are judged slice by slice, in [`crate::apply::staleness`].)

use super::ApplyError;
use crate::delta::ledger::Entry;
use crate::delta::same_table;
use crate::delta::store::{StoreError, Stores, display_url};
use crate::rehearse::plan::{self, Plan};
use crate::source::run::{DeltaInput, FolderListing};

/// A table a plan relies on, as it is now: its id, its latest version, and the hash of the commit of
/// the version the plan recorded (`None` where the log no longer holds it).
#[derive(Debug, Clone)]
pub struct TableNow {
    pub table_id: Option<String>,
    pub latest: u64,
    pub commit_sha256: Option<String>,
}

impl TableNow {
    /// The table `table`, loaded at its latest version, with version `recorded`'s commit hashed.
    pub(super) async fn read(table: &deltalake::DeltaTable, recorded: u64) -> Result<TableNow, String> {
        TableNow::of(table, same_table::table_id(table), table.version().unwrap_or(0), recorded).await
    }

    /// `table`'s log at `latest` with version `recorded`'s commit hashed: `None` where the log
    /// holds no such file (cleaned up, or a version it never reached).
    async fn of(
        table: &deltalake::DeltaTable,
        table_id: Option<String>,
        latest: u64,
        recorded: u64,
    ) -> Result<TableNow, String> {
        let commit_sha256 = same_table::commit_sha256(table, recorded).await.map_err(|e| e.to_string())?;
        Ok(TableNow { table_id, latest, commit_sha256 })
    }

    fn as_now(&self) -> same_table::Now<'_> {
        same_table::Now {
            table_id: self.table_id.as_deref(),
            latest: self.latest,
            commit_sha256: self.commit_sha256.as_deref(),
        }
    }
}

/// Refuses the plan when its target is not the table it read: dropped and created again at its
/// place, or its history rewound ([`same_table`]). Asked before anything else of the table: every
/// other check would judge another table's commits by the plan's version numbers.
pub(super) fn check_same_target(plan: &Plan, now: &TableNow) -> Result<(), ApplyError> {
    let recorded = same_table::Recorded {
        table_id: plan.target.table_id.as_deref(),
        version: plan.target.pre_version,
        commit_sha256: plan.target.pre_commit_sha256.as_deref(),
    };
    match same_table::another_table(recorded, now.as_now()) {
        None => Ok(()),
        Some(why) => Err(ApplyError::Stale(format!(
            "the table {} is not the one the plan was made against: {why}. Nothing was written. Run `bf plan {}` \
             again, review it, then apply.",
            plan.target.uri, plan.plan_file.path
        ))),
    }
}

/// Each Delta input as it is now, in the plan's order, or why it cannot be read.
pub(super) async fn delta_input_versions(
    stores: &Stores,
    inputs: &[DeltaInput],
) -> Vec<Result<TableNow, String>> {
    let versions = inputs.iter().map(|input| async move {
        if let Some(pinned) = &input.catalog {
            // A name that moved is another table; asking also lends the stores its credentials.
            crate::delta::catalog::check_pinned(pinned).await.map_err(|e| e.to_string())?;
        }
        let url = url::Url::parse(&input.uri).map_err(|e| e.to_string())?;
        // The version is the log's answer; the input's files are the source's to list, at its read.
        let (table, snapshot) = stores.open_log(&url).await.map_err(|e| e.to_string())?;
        let table_id = Some(snapshot.metadata().id().to_owned());
        TableNow::of(&table, table_id, snapshot.version(), input.version).await
    });
    futures::future::join_all(versions).await
}

/// The plan's inputs as they are now, each list in the saved plan's order.
pub struct Now<'n> {
    /// The input files' fingerprints.
    pub inputs: &'n [Result<plan::InputFingerprint, String>],
    /// The input folders' listings.
    pub folders: &'n [Result<FolderListing, StoreError>],
    /// Each Delta input as it is now.
    pub delta: &'n [Result<TableNow, String>],
}

/// Every reason the saved plan no longer describes the world, or `Ok` when it still does.
pub fn check_stale(plan: &Plan, since: &[Entry], now: &Now) -> Result<(), ApplyError> {
    let mut reasons = Vec::new();
    if !plan.appliable() {
        reasons.push(format!(
            "the plan failed its checks or guards:\n{}",
            plan.problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
        ));
    }
    match std::fs::read_to_string(&plan.plan_file.path) {
        Ok(text) if plan::sha256_hex(text.as_bytes()) == plan.plan_file.sha256 => {}
        Ok(text) => reasons.push(format!(
            "the plan file {} changed since `bf plan`:\n{}",
            plan.plan_file.path,
            similar::TextDiff::from_lines(&plan.plan_file.text, &text)
                .unified_diff()
                .header("planned", "now")
                .to_string()
                .trim_end()
        )),
        Err(e) => reasons.push(format!("the plan file {} cannot be read: {e}", plan.plan_file.path)),
    }
    for malformed in since.iter().filter_map(|e| e.mark().err()) {
        reasons.push(malformed.to_string());
    }
    // Other writers' commits since the plan are judged slice by slice ([`Watch`]): only those that
    // touch a slice's days or files make it stale.
    for (input, now) in plan.inputs.iter().zip(now.inputs) {
        if !now.as_ref().is_ok_and(|now| input.matches(now)) {
            reasons.push(match now {
                Ok(_) => format!("input `{}` changed since `bf plan`: {}", input.input, input.path),
                Err(e) => format!("input `{}` cannot be read: {} ({e})", input.input, input.path),
            });
        }
    }
    for (folder, now) in plan.input_folders.iter().zip(now.folders) {
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                reasons.push(format!("input `{}`'s folder cannot be listed: {e}", folder.input));
                continue;
            }
        };
        if now.files != folder.files {
            let added: Vec<&String> = now.files.iter().filter(|f| !folder.files.contains(f)).collect();
            let removed: Vec<&String> = folder.files.iter().filter(|f| !now.files.contains(f)).collect();
            reasons.push(format!(
                "input `{}`'s folder {} changed since `bf plan`: {} added {:?}, {} removed {:?}",
                folder.input,
                crate::delta::store::uri(&folder.location)
                    .map_or(folder.location.clone(), |u| display_url(&u)),
                added.len(),
                added,
                removed.len(),
                removed
            ));
        }
    }
    // Slices read a Delta input at the version the plan read, so a commit to it after the apply
    // began changes nothing a resume writes: only a first apply refuses it. That version must
    // still be the one read, on a resume too.
    let resuming = since.iter().any(|e| e.backfill().is_some_and(|b| b.plan_id == plan.id));
    for (input, now) in plan.delta_inputs.iter().zip(now.delta) {
        if input.uri == plan.target.uri {
            // A target reloaded from itself: its own moves are checked above.
            continue;
        }
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                reasons.push(format!("input `{}` ({}) cannot be read: {e}", input.input, input.uri));
                continue;
            }
        };
        let recorded = same_table::Recorded {
            table_id: input.table_id.as_deref(),
            version: input.version,
            commit_sha256: input.commit_sha256.as_deref(),
        };
        if let Some(why) = same_table::another_table(recorded, now.as_now()) {
            reasons.push(format!("input `{}` ({}): {why}", input.input, input.uri));
        } else if now.latest != input.version && !resuming {
            reasons.push(format!(
                "input `{}` ({}) is at version {}, but the plan read version {}",
                input.input, input.uri, now.latest, input.version
            ));
        }
    }
    if reasons.is_empty() {
        return Ok(());
    }
    reasons.push(format!("Run `bf plan {}` again, review it, then apply.", plan.plan_file.path));
    Err(ApplyError::Stale(reasons.join("\n")))
}
