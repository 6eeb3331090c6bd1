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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub session_id: Uuid,
    /// The pod's workspace (absent in files of earlier versions): a name
    /// stays with its project, and another workspace under it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// A child pod's parent pod (absent for a top pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A child pod its parent removed (`remove_agent`): its log stays, but
    /// the parent no longer starts it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
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

/// Replaces the pointer atomically. The temporary file has a name of its
/// own (a pod holds its name's lock, but a crash can leave a temporary file
/// behind, and two writers must never share one), is created `0600`, and is
/// removed if anything fails before the rename.
pub fn write(path: &Path, pointer: Pointer) -> std::io::Result<()> {
    let staged = stage(path, pointer)?;
    staged.sync()?;
    staged.publish()?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// A pointer written under its temporary name, not yet in place:
/// [`Staged::sync`] makes it durable, [`Staged::publish`] then renames it,
/// and the caller syncs the directory. Split so that a caller writing
/// several files syncs them one after the other once all are written —
/// the first sync then commits them all, and the others find little left
/// to do. Dropped unpublished, the temporary file is removed.
pub struct Staged {
    file: std::fs::File,
    tmp: PathBuf,
    path: PathBuf,
    published: bool,
}

/// Writes `pointer` for `path` under a temporary name, not yet synced.
pub fn stage(path: &Path, pointer: Pointer) -> std::io::Result<Staged> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", Uuid::new_v4()));
    let file = crate::private::file_options()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let mut staged = Staged {
        file,
        tmp,
        path: path.to_owned(),
        published: false,
    };
    staged.file.write_all(&serde_json::to_vec(&pointer)?)?;
    Ok(staged)
}

impl Staged {
    /// Makes the temporary file durable (fsync).
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_all()
    }

    /// Renames the synced pointer into place (durable once the caller
    /// syncs the directory).
    pub fn publish(mut self) -> std::io::Result<()> {
        std::fs::rename(&self.tmp, &self.path)?;
        self.published = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_replace_the_pointer_privately_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let at = path(dir.path(), "p");
        for _ in 0..2 {
            let pointer = Pointer {
                session_id: Uuid::new_v4(),
                workspace: Some("/w".into()),
                parent: None,
                removed: false,
            };
            write(&at, pointer.clone()).unwrap();
            assert_eq!(read(&at).unwrap(), Some(pointer));
        }
        let mode = std::fs::metadata(&at).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
