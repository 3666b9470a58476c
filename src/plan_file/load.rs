//! Reading a plan file and turning everything wrong with it into diagnostics that point at a line.

use std::ops::Range;
use std::path::{Path, PathBuf};

use annotate_snippets::{Level, Renderer, Snippet};
use url::Url;

use super::spans::{SpanIndex, looks_secret};
use super::{Location, PlanFile, quoted};
use crate::plan_file::confine::Scope;

/// A plan is a few dozen lines; anything much bigger is not a plan, and refusing it early keeps a
/// mistaken path (a CSV, a log) from being parsed at length.
const MAX_PLAN_BYTES: u64 = 1024 * 1024;

/// A plan file that parsed and passed validation, with the text it came from (the saved plan records
/// the text so that `bf apply` can show what changed since it was planned).
#[derive(Debug, Clone)]
pub struct PlanDocument {
    pub path: PathBuf,
    pub text: String,
    pub plan: PlanFile,
}

impl PlanDocument {
    /// The rehearsal's location: the plan's `[rehearsal] table`, or `<table>__rehearsal` beside the
    /// target, in the same folder or bucket (a server-side copy needs both in one bucket).
    pub fn rehearsal_url(&self, target: &Url) -> Result<Url, crate::delta::store::OpenError> {
        if let Some(written) = &self.plan.rehearsal.table {
            return crate::delta::store::table_url(&self.resolve(written));
        }
        let name = target.path_segments().and_then(|mut s| s.rfind(|s| !s.is_empty())).map(|encoded| {
            // Decoded, as `push` encodes it again: `orders by région`, not `orders%20by%20r%C3%A9gion`.
            percent_encoding::percent_decode_str(encoded).decode_utf8_lossy().into_owned()
        });
        let Some(name) = name else {
            return Err(crate::delta::store::OpenError::Missing {
                location: format!(
                    "{target} is a bucket's root: set [rehearsal] table to a folder for the rehearsal"
                ),
            });
        };
        let mut url = target.clone();
        url.path_segments_mut()
            .expect("a table URL has a path")
            .pop_if_empty()
            .pop()
            .push(&format!("{name}__rehearsal"))
            .push("");
        Ok(url)
    }

    /// The line of this file that line `line` (from 1) of the value of `key` (a SQL text, say
    /// `source.query`) is on: a multi-line string starts on the line after its opening quotes.
    pub fn line_in(&self, key: &str, line: usize) -> Option<usize> {
        line_in(&self.text, key, line)
    }

    /// The folder plan paths are relative to.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    pub fn resolve(&self, written: &str) -> Location {
        Location::resolve(self.dir(), written)
    }

    /// The stores the plan's locations are in, reached with its `[storage]` settings.
    pub fn stores(&self) -> crate::delta::store::Stores {
        crate::delta::store::Stores::new(&self.plan.storage)
    }

    /// This file refused for `issues` found beyond it (its downstream plans), each at its key's line.
    pub fn invalid(&self, issues: Vec<super::Issue>) -> PlanFileError {
        let index = SpanIndex::new(&self.text);
        PlanFileError::Invalid {
            path: self.path.clone(),
            text: self.text.clone(),
            diagnostics: issues.into_iter().map(|issue| issue.diagnostic(&index)).collect(),
            plan: Some(Box::new(self.plan.clone())),
        }
    }
}

/// For a local path a plan in `plan_dir` names (`written`) that is not there from the plan's
/// folder but is from the folder bf runs in — people write paths from where they stand, and a
/// piped `bf init` writes them so — the path as the plan should write it, as "did you mean …?".
/// A path with a `{date}` is judged by its folder.
pub fn written_from_here(plan_dir: &Path, written: &str) -> Option<String> {
    let folder = match written.find('{') {
        Some(at) => &written[..written[..at].rfind('/')?],
        None => written,
    };
    let here = std::env::current_dir().ok()?;
    let (Location::Path(from_plan), Location::Path(from_here)) =
        (Location::resolve(plan_dir, folder), Location::resolve(&here, folder))
    else {
        return None;
    };
    if from_plan.exists() || !from_here.exists() {
        return None;
    }
    let meant = Location::written_from(&here.join(plan_dir), &here, written);
    Some(format!(
        "did you mean `{meant}`? A plan's paths are relative to its own folder ({}), not to the folder bf runs in",
        match plan_dir.as_os_str().is_empty() {
            true => ".".to_owned(),
            false => plan_dir.display().to_string(),
        }
    ))
}

impl super::Issue {
    fn diagnostic(self, index: &SpanIndex) -> Diagnostic {
        Diagnostic {
            span: index.locate(&self.key),
            key: Some(self.key),
            message: self.message,
            help: self.help,
        }
    }
}

/// Why a plan file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("cannot read plan file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}", render(path, text, diagnostics))]
    Invalid {
        path: PathBuf,
        text: String,
        diagnostics: Vec<Diagnostic>,
        /// The plan, when the file read as one and only its rules are broken: what more is known
        /// about it (its table's columns) is said together with them.
        plan: Option<Box<PlanFile>>,
    },
    /// Outside what the operator lets a plan reach; nothing of it was read.
    #[error("{0}")]
    Outside(crate::plan_file::confine::PolicyError),
    /// Not TOML with a plan's keys: perhaps a credentials file named as a plan, so none of its
    /// text is shown, only where the parser stopped.
    #[error(
        "{}:{line}:{column}: error: not a bf plan file: it does not parse, and it holds none of the keys a plan \
         starts with (`reason`, `target`, `window`, `slicing`, `source`); its content is not shown",
        path.display()
    )]
    NotAPlan { path: PathBuf, line: usize, column: usize },
}

/// One thing wrong with a plan file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// The key it is about, as written in TOML (`window.end`, `metrics[1].name`), when known.
    pub key: Option<String>,
    pub message: String,
    pub help: Option<String>,
    /// Byte range in the file to underline.
    pub span: Option<Range<usize>>,
}

impl PlanFileError {
    /// The plan of a file that read as one but breaks its rules, and the file's path.
    pub fn broken_plan(&self) -> Option<(&Path, &PlanFile)> {
        match self {
            PlanFileError::Invalid { path, plan: Some(plan), .. } => Some((path, plan)),
            _ => None,
        }
    }

    /// This error with `issues` found beyond the file (its table's columns) said too, each at its
    /// key's line.
    pub fn with(mut self, issues: Vec<super::Issue>) -> PlanFileError {
        if let PlanFileError::Invalid { text, diagnostics, .. } = &mut self {
            let index = SpanIndex::new(text);
            diagnostics.extend(issues.into_iter().map(|issue| issue.diagnostic(&index)));
        }
        self
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            PlanFileError::Read { .. } | PlanFileError::Outside(_) | PlanFileError::NotAPlan { .. } => &[],
            PlanFileError::Invalid { diagnostics, .. } => diagnostics,
        }
    }
}

/// Reads and checks the plan file at `path`, held to `scope`: a file outside its root is refused
/// unread, and a plan naming a location outside it is refused at that location's line.
pub fn load(path: &Path, scope: &Scope) -> Result<PlanDocument, PlanFileError> {
    scope.check_plan_file(path).map_err(PlanFileError::Outside)?;
    let read_error = |source| PlanFileError::Read { path: path.to_owned(), source };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_PLAN_BYTES {
        return Err(read_error(std::io::Error::other(format!(
            "the file is {size} bytes; a plan file is at most {MAX_PLAN_BYTES}"
        ))));
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    parse_within(path, text, Some(scope))
}

/// Parses and checks a plan's text; `path` names it in messages and anchors its relative paths.
pub fn parse(path: &Path, text: String) -> Result<PlanDocument, PlanFileError> {
    parse_within(path, text, None)
}

/// [`parse`], and with a scope the locations checked against it, all issues listed together.
pub fn parse_within(path: &Path, text: String, scope: Option<&Scope>) -> Result<PlanDocument, PlanFileError> {
    let index = SpanIndex::new(&text);
    let invalid = |diagnostics| PlanFileError::Invalid {
        path: path.to_owned(),
        text: text.clone(),
        diagnostics,
        plan: None,
    };
    // What `bf init` left for the author: every one at its line, before anything else is said.
    let mut found = index.placeholders(&text);
    found.sort_by_key(|(_, span, _)| span.start);
    let placeholders: Vec<Diagnostic> = found
        .into_iter()
        .map(|(key, span, placeholder)| Diagnostic {
            key: Some(key.to_owned()),
            message: format!("`{key}` is still the placeholder `bf init` or `bf gaps` wrote"),
            help: Some(format!("replace it with {}", &placeholder[1..placeholder.len() - 1])),
            span: Some(span),
        })
        .collect();
    if !placeholders.is_empty() {
        return Err(invalid(placeholders));
    }
    let mut plan: PlanFile = match toml::from_str(&text) {
        Ok(plan) => plan,
        // An empty file is an empty plan; anything else without a plan's keys is not one.
        Err(error) if !index.looks_like_plan() && !text.trim().is_empty() => {
            let at = error.span().map_or(0, |s| s.start.min(text.len()));
            let before = &text[..at];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            return Err(PlanFileError::NotAPlan { path: path.to_owned(), line, column });
        }
        Err(error) => return Err(invalid(every_toml_problem(&text, error, &index))),
    };
    read_older_spellings(&mut plan);
    let mut issues = plan.validate();
    let document = PlanDocument { path: path.to_owned(), text, plan };
    if let Some(scope) = scope {
        issues.extend(scope.check(&document));
    }
    if !issues.is_empty() {
        return Err(document.invalid(issues));
    }
    Ok(document)
}

/// Keys an older bf read, moved to the keys that replaced them, so each rule reads one key:
/// `[source] outside_window = "skip"` is `[guards] allow_rows_outside_window = true`.
fn read_older_spellings(plan: &mut PlanFile) {
    if plan.source.outside_window == crate::plan_file::OutsideRows::Skip {
        plan.guards.allow_rows_outside_window = true;
    }
}

/// [`PlanDocument::line_in`], of a plan file's `text`.
fn line_in(text: &str, key: &str, line: usize) -> Option<usize> {
    let value = SpanIndex::new(text).locate(key)?;
    let rest = text.get(value.start..)?;
    let opening = ["\"\"\"", "'''"].iter().find(|q| rest.starts_with(**q)).map_or(0, |q| q.len());
    // TOML drops a newline right after the opening quotes of a multi-line string.
    let first = value.start + opening + usize::from(opening > 0 && rest[opening..].starts_with('\n'));
    Some(text[..first].matches('\n').count() + line)
}

/// The most problems reading a plan file reports at once.
const MOST_PROBLEMS: usize = 32;

/// Every problem reading the file finds, not only the first serde stops at. After each, the file is
/// read again as if it were fixed: a misspelt key written as the key it was meant to be (its
/// did-you-mean), anything else blanked out ([`SpanIndex::without_key_at`]), until it reads or a
/// problem is one this cannot get past (a syntax error). A key found missing because it was blanked
/// is not said again; its table is blanked in turn.
fn every_toml_problem(text: &str, first: toml::de::Error, index: &SpanIndex) -> Vec<Diagnostic> {
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut blanked: Vec<String> = Vec::new();
    // Each rewrite of a key, where the text then was, and how many bytes longer it made it.
    let mut edits: Vec<(usize, isize)> = Vec::new();
    let original = |span: std::ops::Range<usize>, edits: &[(usize, isize)]| {
        edits.iter().rev().fold(span, |span, &(at, longer)| match span.start > at {
            true => span.start.saturating_add_signed(-longer)..span.end.saturating_add_signed(-longer),
            false => span,
        })
    };
    // Said when every problem found turns out to be a consequence of another.
    let fallback = from_toml_error(&first, index);
    let mut error = first;
    let mut current = text.to_owned();
    while problems.len() < MOST_PROBLEMS {
        let here = SpanIndex::new(&current);
        let span = error.span();
        let missing = error.message().starts_with("missing field");
        let table = span.as_ref().and_then(|s| here.table_at(s)).map(str::to_owned);
        let missed = backticked(error.message()).first().map(|k| spans_join(table.as_deref(), k));
        let consequence = missing && missed.as_ref().is_some_and(|m| blanked.contains(m));
        let at = span.clone().map(|s| original(s, &edits));
        let problem = from_toml_error_at(&error, at.clone(), index);
        if problems.iter().any(|p| p.span == problem.span && p.message == problem.message) {
            break;
        }
        let meant: Option<String> = problem
            .message
            .contains("did you mean")
            .then(|| backticked(&problem.message).pop().map(str::to_owned))
            .flatten();
        if !consequence {
            problems.push(problem);
        }
        let Some(span) = span else { break };
        let next = match meant {
            Some(meant) if current.get(span.clone()).is_some_and(|k| !k.contains(['"', '\''])) => {
                edits.push((span.start, meant.len() as isize - span.len() as isize));
                Some(format!("{}{meant}{}", &current[..span.start], &current[span.end..]))
            }
            // A key missing at the top level: nothing left to blank.
            _ if missing && table.is_none() => None,
            _ => {
                let key = if missing { table.clone() } else { here.key_at(&span).map(str::to_owned) };
                blanked.extend(key);
                here.without_key_at(&current, &span)
            }
        };
        let Some(next) = next else { break };
        current = next;
        match toml::from_str::<PlanFile>(&current) {
            Ok(_) => break,
            Err(again) => error = again,
        }
    }
    if problems.is_empty() {
        problems.push(fallback);
    }
    problems
}

/// `table.key`, or `key` at the top level.
fn spans_join(table: Option<&str>, key: &str) -> String {
    table.map_or_else(|| key.to_owned(), |t| format!("{t}.{key}"))
}

/// serde's messages are worded for programmers ("unknown field"); plan authors write keys, and a
/// misspelt key deserves the key it was meant to be.
fn from_toml_error(error: &toml::de::Error, index: &SpanIndex) -> Diagnostic {
    from_toml_error_at(error, error.span(), index)
}

/// [`from_toml_error`] for an error whose span in the file is `span`.
fn from_toml_error_at(
    error: &toml::de::Error,
    span: Option<std::ops::Range<usize>>,
    index: &SpanIndex,
) -> Diagnostic {
    let message = error.message().trim_end().to_owned();
    let key = span.as_ref().and_then(|s| index.key_at(s)).map(str::to_owned);
    let ticked = backticked(&message);
    if let (true, Some((unknown, expected))) = (message.starts_with("unknown field"), ticked.split_first()) {
        let table = key.as_deref().and_then(|k| k.rfind('.').map(|cut| &k[..cut]));
        if table == Some("storage") && looks_secret(unknown) {
            return Diagnostic {
                key,
                message: format!("`{unknown}` looks like a secret, and a plan holds none: it is reviewed, saved and shown"),
                help: Some(
                    "credentials come from where each cloud keeps them: the environment (AWS_ACCESS_KEY_ID, \
                     AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_KEY, \
                     GOOGLE_APPLICATION_CREDENTIALS), an AWS profile or SSO, `az login`, a managed identity, \
                     or Google's application default credentials"
                        .to_owned(),
                ),
                span,
            };
        }
        let place = table.map(|t| format!(" in [{t}]")).unwrap_or_default();
        let message = match crate::words::nearest(unknown, expected.iter().copied()) {
            Some(meant) => format!("unknown key `{unknown}`{place} — did you mean `{meant}`?"),
            None => format!("unknown key `{unknown}`{place}"),
        };
        let help = (!expected.is_empty()).then(|| format!("the keys here are {}", quoted(expected)));
        return Diagnostic { key, message, help, span };
    }
    if let (true, Some((unknown, expected))) = (message.starts_with("unknown variant"), ticked.split_first())
    {
        let suggestion = crate::words::nearest(unknown, expected.iter().copied())
            .map(|m| format!(" — did you mean `{m}`?"))
            .unwrap_or_default();
        let message = format!("`{unknown}` is not allowed here{suggestion}");
        let help = Some(format!("write one of {}", quoted(expected)));
        return Diagnostic { key, message, help, span };
    }
    if let (true, Some(missing)) = (message.starts_with("missing field"), ticked.first()) {
        let table = span.as_ref().and_then(|s| index.table_at(s));
        let within = table.map(|k| format!(" in [{k}]")).unwrap_or_default();
        // The keys whose values are a short list say them: nobody should have to look them up.
        let help = match *missing {
            "format" => {
                Some("write one of \"csv\", \"parquet\", \"json\", \"delta\": format = \"csv\"".to_owned())
            }
            "every" => Some("write one of \"day\", \"week\", \"month\": every = \"day\"".to_owned()),
            _ => None,
        };
        return Diagnostic { key, message: format!("missing key `{missing}`{within}"), help, span };
    }
    // One value where a list is expected (`key = "payment_id"`): the list it would be.
    let help = match (message.strip_prefix("invalid type: string "), message.ends_with("expected a sequence"))
    {
        (Some(rest), true) => {
            let name = key.as_deref().and_then(|k| k.rsplit('.').next()).unwrap_or("key");
            // The value is shown again only outside the tables that reach stores and receivers,
            // where a credential could be written by mistake.
            let sensitive =
                key.as_deref().is_some_and(|k| k.starts_with("storage") || k.starts_with("notify"));
            let value = rest.split(", expected").next().filter(|_| !sensitive || !looks_secret(name));
            value.map(|value| format!("write it as an array: {name} = [{value}]"))
        }
        _ => None,
    };
    let message = plain_words(&message);
    let message = match &key {
        Some(key) => format!("`{key}`: {message}"),
        None => message,
    };
    Diagnostic { key, message, help, span }
}

/// serde names Rust types in its messages; plan authors write TOML.
fn plain_words(message: &str) -> String {
    [
        (" as i128,", ","),
        ("expected u32", "expected a whole number from 0 to 4294967295"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
    ]
    .iter()
    .fold(message.to_owned(), |text, (rust, toml)| text.replace(rust, toml))
}

fn backticked(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

/// Renders diagnostics the way rustc does: message, `--> file:line:column`, the line, a caret.
fn render(path: &Path, text: &str, diagnostics: &[Diagnostic]) -> String {
    let origin = path.display().to_string();
    // The lines quoted show no value of a key that looks like a credential: a refused secret is
    // named, never repeated (stderr is posted to the pull request).
    let masked = SpanIndex::new(text).mask_secrets(text);
    let text = masked.as_str();
    let renderer = Renderer::plain();
    let mut out = Vec::new();
    for diagnostic in diagnostics {
        let mut message = Level::Error.title(&diagnostic.message);
        let label = diagnostic.key.as_deref().unwrap_or("");
        match &diagnostic.span {
            Some(span) => {
                let span = clamp(span, text);
                message = message.snippet(
                    Snippet::source(text)
                        .origin(&origin)
                        .fold(true)
                        .annotation(Level::Error.span(span).label(label)),
                );
            }
            None => message = message.footer(Level::Note.title(&origin)),
        }
        if let Some(help) = &diagnostic.help {
            message = message.footer(Level::Help.title(help));
        }
        out.push(renderer.render(message).to_string());
    }
    let count = diagnostics.len();
    out.push(format!("{origin}: {count} problem{} found", if count == 1 { "" } else { "s" }));
    out.join("\n\n")
}

/// An empty span or one at the very end of the file has nothing to underline; widen it to a character.
fn clamp(span: &Range<usize>, text: &str) -> Range<usize> {
    let end = text.len();
    let start = span.start.min(end);
    let stop = span.end.clamp(start, end);
    if start < stop {
        return start..stop;
    }
    match text[..start].char_indices().next_back() {
        Some((i, _)) if start == end => i..start,
        _ => start..(start + text[start..].chars().next().map_or(0, char::len_utf8)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_the_query_is_found_in_the_file() {
        let text = |query: &str| format!("reason = \"r\"\n\n[source]\n{query}\n");
        // The query starts on the file's fourth line, or the fifth after `\"\"\"` and its newline.
        assert_eq!(line_in(&text("query = \"SELECT 1\""), "source.query", 1), Some(4));
        assert_eq!(line_in(&text("query = \"\"\"\nSELECT a,\n  b / 2\n\"\"\""), "source.query", 2), Some(6));
        assert_eq!(line_in(&text("query = '''SELECT a,\n  b / 2'''"), "source.query", 2), Some(5));
    }

    #[test]
    fn clamps_spans_inside_the_text() {
        assert_eq!(clamp(&(3..3), "abc"), 2..3);
        assert_eq!(clamp(&(0..0), "abc"), 0..1);
        assert_eq!(clamp(&(1..9), "abc"), 1..3);
    }
}
