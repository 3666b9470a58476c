//! A slice too big to hold in memory, paired a part at a time.
//!
//! Pairing a big slice by SQL sorts both sides whole (a sort-merge join, which spills): on a
//! 10,000,000-row slice that was most of `bf plan`'s time, and the spill files read back held
//! hundreds of megabytes no memory pool accounts for (docs/BENCHMARKS.md, W3). Here each side is
//! read once, as a stream, and each row is sent by a hash of its key to one of [`PARTS`] parts, each
//! a file on disk (Arrow IPC, as DataFusion spills). A key's rows, on both sides, land in one part,
//! so a part's pairs are the slice's: consecutive parts are read back together, as many as fit in
//! a share of the comparison's memory, and paired as a slice held in memory is (`pairing`). The
//! counts add up; each part's samples are its first by key, so the slice's are the first of theirs.
//!
//! Where a part cannot be paired so — a key that repeats, a column without a comparison kernel,
//! sides read as different types — `None` says the slice is paired by SQL, as before.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::BatchCoalescer;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::ipc::reader::StreamReader;
use deltalake::arrow::ipc::writer::StreamWriter;
use deltalake::datafusion::error::{DataFusionError, Result as DfResult};
use futures::StreamExt;

use super::changes::RowChanges;
use super::pairing::{Keys, Paired, merge};
use super::session::{Comparison, Side};

/// How many parts a side is split into. A part of a 10,000,000-row slice holds about 150,000 rows
/// of each side; parts are paired several at a time, so small slices pay only for the files.
const PARTS: usize = 64;

/// Rows a part's file is written in at a time: a side's rows wait here for their part's next
/// write, so this times [`PARTS`] rows are held while a side is split.
const WRITE_ROWS: usize = 2048;

/// What the parts paired together may hold in memory: a quarter of the comparison's pool, the rest
/// left to the pairing's own keys and order, and to the queries beside it.
fn budget(pool: usize) -> usize {
    pool / 4
}

/// Pairs the focused slice's two sides by `key` part by part, or `None` where it must be paired by
/// SQL. `pool`: the comparison's memory pool, in bytes; `by`: the `[diff] by` columns.
pub(super) async fn pair(
    comparison: &Comparison,
    key: &[String],
    samples: usize,
    by: &[String],
    pool: usize,
) -> DfResult<Option<RowChanges>> {
    let schema = &comparison.schema;
    let before = comparison.ctx.table(Side::Before.slice_view()).await?.execute_stream().await?;
    let after = comparison.ctx.table(Side::After.slice_view()).await?.execute_stream().await?;
    let Some(keys) = Keys::new(schema, &before.schema(), key)? else { return Ok(None) };
    if !keys.reads_as(schema, &after.schema()) {
        return Ok(None);
    }
    let folder =
        tempfile::Builder::new().prefix("bf-pairing-").tempdir().map_err(DataFusionError::IoError)?;
    let mut sides = Vec::with_capacity(2);
    for (name, stream) in [("before", before), ("after", after)] {
        match split(&keys, schema, stream, &folder.path().join(name)).await? {
            Some(side) => sides.push(side),
            None => return Ok(None),
        }
    }
    let (before, after) = (&sides[0], &sides[1]);
    let mut paired: Vec<Paired> = Vec::new();
    let mut first = 0;
    while first < PARTS {
        // Consecutive parts, as many as fit the budget together (one at least).
        let mut last = first;
        let mut held = before.bytes[first] + after.bytes[first];
        while last + 1 < PARTS && held + before.bytes[last + 1] + after.bytes[last + 1] <= budget(pool) {
            last += 1;
            held += before.bytes[last] + after.bytes[last];
        }
        let (b, a) = (before.read(first..=last)?, after.read(first..=last)?);
        match keys.pair(schema, &b, &a, samples, by)? {
            Some(part) => paired.push(part),
            None => return Ok(None),
        }
        first = last + 1;
    }
    Ok(Some(merge(paired, samples)))
}

/// One side split into its parts' files.
struct Split {
    files: Vec<PathBuf>,
    /// The Arrow memory of each part's rows, as written.
    bytes: Vec<usize>,
}

impl Split {
    /// The rows of `parts`, read back.
    fn read(&self, parts: std::ops::RangeInclusive<usize>) -> DfResult<Vec<RecordBatch>> {
        let mut batches = Vec::new();
        for part in parts.filter(|&p| self.bytes[p] > 0) {
            let reader = StreamReader::try_new(BufReader::new(File::open(&self.files[part])?), None)?;
            for batch in reader {
                batches.push(batch?);
            }
        }
        Ok(batches)
    }
}

/// Streams one side's rows into [`PARTS`] files under `folder`; `None` where a batch is not read as
/// the keying expects (the slice is then paired by SQL).
async fn split(
    keys: &Keys,
    schema: &SchemaRef,
    mut stream: deltalake::datafusion::execution::SendableRecordBatchStream,
    folder: &Path,
) -> DfResult<Option<Split>> {
    std::fs::create_dir_all(folder)?;
    let read_as = stream.schema();
    let files: Vec<PathBuf> = (0..PARTS).map(|p| folder.join(format!("{p}.arrow"))).collect();
    let mut writers = Vec::with_capacity(PARTS);
    for file in &files {
        writers.push(StreamWriter::try_new(BufWriter::new(File::create(file)?), &read_as)?);
    }
    // Each part's rows gathered into batches of their own (strings copied out of the scan's
    // buffers, which a view would otherwise keep whole).
    let mut pending: Vec<BatchCoalescer> =
        (0..PARTS).map(|_| BatchCoalescer::new(read_as.clone(), WRITE_ROWS)).collect();
    let mut bytes = vec![0; PARTS];
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let Some(rows) = keys.split(schema, &batch, PARTS)? else { return Ok(None) };
        for (part, rows) in rows.into_iter().enumerate().filter(|(_, rows)| !rows.is_empty()) {
            pending[part].push_batch_with_indices(batch.clone(), &UInt32Array::from(rows))?;
            write(&mut pending[part], &mut writers[part], &mut bytes[part])?;
        }
    }
    for (part, mut writer) in writers.into_iter().enumerate() {
        pending[part].finish_buffered_batch()?;
        write(&mut pending[part], &mut writer, &mut bytes[part])?;
        writer.into_inner()?.into_inner().map_err(|e| DataFusionError::IoError(e.into_error()))?;
    }
    Ok(Some(Split { files, bytes }))
}

/// Writes the batches `pending` completed to a part's file, counting their bytes.
fn write(
    pending: &mut BatchCoalescer,
    file: &mut StreamWriter<BufWriter<File>>,
    bytes: &mut usize,
) -> DfResult<()> {
    while let Some(batch) = pending.next_completed_batch() {
        *bytes += batch.get_array_memory_size();
        file.write(&batch)?;
    }
    Ok(())
}
