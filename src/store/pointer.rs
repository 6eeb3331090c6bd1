//! The pod's current-session pointer: `<data-dir>/pods/<name>.json`.
//!
//! It is replaced atomically (write a temporary file, fsync, rename, fsync
//! the directory), so after a crash it names either the old session or the
//! new one, never a torn file. Compaction moves it only once the new session's
//! log is durable, which is what makes a crash at any step recoverable.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::log_file::sync_dir;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub session_id: Uuid,
}

pub fn path(pods_dir: &Path, name: &str) -> PathBuf {
    pods_dir.join(format!("{name}.json"))
}

/// The current session, if the pod has one.
pub fn read(path: &Path) -> anyhow::Result<Option<Pointer>> {
    match std::fs::read(path) {
        Ok(data) => Ok(Some(serde_json::from_slice(&data).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a valid pod state file ({e}); delete it to start a new session",
                path.display()
            )
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

pub fn write(path: &Path, pointer: Pointer) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec(&pointer)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}
