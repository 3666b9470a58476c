//! `bf gaps --write-plan FILE --like PLAN`: a plan for exactly the days `bf gaps` found, written
//! from a plan the team already reviewed for the same table. Its source, metrics, checks, guards
//! and storage settings are the reviewed plan's, its comments and layout kept (the plan is edited,
//! not rebuilt); what changes is said in a comment at the top:
//! - the window runs from the first day found to the last, sliced by day, and `[slicing] only`
//!   lists the days, so the days between them are not rewritten;
//! - the reason is a `<…>` placeholder, which `bf validate` points at until its author writes why;
//! - local paths are rewritten relative to the new plan's folder;
//! - `[[downstream]]` plans are dropped: they were reviewed for the other plan's window.

use std::path::Path;

use chrono::NaiveDate;
use toml_edit::{Array, DocumentMut, Item, Value, value};

use super::Gaps;
use crate::delta::store::Location;

/// The reason a written plan leaves for its author, as the plan's TOML spells it.
pub const REASON: &str = "\"<why these days are reloaded>\"";

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path} is not a plan bf can copy: {reason}")]
    Like { path: String, reason: String },
    #[error("nothing to write: bf gaps found no missing or thin day in {range}")]
    Nothing { range: crate::window::Window },
}

/// The text of a plan like the one at `like` (its text `like_text`), to be saved at `out`, for the
/// days `gaps` found.
pub fn plan_like(like: &Path, like_text: &str, out: &Path, gaps: &Gaps) -> Result<String, WriteError> {
    let days = gaps.days();
    let (Some(first), Some(last)) = (days.first(), days.last()) else {
        return Err(WriteError::Nothing { range: gaps.range });
    };
    let refused =
        |reason: &str| WriteError::Like { path: like.display().to_string(), reason: reason.to_owned() };
    let mut plan: DocumentMut = like_text.parse().map_err(|e: toml_edit::TomlError| refused(e.message()))?;

    // The reason's value replaced in place: the key keeps what was above it (a `#:schema` line stays
    // first), and what was written is said below that.
    let mut reason = Value::from(REASON.trim_matches('"'));
    reason.decor_mut().set_prefix(" ");
    match plan.get_mut("reason") {
        Some(item) => {
            // A comment after it stays.
            if let Some(suffix) = item.as_value().and_then(|v| v.decor().suffix()).and_then(|s| s.as_str()) {
                reason.decor_mut().set_suffix(suffix.to_owned());
            }
            *item = Item::Value(reason);
        }
        None => {
            plan.insert("reason", Item::Value(reason));
        }
    }
    if let Some((mut key, _)) = plan.as_table_mut().get_key_value_mut("reason") {
        let above = key.leaf_decor().prefix().and_then(|p| p.as_str()).unwrap_or_default().to_owned();
        key.leaf_decor_mut().set_prefix(format!("{above}{}", found(gaps, like)));
    }

    let window = plan.entry("window").or_insert(toml_edit::table());
    let window = window.as_table_mut().ok_or_else(|| refused("its `window` is not a table"))?;
    window.insert("start", date(*first));
    window.insert("end", date(*last));

    let slicing = plan.entry("slicing").or_insert(toml_edit::table());
    let slicing = slicing.as_table_mut().ok_or_else(|| refused("its `slicing` is not a table"))?;
    slicing.insert("every", value("day"));
    let mut only = Array::new();
    for day in &days {
        only.push(toml_edit::Datetime { date: Some(toml_date(*day)), time: None, offset: None });
    }
    slicing.insert("only", value(only));

    // More days than the plan's guard allows (its own, or the default) would be refused: the days
    // found are the plan.
    let allowed = plan
        .get("guards")
        .and_then(|g| g.get("max_slices"))
        .and_then(Item::as_integer)
        .unwrap_or(i64::from(crate::plan_file::Guards::default().max_slices));
    if allowed < days.len() as i64 {
        let guards = plan.entry("guards").or_insert(toml_edit::table());
        let guards = guards.as_table_mut().ok_or_else(|| refused("its `guards` is not a table"))?;
        guards.insert("max_slices", value(days.len() as i64));
    }
    plan.remove("downstream");

    let (like_dir, out_dir) = (folder(like), folder(out));
    let rebase = |item: &mut Item| {
        if let Some(written) = item.as_str().filter(|w| crate::delta::store::uri(w).is_none()) {
            let decor = item.as_value().map(|v| v.decor().clone());
            let mut rebased = Value::from(Location::written_from(&out_dir, &like_dir, written));
            if let Some(decor) = decor {
                *rebased.decor_mut() = decor;
            }
            *item = Item::Value(rebased);
        }
    };
    for (table, key) in
        [("target", "table"), ("rehearsal", "table"), ("record", "log_table"), ("notify", "file")]
    {
        if let Some(item) = plan.get_mut(table).and_then(|t| t.get_mut(key)) {
            rebase(item);
        }
    }
    if let Some(inputs) =
        plan.get_mut("source").and_then(|s| s.get_mut("inputs")).and_then(Item::as_table_like_mut)
    {
        for (_, input) in inputs.iter_mut() {
            if let Some(path) = input.get_mut("path") {
                rebase(path);
            }
        }
    }
    Ok(plan.to_string())
}

/// The comment above `reason`: what was found, and what changed from the plan it is like.
fn found(gaps: &Gaps, like: &Path) -> String {
    let mut lines = vec![format!(
        "# Written by `bf gaps` from {} for the days {} lacks on `{}` (version {}):",
        like.display(),
        gaps.table,
        gaps.date_column,
        gaps.version
    )];
    // Missing days in runs, each thin day on its own: a month without rows is one line.
    let mut found: Vec<(NaiveDate, String)> = super::runs(&gaps.missing)
        .into_iter()
        .map(|(first, last)| match first == last {
            true => (first, format!("{first} no rows")),
            false => (first, format!("{first}..{last} no rows ({} days)", (last - first).num_days() + 1)),
        })
        .collect();
    found.extend(
        gaps.thin.iter().map(|t| {
            (t.day, format!("{} {}, usually {}", t.day, crate::words::count(t.rows, "row"), t.usual))
        }),
    );
    found.sort();
    lines.extend(found.iter().map(|(_, what)| format!("#   {what}")));
    lines.push(
        "# Its window runs from the first to the last of them, and `[slicing] only` keeps the days between \
         untouched."
            .to_owned(),
    );
    lines.push("# Write why they are reloaded: it becomes the table's comment.".to_owned());
    format!("{}\n", lines.join("\n"))
}

fn folder(file: &Path) -> std::path::PathBuf {
    let dir = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::env::current_dir().map(|here| here.join(dir)).unwrap_or_else(|_| dir.to_owned())
}

fn toml_date(day: NaiveDate) -> toml_edit::Date {
    use chrono::Datelike;
    toml_edit::Date { year: day.year() as u16, month: day.month() as u8, day: day.day() as u8 }
}

fn date(day: NaiveDate) -> Item {
    value(toml_edit::Datetime { date: Some(toml_date(day)), time: None, offset: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gaps::{Thin, Thinness};
    use crate::window::Window;

    fn found(missing: Vec<NaiveDate>) -> Gaps {
        let d = |t: &str| t.parse().unwrap();
        Gaps {
            table: "/lake/orders".into(),
            version: 7,
            date_column: "order_date".into(),
            range: Window { start: d("2025-01-01"), end: d("2025-12-31") },
            thinness: Thinness::default(),
            closed: Vec::new(),
            missing,
            thin: vec![Thin { day: d("2025-12-24"), rows: 1, usual: 30, compared_with: 8 }],
            unfinished: Vec::new(),
            rows: std::collections::BTreeMap::new(),
            files_read: Some(0),
        }
    }

    const LIKE: &str = "reason = \"Reload.\"  # why\n\
        [target]\ntable = \"../lake/orders\"\ndate_column = \"order_date\"\n\
        [window]\nstart = 2025-09-01\nend = 2025-09-30\n[slicing]\nevery = \"week\"\n\
        [source]\ninputs.landed = { path = \"../landing/{date}.csv\", format = \"csv\" }\n\
        inputs.rates = { path = \"s3://lake/rates\", format = \"delta\" }\nquery = \"SELECT 1\"\n\
        [[downstream]]\nplan = \"revenue.toml\"\n";

    #[test]
    fn the_plan_keeps_what_was_reviewed_and_changes_what_the_days_need() {
        let first: NaiveDate = "2025-02-01".parse().unwrap();
        let days: Vec<NaiveDate> = (0..150).map(|k| first + chrono::Days::new(k)).collect();
        let text = plan_like(
            Path::new("/work/plans/sep.toml"),
            LIKE,
            Path::new("/work/plans/gaps/holes.toml"),
            &found(days),
        )
        .unwrap();
        let plan: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(plan["reason"].as_str(), Some("<why these days are reloaded>"));
        assert!(
            text.contains("reason = \"<why these days are reloaded>\"  # why"),
            "its comment kept:\n{text}"
        );
        assert!(
            text.contains(
                "#   2025-02-01..2025-06-30 no rows (150 days)\n#   2025-12-24 1 row, usually 30\n"
            ),
            "{text}"
        );
        assert_eq!(plan["window"]["start"].to_string(), "2025-02-01");
        assert_eq!(plan["window"]["end"].to_string(), "2025-12-24");
        assert_eq!(plan["slicing"]["every"].as_str(), Some("day"));
        assert_eq!(plan["slicing"]["only"].as_array().unwrap().len(), 151);
        assert_eq!(plan["guards"]["max_slices"].as_integer(), Some(151), "more days than the default 100");
        assert_eq!(plan["target"]["table"].as_str(), Some("../../lake/orders"), "rebased for the new folder");
        assert_eq!(plan["source"]["inputs"]["landed"]["path"].as_str(), Some("../../landing/{date}.csv"));
        assert_eq!(
            plan["source"]["inputs"]["rates"]["path"].as_str(),
            Some("s3://lake/rates"),
            "a URI as written"
        );
        assert!(plan.get("downstream").is_none(), "downstream plans were reviewed for another window");
    }

    #[test]
    fn nothing_found_writes_nothing() {
        let mut gaps = found(Vec::new());
        gaps.thin.clear();
        let refused = plan_like(Path::new("sep.toml"), LIKE, Path::new("holes.toml"), &gaps);
        assert!(matches!(refused, Err(WriteError::Nothing { .. })));
    }
}
