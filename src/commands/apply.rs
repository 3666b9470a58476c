//! `bf apply`: apply a saved plan to the real table, one recorded commit per slice.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::apply::cascade::{ChainApply, ChainApplyError, ChainProgress};
use bf::apply::{ApplyProgress, ApplyReport, SliceOutcome};
use bf::lineage::ApplyLineage;
use bf::notify::Notice;
use bf::rehearse::plan::Plan;
use bf::rehearse::rehearsal::Quiet;
use indicatif::{ProgressBar, ProgressStyle};

use crate::render;
use crate::render::plan::{Format, render, summary};

/// Apply a saved plan: each slice one atomic commit, recorded in the table, resumable.
///
/// `bf apply` applies the plan `bf plan` saved in the state dir; `bf apply FILE.json` one saved with
/// `--out`; `bf apply PLAN.toml` plans first, shows the plan and asks before applying. A stale plan
/// (plan file edited, input changed, failed check) is refused, and so is a slice another writer's
/// commit since the plan touched (its days or its files; commits elsewhere never block). Each slice
/// publishes the files its rehearsal wrote, exactly what the plan showed; `--recompute` runs its
/// query again instead. Run it again after a crash: slices already committed are skipped, and
/// counted again. `--slice N` applies one slice of the saved plan, as one task of an orchestrator's
/// run, and `--finish` ends such a run.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A saved plan (`.json`) or a plan file (`.toml`) to plan and apply; default: the saved plan.
    #[arg(value_name = "PLAN")]
    plan: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Apply without asking.
    #[arg(long)]
    auto_approve: bool,
    /// `all`: apply every slice again under a new backfill id, even those already committed; each
    /// slice's query runs again (the first apply's files are the table's already).
    #[arg(long, value_name = "WHAT", value_parser = ["all"])]
    rerun: Option<String>,
    /// Run each slice's query again and write its rows, instead of publishing the files the
    /// rehearsal wrote (for a rehearsal cleaned or vacuumed since `bf plan`; what lands may then
    /// differ from what the plan showed).
    #[arg(long)]
    recompute: bool,
    /// Apply only slice N of the saved plan (repeatable), with every guarantee of a full apply: one
    /// task of an orchestrator's run. A slice already committed is a success; the comment and the
    /// change log wait for `--finish`. Order: on a table partitioned by the date column slices land
    /// in any order; on one that is not, a slice waits for the slices before it whose files it
    /// rewrites (refused, naming them, before anything is written), unless `--recompute`.
    #[arg(long, value_name = "N", conflicts_with_all = ["rerun", "finish"])]
    slice: Vec<usize>,
    /// Apply only slices A to B (`3..9`, inclusive), as `--slice` does each.
    #[arg(long, value_name = "A..B", value_parser = slice_range, conflicts_with_all = ["rerun", "finish"])]
    slices: Option<std::ops::RangeInclusive<usize>>,
    /// Write no slice: once every slice is committed (refused, naming the missing ones, before),
    /// set the table comment, write the change-log row and send the notice.
    #[arg(long, conflicts_with = "rerun")]
    finish: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// Print only the outcome.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    on: super::cluster::On,
}

/// One line per slice on stderr ("ok 2026-09-15: 4 rows for the source's 4, 0 missing"), under a
/// progress bar when stderr is a terminal.
struct Lines {
    quiet: bool,
    bar: Option<ProgressBar>,
}

impl Lines {
    fn new(quiet: bool, slices: usize) -> Lines {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(slices as u64);
            bar.set_style(
                ProgressStyle::with_template("applying slice {pos}/{len} {wide_bar} {elapsed}")
                    .expect("a valid template"),
            );
            bar
        });
        Lines { quiet, bar }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl ChainProgress for Lines {
    fn table_started(&self, plan: &Plan, position: usize, tables: usize) {
        if self.quiet || tables == 1 {
            return;
        }
        let line = format!(
            "applying {} ({} of {tables}){}",
            url::Url::parse(&plan.target.uri)
                .map_or(plan.target.table.clone(), |u| bf::plan_file::chain::table_name(&u)),
            position + 1,
            if position == 0 { "" } else { ", built from the tables above" }
        );
        match &self.bar {
            Some(bar) => bar.println(line),
            None => say!("{line}"),
        }
    }
}

impl ApplyProgress for Lines {
    fn slice_done(&self, outcome: &SliceOutcome) {
        if self.quiet {
            return;
        }
        let line = render::apply::slice_line(outcome);
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => say!("{line}"),
        }
    }
}

pub async fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    refuse_fan_out_of_a_plan_file(&args)?;
    // The cluster is asked only when slices' queries run here: planning a plan file, or writing
    // slices by their queries (`--recompute`, `--rerun`); publishing rehearsed files runs none.
    let cluster = match plan_file(&args).is_some() || args.recompute || args.rerun.is_some() {
        true => args.on.reach().await?,
        false => None,
    };
    let Some(plan) = plan_to_apply(&args, policy, cluster.as_ref()).await? else {
        return Ok(ExitCode::FAILURE);
    };
    if plan.proven_unchanged()
        && plan.appliable()
        && args.rerun.is_none()
        && !args.finish
        && only_slices(&args).is_none()
        && !unfinished(&plan).await
    {
        return nothing_to_apply(args.json);
    }
    let whole = args.rerun.is_none() && !args.finish && only_slices(&args).is_none();
    if !approved(&plan, args.auto_approve, whole).await? {
        return Ok(ExitCode::FAILURE);
    }
    let only = only_slices(&args);
    let fan_out = only.is_some();
    let (lineage, emitter) = super::lineage(&args.state);
    let runs = ApplyLineage::new(lineage, &emitter, &plan, fan_out);
    if let Some(cluster) = cluster.as_ref().filter(|_| args.recompute || args.rerun.is_some()) {
        say!("Slices' source queries run {}.", cluster.ran_on());
    }
    let Some(executed) = interruptible(&plan, execute(&plan, &args, only, cluster, &runs)).await else {
        runs.interrupted("interrupted (Ctrl-C): `bf apply` resumes it");
        super::delivered(emitter).await;
        return Ok(ExitCode::from(130));
    };
    let reports = match executed {
        Ok(reports) => {
            runs.completed(&reports);
            reports
        }
        Err(stopped) => {
            runs.failed(&stopped, &bf::delta::store::redact(&stopped.source.to_string()));
            say_where_it_stopped(&plan, &stopped);
            super::delivered(emitter).await;
            return Ok(ExitCode::FAILURE);
        }
    };
    let lineage = super::delivered(emitter).await;
    // One task of a fan-out tells nobody: `--finish` does, once every slice is in.
    let notices = if fan_out { Vec::new() } else { tell(&plan, &reports, policy).await };
    print_outcome(reports, notices, lineage, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Whether a backfill of the plan is begun and neither finished nor rolled back (a `--rerun all`
/// that stopped after a slice): applying it resumes it, even when it writes rows equal to the
/// table's, so that it ends with its comment as every backfill does.
async fn unfinished(plan: &bf::rehearse::plan::Plan) -> bool {
    bf::apply::state(plan)
        .await
        .is_ok_and(|state| state.backfill_id.is_some() && !state.commented && state.rolled_back.is_none())
}

/// A plan whose rehearsal proved every slice's rows equal to the table's: applying it would write
/// a backfill of identical rows, so nothing is written, and that is a success.
fn nothing_to_apply(json: bool) -> anyhow::Result<ExitCode> {
    let why = "the rehearsal found every slice's rows equal to the table's, compared one by one on the key";
    if json {
        let text = render::json(&serde_json::json!({ "written": false, "why": why }));
        crate::render::print(&text)?;
    } else {
        say!("Nothing to apply: {why}. Nothing written.");
    }
    Ok(ExitCode::SUCCESS)
}

/// The plan file to plan and apply (`bf apply PLAN.toml`), if one was given rather than a saved plan.
fn plan_file(args: &Args) -> Option<&PathBuf> {
    args.plan.as_ref().filter(|path| path.extension().is_some_and(|e| e == "toml"))
}

/// Tasks of one fanned-out run must apply the same plan: planning a `.toml` in each task would
/// give each its own plan, and its own backfill id.
fn refuse_fan_out_of_a_plan_file(args: &Args) -> anyhow::Result<()> {
    let fanned = !args.slice.is_empty() || args.slices.is_some() || args.finish;
    if fanned && plan_file(args).is_some() {
        anyhow::bail!(
            "`--slice`, `--slices` and `--finish` apply a saved plan, the one every task shares: run `bf plan` once, \
             then give each task the saved plan (`.bf/plan.json`, or the file `bf plan --out` wrote)"
        );
    }
    Ok(())
}

/// The plan to apply: a plan file planned now and shown, to decide on before anything is
/// written; or a saved plan, as it was reviewed. `None` when planning refused the plan file
/// (it said why).
async fn plan_to_apply(
    args: &Args,
    policy: &bf::plan_file::confine::Policy,
    cluster: Option<&bf::cluster::Reached>,
) -> anyhow::Result<Option<Plan>> {
    // The operator's policies (`BF_POLICY`) hold for a plan made here as for `bf plan`, and are
    // decided again on a saved plan: a denial erased from the file is made again.
    let policies = std::env::var_os("BF_POLICY").map(std::path::PathBuf::from);
    let path = match plan_file(args) {
        Some(path) => path,
        // A saved plan is applied only as it was reviewed (bf::rehearse::seal).
        None => {
            let saved = args.plan.clone().unwrap_or_else(|| args.state.saved_plan());
            let preview = args.state.saved_preview();
            if !saved.exists() && preview.exists() {
                // The last `bf plan` here was `--sample`: its refusal says so, not "no saved plan".
                bf::rehearse::seal::load_reviewed(&preview, policy)?;
            }
            let mut plan = bf::rehearse::seal::load_reviewed(&saved, policy)?;
            if let Some(policies) = &policies {
                bf::rehearse::policy::Policies::load(policies)?.apply_to(&mut plan)?;
            }
            return Ok(Some(plan));
        }
    };
    let how = super::plan::How { samples: super::plan::Samples::from_env(), cluster, ..Default::default() };
    let Some((plan, _)) =
        super::plan::rehearse_and_save(path, policy, policies.as_deref(), how, &args.state, &Quiet).await?
    else {
        return Ok(None);
    };
    // The plan to decide on; stdout is the outcome's (with `--json`, one JSON document).
    let shown = render(&plan, Format::Text);
    if args.json || args.quiet {
        say_part!("{shown}");
    } else {
        out_part!("{shown}");
    }
    Ok(Some(plan))
}

/// Whether to go on: never for a plan with problems (listed), and without `--auto-approve` only
/// when the operator says yes to the plan's summary. Warnings are shown either way.
async fn approved(plan: &Plan, auto_approve: bool, whole: bool) -> anyhow::Result<bool> {
    if !plan.appliable() {
        say!("error: this plan cannot be applied:");
        let chain = plan.chain();
        for below in &chain {
            // A downstream plan's problems name its table: they stop the chain as the first's do.
            let table = match std::ptr::eq(*below, plan) {
                true => String::new(),
                false => format!("{}: ", below.target.uri),
            };
            for problem in &below.problems {
                say!("  - {table}{problem}");
            }
        }
        return Ok(false);
    }
    for warning in &plan.warnings {
        say!("Warning: {warning}");
    }
    if !auto_approve {
        // Where the backfill stands, before asking: nothing to ask about a finished one (the apply
        // says it is applied and writes nothing), and a resume says which slices are in.
        let resume = match whole {
            true => bf::apply::state(plan).await.ok(),
            false => None,
        };
        if let Some(state) = &resume
            && state.commented
            && state.rolled_back.is_none()
            && state.pending.is_empty()
        {
            return Ok(true);
        }
        say!("{}", summary(plan));
        if let Some(line) = resume.as_ref().and_then(|state| render::apply::resuming(plan, state)) {
            say!("{line}");
        }
        let tables: Vec<String> = plan.chain().iter().map(|p| display_table(&p.target.uri)).collect();
        let question = format!("Do you want to apply plan {} to {}?", plan.id, tables.join(" and then "));
        if !super::confirm(&question, "apply")? {
            say!("Apply cancelled; nothing was written.");
            return Ok(false);
        }
    }
    Ok(true)
}

/// `work` (the apply), stopped by Ctrl-C: `None` once it was, and what is in the table and how to
/// go on said. Every slice is one commit, so stopping anywhere is stopping between commits (one in
/// flight lands whole or not at all), as a crash is. The apply is dropped at its next await, then
/// the table read to count what landed; a watcher task hears the signal, so that an apply busy on
/// its own thread is still stopped: if it has not stopped 5 seconds after the signal, the watcher
/// ends the process itself, saying what it last read.
async fn interruptible<T>(plan: &Plan, work: impl std::future::Future<Output = T>) -> Option<T> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (heard, signal) = tokio::sync::oneshot::channel();
    // Set once the apply's own task has stopped and says what is in the table itself.
    let stopped = std::sync::Arc::new(AtomicBool::new(false));
    let (stuck, said) = (plan.clone(), stopped.clone());
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        let _ = heard.send(());
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        if !said.load(Ordering::SeqCst) {
            say!("\n{}", interrupted(&stuck).await);
            std::process::exit(130);
        }
    });
    tokio::select! {
        done = work => {
            watcher.abort();
            Some(done)
        }
        Ok(()) = signal => {
            stopped.store(true, Ordering::SeqCst);
            say!("\n{}", interrupted(plan).await);
            None
        }
    }
}

/// What an interrupted apply left in each table of the plan's chain (each read for at most 10
/// seconds), and where `bf apply` resumes.
async fn interrupted(plan: &Plan) -> String {
    let mut states = Vec::new();
    for table in plan.chain() {
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), bf::apply::state(table)).await;
        states.push((table, read.ok().and_then(Result::ok)));
    }
    render::apply::interrupted(&states)
}

/// The slices `--slice` and `--slices` name, or `None` for a whole apply.
fn only_slices(args: &Args) -> Option<BTreeSet<usize>> {
    let mut only: BTreeSet<usize> = args.slice.iter().copied().collect();
    only.extend(args.slices.clone().into_iter().flatten());
    (!only.is_empty()).then_some(only)
}

/// Apply the plan and its downstream plans, a line per slice as each lands, each run's events
/// emitted as it goes.
async fn execute(
    plan: &Plan,
    args: &Args,
    only: Option<BTreeSet<usize>>,
    cluster: Option<bf::cluster::Reached>,
    runs: &ApplyLineage<'_>,
) -> Result<Vec<ApplyReport>, ChainApplyError> {
    let slices = plan.chain().iter().map(|p| p.slices.len()).sum();
    let lines = Lines::new(args.quiet || args.json, slices);
    let outcome = ChainApply::new(plan)
        .with_receipts(args.state.key())
        .with_rerun(args.rerun.is_some())
        .with_recompute(args.recompute)
        .on_cluster(cluster)
        .with_only(only)
        .finishing(args.finish)
        .execute(&(&lines, runs))
        .await;
    lines.finish();
    outcome
}

/// Why the apply stopped, and what to do next: nothing when it was refused before writing (the
/// error says what to do instead), a rollback after a failed verification, else a resume; and
/// for a chain, which tables are applied already.
fn say_where_it_stopped(plan: &Plan, stopped: &ChainApplyError) {
    use bf::apply::ApplyError;
    let chained = plan.chain().len() > 1;
    let error = &stopped.source;
    // A chain's error names the table it stopped at.
    let said = if chained { stopped.to_string() } else { error.to_string() };
    say!("error: {}", super::explained(&said));
    // Refused before writing: the message says what to do instead of a resume.
    let refused = matches!(
        error,
        ApplyError::Stale(_)
            | ApplyError::Unsupported(_)
            | ApplyError::Ledger(_)
            | ApplyError::UnsafeCommits(_)
            | ApplyError::NoSuchSlice { .. }
            | ApplyError::Unfinished { .. }
            | ApplyError::FanOutChain
            | ApplyError::Overtaken { .. }
            | ApplyError::Unverified(_)
            | ApplyError::OutOfOrder(_)
            // Undone since: its message names the one command that moves on (`bf plan`), never a resume.
            | ApplyError::RolledBack { .. }
    );
    match error {
        ApplyError::Verify { .. } => {
            say!("That slice's commit is in the table: `bf rollback` puts the table back to the pre-version.")
        }
        // Lost to another writer's commit: the error says the way out (a new plan, or a resume).
        ApplyError::Conflict { .. } | ApplyError::Raced { .. } => {}
        // Slices of the table it stopped at may be committed already: the error counts them.
        ApplyError::Overtaken { committed, .. } if *committed > 0 => {}
        _ if refused && chained && stopped.applied.is_empty() => {
            say!("No table of the chain was written.")
        }
        _ if refused => {}
        _ => say!(
            "Slices committed before this stay recorded in the table; run `bf apply` again (without `--rerun`) \
             to resume."
        ),
    }
    for report in &stopped.applied {
        say!(
            "{} is applied (backfill {}); `bf apply` again resumes the chain at {}, or `bf rollback --cascade` undoes it.",
            report.table,
            report.backfill_id,
            stopped.table
        );
    }
}

/// Send the notice the plan file asks for; where it went, for the outcome.
async fn tell(plan: &Plan, reports: &[ApplyReport], policy: &bf::plan_file::confine::Policy) -> Vec<String> {
    match plan.notify() {
        Some(spec) => {
            let notice = Notice::of_apply(plan, &spec.owners, reports);
            // The saved plan was checked against its plan text before it was applied (`seal`).
            super::tell(&spec, plan, policy, &notice, true).await
        }
        None => Vec::new(),
    }
}

/// The outcome on stdout, each table's report; with `--json`, the chain's as one document.
fn print_outcome(
    reports: Vec<ApplyReport>,
    notices: Vec<String>,
    lineage: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let mut reports = reports.into_iter();
    let first = reports.next().expect("a chain applies its first plan");
    let applied = Applied { first, downstream: reports.collect(), notices, lineage };
    let text = if json {
        render::json(&applied)
    } else {
        let all = std::iter::once(&applied.first).chain(&applied.downstream);
        // Until when each table's backfill can be undone, after the version to go back to.
        let parts: Vec<String> = all
            .map(|report| match &report.rollback {
                Some(horizon) => {
                    format!("{}{}\n", render::apply::report(report), render::rollback::horizon(horizon))
                }
                None => render::apply::report(report),
            })
            .collect();
        parts.join("\n")
    };
    crate::render::print(&text)?;
    Ok(())
}

/// `3..9`: slices 3 to 9, inclusive.
fn slice_range(text: &str) -> Result<std::ops::RangeInclusive<usize>, String> {
    let (first, last) =
        text.split_once("..").ok_or_else(|| format!("`{text}` is not a range: write e.g. 3..9"))?;
    let number = |n: &str| n.trim().parse::<usize>().map_err(|_| format!("`{n}` is not a slice number"));
    let (first, last) = (number(first)?, number(last)?);
    if first == 0 || last < first {
        return Err(format!(
            "`{text}`: slices are numbered from 1, and the range's first comes before its last"
        ));
    }
    Ok(first..=last)
}

/// What `bf apply --json` prints: the first table's report as before chains existed, the tables
/// downstream of it, and where the notice went.
#[derive(serde::Serialize)]
struct Applied {
    #[serde(flatten)]
    first: ApplyReport,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    downstream: Vec<ApplyReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notices: Vec<String>,
    /// Where the OpenLineage events went.
    #[serde(skip_serializing_if = "Option::is_none")]
    lineage: Option<String>,
}

/// A table's location as people read it.
fn display_table(uri: &str) -> String {
    url::Url::parse(uri).map_or_else(|_| uri.to_owned(), |u| bf::delta::store::display_url(&u))
}
