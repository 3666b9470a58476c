//! The value gate: with samples off, no error bf prints quotes a value of the data, whichever way the
//! engine fails on it (docs/SECURITY.md, "The value gate"). Every query below fails while it runs,
//! over an input holding a marker value (with a quote in it, which threw the old quote-pairing off).

use super::*;

const MARKER: &str = "FAKE-MARKER-7731";
/// A number only the data holds, quoted by a cast's message with the text beside it.
const MARKER_NUMBER: &str = "4242427731";

/// The queries a hostile pull request would write to make the engine print the data in an error.
fn failing_queries() -> Vec<(&'static str, String)> {
    let columns = "order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date";
    vec![
        (
            "a pattern made of a whole column (regex error, unquoted)",
            format!(
                "SELECT {columns} FROM orders WHERE regexp_like('a', (SELECT string_agg(customer, ',') FROM orders) || '(')"
            ),
        ),
        (
            "a cast of the value",
            "SELECT order_id, CAST(CAST(customer AS INT) AS VARCHAR) AS customer, amount, currency, \
             CAST(order_date AS DATE) AS order_date FROM orders"
                .to_owned(),
        ),
        (
            "a timestamp parsed from the value",
            format!("SELECT {columns} FROM orders WHERE to_timestamp(customer) IS NOT NULL"),
        ),
        (
            "the value as a date",
            format!("SELECT {columns} FROM orders WHERE arrow_cast(customer, 'Date32') IS NOT NULL"),
        ),
        (
            "the value as a decimal",
            format!("SELECT {columns} FROM orders WHERE CAST(customer AS DECIMAL(10, 2)) > 0"),
        ),
        (
            "the value as JSON's number, quoting the row's other number",
            format!(
                "SELECT {columns} FROM orders WHERE CAST(concat(CAST(order_id AS VARCHAR), customer) AS BIGINT) > 0"
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn no_error_quotes_a_value_when_samples_are_off() {
    let checkout = Checkout::new().await;
    std::fs::write(
        checkout.repo().join("landing/orders.csv"),
        format!(
            "order_id,customer,amount,currency,order_date\n\
             {MARKER_NUMBER},\"O'Brien {MARKER}, 123-45-6789\",20.0,EUR,2026-03-03\n1,C01,10.0,EUR,2026-03-02\n"
        ),
    )
    .unwrap();
    let mut leaked_with_samples = 0;
    for (i, (what, query)) in failing_queries().into_iter().enumerate() {
        let plan = checkout.plan(&format!("q{i}.toml"), |t| {
            let line = t.lines().find(|l| l.starts_with("query = ")).unwrap().to_owned();
            t.replace(&line, &format!("query = {}", toml_string(&query)))
        });
        for (args, env) in [(&["--samples", "none"][..], &[][..]), (&[][..], &[("BF_SAMPLES", "none")][..])] {
            let mut argv = vec!["plan", plan.to_str().unwrap()];
            argv.extend_from_slice(args);
            let output = checkout.bf_with(&argv, env);
            let text = said(&output);
            assert_eq!(output.status.code(), Some(1), "{what}: the query must fail:\n{text}");
            for value in [MARKER, MARKER_NUMBER, "Brien", "6789"] {
                assert!(!text.contains(value), "{what}: `{value}` printed with samples off:\n{text}");
            }
            assert!(text.contains("withheld"), "{what}: says a message was withheld:\n{text}");
            assert!(
                text.contains("source.query") || text.contains("slice 1"),
                "{what}: names its place:\n{text}"
            );
        }
        // With samples shown, the engine's message is whole: this test would see a leak.
        let output = checkout.bf(&["plan", plan.to_str().unwrap()]);
        let text = said(&output);
        if [MARKER, MARKER_NUMBER].iter().any(|value| text.contains(value)) {
            leaked_with_samples += 1;
        }
    }
    assert!(
        leaked_with_samples >= 5,
        "the queries do make the engine quote the data ({leaked_with_samples})"
    );
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}
