//! The columns of a CSV or JSON input, when the plan says them: `schema = "order_id BIGINT,
//! amount DECIMAL(10,2), ordered_at TIMESTAMP"`, as Spark's `DataFrameReader.schema` takes them.
//!
//! Without it the reader infers each column's type from the file's first rows, so an export whose
//! first thousand rows hold whole numbers reads a later `12.50` as an error, and a code with a
//! leading zero (`00742`) as the number 742. Said in the plan, the types are the reviewer's to see
//! and every file is read alike. Each type is mapped to Arrow's by DataFusion's own SQL planner
//! (`SqlToRel::build_schema`), as `CREATE EXTERNAL TABLE` maps it.

use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Schema, SchemaRef};
use deltalake::datafusion::common::config::ConfigOptions;
use deltalake::datafusion::common::{Result as DfResult, TableReference, plan_err};
use deltalake::datafusion::logical_expr::planner::ContextProvider;
use deltalake::datafusion::logical_expr::{AggregateUDF, ScalarUDF, TableSource, WindowUDF};
use deltalake::datafusion::sql::planner::SqlToRel;
use deltalake::datafusion::sql::sqlparser::ast::Statement;
use deltalake::datafusion::sql::sqlparser::dialect::GenericDialect;
use deltalake::datafusion::sql::sqlparser::parser::Parser;

/// The Arrow schema `columns` says: each column's name and SQL type, comma-separated, in the
/// file's order. An error says what could not be read.
pub fn parse(columns: &str) -> Result<SchemaRef, String> {
    let sql = format!("CREATE TABLE input ({columns})");
    let statement = Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut parser| parser.parse_statement())
        .map_err(|e| format!("`{columns}` is not a list of columns and their types: {e}"))?;
    let Statement::CreateTable(table) = statement else {
        return Err(format!("`{columns}` is not a list of columns and their types"));
    };
    if table.columns.is_empty() {
        return Err("the schema names no column".to_owned());
    }
    if let Some(extra) = table.columns.iter().find(|c| !c.options.is_empty()) {
        return Err(format!("column `{}`: a schema gives each column a name and a type only", extra.name));
    }
    // Strings as the tables bf writes hold them (`Utf8`), not DataFusion's default views.
    let mut options = ConfigOptions::default();
    options.sql_parser.map_string_types_to_utf8view = false;
    let types = TypesOnly(options);
    let schema: Schema = SqlToRel::new(&types).build_schema(table.columns).map_err(|e| e.to_string())?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = schema.fields().iter().find(|f| !seen.insert(f.name().to_lowercase())) {
        return Err(format!("column `{}` is named twice", twice.name()));
    }
    Ok(Arc::new(schema))
}

/// A planner context that knows no table or function: the schema's types are all it plans.
struct TypesOnly(ConfigOptions);

impl ContextProvider for TypesOnly {
    fn get_table_source(&self, name: TableReference) -> DfResult<Arc<dyn TableSource>> {
        plan_err!("no table `{name}` in a schema")
    }
    fn get_function_meta(&self, _: &str) -> Option<Arc<ScalarUDF>> {
        None
    }
    fn get_higher_order_meta(
        &self,
        _: &str,
    ) -> Option<Arc<deltalake::datafusion::logical_expr::HigherOrderUDF>> {
        None
    }
    fn get_aggregate_meta(&self, _: &str) -> Option<Arc<AggregateUDF>> {
        None
    }
    fn get_window_meta(&self, _: &str) -> Option<Arc<WindowUDF>> {
        None
    }
    fn get_variable_type(&self, _: &[String]) -> Option<DataType> {
        None
    }
    fn options(&self) -> &ConfigOptions {
        &self.0
    }
    fn udf_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn udaf_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn udwf_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn higher_order_function_names(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_mapped_as_datafusion_maps_them_and_mistakes_are_named() {
        let schema =
            parse("order_id BIGINT, code STRING, amount DECIMAL(10,2), ordered_at TIMESTAMP, day DATE")
                .unwrap();
        let types: Vec<String> =
            schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect();
        assert_eq!(
            types,
            [
                "order_id Int64",
                "code Utf8",
                "amount Decimal128(10, 2)",
                "ordered_at Timestamp(ns)",
                "day Date32"
            ]
        );
        assert!(parse("order_id BIGINT,").unwrap_err().contains("not a list of columns"));
        assert!(parse("a INT, A STRING").unwrap_err().contains("named twice"));
        assert!(parse("a INT NOT NULL").unwrap_err().contains("a name and a type only"));
        assert!(parse("a WIBBLE").is_err());
    }
}
