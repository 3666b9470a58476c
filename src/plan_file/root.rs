//! The root: the folder every local path of a plan must resolve inside, and what in it a plan may
//! read (no `.git`, no credentials file). The rules of what a plan may reach beyond it — store
//! locations, endpoints, bounds — are [`crate::plan_file::confine`]'s.

use std::path::{Path, PathBuf};

/// The folder every local path of a plan must resolve inside, canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(PathBuf);

impl Root {
    /// The operator's root. It must exist: a root that does not would hold nothing.
    pub fn given(dir: &Path) -> Result<Root, PolicyError> {
        dir.canonicalize()
            .ok()
            .filter(|d| d.is_dir())
            .map(Root)
            .ok_or_else(|| PolicyError(format!("the root {} is not a folder", dir.display())))
    }

    /// The default root of a plan file: the git work tree holding it (a `.git` folder or file in
    /// it or above it), or else the folder above the plan's folder. Found from where the plan
    /// file is written, not where a link would take it, so a plan file linked from outside is
    /// refused rather than moving the root with it.
    pub fn around(plan_file: &Path) -> Root {
        let absolute = path_clean::clean(std::path::absolute(plan_file).unwrap_or_else(|_| plan_file.into()));
        let folder = absolute.parent().unwrap_or(Path::new("/")).to_owned();
        let work_tree = folder.ancestors().find(|dir| dir.join(".git").exists());
        let dir = match work_tree {
            Some(tree) => tree.to_owned(),
            None => folder.parent().unwrap_or(&folder).to_owned(),
        };
        Root(resolved(&dir).unwrap_or(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Whether `path`, as the filesystem resolves it, is the root or inside it.
    pub fn holds(&self, path: &Path) -> bool {
        resolved(path).is_some_and(|p| p.starts_with(&self.0))
    }

    /// Whether a plan may read `path`: inside the root and, as the filesystem resolves it, in no
    /// `.git` folder — a checkout's `.git/config` holds the token actions/checkout leaves there, and
    /// a link from anywhere in the root could lead to it — and no file that holds credentials.
    pub fn lets_read(&self, path: &Path) -> bool {
        self.holds(path) && !in_git(path) && !holds_credentials(path)
    }
}

/// Whether `path`, by its name (or, through a link, its target's), is a file that holds
/// credentials: what a CI job leaves in the workspace (google-github-actions/auth's
/// `gha-creds-*.json`), keys, `.env` files, the clients' credential files. Never a plan's input,
/// named or in a folder it reads.
pub fn holds_credentials(path: &Path) -> bool {
    let named = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let extension = |e: &str| name.ends_with(e);
        (name.starts_with("gha-creds-") && extension(".json"))
            || name == ".env"
            || name.starts_with(".env.")
            || [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore"].iter().any(|e| extension(e))
            || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"].iter().any(|k| name.starts_with(k))
            || [
                ".netrc",
                ".npmrc",
                ".pypirc",
                ".git-credentials",
                ".dockercfg",
                "credentials",
                "credentials.json",
            ]
            .contains(&name.as_str())
            || name.contains("service-account") && extension(".json")
            || name == "kubeconfig"
    };
    named(path) || resolved(path).is_some_and(|p| named(&p))
}

/// Whether `path`, as the filesystem resolves it, is in a `.git` folder.
pub(crate) fn in_git(path: &Path) -> bool {
    resolved(path).is_some_and(|p| crate::write_gate::in_git(&p))
}

pub use crate::write_gate::resolved;

/// A malformed operator setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub String);
