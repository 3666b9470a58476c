//! The files bf keeps for itself — the saved plan, the list of rehearsals a state dir made, the
//! spooled lineage events — written whole or not at all, and never through a link: the folder they
//! are in is often a checkout, which a pull request fills.

use std::path::Path;

/// Notes a rehearsal table made from this state dir, for `bf clean`.
pub fn remember_rehearsal(state_dir: &Path, uri: &str) -> std::io::Result<()> {
    let known = remembered_rehearsals(state_dir);
    if known.iter().any(|u| u.as_str() == uri) {
        return Ok(());
    }
    let mut listed: String = known.iter().map(|u| format!("{u}\n")).collect();
    listed.push_str(&format!("{uri}\n"));
    // Written anew, never appended through whatever a checkout put at that name.
    replace_file(&state_dir.join("rehearsals"), listed.as_bytes())
}

/// The rehearsal tables made from this state dir.
pub fn remembered_rehearsals(state_dir: &Path) -> Vec<url::Url> {
    std::fs::read_to_string(state_dir.join("rehearsals"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| url::Url::parse(l.trim()).ok())
        .collect()
}

/// Refuses to write into the default state dir, `.bf`, where it is a link: a checkout could hold
/// one leading anywhere, and bf would keep its saved plan, its list of rehearsals and its spooled
/// events there. (A state dir the operator names, `--state-dir` / `BF_STATE_DIR`, is theirs.)
pub fn refuse_linked_state_dir(dir: &Path) -> std::io::Result<()> {
    let linked = dir.file_name().is_some_and(|name| name == ".bf")
        && std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.file_type().is_symlink());
    match linked {
        false => Ok(()),
        true => Err(std::io::Error::other(format!(
            "{} is a link, and bf keeps its state only in a folder of its own: remove the link, or name a \
             folder with --state-dir or BF_STATE_DIR",
            dir.display()
        ))),
    }
}

/// Writes `bytes` as the file at `path` in the state dir that holds it, through the write gate:
/// whole or not at all, never through a linked folder, never into `.git`; a link planted at the
/// name itself is replaced by the rename, never written through. The folder checked out in CI is
/// a pull request's to fill with links.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let state_dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    refuse_linked_state_dir(state_dir)?;
    crate::write_gate::WriteGate::within([state_dir]).write_file(
        path,
        bytes,
        crate::write_gate::Readers::Owner,
    )
}
