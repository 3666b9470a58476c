//! How bf's messages word what they count and the days they name, so an error from the engine and
//! a line of a report read alike.

use std::fmt::Display;

/// `1 slice`, `30 slices`, `1,204 rows`.
pub fn count(n: impl TryInto<u64>, noun: &str) -> String {
    let n = n.try_into().unwrap_or(u64::MAX);
    format!("{} {noun}{}", number(n as f64), if n == 1 { "" } else { "s" })
}

/// A number as people read it in a report: thousands separated, two decimals unless whole, and
/// the minus sign typeset (`−80.53`).
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let whole = value.fract() == 0.0 && value.abs() < 1e15;
    let text = if whole { format!("{:.0}", value.abs()) } else { format!("{:.2}", value.abs()) };
    let (integer, decimals) = text.split_once('.').map_or((text.as_str(), None), |(i, d)| (i, Some(d)));
    let mut grouped = String::new();
    for (i, digit) in integer.chars().enumerate() {
        if i > 0 && (integer.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if value < 0.0 { "−" } else { "" };
    match decimals {
        Some(d) => format!("{sign}{grouped}.{d}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `2026-03-15` for one day, `2026-03-01..2026-03-31` for several: a slice is named by all its days.
pub fn days<D: Display + PartialEq>(first: D, last: D) -> String {
    if first == last { first.to_string() } else { format!("{first}..{last}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_days_read_as_words() {
        assert_eq!(count(1u32, "row"), "1 row");
        assert_eq!(count(0u32, "row"), "0 rows");
        assert_eq!(count(30u64, "slice"), "30 slices");
        assert_eq!(count(1204usize, "row"), "1,204 rows");
        assert_eq!(number(-80.53), "−80.53");
        assert_eq!(number(1_210.2), "1,210.20");
        assert_eq!(days("2026-03-15", "2026-03-15"), "2026-03-15");
        assert_eq!(days("2026-03-01", "2026-03-31"), "2026-03-01..2026-03-31");
    }
}
