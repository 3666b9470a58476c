//! A backfill and the tables built from it: the chain a plan's `[[downstream]]` entries name.
//!
//! Reloading `orders_silver` leaves `revenue_by_day`, computed from the wrong March, wrong in turn. A
//! chain is the upstream plan with its downstream plans (each a complete plan file of its own, which
//! may have downstream plans too), in the order they are applied: upstream first, then each
//! downstream depth first. Everything that needs more than one file is checked here, before any
//! table is opened, each problem at its line: a downstream plan that is missing, a cycle, a table
//! twice in a chain, a downstream that reads no table upstream of it, a downstream window outside
//! what the upstream rewrites.
//!
//! The rehearsal redirects a downstream's Delta inputs that read an upstream table to that table's
//! rehearsal ([`crate::rehearse::rehearsal::rehearse_chain`]); apply, rollback and the notice follow the same
//! chain through the ledger's `bf.cascade` keys.

use std::path::{Path, PathBuf};

use url::Url;

use crate::delta::store::{self, Location};
use crate::plan_file::confine::{Policy, Scope};
use crate::plan_file::{self, Format, Issue, PlanDocument, PlanFile, PlanFileError};

/// A plan and its downstream plans.
#[derive(Debug, Clone)]
pub struct Chain {
    pub document: PlanDocument,
    /// The target this plan writes, as a URL made from the plan's text: what the chain's checks
    /// match downstream inputs against.
    pub table: Url,
    pub downstream: Vec<Chain>,
    /// What the chain may reach: checked again where a catalog resolves a name to a location.
    pub scope: Scope,
    /// The cluster the slices' source queries run on, when the operator named one.
    pub cluster: Option<crate::cluster::Reached>,
}

/// One plan above the one being read, for the cycle and reader checks.
#[derive(Clone)]
struct Above {
    /// Its canonical path.
    file: PathBuf,
    table: Url,
    /// Its path as the user gave it, for messages.
    shown: String,
}

impl Chain {
    /// Runs the source queries of every plan of the chain on `cluster`.
    pub fn on_cluster(mut self, cluster: Option<crate::cluster::Reached>) -> Chain {
        self.downstream = self.downstream.into_iter().map(|d| d.on_cluster(cluster.clone())).collect();
        self.cluster = cluster;
        self
    }

    /// Reads the plan file at `path` and every plan downstream of it, and checks the chain; every
    /// file and location of the chain is held to what `policy` lets the first plan reach.
    pub fn load(path: &Path, policy: &Policy) -> Result<Chain, PlanFileError> {
        let scope = policy.scope(path);
        let document = plan_file::load(path, &scope)?;
        Chain::below(document, &[], &scope)
    }

    fn below(document: PlanDocument, above: &[Above], scope: &Scope) -> Result<Chain, PlanFileError> {
        let table = target_url(&document)?;
        let mut path = above.to_vec();
        path.push(Above {
            file: canonical(&document.path),
            table: table.clone(),
            shown: document.path.display().to_string(),
        });
        let mut downstream = Vec::new();
        let mut issues = Vec::new();
        for (i, entry) in document.plan.downstream.iter().enumerate() {
            let key = format!("downstream[{i}].plan");
            let file = document.dir().join(&entry.plan);
            if !file.is_file() {
                issues.push(issue(
                    &key,
                    format!("the downstream plan {} does not exist", file.display()),
                    "name a plan file relative to this one",
                ));
                continue;
            }
            if let Some(cycle) = path.iter().position(|a| a.file == canonical(&file)) {
                let names: Vec<&str> = path[cycle..].iter().map(|a| a.shown.as_str()).collect();
                issues.push(issue(
                    &key,
                    format!(
                        "{} is upstream of this plan already: a cycle ({} → {})",
                        file.display(),
                        names.join(" → "),
                        file.display()
                    ),
                    "a downstream table is built from its upstream, never the other way round",
                ));
                continue;
            }
            let child = plan_file::load(&file, scope)?;
            let child_table = target_url(&child)?;
            if let Some(twice) = path.iter().find(|a| a.table == child_table) {
                issues.push(issue(
                    &key,
                    format!(
                        "{} writes {}, which {} writes too: a table is backfilled once per chain",
                        file.display(),
                        store::display_url(&child_table),
                        twice.shown
                    ),
                    "remove one of the two plans from the chain",
                ));
                continue;
            }
            if reads_any(&child, path.iter().map(|a| &a.table)).is_empty() {
                issues.push(issue(
                    &key,
                    format!(
                        "{} reads no table upstream of it: none of its Delta inputs is {}",
                        file.display(),
                        store::display_url(&table)
                    ),
                    "a downstream plan's source reads its upstream table (`format = \"delta\"`); \
                     a plan that does not is not downstream of it",
                ));
                continue;
            }
            let (window, theirs) = (document.plan.window(), child.plan.window());
            if theirs.start < window.start || theirs.end > window.end {
                issues.push(issue(
                    &key,
                    format!(
                        "{}'s window {theirs} is not inside this plan's window {window}: the days outside it \
                         are not rewritten upstream",
                        file.display()
                    ),
                    "a downstream plan rebuilds days its upstream rewrites; give it a window inside this one",
                ));
                continue;
            }
            downstream.push(Chain::below(child, &path, scope)?);
        }
        if !issues.is_empty() {
            return Err(document.invalid(issues));
        }
        Ok(Chain { document, table, downstream, scope: scope.clone(), cluster: None })
    }

    /// The chain's plans in apply order: this one, then each downstream depth first.
    pub fn plans(&self) -> Vec<&Chain> {
        let mut all = vec![self];
        for child in &self.downstream {
            all.extend(child.plans());
        }
        all
    }

    /// Plans in the folder of this chain's first plan that read one of its tables but are not in
    /// it: readers a reload of those days would leave wrong. One warning each, worded for the
    /// reviewer.
    pub fn undeclared_readers(&self) -> Vec<String> {
        let members: Vec<PathBuf> = self.plans().iter().map(|c| canonical(&c.document.path)).collect();
        let tables: Vec<&Url> = self.plans().iter().map(|c| &c.table).collect();
        let Ok(entries) = std::fs::read_dir(self.document.dir()) else { return Vec::new() };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && !members.contains(&canonical(p)))
            .collect();
        files.sort();
        let mut warnings = Vec::new();
        for file in files {
            // A file that is no plan, or an invalid one, reads nothing bf can tell.
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            let Ok(plan) = toml::from_str::<PlanFile>(&text) else { continue };
            let document = PlanDocument { path: file.clone(), text, plan };
            for read in reads_any(&document, tables.iter().copied()) {
                warnings.push(format!(
                    "{} reads {} but is not downstream of this backfill: its table keeps the old numbers \
                     unless it is added under `[[downstream]]` or rebuilt after the apply",
                    file.display(),
                    table_name(read)
                ));
            }
        }
        warnings
    }
}

/// The tables of `tables` that `document`'s Delta inputs read, each once.
fn reads_any<'t>(document: &PlanDocument, tables: impl Iterator<Item = &'t Url>) -> Vec<&'t Url> {
    let read: Vec<Url> = document
        .plan
        .source
        .inputs
        .values()
        .filter(|input| input.format == Format::Delta)
        .filter_map(|input| table_key(document, &input.path))
        .collect();
    tables.filter(|t| read.contains(t)).collect()
}

/// A table's last path segment, the name people call it by (`orders_silver`).
pub fn table_name(table: &Url) -> String {
    table
        .path_segments()
        .and_then(|mut s| s.rfind(|s| !s.is_empty()).map(str::to_owned))
        .unwrap_or_else(|| store::display_url(table))
}

fn target_url(document: &PlanDocument) -> Result<Url, PlanFileError> {
    table_key(document, &document.plan.target.table).ok_or_else(|| {
        let message = format!("`{}` cannot be read as a table's location", document.plan.target.table);
        document.invalid(vec![Issue { key: "target.table".into(), message, help: None }])
    })
}

/// A table a plan names, as a URL to compare with the others of the chain. Local paths are made
/// absolute by their text alone: `bf validate` checks a chain without its tables, which may not
/// exist on the reviewer's machine.
fn table_key(document: &PlanDocument, written: &str) -> Option<Url> {
    match document.resolve(written) {
        Location::Uri(url) => store::table_url(&Location::Uri(url)).ok(),
        Location::Path(path) => {
            Url::from_directory_path(path_clean::clean(std::path::absolute(path).ok()?)).ok()
        }
    }
}

fn issue(key: &str, message: String, help: &str) -> Issue {
    Issue { key: key.to_owned(), message, help: Some(help.to_owned()) }
}

/// The file's canonical path when it exists, so `plans/../plans/a.toml` and `plans/a.toml` are one
/// file in a cycle check; the path as given otherwise.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
