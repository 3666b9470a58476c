//! The blast radius: what a backfill rewrites in a table, measured from its rehearsal's commits,
//! so a reviewer sees bytes and files beside rows, and a guard can refuse a plan that writes too
//! much.

use serde::{Deserialize, Serialize};

use crate::delta::publish::Publication;

/// What a backfill rewrites in a table, from its rehearsal's commits: the files and bytes it
/// removes and adds, the partitions it touches, and the rows outside its days that rewriting whole
/// files carries along (an unpartitioned table's files hold other days too). The counts are the
/// commits' own: a published commit records the same `num_added_files`/`num_removed_files`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BlastRadius {
    pub files_removed: u64,
    pub bytes_removed: u64,
    pub files_added: u64,
    pub bytes_added: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<String>,
    pub rows_carried: u64,
}

impl BlastRadius {
    /// A slice's, from its publication and the rows it holds after (`rows_after`): what the files
    /// it writes hold beyond those rows was carried along.
    pub fn of(publication: &Publication, rows_after: u64) -> BlastRadius {
        BlastRadius {
            files_removed: publication.removes.len() as u64,
            bytes_removed: publication.removed_bytes,
            files_added: publication.adds.len() as u64,
            bytes_added: publication.adds.iter().map(|f| f.size).sum(),
            partitions: publication.partitions.clone(),
            rows_carried: publication.rows_written.map_or(0, |written| written.saturating_sub(rows_after)),
        }
    }

    /// Several slices' together; a partition two slices touch counts once.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a BlastRadius>) -> BlastRadius {
        let mut total = BlastRadius::default();
        let mut partitions = std::collections::BTreeSet::new();
        for part in parts {
            total.files_removed += part.files_removed;
            total.bytes_removed += part.bytes_removed;
            total.files_added += part.files_added;
            total.bytes_added += part.bytes_added;
            total.rows_carried += part.rows_carried;
            partitions.extend(part.partitions.iter().cloned());
        }
        total.partitions = partitions.into_iter().collect();
        total
    }
}
