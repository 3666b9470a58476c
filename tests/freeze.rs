//! Frozen periods: days a report was signed off against. A freeze is read back from the table's
//! metadata and log as written (raw JSON, and the Python `deltalake` package), not through bf.

use std::path::Path;

use crate::common::{bf_in, commit_infos, demo_workspace, latest_metadata, slices_committed};

const ORDERS: &str = "bf-demo/warehouse/orders_silver";
const APPROVAL: &str = r#"unfreeze = { from = 2026-03-01, to = 2026-03-31, approved_by = "Dana Reyes (finance data lead)", ticket = "FIN-231" }"#;

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    bf_in(dir).args(args).env("USER", "controller").output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = run(dir, args);
    assert!(output.status.success(), "bf {args:?}:\n{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn refused(dir: &Path, args: &[&str]) -> String {
    let output = run(dir, args);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!output.status.success(), "bf {args:?} should be refused:\n{stderr}");
    stderr
}

/// The March plan, its `[guards]` given `line` (an approval), as `plans/march-approved.toml`.
fn march_with(dir: &Path, line: &str) -> &'static str {
    let march = std::fs::read_to_string(dir.join("plans/march.toml")).unwrap();
    assert!(march.contains("\n[guards]\n"));
    let text = march.replace("\n[guards]\n", &format!("\n[guards]\n{line}\n"));
    std::fs::write(dir.join("plans/march-approved.toml"), text).unwrap();
    "plans/march-approved.toml"
}

/// Records on the orders table the approval [`APPROVAL`] asks for, as the finance lead's operator would.
fn record_approval(root: &Path) -> String {
    ok(
        root,
        &[
            "unfreeze",
            ORDERS,
            "--from",
            "2026-03-01",
            "--to",
            "2026-03-31",
            "--approved-by",
            "Dana Reyes (finance data lead)",
            "--ticket",
            "FIN-231",
            "--reason",
            "restatement of March approved",
        ],
    )
}

/// The table's frozen periods as its metadata holds them, read from the raw log.
fn frozen_property(table: &Path) -> serde_json::Value {
    let metadata = latest_metadata(table);
    let text = metadata["configuration"]["bf.frozen"].as_str().unwrap_or("[]").to_owned();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_plan_over_frozen_days_is_refused_and_applies_only_with_a_recorded_approval() {
    let dir = demo_workspace();
    let root = dir.path();
    let table = root.join(ORDERS);
    let frozen = ok(root, &["freeze", ORDERS, "--through", "2026-03-31", "--reason", "Q1 closed (FIN-204)"]);
    assert!(
        frozen.starts_with("Froze ..2026-03-31 of bf-demo/warehouse/orders_silver at version"),
        "{frozen}"
    );
    // Recorded on the table for any engine: the property, and the commit's keys.
    let periods = frozen_property(&table);
    assert_eq!(periods[0]["to"], "2026-03-31", "{periods}");
    assert_eq!(periods[0]["reason"], "Q1 closed (FIN-204)");
    assert_eq!(periods[0]["by"], "controller");
    let (_, info) = commit_infos(&table).pop().unwrap();
    assert_eq!(info["bf.frozen"]["reason"], "Q1 closed (FIN-204)", "{info}");
    let read = crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable\nprint(DeltaTable('{}').metadata().configuration['bf.frozen'])",
            table.display()
        ),
        &[],
    );
    assert!(read.contains("Q1 closed (FIN-204)"), "the Python deltalake package reads it: {read}");
    let versions = commit_infos(&table).len();

    let stderr = refused(root, &["plan", "plans/march.toml"]);
    assert!(
        stderr.contains("the plan's window 2026-03-01..2026-03-31 would rewrite frozen days"),
        "{stderr}"
    );
    assert!(stderr.contains("..2026-03-31 (\"Q1 closed (FIN-204)\", frozen by controller on "), "{stderr}");
    assert!(!root.join("bf-demo/warehouse/orders_silver__rehearsal").exists(), "nothing was rehearsed");
    // An approval that leaves a frozen day out is no approval.
    let short = march_with(root, &APPROVAL.replace("to = 2026-03-31", "to = 2026-03-30"));
    refused(root, &["plan", short]);
    assert_eq!(commit_infos(&table).len(), versions);

    // A plan file arrives in a pull request: its approval is only a request until someone who can
    // write the table records it. Asked for, unrecorded, it is refused naming the command.
    let approved = march_with(root, APPROVAL);
    let stderr = refused(root, &["plan", approved]);
    assert!(stderr.contains("the table records no such approval, and a plan can only ask"), "{stderr}");
    assert!(
        stderr.contains("--approved-by \"Dana Reyes (finance data lead)\" --ticket \"FIN-231\""),
        "{stderr}"
    );
    assert_eq!(commit_infos(&table).len(), versions, "nothing was written");
    let recorded = record_approval(root);
    assert!(
        recorded.starts_with("Opened 2026-03-01..2026-03-31 of bf-demo/warehouse/orders_silver"),
        "{recorded}"
    );
    let periods = frozen_property(&table);
    assert_eq!(periods[0]["approvals"][0]["ticket"], "FIN-231", "recorded on the table: {periods}");
    assert_eq!(periods[0]["approvals"][0]["by"], "controller");
    let (_, info) = commit_infos(&table).pop().unwrap();
    assert_eq!(
        info["bf.approved"]["approved_by"], "Dana Reyes (finance data lead)",
        "its own commit: {info}"
    );
    // A pull request naming another approver or ticket grants itself nothing.
    let self_granted =
        march_with(root, &APPROVAL.replace("Dana Reyes (finance data lead)", "cfo@example.com"));
    let stderr = refused(root, &["plan", self_granted]);
    assert!(stderr.contains("the table records no such approval"), "{stderr}");
    let other_ticket = march_with(root, &APPROVAL.replace("FIN-231", "FIN-1"));
    refused(root, &["plan", other_ticket]);

    let approved = march_with(root, APPROVAL);
    let planned = ok(root, &["plan", approved]);
    let shown = "2026-03-01..2026-03-31 approved by Dana Reyes (finance data lead) (FIN-231), over frozen ..2026-03-31";
    assert!(planned.contains(&format!("unfreeze   {shown}")), "{planned}");
    let markdown = ok(root, &["show", "--format", "markdown"]);
    assert!(
        markdown.contains("**Frozen days rewritten** 2026-03-01..2026-03-31 approved by Dana Reyes"),
        "{markdown}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["unfreeze"]["ticket"], "FIN-231");
    assert_eq!(saved["frozen"][0]["reason"], "Q1 closed (FIN-204)");

    ok(root, &["apply", "--auto-approve"]);
    // Every commit of the backfill carries the approval, as the raw log holds it.
    let backfill: Vec<serde_json::Value> = commit_infos(&table)
        .into_iter()
        .map(|(_, i)| i)
        .filter(|i| i.get("bf.backfill_id").is_some())
        .collect();
    assert_eq!(backfill.len(), 2, "the slice and the comment");
    for info in &backfill {
        assert_eq!(info["bf.unfreeze"]["approved_by"], "Dana Reyes (finance data lead)", "{info}");
        assert_eq!(info["bf.unfreeze"]["ticket"], "FIN-231");
    }
    assert_eq!(slices_committed(&table), vec![1]);
    assert_eq!(frozen_property(&table)[0]["reason"], "Q1 closed (FIN-204)", "the apply kept the freeze");

    let history = ok(root, &["history", ORDERS]);
    assert!(
        history.contains("freeze ..2026-03-31 by controller") && history.contains("Q1 closed"),
        "{history}"
    );
    assert!(history.contains("unfreeze 2026-03-01..2026-03-31 for FIN-231"), "{history}");
    let status = ok(root, &["status"]);
    assert!(status.contains("frozen     ..2026-03-31 (\"Q1 closed (FIN-204)\""), "{status}");
    assert!(status.contains("approved 2026-03-01..2026-03-31 approved by Dana Reyes"), "{status}");

    // The backfill's own approval lets it be undone over the frozen days.
    ok(root, &["rollback", "--cascade", "--auto-approve"]);
    assert_eq!(frozen_property(&table)[0]["reason"], "Q1 closed (FIN-204)", "the RESTORE kept the freeze");
}

/// Approver, ticket and days are public: an approval that any later plan repeating them could
/// use would be a standing grant. It opens its days to the first backfill applied under it — which
/// may still be rolled back under it — and to no other plan, rerun, or plan made before it was used.
#[test]
fn an_approval_opens_its_frozen_days_to_one_backfill() {
    let dir = demo_workspace();
    let root = dir.path();
    let table = root.join(ORDERS);
    let alone =
        crate::common::without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    let text = alone.replace("\n[guards]\n", &format!("\n[guards]\n{APPROVAL}\n"));
    let approved = crate::common::write_plan(&root.join("plans"), "march-approved.toml", &text);
    let approved = approved.to_str().unwrap();
    ok(root, &["freeze", ORDERS, "--through", "2026-03-31", "--reason", "Q1 closed (FIN-204)"]);
    let recorded = record_approval(root);
    assert!(recorded.contains("to one backfill"), "{recorded}");
    // Two plans made while the approval is unused: both rehearse.
    let planned = ok(root, &["plan", approved, "--out", ".bf/second.json"]);
    assert!(planned.contains("the approval opens them to this backfill only"), "{planned}");
    ok(root, &["plan", approved]);
    assert!(
        ok(root, &["status"])
            .contains("approved by Dana Reyes (finance data lead) (FIN-231), recorded by controller")
    );
    assert!(ok(root, &["status"]).contains("; not used yet"));
    ok(root, &["apply", "--auto-approve"]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let first = saved["id"].as_str().unwrap().to_owned();
    let versions = commit_infos(&table).len();
    let used = format!("was used by backfill {first} (version");

    // The plan made before the first was applied is refused at its apply, before any write.
    let stderr = refused(root, &["apply", ".bf/second.json", "--auto-approve"]);
    assert!(stderr.contains("an approval opens its days to one backfill"), "{stderr}");
    assert!(stderr.contains(&used), "{stderr}");
    // A later pull request repeating approver, ticket and days is refused at `bf plan`.
    let stderr = refused(root, &["plan", approved, "--out", ".bf/third.json"]);
    assert!(stderr.contains(&used), "{stderr}");
    assert!(!root.join(".bf/third.json").exists());
    // A rerun is another backfill.
    let stderr = refused(root, &["apply", "--rerun", "all", "--auto-approve"]);
    assert!(stderr.contains(&used), "{stderr}");
    assert_eq!(commit_infos(&table).len(), versions, "nothing was written");
    assert_eq!(slices_committed(&table), vec![1], "the first backfill's one slice");
    // `bf status` says which backfill used it: the log's first slice commit after the approval.
    let status = ok(root, &["status"]);
    let slice_version = commit_infos(&table)
        .into_iter()
        .find(|(_, info)| info.get("bf.slice").is_some())
        .map(|(version, _)| version)
        .unwrap();
    assert!(status.contains(&format!("; used by backfill {first} (version {slice_version})")), "{status}");

    // The backfill that used it is still undone under it.
    ok(root, &["rollback", "--auto-approve"]);
    // Another approval, recorded for the next backfill, opens the days to it.
    record_approval(root);
    ok(root, &["plan", approved]);
    ok(root, &["apply", "--auto-approve"]);
}

#[test]
fn rollbacks_respect_days_frozen_after_the_apply_until_they_are_unfrozen() {
    let dir = demo_workspace();
    let root = dir.path();
    let table = root.join(ORDERS);
    let march = crate::common::write_plan(
        &root.join("plans"),
        "march-alone.toml",
        &crate::common::without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap()),
    );
    ok(root, &["plan", march.to_str().unwrap()]);
    let pre_version = commit_infos(&table).len() as u64 - 1;
    ok(root, &["apply", "--auto-approve"]);
    ok(
        root,
        &["freeze", ORDERS, "--from", "2026-03-01", "--to", "2026-03-31", "--reason", "March signed off"],
    );
    let versions = commit_infos(&table).len();

    for args in [
        &["rollback", "--auto-approve"][..],
        &["rollback", "--window-only", "--auto-approve"],
        &["rollback", "--table", ORDERS, "--to-version", &pre_version.to_string(), "--auto-approve"],
    ] {
        let stderr = refused(root, args);
        assert!(stderr.contains("would rewrite frozen days"), "{args:?}: {stderr}");
        assert!(
            stderr.contains("2026-03-01..2026-03-31 (\"March signed off\", frozen by controller"),
            "{stderr}"
        );
        assert_eq!(commit_infos(&table).len(), versions, "{args:?} wrote nothing");
    }

    let missing =
        refused(root, &["unfreeze", ORDERS, "--through", "2026-03-31", "--reason", "no such period"]);
    assert!(missing.contains("no frozen period ..2026-03-31; it has 2026-03-01..2026-03-31"), "{missing}");
    let lifted = ok(
        root,
        &[
            "unfreeze",
            ORDERS,
            "--from",
            "2026-03-01",
            "--to",
            "2026-03-31",
            "--reason",
            "restatement (FIN-240)",
        ],
    );
    assert!(lifted.starts_with("Unfroze 2026-03-01..2026-03-31 of"), "{lifted}");
    assert_eq!(frozen_property(&table), serde_json::json!([]));
    let (_, info) = commit_infos(&table).pop().unwrap();
    assert_eq!(info["bf.unfrozen"]["reason"], "restatement (FIN-240)", "who lifted it and why: {info}");
    // The freeze and its lifting are other writers' commits to a full RESTORE; the window's rows
    // go back.
    ok(root, &["rollback", "--window-only", "--auto-approve"]);
}

#[test]
fn a_freeze_names_its_days_as_a_range_or_through_a_day() {
    let dir = demo_workspace();
    let root = dir.path();
    for args in [
        &["freeze", ORDERS, "--from", "2026-03-01", "--reason", "x"][..],
        &["freeze", ORDERS, "--through", "2026-03-31", "--to", "2026-03-31", "--reason", "x"],
        &["freeze", ORDERS, "--through", "2026-03-31"],
        &["freeze", ORDERS, "--reason", "x"],
    ] {
        refused(root, args);
    }
    let stderr =
        refused(root, &["freeze", ORDERS, "--from", "2026-03-31", "--to", "2026-03-01", "--reason", "x"]);
    assert!(stderr.contains("a period from 2026-03-31 to 2026-03-01 is empty"), "{stderr}");
    assert_eq!(frozen_property(&root.join(ORDERS)), serde_json::json!([]), "nothing was frozen");
    // An approval is checked offline, at its line.
    let backwards = march_with(root, &APPROVAL.replace("from = 2026-03-01", "from = 2026-04-01"));
    let stderr = refused(root, &["validate", backwards]);
    assert!(stderr.contains("the approval's days 2026-04-01..2026-03-31 are none"), "{stderr}");
    assert!(stderr.contains("march-approved.toml:"), "{stderr}");
    let anonymous = march_with(root, &APPROVAL.replace("Dana Reyes (finance data lead)", " "));
    assert!(
        refused(root, &["validate", anonymous]).contains("an approval names who approved it and its ticket")
    );
}

#[test]
fn days_frozen_after_the_plan_stop_its_apply_before_the_first_commit() {
    let dir = demo_workspace();
    let root = dir.path();
    let table = root.join(ORDERS);
    ok(root, &["plan", "plans/march.toml"]);
    ok(root, &["freeze", ORDERS, "--through", "2026-03-15", "--reason", "first half signed off"]);
    let versions = commit_infos(&table).len();
    let stderr = refused(root, &["apply", "--auto-approve"]);
    assert!(
        stderr.contains("the saved plan's window 2026-03-01..2026-03-31 would rewrite frozen days"),
        "{stderr}"
    );
    assert!(stderr.contains("..2026-03-15 (\"first half signed off\""), "{stderr}");
    assert_eq!(commit_infos(&table).len(), versions, "nothing written");
    assert!(slices_committed(&table).is_empty());
}
