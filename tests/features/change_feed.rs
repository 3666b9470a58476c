//! The change data feed: what a backfill and its rollback changed, as Spark's readers see it.

use super::*;

/// The table's change feed over `from..=to`, as the Python `deltalake` package reads it, sorted.
fn python_feed(table: &Path, from: u64, to: u64) -> Vec<Change> {
    let out = python(
        &format!(
            "import deltalake, pyarrow as pa\n\
             t = pa.table(deltalake.DeltaTable({:?}).load_cdf(starting_version={from}, ending_version={to})).to_pylist()\n\
             for r in t: print(r['_commit_version'], r['_change_type'], f\"{{r['order_id']}}|{{r['amount']}}\")\n",
            table.to_str().unwrap()
        ),
        &[],
    );
    let mut feed: Vec<Change> = out
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let version = parts.next().unwrap().parse().unwrap();
            (version, parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned())
        })
        .collect();
    feed.sort();
    feed
}

/// The same feed through deltalake's own CDF reader.
async fn deltalake_feed(table: &Path, from: u64, to: u64) -> Vec<Change> {
    use bf::deltalake::arrow::util::display::array_value_to_string;
    use bf::deltalake::datafusion::prelude::SessionContext;
    use bf::deltalake::delta_datafusion::DeltaCdfTableProvider;
    let builder = open_table(table).await.scan_cdf().with_starting_version(from).with_ending_version(to);
    let ctx = SessionContext::new();
    ctx.register_table("feed", std::sync::Arc::new(DeltaCdfTableProvider::try_new(builder).unwrap()))
        .unwrap();
    let batches = ctx
        .sql("SELECT _commit_version, _change_type, order_id, amount FROM feed")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut feed: Vec<Change> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |i| {
                let text = |c: usize| array_value_to_string(b.column(c), i).unwrap();
                (
                    text(0).parse().unwrap(),
                    text(1),
                    format!("{}|{:.1}", text(2), text(3).parse::<f64>().unwrap()),
                )
            })
        })
        .collect();
    feed.sort();
    feed
}

/// What a consumer of the feed holds after following it from `start`: each version's deletes and
/// pre-images taken out (one row each), its inserts and post-images put in.
fn follow(start: &[String], feed: &[Change]) -> Vec<String> {
    let mut rows = start.to_vec();
    let mut versions: Vec<u64> = feed.iter().map(|c| c.0).collect();
    versions.dedup();
    for version in versions {
        let changes = feed.iter().filter(|c| c.0 == version);
        for (_, kind, row) in changes.clone().filter(|c| c.1 == "delete" || c.1 == "update_preimage") {
            let at = rows
                .iter()
                .position(|r| r == row)
                .unwrap_or_else(|| panic!("v{version} {kind} {row}: not held"));
            rows.remove(at);
        }
        rows.extend(changes.filter(|c| c.1 == "insert" || c.1 == "update_postimage").map(|c| c.2.clone()));
    }
    rows.sort();
    rows
}

fn of_kind(feed: &[Change], kind: &str) -> Vec<String> {
    let mut rows: Vec<String> = feed.iter().filter(|c| c.1 == kind).map(|c| c.2.clone()).collect();
    rows.sort();
    rows
}

/// A table with the change data feed on: after a backfill its feed holds the window's old rows as
/// deletes and the slices' rows as inserts (a merge rewrites its slices, so a row it keeps is a
/// delete and an insert of the same values); the comment adds nothing; a rollback's feed takes the
/// backfill's rows out and puts the old ones back. Read by deltalake's CDF reader and by the Python
/// `deltalake` package alike, a consumer following the feed holds exactly the table's rows.
#[tokio::test(flavor = "multi_thread")]
async fn the_change_data_feed_shows_what_a_backfill_and_its_rollback_changed() {
    let changes = "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n\
                   5,C5,50.0,EUR,2026-03-01\n3,C3,33.0,USD,2026-03-02\n";
    for partitioned in [false, true] {
        for (mode, rollback, inserted) in [
            ("replace", &["rollback", "--auto-approve"][..], &["1|11.0", "3|33.0", "5|50.0"][..]),
            (
                "merge",
                &["rollback", "--auto-approve", "--window-only"][..],
                &["1|11.0", "2|20.0", "3|33.0", "5|50.0"][..],
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("orders");
            orders_table_with(
                &table,
                partitioned,
                orders_columns(),
                &[("delta.enableChangeDataFeed", "true")],
                &[&ORDERS],
            )
            .await;
            let before = python_rows(&table, "order_id,amount");
            let pre = open_table(&table).await.version().unwrap();
            std::fs::write(dir.path().join("fixed.csv"), changes).unwrap();
            reload_plan(dir.path(), mode, ORDER_COLUMNS);
            ok(dir.path(), &["plan", "plan.toml", "-q"]);
            ok(dir.path(), &["apply", "--auto-approve", "-q"]);
            let applied = open_table(&table).await.version().unwrap();
            let after = python_rows(&table, "order_id,amount");

            let feed = python_feed(&table, pre + 1, applied);
            assert_eq!(deltalake_feed(&table, pre + 1, applied).await, feed, "the two readers agree");
            let context = format!("{mode}, partitioned {partitioned}: {feed:?}");
            assert_eq!(of_kind(&feed, "delete"), ["1|10.0", "2|20.0", "3|30.0"], "{context}");
            assert_eq!(of_kind(&feed, "insert"), inserted, "{context}");
            assert_eq!(follow(&before, &feed), after, "{context}");
            // The comment is the last commit and changes no row.
            assert!(feed.iter().all(|c| c.0 < applied), "{context}");
            if !partitioned {
                // deltalake wrote the feed's files: the rows a slice rescued are not in them.
                assert!(table.join("_change_data").is_dir(), "{context}");
            }

            ok(dir.path(), rollback);
            let rolled = open_table(&table).await.version().unwrap();
            let feed = python_feed(&table, applied + 1, rolled);
            assert_eq!(deltalake_feed(&table, applied + 1, rolled).await, feed, "the two readers agree");
            assert_eq!(python_rows(&table, "order_id,amount"), before);
            assert_eq!(follow(&after, &feed), before, "{mode}, partitioned {partitioned}: {feed:?}");
        }
    }
}
