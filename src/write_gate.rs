//! The write gate: one rule for every file and folder bf writes on a local disk.
//!
//! bf runs in a checkout, and a pull request fills a checkout: any name in it may be a link, and its
//! `.git/` holds the hooks git runs on the operator's machine at the next commit. So whatever bf
//! writes — the saved plan and the state dir's other files, a notice, spooled lineage events, a
//! table's data files and commits, a rehearsal, the change log — passes this gate first:
//!
//! 1. it is inside a place its caller allows (the root, the state dir, a table's own folder),
//!    spelt as that place or its canonical form: a link above the place is the operator's;
//! 2. no folder or file between that place and it is a link, which would send the write elsewhere
//!    (into `.git/hooks`, outside the checkout) while every name a reviewer reads looks innocent;
//! 3. no part of it, as the filesystem resolves it, is a `.git` folder;
//! 4. a file already there is a plain file without a run bit: a hook or a script is never replaced;
//!
//! and a file is written whole under a fresh name created beside it, then renamed over its name, so
//! a link planted at that name is replaced, never written through, and a half-written file is never
//! seen. Reads have their own rule ([`crate::plan_file::confine`]); this is the one for writes.

use std::path::{Component, Path, PathBuf};

/// Where bf may write: folders it was given, each as given (absolute, cleaned) and canonical.
#[derive(Debug, Clone)]
pub struct WriteGate {
    places: Vec<(PathBuf, PathBuf)>,
}

/// A write the gate refuses: the path as bf would have written it, and why not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bf does not write {}: {why}", .path.display())]
pub struct Refused {
    pub path: PathBuf,
    pub why: String,
}

impl From<Refused> for std::io::Error {
    fn from(refused: Refused) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, refused.to_string())
    }
}

/// Who may read a file the gate writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// bf's own state (a saved plan holds sampled rows): the owner only.
    Owner,
    /// A notice, meant to be picked up by the next step of a job: everyone who can reach it.
    Everyone,
}

impl WriteGate {
    /// A gate letting bf write inside `places` (folders, which need not exist yet).
    pub fn within<P: AsRef<Path>>(places: impl IntoIterator<Item = P>) -> WriteGate {
        let places = places
            .into_iter()
            .filter_map(|place| {
                let given = absolute(place.as_ref())?;
                let canonical = resolved(&given)?;
                Some((given, canonical))
            })
            .collect();
        WriteGate { places }
    }

    /// Whether bf may make or write in the folder at `path` (as it will be written: cleaned,
    /// without following links): inside a place, no link on the way down to it or at it, no `.git`.
    pub fn check_folder(&self, path: &Path) -> Result<(), Refused> {
        self.walk(path, true)
    }

    /// Whether bf may write the file at `path`: its folder as [`Self::check_folder`], its name not
    /// `.git`, and no file that can be run there. A link at the name itself is no way through: the
    /// file is renamed over it, which replaces the link, never what it points at.
    pub fn check_file(&self, path: &Path) -> Result<(), Refused> {
        self.walk(path, false)?;
        if let Ok(meta) = path.symlink_metadata()
            && meta.is_file()
            && executable(&meta)
        {
            return Err(Refused {
                path: path.to_owned(),
                why: "a file that can be run is there (a hook, a script), and bf never replaces one".into(),
            });
        }
        Ok(())
    }

    /// Checks a local Delta table bf is about to write in: its folder, and its `_delta_log` where
    /// commits go.
    pub fn check_table(&self, table: &Path) -> Result<(), Refused> {
        self.check_folder(table)?;
        self.check_folder(&table.join("_delta_log"))
    }

    /// The walk from the place holding `path` down to it: every name checked for `.git`, every
    /// existing one but the last (unless `last_too`) for being a link.
    fn walk(&self, path: &Path, last_too: bool) -> Result<(), Refused> {
        let refused = |why: String| Refused { path: path.to_owned(), why };
        let Some(written) = absolute(path) else {
            return Err(refused("its path cannot be made absolute".into()));
        };
        let Some((place, canonical, below)) = self.place_of(&written) else {
            return Err(refused(format!("it is not inside {}", self.places_named())));
        };
        if in_git(canonical) {
            return Err(refused(format!("{} is inside a `.git` folder", place.display())));
        }
        let names: Vec<_> = below.components().collect();
        let mut walked = place.to_owned();
        for (i, name) in names.iter().enumerate() {
            walked.push(name);
            if name.as_os_str().eq_ignore_ascii_case(".git") {
                return Err(refused(
                    "it is inside a `.git` folder, where git keeps the hooks it runs".into(),
                ));
            }
            let last = i + 1 == names.len();
            let Ok(meta) = walked.symlink_metadata() else { continue };
            if meta.file_type().is_symlink() && (last_too || !last) {
                return Err(refused(format!(
                    "{} is a link, and bf never writes through one (it could lead anywhere, `.git/hooks` included)",
                    walked.display()
                )));
            }
        }
        Ok(())
    }

    /// Writes `bytes` as the file at `path`, through the gate: whole or not at all, under a fresh
    /// name created exclusively beside it and renamed over it, its folders made where missing.
    pub fn write_file(&self, path: &Path, bytes: &[u8], readers: Readers) -> std::io::Result<()> {
        self.check_file(path)?;
        let written = absolute(path).ok_or_else(|| std::io::Error::other("no absolute path"))?;
        let folder = written.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(folder)?;
        // The folders just made are bf's; checked again in case one was made between the looks.
        self.check_file(path)?;
        let mut builder = tempfile::Builder::new();
        builder.prefix(".bf-").suffix(".partial");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = match readers {
                Readers::Owner => 0o600,
                Readers::Everyone => 0o644,
            };
            builder.permissions(std::fs::Permissions::from_mode(mode));
        }
        #[cfg(not(unix))]
        let _ = readers;
        let mut partial = builder.tempfile_in(folder)?;
        std::io::Write::write_all(&mut partial, bytes)?;
        partial.persist(&written).map_err(|e| e.error)?;
        Ok(())
    }

    /// The place `written` is in (the innermost one), as spelt, its canonical form, and the path
    /// below it.
    fn place_of<'a>(&'a self, written: &'a Path) -> Option<(&'a Path, &'a Path, &'a Path)> {
        self.places
            .iter()
            .flat_map(|(given, canonical)| [(given, canonical), (canonical, canonical)])
            .filter_map(|(spelt, canonical)| {
                let below = written.strip_prefix(spelt).ok()?;
                Some((spelt.as_path(), canonical.as_path(), below))
            })
            .min_by_key(|(_, _, below)| below.components().count())
    }

    fn places_named(&self) -> String {
        match self.places.as_slice() {
            [] => "a folder bf may write in".to_owned(),
            places => {
                places.iter().map(|(given, _)| given.display().to_string()).collect::<Vec<_>>().join(" or ")
            }
        }
    }
}

/// `path` made absolute and cleaned of `.` and `..` as written, no link followed.
fn absolute(path: &Path) -> Option<PathBuf> {
    Some(path_clean::clean(std::path::absolute(path).ok()?))
}

/// Whether a canonical path is in a `.git` folder.
pub fn in_git(canonical: &Path) -> bool {
    canonical.components().any(|c| matches!(c, Component::Normal(name) if name.eq_ignore_ascii_case(".git")))
}

/// `path` as the filesystem resolves it: made absolute and cleaned, then its longest existing
/// part canonicalized (every symlink followed) with the rest, which does not exist yet, after it.
/// `None` when a part exists but cannot be followed (a link leading nowhere or in a loop): what
/// bf would create there is not knowable, so it counts as outside every place.
pub fn resolved(path: &Path) -> Option<PathBuf> {
    let absolute = absolute(path)?;
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return Some(missing.iter().rev().fold(canonical, |path, name| path.join(name)));
        }
        if existing.symlink_metadata().is_ok() {
            return None;
        }
        missing.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn checkout() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("plans")).unwrap();
        (dir, root)
    }

    #[test]
    fn a_write_through_a_link_into_git_hooks_is_refused_and_nothing_is_written() {
        let (_dir, root) = checkout();
        symlink(root.join(".git/hooks"), root.join("notices")).unwrap();
        let gate = WriteGate::within([&root]);
        let hook = root.join("plans/../notices/pre-commit");
        let refused = gate.write_file(&hook, b"$(touch pwned)", Readers::Everyone).unwrap_err();
        assert!(refused.to_string().contains("is a link"), "{refused}");
        assert!(!root.join(".git/hooks/pre-commit").exists());
        // Named directly, `.git` is refused too, whatever its case.
        for named in [".git/hooks/pre-commit", ".GIT/hooks/post-merge", ".git"] {
            let refused = gate.check_file(&root.join(named)).unwrap_err();
            assert!(refused.why.contains(".git"), "{refused}");
        }
    }

    #[test]
    fn a_file_that_can_be_run_is_never_replaced() {
        let (_dir, root) = checkout();
        let script = root.join("plans/deploy.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let gate = WriteGate::within([&root]);
        assert!(gate.write_file(&script, b"other", Readers::Everyone).is_err());
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "#!/bin/sh\n");
    }

    #[test]
    fn outside_every_place_is_refused_and_inside_is_written_whole() {
        let (dir, root) = checkout();
        let gate = WriteGate::within([root.join(".bf")]);
        assert!(gate.check_file(&dir.path().join("elsewhere.json")).is_err());
        assert!(gate.check_file(&root.join("plans/x.json")).is_err());
        let saved = root.join(".bf/plan.json");
        gate.write_file(&saved, b"{}", Readers::Owner).unwrap();
        assert_eq!(std::fs::read(&saved).unwrap(), b"{}");
        assert_eq!(std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777, 0o600);
        // A link planted at the name is replaced, never written through, even to a script.
        let victim = dir.path().join("victim.sh");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(&saved).unwrap();
        symlink(&victim, &saved).unwrap();
        gate.write_file(&saved, b"{}", Readers::Owner).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(&saved).unwrap().is_file());
        // A linked folder on the way is refused, and so is a table whose log is a link.
        symlink(dir.path(), root.join(".bf/out")).unwrap();
        assert!(gate.check_file(&root.join(".bf/out/x.json")).is_err());
        std::fs::create_dir_all(root.join(".bf/t")).unwrap();
        symlink(dir.path(), root.join(".bf/t/_delta_log")).unwrap();
        assert!(gate.check_table(&root.join(".bf/t")).unwrap_err().why.contains("is a link"));
    }

    #[test]
    fn a_link_above_the_place_is_the_operators() {
        let (dir, root) = checkout();
        let alias = dir.path().join("alias");
        symlink(&root, &alias).unwrap();
        let gate = WriteGate::within([&alias]);
        gate.write_file(&alias.join("plans/notice.md"), b"# done", Readers::Everyone).unwrap();
        assert!(root.join("plans/notice.md").is_file());
        let gate = WriteGate::within([&root]);
        assert!(
            gate.check_file(&alias.join("plans/other.md")).is_err(),
            "a path spelt through another link is not inside"
        );
    }

    /// What a random checkout may hold: folders, and links to folders inside it, to `.git/hooks`,
    /// to a folder outside it or to a file outside it.
    #[derive(Debug, Clone)]
    enum Planted {
        Folder,
        Link(usize),
    }

    const NAMES: [&str; 5] = ["a", "b", "notices", ".git", "x"];

    /// Every regular file under `dir` (links not followed) with its bytes.
    fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut found = std::collections::BTreeMap::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(folder) = stack.pop() {
            for entry in std::fs::read_dir(&folder).unwrap().flatten() {
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    stack.push(entry.path());
                } else if kind.is_file() {
                    found.insert(entry.path(), std::fs::read(entry.path()).unwrap());
                }
            }
        }
        found
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(96))]

        /// Whatever folders and links a checkout holds and whatever paths bf is asked to write,
        /// every file that is new or changed afterwards is inside the root, under no link and no
        /// `.git`; nothing outside the root changes.
        #[test]
        fn nothing_is_written_outside_the_allowed_place_whatever_links_the_checkout_holds(
            planted in proptest::collection::vec((0usize..8, 0usize..NAMES.len(), proptest::prop_oneof![
                proptest::strategy::Just(Planted::Folder),
                (0usize..8).prop_map(Planted::Link),
            ]), 0..8),
            writes in proptest::collection::vec(
                proptest::collection::vec(0usize..NAMES.len() + 2, 1..5), 1..5),
        ) {
            let (dir, root) = checkout();
            let outside = dir.path().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(dir.path().join("secret.txt"), "keep").unwrap();
            // Link targets: the folders made so far, `.git/hooks`, outside, a file outside.
            let mut folders = vec![root.clone(), root.join(".git/hooks")];
            for (parent, name, kind) in &planted {
                let path = folders[parent % folders.len()].join(NAMES[*name]);
                if std::fs::symlink_metadata(&path).is_ok() {
                    continue;
                }
                match kind {
                    Planted::Folder => {
                        if std::fs::create_dir(&path).is_ok() {
                            folders.push(path);
                        }
                    }
                    Planted::Link(to) => {
                        let targets = [folders.clone(), vec![outside.clone(), dir.path().join("secret.txt")]].concat();
                        let _ = symlink(&targets[to % targets.len()], &path);
                    }
                }
            }
            let before = files(dir.path());
            let gate = WriteGate::within([&root]);
            for (n, parts) in writes.iter().enumerate() {
                let mut path = root.clone();
                for part in parts {
                    match part.checked_sub(NAMES.len()) {
                        None => path.push(NAMES[*part]),
                        Some(0) => path.push(".."),
                        Some(_) => path.push(format!("f{n}.json")),
                    }
                }
                let _ = gate.write_file(&path, b"written", Readers::Everyone);
            }
            for (path, bytes) in files(dir.path()) {
                if before.get(&path) == Some(&bytes) {
                    continue;
                }
                let inside = path.strip_prefix(&root);
                proptest::prop_assert!(inside.is_ok(), "written outside the root: {}", path.display());
                let inside = inside.unwrap();
                proptest::prop_assert!(
                    !inside.components().any(|c| c.as_os_str().eq_ignore_ascii_case(".git")),
                    "written into .git: {}", path.display()
                );
                let mut prefix = root.clone();
                for part in inside.parent().into_iter().flat_map(Path::components) {
                    prefix.push(part);
                    let meta = std::fs::symlink_metadata(&prefix).unwrap();
                    proptest::prop_assert!(!meta.file_type().is_symlink(), "written through a link: {}", path.display());
                }
            }
        }
    }
}
