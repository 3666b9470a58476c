//! The Spark dialect (`[source] dialect = "spark"`): the session a plan's SQL runs in when its
//! authors write Spark SQL, as Spark 4 and Databricks SQL run it.
//!
//! - parsed with Spark's grammar (sqlparser's `SparkSqlDialect`: backticks, `DIV`, `LONG`);
//! - Spark's functions: `datafusion-spark`'s over DataFusion's of the same names, and bf's own for
//!   the date functions it lacks, with Java's patterns ([`dates`]);
//! - Spark's operators: `/` of integers a DOUBLE, integer arithmetic failing on overflow, arrays
//!   indexed from 0 and failing past their end ([`operators`]);
//! - decimals written as decimals (`1234567.89` is a DECIMAL(9,2), as it is in every bf session),
//!   the session time zone UTC, ANSI mode on for the functions that read it.
//!
//! What bf cannot make mean what Spark means is refused before anything runs
//! (`plan_file::read_only`, for the Spark dialect), never run with another meaning.

mod aggregates;
mod dates;
mod operators;
mod strings;

use std::sync::Arc;

use datafusion_spark::SessionStateBuilderSpark;
use deltalake::datafusion::execution::SessionStateBuilder;
use deltalake::datafusion::execution::context::SessionState;

use crate::plan_file::Dialect;

/// `state` speaking `dialect`: as it is for DataFusion's SQL, Spark's for Spark SQL.
pub fn speaking(state: SessionState, dialect: Dialect) -> SessionState {
    if dialect == Dialect::Datafusion {
        return state;
    }
    let mut builder = SessionStateBuilder::new_from_existing(state).with_spark_features();
    // bf's planner before Spark's and DataFusion's: the first that plans an operator decides.
    builder.expr_planners().get_or_insert_with(Vec::new).insert(0, Arc::new(operators::SparkOperators));
    let ours = dates::functions().into_iter().chain(strings::functions()).chain([operators::size()]);
    builder.scalar_functions().get_or_insert_with(Vec::new).extend(ours.map(Arc::new));
    // Spark's `avg` over `datafusion-spark`'s, which gave a DOUBLE for a DECIMAL.
    builder.aggregate_functions().get_or_insert_with(Vec::new).push(Arc::new(aggregates::avg()));
    let mut state = builder.build();
    let options = state.config_mut().options_mut();
    options.sql_parser.dialect = deltalake::datafusion::common::config::Dialect::Spark;
    options.execution.enable_ansi_mode = true;
    options.execution.time_zone = Some("+00:00".to_owned());
    state
}
