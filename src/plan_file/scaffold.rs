//! A first plan for a table, written from its schema (`bf init`): nobody should have to copy
//! someone else's plan to start one. Every column is in the query, the date column and the key are
//! guessed and say so, and what only its author can know — why, which days, where the corrected
//! rows are — is left as `<…>` placeholders, which [`super::load`] refuses at their lines until
//! they are written.

use std::fmt::Write as _;

use deltalake::arrow::datatypes::{DataType, Schema};

/// A value `bf init` leaves for the author to write: a TOML string between `<` and `>`.
pub fn is_placeholder(text: &str) -> bool {
    let text = text.trim();
    text.len() > 2 && text.starts_with('<') && text.ends_with('>')
}

/// What `bf init` was told and found.
pub struct Scaffold<'a> {
    /// The table as the plan will name it (relative to the plan's folder, a URI, a catalog name).
    pub table: &'a str,
    pub schema: &'a Schema,
    pub partition_columns: &'a [String],
    /// `--date-column`; guessed when `None`.
    pub date_column: Option<&'a str>,
    /// `--key`; guessed when empty.
    pub key: &'a [String],
    /// What writing the table takes or why bf cannot, written at the top of the plan for its
    /// reviewer (the table's writer features).
    pub notes: &'a [String],
    /// The Spark engine that wrote the table (its commits' `engineInfo`), when one did: its team
    /// writes Spark SQL, so the plan says `dialect = "spark"` and quotes names as Spark does.
    pub spark: Option<&'a str>,
}

/// Why `bf init` cannot write a plan for the table as told.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("the table has no column `{column}`{}", suggest(.columns, .column))]
    NoColumn { column: String, columns: Vec<String> },
    #[error(
        "`{column}` is {found}, and bf slices by a DATE column{}",
        date_columns(.dates)
    )]
    NotADate { column: String, found: String, dates: Vec<String> },
    #[error(
        "the table has no DATE column to slice by (its columns: {columns}); bf rewrites a table day by day \
         through a DATE column, often the one it is partitioned by"
    )]
    NoDateColumn { columns: String },
}

fn suggest(columns: &[String], typed: &str) -> String {
    match crate::words::nearest(typed, columns.iter().map(String::as_str)) {
        Some(column) => format!(" — did you mean `{column}`?"),
        None => format!(" (its columns: {})", columns.join(", ")),
    }
}

fn date_columns(dates: &[String]) -> String {
    match dates.is_empty() {
        true => String::new(),
        false => format!(": its DATE columns are {}", dates.join(", ")),
    }
}

/// Which column and why: a guess says what it was guessed from, so the author checks it.
struct Chosen {
    columns: Vec<String>,
    why: &'static str,
}

impl Scaffold<'_> {
    fn names(&self) -> Vec<String> {
        self.schema.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The table's columns as a CSV input's `schema` says them, `order_id BIGINT, …`, in Spark's
    /// names for their types; a placeholder when a column's type has none a CSV holds.
    fn columns_ddl(&self) -> String {
        let spark_type = |t: &DataType| {
            Some(match t {
                DataType::Int64 => "BIGINT".to_owned(),
                DataType::Int32 => "INT".to_owned(),
                DataType::Int16 => "SMALLINT".to_owned(),
                DataType::Int8 => "TINYINT".to_owned(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".to_owned(),
                DataType::Float64 => "DOUBLE".to_owned(),
                DataType::Float32 => "FLOAT".to_owned(),
                DataType::Boolean => "BOOLEAN".to_owned(),
                DataType::Date32 => "DATE".to_owned(),
                DataType::Timestamp(..) => "TIMESTAMP".to_owned(),
                DataType::Decimal128(p, s) => format!("DECIMAL({p}, {s})"),
                _ => return None,
            })
        };
        let columns: Option<Vec<String>> = self
            .schema
            .fields()
            .iter()
            .map(|f| Some(format!("{} {}", ident(f.name(), true), spark_type(f.data_type())?)))
            .collect();
        columns.map_or_else(
            || "<the file's columns and their types, e.g. order_id BIGINT, amount DECIMAL(10, 2)>".to_owned(),
            |c| c.join(", "),
        )
    }

    fn dates(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .filter(|f| f.data_type() == &DataType::Date32)
            .map(|f| f.name().clone())
            .collect()
    }

    fn date_column(&self) -> Result<Chosen, ScaffoldError> {
        let dates = self.dates();
        if let Some(column) = self.date_column {
            let field = self
                .schema
                .field_with_name(column)
                .map_err(|_| ScaffoldError::NoColumn { column: column.to_owned(), columns: self.names() })?;
            if field.data_type() != &DataType::Date32 {
                return Err(ScaffoldError::NotADate {
                    column: column.to_owned(),
                    found: field.data_type().to_string(),
                    dates,
                });
            }
            return Ok(Chosen { columns: vec![column.to_owned()], why: "" });
        }
        let partitioned = dates.iter().find(|d| self.partition_columns.contains(d));
        let named = dates.iter().find(|d| {
            let d = d.to_lowercase();
            d.contains("date") || d.contains("day") || d.ends_with("_on") || d == "dt"
        });
        let (column, why) = match (partitioned, named, dates.first()) {
            (Some(c), ..) => (c, "guessed: the DATE column the table is partitioned by"),
            (None, Some(c), _) => (c, "guessed: a DATE column named like a day"),
            (None, None, Some(c)) if dates.len() == 1 => (c, "guessed: the table's only DATE column"),
            (None, None, Some(c)) => (c, "guessed: the first of the table's DATE columns; check it"),
            (None, None, None) => {
                return Err(ScaffoldError::NoDateColumn { columns: self.names().join(", ") });
            }
        };
        Ok(Chosen { columns: vec![column.clone()], why })
    }

    fn key(&self, date: &str) -> Result<Option<Chosen>, ScaffoldError> {
        let names = self.names();
        if !self.key.is_empty() {
            if let Some(missing) = self.key.iter().find(|k| !names.contains(k)) {
                return Err(ScaffoldError::NoColumn { column: missing.clone(), columns: names });
            }
            return Ok(Some(Chosen { columns: self.key.to_vec(), why: "" }));
        }
        let id = names
            .iter()
            .filter(|n| n.as_str() != date)
            .find(|n| n.eq_ignore_ascii_case("id") || n.to_lowercase().ends_with("_id"));
        Ok(id.map(|id| Chosen {
            columns: vec![id.clone()],
            why: "guessed: the first column named like an id",
        }))
    }

    /// The first number that is neither the key nor an id: what the rehearsal sums before and after.
    fn metric(&self, key: &[String]) -> Option<String> {
        self.schema
            .fields()
            .iter()
            .filter(|f| f.data_type().is_numeric() && !key.contains(f.name()))
            .map(|f| f.name().clone())
            .find(|n| !n.to_lowercase().ends_with("_id") && !n.eq_ignore_ascii_case("id"))
    }

    /// The plan file's text.
    pub fn write(&self) -> Result<String, ScaffoldError> {
        let date = self.date_column()?;
        let date_column = &date.columns[0];
        let key = self.key(date_column)?;
        let key_columns = key.as_ref().map(|k| k.columns.clone()).unwrap_or_default();
        let daily = self.partition_columns.contains(date_column);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# A backfill of {table}, written by `bf init` from the table's schema. Replace each <…>\n\
             # placeholder (`bf validate` points at each) and check the guesses; then `bf plan` rehearses\n\
             # it on a clone: nothing in the table changes until `bf apply`.",
            table = last_segment(self.table).replace(char::is_control, " ")
        );
        for note in self.notes {
            let _ = writeln!(out, "#\n# Note: {}", note.replace('\n', "\n# "));
        }
        let _ = writeln!(
            out,
            "reason = \"<why these days are rewritten: what was wrong, and where the corrected rows come from>\"\n"
        );
        let _ = writeln!(out, "[target]\ntable = {}", toml_string(self.table));
        let _ = writeln!(out, "date_column = {}{}", toml_string(date_column), comment(date.why));
        match &key {
            Some(key) => {
                let why = match key.why {
                    "" => " # the columns that identify a row: the diff matches rows on them".to_owned(),
                    why => comment(why),
                };
                let _ = writeln!(out, "key = {}{why}", toml_list(&key.columns));
            }
            None => {
                let _ = writeln!(
                    out,
                    "# key = [\"…\"]  # the columns that identify a row, for the row-level diff"
                );
            }
        }
        let _ = writeln!(
            out,
            "\n[window]\n\
             start = \"<the first day to rewrite, as a date without quotes: 2026-03-01>\"\n\
             end = \"<the last day to rewrite (included), as a date without quotes: 2026-03-31>\"\n"
        );
        let _ = writeln!(
            out,
            "[slicing]\nevery = \"{}\" # one commit per slice: \"day\", \"week\" or \"month\"\n",
            if daily { "day" } else { "month" }
        );
        let _ = writeln!(
            out,
            "[source]\n\
             # Where the corrected rows come from, read as the table `corrected`: a file, a folder or a path\n\
             # with {{date}} (csv, parquet or json), or a Delta table (format = \"delta\").\n\
             inputs.corrected = {{ path = {}, format = \"csv\"{} }}\n\
             # One read-only SELECT giving the table's columns for one slice: $start and $end are its days.",
            toml_string(&format!(
                "<the path of the corrected rows, e.g. ../landing/{}/{{date}}.csv>",
                last_segment(self.table)
            )),
            // Spark types a CSV's columns otherwise than bf's inference: a Spark SQL plan says them.
            match self.spark {
                Some(_) => format!(", schema = {}", toml_string(&self.columns_ddl())),
                None => String::new(),
            }
        );
        if let Some(engine) = self.spark {
            let _ = writeln!(
                out,
                "# The table is written by {}: the query, metrics and checks are Spark SQL, and mean what they\n\
                 # mean in Spark (`dialect = \"datafusion\"` for DataFusion's SQL).\n\
                 dialect = \"spark\"",
                engine.replace(char::is_control, " ")
            );
        }
        let ident = |name: &str| ident(name, self.spark.is_some());
        let columns: Vec<String> = self.names().iter().map(|c| ident(c)).collect();
        let query = format!(
            "SELECT {}\nFROM corrected\nWHERE {} BETWEEN $start AND $end",
            columns.join(",\n       "),
            ident(date_column)
        );
        let _ = writeln!(out, "query = {}", toml_multiline(&query));
        if let Some(metric) = self.metric(&key_columns) {
            let _ = writeln!(
                out,
                "\n# What the plan shows before and after, per slice (any SQL aggregate; more [[metrics]] welcome).\n\
                 [[metrics]]\nname = {}\nsql = {}",
                toml_string(&metric),
                toml_string(&format!("SUM({})", ident(&metric)))
            );
        }
        if !key_columns.is_empty() {
            let _ = writeln!(
                out,
                "\n# What must hold in every slice after the backfill, or the plan cannot be applied.\n\
                 [[checks]]\nname = {}\nunique = {}",
                toml_string(&format!("one row per {}", key_columns.join(", "))),
                toml_list(&key_columns)
            );
        }
        let _ = writeln!(
            out,
            "\n# What the whole backfill may do, or the plan cannot be applied.\n\
             [guards]\n\
             # A slice the source leaves without rows where the table holds some (a file with only its header,\n\
             # a day's file missing) fails the plan; true when emptying those days is the fix.\n\
             allow_empty_slices = false\n\
             # The most the window's row count (or any metric) may change, in percent, e.g. {{ rows = 10 }}.\n\
             # max_change_pct = {{ rows = 10 }}\n\
             # How long `bf rollback` must stay possible: a table keeping removed files or its log for less is refused.\n\
             # keep_rollback_for = \"30 days\""
        );
        Ok(out)
    }
}

fn comment(why: &str) -> String {
    match why {
        "" => String::new(),
        why => format!(" # {why}"),
    }
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `text` as a TOML multi-line string, its lines as they are: a column's name is the table's to
/// choose, and one holding `"""` or `\` must not end the string and write keys of its own. Literal
/// (`'''`, where `"Paid On"` reads as SQL writes it) unless the text holds what a literal string
/// cannot: its own closing quotes, or a control character.
fn toml_multiline(text: &str) -> String {
    let literal = !text.contains("'''") && !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
    if literal {
        return format!("'''\n{text}\n'''");
    }
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push('\n'),
            c if c.is_control() => escaped.push_str(&format!("\\u{:04X}", c as u32)),
            c => escaped.push(c),
        }
    }
    format!("\"\"\"\n{escaped}\n\"\"\"")
}

fn toml_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|i| toml_string(i)).collect::<Vec<_>>().join(", "))
}

/// A column name as SQL reads it: bare when it is a plain lowercase name, quoted otherwise — in
/// backticks for Spark SQL (where double quotes make a string), in double quotes for DataFusion's.
fn ident(name: &str, spark: bool) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match (plain, spark) {
        (true, _) => name.to_owned(),
        (false, true) => format!("`{}`", name.replace('`', "``")),
        (false, false) => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

fn last_segment(table: &str) -> &str {
    table.trim_end_matches('/').rsplit(['/', '.']).next().unwrap_or(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::datatypes::Field;

    fn payments() -> Schema {
        Schema::new(vec![
            Field::new("payment_id", DataType::Int64, true),
            Field::new("customer", DataType::Utf8, true),
            Field::new("amount_cents", DataType::Int64, true),
            Field::new("Paid On", DataType::Date32, true),
        ])
    }

    #[test]
    fn guesses_are_said_and_every_column_is_selected() {
        let schema = payments();
        let partitions = vec!["Paid On".to_owned()];
        let text = Scaffold {
            table: "../warehouse/payments",
            schema: &schema,
            partition_columns: &partitions,
            date_column: None,
            key: &[],
            notes: &[],
            spark: None,
        }
        .write()
        .unwrap();
        assert!(
            text.contains("date_column = \"Paid On\" # guessed: the DATE column the table is partitioned by"),
            "{text}"
        );
        assert!(text.contains("key = [\"payment_id\"] # guessed"), "{text}");
        assert!(
            text.contains("SELECT payment_id,\n       customer,\n       amount_cents,\n       \"Paid On\""),
            "{text}"
        );
        assert!(text.contains("every = \"day\""), "{text}");
        assert!(text.contains("sql = \"SUM(amount_cents)\""), "{text}");
        assert!(toml::from_str::<toml::Table>(&text).is_ok(), "valid TOML:\n{text}");
    }

    /// A column's name is the table's to choose, and `bf init` runs on tables nobody reviewed: a name
    /// closing the query's string and opening sections of its own (a `[notify]` writing a workflow
    /// file, a `[record]` log table) stays in the query, in either string TOML writes it as.
    #[test]
    fn a_column_name_cannot_write_keys_of_its_own() {
        for (quotes, evil) in [
            (
                r#"""""#,
                "\"\n[notify]\nfile = '../.github/workflows/notice.yml'\nowners = ['x']\n[record]\nlog_table = \"",
            ),
            ("'''", "x'''\n[notify]\nfile = \"../.github/workflows/notice.yml\"\nowners = [\"x\"]\n'''"),
            ("\\", "back\\slash\u{1b}[2J\r\n[record]"),
        ] {
            let schema = Schema::new(vec![
                Field::new("order_id", DataType::Int64, true),
                Field::new(evil, DataType::Utf8, true),
                Field::new("order_date", DataType::Date32, true),
            ]);
            let text = Scaffold {
                table: "t",
                schema: &schema,
                partition_columns: &[],
                date_column: None,
                key: &[],
                notes: &[],
                spark: None,
            }
            .write()
            .unwrap();
            let plan: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{quotes}: {e}\n{text}"));
            let sections: Vec<&String> = plan.keys().collect();
            assert_eq!(
                sections,
                ["checks", "guards", "reason", "slicing", "source", "target", "window"],
                "{quotes}: no [notify], no [record]:\n{text}"
            );
            let query = plan["source"]["query"].as_str().unwrap();
            let quoted = format!("\"{}\"", evil.replace('"', "\"\""));
            assert!(query.contains(&quoted), "{quotes}: the name kept in the query:\n{query}");
        }
    }

    #[test]
    fn the_date_column_guessed_is_not_just_the_first_date() {
        let schema = Schema::new(vec![
            Field::new("loaded", DataType::Date32, true),
            Field::new("shipped_on", DataType::Date32, true),
            Field::new("order_date", DataType::Date32, true),
        ]);
        let guess = |partitions: &[String]| {
            Scaffold {
                table: "t",
                schema: &schema,
                partition_columns: partitions,
                date_column: None,
                key: &[],
                notes: &[],
                spark: None,
            }
            .write()
            .unwrap()
        };
        let partitioned = guess(&["order_date".to_owned()]);
        assert!(
            partitioned.contains(
                "date_column = \"order_date\" # guessed: the DATE column the table is partitioned by"
            ),
            "{partitioned}"
        );
        let named = guess(&[]);
        assert!(
            named.contains("date_column = \"shipped_on\" # guessed: a DATE column named like a day"),
            "{named}"
        );
    }

    #[test]
    fn a_named_column_that_is_not_there_or_not_a_date_is_refused() {
        let schema = payments();
        let scaffold = |date: Option<&'static str>| {
            Scaffold {
                table: "t",
                schema: &schema,
                partition_columns: &[],
                date_column: date,
                key: &[],
                notes: &[],
                spark: None,
            }
            .write()
        };
        let typo = scaffold(Some("paid_onn")).unwrap_err().to_string();
        assert!(typo.contains("no column `paid_onn`"), "{typo}");
        let wrong = scaffold(Some("customer")).unwrap_err().to_string();
        assert!(wrong.contains("its DATE columns are Paid On"), "{wrong}");
    }

    #[test]
    fn placeholders_are_angle_bracketed() {
        assert!(is_placeholder("<why>"));
        assert!(!is_placeholder("why <not>"));
        assert!(!is_placeholder("<>"));
    }
}
