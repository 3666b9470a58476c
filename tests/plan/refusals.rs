//! What a plan refuses or fails on, writing nothing: errors naming what is wrong, source rows with no
//! date or outside the window, a date column that is not a DATE, a failed check or guard.

use super::*;

/// A plan that must be refused: exit 1, the message, no saved plan, the target untouched.
fn refused(workspace: &Path, plan: &Path, target: &Path, fragment: &str) {
    let untouched = snapshot(target);
    bf_in(workspace).arg("plan").arg(plan).assert().code(1).stderr(predicate::str::contains(fragment));
    assert!(!workspace.join(".bf/plan.json").exists(), "a refused plan must not be saved");
    assert_eq!(snapshot(target), untouched);
}

#[test]
fn errors_name_what_is_wrong_and_write_nothing() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    // The reload alone: its variants move the target, which the downstream plan would no longer read.
    let march =
        crate::common::without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    let variant = |name: &str, from: &str, to: &str| {
        assert!(march.contains(from), "{from}");
        write_plan(&root.join("plans"), name, &march.replace(from, to))
    };

    let plan = variant("a_file.toml", "warehouse/orders_silver\"", "landing/fx_rates.csv\"");
    refused(root, &plan, &silver, "landing/fx_rates.csv is a file; a Delta table is a folder");
    std::fs::create_dir_all(root.join("bf-demo/warehouse/empty")).unwrap();
    let plan = variant("not_delta.toml", "warehouse/orders_silver\"", "warehouse/empty\"");
    refused(root, &plan, &silver, "is not a Delta table");
    let plan = variant("missing.toml", "warehouse/orders_silver\"", "warehouse/nowhere\"");
    refused(root, &plan, &silver, "warehouse/nowhere: no such folder");
    let plan = variant("no_column.toml", "date_column = \"order_date\"", "date_column = \"ordered_on\"");
    refused(root, &plan, &silver, "the table has no column `ordered_on`");
    refused(root, &plan, &silver, "did you mean `order_date`?");
    let plan = variant("not_a_date.toml", "date_column = \"order_date\"", "date_column = \"customer\"");
    refused(root, &plan, &silver, "`customer` in");
    let plan = variant("columns.toml", "       o.currency,\n", "       o.currency AS currency_code,\n");
    refused(root, &plan, &silver, "`currency` (STRING) is in the table but not in the query");
    let plan = variant("parallel.toml", "every = \"month\"", "every = \"day\"\nparallel = 4");
    refused(root, &plan, &silver, "ConcurrentAppend");

    // Text where the table holds a number is refused before any slice runs, naming the column.
    let plan = variant(
        "text.toml",
        "SELECT o.order_id,",
        "SELECT CONCAT('#', CAST(o.order_id AS VARCHAR)) AS order_id,",
    );
    refused(
        root,
        &plan,
        &silver,
        "`order_id` is STRING in the query but BIGINT in the table: text becomes a number",
    );
    // Cast by the query itself, a value that does not cast fails the slice, naming it and the value.
    let plan = variant(
        "cast.toml",
        "SELECT o.order_id,",
        "SELECT CAST(CONCAT('#', CAST(o.order_id AS VARCHAR)) AS BIGINT) AS order_id,",
    );
    refused(root, &plan, &silver, "Cannot cast string '#");
    // Two source rows for one key refuse the merge plan, naming keys; nothing reaches the target.
    let plan = variant("dupes.toml", "mode = \"replace\"", "mode = \"merge\"");
    let text = std::fs::read_to_string(&plan).unwrap().replace("JOIN fx ON o.currency = fx.currency\n", "JOIN fx ON o.currency = fx.currency\nUNION ALL SELECT order_id, customer, amount, currency, amount AS amount_eur, CAST(ordered_at AS DATE) AS order_date FROM orders\n");
    std::fs::write(&plan, text).unwrap();
    refused(
        root,
        &plan,
        &silver,
        "the source has several rows for 409 keys, and a merge needs one row per key",
    );

    let daily = root.join("bf-demo/warehouse/orders_daily");
    std::fs::remove_file(root.join("bf-demo/landing/orders/2026-09-17.csv")).unwrap();
    refused(root, &root.join("plans/september.toml"), &daily, "slice 17 (2026-09-17): input `orders` reads");
}

#[test]
fn source_rows_with_a_null_date_make_the_plan_unappliable() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let nulls = march.replace(
        "CAST(o.ordered_at AS DATE) AS order_date",
        "CASE WHEN o.order_id % 100 = 0 THEN NULL ELSE CAST(o.ordered_at AS DATE) END AS order_date",
    );
    let plan = write_plan(&root.join("plans"), "nulls.toml", &nulls);
    let output = bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let saved: Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected = corrected_march(&root.join("bf-demo")).iter().filter(|r| r.0 % 100 == 0).count();
    assert_eq!(saved["slices"][0]["source"]["null_date"], expected);
    let problem = format!("{expected} source rows have a NULL order_date");
    assert!(
        saved["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with(&problem)),
        "{}",
        saved["problems"]
    );
    let silver = root.join("bf-demo/warehouse/orders_silver");
    crate::common::refused_with_its_problems_erased(
        root,
        &silver,
        "source rows have a NULL date: no slice writes them",
    );
}

#[test]
fn source_rows_outside_the_window_fail_the_plan_naming_their_days_unless_its_guard_allows_them() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let untouched = snapshot(&silver);
    // A query that shifts every date by a day, as a wrong time zone would: March 31 lands in April.
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    // Shifted, March 1 holds no order: that its day empties is allowed here, in both tables.
    let shifted = march
        .replace(
            "CAST(o.ordered_at AS DATE) AS order_date",
            "CAST(o.ordered_at AS DATE) + INTERVAL '1 day' AS order_date",
        )
        .replace("[guards]\n", "[guards]\nallow_empty_slices = true\n");
    let downstream = root.join("plans/march-revenue-by-day.toml");
    let by_day = std::fs::read_to_string(&downstream).unwrap();
    std::fs::write(&downstream, format!("{by_day}\n[guards]\nallow_empty_slices = true\n")).unwrap();
    let last_day = std::fs::read_to_string(root.join("bf-demo/landing/orders_march.csv"))
        .unwrap()
        .lines()
        .filter(|l| l.split(',').nth(4).is_some_and(|t| t.starts_with("2026-03-31")))
        .count();
    assert!(last_day > 1, "the shop has orders on March 31");

    let plan = write_plan(&root.join("plans"), "shifted.toml", &shifted);
    let output = bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let saved: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(saved["slices"][0]["source"]["outside_window"], last_day);
    assert_eq!(saved["outside_days"], serde_json::json!([{ "day": "2026-04-01", "rows": last_day }]));
    // The guard names how many rows and which days, first among the problems a reviewer reads.
    let problem = format!(
        "guard allow_rows_outside_window failed: {last_day} rows the queries return fall outside the window \
         2026-03-01..2026-03-31, on 2026-04-01 ({last_day}): no slice writes them"
    );
    let problems = saved["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p.as_str().unwrap().starts_with(&problem)), "{problems:?}");
    let text = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains(&format!("Source rows not written: {last_day} outside the window")), "{text}");
    // The pull request's comment names them too, under the title.
    let markdown = bf_in(root).args(["show", "--format", "markdown"]).output().unwrap();
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    let named = format!("outside the window 2026-03-01..2026-03-31, on 2026-04-01 ({last_day})");
    assert!(markdown.contains(&named) && markdown.contains("allow_rows_outside_window"), "{markdown}");
    bf_in(root).args(["apply", "--auto-approve"]).assert().code(1).stderr(predicate::str::contains(&problem));
    assert_eq!(snapshot(&silver), untouched);
    crate::common::refused_with_its_problems_erased(root, &silver, "guard allow_rows_outside_window failed");

    // Its days and its guard erased as well: the slices' counts still hold the rows.
    let saved_path = root.join(".bf/plan.json");
    let mut erased: Value = serde_json::from_str(&std::fs::read_to_string(&saved_path).unwrap()).unwrap();
    erased.as_object_mut().unwrap().remove("outside_days");
    erased["guards"].as_array_mut().unwrap().retain(|g| g["name"] != "allow_rows_outside_window");
    erased["problems"] = serde_json::json!([]);
    std::fs::write(&saved_path, erased.to_string()).unwrap();
    bf_in(root).args(["apply", "--auto-approve"]).assert().code(1).stderr(predicate::str::contains(
        "its days outside the window do not hold the rows its slices return there",
    ));
    assert_eq!(snapshot(&silver), untouched);

    // The fix the problem suggests works: the query wrapped, filtered on the column it computes.
    let problem_text = problems.iter().find_map(|p| p.as_str().filter(|p| p.starts_with(&problem))).unwrap();
    let wrap = problem_text.split("— ").nth(1).unwrap().split("—").next().unwrap().trim();
    assert_eq!(wrap, "SELECT * FROM (<the query>) WHERE order_date BETWEEN $start AND $end");
    let (head, rest) = shifted.split_once("query = \"\"\"\n").unwrap();
    let (query, tail) = rest.split_once("\"\"\"").unwrap();
    let wrapped =
        format!("{head}query = \"\"\"\n{}\n\"\"\"{tail}", wrap.replace("<the query>", query.trim()));
    let plan = write_plan(&root.join("plans"), "wrapped.toml", &wrapped);
    let fixed = plan_json(&bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap());
    assert_eq!(fixed["slices"][0]["source"]["outside_window"], 0, "{wrapped}");
    assert!(!fixed["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("outside")));

    // Saying so in `[guards]` (or with the older `[source] outside_window = "skip"`) makes them a
    // guard that passes, still naming them.
    let allowing = shifted.replace("[guards]\n", "[guards]\nallow_rows_outside_window = true\n");
    let older = shifted.replace("\n[write]", "outside_window = \"skip\"\n\n[write]");
    for (name, text) in [("allowing.toml", allowing), ("older.toml", older)] {
        let plan = write_plan(&root.join("plans"), name, &text);
        let saved = plan_json(&bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap());
        assert_eq!(saved["slices"][0]["source"]["outside_window"], last_day);
        assert!(
            !saved["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("outside"))
        );
        let guard =
            saved["guards"].as_array().unwrap().iter().find(|g| g["name"] == "allow_rows_outside_window");
        let guard = guard.unwrap_or_else(|| panic!("{name}: {}", saved["guards"]));
        assert_eq!(guard["passed"], true, "{name}");
        assert!(guard["detail"].as_str().unwrap().contains("on 2026-04-01"), "{name}: {guard}");
    }
    assert_eq!(snapshot(&silver), untouched);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timestamp_or_text_date_column_is_refused_saying_why() {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema, TimeUnit};
    use bf::deltalake::kernel::{DataType, PrimitiveType, StructField};

    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let columns = vec![
        StructField::new("order_id", DataType::LONG, true),
        StructField::new("ordered_at", DataType::Primitive(PrimitiveType::Timestamp), true),
        StructField::new("day", DataType::STRING, true),
    ];
    let table = crate::common::new_table(&events, columns, &[]).await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("ordered_at", ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("day", ArrowType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![1_772_323_200_000_000, 1_772_409_600_000_000])
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from(vec!["2026-03-01", "2026-03-02"])),
        ],
    )
    .unwrap();
    table.write(vec![batch]).await.unwrap();
    let untouched = snapshot(&events);

    std::fs::write(dir.path().join("orders.csv"), "order_id,ordered_at,day\n").unwrap();
    for (column, fragment) in [
        ("ordered_at", "`ordered_at` in"),
        ("ordered_at", "is TIMESTAMP, but the window filters on a DATE column"),
        ("ordered_at", "depend on a time zone"),
        ("day", "is STRING, but the window filters on a DATE column"),
        ("day", "text dates compare as text"),
    ] {
        let plan = crate::common::VALID_PLAN
            .replace("../warehouse/orders_silver", "events")
            .replace("date_column = \"order_date\"", &format!("date_column = \"{column}\""))
            .replace("SELECT order_id, amount, order_date FROM orders", "SELECT * FROM orders");
        let plan = write_plan(dir.path(), "events.toml", &plan);
        bf_in(dir.path()).arg("plan").arg(&plan).assert().code(1).stderr(predicate::str::contains(fragment));
        assert!(!dir.path().join(".bf/plan.json").exists());
        assert_eq!(snapshot(&events), untouched);
    }
}

#[test]
fn a_failed_check_or_guard_makes_the_plan_fail_and_unappliable() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let strict = march
        .replace(
            "sql = \"SELECT * FROM slice WHERE amount <= 0\"",
            "sql = \"SELECT * FROM slice WHERE currency = 'GBP'\"",
        )
        .replace("rows = 5, revenue = 10", "rows = 0.5, revenue = 1");
    let plan = write_plan(&root.join("plans"), "strict.toml", &strict);
    let output = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("✗ amounts are positive"), "{stdout}");
    assert!(stdout.contains("✗ max_change_pct.revenue"), "{stdout}");
    assert!(stdout.contains("revenue changes +5.4% (limit ±1%)"), "{stdout}");
    assert!(stdout.contains("the row count changes −0.7% (limit ±0.5%)"), "{stdout}");
    assert!(stdout.contains("This plan cannot be applied"), "{stdout}");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let problems = saved["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 3, "{problems:?}");
    let gbp = corrected_march(&root.join("bf-demo")).iter().filter(|r| r.1 == "GBP").count();
    let check =
        saved["checks"].as_array().unwrap().iter().find(|c| c["name"] == "amounts are positive").unwrap();
    assert_eq!(check["offending"], gbp);
    assert_eq!(check["sample"].as_array().unwrap().len(), 3);
}
