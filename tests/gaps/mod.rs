//! Long windows: a year of orders another team's job wrote, one commit a week — with two days it
//! never loaded and one it loaded a tenth of — previewed (`bf plan --sample`) and searched for holes
//! (`bf gaps`).

use std::path::{Path, PathBuf};

mod find;
mod preview;
mod s3;

/// How many orders the job loads on a day: 20 on weekdays, 10 at weekends, 40 on 2025-06-18 (a
/// sale).
pub(crate) fn usual(day: chrono::NaiveDate) -> usize {
    use chrono::Datelike;
    match (day.to_string().as_str(), day.weekday().number_from_monday()) {
        ("2025-06-18", _) => 40,
        (_, 6 | 7) => 10,
        _ => 20,
    }
}

/// Days the job never loaded, and the day it loaded 2 of its 20 orders.
pub(crate) const MISSING: [&str; 2] = ["2025-03-14", "2025-07-04"];
pub(crate) const THIN: &str = "2025-05-20";

/// The orders the table holds on `day`, as the job loaded them.
pub(crate) fn loaded(day: chrono::NaiveDate) -> usize {
    let text = day.to_string();
    match text.as_str() {
        _ if MISSING.contains(&text.as_str()) => 0,
        THIN => 2,
        _ => usual(day),
    }
}

/// A year of `orders` (2025) written by the Python `deltalake` package, one append a week (a
/// week's file spans seven days unless `partitioned` by `order_date`). Returns the table's folder,
/// `lake/orders` under `root`.
pub(crate) fn year_of_orders(root: &Path, partitioned: bool) -> PathBuf {
    let table = root.join("lake/orders");
    write_year(table.to_str().unwrap(), partitioned, &[]);
    table
}

/// [`year_of_orders`] at `uri`, a folder or a bucket's (its `AWS_*` settings in `env`).
pub(crate) fn write_year(uri: &str, partitioned: bool, env: &[(&str, String)]) {
    let counts: Vec<String> = days().map(|d| loaded(d).to_string()).collect();
    let script = format!(
        r#"import datetime, os, pyarrow as pa
from deltalake import write_deltalake
options = {{k: v for k, v in os.environ.items() if k.startswith("AWS_")}}
counts = [{counts}]
start = datetime.date(2025, 1, 1)
for week in range(0, 365, 7):
    ids, customers, amounts, dates = [], [], [], []
    for d in range(week, min(week + 7, 365)):
        day = start + datetime.timedelta(days=d)
        for k in range(counts[d]):
            ids.append(d * 100 + k)
            customers.append('C%d' % (k % 5))
            amounts.append(10.0 + k)
            dates.append(day)
    batch = pa.table({{'order_id': pa.array(ids, pa.int64()), 'customer': customers,
        'amount': pa.array(amounts, pa.float64()), 'order_date': pa.array(dates, pa.date32())}})
    write_deltalake({uri:?}, batch, mode='append', partition_by={partition_by}, storage_options=options)
"#,
        counts = counts.join(","),
        partition_by = if partitioned { "['order_date']" } else { "None" },
    );
    crate::common::servers::python(&script, env);
}

/// Every day of 2025.
pub(crate) fn days() -> impl Iterator<Item = chrono::NaiveDate> {
    let first = chrono::NaiveDate::from_ymd_opt(2025, 1, 1).unwrap();
    (0..365).map(move |d| first + chrono::Days::new(d))
}

/// Corrected orders for every day of 2025 in `landing/orders/<day>.csv`, as the job would load
/// them again: every order of the day, amounts a cent higher.
pub(crate) fn corrections(root: &Path) {
    let landing = root.join("landing/orders");
    std::fs::create_dir_all(&landing).unwrap();
    for (d, day) in days().enumerate() {
        let mut text = String::from("order_id,customer,amount,order_date\n");
        for k in 0..usual(day) {
            text.push_str(&format!("{},C{},{},{day}\n", d * 100 + k, k % 5, 10.01 + k as f64));
        }
        std::fs::write(landing.join(format!("{day}.csv")), text).unwrap();
    }
}

/// A plan reloading `start..=end` of the orders from the corrections, a slice a day.
pub(crate) fn reload(start: &str, end: &str) -> String {
    reload_of("../lake/orders", start, end)
}

/// [`reload`] of the table at `table`, as a plan in `plans/` names it.
pub(crate) fn reload_of(table: &str, start: &str, end: &str) -> String {
    format!(
        "reason = \"The job loaded some days short; reload them from the landing files.\"\n\
         [target]\ntable = \"{table}\"\ndate_column = \"order_date\"\nkey = [\"order_id\"]\n\
         [window]\nstart = {start}\nend = {end}\n[slicing]\nevery = \"day\"\n\
         [source]\ninputs.landed = {{ path = \"../landing/orders/{{date}}.csv\", format = \"csv\" }}\n\
         query = \"SELECT order_id, customer, amount, CAST(order_date AS DATE) AS order_date FROM landed\"\n\
         [[metrics]]\nname = \"revenue\"\nsql = \"SUM(amount)\"\n[guards]\nmax_slices = 366\n"
    )
}

/// A workspace: the year of orders, its corrections and `plans/`.
pub(crate) fn workspace(partitioned: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = year_of_orders(dir.path(), partitioned);
    corrections(dir.path());
    std::fs::create_dir(dir.path().join("plans")).unwrap();
    (dir, table)
}
