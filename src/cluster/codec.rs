//! How a plan's Delta inputs and its dialect's functions cross Ballista's wire: bf's codecs in
//! front of Ballista's own, in bf, on the scheduler and on every worker. What is bf's
//! ([`DeltaSource`], [`DeltaSourceExec`]) is sent as JSON behind a tag no protobuf message starts
//! with (field number 0 does not exist), so a buffer is decoded by the codec that wrote it, never
//! by guessing; everything else is Ballista's.
//!
//! A function crosses by its name, and a node finds it among its own. A plan in Spark SQL calls
//! functions that share their names with DataFusion's and mean otherwise (`split`, `date_format`,
//! `avg` of a decimal…): those are sent with a tag of their own, and a node finds them among the
//! Spark dialect's ([`crate::dialect::spark_function`]), so the query runs with the meaning it was
//! planned with, whichever plans share the cluster.

use std::sync::Arc;

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafusion::catalog::TableProvider;
use deltalake::datafusion::common::TableReference;
use deltalake::datafusion::datasource::file_format::FileFormatFactory;
use deltalake::datafusion::error::{DataFusionError, Result};
use deltalake::datafusion::execution::TaskContext;
use deltalake::datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF};
use deltalake::datafusion::physical_plan::ExecutionPlan;

use super::delta::{DeltaSource, DeltaSourceExec, Scan};
use crate::dialect::{SparkFunction, spark_function};

/// What bf's buffers start with.
const TAG: &[u8] = b"\0bf-delta\0";

fn tagged<T: serde::Serialize>(value: &T, buf: &mut Vec<u8>) -> Result<()> {
    buf.extend_from_slice(TAG);
    serde_json::to_writer(buf, value)
        .map_err(|e| DataFusionError::Internal(format!("encoding a Delta input: {e}")))
}

fn untagged<T: serde::de::DeserializeOwned>(buf: &[u8]) -> Option<Result<T>> {
    let json = buf.strip_prefix(TAG)?;
    Some(
        serde_json::from_slice(json)
            .map_err(|e| DataFusionError::Internal(format!("decoding a Delta input: {e}"))),
    )
}

/// What the buffer of a function of the Spark dialect holds.
const SPARK: &[u8] = b"\0bf-spark\0";

/// Marks `function` as the Spark dialect's when it is (not DataFusion's of the same name).
fn encode_scalar(function: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
    if let Some(SparkFunction::Scalar(spark)) = spark_function(function.name())
        && *spark == *function
    {
        buf.extend_from_slice(SPARK);
    }
    Ok(())
}

fn encode_aggregate(function: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
    if let Some(SparkFunction::Aggregate(spark)) = spark_function(function.name())
        && *spark == *function
    {
        buf.extend_from_slice(SPARK);
    }
    Ok(())
}

/// The function a buffer marks as the Spark dialect's; any other is the node's own of that name.
fn decode(name: &str, buf: &[u8]) -> Result<SparkFunction> {
    if buf != SPARK {
        return Err(DataFusionError::NotImplemented(format!("no function {name} on this node")));
    }
    spark_function(name).ok_or_else(|| {
        DataFusionError::Internal(format!("the Spark dialect has no function {name} on this node"))
    })
}

fn decode_scalar(name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
    match decode(name, buf)? {
        SparkFunction::Scalar(function) => Ok(function),
        SparkFunction::Aggregate(_) => Err(DataFusionError::Internal(format!("{name} is an aggregate"))),
    }
}

fn decode_aggregate(name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
    match decode(name, buf)? {
        SparkFunction::Aggregate(function) => Ok(function),
        SparkFunction::Scalar(_) => Err(DataFusionError::Internal(format!("{name} is not an aggregate"))),
    }
}

/// Ballista's logical codec, and bf's Delta inputs.
#[derive(Debug, Default)]
pub struct LogicalCodec {
    ballista: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for LogicalCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> Result<Extension> {
        self.ballista.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        match untagged::<DeltaSource>(buf) {
            Some(source) => Ok(Arc::new(DeltaSource { schema, ..source? })),
            None => self.ballista.try_decode_table_provider(buf, table_ref, schema, ctx),
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        match node.downcast_ref::<DeltaSource>() {
            Some(source) => tagged(source, buf),
            None => self.ballista.try_encode_table_provider(table_ref, node, buf),
        }
    }

    fn try_decode_file_format(&self, buf: &[u8], ctx: &TaskContext) -> Result<Arc<dyn FileFormatFactory>> {
        self.ballista.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(&self, buf: &mut Vec<u8>, node: Arc<dyn FileFormatFactory>) -> Result<()> {
        self.ballista.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_scalar(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_scalar(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        decode_aggregate(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_aggregate(node, buf)
    }
}

/// Ballista's physical codec, and the scans of bf's Delta inputs.
#[derive(Debug, Default)]
pub struct PhysicalCodec {
    ballista: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for PhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match untagged::<Scan>(buf) {
            Some(scan) => Ok(Arc::new(DeltaSourceExec::new(scan?))),
            None => self.ballista.try_decode(buf, inputs, ctx, proto_converter),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        match node.downcast_ref::<DeltaSourceExec>() {
            Some(exec) => tagged(exec.scan(), buf),
            None => self.ballista.try_encode(node, buf, proto_converter),
        }
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        decode_scalar(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_scalar(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        decode_aggregate(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        encode_aggregate(node, buf)
    }
}

/// bf's two codecs, as the client, the scheduler and the workers each take them.
pub fn codecs() -> (Arc<dyn LogicalExtensionCodec>, Arc<dyn PhysicalExtensionCodec>) {
    (Arc::new(LogicalCodec::default()), Arc::new(PhysicalCodec::default()))
}
