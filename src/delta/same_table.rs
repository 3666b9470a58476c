//! Whether a table is still the one a plan read. A Delta table's versions are numbers in its log,
//! and mean something only while the log is the same log: a table dropped and created again at
//! its place (a new `metaData.id`, its versions counting from 0 again), or its folder restored from
//! a backup and written again (the same id, another commit under a number already used), has
//! versions that are another history's. The pre-version a plan records, and the version of a Delta
//! input it pins, would then name other rows: an apply would replace the window of a table nobody
//! reviewed, and its rollback would "restore" a version of that other table.
//!
//! So a plan records, beside each version it relies on, the table's id and the sha256 of that
//! version's commit, and `bf apply` compares them with the table as it is
//! ([`crate::apply::check_stale`] says what makes a plan stale; this says when a table is another).

use deltalake::{DeltaTable, DeltaTableError};

/// The table's id (`metaData.id`), made when the table was created and kept by every commit.
pub fn table_id(table: &DeltaTable) -> Option<String> {
    table.snapshot().ok().map(|snapshot| snapshot.metadata().id().to_owned())
}

/// The sha256 of version `version`'s commit in `table`'s log, or `None` where the log no longer
/// holds it (cleaned up behind a checkpoint, `delta.logRetentionDuration`). A commit's file is
/// never rewritten, so the same version of the same log always hashes alike.
pub async fn commit_sha256(table: &DeltaTable, version: u64) -> Result<Option<String>, DeltaTableError> {
    let bytes = table.log_store().read_commit_entry(version as _).await?;
    Ok(bytes.map(|bytes| crate::rehearse::plan::sha256_hex(&bytes)))
}

/// What a plan recorded of a table at the version it relies on.
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'r> {
    /// `None` in a plan saved by a bf before format 5, which did not record it.
    pub table_id: Option<&'r str>,
    pub version: u64,
    pub commit_sha256: Option<&'r str>,
}

/// The same table as it is now: its id, its latest version, and the hash of the recorded version's
/// commit (`None` where the log no longer holds it, or the table has no such version).
#[derive(Debug, Clone, Copy)]
pub struct Now<'n> {
    pub table_id: Option<&'n str>,
    pub latest: u64,
    pub commit_sha256: Option<&'n str>,
}

/// Why the table `now` is not the one `recorded`, or `None` when it is as far as what was recorded
/// tells: a commit cleaned up since cannot be compared, and the id still is.
pub fn another_table(recorded: Recorded, now: Now) -> Option<String> {
    if let (Some(planned), Some(now)) = (recorded.table_id, now.table_id)
        && planned != now
    {
        return Some(format!(
            "it is another table than the one the plan read: its id is {now}, the plan's was {planned} \
             (it was dropped and created again, or replaced)"
        ));
    }
    if now.latest < recorded.version {
        return Some(format!(
            "its log ends at version {}, before version {} the plan read: its history was rewound (the table \
             restored from a backup, or made again)",
            now.latest, recorded.version
        ));
    }
    match (recorded.commit_sha256, now.commit_sha256) {
        (Some(planned), Some(now)) if planned != now => Some(format!(
            "its version {} is another commit than the one the plan read: its history was rewound and written \
             again (the table restored from a backup, or made again)",
            recorded.version
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLANNED: Recorded = Recorded { table_id: Some("a"), version: 5, commit_sha256: Some("h5") };

    #[test]
    fn the_same_table_further_on_is_the_same() {
        let now = Now { table_id: Some("a"), latest: 9, commit_sha256: Some("h5") };
        assert_eq!(another_table(PLANNED, now), None);
        // Its commit cleaned up since: the id still tells.
        assert_eq!(another_table(PLANNED, Now { commit_sha256: None, ..now }), None);
        // A plan that recorded nothing of it (an older bf): nothing to compare.
        let older = Recorded { table_id: None, version: 5, commit_sha256: None };
        assert_eq!(another_table(older, Now { table_id: Some("b"), commit_sha256: Some("x"), ..now }), None);
    }

    #[test]
    fn another_id_an_earlier_end_or_another_commit_is_another_table() {
        let now = Now { table_id: Some("a"), latest: 9, commit_sha256: Some("h5") };
        let says = |now| another_table(PLANNED, now).unwrap_or_default();
        assert!(says(Now { table_id: Some("b"), ..now }).contains("its id is b, the plan's was a"));
        assert!(
            says(Now { latest: 3, commit_sha256: None, ..now })
                .contains("ends at version 3, before version 5")
        );
        assert!(says(Now { commit_sha256: Some("other"), ..now }).contains("version 5 is another commit"));
    }
}
