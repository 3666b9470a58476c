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
) -> Result<Option<RowChanges>, ArrowError> {
    // The columns as the scan reads them (strings as views, say), the same on both sides.
    let Some(first) = before.iter().chain(after).next() else { return Ok(Some(RowChanges::default())) };
    let Some(keys) = Keys::new(schema, &first.schema(), key)? else { return Ok(None) };
    Ok(keys.pair(schema, before, after, samples)?.map(|paired| paired.changes))
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

    /// Pairs the rows of `before` and `after`; `None` where they must be paired by SQL (a key
    /// repeats on one side, a batch read as other types, a column without a comparison kernel).
    pub(super) fn pair(
        &self,
        schema: &SchemaRef,
        before: &[RecordBatch],
        after: &[RecordBatch],
        samples: usize,
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
        let changes = RowChanges {
            added: (added.len() + after.unkeyed.len()) as u64,
            removed: (removed.len() + before.unkeyed.len()) as u64,
            changed: changed.len() as u64,
            unchanged: (pairs_before.len() - changed.len()) as u64,
            ..RowChanges::default()
        };
        let mut paired = Paired { changes, sample_keys: Vec::new() };
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
    let mut sampled = Vec::new();
    for Paired { changes: part, sample_keys } in parts {
        changes.added += part.added;
        changes.removed += part.removed;
        changes.changed += part.changed;
        changes.unchanged += part.unchanged;
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
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use deltalake::arrow::array::{Date32Array, Float64Array, Int64Array, StringArray};
    use deltalake::arrow::compute::cast;
    use deltalake::arrow::datatypes::{Field, Schema};
    use deltalake::datafusion::datasource::MemTable;
    use deltalake::datafusion::prelude::SessionContext;
    use proptest::prelude::*;

    use super::*;
    use crate::rehearse::diff::{Comparison, Side};

    /// A row's columns after its key: a name, an amount and a day, each may be NULL. The amounts
    /// include the floats SQL and the row format could tell apart differently: −0.0, 0.0 and NaN.
    type Values = (Option<&'static str>, Option<f64>, Option<i32>);

    fn values() -> impl Strategy<Value = Values> {
        let name = prop::option::of(prop::sample::select(vec!["a", "b", "C", ""]));
        let amount = prop::option::of(prop::sample::select(vec![-0.0, 0.0, f64::NAN, 1.5, -2.25]));
        let day = prop::option::of(prop::sample::select(vec![19_000, 19_001]));
        (name, amount, day)
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
            Field::new("day", DataType::Date32, true),
        ]))
    }

    /// The rows in batches of at most `per_batch`, so a side spans batches; with `views`, the
    /// names as string views, as a Delta scan reads a table's strings.
    fn batches(rows: &[(Option<i64>, Values)], per_batch: usize, views: bool) -> Vec<RecordBatch> {
        rows.chunks(per_batch.max(1))
            .map(|chunk| {
                let names: ArrayRef = Arc::new(chunk.iter().map(|r| r.1.0).collect::<StringArray>());
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(chunk.iter().map(|r| r.0).collect::<Int64Array>()),
                    if views { cast(&names, &DataType::Utf8View).unwrap() } else { names },
                    Arc::new(chunk.iter().map(|r| r.1.1).collect::<Float64Array>()),
                    Arc::new(chunk.iter().map(|r| r.1.2).collect::<Date32Array>()),
                ];
                RecordBatch::try_new(read_as(views), columns).unwrap()
            })
            .collect()
    }

    /// The schema a side's batches have: the table's, or its strings as views.
    fn read_as(views: bool) -> SchemaRef {
        let table = schema();
        let fields = table.fields().iter().map(|f| match f.data_type() {
            DataType::Utf8 if views => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            _ => f.clone(),
        });
        Arc::new(Schema::new(fields.collect::<Vec<_>>()))
    }

    /// What the SQL pairing says of the same two sides.
    fn by_sql(before: &[RecordBatch], after: &[RecordBatch], samples: usize, views: bool) -> RowChanges {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let ctx = SessionContext::new();
            for (side, rows) in [(Side::Before, before), (Side::After, after)] {
                let table = MemTable::try_new(read_as(views), vec![rows.to_vec()]).unwrap();
                ctx.register_table(side.slice_view(), Arc::new(table)).unwrap();
            }
            let comparison = Comparison { ctx, schema: schema(), held: None };
            comparison.sql_changes(&["id".to_owned()], samples).await.unwrap()
        })
    }

    /// What pairing the same two sides part by part says (`diff/parts.rs`): with a `pool` of 0,
    /// each part is paired alone; with a big one, all together.
    fn by_parts(
        before: &[RecordBatch],
        after: &[RecordBatch],
        samples: usize,
        views: bool,
        pool: usize,
    ) -> RowChanges {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let ctx = SessionContext::new();
            for (side, rows) in [(Side::Before, before), (Side::After, after)] {
                let table = MemTable::try_new(read_as(views), vec![rows.to_vec()]).unwrap();
                ctx.register_table(side.slice_view(), Arc::new(table)).unwrap();
            }
            let comparison = Comparison { ctx, schema: schema(), held: None };
            let key = ["id".to_owned()];
            super::super::parts::pair(&comparison, &key, samples, pool)
                .await
                .unwrap()
                .expect("paired in parts")
        })
    }

    fn side(keyed: BTreeMap<i64, Values>, unkeyed: Vec<Values>) -> Vec<(Option<i64>, Values)> {
        keyed.into_iter().map(|(k, v)| (Some(k), v)).chain(unkeyed.into_iter().map(|v| (None, v))).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn pairs_as_the_sql_pairing_does(
            before in prop::collection::btree_map(0i64..24, values(), 0..16),
            after in prop::collection::btree_map(0i64..24, values(), 0..16),
            null_before in prop::collection::vec(values(), 0..3),
            null_after in prop::collection::vec(values(), 0..3),
            per_batch in 1usize..6,
            samples in 0usize..4,
            views: bool,
        ) {
            let nulls = !null_before.is_empty() || !null_after.is_empty();
            let before = batches(&side(before, null_before), per_batch, views);
            let mut after = batches(&side(after, null_after), per_batch + 1, views);
            // A scan's filter may leave a batch empty: rows are numbered across the batches.
            after.insert(after.len() / 2, RecordBatch::new_empty(read_as(views)));
            let held = pair(&schema(), &before, &after, &["id".to_owned()], samples).unwrap().unwrap();
            let expected = by_sql(&before, &after, samples, views);
            let counts = |c: &RowChanges| (c.added, c.removed, c.changed, c.unchanged);
            for paired in [held, by_parts(&before, &after, samples, views, 0), by_parts(&before, &after, samples, views, 1 << 30)] {
                prop_assert_eq!(counts(&paired), counts(&expected));
                // Rows without a key tie in the samples' order, which neither way fixes: where all of
                // them are sampled, the same rows are.
                if !nulls {
                    prop_assert_eq!(paired, expected.clone());
                } else if paired.added.max(paired.removed) as usize <= samples {
                    let sorted = |c: &RowChanges| {
                        let mut rows: Vec<String> = c.samples.iter().map(|s| format!("{s:?}")).collect();
                        rows.sort();
                        rows
                    };
                    prop_assert_eq!(sorted(&paired), sorted(&expected));
                }
            }
        }
    }

    #[test]
    fn a_null_is_distinct_from_a_default_and_floats_compare_as_in_sql() {
        let row =
            |k: i64, name: Option<&'static str>, amount: Option<f64>| (Some(k), (name, amount, Some(19_000)));
        let before = [row(1, Some(""), Some(1.0)), row(2, Some("a"), Some(0.0)), row(3, None, Some(-0.0))];
        let after = [row(1, None, Some(1.0)), row(2, Some("a"), None), row(3, None, Some(0.0))];
        let unchanged = [row(4, None, Some(f64::NAN)), row(5, Some("b"), None)];
        for views in [false, true] {
            let before = batches(&[&before[..], &unchanged].concat(), 2, views);
            let after = batches(&[&after[..], &unchanged].concat(), 3, views);
            let paired = pair(&schema(), &before, &after, &["id".to_owned()], 5).unwrap().unwrap();
            assert_eq!((paired.changed, paired.unchanged, paired.added, paired.removed), (2, 3, 0, 0));
            assert_eq!(paired, by_sql(&before, &after, 5, views));
            let sampled: Vec<_> =
                paired.samples.iter().map(|s| s.after.clone().unwrap()[1..3].join(" ")).collect();
            assert_eq!(sampled, ["NULL 1.0", "a NULL"]);
        }
    }

    #[test]
    fn keys_longer_than_their_prefix_are_ordered_and_paired_by_every_byte() {
        let long = "a sixteen-byte prefix, then ";
        let names = [format!("{long}2"), "b".into(), format!("{long}1"), "".into(), long.into()];
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        let column: ArrayRef =
            Arc::new(StringArray::from(names.iter().map(String::as_str).collect::<Vec<_>>()));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        let ascending = SortOptions { descending: false, nulls_first: false };
        let keys = RowConverter::new(vec![SortField::new_with_options(DataType::Utf8, ascending)]).unwrap();
        let side = Keyed::read(&schema, &[DataType::Utf8], &[batch], &[0], &keys).unwrap().unwrap();
        let ordered: Vec<&str> = side.ordered.iter().map(|&(_, r)| names[r as usize].as_str()).collect();
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort();
        assert_eq!(ordered, sorted);

        // Keys that tie on their prefix are neither paired nor taken for a repeated key.
        let side = |names: &[String]| {
            let column: ArrayRef =
                Arc::new(StringArray::from(names.iter().map(String::as_str).collect::<Vec<_>>()));
            vec![RecordBatch::try_new(schema.clone(), vec![column]).unwrap()]
        };
        let before = side(&[format!("{long}1"), format!("{long}2")]);
        let after = side(&[format!("{long}2"), format!("{long}3")]);
        let paired = pair(&schema, &before, &after, &["k".to_owned()], 0).unwrap().expect("paired in memory");
        assert_eq!((paired.added, paired.removed, paired.changed, paired.unchanged), (1, 1, 0, 1));
    }

    #[test]
    fn a_repeated_key_or_sides_read_as_other_types_are_left_to_sql() {
        let row = |k: i64| (Some(k), (Some("a"), Some(1.0), Some(19_000)));
        let once = batches(&[row(1), row(2)], 8, false);
        let twice = batches(&[row(1), row(1)], 8, false);
        let key = ["id".to_owned()];
        assert!(pair(&schema(), &once, &once, &key, 3).unwrap().is_some());
        assert!(pair(&schema(), &twice, &once, &key, 3).unwrap().is_none(), "a key repeated before");
        assert!(pair(&schema(), &once, &twice, &key, 3).unwrap().is_none(), "a key repeated after");
        let views = batches(&[row(1), row(2)], 8, true);
        assert!(pair(&schema(), &once, &views, &key, 3).unwrap().is_none(), "strings before, views after");
        assert!(pair(&schema(), &once, &once, &["sku".to_owned()], 3).unwrap().is_none());
        assert_eq!(pair(&schema(), &[], &[], &key, 3).unwrap(), Some(RowChanges::default()));
    }
}
