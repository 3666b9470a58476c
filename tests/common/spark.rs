//! The one Spark session the tests share (`tests/spark/session.py`): Delta Spark as writer and
//! judge of bf's tables, and Spark SQL's answers to the Spark corpus. A session costs ~15 s to
//! start; each test that started its own cost the suite that much again. It starts on first use,
//! serves one request at a time, and ends when this process does (its stdin closes).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

/// How long one request may take: a new machine's first one fetches Delta Spark's jars.
const REQUEST_BOUND: Duration = Duration::from_secs(900);

/// One statement's rows, each cell a string, or Spark's error.
pub type SparkAnswer = Result<Vec<Vec<String>>, String>;

/// One statement's column names and rows, or Spark's error.
pub type NamedAnswer = Result<(Vec<String>, Vec<Vec<String>>), String>;

struct Session {
    _process: Child,
    input: ChildStdin,
    /// The answer lines, read by a thread of their own so that a wait is bounded.
    answers: Receiver<String>,
    next_id: u64,
    /// Spark's own output, kept for a failure's message.
    log: std::path::PathBuf,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Runs `statements` in order in the shared session: each one's rows, or its error (a failing
/// statement does not stop the next).
pub fn spark_sql(statements: &[String]) -> Vec<SparkAnswer> {
    spark_sql_named(statements).into_iter().map(|answer| answer.map(|(_, rows)| rows)).collect()
}

/// [`spark_sql`] with each answer's column names.
pub fn spark_sql_named(statements: &[String]) -> Vec<NamedAnswer> {
    let answers = ask(json!({ "sql": statements }));
    answers
        .as_array()
        .unwrap()
        .iter()
        .map(|answer| match answer.get("rows") {
            Some(rows) => Ok((
                serde_json::from_value(answer["columns"].clone()).unwrap(),
                serde_json::from_value(rows.clone()).unwrap(),
            )),
            None => Err(answer["error"].as_str().unwrap_or("?").to_owned()),
        })
        .collect()
}

/// Makes a Delta table with Delta Spark's `DeltaTableBuilder` (`create` in `tests/spark/session.py`).
pub fn spark_create(spec: Value) {
    let answer = ask(json!({ "create": spec }));
    assert_eq!(answer, json!([]), "Delta Spark's DeltaTableBuilder");
}

/// `DESCRIBE DETAIL` of `table` (a Spark table name: `delta.\`/path\``) by Delta Spark, field by
/// field.
pub fn spark_detail(table: &str) -> std::collections::BTreeMap<String, String> {
    let answer = spark_sql_named(&[format!("DESCRIBE DETAIL {table}")]).remove(0);
    let (columns, rows) = answer.unwrap_or_else(|error| panic!("DESCRIBE DETAIL {table}: {error}"));
    columns.into_iter().zip(rows[0].iter().cloned()).collect()
}

/// `run_spark.corpus_answers`: Spark's answer to each case in each format, its inputs written
/// under `out`.
pub fn spark_corpus(cases: &Value, out: &std::path::Path, formats: &[&str]) -> Value {
    ask(json!({ "corpus": { "cases": cases, "out": out, "formats": formats } }))
}

/// Sends one request and waits, bounded, for its answer.
fn ask(mut request: Value) -> Value {
    let mut held = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let session = held.get_or_insert_with(start);
    session.next_id += 1;
    let id = session.next_id;
    request["id"] = id.into();
    writeln!(session.input, "{request}").expect("the Spark session ended");
    loop {
        let line = session.answers.recv_timeout(REQUEST_BOUND).unwrap_or_else(|_| {
            let log = std::fs::read_to_string(&session.log).unwrap_or_default();
            panic!("the Spark session gave no answer to request {id}; its output:\n{log}")
        });
        let answer: Value = serde_json::from_str(&line).unwrap();
        // An earlier request's answer, left by a test that panicked while it waited: skipped.
        if answer["id"] == id {
            return answer["answers"].clone();
        }
    }
}

fn start() -> Session {
    let bin = super::python_venv(
        "BF_SPARK_VENV",
        "bf-spark-venv",
        "import pyspark, delta.tables",
        &["pyspark==4.0.1", "delta-spark==4.0.1"],
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spark/session.py");
    let log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("spark-session.log");
    let mut process = Command::new(bin.join("python"))
        .arg(script)
        .env_remove("SPARK_HOME")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let input = process.stdin.take().unwrap();
    let output = BufReader::new(process.stdout.take().unwrap());
    let (sender, answers) = channel();
    std::thread::spawn(move || {
        for line in output.lines().map_while(Result::ok) {
            if let Some(answer) = line.strip_prefix("BF-SPARK ")
                && sender.send(answer.to_owned()).is_err()
            {
                break;
            }
        }
    });
    Session { _process: process, input, answers, next_id: 0, log }
}
