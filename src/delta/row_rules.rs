//! What a table asks of every row it holds: CHECK constraints, column invariants, generated columns
//! and NOT NULL columns.
//!
//! deltalake enforces these rules itself when it writes a slice, but its refusal reads "N rows
//! failed validation check" without saying which rule. A reviewer needs the rule's name and the
//! row, at `bf plan` time, to fix the source: when a write is refused, bf evaluates each rule on
//! the slice's rows and names the first one broken. The rules are also read before anything is
//! written, so a table whose rules bf cannot evaluate, or whose generated column is not a function
//! of its row (`now()`), is refused up front rather than half-way through a plan.

use std::fmt;
use std::sync::Arc;

use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::common::DFSchema;
use deltalake::datafusion::common::tree_node::TreeNode;
use deltalake::datafusion::execution::SessionState;
use deltalake::datafusion::logical_expr::{Expr, ExprSchemable, Operator, Volatility, binary_expr, ident};
use deltalake::datafusion::prelude::DataFrame;
use deltalake::delta_datafusion::expr::parse_predicate_expression;
use deltalake::kernel::StructTypeExt;
use deltalake::table::state::DeltaTableState;

use crate::delta::table::WriterProtocol;

/// Where a rule comes from in the table's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// `delta.constraints.<name>` in the table's configuration.
    Check,
    /// `delta.invariants` on a column of the schema (the older form of a check).
    Invariant,
    /// `delta.generationExpression` on a column: its value must equal the expression's.
    Generated,
    /// A column declared `nullable: false`.
    NotNull,
}

/// One rule every row must keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub kind: RuleKind,
    /// The constraint's name, or the column the rule is on.
    pub name: String,
    /// The rule's SQL as the table states it (for a generated column, its generation expression).
    pub sql: String,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Rule { name, sql, .. } = self;
        match self.kind {
            RuleKind::Check => write!(f, "CHECK constraint `{name}` ({sql})"),
            RuleKind::Invariant => write!(f, "invariant on `{name}` ({sql})"),
            RuleKind::Generated => write!(f, "generated column `{name}` (GENERATED ALWAYS AS {sql})"),
            RuleKind::NotNull => write!(f, "NOT NULL column `{name}`"),
        }
    }
}

/// A rule a row of the slice breaks, and that row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub rule: Rule,
    /// The row, as `column = value` pairs in the table's order.
    pub row: String,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule.kind {
            RuleKind::Generated => write!(
                f,
                "the row ({}) supplies a value for the {} that differs from the one the table \
                 computes: leave the column out of the query and the table computes it, or make it equal",
                self.row, self.rule
            ),
            _ => write!(f, "the row ({}) breaks the table's {}", self.row, self.rule),
        }
    }
}

/// The rules of one table.
#[derive(Debug, Clone)]
pub struct RowRules {
    rules: Vec<Rule>,
    schema: Arc<Schema>,
}

impl RowRules {
    /// The rules the table's protocol makes binding: a constraint the table states without the
    /// feature that enforces it is not one deltalake checks, so bf does not report it either.
    pub fn of(state: &DeltaTableState) -> RowRules {
        let schema = state.snapshot().arrow_schema();
        // An unreadable protocol leaves every rule in: this only explains refusals.
        let protocol = WriterProtocol::of(state).ok();
        let enabled = |feature: &str| protocol.as_ref().is_none_or(|p| p.requires(feature));
        let mut rules = Vec::new();
        for field in schema.fields() {
            if !field.is_nullable() {
                rules.push(Rule { kind: RuleKind::NotNull, name: field.name().clone(), sql: String::new() });
            }
        }
        let logical = state.schema();
        if enabled("invariants") {
            for invariant in logical.get_invariants().unwrap_or_default() {
                rules.push(Rule {
                    kind: RuleKind::Invariant,
                    name: invariant.field_name,
                    sql: invariant.invariant_sql,
                });
            }
        }
        if enabled("checkConstraints") {
            let mut checks: Vec<Rule> = state
                .metadata()
                .configuration()
                .iter()
                .filter_map(|(key, sql)| {
                    let name = key.strip_prefix("delta.constraints.")?;
                    Some(Rule { kind: RuleKind::Check, name: name.to_owned(), sql: sql.clone() })
                })
                .collect();
            checks.sort_by(|a, b| a.name.cmp(&b.name));
            rules.extend(checks);
        }
        if enabled("generatedColumns") {
            let mut generated: Vec<Rule> = logical
                .get_generated_columns()
                .unwrap_or_default()
                .into_iter()
                .map(|g| Rule { kind: RuleKind::Generated, sql: g.generation_expr, name: g.name })
                .collect();
            generated.sort_by(|a, b| a.name.cmp(&b.name));
            rules.extend(generated);
        }
        RowRules { rules, schema }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The generated columns: a query may leave them out and the table computes them.
    pub fn generated_columns(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().filter(|r| r.kind == RuleKind::Generated).map(|r| r.name.as_str())
    }

    /// Why bf cannot keep these rules when it rewrites rows, one line per rule: an expression
    /// DataFusion cannot evaluate (deltalake would refuse every write), or a generated column whose
    /// value is not a function of its row — rows a slice keeps are checked against it again, and
    /// `now()` today is not what it was when they were written.
    pub fn problems(&self) -> Vec<String> {
        let Ok(schema) = DFSchema::try_from(self.schema.as_ref().clone()) else {
            return vec!["the table's schema cannot be read as DataFusion's".to_owned()];
        };
        let session = session();
        let mut problems = Vec::new();
        for rule in &self.rules {
            let Some(parsed) = rule.predicate(&schema, &session) else { continue };
            match parsed {
                Err(e) => problems.push(format!("the {rule} checked, and DataFusion cannot evaluate it ({e})")),
                Ok(expr) if rule.kind == RuleKind::Generated && !is_immutable(&expr) => problems.push(format!(
                    "the {rule} to hold for the rows a rewrite keeps, and its value is not a function of the row"
                )),
                Ok(_) => {}
            }
        }
        problems
    }

    /// The first rule a row of `rows` breaks, evaluated rule by rule in the table's order; `None`
    /// when every row keeps every rule that `rows` can be checked against (a generated column the
    /// query leaves out is computed by the table, so it cannot be broken).
    pub async fn first_broken(
        &self,
        rows: &DataFrame,
    ) -> deltalake::datafusion::error::Result<Option<Broken>> {
        let session = session();
        for rule in &self.rules {
            let Some(Ok(kept)) = rule.predicate(rows.schema(), &session) else { continue };
            let offending = rows.clone().filter(kept.is_not_true())?.limit(0, Some(1))?.collect().await?;
            let Some(batch) = offending.iter().find(|b| b.num_rows() > 0) else { continue };
            let row = batch
                .schema()
                .fields()
                .iter()
                .enumerate()
                .map(|(i, field)| {
                    let value = array_value_to_string(batch.column(i), 0).unwrap_or_else(|e| e.to_string());
                    let value = if batch.column(i).is_null(0) { "NULL".to_owned() } else { value };
                    format!("{} = {value}", field.name())
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Ok(Some(Broken { rule: rule.clone(), row }));
        }
        Ok(None)
    }
}

impl Rule {
    /// The rule as a predicate over `schema` that a row keeps when it is true. `None` for a rule on
    /// a column `schema` lacks (a generated column left to the table).
    fn predicate(&self, schema: &DFSchema, session: &SessionState) -> Option<deltalake::DeltaResult<Expr>> {
        let column_present = schema.has_column_with_unqualified_name(&self.name);
        Some(match self.kind {
            RuleKind::NotNull => {
                if !column_present {
                    return None;
                }
                Ok(ident(&self.name).is_not_null())
            }
            RuleKind::Check | RuleKind::Invariant => parse_predicate_expression(schema, &self.sql, session),
            RuleKind::Generated => {
                if !column_present {
                    return None;
                }
                let data_type = schema
                    .field_with_unqualified_name(&self.name)
                    .map(|f| f.data_type().clone())
                    .unwrap_or(DataType::Null);
                parse_predicate_expression(schema, &self.sql, session)
                    .and_then(|e| Ok(e.cast_to(&data_type, schema)?))
                    .map(|generated| binary_expr(ident(&self.name), Operator::IsNotDistinctFrom, generated))
            }
        })
    }
}

/// Whether an expression gives the same value for the same row every time it is evaluated.
fn is_immutable(expr: &Expr) -> bool {
    !expr
        .exists(|e| {
            Ok(matches!(e, Expr::ScalarFunction(f) if f.func.signature().volatility != Volatility::Immutable))
        })
        .unwrap_or(true)
}

fn session() -> SessionState {
    deltalake::delta_datafusion::create_session().into_inner().state()
}

/// The columns the table computes itself (generated columns), which a source may leave out.
pub fn generated_columns(table: &deltalake::DeltaTable) -> Vec<String> {
    table
        .snapshot()
        .map(|state| RowRules::of(state).generated_columns().map(str::to_owned).collect())
        .unwrap_or_default()
}
