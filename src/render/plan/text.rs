//! A plan for a terminal (`bf plan`, `bf show`): the plan's facts, its verdict and checks first,
//! then the slices and what changed in them, and the summary again last, where the eye ends up.

use std::fmt::Write;

use bf::rehearse::plan::Plan;

use super::shown::{Shown, has_samples};
use super::{
    Columns, Detail, breakdown_metrics, checks_by_name, display, measured_cells, notice, rewrites,
    sample_diff, summary, table_name, unfreeze,
};
use crate::render::{count, number, table};

/// One plan, section by section.
pub(super) fn text(plan: &Plan, detail: Detail, chart: bool) -> String {
    let shown = Shown::of(plan, detail);
    let mut out = String::new();
    header(&mut out, plan);
    verdict(&mut out, plan);
    if chart {
        out.push_str(&super::chart::chart(plan).unwrap_or_default());
    }
    checks_and_guards(&mut out, plan);
    slices_table(&mut out, plan, &shown);
    outside_window(&mut out, plan);
    source_rows_not_written(&mut out, plan);
    breakdown(&mut out, plan);
    changed_rows(&mut out, plan, &shown);
    closing(&mut out, plan);
    out
}

/// A chain: each table's plan, upstream first, under a line naming the table it is built from; the
/// chain's summary last, where a terminal leaves the eye.
pub(super) fn chain_text(root: &Plan, detail: Detail, chart: bool) -> String {
    let mut out = text(root, detail, chart);
    for (plan, upstream) in downstream_of(root) {
        let _ = writeln!(
            out,
            "\n── downstream of {}: {} ──\n",
            table_name(&upstream.target.uri),
            table_name(&plan.target.uri)
        );
        out.push_str(&text(plan, detail, chart));
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

/// What was planned where: the plan file, the table, the reason, the window, the rehearsal and
/// the rehearsals read in place of the tables upstream.
fn header(w: &mut String, plan: &Plan) {
    let target = match &plan.target.catalog {
        // The name the plan gives, and where the catalog said it lives.
        Some(pinned) => format!("{} at {}", pinned.name, display(&plan.target.uri)),
        None => display(&plan.target.uri),
    };
    let partitioning = if plan.target.partition_columns.is_empty() {
        "unpartitioned".to_owned()
    } else {
        format!("partitioned by {}", plan.target.partition_columns.join(", "))
    };
    let _ = writeln!(w, "bf plan {}", plan.plan_file.path);
    if let Some(preview) = super::preview_line(plan) {
        let _ = writeln!(w, "  {preview}");
    }
    let _ = writeln!(w, "  table      {target} (version {}, {partitioning})", plan.target.pre_version);
    if let Some(ran_on) = &plan.source_ran_on {
        let _ = writeln!(w, "  source     {}", ran_on);
    }
    let _ = writeln!(w, "  reason     {}", plan.reason);
    let _ = writeln!(
        w,
        "  window     {} in {} of `{}` on {}",
        plan.window,
        count(plan.preview.as_ref().map_or(plan.slices.len(), |p| p.of), "slice"),
        plan.every,
        plan.target.date_column
    );
    if let Some(approval) = unfreeze(plan) {
        let _ = writeln!(w, "  unfreeze   {approval}");
    }
    if let Some(rewrites) = rewrites(plan) {
        let _ = writeln!(w, "  rewrites   {rewrites}");
    }
    if let Some(notice) = notice(plan, false) {
        let _ = writeln!(w, "  notice     {notice}");
    }
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
}

/// The summary line, every problem when the plan cannot be applied, and what changed in each
/// column: the decision comes before the evidence.
fn verdict(w: &mut String, plan: &Plan) {
    let _ = writeln!(w, "\n{}", summary(plan));
    if !plan.problems.is_empty() {
        let _ = writeln!(w, "This plan cannot be applied:");
        for problem in &plan.problems {
            let _ = writeln!(w, "  - {problem}");
        }
    }
    let columns = plan.column_changes();
    if !columns.is_empty() {
        let _ = writeln!(w, "What changed, per column:");
        for column in &columns {
            let _ = writeln!(w, "  {}", column.describe());
        }
    }
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

/// The slices shown, before → after, with a total row when there is more than one slice, and a
/// note when some are left out so the rows shown are never taken for the whole.
fn slices_table(w: &mut String, plan: &Plan, shown: &Shown) {
    let columns = Columns::of(plan);
    let mut slices = table(&columns.header);
    for slice in &shown.slices {
        slices.add_row(columns.slice_row(slice));
    }
    if plan.slices.len() > 1 {
        let mut row = measured_cells(
            "total".into(),
            match &plan.preview {
                Some(preview) => format!("the {} of {} previewed", plan.slices.len(), preview.of),
                None => plan.window.to_string(),
            },
            &plan.total.before,
            &plan.total.after,
            &columns.metrics,
            &columns.whole,
        );
        row.extend(columns.summed(&plan.slices));
        slices.add_row(row);
    }
    let _ = writeln!(w, "\n{slices}");
    if shown.slices.len() < plan.slices.len() {
        let _ = writeln!(
            w,
            "{} of {} slices shown, {}; `--detail slices` lists every slice.",
            shown.slices.len(),
            plan.slices.len(),
            shown.chosen_by()
        );
    }
}

/// The rows outside the window, which a backfill must not touch.
fn outside_window(w: &mut String, plan: &Plan) {
    let (line, notes) = super::outside_said(plan);
    let _ = writeln!(w, "{line}");
    for note in notes {
        let _ = writeln!(w, "  compared within rounding: {note}");
    }
}

/// Source rows no slice wrote, outside the window or with no date: a reader checking the counts
/// should not have to wonder where they went.
fn source_rows_not_written(w: &mut String, plan: &Plan) {
    let outside_source = plan.rows_outside_window();
    let null_source: u64 = plan.slices.iter().map(|s| s.source.null_date).max().unwrap_or(0);
    if outside_source + null_source > 0 {
        let _ = writeln!(
            w,
            "Source rows not written: {outside_source} outside the window, {null_source} with a NULL {}",
            plan.target.date_column
        );
    }
    if let Some(lent) = super::lent_rows(plan) {
        let _ = writeln!(w, "{lent}");
    }
}

/// Where the change is, by the plan's `breakdown_by` columns.
fn breakdown(w: &mut String, plan: &Plan) {
    if !plan.breakdown.is_empty() {
        let _ = writeln!(w, "\nWhere the change is:");
        for metric in breakdown_metrics(plan) {
            let _ = writeln!(w, "  {}", metric.heading);
            for part in metric.parts {
                let _ = writeln!(w, "    {part}");
            }
        }
    }
}

/// The changed rows of the slices shown, as diffs, and how many slices' rows are left out.
fn changed_rows(w: &mut String, plan: &Plan, shown: &Shown) {
    for slice in &shown.samples {
        let Some(changes) = &slice.changes else { continue };
        let total = changes.added + changes.removed + changes.changed;
        let _ =
            writeln!(w, "\nChanged rows in slice {} ({} of {total}):", slice.index, changes.samples.len());
        let _ = writeln!(w, "{}", sample_diff(&changes.columns, &changes.samples));
    }
    let with_samples = plan.slices.iter().filter(|s| has_samples(s)).count();
    if shown.samples.len() < with_samples {
        let _ = writeln!(
            w,
            "\nChanged rows of {} of {with_samples} slices shown; `--detail all` shows every slice's.",
            shown.samples.len()
        );
    }
}

/// The warnings, then the summary again and the count of problems: after a long plan, the last
/// lines on screen are the ones that decide.
fn closing(w: &mut String, plan: &Plan) {
    for warning in &plan.warnings {
        let _ = writeln!(w, "\nWarning: {warning}");
    }
    let _ = writeln!(w, "\n{}", summary(plan));
    if !plan.problems.is_empty() {
        let _ = writeln!(w, "This plan cannot be applied: {}.", count(plan.problems.len(), "problem"));
    }
}
