//! Which tables bf may write.
//!
//! A Delta table's protocol tells writers what they must do besides adding and removing files:
//! enforce CHECK constraints, compute generated columns, write deletion vectors, change-data files,
//! row ids, clustering metadata… A writer that ignores one of them leaves a table other engines read
//! wrongly. bf writes through deltalake, and writes only tables whose every writer requirement is one
//! it has been tested to honour; anything else is refused before the rehearsal and before any commit,
//! naming the feature.
//!
//! Reading is deltalake's: a table it cannot read fails to open with deltalake's own message.

use deltalake::DeltaTable;
use deltalake::arrow::datatypes::DataType;
use futures::TryStreamExt;

use crate::delta::row_rules::RowRules;

/// A writer feature bf honours, and the test that proves it on real tables through the real binary
/// (docs/RELIABILITY.md says what each proves). The gate allows exactly these.
#[derive(Debug, Clone, Copy)]
pub struct Honoured {
    pub feature: &'static str,
    /// What honouring it takes, and who does it.
    pub how: &'static str,
    /// The test whose passing opened the gate for it, by its path in the test binary
    /// (`module::name`, or `module::file::name` in a folder of tests).
    pub proof: &'static str,
}

pub const HONOURED: &[Honoured] = &[
    Honoured {
        feature: "appendOnly",
        how: "a table with `delta.appendOnly = true` is only ever appended to: bf refuses to rewrite it",
        proof: "apply::guards::an_append_only_table_is_refused_for_rewrites_and_appended_to_as_a_log",
    },
    Honoured {
        feature: "invariants",
        how: "deltalake checks every row it writes; bf names the invariant and the row at the rehearsal",
        proof: "features::row_rules::a_row_breaking_a_check_constraint_or_an_invariant_fails_the_plan_naming_both",
    },
    Honoured {
        feature: "checkConstraints",
        how: "deltalake checks every row it writes; bf names the constraint and the row at the rehearsal",
        proof: "features::row_rules::a_row_breaking_a_check_constraint_or_an_invariant_fails_the_plan_naming_both",
    },
    Honoured {
        feature: "generatedColumns",
        how: "deltalake computes a generated column the query leaves out and checks one it supplies; \
              bf names a wrong value's column, and refuses a generation that is not a function of its row",
        proof: "features::row_rules::a_generated_column_is_computed_when_left_out_and_a_wrong_value_is_refused",
    },
    Honoured {
        feature: "changeDataFeed",
        how: "deltalake writes the feed of every slice; RESTORE's adds and removes are the rollback's",
        proof: "features::change_feed::the_change_data_feed_shows_what_a_backfill_and_its_rollback_changed",
    },
    Honoured {
        feature: "columnMapping",
        how: "deltalake writes physical names and field ids; the clone keeps the mapping; bf's SQL uses \
              logical names",
        proof: "features::mapped_columns::column_mapped_tables_backfill_by_logical_name_and_write_physical_names",
    },
    Honoured {
        feature: "timestampNtz",
        how: "a type; deltalake writes it as Parquet's local timestamp",
        proof: "features::mapped_columns::column_mapped_tables_backfill_by_logical_name_and_write_physical_names",
    },
    Honoured {
        feature: "variantType",
        how: "a type: deltalake writes a variant as its struct of metadata and value bytes, and bf's \
              diff shows nested values without casting them to text",
        proof: "features::row_rules::a_variant_column_is_carried_through_a_backfill_byte_for_byte",
    },
    Honoured {
        feature: "deletionVectors",
        how: "deltalake applies a file's vector when it rescues the rows outside a slice, names it in the \
              remove, and RESTORE brings files back with theirs; bf's clone names them by their absolute \
              URLs, its comparison and verification read through them, its rollback checks their files",
        proof: "corpus::rows_a_deletion_vector_deletes_stay_deleted_through_plan_apply_and_both_rollbacks",
    },
    Honoured {
        feature: "checkpointProtection",
        how: "bf never cleans up a table's log (its commits carry `cleanup_expired_logs = false`), so no \
              checkpoint or commit before the protected version is removed",
        proof: "features::log::bf_never_removes_log_entries_so_protected_checkpoints_stay",
    },
    Honoured {
        feature: "v2Checkpoint",
        how: "deltalake's checkpoints follow the table's checkpoint policy: its post-commit ones and \
              those bf asks it for every 20 commits of a run of slices",
        proof: "features::log::the_checkpoints_bf_asks_for_follow_a_v2_checkpoint_policy",
    },
    Honoured {
        feature: "inCommitTimestamp",
        how: "every commit bf makes to the table starts with its commitInfo, carrying an \
              inCommitTimestamp greater than the previous commit's (`delta/commit.rs`); bf reads a \
              commit's time from it; the rehearsal is a clone without it",
        proof: "databricks::in_commit_timestamps_domains_and_clustering_survive_plan_apply_resume_and_rollback",
    },
    Honoured {
        feature: "domainMetadata",
        how: "bf writes no domain: publishing refuses a rehearsal commit carrying one and a RESTORE by \
              bf leaves them as they are, so every domain, known or not, is preserved",
        proof: "databricks::in_commit_timestamps_domains_and_clustering_survive_plan_apply_resume_and_rollback",
    },
    Honoured {
        feature: "clustering",
        how: "the clustering domain is preserved (as every domain) and every file bf adds carries \
              statistics of every column; its files are not clustered until the next OPTIMIZE",
        proof: "databricks::in_commit_timestamps_domains_and_clustering_survive_plan_apply_resume_and_rollback",
    },
    Honoured {
        feature: "identityColumns",
        how: "`GENERATED BY DEFAULT` columns: the source's values are written; `GENERATED ALWAYS` ones: \
              the query leaves them out and bf makes a new value for each row a slice writes, beyond \
              every value the table holds, the rows it copies and a merge's updated rows keeping theirs \
              (a key that is one is refused); each commit bf makes raises the column's high-water mark \
              past the values it adds (never lowers it, a RESTORE included)",
        proof: "identity::identity_columns_generated_always_get_new_values_beyond_the_mark",
    },
    Honoured {
        feature: "rowTracking",
        how: "each file bf adds gets its rows' ids above the table's high-water mark, which the same \
              commit raises, and the commit's version; removes and files a RESTORE adds back keep \
              theirs; rows a slice copies keep their ids and commit versions in the materialized \
              columns (`delta/row_tracking.rs`)",
        proof: "row_tracking::row_tracking_keeps_every_rows_id_through_plan_apply_resume_and_rollback",
    },
    Honoured {
        feature: "liquid",
        how: "Databricks' name for clustering before the protocol had one (a `delta.liquid` domain): \
              honoured as `clustering` is",
        proof: "databricks::in_commit_timestamps_domains_and_clustering_survive_plan_apply_resume_and_rollback",
    },
];

/// Why bf refuses a feature it knows, where that is not only "not yet tested".
const REFUSED_BECAUSE: &[(&str, &str)] = &[
    (
        "typeWidening",
        "deltalake does not read a table whose column types were widened, so bf could neither rehearse \
         it nor check what it wrote",
    ),
    (
        "typeWidening-preview",
        "deltalake does not read a table whose column types were widened, so bf could neither rehearse \
         it nor check what it wrote",
    ),
];

/// Refuses `what` — writing rows through deltalake, which commits them itself (`bf apply
/// --recompute`) — on a table whose commits bf completes itself; `instead` says what does the job
/// there.
pub fn check_deltalake_writes(
    table: &DeltaTable,
    what: &'static str,
    instead: &'static str,
) -> Result<(), Unsupported> {
    let own = crate::delta::commit::Own::of(table);
    if !own.needed() {
        return Ok(());
    }
    Err(Unsupported::RowsWrittenByDeltalake {
        table: crate::delta::store::display_url(table.table_url()),
        features: own.features.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "),
        what,
        instead,
    })
}

/// What a plan's author and reviewer should know of a table's writer features: that bf completes
/// its commits itself, and how (row ids, in-commit timestamps…), or why bf cannot write it at all.
/// Said by `bf init` at the top of the plan it writes, and by `bf validate`.
pub async fn notes(table: &DeltaTable) -> Vec<String> {
    let mut notes: Vec<String> = crate::delta::commit::Own::of(table).note().into_iter().collect();
    if let Err(refused) = check_writable(table).await {
        notes.push(refused.to_string());
    }
    notes
}

/// Whether bf honours `feature`.
pub fn honours(feature: &str) -> bool {
    HONOURED.iter().any(|h| h.feature == feature)
}

/// Why bf will not write a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "bf cannot write {table} safely: it needs {what}. bf does not honour that yet. Nothing was \
         written; backfill it with an engine that supports {them}."
    )]
    Features { table: String, what: String, them: String },
    #[error(
        "bf cannot {what} on {table}: its writer features ({features}) ask something of every commit, \
         which bf adds to the commits it makes itself (publishing rehearsed files, a comment, a RESTORE) \
         but not to rows deltalake writes. Nothing was written; {instead}."
    )]
    RowsWrittenByDeltalake { table: String, features: String, what: &'static str, instead: &'static str },
    #[error(
        "bf will not write {table}: its {what} cannot be read ({detail}), so bf cannot tell what the \
         table asks of its writers. Nothing was written."
    )]
    Unreadable { table: String, what: &'static str, detail: String },
}

/// What bf will do to a table, which decides what its protocol may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    /// Replace or merge slices, restore versions: rows are removed and rewritten.
    Rewrite,
    /// Only append rows (the change log): `delta.appendOnly` asks nothing more of it.
    Append,
}

/// Refuses a table whose protocol asks writers for something bf does not do, or whose files
/// deltalake would remove under another name than the one they were added under. Fails closed: a
/// table whose protocol or file list cannot be read is refused, saying why.
pub async fn check_writable(table: &DeltaTable) -> Result<(), Unsupported> {
    check(table, WriteKind::Rewrite).await
}

/// [`check_writable`] for a table bf only appends to.
pub async fn check_appendable(table: &DeltaTable) -> Result<(), Unsupported> {
    check(table, WriteKind::Append).await
}

/// Refuses a change log table bf may not append to (the writer gate); one that does not exist yet
/// is created when apply records the first row.
pub async fn check_log_table(
    stores: &crate::delta::store::Stores,
    url: &url::Url,
) -> Result<(), Unsupported> {
    match stores.open(url, None).await {
        Ok(table) => check_appendable(&table).await,
        Err(
            crate::delta::store::OpenError::NotATable { .. } | crate::delta::store::OpenError::Missing { .. },
        ) => Ok(()),
        Err(other) => Err(Unsupported::Unreadable {
            table: crate::delta::store::display_url(url),
            what: "log",
            detail: other.to_string(),
        }),
    }
}

async fn check(table: &DeltaTable, write: WriteKind) -> Result<(), Unsupported> {
    let name = crate::delta::store::display_url(table.table_url());
    let unreadable = |what, detail: String| Unsupported::Unreadable { table: name.clone(), what, detail };
    let snapshot = table.snapshot().map_err(|e| unreadable("snapshot", e.to_string()))?;
    let protocol =
        crate::delta::table::WriterProtocol::of(snapshot).map_err(|e| unreadable("protocol", e))?;
    // A table bf only appends to (the change log) is written by deltalake's own write, which
    // commits itself: the features bf honours only in the commits it makes are not honoured there.
    let in_commits = |f: &str| crate::delta::commit::HONOURED_IN_COMMITS.contains(&f);
    let unsupported: Vec<String> = protocol
        .required()
        .into_iter()
        .filter(|f| !honours(f) || (write == WriteKind::Append && in_commits(f)))
        .collect();
    let append_only = snapshot
        .metadata()
        .configuration()
        .get("delta.appendOnly")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut needs: Vec<String> = unsupported
        .iter()
        .map(|f| match REFUSED_BECAUSE.iter().find(|(feature, _)| feature == f) {
            Some((_, why)) => format!("the writer feature `{f}` ({why})"),
            None => format!("the writer feature `{f}`"),
        })
        .collect();
    if append_only && write == WriteKind::Rewrite {
        needs.push("`delta.appendOnly = true` (a replace removes rows)".into());
    }
    if write == WriteKind::Rewrite {
        needs.extend(RowRules::of(snapshot).problems());
    }
    // Measured on dat_multi_partitioned: deltalake writes BINARY partition values as escaped text and
    // its removes of such files do not match Spark's adds, so a replaced slice keeps its old rows.
    let schema = snapshot.snapshot().arrow_schema();
    for column in snapshot.metadata().partition_columns() {
        let binary = schema.field_with_name(column).is_ok_and(|f| {
            matches!(f.data_type(), DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
        });
        if binary {
            needs.push(format!(
                "the BINARY partition column `{column}` (deltalake does not round-trip its values)"
            ));
        }
    }
    // The identity columns must be readable: each commit bf makes keeps their marks.
    if protocol.requires("identityColumns")
        && let Err(e) = crate::delta::identity::columns(snapshot.metadata())
    {
        return Err(unreadable("identity columns", e));
    }
    // A clustered table needs statistics of its clustering columns in every file added: deltalake
    // writes them for the first `delta.dataSkippingNumIndexedCols` columns (32), or those
    // `delta.dataSkippingStatsColumns` names, and the clustering columns are in a domain bf does
    // not read — so every column must have them.
    if ["clustering", "liquid"].iter().any(|f| protocol.requires(f)) {
        let config = snapshot.metadata().configuration();
        let columns = schema.flattened_fields().iter().filter(|f| !f.data_type().is_nested()).count();
        let indexed = config.get("delta.dataSkippingNumIndexedCols").and_then(|n| n.parse::<i64>().ok());
        let some_only = config.contains_key("delta.dataSkippingStatsColumns")
            || indexed.unwrap_or(32) >= 0 && columns as i64 > indexed.unwrap_or(32);
        if some_only {
            needs.push(
                "statistics for every column of a clustered table (its statistics settings leave some \
                 out, and a file added must carry them for the clustering columns)"
                    .to_owned(),
            );
        }
    }
    // Measured (tests/partitions.rs): Spark logs the non-ASCII characters of partition values raw
    // (`region=Zürich/…`, as java.net.URI leaves them) while deltalake percent-encodes them in the
    // removes it writes (`region=Z%C3%BCrich/…`), so to deltalake a replaced file stays live. Paths
    // deltalake writes itself are ASCII (it encodes partition values), so only foreign ones are caught.
    let files: Vec<_> = table
        .get_active_add_actions_by_predicate(None)
        .try_collect()
        .await
        .map_err(|e| unreadable("list of files", e.to_string()))?;
    // Only a rewrite removes files; an append never names an old one.
    if let Some(file) = files.iter().find(|f| write == WriteKind::Rewrite && !f.path().is_ascii()) {
        needs.push(format!(
            "file paths with non-ASCII characters such as `{}` (deltalake would spell them \
             differently when removing the files, and the old rows would stay)",
            file.path()
        ));
    }
    if needs.is_empty() {
        return Ok(());
    }
    let them = if unsupported.is_empty() { "such tables".to_owned() } else { unsupported.join(", ") };
    Err(Unsupported::Features { table: name, what: needs.join(" and "), them })
}

#[cfg(test)]
mod tests {
    use super::HONOURED;

    /// Each feature's proof names a test that exists: a test renamed or moved would leave the gate
    /// open on the word of a test no one runs.
    #[test]
    fn every_proof_names_a_test_of_the_test_binary() {
        let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        for honoured in HONOURED {
            let (module, name) = honoured.proof.rsplit_once("::").expect("module::name");
            let file = module.replace("::", "/");
            let text = [tests.join(format!("{file}.rs")), tests.join(&file).join("mod.rs")]
                .iter()
                .find_map(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_else(|| panic!("{}: no tests/{file}.rs", honoured.feature));
            assert!(
                text.contains(&format!("fn {name}()")),
                "{}: no test {name} in tests/{file}",
                honoured.feature
            );
        }
    }
}
