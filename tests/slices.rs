//! Windows and slices: properties over random windows, and `bf slices` as a user sees it.

use std::collections::BTreeSet;

use bf::window::{Cadence, RunOffset, Slice, Window};
use chrono::{Datelike, Days, NaiveDate};
use proptest::prelude::*;

use crate::common::{VALID_PLAN, bf, write_plan};

/// The period a day belongs to under a cadence, computed straight from the calendar: the oracle the
/// slicer is checked against. Slices must be exactly the runs of days sharing a period.
fn period(day: NaiveDate, cadence: Cadence, window_start: NaiveDate) -> (i64, i64) {
    match cadence {
        Cadence::Days(n) => (0, (day - window_start).num_days() / i64::from(n)),
        Cadence::Week => {
            let week = day.iso_week();
            (i64::from(week.year()), i64::from(week.week()))
        }
        Cadence::Month => (i64::from(day.year()), i64::from(day.month())),
        Cadence::Quarter => (i64::from(day.year()), i64::from(day.month0() / 3)),
        Cadence::Year => (i64::from(day.year()), 0),
    }
}

fn cadence() -> impl Strategy<Value = Cadence> {
    prop_oneof![
        (1u32..=45).prop_map(Cadence::Days),
        Just(Cadence::Week),
        Just(Cadence::Month),
        Just(Cadence::Quarter),
        Just(Cadence::Year),
    ]
}

/// Windows from 1896 to 2104 (1900 and 2100 are not leap years, 2000 is), up to ~3 years long,
/// with a bias towards month ends and 29 February.
fn window() -> impl Strategy<Value = Window> {
    let start = prop_oneof![
        (0u64..76_000).prop_map(|d| NaiveDate::from_ymd_opt(1896, 1, 1).unwrap() + Days::new(d)),
        (1896i32..2104, 1u32..=12).prop_map(|(y, m)| {
            let next = if m == 12 {
                NaiveDate::from_ymd_opt(y + 1, 1, 1)
            } else {
                NaiveDate::from_ymd_opt(y, m + 1, 1)
            };
            next.unwrap().pred_opt().unwrap()
        }),
        (0i32..52).prop_map(|k| NaiveDate::from_ymd_opt(1896 + 4 * k, 2, 29)
            .unwrap_or(NaiveDate::from_ymd_opt(1900, 2, 28).unwrap())),
    ];
    (start, 0u64..1_200).prop_map(|(start, len)| Window { start, end: start + Days::new(len) })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn slices_are_contiguous_disjoint_and_cover_the_window(window in window(), cadence in cadence(), offset in -40i64..40) {
        let slices: Vec<Slice> = window.slices(cadence, RunOffset(offset)).collect();
        prop_assert!(!slices.is_empty());
        prop_assert_eq!(slices[0].first, window.start);
        prop_assert_eq!(slices.last().unwrap().last, window.end);
        for (i, slice) in slices.iter().enumerate() {
            prop_assert_eq!(slice.index, i + 1);
            prop_assert!(slice.first <= slice.last);
            prop_assert_eq!(slice.run_date, slice.first + chrono::Duration::days(offset));
            // Every day of a slice is in the same period, and it is a different period from the next slice's.
            let key = period(slice.first, cadence, window.start);
            prop_assert_eq!(period(slice.last, cadence, window.start), key);
            if let Some(next) = slices.get(i + 1) {
                prop_assert_eq!(next.first, slice.last.succ_opt().unwrap(), "contiguous, no overlap");
                prop_assert_ne!(period(next.first, cadence, window.start), key);
            }
        }
        // The count equals the number of distinct periods the window's days fall in.
        let periods: BTreeSet<(i64, i64)> = window.start.iter_days().take_while(|d| *d <= window.end)
            .map(|d| period(d, cadence, window.start)).collect();
        prop_assert_eq!(slices.len(), periods.len());
    }
}

#[test]
fn slices_prints_the_issue_example_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID_PLAN
        .replace("start = 2026-03-01", "start = 2026-03-10")
        .replace("end = 2026-03-31", "end = 2026-05-20");
    let plan = write_plan(dir.path(), "spring.toml", &text);
    let output = bf().args(["slices", "--json"]).arg(&plan).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let spans: Vec<(String, String)> = report["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["first"].as_str().unwrap().to_owned(), s["last"].as_str().unwrap().to_owned()))
        .collect();
    let expected = [("2026-03-10", "2026-03-31"), ("2026-04-01", "2026-04-30"), ("2026-05-01", "2026-05-20")];
    assert_eq!(spans, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    assert_eq!(
        report["slices"][1]["predicate"],
        "order_date >= '2026-04-01'::date AND order_date <= '2026-04-30'::date"
    );
    assert_eq!(report["slices"][2]["days"], 20);
}

#[test]
fn september_makes_thirty_runs_dated_the_day_after() {
    let output =
        bf().args(["slices", "--json"]).arg(crate::common::repo("plans/september.toml")).output().unwrap();
    assert!(output.status.success());
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 30);
    assert_eq!(
        (slices[0]["first"].as_str(), slices[0]["run_date"].as_str()),
        (Some("2026-09-01"), Some("2026-09-02"))
    );
    assert_eq!(
        (slices[29]["first"].as_str(), slices[29]["run_date"].as_str()),
        (Some("2026-09-30"), Some("2026-10-01"))
    );
    // One-day slices print the predicate the history will record (see apply's September test).
    assert_eq!(slices[14]["predicate"], "order_date = '2026-09-15'::date");
}

#[test]
fn backward_order_runs_the_latest_slice_first_and_keeps_calendar_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID_PLAN
        .replace("start = 2026-03-01", "start = 2026-01-01")
        .replace("every = \"month\"", "every = \"month\"\norder = \"backward\"");
    let plan = write_plan(dir.path(), "q1.toml", &text);
    let output = bf().arg("slices").arg(&plan).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("3 slices of `month` over 2026-01-01..2026-03-31 (90 days), backward"),
        "{stdout}"
    );
    let march = stdout.find("2026-03-01").unwrap();
    let january = stdout.find("2026-01-01 ┆").unwrap();
    assert!(march < january, "March runs first:\n{stdout}");
}

#[test]
fn slices_refuses_an_invalid_plan() {
    let dir = tempfile::tempdir().unwrap();
    let plan =
        write_plan(dir.path(), "bad.toml", &VALID_PLAN.replace("every = \"month\"", "every = \"fortnight\""));
    bf().arg("slices")
        .arg(&plan)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicates::str::contains("`fortnight` is not a slicing"));
}
