//! How reports look in a terminal. Commands build a report value first and render it last, so the
//! text and `--json` forms cannot say different things. One module per report; every verb and the
//! demo print through them.

pub mod airflow;
pub mod apply;
pub mod freeze;
pub mod gaps;
pub mod history;
pub mod page;
pub mod plan;
pub mod policy;
pub mod rollback;
pub mod slices;
pub mod status;
pub mod svg;
pub mod trend;

/// A report as the one JSON document `--json` prints on stdout. serde_json escapes the C0 controls;
/// the C1 controls and the characters that reorder text are escaped here as well (`\u202e`), so the
/// document holds nothing a terminal acts on, and reads back the same.
pub fn json(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string_pretty(value).expect("reports serialize") + "\n";
    // Outside its strings a JSON document holds only ASCII: each such character is in a string.
    text.chars()
        .map(
            |c| {
                if acts_on_a_terminal(c) && c != '\n' {
                    format!("\\u{:04x}", c as u32)
                } else {
                    c.to_string()
                }
            },
        )
        .collect()
}

/// What bf prints, made inert for a terminal: a reason, a table name or a data value may hold
/// escape sequences (ESC `[2J` clears the screen, OSC 8 makes a link, OSC 52 writes the clipboard)
/// or characters that reorder the line (U+202E) or show nothing (U+200B), and a word may hide a
/// look-alike letter of another script (a Cyrillic `а` in `pаypal`). Each such character is shown
/// as its code (`\u{1b}`); line breaks and tabs stay. Every line bf writes to stdout or stderr
/// passes here once.
pub fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| acts_on_a_terminal(c) && c != '\n' && c != '\t';
    if text.is_ascii() && !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len());
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        shown.push_str(&word_shown(&word));
        word.clear();
        match c {
            c if acts(c) => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    shown.pop();
    match shown == text {
        true => std::borrow::Cow::Borrowed(text),
        false => std::borrow::Cow::Owned(shown),
    }
}

/// A word as [`inert`] shows it: in one that mixes scripts (UTS #39), each letter of another
/// script that looks like a Latin one (its confusable skeleton is ASCII) as its code — `p\u{430}ypal`;
/// a word of one script (`Zürich`, `Москва`), and a letter like no Latin one (`東京Tower`), as written.
fn word_shown(word: &str) -> std::borrow::Cow<'_, str> {
    use unicode_security::MixedScript;
    if word.is_ascii() || word.is_single_script() {
        return std::borrow::Cow::Borrowed(word);
    }
    let looks_latin = |c: char| {
        let mut buffer = [0; 4];
        let skeleton: String = unicode_security::skeleton(c.encode_utf8(&mut buffer)).collect();
        !c.is_ascii() && !skeleton.is_empty() && skeleton.chars().all(|s| s.is_ascii_alphanumeric())
    };
    let shown = word.chars().map(|c| match looks_latin(c) {
        true => format!("\\u{{{:x}}}", c as u32),
        false => c.to_string(),
    });
    std::borrow::Cow::Owned(shown.collect())
}

/// A control character (C0, DEL, C1), one that reorders the text around it, or one that shows
/// nothing (a zero-width space or joiner, a byte-order mark, a soft hyphen): a changed row holding
/// one read the same as the row before it. (The word joiner bf's markdown places after `@` is its
/// own and stays.)
fn acts_on_a_terminal(c: char) -> bool {
    c.is_control() || bf::markdown::reorders(c) || invisible(c)
}

fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}' | '\u{2061}'..='\u{2064}'
    )
}

/// Writes `text` on stdout, made [`inert`]: a report, the outcome of a verb.
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(inert(text).as_bytes())
}

use comfy_table::{ContentArrangement, Table, presets};

/// A table in bf's house style: light borders, columns fitted to the terminal.
pub fn table<T: ToString>(header: impl IntoIterator<Item = T>) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.into_iter().map(|h| h.to_string()));
    table
}

use bf::words::percent;
pub use bf::words::{count, number};

/// A value a report shows, or `—` where there is none (the SUM of no rows).
pub fn value(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), number)
}

/// `412 → 409 (−3, −0.7%)`: a before/after pair with its change; `— → 6,487.85` from nothing.
pub fn change(before: Option<f64>, after: Option<f64>) -> String {
    let values = [before, after, before.zip(after).map(|(b, a)| a - b)];
    change_as(before, after, values.iter().flatten().all(|v| bf::words::is_whole(*v)))
}

/// [`change`], every number whole or every one with two decimals as told: the cells of one
/// column read alike.
pub fn change_as(before: Option<f64>, after: Option<f64>, whole: bool) -> String {
    let shown = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| bf::words::number_as(v, whole));
    match (before, after) {
        (Some(b), Some(a)) if a == b => format!("{} (=)", shown(Some(b))),
        (Some(b), Some(a)) => {
            let sign = if a > b { "+" } else { "" };
            format!(
                "{} → {} ({sign}{}{})",
                shown(Some(b)),
                shown(Some(a)),
                shown(Some(a - b)),
                percent(b, a).map(|p| format!(", {p}")).unwrap_or_default()
            )
        }
        (b, a) => format!("{} → {}", shown(b), shown(a)),
    }
}

/// `+3` / `−3`.
pub fn signed(value: f64) -> String {
    if value > 0.0 { format!("+{}", number(value)) } else { number(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_shows_its_numbers_alike_and_a_column_as_told() {
        assert_eq!(change(Some(6042.0), Some(4872.58)), "6,042.00 → 4,872.58 (−1,169.42, −19.4%)");
        assert_eq!(change(Some(412.0), Some(409.0)), "412 → 409 (−3, −0.7%)");
        assert_eq!(change_as(Some(412.0), Some(409.0), false), "412.00 → 409.00 (−3.00, −0.7%)");
        assert_eq!(change_as(None, Some(6.5), false), "— → 6.50");
    }

    #[test]
    fn nothing_printed_acts_on_a_terminal() {
        assert_eq!(inert("a\tb\nc"), "a\tb\nc");
        assert_eq!(inert("\u{1b}[2Jgone"), "\\u{1b}[2Jgone");
        assert_eq!(inert("\u{1b}]8;;https://x\u{7}link"), "\\u{1b}]8;;https://x\\u{7}link");
        assert_eq!(inert("txt\u{202e}exe.pdf"), "txt\\u{202e}exe.pdf");
        let document = json(&serde_json::json!({"reason": "a\u{1b}b\u{202e}c\u{85}"}));
        assert!(!document.chars().any(|c| acts_on_a_terminal(c) && c != '\n'), "{document}");
        let back: serde_json::Value = serde_json::from_str(&document).unwrap();
        assert_eq!(back["reason"], "a\u{1b}b\u{202e}c\u{85}", "reads back the same");
    }

    #[test]
    fn a_look_alike_letter_in_a_latin_word_is_shown_as_its_code() {
        // A Cyrillic а (U+0430) and о (U+043E) among Latin letters: shown, the rest as written.
        assert_eq!(inert("p\u{430}ypal, C\u{43e}01"), "p\\u{430}ypal, C\\u{43e}01");
        assert_eq!(
            inert("Stra\u{df}e Zürich région Москва 東京Tower"),
            "Stra\u{df}e Zürich région Москва 東京Tower"
        );
        assert!(matches!(inert("Zürich"), std::borrow::Cow::Borrowed(_)));
    }
}
