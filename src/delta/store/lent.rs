//! Credentials a catalog vended for one table's location, lent to the stores for this process.
//!
//! Unity Catalog hands out short-lived credentials per table (`temporary-table-credentials`): they
//! reach that table's folder and nothing else, and they must never be written anywhere — not in a
//! plan, a saved plan or a message. They live here, in memory, keyed by the location they were
//! vended for, and every store handle opening a URL under that location uses them over the
//! environment's. Process-wide on purpose: a plan's stores are made in many places (the source, the
//! apply, the rollback), and a credential the catalog vended for a table reaches it from all of them.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use url::Url;

/// A store's options under the names deltalake's stores read.
type Options = HashMap<String, String>;

/// (location, options) pairs; the longest matching location wins.
static LENT: LazyLock<RwLock<Vec<(String, Options)>>> = LazyLock::new(Default::default);

/// Lends `options` to every store opening a URL under `location`, replacing what was lent for it.
pub fn lend(location: &Url, options: Options) {
    let prefix = folder(location);
    let mut lent = LENT.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    lent.retain(|(held, _)| *held != prefix);
    lent.push((prefix, options));
}

/// What was lent for the location holding `url`, if anything.
pub(super) fn borrowed(url: &Url) -> Option<Options> {
    let lent = LENT.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    let url = folder(url);
    lent.iter()
        .filter(|(location, _)| url.starts_with(location.as_str()))
        .max_by_key(|(location, _)| location.len())
        .map(|(_, options)| options.clone())
}

/// A location as a prefix that matches its own files and not a sibling named alike
/// (`orders/` must not lend to `orders_v2/`).
fn folder(url: &Url) -> String {
    let text = url.as_str();
    if text.ends_with('/') { text.to_owned() } else { format!("{text}/") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_credentials_reach_urls_under_their_folder_only() {
        let url = |s: &str| Url::parse(s).unwrap();
        let options = HashMap::from([("aws_session_token".to_owned(), "vended".to_owned())]);
        lend(&url("s3://lent-test/warehouse/orders/"), options);
        let storage = super::super::Storage::default();
        assert_eq!(
            storage.options(&url("s3://lent-test/warehouse/orders/part-0.parquet"))["aws_session_token"],
            "vended"
        );
        assert_eq!(storage.options(&url("s3://lent-test/warehouse/orders"))["aws_session_token"], "vended");
        assert!(
            !storage.options(&url("s3://lent-test/warehouse/orders_v2/")).contains_key("aws_session_token")
        );
        assert!(!storage.options(&url("s3://lent-test/warehouse/")).contains_key("aws_session_token"));
    }
}
