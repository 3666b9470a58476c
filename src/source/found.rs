//! Where in a slice's input files a value is. The engine quotes a value it could not cast
//! (`Cannot cast string 'n/a' to value of Float64 type`) but names neither the file nor the row,
//! and a day's corrections are often one file of many: for text inputs on this machine's disk
//! (CSV, JSON lines) the first line holding the value is found and named, `file:line`. And
//! which of a window's days an input's files are missing for, when one is.

use std::io::BufRead;

use super::run::InputFile;
use crate::plan_file::template::expand;
use crate::plan_file::{Location, PlanDocument};
use crate::window::Slice;

/// The most lines read from one file looking for the value.
const MOST_LINES: usize = 10_000_000;

/// `message` (an engine's error), with where its uncastable value is when it can be found in
/// `files`: `… ('n/a' is at landing/payments/2026-08-02.csv:3)`.
pub fn with_place(message: String, files: &[InputFile]) -> String {
    match uncastable(&message, files) {
        Some(at) => format!("{message} ({at})"),
        None => message,
    }
}

/// Where the value `message` says could not be cast first is in `files`, as `'value' is at
/// file:line`; `None` for any other message, a file not on this disk or not text, or no line
/// holding the value as a whole cell.
pub fn uncastable(message: &str, files: &[InputFile]) -> Option<String> {
    let start = message.find("Cannot cast string '")? + "Cannot cast string '".len();
    let value = &message[start..start + message[start..].find("' to ")?];
    files.iter().find_map(|file| {
        let path = file.url.to_file_path().ok().filter(|_| file.url.scheme() == "file")?;
        let text = path.extension().is_some_and(|e| {
            ["csv", "tsv", "txt", "json", "jsonl", "ndjson"].contains(&&*e.to_string_lossy())
        });
        if !text {
            return None;
        }
        let reader = std::io::BufReader::new(std::fs::File::open(&path).ok()?);
        let line =
            reader.lines().take(MOST_LINES).map_while(Result::ok).position(|line| holds(&line, value))?;
        Some(format!("'{value}' is at {}:{}", crate::delta::store::display_url(&file.url), line + 1))
    })
}

/// Whether `line` holds `value` as a whole cell: a CSV field (quoted or not) or a JSON string.
fn holds(line: &str, value: &str) -> bool {
    line.split([',', '\t']).any(|cell| cell.trim().trim_matches('"') == value)
        || line.contains(&format!("\"{value}\""))
}

/// For an input whose path changes with the slice (`{date}`) and is missing for a slice: how
/// many of the window's slices miss it too, which days, and the last day that has one — a
/// window past the data says so at once, not one day at a time. Local paths only; empty for
/// a path the same for every slice.
pub fn missing_elsewhere(document: &PlanDocument, path: &str) -> String {
    let slices = document.plan.slices();
    if !path.contains('{') {
        return String::new();
    }
    let exists = |s: &Slice| match document.resolve(&expand(path, s)) {
        Location::Path(local) => Some(local.exists()),
        Location::Uri(_) => None,
    };
    let mut missing: Vec<&Slice> = Vec::new();
    let mut last_found = None;
    for s in &slices {
        match exists(s) {
            None => return String::new(),
            Some(false) => missing.push(s),
            Some(true) => last_found = last_found.max(Some(s.last)),
        }
    }
    if missing.len() <= 1 {
        return String::new();
    }
    // In the calendar's order, whichever order the slices run in.
    missing.sort_by_key(|s| s.first);
    // Runs of slices in a row, as `first..last`.
    let mut runs: Vec<(chrono::NaiveDate, chrono::NaiveDate)> = Vec::new();
    for s in &missing {
        match runs.last_mut() {
            Some(run) if s.first.pred_opt() == Some(run.1) => run.1 = s.last,
            _ => runs.push((s.first, s.last)),
        }
    }
    const SHOWN: usize = 3;
    let mut shown: Vec<String> = runs.iter().take(SHOWN).map(|(a, b)| crate::words::days(a, b)).collect();
    if runs.len() > SHOWN {
        shown.push(format!("and {} more", runs.len() - SHOWN));
    }
    format!(
        "; {} of the window's {} slices have no file for it ({}){}",
        missing.len(),
        slices.len(),
        shown.join(", "),
        match last_found {
            Some(day) => format!(", the last one found is for {day}"),
            None => ", and none has one".to_owned(),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_holding_the_value_as_a_cell_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("2026-08-02.csv");
        std::fs::write(&csv, "id,amount\n1,n/a-ish\n2,\"n/a\"\n3,n/a\n").unwrap();
        let files = [InputFile { input: "c".into(), url: url::Url::from_file_path(&csv).unwrap() }];
        let found =
            uncastable("Cast error: Cannot cast string 'n/a' to value of Float64 type", &files).unwrap();
        assert!(found.starts_with("'n/a' is at ") && found.ends_with("2026-08-02.csv:3"), "{found}");
        assert_eq!(uncastable("Cannot cast string 'zz' to value of Float64 type", &files), None);
        assert_eq!(uncastable("Arrow error: something else", &files), None);
    }
}
