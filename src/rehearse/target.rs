//! Step 1 of the rehearsal: the target, opened at its latest version (the plan's pre-version), and
//! refused here when the rehearsal or the apply could not do what the plan asks of it.

use deltalake::DeltaTable;
use url::Url;

use crate::delta::catalog::{CatalogTable, Located};
use crate::delta::freeze::{self, Frozen};
use crate::delta::store::{self, display_url};
use crate::delta::table;
use crate::plan_file::PlanDocument;
use crate::plan_file::confine::Scope;
use crate::rehearse::error::RehearsalError;
use crate::rehearse::progress::Progress;

/// The target, opened and found writable, and where its rehearsal goes.
pub(crate) struct Target {
    pub(crate) url: Url,
    pub(crate) table: DeltaTable,
    pub(crate) partition_columns: Vec<String>,
    pub(crate) rehearsal_url: Url,
    /// The catalog's record of the target, when the plan names it by its catalog name.
    pub(crate) catalog: Option<CatalogTable>,
    /// The periods frozen on the table that the window rewrites, with the plan's approval.
    pub(crate) frozen: Vec<Frozen>,
}

impl Target {
    pub(crate) fn partitioned_by_date(&self, column: &str) -> bool {
        self.partition_columns == [column]
    }
}

/// Step 1: open the target at its latest version and refuse what the rehearsal or the apply could
/// not do: a table bf may not write, a column the plan names that the table does not hold, a date
/// column that is not one, parallel slices on a table not partitioned by it, a log table bf may
/// not append to, a rehearsal that would be the target. A preview (`bf plan --sample`) is
/// rehearsed beside the plan's rehearsal, in a table of its own (`…__preview`), so that it never
/// replaces the files a saved plan publishes.
pub(crate) async fn open_target(
    document: &PlanDocument,
    scope: &Scope,
    stores: &store::Stores,
    progress: &dyn Progress,
    preview: bool,
) -> Result<Target, RehearsalError> {
    let spec = &document.plan;
    progress.step("opening the target");
    // A table that is not there, whether its folder's parent is (open) or not (locate), is said at
    // `target.table` with the path meant.
    let missing = |e: crate::delta::store::OpenError| {
        let help = match &e {
            crate::delta::store::OpenError::Missing { location } => {
                crate::plan_file::written_from_here(document.dir(), &spec.target.table)
                    .or_else(|| crate::delta::store::nearest_existing(location))
            }
            _ => None,
        };
        RehearsalError::At { key: "target.table".to_owned(), help, source: Box::new(e.into()) }
    };
    let Located { url: target_url, catalog } =
        match crate::delta::catalog::locate(document.dir(), &spec.target.table).await {
            Err(e @ crate::delta::store::OpenError::Missing { .. }) => return Err(missing(e)),
            located => located?,
        };
    if let Some(pinned) = &catalog {
        scope.check_resolved(&pinned.name, &target_url).map_err(|e| RehearsalError::Refused(e.0))?;
    }
    let target = stores.open(&target_url, None).await.map_err(missing)?;
    let files = table::files_needed(&target).await.map_err(RehearsalError::Refused)?;
    scope.check_table_files(&spec.target.table, &target_url, &files).map_err(|e| RehearsalError::At {
        key: "target.table".to_owned(),
        help: None,
        source: Box::new(RehearsalError::Refused(e.0)),
    })?;
    let column = spec.target.date_column.as_str();
    crate::delta::compat::check_writable(&target).await?;
    if let Some(keep) = spec.guards.keep_rollback_for {
        keeps_rollback_for(&target, &spec.target.table, catalog.as_ref(), keep.0)?;
    }
    let columns = crate::plan_file::columns::check(spec, &*table::arrow_schema(&target)?).await;
    if !columns.is_empty() {
        return Err(RehearsalError::Columns(columns));
    }
    table::check_date_column(&target, column)?;
    // A reload makes new values for an identity column `GENERATED ALWAYS`: keyed on one, every row
    // the plan writes would get a new key.
    let always = crate::delta::identity::always(&target).map_err(RehearsalError::Refused)?;
    if let Some(key) = spec.target.key.iter().flatten().find(|k| always.iter().any(|c| &c.column == *k)) {
        return Err(RehearsalError::At {
            key: "target.key".to_owned(),
            help: None,
            source: Box::new(RehearsalError::Refused(format!(
                "`{key}` is an identity column GENERATED ALWAYS: the table makes its values, so every row a \
                 slice writes gets a new one and no row would keep its key. Key the plan on a column the \
                 rows carry themselves"
            ))),
        });
    }
    // Signed-off days are refused before anything is cloned, unless the plan carries an approval.
    let window = spec.window();
    let approval = spec.guards.unfreeze.as_ref().map(crate::plan_file::Unfreeze::approval);
    let frozen =
        freeze::check(&target, &window, approval.as_ref(), None, &format!("the plan's window {window}"))
            .await?;
    if let Some(written) = &spec.record.log_table {
        let log = crate::delta::catalog::locate(document.dir(), written).await?;
        if let Some(pinned) = &log.catalog {
            scope.check_resolved(&pinned.name, &log.url).map_err(|e| RehearsalError::Refused(e.0))?;
        }
        crate::delta::compat::check_log_table(stores, &log.url).await?;
    }
    let partition_columns = table::partition_columns(&target);
    let partitioned_by_date = partition_columns == [column];
    if spec.slicing.parallel > 1 && !partitioned_by_date {
        return Err(RehearsalError::Refused(format!(
            "`slicing.parallel = {}` needs a table partitioned by `{column}`, and {} is {}: concurrent replaceWhere \
             commits on it conflict (ConcurrentAppend) and all but one fail. Use `parallel = 1`, or partition the \
             table by `{column}` so each slice replaces its own partitions.",
            spec.slicing.parallel,
            display_url(&target_url),
            if partition_columns.is_empty() {
                "not partitioned".to_owned()
            } else {
                format!("partitioned by {}", partition_columns.join(", "))
            },
        )));
    }
    if spec.slicing.parallel > 1 {
        stores
            .require_one_writer(&target_url, Some("`slicing.parallel` slices at once"))
            .map_err(|e| RehearsalError::Refused(e.to_string()))?;
    }
    let mut rehearsal_url = document.rehearsal_url(&target_url)?;
    if preview {
        rehearsal_url = preview_url(&rehearsal_url);
    }
    // A rehearsal is replaced by every plan: it must be neither the target, nor inside it, nor
    // hold it, nor a bucket's root.
    if rehearsal_url.path_segments().is_none_or(|mut s| s.all(str::is_empty)) {
        return Err(RehearsalError::Refused(format!(
            "the rehearsal table {} is the root of a bucket: choose a folder of its own",
            display_url(&rehearsal_url)
        )));
    }
    if store::nested(&rehearsal_url, &target_url) {
        return Err(RehearsalError::Refused(format!(
            "the rehearsal table {} is the target table, or inside it, or holds it: choose a folder of its own",
            display_url(&rehearsal_url)
        )));
    }
    Ok(Target { url: target_url, table: target, partition_columns, rehearsal_url, catalog, frozen })
}

/// Where a preview of the plan whose rehearsal is `rehearsal` is rehearsed: beside it, its name
/// followed by `__preview`.
fn preview_url(rehearsal: &Url) -> Url {
    let mut url = rehearsal.clone();
    let name = url
        .path_segments()
        .and_then(|mut s| s.rfind(|s| !s.is_empty()))
        .map(|encoded| percent_encoding::percent_decode_str(encoded).decode_utf8_lossy().into_owned());
    if let (Some(name), Ok(mut segments)) = (name, url.path_segments_mut()) {
        segments.pop_if_empty().pop().push(&format!("{name}__preview")).push("");
    }
    url
}

/// `[guards] keep_rollback_for`: refused when the table keeps what a rollback reads for less than
/// `days` — removed files or log entries — naming each setting, and the `ALTER TABLE` (by the
/// table's catalog name, or `delta.` and its location) that would keep them long enough.
fn keeps_rollback_for(
    target: &deltalake::DeltaTable,
    written: &str,
    catalog: Option<&CatalogTable>,
    days: u32,
) -> Result<(), RehearsalError> {
    let short: Vec<(&str, f64)> = crate::delta::retention::of(target)?
        .into_iter()
        .filter(|(_, kept)| *kept < f64::from(days))
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    let name = match catalog {
        Some(pinned) => pinned.name.to_string(),
        None => format!("delta.`{}`", display_url(target.table_url())),
    };
    let kept: Vec<String> =
        short.iter().map(|(property, kept)| format!("{property} is {kept:.1} days")).collect();
    let settings: Vec<String> =
        short.iter().map(|(property, _)| format!("'{property}' = 'interval {days} days'")).collect();
    Err(RehearsalError::At {
        key: "guards.keep_rollback_for".to_owned(),
        help: Some(format!("ALTER TABLE {name} SET TBLPROPERTIES ({})", settings.join(", "))),
        source: Box::new(RehearsalError::Refused(format!(
            "`bf rollback` must stay possible for {days} days after the apply, and {written}'s {}: after that, \
             VACUUM or log cleanup may delete what a rollback reads",
            kept.join(" and ")
        ))),
    })
}
