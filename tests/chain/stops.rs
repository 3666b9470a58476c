//! Where a chain's apply or rollback stops, and what it says was written: each table is checked
//! before any is written, and a stop says truly which tables, and which slices, are in place.

use super::{REVENUE, SILVER, ok, run};
use crate::common::{append_to_silver, apply_paused, demo_workspace, slices_committed, snapshot, write_plan};

/// Every table of the chain is checked before any is written: a downstream plan edited since
/// `bf plan` stops the apply before the upstream's first slice; a rollback the upstream would refuse
/// stops the cascade before the downstream's RESTORE.
#[test]
fn a_chain_is_checked_whole_before_any_table_is_written() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let (silver, revenue) = (root.join(SILVER), root.join(REVENUE));
    ok(root, &["plan", "plans/march.toml", "-q"]);
    let downstream = root.join("plans/march-revenue-by-day.toml");
    let text = std::fs::read_to_string(&downstream).unwrap();
    std::fs::write(&downstream, text.replace("name = \"one row per day\"", "name = \"one row a day\""))
        .unwrap();
    let (before_silver, before_revenue) = (snapshot(&silver), snapshot(&revenue));
    let refused = run(root, &["apply", "--auto-approve"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("revenue_by_day: the saved plan is stale") && stderr.contains("one row a day"),
        "{stderr}"
    );
    assert!(stderr.contains("No table of the chain was written."), "{stderr}");
    assert_eq!((snapshot(&silver), snapshot(&revenue)), (before_silver, before_revenue));

    std::fs::write(&downstream, text).unwrap();
    ok(root, &["apply", "--auto-approve", "-q"]);
    // Another writer's commit to orders_silver makes its full RESTORE refused: revenue_by_day is
    // not rolled back either.
    let other = "SELECT 9001 AS order_id, 'C01' AS customer, 5.0 AS amount, 'EUR' AS currency, 5.0 AS amount_eur, DATE '2026-05-02' AS order_date";
    write_plan(
        &root.join("plans"),
        "may.toml",
        &format!(
            "reason = \"Another writer.\"\n[target]\ntable = \"../bf-demo/warehouse/orders_silver\"\ndate_column = \"order_date\"\n\
             [window]\nstart = 2026-05-02\nend = 2026-05-02\n[slicing]\nevery = \"day\"\n\
             [source]\ninputs.none = {{ path = \"../bf-demo/landing/fx_rates.csv\", format = \"csv\" }}\nquery = \"{other}\"\n"
        ),
    );
    ok(root, &["apply", "plans/may.toml", "--auto-approve", "-q", "--state-dir", ".bf-may"]);
    let (before_silver, before_revenue) = (snapshot(&silver), snapshot(&revenue));
    let refused = run(root, &["rollback", "--cascade", "--auto-approve"], &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("a full RESTORE would silently discard them"), "{stderr}");
    assert_eq!(
        (snapshot(&silver), snapshot(&revenue)),
        (before_silver, before_revenue),
        "nothing rolled back"
    );
}

/// The March reload sliced by week (the 1st, then Monday to Sunday), stopped at slice 4 because
/// another writer committed an order dated in it while slice 3 was written: the three slices
/// committed before stay, and the stop says so — never that no table of the chain was written.
#[tokio::test(flavor = "multi_thread")]
async fn a_chain_stopped_after_slices_of_its_first_table_says_they_are_written() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join(SILVER);
    let weekly = std::fs::read_to_string(root.join("plans/march.toml"))
        .unwrap()
        .replace("every = \"month\"", "every = \"week\"");
    assert!(weekly.contains("every = \"week\""));
    write_plan(&root.join("plans"), "march-weekly.toml", &weekly);
    ok(root, &["plan", "plans/march-weekly.toml", "-q"]);
    let mut at = 0;
    let out = apply_paused(root, &["-q"], 3, "before", async {
        at = append_to_silver(&silver, 9001, "2026-03-16").await;
    })
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for said in [
        "slice 4 (2026-03-16..2026-03-22) was not written: since the plan, other commits touch its rows",
        &format!("version {at}: WRITE"),
        "The 3 slices of this backfill already committed stay recorded.",
    ] {
        assert!(stderr.contains(said), "missing {said:?} in:\n{stderr}");
    }
    assert!(!stderr.contains("No table of the chain was written"), "{stderr}");
    assert_eq!(slices_committed(&silver), [1, 2, 3]);
    assert!(slices_committed(&root.join(REVENUE)).is_empty(), "the downstream table is not written");
}
