//! Where each key of a plan file is written, so that an issue found after parsing (window ends before
//! it starts, a metric named twice, …) can still point at its line.
//!
//! serde gives spans only for the errors it raises itself. Validation works on the typed plan, so it
//! names the key it is about (`window.end`, `metrics[1].name`) and this index, built from toml's
//! spanned document, turns that name back into a byte range of the file. The reverse lookup names the
//! key under a span, for serde errors whose message does not say which key they are about.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Every key of a plan file with the byte ranges of the key and of its value.
#[derive(Debug, Default)]
pub(crate) struct SpanIndex {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    path: String,
    key: Range<usize>,
    value: Range<usize>,
    /// Whether its value is a table.
    table: bool,
}

impl SpanIndex {
    /// Indexes `text`. A text with syntax errors is indexed as far as the parser recovers, so the
    /// error can still name the key it is in.
    pub(crate) fn new(text: &str) -> SpanIndex {
        let mut index = SpanIndex::default();
        let (root, _errors) = DeTable::parse_recoverable(text);
        index.add_table("", root.get_ref());
        index
    }

    fn add_table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = join(prefix, &key_segment(key.get_ref()));
            self.add_value(path, key.span(), value);
        }
    }

    fn add_value(&mut self, path: String, key: Range<usize>, value: &Spanned<DeValue<'_>>) {
        match value.get_ref() {
            DeValue::Table(table) => self.add_table(&path, table),
            DeValue::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    self.add_value(format!("{path}[{i}]"), item.span(), item);
                }
            }
            _ => {}
        }
        let table = matches!(value.get_ref(), DeValue::Table(_));
        self.entries.push(Entry { path, key, value: value.span(), table });
    }

    /// The span to underline for an issue about `path`: the value where it has one in the file, else the
    /// nearest enclosing key that is written (a missing key is reported at its table).
    pub(crate) fn locate(&self, path: &str) -> Option<Range<usize>> {
        let mut path = path;
        loop {
            if let Some(entry) = self.entries.iter().find(|e| e.path == path) {
                return Some(if entry.value.is_empty() { entry.key.clone() } else { entry.value.clone() });
            }
            path = parent(path)?;
        }
    }

    /// Whether the text has a key a plan starts with at its top level: a file without any is not
    /// a plan with a mistake in it but something else, and is not quoted.
    pub(crate) fn looks_like_plan(&self) -> bool {
        self.entries
            .iter()
            .any(|e| ["reason", "target", "window", "slicing", "source"].contains(&e.path.as_str()))
    }

    /// `text` with the value of every key that looks like a credential (and is not one of the
    /// plan's own keys, such as `target.key`) replaced by `*`, byte for byte, so spans still point
    /// at the same places.
    pub(crate) fn mask_secrets(&self, text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        for entry in &self.entries {
            let name = entry.path.rsplit(['.', '[']).next().unwrap_or_default().trim_matches('"');
            let own = entry.path == "target.key" || entry.path.starts_with("target.key[");
            if own || !looks_secret(name) {
                continue;
            }
            let value = entry.value.start.min(bytes.len())..entry.value.end.min(bytes.len());
            bytes[value].iter_mut().filter(|b| !matches!(b, b'\n' | b'\r')).for_each(|b| *b = b'*');
        }
        // Whole values were replaced byte by byte, line breaks kept: still UTF-8, same lines.
        String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// The keys whose value is still a placeholder `bf init` wrote (`"<…>"`), with the value's span
    /// and text.
    pub(crate) fn placeholders<'t>(&self, text: &'t str) -> Vec<(&str, Range<usize>, &'t str)> {
        self.entries
            .iter()
            .filter_map(|e| {
                let raw = text.get(e.value.clone())?;
                let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
                (!inner.contains('\n') && super::scaffold::is_placeholder(inner))
                    .then(|| (e.path.as_str(), e.value.clone(), inner))
            })
            .collect()
    }

    /// `text` (the text this index was built from, or one blanked by this method) as if the key
    /// under `span` were not written: the key, its value and, for a table, every key in it replaced
    /// by spaces (line breaks kept, so every other span still points at its place), with a table's
    /// header and an inline table's separating comma. `None` when no key is under `span`, or the
    /// text would no longer be TOML.
    pub(crate) fn without_key_at(&self, text: &str, span: &Range<usize>) -> Option<String> {
        let path = self.key_at(span)?;
        let mut bytes = text.as_bytes().to_vec();
        let mut blank = |range: Range<usize>| {
            let range = range.start.min(bytes.len())..range.end.min(bytes.len());
            bytes[range].iter_mut().filter(|b| !matches!(b, b'\n' | b'\r')).for_each(|b| *b = b' ');
        };
        let inside = |e: &&Entry| {
            e.path == path
                || e.path.starts_with(&format!("{path}."))
                || e.path.starts_with(&format!("{path}["))
        };
        for entry in self.entries.iter().filter(inside) {
            let start = entry.key.start.min(entry.value.start);
            let end = entry.key.end.max(entry.value.end);
            let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = text[end..].find('\n').map_or(text.len(), |i| end + i);
            let before = text[line_start..start].trim();
            if before.starts_with('[') {
                // A table's header (`[window]`, `[[metrics]]`): the whole line.
                blank(line_start..line_end);
                continue;
            }
            if entry.path == path && before.ends_with('.') && !before.contains(['=', '{', ',']) {
                // A dotted key (`inputs.orders = …`): from the start of its line.
                blank(line_start..end);
                continue;
            }
            blank(start..end);
            if entry.path == path {
                // An entry of an inline table takes its comma with it.
                let after = text[end..].find(|c: char| !c.is_whitespace()).map(|i| end + i);
                let before = text[..start].rfind(|c: char| !c.is_whitespace());
                match (after, before) {
                    (Some(at), _) if text[at..].starts_with(',') => blank(at..at + 1),
                    (_, Some(at)) if text[at..].starts_with(',') => blank(at..at + 1),
                    _ => {}
                }
            }
        }
        let blanked = String::from_utf8(bytes).ok()?;
        (blanked != text && toml::from_str::<toml::Table>(&blanked).is_ok()).then_some(blanked)
    }

    /// The innermost table whose key or value contains `span`; `None` for the file's top level.
    pub(crate) fn table_at(&self, span: &Range<usize>) -> Option<&str> {
        let contains = |r: &Range<usize>| r.start <= span.start && span.end <= r.end && !r.is_empty();
        self.entries
            .iter()
            .filter(|e| e.table && (contains(&e.key) || contains(&e.value)))
            .max_by_key(|e| e.path.len())
            .map(|e| e.path.as_str())
    }

    /// The innermost key whose key or value contains `span`.
    pub(crate) fn key_at(&self, span: &Range<usize>) -> Option<&str> {
        let contains = |r: &Range<usize>| r.start <= span.start && span.end <= r.end && !r.is_empty();
        self.entries
            .iter()
            .filter(|e| contains(&e.key) || contains(&e.value))
            .max_by_key(|e| e.path.len())
            .map(|e| e.path.as_str())
    }
}

/// Keys are written the way a user would write them in TOML: bare when they can be, quoted otherwise.
pub(crate) fn key_segment(key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { key.to_owned() } else { format!("{key:?}") }
}

fn join(prefix: &str, segment: &str) -> String {
    if prefix.is_empty() { segment.to_owned() } else { format!("{prefix}.{segment}") }
}

fn parent(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

/// A key that names a credential: `secret_access_key`, `sas_token`, `account_key`, `client_credential`,
/// `authorization`, `connection_string` (Azure's holds the account key), `webhook_url` (a Slack
/// webhook's URL is its secret), ….
pub(crate) fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "secret",
        "key",
        "token",
        "password",
        "passwd",
        "sas",
        "credential",
        "auth",
        "connection_string",
        "webhook",
        "cookie",
        "signature",
    ]
    .iter()
    .any(|word| key.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "reason = \"x\"\n[window]\nstart = 2026-03-01\n[[metrics]]\nname = \"a\"\n[[metrics]]\nname = \"b\"\n";

    #[test]
    fn locates_keys_by_path() {
        let index = SpanIndex::new(TEXT);
        assert_eq!(&TEXT[index.locate("window.start").unwrap()], "2026-03-01");
        assert_eq!(&TEXT[index.locate("metrics[1].name").unwrap()], "\"b\"");
        // A key that is not written is reported where its table is.
        assert!(TEXT[index.locate("window.end").unwrap()].contains("window"));
    }

    #[test]
    fn every_credential_like_key_is_masked() {
        for key in [
            "secret_access_key",
            "password",
            "sas_token",
            "client_credential",
            "authorization",
            "connection_string",
            "webhook_url",
            "bearer_token",
        ] {
            let text = format!("[storage]\n{key} = \"hunter2\"\n");
            let masked = SpanIndex::new(&text).mask_secrets(&text);
            assert!(!masked.contains("hunter2"), "{key}: {masked}");
            assert_eq!(masked.len(), text.len(), "{key}: spans still point at the same places");
        }
        let text = "[target]\ntable = \"hunter2\"\n";
        assert_eq!(SpanIndex::new(text).mask_secrets(text), text, "a plain key keeps its value");
    }

    #[test]
    fn names_the_key_under_a_span() {
        let index = SpanIndex::new(TEXT);
        let at = TEXT.find("\"b\"").unwrap();
        assert_eq!(index.key_at(&(at..at + 3)), Some("metrics[1].name"));
    }
}
