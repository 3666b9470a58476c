//! A saved plan as people read it: in a terminal (`bf plan`, `bf show`) or as a pull-request
//! comment (`--format markdown`). JSON is the plan value itself.

use std::fmt::Write;

use bf::rehearse::diff::{BreakdownRow, Measures, SampleRow};
use bf::rehearse::plan::{Plan, SliceReport};
use similar::{ChangeTag, TextDiff};

use bf::notify::markdown as md;

use super::{change, count, number, percent, signed, table};

/// How a plan is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Tables for a terminal.
    #[default]
    Text,
    /// The saved plan as one JSON document.
    Json,
    /// A pull-request comment: summary line, per-slice table, checks.
    Markdown,
}

/// How much of a plan the text and markdown forms show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Detail {
    /// Everything for a plan of up to 12 slices; for a longer one, the summary, the slices with the
    /// most changes and their changed rows: a screen, not a scroll.
    #[default]
    Auto,
    /// The summary, checks, guards and the slices with the most changes.
    Summary,
    /// Every slice's row; changed rows of the slices with the most changes.
    Slices,
    /// Everything: every slice and every slice's changed rows.
    All,
}

/// Plans longer than this are shown as a summary first, with their largest slices.
const LONG_PLAN: usize = 12;
/// How many slices a summary lists, and how many slices' changed rows it shows.
const TOP_SLICES: usize = 10;
const TOP_SAMPLES: usize = 3;
/// GitHub refuses comments longer than this many characters.
const COMMENT_LIMIT: usize = 65_536;

pub fn render(plan: &Plan, format: Format) -> String {
    render_with(plan, format, Detail::Auto)
}

pub fn render_with(plan: &Plan, format: Format, detail: Detail) -> String {
    match format {
        Format::Text if plan.downstream.is_empty() => text(plan, detail),
        Format::Text => chain_text(plan, detail),
        Format::Json => super::json(plan),
        Format::Markdown if plan.downstream.is_empty() => markdown(plan, detail, COMMENT_LIMIT) + MARKER,
        Format::Markdown => chain_markdown(plan, detail),
    }
}

/// How a CI job finds its earlier comment on the pull request to update it.
const MARKER: &str = "\n<!-- bf plan -->\n";

/// A chain: each table's plan, upstream first, under a line naming the table it is built from; the
/// chain's summary last, where a terminal leaves the eye.
fn chain_text(root: &Plan, detail: Detail) -> String {
    let mut out = text(root, detail);
    for (plan, upstream) in downstream_of(root) {
        let _ = writeln!(
            out,
            "\n── downstream of {}: {} ──\n",
            table_name(&upstream.target.uri),
            table_name(&plan.target.uri)
        );
        out.push_str(&text(plan, detail));
    }
    let _ = writeln!(out, "\n{}", chain_summary(root));
    if !root.appliable() {
        let _ = writeln!(out, "The chain cannot be applied: a plan in it has problems (above).");
    }
    out
}

/// `Chain of 2 tables, applied in this order:` and each table's summary line.
fn chain_summary(root: &Plan) -> String {
    let plans = root.chain();
    let mut lines = vec![format!("Chain of {}, applied in this order:", count(plans.len(), "table"))];
    for plan in plans {
        lines.push(format!("  {}: {}", table_name(&plan.target.uri), summary(plan)));
    }
    lines.join("\n")
}

/// Every plan below `root` with the plan it is downstream of, in apply order.
fn downstream_of(root: &Plan) -> Vec<(&Plan, &Plan)> {
    let mut pairs = Vec::new();
    for plan in &root.downstream {
        pairs.push((plan, root));
        pairs.extend(downstream_of(plan));
    }
    pairs
}

/// A chain as one pull-request comment: the chain's status first, then each table's plan, all
/// under GitHub's limit.
fn chain_markdown(root: &Plan, detail: Detail) -> String {
    let plans = root.chain();
    let status = if root.appliable() { "✅" } else { "❌" };
    let mut out = format!("## {status} Backfill of {} tables\n\n", plans.len());
    let _ = writeln!(out, "| | table | plan | change |\n|---|---|---|---|");
    for (i, plan) in plans.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            i + 1,
            md::code(&table_name(&plan.target.uri)),
            // The file's name: its folder is the planning machine's.
            md::code(
                &std::path::Path::new(&plan.plan_file.path)
                    .file_name()
                    .map_or_else(|| plan.plan_file.path.clone(), |name| name.to_string_lossy().into_owned())
            ),
            md::text(&summary(plan))
        );
    }
    let _ = writeln!(
        out,
        "\n`bf apply` applies them in this order, each table its own backfill; downstream tables were rehearsed on \
         the rehearsals of the tables they read. `bf rollback --cascade` undoes them in reverse order.\n"
    );
    let budget = (COMMENT_LIMIT - out.len() - 1_000) / plans.len();
    for (i, plan) in plans.iter().enumerate() {
        let _ = writeln!(out, "\n---\n\n#### {}. {}\n", i + 1, md::code(&table_name(&plan.target.uri)));
        out.push_str(&markdown(plan, detail, budget));
    }
    out + MARKER
}

/// `orders_silver`: the last segment of a table's URI.
fn table_name(uri: &str) -> String {
    url::Url::parse(uri).map(|u| bf::plan_file::chain::table_name(&u)).unwrap_or_else(|_| uri.to_owned())
}

/// What a detail level shows of a plan: which slices' rows, and which slices' changed rows.
struct Shown<'p> {
    slices: Vec<&'p SliceReport>,
    /// How many of `slices` were chosen for being far from the rest rather than for their size.
    outliers: usize,
    samples: Vec<&'p SliceReport>,
}

impl<'p> Shown<'p> {
    fn of(plan: &'p Plan, detail: Detail) -> Shown<'p> {
        let everything = detail == Detail::All || (detail == Detail::Auto && plan.slices.len() <= LONG_PLAN);
        let has_samples = |s: &&SliceReport| s.changes.as_ref().is_some_and(|c| !c.samples.is_empty());
        let largest = |n: usize, candidates: Vec<&'p SliceReport>| {
            let mut by_change = candidates;
            by_change.sort_by(|a, b| change_size(b).total_cmp(&change_size(a)));
            let mut top: Vec<&SliceReport> = by_change.into_iter().take(n).collect();
            top.sort_by_key(|s| s.index);
            top
        };
        let all = || plan.slices.iter().collect::<Vec<_>>();
        let with_samples = |slices: Vec<&'p SliceReport>| -> Vec<&'p SliceReport> {
            slices.into_iter().filter(has_samples).collect()
        };
        let largest_samples = || largest(TOP_SAMPLES, with_samples(all()));
        // The largest slices, and the slices whose change is furthest from the others' (a day that
        // moved the other way, or not at all): a sample that hides neither.
        let chosen = || {
            let outliers = outliers(&plan.slices, OUTLIERS);
            let rest: Vec<&SliceReport> =
                all().into_iter().filter(|s| !outliers.iter().any(|o| o.index == s.index)).collect();
            let mut slices = largest(TOP_SLICES - outliers.len(), rest);
            let count = outliers.len();
            slices.extend(outliers);
            slices.sort_by_key(|s| s.index);
            (slices, count)
        };
        match detail {
            _ if everything => Shown {
                slices: plan.slices.iter().collect(),
                outliers: 0,
                samples: with_samples(plan.slices.iter().collect()),
            },
            Detail::Slices => Shown { slices: all(), outliers: 0, samples: largest_samples() },
            Detail::Summary => {
                let (slices, outliers) = chosen();
                Shown { slices, outliers, samples: Vec::new() }
            }
            _ => {
                let (slices, outliers) = chosen();
                Shown { slices, outliers, samples: largest_samples() }
            }
        }
    }

    /// `those with the most changes`, and the outliers when there are any.
    fn chosen_by(&self) -> String {
        match self.outliers {
            0 => "those with the most changes".to_owned(),
            n => format!("those with the most changes and the {n} furthest from the rest"),
        }
    }
}

/// How many slices a summary shows for being far from the others.
const OUTLIERS: usize = 2;

/// Up to `n` slices whose relative change (of the first metric, else the rows) is furthest from
/// the median of all slices' — by more than a point and three median deviations, so that a
/// steady backfill has none.
fn outliers(slices: &[SliceReport], n: usize) -> Vec<&SliceReport> {
    let pct = |s: &SliceReport| {
        let (b, a) = match s.before.metrics.iter().next() {
            Some((name, b)) => (*b, s.after.metrics.get(name).copied().flatten()),
            None => (Some(s.before.rows as f64), Some(s.after.rows as f64)),
        };
        match (b, a) {
            (Some(b), Some(a)) if b != 0.0 => Some((a - b) / b.abs() * 100.0),
            _ => None,
        }
    };
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let changes: Vec<(&SliceReport, f64)> = slices.iter().filter_map(|s| pct(s).map(|p| (s, p))).collect();
    let Some(middle) = median(changes.iter().map(|(_, p)| *p).collect()) else { return Vec::new() };
    let spread = median(changes.iter().map(|(_, p)| (p - middle).abs()).collect()).unwrap_or(0.0);
    let mut far: Vec<(&SliceReport, f64)> = changes
        .into_iter()
        .map(|(s, p)| (s, (p - middle).abs()))
        .filter(|(_, off)| *off > 1.0 && *off > 3.0 * spread)
        .collect();
    far.sort_by(|a, b| b.1.total_cmp(&a.1));
    far.into_iter().take(n).map(|(s, _)| s).collect()
}

/// How much a slice changes: rows added, removed and changed by key (else the change in its row
/// count), then, to rank slices whose rows are as many as before, each metric's relative change.
fn change_size(slice: &SliceReport) -> f64 {
    let rows = match &slice.changes {
        Some(c) => c.added + c.removed + c.changed,
        None => slice.before.rows.abs_diff(slice.after.rows),
    };
    let metrics: f64 = slice
        .before
        .metrics
        .iter()
        .map(|(name, before)| {
            let (b, a) =
                (before.unwrap_or(0.0), slice.after.metrics.get(name).copied().flatten().unwrap_or(0.0));
            if a == b { 0.0 } else { ((a - b) / b.abs().max(f64::MIN_POSITIVE)).abs().min(1e6) }
        })
        .sum();
    rows as f64 + metrics.min(0.999)
}

/// `Plan: 1 slice to replace; rows 412 → 409 (−0.7%); revenue 18,204.10 → 16,880.55 (−7.3%)`.
pub fn summary(plan: &Plan) -> String {
    let verb = match plan.mode {
        bf::plan_file::WriteMode::Replace => "replace",
        bf::plan_file::WriteMode::Merge => "merge",
    };
    let mut parts = vec![format!("Plan: {} to {verb}", count(plan.slices.len(), "slice"))];
    let (before, after) = (&plan.total.before, &plan.total.after);
    parts.push(format!("rows {}", short_change(Some(before.rows as f64), Some(after.rows as f64))));
    for (name, b) in &before.metrics {
        let a = after.metrics.get(name).copied().flatten();
        parts.push(format!("{name} {}", short_change(*b, a)));
    }
    parts.join("; ")
}

fn short_change(before: Option<f64>, after: Option<f64>) -> String {
    let show = super::value;
    match (before, after) {
        (Some(b), Some(a)) => match percent(b, a) {
            Some(p) if a != b => format!("{} → {} ({p})", number(b), number(a)),
            _ if a == b => format!("{} (unchanged)", number(b)),
            _ => format!("{} → {}", number(b), number(a)),
        },
        (b, a) => format!("{} → {}", show(b), show(a)),
    }
}

fn text(plan: &Plan, detail: Detail) -> String {
    let shown = Shown::of(plan, detail);
    let mut out = String::new();
    let w = &mut out;
    let target = display(&plan.target.uri);
    let partitioning = if plan.target.partition_columns.is_empty() {
        "unpartitioned".to_owned()
    } else {
        format!("partitioned by {}", plan.target.partition_columns.join(", "))
    };
    let _ = writeln!(w, "bf plan {}", plan.plan_file.path);
    let _ = writeln!(w, "  table      {target} (version {}, {partitioning})", plan.target.pre_version);
    let _ = writeln!(w, "  reason     {}", plan.reason);
    let _ = writeln!(
        w,
        "  window     {} in {} of `{}` on {}",
        plan.window,
        count(plan.slices.len(), "slice"),
        plan.every,
        plan.target.date_column
    );
    let clone = &plan.rehearsal.clone;
    let _ = writeln!(
        w,
        "  rehearsal  {} (shallow clone of version {}: {} referenced, {} copied, {} bytes)",
        display(&plan.rehearsal.uri),
        clone.source_version,
        count(clone.files_referenced, "file"),
        count(clone.files_localized, "file"),
        number(clone.bytes_localized as f64)
    );
    for read in plan.delta_inputs.iter().filter(|d| d.stands_for.is_some()) {
        let _ = writeln!(
            w,
            "  reads      `{}` = {} as its backfill leaves it (its rehearsal, version {})",
            read.input,
            table_name(read.stands_for.as_deref().unwrap_or_default()),
            read.version
        );
    }
    let _ = writeln!(w, "\n{}", summary(plan));
    if !plan.problems.is_empty() {
        let _ = writeln!(w, "This plan cannot be applied:");
        for problem in &plan.problems {
            let _ = writeln!(w, "  - {problem}");
        }
    }
    checks_and_guards(w, plan);
    let _ = writeln!(w);

    let (metric_names, header) = slice_columns(plan);
    let keyed = plan.target.key.is_some();
    let mut slices = table(header);
    for slice in &shown.slices {
        let mut row = slice_cells(slice, &metric_names);
        if keyed {
            row.push(changes_cell(slice));
        }
        slices.add_row(row);
    }
    if plan.slices.len() > 1 {
        let mut row = measured_cells(
            "total".into(),
            plan.window.to_string(),
            &plan.total.before,
            &plan.total.after,
            &metric_names,
        );
        if keyed {
            let sum = |f: fn(&bf::rehearse::diff::RowChanges) -> u64| {
                plan.slices.iter().filter_map(|s| s.changes.as_ref()).map(f).sum::<u64>()
            };
            row.push(format!("+{} / −{} / ~{}", sum(|c| c.added), sum(|c| c.removed), sum(|c| c.changed)));
        }
        slices.add_row(row);
    }
    let _ = writeln!(w, "{slices}");
    if shown.slices.len() < plan.slices.len() {
        let _ = writeln!(
            w,
            "{} of {} slices shown, {}; `--detail slices` lists every slice.",
            shown.slices.len(),
            plan.slices.len(),
            shown.chosen_by()
        );
    }

    let outside = &plan.outside_window;
    let mut outside_line = format!("{} rows", number(outside.before.rows as f64));
    for (name, value) in &outside.before.metrics {
        let _ = write!(outside_line, ", {name} {}", super::value(*value));
    }
    let compared_files = outside.shared_files + outside.replaced_files + outside.written_files > 0;
    if outside.unchanged && compared_files {
        let held = if outside.before.rows == 0 {
            "hold no row outside it".to_owned()
        } else {
            format!("hold the same {outside_line} outside it")
        };
        let _ = writeln!(
            w,
            "Outside the window: unchanged ✓ ({} shared untouched; the {} the slices replaced and the {} they wrote {held})",
            count(outside.shared_files as usize, "file"),
            count(outside.replaced_files as usize, "file"),
            outside.written_files,
        );
    } else if outside.unchanged {
        let _ = writeln!(w, "Outside the window: {outside_line}: unchanged ✓");
    } else {
        let _ = writeln!(
            w,
            "Outside the window: CHANGED ✗ rows {}",
            change(Some(outside.before.rows as f64), Some(outside.after.rows as f64))
        );
    }
    for note in &outside.within_error {
        let _ = writeln!(w, "  compared within rounding: {note}");
    }
    let outside_source: u64 = plan.slices.iter().map(|s| s.source.outside_window).max().unwrap_or(0);
    let null_source: u64 = plan.slices.iter().map(|s| s.source.null_date).max().unwrap_or(0);
    if outside_source + null_source > 0 {
        let _ = writeln!(
            w,
            "Source rows not written: {outside_source} outside the window, {null_source} with a NULL {}",
            plan.target.date_column
        );
    }

    if !plan.breakdown.is_empty() {
        let _ = writeln!(w, "\nWhere the change is:");
        for line in breakdown_lines(&plan.breakdown, plan) {
            let _ = writeln!(w, "  {line}");
        }
    }

    for slice in &shown.samples {
        let Some(changes) = &slice.changes else { continue };
        let total = changes.added + changes.removed + changes.changed;
        let _ =
            writeln!(w, "\nChanged rows in slice {} ({} of {total}):", slice.index, changes.samples.len());
        let _ = writeln!(w, "{}", sample_diff(&changes.samples));
    }
    let with_samples =
        plan.slices.iter().filter(|s| s.changes.as_ref().is_some_and(|c| !c.samples.is_empty())).count();
    if shown.samples.len() < with_samples {
        let _ = writeln!(
            w,
            "\nChanged rows of {} of {with_samples} slices shown; `--detail all` shows every slice's.",
            shown.samples.len()
        );
    }

    for warning in &plan.warnings {
        let _ = writeln!(w, "\nWarning: {warning}");
    }
    let _ = writeln!(w, "\n{}", summary(plan));
    if !plan.problems.is_empty() {
        let _ = writeln!(w, "This plan cannot be applied: {}.", count(plan.problems.len(), "problem"));
    }
    out
}

/// Each check's results on every slice, in the order the plan declares them.
fn checks_by_name(plan: &Plan) -> Vec<(&str, Vec<&bf::rehearse::checks::CheckResult>)> {
    let mut grouped: Vec<(&str, Vec<&bf::rehearse::checks::CheckResult>)> = Vec::new();
    for check in &plan.checks {
        match grouped.iter_mut().find(|(name, _)| *name == check.name) {
            Some((_, results)) => results.push(check),
            None => grouped.push((&check.name, vec![check])),
        }
    }
    grouped
}

/// Checks, one line each when they passed on every slice, and guards.
fn checks_and_guards(w: &mut String, plan: &Plan) {
    let _ = writeln!(w, "Checks");
    let width = plan
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .chain(plan.guards.iter().map(|g| g.name.chars().count()))
        .max()
        .unwrap_or(0);
    // A check that passed on every slice is one line; failures are listed slice by slice.
    for (name, results) in checks_by_name(plan) {
        if results.len() > 1 && results.iter().all(|c| c.passed) {
            let _ = writeln!(w, "  ✓ {name:<width$}  passed on all {} slices", results.len());
            continue;
        }
        for check in results.into_iter().filter(|c| !c.passed || plan.slices.len() == 1) {
            let mark = if check.passed { "✓" } else { "✗" };
            let _ = writeln!(w, "  {mark} {:<width$}  slice {:<3} {}", check.name, check.slice, check.detail);
            for row in &check.sample {
                let _ = writeln!(w, "      {row}");
            }
        }
    }
    if !plan.guards.is_empty() {
        let _ = writeln!(w, "Guards");
        for guard in &plan.guards {
            let mark = if guard.passed { "✓" } else { "✗" };
            let _ = writeln!(w, "  {mark} {:<width$}  {}", guard.name, guard.detail);
        }
    }
}

/// The metrics a plan measures, and the header of its slices' table: slice, days, rows, each
/// metric, and with a key the row changes.
fn slice_columns(plan: &Plan) -> (Vec<&String>, Vec<String>) {
    let metric_names: Vec<&String> = plan.total.before.metrics.keys().collect();
    let mut header = vec!["slice".to_owned(), "days".to_owned(), "rows".to_owned()];
    header.extend(metric_names.iter().map(|n| n.to_string()));
    if plan.target.key.is_some() {
        header.push("added / removed / changed".into());
    }
    (metric_names, header)
}

/// `+0 / −3 / ~287`: rows added, removed and changed by key.
fn changes_cell(slice: &SliceReport) -> String {
    slice
        .changes
        .as_ref()
        .map_or_else(String::new, |c| format!("+{} / −{} / ~{}", c.added, c.removed, c.changed))
}

/// A slice's row of the before/after table: index, days, rows, then each metric.
fn slice_cells(slice: &SliceReport, metrics: &[&String]) -> Vec<String> {
    measured_cells(
        slice.index.to_string(),
        format!("{}..{}", slice.first, slice.last),
        &slice.before,
        &slice.after,
        metrics,
    )
}

/// A label, the days, and before → after of the row count and each metric.
fn measured_cells(
    label: String,
    days: String,
    before: &Measures,
    after: &Measures,
    metrics: &[&String],
) -> Vec<String> {
    let mut cells = vec![label, days, change(Some(before.rows as f64), Some(after.rows as f64))];
    for name in metrics {
        cells.push(change(
            before.metrics.get(*name).copied().flatten(),
            after.metrics.get(*name).copied().flatten(),
        ));
    }
    cells
}

/// Sample rows as a unified diff of their fields, row by row: `-  2131 | C02 | 19.99 | USD` then
/// `+  2131 | C02 | 19.99 | EUR`.
fn sample_diff(samples: &[SampleRow]) -> String {
    let line =
        |fields: &Option<Vec<String>>| fields.as_ref().map(|f| f.join(" | ") + "\n").unwrap_or_default();
    let mut out = String::new();
    for sample in samples {
        let (before, after) = (line(&sample.before), line(&sample.after));
        for change in TextDiff::from_lines(&before, &after).iter_all_changes() {
            let sign = match change.tag() {
                ChangeTag::Delete => "-",
                ChangeTag::Insert => "+",
                ChangeTag::Equal => " ",
            };
            let _ = write!(out, "  {sign} {}", change.value());
        }
    }
    out.trim_end().to_owned()
}

/// "97% of the revenue change is in currency = USD → EUR (+1,234.00)", largest first.
fn breakdown_lines(rows: &[BreakdownRow], plan: &Plan) -> Vec<String> {
    let by = &plan.breakdown_by;
    let mut lines = Vec::new();
    for row in rows.iter().take(10) {
        let total_before = if row.metric == "rows" {
            Some(plan.total.before.rows as f64)
        } else {
            plan.total.before.metrics.get(&row.metric).copied().flatten()
        };
        let total_after = if row.metric == "rows" {
            Some(plan.total.after.rows as f64)
        } else {
            plan.total.after.metrics.get(&row.metric).copied().flatten()
        };
        let total = total_after.unwrap_or(0.0) - total_before.unwrap_or(0.0);
        let delta = row.after - row.before;
        let one = by.len() == 1;
        let columns = if one { by.join(", ") } else { format!("({})", by.join(", ")) };
        let values = |v: &Vec<String>| if one { v.join(", ") } else { format!("({})", v.join(", ")) };
        let place = match (&row.from, &row.to) {
            (Some(from), Some(to)) if from == to => format!("{columns} = {}", values(from)),
            (Some(from), Some(to)) => format!("{columns} = {} → {}", values(from), values(to)),
            (Some(from), None) => format!("{columns} = {}, rows removed", values(from)),
            (None, Some(to)) => format!("{columns} = {}, rows added", values(to)),
            (None, None) => "rows without values".to_owned(),
        };
        let share = if total != 0.0 {
            format!("{:.0}% of the {} change", delta / total * 100.0, row.metric)
        } else {
            format!("{} change", row.metric)
        };
        lines.push(format!("{share} is in {place} ({})", signed(delta)));
    }
    lines
}

/// A pull-request comment a reviewer can decide on: the summary, what apply will do, checks and
/// guards, outside the window — never cut — then the slices, the breakdown and the changed rows,
/// cut where GitHub's comment limit would be reached, saying so.
/// One plan's comment, at most `limit` characters.
fn markdown(plan: &Plan, detail: Detail, limit: usize) -> String {
    let shown = Shown::of(plan, detail);
    let mut head = String::new();
    let w = &mut head;
    let status = if plan.problems.is_empty() { "✅" } else { "❌" };
    let _ = writeln!(w, "### {status} {}\n", md::text(&summary(plan)));
    let table =
        if plan.target.table.is_empty() { display(&plan.target.uri) } else { plan.target.table.clone() };
    let _ = writeln!(
        w,
        "**Table** {} at version {} · **window** {} in {} of `{}` on {} · **mode** {}\n\n**Reason** {}\n",
        md::code(&table),
        plan.target.pre_version,
        plan.window,
        count(plan.slices.len(), "slice"),
        plan.every,
        md::code(&plan.target.date_column),
        match plan.mode {
            bf::plan_file::WriteMode::Replace => "replace",
            bf::plan_file::WriteMode::Merge => "merge",
        },
        md::text(&plan.reason)
    );
    if plan.problems.is_empty() {
        let _ = writeln!(
            w,
            "**`bf apply`** writes {} (one per slice, each recorded with the backfill's id) and then the table comment; \
             `bf rollback` returns the table to version {}.\n",
            count(plan.slices.len(), "commit"),
            plan.target.pre_version
        );
    } else {
        let _ = writeln!(w, "**This plan cannot be applied:**\n");
        for problem in plan.problems.iter().take(LISTED) {
            let _ = writeln!(w, "- {}", md::text(problem));
        }
        if plan.problems.len() > LISTED {
            let _ = writeln!(
                w,
                "- … and {} more (`bf show --json` lists them all)",
                plan.problems.len() - LISTED
            );
        }
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "**Checks and guards**\n");
    for (name, results) in checks_by_name(plan) {
        let failed: Vec<_> = results.iter().filter(|c| !c.passed).collect();
        if failed.is_empty() {
            let detail = if results.len() == 1 {
                results[0].detail.clone()
            } else {
                format!("passed on all {} slices", results.len())
            };
            let _ = writeln!(w, "- ✅ {}: {}", md::code(name), md::text(&detail));
        }
        for check in failed.iter().take(LISTED) {
            let _ =
                writeln!(w, "- ❌ {} (slice {}): {}", md::code(name), check.slice, md::text(&check.detail));
        }
        if failed.len() > LISTED {
            let _ = writeln!(w, "- ❌ {} failed on {} more slices", md::code(name), failed.len() - LISTED);
        }
    }
    for guard in &plan.guards {
        let mark = if guard.passed { "✅" } else { "❌" };
        let _ = writeln!(w, "- {mark} guard {}: {}", md::code(&guard.name), md::text(&guard.detail));
    }
    let outside = &plan.outside_window;
    let _ = writeln!(
        w,
        "\n**Outside the window** {}",
        if outside.unchanged { "unchanged ✅" } else { "**changed** ❌" }
    );
    for note in &outside.within_error {
        let _ = writeln!(w, "- compared within rounding: {}", md::text(note));
    }
    for warning in plan.warnings.iter().take(LISTED) {
        let _ = writeln!(w, "\n> ⚠️ {}", md::text(warning));
    }
    if plan.warnings.len() > LISTED {
        let _ = writeln!(w, "\n> ⚠️ … and {} more warnings (`bf show --json`)", plan.warnings.len() - LISTED);
    }

    // The detail, section by section, as long as the comment stays under GitHub's limit.
    let mut sections: Vec<String> = Vec::new();
    let (metric_names, header) = slice_columns(plan);
    let keyed = plan.target.key.is_some();
    let header_cells: Vec<String> = header.iter().map(|h| md::text(h)).collect();
    let mut slices = format!("\n| {} |\n|{}\n", header_cells.join(" | "), "---|".repeat(header.len()));
    for slice in &shown.slices {
        let mut cells = slice_cells(slice, &metric_names);
        if keyed {
            cells.push(changes_cell(slice));
        }
        let _ = writeln!(slices, "| {} |", cells.join(" | "));
    }
    if shown.slices.len() < plan.slices.len() {
        // A reviewer must never take the rows shown for the whole: the rest are one row of their own.
        let left_out: Vec<&SliceReport> =
            plan.slices.iter().filter(|s| !shown.slices.iter().any(|t| t.index == s.index)).collect();
        let _ = writeln!(
            slices,
            "| … | {} | {} |",
            count(left_out.len(), "more slice"),
            left_out_cells(&left_out, &metric_names, keyed).join(" | ")
        );
        let _ = writeln!(
            slices,
            "\n{} of {} slices shown, {}; the other {} are summed up in the last row, each measure's change across them as its middle ± half its range (`bf show --format markdown --detail slices` lists every slice).",
            shown.slices.len(),
            plan.slices.len(),
            shown.chosen_by(),
            left_out.len()
        );
    }
    sections.push(slices);
    if !plan.breakdown.is_empty() {
        let mut breakdown = String::from("\n**Where the change is**\n\n");
        for line in breakdown_lines(&plan.breakdown, plan) {
            let _ = writeln!(breakdown, "- {}", md::text(&line));
        }
        sections.push(breakdown);
    }
    for slice in &shown.samples {
        let Some(changes) = &slice.changes else { continue };
        let total = changes.added + changes.removed + changes.changed;
        // A diff block colours lines by their first character; a value's own line breaks would
        // start lines of their own, so they are written as \n. A comment shows a few rows of each
        // slice; the saved plan and `bf show` hold what `[diff] samples` asked for.
        let escaped: Vec<_> = changes
            .samples
            .iter()
            .take(COMMENT_SAMPLES)
            .map(|sample| {
                let fields = |f: &Option<Vec<String>>| {
                    f.as_ref().map(|f| f.iter().map(|v| md::code_line(v)).collect())
                };
                SampleRow {
                    change: sample.change.clone(),
                    before: fields(&sample.before),
                    after: fields(&sample.after),
                }
            })
            .collect();
        let diff = sample_diff(&escaped)
            .lines()
            .map(|l| l.strip_prefix("  ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let fence = md::fence(&diff);
        sections.push(format!(
            "\n<details><summary>Changed rows in slice {} ({}..{}): {} of {total}</summary>\n\n{fence}diff\n{diff}\n{fence}\n</details>\n",
            slice.index,
            slice.first,
            slice.last,
            escaped.len(),
        ));
    }

    let reserve = 400; // the truncation note
    let mut out = head;
    if out.len() + reserve > limit {
        // Only a plan file with thousands of checks gets here: keep what fits, whole lines.
        let cut = out[..limit - reserve].rfind('\n').unwrap_or(0);
        out.truncate(cut);
        let _ =
            writeln!(out, "\n> Cut here to stay under GitHub's {} characters.", number(COMMENT_LIMIT as f64));
        return out;
    }
    for (i, section) in sections.iter().enumerate() {
        if out.len() + section.len() + reserve > limit {
            let _ = writeln!(
                out,
                "\n> Cut here to stay under GitHub's {} characters: {} more section(s) of detail. `bf show --format markdown --detail all` prints everything.",
                number(COMMENT_LIMIT as f64),
                sections.len() - i
            );
            break;
        }
        out.push_str(section);
    }
    out
}

/// How many problems and failures of one check the comment lists before it counts the rest.
const LISTED: usize = 10;
/// How many changed rows of one slice a comment shows.
const COMMENT_SAMPLES: usize = 10;

/// The cells of the row standing for the slices a comment leaves out: their rows and each metric
/// as the change across them (`all +10.0% ± 0.1%`), and their row changes summed.
fn left_out_cells(slices: &[&SliceReport], metrics: &[&String], keyed: bool) -> Vec<String> {
    let rows = slices.iter().map(|s| (Some(s.before.rows as f64), Some(s.after.rows as f64)));
    let mut cells = vec![spread(rows.collect())];
    for name in metrics {
        let pairs = slices.iter().map(|s| {
            (s.before.metrics.get(*name).copied().flatten(), s.after.metrics.get(*name).copied().flatten())
        });
        cells.push(spread(pairs.collect()));
    }
    if keyed {
        let sum = |f: fn(&bf::rehearse::diff::RowChanges) -> u64| {
            slices.iter().filter_map(|s| s.changes.as_ref()).map(f).sum::<u64>()
        };
        cells.push(format!("+{} / −{} / ~{}", sum(|c| c.added), sum(|c| c.removed), sum(|c| c.changed)));
    }
    cells
}

/// `all +10.0% ± 0.1%`: the relative change of before → after pairs as its middle ± half its
/// range; pairs with no before to be relative to are counted apart.
fn spread(pairs: Vec<(Option<f64>, Option<f64>)>) -> String {
    let pct = |pct: f64| {
        let text = format!("{:.1}%", pct.abs());
        if pct < -0.05 { format!("−{text}") } else { format!("+{text}") }
    };
    let changes: Vec<f64> = pairs
        .iter()
        .filter_map(|(b, a)| match (b, a) {
            (Some(b), Some(a)) if *b != 0.0 => Some((a - b) / b.abs() * 100.0),
            (Some(b), Some(a)) if a == b => Some(0.0),
            _ => None,
        })
        .collect();
    let apart = pairs.len() - changes.len();
    let (min, max) =
        changes.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| (lo.min(*c), hi.max(*c)));
    let all = if apart == 0 { "all " } else { "" };
    let mut text = if changes.is_empty() {
        String::new()
    } else if changes.iter().all(|c| *c == 0.0) {
        format!("{all}unchanged")
    } else if max - min < 0.05 {
        format!("{all}{}", pct((min + max) / 2.0))
    } else {
        format!("{all}{} ± {:.1}%", pct((min + max) / 2.0), (max - min) / 2.0)
    };
    if apart > 0 {
        let from = format!("{apart} from none");
        text = if text.is_empty() { from } else { format!("{text}; {from}") };
    }
    text
}

fn display(uri: &str) -> String {
    url::Url::parse(uri).map(|u| bf::delta::store::display_url(&u)).unwrap_or_else(|_| uri.to_owned())
}
