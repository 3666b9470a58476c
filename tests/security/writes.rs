//! The write gate: whatever a pull request's checkout holds — links to `.git/hooks`, to folders
//! outside, scripts — bf writes nothing outside the root and the state dir, nothing under `.git`,
//! nothing through a link and no file that can be run (docs/SECURITY.md, "The write gate").

use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Command;

use super::*;

/// The checkout made a git repository for real, so a hook bf wrote would run.
fn git_init(checkout: &Checkout) {
    let repo = checkout.repo();
    let _ = std::fs::remove_dir_all(repo.join(".git"));
    assert!(Command::new("git").arg("init").arg("-q").arg(&repo).status().unwrap().success());
}

/// Runs `git commit` in the checkout as the operator would after an apply: any hook bf wrote runs.
fn operator_commits(checkout: &Checkout) {
    let status = Command::new("git")
        .current_dir(checkout.repo())
        .args([
            "-c",
            "user.name=op",
            "-c",
            "user.email=op@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ])
        .env_remove("GIT_DIR")
        .status()
        .unwrap();
    assert!(status.success());
}

/// The attack of the third round: the pull request commits a link `notices -> .git/hooks` and
/// names its notice `../notices/pre-commit`, with a reason that runs a command. bf refuses the plan
/// at its `[notify] file` line; and had the link appeared after the plan, the apply writes no hook.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_requests_notice_never_becomes_a_git_hook() {
    let checkout = Checkout::new().await;
    git_init(&checkout);
    let repo = checkout.repo();
    let pwned = checkout.root().join("PWNED");
    let notify = "\n[notify]\nfile = \"../notices/pre-commit\"\n";
    let reason = format!("reason = \"Fix $(touch {})\"", pwned.display());
    let plan = checkout.plan("march.toml", |t| {
        format!("{}{notify}", t.replace("reason = \"Fix March's currency.\"", &reason))
    });
    let line =
        std::fs::read_to_string(&plan).unwrap().lines().position(|l| l.starts_with("file =")).unwrap() + 1;
    symlink(repo.join(".git/hooks"), repo.join("notices")).unwrap();
    for verb in ["validate", "plan"] {
        let output = checkout.bf(&[verb, &plan.display().to_string()]);
        refused_at(&checkout, &output, &plan, line, "is a link, and bf never writes through one");
    }
    // Named straight into `.git`, or over a script of the checkout: refused the same way.
    std::fs::create_dir_all(repo.join("scripts")).unwrap();
    std::fs::write(repo.join("scripts/deploy.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(repo.join("scripts/deploy.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (file, expect) in [
        ("../.git/hooks/pre-commit", "inside a `.git` folder"),
        ("../scripts/deploy.sh", "a file that can be run is there"),
    ] {
        let plan = checkout.plan("direct.toml", |t| format!("{t}\n[notify]\nfile = \"{file}\"\n"));
        let output = checkout.bf(&["validate", &plan.display().to_string()]);
        refused_at(&checkout, &output, &plan, line, expect);
    }
    assert_eq!(std::fs::read_to_string(repo.join("scripts/deploy.sh")).unwrap(), "#!/bin/sh\n");

    // The link made after the plan was reviewed (the plan is fine without it): the apply's
    // re-check refuses it, and the gate stands behind it as bf writes. No hook, nothing run.
    std::fs::remove_file(repo.join("notices")).unwrap();
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let shown = said(&checkout.bf(&["show"]));
    assert!(shown.contains("notice     written to") && shown.contains("notices/pre-commit"), "{shown}");
    assert!(bf_show(&checkout, &[]).contains("**Notice** written to"), "the comment names the notice's file");
    symlink(repo.join(".git/hooks"), repo.join("notices")).unwrap();
    let _ = checkout.bf(&["apply", "--auto-approve"]);
    assert!(!repo.join(".git/hooks/pre-commit").exists(), "a hook was written");
    operator_commits(&checkout);
    assert!(!pwned.exists(), "the reason's command ran at the operator's commit");
}

/// The gate where bf writes on its own account: the notice written by an apply that found the
/// link only then (the plan checked without it), the lineage events it spools, and a slice's data
/// file placed in a partition folder the table holds as a link out.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_written_through_a_link_a_checkout_holds() {
    let checkout = Checkout::new().await;
    let repo = checkout.repo();
    let outside = checkout.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The orders table partitioned by day, with the 4th of March a link out of the root.
    std::fs::remove_dir_all(repo.join("warehouse")).unwrap();
    orders_table(
        &repo.join("warehouse/orders"),
        true,
        &[&[(1, "C01", 10.0, "USD", "2026-03-02"), (2, "C02", 20.0, "EUR", "2026-03-03")]],
    )
    .await;
    let landing = "order_id,customer,amount,currency,order_date\n1,C01,10.0,EUR,2026-03-02\n2,C02,20.0,EUR,2026-03-03\n\
                   4,C04,40.0,EUR,2026-03-04\n";
    std::fs::write(repo.join("landing/orders.csv"), landing).unwrap();
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    symlink(&outside, repo.join("warehouse/orders/order_date=2026-03-04")).unwrap();
    std::fs::create_dir_all(repo.join(".bf")).unwrap();
    symlink(&outside, repo.join(".bf/lineage")).unwrap();
    let before = snapshot(&repo.join("warehouse/orders/_delta_log"));
    // Lineage to a port nothing listens on: its events are spooled.
    let output = checkout.bf_with(
        &["apply", "--auto-approve"],
        &[("OPENLINEAGE_URL", "http://127.0.0.1:9"), ("OPENLINEAGE_ENDPOINT", "api/v1/lineage")],
    );
    let text = said(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("is a link, and bf never writes through one"), "{text}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "written outside the root: {text}");
    assert_eq!(snapshot(&repo.join("warehouse/orders/_delta_log")), before, "a commit was made");
}
