//! `bf plan`: rehearse every slice on a shallow clone, show before vs after, save the plan.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bf::plan_file::chain::Chain;
use bf::rehearse::plan::Plan;
use bf::rehearse::policy::Policies;
use bf::rehearse::rehearsal::{self, Progress};
use indicatif::{ProgressBar, ProgressStyle};

use crate::render::plan::{Detail, Format, charts_wanted, render_with};

/// Rehearse a plan on a shallow clone of the table and show what it would change.
///
/// Nothing in the target table changes: bf clones it (no data copied but the window's files of an
/// unpartitioned table), writes every slice into the clone exactly as `bf apply` would, and compares
/// rows, metrics, keys, checks and guards before vs after. The plan is saved for `bf show` and
/// `bf apply`.
///
/// Exit status: 0 the plan can be applied, 1 an error or a failed check or guard, and with
/// `--detailed-exitcode` 2 when the plan can be applied and changes data.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Save the plan to this file instead of `<state-dir>/plan.json`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// How much of the plan to show (text and markdown).
    #[arg(long, value_enum, default_value_t = Detail::Auto)]
    detail: Detail,
    /// No charts: the trend is drawn under the summary on a terminal (never into a pipe) and as
    /// Mermaid charts in `--format markdown`.
    #[arg(long)]
    no_chart: bool,
    /// Also write the plan as one self-contained HTML page to FILE: the header, a chart per
    /// metric over the window and its neighbours, the slices, the changes, checks, guards and
    /// the outside-the-window proof. It loads nothing and runs no script.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Exit 2 (instead of 0) when the plan would change data.
    #[arg(long)]
    detailed_exitcode: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// `none`: show and save counts and metrics only, no value read from the data (changed rows,
    /// offending rows, breakdown groups): for runners that plan pull requests from forks.
    #[arg(long, value_enum, env = "BF_SAMPLES", default_value_t = Samples::Show)]
    samples: Samples,
    /// Rehearse only N of the plan's slices — the first, the last, the one where the table holds the
    /// most rows, the rest spread over the window — for a first look at a long window. Saved as a
    /// preview (`<state-dir>/preview.json`) that `bf apply` refuses, rehearsed in a table of its own
    /// beside the plan's rehearsal.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    sample: Option<u32>,
    /// Rego policies (`package main`, `deny` and `warn` sets of messages, as conftest reads them)
    /// evaluated against the saved plan: a `deny` makes the plan fail. `bf policy test DIR` runs
    /// the folder's fixtures.
    #[arg(long = "policy", value_name = "DIR", env = "BF_POLICY")]
    policies: Option<PathBuf>,
    #[command(flatten)]
    on: super::cluster::On,
}

/// Whether a plan shows values read from the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Samples {
    /// Changed rows and the breakdown, as `[diff]` asks.
    #[default]
    Show,
    /// Counts and metrics only.
    None,
}

impl Samples {
    /// The operator's `BF_SAMPLES`, for verbs that plan without the flag (`bf apply PLAN.toml`,
    /// `bf show`).
    pub fn from_env() -> Samples {
        match std::env::var("BF_SAMPLES") {
            Ok(value) if value.trim().eq_ignore_ascii_case("none") => Samples::None,
            _ => Samples::Show,
        }
    }
}

pub async fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    // A cluster that cannot run the slices fails the plan before anything is cloned or written.
    let cluster = args.on.reach().await?;
    let progress = Bar::new(args.quiet);
    let policies = args.policies.as_deref();
    let how = How {
        samples: args.samples,
        sample: args.sample.map(|n| n as usize),
        out: args.out.as_deref(),
        cluster: cluster.as_ref(),
    };
    let planned = rehearse_and_save(&args.plan, policy, policies, how, &args.state, &progress).await;
    progress.clear();
    let Some((plan, saved)) = planned? else { return Ok(ExitCode::FAILURE) };
    if let Some(path) = &args.html {
        super::write_report(path, &crate::render::plan::html(&plan))?;
    }
    let format = if args.json { Format::Json } else { args.format };
    let mut text = render_with(&plan, format, args.detail, charts_wanted(format, args.no_chart));
    if format == Format::Text {
        text.push_str(&format!("{}\n", saved_line(&plan, &saved, &args.state)));
    }
    crate::render::print(&text)?;
    Ok(match (plan.appliable(), args.detailed_exitcode && plan.changes_data()) {
        (false, _) => ExitCode::FAILURE,
        (true, true) => ExitCode::from(2),
        (true, false) => ExitCode::SUCCESS,
    })
}

/// How [`rehearse_and_save`] plans: which values it shows, how many slices it rehearses, where it
/// saves the plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct How<'a> {
    pub samples: Samples,
    /// A preview of this many slices (`--sample`).
    pub sample: Option<usize>,
    /// Where to save it instead of the state dir (`--out`).
    pub out: Option<&'a Path>,
    /// The cluster the slices' source queries run on (`BF_CLUSTER`), reached already.
    pub cluster: Option<&'a bf::cluster::Reached>,
}

/// Plans the plan file at `path`: load it, rehearse it, save the plan (in the state dir, or `out`)
/// and remember its rehearsal for `bf clean` — the one sequence `bf plan`, `bf apply PLAN.toml` and
/// `bf demo` share. `None` when the plan file or the rehearsal was refused: the reason is on stderr
/// and nothing was saved.
pub async fn rehearse_and_save(
    path: &Path,
    policy: &bf::plan_file::confine::Policy,
    policies: Option<&Path>,
    how: How<'_>,
    state: &super::StateDir,
    progress: &dyn Progress,
) -> anyhow::Result<Option<(Plan, PathBuf)>> {
    let How { samples, sample, out, cluster } = how;
    // The key the plan is signed with: an empty one is refused before anything is rehearsed.
    let key = bf::rehearse::seal::PlanKey::from_env()?;
    let chain = match Chain::load(path, policy) {
        Ok(chain) => chain.on_cluster(cluster.cloned()),
        Err(error) => {
            say!("{error}");
            return Ok(None);
        }
    };
    // Policies that do not parse are named before anything is rehearsed.
    let policies = match policies.map(Policies::load).transpose() {
        Ok(policies) => policies,
        Err(error) => {
            say!("error: {error}");
            return Ok(None);
        }
    };
    let rehearsed = match sample {
        Some(n) => rehearsal::preview(&chain, n, progress).await,
        None => rehearsal::rehearse_chain(&chain, progress).await,
    };
    let mut plan = match rehearsed {
        Ok(plan) => plan,
        Err(error) => {
            // A fork's plan: the comment shows no data value, its errors' neither.
            say!("{}", at_its_line(&chain, &error, samples));
            say!("nothing was written to the target, and no plan was saved");
            return Ok(None);
        }
    };
    if samples == Samples::None {
        plan.keep_counts_only();
    }
    if let Some(policies) = &policies {
        // Decided on the plan as it is saved: what `bf show --json` prints, and conftest reads.
        policies.apply_to(&mut plan)?;
    }
    // A preview is saved where `bf apply` does not look.
    let saved = match (out, sample) {
        (Some(out), _) => out.to_owned(),
        (None, Some(_)) => state.saved_preview(),
        (None, None) => state.saved_plan(),
    };
    if let Some(replaced) = &plan.replaced_rehearsal_of {
        // The plan saved where this one goes is replaced with its rehearsal; any other is left
        // without the files it would publish, and is named.
        let id_at = |path: &Path| Plan::load(path).ok().map(|p| p.id);
        if id_at(&saved).as_ref() != Some(replaced) {
            let default = state.saved_plan();
            let which = match id_at(&default).as_ref() == Some(replaced) {
                true => format!("the plan saved at {}", default.display()),
                false => "a plan saved in another folder or with `--out`".to_owned(),
            };
            say!(
                "note: this plan rebuilt the rehearsal of plan {replaced}, {which}: that plan can no longer be \
                 published as rehearsed (`bf apply` of it would need `--recompute`); apply this one, or plan \
                 that one again. Plans that should both stay appliable each need a `[rehearsal] table` of \
                 their own."
            );
        }
    }
    bf::rehearse::seal::save_signed(&plan, &saved, key.as_ref())?;
    for planned in plan.chain() {
        bf::rehearse::own_files::remember_rehearsal(state.path(), &planned.rehearsal.uri)?;
    }
    Ok(Some((plan, saved)))
}

/// A rehearsal's error, at the line of the plan file key it is about when it is about one (as
/// `bf validate` shows its errors), in the plan of the chain it came from.
fn at_its_line(chain: &Chain, error: &bf::rehearse::rehearsal::RehearsalError, samples: Samples) -> String {
    use bf::rehearse::rehearsal::{RehearsalError, without_values};
    // The value gate applies to what the error says, never to the plan's lines quoted around it.
    let said = |message: String| match samples {
        Samples::None => without_values(&message),
        Samples::Show => message,
    };
    fn find<'c>(chain: &'c Chain, path: &str) -> Option<&'c Chain> {
        if chain.document.path.display().to_string() == path {
            return Some(chain);
        }
        chain.downstream.iter().find_map(|below| find(below, path))
    }
    let (document, inner) = match error {
        RehearsalError::Downstream { plan, source } => {
            (find(chain, plan).map_or(&chain.document, |c| &c.document), source.innermost())
        }
        other => (&chain.document, other),
    };
    let mut issues = inner.issues();
    for issue in &mut issues {
        issue.message = said(std::mem::take(&mut issue.message));
    }
    match issues.is_empty() {
        false => document.invalid(issues).to_string(),
        true => format!("error: {}", super::explained(&said(error.to_string()))),
    }
}

/// Where the plan was saved and what to run next: `bf apply` for the state dir's saved plan, `bf
/// apply FILE` for one saved elsewhere (`--out`).
pub fn saved_line(plan: &Plan, saved: &Path, state: &super::StateDir) -> String {
    if plan.preview.is_some() {
        format!(
            "Saved the preview to {} for `bf show`; `bf apply` takes only a plan made without `--sample`: \
             `bf plan {}`.",
            saved.display(),
            plan.plan_file.path
        )
    } else if plan.appliable() {
        let apply = match saved == state.saved_plan() {
            true => "bf apply".to_owned(),
            false => format!("bf apply {}", saved.display()),
        };
        format!("Saved the plan to {} (id {}); apply it with `{apply}`.", saved.display(), plan.id)
    } else {
        format!("Saved the plan to {} for `bf show`; it cannot be applied.", saved.display())
    }
}

/// A progress bar on a terminal's stderr; nothing when piped or quiet.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new(quiet: bool) -> Bar {
        Bar((!quiet && std::io::stderr().is_terminal()).then(ProgressBar::new_spinner))
    }

    fn clear(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn slices(&self, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} rehearsing slice {pos}/{len} {wide_bar} {msg}")
                    .expect("a valid template"),
            );
        }
    }

    fn slice_written(&self, _index: usize, first: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(first.to_owned());
            bar.inc(1);
        }
    }

    fn step(&self, what: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(what.to_owned());
            bar.tick();
        }
    }
}
