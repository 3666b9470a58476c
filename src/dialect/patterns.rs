//! Date and time patterns: Java's, as Spark and Databricks users write them (`'yyyy-MM-dd'`), and
//! chrono's, as DataFusion reads them (`'%Y-%m-%d'`).
//!
//! DataFusion's `date_format`, `to_char`, `to_date` and `to_timestamp` take chrono's patterns, where
//! a field is a `%` and a letter and every other character is printed as it is: handed a Java
//! pattern, `date_format(ts, 'yyyy-MM')` reads the text `yyyy-MM` on every row, and the plan would
//! be rehearsed and applied with it. So a pattern written in the SQL that holds letters and no `%`
//! is refused at validation, with its chrono spelling to write instead ([`java_to_chrono`]).

/// The functions whose arguments after the first are date patterns in DataFusion.
const PATTERNED: [&str; 8] = [
    "date_format",
    "to_char",
    "to_date",
    "to_timestamp",
    "to_timestamp_seconds",
    "to_timestamp_millis",
    "to_timestamp_micros",
    "to_timestamp_nanos",
];

/// Whether `function` (its bare name, lower case) takes date patterns after its first argument.
pub fn takes_patterns(function: &str) -> bool {
    PATTERNED.contains(&function)
}

/// Whether `pattern` is written as Java writes patterns: letters to be read as fields, and no `%`.
/// (In chrono's spelling, letters without `%` are printed as text, which no pattern means.)
pub fn looks_java(pattern: &str) -> bool {
    !pattern.contains('%') && pattern.chars().any(|c| c.is_ascii_alphabetic())
}

/// A Java `DateTimeFormatter` pattern in chrono's spelling, or the letters chrono has no spelling
/// for. `'…'` quotes text (and `''` is a quote), as in Java.
pub fn java_to_chrono(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            i += 1;
            if chars.get(i) == Some(&'\'') {
                out.push('\'');
                i += 1;
                continue;
            }
            while i < chars.len() && chars[i] != '\'' {
                push_text(&mut out, chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            push_text(&mut out, c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        out.push_str(field(c, run).ok_or_else(|| format!("`{}`", c.to_string().repeat(run)))?);
        i += run;
    }
    Ok(out)
}

/// Text in a chrono pattern: itself, with `%` doubled.
fn push_text(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

/// A run of one Java pattern letter as chrono writes that field.
fn field(letter: char, run: usize) -> Option<&'static str> {
    Some(match (letter, run) {
        ('y' | 'u', 2) => "%y",
        ('y' | 'u', _) => "%Y",
        ('M' | 'L', 1) => "%-m",
        ('M' | 'L', 2) => "%m",
        ('M' | 'L', 3) => "%b",
        ('M' | 'L', _) => "%B",
        ('d', 1) => "%-d",
        ('d', 2) => "%d",
        ('D', _) => "%j",
        ('H', 1) => "%-H",
        ('H', 2) => "%H",
        ('h', 1) => "%-I",
        ('h', 2) => "%I",
        ('m', 1) => "%-M",
        ('m', 2) => "%M",
        ('s', 1) => "%-S",
        ('s', 2) => "%S",
        ('S', 3) => "%3f",
        ('S', 6) => "%6f",
        ('S', 9) => "%9f",
        ('a', 1) => "%p",
        ('E', 1..=3) => "%a",
        ('E', _) => "%A",
        ('X' | 'x', 3) | ('Z', 5) => "%:z",
        ('X' | 'x', 1 | 2) | ('Z', 1..=3) => "%z",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_patterns_are_told_from_chronos_and_spelt_in_chronos() {
        for (java, chrono) in [
            ("yyyy-MM", "%Y-%m"),
            ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
            ("dd/MM/yyyy", "%d/%m/%Y"),
            ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "%Y-%m-%dT%H:%M:%S.%3f%:z"),
            ("d MMM yy, EEE", "%-d %b %y, %a"),
            ("h:mm a", "%-I:%M %p"),
        ] {
            assert!(looks_java(java), "{java}");
            assert_eq!(java_to_chrono(java).as_deref(), Ok(chrono), "{java}");
        }
        assert_eq!(java_to_chrono("'100%' yyyy").as_deref(), Ok("100%% %Y"));
        assert!(!looks_java("%Y-%m") && !looks_java("2026-03-01") && !looks_java(""));
        assert_eq!(java_to_chrono("yyyy QQQ"), Err("`QQQ`".to_owned()));
    }
}
