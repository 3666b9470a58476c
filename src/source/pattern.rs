//! An input named by a pattern: `landing/**/*.jsonl`, the files an export tree holds.
//!
//! The path up to its first segment holding `*`, `?` or `[` is the folder listed (where DataFusion
//! splits a path's glob); the rest is matched against each file's path under it, a `*` never
//! crossing a `/` (`**` does) and never matching a leading dot. The files matched are registered
//! by their URLs, so what the query reads is exactly what the saved plan lists; the folder is
//! confined to the root as every input's is (`plan_file::confine`).

use glob::{MatchOptions, Pattern};
use url::Url;

use super::run::FolderListing;
use crate::delta::store::{StoreError, Stores};

/// How a file's path is matched: `*` within one folder, no hidden file unless named.
const MATCHING: MatchOptions =
    MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: true };

/// The files under `folder` whose path matches `pattern`, sorted, with their bytes.
pub(super) async fn matching(
    stores: &Stores,
    input: &str,
    folder: &Url,
    pattern: &str,
) -> Result<(FolderListing, u64), StoreError> {
    let matcher = Pattern::new(pattern)
        .map_err(|e| StoreError { location: folder.to_string(), problem: e.to_string() })?;
    let (files, sizes): (Vec<String>, Vec<u64>) = stores
        .list(folder)
        .await?
        .into_iter()
        .filter(|(relative, _)| matcher.matches_with(relative, MATCHING))
        .map(|(relative, meta)| (relative, meta.size))
        .unzip();
    let listing = FolderListing {
        input: input.to_owned(),
        location: folder.to_string(),
        extension: String::new(),
        pattern: Some(pattern.to_owned()),
        files,
    };
    Ok((listing, sizes.iter().sum()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_stays_in_its_folder_and_never_matches_a_hidden_file() {
        let deep = Pattern::new("**/*.jsonl").unwrap();
        let flat = Pattern::new("*.jsonl").unwrap();
        assert!(deep.matches_with("a/b/c.jsonl", MATCHING) && deep.matches_with("c.jsonl", MATCHING));
        assert!(!flat.matches_with("a/c.jsonl", MATCHING));
        assert!(!flat.matches_with(".hidden.jsonl", MATCHING));
    }
}
