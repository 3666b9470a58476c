//! A saved plan as people read it: in a terminal (`bf plan`, `bf show`) or as a pull-request
//! comment (`--format markdown`). JSON is the plan value itself. The two readable forms differ in
//! layout only: the cells, the summary and the breakdown they show are made here, once.

mod chart;
mod html;
mod markdown;
mod mermaid;
mod shown;
mod text;

use std::fmt::Write;

use bf::plan_file::Size;
use bf::rehearse::diff::{BreakdownRow, Measures, SampleRow};
use bf::rehearse::plan::{BlastRadius, Plan, SliceReport};
use similar::{ChangeTag, TextDiff};

use super::{change, count, number, signed};
use bf::words::before_after;
use markdown::{COMMENT_LIMIT, MARKER, chain_markdown};
use text::{chain_text, text};

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

/// A plan without charts: what a log, a pipe or a notice holds.
pub fn render(plan: &Plan, format: Format) -> String {
    render_with(plan, format, Detail::Auto, false)
}

/// A plan in `format`, with its charts (`chart`): the trend drawn under the summary in a
/// terminal, as Mermaid charts in a pull-request comment.
pub fn render_with(plan: &Plan, format: Format, detail: Detail, chart: bool) -> String {
    match format {
        Format::Text if plan.downstream.is_empty() => text(plan, detail, chart),
        Format::Text => chain_text(plan, detail, chart),
        Format::Json => super::json(plan),
        Format::Markdown if plan.downstream.is_empty() => {
            markdown::markdown(plan, detail, chart, COMMENT_LIMIT) + MARKER
        }
        Format::Markdown => chain_markdown(plan, detail, chart),
    }
}

/// A plan (and its chain) as one self-contained HTML page: `--html FILE`.
pub fn html(plan: &Plan) -> String {
    html::html(plan)
}

/// Whether a plan printed as `format` draws its charts: not with `--no-chart`, and in text only
/// on a terminal (a pipe or a log gets the numbers alone).
pub fn charts_wanted(format: Format, no_chart: bool) -> bool {
    use std::io::IsTerminal;
    !no_chart && (format != Format::Text || std::io::stdout().is_terminal())
}

/// `Plan: 1 slice to replace; rows 412 → 409 (−0.7%); revenue 18,204.10 → 16,880.55 (−7.3%)`.
pub fn summary(plan: &Plan) -> String {
    // A preview's figures are its slices' alone, and say so.
    let (what, slices) = match &plan.preview {
        Some(preview) => ("Preview", format!("{} of {} slices", plan.slices.len(), preview.of)),
        None => ("Plan", count(plan.slices.len(), "slice")),
    };
    if plan.rows_proven_unchanged() {
        let key = plan.target.key.as_deref().unwrap_or_default().join(", ");
        return format!(
            "{what}: no changes. Every slice's rows equal the table's ({slices}, {}, compared on {key}): applying \
             it would write nothing.",
            count(plan.total.before.rows as usize, "row"),
        );
    }
    let verb = mode_verb(plan);
    let mut parts = vec![format!("{what}: {slices} to {verb}")];
    let (before, after) = (&plan.total.before, &plan.total.after);
    parts.push(rows_headline(plan));
    for (name, b) in &before.metrics {
        let a = after.metrics.get(name).copied().flatten();
        parts.push(format!("{name} {}", before_after(*b, a)));
    }
    parts.join("; ")
}

/// The rows in the headline: their count before and after and, where the slices were compared by
/// key, how many the backfill changes, adds and removes. A count that stays the same is never
/// called "unchanged" — 1,494 rows before and after can be 1,492 rows rewritten.
fn rows_headline(plan: &Plan) -> String {
    let (before, after) = (plan.total.before.rows, plan.total.after.rows);
    let counted = match before == after {
        true => format!("{} before and after", count(before as usize, "row")),
        false => format!("rows {}", before_after(Some(before as f64), Some(after as f64))),
    };
    let Some(changes) = plan.row_counts() else {
        return format!("{counted} (not compared row by row: the plan names no `target.key`)");
    };
    if changes.none() {
        return format!("{counted}, none of them changed");
    }
    let added = format!("added{}", keys_back(plan));
    let said: Vec<String> =
        [(changes.changed, "changed"), (changes.added, added.as_str()), (changes.removed, "removed")]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{} {what}", number(n as f64)))
            .collect();
    format!("{counted}: {}", said.join(", "))
}

/// ` (2 of them keys a DELETE removed)`: added rows that bring back keys a DELETE or MERGE in the
/// table's history removed — a reviewer who reads only the headline learns they come back.
fn keys_back(plan: &Plan) -> String {
    let found = plan.deleted_keys.iter().flat_map(|d| &d.found);
    let rows: u64 = found.clone().map(|f| f.rows).sum();
    if rows == 0 {
        return String::new();
    }
    let mut operations: Vec<&str> = found.map(|f| f.operation.as_str()).collect();
    operations.sort_unstable();
    operations.dedup();
    format!(" ({} of them keys a {} removed)", number(rows as f64), operations.join(" or "))
}

/// What a preview (`bf plan --sample N`) rehearsed, and that `bf apply` will not take it:
/// `preview: 3 of 365 slices — 1 (first), 200 (largest by rows), 365 (last); …`.
pub(super) fn preview_line(plan: &Plan) -> Option<String> {
    let preview = plan.preview.as_ref()?;
    let chosen: Vec<String> = preview
        .chosen
        .iter()
        .map(|c| {
            let why: Vec<String> = c.why.iter().map(ToString::to_string).collect();
            format!("{} ({})", c.index, why.join(", "))
        })
        .collect();
    Some(format!(
        "preview: {} of {} slices — {}; `bf apply` takes only a plan made without `--sample`",
        plan.slices.len(),
        preview.of,
        chosen.join(", ")
    ))
}

/// The rows outside the window, which a backfill must not touch: unchanged (and how that was
/// known), or changed; and the metrics compared within their rounding error.
pub(super) fn outside_said(plan: &Plan) -> (String, Vec<String>) {
    let outside = &plan.outside_window;
    let label = outside_label(plan);
    let mut outside_line = format!("{} rows", number(outside.before.rows as f64));
    for (name, value) in &outside.before.metrics {
        let _ = write!(outside_line, ", {name} {}", crate::render::value(*value));
    }
    let compared_files = outside.shared_files + outside.replaced_files + outside.written_files > 0;
    let line = if outside.unchanged && compared_files {
        let held = if outside.before.rows == 0 {
            "hold no row outside it".to_owned()
        } else {
            format!("hold the same {outside_line} outside it")
        };
        format!(
            "{label}: unchanged ✓ ({} shared untouched; the {} the slices replaced and the {} they wrote {held})",
            count(outside.shared_files as usize, "file"),
            count(outside.replaced_files as usize, "file"),
            outside.written_files,
        )
    } else if outside.unchanged {
        format!("{label}: {outside_line}: unchanged ✓")
    } else {
        format!(
            "{label}: CHANGED ✗ rows {}",
            change(Some(outside.before.rows as f64), Some(outside.after.rows as f64))
        )
    };
    (line, outside.within_error.clone())
}

/// What the rows a backfill must not touch are called: those outside the window, or, in a preview,
/// outside the slices it rehearsed (the window's other slices among them).
pub(super) fn outside_label(plan: &Plan) -> &'static str {
    match plan.preview {
        Some(_) => "Outside the previewed slices",
        None => "Outside the window",
    }
}

/// The rows a slice's query returns for another slice's days from files that slice does not read,
/// and who writes them: `3 rows the queries return for another slice's days are written by the
/// slice owning that day: slice 1 writes 1 from slice 2's files, …` (none: `None`).
fn lent_rows(plan: &Plan) -> Option<String> {
    let lent: u64 = plan.slices.iter().map(|s| s.source.from_other_slices).sum();
    if lent == 0 {
        return None;
    }
    let routes: Vec<String> = plan
        .slices
        .iter()
        .flat_map(|s| s.lenders.iter().map(move |l| (s.index, l)))
        .map(|(owner, l)| {
            format!("slice {owner} writes {} from slice {}'s files", number(l.rows as f64), l.slice)
        })
        .collect();
    let shown = routes.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let more = match routes.len() {
        n if n > 5 => format!(" and {} more", n - 5),
        _ => String::new(),
    };
    Some(format!(
        "{} the queries return for another slice's days {} written by the slice owning that day: {shown}{more}",
        count(lent as usize, "row"),
        if lent == 1 { "is" } else { "are" }
    ))
}

/// `replace` or `merge`: what each slice does to the table's rows in its window.
fn mode_verb(plan: &Plan) -> &'static str {
    match plan.mode {
        bf::plan_file::WriteMode::Replace => "replace",
        bf::plan_file::WriteMode::Merge => "merge",
    }
}

/// `orders_silver`: the last segment of a table's URI.
fn table_name(uri: &str) -> String {
    url::Url::parse(uri).map(|u| bf::plan_file::chain::table_name(&u)).unwrap_or_else(|_| uri.to_owned())
}

/// A table's URI as people read it (a local path for `file://`); as saved when it does not parse,
/// so that an odd URI in a plan file still prints.
fn display(uri: &str) -> String {
    url::Url::parse(uri).map(|u| bf::delta::store::display_url(&u)).unwrap_or_else(|_| uri.to_owned())
}

/// The frozen days the plan rewrites and who approved it, when it does: every rendering shows it.
fn unfreeze(plan: &Plan) -> Option<String> {
    let approval = plan.unfreeze.as_ref()?;
    let frozen = plan.frozen.iter().map(ToString::to_string).collect::<Vec<_>>();
    Some(match frozen.is_empty() {
        true => format!("{approval} (no frozen day in the window when planned)"),
        false => format!(
            "{approval}, over frozen {}; the approval opens them to this backfill only",
            frozen.join("; ")
        ),
    })
}

/// Where the apply's and the rollback's notice goes, when the plan says: a file it writes is a
/// reviewer's to see before it is written.
/// A comment (`in_comment`) names the file from the plan file's folder, never by a path of the
/// machine that planned.
fn notice(plan: &Plan, in_comment: bool) -> Option<String> {
    let spec = plan.notify()?;
    let dir = (!in_comment).then(|| plan.plan_dir());
    Some(format!("{} after apply and rollback", bf::notify::destinations(&spec, dir)?))
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

/// The columns of a plan's slices table, the same in a terminal and in a comment: slice, days,
/// rows, each metric, and with a key the row changes.
struct Columns<'p> {
    metrics: Vec<&'p String>,
    /// Per metric: whether every value it shows is whole (else all show two decimals, so a
    /// column's amounts line up: `6,042.00` beside `4,872.58`).
    whole: Vec<bool>,
    header: Vec<String>,
    keyed: bool,
    /// Whether the plan measured what its slices rewrite (plans saved before did not).
    rewrites: bool,
}

impl<'p> Columns<'p> {
    fn of(plan: &'p Plan) -> Columns<'p> {
        let metrics: Vec<&String> = plan.total.before.metrics.keys().collect();
        let measured = plan.slices.iter().flat_map(|s| [&s.before, &s.after]);
        let whole = metrics
            .iter()
            .map(|name| {
                let values = measured.clone().chain([&plan.total.before, &plan.total.after]);
                let values: Vec<f64> =
                    values.filter_map(|m| m.metrics.get(*name).copied().flatten()).collect();
                let diffs = plan.slices.iter().map(|s| (&s.before, &s.after));
                let diffs = diffs.chain([(&plan.total.before, &plan.total.after)]).filter_map(|(b, a)| {
                    Some(a.metrics.get(*name).copied().flatten()? - b.metrics.get(*name).copied().flatten()?)
                });
                values.into_iter().chain(diffs).all(bf::words::is_whole)
            })
            .collect();
        let mut header = vec!["slice".to_owned(), "days".to_owned(), "rows".to_owned()];
        header.extend(metrics.iter().map(|n| n.to_string()));
        let keyed = plan.target.key.is_some();
        if keyed {
            header.push("added / removed / changed".into());
        }
        let rewrites = plan.slices.iter().any(|s| s.blast_radius.is_some());
        if rewrites {
            header.push("files removed → written".into());
        }
        Columns { metrics, whole, header, keyed, rewrites }
    }

    /// The cells after the metrics for several slices at once (a total, the slices a comment
    /// leaves out): their row changes and what they rewrite, summed.
    fn summed<'s>(&self, slices: impl IntoIterator<Item = &'s SliceReport> + Clone) -> Vec<String> {
        let mut cells = Vec::new();
        if self.keyed {
            cells.push(summed_changes(slices.clone()));
        }
        if self.rewrites {
            cells.push(rewrites_cell(&BlastRadius::sum(
                slices.into_iter().filter_map(|s| s.blast_radius.as_ref()),
            )));
        }
        cells
    }

    /// A slice's row: index, days, rows, then each metric, and with a key its row changes.
    fn slice_row(&self, slice: &SliceReport) -> Vec<String> {
        let mut cells = measured_cells(
            slice.index.to_string(),
            bf::words::days(slice.first, slice.last),
            &slice.before,
            &slice.after,
            &self.metrics,
            &self.whole,
        );
        if self.keyed {
            cells.push(changes_cell(slice));
        }
        if self.rewrites {
            cells.push(slice.blast_radius.as_ref().map(rewrites_cell).unwrap_or_default());
        }
        cells
    }
}

/// `2 → 1 (11.2 KiB → 9.4 KiB)`, and the rows outside the slice a rewrite carried along.
fn rewrites_cell(radius: &BlastRadius) -> String {
    let mut cell = format!(
        "{} → {} ({} → {})",
        radius.files_removed,
        radius.files_added,
        Size(radius.bytes_removed),
        Size(radius.bytes_added)
    );
    if radius.rows_carried > 0 {
        cell.push_str(&format!(", {} carried", count(radius.rows_carried, "row")));
    }
    cell
}

/// What the whole backfill rewrites, as a sentence: files and bytes, partitions, carried rows.
fn rewrites(plan: &Plan) -> Option<String> {
    let radius = &plan.blast_radius;
    plan.slices.iter().any(|s| s.blast_radius.is_some()).then(|| {
        let partitions = match radius.partitions.len() {
            0 => String::new(),
            n => format!(" in {}", count(n, "partition")),
        };
        format!(
            "removes {} ({}) and writes {} ({}){partitions}; {} outside the slices' days carried along",
            count(radius.files_removed as usize, "file"),
            Size(radius.bytes_removed),
            count(radius.files_added as usize, "file"),
            Size(radius.bytes_added),
            count(radius.rows_carried, "row")
        )
    })
}

/// `+0 / −3 / ~287`: rows added, removed and changed by key.
fn changes_cell(slice: &SliceReport) -> String {
    slice.changes.as_ref().map_or_else(String::new, |c| row_changes(c.added, c.removed, c.changed))
}

/// The row changes of several slices as one cell: a total row, or the slices a comment leaves out.
fn summed_changes<'s>(slices: impl IntoIterator<Item = &'s SliceReport>) -> String {
    let (mut added, mut removed, mut changed) = (0, 0, 0);
    for c in slices.into_iter().filter_map(|s| s.changes.as_ref()) {
        added += c.added;
        removed += c.removed;
        changed += c.changed;
    }
    row_changes(added, removed, changed)
}

/// One wording for row changes, so that a slice's and a sum's read alike.
fn row_changes(added: u64, removed: u64, changed: u64) -> String {
    format!("+{added} / −{removed} / ~{changed}")
}

/// A label, the days, and before → after of the row count and each metric.
fn measured_cells(
    label: String,
    days: String,
    before: &Measures,
    after: &Measures,
    metrics: &[&String],
    whole: &[bool],
) -> Vec<String> {
    let mut cells = vec![label, days, change(Some(before.rows as f64), Some(after.rows as f64))];
    for (name, whole) in metrics.iter().zip(whole) {
        cells.push(crate::render::change_as(
            before.metrics.get(*name).copied().flatten(),
            after.metrics.get(*name).copied().flatten(),
            *whole,
        ));
    }
    cells
}

/// Sample rows as a unified diff of their fields, row by row: `-  2131 | C02 | 19.99 | USD` then
/// `+  2131 | C02 | 19.99 | EUR`.
fn sample_diff(columns: &[String], samples: &[SampleRow]) -> String {
    let line =
        |fields: &Option<Vec<String>>| fields.as_ref().map(|f| f.join(" | ") + "\n").unwrap_or_default();
    let mut out = String::new();
    // The columns' names over the rows, in the rows' order (plans saved before carry none).
    if !columns.is_empty() && !samples.is_empty() {
        let _ = writeln!(out, "    {}", columns.join(" | "));
    }
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

/// One measure's change split by the plan's `breakdown_by` values: a heading with the net change,
/// then its parts, largest first.
struct BreakdownMetric {
    heading: String,
    parts: Vec<String>,
}

/// How many parts of one measure are named; the rest are summed on one line.
const BREAKDOWN_PARTS: usize = 5;

/// Where each measure's change is, rows first. A part's share of the net change is shown only
/// when every part moves the same way: with rises and falls mixed, "112%" and "−7%" say nothing
/// a reader can check, so the heading says how much went up and down instead.
fn breakdown_metrics(plan: &Plan) -> Vec<BreakdownMetric> {
    let names = std::iter::once("rows").chain(plan.total.before.metrics.keys().map(String::as_str));
    let mut metrics = Vec::new();
    for name in names {
        let rows: Vec<&BreakdownRow> = plan.breakdown.iter().filter(|row| row.metric == name).collect();
        if rows.is_empty() {
            continue;
        }
        let deltas: Vec<f64> = rows.iter().map(|row| row.after - row.before).collect();
        let rises: f64 = deltas.iter().filter(|d| **d > 0.0).sum();
        let falls: f64 = deltas.iter().filter(|d| **d < 0.0).sum();
        let net = rises + falls;
        let mixed = rises != 0.0 && falls != 0.0;
        // Rises and falls that cancel but for the last bits of their floating-point sums cancel.
        let cancel = net.abs() <= rises.max(-falls) * 1e-9;
        let heading = match (mixed, cancel) {
            (false, _) => format!("{name} {} in all:", signed(net)),
            (true, true) => format!(
                "{name} unchanged in all (rises of {} and falls of {} cancel out):",
                signed(rises),
                signed(falls)
            ),
            (true, false) => format!(
                "{name} {} in all (rises of {} and falls of {} partly cancel out):",
                signed(net),
                signed(rises),
                signed(falls)
            ),
        };
        let mut parts: Vec<String> = rows
            .iter()
            .zip(&deltas)
            .take(BREAKDOWN_PARTS)
            .map(|(row, delta)| {
                let share = if mixed { String::new() } else { format!(" ({:.0}%)", delta / net * 100.0) };
                format!("{}{share} in {}", signed(*delta), breakdown_place(row, &plan.breakdown_by))
            })
            .collect();
        if rows.len() > BREAKDOWN_PARTS {
            let rest: f64 = deltas[BREAKDOWN_PARTS..].iter().sum();
            let more = rows.len() - BREAKDOWN_PARTS;
            parts.push(format!("{} in the other {}", signed(rest), count(more, "group")));
        }
        metrics.push(BreakdownMetric { heading, parts });
    }
    metrics
}

/// `currency = USD → EUR`, `(currency, country) = (USD, FR), rows removed`.
fn breakdown_place(row: &BreakdownRow, by: &[String]) -> String {
    let one = by.len() == 1;
    let columns = if one { by.join(", ") } else { format!("({})", by.join(", ")) };
    let values = |v: &Vec<String>| if one { v.join(", ") } else { format!("({})", v.join(", ")) };
    match (&row.from, &row.to) {
        (Some(from), Some(to)) if from == to => format!("{columns} = {}", values(from)),
        (Some(from), Some(to)) => format!("{columns} = {} → {}", values(from), values(to)),
        (Some(from), None) => format!("{columns} = {}, rows removed", values(from)),
        (None, Some(to)) => format!("{columns} = {}, rows added", values(to)),
        (None, None) => "rows without values".to_owned(),
    }
}
