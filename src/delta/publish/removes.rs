//! What a slice may remove from the target as it is published: derived again from its rehearsal
//! commit and the table, never taken from the saved plan alone ([`Removes`]).

use std::collections::{BTreeSet, HashMap};

use deltalake::DeltaTableError;
use deltalake::kernel::{Action, LogicalFileView};
use serde_json::Value;
use url::Url;

use super::{Publication, PublishError, commit_problem, decoded};
use crate::delta::store;
use crate::delta::table::FileDates;
use crate::window::Slice;

/// The name a rehearsal's clone gives its copy of the target's file `original` (its path relative
/// to the target's root, decoded): the sha256 of that path, so that what a rehearsal commit removes
/// names the target's file it stands for without anything the saved plan says.
pub fn localized_name(original: &str) -> String {
    use sha2::Digest;
    format!("{LOCALIZED}/{}.parquet", hex::encode(sha2::Sha256::digest(original.as_bytes())))
}

/// The folder of a rehearsal holding its clone's copies of the target's files.
pub const LOCALIZED: &str = "bf-localized";

/// What a slice may remove from the target: the one rule, applied as the slice commits.
///
/// The saved plan lists the files (`Publication::removes`), but a saved plan is a file anyone on
/// its way may edit: a list grown by the table's other files would delete rows far outside the
/// window. So the removes are derived again, from the table and the rehearsal, and the list only
/// has to agree with them:
/// 1. the rehearsal's commit is this slice's, of this plan (its ledger keys say so);
/// 2. each file that commit removed is named as the target names it — a file the clone referenced
///    by its URL, a copy the clone made (named by its original's hash, [`localized_name`]), or a
///    file an earlier slice published — and the target holds it now;
/// 3. each holds rows of the slice's days, as far as the log can tell (its date partition, or the
///    range of its statistics): a replaceWhere of the slice's days rewrites no other file;
/// 4. the saved plan's list is exactly that set.
///
/// Anything else refuses the slice before its commit.
pub(super) struct Removes<'r> {
    pub(super) slice: &'r Slice,
    /// The rehearsal's version holding the slice's commit.
    pub(super) version: u64,
    pub(super) plan_id: &'r str,
    pub(super) target_root: &'r Url,
}

impl Removes<'_> {
    /// The remove actions of the slice's commit, from the rehearsal commit's `actions` and the
    /// target's `live` files; `column` is the date column as the log names it.
    pub(super) fn actions(
        &self,
        actions: &[Value],
        publication: &Publication,
        live: &[LogicalFileView],
        column: &str,
    ) -> Result<Vec<Action>, PublishError> {
        self.is_the_slice_commit(actions)?;
        let by_path: HashMap<String, &LogicalFileView> =
            live.iter().map(|file| (file.path().into_owned(), file)).collect();
        let root = decoded(self.target_root.as_str());
        // Hashed only when a copy is removed: a table partitioned by the date has none.
        let mut by_copy: Option<HashMap<String, &str>> = None;
        let mut derived: BTreeSet<String> = BTreeSet::new();
        let mut gone: Vec<String> = Vec::new();
        for path in actions.iter().filter_map(|a| a.pointer("/remove/path")?.as_str()).map(decoded) {
            let target_path = if let Some(relative) = path.strip_prefix(&root) {
                relative.to_owned()
            } else if path.starts_with(&format!("{LOCALIZED}/")) {
                let copies = by_copy
                    .get_or_insert_with(|| by_path.keys().map(|p| (localized_name(p), p.as_str())).collect());
                match copies.get(&path) {
                    Some(original) => (*original).to_owned(),
                    None => {
                        // No live file's path hashes to that name: the original is gone (or the
                        // plan was made by a bf that named its copies otherwise: plan again).
                        gone.push(format!("the file its rehearsal copied as {path}"));
                        continue;
                    }
                }
            } else if store::uri(&path).is_none() {
                // A file an earlier slice wrote: published under the same path.
                path
            } else {
                return Err(
                    self.refused(format!("its rehearsal removes {path}, which is not a file of the target"))
                );
            };
            derived.insert(target_path);
        }
        gone.extend(derived.iter().filter(|p| !by_path.contains_key(p.as_str())).cloned());
        if !gone.is_empty() {
            return Err(PublishError::Delta(DeltaTableError::Generic(format!(
                "slice {} removes files the table no longer holds: {}",
                self.slice.index,
                gone.join(", ")
            ))));
        }
        let listed: BTreeSet<String> = publication.removes.iter().cloned().collect();
        if listed != derived {
            let extra: Vec<&str> = listed.difference(&derived).map(String::as_str).collect();
            let missing: Vec<&str> = derived.difference(&listed).map(String::as_str).collect();
            let mut why = Vec::new();
            if !extra.is_empty() {
                why.push(format!(
                    "it lists {} its rehearsal did not remove: {}",
                    crate::words::count(extra.len(), "file"),
                    extra.join(", ")
                ));
            }
            if !missing.is_empty() {
                why.push(format!(
                    "it leaves out {} its rehearsal removed: {}",
                    crate::words::count(missing.len(), "file"),
                    missing.join(", ")
                ));
            }
            return Err(self.refused(format!(
                "the saved plan's files to remove are not the rehearsal's ({}): the saved plan was changed \
                 after `bf plan`; plan again and review it",
                why.join("; ")
            )));
        }
        let (first, last) = (self.slice.first, self.slice.last);
        let mut removes = Vec::with_capacity(derived.len());
        for path in &derived {
            let file = by_path[path.as_str()];
            let dates = FileDates::read(&file.partition_values_map(), file.stats().as_deref(), column);
            if !dates.may_overlap(first, last) {
                return Err(self.refused(format!(
                    "it would remove {path} {}, which holds none of the slice's days",
                    dates.describe()
                )));
            }
            removes.push(Action::Remove(file.remove_action(true)));
        }
        Ok(removes)
    }

    /// The rehearsal's commit at `version` must be this plan's commit of this slice: a saved plan
    /// pointing a slice at another slice's commit would publish that slice's rows over these days.
    fn is_the_slice_commit(&self, actions: &[Value]) -> Result<(), PublishError> {
        let info: HashMap<String, Value> = actions
            .iter()
            .find_map(|a| a.get("commitInfo")?.as_object().cloned())
            .map(|info| info.into_iter().collect())
            .unwrap_or_default();
        let keys = crate::delta::ledger::Keys::read(&info).ok().flatten();
        let ours = keys.is_some_and(|keys| {
            keys.rehearsal == Some(true)
                && keys.slice == Some(self.slice.index)
                && keys.plan_id.as_deref() == Some(self.plan_id)
        });
        if !ours {
            return Err(self.refused(format!(
                "the rehearsal's commit {} is not this plan's rehearsal of slice {}",
                self.version, self.slice.index
            )));
        }
        Ok(())
    }

    fn refused(&self, why: String) -> PublishError {
        commit_problem(
            self.version,
            format!("cannot be published as slice {}: {why}; nothing was committed", self.slice.index),
        )
    }
}
