//! `bf validate`: check plan files offline, the way a pull request's CI would.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::delta::store::Location;
use bf::plan_file::chain::Chain;

/// Check plan files without writing or reaching any store: syntax, keys, window, slices, read-only
/// SQL, and the chain of `[[downstream]]` plans each names. A target on this machine's disk is
/// read (never written): the columns the plan names are checked against its schema, and what its
/// writer features mean for bf is said.
///
/// Every problem is reported with its file, line and column; all of a file's problems are listed,
/// not only the first. Exits 1 when any file is invalid.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan files to check, e.g. `plans/*.toml`.
    #[arg(required = true, value_name = "PLAN")]
    plans: Vec<PathBuf>,
}

pub async fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let mut invalid = 0;
    for path in &args.plans {
        match Chain::load(path, policy) {
            Ok(chain) => {
                let mut problems = Vec::new();
                for (i, member) in chain.plans().into_iter().enumerate() {
                    let document = &member.document;
                    let plan = &document.plan;
                    let local = LocalTarget::read(&document.path, plan, policy).await;
                    if !local.issues.is_empty() {
                        problems.push(document.invalid(local.issues).to_string());
                        continue;
                    }
                    let count = plan.slices().len();
                    writeln!(
                        out,
                        "{}ok {}: {count} slice{} of `{}` over {}, into {}",
                        if i == 0 { "" } else { "  downstream: " },
                        document.path.display(),
                        if count == 1 { "" } else { "s" },
                        plan.slicing.every,
                        plan.window(),
                        document.resolve(&plan.target.table),
                    )?;
                    for note in local.notes {
                        writeln!(out, "  note: {note}")?;
                    }
                }
                if !problems.is_empty() {
                    invalid += 1;
                    say!("{}\n", problems.join("\n"));
                }
            }
            Err(error) => {
                invalid += 1;
                // A plan that breaks its rules is still checked against its table: every problem
                // of a round of edits in one run.
                let error = match error.broken_plan() {
                    Some((path, plan)) => {
                        let issues = LocalTarget::read(path, plan, policy).await.issues;
                        error.with(issues)
                    }
                    None => error,
                };
                say!("{error}\n");
            }
        }
    }
    if invalid == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    say!(
        "{invalid} of {} plan file{} invalid",
        args.plans.len(),
        if args.plans.len() == 1 { " is" } else { "s are" }
    );
    Ok(ExitCode::FAILURE)
}

/// What a target on this machine's disk says of a plan: the columns it names that the table does
/// not hold ([`bf::plan_file::columns`]), and what the table's features ask of bf
/// ([`bf::delta::compat::notes`]). Nothing for a target in a store, which validation does not
/// reach, or a folder that is not a table yet.
#[derive(Default)]
struct LocalTarget {
    issues: Vec<bf::plan_file::Issue>,
    notes: Vec<String>,
}

impl LocalTarget {
    /// The local target of `plan`, read from the file at `path`.
    /// A table the plan may not read is not read at all, not even for its columns: the plan's
    /// refusal says it reaches outside the root, never what is there.
    async fn read(
        path: &std::path::Path,
        plan: &bf::plan_file::PlanFile,
        policy: &bf::plan_file::confine::Policy,
    ) -> LocalTarget {
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let target = Location::resolve(dir, &plan.target.table);
        let Location::Path(folder) = &target else { return LocalTarget::default() };
        let scope = policy.scope(path);
        if !scope.root.lets_read(folder) {
            return LocalTarget::default();
        }
        if !folder.join("_delta_log").is_dir() {
            // Not a table (yet, or not on this machine): only a path meant from elsewhere is said.
            let notes = bf::plan_file::written_from_here(dir, &plan.target.table)
                .map(|meant| format!("there is no table at {}: {meant}", folder.display()));
            return LocalTarget { issues: Vec::new(), notes: notes.into_iter().collect() };
        }
        let Ok(url) = bf::delta::store::table_url(&target) else { return LocalTarget::default() };
        if scope.check_table_files(&plan.target.table, &url, &[]).is_err() {
            return LocalTarget::default();
        }
        let table = match bf::delta::store::Stores::from_environment().open(&url, None).await {
            Ok(table) => table,
            Err(e) => {
                let notes = vec![format!("the table cannot be read, so `bf plan` will fail: {e}")];
                return LocalTarget { issues: Vec::new(), notes };
            }
        };
        let issues = match bf::delta::table::arrow_schema(&table) {
            Ok(schema) => bf::plan_file::columns::check(plan, &schema).await,
            Err(_) => Vec::new(),
        };
        LocalTarget { issues, notes: bf::delta::compat::notes(&table).await }
    }
}
