//! bf's integration tests: the real binary, real files, real Delta tables in temp folders.
//! One binary (see Cargo.toml), one module per area.

mod common;

mod apply;
mod bench;
mod build;
mod catalogs;
mod chain;
mod cluster;
mod corpus;
mod databricks;
mod delta_spark;
mod demo;
mod disk;
mod fanout;
mod faults;
mod features;
mod first_hour;
mod freeze;
mod fuzz;
mod gaps;
mod horizon;
mod identity;
mod inputs;
mod ledger;
mod lineage;
mod live;
mod memory;
mod merge;
mod partitions;
mod plan;
mod plan_files;
mod policy;
mod publish;
mod review;
mod rewrites;
mod rollback;
mod row_tracking;
mod schema;
mod second_hour;
mod security;
mod simulation;
mod slice_rows;
mod slices;
mod spark;
mod stores;
