//! Text from a plan or from data, made inert in markdown: the one escaper of every string that
//! reaches a pull-request comment or a notice.
//!
//! A plan's reason, a table's name, a check's detail, a breakdown value, a sample row — any of them
//! may be written by whoever opened the pull request or loaded the data, and the comment is posted
//! by a bot the reviewers trust. So nothing such a string holds may become markup: no raw HTML or
//! HTML comment (which could close bf's own `<details>` or hide the rest of the comment), no link,
//! image or autolink (a remote image is a request to someone else's server from every reader), no
//! @mention or issue reference (a ping sent in bf's name), no emphasis, and no `|`, backtick or line
//! break that would end a table cell, a code span or a code block early. Each string is escaped
//! once, where it is placed, by one of these functions; bf's own words and numbers are not.
//!
//! It lives in the library, not the command line's renderers, because notices are markdown too,
//! and below every stage, because the apply writes the reason into the table comment, which
//! catalogs (Unity Catalog, Databricks' explorer) render as markdown.

/// Placed after `@` and after a `#` that starts a number: GitHub finds mentions and issue
/// references in the rendered text, where a backslash escape is gone; this invisible character
/// (U+2060 WORD JOINER) keeps `@octocat` from being a name it can ping.
pub const JOINER: char = '\u{2060}';

/// `text` inside a double-quoted string of a Mermaid diagram (a chart's title, an axis label),
/// on one line, shown as written: the quote, `#` (which starts Mermaid's entity codes), the
/// backtick (which would end the code fence GitHub reads the diagram from) and the characters of
/// markup written as Mermaid's entity codes (`#quot;`, `#35;`), control characters as spaces.
pub fn mermaid(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in one_line(text).trim().chars() {
        match c {
            '#' => out.push_str("#35;"),
            '"' => out.push_str("#quot;"),
            '`' => out.push_str("#96;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as markdown on one line, shown as written: safe in a paragraph, a list item and a table
/// cell. Line breaks and control characters become spaces and the ends are trimmed (markdown
/// would drop those spaces anyway).
pub fn text(text: &str) -> String {
    let flat = one_line(text);
    let chars: Vec<char> = flat.trim().chars().collect();
    let mut out = String::with_capacity(chars.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        let before = |n: usize| i.checked_sub(n).map(|j| chars[j]);
        let leading_number = i > 0 && chars[..i].iter().all(char::is_ascii_digit);
        let escape = match c {
            // Markup anywhere in a line: HTML, entities, links and images, emphasis,
            // strikethrough, code spans, table cells, escapes.
            '\\' | '`' | '*' | '~' | '[' | ']' | '<' | '>' | '&' | '|' => true,
            // An underscore inside a word (`orders_silver`) can neither open nor close emphasis
            // (CommonMark's flanking rules), and a table comment read as plain text keeps it bare.
            '_' => !inside_word(&chars, i),
            // A line's first character can start a block inside a list item: a heading, a quote,
            // a list, a rule, a fence. Every punctuation mark is escaped there, and the mark after
            // a leading number (`1.` starts a list).
            _ if i == 0 => c.is_ascii_punctuation(),
            '.' | ')' if leading_number => true,
            // Bare autolinks (`https://…`, `www.…`) that GitHub makes of text.
            '/' => matches!(before(1), Some(':' | '/')),
            '.' => i >= 3 && chars[i - 3..i].iter().collect::<String>().eq_ignore_ascii_case("www"),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
        let reference = c == '@' || (c == '#' && chars.get(i + 1).is_some_and(char::is_ascii_digit));
        if reference {
            out.push(JOINER);
        }
    }
    out
}

/// Whether the run of underscores holding `chars[at]` has a letter or digit on both sides.
fn inside_word(chars: &[char], at: usize) -> bool {
    let left = chars[..at].iter().rev().find(|c| **c != '_');
    let right = chars[at..].iter().find(|c| **c != '_');
    left.is_some_and(|c| c.is_alphanumeric()) && right.is_some_and(|c| c.is_alphanumeric())
}

/// `text` as inline code where a code span can hold it (no `|`, which ends a table cell even
/// inside one, and no line break); as [`text`] otherwise. A code span shows its content as
/// written and GitHub finds no mention in it.
pub fn code(text: &str) -> String {
    let plain = text.is_empty()
        || text.contains('|')
        || text.chars().any(|c| c.is_control() || reorders(c))
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if plain {
        return self::text(text);
    }
    let ticks = "`".repeat(longest_run(text, '`') + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

/// A value on one line of a code block: its own line breaks written as `\n` and `\r`, so it
/// cannot start a line of its own (a diff block colours lines by their first character) or close
/// the block.
pub fn code_line(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\r' => "\\r".to_owned(),
            '\n' => "\\n".to_owned(),
            // Shown by their code: an escape sequence or a reordering is nothing a reader can see.
            c if c.is_control() || reorders(c) => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// A fence for a code block holding `body`: longer than any run of backticks in it.
pub fn fence(body: &str) -> String {
    "`".repeat(longest_run(body, '`').max(2) + 1)
}

/// What a reader sees of `text` placed with [`text`] or [`code`], the invisible joiners aside:
/// the test of the escaper, and what a reviewer reads back.
pub fn shown(text: &str) -> String {
    one_line(text).trim().to_owned()
}

/// `text` on one line: line breaks and every other control character as spaces (for plain-text
/// forms such as a chat notice, where a line break would write a line of its own), and the
/// characters that reorder the text around them (U+202E shows `exe.txt` as `txt.exe`) as well.
pub fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() || reorders(c) { ' ' } else { c }).collect()
}

/// Unicode's bidirectional controls: embeddings, overrides and isolates, and the marks.
pub fn reorders(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    text.split(|x| x != c).map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_underscore_inside_a_word_stays_bare_and_one_that_could_emphasise_is_escaped() {
        assert_eq!(text("orders_silver and fx__rates"), "orders_silver and fx__rates");
        assert_eq!(text("_hidden_ or __bold__ or snake_"), "\\_hidden\\_ or \\_\\_bold\\_\\_ or snake\\_");
        assert_eq!(text("a_*b*_c"), "a\\_\\*b\\*\\_c");
    }

    #[test]
    fn a_mermaid_string_holds_no_quote_entity_tag_or_fence_of_its_own() {
        assert_eq!(mermaid("revenue"), "revenue");
        // A quote would end the string, `#word;` is read as an entity, `<` drops text after it in
        // Mermaid's sanitizer, a backtick run could end GitHub's fence, a line break the line.
        assert_eq!(
            mermaid("say \"hi\" #1; <script>x</script> a&b ```\nnext"),
            "say #quot;hi#quot; #35;1; #lt;script#gt;x#lt;/script#gt; a#amp;b #96;#96;#96; next"
        );
        assert_eq!(mermaid("#quot;"), "#35;quot;", "an entity code as written stays text");
    }
}
