//! The benchmark script (`scripts/bench`) at a tiny size, so it cannot rot: every workload generated,
//! every contender run against the bf this test run built, the work checked equal (row counts after
//! bf and after the Python loop; the resumed apply doing only the slices left), medians and ratios
//! written. The figures themselves are docs/BENCHMARKS.md's, from a release build at full size.

use serde_json::Value;

use crate::common::repo;

#[test]
fn the_benchmark_script_runs_every_workload_at_a_small_size() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.json");
    let output = crate::common::clean(std::process::Command::new("bash"))
        .arg(repo("scripts/bench"))
        .arg("--smoke")
        .arg("--bf")
        .arg(assert_cmd::cargo::cargo_bin("bf"))
        .arg("--work")
        .arg(dir.path().join("work"))
        .arg("--json")
        .arg(&results)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));

    let results: Value = serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    let medians = results["medians"].as_object().unwrap();
    let expected = [
        (
            "W1 apply, unpartitioned",
            vec![
                "bf apply",
                "bf plan",
                "bf plan + apply",
                "bf write alone",
                "loop",
                "limit",
                "limit, one core",
            ],
        ),
        ("W1 apply, partitioned", vec!["bf apply", "bf write alone", "loop", "limit", "limit, one core"]),
        ("W2 one-month plan", vec!["bf plan on 4 months", "bf plan on 1 month"]),
        ("W2 clone of 40 files", vec!["bf clone, small", "bf clone, 10x rows", "cp -r, 10x rows"]),
        ("W3 one slice of 2,000 rows", vec!["bf plan", "bf apply", "loop", "limit"]),
        ("W4 resume after slice 1 of 2", vec!["bf apply, all slices", "bf apply, resumed (slices 2-2)"]),
        ("W5 2 one-day slices", vec!["bf plan", "bf apply", "bf plan + apply", "loop"]),
        ("W5 3 one-day slices", vec!["bf plan", "bf apply", "loop"]),
        (
            "W6 one slice of 2,000 rows joined and aggregated",
            vec![
                "bf plan",
                "bf plan on the cluster",
                "bf apply --recompute",
                "bf apply --recompute on the cluster",
            ],
        ),
        ("S3 apply, unpartitioned", vec!["bf apply", "bf plan", "bf plan + apply", "loop"]),
        ("S3 apply, partitioned", vec!["bf apply", "loop"]),
        ("S3 clone of 40 files", vec!["bf clone", "bf plan (one day)"]),
        ("S3 long log: 40 more commits", vec!["bf status", "bf rollback"]),
    ];
    // Each child's peak memory is its own: a child forked straight from the script would carry the
    // script's high-water mark (numpy and pyarrow loaded, the data generated: ~180 MiB in the first
    // version), and `cp -r` would look as big as bf.
    let copy = medians["W2 clone of 40 files"]["cp -r, 10x rows"]["peak_rss_mb"].as_f64().unwrap();
    assert!(copy < 50.0, "cp -r measured at {copy} MiB: the script's own memory leaked into a child's peak");
    // The one-core limit is what bf apply is compared with when deltalake's writer uses one core: it
    // must really be pinned (CPU time within its wall time, GNU time counting in 10 ms steps).
    for variant in ["unpartitioned", "partitioned"] {
        let pinned = &medians[format!("W1 apply, {variant}").as_str()]["limit, one core"];
        let (cpu, wall) = (pinned["cpu_s"].as_f64().unwrap(), pinned["median_s"].as_f64().unwrap());
        assert!(cpu <= wall + 0.02, "the one-core limit used {cpu} s of CPU in {wall} s: {pinned}");
    }
    for (workload, contenders) in expected {
        for contender in contenders {
            let measured = &medians[workload][contender];
            assert_eq!(measured["runs"], 1, "{workload} / {contender}: {measured}");
            assert!(measured["median_s"].as_f64().unwrap() > 0.0, "{workload} / {contender}: {measured}");
            assert!(measured["peak_rss_mb"].as_f64().unwrap() > 1.0, "{workload} / {contender}: {measured}");
        }
        let ratios = results["ratios"][workload].as_object().unwrap();
        assert!(
            !ratios.is_empty() && ratios.values().all(|r| r.as_f64().unwrap() > 0.0),
            "{workload}: {ratios:?}"
        );
        assert!(stdout.contains(workload), "the printed report names {workload}");
    }
    // On S3 the server's CPU time is measured around each command, and what a request costs it.
    let served = |workload: &str, row: &str| medians[workload][row]["median_s"].as_f64().unwrap_or(0.0);
    for row in ["  server CPU: bf plan", "  server CPU: bf apply", "  server CPU: loop"] {
        assert!(served("S3 apply, partitioned", row) > 0.0, "{row}: {}", medians["S3 apply, partitioned"]);
    }
    for kind in ["PUT a day file", "GET a day file", "GET a commit", "LIST 40 commits"] {
        assert!(
            served("S3 server CPU s per 1,000 requests", kind) > 0.0,
            "{kind}: {}",
            medians["S3 server CPU s per 1,000 requests"]
        );
    }
    // bf's own share, the fourth pass's goal, is computed on both layouts.
    for layout in ["unpartitioned", "partitioned"] {
        let share = &results["ratios"][format!("W1 apply, {layout}")]["bf plan + apply / bf write alone"];
        assert!(share.as_f64().is_some_and(|s| s > 0.0), "{layout}: {share}");
    }
}
