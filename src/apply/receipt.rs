//! Which backfills a state dir applied, proven by the table rather than by the state dir.
//!
//! `bf rollback` without options undoes "the last backfill applied from the saved plan in this
//! folder". But the state dir is often a checkout's `.bf`, which a pull request can fill: a saved
//! plan planted there, naming another team's table and plan, would choose what an operator's
//! `bf rollback` undoes. So each state dir keeps a random key (`<state-dir>/key`, never printed or
//! sent), and every slice commit an apply makes from it records a receipt, the sha256 of that key
//! and the backfill's id. A saved plan then chooses only a backfill one of whose slice commits
//! carries this state dir's receipt; any other is undone only when named (`--backfill`). A
//! planted key does not help: a receipt in the log cannot be turned back into the key it came from.

use std::path::Path;

use crate::delta::ledger::Entry;

/// The file a state dir keeps its key in.
const KEY_FILE: &str = "key";

/// A state dir's key.
#[derive(Clone)]
pub struct StateKey(String);

/// Never printed: a `{:?}` of an apply must not show it.
impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(…)")
    }
}

impl StateKey {
    /// The key of `state_dir`, made (through the write gate, readable by its owner only) the first
    /// time it is asked for.
    pub fn of(state_dir: &Path) -> std::io::Result<StateKey> {
        if let Some(key) = StateKey::existing(state_dir) {
            return Ok(key);
        }
        std::fs::create_dir_all(state_dir)?;
        let key = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        crate::rehearse::own_files::replace_file(&state_dir.join(KEY_FILE), key.as_bytes())?;
        Ok(StateKey(key))
    }

    /// The key `state_dir` holds, if it holds one.
    pub fn existing(state_dir: &Path) -> Option<StateKey> {
        let key = std::fs::read_to_string(state_dir.join(KEY_FILE)).ok()?;
        (key.trim().len() >= 32).then(|| StateKey(key.trim().to_owned()))
    }

    /// The receipt a slice commit of `backfill_id` applied from this state dir records.
    pub fn receipt(&self, backfill_id: &str) -> String {
        crate::rehearse::plan::sha256_hex(format!("{}\n{backfill_id}", self.0).as_bytes())
    }

    /// Whether a slice commit of `backfill_id` among `entries` was applied from this state dir. Read
    /// from the keys as written, so that a commit whose other keys are malformed is still found
    /// here, and refused for what it is by the rollback.
    pub fn applied(&self, entries: &[Entry], backfill_id: &str) -> bool {
        let receipt = self.receipt(backfill_id);
        entries.iter().any(|e| {
            e.keys.backfill_id.as_deref() == Some(backfill_id)
                && e.keys.slice.is_some()
                && e.keys.receipt.as_deref() == Some(receipt.as_str())
        })
    }
}
