//! What a plan may reach. A plan file arrives in a pull request and `bf plan` runs it before anyone
//! has reviewed it, on a machine that holds the lake's credentials; so what it may read, write and
//! connect to is the operator's decision, never the plan's.
//!
//! - **The root.** Every local path a plan names — the plan file itself, its inputs (templates and
//!   folders too), target, rehearsal, change-log table, downstream plans and notice file — must
//!   resolve inside one folder, with symlinks followed: `--root DIR` / `BF_ROOT`, or by default the
//!   git work tree holding the plan file (outside any, the plan folder's parent). A checkout is
//!   then confined by default, with nothing to configure.
//! - **Store locations** may be limited to URL prefixes (`BF_ALLOWED_LOCATIONS`).
//! - **Connection settings** (`endpoint`, and `allow_http`, `skip_signature`, `use_emulator`,
//!   `virtual_hosted_style_request`, which only make sense with one) decide where the runner's credentials are sent: a plan may set them
//!   only to an endpoint the operator lists (`BF_ALLOWED_ENDPOINTS`). The environment's own
//!   `AWS_ENDPOINT_URL` and the like are the operator's and keep working.
//!
//! Everything here runs when the plan is loaded, before any table, input or store is opened, and
//! each refusal is an [`Issue`] at the plan's line, naming what the plan wrote and never what the
//! refused file holds.

use std::path::Path;

use url::Url;

use crate::delta::catalog::CatalogName;
use crate::delta::store::{Kind, Location};
use crate::plan_file::{Issue, PlanDocument};

/// The operator's variable listing the object-store URL prefixes plans may name.
pub const ALLOWED_LOCATIONS: &str = "BF_ALLOWED_LOCATIONS";
/// The operator's variable listing the endpoints a plan's `[storage] endpoint` may name.
pub const ALLOWED_ENDPOINTS: &str = "BF_ALLOWED_ENDPOINTS";
/// How many entries of an input folder are looked at for links leading out of the root; a folder
/// with more is refused rather than read half-checked.
const MAX_FOLDER_ENTRIES: usize = 100_000;

pub use crate::plan_file::bounds::*;
use crate::plan_file::root::in_git;
pub use crate::plan_file::root::{PolicyError, Root, holds_credentials, resolved};

/// The operator's limits on what plans reach: the root, and the store locations and endpoints
/// plans may name.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    root: Option<Root>,
    /// `None`: any store location; `Some`: only under one of these prefixes.
    locations: Option<Vec<Url>>,
    endpoints: Vec<Url>,
    /// How much work a plan may ask for before review.
    bounds: Bounds,
}

impl Policy {
    /// The operator's root (`--root` / `BF_ROOT`, when given) and the environment's lists.
    pub fn from_env(root: Option<&Path>) -> Result<Policy, PolicyError> {
        // Read where each query's session is made; a value that is not a size is refused here, first.
        crate::delta::memory::limit().map_err(PolicyError)?;
        let list = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Ok(Policy {
            root: root.map(Root::given).transpose()?,
            locations: list(ALLOWED_LOCATIONS).map(|v| urls(ALLOWED_LOCATIONS, &v)).transpose()?,
            endpoints: list(ALLOWED_ENDPOINTS)
                .map(|v| urls(ALLOWED_ENDPOINTS, &v))
                .transpose()?
                .unwrap_or_default(),
            bounds: Bounds::from_env()?,
        })
    }

    /// How much work a plan may ask for before review: the operator's bounds, or their defaults.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// What the plan file at `plan_file`, and every plan downstream of it, may reach: the
    /// operator's root, or the plan's default one.
    pub fn scope(&self, plan_file: &Path) -> Scope {
        Scope { root: self.root.clone().unwrap_or_else(|| Root::around(plan_file)), policy: self.clone() }
    }
}

/// The limits one chain of plans is held to: the policy and the root of its first plan file.
#[derive(Debug, Clone)]
pub struct Scope {
    pub root: Root,
    policy: Policy,
}

impl Scope {
    /// How much work the plan may ask for before review.
    pub fn bounds(&self) -> &Bounds {
        &self.policy.bounds
    }

    /// Refuses the location a catalog gave for `name` when the operator lists the locations plans
    /// may reach and it is under none: a name the operator allows must not lead elsewhere.
    pub fn check_resolved(&self, name: &str, url: &Url) -> Result<(), PolicyError> {
        let Some(allowed) = self.policy.locations.as_ref() else { return Ok(()) };
        if allowed.iter().any(|prefix| under(prefix, url)) {
            return Ok(());
        }
        Err(PolicyError(format!(
            "{name} is the table at {url}, which is not under a location the operator allows ({})",
            listed(allowed)
        )))
    }

    /// Refuses a table the plan reads (`written`, as the plan names it) when a file its log names
    /// leads outside what the plan may reach: its log folder, a data file or deletion vector named
    /// by an absolute path elsewhere (`file:///outside/…`), or a link in the table's folder leading
    /// out of the root. `files` are the version's files, each with how a message names it
    /// ([`crate::delta::table::files_needed`]); the log is the table's, which whoever can write
    /// the table (or check a folder into the repository) writes.
    pub fn check_table_files(
        &self,
        written: &str,
        table: &Url,
        files: &[(String, Url)],
    ) -> Result<(), PolicyError> {
        // The log itself too: a `_delta_log` that is a link out of the root is another table's log.
        let log = ("its log".to_owned(), crate::delta::store::join(table, "_delta_log/"));
        for (name, url) in std::iter::once(&log).chain(files) {
            let outside = match crate::delta::store::local_path(url) {
                Some(path) => (!self.root.lets_read(&path)).then(|| {
                    format!("outside the root {} or in a `.git` folder", self.root.path().display())
                }),
                None if url.scheme() == "file" => Some("not a local path bf can confine".to_owned()),
                None => self.policy.store_problem(name, url),
            };
            if let Some(outside) = outside {
                return Err(PolicyError(format!(
                    "the table `{written}` names the file {name}, which is {outside}: a plan reads only inside \
                     it (a file its log names by an absolute path, or a link in its folder)"
                )));
            }
        }
        Ok(())
    }

    /// Refuses a plan file outside the root before a byte of it is read.
    pub fn check_plan_file(&self, plan_file: &Path) -> Result<(), PolicyError> {
        if self.root.holds(plan_file) {
            return Ok(());
        }
        Err(PolicyError(format!(
            "{} is outside the root {}: bf reads plan files only inside it; {}",
            plan_file.display(),
            self.root.path().display(),
            ROOT_HELP
        )))
    }

    /// Every location of `document` that leaves the root or the operator's lists, and every
    /// connection setting the operator did not allow, each at its key.
    pub fn check(&self, document: &PlanDocument) -> Vec<Issue> {
        let (root, policy) = (&self.root, &self.policy);
        let plan = &document.plan;
        let mut issues = Vec::new();
        let mut named: Vec<(String, &str, Use)> =
            vec![("target.table".into(), &plan.target.table, Use::Table)];
        named.extend(plan.rehearsal.table.as_deref().map(|t| ("rehearsal.table".into(), t, Use::Table)));
        named.extend(plan.record.log_table.as_deref().map(|t| ("record.log_table".into(), t, Use::Table)));
        for (name, input) in &plan.source.inputs {
            named.push((format!("source.inputs.{name}.path"), &input.path, Use::Input));
        }
        for (i, downstream) in plan.downstream.iter().enumerate() {
            named.push((format!("downstream[{i}].plan"), &downstream.plan, Use::File));
        }
        if let Some(file) = plan.notify.as_ref().and_then(|n| n.file.as_deref()) {
            named.push(("notify.file".into(), file, Use::Notice));
        }
        for (key, written, usage) in named {
            if let Some(problem) = policy.location_problem(document, root, written, usage) {
                issues.push(Issue { key, message: problem, help: Some(help_for(usage)) });
            }
        }
        if plan.rehearsal.table.is_none()
            && let Location::Path(target) = document.resolve(&plan.target.table)
            && let Some(name) = target.file_name()
        {
            let beside = target.with_file_name(format!("{}__rehearsal", name.to_string_lossy()));
            if let Some(problem) =
                written_problem("the rehearsal beside the target", &beside, root, Use::Table)
                && root.holds(&beside)
            {
                issues.push(Issue {
                    key: "target.table".into(),
                    message: problem,
                    help: Some("set `[rehearsal] table` to a folder inside the root".into()),
                });
            }
            if !root.holds(&beside) {
                issues.push(Issue {
                    key: "target.table".into(),
                    message: format!(
                        "the rehearsal beside the target, `{}`, would be outside the root {}",
                        beside.file_name().unwrap_or_default().to_string_lossy(),
                        root.path().display()
                    ),
                    help: Some("set `[rehearsal] table` to a folder inside the root".into()),
                });
            }
        }
        if plan.guards.max_slices > policy.bounds().max_slices() {
            issues.push(Issue {
                key: "guards.max_slices".into(),
                message: format!(
                    "`max_slices = {}` is more than the operator allows ({})",
                    plan.guards.max_slices,
                    policy.bounds().max_slices()
                ),
                help: Some(format!(
                    "each slice is a query and a commit; the operator raises the limit with {MAX_SLICES}"
                )),
            });
        }
        issues.extend(policy.connection_issues(document));
        issues
    }
}

impl Policy {
    fn location_problem(
        &self,
        document: &PlanDocument,
        root: &Root,
        written: &str,
        usage: Use,
    ) -> Option<String> {
        // A template is checked at the folder before its first placeholder, and at each slice's file.
        // A pattern's files are confined at the folder it lists, walked whole.
        let fixed = match crate::plan_file::template::split_pattern(written) {
            Some((folder, _)) => folder,
            None => written.to_owned(),
        };
        let fixed = fixed.split('{').next().unwrap_or_default();
        let path = match document.resolve(fixed) {
            Location::Uri(url) if url.scheme() == "file" => match crate::delta::store::local_path(&url) {
                Some(path) => path,
                None => return Some(format!("`{written}` is not a local path bf can confine to the root")),
            },
            Location::Uri(url) => return self.store_problem(written, &url),
            Location::Path(path) => path,
        };
        let root_shown = root.path().display();
        // A checkout's `.git` holds the token actions/checkout leaves in its config: never an input.
        if usage == Use::Input && in_git(&path) {
            return Some(format!("`{written}` is inside a `.git` folder, which is never a plan's input"));
        }
        if usage == Use::Input && holds_credentials(&path) {
            return Some(format!(
                "`{written}` holds credentials (a file named as keys, `.env` files and CI credentials are): never a \
                 plan's input"
            ));
        }
        match leaves_root(document, root, written, &path, usage, self.bounds().max_slices()) {
            Leaves::No => written_problem(written, &path, root, usage),
            Leaves::Itself => Some(format!(
                "`{written}` is outside the root {root_shown}: a plan reads and writes only inside it"
            )),
            Leaves::Through => Some(format!(
                "`{written}` leads outside the root {root_shown}, into a `.git` folder or to a file that holds \
                 credentials (a slice's file, or a file or link in the folder): a plan reads only inside the root, \
                 never `.git` nor a credentials file"
            )),
        }
    }

    fn store_problem(&self, written: &str, url: &Url) -> Option<String> {
        let allowed = self.locations.as_ref()?;
        if allowed.iter().any(|prefix| under(prefix, url)) {
            return None;
        }
        Some(format!("`{written}` is not under a location the operator allows ({})", listed(allowed)))
    }

    fn connection_issues(&self, document: &PlanDocument) -> Vec<Issue> {
        self.storage_issues(&document.plan.storage)
    }

    /// What of a plan's `[storage]` settings the operator did not allow: where bf connects, and the
    /// runner's credentials with it. Asked of every plan as it is loaded, and of a saved plan's
    /// text wherever a command connects by it (`Plan::stores`): a saved plan is a file in a state
    /// folder, which a checkout can hold.
    pub fn storage_issues(&self, storage: &crate::delta::store::Storage) -> Vec<Issue> {
        let allowed = |endpoint: &str| {
            Url::parse(endpoint).is_ok_and(|url| self.endpoints.iter().any(|e| same_endpoint(e, &url)))
        };
        let endpoint_allowed = storage.endpoint.as_deref().is_some_and(allowed);
        let mut issues = Vec::new();
        let help = format!(
            "where bf connects is the operator's choice: set the endpoint in the environment (AWS_ENDPOINT_URL, \
             AZURE_STORAGE_ENDPOINT, GOOGLE_BASE_URL), or list it in {ALLOWED_ENDPOINTS} (comma-separated URLs) for \
             plans to name"
        );
        if storage.endpoint.is_some() && !endpoint_allowed {
            issues.push(Issue {
                key: "storage.endpoint".into(),
                message: "the plan's endpoint is not one the operator allows: the runner's credentials would be sent \
                          there"
                    .into(),
                help: Some(if self.endpoints.is_empty() {
                    help.clone()
                } else {
                    format!("{help}; allowed: {}", endpoint_list(&self.endpoints))
                }),
            });
        }
        // `az://container/…` names no account: the account `[storage]` names is where requests,
        // and the runner's token, go. With the locations limited, it must be one they name.
        if let (Some(account), Some(allowed)) = (&storage.account_name, &self.locations) {
            let named = allowed.iter().any(|prefix| {
                Kind::of(prefix) == Some(Kind::Azure)
                    && prefix
                        .host_str()
                        .is_some_and(|h| h.contains('.') && h.split('.').next() == Some(account.as_str()))
            });
            if !named {
                issues.push(Issue {
                    key: "storage.account_name".into(),
                    message: format!(
                        "the storage account `{account}` is not in a location the operator allows ({ALLOWED_LOCATIONS})"
                    ),
                    help: Some(format!(
                        "list a location of the account in {ALLOWED_LOCATIONS}, e.g. \
                         abfss://container@{account}.dfs.core.windows.net/"
                    )),
                });
            }
        }
        let switches = [
            ("allow_http", storage.allow_http),
            ("skip_signature", storage.skip_signature),
            ("use_emulator", storage.use_emulator),
            // Puts the bucket's name in the host a request goes to.
            ("virtual_hosted_style_request", storage.virtual_hosted_style_request),
        ];
        for (key, value) in switches {
            if value == Some(true) && !endpoint_allowed {
                issues.push(Issue {
                    key: format!("storage.{key}"),
                    message: format!(
                        "`{key} = true` changes how bf connects, which is the operator's choice: a plan may set it \
                         only beside an `endpoint` the operator allows"
                    ),
                    help: Some(help.clone()),
                });
            }
        }
        issues
    }
}

const ROOT_HELP: &str = "the root is the git work tree holding the plan file (else the folder above the plan's); \
                         the operator sets another with --root DIR or BF_ROOT";

/// What a plan does with a location, for the help line of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Table,
    Input,
    File,
    /// A file bf writes: the notice.
    Notice,
}

fn help_for(usage: Use) -> String {
    let what = match usage {
        Use::Table => "keep the plan's tables inside the root (or under an allowed store location)",
        Use::Input => {
            "keep the inputs inside the root (or under an allowed store location); links out of it are not followed"
        }
        Use::File => "keep the plan's files inside the root",
        Use::Notice => {
            "keep the notice file inside the root, outside `.git` and reached through no link; bf never replaces a \
             file that can be run"
        }
    };
    format!("{what}; {ROOT_HELP}")
}

/// Why bf could not write a local location a plan names (a table it writes, its notice) by the
/// write gate's rules, checked as the plan is loaded so a refusal comes at its line, before any
/// slice runs; the gate checks again as bf writes.
fn written_problem(written: &str, path: &Path, root: &Root, usage: Use) -> Option<String> {
    let gate = crate::write_gate::WriteGate::within([root.path()]);
    let refused = match usage {
        Use::Table => gate.check_table(path),
        Use::Notice => gate.check_file(path),
        Use::Input | Use::File => return None,
    };
    refused.err().map(|refused| format!("`{written}` cannot be written: {}", refused.why))
}

/// Whether a local location leaves the root.
enum Leaves {
    No,
    /// The location itself, as written or through a link.
    Itself,
    /// An input inside the root reads a file outside it: a slice's file of a template, or a
    /// link in a folder.
    Through,
}

/// Whether a local location (or, for an input, any file it reads: each slice's file of a
/// template, each entry of a folder) leaves `root`. `fixed` is the location up to its first
/// placeholder.
fn leaves_root(
    document: &PlanDocument,
    root: &Root,
    written: &str,
    fixed: &Path,
    usage: Use,
    max_slices: u32,
) -> Leaves {
    if !root.holds(fixed) {
        return Leaves::Itself;
    }
    let plan = &document.plan;
    // At most as many slices as a plan may have: one lookup each, even for a window a plan's count
    // of slices is refused for.
    let slices = plan.window().slices(plan.slicing.every, plan.slicing.run_offset).take(max_slices as usize);
    let pattern = crate::plan_file::template::split_pattern(written).is_some();
    let through = usage == Use::Input
        && if written.contains('{') && !pattern {
            slices.into_iter().any(|slice| {
                match document.resolve(&crate::plan_file::template::expand(written, &slice)) {
                    Location::Path(path) => !root.lets_read(&path),
                    Location::Uri(url) => {
                        crate::delta::store::local_path(&url).is_none_or(|path| !root.lets_read(&path))
                    }
                }
            })
        } else {
            fixed.is_dir() && !folder_stays_inside(fixed, root, MAX_FOLDER_ENTRIES)
        };
    if through { Leaves::Through } else { Leaves::No }
}

/// Whether every entry of a local input folder stays inside `root`, out of `.git`: a link in it
/// leading out would be read like any file of the folder. A folder of more than `most` entries (all its folders'
/// together) is not walked to its end: it counts as leaving.
fn folder_stays_inside(folder: &Path, root: &Root, most: usize) -> bool {
    let mut pending = vec![folder.to_owned()];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { return false };
        for entry in entries {
            seen += 1;
            let Ok(entry) = entry else { return false };
            if seen > most {
                return false;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { return false };
            if holds_credentials(&path) {
                return false;
            }
            if kind.is_symlink() {
                if !root.lets_read(&path) {
                    return false;
                }
                // A linked folder is walked like any other: what it holds is read too.
                if path.is_dir() {
                    pending.push(path);
                }
            } else if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    true
}

/// A comma-separated list of URLs from the operator's variable `name`.
fn urls(name: &str, value: &str) -> Result<Vec<Url>, PolicyError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| Url::parse(v).map_err(|e| PolicyError(format!("{name}: `{v}` is not a URL ({e})"))))
        .collect()
}

fn endpoint_list(endpoints: &[Url]) -> String {
    endpoints.iter().map(|e| e.as_str().trim_end_matches('/')).collect::<Vec<_>>().join(", ")
}

/// Whether two endpoint URLs reach the same server the same way (a trailing slash aside).
fn same_endpoint(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path().trim_end_matches('/') == b.path().trim_end_matches('/')
        && b.username().is_empty()
        && b.password().is_none()
}

/// The operator's list of locations, as a message shows it.
fn listed(allowed: &[Url]) -> String {
    format!("{ALLOWED_LOCATIONS}: {}", allowed.iter().map(Url::as_str).collect::<Vec<_>>().join(", "))
}

/// Whether the store location `url` is `prefix` or under it, segment by segment (`s3://` and
/// `s3a://` are one store; `s3://lake/a` is not under `s3://lake/ab`). A `..` segment, spelt
/// plainly or as `%2e%2e`, is gone by now: parsing a URL resolves it, for every scheme (tested).
fn under(prefix: &Url, url: &Url) -> bool {
    if let (Some(Ok(_)), "uc" | "glue") = (CatalogName::parse(url.as_str()), url.scheme()) {
        // A catalog name is under a prefix of its names: `uc://main.sales` holds `uc://main.sales.orders`.
        let names = |u: &Url| -> Vec<String> {
            u.host_str().unwrap_or_default().split('.').map(str::to_ascii_lowercase).collect()
        };
        let (wanted, actual) = (names(prefix), names(url));
        return prefix.scheme() == url.scheme()
            && actual.len() >= wanted.len()
            && wanted.iter().zip(&actual).all(|(w, a)| w == a);
    }
    let same_store = match (Kind::of(prefix), Kind::of(url)) {
        (Some(Kind::S3), Some(Kind::S3)) => true,
        (Some(a), Some(b)) => a == b && prefix.scheme() == url.scheme(),
        _ => false,
    };
    let segments = |u: &Url| -> Vec<String> {
        u.path_segments()
            .map(|s| s.filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (wanted, actual) = (segments(prefix), segments(url));
    same_store
        && prefix.username() == url.username()
        && prefix.host_str() == url.host_str()
        && actual.len() >= wanted.len()
        && wanted.iter().zip(&actual).all(|(w, a)| w == a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_name_is_under_a_prefix_of_its_names_only() {
        let url = |s: &str| Url::parse(s).unwrap();
        assert!(under(&url("uc://main.sales"), &url("uc://main.sales.orders")));
        assert!(under(&url("uc://MAIN"), &url("uc://main.sales.orders")));
        assert!(under(&url("glue://sales"), &url("glue://sales.orders")));
        assert!(!under(&url("uc://main.sal"), &url("uc://main.sales.orders")));
        assert!(!under(&url("glue://sales"), &url("uc://sales.x.orders")));
        assert!(!under(&url("uc://main.sales.orders.x"), &url("uc://main.sales.orders")));
    }

    #[test]
    fn store_prefixes_match_whole_segments() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(under(&url("s3://lake/silver/"), &url("s3a://lake/silver/orders")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://lake/silverware/orders")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://other/silver/orders")));
        assert!(!under(&url("s3://lake/"), &url("gs://lake/t")));
    }

    #[test]
    fn endpoints_compare_by_server() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(same_endpoint(&url("http://127.0.0.1:9000/"), &url("http://127.0.0.1:9000")));
        assert!(!same_endpoint(&url("http://127.0.0.1:9000"), &url("http://127.0.0.1:9001")));
        assert!(!same_endpoint(&url("https://s3.example.com"), &url("http://s3.example.com")));
        assert!(same_endpoint(&url("https://s3.example.com"), &url("https://s3.example.com:443/")));
        assert!(!same_endpoint(&url("https://s3.example.com"), &url("https://s4.example.com")));
        assert!(same_endpoint(&url("http://127.0.0.1:9000/minio"), &url("http://127.0.0.1:9000/minio/")));
        assert!(!same_endpoint(&url("http://127.0.0.1:9000/minio"), &url("http://127.0.0.1:9000/other")));
        // Credentials in the plan's URL would be sent with every request: never the operator's endpoint.
        assert!(!same_endpoint(&url("http://127.0.0.1:9000"), &url("http://user@127.0.0.1:9000")));
        assert!(!same_endpoint(&url("http://127.0.0.1:9000"), &url("http://:secret@127.0.0.1:9000")));
    }

    #[test]
    fn a_store_location_is_under_a_prefix_of_the_same_store_account_and_folders() {
        let url = |u: &str| Url::parse(u).unwrap();
        let azure = "abfss://lake@account.dfs.core.windows.net/silver";
        assert!(under(&url(azure), &url(&format!("{azure}/orders"))));
        assert!(under(&url(azure), &url(azure)));
        // One store kind, another scheme: `az://` names no account, so it is not the prefix's.
        assert!(!under(&url(azure), &url("az://lake/silver/orders")));
        assert!(!under(&url("s3://lake/silver/orders"), &url("s3://lake/silver")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://someone@lake/silver/orders")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://lake/silver/%2e%2e/gold")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://lake/silver/%2E%2E/gold")));
        assert!(!under(&url("s3://lake/silver"), &url("s3://lake/silver/../gold")));
        assert!(!under(&url("az://lake/silver"), &url("az://lake/silver/%2e%2e/%2E%2E/silverware")));
        // Two schemes of one store kind whose hosts mean different things: a container, an account.
        assert!(!under(&url("az://lake/silver"), &url("adl://lake/silver/orders")));
        assert!(under(&url("s3://lake//silver/"), &url("s3://lake/silver//orders")));
        assert!(under(&url("gs://lake/silver"), &url("gs://lake/silver/orders")));
        assert!(
            !under(&url("https://lake/silver"), &url("https://lake/silver/orders")),
            "not a store bf opens"
        );
    }

    #[test]
    fn a_path_resolves_through_its_links_and_a_link_to_nowhere_is_outside_every_root() {
        let dir = tempfile::tempdir().unwrap();
        let (inside, outside) = (dir.path().join("repo"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(inside.join("data")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let root = Root::given(&inside).unwrap();
        assert_eq!(root.path(), inside.canonicalize().unwrap());
        assert!(root.holds(&inside.join("data/not-yet/written.parquet")));
        assert!(root.holds(&inside.join("data/../data")));
        assert!(!root.holds(&inside.join("../elsewhere/x")));
        std::os::unix::fs::symlink(&outside, inside.join("data/out")).unwrap();
        assert!(!root.holds(&inside.join("data/out/x.parquet")));
        std::os::unix::fs::symlink(inside.join("nowhere"), inside.join("data/dangling")).unwrap();
        assert_eq!(resolved(&inside.join("data/dangling/x")), None);
        assert!(!root.holds(&inside.join("data/dangling")));
        assert_eq!(
            resolved(&inside.join("data/new/x")),
            Some(inside.canonicalize().unwrap().join("data/new/x"))
        );
        assert!(Root::given(&inside.join("missing")).is_err());
        // `..` after a link is taken from where the link leads.
        assert_eq!(Root::given(&inside.join("data/out/../repo")).unwrap(), root);
    }

    #[test]
    fn a_file_a_tables_log_names_elsewhere_or_on_another_host_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let scope = Scope { root: Root::given(dir.path()).unwrap(), policy: Policy::default() };
        let table = Url::from_directory_path(dir.path().join("orders")).unwrap();
        let file = |name: &str, url: &str| (name.to_owned(), Url::parse(url).unwrap());
        let inside = file("part-0.parquet", table.join("part-0.parquet").unwrap().as_str());
        assert_eq!(scope.check_table_files("orders", &table, std::slice::from_ref(&inside)), Ok(()));
        let refused =
            |named: (String, Url)| scope.check_table_files("orders", &table, &[inside.clone(), named]);
        let outside = refused(file("part-1.parquet", "file:///etc/part-1.parquet")).unwrap_err();
        assert!(outside.0.contains("names the file part-1.parquet, which is outside the root"), "{outside}");
        // A file URL with a host is no local path: neither inside the root nor a store the operator lists.
        let remote = refused(file("part-2.parquet", "file://fileserver/share/part-2.parquet")).unwrap_err();
        assert!(remote.0.contains("part-2.parquet, which is not a local path bf can confine"), "{remote}");
    }

    #[test]
    fn an_input_folder_stays_inside_only_when_no_link_in_it_leads_out() {
        let dir = tempfile::tempdir().unwrap();
        let (inside, outside) = (dir.path().join("repo"), dir.path().join("elsewhere"));
        let folder = inside.join("landing");
        std::fs::create_dir_all(folder.join("2026/03")).unwrap();
        std::fs::create_dir_all(inside.join("shared")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(folder.join("2026/03/a.csv"), "x\n").unwrap();
        let root = Root::given(&inside).unwrap();
        assert!(folder_stays_inside(&folder, &root, 10));
        // A link inside the root is followed, and what its folder holds is read too.
        std::os::unix::fs::symlink(inside.join("shared"), folder.join("shared")).unwrap();
        assert!(folder_stays_inside(&folder, &root, 10));
        std::os::unix::fs::symlink(&outside, inside.join("shared/out")).unwrap();
        assert!(!folder_stays_inside(&folder, &root, 10), "a link two folders down, through a linked folder");
        std::fs::remove_file(inside.join("shared/out")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), folder.join("2026/03/b.csv")).unwrap();
        assert!(!folder_stays_inside(&folder, &root, 10), "a link to a file outside");
        assert!(!folder_stays_inside(&inside.join("missing"), &root, 10));
        std::fs::remove_file(folder.join("2026/03/b.csv")).unwrap();
        // The folder holds 2026, 2026/03, a.csv and the link `shared` (empty now): four entries.
        assert!(folder_stays_inside(&folder, &root, 4), "as many entries as it may walk");
        assert!(!folder_stays_inside(&folder, &root, 3), "one more than it may walk");
    }
}
