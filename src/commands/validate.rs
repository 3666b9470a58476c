//! `bf validate`: check plan files offline, the way a pull request's CI would.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::plan_file::chain::Chain;

/// Check plan files without writing or reaching any store: syntax, keys, window, slices, read-only
/// SQL, and the chain of `[[downstream]]` plans each names. A target on this machine's disk is
/// read, to say what its writer features mean for bf.
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
                for (i, member) in chain.plans().into_iter().enumerate() {
                    let document = &member.document;
                    let plan = &document.plan;
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
                    for note in local_notes(&document.resolve(&plan.target.table)).await {
                        writeln!(out, "  note: {note}")?;
                    }
                }
            }
            Err(error) => {
                invalid += 1;
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

/// What a target on this machine's disk asks of bf ([`bf::delta::compat::notes`]); nothing for a
/// target in a store, which validation does not reach, or a folder that is not a table yet.
async fn local_notes(target: &bf::delta::store::Location) -> Vec<String> {
    let bf::delta::store::Location::Path(path) = target else { return Vec::new() };
    if !path.join("_delta_log").is_dir() {
        return Vec::new();
    }
    let Ok(url) = bf::delta::store::table_url(target) else { return Vec::new() };
    match bf::delta::store::Stores::from_environment().open(&url, None).await {
        Ok(table) => bf::delta::compat::notes(&table).await,
        Err(e) => vec![format!("the table cannot be read, so `bf plan` will fail: {e}")],
    }
}
