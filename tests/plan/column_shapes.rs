//! What changed, per column: the plan names each column's change by its shape, so a reviewer
//! reading one line learns that revenue was divided by 100 in Germany only and that every start
//! time lost its milliseconds, where the totals moved by a sum and the samples showed five rows.

use crate::common::servers::python;
use crate::common::{bf_in, write_plan};

/// The sessions table, as the Python `deltalake` package writes it: start times with milliseconds,
/// names with stray spaces.
fn sessions(table: &std::path::Path) {
    python(
        &format!(
            "import datetime, deltalake, pyarrow as pa\n\
             rows = [(1,'DE',1250.0,'2026-03-01 09:00:00.250',' Anna','2026-03-01'),\n\
                     (2,'DE',990.0,'2026-03-01 10:30:00.500','Ben','2026-03-01'),\n\
                     (3,'FR',12.5,'2026-03-01 11:00:00.125','Chloé ','2026-03-01'),\n\
                     (4,'FR',8.0,'2026-03-01 12:00:00.999','Dan','2026-03-01'),\n\
                     (5,'DE',4000.0,'2026-03-02 08:00:00.001','Eva','2026-03-02'),\n\
                     (6,'NL',7.25,'2026-03-02 09:15:00.750','Finn','2026-03-02'),\n\
                     (7,'NL',3.0,'2026-03-02 13:45:00.300','Gus','2026-03-02'),\n\
                     (8,'FR',5.5,'2026-03-02 18:00:00.050','Hana','2026-03-02')]\n\
             ts = lambda s: datetime.datetime.fromisoformat(s).replace(tzinfo=datetime.timezone.utc)\n\
             t = pa.table({{'session_id': pa.array([r[0] for r in rows], pa.int64()),\n\
                           'country': [r[1] for r in rows], 'revenue': [r[2] for r in rows],\n\
                           'started_at': pa.array([ts(r[3]) for r in rows], pa.timestamp('us', tz='UTC')),\n\
                           'name': [r[4] for r in rows],\n\
                           'session_date': [datetime.date.fromisoformat(r[5]) for r in rows]}})\n\
             deltalake.write_deltalake({:?}, t)\n",
            table.to_str().unwrap()
        ),
        &[],
    );
}

/// The raw export the reload reads: German revenue in cents divided once more by 100 (the bug this
/// plan would ship), start times to the second, names trimmed.
const EXPORT: &str = "session_id,country,revenue,started_at,name,session_date
1,DE,12.5,2026-03-01 09:00:00,Anna,2026-03-01
2,DE,9.9,2026-03-01 10:30:00,Ben,2026-03-01
3,FR,12.5,2026-03-01 11:00:00,Chloé,2026-03-01
4,FR,8.0,2026-03-01 12:00:00,Dan,2026-03-01
5,DE,40.0,2026-03-02 08:00:00,Eva,2026-03-02
6,NL,7.25,2026-03-02 09:15:00,Finn,2026-03-02
7,NL,3.0,2026-03-02 13:45:00,Gus,2026-03-02
8,FR,5.5,2026-03-02 18:00:00,Hana,2026-03-02
";

const PLAN: &str = r#"reason = "Reload 1-2 March sessions from the raw export."
[target]
table = "sessions"
date_column = "session_date"
key = ["session_id"]
[window]
start = 2026-03-01
end = 2026-03-02
[slicing]
every = "day"
[source]
inputs.export = { path = "export.csv", format = "csv" }
query = """
SELECT session_id, country, revenue, CAST(started_at AS TIMESTAMP) AS started_at, name,
       CAST(session_date AS DATE) AS session_date
FROM export
"""
[diff]
by = ["country"]
"#;

#[test]
fn each_columns_change_is_named_by_its_shape_and_the_group_it_is_confined_to() {
    let dir = tempfile::tempdir().unwrap();
    sessions(&dir.path().join("sessions"));
    std::fs::write(dir.path().join("export.csv"), EXPORT).unwrap();
    let plan_file = write_plan(dir.path(), "reload.toml", PLAN);
    let output = bf_in(dir.path()).arg("plan").arg(&plan_file).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let lines = [
        "revenue: 3 rows divided by exactly 100, all country = DE",
        "started_at: 8 rows lost their milliseconds",
        "name: 2 rows trimmed of spaces",
    ];
    let per_column = text.split("What changed, per column:\n").nth(1).unwrap_or_else(|| panic!("{text}"));
    for line in lines {
        assert!(per_column.contains(&format!("  {line}\n")), "{line}: {text}");
    }
    assert!(!per_column.contains("country:"), "an unchanged column is not listed: {text}");

    let markdown = bf_in(dir.path()).args(["show", "--format", "markdown"]).output().unwrap();
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    let title_end = markdown.find("**Plan**").unwrap();
    for line in lines {
        let written = bf::markdown::text(line);
        let at = markdown.find(&format!("- {written}\n")).unwrap_or_else(|| panic!("{line}: {markdown}"));
        assert!(at < title_end, "under the title, never cut: {markdown}");
    }

    // Each slice says its own: the first day's German rows, and the second's.
    let saved = bf_in(dir.path()).args(["show", "--json"]).output().unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&saved.stdout).unwrap();
    let revenue = |slice: usize| {
        saved["slices"][slice]["changes"]["column_changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["column"] == "revenue")
            .cloned()
            .unwrap()
    };
    assert_eq!(revenue(0)["rows"], 2);
    assert_eq!(revenue(1)["rows"], 1);
    assert_eq!(revenue(0)["shape"]["what"], "divided by exactly 100");
    assert_eq!(revenue(1)["within"], "country = DE");
}
