//! The rules of a plan's inputs (`[source.inputs]`): each input's name, path, extension and
//! columns, one function a rule.

use super::Issues;
use crate::dialect::Dialect;
use crate::plan_file::template::{self, Placeholder};
use crate::plan_file::{Format, Input, PlanFile};
use crate::window::Cadence;

impl PlanFile {
    /// Every rule of every input, at its key.
    pub(super) fn check_inputs(&self, issues: &mut Issues) {
        for (name, input) in &self.source.inputs {
            let key = format!("source.inputs.{name}");
            check_name(name, &key, issues);
            self.check_path(input, &key, issues);
            check_extension(input, &key, issues);
            check_columns(input, self.source.dialect, &key, issues);
        }
    }

    /// A path that names its days as its slices are cut, and a pattern that reads a folder.
    fn check_path(&self, input: &Input, key: &str, issues: &mut Issues) {
        let one_day = self.slicing.every == Cadence::Days(1);
        match template::placeholders(&input.path) {
            Err(error) => issues.add(format!("{key}.path"), error.to_string()),
            Ok(found) if found.contains(&Placeholder::Date) && !one_day => issues.add_with_help(
                format!("{key}.path"),
                format!("`{{date}}` names one day, but slices are `{}` long", self.slicing.every),
                "use {start} and {end}, or slice by \"day\"",
            ),
            Ok(_) => {}
        }
        if input.path.trim().is_empty() {
            issues.add(format!("{key}.path"), "the input's path is empty");
        }
        if let Some((_, pattern)) = template::split_pattern(&input.path) {
            if input.format == Format::Delta {
                issues.add(format!("{key}.path"), "a Delta input is a table: name its folder, not a pattern");
            } else if let Err(problem) = template::check_pattern(&pattern) {
                issues.add(format!("{key}.path"), problem);
            }
        }
    }
}

/// An input is read as a table of the query: its name a lowercase SQL identifier, not `slice`.
fn check_name(name: &str, key: &str, issues: &mut Issues) {
    if !super::is_lowercase_identifier(name) {
        issues.add(
            key,
            format!(
                "input name `{name}` is not a lowercase SQL identifier (letters, digits, _): the query reads it as a table"
            ),
        );
    }
    if name == "slice" {
        issues.add(key, "`slice` is reserved: checks read the rehearsed slice under that name");
    }
}

/// An extension is a dot and a few letters, for files (a Delta table has none to choose).
fn check_extension(input: &Input, key: &str, issues: &mut Issues) {
    let Some(extension) = &input.extension else { return };
    let plain = extension.len() <= 16
        && extension.strip_prefix('.').is_some_and(|e| {
            !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        });
    if !plain {
        issues.add(format!("{key}.extension"), "an extension is a dot and a few letters, e.g. \".jsonl\"");
    } else if input.format == Format::Delta {
        issues.add(format!("{key}.extension"), "a Delta input is a table: it has no extension to choose");
    }
}

/// A schema is for CSV and JSON, and reads as columns and their types; in the Spark dialect a CSV
/// or JSON input must have one.
fn check_columns(input: &Input, dialect: Dialect, key: &str, issues: &mut Issues) {
    let text = matches!(input.format, Format::Csv | Format::Json);
    if dialect == Dialect::Spark && text && input.schema.is_none() {
        issues.add_with_help(
            format!("{key}.format"),
            format!(
                "in the Spark dialect a {:?} input says its columns: Spark reads them otherwise than bf's \
                 inference would (a CSV's as text, unless told), so the same query could give other rows",
                input.format
            ),
            "add `schema = \"order_id BIGINT, amount DECIMAL(10, 2), …\"` beside `format`, as Spark's \
             `DataFrameReader.schema` takes it",
        );
    }
    let Some(schema) = &input.schema else { return };
    match input.format {
        Format::Csv | Format::Json => {
            if let Err(problem) = crate::plan_file::input_schema::parse(schema) {
                issues.add(format!("{key}.schema"), problem);
            }
        }
        other => issues.add(
            format!("{key}.schema"),
            format!("a {other:?} input's files say their own columns' types: a schema is for CSV and JSON"),
        ),
    }
}
