//! Stage: the table layer, the bottom of the engine. In: a location (local folder, S3, Azure, GCS)
//! and a window. Out: Delta tables opened, their facts ([`table`]; rows per day, [`days`]), whether
//! bf may write them ([`compat`], [`row_rules`]), slices as typed predicates ([`predicate`]), files
//! published into a table in one commit ([`publish`]), and the [`ledger`] — the `bf.*` keys every
//! commit bf makes carries, spelled in one place. A table named by its [`catalog`] name is resolved
//! here to where it lives. It knows nothing of plans beyond their `[storage]` settings.

pub mod catalog;
pub mod change_data;
pub mod commit;
pub mod compat;
pub mod data_file;
pub mod days;
pub(crate) mod footprint;
pub mod freeze;
pub mod identity;
pub mod ledger;
pub mod memory;
pub mod needed_files;
pub mod predicate;
pub mod publish;
pub mod retention;
pub mod row_rules;
pub mod row_tracking;
pub mod same_table;
pub mod store;
pub mod table;
