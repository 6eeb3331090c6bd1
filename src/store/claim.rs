//! Which workspace a pod name belongs to.
//!
//! A pod's state file (`pods/NAME.json`, see [`super::pointer`]) records its
//! workspace. A name is derived from the workspace, so two projects get two
//! pods; a name given with `--name` that was used for another workspace is
//! refused, since resuming that project's conversation over this project's
//! files is how work gets lost. Pods of earlier versions were all called
//! `default`: the first derived-name start in the workspace such a pod
//! served adopts its current session, so nothing a user had is left behind.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use super::pointer::{self, Pointer};
use super::PodLock;
use crate::protocol::{LogEntry, LogLine};

/// The name earlier versions gave every pod.
pub const LEGACY_NAME: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Bad usage: exit 2.
    #[error(
        "the pod name {name:?} belongs to the workspace {} (its state file {} says so), not to {}; \
         give this workspace another name with `--name NAME`, or run pod in {}",
        recorded.display(), state.display(), workspace.display(), recorded.display()
    )]
    OtherWorkspace {
        name: String,
        recorded: PathBuf,
        workspace: PathBuf,
        state: PathBuf,
    },
    /// Bad usage: exit 2.
    #[error(
        "session {session_id} belongs to the workspace {}, not to {}: its conversation is about \
         other files. Run pod in {} to resume it, or add --force to resume it over this workspace",
        theirs.display(), workspace.display(), theirs.display()
    )]
    SessionOfOtherWorkspace {
        session_id: uuid::Uuid,
        theirs: PathBuf,
        workspace: PathBuf,
    },
    #[error("{0}")]
    Io(#[from] anyhow::Error),
}

/// Checks that pod `name` may serve `workspace`, adopting the legacy
/// `default` pod's session when the name was `derived` and that pod served
/// this workspace. Called with the name's lock held.
pub fn claim(
    data_dir: &Path,
    name: &str,
    derived: bool,
    workspace: &Path,
) -> Result<(), ClaimError> {
    let pods_dir = data_dir.join("pods");
    let state = pointer::path(&pods_dir, name);
    if let Some(found) = pointer::read(&state)? {
        let recorded = found
            .workspace
            .clone()
            .or_else(|| session_workspace(data_dir, &found));
        return match recorded {
            Some(recorded) if recorded != workspace => Err(ClaimError::OtherWorkspace {
                name: name.to_owned(),
                recorded,
                workspace: workspace.to_owned(),
                state,
            }),
            _ => Ok(()),
        };
    }
    if derived && name != LEGACY_NAME {
        adopt_legacy(data_dir, &pods_dir, &state, workspace)?;
    }
    Ok(())
}

/// Moves the `default` pod's current session to `state` when that pod
/// served `workspace` and is not running.
fn adopt_legacy(
    data_dir: &Path,
    pods_dir: &Path,
    state: &Path,
    workspace: &Path,
) -> anyhow::Result<()> {
    let legacy = pointer::path(pods_dir, LEGACY_NAME);
    let Some(found) = pointer::read(&legacy)? else {
        return Ok(());
    };
    let recorded = found
        .workspace
        .clone()
        .or_else(|| session_workspace(data_dir, &found));
    if recorded.as_deref() != Some(workspace) {
        return Ok(());
    }
    // A `default` pod that still runs keeps its session.
    let Ok(_lock) = PodLock::acquire(data_dir, pods_dir, LEGACY_NAME) else {
        return Ok(());
    };
    let adopted = Pointer {
        session_id: found.session_id,
        workspace: Some(workspace.to_owned()),
        parent: None,
        removed: false,
    };
    pointer::write(state, adopted)?;
    std::fs::remove_file(&legacy)?;
    eprintln!(
        "pod: adopted session {} of the pod \"default\" of earlier versions, which served this \
         workspace",
        found.session_id
    );
    Ok(())
}

/// The workspace a pointer's session recorded in its `session_start`.
fn session_workspace(data_dir: &Path, found: &Pointer) -> Option<PathBuf> {
    let path = super::LogFile::path_for(&data_dir.join("sessions"), found.session_id);
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(file).read_line(&mut first).ok()?;
    match serde_json::from_str::<LogLine>(&first).ok()?.entry {
        LogEntry::SessionStart { workspace, .. } => workspace.map(PathBuf::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pointer(dir: &Path, name: &str, workspace: Option<&Path>) -> uuid::Uuid {
        let pods = dir.join("pods");
        std::fs::create_dir_all(&pods).unwrap();
        let session_id = uuid::Uuid::new_v4();
        let pointer = Pointer {
            session_id,
            workspace: workspace.map(Path::to_owned),
            parent: None,
            removed: false,
        };
        pointer::write(&pointer::path(&pods, name), pointer).unwrap();
        session_id
    }

    #[test]
    fn a_name_of_another_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_pointer(dir.path(), "calc", Some(Path::new("/a")));
        assert!(claim(dir.path(), "calc", false, Path::new("/a")).is_ok());
        let err = claim(dir.path(), "calc", false, Path::new("/b")).unwrap_err();
        assert!(matches!(err, ClaimError::OtherWorkspace { .. }));
        assert!(err.to_string().contains("--name NAME"), "{err}");
    }

    #[test]
    fn the_legacy_pod_of_this_workspace_is_adopted_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let pods = dir.path().join("pods");
        let id = write_pointer(dir.path(), LEGACY_NAME, Some(Path::new("/a")));
        claim(dir.path(), "b-123456", true, Path::new("/b")).unwrap();
        assert_eq!(
            pointer::read(&pointer::path(&pods, "b-123456")).unwrap(),
            None
        );
        claim(dir.path(), "a-123456", false, Path::new("/a")).unwrap();
        assert_eq!(
            pointer::read(&pointer::path(&pods, "a-123456")).unwrap(),
            None,
            "a name given is not a derived one"
        );
        claim(dir.path(), "a-123456", true, Path::new("/a")).unwrap();
        let adopted = pointer::read(&pointer::path(&pods, "a-123456"))
            .unwrap()
            .unwrap();
        assert_eq!(adopted.session_id, id);
        assert_eq!(adopted.workspace.as_deref(), Some(Path::new("/a")));
        assert_eq!(
            pointer::read(&pointer::path(&pods, LEGACY_NAME)).unwrap(),
            None
        );
    }
}
