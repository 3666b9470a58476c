//! How a plan's Delta inputs cross Ballista's wire: bf's codecs in front of Ballista's own, in bf,
//! on the scheduler and on every worker. What is bf's ([`DeltaSource`], [`DeltaSourceExec`]) is
//! sent as JSON behind a tag no protobuf message starts with (field number 0 does not exist), so a
//! buffer is decoded by the codec that wrote it, never by guessing; everything else is Ballista's.

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
use deltalake::datafusion::logical_expr::{Extension, LogicalPlan};
use deltalake::datafusion::physical_plan::ExecutionPlan;

use super::delta::{DeltaSource, DeltaSourceExec, Scan};

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
}

/// bf's two codecs, as the client, the scheduler and the workers each take them.
pub fn codecs() -> (Arc<dyn LogicalExtensionCodec>, Arc<dyn PhysicalExtensionCodec>) {
    (Arc::new(LogicalCodec::default()), Arc::new(PhysicalCodec::default()))
}
