//! A Delta input read on a cluster. deltalake's own scan cannot cross Ballista's wire (its codecs
//! neither encode the execution plan it makes nor keep the store it reads), so bf sends what the
//! query needs to read the input itself: the table's location, the version the plan pinned, its
//! files, and the columns, filters and limit of the scan. Each worker opens the table at that
//! version and reads its share of the files with deltalake's scan — deletion vectors, column
//! mapping and partition values applied as in bf's own process — with its own store settings.
//!
//! - [`DeltaSource`]: the table provider bf registers in a cluster session in place of the table.
//!   On the scheduler, its scan cuts the files into groups, one partition each, without reading
//!   anything.
//! - [`DeltaSourceExec`]: that scan, one partition per group, run on the workers.

use std::sync::Arc;

use datafusion_proto::bytes::Serializeable;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::datafusion::catalog::{Session, TableProvider};
use deltalake::datafusion::common::tree_node::TreeNodeRecursion;
use deltalake::datafusion::datasource::TableType;
use deltalake::datafusion::error::{DataFusionError, Result};
use deltalake::datafusion::execution::{SendableRecordBatchStream, SessionStateBuilder, TaskContext};
use deltalake::datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use deltalake::datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use deltalake::datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use deltalake::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use deltalake::datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, execute_stream,
};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use url::Url;

/// A Delta input as a cluster reads it: what the scheduler plans with, no I/O.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeltaSource {
    /// The table's location.
    pub uri: String,
    /// The version the plan reads.
    pub version: u64,
    /// Its live files at that version, by path as its log names them, with their sizes.
    pub files: Vec<(String, u64)>,
    /// The columns the query sees (a rehearsal's hidden columns left out).
    #[serde(skip, default = "empty_schema")]
    pub schema: SchemaRef,
}

fn empty_schema() -> SchemaRef {
    Arc::new(Schema::empty())
}

impl DeltaSource {
    /// The files cut into at most `groups` groups of about equal bytes, biggest first, each kept in
    /// its log's order. A table whose log names files outside its folder (a shallow clone: a
    /// rehearsal) is read whole by one partition: deltalake selects files under the table's root
    /// only.
    fn groups(&self, groups: usize) -> Vec<Vec<String>> {
        let outside = self.files.iter().any(|(path, _)| Url::parse(path).is_ok());
        if outside || self.files.is_empty() {
            return vec![Vec::new()];
        }
        let count = groups.clamp(1, self.files.len());
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.files[i].1));
        let mut bins: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); count];
        for i in order {
            let lightest = bins.iter_mut().min_by_key(|(bytes, _)| *bytes).expect("at least one group");
            lightest.0 += self.files[i].1;
            lightest.1.push(i);
        }
        bins.into_iter()
            .map(|(_, mut members)| {
                members.sort_unstable();
                members.into_iter().map(|i| self.files[i].0.clone()).collect()
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl TableProvider for DeltaSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Filters go to the workers, where deltalake skips files by them; DataFusion still applies
    /// them above the scan.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(columns) => Arc::new(self.schema.project(columns)?),
            None => self.schema.clone(),
        };
        // A filter that cannot be sent is left to the filter above the scan.
        let filters = filters.iter().filter_map(|f| f.to_bytes().ok().map(|b| b.to_vec())).collect();
        let scan = Scan {
            uri: self.uri.clone(),
            version: self.version,
            groups: self.groups(state.config().target_partitions()),
            columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
            filters,
            limit,
            schema: schema.as_ref().clone(),
        };
        Ok(Arc::new(DeltaSourceExec::new(scan)))
    }
}

/// What a worker needs to read its share of a Delta input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scan {
    uri: String,
    version: u64,
    /// The files of each partition; an empty group reads the whole table.
    groups: Vec<Vec<String>>,
    /// The columns to read, by name.
    columns: Vec<String>,
    /// The pushed-down filters, each a serialized DataFusion expression.
    filters: Vec<Vec<u8>>,
    limit: Option<usize>,
    /// The columns' schema: the scan's output.
    schema: Schema,
}

/// A Delta input's scan on the workers: partition `i` reads group `i` of its files.
#[derive(Debug)]
pub struct DeltaSourceExec {
    scan: Scan,
    properties: Arc<PlanProperties>,
}

impl DeltaSourceExec {
    pub fn new(scan: Scan) -> DeltaSourceExec {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::new(scan.schema.clone())),
            Partitioning::UnknownPartitioning(scan.groups.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        DeltaSourceExec { scan, properties: Arc::new(properties) }
    }

    pub fn scan(&self) -> &Scan {
        &self.scan
    }

    /// Reads partition `partition`: the table opened at the plan's version, with the worker's own
    /// store settings, and deltalake's scan of the group's files.
    async fn read(scan: Scan, partition: usize, ctx: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let failed = |e: &dyn std::fmt::Display| {
            DataFusionError::Execution(format!(
                "reading the Delta input {} at version {}: {e}",
                scan.uri, scan.version
            ))
        };
        crate::fault::pause_in_worker();
        let url = Url::parse(&scan.uri).map_err(|e| failed(&e))?;
        let stores = crate::delta::store::Stores::new(&Default::default());
        let table = stores.open(&url, Some(scan.version)).await.map_err(|e| failed(&e))?;
        let group = scan.groups.get(partition).cloned().unwrap_or_default();
        let provider = match group.is_empty() {
            true => table.table_provider().await,
            false => table.table_provider().with_file_paths(group).await,
        }
        .map_err(|e| failed(&e))?;
        let full = provider.schema();
        let projection = scan
            .columns
            .iter()
            .map(|name| full.index_of(name))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| failed(&e))?;
        let filters = scan
            .filters
            .iter()
            .map(|bytes| Expr::from_bytes_with_ctx(bytes, &ctx))
            .collect::<Result<Vec<_>>>()?;
        let state = SessionStateBuilder::new()
            .with_config(ctx.session_config().clone())
            .with_runtime_env(ctx.runtime_env())
            .with_default_features()
            .build();
        let plan = provider.scan(&state, Some(&projection), &filters, scan.limit).await?;
        // The table's schema may give a field other metadata or nullability than the query's.
        Ok(super::remote::as_planned(Arc::new(scan.schema), execute_stream(plan, ctx)?))
    }
}

impl DisplayAs for DeltaSourceExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "DeltaSourceExec: {} at version {}, {} partitions",
            self.scan.uri,
            self.scan.version,
            self.scan.groups.len()
        )
    }
}

impl ExecutionPlan for DeltaSourceExec {
    fn name(&self) -> &str {
        "DeltaSourceExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, ctx: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let schema: SchemaRef = Arc::new(self.scan.schema.clone());
        let read = DeltaSourceExec::read(self.scan.clone(), partition, ctx);
        let rows = futures::stream::once(read).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, rows)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(files: &[(&str, u64)]) -> DeltaSource {
        DeltaSource {
            uri: "file:///lake/orders".to_owned(),
            version: 3,
            files: files.iter().map(|(p, s)| ((*p).to_owned(), *s)).collect(),
            schema: empty_schema(),
        }
    }

    #[test]
    fn files_are_cut_into_groups_of_about_equal_bytes_each_file_once() {
        let files = [("a", 100), ("b", 10), ("c", 60), ("d", 50), ("e", 5)];
        let groups = source(&files).groups(2);
        // Biggest first, each to the lightest group: a; c; d (60 < 100); b (100 < 110); e (a tie: the first).
        assert_eq!(groups, vec![vec!["a", "b", "e"], vec!["c", "d"]]);
        let mut all: Vec<&str> = groups.iter().flatten().map(String::as_str).collect();
        all.sort();
        assert_eq!(all, ["a", "b", "c", "d", "e"]);
        // Never more groups than files, never none.
        assert_eq!(source(&files).groups(16).len(), 5);
        assert_eq!(source(&files).groups(0).len(), 1);
    }

    #[test]
    fn a_table_whose_log_names_files_elsewhere_or_none_is_read_by_one_partition() {
        let clone = source(&[("part-1.parquet", 10), ("file:///lake/other/part-2.parquet", 10)]);
        assert_eq!(clone.groups(4), vec![Vec::<String>::new()]);
        assert_eq!(source(&[]).groups(4), vec![Vec::<String>::new()]);
    }
}
