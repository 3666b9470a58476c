//! Real tables written by Spark and Databricks (`tests/data/delta-corpus`, their origin in its
//! SOURCES.md): bf reads each or refuses it clearly, writes only those whose protocol it honours, and
//! never changes a byte of the others.

use std::path::{Path, PathBuf};

use bf::deltalake::arrow::datatypes::DataType;
use bf::deltalake::datafusion::prelude::{ParquetReadOptions, SessionContext};
use serde_json::Value;

use crate::common::{bf_in, duckdb_count, duckdb_rows, open_table, repo, snapshot, write_plan};

/// The corpus folder: the one vendored in the repository, or `BF_CORPUS` to point at a larger one
/// (with DAT's expected contents in `delta-corpus-expected` beside it).
fn corpus_dir() -> PathBuf {
    std::env::var_os("BF_CORPUS").map(PathBuf::from).unwrap_or_else(|| repo("tests/data/delta-corpus"))
}

/// What bf must do with each vendored table, stated by hand from the protocol SOURCES.md lists (not
/// from the gate under test): `None` writable, else fragments the refusal must name.
fn expected_gate(name: &str) -> Option<Option<&'static [&'static str]>> {
    Some(match name {
        "dat_basic_append"
        | "golden_basic_with_inserts_deletes_checkpoint"
        | "golden_basic_with_inserts_overwrite_restore"
        | "golden_data_reader_partition_values"
        | "golden_data_reader_timestamp_ntz"
        | "golden_multi_part_checkpoint"
        | "dat_deletion_vectors"
        | "golden_dv_partitioned_with_checkpoint"
        | "kernel_basic_dv_with_checkpoint"
        | "dat_check_constraints"
        | "dat_column_mapping"
        | "golden_table_with_columnmapping_mode_id"
        | "rs_cdf_table"
        // Its domains, liquid clustering and row ids bf honours in the commits it makes itself.
        | "rs_table_with_liquid_clustering"
        // Its identity column is GENERATED ALWAYS: bf makes the values of the rows it writes.
        | "rs_checkpoint_v2_table" => None,
        "dat_multi_partitioned" => Some(&["BINARY partition column `data`"]),
        // Spark let DAT generate `creation` from now(): no rewrite can keep rows matching it.
        "dat_generated_columns" => Some(&["generated column `creation`", "not a function of the row"]),
        _ => return None,
    })
}

/// The rows each vendored table holds at its latest version, deletion vectors applied, stated by
/// hand. DAT's expected contents (`delta-corpus-expected`) give six; all seventeen were counted by
/// two readers that are neither bf nor deltalake, which agree: DuckDB 1.5.5's Delta extension
/// (`SELECT count(*) FROM delta_scan(…)`), and the log replayed by a script (the last checkpoint,
/// classic, multi-part or v2 with its sidecars, then the JSON commits after it, removes before adds)
/// summing the live files' Parquet footer row counts less each file's deletion-vector cardinality.
fn expected_count(name: &str) -> Option<usize> {
    Some(match name {
        "dat_basic_append" => 5,
        "dat_check_constraints" => 5,
        "dat_column_mapping" => 10,
        "dat_deletion_vectors" => 1,
        "dat_generated_columns" => 5,
        "dat_multi_partitioned" => 2,
        "golden_basic_with_inserts_deletes_checkpoint" => 41,
        "golden_basic_with_inserts_overwrite_restore" => 200,
        "golden_data_reader_partition_values" => 3,
        "golden_data_reader_timestamp_ntz" => 9,
        "golden_dv_partitioned_with_checkpoint" => 35,
        "golden_multi_part_checkpoint" => 31,
        "golden_table_with_columnmapping_mode_id" => 6,
        "kernel_basic_dv_with_checkpoint" => 454,
        "rs_cdf_table" => 9,
        "rs_checkpoint_v2_table" => 44,
        "rs_table_with_liquid_clustering" => 10,
        _ => return None,
    })
}

fn corpus() -> Vec<PathBuf> {
    let dir = corpus_dir();
    let mut tables: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "the Delta corpus is not at {} ({e}): unset BF_CORPUS to use the one in tests/data",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("_delta_log").is_dir())
        .collect();
    tables.sort();
    tables
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The versions the log holds a commit file for.
fn commit_versions(table: &Path) -> Vec<u64> {
    let mut versions: Vec<u64> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort();
    versions
}

/// Rows of DAT's expected content of the table's latest version, when DAT gives it.
async fn expected_rows(name: &str) -> Option<usize> {
    let folder = corpus_dir().with_file_name("delta-corpus-expected").join(name).join("latest/table_content");
    if !folder.is_dir() {
        return None;
    }
    let ctx = SessionContext::new();
    let frame = ctx.read_parquet(folder.to_str().unwrap(), ParquetReadOptions::default()).await.ok()?;
    frame.count().await.ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_corpus_table_is_read_or_refused_and_only_writable_ones_are_written() {
    let tables = corpus();
    assert!(tables.len() >= 17, "the corpus has {} tables", tables.len());
    let mut report = Vec::new();
    for source in &tables {
        let name = source.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join(&name);
        copy_dir(source, &table);
        let mut untouched = snapshot(&table);

        // History: every commit the log holds, newest first. Every vendored table is readable (the
        // gate refuses some for writing, none for reading): a failure is a failure. Only a table of
        // a larger corpus (`BF_CORPUS`) that the test states nothing about may be refused, clearly.
        let history = bf_in(dir.path()).args(["history", "--json"]).arg(&table).output().unwrap();
        if !history.status.success() {
            assert!(
                expected_gate(&name).is_none(),
                "{name}: bf history failed: {}",
                String::from_utf8_lossy(&history.stderr)
            );
            let stderr = String::from_utf8_lossy(&history.stderr);
            assert!(
                stderr.contains("feature") || stderr.contains("Unsupported"),
                "{name}: unclear refusal: {stderr}"
            );
            assert_eq!(snapshot(&table), untouched, "{name}");
            report.push(format!("{name}: unreadable ({})", stderr.lines().next().unwrap_or_default()));
            continue;
        }
        let entries: Value = serde_json::from_slice(&history.stdout).unwrap();
        let listed: Vec<u64> =
            entries.as_array().unwrap().iter().map(|e| e["version"].as_u64().unwrap()).rev().collect();
        assert_eq!(listed, commit_versions(&table), "{name}: history lists every commit");

        // The real row count, deletion vectors applied, from deltalake's own scan; DAT agrees.
        let opened = open_table(&table).await;
        let ctx = SessionContext::new();
        ctx.register_table("t", opened.table_provider().await.unwrap()).unwrap();
        let rows = ctx.table("t").await.unwrap().count().await.unwrap();
        if let Some(expected) = expected_rows(&name).await {
            assert_eq!(rows, expected, "{name}: rows as DAT expects");
        }
        match expected_count(&name) {
            Some(expected) => assert_eq!(rows, expected, "{name}: the rows stated by hand"),
            None => assert!(std::env::var_os("BF_CORPUS").is_some(), "{name}: no expected count stated"),
        }
        // DuckDB's Delta extension (delta-kernel-rs) reads the same number of rows.
        assert_eq!(duckdb_count(&table, "SELECT count(*) FROM t") as usize, rows, "{name}: read by DuckDB");

        let schema = bf::delta::table::arrow_schema(&opened).unwrap();
        let date =
            schema.fields().iter().find(|f| f.data_type() == &DataType::Date32).map(|f| f.name().clone());
        let writable = bf::delta::compat::check_writable(&opened).await;
        match (expected_gate(&name), &writable) {
            (Some(None), Err(refusal)) => panic!("{name} must be writable, but the gate refuses: {refusal}"),
            (Some(Some(_)), Ok(())) => {
                panic!("{name} must be refused for writing, but the gate lets it through")
            }
            (Some(Some(fragments)), Err(refusal)) => {
                for fragment in fragments.iter() {
                    assert!(
                        refusal.to_string().contains(fragment),
                        "{name}: the refusal must name {fragment}: {refusal}"
                    );
                }
            }
            (Some(None), Ok(())) => {}
            (None, _) => assert!(
                std::env::var_os("BF_CORPUS").is_some(),
                "{name} is vendored but expected_gate does not say what bf must do with it"
            ),
        }
        // A table without a DATE column gets one the way Spark's ALTER TABLE ADD COLUMNS adds it:
        // in the metadata only, its files untouched and NULL in every row. A window then holds no
        // row, and the slice adds a dated copy of every row: every file is
        // rewritten around them, so every row Spark wrote goes through deltalake's rescue.
        let (plan, dated, added) = match date {
            Some(date) => {
                // A plan over the whole date range that reloads the table's dated rows from itself
                // (rows without a date are outside every window; in a source they would fail the plan).
                let range = ctx
                    .sql(&format!("SELECT CAST(MIN(\"{date}\") AS VARCHAR), CAST(MAX(\"{date}\") AS VARCHAR), COUNT(\"{date}\") FROM t"))
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap();
                let text = |i| {
                    bf::deltalake::arrow::util::display::array_value_to_string(range[0].column(i), 0).unwrap()
                };
                let (start, end, dated) = (text(0), text(1), text(2));
                let plan = format!(
                    "reason = \"Reload {name} from itself.\"\n[target]\ntable = \"{name}\"\ndate_column = \"{date}\"\n\
                     [window]\nstart = {start}\nend = {end}\n[slicing]\nevery = \"year\"\n[guards]\nmax_slices = 1000\n\
                     [source]\ninputs.src = {{ path = \"{name}\", format = \"delta\" }}\nquery = \"SELECT * FROM src WHERE \\\"{date}\\\" IS NOT NULL\"\n"
                );
                (plan, dated.parse::<usize>().unwrap(), 0)
            }
            None if writable.is_ok() => {
                // An identity column GENERATED ALWAYS is left out: bf makes its values.
                let always: Vec<String> =
                    bf::delta::identity::always(&opened).unwrap().into_iter().map(|c| c.column).collect();
                let columns: Vec<String> = schema
                    .fields()
                    .iter()
                    .filter(|f| !always.contains(f.name()))
                    .map(|f| format!("\\\"{}\\\"", f.name()))
                    .collect();
                crate::common::alter_table_with(&table, None, |metadata| {
                    let mut fields: Value =
                        serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
                    fields["fields"].as_array_mut().unwrap().push(
                        serde_json::json!({"name": "bf_day", "type": "date", "nullable": true, "metadata": {}}),
                    );
                    metadata["schemaString"] = Value::from(fields.to_string());
                });
                untouched = snapshot(&table);
                let plan = format!(
                    "reason = \"Add a dated copy of {name}'s rows.\"\n[target]\ntable = \"{name}\"\ndate_column = \"bf_day\"\n\
                     [window]\nstart = 2026-01-01\nend = 2026-01-01\n[slicing]\nevery = \"day\"\n\
                     [source]\ninputs.src = {{ path = \"{name}\", format = \"delta\" }}\n\
                     query = \"SELECT {}, DATE '2026-01-01' AS bf_day FROM src\"\n",
                    columns.join(", ")
                );
                (plan, 0, rows)
            }
            None => {
                report.push(format!("{name}: read, {rows} rows; no DATE column; refused for writing"));
                continue;
            }
        };
        write_plan(dir.path(), "plan.toml", &plan);
        let planned = bf_in(dir.path()).args(["plan", "plan.toml", "--json", "-q"]).output().unwrap();
        match writable {
            Err(refusal) => {
                assert_eq!(planned.status.code(), Some(1), "{name}");
                let stderr = String::from_utf8_lossy(&planned.stderr);
                assert!(
                    stderr.contains("bf cannot write")
                        && expected_gate(&name)
                            .flatten()
                            .unwrap_or_default()
                            .iter()
                            .all(|f| stderr.contains(f)),
                    "{name}: {stderr}"
                );
                assert_eq!(snapshot(&table), untouched, "{name}: a refused table is byte-identical");
                report.push(format!("{name}: read, {rows} rows; refused for writing: {refusal}"));
            }
            Ok(()) => {
                assert!(
                    planned.status.success(),
                    "{name}: {}{}",
                    String::from_utf8_lossy(&planned.stderr),
                    String::from_utf8_lossy(&planned.stdout)
                );
                assert_eq!(snapshot(&table), untouched, "{name}: bf plan wrote to the target");
                let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
                assert_eq!(saved["total"]["before"]["rows"], dated, "{name}: before = dated rows");
                assert_eq!(saved["total"]["after"]["rows"], dated + added, "{name}");
                let original = all_rows(&open_table(&table).await).await;
                // Apply and roll back on the copy: a table bf agrees to write must round-trip.
                let applied = bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).output().unwrap();
                assert!(applied.status.success(), "{name}: {}", String::from_utf8_lossy(&applied.stderr));
                assert_eq!(
                    duckdb_count(&table, "SELECT count(*) FROM t") as usize,
                    rows + added,
                    "{name}: applied, read by DuckDB"
                );
                if added > 0 {
                    // Every row Spark wrote is still there, as it was, and a dated copy of each.
                    let after = all_rows(&open_table(&table).await).await;
                    let (new, kept): (Vec<String>, Vec<String>) =
                        after.into_iter().partition(|r| r.split("|").any(|v| v == "2026-01-01"));
                    assert_eq!(new.len(), added, "{name}");
                    assert_eq!(kept, original, "{name}: the rows rewritten around the slice");
                }
                let rolled = bf_in(dir.path()).args(["rollback", "--auto-approve"]).output().unwrap();
                assert!(rolled.status.success(), "{name}: {}", String::from_utf8_lossy(&rolled.stderr));
                let after = open_table(&table).await;
                let ctx = SessionContext::new();
                ctx.register_table("t", after.table_provider().await.unwrap()).unwrap();
                assert_eq!(ctx.table("t").await.unwrap().count().await.unwrap(), rows, "{name}: round trip");
                assert_eq!(all_rows(&after).await, original, "{name}: rolled back row for row");
                assert_eq!(
                    duckdb_count(&table, "SELECT count(*) FROM t") as usize,
                    rows,
                    "{name}: rolled back, read by DuckDB"
                );
                let how = if added > 0 { " (a DATE column added as ALTER TABLE does)" } else { "" };
                report.push(format!("{name}: read, {rows} rows; planned, applied and rolled back{how}"));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
}

/// The gate fails closed: a table whose state bf cannot read (here: never loaded, so it has no
/// snapshot) is refused, saying so, instead of passing as "asks nothing".
#[tokio::test(flavor = "multi_thread")]
async fn the_writer_gate_refuses_a_table_it_cannot_read() {
    let source = corpus_dir().join("dat_basic_append");
    let url = url::Url::from_directory_path(source.canonicalize().unwrap()).unwrap();
    let unloaded = bf::deltalake::DeltaTableBuilder::from_url(url).unwrap().build().unwrap();
    let refusal =
        bf::delta::compat::check_writable(&unloaded).await.expect_err("an unreadable table is refused");
    assert!(
        matches!(refusal, bf::delta::compat::Unsupported::Unreadable { what: "snapshot", .. }),
        "{refusal}"
    );
    assert!(refusal.to_string().contains("cannot be read"), "{refusal}");
}

/// The table's rows as text, sorted: equal vectors mean equal contents, duplicates included.
async fn all_rows(table: &bf::deltalake::DeltaTable) -> Vec<String> {
    use bf::deltalake::arrow::util::display::array_value_to_string;
    let ctx = SessionContext::new();
    let batches = ctx.read_table(table.table_provider().await.unwrap()).unwrap().collect().await.unwrap();
    let mut rows: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                (0..b.num_columns())
                    .map(|c| array_value_to_string(b.column(c), r).unwrap())
                    .collect::<Vec<_>>()
                    .join("|")
            })
        })
        .collect();
    rows.sort();
    rows
}

/// A shallow clone of Spark's deletion-vector tables reads exactly the rows the table reads: the
/// vectors, stored beside the table, resolve from the clone, for files it references and for files
/// it copied in.
#[tokio::test(flavor = "multi_thread")]
async fn a_shallow_clone_of_a_table_with_deletion_vectors_reads_the_rows_the_table_reads() {
    let stores = bf::delta::store::Stores::from_environment();
    for (name, date_column) in [
        ("dat_deletion_vectors", Some("date")),
        ("golden_dv_partitioned_with_checkpoint", None),
        ("kernel_basic_dv_with_checkpoint", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&corpus_dir().join(name), &dir.path().join("table"));
        let source = open_table(&dir.path().join("table")).await;
        let rows = all_rows(&source).await;
        if let Some(expected) = expected_rows(name).await {
            assert_eq!(rows.len(), expected, "{name}: DAT's row count, deletion vectors applied");
        }
        let localized = date_column.map(|column| {
            let window = bf::window::Window {
                start: "1900-01-01".parse().unwrap(),
                end: "2999-12-31".parse().unwrap(),
            };
            (column, window)
        });
        // Every table referenced in place; the one with a DATE column also with its files copied in.
        for localize in localized.into_iter().map(Some).chain([None]) {
            let clone_dir = dir.path().join(if localize.is_some() { "localized" } else { "referenced" });
            let url = bf::delta::store::folder_url(&clone_dir).unwrap();
            let mut clone = bf::rehearse::clone::ShallowClone::new(&source, url, &stores);
            if let Some((column, window)) = localize {
                clone = clone.with_localized_days(column, vec![window]);
            }
            let metrics = clone.execute().await.unwrap();
            if localize.is_some() {
                assert!(metrics.files_localized > 0, "{name}: the window's files were copied in");
            }
            // Read back by deltalake itself, not through bf.
            let cloned = open_table(&clone_dir).await;
            assert_eq!(all_rows(&cloned).await, rows, "{name}, {}", clone_dir.display());
        }
    }
}

/// The commit at `version` removes one file, and its remove names the file's deletion vector (which
/// deletes `cardinality` rows), as the protocol requires.
fn assert_removes_one_file_naming_its_vector(table: &Path, version: u64, cardinality: u64) {
    let removed = actions(table, version, "remove");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(
        removed[0]["deletionVector"]["cardinality"], cardinality,
        "the remove names the vector: {removed:?}"
    );
}

/// Runs `bf rollback …` in `dir` and checks the table holds `original` again, row for row.
async fn rolled_back_to(dir: &Path, rollback: &[&str], table: &Path, original: &[String]) {
    let rolled = bf_in(dir).args(rollback).output().unwrap();
    assert!(rolled.status.success(), "{rollback:?}: {}", String::from_utf8_lossy(&rolled.stderr));
    assert_eq!(all_rows(&open_table(table).await).await, original, "{rollback:?}");
}

/// Every action of one kind (`add`, `remove`) in a table's commit, read raw from its log.
fn actions(table: &Path, version: u64, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(table.join(format!("_delta_log/{version:020}.json")))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?.get(kind).cloned())
        .collect()
}

/// dat_deletion_vectors holds one file of five rows whose vector deletes four: kept (b, 228,
/// 1978-12-01); deleted 1983-04-01, 1997-01-01, 2017-05-01, 2017-09-01. A window over 1975–1985 holds
/// the live row and a deleted one, and deleted rows lie after it, so replacing the window rewrites the
/// file and must rescue the rows outside it through the vector: a deleted row that came back would be
/// data bf made up. (A window whose rows are all deleted, such as the 1990s, rewrites nothing.)
#[tokio::test(flavor = "multi_thread")]
async fn rows_a_deletion_vector_deletes_stay_deleted_through_plan_apply_and_both_rollbacks() {
    // (write mode, rollback, the rows after apply): a merge keeps the live row whose key the source
    // lacks; a replace swaps the window's rows.
    let full: &[&str] = &["rollback", "--auto-approve"];
    let window_only: &[&str] = &["rollback", "--auto-approve", "--window-only"];
    let runs: [(&str, &[&str], &[&str]); 3] = [
        ("replace", full, &["z|7|1980-06-01"]),
        ("replace", window_only, &["z|7|1980-06-01"]),
        ("merge", full, &["b|228|1978-12-01", "z|7|1980-06-01"]),
    ];
    for (mode, rollback, after) in runs {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t");
        copy_dir(&corpus_dir().join("dat_deletion_vectors"), &table);
        let original = all_rows(&open_table(&table).await).await;
        assert_eq!(original, ["b|228|1978-12-01"]);
        std::fs::write(dir.path().join("fixed.csv"), "letter,int,date\nz,7,1980-06-01\n").unwrap();
        write_plan(
            dir.path(),
            "plan.toml",
            &format!(
                "reason = \"Reload 1975 to 1985.\"\n[target]\ntable = \"t\"\ndate_column = \"date\"\n\
                 key = [\"letter\", \"int\"]\n[window]\nstart = 1975-01-01\nend = 1985-12-31\n\
                 [slicing]\nevery = \"4018 days\"\n[write]\nmode = \"{mode}\"\n\
                 [source]\ninputs.src = {{ path = \"fixed.csv\", format = \"csv\" }}\n\
                 query = \"SELECT letter, int, CAST(date AS DATE) AS date FROM src\"\n\
                 [guards]\nallow_empty_slices = true\n"
            ),
        );
        let planned = bf_in(dir.path()).args(["plan", "plan.toml", "--json", "-q"]).output().unwrap();
        assert!(planned.status.success(), "{mode}: {}", String::from_utf8_lossy(&planned.stderr));
        let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
        assert_eq!(saved["total"]["before"]["rows"], 1, "the row the vector deletes in 1983 is not counted");
        assert_eq!(saved["total"]["after"]["rows"], after.len());
        assert_eq!(saved["outside_window"]["unchanged"], true, "{}", saved["outside_window"]);
        assert_eq!(all_rows(&open_table(&table).await).await, original, "bf plan wrote to the table");

        let applied = bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).output().unwrap();
        assert!(applied.status.success(), "{mode}: {}", String::from_utf8_lossy(&applied.stderr));
        assert_eq!(all_rows(&open_table(&table).await).await, after, "{mode}: no deleted row came back");
        let duckdb = duckdb_rows(&table, "SELECT letter, int, date FROM t");
        assert_eq!(duckdb, after, "{mode}: read by DuckDB, no deleted row came back");
        assert_removes_one_file_naming_its_vector(&table, 3, 4);
        rolled_back_to(dir.path(), rollback, &table, &original).await;
        assert_eq!(
            duckdb_rows(&table, "SELECT letter, int, date FROM t"),
            original,
            "{rollback:?}: by DuckDB"
        );
        if rollback.len() == 2 {
            // The RESTORE brings the file back with its vector.
            let restored = actions(&table, 5, "add");
            assert!(
                restored.iter().any(|a| a["deletionVector"]["cardinality"] == 4),
                "the restored file keeps its vector: {restored:?}"
            );
        }
    }
}

/// A RESTORE needs the restored files' deletion vectors as much as the files: without the vector,
/// the rows it deletes would come back. A rollback whose vector file is gone is refused, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_whose_deletion_vector_file_is_gone_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    copy_dir(&corpus_dir().join("dat_deletion_vectors"), &table);
    std::fs::write(dir.path().join("fixed.csv"), "letter,int,date\nz,7,1980-06-01\n").unwrap();
    write_plan(
        dir.path(),
        "plan.toml",
        "reason = \"Reload 1975 to 1985.\"\n[target]\ntable = \"t\"\ndate_column = \"date\"\n\
         [window]\nstart = 1975-01-01\nend = 1985-12-31\n[slicing]\nevery = \"4018 days\"\n\
         [source]\ninputs.src = { path = \"fixed.csv\", format = \"csv\" }\n\
         query = \"SELECT letter, int, CAST(date AS DATE) AS date FROM src\"\n\
         [guards]\nallow_empty_slices = true\n",
    );
    assert!(bf_in(dir.path()).args(["plan", "plan.toml", "-q"]).output().unwrap().status.success());
    assert!(bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).output().unwrap().status.success());
    // What VACUUM does once the retention passes: the vector's file goes with the data file's remove.
    let vector = table.join("deletion_vector_8aebe228-b96c-4831-b0b6-22882eb9a3d3.bin");
    std::fs::remove_file(&vector).unwrap();
    let untouched = snapshot(&table);
    let refused = bf_in(dir.path()).args(["rollback", "--auto-approve"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("VACUUM removed 1 of its data files"), "{stderr}");
    assert!(stderr.contains("deletion_vector_8aebe228-b96c-4831-b0b6-22882eb9a3d3.bin"), "{stderr}");
    assert_eq!(snapshot(&table), untouched, "nothing was written");
}

/// The same proofs on a table partitioned by the date, whose deletion vector this test writes
/// (inline, as Spark writes small ones): a slice replaces whole days, so what matters is that the
/// rehearsal and the counts read through the vector, that the remove names it, and that both
/// rollbacks bring back exactly the rows that were live.
#[tokio::test(flavor = "multi_thread")]
async fn deletion_vectors_on_a_table_partitioned_by_the_date_survive_plan_apply_and_rollback() {
    use crate::common::{OrderRow, orders_table};
    for rollback in [&["rollback", "--auto-approve"][..], &["rollback", "--auto-approve", "--window-only"]] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t");
        std::fs::create_dir(&table).unwrap();
        let rows: [OrderRow; 6] = [
            (1, "C1", 10.0, "EUR", "2026-03-01"),
            (2, "C2", 20.0, "EUR", "2026-03-01"),
            (3, "C3", 30.0, "EUR", "2026-03-01"),
            (4, "C4", 40.0, "EUR", "2026-03-01"),
            (5, "C5", 50.0, "EUR", "2026-03-02"),
            (6, "C6", 60.0, "EUR", "2026-03-02"),
        ];
        orders_table(&table, true, &[&rows]).await;
        let first_day = actions(&table, 1, "add")
            .into_iter()
            .find(|a| a["partitionValues"]["order_date"] == "2026-03-01")
            .unwrap();
        // Orders 1 and 2 deleted: positions 0 and 1 of the day's file, as written.
        crate::common::delete_with_vector(&table, 2, &first_day, &[0, 1], true);
        let original = all_rows(&open_table(&table).await).await;
        assert_eq!(original.len(), 4, "{original:?}");
        assert!(!original.iter().any(|r| r.starts_with("1|") || r.starts_with("2|")), "{original:?}");

        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,customer,amount,currency,order_date\n3,C3,33.0,EUR,2026-03-01\n4,C4,44.0,EUR,2026-03-01\n\
             5,C5,55.0,EUR,2026-03-02\n6,C6,66.0,EUR,2026-03-02\n",
        )
        .unwrap();
        write_plan(
            dir.path(),
            "plan.toml",
            "reason = \"Fix the amounts.\"\n[target]\ntable = \"t\"\ndate_column = \"order_date\"\nkey = [\"order_id\"]\n\
             [window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n\
             [source]\ninputs.src = { path = \"fixed.csv\", format = \"csv\" }\n\
             query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM src\"\n",
        );
        let planned = bf_in(dir.path()).args(["plan", "plan.toml", "--json", "-q"]).output().unwrap();
        assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
        let saved: Value = serde_json::from_slice(&planned.stdout).unwrap();
        assert_eq!(saved["slices"][0]["before"]["rows"], 2, "the deleted orders are not counted");
        assert_eq!(
            saved["slices"][0]["changes"]["removed"], 0,
            "nor seen as removed: {}",
            saved["slices"][0]
        );
        assert_eq!(saved["total"]["after"]["rows"], 4);

        let applied = bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).output().unwrap();
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
        let after = all_rows(&open_table(&table).await).await;
        assert_eq!(after.len(), 4, "{after:?}");
        assert_eq!(
            after,
            [
                "3|C3|33.0|EUR|2026-03-01",
                "4|C4|44.0|EUR|2026-03-01",
                "5|C5|55.0|EUR|2026-03-02",
                "6|C6|66.0|EUR|2026-03-02"
            ],
            "the corrected rows, and no deleted order back"
        );
        let duckdb = duckdb_rows(&table, "SELECT order_id, customer, amount, currency, order_date FROM t");
        assert_eq!(duckdb, after, "read by DuckDB: no deleted order back");
        assert_removes_one_file_naming_its_vector(&table, 3, 2);
        rolled_back_to(dir.path(), rollback, &table, &original).await;
        let duckdb = duckdb_rows(&table, "SELECT order_id, customer, amount, currency, order_date FROM t");
        assert_eq!(duckdb, original, "{rollback:?}: read by DuckDB");
    }
}

/// Apply counts a slice's rows after each commit from the log and, for a file the log cannot
/// settle, from that file's date column alone. On Spark's tables that count is the one DuckDB
/// reads, day by day and over ranges: with column mapping by name and by id (the file's column is
/// the physical name), generated columns, constraints and date partitions. Where a deletion vector
/// hides rows of a file, the file alone is not the answer: deltalake's scan counts instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_of_each_table_with_a_date_is_counted_as_duckdb_reads_it() {
    use bf::delta::table::{rows_in_slice, rows_in_slice_from_files};
    use chrono::NaiveDate;
    for (name, column, from_files) in [
        ("dat_check_constraints", "date", true),
        ("dat_column_mapping", "date", true),
        ("dat_deletion_vectors", "date", false),
        ("dat_generated_columns", "date", true),
        ("dat_multi_partitioned", "date", true),
        ("golden_table_with_columnmapping_mode_id", "DateType", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table");
        copy_dir(&corpus_dir().join(name), &path);
        let table = open_table(&path).await;
        let sql = format!(
            "SELECT CAST(\"{column}\" AS VARCHAR), COUNT(*) FROM t WHERE \"{column}\" IS NOT NULL GROUP BY 1"
        );
        let per_day: std::collections::BTreeMap<NaiveDate, u64> = duckdb_rows(&path, &sql)
            .iter()
            .map(|row| {
                let (day, rows) = row.split_once('|').unwrap();
                (day.parse().unwrap(), rows.parse().unwrap())
            })
            .collect();
        let days: Vec<NaiveDate> = per_day.keys().copied().collect();
        assert!(!days.is_empty(), "{name} has dated rows");
        let mut windows: Vec<(NaiveDate, NaiveDate)> = days.iter().map(|&day| (day, day)).collect();
        windows.extend(days.windows(2).map(|pair| (pair[0], pair[1])));
        windows.push((days[0], days[days.len() - 1]));
        for (first, last) in windows {
            let slice = bf::window::Slice { index: 1, first, last, run_date: first };
            let expected: u64 = per_day.range(first..=last).map(|(_, rows)| rows).sum();
            assert_eq!(
                rows_in_slice(&table, column, &slice).await.unwrap(),
                expected,
                "{name}, {first}..={last}"
            );
            let counted = rows_in_slice_from_files(&table, column, &slice).await.unwrap();
            assert_eq!(counted.is_some(), from_files, "{name}, {first}..={last}: counted without the scan");
        }
    }
}
