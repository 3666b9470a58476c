//! The pairing against SQL's, case by case and by property.

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

/// A comparison whose focused slice is `before` and `after`, held nowhere: each query reads them.
fn comparison_of(before: &[RecordBatch], after: &[RecordBatch], views: bool) -> Comparison {
    let ctx = SessionContext::new();
    for (side, rows) in [(Side::Before, before), (Side::After, after)] {
        let table = MemTable::try_new(read_as(views), vec![rows.to_vec()]).unwrap();
        ctx.register_table(side.slice_view(), Arc::new(table)).unwrap();
    }
    Comparison { ctx, schema: schema(), held: None }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

/// What the SQL pairing says of the same two sides.
fn by_sql(before: &[RecordBatch], after: &[RecordBatch], samples: usize, views: bool) -> RowChanges {
    let comparison = comparison_of(before, after, views);
    let key = ["id".to_owned()];
    let mut changes = block_on(comparison.sql_changes(&key, samples)).unwrap();
    if changes.changed > 0 {
        let pairs = block_on(comparison.pairs(&key)).unwrap();
        changes.column_changes = block_on(comparison.column_changes(&pairs, &key, &[])).unwrap();
    }
    changes
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
    let comparison = comparison_of(before, after, views);
    let key = ["id".to_owned()];
    block_on(super::super::parts::pair(&comparison, &key, samples, &[], pool))
        .unwrap()
        .expect("paired in parts")
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
        let held = pair(&schema(), &before, &after, &["id".to_owned()], samples, &[]).unwrap().unwrap();
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
        let paired = pair(&schema(), &before, &after, &["id".to_owned()], 5, &[]).unwrap().unwrap();
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
    let column: ArrayRef = Arc::new(StringArray::from(names.iter().map(String::as_str).collect::<Vec<_>>()));
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
    let paired =
        pair(&schema, &before, &after, &["k".to_owned()], 0, &[]).unwrap().expect("paired in memory");
    assert_eq!((paired.added, paired.removed, paired.changed, paired.unchanged), (1, 1, 0, 1));
}

#[test]
fn a_repeated_key_or_sides_read_as_other_types_are_left_to_sql() {
    let row = |k: i64| (Some(k), (Some("a"), Some(1.0), Some(19_000)));
    let once = batches(&[row(1), row(2)], 8, false);
    let twice = batches(&[row(1), row(1)], 8, false);
    let key = ["id".to_owned()];
    assert!(pair(&schema(), &once, &once, &key, 3, &[]).unwrap().is_some());
    assert!(pair(&schema(), &twice, &once, &key, 3, &[]).unwrap().is_none(), "a key repeated before");
    assert!(pair(&schema(), &once, &twice, &key, 3, &[]).unwrap().is_none(), "a key repeated after");
    let views = batches(&[row(1), row(2)], 8, true);
    assert!(pair(&schema(), &once, &views, &key, 3, &[]).unwrap().is_none(), "strings before, views after");
    assert!(pair(&schema(), &once, &once, &["sku".to_owned()], 3, &[]).unwrap().is_none());
    assert_eq!(pair(&schema(), &[], &[], &key, 3, &[]).unwrap(), Some(RowChanges::default()));
}
