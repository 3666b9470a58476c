//! The placeholders an input path may hold.
//!
//! An input path may name the slice it serves (`landing/orders/{date}.csv`), the way a daily job
//! reads the file of the day it loads, so one plan can backfill thirty days from thirty files.

use crate::window::Slice;

/// A placeholder an input path may hold, replaced by one of the slice's dates as `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// `{start}`: the slice's first day.
    Start,
    /// `{end}`: the slice's last day.
    End,
    /// `{date}`: the slice's only day (one-day slices only).
    Date,
    /// `{run_date}`: the slice's run date.
    RunDate,
}

/// Why an input path is not a valid template; the text is shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// The placeholders in `path`, in order, or what is wrong with them.
pub fn placeholders(path: &str) -> Result<Vec<Placeholder>, TemplateError> {
    let mut found = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err(TemplateError(format!("`}}` without `{{` in \"{path}\"")));
        }
        let after = &rest[open + 1..];
        let close =
            after.find('}').ok_or_else(|| TemplateError(format!("`{{` without `}}` in \"{path}\"")))?;
        found.push(match &after[..close] {
            "start" => Placeholder::Start,
            "end" => Placeholder::End,
            "date" => Placeholder::Date,
            "run_date" => Placeholder::RunDate,
            other => {
                return Err(TemplateError(format!(
                    "unknown placeholder `{{{other}}}`: a path can use {{start}}, {{end}}, {{date}} and {{run_date}}"
                )));
            }
        });
        rest = &after[close + 1..];
    }
    Ok(found)
}

/// `path` with its placeholders replaced by `slice`'s dates. Call only on a path that
/// [`placeholders`] accepted.
pub fn expand(path: &str, slice: &Slice) -> String {
    path.replace("{start}", &slice.first.to_string())
        .replace("{end}", &slice.last.to_string())
        .replace("{date}", &slice.first.to_string())
        .replace("{run_date}", &slice.run_date.to_string())
}

/// The characters that start a pattern in an input's path (`landing/**/*.jsonl`), as DataFusion's
/// listing reads them.
const PATTERN_START: [char; 3] = ['*', '?', '['];

/// `written` split into the folder to list (ending with `/`, or `./`) and the pattern its files'
/// paths are matched against; `None` for a path without a pattern.
pub fn split_pattern(written: &str) -> Option<(String, String)> {
    let start = written.find(PATTERN_START)?;
    let folder_end = written[..start].rfind('/').map_or(0, |slash| slash + 1);
    let folder = match &written[..folder_end] {
        "" => "./".to_owned(),
        folder => folder.to_owned(),
    };
    Some((folder, written[folder_end..].to_owned()))
}

/// Whether `pattern` is one bf can match, and if not why.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    glob::Pattern::new(pattern)
        .map(drop)
        .map_err(|e| format!("`{pattern}` is not a pattern bf can match: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_splits_where_its_pattern_starts() {
        use super::split_pattern;
        assert_eq!(split_pattern("landing/**/*.jsonl"), Some(("landing/".into(), "**/*.jsonl".into())));
        assert_eq!(
            split_pattern("../exports/2026-03/part-*.csv"),
            Some(("../exports/2026-03/".into(), "part-*.csv".into()))
        );
        assert_eq!(split_pattern("*.csv"), Some(("./".into(), "*.csv".into())));
        assert_eq!(split_pattern("landing/orders.csv"), None);
        assert!(super::check_pattern("[a-").is_err());
    }

    use super::*;

    #[test]
    fn finds_and_expands_placeholders() {
        let path = "landing/{start}_{end}/{date}-{run_date}.csv";
        assert_eq!(
            placeholders(path).unwrap(),
            [Placeholder::Start, Placeholder::End, Placeholder::Date, Placeholder::RunDate]
        );
        let day = "2026-09-15".parse().unwrap();
        let slice = Slice { index: 15, first: day, last: day, run_date: "2026-09-16".parse().unwrap() };
        assert_eq!(expand(path, &slice), "landing/2026-09-15_2026-09-15/2026-09-15-2026-09-16.csv");
    }

    #[test]
    fn refuses_unknown_and_unbalanced_placeholders() {
        assert!(placeholders("a/{day}.csv").unwrap_err().0.contains("unknown placeholder `{day}`"));
        assert!(placeholders("a/{date.csv").unwrap_err().0.contains("without"));
        assert!(placeholders("a/date}.csv").unwrap_err().0.contains("without"));
        assert_eq!(placeholders("plain.csv").unwrap(), []);
    }
}
