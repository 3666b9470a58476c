//! What `bf policy test` prints: each fixture's verdict, and for a failure both decisions.

use std::fmt::Write;
use std::path::Path;

use bf::rehearse::policy::{Decision, FixtureOutcome};

pub fn outcomes(dir: &Path, outcomes: &[FixtureOutcome]) -> String {
    let mut out = String::new();
    for outcome in outcomes {
        let name = outcome.fixture.strip_prefix(dir).unwrap_or(&outcome.fixture).display();
        if outcome.passed() {
            let _ = writeln!(out, "ok    {name}");
        } else {
            let _ = writeln!(out, "FAIL  {name}");
            let _ = writeln!(out, "  expected  {}", decision(&outcome.expected));
            let _ = writeln!(out, "  decided   {}", decision(&outcome.decided));
        }
    }
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    let _ = match (outcomes.len(), failed) {
        (0, _) => writeln!(
            out,
            "no fixtures in {}: add fixtures/<name>.json and <name>.expected.json",
            dir.display()
        ),
        (n, 0) => writeln!(out, "{n} fixtures: all decided as expected"),
        (n, f) => writeln!(out, "{n} fixtures: {f} decided otherwise than expected"),
    };
    out
}

fn decision(d: &Decision) -> String {
    format!("deny {:?}, warn {:?}", d.deny, d.warn)
}
