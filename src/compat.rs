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
use serde_json::Value;

/// Writer features bf honours, each proven on real tables (docs/RELIABILITY.md):
/// - `invariants`: deltalake enforces them on write;
/// - `timestampNtz`: a type, no writer duty beyond writing it;
/// - `deletionVectors`: deltalake applies a file's vector when it rescues the rows outside a slice,
///   names it in the remove, and RESTORE brings files back with theirs; bf's clone names them by
///   their absolute URLs, its comparison and verification read through them, and its rollback
///   checks their files too (`tests/corpus.rs`).
const WRITABLE_FEATURES: [&str; 3] = ["invariants", "timestampNtz", "deletionVectors"];

/// Why bf will not write a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "bf cannot write {table} safely: it needs {what}, which bf does not honour yet. \
         Nothing was written; backfill it with an engine that supports {them}."
    )]
    Features { table: String, what: String, them: String },
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

async fn check(table: &DeltaTable, write: WriteKind) -> Result<(), Unsupported> {
    let name = crate::store::display_url(table.table_url());
    let unreadable = |what, detail: String| Unsupported::Unreadable { table: name.clone(), what, detail };
    let snapshot = table.snapshot().map_err(|e| unreadable("snapshot", e.to_string()))?;
    let protocol =
        serde_json::to_value(snapshot.protocol()).map_err(|e| unreadable("protocol", e.to_string()))?;
    let writer = protocol
        .get("minWriterVersion")
        .and_then(Value::as_i64)
        .ok_or_else(|| unreadable("protocol", format!("no minWriterVersion in {protocol}")))?;
    let features: Vec<String> = protocol
        .get("writerFeatures")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let unsupported: Vec<String> = match writer {
        ..=2 => Vec::new(),
        // Legacy versions imply their features whether or not the table uses them.
        3 => vec!["checkConstraints".into()],
        4 => vec!["checkConstraints".into(), "changeDataFeed".into(), "generatedColumns".into()],
        5 => vec!["columnMapping".into()],
        6 => vec!["identityColumns".into()],
        _ => features.into_iter().filter(|f| !WRITABLE_FEATURES.contains(&f.as_str())).collect(),
    };
    let append_only = snapshot
        .metadata()
        .configuration()
        .get("delta.appendOnly")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut needs: Vec<String> = unsupported.iter().map(|f| format!("the writer feature `{f}`")).collect();
    if append_only && write == WriteKind::Rewrite {
        needs.push("`delta.appendOnly = true` (a replace removes rows)".into());
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
    let them = if unsupported.is_empty() { "them".to_owned() } else { unsupported.join(", ") };
    Err(Unsupported::Features { table: name, what: needs.join(" and "), them })
}
