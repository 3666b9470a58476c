//! A year of orders in a bucket (an S3 server on 127.0.0.1, moto): its gaps found and filled, and
//! a preview of the year, as on a local table.

use std::process::Output;

use super::{MISSING, THIN, corrections, reload_of, usual, write_year};
use crate::common::bf_in;
use crate::common::servers::{self, Server};
use crate::second_hour::said;

const TABLE: &str = "s3://lake/orders";

fn bf(server: &Server, root: &std::path::Path, args: &[&str]) -> Output {
    let output = bf_in(root).envs(servers::s3_env(server)).args(args).output().unwrap();
    assert!(!said(&output).contains("bf-test-secret-never-printed"), "a credential was printed");
    output
}

/// The table in the bucket, written week by week by the Python `deltalake` package (each file
/// straddling its week's days, which bf reads from the bucket): `bf gaps` names the two missing
/// days and the thin one; `bf plan --sample 3` previews the year's first, largest and last day and
/// `bf apply` refuses the preview; the plan `--write-plan` writes, its reason written, plans and
/// applies, and the Python package reads the three days whole from the bucket; `bf gaps` then
/// finds nothing.
#[test]
fn on_s3_a_years_gaps_are_found_and_filled_and_the_year_previewed() {
    let server = servers::s3();
    servers::create_bucket(&server, "lake");
    let env = servers::s3_env(&server);
    write_year(TABLE, false, &env);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    corrections(root);
    std::fs::create_dir(root.join("plans")).unwrap();
    std::fs::write(root.join("plans/year.toml"), reload_of(TABLE, "2025-01-01", "2025-12-31")).unwrap();
    let ok = |args: &[&str]| {
        let out = bf(&server, root, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", said(&out));
        said(&out)
    };

    let found = ok(&["gaps", "plans/year.toml"]);
    assert!(
        found.contains(&format!(
            "Missing: 2 days without a row\n  {} (Fri)\n  {} (Fri)\n",
            MISSING[0], MISSING[1]
        )),
        "{found}"
    );
    assert!(found.contains(&format!("  {THIN} (Tue)  2 rows, usually 20 (10%)")), "{found}");
    assert!(found.contains("files the log does not settle"), "{found}");

    let previewed = ok(&["plan", "plans/year.toml", "--sample", "3", "-q"]);
    assert!(
        previewed.contains("preview: 3 of 365 slices — 1 (first), 169 (largest by rows), 365 (last)"),
        "{previewed}"
    );
    let refused = bf(&server, root, &["apply", "--auto-approve"]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(said(&refused).contains("is a preview of 3 of its plan's 365 slices"), "{}", said(&refused));

    ok(&["gaps", "plans/year.toml", "--write-plan", "plans/holes.toml", "--like", "plans/year.toml"]);
    let holes = std::fs::read_to_string(root.join("plans/holes.toml")).unwrap();
    assert!(holes.contains(&format!("table = \"{TABLE}\"")), "a URI is kept as written: {holes}");
    let written = holes.replace("<why these days are reloaded>", "Two days never loaded, one mostly lost.");
    std::fs::write(root.join("plans/holes.toml"), written).unwrap();
    ok(&["plan", "plans/holes.toml", "-q"]);
    ok(&["apply", "--auto-approve", "-q"]);
    for day in [MISSING[0], THIN, MISSING[1]] {
        let rows = servers::rows_by_day(TABLE, None, day, day, &env);
        assert_eq!(rows.len(), usual(day.parse().unwrap()), "{day} read from the bucket");
    }
    let none = ok(&["gaps", "plans/year.toml"]);
    assert!(none.contains("No gaps"), "{none}");
}
