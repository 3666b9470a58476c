//! How bf's messages word what they count and the days they name, so an error from the engine and
//! a line of a report read alike.

use std::fmt::Display;

/// `1 slice`, `30 slices`, `1,204 rows`.
pub fn count(n: impl TryInto<u64>, noun: &str) -> String {
    let n = n.try_into().unwrap_or(u64::MAX);
    format!("{} {noun}{}", number(n as f64), if n == 1 { "" } else { "s" })
}

/// The candidate closest to what was typed, if it is close enough to be a typo: the measure and
/// threshold clap uses for misspelt flags, so bf's did-you-means match its flags'.
pub fn nearest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::jaro(typed, candidate), candidate))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// A number as people read it in a report: thousands separated, two decimals unless whole, and
/// the minus sign typeset (`−80.53`).
pub fn number(value: f64) -> String {
    number_as(value, is_whole(value))
}

/// Numbers shown side by side (`6,042.00 → 4,872.58`): all with two decimals when any has a
/// fraction, so they line up and read as amounts of one kind.
pub fn numbers(values: &[f64]) -> Vec<String> {
    let whole = values.iter().all(|v| is_whole(*v));
    values.iter().map(|v| number_as(*v, whole)).collect()
}

/// Whether `value` shows without decimals.
pub fn is_whole(value: f64) -> bool {
    value.fract() == 0.0 && value.abs() < 1e15
}

/// [`number`], whole or with two decimals as told.
pub fn number_as(value: f64, whole: bool) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
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

/// `+5.4%`, `−0.7%`, `+9,900.0%`: a relative change, signed and grouped as every other number.
pub fn signed_percent(pct: f64) -> String {
    let tenths = (pct.abs() * 10.0).round();
    let text = format!("{}.{}%", number((tenths / 10.0).trunc()), (tenths % 10.0) as u8);
    if pct < 0.0 { format!("−{text}") } else { format!("+{text}") }
}

/// `after`'s change from `before` in percent of `before` (`−0.7%`); nothing when `before` is 0.
pub fn percent(before: f64, after: f64) -> Option<String> {
    (before != 0.0).then(|| signed_percent((after - before) / before.abs() * 100.0))
}

/// `412 → 409 (−0.7%)`, `31 (unchanged)`, `— → 6,487.85`: a measure before and after, as a summary
/// line or a notice says it.
pub fn before_after(before: Option<f64>, after: Option<f64>) -> String {
    let show = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), number);
    match (before, after) {
        (Some(b), Some(a)) if a == b => format!("{} (unchanged)", number(b)),
        (Some(b), Some(a)) => {
            let [b_shown, a_shown] = <[String; 2]>::try_from(numbers(&[b, a])).expect("two numbers");
            match percent(b, a) {
                Some(p) => format!("{b_shown} → {a_shown} ({p})"),
                None => format!("{b_shown} → {a_shown}"),
            }
        }
        (b, a) => format!("{} → {}", show(b), show(a)),
    }
}

/// `2026-03-15` for one day, `2026-03-01..2026-03-31` for several: a slice is named by all its days.
pub fn days<D: Display + PartialEq>(first: D, last: D) -> String {
    if first == last { first.to_string() } else { format!("{first}..{last}") }
}

/// Table versions as people read a list of them: runs in a row as one range, and how many when
/// there are several — `version 7`, `versions 15–46 (32 commits)`, `versions 3, 5–7 (4 commits)`.
pub fn versions(list: &[u64]) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &version in list {
        match runs.last_mut() {
            Some(run) if run.1 + 1 == version => run.1 = version,
            _ => runs.push((version, version)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .map(|&(first, last)| if first == last { first.to_string() } else { format!("{first}–{last}") })
        .collect();
    match list {
        [] => "no version".to_owned(),
        [one] => format!("version {one}"),
        many => format!("versions {} ({} commits)", shown.join(", "), many.len()),
    }
}

/// Why writing `path` failed, in words: a folder that does not exist is named (the system says
/// only "No such file or directory (os error 2)").
pub fn io_problem(path: &std::path::Path, error: &std::io::Error) -> String {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(folder) if error.kind() == std::io::ErrorKind::NotFound && !folder.exists() => {
            format!("the folder {} does not exist; make it first", folder.display())
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_side_by_side_share_their_decimals() {
        assert_eq!(numbers(&[6042.0, 4872.58]), ["6,042.00", "4,872.58"]);
        assert_eq!(numbers(&[6042.0, 4872.0]), ["6,042", "4,872"]);
        assert_eq!(before_after(Some(6042.0), Some(4872.58)), "6,042.00 → 4,872.58 (−19.4%)");
    }

    #[test]
    fn versions_read_as_runs() {
        assert_eq!(versions(&[7]), "version 7");
        assert_eq!(versions(&(15..=46).collect::<Vec<_>>()), "versions 15–46 (32 commits)");
        assert_eq!(versions(&[3, 5, 6, 7]), "versions 3, 5–7 (4 commits)");
    }

    #[test]
    fn suggests_the_nearest_word_only_when_near() {
        assert_eq!(nearest("windw", ["reason", "target", "window"]), Some("window"));
        assert_eq!(nearest("zzz", ["reason", "target", "window"]), None);
    }

    #[test]
    fn counts_and_days_read_as_words() {
        assert_eq!(count(1u32, "row"), "1 row");
        assert_eq!(count(0u32, "row"), "0 rows");
        assert_eq!(count(30u64, "slice"), "30 slices");
        assert_eq!(count(1204usize, "row"), "1,204 rows");
        assert_eq!(number(-80.53), "−80.53");
        assert_eq!(number(1_210.2), "1,210.20");
        assert_eq!(percent(412.0, 409.0).as_deref(), Some("−0.7%"));
        assert_eq!(percent(2.0, 200.0).as_deref(), Some("+9,900.0%"));
        assert_eq!(percent(0.0, 3.0), None);
        assert_eq!(signed_percent(5.449), "+5.4%");
        assert_eq!(before_after(Some(412.0), Some(409.0)), "412 → 409 (−0.7%)");
        assert_eq!(before_after(Some(31.0), Some(31.0)), "31 (unchanged)");
        assert_eq!(before_after(None, Some(6_487.85)), "— → 6,487.85");
        assert_eq!(before_after(Some(0.0), Some(3.0)), "0 → 3");
        assert_eq!(days("2026-03-15", "2026-03-15"), "2026-03-15");
        assert_eq!(days("2026-03-01", "2026-03-31"), "2026-03-01..2026-03-31");
    }
}
