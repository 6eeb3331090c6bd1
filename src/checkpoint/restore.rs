//! Putting paths back to their state in a checkpoint.
//!
//! Every path is resolved beneath the workspace one component at a time
//! without following a symlink: a path whose parent is now a symlink or not
//! a directory is not restored. A file is written to a new temporary file
//! beside it, synced (a few dozen together, see [`restore`]), and renamed
//! over the path, so a hard-linked or open
//! file is replaced, never written through, and a crash leaves either the
//! old or the new content, never a torn file. A symlink is recreated as a
//! symlink; a deletion removes only the link or file itself, never its
//! target, and a directory only when it is left empty.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::manifest::{Manifest, Node};
use super::{sync, Checkpoints};
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

/// At most this many restored files wait, written but not yet renamed over
/// their path, for one grouped sync: enough that a rewind of a hundred
/// files pays a few journal commits rather than a hundred. They wait
/// without a name (`O_TMPFILE`), so a `kill -9` meanwhile leaves nothing
/// in the workspace.
const WINDOW: usize = 32;

/// A file written beside its path, waiting for its sync and rename.
struct Waiting {
    /// Its place in the paths asked for (outcomes are reported in order).
    index: usize,
    written: Written,
}

/// A file's new content, still open, not yet synced; without a name
/// unless `named` (then it is `tmp`, beside the path `full`).
struct Written {
    file: std::fs::File,
    named: bool,
    tmp: PathBuf,
    full: PathBuf,
    dir: PathBuf,
    action: RestoreAction,
}

/// What a restore has done so far, in the order of the paths asked for.
#[derive(Default)]
struct Progress {
    restored: Vec<(usize, RestoredFile)>,
    not_restored: Vec<(usize, NotRestored)>,
    touched_dirs: Vec<PathBuf>,
}

impl Progress {
    fn done(&mut self, index: usize, path: &str, action: RestoreAction, dir: PathBuf) {
        self.touched_dirs.push(dir);
        self.restored.push((
            index,
            RestoredFile {
                path: path.to_owned(),
                action,
            },
        ));
        if self.restored.len() == 1 {
            super::crash_point("restore_written");
        }
    }

    fn refused(&mut self, index: usize, path: &str, reason: String) {
        self.not_restored.push((
            index,
            NotRestored {
                path: path.to_owned(),
                reason,
            },
        ));
    }

    /// Syncs the waiting files together, then renames each over its path.
    fn place(&mut self, waiting: &mut Vec<Waiting>, paths: &[String]) {
        let files: Vec<&std::fs::File> = waiting.iter().map(|w| &w.written.file).collect();
        let synced = sync::sync_open_files(&files);
        drop(files);
        for (Waiting { index, written: w }, synced) in waiting.drain(..).zip(synced) {
            let named = w.named;
            let placed = synced
                .map_err(|e| format!("cannot write it: {e}"))
                .and_then(|()| {
                    if named {
                        return Ok(());
                    }
                    name_unnamed(&w.file, &w.tmp).map_err(|e| format!("cannot name it: {e}"))
                })
                .and_then(|()| {
                    std::fs::rename(&w.tmp, &w.full)
                        .map_err(|e| format!("cannot put it in place: {e}"))
                });
            match placed {
                Ok(()) => self.done(index, &paths[index], w.action, w.dir),
                Err(why) => {
                    let _ = std::fs::remove_file(&w.tmp);
                    self.refused(index, &paths[index], why);
                }
            }
        }
    }
}

/// Restores each of `paths` to its state in `target` (absent there: the
/// path is deleted). `now` is the workspace as the checkpoint taken just
/// before described it; a path either skipped is left alone.
///
/// Paths are handled in order, each file's new content written to an
/// unnamed file in its directory; those are synced [`WINDOW`] at a time
/// from several threads (the file system groups the syncs into one journal
/// commit), then named and renamed over their paths in order, and the
/// directories touched are synced together at the end.
pub fn restore(
    store: &Checkpoints,
    target: &Manifest,
    now: &Manifest,
    paths: &[String],
) -> Outcome {
    let mut progress = Progress::default();
    let mut waiting: Vec<Waiting> = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        if target.skips(path) || now.skips(path) {
            progress.refused(
                index,
                path,
                "a checkpoint skipped it (over --checkpoint-max-file-bytes, or not a regular \
                 file or symlink)"
                    .into(),
            );
            continue;
        }
        match restore_one(store, target.files.get(path), path) {
            Ok(Step::Nothing) => {}
            Ok(Step::Deleted(dir)) => progress.done(index, path, RestoreAction::Deleted, dir),
            Ok(Step::Placed(action, dir)) => progress.done(index, path, action, dir),
            Ok(Step::Written(written)) => {
                waiting.push(Waiting { index, written });
                if waiting.len() >= WINDOW {
                    progress.place(&mut waiting, paths);
                }
            }
            Err(why) => progress.refused(index, path, why),
        }
    }
    progress.place(&mut waiting, paths);
    let Progress {
        mut restored,
        mut not_restored,
        mut touched_dirs,
    } = progress;
    touched_dirs.sort();
    touched_dirs.dedup();
    // Best effort, as a rename's own durability is: the files are in place.
    let _ = sync::sync_dirs(&touched_dirs);
    restored.sort_by_key(|(i, _)| *i);
    not_restored.sort_by_key(|(i, _)| *i);
    Outcome {
        restored: restored.into_iter().map(|(_, r)| r).collect(),
        not_restored: not_restored.into_iter().map(|(_, r)| r).collect(),
    }
}

/// What [`restore_one`] did to one path.
enum Step {
    /// It already was as wanted (a deletion of what is not there).
    Nothing,
    /// It was deleted; the directory it was in.
    Deleted(PathBuf),
    /// A link, put in place; the directory it is in.
    Placed(RestoreAction, PathBuf),
    /// Its new content, waiting for its sync and rename.
    Written(Written),
}

/// Restores one path, but a file's new content is left beside it, not yet
/// synced nor renamed (see [`Step::Written`]).
fn restore_one(store: &Checkpoints, node: Option<&Node>, path: &str) -> Result<Step, String> {
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
                    return Ok(Step::Nothing);
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
            return Ok(Step::Nothing);
        }
        std::fs::remove_file(&full).map_err(|e| format!("cannot delete it: {e}"))?;
        remove_empty_parents(root, &dir);
        return Ok(Step::Deleted(dir));
    };
    let tmp = dir.join(format!(".pod-restore-{}", uuid::Uuid::new_v4().simple()));
    let action = if existing {
        RestoreAction::Written
    } else {
        RestoreAction::Created
    };
    let (target, exec) = match node {
        Node::Symlink { target } => {
            // A link's target is metadata, durable with its directory: it
            // is put in place at once, never left waiting under its
            // temporary name.
            std::os::unix::fs::symlink(target, &tmp)
                .map_err(|e| format!("cannot create the link: {e}"))?;
            if let Err(e) = std::fs::rename(&tmp, &full) {
                let _ = std::fs::remove_file(&tmp);
                return Err(format!("cannot put it in place: {e}"));
            }
            return Ok(Step::Placed(action, dir));
        }
        Node::File { exec, .. } => (node, *exec),
    };
    let bytes = store
        .content(target)
        .map_err(|e| format!("its content is no longer stored ({e})"))?;
    let mode = if exec { 0o755 } else { 0o644 };
    let (mut file, named) = match open_unnamed(&dir, mode) {
        Some(file) => (file, false),
        None => {
            let file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&tmp)
                .map_err(|e| format!("cannot write beside it: {e}"))?;
            (file, true)
        }
    };
    let written = file
        .write_all(&bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)));
    if let Err(e) = written {
        if named {
            let _ = std::fs::remove_file(&tmp);
        }
        return Err(format!("cannot write it: {e}"));
    }
    sync::start_writeback(&file);
    Ok(Step::Written(Written {
        file,
        named,
        tmp,
        full,
        dir,
        action,
    }))
}

/// A new file in `dir` that has no name yet (`O_TMPFILE`): one a `kill -9`
/// leaves behind vanishes with the process instead of littering the
/// workspace. `None` where the file system or `/proc` cannot do it (the
/// caller then writes a named temporary).
fn open_unnamed(dir: &Path, mode: u32) -> Option<std::fs::File> {
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    std::fs::File::options()
        .write(true)
        .mode(mode)
        .custom_flags(rustix::fs::OFlags::TMPFILE.bits() as i32)
        .open(dir)
        .ok()
}

/// Gives a file from [`open_unnamed`] the name `tmp` (just before it is
/// renamed over its path).
fn name_unnamed(file: &std::fs::File, tmp: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(
        rustix::fs::CWD,
        proc.as_str(),
        rustix::fs::CWD,
        tmp,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    )
    .map_err(std::io::Error::from)
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
