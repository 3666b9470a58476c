//! `bf demo`: build the example shop and walk through the March reload on it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bf::apply::cascade::ChainApply;
use bf::apply::{ApplyReport, Silent};
use bf::delta::ledger;
use bf::delta::store::{Stores, display_url};
use bf::notify::Notice;
use bf::rehearse::plan::Plan;
use bf::rehearse::rehearsal::Quiet;
use bf::rollback;
use bf::shop::{Shop, ShopSummary};

use crate::render;
use crate::render::plan::{Format, render};

/// Build the example shop, then rehearse, apply and roll back the March reload on it, with the
/// revenue-by-day table built from it.
///
/// The shop: September's till files, a silver orders table whose March has the wrong currency, an
/// empty daily table, and the bundled plans (in `DIR/plans`, pointing at the shop). The walkthrough
/// runs `bf plan plans/march.toml`, `bf apply`, `bf history` and `bf rollback --cascade` in DIR (the
/// plan is saved in `DIR/.bf`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder to build the shop in; it must not hold a shop yet. The repository's `plans/` expect
    /// `bf-demo` beside them, which is where `bf demo` run from the repository puts it.
    #[arg(value_name = "DIR", default_value = "bf-demo")]
    dir: PathBuf,
    /// Only build the shop; skip the walkthrough, to try the verbs by hand on untouched tables.
    #[arg(long)]
    shop_only: bool,
    /// Put the shop's tables and files in an object store instead, e.g. `s3://my-bucket/bf-demo`
    /// (credentials and endpoint from the environment); DIR keeps the plans and the saved plan.
    #[arg(long, value_name = "URL")]
    store: Option<url::Url>,
}

pub async fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    let shop = Shop::at(&args.dir);
    let summary =
        shop.build().await.with_context(|| format!("building the example shop in {}", args.dir.display()))?;
    let stores = Stores::from_environment();
    if let Some(store) = &args.store {
        shop.move_to(&stores, store).await.with_context(|| format!("moving the example shop to {store}"))?;
    }
    let mut out = std::io::stdout().lock();
    let dir = args.dir.display();
    describe_shop(&mut out, &args, &summary)?;
    if args.shop_only {
        writeln!(out, "\nNext, in {dir}: bf plan plans/march.toml")?;
        return Ok(ExitCode::SUCCESS);
    }

    // Each step prints what the verb itself prints, through the same renderers.
    writeln!(out, "\n$ cd {dir} && bf plan plans/march.toml\n")?;
    let state = super::StateDir { dir: shop.root.join(".bf") };
    let plan = plan_step(&mut out, &shop, &state, policy).await?;
    writeln!(out, "\n$ bf apply --auto-approve\n")?;
    let reports = apply_step(&mut out, &plan, &state, policy).await?;
    history_step(&mut out, &plan, &stores, args.store.is_some()).await?;
    writeln!(out, "\n$ bf rollback --cascade --auto-approve\n")?;
    rollback_step(&mut out, &plan, &stores, &reports[0].backfill_id, policy).await?;
    next_steps(&mut out, &args.dir)?;
    Ok(ExitCode::SUCCESS)
}

/// What the shop holds and what is wrong in it, the story the walkthrough then fixes.
fn describe_shop(out: &mut impl Write, args: &Args, summary: &ShopSummary) -> anyhow::Result<()> {
    let dir = args.dir.display();
    if let Some(store) = &args.store {
        writeln!(out, "Built the example shop in {store} (its plans in {dir}/plans):")?;
    } else {
        writeln!(out, "Built the example shop in {dir}:")?;
    }
    writeln!(
        out,
        "  landing/orders/2026-09-DD.csv  {} files, {} orders (2001-2130) for September 2026",
        summary.september_files, summary.september_orders
    )?;
    writeln!(
        out,
        "  landing/orders_march.csv      {} corrected March orders",
        summary.march_corrected_orders
    )?;
    writeln!(out, "  landing/fx_rates.csv          exchange rates to EUR")?;
    writeln!(
        out,
        "  warehouse/orders_silver       {} rows, January to April 2026, version {}: March has EUR orders as USD, and 3 duplicates",
        summary.silver_rows, summary.silver_version
    )?;
    writeln!(
        out,
        "  warehouse/revenue_by_day      revenue by day from orders_silver, what the dashboards read: March is wrong too"
    )?;
    writeln!(out, "  warehouse/orders_daily        empty: its daily job starts in October")?;
    writeln!(
        out,
        "  plans/                        march.toml (with march-revenue-by-day.toml downstream), september.toml, correction-2026-09-15.toml"
    )?;
    Ok(())
}

/// `bf plan plans/march.toml`: rehearse the March reload and its downstream table, and save the plan.
async fn plan_step(
    out: &mut impl Write,
    shop: &Shop,
    state: &super::StateDir,
    policy: &bf::plan_file::confine::Policy,
) -> anyhow::Result<Plan> {
    let how = super::plan::How { samples: super::plan::Samples::from_env(), ..Default::default() };
    let Some((plan, saved)) =
        super::plan::rehearse_and_save(&shop.plans().join("march.toml"), policy, None, how, state, &Quiet)
            .await?
    else {
        anyhow::bail!("the bundled March plan was refused (above)");
    };
    write!(out, "{}", render(&plan, Format::Text))?;
    writeln!(out, "{}", super::plan::saved_line(&plan, &saved, state))?;
    writeln!(
        out,
        "\nNeither real table changed: each was rehearsed on a shallow clone beside it, revenue_by_day on the \
         rehearsal of the reloaded orders_silver."
    )?;
    Ok(plan)
}

/// `bf apply --auto-approve`: apply the chain, then send the notice its plan file asks for.
async fn apply_step(
    out: &mut impl Write,
    plan: &Plan,
    state: &super::StateDir,
    policy: &bf::plan_file::confine::Policy,
) -> anyhow::Result<Vec<ApplyReport>> {
    let reports = ChainApply::new(plan)
        .with_receipts(state.key())
        .execute(&Silent)
        .await
        .context("applying plans/march.toml")?;
    for report in &reports {
        for slice in &report.slices {
            writeln!(out, "{}", render::apply::slice_line(slice))?;
        }
        write!(out, "{}", render::apply::report(report))?;
    }
    if let Some(spec) = plan.notify() {
        // The demo has no webhook to post to unless one is set; the notice file shows what it says.
        let spec = bf::plan_file::Notify {
            webhook_env: spec.webhook_env.filter(|env| std::env::var_os(env).is_some()),
            ..spec
        };
        let notice = Notice::of_apply(plan, &spec.owners, &reports);
        writeln!(out)?;
        // The demo's own plans, planned and applied by this run.
        super::tell(&spec, plan, policy, &notice, true).await;
        write!(out, "\n{}", notice.text())?;
    }
    Ok(reports)
}

/// `bf history` of each table of the chain: the backfill's commits, recorded in the table.
async fn history_step(
    out: &mut impl Write,
    plan: &Plan,
    stores: &Stores,
    in_store: bool,
) -> anyhow::Result<()> {
    for planned in plan.chain() {
        let url = url::Url::parse(&planned.target.uri)?;
        let name = bf::plan_file::chain::table_name(&url);
        let shown = if in_store { display_url(&url) } else { format!("warehouse/{name}") };
        writeln!(out, "\n$ bf history {shown} --limit 3\n")?;
        let table = stores.open(&url, None).await?;
        writeln!(
            out,
            "{}",
            render::history::table(&ledger::history(&table, Some(3)).await?, &Default::default())
        )?;
    }
    Ok(())
}

/// `bf rollback --cascade --auto-approve`: undo the backfill, downstream table first.
async fn rollback_step(
    out: &mut impl Write,
    plan: &Plan,
    stores: &Stores,
    backfill_id: &str,
    policy: &bf::plan_file::confine::Policy,
) -> anyhow::Result<()> {
    let url = url::Url::parse(&plan.target.uri)?;
    let upstream = rollback::prepare(stores, &url, backfill_id).await?;
    let undo = bf::apply::cascade::with_downstream(upstream, &|_| stores.clone()).await?;
    for step in &undo {
        write!(out, "{}", render::rollback::intent(step, false))?;
    }
    let mut reports =
        bf::apply::cascade::roll_back(&undo, false, false).await.context("rolling back the March reload")?;
    for rolled in &reports {
        write!(out, "{}", render::rollback::report(rolled))?;
    }
    if let Some(spec) = plan.notify() {
        // The notice file said the backfill was applied; now it says it was rolled back.
        let spec = bf::plan_file::Notify {
            webhook_env: spec.webhook_env.filter(|env| std::env::var_os(env).is_some()),
            ..spec
        };
        reports.reverse();
        let notice = Notice::of_rollback(plan, &spec.owners, &reports);
        super::tell(&spec, plan, policy, &notice, true).await;
    }
    writeln!(
        out,
        "Downstream first, then upstream. Each table's history keeps both: the backfill's commits, then the RESTORE \
         that undid them."
    )?;
    Ok(())
}

/// What to try next by hand on the same shop.
fn next_steps(out: &mut impl Write, dir: &Path) -> anyhow::Result<()> {
    let dir = dir.display();
    writeln!(out, "\nNext, in {dir}, the September daily backfill (one run per day):")?;
    writeln!(out, "  bf slices plans/september.toml     30 runs, one per day, dated the day after")?;
    writeln!(out, "  bf plan plans/september.toml       rehearse September into the empty orders_daily")?;
    writeln!(out, "  bf apply --auto-approve            apply it; run it again after a crash to resume")?;
    writeln!(
        out,
        "  echo '2131,C07,42.50,2026-09-15T23:58:00' >> landing/orders/2026-09-15.csv   the order the till sent late"
    )?;
    writeln!(
        out,
        "  bf plan plans/correction-2026-09-15.toml   then the 15 September correction, which adds it"
    )?;
    Ok(())
}
