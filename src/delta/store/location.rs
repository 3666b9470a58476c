//! Where a path written in a plan points: the URL schemes bf reaches, locations, and the URLs of
//! tables, folders and files, spelled the way each consumer (deltalake, DataFusion's listing, a
//! person reading a message) needs them. It also refuses a location that holds a credential: a plan
//! is reviewed and saved, so it must not carry one.
//!
//! Pure URL and path arithmetic: nothing here opens a store or reads the environment.

use std::fmt;
use std::path::{Path, PathBuf};

use path_clean::PathClean;
use url::Url;

use super::error::OpenError;

/// The kinds of store bf reaches, each with the URL schemes that name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Local,
    S3,
    Azure,
    Gcs,
}

/// The URL schemes bf opens, as deltalake's store handlers register them.
pub const SCHEMES: [(&str, Kind); 9] = [
    ("file", Kind::Local),
    ("s3", Kind::S3),
    ("s3a", Kind::S3),
    ("az", Kind::Azure),
    ("abfs", Kind::Azure),
    ("abfss", Kind::Azure),
    ("azure", Kind::Azure),
    ("adl", Kind::Azure),
    ("gs", Kind::Gcs),
];

impl Kind {
    pub fn of(url: &Url) -> Option<Kind> {
        SCHEMES.iter().find(|(scheme, _)| *scheme == url.scheme()).map(|(_, kind)| *kind)
    }

    /// The schemes, as a message lists them.
    pub fn schemes() -> String {
        SCHEMES.iter().map(|(s, _)| format!("`{s}://`")).collect::<Vec<_>>().join(", ")
    }
}

/// Where a path written in a plan points: plan paths are relative to the plan file's folder, so a
/// plan means the same thing whichever directory bf is run from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Path(PathBuf),
    Uri(Url),
}

impl Location {
    pub fn resolve(plan_dir: &Path, written: &str) -> Location {
        match uri(written) {
            Some(url) => Location::Uri(url),
            // Lexically cleaned (`plans/../warehouse` → `warehouse`) so messages show the path a person
            // would type; the folder may not exist yet, so it cannot be canonicalized.
            _ => Location::Path(plan_dir.join(written).clean()),
        }
    }

    /// `written`, a location as given from the folder `here` (a command's argument), as a plan in
    /// `plan_dir` names it: a local path relative to the plan's folder; a URI or a catalog name as
    /// given.
    pub fn written_from(plan_dir: &Path, here: &Path, written: &str) -> String {
        match Location::resolve(here, written) {
            Location::Path(path) => {
                let absolute = here.join(path).clean();
                pathdiff::diff_paths(&absolute, plan_dir.clean())
                    .map_or_else(|| absolute.display().to_string(), |p| p.display().to_string())
            }
            Location::Uri(_) => written.to_owned(),
        }
    }

    /// The location as a URL: a local path becomes a `file://` URL of its absolute path.
    pub fn url(&self) -> Result<Url, OpenError> {
        match self {
            Location::Uri(url) => Ok(url.clone()),
            Location::Path(path) => file_url(path),
        }
    }
}

/// `written` as a URI, if it is one: a one-letter scheme is a Windows drive (`C:\data`), not a URI.
pub fn uri(written: &str) -> Option<Url> {
    Url::parse(written).ok().filter(|url| url.scheme().len() > 1)
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Path(path) => path.display().fmt(f),
            Location::Uri(url) => url.fmt(f),
        }
    }
}

/// Why a location written in a plan cannot be used, before anything is opened.
pub fn location_problem(written: &str) -> Option<String> {
    let url = uri(written)?;
    if Kind::of(&url).is_none() {
        return Some(format!(
            "`{}://` locations are not supported; bf reads and writes local paths and {}",
            url.scheme(),
            Kind::schemes()
        ));
    }
    // A store reads no query, so one can only be a signature or a token (a SAS, a presigned URL).
    if url.password().is_some() || url.query().is_some() {
        return Some(
            "the location holds a credential (a password or a query); a plan is reviewed and saved, so \
             credentials come from the environment or the cloud's credential chain"
                .to_owned(),
        );
    }
    None
}

/// The URL of a table location: folders get a trailing slash, which deltalake needs to join paths.
pub fn table_url(location: &Location) -> Result<Url, OpenError> {
    match location {
        Location::Uri(url) => {
            let mut url = url.clone();
            if !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            Ok(url)
        }
        Location::Path(path) => folder_url(path),
    }
}

/// The URL of a local folder that may not exist yet (a rehearsal about to be created).
pub fn folder_url(path: &Path) -> Result<Url, OpenError> {
    let absolute = absolute(path)?;
    if absolute.is_file() {
        return Err(OpenError::NotAFolder { location: path.display().to_string() });
    }
    Url::from_directory_path(&absolute)
        .map_err(|()| OpenError::Missing { location: path.display().to_string() })
}

/// The URL of a local file or folder, without a trailing slash.
fn file_url(path: &Path) -> Result<Url, OpenError> {
    Url::from_file_path(absolute(path)?)
        .map_err(|()| OpenError::Missing { location: path.display().to_string() })
}

/// `path` made absolute through its nearest existing parent, so its URL is stable.
fn absolute(path: &Path) -> Result<PathBuf, OpenError> {
    let missing = || OpenError::Missing { location: path.display().to_string() };
    match path.canonicalize() {
        Ok(absolute) => Ok(absolute),
        Err(_) => {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            Ok(parent.canonicalize().map_err(|_| missing())?.join(path.file_name().ok_or_else(missing)?))
        }
    }
}

/// A URL as people read it: a local path for `file://`, the URL otherwise.
pub fn display_url(url: &Url) -> String {
    match url.to_file_path() {
        Ok(path) if url.scheme() == "file" => path.display().to_string().trim_end_matches('/').to_owned(),
        // Never a password, nor a query, which can carry a signature (a presigned URL, a SAS token).
        _ => super::redact(url.as_str()),
    }
}

/// The local path of a `file://` URL.
pub fn local_path(url: &Url) -> Option<PathBuf> {
    url.to_file_path().ok().filter(|_| url.scheme() == "file")
}

/// A file inside a folder URL, its path segments percent-encoded as a URL needs.
pub fn join(folder: &Url, relative: &str) -> Url {
    let mut url = folder.clone();
    url.path_segments_mut().expect("a store URL has a path").pop_if_empty().extend(relative.split('/'));
    url
}

/// Whether one of two folder URLs is the other or inside it, however the store is spelt
/// (`s3://` and `s3a://` are one store).
pub fn nested(a: &Url, b: &Url) -> bool {
    let place = |url: &Url| {
        let segments: Vec<String> = url
            .path_segments()
            .map(|s| {
                s.filter(|s| !s.is_empty())
                    .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        (Kind::of(url), url.username().to_owned(), url.host_str().map(str::to_owned), segments)
    };
    let ((kind_a, user_a, host_a, path_a), (kind_b, user_b, host_b, path_b)) = (place(a), place(b));
    kind_a == kind_b
        && user_a == user_b
        && host_a == host_b
        && (path_a.starts_with(&path_b) || path_b.starts_with(&path_a))
}

/// A file's location as DataFusion's listing reads it, from the decoded form the Delta log holds
/// (`s3://b/t/d=a b/x.parquet`): a local path, or a URL whose path is encoded once, so a `%`, `?`
/// or `#` in a name stays part of the name.
pub fn listing_location(decoded: &str) -> String {
    let Some((scheme, rest)) = decoded.split_once("://") else { return decoded.to_owned() };
    if scheme == "file" {
        return rest.to_owned();
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    match Url::parse(&format!("{scheme}://{authority}/")) {
        Ok(root) => join(&root, path).to_string(),
        Err(_) => decoded.to_owned(),
    }
}

/// `name` with every digit made `#`: names alike but for their numbers (dates, parts) alike.
fn digits_blanked(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect()
}

/// For a local path that does not exist: the path with its first missing part replaced by the
/// nearest name that does exist there (a typo's fix), as "did you mean …?". `None` for a URL, or
/// when nothing there is near.
pub fn nearest_existing(location: &str) -> Option<String> {
    let path = match Url::parse(location) {
        Ok(url) if url.scheme() == "file" => url.to_file_path().ok()?,
        Ok(url) if url.scheme().len() > 1 => return None,
        _ => PathBuf::from(location),
    };
    let parts: Vec<_> = path.components().collect();
    let mut existing = PathBuf::new();
    for (i, part) in parts.iter().enumerate() {
        let next = existing.join(part);
        if next.exists() {
            existing = next;
            continue;
        }
        let missing = part.as_os_str().to_string_lossy();
        let nearest =
            std::fs::read_dir(if existing.as_os_str().is_empty() { Path::new(".") } else { &existing })
                .ok()?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                // Another day's file is not what a typo meant (`2026-08-12.csv` for `2026-08-13.csv`).
                .filter(|name| digits_blanked(name) != digits_blanked(&missing))
                .map(|name| (strsim::jaro(&missing, &name), name))
                .filter(|(score, _)| *score > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))?
                .1;
        let mut fixed = existing.join(nearest);
        fixed.extend(&parts[i + 1..]);
        return Some(format!("did you mean {}?", fixed.display()));
    }
    None
}
