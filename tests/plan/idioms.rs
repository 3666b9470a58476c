//! Three idioms a Spark user writes every week, in bf's default dialect (DataFusion SQL): each gave
//! silently wrong rows, planned "ok". Now each gives the right rows, or is refused or warned about
//! where the plan says it.

use super::*;

/// The orders table of the checkout, one March order; the corrected orders as CSV with cents.
async fn workspace(csv: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("plans")).unwrap();
    std::fs::create_dir_all(dir.path().join("landing")).unwrap();
    orders_table(&dir.path().join("warehouse/orders"), false, &[&[(1, "C01", 10.0, "USD", "2026-03-02")]])
        .await;
    std::fs::write(dir.path().join("landing/orders.csv"), csv).unwrap();
    dir
}

fn plan_with(query: &str) -> String {
    crate::common::march_orders_plan(&format!(
        "inputs.orders = {{ path = \"../landing/orders.csv\", format = \"csv\" }}\nquery = \"\"\"\n{query}\n\"\"\""
    ))
}

const CSV: &str = "order_id,customer,amount,currency,order_date\n\
                   1,C01,1234567.89,EUR,2026-03-02\n2,C02,123456.78,EUR,2026-03-03\n3,C03,10.00,EUR,2026-03-04\n";

/// `WHERE amount = 1234567.89` on a DECIMAL(18,2) value: read as a DOUBLE the literal matched
/// nothing (smaller ones happened to); read as the decimal it is written as, it matches its row.
#[tokio::test(flavor = "multi_thread")]
async fn a_decimal_literal_matches_the_decimal_it_is_written_as() {
    let dir = workspace(CSV).await;
    let query = "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders \
                 WHERE CAST(amount AS DECIMAL(18, 2)) IN (1234567.89, 123456.78)";
    write_plan(&dir.path().join("plans"), "march.toml", &plan_with(query));
    bf_in(dir.path()).args(["plan", "plans/march.toml", "-q"]).assert().success();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["slices"][0]["source"]["in_slice"], 2, "both amounts matched: {}", saved["slices"][0]);
}

/// A Java pattern handed to `date_format` printed its letters on every row; it is refused at
/// `bf validate`, at the query's line, with chrono's spelling to write.
#[tokio::test(flavor = "multi_thread")]
async fn a_java_date_pattern_is_refused_with_the_pattern_to_write() {
    let dir = workspace(CSV).await;
    let query = "SELECT order_id, date_format(CAST(order_date AS TIMESTAMP), 'yyyy-MM') AS customer, \
                 CAST(amount AS DOUBLE) AS amount, currency, CAST(order_date AS DATE) AS order_date FROM orders";
    write_plan(&dir.path().join("plans"), "march.toml", &plan_with(query));
    for verb in ["validate", "plan"] {
        bf_in(dir.path())
            .args([verb, "plans/march.toml"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("'yyyy-MM' is a Java date pattern"))
            .stderr(predicate::str::contains("write '%Y-%m'"))
            .stderr(predicate::str::contains("plans/march.toml:17:"));
    }
    assert!(!dir.path().join(".bf/plan.json").exists());
}

/// `CAST(cents / 100 AS DECIMAL(18,2))` divides integers before the cast (1999 becomes 19.00): the
/// plan says so, naming the division.
#[tokio::test(flavor = "multi_thread")]
async fn an_integer_division_made_fractional_is_a_warning_naming_it() {
    let csv = "order_id,customer,cents,currency,order_date\n1,C01,1999,EUR,2026-03-02\n";
    let dir = workspace(csv).await;
    let query = "SELECT order_id, customer,\n       CAST(cents / 100 AS DECIMAL(18, 2)) AS amount, currency, \
                 CAST(order_date AS DATE) AS order_date FROM orders";
    let text = plan_with(query);
    write_plan(&dir.path().join("plans"), "march.toml", &text);
    // Named at its line of the plan file, the query's second.
    let line = text.lines().position(|l| l.contains("CAST(cents / 100")).unwrap() + 1;
    bf_in(dir.path()).args(["plan", "plans/march.toml"]).assert().success().stdout(predicate::str::contains(
        format!("plans/march.toml:{line}: `orders.cents / 100` divides an integer by an integer"),
    ));
    let cast = "SELECT order_id, customer, CAST(cents AS DOUBLE) / 100 AS amount, currency, \
                CAST(order_date AS DATE) AS order_date FROM orders";
    write_plan(&dir.path().join("plans"), "march.toml", &plan_with(cast));
    bf_in(dir.path())
        .args(["plan", "plans/march.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains("divides an integer by an integer").not());
}
