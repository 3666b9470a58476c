//! The plan parser and validator never panic, whatever the text: random mutations of a valid plan
//! and random text. `cargo test` runs a few hundred cases; a long run:
//! `PROPTEST_CASES=2000000 cargo test --test tests fuzz -- --nocapture` (see docs/RELIABILITY.md).

use std::path::Path;

use proptest::prelude::*;

use crate::common::VALID_PLAN;

/// A valid plan with a few random edits: characters inserted, deleted or replaced at random places.
fn mutated_plan() -> impl Strategy<Value = String> {
    let edit =
        (any::<prop::sample::Index>(), prop_oneof![Just(None), any::<char>().prop_map(Some)], any::<bool>());
    prop::collection::vec(edit, 1..8).prop_map(|edits| {
        let mut text: Vec<char> = VALID_PLAN.chars().collect();
        for (at, with, replace) in edits {
            let i = at.index(text.len().max(1));
            match (with, replace) {
                (None, _) if !text.is_empty() => {
                    text.remove(i.min(text.len() - 1));
                }
                (Some(c), true) if i < text.len() => text[i] = c,
                (Some(c), _) => text.insert(i.min(text.len()), c),
                _ => {}
            }
        }
        text.into_iter().collect()
    })
}

/// Values a plan author could put in the window and slicing: extreme dates and cadences.
fn odd_values() -> impl Strategy<Value = String> {
    let date = prop_oneof![
        Just("0001-01-01".to_owned()),
        Just("9999-12-31".to_owned()),
        (1i32..9999, 1u32..13, 1u32..32).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}")),
    ];
    let every = prop_oneof![
        Just("day".to_owned()),
        Just("year".to_owned()),
        (0u64..u64::MAX).prop_map(|n| format!("{n} days")),
        ".*".prop_map(|s: String| s.replace(['"', '\\'], "")),
    ];
    (date.clone(), date, every, any::<u32>()).prop_map(|(start, end, every, max)| {
        VALID_PLAN
            .replace("start = 2026-03-01", &format!("start = {start}"))
            .replace("end = 2026-03-31", &format!("end = {end}"))
            .replace("every = \"month\"", &format!("every = \"{every}\"\n[guards]\nmax_slices = {max}"))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(300), ..ProptestConfig::default() })]

    #[test]
    fn the_plan_parser_never_panics(text in prop_oneof![mutated_plan(), odd_values(), ".*"]) {
        if let Ok(document) = bf::plan_file::parse(Path::new("fuzz.toml"), text) {
            // A plan that passed validation has a bounded number of slices that cover its window.
            let slices = document.plan.slices();
            prop_assert!(slices.len() <= document.plan.guards.max_slices as usize);
            prop_assert!(!slices.is_empty());
        }
    }
}
