//! The example shop of the September daily backfill and the March reload, built on the spot so every
//! number those scenarios give can be checked.
//!
//! - `landing/orders/2026-09-DD.csv`: the till's file for each day of September 2026, orders 2001 to
//!   2130 (130 orders; 5 on 2 September, 3 on 15 September, 6 on 30 September). The September daily
//!   backfill loads them into `warehouse/orders_daily`, an empty table the daily job only started filling in October.
//! - `warehouse/orders_silver`: January to April 2026, where the source sent EUR orders of March as USD
//!   (so March's revenue in EUR is off) and a rerun appended three March orders a second time.
//!   `landing/orders_march.csv` and `landing/fx_rates.csv` hold the corrected March of the March reload.
//! - `warehouse/revenue_by_day`: revenue in EUR and orders per day, computed from `orders_silver` (so
//!   its March is wrong too): the table the dashboards read, downstream of the March reload.
//!
//! Everything is a pure function of the order id, so two builds are identical and tests can assert
//! exact counts. Each table is written the way a pipeline would have written it, one commit per load,
//! so its history reads like a real one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime};
use deltalake::arrow::array::{ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType as ArrowType, Date32Type, Field, Schema};
use deltalake::kernel::{DataType, StructField};
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

/// The first order of September, as in the September daily backfill.
pub const SEPTEMBER_FIRST_ORDER: i64 = 2001;
/// Orders in September's landing files.
pub const SEPTEMBER_ORDERS: usize = 130;
/// March orders as they should be, and the three a rerun duplicated in the silver table.
pub const MARCH_ORDERS: usize = 409;
pub const MARCH_DUPLICATES: usize = 3;

/// Exchange rates to EUR the silver table converts with.
pub const FX_TO_EUR: [(&str, f64); 3] = [("EUR", 1.0), ("USD", 0.92), ("GBP", 1.17)];

/// The bundled plans (`plans/` in the repository), which point at `../bf-demo/` from there.
pub const PLANS: [(&str, &str); 4] = [
    ("march.toml", include_str!("../plans/march.toml")),
    ("march-revenue-by-day.toml", include_str!("../plans/march-revenue-by-day.toml")),
    ("september.toml", include_str!("../plans/september.toml")),
    ("correction-2026-09-15.toml", include_str!("../plans/correction-2026-09-15.toml")),
];

/// Where the built shop's pieces are.
#[derive(Debug, Clone)]
pub struct Shop {
    pub root: PathBuf,
}

/// What building the shop made, for the demo to print and tests to assert.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShopSummary {
    pub september_files: usize,
    pub september_orders: usize,
    pub silver_rows: usize,
    pub silver_version: u64,
    pub march_corrected_orders: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ShopError {
    #[error("{} already holds a shop; choose an empty folder or remove it", .0.display())]
    NotEmpty(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot write the Delta table {table}: {source}")]
    Delta { table: String, source: DeltaTableError },
    #[error(transparent)]
    Store(#[from] crate::delta::store::StoreError),
}

/// One order as the till recorded it.
#[derive(Debug, Clone, PartialEq)]
struct Order {
    id: i64,
    customer: String,
    amount: f64,
    currency: &'static str,
    ordered_at: NaiveDateTime,
}

impl Shop {
    pub fn at(root: impl Into<PathBuf>) -> Shop {
        Shop { root: root.into() }
    }

    pub fn landing(&self) -> PathBuf {
        self.root.join("landing")
    }

    pub fn orders_silver(&self) -> PathBuf {
        self.root.join("warehouse").join("orders_silver")
    }

    pub fn revenue_by_day(&self) -> PathBuf {
        self.root.join("warehouse").join("revenue_by_day")
    }

    pub fn orders_daily(&self) -> PathBuf {
        self.root.join("warehouse").join("orders_daily")
    }

    /// The shop's own copy of the bundled plans, under `plans/`, pointing at the shop's files.
    pub fn plans(&self) -> PathBuf {
        self.root.join("plans")
    }

    /// Builds the shop; refuses a folder that already has one rather than appending to its tables.
    pub async fn build(&self) -> Result<ShopSummary, ShopError> {
        for existing in [self.landing(), self.root.join("warehouse")] {
            if existing.exists() {
                return Err(ShopError::NotEmpty(self.root.clone()));
            }
        }
        let september_files = self.write_september()?;
        self.write_text(&self.landing().join("orders_march.csv"), &orders_csv(&march_corrected(), true))?;
        let mut fx = String::from("currency,rate_to_eur\n");
        for (currency, rate) in FX_TO_EUR {
            writeln!(fx, "{currency},{rate}").expect("writing to a String");
        }
        self.write_text(&self.landing().join("fx_rates.csv"), &fx)?;
        let silver_version = self.write_orders_silver().await?;
        self.write_revenue_by_day().await?;
        self.create_orders_daily().await?;
        for (name, text) in PLANS {
            self.write_text(&self.plans().join(name), &text.replace("../bf-demo/", "../"))?;
        }
        // The plans' `#:schema ../schema/plan.schema.json` line finds it here, as in the repository.
        self.write_text(
            &self.root.join("schema").join("plan.schema.json"),
            &crate::plan_file::json_schema(),
        )?;
        Ok(ShopSummary {
            september_files,
            september_orders: SEPTEMBER_ORDERS,
            silver_rows: silver_rows().len(),
            silver_version,
            march_corrected_orders: MARCH_ORDERS,
        })
    }

    /// Moves the built shop's files and tables into an object store under `store` (`landing/`,
    /// `warehouse/`), and points its plans there: the same shop, in a bucket. The local copies go,
    /// so nothing but the plans is left to be read by mistake.
    pub async fn move_to(
        &self,
        stores: &crate::delta::store::Stores,
        store: &url::Url,
    ) -> Result<(), ShopError> {
        let store =
            crate::delta::store::table_url(&crate::delta::store::Location::Uri(store.clone())).map_err(
                |e| ShopError::Io { path: self.root.clone(), source: std::io::Error::other(e.to_string()) },
            )?;
        for folder in ["landing", "warehouse"] {
            let local = crate::delta::store::folder_url(&self.root.join(folder)).map_err(|e| {
                ShopError::Io { path: self.root.join(folder), source: std::io::Error::other(e.to_string()) }
            })?;
            for (relative, _) in stores.list(&local).await? {
                let to = crate::delta::store::join(&store, &format!("{folder}/{relative}"));
                stores.copy(&crate::delta::store::join(&local, &relative), &to).await?;
            }
            let io = |source| ShopError::Io { path: self.root.join(folder), source };
            std::fs::remove_dir_all(self.root.join(folder)).map_err(io)?;
        }
        for (name, _) in PLANS {
            let path = self.plans().join(name);
            let io = |source| ShopError::Io { path: path.clone(), source };
            let text = std::fs::read_to_string(&path).map_err(io)?;
            let moved = text
                .replace("\"../warehouse/", &format!("\"{store}warehouse/"))
                .replace("\"../landing/", &format!("\"{store}landing/"));
            std::fs::write(&path, moved).map_err(io)?;
        }
        Ok(())
    }

    fn write_september(&self) -> Result<usize, ShopError> {
        let folder = self.landing().join("orders");
        let mut files = 0;
        for (day, orders) in september_by_day() {
            self.write_text(&folder.join(format!("{day}.csv")), &orders_csv(&orders, false))?;
            files += 1;
        }
        Ok(files)
    }

    fn write_text(&self, path: &Path, text: &str) -> Result<(), ShopError> {
        let io = |source| ShopError::Io { path: path.to_owned(), source };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(path, text).map_err(io)
    }

    /// Jan to Apr, one append per month as the monthly load made them, then the faulty rerun.
    async fn write_orders_silver(&self) -> Result<u64, ShopError> {
        let path = self.orders_silver();
        let delta = |source| ShopError::Delta { table: path.display().to_string(), source };
        let mut table =
            create_table(&path, &silver_columns(), "Silver orders: one row per order, amounts in EUR.")
                .await
                .map_err(delta)?;
        let rows = silver_rows();
        let (monthly_loads, rerun) = rows.split_at(rows.len() - MARCH_DUPLICATES);
        for month in 1..=4 {
            let batch = silver_batch(monthly_loads.iter().filter(|(_, day)| day.month() == month));
            table = table.write(vec![batch]).with_save_mode(SaveMode::Append).await.map_err(delta)?;
        }
        table = table
            .write(vec![silver_batch(rerun.iter())])
            .with_save_mode(SaveMode::Append)
            .await
            .map_err(delta)?;
        Ok(table.version().unwrap_or(0))
    }

    /// Revenue by day as the gold job computed it from the silver table, one append per month: wrong
    /// for March, as the silver table is.
    async fn write_revenue_by_day(&self) -> Result<(), ShopError> {
        let path = self.revenue_by_day();
        let delta = |source| ShopError::Delta { table: path.display().to_string(), source };
        let columns = vec![
            StructField::new("order_date", DataType::DATE, true),
            StructField::new("revenue", DataType::DOUBLE, true),
            StructField::new("orders", DataType::LONG, true),
        ];
        let mut table = create_table(
            &path,
            &columns,
            "Revenue in EUR by order day, from orders_silver: what the dashboards read.",
        )
        .await
        .map_err(delta)?;
        let days = revenue_by_day(&silver_rows());
        for month in 1..=4 {
            let batch = revenue_batch(days.iter().filter(|(day, ..)| day.month() == month));
            table = table.write(vec![batch]).with_save_mode(SaveMode::Append).await.map_err(delta)?;
        }
        Ok(())
    }

    async fn create_orders_daily(&self) -> Result<(), ShopError> {
        let path = self.orders_daily();
        let columns = vec![
            StructField::new("order_id", DataType::LONG, true),
            StructField::new("customer", DataType::STRING, true),
            StructField::new("amount", DataType::DOUBLE, true),
            StructField::new("order_date", DataType::DATE, true),
        ];
        create_table(&path, &columns, "Daily orders as loaded by the shop's daily job, one day per run.")
            .await
            .map(drop)
            .map_err(|source| ShopError::Delta { table: path.display().to_string(), source })
    }
}

async fn create_table(
    path: &Path,
    columns: &[StructField],
    comment: &str,
) -> Result<DeltaTable, DeltaTableError> {
    std::fs::create_dir_all(path).map_err(|e| DeltaTableError::InvalidTableLocation(e.to_string()))?;
    let url = url::Url::from_directory_path(std::fs::canonicalize(path)?)
        .map_err(|()| DeltaTableError::InvalidTableLocation(path.display().to_string()))?;
    let table = DeltaTable::try_from_url(url).await?;
    table
        .create()
        .with_columns(columns.iter().cloned())
        .with_comment(comment)
        .with_save_mode(SaveMode::ErrorIfExists)
        .await
}

fn silver_columns() -> Vec<StructField> {
    vec![
        StructField::new("order_id", DataType::LONG, true),
        StructField::new("customer", DataType::STRING, true),
        StructField::new("amount", DataType::DOUBLE, true),
        StructField::new("currency", DataType::STRING, true),
        StructField::new("amount_eur", DataType::DOUBLE, true),
        StructField::new("order_date", DataType::DATE, true),
    ]
}

/// An order id's deterministic attributes: who, how much, which currency, at what time of day.
fn order(id: i64, day: NaiveDate) -> Order {
    let minutes = 9 * 60 + (id * 37).rem_euclid(720);
    let time =
        NaiveTime::from_hms_opt((minutes / 60) as u32, (minutes % 60) as u32, 0).expect("a time of day");
    Order {
        id,
        customer: format!("C{:02}", (id * 7).rem_euclid(40) + 1),
        amount: (500 + (id * 7919).rem_euclid(9500)) as f64 / 100.0,
        currency: match id.rem_euclid(10) {
            0..=6 => "EUR",
            7 | 8 => "USD",
            _ => "GBP",
        },
        ordered_at: day.and_time(time),
    }
}

/// Orders on each day of September: 130 in all, with the seed's 5 on the 2nd, 3 on the 15th, 5 on
/// the 29th and 6 on the 30th.
fn september_by_day() -> Vec<(NaiveDate, Vec<Order>)> {
    let mut next_id = SEPTEMBER_FIRST_ORDER;
    (1..=30)
        .map(|d| {
            let day = NaiveDate::from_ymd_opt(2026, 9, d).expect("a September day");
            let count = match d {
                15 => 3,
                30 => 6,
                2 | 29 | 3 | 6 | 9 | 12 | 18 | 21 | 24 => 5,
                _ => 4,
            };
            let orders = (next_id..next_id + count).map(|id| order(id, day)).collect();
            next_id += count;
            (day, orders)
        })
        .collect()
}

/// Orders of January to April 2026 as they really were: 13 a day, 14 on every fifth day.
fn orders_jan_to_apr() -> Vec<Order> {
    let mut next_id = 1;
    let mut orders = Vec::new();
    let mut day = NaiveDate::from_ymd_opt(2026, 1, 1).expect("a date");
    while day.month() <= 4 {
        let count = if day.day().is_multiple_of(5) { 14 } else { 13 };
        orders.extend((next_id..next_id + count).map(|id| order(id, day)));
        next_id += count;
        day = day.succ_opt().expect("a next day");
    }
    orders
}

fn march_corrected() -> Vec<Order> {
    orders_jan_to_apr().into_iter().filter(|o| o.ordered_at.month() == 3).collect()
}

/// The silver table's rows as loaded: March's EUR orders arrived as USD and were converted as such,
/// and three March orders were appended twice (they come last, as the rerun's commit).
fn silver_rows() -> Vec<(Order, NaiveDate)> {
    let mut rows: Vec<(Order, NaiveDate)> = orders_jan_to_apr()
        .into_iter()
        .map(|mut o| {
            if o.ordered_at.month() == 3 && o.currency == "EUR" {
                o.currency = "USD";
            }
            let day = o.ordered_at.date();
            (o, day)
        })
        .collect();
    let march: Vec<(Order, NaiveDate)> = rows.iter().filter(|(_, d)| d.month() == 3).cloned().collect();
    let step = march.len() / MARCH_DUPLICATES;
    rows.extend(march.into_iter().step_by(step).take(MARCH_DUPLICATES));
    rows
}

/// Each day's revenue in EUR (rounded to the cent) and order count, in day order.
fn revenue_by_day(rows: &[(Order, NaiveDate)]) -> Vec<(NaiveDate, f64, i64)> {
    let mut days: std::collections::BTreeMap<NaiveDate, (f64, i64)> = std::collections::BTreeMap::new();
    for (order, day) in rows {
        let day = days.entry(*day).or_default();
        day.0 += amount_eur(order);
        day.1 += 1;
    }
    days.into_iter()
        .map(|(day, (revenue, orders))| (day, (revenue * 100.0).round() / 100.0, orders))
        .collect()
}

fn revenue_batch<'a>(days: impl Iterator<Item = &'a (NaiveDate, f64, i64)>) -> RecordBatch {
    let days: Vec<&(NaiveDate, f64, i64)> = days.collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Date32Array::from_iter_values(days.iter().map(|(d, ..)| Date32Type::from_naive_date(*d)))),
        Arc::new(Float64Array::from_iter_values(days.iter().map(|(_, revenue, _)| *revenue))),
        Arc::new(Int64Array::from_iter_values(days.iter().map(|(.., orders)| *orders))),
    ];
    let schema = Schema::new(vec![
        Field::new("order_date", ArrowType::Date32, true),
        Field::new("revenue", ArrowType::Float64, true),
        Field::new("orders", ArrowType::Int64, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), columns).expect("columns match the schema")
}

/// An order's amount in EUR as the silver table holds it: converted at its currency's rate, to the cent.
fn amount_eur(order: &Order) -> f64 {
    (order.amount * rate(order.currency) * 100.0).round() / 100.0
}

fn rate(currency: &str) -> f64 {
    FX_TO_EUR.iter().find(|(c, _)| *c == currency).map_or(1.0, |(_, r)| *r)
}

fn silver_batch<'a>(rows: impl Iterator<Item = &'a (Order, NaiveDate)>) -> RecordBatch {
    let rows: Vec<&(Order, NaiveDate)> = rows.collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|(o, _)| o.id))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|(o, _)| o.customer.as_str()))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|(o, _)| o.amount))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|(o, _)| o.currency))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|(o, _)| amount_eur(o)))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|(_, d)| Date32Type::from_naive_date(*d)))),
    ];
    let schema = Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("customer", ArrowType::Utf8, true),
        Field::new("amount", ArrowType::Float64, true),
        Field::new("currency", ArrowType::Utf8, true),
        Field::new("amount_eur", ArrowType::Float64, true),
        Field::new("order_date", ArrowType::Date32, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), columns).expect("columns match the schema")
}

/// Orders as CSV; the March file carries the currency, the till's daily files do not.
fn orders_csv(orders: &[Order], with_currency: bool) -> String {
    let mut csv = String::from(if with_currency {
        "order_id,customer,amount,currency,ordered_at\n"
    } else {
        "order_id,customer,amount,ordered_at\n"
    });
    for o in orders {
        let at = o.ordered_at.format("%Y-%m-%dT%H:%M:%S");
        let line = if with_currency {
            format!("{},{},{:.2},{},{at}", o.id, o.customer, o.amount, o.currency)
        } else {
            format!("{},{},{:.2},{at}", o.id, o.customer, o.amount)
        };
        writeln!(csv, "{line}").expect("writing to a String");
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn september_matches_the_seed() {
        let days = september_by_day();
        assert_eq!(days.len(), 30);
        let ids: Vec<i64> = days.iter().flat_map(|(_, o)| o.iter().map(|o| o.id)).collect();
        assert_eq!(ids, (2001..=2130).collect::<Vec<_>>());
        let count = |d: u32| days[d as usize - 1].1.len();
        assert_eq!((count(2), count(15), count(29), count(30)), (5, 3, 5, 6));
    }

    #[test]
    fn march_is_wrong_in_silver_and_right_in_landing() {
        assert_eq!(march_corrected().len(), MARCH_ORDERS);
        let silver_march: Vec<_> = silver_rows().into_iter().filter(|(_, d)| d.month() == 3).collect();
        assert_eq!(silver_march.len(), MARCH_ORDERS + MARCH_DUPLICATES);
        assert!(silver_march.iter().all(|(o, _)| o.currency != "EUR"));
    }
}
