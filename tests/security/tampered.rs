//! A saved plan edited after `bf plan`: no table written, no notice written outside the root.

use super::*;

/// Saves `plan` as the saved plan and applies it: refused (exit 1) saying `why`, `warehouse/orders`
/// as it was.
fn apply_refused(checkout: &Checkout, plan: &Value, why: &str, what: &str) {
    let orders = snapshot(&checkout.repo().join("warehouse/orders"));
    save(checkout, plan);
    let output = checkout.bf(&["apply", "--auto-approve"]);
    assert_eq!(output.status.code(), Some(1), "{what}: {}", said(&output));
    assert!(said(&output).contains(why), "{what}: {}", said(&output));
    assert_eq!(snapshot(&checkout.repo().join("warehouse/orders")), orders, "{what}: the table was written");
}

/// An edit of a saved plan between `bf plan` and `bf apply`.
type Tamper<'a> = Box<dyn Fn(&mut Value) + 'a>;

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_saved_plan_writes_no_table() {
    let checkout = Checkout::new().await;
    orders_table(&checkout.repo().join("warehouse/gold"), false, &[&[(9, "C09", 90.0, "EUR", "2026-03-09")]])
        .await;
    let original = planned(&checkout, &[]).await;
    let gold = url::Url::from_directory_path(checkout.repo().join("warehouse/gold").canonicalize().unwrap())
        .unwrap();
    // The blast radius a guard weighs, changed in one field of the slice's and the plan's alike (so
    // the two still agree): each must still be the files the slice publishes.
    let radius = |field: &'static str| -> Tamper {
        Box::new(move |p: &mut Value| {
            for at in [format!("/slices/0/blast_radius/{field}"), format!("/blast_radius/{field}")] {
                let value = p.pointer_mut(&at).unwrap();
                *value = (value.as_u64().unwrap() + 1).into();
            }
        })
    };
    // Each edit, and the reason the refusal gives for it: every rule of the seal holds on its own.
    let radius_differs = "its blast radius is not its slices' files";
    let beside = checkout.repo().join("landing/prices.csv");
    std::fs::write(&beside, "sku,price\n").unwrap();
    let beside = beside.canonicalize().unwrap().display().to_string();
    let tampers: [(&str, Tamper, &str); 20] = [
        ("the bytes it adds", radius("bytes_added"), radius_differs),
        ("the files it adds", radius("files_added"), radius_differs),
        ("the files it removes", radius("files_removed"), radius_differs),
        ("another target", Box::new(|p| p["target"]["uri"] = gold.to_string().into()), "it targets "),
        (
            "another table as its text's",
            Box::new(|p| p["target"]["table"] = "../warehouse/gold".into()),
            "it targets ",
        ),
        (
            "another date column",
            Box::new(|p| p["target"]["date_column"] = "shipped_on".into()),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another key",
            Box::new(|p| p["target"]["key"] = serde_json::json!(["customer"])),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another reason",
            Box::new(|p| p["reason"] = "Approved by finance.".into()),
            "its date column, key, mode, reason or window is not its text's",
        ),
        (
            "another rehearsal",
            Box::new(|p| p["rehearsal"]["uri"] = gold.to_string().into()),
            "its rehearsal is ",
        ),
        (
            "a guard its text does not declare",
            Box::new(|p| {
                p["guards"] =
                    serde_json::json!([{"name": "max_change_pct.rows", "passed": true, "detail": "ok"}]);
            }),
            "its guards are not the ones its text declares",
        ),
        (
            "a check erased",
            Box::new(|p| {
                let checks = p["checks"].as_array_mut().unwrap();
                checks.retain(|c| c["name"] != "reconcile");
            }),
            "check `reconcile` of slice 1 is not recorded",
        ),
        (
            "another plan text",
            Box::new(|p| {
                let text = p["plan_file"]["text"]
                    .as_str()
                    .unwrap()
                    .replace("../warehouse/orders", "../warehouse/gold");
                p["plan_file"]["text"] = text.into();
            }),
            "its text is not the text its sha256 pins",
        ),
        (
            "an input outside",
            Box::new(|p| p["inputs"][0]["path"] = "/etc/hostname".into()),
            "which its text does not name",
        ),
        (
            "an input beside the one named",
            Box::new(|p| p["inputs"][0]["path"] = beside.clone().into()),
            "which its text does not name",
        ),
        (
            "an input's fingerprint dropped",
            Box::new(|p| p["inputs"].as_array_mut().unwrap().clear()),
            "input `orders`'s file",
        ),
        (
            "which table its pre-version is of, dropped",
            Box::new(|p| {
                p["target"].as_object_mut().unwrap().remove("table_id");
            }),
            "it does not record which table its pre-version is of",
        ),
        (
            "its pre-version's commit, dropped",
            Box::new(|p| {
                p["target"].as_object_mut().unwrap().remove("pre_commit_sha256");
            }),
            "it does not record which table its pre-version is of",
        ),
        (
            "its record of the deleted keys it brings back, dropped",
            Box::new(|p| {
                p.as_object_mut().unwrap().remove("deleted_keys");
            }),
            "it has no record of the deleted keys its rows bring back",
        ),
        (
            "fewer rows changed than its slices changed",
            Box::new(|p| {
                let changed = p["row_changes"]["changed"].as_u64().unwrap();
                p["row_changes"]["changed"] = (changed.saturating_sub(1)).into();
            }),
            "its count of rows added, removed and changed is not its slices'",
        ),
        (
            "rows outside the window moved, called unchanged",
            Box::new(|p| {
                let rows = p["outside_window"]["before"]["rows"].as_u64().unwrap();
                p["outside_window"]["after"]["rows"] = (rows + 1).into();
            }),
            "rows outside the window changed",
        ),
    ];
    let before = (snapshot(&checkout.repo().join("warehouse")), checkout.untouched());
    for (what, tamper, reason) in &tampers {
        let mut plan = original.clone();
        tamper(&mut plan);
        save(&checkout, &plan);
        for verb in [&["apply", "--auto-approve"][..], &["export", "airflow"]] {
            let output = checkout.bf(verb);
            let text = said(&output);
            assert_eq!(output.status.code(), Some(1), "{what}: {verb:?}\n{text}");
            let why = if what.contains("outside the window") {
                "rows outside the window changed"
            } else {
                "is not what its plan text says"
            };
            assert!(text.contains(why) && text.contains(reason), "{what}: {verb:?}\n{text}");
        }
        assert_eq!(
            (snapshot(&checkout.repo().join("warehouse")), checkout.untouched()),
            before,
            "{what}: a table was written"
        );
    }

    // A guard's verdict is made again from the numbers beside it: a failed guard flipped to
    // `passed`, its problem erased, is refused as failed.
    let capped = checkout.plan("capped.toml", |t| t + "\n[guards]\nmax_bytes_rewritten = \"1 B\"\n");
    let output = checkout.bf(&["plan", &capped.display().to_string(), "-q"]);
    assert_eq!(output.status.code(), Some(1), "the guard fails: {}", said(&output));
    let mut flipped: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    assert_eq!(flipped["guards"][0]["passed"], false, "{}", flipped["guards"]);
    flipped["guards"][0]["passed"] = true.into();
    flipped["problems"] = serde_json::json!([]);
    apply_refused(&checkout, &flipped, "guard max_bytes_rewritten failed", "a guard flipped");

    // A check erased from one slice of several is caught as from the only one.
    let daily = checkout.plan("daily.toml", |t| {
        t.replace("start = 2026-03-01", "start = 2026-03-02")
            .replace("end = 2026-03-31", "end = 2026-03-03")
            .replace("every = \"month\"", "every = \"day\"")
    });
    let output = checkout.bf(&["plan", &daily.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let mut erased: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    let daily_plan = erased.clone();
    erased["checks"].as_array_mut().unwrap().retain(|c| c["slice"] != 2);
    apply_refused(&checkout, &erased, "check `reconcile` of slice 2 is not recorded", "a check erased");

    // The slices are the ones its text makes, each bound on its own: one dropped (its checks and its
    // blast radius with it), or one's first or last day moved.
    let edits: [(&str, Tamper); 3] = [
        (
            "the last slice dropped",
            Box::new(|p| {
                p["slices"].as_array_mut().unwrap().pop();
                p["checks"].as_array_mut().unwrap().retain(|c| c["slice"] != 2);
                p["blast_radius"] = p["slices"][0]["blast_radius"].clone();
            }),
        ),
        ("a slice's first day moved", Box::new(|p| p["slices"][1]["first"] = "2026-03-02".into())),
        ("a slice's last day moved", Box::new(|p| p["slices"][0]["last"] = "2026-03-03".into())),
    ];
    for (what, edit) in &edits {
        let mut plan = daily_plan.clone();
        edit(&mut plan);
        apply_refused(&checkout, &plan, "its slices are not the ones its text makes", what);
    }

    // An input spelt as a `file:` URL is a local path all the same, compared through its links: a
    // file recorded under its template's folder, through a link leading out of the root, is refused.
    let repo = checkout.repo().canonicalize().unwrap();
    std::fs::copy(repo.join("landing/orders.csv"), repo.join("landing/orders_2026-03-01.csv")).unwrap();
    let templated = checkout.plan("templated.toml", |t| {
        let url = format!("\"file://{}/landing/orders_{{start}}.csv\"", repo.display());
        let by_url = t.replace("\"../landing/orders.csv\"", &url);
        assert_ne!(by_url, t);
        by_url
    });
    let output = checkout.bf(&["plan", &templated.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let mut through_a_link: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".bf/plan.json")).unwrap()).unwrap();
    std::os::unix::fs::symlink(checkout.root(), repo.join("landing/out")).unwrap();
    through_a_link["inputs"][0]["path"] = format!("file://{}/landing/out/secret.csv", repo.display()).into();
    let through = "landing/out/secret.csv, which its text does not name";
    apply_refused(&checkout, &through_a_link, through, "a file: URL through a link");
    std::fs::remove_file(repo.join("landing/out")).unwrap();

    // Signed: any change to the saved plan, and an unsigned one, is refused; the signed one applies.
    let key = [("BF_PLAN_KEY", "operator-key-not-in-the-repo")];
    let signed = planned(&checkout, &key).await;
    let tables = snapshot(&checkout.repo().join("warehouse"));
    assert!(signed["signature"].as_str().is_some_and(|s| s.starts_with("hmac-sha256:")), "{signed}");
    let mut altered = signed.clone();
    altered["slices"][0]["after"]["rows"] = 5.into();
    let mut unsigned = signed.clone();
    unsigned.as_object_mut().unwrap().remove("signature");
    for plan in [altered, unsigned] {
        save(&checkout, &plan);
        for verb in [&["apply", "--auto-approve"][..], &["export", "airflow"]] {
            let output = checkout.bf_with(verb, &key);
            assert_eq!(output.status.code(), Some(1), "{}", said(&output));
            assert!(said(&output).contains("is not signed with the key in BF_PLAN_KEY"), "{}", said(&output));
        }
        assert_eq!(snapshot(&checkout.repo().join("warehouse")), tables, "a table was written");
    }
    save(&checkout, &signed);
    let output = checkout.bf_with(&["apply", "--auto-approve"], &key);
    assert!(output.status.success(), "the signed plan applies: {}", said(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notice_file_outside_the_root_is_never_written_even_by_a_rollback_of_an_edited_saved_plan() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("march.toml", |t| format!("{t}\n[notify]\nfile = \"../notices/march.md\"\n"));
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    let output = checkout.bf(&["apply", "--auto-approve", "-q"]);
    assert!(output.status.success(), "{}", said(&output));
    assert!(checkout.repo().join("notices/march.md").exists(), "the notice inside the root is written");
    // The saved plan's text edited to send the rollback's notice out of the repository.
    let saved = checkout.repo().join(".bf/plan.json");
    let mut edited: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let text =
        edited["plan_file"]["text"].as_str().unwrap().replace("../notices/march.md", "../../outside.md");
    edited["plan_file"]["text"] = text.into();
    std::fs::write(&saved, edited.to_string()).unwrap();
    let before = checkout.untouched().0;
    let output = checkout.bf(&["rollback", "--auto-approve"]);
    assert!(output.status.success(), "the rollback itself goes ahead: {}", said(&output));
    assert!(
        said(&output).contains("notice NOT delivered")
            && said(&output).contains("the one the backfill was applied from"),
        "{}",
        said(&output)
    );
    assert!(said(&output).contains("The notice, to pass on by hand"), "{}", said(&output));
    assert_eq!(checkout.untouched().0, before, "nothing written beside the repository");

    // A saved plan planted whole: its text hashed to match, its plan file named outside the
    // checkout (whose folder would be the root): still no file written, no notice sent.
    for args in [&["plan", &plan.display().to_string(), "-q"][..], &["apply", "--auto-approve", "-q"]] {
        let output = checkout.bf(args);
        assert!(output.status.success(), "{args:?}: {}", said(&output));
    }
    let mut planted: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let text = planted["plan_file"]["text"].as_str().unwrap().replace("../notices/march.md", "../outside.md");
    planted["plan_file"]["sha256"] = bf::rehearse::plan::sha256_hex(text.as_bytes()).into();
    planted["plan_file"]["text"] = text.into();
    planted["plan_file"]["path"] = checkout.root().join("zz/plan.toml").display().to_string().into();
    std::fs::write(&saved, planted.to_string()).unwrap();
    let output = checkout.bf(&["rollback", "--auto-approve"]);
    assert!(output.status.success(), "the rollback itself goes ahead: {}", said(&output));
    assert!(said(&output).contains("the one the backfill was applied from"), "{}", said(&output));
    assert_eq!(checkout.untouched().0, before, "nothing written beside the repository");
}

/// The notice of a rollback goes where the plan the backfill was applied from says, checked against
/// the table's ledger, not the working tree: the plan file edited after the apply (a comment added
/// in a later pull request) still gets its notice, written inside the root.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_file_edited_after_its_apply_still_gets_its_rollbacks_notice() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("march.toml", |t| format!("{t}\n[notify]\nfile = \"../notices/march.md\"\n"));
    for args in [&["plan", &plan.display().to_string(), "-q"][..], &["apply", "--auto-approve", "-q"]] {
        let output = checkout.bf(args);
        assert!(output.status.success(), "{args:?}: {}", said(&output));
    }
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(&plan, format!("{text}# Reloaded in March; see the notice.\n")).unwrap();
    let output = checkout.bf(&["rollback", "--auto-approve"]);
    assert!(output.status.success(), "{}", said(&output));
    assert!(said(&output).contains("notice written to"), "{}", said(&output));
    let notice = std::fs::read_to_string(checkout.repo().join("notices/march.md")).unwrap();
    assert!(notice.contains("rolled back"), "{notice}");
}

/// The seal cannot be switched off by the saved plan itself: its format edited down with the records
/// that format lacks deleted, a slice's blast radius deleted under a failed guard, a failed check
/// flipped to `passed`, or an empty `BF_PLAN_KEY` — each refused, nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn the_seal_is_not_switched_off_by_what_the_saved_plan_says() {
    let checkout = Checkout::new().await;
    let original = planned(&checkout, &[]).await;
    let mut older = original.clone();
    older["format"] = 4.into();
    older["inputs"].as_array_mut().unwrap().clear();
    for field in ["table_id", "pre_commit_sha256"] {
        older["target"].as_object_mut().unwrap().remove(field);
    }
    apply_refused(&checkout, &older, "the table holds no backfill of it to finish", "a format edited down");

    // A failed guard on what the apply rewrites, its numbers deleted with its verdict flipped.
    let capped = checkout.plan("capped.toml", |t| t + "\n[guards]\nmax_bytes_rewritten = \"1 B\"\n");
    let output = checkout.bf(&["plan", &capped.display().to_string(), "-q"]);
    assert_eq!(output.status.code(), Some(1), "the guard fails: {}", said(&output));
    let mut erased: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    erased["slices"][0].as_object_mut().unwrap().remove("blast_radius");
    erased.as_object_mut().unwrap().remove("blast_radius");
    erased["guards"][0]["passed"] = true.into();
    erased["problems"] = serde_json::json!([]);
    apply_refused(&checkout, &erased, "slice 1 has no record of the files it publishes", "a radius deleted");

    // A failed check flipped: its verdict is its offending count's.
    let checked = checkout.plan("checked.toml", |t| {
        t + "\n[[checks]]\nname = \"no euros\"\nsql = \"SELECT * FROM slice WHERE currency = 'EUR'\"\n"
    });
    let output = checkout.bf(&["plan", &checked.display().to_string(), "-q"]);
    assert_eq!(output.status.code(), Some(1), "the check fails: {}", said(&output));
    let mut flipped: Value =
        serde_json::from_str(&std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap())
            .unwrap();
    let check =
        flipped["checks"].as_array_mut().unwrap().iter_mut().find(|c| c["name"] == "no euros").unwrap();
    assert_eq!(check["passed"], false, "{check}");
    check["passed"] = true.into();
    flipped["problems"] = serde_json::json!([]);
    apply_refused(&checkout, &flipped, "check `no euros` failed on slice 1", "a check flipped");

    // An empty key is an error, at plan and at apply, never "no key".
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf_with(&["plan", &plan.display().to_string(), "-q"], &[("BF_PLAN_KEY", "")]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(said(&output).contains("BF_PLAN_KEY is set but empty"), "{}", said(&output));
    let mut signed = planned(&checkout, &[("BF_PLAN_KEY", "operator-key")]).await;
    signed["signature"] = "hmac-sha256:00".into();
    save(&checkout, &signed);
    let tables = snapshot(&checkout.repo().join("warehouse"));
    let output = checkout.bf_with(&["apply", "--auto-approve"], &[("BF_PLAN_KEY", " ")]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(said(&output).contains("BF_PLAN_KEY is set but empty"), "{}", said(&output));
    assert_eq!(snapshot(&checkout.repo().join("warehouse")), tables, "a table was written");
}

/// A saved plan planted in a checkout's state dir — the other team's own, byte for byte, with a key
/// file beside it — does not choose what an operator's `bf rollback` there undoes: the table's
/// commits carry the receipt of the state dir that applied them, which the planted key does not
/// match. Named, the backfill is undone; from its own state dir, without being named.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_saved_plan_never_chooses_what_rollback_undoes() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("march.toml", |t| t);
    let theirs = checkout.root().join("other-team-state");
    let theirs = theirs.to_str().unwrap();
    for args in [&["plan", &plan.display().to_string(), "-q"][..], &["apply", "--auto-approve", "-q"]] {
        let output = checkout.bf_with(args, &[("BF_STATE_DIR", theirs)]);
        assert!(output.status.success(), "{args:?}: {}", said(&output));
    }
    let state = checkout.repo().join(".bf");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::copy(Path::new(theirs).join("plan.json"), state.join("plan.json")).unwrap();
    std::fs::write(state.join("key"), "0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
    let table = checkout.repo().join("warehouse/orders");
    let before = snapshot(&table);

    let output = checkout.bf(&["rollback", "--auto-approve"]);
    let text = said(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("none of its slices was applied from this state dir"), "{text}");
    assert!(text.contains("--backfill"), "the command that names it: {text}");
    assert_eq!(snapshot(&table), before, "nothing written to the table");

    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("plan.json")).unwrap()).unwrap();
    let id = saved["id"].as_str().unwrap();
    let output = checkout.bf_with(&["rollback", "--auto-approve"], &[("BF_STATE_DIR", theirs)]);
    assert!(output.status.success(), "from the state dir that applied it: {}", said(&output));
    assert!(said(&output).contains(id), "{}", said(&output));
    assert_ne!(snapshot(&table), before, "rolled back");
}
