//! How long a table keeps what a rollback reads, as Delta reads its settings.
//!
//! `delta.deletedFileRetentionDuration` (removed files, before VACUUM may delete them) and
//! `delta.logRetentionDuration` (log entries) are Spark `CALENDAR INTERVAL` strings. Delta Spark
//! reads `'1 hours'`, `'INTERVAL 2 HOURS'` and `'interval 1 day 12 hours'` alike (it prefixes
//! `interval ` where missing and parses case-blind), and VACUUM keeps files that long. A reader that
//! accepts only `interval <n> <unit>` and falls back to the default reads those as 7 and 30 days —
//! and would promise a rollback for weeks on a table whose files go in an hour. So bf parses them
//! as Spark does, and a value Spark would refuse is an error naming the property, never a default.

use std::time::Duration;

use deltalake::DeltaTable;

use crate::delta::store::display_url;
use crate::delta::table::TableError;

/// The default of `delta.deletedFileRetentionDuration`: one week.
pub const DELETED_FILES_DEFAULT: Duration = Duration::from_secs(7 * 86_400);
/// The default of `delta.logRetentionDuration`: 30 days.
pub const LOG_DEFAULT: Duration = Duration::from_secs(30 * 86_400);

/// The table's settings that bound how long a rollback stays possible, each with the days it keeps
/// what a rollback reads: removed files (`delta.deletedFileRetentionDuration`, before VACUUM may
/// delete them) and log entries (`delta.logRetentionDuration`).
/// Each is read as Delta Spark reads it ([`crate::delta::retention`]): a value it would read
/// otherwise than bf's defaults, or refuse, is never taken for the default.
pub fn of(table: &DeltaTable) -> Result<[(&'static str, f64); 2], TableError> {
    let location = display_url(table.table_url());
    let snapshot = table
        .snapshot()
        .map_err(|source| TableError::Snapshot { location: location.clone(), source: Box::new(source) })?;
    let configuration = snapshot.metadata().configuration();
    let days = |property: &'static str, default| {
        let value = configuration.get(property).map(String::as_str);
        read(value, default).map(|kept| (property, kept.as_secs_f64() / 86_400.0)).map_err(|problem| {
            TableError::Retention {
                table: location.clone(),
                property,
                value: value.unwrap_or_default().to_owned(),
                problem,
            }
        })
    };
    Ok([
        days("delta.deletedFileRetentionDuration", DELETED_FILES_DEFAULT)?,
        days("delta.logRetentionDuration", LOG_DEFAULT)?,
    ])
}

/// A retention setting as Delta reads it: `value` (the property, when set) parsed as a Spark
/// interval, else `default`. The error says why the value is not one.
pub fn read(value: Option<&str>, default: Duration) -> Result<Duration, String> {
    match value {
        None => Ok(default),
        Some(value) => interval(value),
    }
}

/// A Spark interval string without months: `[interval] <n> <unit> [<n> <unit> …]`, units from
/// microseconds to weeks, singular or plural, any case; a fraction only of seconds.
pub fn interval(text: &str) -> Result<Duration, String> {
    let lower = text.trim().to_ascii_lowercase();
    let body = lower.strip_prefix("interval").map_or(lower.as_str(), str::trim_start);
    let tokens: Vec<&str> = body.split_whitespace().collect();
    if tokens.is_empty() || !tokens.len().is_multiple_of(2) {
        return Err("it is not an interval: a number and a unit, as in '7 days' or 'interval 1 hour'".into());
    }
    let mut total = Duration::ZERO;
    for pair in tokens.chunks(2) {
        let (number, unit) = (pair[0], pair[1].trim_end_matches('s'));
        let seconds: f64 = match unit {
            "week" => 7.0 * 86_400.0,
            "day" => 86_400.0,
            "hour" => 3_600.0,
            "minute" => 60.0,
            "second" => 1.0,
            "millisecond" => 1e-3,
            "microsecond" => 1e-6,
            "month" | "year" => {
                return Err(
                    "Delta refuses months and years in a retention interval (their length varies)".into()
                );
            }
            other => return Err(format!("`{other}` is not a unit of an interval")),
        };
        let fraction_allowed = unit == "second";
        let n: f64 = match number.parse::<u64>() {
            Ok(n) => n as f64,
            Err(_) if fraction_allowed => {
                number.parse().map_err(|_| format!("`{number}` is not a number"))?
            }
            Err(_) => return Err(format!("`{number}` is not a whole number of {unit}s")),
        };
        if n < 0.0 {
            return Err("a retention interval cannot be negative".into());
        }
        total += Duration::from_secs_f64(n * seconds);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_spark_reads_them() {
        let hours = |h: u64| Duration::from_secs(h * 3_600);
        for (text, kept) in [
            ("interval 7 days", hours(168)),
            ("1 hours", hours(1)),
            ("INTERVAL 2 HOURS", hours(2)),
            ("interval 1 day 12 hours", hours(36)),
            ("  2 Weeks ", hours(336)),
            ("interval 90 minutes", Duration::from_secs(5_400)),
            ("1.5 seconds", Duration::from_millis(1_500)),
        ] {
            assert_eq!(interval(text), Ok(kept), "{text}");
        }
        for bad in ["", "7", "interval 1 month", "1 fortnight", "1.5 days", "-1 days", "days 7"] {
            assert!(interval(bad).is_err(), "{bad}");
        }
        assert_eq!(read(None, LOG_DEFAULT), Ok(LOG_DEFAULT));
    }
}
