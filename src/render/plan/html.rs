//! A plan as one self-contained HTML page (`bf plan --html`, `bf show --html`): what a ticket or a
//! release note links to. The same facts as the terminal's and the comment's forms — the cells,
//! the summary, the outside-the-window proof are made once, in this folder's `mod.rs` — plus the
//! trend drawn per metric, the window shaded, each period's numbers on hover.

use maud::{Markup, html};

use bf::rehearse::plan::Plan;

use super::shown::Shown;
use super::{Columns, Detail, breakdown_metrics, checks_by_name, display, outside_said, summary, table_name};
use crate::render::trend::{inside, per, series};

/// The page of a plan and the plans of its chain, upstream first.
pub(super) fn html(root: &Plan) -> String {
    let plans = root.chain();
    let title = format!("bf plan · {} · {}", table_name(&root.target.uri), root.window);
    crate::render::page::page(
        &title,
        html! {
            @for plan in plans { (one(plan)) }
            footer { p { "Made by bf " (env!("CARGO_PKG_VERSION")) " from the plan saved at " (root.created_at.to_rfc3339()) "." } }
        },
    )
}

fn one(plan: &Plan) -> Markup {
    let shown = Shown::of(plan, Detail::All);
    html! {
        article.plan data-table=(table_name(&plan.target.uri)) {
            (header(plan))
            (charts(plan))
            (slices(plan))
            (changes(plan, &shown))
            (checks(plan))
            (outside(plan))
            @if !plan.warnings.is_empty() {
                section #warnings { h2 { "Warnings" } ul { @for w in &plan.warnings { li { (w) } } } }
            }
        }
    }
}

/// The verdict and summary as the title, then which plan, table, window and why.
fn header(plan: &Plan) -> Markup {
    let (status, class) = if plan.appliable() { ("✓", "ok") } else { ("✗", "bad") };
    html! {
        header {
            h1 { span class=(class) { (status) } " " (summary(plan)) }
            @if !plan.problems.is_empty() {
                p.bad { "This plan cannot be applied:" }
                ul.problems { @for p in &plan.problems { li { (p) } } }
            }
            dl {
                dt { "plan" } dd { code { (plan.plan_file.path) } " · id " code { (plan.id) } }
                dt { "table" } dd { (display(&plan.target.uri)) " at version " (plan.target.pre_version) }
                dt { "window" } dd {
                    (plan.window) " in " (crate::render::count(plan.slices.len(), "slice")) " of "
                    code { (plan.every) } " on " code { (plan.target.date_column) }
                }
                dt { "mode" } dd { (super::mode_verb(plan)) }
                dt { "reason" } dd.reason { (plan.reason) }
                dt { "rehearsal" } dd { (display(&plan.rehearsal.uri)) " at version " (plan.rehearsal.version) }
            }
        }
    }
}

/// A chart per metric (rows first): before as bars, after as a line, the window shaded; and the
/// numbers as a table for those who read them.
fn charts(plan: &Plan) -> Markup {
    let Some(trend) = plan.trend.as_ref().filter(|t| !t.points.is_empty()) else {
        return html! { section #charts { h2 { "Before and after" }
        p { "This plan was saved by an older bf, without the numbers per day: run " code { "bf plan" } " again to draw them." } } };
    };
    let window = inside(trend).map(|(f, l)| (trend.points[f].first, trend.points[l].last));
    html! {
        section #charts {
            h2 { "Before and after, " (per(trend.period)) }
            p.legend {
                "The window"
                @if let Some((first, last)) = window { " (" (first) ".." (last) ")" }
                " is shaded; the periods either side are outside it, for context. Hover a period for its numbers."
                span style="background:#b8c4d6" {} "before" span style="background:#d95f02" {} "after"
            }
            @for s in series(trend) {
                section.chart data-metric=(s.name) {
                    h3 { (s.name) " · " (s.moved_said(trend)) }
                    (crate::render::svg::chart(trend, &s))
                    details {
                        summary { "The numbers" }
                        table.points {
                            tr { th { "period" } th.n { "before" } th.n { "after" } }
                            @for (i, point) in trend.points.iter().enumerate() {
                                tr.inside[point.inside] {
                                    td { (bf::words::days(point.first, point.last)) }
                                    td.n { (crate::render::value(s.before[i])) }
                                    td.n { (crate::render::value(s.after[i])) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Every slice's row, as the terminal's table has them, with the total.
fn slices(plan: &Plan) -> Markup {
    let columns = Columns::of(plan);
    html! {
        section #slices {
            h2 { "Slices" }
            table {
                tr { @for h in &columns.header { th { (h) } } }
                @for slice in &plan.slices { tr { @for cell in columns.slice_row(slice) { td { (cell) } } } }
            }
        }
    }
}

/// What changed per column, where the change is (`[diff] by`), and the changed rows.
fn changes(plan: &Plan, shown: &Shown) -> Markup {
    let columns = plan.column_changes();
    html! {
        section #changes {
            h2 { "What changed" }
            @if columns.is_empty() { p { "No column of a row kept by its key changed." } }
            ul { @for c in &columns { li { (c.describe()) } } }
            @for metric in breakdown_metrics(plan) {
                h3 { (metric.heading) }
                ul { @for part in &metric.parts { li { (part) } } }
            }
            @for slice in &shown.samples {
                @if let Some(changes) = &slice.changes {
                    h3 { "Changed rows in slice " (slice.index) " (" (changes.samples.len()) " of "
                        (changes.added + changes.removed + changes.changed) ")" }
                    table.samples {
                        tr { th { "" } @for c in &changes.columns { th { (c) } } }
                        @for row in &changes.samples {
                            @if let Some(before) = &row.before {
                                tr.before { td { (row.change) " · before" } @for v in before { td { (v) } } }
                            }
                            @if let Some(after) = &row.after {
                                tr.after { td { (row.change) " · after" } @for v in after { td { (v) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Checks on every slice and the guards over the whole backfill.
fn checks(plan: &Plan) -> Markup {
    let mark = |passed: bool| if passed { ("✓", "ok") } else { ("✗", "bad") };
    html! {
        section #checks {
            h2 { "Checks" }
            table {
                tr { th { "" } th { "check" } th { "slice" } th { "detail" } }
                @for (name, results) in checks_by_name(plan) {
                    @for check in results {
                        @let (m, class) = mark(check.passed);
                        tr { td class=(class) { (m) } td { (name) } td.n { (check.slice) } td {
                            (check.detail)
                            @for row in &check.sample { br; code { (row) } }
                        } }
                    }
                }
            }
            @if !plan.guards.is_empty() {
                h2 { "Guards" }
                table {
                    @for guard in &plan.guards {
                        @let (m, class) = mark(guard.passed);
                        tr { td class=(class) { (m) } td { (guard.name) } td { (guard.detail) } }
                    }
                }
            }
        }
    }
}

/// The proof that nothing outside the window moved.
fn outside(plan: &Plan) -> Markup {
    let (line, notes) = outside_said(plan);
    let class = if plan.outside_window.unchanged { "ok" } else { "bad" };
    html! {
        section #outside {
            h2 { "Outside the window" }
            p class=(class) { (line) }
            @for note in notes { p { "Compared within rounding: " (note) } }
        }
    }
}
