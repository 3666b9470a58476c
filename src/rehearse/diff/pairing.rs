//! A slice held in memory, paired by key in one pass over its rows.
//!
//! Pairing through SQL took five queries a slice — a duplicate-key aggregation per side, the full
//! outer join (held as pairs), their counts, and a top-k per kind of change — each planned and run
//! by DataFusion: most of a small slice's comparison, and on a table partitioned by day, CPU taken
//! from the rehearsal's write that runs beside it. Here each side's rows are put in key order (the
//! key encoded once in Arrow's row format, which orders as SQL does; rows already in key order,
//! as a table's files often are, cost little to sort), the two orders are walked together, and
//! whether a pair changed is asked column by column, of every pair not yet known to differ at once
//! (Arrow's `IS DISTINCT FROM` kernel, the one DataFusion's runs). The walk meets the rows in key
//! order, so each kind's samples are its first rows met, and a key that repeats is next to its twin.
//!
//! It answers what the SQL pairing answers, to the row: a row whose key has a NULL pairs with
//! nothing (SQL's `=`), two rows are the same when no column is distinct (NULLs equal, −0.0 equal
//! to 0.0, NaN to NaN), and the samples are the first of each kind by key, NULLs last. Where it
//! cannot — a key that repeats on one side (rows then pair by their rank, which the SQL ranks), a
//! nested column, or two sides read as different types — [`pair`] says so and the slice is paired
//! by SQL. A property test checks the two agree.
//!
//! A side stays the batches it was read as: its keys are encoded batch by batch, and only the
//! paired rows' columns are gathered, once, from across the batches (concatenating every column
//! of both sides first was a sixth of the pairing's time on a table partitioned by day, where a
//! side is one batch per day).
//!
//! A slice too big to hold is paired the same way in parts (`parts.rs`): [`Keys`] is made once
//! and encodes every part's keys alike, [`Keys::split`] sends each row to its key's part, and
//! [`merge`] adds the parts' changes up.

use std::cmp::Ordering;

use deltalake::arrow::array::{Array, ArrayRef, RecordBatch};
use deltalake::arrow::compute::kernels::cmp::distinct;
use deltalake::arrow::compute::{SortOptions, cast_with_options, interleave};
use deltalake::arrow::datatypes::{DataType, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::row::{OwnedRow, RowConverter, Rows, SortField};
use deltalake::arrow::util::display::array_value_to_string;
use deltalake::datafusion::common::format::DEFAULT_CAST_OPTIONS;
use deltalake::datafusion::common::utils::normalize_float_zero;

use super::changes::{RowChanges, SampleRow};
use super::shapes::Tallies;

/// How many changed pairs are gathered at a time to tally their columns' changes.
const TALLIED_AT_ONCE: usize = 8_192;

/// One side of the slice: its batches' columns in the schema's order, its keys in the row format
/// (numbered across the batches, in their order), and its rows with a whole key in key order.
struct Keyed {
    batches: Vec<Vec<ArrayRef>>,
    /// The number of the first row of each batch.
    starts: Vec<u32>,
    keys: Rows,
    /// Each keyed row's key's first 16 bytes, which decide most comparisons, and its number.
    ordered: Vec<(u128, u32)>,
    /// Rows with a NULL in the key, which pair with nothing.
    unkeyed: Vec<u32>,
}

/// Pairs the rows of `before` and `after` by `key` and counts and samples the changes, or `None`
/// where the slice must be paired by SQL (see the module's doc).
pub(super) fn pair(
    schema: &SchemaRef,
    before: &[RecordBatch],
    after: &[RecordBatch],
    key: &[String],
    samples: usize,
    by: &[String],
) -> Result<Option<RowChanges>, ArrowError> {
    // The columns as the scan reads them (strings as views, say), the same on both sides.
    let Some(first) = before.iter().chain(after).next() else { return Ok(Some(RowChanges::default())) };
    let Some(keys) = Keys::new(schema, &first.schema(), key)? else { return Ok(None) };
    Ok(keys.pair(schema, before, after, samples, by)?.map(|paired| merge(vec![paired], samples)))
}

/// How both sides of a slice are keyed: where the key's columns are, the type each column must be
/// read as on both sides, and the key's encoder — one for every part a slice is paired in
/// (`diff/parts.rs`), so that keys from different parts order alike.
pub(super) struct Keys {
    key_at: Vec<usize>,
    types: Vec<DataType>,
    encoder: RowConverter,
}

/// A slice, or a part of one, paired: its changes, and the key of each sample, which orders the
/// samples of several parts as one slice's.
pub(super) struct Paired {
    pub(super) changes: RowChanges,
    sample_keys: Vec<OwnedRow>,
    /// How its changed pairs' columns changed, counted: the parts' are added up before a shape
    /// is chosen, so a slice paired in parts names the shapes one paired whole does.
    tallies: Tallies,
}

impl Keys {
    /// The keying of a slice whose sides are read as `read`; `None` where it must be paired by
    /// SQL (a key column missing, a nested column, a key the row format cannot encode).
    pub(super) fn new(schema: &SchemaRef, read: &Schema, key: &[String]) -> Result<Option<Keys>, ArrowError> {
        let key_at: Option<Vec<usize>> = key.iter().map(|k| schema.index_of(k).ok()).collect();
        let Some(key_at) = key_at else { return Ok(None) };
        let types: Option<Vec<DataType>> = schema
            .fields()
            .iter()
            .map(|f| read.field_with_name(f.name()).ok().map(|read| read.data_type().clone()))
            .collect();
        let Some(types) = types.filter(|types| !types.iter().any(DataType::is_nested)) else {
            return Ok(None);
        };
        // Samples are ordered by key, NULLs last: SQL's `ORDER BY` ascending.
        let ascending = SortOptions { descending: false, nulls_first: false };
        let fields: Vec<SortField> =
            key_at.iter().map(|&i| SortField::new_with_options(types[i].clone(), ascending)).collect();
        if !RowConverter::supports_fields(&fields) {
            return Ok(None);
        }
        Ok(Some(Keys { key_at, types, encoder: RowConverter::new(fields)? }))
    }

    /// Whether a side read as `read` has every column as this keying expects.
    pub(super) fn reads_as(&self, schema: &SchemaRef, read: &Schema) -> bool {
        schema.fields().iter().zip(&self.types).all(|(field, data_type)| {
            read.field_with_name(field.name()).is_ok_and(|read| read.data_type() == data_type)
        })
    }

    /// Pairs the rows of `before` and `after`, and tallies how each column of the changed pairs
    /// changed (`by`: the `[diff] by` columns naming their group); `None` where they must be paired
    /// by SQL (a key repeats on one side, a batch read as other types, a column without a
    /// comparison kernel).
    pub(super) fn pair(
        &self,
        schema: &SchemaRef,
        before: &[RecordBatch],
        after: &[RecordBatch],
        samples: usize,
        by: &[String],
    ) -> Result<Option<Paired>, ArrowError> {
        let Keys { key_at, types, encoder } = self;
        let (Some(before), Some(after)) = (
            Keyed::read(schema, types, before, key_at, encoder)?,
            Keyed::read(schema, types, after, key_at, encoder)?,
        ) else {
            return Ok(None);
        };
        if [&before, &after].iter().any(|side| side.repeats_a_key()) {
            return Ok(None);
        }

        let Walk { pairs_before, pairs_after, added, removed } = walk(&before, &after);
        let Some(differs) = differs(&before, &after, &pairs_before, &pairs_after, types, key_at)? else {
            return Ok(None);
        };
        let changed: Vec<usize> = (0..differs.len()).filter(|&i| differs[i]).collect();
        let mut tallies = Tallies::new(schema, key_at, by);
        for chunk in changed.chunks(TALLIED_AT_ONCE) {
            let at_before: Vec<(usize, usize)> =
                chunk.iter().map(|&i| before.locate(pairs_before[i])).collect();
            let at_after: Vec<(usize, usize)> = chunk.iter().map(|&i| after.locate(pairs_after[i])).collect();
            let groups: Vec<(ArrayRef, ArrayRef)> = tallies
                .grouped_by()
                .into_iter()
                .map(|g| Ok((before.gather(g, &at_before)?, after.gather(g, &at_after)?)))
                .collect::<Result<_, ArrowError>>()?;
            tallies.add(|i| Ok((before.gather(i, &at_before)?, after.gather(i, &at_after)?)), &groups)?;
        }
        let changes = RowChanges {
            added: (added.len() + after.unkeyed.len()) as u64,
            removed: (removed.len() + before.unkeyed.len()) as u64,
            changed: changed.len() as u64,
            unchanged: (pairs_before.len() - changed.len()) as u64,
            ..RowChanges::default()
        };
        let mut paired = Paired { changes, sample_keys: Vec::new(), tallies };
        for &i in changed.iter().take(samples) {
            paired.changes.samples.push(SampleRow {
                change: "changed".into(),
                before: Some(before.texts(pairs_before[i])?),
                after: Some(after.texts(pairs_after[i])?),
            });
            paired.sample_keys.push(before.key(pairs_before[i]).owned());
        }
        for (side, keyed, is_after) in [(&after, &added, true), (&before, &removed, false)] {
            for row in side.first(keyed, samples) {
                let text = Some(side.texts(row)?);
                paired.changes.samples.push(match is_after {
                    true => SampleRow { change: "added".into(), before: None, after: text },
                    false => SampleRow { change: "removed".into(), before: text, after: None },
                });
                paired.sample_keys.push(side.key(row).owned());
            }
        }
        if !paired.changes.samples.is_empty() {
            paired.changes.columns = schema.fields().iter().map(|f| f.name().clone()).collect();
        }
        Ok(Some(paired))
    }

    /// The part (of `parts`) each row of `batch` belongs to, as the rows of each part: rows whose
    /// keys are equal share a part, on either side. `None` for a batch read as other types.
    pub(super) fn split(
        &self,
        schema: &SchemaRef,
        batch: &RecordBatch,
        parts: usize,
    ) -> Result<Option<Vec<Vec<u32>>>, ArrowError> {
        let mut key = Vec::with_capacity(self.key_at.len());
        for &i in &self.key_at {
            match batch.column_by_name(schema.field(i).name()) {
                Some(column) if column.data_type() == &self.types[i] => key.push(column.clone()),
                _ => return Ok(None),
            }
        }
        let encoded = self.encoder.convert_columns(&key)?;
        // A fixed hash of the key's encoding: the same on both sides and in every run.
        use std::hash::BuildHasher;
        let hasher = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let mut rows = vec![Vec::new(); parts];
        for (r, row) in encoded.iter().enumerate() {
            rows[(hasher.hash_one(row.data()) % parts as u64) as usize].push(r as u32);
        }
        Ok(Some(rows))
    }
}

/// The changes of a slice paired in parts (`diff/parts.rs`): the parts' counts added up, and of
/// each kind of change the first `samples` by key among the parts' samples, each part's being its
/// own first by key.
pub(super) fn merge(parts: Vec<Paired>, samples: usize) -> RowChanges {
    let mut changes = RowChanges::default();
    let mut tallies: Option<Tallies> = None;
    let mut sampled = Vec::new();
    for Paired { changes: part, sample_keys, tallies: counted } in parts {
        changes.added += part.added;
        changes.removed += part.removed;
        changes.changed += part.changed;
        changes.unchanged += part.unchanged;
        match &mut tallies {
            Some(sum) => sum.merge(counted),
            None => tallies = Some(counted),
        }
        if changes.columns.is_empty() {
            changes.columns = part.columns;
        }
        sampled.extend(part.samples.into_iter().zip(sample_keys));
    }
    // The kinds in the order one slice's pairing lists them, each by key.
    let rank = |sample: &SampleRow| ["changed", "added", "removed"].iter().position(|k| *k == sample.change);
    sampled.sort_by(|(x, xk), (y, yk)| rank(x).cmp(&rank(y)).then_with(|| xk.cmp(yk)));
    let mut taken: std::collections::HashMap<String, usize> = Default::default();
    for (sample, _) in sampled {
        let n = taken.entry(sample.change.clone()).or_default();
        if *n < samples {
            *n += 1;
            changes.samples.push(sample);
        }
    }
    changes.column_changes = tallies.map(Tallies::finish).unwrap_or_default();
    changes
}

/// Where each row went: rows of both sides paired by key (in key order), and the rows of one
/// side only.
struct Walk {
    pairs_before: Vec<u32>,
    pairs_after: Vec<u32>,
    added: Vec<u32>,
    removed: Vec<u32>,
}

/// Both sides in key order, walked together: a key on one side only was added or removed.
fn walk(before: &Keyed, after: &Keyed) -> Walk {
    let mut walk =
        Walk { pairs_before: Vec::new(), pairs_after: Vec::new(), added: Vec::new(), removed: Vec::new() };
    let (mut b, mut a) = (before.ordered.iter().peekable(), after.ordered.iter().peekable());
    loop {
        let order = match (b.peek(), a.peek()) {
            (Some(&&x), Some(&&y)) => x.0.cmp(&y.0).then_with(|| before.key(x.1).cmp(&after.key(y.1))),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return walk,
        };
        match order {
            Ordering::Less => walk.removed.extend(b.next().map(|x| x.1)),
            Ordering::Greater => walk.added.extend(a.next().map(|y| y.1)),
            Ordering::Equal => {
                walk.pairs_before.extend(b.next().map(|x| x.1));
                walk.pairs_after.extend(a.next().map(|y| y.1));
            }
        }
    }
}

impl Keyed {
    /// A side's keys encoded and its rows put in key order; `None` when a batch lacks one of the
    /// schema's columns or holds it as another type than `types` (the SQL pairing casts where it
    /// can).
    fn read(
        schema: &SchemaRef,
        types: &[DataType],
        batches: &[RecordBatch],
        key_at: &[usize],
        keys: &RowConverter,
    ) -> Result<Option<Keyed>, ArrowError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let mut side = Keyed {
            batches: Vec::with_capacity(batches.len()),
            starts: Vec::with_capacity(batches.len()),
            keys: keys.empty_rows(rows, 0),
            ordered: Vec::with_capacity(rows),
            unkeyed: Vec::new(),
        };
        for batch in batches {
            let mut columns = Vec::with_capacity(types.len());
            for (field, data_type) in schema.fields().iter().zip(types) {
                match batch.column_by_name(field.name()) {
                    Some(column) if column.data_type() == data_type => columns.push(column.clone()),
                    _ => return Ok(None),
                }
            }
            let start = side.keys.num_rows() as u32;
            let key: Vec<ArrayRef> = key_at.iter().map(|&i| columns[i].clone()).collect();
            keys.append(&mut side.keys, &key)?;
            for r in 0..batch.num_rows() {
                let row = start + r as u32;
                match key.iter().any(|c| c.is_null(r)) {
                    true => side.unkeyed.push(row),
                    false => side.ordered.push((prefix(side.keys.row(row as usize).data()), row)),
                }
            }
            side.starts.push(start);
            side.batches.push(columns);
        }
        // Sorted by the key's first 16 bytes (all of an integer's), then by the whole key where
        // those tie; a stable sort, which merges the runs a side's files are already sorted in (a
        // table partitioned by day: one run a day) instead of sorting anew.
        side.ordered.sort_by_key(|&(prefix, _)| prefix);
        let keys = &side.keys;
        for tied in side.ordered.chunk_by_mut(|x, y| x.0 == y.0).filter(|run| run.len() > 1) {
            tied.sort_by(|x, y| keys.row(x.1 as usize).cmp(&keys.row(y.1 as usize)));
        }
        Ok(Some(side))
    }

    fn key(&self, row: u32) -> deltalake::arrow::row::Row<'_> {
        self.keys.row(row as usize)
    }

    /// The batch a row is in, and its place there.
    fn locate(&self, row: u32) -> (usize, usize) {
        let batch = self.starts.partition_point(|&start| start <= row) - 1;
        (batch, (row - self.starts[batch]) as usize)
    }

    /// One column of `rows`, gathered from across the batches.
    fn gather(&self, column: usize, rows: &[(usize, usize)]) -> Result<ArrayRef, ArrowError> {
        let parts: Vec<&dyn Array> = self.batches.iter().map(|b| b[column].as_ref()).collect();
        interleave(&parts, rows)
    }

    /// Whether two rows share a key: in key order, they are neighbours.
    fn repeats_a_key(&self) -> bool {
        self.ordered.windows(2).any(|w| w[0].0 == w[1].0 && self.key(w[0].1) == self.key(w[1].1))
    }

    /// The first `n` rows by key of `keyed` (rows in key order) and the rows without a key, which
    /// SQL orders after every key they share a first column with, or last.
    fn first(&self, keyed: &[u32], n: usize) -> Vec<u32> {
        let mut first: Vec<u32> = keyed.iter().take(n).chain(&self.unkeyed).copied().collect();
        let by_key = |x: &u32, y: &u32| self.key(*x).cmp(&self.key(*y));
        if first.len() > n && n > 0 {
            first.select_nth_unstable_by(n - 1, by_key);
        }
        first.truncate(n);
        first.sort_unstable_by(by_key);
        first
    }

    /// One row's values as a reviewer reads them, as SQL's `CAST(… AS VARCHAR)` writes each;
    /// `NULL` for a null.
    fn texts(&self, row: u32) -> Result<Vec<String>, ArrowError> {
        let (batch, row) = self.locate(row);
        self.batches[batch]
            .iter()
            .map(|column| {
                if column.is_null(row) {
                    return Ok("NULL".to_owned());
                }
                let value = column.slice(row, 1);
                match cast_with_options(&value, &DataType::Utf8, &DEFAULT_CAST_OPTIONS) {
                    Ok(text) => array_value_to_string(&text, 0),
                    // Bytes that are not UTF-8 have no text: show them as Arrow does.
                    Err(_) => array_value_to_string(&value, 0),
                }
            })
            .collect()
    }
}

/// A key's first 16 bytes as a number that orders as the bytes do (shorter keys padded with
/// zeros, which order before any byte that follows where they tie).
fn prefix(key: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(bytes)
}

/// Whether each pair differs in any column; `None` when a column's type has no `IS DISTINCT FROM`
/// kernel. A column is compared for the pairs not yet known to differ, gathered from both sides:
/// the key's columns not at all (paired rows hold the same key), then fixed-width columns, the
/// cheapest to gather, then the rest. A backfill that corrects an amount of every row gathers
/// nothing after the amount.
fn differs(
    before: &Keyed,
    after: &Keyed,
    b: &[u32],
    a: &[u32],
    types: &[DataType],
    key_at: &[usize],
) -> Result<Option<Vec<bool>>, ArrowError> {
    let mut any = vec![false; b.len()];
    // The pairs still open: their numbers, and where their rows are on each side.
    let mut open: Vec<usize> = (0..b.len()).collect();
    let locate = |side: &Keyed, rows: &[u32]| rows.iter().map(|&row| side.locate(row)).collect::<Vec<_>>();
    let mut at = [locate(before, b), locate(after, a)];
    let mut columns: Vec<usize> = (0..types.len()).filter(|c| !key_at.contains(c)).collect();
    columns.sort_by_key(|&c| !types[c].is_primitive());
    for column in columns {
        if open.is_empty() {
            break;
        }
        // SQL's `IS DISTINCT FROM`: DataFusion takes −0.0 for 0.0 before Arrow's kernel compares.
        let read = |side: &Keyed, rows: &[(usize, usize)]| {
            side.gather(column, rows).map(|c| normalize_float_zero(&c))
        };
        let Ok(distinct) = distinct(&read(before, &at[0])?, &read(after, &at[1])?) else { return Ok(None) };
        let mut still = 0;
        for (k, differs) in distinct.values().iter().enumerate() {
            if differs {
                any[open[k]] = true;
            } else {
                open[still] = open[k];
                at[0][still] = at[0][k];
                at[1][still] = at[1][k];
                still += 1;
            }
        }
        open.truncate(still);
        at.iter_mut().for_each(|side| side.truncate(still));
    }
    Ok(Some(any))
}

#[cfg(test)]
mod tests;
