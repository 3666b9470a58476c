//! Where tables and files live, and how bf reaches them: local folders, S3, Azure and GCS.
//!
//! This is the one place that knows about stores. It turns what a plan writes into a [`Location`],
//! knows the URL schemes, merges the plan's `[storage]` settings with the environment into the
//! options deltalake's stores read, opens tables, and does the few store operations bf needs beyond
//! deltalake's own: HEAD, list by prefix, the store's server-side copy, and removing a rehearsal's
//! prefix. Nothing else parses a URL scheme or builds store options; a local path is the `file` store.
//!
//! Credentials are never handled here: deltalake's builders find them where each cloud keeps them
//! (the environment, the AWS profile chain, the Azure CLI, Google's ADC), and bf only passes the
//! non-secret settings a plan may hold — and, for a table a catalog names, the short-lived
//! credentials the catalog vended for it ([`lend`]), held in memory only.
//!
//! The files, each using only those above it: `error` (the error types), `location` (schemes,
//! locations, URLs), `lent` (credentials a catalog vended for a table), `settings` (`[storage]`
//! over the environment, safe commits), `explain` (store errors in one line), `layer` (what a
//! store wrapping another forwards to it), `prefetch` (a query session's reads of a bucket, a
//! small file in one request), `checksummed` (a table's writes checksummed as they are written),
//! `access` (the [`Stores`] handle and its object-store operations), `place` (files put into a
//! live table without clobbering one). Callers name everything through this module, never
//! through those files.

mod access;
mod checksummed;
mod error;
mod explain;
mod layer;
mod lent;
mod location;
mod place;
mod prefetch;
mod settings;

pub use access::{Found, Stores, sha256_file};
pub use checksummed::Written;
pub use error::{OpenError, StoreError};
pub use explain::{explain, redact};
pub use lent::lend;
pub use location::{
    Kind, Location, SCHEMES, display_url, folder_url, join, listing_location, local_path, location_problem,
    nearest_existing, nested, table_url, uri,
};
pub use place::Placed;
pub use settings::{Commits, ConditionalPut, Storage, UnsafeCommits};

#[cfg(test)]
mod tests {
    use url::Url;

    use super::place::place_local;
    use super::*;

    /// Placing a file never replaces, moves or rewrites what is at the destination, and a placed file
    /// is fresh whatever the age of its source: linked on one filesystem, copied from another (a
    /// tmpfs), never seen half-written under its final name.
    #[test]
    fn placing_leaves_a_file_that_is_there_and_places_fresh_ones() {
        use std::os::unix::fs::MetadataExt;
        let disk = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 24 * 3600);
        let fresh = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let sources = [disk.path().to_owned(), tempfile::tempdir_in("/dev/shm").unwrap().keep()];
        for source_dir in &sources {
            let source = source_dir.join("part-0.parquet");
            std::fs::write(&source, b"rehearsed bytes").unwrap();
            std::fs::File::open(&source).unwrap().set_modified(old).unwrap();
            let table = disk.path().join(format!("t{}", source_dir.starts_with("/dev/shm") as u8));
            let placed = table.join("d=2026-05-01/part-0.parquet");
            assert_eq!(place_local(&source, &placed).unwrap(), Placed::New);
            assert_eq!(std::fs::read(&placed).unwrap(), b"rehearsed bytes");
            assert!(std::fs::metadata(&placed).unwrap().modified().unwrap() > fresh, "a fresh file");
            let leftovers: Vec<_> = std::fs::read_dir(placed.parent().unwrap()).unwrap().collect();
            assert_eq!(leftovers.len(), 1, "no partial copy is left beside it");
            // A file the table already references: left exactly as it is, whatever it holds.
            let live = table.join("d=2026-05-01/part-1.parquet");
            std::fs::write(&live, b"the table's own bytes").unwrap();
            let before = std::fs::metadata(&live).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(place_local(&source, &live).unwrap(), Placed::Existing);
            let after = std::fs::metadata(&live).unwrap();
            assert_eq!(
                (after.ino(), after.ctime(), after.ctime_nsec()),
                (before.ino(), before.ctime(), before.ctime_nsec())
            );
            assert_eq!(std::fs::read(&live).unwrap(), b"the table's own bytes");
        }
        let _ = std::fs::remove_dir_all(&sources[1]);
    }

    #[test]
    fn a_single_writer_s3_table_takes_no_parallel_slices_or_tasks() {
        let single = Stores::new(&Storage { s3_single_writer: true, ..Storage::default() });
        let s3 = Url::parse("s3://bucket/orders/").unwrap();
        if std::env::var_os("AWS_CONDITIONAL_PUT").is_none() {
            assert!(single.require_one_writer(&s3, None).is_ok(), "one apply, one slice at a time");
            let refused =
                single.require_one_writer(&s3, Some("`slicing.parallel` slices at once")).unwrap_err();
            assert!(refused.to_string().contains("promises that one writer commits at a time"), "{refused}");
        }
        let etag = Stores::new(&Storage {
            s3_single_writer: true,
            conditional_put: Some(ConditionalPut::Etag),
            ..Storage::default()
        });
        assert!(etag.require_one_writer(&s3, Some("tasks")).is_ok(), "conditional put makes races safe");
        let local = Url::parse("file:///lake/orders/").unwrap();
        assert!(single.require_one_writer(&local, Some("tasks")).is_ok(), "local commits are atomic");
    }

    #[test]
    fn schemes_name_their_store() {
        let kind = |u: &str| Kind::of(&Url::parse(u).unwrap());
        assert_eq!(kind("s3a://b/t"), Some(Kind::S3));
        assert_eq!(kind("abfss://c@a.dfs.core.windows.net/t"), Some(Kind::Azure));
        assert_eq!(kind("gs://b/t"), Some(Kind::Gcs));
        assert_eq!(kind("file:///t"), Some(Kind::Local));
        assert_eq!(kind("hdfs://n/t"), None);
    }

    #[test]
    fn locations_refuse_unknown_schemes_and_credentials() {
        assert!(location_problem("s3://b/t").is_none());
        assert!(location_problem("../warehouse/t").is_none());
        assert!(location_problem("hdfs://n/t").unwrap().contains("not supported"));
        assert!(location_problem("s3://AKIA:secret@b/t").unwrap().contains("credential"));
        assert!(
            location_problem("abfss://c@a.dfs.core.windows.net/t?sv=1&sig=x").unwrap().contains("credential")
        );
    }

    #[test]
    fn redaction_removes_the_queries_and_passwords_of_urls_and_nothing_else() {
        let error = "Error performing GET https://a.blob.core.windows.net/c/p?sv=1&sig=SECRET in 3ms (retry)";
        assert_eq!(
            redact(error),
            "Error performing GET https://a.blob.core.windows.net/c/p?… in 3ms (retry)"
        );
        assert_eq!(redact("s3://b/t: no such key? really"), "s3://b/t: no such key? really");
        assert_eq!(redact("(see \"http://h/x?token=T\")"), "(see \"http://h/x?…\")");
        // An endpoint's password, never its user or host.
        assert_eq!(
            redact("cannot reach https://minio:s3cr3t@10.0.0.5:9000/bucket/t (timed out)"),
            "cannot reach https://minio:***@10.0.0.5:9000/bucket/t (timed out)"
        );
        assert_eq!(redact("https://user@host/x and a@b: c"), "https://user@host/x and a@b: c");
        let presigned = url::Url::parse("https://minio:s3cr3t@h/b/f.csv?X-Amz-Signature=abc").unwrap();
        assert_eq!(display_url(&presigned), "https://minio:***@h/b/f.csv?…");
    }

    #[test]
    fn listing_locations_encode_decoded_names_once() {
        assert_eq!(listing_location("file:///lake/t/d=a b%/x.parquet"), "/lake/t/d=a b%/x.parquet");
        assert_eq!(listing_location("s3://b/t/d=a b%?#/x.parquet"), "s3://b/t/d=a%20b%25%3F%23/x.parquet");
    }

    #[test]
    fn folders_nest_whatever_the_spelling_of_their_store() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(nested(&url("s3://b/lake/t/"), &url("s3a://b/lake/t")));
        assert!(nested(&url("s3://b/lake/"), &url("s3://b/lake/t/")));
        assert!(nested(&url("s3://b/lake/t/_bf/r/"), &url("s3://b/lake/t/")));
        assert!(!nested(&url("s3://b/lake/t__rehearsal/"), &url("s3://b/lake/t/")));
        assert!(!nested(&url("s3://other/lake/t/"), &url("s3://b/lake/t/")));
        assert!(nested(&url("file:///lake/t%20x/"), &url("file:///lake/t x/r/")));
    }

    #[test]
    fn joined_files_encode_partition_values() {
        let root: Url = "file:///lake/t/".parse().unwrap();
        assert_eq!(join(&root, "d=a b%/part-0.parquet").as_str(), "file:///lake/t/d=a%20b%25/part-0.parquet");
    }

    #[test]
    fn settings_win_under_the_names_each_store_reads() {
        let stores = Stores::new(&Storage {
            region: Some("eu-west-1".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            conditional_put: Some(ConditionalPut::Etag),
            ..Storage::default()
        });
        let s3 = stores.options(&Url::parse("s3://b/t").unwrap());
        assert_eq!(s3.get("aws_region").map(String::as_str), Some("eu-west-1"));
        assert_eq!(s3.get("aws_conditional_put").map(String::as_str), Some("etag"));
        let gcs = stores.options(&Url::parse("gs://b/t").unwrap());
        assert_eq!(gcs.get("google_base_url").map(String::as_str), Some("http://127.0.0.1:9000"));
        assert!(!gcs.contains_key("aws_region"));
        assert!(stores.options(&Url::parse("file:///t").unwrap()).is_empty());
    }
}
