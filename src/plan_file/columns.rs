//! The columns a plan names, against the target's: its date column, key, checks, `[diff] by` and the
//! SQL of its metrics and checks. `bf validate` asks this of a table on its disk (offline: the
//! table's schema is all it reads) and `bf plan` of every target before it clones one, so a
//! misspelt column is reported at its line, all of them in one run, with the nearest of the
//! table's columns — never as an engine's error about a view the rehearsal made.
//!
//! SQL is checked by planning it with DataFusion over an empty table of the target's schema, the
//! way the rehearsal runs it: a column the engine would not find is found here, and nothing else
//! the engine might say is guessed at (an unknown function, a type mismatch are the rehearsal's to
//! report, with the rows in hand).

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::datafusion::common::SchemaError;
use deltalake::datafusion::datasource::MemTable;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::prelude::SessionContext;

use super::{Issue, PlanFile};

/// Every column the plan names that `schema` (the target's, as its readers see it) does not hold,
/// each at its key; empty when all are there.
pub async fn check(plan: &PlanFile, schema: &Schema) -> Vec<Issue> {
    let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut issues = Vec::new();
    let date_column = &plan.target.date_column;
    if !columns.contains(&date_column.as_str()) {
        // The date column is a DATE one: suggest among those first.
        let dates: Vec<&str> = schema
            .fields()
            .iter()
            .filter(|f| f.data_type() == &DataType::Date32)
            .map(|f| f.name().as_str())
            .collect();
        let help = match crate::words::nearest(date_column, dates.iter().copied()) {
            Some(near) => format!("did you mean `{near}`?"),
            None if dates.is_empty() => {
                format!("the table has no DATE column; its columns: {}", listed(&columns))
            }
            None => format!("the table's DATE columns: {}", listed(&dates)),
        };
        issues.push(Issue {
            key: "target.date_column".to_owned(),
            message: format!("the table has no column `{date_column}`"),
            help: Some(help),
        });
    }
    let named = plan.target.key.iter().map(|key| ("target.key".to_owned(), key.as_slice())).chain(
        plan.checks.iter().enumerate().flat_map(|(i, check)| {
            let unique = check.unique.as_deref().map(|c| (format!("checks[{i}].unique"), c));
            let not_null = check.not_null.as_deref().map(|c| (format!("checks[{i}].not_null"), c));
            unique.into_iter().chain(not_null)
        }),
    );
    let by = (!plan.diff.by.is_empty()).then(|| ("diff.by".to_owned(), plan.diff.by.as_slice()));
    for (key, names) in named.chain(by) {
        for name in names.iter().filter(|name| !columns.contains(&name.as_str())) {
            issues.push(missing(&key, name, &columns));
        }
    }
    let ctx = SessionContext::new();
    let empty =
        MemTable::try_new(Arc::new(schema.clone()), vec![vec![]]).expect("an empty table of a schema");
    ctx.register_table("slice", Arc::new(empty)).expect("a fresh context takes a table");
    let metrics = plan
        .metrics
        .iter()
        .enumerate()
        .map(|(i, metric)| (format!("metrics[{i}].sql"), format!("SELECT ({}) FROM slice", metric.sql)));
    let checks = plan
        .checks
        .iter()
        .enumerate()
        .filter_map(|(i, check)| check.sql.as_ref().map(|sql| (format!("checks[{i}].sql"), sql.clone())));
    for (key, sql) in metrics.chain(checks) {
        if let Some(name) = unknown_column(&ctx, &sql).await {
            issues.push(missing(&key, &name, &columns));
        }
    }
    issues
}

/// `name`, which the plan names at `key`, is not among the table's `columns`.
fn missing(key: &str, name: &str, columns: &[&str]) -> Issue {
    let help = match crate::words::nearest(name, columns.iter().copied()) {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!("the table's columns: {}", listed(columns)),
    };
    Issue { key: key.to_owned(), message: format!("the table has no column `{name}`"), help: Some(help) }
}

fn listed(columns: &[&str]) -> String {
    columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
}

/// The column `sql` names that the engine would not find in `slice`, if any: the first, as the
/// engine stops at it. Any other error planning it is left to the rehearsal.
async fn unknown_column(ctx: &SessionContext, sql: &str) -> Option<String> {
    let error = ctx.state().create_logical_plan(sql).await.err()?;
    match error.find_root() {
        DataFusionError::SchemaError(schema_error, _) => match schema_error.as_ref() {
            SchemaError::FieldNotFound { field, .. } => Some(field.name.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use deltalake::arrow::datatypes::Field;

    use super::*;

    fn plan(extra: &str) -> PlanFile {
        let text = format!(
            "reason = \"Reload August: amounts were in cents.\"\n[target]\ntable = \"payments\"\n\
             date_column = \"paydate\"\nkey = [\"paymentid\"]\n[window]\nstart = 2026-08-01\nend = 2026-08-31\n\
             [slicing]\nevery = \"day\"\n[source]\ninputs.c = {{ path = \"c.csv\", format = \"csv\" }}\n\
             query = \"SELECT * FROM c\"\n{extra}"
        );
        toml::from_str(&text).unwrap()
    }

    fn payments() -> Schema {
        Schema::new(vec![
            Field::new("payment_id", DataType::Int64, false),
            Field::new("amount", DataType::Float64, true),
            Field::new("currency", DataType::Utf8, true),
            Field::new("pay_date", DataType::Date32, true),
            Field::new("created", DataType::Date32, true),
        ])
    }

    #[tokio::test]
    async fn every_misspelt_column_is_reported_at_its_key_with_the_nearest_of_the_tables() {
        let plan = plan(
            "[[metrics]]\nname = \"amount\"\nsql = \"SUM(amont)\"\n\
             [[checks]]\nname = \"one per payment\"\nunique = [\"payment_id\", \"curency\"]\n\
             [[checks]]\nname = \"positive\"\nsql = \"SELECT * FROM slice WHERE amuont <= 0\"\n\
             [[checks]]\nname = \"named\"\nnot_null = [\"zzz\"]\n[diff]\nby = [\"currency\", \"ccy\"]\n",
        );
        let found: Vec<(String, String, Option<String>)> =
            check(&plan, &payments()).await.into_iter().map(|i| (i.key, i.message, i.help)).collect();
        let did = |near: &str| Some(format!("did you mean `{near}`?"));
        let all = "the table's columns: `payment_id`, `amount`, `currency`, `pay_date`, `created`";
        assert_eq!(
            found,
            [
                ("target.date_column".into(), "the table has no column `paydate`".into(), did("pay_date")),
                ("target.key".into(), "the table has no column `paymentid`".into(), did("payment_id")),
                ("checks[0].unique".into(), "the table has no column `curency`".into(), did("currency")),
                ("checks[2].not_null".into(), "the table has no column `zzz`".into(), Some(all.into())),
                ("diff.by".into(), "the table has no column `ccy`".into(), Some(all.into())),
                ("metrics[0].sql".into(), "the table has no column `amont`".into(), did("amount")),
                ("checks[1].sql".into(), "the table has no column `amuont`".into(), did("amount")),
            ]
        );
    }

    #[tokio::test]
    async fn columns_the_table_holds_and_sql_the_engine_plans_are_no_issue() {
        let mut plan = plan(
            "[[metrics]]\nname = \"amount\"\nsql = \"SUM(amount)\"\n\
             [[checks]]\nname = \"dupes\"\nsql = \"SELECT payment_id, COUNT(*) AS n FROM slice GROUP BY payment_id HAVING n > 1\"\n\
             [[checks]]\nname = \"unknown function, the rehearsal's to report\"\nsql = \"SELECT nosuch(amount) FROM slice\"\n",
        );
        plan.target.date_column = "pay_date".into();
        plan.target.key = Some(vec!["payment_id".into()]);
        assert_eq!(check(&plan, &payments()).await, []);
    }
}
