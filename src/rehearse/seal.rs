//! A saved plan bound to what was reviewed.
//!
//! The saved plan travels between `bf plan` and `bf apply` — a CI artifact, a file on an Airflow
//! volume — and whoever can write it there could swap its target, erase its problems or change what
//! `bf export airflow` generates. So before a saved plan is applied or exported, everything that
//! decides what is written is derived again from the plan text it pins (sha256): the target, the
//! rehearsal, the window and slices, the inputs; a saved plan whose recorded checks, guards or
//! outside-the-window comparison failed is refused whatever its `problems` say. With `BF_PLAN_KEY`
//! set, `bf plan` signs the saved plan (HMAC-SHA256) and apply and export refuse one that is unsigned
//! or altered: the only way a coherent rewrite of the whole file is caught.

use std::path::Path;

use hmac::{KeyInit, Mac};
use url::Url;

use crate::delta::store;
use crate::plan_file::confine::{Policy, Scope};
use crate::plan_file::{self, Location, PlanDocument};
use crate::rehearse::plan::{Plan, SavedPlanError};

mod verdicts;
use verdicts::{failures, verdicts};

/// The operator's variable holding the key saved plans are signed with.
pub const PLAN_KEY: &str = "BF_PLAN_KEY";

/// How a signature is spelt in the saved plan's `signature` field.
const SCHEME: &str = "hmac-sha256:";

/// The secret `bf plan` signs saved plans with and `bf apply` checks them by. Never printed.
#[derive(Clone)]
pub struct PlanKey(Vec<u8>);

impl std::fmt::Debug for PlanKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlanKey(…)")
    }
}

impl PlanKey {
    /// The key in `BF_PLAN_KEY`, if the operator set one.
    /// An empty one is an error, never "no key": a secret that failed to reach the job would
    /// otherwise switch the signature check off without a word.
    pub fn from_env() -> Result<Option<PlanKey>, SealError> {
        match std::env::var_os(PLAN_KEY) {
            None => Ok(None),
            Some(key) if key.to_string_lossy().trim().is_empty() => Err(SealError::EmptyKey),
            Some(key) => Ok(Some(PlanKey(key.to_string_lossy().into_owned().into_bytes()))),
        }
    }

    fn mac(&self) -> hmac::Hmac<sha2::Sha256> {
        <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length")
    }

    /// The signature of a saved plan's JSON, its `signature` field left out.
    pub fn sign(&self, saved: &serde_json::Value) -> String {
        let mut mac = self.mac();
        mac.update(canonical(saved).as_bytes());
        format!("{SCHEME}{}", hex::encode(mac.finalize().into_bytes()))
    }

    /// Whether `saved` carries this key's signature of the rest of it (compared in constant time).
    fn verifies(&self, saved: &serde_json::Value) -> bool {
        let Some(signature) = saved.get("signature").and_then(|s| s.as_str()) else { return false };
        let Some(bytes) = signature.strip_prefix(SCHEME).and_then(|h| hex::decode(h).ok()) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(canonical(saved).as_bytes());
        mac.verify_slice(&bytes).is_ok()
    }
}

/// Saves `plan` at `path` (atomically, as [`Plan::save`]), with a `signature` field by `key` when
/// there is one: `bf apply` then refuses the file if anything in it changes.
pub fn save_signed(plan: &Plan, path: &Path, key: Option<&PlanKey>) -> Result<(), SavedPlanError> {
    let Some(key) = key else { return plan.save(path) };
    let mut saved = serde_json::to_value(plan).expect("a plan serializes");
    saved["signature"] = key.sign(&saved).into();
    crate::rehearse::plan::write_saved(path, serde_json::to_string_pretty(&saved).expect("a plan serializes"))
}

/// The saved plan's JSON without its signature, in one spelling: what is signed.
fn canonical(saved: &serde_json::Value) -> String {
    let mut unsigned = saved.clone();
    if let Some(fields) = unsigned.as_object_mut() {
        fields.remove("signature");
    }
    unsigned.to_string()
}

/// Why a saved plan is not applied or exported.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(transparent)]
    Saved(#[from] SavedPlanError),
    #[error(
        "the saved plan {path} is not signed with the key in {PLAN_KEY}: it is unsigned, or it was changed after \
         `bf plan` signed it; run `bf plan` again (with the same {PLAN_KEY}) and review it"
    )]
    Signature { path: String },
    #[error(
        "{PLAN_KEY} is set but empty: set it to the key saved plans are signed with, or unset it (a secret that did \
         not reach the job must not turn the signature check off)"
    )]
    EmptyKey,
    #[error("the saved plan {path} is not what its plan text says, so it is not the plan that was reviewed:\n{}\nRun `bf plan` again and review it.", reasons.join("\n"))]
    Unbound { path: String, reasons: Vec<String> },
    #[error(
        "{path} is a preview of {rehearsed} of its plan's {of} slices (`bf plan --sample`): `bf apply` takes only a \
         plan of every slice. Run `bf plan {plan_file}` without `--sample`, review it, and apply that. Nothing was written."
    )]
    Preview { path: String, rehearsed: usize, of: usize, plan_file: String },
    #[error("this plan cannot be applied: the saved plan {path} records what failed, whatever its `problems` say:\n{}", reasons.join("\n"))]
    Failed { path: String, reasons: Vec<String> },
}

/// Loads the saved plan at `path` for `bf apply` or `bf export`: signed by the operator's key when
/// there is one, bound to its plan text, and with nothing recorded as failed ([`examine`]).
pub fn load_reviewed(path: &Path, policy: &Policy) -> Result<Plan, SealError> {
    let plan = Plan::load(path)?;
    // A preview's slices are not the ones its text makes: said plainly, before the seal says so.
    if let Some(preview) = &plan.preview {
        return Err(SealError::Preview {
            path: path.display().to_string(),
            rehearsed: plan.slices.len(),
            of: preview.of,
            plan_file: plan.plan_file.path.clone(),
        });
    }
    if let Some(key) = PlanKey::from_env()? {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SavedPlanError::Read { path: path.to_owned(), source })?;
        let saved: serde_json::Value = serde_json::from_str(&text)
            .map_err(|source| SavedPlanError::Parse { path: path.to_owned(), source })?;
        if !key.verifies(&saved) {
            return Err(SealError::Signature { path: path.display().to_string() });
        }
    }
    let found = examine(&plan, policy);
    let path = path.display().to_string();
    if !found.unbound.is_empty() {
        return Err(SealError::Unbound { path, reasons: found.unbound });
    }
    // A plan that says it cannot be applied is refused by its callers, with its problems; one that
    // says it can, though its rehearsal recorded a failure, had its problems erased.
    if !found.failed.is_empty() && plan.appliable() {
        return Err(SealError::Failed { path, reasons: found.failed });
    }
    Ok(plan)
}

/// What [`examine`] found wrong with a saved plan.
#[derive(Debug, Default)]
pub struct Findings {
    /// Where the saved plan differs from what its pinned plan text makes.
    pub unbound: Vec<String>,
    /// What its rehearsal recorded as failed: checks, guards, rows outside the window, source
    /// rows no slice writes.
    pub failed: Vec<String>,
}

/// Every way `plan` (and each plan downstream of it) differs from what its pinned plan text
/// makes, and every failure its rehearsal recorded.
pub fn examine(plan: &Plan, policy: &Policy) -> Findings {
    let scope = policy.scope(Path::new(&plan.plan_file.path));
    let mut found = Findings::default();
    check(plan, &scope, &[], &mut found);
    found
}

fn check(plan: &Plan, scope: &Scope, above: &[&Plan], found: &mut Findings) {
    let file = &plan.plan_file;
    let at = |what: String| format!("  - {}: {what}", file.path);
    found.failed.extend(failures(plan).into_iter().map(at));
    let mut unbound = Vec::new();
    let Some((document, target)) = reread(plan, scope, &mut unbound) else {
        found.unbound.extend(unbound.into_iter().map(at));
        return;
    };
    let spec = &document.plan;
    unbound.extend(differences(plan, &document, &target));
    unbound.extend(unnamed_files(plan, &document, above));
    unbound.extend(unrecorded(plan, &document));
    let (verdicts_failed, verdicts_unbound) = verdicts(plan, spec);
    found.failed.extend(verdicts_failed.into_iter().map(at));
    unbound.extend(verdicts_unbound);
    // Plans saved before their days were recorded: only the slices' counts tell.
    if plan.format < crate::rehearse::plan::OUTSIDE_DAYS_FORMAT
        && !spec.guards.allow_rows_outside_window
        && plan.slices.iter().any(|s| s.source.outside_window > 0)
    {
        found.failed.push(at("source rows fall outside the window: no slice writes them".into()));
    }
    let downstream: Vec<String> =
        spec.downstream.iter().map(|d| canonical_path(&document.dir().join(&d.plan))).collect();
    let saved: Vec<&str> = plan.downstream.iter().map(|d| d.plan_file.path.as_str()).collect();
    if saved != downstream.iter().map(String::as_str).collect::<Vec<_>>() {
        unbound.push("its downstream plans are not the ones its text names".into());
    }
    found.unbound.extend(unbound.into_iter().map(at));
    let mut chain = above.to_vec();
    chain.push(plan);
    for below in &plan.downstream {
        check(below, scope, &chain, found);
    }
}

/// The saved plan's own text, read again as a plan file within the scope, and the target it names;
/// `None` (with why in `unbound`) where the text cannot say what the plan may touch.
fn reread(plan: &Plan, scope: &Scope, unbound: &mut Vec<String>) -> Option<(PlanDocument, Url)> {
    let file = &plan.plan_file;
    if crate::rehearse::plan::sha256_hex(file.text.as_bytes()) != file.sha256 {
        unbound.push("its text is not the text its sha256 pins".into());
    }
    if let Err(refused) = scope.check_plan_file(Path::new(&file.path)) {
        unbound.push(refused.to_string());
        return None;
    }
    let document = match plan_file::parse_within(Path::new(&file.path), file.text.clone(), Some(scope)) {
        Ok(document) => document,
        Err(error) => {
            unbound.push(format!("its text is refused:\n{error}"));
            return None;
        }
    };
    let written = &document.plan.target.table;
    // A catalog name is bound by the name: where it points is checked against the catalog by
    // `bf apply` (it resolves it again and refuses a name that moved), not here, offline.
    let located = match (crate::delta::catalog::CatalogName::parse(written), &plan.target.catalog) {
        (Some(Ok(name)), Some(pinned)) if name.to_string() == pinned.name => {
            Url::parse(&pinned.location).map_err(|e| e.to_string())
        }
        (Some(_), _) => Err(format!("its text names {written}, which the saved plan does not pin")),
        (None, _) => store::table_url(&document.resolve(written)).map_err(|e| e.to_string()),
    };
    match located {
        Ok(target) => Some((document, target)),
        Err(error) => {
            unbound.push(format!("its target cannot be located: {error}"));
            None
        }
    }
}

/// Where the saved plan's target, rehearsal, window or slices are not the ones its text makes.
fn differences(plan: &Plan, document: &PlanDocument, target: &Url) -> Vec<String> {
    let spec = &document.plan;
    let mut differ = Vec::new();
    if plan.target.uri != target.as_str() || plan.target.table != spec.target.table {
        differ.push(format!("it targets {}, but its text names {}", plan.target.uri, target));
    }
    match document.rehearsal_url(target) {
        Ok(rehearsal) if rehearsal.as_str() == plan.rehearsal.uri => {}
        Ok(rehearsal) => {
            differ.push(format!("its rehearsal is {}, but its text makes {rehearsal}", plan.rehearsal.uri))
        }
        Err(error) => differ.push(format!("its rehearsal cannot be located: {error}")),
    }
    if plan.target.date_column != spec.target.date_column
        || plan.target.key != spec.target.key
        || plan.mode != spec.write.mode
        || plan.reason != spec.reason
        || plan.window != spec.window()
    {
        differ.push("its date column, key, mode, reason or window is not its text's".into());
    }
    let slices = spec.slices();
    let same_slices = plan.slices.len() == slices.len()
        && plan.slices.iter().zip(&slices).all(|(saved, made)| {
            saved.index == made.index && saved.first == made.first && saved.last == made.last
        });
    if !same_slices {
        differ.push("its slices are not the ones its text makes".into());
    }
    differ
}

/// Files the saved plan publishes outside the table, and inputs it recorded that its text does not
/// name: an edited saved plan must not smuggle in a path the reviewed text never showed.
fn unnamed_files(plan: &Plan, document: &PlanDocument, above: &[&Plan]) -> Vec<String> {
    let mut unnamed = Vec::new();
    for slice in &plan.slices {
        let files = slice
            .publication
            .iter()
            .flat_map(|p| p.adds.iter().chain(&p.cdc).map(|a| &a.path).chain(&p.removes));
        for path in files.filter(|path| !is_table_relative(path)) {
            unnamed.push(format!(
                "slice {} publishes `{path}`, which is not a file inside the table",
                slice.index
            ));
        }
    }
    let recorded = plan
        .inputs
        .iter()
        .map(|i| (&i.input, &i.path))
        .chain(plan.input_folders.iter().map(|f| (&f.input, &f.location)));
    for (input, location) in recorded {
        if !within_input(document, input, location) {
            unnamed.push(format!("input `{input}` is recorded at {location}, which its text does not name"));
        }
    }
    for delta in &plan.delta_inputs {
        let written = document.plan.source.inputs.get(&delta.input).map(|i| i.path.as_str());
        // A catalog name is bound by the name; where it leads, `bf apply` asks the catalog again.
        let named = written.and_then(|written| match crate::delta::catalog::CatalogName::parse(written) {
            Some(_) => delta.catalog.as_ref().filter(|c| c.name == written).map(|c| c.location.clone()),
            None => store::table_url(&document.resolve(written)).ok().map(|u| u.to_string()),
        });
        let bound = match &delta.stands_for {
            None => named.as_deref() == Some(delta.uri.as_str()),
            Some(upstream) => {
                named.as_deref() == Some(upstream.as_str())
                    && above.iter().any(|a| a.target.uri == *upstream && a.rehearsal.uri == delta.uri)
            }
        };
        if !bound {
            unnamed.push(format!(
                "Delta input `{}` is recorded as {}, which its text does not name",
                delta.input, delta.uri
            ));
        }
    }
    unnamed
}

/// What the saved plan must record for `bf apply` to check it, and does not: a fingerprint of every
/// input file its text reads (each slice's file of a template, each file of a folder's listing, the
/// file itself), a record of each Delta input, and which table its pre-version is of. Without the
/// record, the check it serves would pass by having nothing to compare: an input changed after the
/// review would be read by `--recompute`, a commit since the plan would go unweighed.
fn unrecorded(plan: &Plan, document: &PlanDocument) -> Vec<String> {
    let mut missing = Vec::new();
    if plan.format >= 5 && (plan.target.table_id.is_none() || plan.target.pre_commit_sha256.is_none()) {
        missing.push("it does not record which table its pre-version is of".to_owned());
    }
    if plan.format < 5 {
        // Saved by an older bf, which recorded less, some of it by relative paths: `Plan::load`
        // says what cannot be checked.
        return missing;
    }
    // Each fingerprint's file as its folder lists it: a URL, or a local path (never resolved
    // through a link, which would name the file the link leads to). A file two inputs read is
    // fingerprinted once, under the first: the file is what is compared, whatever reads it.
    let fingerprinted: std::collections::HashSet<Url> = plan
        .inputs
        .iter()
        .filter_map(|f| {
            let url = match store::uri(&f.path) {
                Some(url) => url,
                None => Url::from_file_path(&f.path).ok()?,
            };
            Some(listed_url(&url))
        })
        .collect();
    for (name, input) in &document.plan.source.inputs {
        if input.format == plan_file::Format::Delta {
            // Two inputs naming one table share its record, kept under the first one's name.
            let table = match crate::delta::catalog::CatalogName::parse(&input.path) {
                Some(_) => None,
                None => store::table_url(&document.resolve(&input.path)).ok(),
            };
            let recorded = plan.delta_inputs.iter().any(|d| {
                &d.input == name
                    || d.catalog.as_ref().is_some_and(|c| c.name == input.path)
                    || table
                        .as_ref()
                        .is_some_and(|t| d.uri == t.as_str() || d.stands_for.as_deref() == Some(t.as_str()))
            });
            if !recorded {
                missing.push(format!("Delta input `{name}` has no record of the version it read"));
            }
            continue;
        }
        // Each location the input names (each slice's, for a template): a folder, as its listing
        // records it, stands for its files; any other location is a file.
        let locations: Vec<Url> = if input.path.contains('{') {
            plan.slices
                .iter()
                .filter_map(|s| {
                    let slice = crate::window::Slice {
                        index: s.index,
                        first: s.first,
                        last: s.last,
                        run_date: s.run_date,
                    };
                    document.resolve(&listed_at(&plan_file::template::expand(&input.path, &slice))).url().ok()
                })
                .collect()
        } else {
            document.resolve(&listed_at(&input.path)).url().ok().into_iter().collect()
        };
        // A folder two inputs read is listed once, under the first.
        let folders: Vec<(Url, &Vec<String>)> =
            plan.input_folders.iter().filter_map(|f| Some((store::uri(&f.location)?, &f.files))).collect();
        let same = |a: &Url, b: &Url| a.as_str().trim_end_matches('/') == b.as_str().trim_end_matches('/');
        let files: Vec<Url> = locations
            .into_iter()
            .flat_map(|location| match folders.iter().find(|(folder, _)| same(folder, &location)) {
                Some((folder, files)) => files.iter().map(|f| store::join(folder, f)).collect(),
                None => vec![location],
            })
            .collect();
        for file in files.iter().filter(|f| !fingerprinted.contains(&listed_url(f))) {
            missing.push(format!("input `{name}`'s file {} has no fingerprint", store::display_url(file)));
        }
    }
    missing
}

/// A local file as its folder lists it: the folder resolved (links followed), the file's own name
/// kept — a link in an input folder is that folder's file (the root's rules judged where it leads
/// when the plan was loaded). `None` where the folder cannot be resolved.
fn as_listed(path: &Path) -> Option<std::path::PathBuf> {
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return crate::plan_file::confine::resolved(path);
    };
    Some(crate::plan_file::confine::resolved(folder)?.join(name))
}

/// [`as_listed`] for a URL: a local file's, as its folder lists it; any other, as it is.
fn listed_url(url: &Url) -> Url {
    store::local_path(url)
        .and_then(|path| as_listed(&path))
        .and_then(|path| Url::from_file_path(path).ok())
        .unwrap_or_else(|| url.clone())
}

/// A path as the saved plan records a plan file's: canonical where it exists.
fn canonical_path(path: &Path) -> String {
    path.canonicalize().unwrap_or_else(|_| path.to_owned()).display().to_string()
}

/// Whether a file a slice publishes is a path inside the table's folder: relative, without a
/// way up or a scheme.
fn is_table_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains("://")
        && !path.contains('\\')
        && path.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Whether `recorded` (a local path or a URL) is the location the plan's input `name` names, or a
/// file of it: in its folder, or of its template, up to the first placeholder.
fn within_input(document: &PlanDocument, name: &str, recorded: &str) -> bool {
    let Some(input) = document.plan.source.inputs.get(name) else { return false };
    let listed = listed_at(&input.path);
    let fixed = listed.split('{').next().unwrap_or_default();
    let templated = input.path.contains('{');
    match (document.resolve(fixed), store::uri(recorded)) {
        (Location::Uri(base), Some(url)) if base.scheme() != "file" => {
            let base =
                if templated { folder_of(&base) } else { base.as_str().trim_end_matches('/').to_owned() };
            let url = url.as_str();
            url == base || url.starts_with(&format!("{}/", base.trim_end_matches('/')))
        }
        (base, recorded_url) => {
            let base = match base {
                Location::Path(path) => path,
                Location::Uri(url) => match store::local_path(&url) {
                    Some(path) => path,
                    None => return false,
                },
            };
            let recorded = match recorded_url {
                Some(url) => match store::local_path(&url) {
                    Some(path) => path,
                    None => return false,
                },
                None => Path::new(recorded).to_owned(),
            };
            let base = if templated && !fixed.ends_with('/') {
                base.parent().map(Path::to_owned).unwrap_or(base)
            } else {
                base
            };
            match (crate::plan_file::confine::resolved(&base), as_listed(&recorded)) {
                (Some(base), Some(recorded)) => recorded.starts_with(base),
                _ => false,
            }
        }
    }
}

/// Where an input's files are listed: the folder of a pattern (`landing/**/*.jsonl` → `landing/`),
/// or the path itself.
fn listed_at(path: &str) -> String {
    match plan_file::template::split_pattern(path) {
        Some((folder, _)) => folder,
        None => path.to_owned(),
    }
}

/// The folder a template's fixed part is in: `s3://b/landing/orders_` → `s3://b/landing`.
fn folder_of(url: &Url) -> String {
    let text = url.as_str();
    text.rfind('/').map_or(text, |cut| &text[..cut]).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_files_stay_inside_the_table() {
        assert!(is_table_relative("order_date=2026-03-01/part-0.parquet"));
        assert!(!is_table_relative("../orders_gold/part-0.parquet"));
        assert!(!is_table_relative("/etc/passwd"));
        assert!(!is_table_relative("s3://other/part.parquet"));
    }

    #[test]
    fn a_signature_covers_every_field_but_itself() {
        let key = PlanKey(b"k".to_vec());
        let mut saved = serde_json::json!({"id": "a", "target": {"uri": "file:///t/"}});
        saved["signature"] = key.sign(&saved).into();
        assert!(key.verifies(&saved));
        saved["target"]["uri"] = "file:///other/".into();
        assert!(!key.verifies(&saved));
        assert!(!PlanKey(b"other".to_vec()).verifies(&saved));
    }
}
