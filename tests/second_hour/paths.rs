//! Where plans, their rehearsals and their paths are, as a newcomer writes them from wherever they
//! stand.

use std::path::Path;

use super::{august, bf, line_of, said, workspace};
use crate::common::bf_in;

/// The saved plan, its rehearsal and the next command agree whatever the folder and `--out`: a plan
/// saved with `--out` says to apply that file; planning again elsewhere names the saved plan whose
/// rehearsal it rebuilt (the state dir's, or one in another folder or `--out` file); a folder with
/// no saved plan says where plans are saved and how to name one.
#[test]
fn the_saved_plan_its_rehearsal_and_the_next_command_agree_whatever_the_folder() {
    let (dir, _) = workspace();
    let root = dir.path();
    // A git work tree: the root plans reach within, from any of its folders.
    assert!(std::process::Command::new("git").arg("init").arg("-q").arg(root).status().unwrap().success());
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-08-02");
    std::fs::write(root.join("plans/august.toml"), plan).unwrap();
    let id_of = |saved: &Path| -> String {
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
        json["id"].as_str().unwrap().to_owned()
    };

    let first = bf(root, &["plan", "plans/august.toml"]);
    assert!(first.status.success(), "{}", said(&first));
    assert!(said(&first).contains("apply it with `bf apply`."), "{}", said(&first));
    assert!(
        !said(&first).contains("rebuilt the rehearsal"),
        "nothing to say the first time: {}",
        said(&first)
    );
    let default_id = id_of(&root.join(".bf/plan.json"));
    let again = bf(root, &["plan", "plans/august.toml"]);
    assert!(
        !said(&again).contains("rebuilt the rehearsal"),
        "the saved plan replaced with it: {}",
        said(&again)
    );
    let default_id_again = id_of(&root.join(".bf/plan.json"));
    assert_ne!(default_id, default_id_again);

    let out = bf(root, &["plan", "plans/august.toml", "--out", "other.json"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("apply it with `bf apply other.json`."), "{}", said(&out));
    assert!(
        said(&out).contains(&format!(
            "rebuilt the rehearsal of plan {default_id_again}, the plan saved at .bf/plan.json"
        )),
        "{}",
        said(&out)
    );

    let elsewhere = bf_in(&root.join("plans")).args(["plan", "august.toml"]).output().unwrap();
    assert!(elsewhere.status.success(), "{}", said(&elsewhere));
    let other_id = id_of(&root.join("other.json"));
    assert!(
        said(&elsewhere).contains(&format!(
            "rebuilt the rehearsal of plan {other_id}, a plan saved in another folder or with `--out`"
        )),
        "{}",
        said(&elsewhere)
    );
    let applied = bf_in(&root.join("plans")).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(applied.status.success(), "{}", said(&applied));

    let lost = bf_in(&root.join("lake")).args(["apply", "--auto-approve"]).output().unwrap();
    assert_eq!(lost.status.code(), Some(1), "{}", said(&lost));
    assert!(
        said(&lost).contains("no saved plan at .bf/plan.json") && said(&lost).contains("--state-dir"),
        "{}",
        said(&lost)
    );
}

/// Paths written from where one stands: `bf init` piped (`| tee plans/x.toml`) cannot know the
/// plan's folder, says so and takes `--plan-dir`; a plan naming its table from the folder bf runs in
/// gets the path it meant, at its line, from `bf plan` (and a note from `bf validate`); a missing
/// day's file is named, never "did you mean" another day's.
#[test]
fn paths_written_from_the_wrong_folder_are_answered_with_the_path_meant() {
    let (dir, _) = workspace();
    let root = dir.path();

    let piped = bf(root, &["init", "--table", "lake/payments"]);
    assert!(piped.status.success(), "{}", said(&piped));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("table = \"lake/payments\""), "{}", said(&piped));
    assert!(String::from_utf8_lossy(&piped.stderr).contains("pass `--plan-dir DIR`"), "{}", said(&piped));
    let placed = bf(root, &["init", "--table", "lake/payments", "--plan-dir", "plans"]);
    assert!(
        String::from_utf8_lossy(&placed.stdout).contains("table = \"../lake/payments\""),
        "{}",
        said(&placed)
    );
    assert!(!String::from_utf8_lossy(&placed.stderr).contains("--plan-dir"), "{}", said(&placed));

    let text = august("pay_date", "payment_id", "")
        .replace("table = \"../lake/payments\"", "table = \"lake/payments\"")
        .replace("end = 2026-08-29", "end = 2026-08-03");
    std::fs::write(root.join("plans/august.toml"), &text).unwrap();
    let validated = bf(root, &["validate", "plans/august.toml"]);
    assert!(
        said(&validated).contains(
            "note: there is no table at plans/lake/payments: did you mean `../lake/payments`? A plan's paths are \
             relative to its own folder (plans)"
        ),
        "{}",
        said(&validated)
    );
    let planned = bf(root, &["plan", "plans/august.toml"]);
    assert_eq!(planned.status.code(), Some(1), "{}", said(&planned));
    let line = line_of(&text, "table =");
    assert!(said(&planned).contains(&format!("--> plans/august.toml:{line}:")), "{}", said(&planned));
    assert!(said(&planned).contains("did you mean `../lake/payments`?"), "{}", said(&planned));

    std::fs::write(
        root.join("plans/august.toml"),
        text.replace("table = \"lake/payments\"", "table = \"../lake/payments\""),
    )
    .unwrap();
    std::fs::remove_file(root.join("landing/payments/2026-08-02.csv")).unwrap();
    let missing = bf(root, &["plan", "plans/august.toml"]);
    assert_eq!(missing.status.code(), Some(1), "{}", said(&missing));
    assert!(said(&missing).contains("2026-08-02.csv"), "{}", said(&missing));
    assert!(
        !said(&missing).contains("did you mean"),
        "another day's file is no typo's fix: {}",
        said(&missing)
    );
}

/// A window past the corrections (to September 30, the files ending August 29) with a day missing
/// inside: the first missing file is named with how many of the window's days have none, which,
/// and the last day that has one — not one day per run.
#[test]
fn a_window_past_the_data_says_how_many_days_have_no_file() {
    let (dir, _) = workspace();
    let root = dir.path();
    std::fs::remove_file(root.join("landing/payments/2026-08-10.csv")).unwrap();
    let plan = august("pay_date", "payment_id", "").replace("end = 2026-08-29", "end = 2026-09-30");
    std::fs::write(root.join("plans/august.toml"), &plan).unwrap();
    let out = bf(root, &["plan", "plans/august.toml"]);
    let said = said(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("slice 10 (2026-08-10): input `corrected` reads ")
            && said.contains(
                "2026-08-10.csv, which does not exist; 33 of the window's 61 slices have no file for it \
                 (2026-08-10, 2026-08-30..2026-09-30), the last one found is for 2026-08-29"
            ),
        "{said}"
    );
}
