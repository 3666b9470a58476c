//! The Spark dialect judged by Spark itself: every query of the corpus (`corpus.toml`) run by
//! pyspark 4.0 on this machine's Java (session time zone UTC, ANSI mode on; the tests' shared
//! session, `common/spark.rs`) and by the session bf
//! runs a `dialect = "spark"` plan's SQL in, over the same input Spark wrote: Parquet, and CSV and
//! JSON read with their columns said. bf gives Spark's rows, fails where Spark fails, or refuses
//! the query at validation — never other rows.
//! And one plan end to end through the real binary, its rows read back by DuckDB.

use std::collections::BTreeMap;
use std::path::Path;

use bf::deltalake::arrow::array::{Array, RecordBatch};
use bf::deltalake::arrow::util::display::array_value_to_string;
use bf::deltalake::datafusion::prelude::{ParquetReadOptions, SessionContext};
use bf::plan_file::Dialect;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
struct Case {
    name: String,
    sql: String,
}

/// What an engine answered: its rows, each cell a canonical string, or that it failed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Answer {
    Rows(Vec<Vec<String>>),
    Error(String),
}

/// The formats the corpus's input is read in, each by both engines: Parquet as Spark types it,
/// CSV and JSON with their columns said (a plan's `schema`, Spark's `DataFrameReader.schema`).
const FORMATS: [&str; 3] = ["parquet", "csv", "json"];

/// Spark's answers to every case in every format (`csv/<case>`, `json/<case>`; Parquet's by the
/// case alone), and the folder holding the inputs it wrote.
fn spark_answers(cases: &[Case], dir: &Path) -> BTreeMap<String, Answer> {
    let started = std::time::Instant::now();
    let answers = crate::common::spark::spark_corpus(&serde_json::to_value(cases).unwrap(), dir, &FORMATS);
    eprintln!("Spark answered {} cases in {:.1} s", cases.len(), started.elapsed().as_secs_f64());
    let raw: BTreeMap<String, serde_json::Value> = serde_json::from_value(answers).unwrap();
    raw.into_iter()
        .map(|(name, answer)| {
            let answer = match answer.get("rows") {
                Some(rows) => Answer::Rows(serde_json::from_value(rows.clone()).unwrap()),
                None => Answer::Error(answer["error"].as_str().unwrap_or_default().to_owned()),
            };
            (name, answer)
        })
        .collect()
}

/// One cell as `run_spark.py` writes Spark's: NULL, numbers as Python prints them, dates and
/// timestamps in ISO form without a zone, arrays and structs bracketed.
fn cell(array: &dyn Array, row: usize) -> String {
    use bf::deltalake::arrow::datatypes::DataType;
    if array.is_null(row) {
        return "NULL".to_owned();
    }
    let shown = array_value_to_string(array, row).unwrap();
    match array.data_type() {
        DataType::Float64 | DataType::Float32 => {
            let value: f64 = shown.parse().unwrap();
            python_float(value)
        }
        DataType::Timestamp(..) => shown.trim_end_matches('Z').trim_end_matches("+00:00").to_owned(),
        _ => shown,
    }
}

/// A float as Python's `repr` prints it: the shortest form that reads back, with a `.0` on whole
/// numbers.
fn python_float(value: f64) -> String {
    let shown = format!("{value:?}");
    match shown.contains(['.', 'e', 'i', 'N']) {
        true => shown,
        false => format!("{shown}.0"),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    batches
        .iter()
        .flat_map(|batch| {
            (0..batch.num_rows())
                .map(move |row| batch.columns().iter().map(|c| cell(c.as_ref(), row)).collect())
        })
        .collect()
}

/// bf's answer over the input in `format`: refused at validation (`None`), or what the Spark
/// dialect's session returns. CSV and JSON are read as bf reads an input with a `schema`.
async fn bf_answer(case: &Case, inputs: &Path, format: &str) -> Option<Answer> {
    use bf::deltalake::datafusion::prelude::{CsvReadOptions, JsonReadOptions};
    if bf::plan_file::read_only::check_query(&case.sql, Dialect::Spark).is_err() {
        return None;
    }
    let state = bf::dialect::speaking(bf::delta::memory::session_state(None), Dialect::Spark);
    let ctx = SessionContext::new_with_state(state);
    let folder = inputs.join(format);
    let path = folder.join("sessions").display().to_string();
    let schema = || {
        let columns = std::fs::read_to_string(folder.join("sessions.schema")).unwrap();
        bf::plan_file::input_schema::parse(&columns).unwrap()
    };
    match format {
        "parquet" => ctx.register_parquet("sessions", &path, ParquetReadOptions::default()).await.unwrap(),
        "csv" => {
            let schema = schema();
            let options = CsvReadOptions::new().has_header(true).file_extension(".csv").schema(&schema);
            ctx.register_csv("sessions", &path, options).await.unwrap()
        }
        _ => {
            let schema = schema();
            let options =
                JsonReadOptions { file_extension: ".json", schema: Some(&schema), ..Default::default() };
            ctx.register_json("sessions", &path, options).await.unwrap()
        }
    }
    let answer = match ctx.sql(&case.sql).await {
        Ok(frame) => match frame.collect().await {
            Ok(batches) => Answer::Rows(rows(&batches)),
            Err(e) => Answer::Error(e.to_string()),
        },
        Err(e) => Answer::Error(e.to_string()),
    };
    Some(answer)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_query_of_the_corpus_gives_sparks_rows_or_is_refused() {
    let corpus: Corpus = toml::from_str(include_str!("corpus.toml")).unwrap();
    assert!(corpus.case.len() >= 40, "the corpus holds {} queries", corpus.case.len());
    let dir = tempfile::tempdir().unwrap();
    let spark = spark_answers(&corpus.case, dir.path());
    let (mut equal, mut failed_alike, mut refused, mut failed, mut different) =
        (0, 0, vec![], vec![], vec![]);
    let runs = FORMATS.iter().flat_map(|format| corpus.case.iter().map(move |case| (*format, case)));
    for (format, case) in runs {
        let key = match format {
            "parquet" => case.name.clone(),
            _ => format!("{format}/{}", case.name),
        };
        let theirs = &spark[&key];
        match (bf_answer(case, &dir.path().join("inputs"), format).await, theirs) {
            // Refused at validation, naming what: never run.
            (None, _) => refused.push(key),
            (Some(Answer::Rows(ours)), Answer::Rows(theirs)) if &ours == theirs => equal += 1,
            (Some(Answer::Error(_)), Answer::Error(_)) => failed_alike += 1,
            // Spark answers, bf's plan stops with an error: no row written, the error says why.
            (Some(Answer::Error(why)), Answer::Rows(_)) => {
                failed.push(format!("{key}: {}", first_line(&why)))
            }
            // Other rows than Spark's, or rows where Spark fails: what must never happen.
            (Some(ours), theirs) => different.push(format!("{key}:\n  Spark: {theirs:?}\n  bf:    {ours:?}")),
        }
    }
    eprintln!(
        "Spark corpus of {} queries in {} formats: {equal} equal, {failed_alike} failing in both, {} refused at \
         validation ({}), {} stopped by an error ({}), {} different",
        corpus.case.len(),
        FORMATS.len(),
        refused.len(),
        refused.join(", "),
        failed.len(),
        failed.join("; "),
        different.len()
    );
    assert!(
        different.is_empty(),
        "{} queries gave other rows than Spark's:\n{}",
        different.len(),
        different.join("\n")
    );
}

/// A plan in Spark SQL, end to end through the real binary: the three idioms that gave other rows
/// in DataFusion's SQL (a Java pattern, `/` of integers into a decimal, `split(…)[0]`) land as
/// Spark writes them, read back by DuckDB; `bf validate` refuses what the dialect cannot mean.
#[tokio::test(flavor = "multi_thread")]
async fn a_spark_sql_plan_lands_spark_rows() {
    use crate::common::{bf_in, duckdb_rows, orders_table, write_plan};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("plans")).unwrap();
    std::fs::create_dir_all(root.join("landing")).unwrap();
    let table = root.join("warehouse/orders");
    orders_table(&table, false, &[&[(1, "C01", 10.0, "USD", "2026-03-02")]]).await;
    std::fs::write(
        root.join("landing/orders.csv"),
        "order_id,revenue_cents,tags,order_date\n1,1999,\"EUR,USD\",2026-03-02\n2,7,GBP,2026-03-15\n",
    )
    .unwrap();
    let plan = |query: &str| {
        crate::common::march_orders_plan(&format!(
            "dialect = \"spark\"\ninputs.orders = {{ path = \"../landing/orders.csv\", format = \"csv\", \
             schema = \"order_id BIGINT, revenue_cents BIGINT, tags STRING, order_date DATE\" }}\n\
             query = \"\"\"\n{query}\n\"\"\""
        ))
    };
    let query = "SELECT order_id, date_format(`order_date`, 'yyyy-MM') AS customer, revenue_cents / 100 AS amount, \
                 split(tags, ',')[0] AS currency, CAST(order_date AS DATE) AS order_date FROM orders";
    // Where the change is, by currency: bf's own queries of the breakdown run in the plan's dialect
    // beside its metric, and name the currencies, not the column's name.
    let by_currency =
        "\n[diff]\nby = [\"currency\"]\n\n[[metrics]]\nname = \"amount\"\nsql = \"SUM(`amount`)\"\n";
    write_plan(&root.join("plans"), "march.toml", &(plan(query) + by_currency));
    let planned = bf_in(root).args(["plan", "plans/march.toml", "--json"]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let saved: serde_json::Value = serde_json::from_slice(&planned.stdout).unwrap();
    let moves: Vec<(String, String)> = saved["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["metric"] == "amount")
        .map(|row| (row["from"].to_string(), row["to"].to_string()))
        .collect();
    assert_eq!(
        moves,
        [("[\"USD\"]".to_owned(), "[\"EUR\"]".to_owned()), ("null".to_owned(), "[\"GBP\"]".to_owned())],
        "{}",
        saved["breakdown"]
    );
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(
        duckdb_rows(&table, "SELECT order_id, customer, amount, currency FROM t ORDER BY order_id"),
        ["1|2026-03|19.99|EUR", "2|2026-03|0.07|GBP"],
        "the rows Spark writes"
    );
    let refused = "SELECT order_id, to_char(order_date, 'yyyy') AS customer, 1.0 AS amount, 'EUR' AS currency, \
                   CAST(order_date AS DATE) AS order_date FROM orders";
    write_plan(&root.join("plans"), "refused.toml", &plan(refused));
    bf_in(root)
        .args(["validate", "plans/refused.toml"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("`to_char(…)`: Spark's `to_char` formats"));
    // A CSV input whose columns the plan leaves to inference: refused at its line, before it runs.
    let inferred = plan(query)
        .replace(", schema = \"order_id BIGINT, revenue_cents BIGINT, tags STRING, order_date DATE\"", "");
    write_plan(&root.join("plans"), "inferred.toml", &inferred);
    bf_in(root)
        .args(["validate", "plans/inferred.toml"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("in the Spark dialect a Csv input says its columns"))
        .stderr(predicates::str::contains("plans/inferred.toml:"));
}
