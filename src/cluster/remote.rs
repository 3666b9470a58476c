//! The client side of a cluster: a session whose queries Ballista runs on the cluster, and the rows
//! of such a query as a table in bf's own session, which bf's writer and checks read as they read
//! any table — each read one job on the cluster, its rows streamed back batch by batch.

use std::sync::Arc;

use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafusion::catalog::streaming::StreamingTable;
use deltalake::datafusion::error::Result;
use deltalake::datafusion::execution::{SendableRecordBatchStream, SessionStateBuilder, TaskContext};
use deltalake::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use deltalake::datafusion::physical_plan::streaming::PartitionStream;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use futures::{StreamExt, TryStreamExt};

use super::Cluster;

/// A session whose queries run on `cluster`: bf's usual session in the plan's `dialect` (its
/// settings travel with each query; its memory pool stays here, where it bounds nothing the
/// cluster does), planned by Ballista's planner.
pub fn session(cluster: &Cluster, dialect: crate::dialect::Dialect) -> Result<SessionContext> {
    let mut state = crate::delta::memory::session_state(None);
    // As bf's own slice sessions read Parquet (`source::run`).
    state.config_mut().options_mut().execution.parquet.schema_force_view_types = false;
    // bf's Delta inputs cross the wire by bf's codecs.
    let (logical, physical) = super::codec::codecs();
    let config = state
        .config()
        .clone()
        .with_ballista_logical_extension_codec(logical)
        .with_ballista_physical_extension_codec(physical);
    let state = SessionStateBuilder::new_from_existing(state).with_config(config).build();
    let state = state.upgrade_for_ballista(cluster.endpoint())?;
    // After Ballista's upgrade, which sets its own functions in place of the session's.
    Ok(SessionContext::new_with_state(crate::dialect::speaking(state, dialect)))
}

/// `rows`, a query of a [`session`], as a table bf's own session reads: every scan runs the query
/// on the cluster again and streams its result.
pub fn rows_here(rows: DataFrame) -> Result<Arc<StreamingTable>> {
    let schema: SchemaRef = Arc::new(rows.schema().as_arrow().clone());
    let partition = Arc::new(RemoteRows { schema: schema.clone(), rows });
    Ok(Arc::new(StreamingTable::try_new(schema, vec![partition])?))
}

/// The result of a query run on the cluster, as one stream.
struct RemoteRows {
    schema: SchemaRef,
    rows: DataFrame,
}

impl std::fmt::Debug for RemoteRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRows").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl PartitionStream for RemoteRows {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let rows = self.rows.clone();
        // The job is submitted when the stream is first polled, and its rows come back as Arrow
        // batches (a shuffle may have loosened a column's nullability on the way).
        let batches = futures::stream::once(async move { rows.execute_stream().await }).try_flatten();
        as_planned(self.schema.clone(), batches)
    }
}

/// `rows` as a stream of batches of `schema`, the schema their query was planned with here: the
/// same columns, which came back with a field's nullability or metadata of their own.
pub(super) fn as_planned(
    schema: SchemaRef,
    rows: impl futures::Stream<Item = Result<RecordBatch>> + Send + 'static,
) -> SendableRecordBatchStream {
    let planned = schema.clone();
    let batches =
        rows.map(move |batch| Ok(RecordBatch::try_new(planned.clone(), batch?.columns().to_vec())?));
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}
