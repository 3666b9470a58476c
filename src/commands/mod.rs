//! One file per verb: its arguments, and the glue from them to the library and back to the terminal.
//! [`cli`] holds the clap types. Results go to stdout, problems to stderr; a verb returns the exit
//! code it earned.

pub mod apply;
pub mod clean;
pub mod cli;
pub mod cluster;
pub mod demo;
pub mod export;
pub mod freeze;
pub mod gaps;
pub mod history;
pub mod init;
pub mod lineage;
pub mod plan;
pub mod policy;
pub mod rollback;
pub mod schema;
pub mod show;
pub mod slices;
pub mod status;
pub mod unfreeze;
pub mod validate;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::commands::cli::Command;

pub async fn run(command: Command, root: Option<&Path>) -> anyhow::Result<ExitCode> {
    // What plans may reach is the operator's: the root and the environment's lists, read once.
    let policy = bf::plan_file::confine::Policy::from_env(root)?;
    match command {
        Command::Init(args) => init::run(args).await,
        Command::Validate(args) => validate::run(args, &policy).await,
        Command::Slices(args) => slices::run(args, &policy),
        Command::Plan(args) => plan::run(args, &policy).await,
        Command::Show(args) => show::run(args),
        Command::Apply(args) => apply::run(args, &policy).await,
        Command::Rollback(args) => rollback::run(args, &policy).await,
        Command::History(args) => history::run(args).await,
        Command::Gaps(args) => gaps::run(args, &policy).await,
        Command::Freeze(args) => freeze::run(args).await,
        Command::Policy(args) => policy::run(args),
        Command::Unfreeze(args) => unfreeze::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Clean(args) => clean::run(args).await,
        Command::Export(args) => export::run(args, &policy),
        Command::Lineage(args) => lineage::run(args).await,
        Command::Schema(args) => schema::run(args),
        Command::Demo(args) => demo::run(args, &policy).await,
        Command::Cluster(args) => cluster::run(args).await,
    }
}

/// Writes an HTML report the operator asked for (`--html FILE`): whole or not at all, never
/// through a link or into a `.git`, never over a file that can be run (the write gate's rules,
/// the file's own folder the place allowed). Readable by its owner only: it may hold rows.
pub fn write_report(path: &Path, page: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    bf::write_gate::WriteGate::within([&folder])
        .write_file(path, page.as_bytes(), bf::write_gate::Readers::Owner)
        .with_context(|| format!("writing the report to {}", path.display()))
}

/// Asks on the terminal, like Terraform: only "yes" goes ahead. Without a terminal to ask on, it
/// refuses rather than hang or guess.
pub fn confirm(question: &str, verb: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "refusing to {verb} without confirmation: stdin is not a terminal (pass --auto-approve)"
        );
    }
    say_part!("{question} Only 'yes' will be accepted: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// Sends a notice where the plan's `[notify]` says, and says on stderr where it went. A notice
/// that was not delivered is a warning with the notice printed, so it can be passed on by hand;
/// the command's outcome stands. Returns a line per destination, for `--json`.
///
/// Where a notice goes is the reviewed plan's to say: `reviewed` tells whether the saved plan's
/// text is the one checked (by the seal before an apply; against the table's ledger before a
/// rollback), for a saved plan is a file in a state folder, and one planted or edited there would
/// pick the file written and the variable whose URL is posted to. Unless it is, the notice is
/// printed, not sent. The notice file is written only inside the root: the plan file's, where
/// that file still holds the text, else the root of where bf runs — never one a saved plan's path
/// picks.
pub async fn tell(
    spec: &bf::plan_file::Notify,
    plan: &bf::rehearse::plan::Plan,
    policy: &bf::plan_file::confine::Policy,
    notice: &bf::notify::Notice,
    reviewed: bool,
) -> Vec<String> {
    use bf::notify::Delivery;
    let deliveries = match reviewed {
        true => {
            let root = match plan.plan_file.unchanged_on_disk() {
                true => policy.scope(Path::new(&plan.plan_file.path)).root,
                // The root of where bf runs (the operator's, or the work tree holding the current
                // folder; outside any, the folder above it), never one a saved plan's path picks.
                false => policy.scope(&Path::new(".").join("plan.toml")).root,
            };
            bf::notify::send(spec, plan.plan_dir(), &root, notice).await
        }
        false => vec![Delivery::Failed {
            to: "the plan's [notify]".to_owned(),
            why: format!(
                "the saved plan's text is not, or cannot be shown to be, the one the backfill was applied from \
                 (the plan file {}), so where to send it is not known",
                plan.plan_file.path
            ),
        }],
    };
    let mut lines = Vec::new();
    for delivery in &deliveries {
        let line = match delivery {
            Delivery::Posted { env } => format!("notice posted to the webhook in {env}"),
            Delivery::Written { file } => format!("notice written to {}", file.display()),
            Delivery::Failed { to, why } => format!("notice NOT delivered to {to}: {why}"),
        };
        if delivery.failed() {
            say!("Warning: {line}");
        } else {
            say!("{line}");
        }
        lines.push(line);
    }
    if deliveries.iter().any(Delivery::failed) {
        say!("The notice, to pass on by hand:\n\n{}", notice.text());
    }
    lines
}

/// The OpenLineage side of a command: what the environment says of the run that started bf
/// (a malformed `OPENLINEAGE_PARENT_ID` is a warning, never a reason to stop), and the emitter its
/// settings make, saving into the state dir what it cannot deliver.
pub fn lineage(state: &StateDir) -> (bf::lineage::Lineage, bf::lineage::Emitter) {
    let emitter = bf::lineage::Emitter::from_env(bf::lineage::spool(state.path()));
    let (lineage, problem) = bf::lineage::Lineage::from_env();
    if let Some(problem) = problem.filter(|_| emitter.is_on()) {
        say!("Warning: lineage: {problem}; bf's runs are sent without a parent");
    }
    (lineage, emitter)
}

/// Waits for the events to be delivered and says where they went on stderr; one line for
/// `--json`, none when lineage is off.
pub async fn delivered(emitter: bf::lineage::Emitter) -> Option<String> {
    let delivery = emitter.finish().await;
    if delivery == bf::lineage::Delivery::default() {
        return None;
    }
    let mut line = match &delivery.to {
        Some(to) => format!("{} OpenLineage events sent to {to}", delivery.sent),
        None => "no OpenLineage events sent".to_owned(),
    };
    if let Some(problem) = &delivery.problem {
        line = format!("{line}; {problem}");
    }
    if delivery.saved > 0 {
        let spool = delivery.spool.as_ref().map_or(String::new(), |p| format!(" in {}", p.display()));
        line = format!("{line}; {} saved{spool}: `bf lineage resend` sends them", delivery.saved);
    }
    match delivery.problem.is_some() {
        true => say!("Warning: {line}"),
        false => say!("{line}"),
    }
    Some(line)
}

/// An error as bf prints it: secrets redacted, and below it what to change when it is a query that
/// ran out of memory or a cluster that lost its workers.
pub fn explained(message: &str) -> String {
    let message = bf::delta::memory::explain(&bf::delta::store::redact(message));
    match bf::cluster::hint(&message) {
        Some(hint) => format!("{message}\nhelp: {hint}"),
        None => message,
    }
}

/// Where bf keeps what it remembers between commands (the saved plan, the rehearsals it made):
/// one option, one place that knows the layout.
#[derive(Debug, Clone, clap::Args)]
pub struct StateDir {
    /// Where bf keeps the saved plan and the list of rehearsals it made.
    #[arg(long = "state-dir", value_name = "DIR", env = "BF_STATE_DIR", default_value = ".bf")]
    pub dir: PathBuf,
}

impl StateDir {
    /// The plan the last `bf plan` saved.
    pub fn saved_plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }

    /// The preview the last `bf plan --sample` saved: never a plan `bf apply` takes.
    pub fn saved_preview(&self) -> PathBuf {
        self.dir.join("preview.json")
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The state dir's key, whose receipt each slice an apply commits from here records; `None`,
    /// said, where it cannot be kept (the apply goes on, and its rollback must name it).
    pub fn key(&self) -> Option<bf::apply::receipt::StateKey> {
        match bf::apply::receipt::StateKey::of(&self.dir) {
            Ok(key) => Some(key),
            Err(error) => {
                say!(
                    "warning: {}: {error}: this apply's slices record no receipt of it, so `bf rollback` undoes \
                     it only when named (`--backfill`)",
                    self.dir.join("key").display()
                );
                None
            }
        }
    }
}
