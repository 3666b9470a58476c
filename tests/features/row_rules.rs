//! Rules a row must keep and columns bf computes or carries: CHECK constraints and invariants,
//! generated columns, a variant column byte for byte.

use super::*;

/// CHECK constraints and invariants are deltalake's to enforce on every row it writes; bf's part
/// is that `bf plan` fails at the rehearsal — not `bf apply` — and says which rule and which row,
/// where deltalake only says "1 rows failed validation check".
#[tokio::test(flavor = "multi_thread")]
async fn a_row_breaking_a_check_constraint_or_an_invariant_fails_the_plan_naming_both() {
    for partitioned in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        let mut columns = orders_columns();
        columns[3] = StructField::new("currency", DataType::STRING, true).with_metadata([(
            "delta.invariants",
            r#"{"expression":{"expression":"currency IN ('EUR', 'USD')"}}"#,
        )]);
        orders_table_with(&table, partitioned, columns, &[], &[&ORDERS]).await;
        open_table(&table)
            .await
            .add_constraint()
            .with_constraint("positive_amount", "amount > 0")
            .await
            .unwrap();
        let protocol = last_protocol(&table);
        assert!(protocol["minWriterVersion"].as_i64().unwrap() >= 3, "{protocol}");
        let original = python_rows(&table, "order_id,amount,currency,order_date");

        let broken = [
            (
                "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
                 3,C3,-5.0,USD,2026-03-02\n",
                ["slice 2 (2026-03-02", "CHECK constraint `positive_amount` (amount > 0)", "order_id = 3"],
            ),
            (
                "order_id,customer,amount,currency,order_date\n1,C1,11.0,GBP,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
                 3,C3,33.0,USD,2026-03-02\n",
                [
                    "slice 1 (2026-03-01",
                    "invariant on `currency` (currency IN ('EUR', 'USD'))",
                    "currency = GBP",
                ],
            ),
        ];
        for (csv, fragments) in broken {
            std::fs::write(dir.path().join("fixed.csv"), csv).unwrap();
            for mode in ["replace", "merge"] {
                reload_plan(dir.path(), mode, ORDER_COLUMNS);
                let untouched = snapshot(&table);
                let planned = run(dir.path(), &["plan", "plan.toml", "-q"]);
                assert_eq!(planned.status.code(), Some(1), "partitioned {partitioned}, {mode}");
                let stderr = String::from_utf8_lossy(&planned.stderr);
                for fragment in fragments {
                    assert!(stderr.contains(fragment), "{mode}: `{fragment}` in: {stderr}");
                }
                assert_eq!(snapshot(&table), untouched, "a refused plan leaves the table as it was");
            }
        }

        // Rows that keep the rules go through; the rules still hold in what was written.
        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
             3,C3,33.0,USD,2026-03-02\n",
        )
        .unwrap();
        reload_plan(dir.path(), "replace", ORDER_COLUMNS);
        ok(dir.path(), &["plan", "plan.toml", "-q"]);
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        assert_eq!(
            python_rows(&table, "order_id,amount,currency,order_date"),
            [
                "1|11.0|EUR|2026-03-01",
                "2|22.0|EUR|2026-03-01",
                "3|33.0|USD|2026-03-02",
                "4|40.0|USD|2026-03-03"
            ]
        );
        ok(dir.path(), &["rollback", "--auto-approve"]);
        assert_eq!(python_rows(&table, "order_id,amount,currency,order_date"), original);
    }
}

/// A generated column: a query that leaves it out gets it computed by the table, for the new rows
/// and the rows a merge keeps; a query that supplies a value the table would not compute is
/// refused at the rehearsal, naming the column. A generation that is not a function of its row
/// (`now()`) is refused before anything is cloned: rows a slice keeps would no longer match it.
#[tokio::test(flavor = "multi_thread")]
async fn a_generated_column_is_computed_when_left_out_and_a_wrong_value_is_refused() {
    let cents = || {
        let mut columns = orders_columns();
        columns.push(
            StructField::new("amount_cents", DataType::LONG, true)
                .with_metadata([("delta.generationExpression", "CAST(amount * 100 AS BIGINT)")]),
        );
        columns
    };
    for partitioned in [false, true] {
        for (mode, after) in [
            ("replace", &["1|11.0|1100", "3|33.0|3300", "4|40.0|4000"][..]),
            ("merge", &["1|11.0|1100", "2|20.0|2000", "3|33.0|3300", "4|40.0|4000"][..]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("orders");
            orders_table_with(&table, partitioned, cents(), &[], &[&ORDERS]).await;
            let original = python_rows(&table, "order_id,amount,amount_cents");
            assert_eq!(original, ["1|10.0|1000", "2|20.0|2000", "3|30.0|3000", "4|40.0|4000"]);

            // A wrong value is refused, naming the column and the row.
            std::fs::write(
                dir.path().join("fixed.csv"),
                "order_id,customer,amount,currency,order_date,amount_cents\n1,C1,11.0,EUR,2026-03-01,1100\n\
                 3,C3,33.0,USD,2026-03-02,3000\n",
            )
            .unwrap();
            reload_plan(dir.path(), mode, &format!("{ORDER_COLUMNS}, amount_cents"));
            let untouched = snapshot(&table);
            let refused = run(dir.path(), &["plan", "plan.toml", "-q"]);
            assert_eq!(refused.status.code(), Some(1));
            let stderr = String::from_utf8_lossy(&refused.stderr);
            assert!(
                stderr.contains(
                    "generated column `amount_cents` (GENERATED ALWAYS AS CAST(amount * 100 AS BIGINT))"
                ) && stderr.contains("order_id = 3")
                    && stderr.contains("amount_cents = 3000"),
                "{stderr}"
            );
            assert_eq!(snapshot(&table), untouched);

            // Left out, it is computed.
            reload_plan(dir.path(), mode, ORDER_COLUMNS);
            ok(dir.path(), &["plan", "plan.toml", "-q"]);
            ok(dir.path(), &["apply", "--auto-approve", "-q"]);
            assert_eq!(python_rows(&table, "order_id,amount,amount_cents"), after, "{mode}");
            ok(dir.path(), &["rollback", "--auto-approve", "--window-only"]);
            assert_eq!(python_rows(&table, "order_id,amount,amount_cents"), original, "{mode}");
        }
    }

    // A generation that is not a function of its row.
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    let mut columns = orders_columns();
    columns.push(
        StructField::new("loaded_on", DataType::DATE, true)
            .with_metadata([("delta.generationExpression", "CAST(now() AS DATE)")]),
    );
    orders_table_with(&table, false, columns, &[], &[&ORDERS]).await;
    std::fs::write(dir.path().join("fixed.csv"), "order_id,customer,amount,currency,order_date\n").unwrap();
    reload_plan(dir.path(), "replace", ORDER_COLUMNS);
    let untouched = snapshot(&table);
    let refused = run(dir.path(), &["plan", "plan.toml", "-q"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("bf cannot write")
            && stderr.contains("generated column `loaded_on` (GENERATED ALWAYS AS CAST(now() AS DATE))")
            && stderr.contains("not a function of the row"),
        "{stderr}"
    );
    assert_eq!(snapshot(&table), untouched);
    assert!(!dir.path().join("orders__rehearsal").exists(), "refused before the clone");
}

/// A variant value as Parquet stores it unshredded: the metadata (version 1, an empty dictionary)
/// and the value (a basic short string, `"hello"` style).
fn variant_string(text: &str) -> (Vec<u8>, Vec<u8>) {
    let metadata = vec![0x01, 0x00, 0x00];
    let mut value = vec![((text.len() as u8) << 2) | 0x01];
    value.extend_from_slice(text.as_bytes());
    (metadata, value)
}

/// Variant columns (unshredded, as `struct<metadata: binary, value: binary>`): a backfill whose
/// source copies the column from a Delta input writes the same bytes back; the files bf's slices
/// write hold the variant's two binary fields, read raw; rollback restores the old values.
#[tokio::test(flavor = "multi_thread")]
async fn a_variant_column_is_carried_through_a_backfill_byte_for_byte() {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, BinaryArray, Date32Array, Int64Array, RecordBatch, StructArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType as Arrow, Date32Type, Field, Fields, Schema};
    use bf::deltalake::protocol::SaveMode;
    for (partitioned, write, rollback) in [
        (false, "replace", FULL),
        (false, "merge", WINDOW_ONLY),
        (true, "replace", FULL),
        (true, "merge", WINDOW_ONLY),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("events");
        let columns = vec![
            StructField::new("id", DataType::LONG, true),
            StructField::new("payload", DataType::unshredded_variant(), true),
            StructField::new("day", DataType::DATE, true),
        ];
        let parts: &[&str] = if partitioned { &["day"] } else { &[] };
        let created = crate::common::new_table(&table, columns, parts).await;
        let protocol = last_protocol(&table);
        assert!(protocol["writerFeatures"].to_string().contains("variantType"), "{protocol}");
        let rows = |texts: &[(i64, &str, &str)]| {
            let fields = Fields::from(vec![
                Field::new("metadata", Arrow::Binary, false),
                Field::new("value", Arrow::Binary, false),
            ]);
            let encoded: Vec<(Vec<u8>, Vec<u8>)> = texts.iter().map(|t| variant_string(t.1)).collect();
            let payload = StructArray::new(
                fields.clone(),
                vec![
                    Arc::new(BinaryArray::from_iter_values(encoded.iter().map(|e| e.0.clone()))) as ArrayRef,
                    Arc::new(BinaryArray::from_iter_values(encoded.iter().map(|e| e.1.clone()))),
                ],
                None,
            );
            let schema = Schema::new(vec![
                Field::new("id", Arrow::Int64, true),
                Field::new("payload", Arrow::Struct(fields), true),
                Field::new("day", Arrow::Date32, true),
            ]);
            RecordBatch::try_new(
                Arc::new(schema),
                vec![
                    Arc::new(Int64Array::from_iter_values(texts.iter().map(|t| t.0))),
                    Arc::new(payload),
                    Arc::new(Date32Array::from_iter_values(
                        texts.iter().map(|t| Date32Type::from_naive_date(t.2.parse().unwrap())),
                    )),
                ],
            )
            .unwrap()
        };
        created
            .write(vec![rows(&[(1, "a", "2026-03-01"), (2, "b", "2026-03-02"), (3, "c", "2026-03-03")])])
            .with_save_mode(SaveMode::Append)
            .await
            .unwrap();
        let fixed = dir.path().join("fixed");
        crate::common::new_table(
            &fixed,
            vec![
                StructField::new("id", DataType::LONG, true),
                StructField::new("payload", DataType::unshredded_variant(), true),
                StructField::new("day", DataType::DATE, true),
            ],
            &[],
        )
        .await
        .write(vec![rows(&[(1, "fixed-a", "2026-03-01"), (2, "fixed-b", "2026-03-02")])])
        .with_save_mode(SaveMode::Append)
        .await
        .unwrap();
        write_plan(
            dir.path(),
            "plan.toml",
            &format!(
                "reason = \"Fix the payloads.\"\n[target]\ntable = \"events\"\ndate_column = \"day\"\nkey = [\"id\"]\n\
             [window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n[write]\nmode = \"{write}\"\n\
             [source]\ninputs.src = {{ path = \"fixed\", format = \"delta\" }}\nquery = \"SELECT * FROM src\"\n"
            ),
        );
        let hex = |text: &str| {
            let (metadata, value) = variant_string(text);
            let hex = |bytes: Vec<u8>| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
            format!("{{metadata: {}, value: {}}}", hex(metadata), hex(value))
        };
        let read = |table: &Path| raw_rows(table, "name", &["id", "payload", "day"]);
        let original = [
            format!("1|{}|2026-03-01", hex("a")),
            format!("2|{}|2026-03-02", hex("b")),
            format!("3|{}|2026-03-03", hex("c")),
        ];
        assert_eq!(read(&table), original);
        let planned = ok(dir.path(), &["plan", "plan.toml", "--json", "-q"]);
        let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
        for slice in saved["slices"].as_array().unwrap() {
            assert_eq!(slice["changes"]["changed"], 1, "one payload changed a day: {slice}");
        }
        let sample = saved["slices"][0]["changes"]["samples"][0].to_string();
        let fixed_a = hex("fixed-a");
        let value = fixed_a.split("value: ").nth(1).unwrap().trim_end_matches('}');
        assert!(sample.contains(value), "the diff shows the new value: {sample}");
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        assert_eq!(
            read(&table),
            [
                format!("1|{}|2026-03-01", hex("fixed-a")),
                format!("2|{}|2026-03-02", hex("fixed-b")),
                format!("3|{}|2026-03-03", hex("c"))
            ],
            "partitioned {partitioned}"
        );
        ok(dir.path(), rollback);
        assert_eq!(read(&table), original, "partitioned {partitioned}, {write}");
    }
}

/// A CHECK constraint another writer adds after a backfill can forbid the rows the backfill
/// corrected: order 3's −5.0 on 2 March, fixed by the backfill, breaks `amount > 0`. A window-only
/// rollback used to put 1 March back, then fail at 2 March — half the window rolled back, every
/// rerun failing the same way, and "fix the source" for advice. It now checks every slice's rows of
/// the pre-version against the table's rules before its first write: refused, naming the rule, the
/// slice and the row, the table not written (read by the Python package and DuckDB).
#[tokio::test(flavor = "multi_thread")]
async fn a_rule_added_since_the_backfill_that_the_old_rows_break_stops_the_window_only_rollback_before_it_writes()
 {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("orders");
    let mut wrong = ORDERS;
    wrong[2].2 = -5.0;
    orders_table_with(&table, false, orders_columns(), &[], &[&wrong]).await;
    std::fs::write(
        dir.path().join("fixed.csv"),
        "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n2,C2,22.0,EUR,2026-03-01\n\
         3,C3,30.0,USD,2026-03-02\n",
    )
    .unwrap();
    reload_plan(dir.path(), "replace", ORDER_COLUMNS);
    ok(dir.path(), &["plan", "plan.toml", "-q"]);
    ok(dir.path(), &["apply", "--auto-approve", "-q"]);
    open_table(&table).await.add_constraint().with_constraint("positive_amount", "amount > 0").await.unwrap();
    let backfilled = python_rows(&table, "order_id,amount,order_date");
    assert_eq!(backfilled[2], "3|30.0|2026-03-02");

    let untouched = snapshot(&table);
    let refused = run(dir.path(), &["rollback", "--auto-approve", "--window-only"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    for fragment in [
        "slice 2 (2026-03-02)",
        "CHECK constraint `positive_amount` (amount > 0)",
        "order_id = 3",
        "Nothing was written",
    ] {
        assert!(stderr.contains(fragment), "`{fragment}` in: {stderr}");
    }
    assert!(!stderr.contains("Fix the source"), "{stderr}");
    assert_eq!(snapshot(&table), untouched, "the refused rollback wrote nothing");
    assert_eq!(python_rows(&table, "order_id,amount,order_date"), backfilled);
}
