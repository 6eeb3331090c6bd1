//! A new child pod's session written and synced under hidden names — its
//! log (`session_start` durable) and its state file — and put in place
//! later. `spawn_agent` stages it while the parent's `agent_started` is
//! being synced, so that the syncs overlap instead of following each other,
//! and the launch publishes it once that entry is durable, then syncs the
//! two directories. A crash before the renames leaves no child, only hidden
//! files no listing reads; so, as the contract says, no child log can be
//! found whose `agent_started` was not committed first.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use uuid::Uuid;

use super::log_file::sync_dir;
use super::{pointer, LogFile, Recovered};

pub struct StagedSession {
    /// The log, open and locked under its hidden name.
    pub file: LogFile,
    /// Its real name.
    pub path: PathBuf,
    pub session_id: Uuid,
    /// What the log holds: its `session_start`.
    pub recovered: Recovered,
    /// The state file, synced under its temporary name.
    pub pointer: pointer::Staged,
}

impl StagedSession {
    /// Puts the log (in `sessions_dir`) and the state file (in `pods_dir`)
    /// in place, durably.
    pub fn publish(
        mut self,
        sessions_dir: &Path,
        pods_dir: &Path,
    ) -> anyhow::Result<(LogFile, Uuid, Recovered)> {
        let path = self.path.clone();
        self.file
            .publish(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        self.pointer
            .publish()
            .with_context(|| format!("cannot write the state file of {}", path.display()))?;
        // One after the other: on a journalling file system the first
        // commits both renames, and the second finds little left to do.
        for dir in [sessions_dir, pods_dir] {
            sync_dir(dir).with_context(|| format!("cannot sync {}", dir.display()))?;
        }
        Ok((self.file, self.session_id, self.recovered))
    }

    /// Removes what was staged, for a spawn that did not happen.
    pub fn discard(self) {
        self.file.discard();
    }
}
