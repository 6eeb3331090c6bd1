//! Putting paths back to their state in a checkpoint.
//!
//! Every path is resolved beneath the workspace one component at a time
//! without following a symlink: a path whose parent is now a symlink or not
//! a directory is not restored. A file is written to a new temporary file
//! beside it, synced, and renamed over the path, so a hard-linked or open
//! file is replaced, never written through, and a crash leaves either the
//! old or the new content, never a torn file. A symlink is recreated as a
//! symlink; a deletion removes only the link or file itself, never its
//! target, and a directory only when it is left empty.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::manifest::{Manifest, Node};
use super::Checkpoints;
use crate::protocol::{NotRestored, RestoreAction, RestoredFile};

/// What a restore did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub restored: Vec<RestoredFile>,
    pub not_restored: Vec<NotRestored>,
}

/// Reads a file without following a symlink at its last component.
pub fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Restores each of `paths` to its state in `target` (absent there: the
/// path is deleted). `now` is the workspace as the checkpoint taken just
/// before described it; a path either skipped is left alone.
pub fn restore(
    store: &Checkpoints,
    target: &Manifest,
    now: &Manifest,
    paths: &[String],
) -> Outcome {
    let mut outcome = Outcome::default();
    let mut touched_dirs: Vec<PathBuf> = Vec::new();
    for path in paths {
        let refuse = |why: String| NotRestored {
            path: path.clone(),
            reason: why,
        };
        if target.skips(path) || now.skips(path) {
            outcome.not_restored.push(refuse(
                "a checkpoint skipped it (over --checkpoint-max-file-bytes, or not a regular \
                 file or symlink)"
                    .into(),
            ));
            continue;
        }
        match restore_one(store, target.files.get(path), path) {
            Ok(Some((action, dir))) => {
                touched_dirs.push(dir);
                outcome.restored.push(RestoredFile {
                    path: path.clone(),
                    action,
                });
                if outcome.restored.len() == 1 {
                    super::crash_point("restore_written");
                }
            }
            Ok(None) => {}
            Err(why) => outcome.not_restored.push(refuse(why)),
        }
    }
    touched_dirs.sort();
    touched_dirs.dedup();
    for dir in touched_dirs {
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
    }
    outcome
}

/// Restores one path; `None` when it already was as wanted (a deletion of
/// what is not there).
fn restore_one(
    store: &Checkpoints,
    node: Option<&Node>,
    path: &str,
) -> Result<Option<(RestoreAction, PathBuf)>, String> {
    let root = store.root();
    let components: Vec<&str> = path.split('/').collect();
    if components
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err("not a plain workspace path".into());
    }
    let (name, parents) = components.split_last().ok_or("empty path")?;
    let mut dir = root.to_path_buf();
    for part in parents {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!("its parent {} is now a symlink", rel(root, &dir)));
            }
            Ok(_) => return Err(format!("its parent {} is not a directory", rel(root, &dir))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if node.is_none() {
                    return Ok(None);
                }
                std::fs::create_dir(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", rel(root, &dir)))?;
            }
            Err(e) => return Err(format!("cannot look at {}: {e}", rel(root, &dir))),
        }
    }
    let full = dir.join(name);
    let existing = match std::fs::symlink_metadata(&full) {
        Ok(meta) if meta.is_dir() => return Err("it is a directory now".into()),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(format!("cannot look at it: {e}")),
    };
    let Some(node) = node else {
        if !existing {
            return Ok(None);
        }
        std::fs::remove_file(&full).map_err(|e| format!("cannot delete it: {e}"))?;
        remove_empty_parents(root, &dir);
        return Ok(Some((RestoreAction::Deleted, dir)));
    };
    let tmp = dir.join(format!(".pod-restore-{}", uuid::Uuid::new_v4().simple()));
    let placed = (|| -> Result<(), String> {
        match node {
            Node::Symlink { target } => std::os::unix::fs::symlink(target, &tmp)
                .map_err(|e| format!("cannot create the link: {e}"))?,
            Node::File { exec, .. } => {
                let bytes = store
                    .content(node)
                    .map_err(|e| format!("its content is no longer stored ({e})"))?;
                let mode = if *exec { 0o755 } else { 0o644 };
                let mut file = std::fs::File::options()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&tmp)
                    .map_err(|e| format!("cannot write beside it: {e}"))?;
                file.write_all(&bytes)
                    .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
                    .and_then(|()| file.sync_all())
                    .map_err(|e| format!("cannot write it: {e}"))?;
            }
        }
        std::fs::rename(&tmp, &full).map_err(|e| format!("cannot put it in place: {e}"))
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let action = if existing {
        RestoreAction::Written
    } else {
        RestoreAction::Created
    };
    Ok(Some((action, dir)))
}

/// Removes the directories a deletion left empty, up to the root; the
/// first one still holding anything stops it.
fn remove_empty_parents(root: &Path, dir: &Path) {
    let mut dir = dir.to_path_buf();
    while dir != root && dir.starts_with(root) {
        if std::fs::remove_dir(&dir).is_err() {
            return;
        }
        if !dir.pop() {
            return;
        }
    }
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
