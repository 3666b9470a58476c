//! The second reader: DuckDB's Delta extension, which reads through delta-kernel-rs, not the
//! deltalake crate bf writes with — a second implementation of the protocol reading what bf wrote.
//!
//! Loading the two extensions costs DuckDB half a second of CPU, a query on a test's table about
//! 15 ms, and the suite asks hundreds of questions: a fresh Python process for each kept one of
//! the machine's two cores busy loading extensions (docs/BENCHMARKS.md, "Building and testing from
//! a fresh clone"). So a question about a table on disk goes to a reader kept from the last one —
//! one database with the extensions loaded, a new connection to it per question, DuckDB's caches
//! of files off — and a question with setup statements (a store's secret, which would outlive
//! it in a kept database) to a process of its own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

/// DuckDB and its Delta extension (and httpfs, which the extension needs for `s3://`), pinned.
pub const DUCKDB_PACKAGES: [&str; 3] =
    ["duckdb==1.5.5", "duckdb-extension-delta==1.5.5", "duckdb-extension-httpfs==1.5.5"];

/// Opens DuckDB with the extensions loaded from the wheels' files, with DuckDB's own installing
/// and autoloading off: nothing is fetched at run time. Then `ask(table, setup, sql)` answers one
/// question on a connection of its own, returning the rows or raising DuckDB's error.
const DUCKDB_OPEN: &str = r#"
import json, os, sys
import duckdb, duckdb_extension_delta, duckdb_extension_httpfs
assert duckdb.__version__ == "1.5.5", duckdb.__version__
db = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for module, name in ((duckdb_extension_httpfs, "httpfs"), (duckdb_extension_delta, "delta")):
    path = os.path.join(os.path.dirname(module.__file__), "extensions", "v" + duckdb.__version__, name + ".duckdb_extension")
    db.execute("LOAD '" + path.replace("'", "''") + "'")
# What a kept database has read must not answer for what a table holds now.
db.execute("SET enable_external_file_cache = false")

def ask(table, setup, sql):
    con = db.cursor()
    try:
        # No progress bar: on a busy machine a query past two seconds printed one on stdout.
        con.execute("SET enable_progress_bar = false")
        for statement in setup:
            con.execute(statement)
        con.execute("CREATE TEMP VIEW t AS SELECT * FROM delta_scan('" + table.replace("'", "''") + "')")
        rows = con.execute("SELECT COLUMNS(*)::VARCHAR FROM (" + sql + ")").fetchall()
        return [["NULL" if v is None else v for v in row] for row in rows]
    finally:
        con.close()
"#;

/// One question, its answer on stdout; DuckDB's error fails the process.
const DUCKDB_ONCE: &str = r#"
print(json.dumps(ask(os.environ["BF_DUCKDB_TABLE"], json.loads(os.environ["BF_DUCKDB_SETUP"]), os.environ["BF_DUCKDB_SQL"])))
"#;

/// A question a line on stdin (`[table, sql]`), an answer a line on stdout (`{"rows": …}` or
/// `{"error": …}`), until stdin closes: when the test process ends, so does the reader.
const DUCKDB_KEPT: &str = r#"
for line in sys.stdin:
    table, sql = json.loads(line)
    try:
        answer = {"rows": ask(table, [], sql)}
    except Exception as error:
        answer = {"error": str(error)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"#;

/// The venv holding [`DUCKDB_PACKAGES`], made once per machine (`~/.cache/bf-duckdb-venv`, or
/// `BF_DUCKDB_VENV`).
pub fn duckdb_venv() -> PathBuf {
    super::python_venv(
        "BF_DUCKDB_VENV",
        "bf-duckdb-venv",
        "import duckdb, duckdb_extension_delta, duckdb_extension_httpfs",
        &DUCKDB_PACKAGES,
    )
}

/// A reader kept between questions: its process and both ends of its pipe.
struct Reader {
    _process: Child,
    questions: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl Reader {
    fn start() -> Reader {
        let mut process = Command::new(duckdb_venv().join("python"))
            .args(["-c", &format!("{DUCKDB_OPEN}{DUCKDB_KEPT}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let questions = process.stdin.take().unwrap();
        let answers = BufReader::new(process.stdout.take().unwrap());
        Reader { _process: process, questions, answers }
    }

    /// The answer's line, or nothing when the reader is gone (it is then not kept).
    fn ask(&mut self, table: &str, sql: &str) -> Option<serde_json::Value> {
        let question = serde_json::to_string(&(table, sql)).unwrap();
        writeln!(self.questions, "{question}").ok()?;
        let mut answer = String::new();
        match self.answers.read_line(&mut answer) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&answer).unwrap()),
        }
    }
}

/// The readers not answering a question now; a test thread takes one or starts one.
static IDLE: Mutex<Vec<Reader>> = Mutex::new(Vec::new());

/// What `sql` returns over the Delta table at `table` (a folder or an `s3://` URI), registered as
/// `t`, read by DuckDB's Delta extension after the `setup` statements (a `CREATE SECRET` for a
/// store): each row's values as DuckDB casts them to text (NULL as `NULL`) joined by `|`, the rows
/// sorted. Fails the test if DuckDB cannot read the table.
pub fn duckdb_query(table: &str, setup: &[String], sql: &str) -> Vec<String> {
    let rows: Vec<Vec<String>> = match setup.is_empty() {
        true => kept_reader_rows(table, sql),
        false => own_process_rows(table, setup, sql),
    };
    let mut rows: Vec<String> = rows.into_iter().map(|row| row.join("|")).collect();
    rows.sort();
    rows
}

fn kept_reader_rows(table: &str, sql: &str) -> Vec<Vec<String>> {
    let taken = IDLE.lock().unwrap().pop();
    let mut reader = taken.unwrap_or_else(Reader::start);
    let answer =
        reader.ask(table, sql).unwrap_or_else(|| panic!("DuckDB's reader ended asked `{sql}` on {table}"));
    IDLE.lock().unwrap().push(reader);
    if let Some(error) = answer.get("error") {
        panic!("DuckDB could not run `{sql}` on {table}:\n{}", error.as_str().unwrap_or_default());
    }
    serde_json::from_value(answer["rows"].clone()).unwrap()
}

fn own_process_rows(table: &str, setup: &[String], sql: &str) -> Vec<Vec<String>> {
    let output = Command::new(duckdb_venv().join("python"))
        .args(["-c", &format!("{DUCKDB_OPEN}{DUCKDB_ONCE}")])
        .env("BF_DUCKDB_TABLE", table)
        .env("BF_DUCKDB_SQL", sql)
        .env("BF_DUCKDB_SETUP", serde_json::to_string(setup).unwrap())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "DuckDB could not run `{sql}` on {table}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// [`duckdb_query`] on the table in the folder `table`.
pub fn duckdb_rows(table: &Path, sql: &str) -> Vec<String> {
    duckdb_query(table.to_str().unwrap(), &[], sql)
}

/// The single integer `sql` returns over the table in `table`, read by DuckDB's Delta extension.
pub fn duckdb_count(table: &Path, sql: &str) -> i64 {
    let rows = duckdb_rows(table, sql);
    assert_eq!(rows.len(), 1, "{sql} returns one row: {rows:?}");
    rows[0].parse().unwrap_or_else(|_| panic!("{sql} returns one integer, not {}", rows[0]))
}
