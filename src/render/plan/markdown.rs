//! A plan as a pull-request comment (`--format markdown`): what a reviewer decides on is never
//! cut, and the detail after it is cut, saying so, where GitHub's comment limit would be reached.

use std::fmt::Write;

use bf::markdown as md;
use bf::rehearse::diff::{RowChanges, SampleRow};
use bf::rehearse::plan::{Plan, SliceReport};

use super::shown::Shown;
use super::{
    Columns, Detail, breakdown_metrics, checks_by_name, display, mode_verb, notice, rewrites, sample_diff,
    summary, table_name, unfreeze,
};
use crate::render::{count, number};

/// GitHub refuses comments longer than this many characters.
pub(super) const COMMENT_LIMIT: usize = 65_536;
/// How a CI job finds its earlier comment on the pull request to update it.
pub(super) const MARKER: &str = "\n<!-- bf plan -->\n";
/// How many problems and failures of one check the comment lists before it counts the rest.
const LISTED: usize = 10;
/// How many changed rows of one slice a comment shows.
const COMMENT_SAMPLES: usize = 10;
/// Room kept at the end of a comment for the note saying where it was cut.
const CUT_NOTE: usize = 400;

/// A pull-request comment a reviewer can decide on: the summary, what apply will do, checks and
/// guards, outside the window — never cut — then the slices, the breakdown and the changed rows,
/// cut where GitHub's comment limit would be reached, saying so.
/// One plan's comment, at most `limit` characters.
pub(super) fn markdown(plan: &Plan, detail: Detail, chart: bool, limit: usize) -> String {
    markdown_at(plan, detail, chart, limit, 3)
}

/// [`markdown`] with its title at heading `level` (a table of a chain's comment sits one below the
/// chain's table headings, so that levels go in order).
fn markdown_at(plan: &Plan, detail: Detail, chart: bool, limit: usize, level: usize) -> String {
    let shown = Shown::of(plan, detail);
    let mut head = String::new();
    heading(&mut head, plan, level);
    apply_or_problems(&mut head, plan);
    checks_and_guards(&mut head, plan);
    outside_window(&mut head, plan);
    warnings(&mut head, plan);

    let mut sections = Vec::new();
    if chart {
        sections.extend(super::mermaid::charts(plan));
    }
    sections.push(slices_table(plan, &shown));
    sections.extend(breakdown(plan));
    sections.extend(shown.samples.iter().filter_map(|slice| changed_rows(slice)));
    within_limit(head, &sections, limit)
}

/// A chain as one pull-request comment: the chain's status first, then each table's plan, all
/// under GitHub's limit.
pub(super) fn chain_markdown(root: &Plan, detail: Detail, chart: bool) -> String {
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
            md::code(&file_name(&plan.plan_file.path)),
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
        let _ = writeln!(out, "\n---\n\n### {}. {}\n", i + 1, md::code(&table_name(&plan.target.uri)));
        out.push_str(&markdown_at(plan, detail, chart, budget, 4));
    }
    out + MARKER
}

/// A plan file's name without its folder: the folder is the planning machine's.
fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |name| name.to_string_lossy().into_owned())
}

/// The status and summary as the comment's title, then which plan (file, id, inputs), the table,
/// window and mode, and the reason: two plans in one pull request are told apart.
fn heading(w: &mut String, plan: &Plan, level: usize) {
    let status = if plan.problems.is_empty() { "✅" } else { "❌" };
    let _ = writeln!(w, "{} {status} {}\n", "#".repeat(level), md::text(&summary(plan)));
    let columns = plan.column_changes();
    for column in &columns {
        let _ = writeln!(w, "- {}", md::text(&column.describe()));
    }
    if !columns.is_empty() {
        let _ = writeln!(w);
    }
    let _ = writeln!(
        w,
        "**Plan** {} · **id** {} · **inputs** {}\n",
        md::code(&shown_path(&plan.plan_file.path)),
        md::code(&plan.id),
        inputs(plan)
    );
    let table =
        if plan.target.table.is_empty() { display(&plan.target.uri) } else { plan.target.table.clone() };
    let _ = writeln!(
        w,
        "**Table** {} at version {} · **window** {} in {} of `{}` on {} · **mode** {}\n\n**Reason** {}\n",
        md::code(&table),
        plan.target.pre_version,
        plan.window,
        count(plan.preview.as_ref().map_or(plan.slices.len(), |p| p.of), "slice"),
        plan.every,
        md::code(&plan.target.date_column),
        mode_verb(plan),
        md::text(&plan.reason)
    );
    if let Some(approval) = unfreeze(plan) {
        let _ = writeln!(w, "**Frozen days rewritten** {}\n", md::text(&approval));
    }
    if let Some(rewrites) = rewrites(plan) {
        let _ = writeln!(w, "**Rewrites** {}\n", md::text(&rewrites));
    }
    if let Some(notice) = notice(plan, true) {
        let _ = writeln!(w, "**Notice** {}\n", md::text(&notice));
    }
    if let Some(ran_on) = &plan.source_ran_on {
        let _ = writeln!(w, "**Source** ran {}\n", md::text(&ran_on.to_string()));
    }
}

/// What approving means: the commits `bf apply` writes and the version `bf rollback` returns to;
/// or, for a plan that cannot be applied, why not.
fn apply_or_problems(w: &mut String, plan: &Plan) {
    if let Some(preview) = super::preview_line(plan) {
        let _ = writeln!(w, "**{}**\n", md::text(&preview));
        if plan.problems.is_empty() {
            return;
        }
    }
    if plan.problems.is_empty() {
        let _ = writeln!(
            w,
            "**`bf apply`** writes {} (one per slice, each recorded with the backfill's id) and then the table comment; \
             `bf rollback` returns the table to version {}.\n",
            count(plan.slices.len(), "commit"),
            plan.target.pre_version
        );
        return;
    }
    let _ = writeln!(w, "**This plan cannot be applied:**\n");
    for problem in plan.problems.iter().take(LISTED) {
        let _ = writeln!(w, "- {}", md::text(problem));
    }
    if plan.problems.len() > LISTED {
        let _ =
            writeln!(w, "- … and {} more (`bf show --json` lists them all)", plan.problems.len() - LISTED);
    }
    let _ = writeln!(w);
}

/// Each check as one line when it passed everywhere, else its first failures; then the guards.
fn checks_and_guards(w: &mut String, plan: &Plan) {
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
}

/// Whether the rows outside the window are unchanged, and what was compared only within rounding.
fn outside_window(w: &mut String, plan: &Plan) {
    let outside = &plan.outside_window;
    let _ = writeln!(
        w,
        "\n**{}** {}",
        super::outside_label(plan),
        if outside.unchanged { "unchanged ✅" } else { "**changed** ❌" }
    );
    for note in &outside.within_error {
        let _ = writeln!(w, "- compared within rounding: {}", md::text(note));
    }
    if let Some(lent) = super::lent_rows(plan) {
        let _ = writeln!(w, "\n**Rows from other slices' files** {}", md::text(&lent));
    }
}

/// The first warnings, as quotes, and how many more there are.
fn warnings(w: &mut String, plan: &Plan) {
    for warning in plan.warnings.iter().take(LISTED) {
        let _ = writeln!(w, "\n> ⚠️ {}", md::text(warning));
    }
    if plan.warnings.len() > LISTED {
        let _ = writeln!(w, "\n> ⚠️ … and {} more warnings (`bf show --json`)", plan.warnings.len() - LISTED);
    }
}

/// The slices shown as a table, and the slices left out as one row of their own.
fn slices_table(plan: &Plan, shown: &Shown) -> String {
    let columns = Columns::of(plan);
    let header: Vec<String> = columns.header.iter().map(|h| md::text(h)).collect();
    let mut slices = format!("\n| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for slice in &shown.slices {
        let _ = writeln!(slices, "| {} |", columns.slice_row(slice).join(" | "));
    }
    if shown.slices.len() < plan.slices.len() {
        // A reviewer must never take the rows shown for the whole: the rest are one row of their own.
        let left_out: Vec<&SliceReport> =
            plan.slices.iter().filter(|s| !shown.slices.iter().any(|t| t.index == s.index)).collect();
        let _ = writeln!(
            slices,
            "| … | {} | {} |",
            count(left_out.len(), "more slice"),
            left_out_cells(&left_out, &columns).join(" | ")
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
    slices
}

/// The cells of the row standing for the slices a comment leaves out: their rows and each metric
/// as the change across them (`all +10.0% ± 0.1%`), and their row changes summed.
fn left_out_cells(slices: &[&SliceReport], columns: &Columns) -> Vec<String> {
    let rows = slices.iter().map(|s| (Some(s.before.rows as f64), Some(s.after.rows as f64)));
    let mut cells = vec![spread(rows.collect())];
    for name in &columns.metrics {
        let pairs = slices.iter().map(|s| {
            (s.before.metrics.get(*name).copied().flatten(), s.after.metrics.get(*name).copied().flatten())
        });
        cells.push(spread(pairs.collect()));
    }
    cells.extend(columns.summed(slices.iter().copied()));
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

/// Where the change is, by the plan's `breakdown_by` columns; nothing without a breakdown.
fn breakdown(plan: &Plan) -> Option<String> {
    if plan.breakdown.is_empty() {
        return None;
    }
    let mut breakdown = String::from("\n**Where the change is**\n\n");
    for metric in breakdown_metrics(plan) {
        let _ = writeln!(breakdown, "- {}", md::text(&metric.heading));
        for part in metric.parts {
            let _ = writeln!(breakdown, "  - {}", md::text(&part));
        }
    }
    Some(breakdown)
}

/// One slice's changed rows as a folded diff block; nothing for a slice without row changes.
fn changed_rows(slice: &SliceReport) -> Option<String> {
    let changes = slice.changes.as_ref()?;
    let total = changes.added + changes.removed + changes.changed;
    let shown = comment_samples(changes);
    let diff = sample_diff(&changes.columns.iter().map(|c| md::code_line(c)).collect::<Vec<_>>(), &shown)
        .lines()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let fence = md::fence(&diff);
    Some(format!(
        "\n<details><summary>Changed rows in slice {} ({}): {} of {total}</summary>\n\n{fence}diff\n{diff}\n{fence}\n</details>\n",
        slice.index,
        bf::words::days(slice.first, slice.last),
        shown.len(),
    ))
}

/// The first changed rows of a slice, each value on one line. A diff block colours lines by their
/// first character; a value's own line breaks would start lines of their own, so they are written
/// as \n. A comment shows a few rows of each slice; the saved plan and `bf show` hold what
/// `[diff] samples` asked for.
fn comment_samples(changes: &RowChanges) -> Vec<SampleRow> {
    let fields = |f: &Option<Vec<String>>| f.as_ref().map(|f| f.iter().map(|v| md::code_line(v)).collect());
    changes
        .samples
        .iter()
        .take(COMMENT_SAMPLES)
        .map(|sample| SampleRow {
            change: sample.change.clone(),
            before: fields(&sample.before),
            after: fields(&sample.after),
        })
        .collect()
}

/// The head, whole, and then as many sections of detail as fit under `limit`, with a note where
/// the comment was cut.
fn within_limit(head: String, sections: &[String], limit: usize) -> String {
    let mut out = head;
    if out.len() + CUT_NOTE > limit {
        // Only a plan file with thousands of checks gets here: keep what fits, whole lines.
        let cut = out[..limit - CUT_NOTE].rfind('\n').unwrap_or(0);
        out.truncate(cut);
        let _ =
            writeln!(out, "\n> Cut here to stay under GitHub's {} characters.", number(COMMENT_LIMIT as f64));
        return out;
    }
    for (i, section) in sections.iter().enumerate() {
        if out.len() + section.len() + CUT_NOTE > limit {
            let _ = writeln!(
                out,
                "\n> Cut here to stay under GitHub's {} characters: {} more of detail. `bf show --format markdown --detail all` prints everything.",
                number(COMMENT_LIMIT as f64),
                count(sections.len() - i, "section")
            );
            break;
        }
        out.push_str(section);
    }
    out
}

/// What the plan read, by input name, as markdown: `orders` (30 files), `silver` (Delta table
/// orders_silver at version 5).
fn inputs(plan: &Plan) -> String {
    let mut named: std::collections::BTreeMap<&str, String> = std::collections::BTreeMap::new();
    for input in &plan.delta_inputs {
        let table = input.stands_for.as_deref().unwrap_or(&input.uri);
        let read = match input.stands_for {
            Some(_) => format!("Delta table {}, as its backfill leaves it", table_name(table)),
            None => format!("Delta table {} at version {}", table_name(table), input.version),
        };
        named.insert(&input.input, read);
    }
    let mut files: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for file in &plan.inputs {
        *files.entry(&file.input).or_default() += 1;
    }
    for folder in &plan.input_folders {
        *files.entry(&folder.input).or_default() += 0;
    }
    for (input, n) in files {
        named.entry(input).or_insert_with(|| count(n, "file"));
    }
    match named.is_empty() {
        true => "none".to_owned(),
        false => named
            .iter()
            .map(|(name, read)| format!("{} ({})", md::code(name), md::text(read)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A plan file's path as the reader of the comment knows it: relative to where bf runs (a CI job
/// runs at the repository's root), else as saved.
fn shown_path(path: &str) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|here| std::path::Path::new(path).strip_prefix(here).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| path.to_owned())
}
