//! Running the source query for one slice.
//!
//! 1. Register each input under its name, its path expanded for the slice (`{date}` → `2026-09-15`);
//!    a missing file is an error naming the slice and the path.
//! 2. Plan the query with DataFusion's read-only SQL options (no DDL, DML, COPY or SET — the second
//!    guard after `bf validate`'s parser check) and bind `$start`, `$end`, `$run_date` as DATE values.
//! 3. Align its columns to the target table: same names, cast to the table's types; a missing or
//!    extra column, or a type that cannot be cast, is an error listing them. Generated columns may
//!    be left out: the table computes them.
//! 4. Count the rows by where their date falls (this slice, another slice, outside the window, NULL)
//!    and keep only this slice's rows: nothing outside a slice is ever written by it.
//!
//! The result is a lazy DataFrame: rows stream from the inputs into the writer, never collected.
//!
//! On a cluster (`BF_CLUSTER`), steps 2–4 are planned here and run there: the inputs are registered
//! in a session whose queries Ballista runs ([`crate::cluster`]), the counts come back as one row,
//! and the slice's rows stream back as a table of bf's own session, which the writer and the checks
//! read as before. The inputs are registered in bf's session too, for checks that read them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use deltalake::arrow::datatypes::{Date32Type, SchemaRef};
use deltalake::datafusion::execution::context::SQLOptions;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use deltalake::datafusion::scalar::ScalarValue as Scalar;
use futures::TryStreamExt;
use url::Url;

use crate::cluster::Cluster;
use crate::delta::catalog::{self, CatalogTable};
use crate::delta::predicate::slice_predicate;
use crate::delta::same_table;
use crate::delta::store::{self, Found, Stores};
use crate::plan_file::template::expand;
use crate::plan_file::{Format, PlanDocument, Size};
use crate::source::align::{align, integer_divisions, type_warnings};
use crate::source::budget::{Budget, scanned_bytes};
use crate::source::files::{PinnedDelta, Registration, folder_files};
pub use crate::source::read::{DeltaInput, FolderListing, InputFile};
pub use crate::source::routes::{SourceCounts, Survey};
use crate::window::Slice;

/// What the source produced for a slice, before anything is written.
pub struct SliceSource {
    /// The session the query runs in, with the inputs registered (checks query them too).
    pub ctx: SessionContext,
    /// The slice's rows, aligned to the target's columns. Lazy.
    pub rows: DataFrame,
    /// The files each input read, for the saved plan's fingerprints.
    pub files: Vec<InputFile>,
    /// The folders inputs read, with the files in them, so a file added later is seen.
    pub folders: Vec<FolderListing>,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("slice {slice} ({first}): input `{input}` reads {path}, which does not exist{also}")]
    MissingInput {
        slice: usize,
        first: String,
        input: String,
        path: String,
        /// What else of the window is missing, for a path that changes with the slice: `; so do …`.
        also: String,
    },
    #[error("slice {slice} ({first}): input `{input}` ({path}) cannot be read: {message}")]
    Input { slice: usize, first: String, input: String, path: String, message: String },
    #[error("slice {slice} ({first}): the source query failed: {message}")]
    Query { slice: usize, first: String, message: String },
    #[error(
        "slice {slice} ({first}): the plan's inputs would have read {} by this slice, more than the {} \
         the operator allows; nothing of this slice was read (the operator raises the bound with {})",
        Size(*total), Size(*max), crate::plan_file::confine::MAX_READ_BYTES
    )]
    TooMuchInput { slice: usize, first: String, total: u64, max: u64 },
    #[error(
        "slice {slice} ({first}): the plan's queries return {} by this slice, more than the {} a rehearsal \
         may write ({why}); nothing of this slice was written (the operator sets the bound with {})",
        crate::words::count(*total, "row"), crate::words::count(*max, "row"), crate::plan_file::confine::MAX_WRITE_ROWS
    )]
    TooManyRows { slice: usize, first: String, total: u64, max: u64, why: String },
    #[error("the source query's columns do not match the table's:\n{0}")]
    Schema(String),
}

impl SourceError {
    /// A mismatch of the query's columns with the table's, said with where it was found: `place`,
    /// the slice and the files it read (the columns of a CSV are what its values make them).
    fn found_in(self, place: &str) -> SourceError {
        match self {
            SourceError::Schema(problems) => SourceError::Schema(format!(
                "{problems}
  (found in {place})"
            )),
            other => other,
        }
    }
}

/// Runs a plan's source query, one slice at a time.
pub struct Source<'a> {
    document: &'a PlanDocument,
    /// The stores the inputs are in, with the plan's `[storage]` settings.
    stores: Stores,
    target_schema: SchemaRef,
    /// Columns the table computes (generated columns): the query may leave them out.
    computed: Vec<String>,
    /// Columns only the table's writers make (`GENERATED ALWAYS` identity columns): the query must
    /// leave them out, and bf makes their values as it writes.
    made_by_writers: Vec<String>,
    /// The version each Delta input is read at: the first slice pins it, or the saved plan does.
    pinned: std::sync::Mutex<Vec<DeltaInput>>,
    /// Upstream tables read from their rehearsals instead (`stands_for` says which).
    redirects: Vec<DeltaInput>,
    /// The query's columns whose type the table's differs from, as warnings (each once), each with
    /// the slices it was found in (by number: their days and input files); and every slice whose
    /// query was planned. A warning of some slices only is about their input, and names them.
    type_changes: std::sync::Mutex<crate::source::align::TypeWarnings>,
    /// What the plan may reach: every file a Delta input's log names must be in it.
    scope: Option<crate::plan_file::confine::Scope>,
    /// What the slices read and return, against the operator's bounds.
    budget: Budget,
    /// Where the query runs when not in bf's process: the operator's cluster.
    cluster: Option<Cluster>,
}

impl<'a> Source<'a> {
    pub fn new(document: &'a PlanDocument, target_schema: SchemaRef) -> Self {
        Source {
            document,
            stores: document.stores(),
            target_schema,
            computed: Vec::new(),
            made_by_writers: Vec::new(),
            pinned: Default::default(),
            redirects: Vec::new(),
            type_changes: Default::default(),
            scope: None,
            budget: Budget::default(),
            cluster: None,
        }
    }

    /// Runs the slices' queries on `cluster` (the operator's `BF_CLUSTER`), not in bf's process.
    pub fn on_cluster(mut self, cluster: Option<&Cluster>) -> Self {
        self.cluster = cluster.cloned();
        self
    }

    /// Refuses a Delta input whose log names a file outside what the plan may reach.
    /// Also bounds the bytes of input the slices read together by the operator's limit.
    pub fn within(mut self, scope: &crate::plan_file::confine::Scope) -> Self {
        self.scope = Some(scope.clone());
        self.budget = Budget::within(scope.bounds().clone());
        self
    }

    /// The query's columns whose type differs from the table's, for the slices run so far: each a
    /// warning every output of the plan shows, naming the slices and input files it came from
    /// when not every slice's query gave it.
    pub fn type_warnings(&self) -> Vec<String> {
        self.type_changes.lock().expect("not poisoned").warnings()
    }

    /// Lets the query leave out the columns the table computes itself.
    pub fn with_computed_columns<'c>(mut self, columns: impl IntoIterator<Item = &'c str>) -> Self {
        self.computed = columns.into_iter().map(str::to_owned).collect();
        self
    }

    /// Refuses a query that supplies a column only the table's writers make: bf makes its values.
    pub fn with_columns_made_by_writers(mut self, columns: impl IntoIterator<Item = String>) -> Self {
        self.made_by_writers = columns.into_iter().collect();
        self
    }

    /// Reads each Delta input at the version the saved plan read.
    pub fn with_delta_inputs(self, pinned: &[DeltaInput]) -> Self {
        *self.pinned.lock().expect("not poisoned") = pinned.to_vec();
        self
    }

    /// Reads the upstream tables of a chain from their rehearsals, at the versions given: what the
    /// upstream backfills will make of them.
    pub fn with_redirects(mut self, redirects: &[DeltaInput]) -> Self {
        self.redirects = redirects.to_vec();
        self
    }

    /// The Delta inputs read so far, each at its pinned version.
    pub fn delta_inputs(&self) -> Vec<DeltaInput> {
        self.pinned.lock().expect("not poisoned").clone()
    }

    /// Pins every Delta input at the version the first slice will read, checking the files its log
    /// names against the plan's scope: a plan whose input reaches outside is refused before the
    /// rehearsal is made. (An input whose path holds the slice's date is pinned by its slice.)
    pub async fn pin_inputs(&self, first: &Slice) -> Result<(), SourceError> {
        for (name, input) in &self.document.plan.source.inputs {
            if input.format != Format::Delta {
                continue;
            }
            let written = expand(&input.path, first);
            self.pin_delta(name, &written).await.map_err(|message| SourceError::Input {
                slice: first.index,
                first: first.first.to_string(),
                input: name.clone(),
                path: self.document.resolve(&written).to_string(),
                message,
            })?;
        }
        Ok(())
    }

    /// The slice's rows, ready to be written: the query is planned, not run.
    pub async fn for_slice(&self, slice: &Slice) -> Result<SliceSource, SourceError> {
        self.for_slice_with(slice, &[]).await
    }

    /// The slice's rows and, after them, the rows for its days that the queries of `lenders`
    /// return ([`crate::source::routes`]): a slice rewrites its days, so the rows another slice's
    /// files hold for them are its to write. Planned, not run.
    pub async fn for_slice_with(&self, slice: &Slice, lenders: &[Slice]) -> Result<SliceSource, SourceError> {
        let column = &self.document.plan.target.date_column;
        let planned = self.planned(slice).await?;
        let query_error = planned.query_error();
        let mut rows = planned.rows.filter(slice_predicate(column, slice)).map_err(|e| query_error(&e))?;
        if planned.there.is_some() {
            rows = crate::cluster::rows_here(&planned.ctx, rows).map_err(|e| query_error(&e))?;
        }
        let mut files = planned.files;
        let mut folders = planned.folders;
        for lender in lenders {
            let lent = self.planned(lender).await?;
            let lent_error = lent.query_error();
            let mut lent_rows =
                lent.rows.filter(slice_predicate(column, slice)).map_err(|e| lent_error(&e))?;
            if lent.there.is_some() {
                lent_rows = crate::cluster::rows_here(&lent.ctx, lent_rows).map_err(|e| lent_error(&e))?;
            }
            // The lender's stores serve its scans from this slice's session too.
            for file in &lent.files {
                self.stores.register(&planned.ctx, &file.url).map_err(|e| query_error(&e.problem))?;
            }
            rows = rows.union(lent_rows).map_err(|e| query_error(&e))?;
            files.extend(lent.files);
            folders.extend(lent.folders);
        }
        Ok(SliceSource { ctx: planned.ctx, rows, files, folders })
    }

    /// Where the rows of the slice's query fall, day by day, and what it reads: one pass over the
    /// query, before anything is written, so each slice knows which other slices' rows are its own
    /// ([`crate::source::routes::Routes`]).
    pub async fn survey(&self, slice: &Slice) -> Result<Survey, SourceError> {
        let planned = self.planned(slice).await?;
        let query_error = planned.query_error();
        let column = &self.document.plan.target.date_column;
        let days = crate::source::routes::rows_per_day(&planned.rows, column)
            .await
            .map_err(|e| query_error(&crate::source::found::with_place(e.to_string(), &planned.files)))?;
        self.budget.count_rows(slice, days.values().sum())?;
        let mut reads: std::collections::BTreeSet<String> =
            planned.files.iter().map(|f| f.url.to_string()).collect();
        reads.extend(planned.delta.iter().map(|(uri, version)| format!("{uri}@{version}")));
        Ok(Survey { slice: *slice, days, reads })
    }

    /// The slice's query, registered and planned in a session of its own, aligned to the table's
    /// columns: every row it returns, whatever its day.
    async fn planned(&self, slice: &Slice) -> Result<Planned, SourceError> {
        let plan = &self.document.plan;
        let first = slice.first.to_string();
        let query_error = |e: &dyn std::fmt::Display| SourceError::Query {
            slice: slice.index,
            first: first.clone(),
            message: e.to_string(),
        };
        // The slice's query and its write share one session, bounded by the operator's memory limit.
        // In the plan's dialect: the query, and the checks that read its inputs there too.
        let state = crate::dialect::speaking(crate::delta::memory::session_state(None), plan.source.dialect);
        let ctx = SessionContext::new_with_state(state);
        // Parquet strings as the table's own Utf8: read as Utf8View they were cast back row by row
        // on the way to the writer (1.8% of an apply, docs/BENCHMARKS.md).
        ctx.state_ref().write().config_mut().options_mut().execution.parquet.schema_force_view_types = false;
        // Behind the guard's refusal (`plan_file::read_only`): no recursion makes rows here either.
        ctx.state_ref().write().config_mut().options_mut().execution.enable_recursive_ctes = false;
        // Where each column is written in the query: a warning names its line.
        ctx.state_ref().write().config_mut().options_mut().sql_parser.collect_spans = true;
        // The session the query runs in on a cluster: one whose queries the cluster runs.
        let there = match &self.cluster {
            Some(cluster) => {
                Some(crate::cluster::session(cluster, plan.source.dialect).map_err(|e| query_error(&e))?)
            }
            None => None,
        };
        let mut files = Vec::new();
        let mut folders = Vec::new();
        let mut delta = Vec::new();
        // What to register once the slice's bytes are known to be within the operator's bound:
        // registering reads (a CSV's schema is inferred from its rows, a Parquet file's footer).
        let mut registrations = Vec::new();
        // The bytes each input holds for this slice, by its name in the query.
        let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
        let stores = &self.stores;
        for (name, input) in &plan.source.inputs {
            let written = expand(&input.path, slice);
            let location = self.document.resolve(&written);
            let input_error = |message: String| SourceError::Input {
                slice: slice.index,
                first: first.clone(),
                input: name.clone(),
                path: location.to_string(),
                message,
            };
            if input.format == Format::Delta {
                // Its files are the table's business: its version says what the query reads.
                let pinned = self.pin_delta(name, &written).await.map_err(input_error)?;
                *sizes.entry(name.clone()).or_default() +=
                    pinned.files.iter().map(|(_, size)| size).sum::<u64>();
                delta.push((pinned.url.to_string(), pinned.version));
                registrations.push((name, location.to_string(), Registration::Delta(pinned)));
                continue;
            }
            if let Some((folder, pattern)) = crate::plan_file::template::split_pattern(&written) {
                let folder = self.document.resolve(&folder).url().map_err(|e| input_error(e.to_string()))?;
                for session in std::iter::once(&ctx).chain(&there) {
                    stores.register(session, &folder).map_err(|e| input_error(e.problem))?;
                }
                let (listing, size, registration) =
                    self.matched(name, input, &folder, &pattern).await.map_err(input_error)?;
                *sizes.entry(name.clone()).or_default() += size;
                files.extend(
                    listing
                        .files
                        .iter()
                        .map(|f| InputFile { input: name.clone(), url: store::join(&folder, f) }),
                );
                folders.push(listing);
                registrations.push((name, location.to_string(), registration));
                continue;
            }
            let url = location.url().map_err(|e| input_error(e.to_string()))?;
            for session in std::iter::once(&ctx).chain(&there) {
                stores.register(session, &url).map_err(|e| input_error(e.problem))?;
            }
            // A single file is read whatever its extension; a folder by its files of the format's.
            // Each is handed to DataFusion by its URL, never a local path as text, which it would
            // expand as a pattern its own way: bf matches patterns itself, above.
            let (absolute, extension) = match stores.find(&url).await.map_err(|e| input_error(e.problem))? {
                Found::Nothing => {
                    return Err(SourceError::MissingInput {
                        slice: slice.index,
                        first: first.clone(),
                        input: name.clone(),
                        path: location.to_string(),
                        also: crate::source::found::missing_elsewhere(self.document, &input.path),
                    });
                }
                Found::File(meta) => {
                    *sizes.entry(name.clone()).or_default() += meta.size;
                    files.push(InputFile { input: name.clone(), url: url.clone() });
                    let extension =
                        Path::new(url.path()).extension().map(|e| format!(".{}", e.to_string_lossy()));
                    (url.to_string(), extension.unwrap_or_default())
                }
                Found::Folder => {
                    let (extension, folder, size) =
                        folder_files(stores, name, &url, input).await.map_err(input_error)?;
                    *sizes.entry(name.clone()).or_default() += size;
                    files.extend(
                        folder
                            .files
                            .iter()
                            .map(|f| InputFile { input: name.clone(), url: store::join(&url, f) }),
                    );
                    folders.push(folder);
                    // A URL read as a folder ends with a slash.
                    (format!("{}/", url.as_str().trim_end_matches('/')), extension)
                }
            };
            let schema = input.schema.as_deref().map(crate::plan_file::input_schema::parse).transpose();
            let files = Registration::Files {
                url: absolute,
                format: input.format,
                extension,
                schema: schema.map_err(input_error)?,
            };
            registrations.push((name, location.to_string(), files));
        }
        self.budget.refuse_past_bound(slice, sizes.values().sum())?;
        for (name, path, registration) in registrations {
            let registered = registration.register(name, &ctx, there.as_ref()).await;
            registered.map_err(|message| SourceError::Input {
                slice: slice.index,
                first: first.clone(),
                input: name.clone(),
                path,
                message,
            })?;
        }
        let day = |d| Scalar::Date32(Some(Date32Type::from_naive_date(d)));
        let query = there
            .as_ref()
            .unwrap_or(&ctx)
            .sql_with_options(&plan.source.query, read_only_options())
            .await
            .and_then(|df| {
                df.with_param_values(vec![
                    ("start", day(slice.first)),
                    ("end", day(slice.last)),
                    ("run_date", day(slice.run_date)),
                ])
            })
            .map_err(|e| query_error(&e))?;
        // Each scan of an input reads it: a query naming one file 200 times (`UNION ALL`, a CTE
        // referenced again and again) reads it 200 times.
        self.budget.count_read(slice, scanned_bytes(query.logical_plan(), &sizes))?;
        let read: Vec<String> = files.iter().map(|f| crate::delta::store::display_url(&f.url)).collect();
        let place = match read.is_empty() {
            true => format!("slice {} ({first})", slice.index),
            false => format!("slice {} ({first}: {})", slice.index, read.join(", ")),
        };
        let mut warnings = type_warnings(query.schema(), &self.target_schema);
        // At its line of the plan file, where the query kept it.
        let document = self.document;
        warnings.extend(integer_divisions(query.logical_plan()).into_iter().map(|(warning, line)| {
            match line.and_then(|line| document.line_in("source.query", line)) {
                Some(at) => format!("{}:{at}: {warning}", document.path.display()),
                None => warning,
            }
        }));
        self.type_changes.lock().expect("not poisoned").note(slice.index, &place, warnings);
        let aligned = align(query, &self.target_schema, &self.computed, &self.made_by_writers)
            .map_err(|e| e.found_in(&place))?;
        Ok(Planned { slice: *slice, ctx, there, rows: aligned, files, folders, delta })
    }

    /// The files under `folder` an input's `pattern` matches, their bytes, and their registration;
    /// a pattern matching nothing is an error naming where it looked.
    async fn matched(
        &self,
        name: &str,
        input: &crate::plan_file::Input,
        folder: &Url,
        pattern: &str,
    ) -> Result<(FolderListing, u64, Registration), String> {
        let (listing, size) = crate::source::pattern::matching(&self.stores, name, folder, pattern)
            .await
            .map_err(|e| e.problem)?;
        if listing.files.is_empty() {
            return Err(format!(
                "no file under {} matches `{pattern}`",
                crate::delta::store::display_url(folder)
            ));
        }
        let urls: Vec<Url> = listing.files.iter().map(|f| store::join(folder, f)).collect();
        let schema = input.schema.as_deref().map(crate::plan_file::input_schema::parse).transpose()?;
        Ok((listing, size, Registration::Listed { urls, format: input.format, schema }))
    }

    /// Where the Delta input written `written` lives. A catalog name is asked of its catalog once
    /// per plan: a name already pinned (by an earlier slice, or the saved plan) is where it was.
    async fn locate(&self, written: &str) -> Result<(Url, Option<CatalogTable>), String> {
        let known = self.pinned.lock().expect("not poisoned").iter().find_map(|d| {
            let pinned = d.catalog.as_ref().filter(|c| c.name == written)?;
            Some((Url::parse(&pinned.location).ok()?, pinned.clone()))
        });
        if let Some((url, pinned)) = known {
            return Ok((url, Some(pinned)));
        }
        let located = catalog::locate(self.document.dir(), written).await.map_err(|e| e.to_string())?;
        Ok((located.url, located.catalog))
    }

    /// A Delta input at its pinned version, pinning it at its latest on first use, and the bytes
    /// of its version's live files (what a query over it may read).
    async fn pin_delta(&self, name: &str, written: &str) -> Result<PinnedDelta, String> {
        let (url, catalog) = self.locate(written).await?;
        let pinned = {
            let mut known = self.pinned.lock().expect("not poisoned");
            if let Some(redirect) = self.redirects.iter().find(|r| r.serves(&url))
                && !known.iter().any(|d| d.serves(&url))
            {
                known.push(DeltaInput {
                    input: name.to_owned(),
                    catalog: catalog.clone(),
                    ..redirect.clone()
                });
            }
            known.iter().find(|d| d.serves(&url)).map(|d| (d.uri.clone(), d.version))
        };
        let delta = match &pinned {
            Some((uri, version)) => {
                let read = Url::parse(uri).map_err(|e| e.to_string())?;
                self.stores.open(&read, Some(*version)).await.map_err(|e| e.to_string())?
            }
            None => self.stores.open(&url, None).await.map_err(|e| e.to_string())?,
        };
        if pinned.is_none() {
            let version = delta.version().unwrap_or(0);
            let table_id = same_table::table_id(&delta);
            let commit_sha256 =
                same_table::commit_sha256(&delta, version).await.map_err(|e| e.to_string())?;
            let mut known = self.pinned.lock().expect("not poisoned");
            if !known.iter().any(|d| d.serves(&url)) {
                known.push(DeltaInput {
                    input: name.to_owned(),
                    uri: url.to_string(),
                    version,
                    table_id,
                    commit_sha256,
                    stands_for: None,
                    catalog,
                });
            }
        }
        // Checked once, when the input is first pinned: its version's files do not change.
        if let (Some(scope), None) = (&self.scope, &pinned) {
            let files = crate::delta::table::files_needed(&delta).await?;
            scope.check_table_files(written, delta.table_url(), &files).map_err(|e| e.0)?;
        }
        let files = delta
            .get_active_add_actions_by_predicate(None)
            .map_ok(|file| (file.path().into_owned(), file.size().max(0) as u64))
            .try_collect()
            .await
            .map_err(|e| e.to_string())?;
        let provider = crate::delta::row_tracking::visible(&delta).await.map_err(|e| e.to_string())?;
        let url = delta.table_url().clone();
        Ok(PinnedDelta { provider, url, version: delta.version().unwrap_or(0), files })
    }
}

/// A slice's query planned in its session (on a cluster, `there`): every row it returns, aligned
/// to the table's columns, and what it reads.
struct Planned {
    slice: Slice,
    ctx: SessionContext,
    there: Option<SessionContext>,
    rows: DataFrame,
    files: Vec<InputFile>,
    folders: Vec<FolderListing>,
    /// The Delta inputs it reads: their URL and version.
    delta: Vec<(String, u64)>,
}

impl Planned {
    /// An error of this slice's query, naming the slice.
    fn query_error(&self) -> impl Fn(&dyn std::fmt::Display) -> SourceError + use<> {
        let (slice, first) = (self.slice.index, self.slice.first.to_string());
        move |e| SourceError::Query { slice, first: first.clone(), message: e.to_string() }
    }
}

/// The read-only options every query bf runs for a plan is planned with.
pub fn read_only_options() -> SQLOptions {
    SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false)
}

/// A shared handle to a session's state, as deltalake's writers take it.
pub fn session_state(ctx: &SessionContext) -> Arc<deltalake::datafusion::execution::SessionState> {
    Arc::new(ctx.state())
}
