//! The SQL a plan speaks (`[source] dialect`): DataFusion's, which bf runs, or Spark's — the
//! session a plan's SQL runs in when its authors write Spark SQL, as Spark 4 and Databricks SQL
//! run it:
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
//!
//! A stage below the engine: the plan file names a dialect, the source, the comparison and a
//! cluster's workers run SQL in it ([`spark_function`] is how a worker finds the function a plan
//! was planned with).

mod aggregates;
mod dates;
mod operators;
pub mod patterns;
mod strings;

use std::sync::Arc;

use datafusion_spark::SessionStateBuilderSpark;
use deltalake::datafusion::execution::SessionStateBuilder;
use deltalake::datafusion::execution::context::SessionState;

use deltalake::datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which SQL a plan speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// DataFusion's SQL, which bf runs.
    #[default]
    Datafusion,
    /// Spark SQL, as Spark 4 and Databricks SQL run it.
    Spark,
}

impl Dialect {
    pub(crate) fn is_datafusion(&self) -> bool {
        *self == Dialect::Datafusion
    }
}

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

/// A function of the Spark dialect, or of bf's Spark operators, by its name: the one a plan in
/// Spark SQL was planned with, which a cluster's worker runs in its place (a function of the same
/// name may mean otherwise in DataFusion's SQL). `None`: DataFusion's own function of that name is
/// the one.
pub fn spark_function(name: &str) -> Option<SparkFunction> {
    let known = spark_functions();
    known
        .scalar
        .get(name)
        .map(|f| SparkFunction::Scalar(f.clone()))
        .or_else(|| known.aggregate.get(name).map(|f| SparkFunction::Aggregate(f.clone())))
}

/// A Spark dialect's function, as a plan calls it.
#[derive(Debug, Clone)]
pub enum SparkFunction {
    Scalar(Arc<ScalarUDF>),
    Aggregate(Arc<AggregateUDF>),
}

/// The functions a Spark SQL plan may call that DataFusion's SQL does not mean alike: those the
/// Spark session holds that differ from a DataFusion session's of the same name, and the
/// operators' own. Made once.
struct SparkFunctions {
    scalar: std::collections::HashMap<String, Arc<ScalarUDF>>,
    aggregate: std::collections::HashMap<String, Arc<AggregateUDF>>,
}

fn spark_functions() -> &'static SparkFunctions {
    static KNOWN: std::sync::OnceLock<SparkFunctions> = std::sync::OnceLock::new();
    KNOWN.get_or_init(|| {
        let datafusion = SessionStateBuilder::new().with_default_features().build();
        let spark = speaking(SessionStateBuilder::new().with_default_features().build(), Dialect::Spark);
        let differs = |ours: &Arc<ScalarUDF>| datafusion.scalar_functions().get(ours.name()) != Some(ours);
        let mut scalar: std::collections::HashMap<String, Arc<ScalarUDF>> = spark
            .scalar_functions()
            .values()
            .filter(|f| differs(f))
            .map(|f| (f.name().to_owned(), f.clone()))
            .collect();
        scalar.extend(operators::functions().into_iter().map(|f| (f.name().to_owned(), Arc::new(f))));
        let aggregate = spark
            .aggregate_functions()
            .values()
            .filter(|f| datafusion.aggregate_functions().get(f.name()) != Some(*f))
            .map(|f| (f.name().to_owned(), f.clone()))
            .collect();
        SparkFunctions { scalar, aggregate }
    })
}
