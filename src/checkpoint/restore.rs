//! Putting paths back to their state in a checkpoint.
//!
//! Every path is resolved beneath the workspace one component at a time
//! without following a symlink, each directory opened from the one before
//! (`O_NOFOLLOW | O_DIRECTORY`), and every step after that — looking,
//! creating, writing, renaming, linking, deleting — is an `*at` call on the
//! directory's descriptor, never a path. The pod is not sandboxed, while a
//! tool's daemon may swap a workspace directory for a symlink at any moment
//! (`renameat2(RENAME_EXCHANGE)`): a descriptor keeps every write in the
//! directory that was checked, so nothing is ever written where a link
//! points. A path whose parent is a symlink or not a directory is not
//! restored, nor one whose directory was moved or replaced before its file
//! was put in place. A file is written to a new temporary file
//! beside it, synced (a few dozen together, see [`restore`]), and renamed
//! over the path, so a hard-linked or open
//! file is replaced, never written through, and a crash leaves either the
//! old or the new content, never a torn file. A symlink is recreated as a
//! symlink; a deletion removes only the link or file itself, never its
//! target, and a directory only when it is left empty.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{
    fstat, linkat, mkdirat, openat, renameat, statat, symlinkat, unlinkat, AtFlags, FileType, Mode,
    OFlags,
};
use rustix::io::Errno;

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
/// unless `named` (then it is `tmp` in `dir`, beside `name`).
struct Written {
    file: std::fs::File,
    named: bool,
    /// The directory it goes in, as opened when the path was walked.
    dir: OwnedFd,
    tmp: String,
    name: String,
    /// `dir`'s path, for the final sync.
    dir_path: PathBuf,
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

    /// Syncs the waiting files together, then renames each over its path
    /// — in the directory walked to before, and only if the path still
    /// leads to it.
    fn place(&mut self, root: BorrowedFd<'_>, waiting: &mut Vec<Waiting>, paths: &[String]) {
        let files: Vec<&std::fs::File> = waiting.iter().map(|w| &w.written.file).collect();
        let synced = sync::sync_open_files(&files);
        drop(files);
        for (Waiting { index, written: w }, synced) in waiting.drain(..).zip(synced) {
            let named = w.named;
            let placed = synced
                .map_err(|e| format!("cannot write it: {e}"))
                .and_then(|()| still_there(root, &paths[index], &w.dir))
                .and_then(|()| {
                    if named {
                        return Ok(());
                    }
                    name_unnamed(&w.file, w.dir.as_fd(), &w.tmp)
                        .map_err(|e| format!("cannot name it: {e}"))
                })
                .and_then(|()| {
                    renameat(
                        w.dir.as_fd(),
                        w.tmp.as_str(),
                        w.dir.as_fd(),
                        w.name.as_str(),
                    )
                    .map_err(|e| format!("cannot put it in place: {e}"))
                });
            match placed {
                Ok(()) => self.done(index, &paths[index], w.action, w.dir_path),
                Err(why) => {
                    let _ = unlinkat(w.dir.as_fd(), w.tmp.as_str(), AtFlags::empty());
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
    let root = match open_root(store.root()) {
        Ok(root) => root,
        Err(e) => {
            for (index, path) in paths.iter().enumerate() {
                progress.refused(index, path, format!("cannot open the workspace: {e}"));
            }
            return Outcome {
                restored: Vec::new(),
                not_restored: progress.not_restored.into_iter().map(|(_, r)| r).collect(),
            };
        }
    };
    let mut waiting: Vec<Waiting> = Vec::new();
    let mut deleted: Vec<&str> = Vec::new();
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
        match restore_one(store, root.as_fd(), target.files.get(path), path) {
            Ok(Step::Nothing) => {}
            Ok(Step::Deleted(dir)) => {
                deleted.push(path);
                progress.done(index, path, RestoreAction::Deleted, dir);
            }
            Ok(Step::Placed(action, dir)) => progress.done(index, path, action, dir),
            Ok(Step::Written(written)) => {
                waiting.push(Waiting { index, written });
                if waiting.len() >= WINDOW {
                    progress.place(root.as_fd(), &mut waiting, paths);
                }
            }
            Err(why) => progress.refused(index, path, why),
        }
    }
    progress.place(root.as_fd(), &mut waiting, paths);
    // Only now, with every file in place: a directory a deletion emptied
    // may be about to receive a file still waiting for its sync (a turn
    // that replaced a directory's last file with another).
    for path in deleted {
        let components: Vec<&str> = path.split('/').collect();
        let parents = &components[..components.len().saturating_sub(1)];
        if let Ok(Some(chain)) = walk(root.as_fd(), parents, false) {
            remove_empty_parents(root.as_fd(), parents, &chain);
        }
    }
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

/// The workspace root, opened once per restore: every path is walked from
/// this descriptor.
fn open_root(root: &Path) -> Result<OwnedFd, Errno> {
    openat(
        rustix::fs::CWD,
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory `name` in `at`, following no symlink.
fn open_dir(at: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, Errno> {
    openat(
        at,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Why `name` in `at` could not be opened as a directory, in words.
fn not_a_dir(at: BorrowedFd<'_>, name: &str, shown: &str, e: Errno) -> String {
    match statat(at, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            format!("its parent {shown} is now a symlink")
        }
        Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::Directory => {
            format!("its parent {shown} is not a directory")
        }
        _ => format!("cannot look at {shown}: {e}"),
    }
}

/// The directories on the way to `path`'s last component, each opened
/// from the one before (the first from `root`), following no symlink; a
/// missing one is created when `create`, else `Ok(None)`.
fn walk(
    root: BorrowedFd<'_>,
    parents: &[&str],
    create: bool,
) -> Result<Option<Vec<OwnedFd>>, String> {
    let mut chain: Vec<OwnedFd> = Vec::with_capacity(parents.len());
    for (depth, part) in parents.iter().enumerate() {
        let shown = parents[..=depth].join("/");
        let at = chain.last().map_or(root, |d| d.as_fd());
        let fd = match open_dir(at, part) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if !create => return Ok(None),
            Err(Errno::NOENT) => {
                match mkdirat(at, *part, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(format!("cannot create {shown}: {e}")),
                }
                open_dir(at, part).map_err(|e| not_a_dir(at, part, &shown, e))?
            }
            Err(e) => return Err(not_a_dir(at, part, &shown, e)),
        };
        chain.push(fd);
    }
    Ok(Some(chain))
}

/// Whether `path`'s parent directory is still `dir`: a tool may have moved
/// it away, or swapped a symlink in for it, since it was walked. The write
/// itself stayed in `dir` either way; this keeps a moved directory's file
/// from being reported as restored at `path`.
fn still_there(root: BorrowedFd<'_>, path: &str, dir: &OwnedFd) -> Result<(), String> {
    let parents: Vec<&str> = path.split('/').collect();
    let parents = &parents[..parents.len().saturating_sub(1)];
    let moved = || "its directory was moved or replaced while it was restored".to_owned();
    let now = match walk(root, parents, false)? {
        Some(chain) => match chain.last() {
            Some(last) => fstat(last),
            None => fstat(root),
        },
        None => return Err(moved()),
    };
    let (now, then) = (
        now.map_err(|e| format!("cannot look at its directory: {e}"))?,
        fstat(dir).map_err(|e| format!("cannot look at its directory: {e}"))?,
    );
    if (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino) {
        Ok(())
    } else {
        Err(moved())
    }
}

/// Restores one path, but a file's new content is left beside it, not yet
/// synced nor renamed (see [`Step::Written`]).
fn restore_one(
    store: &Checkpoints,
    root_fd: BorrowedFd<'_>,
    node: Option<&Node>,
    path: &str,
) -> Result<Step, String> {
    let root = store.root();
    let components: Vec<&str> = path.split('/').collect();
    if components
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err("not a plain workspace path".into());
    }
    let (name, parents) = components.split_last().ok_or("empty path")?;
    let Some(chain) = walk(root_fd, parents, node.is_some())? else {
        return Ok(Step::Nothing);
    };
    #[cfg(test)]
    tests::after_walk(path);
    let dir_path = parents.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    let dir = chain.last().map_or(root_fd, |d| d.as_fd());
    let existing = match statat(dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            return Err("it is a directory now".into())
        }
        Ok(_) => true,
        Err(Errno::NOENT) => false,
        Err(e) => return Err(format!("cannot look at it: {e}")),
    };
    let Some(node) = node else {
        if !existing {
            return Ok(Step::Nothing);
        }
        unlinkat(dir, *name, AtFlags::empty()).map_err(|e| format!("cannot delete it: {e}"))?;
        return Ok(Step::Deleted(dir_path));
    };
    let tmp = format!(".pod-restore-{}", uuid::Uuid::new_v4().simple());
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
            symlinkat(target.as_str(), dir, tmp.as_str())
                .map_err(|e| format!("cannot create the link: {e}"))?;
            if let Err(e) = renameat(dir, tmp.as_str(), dir, *name) {
                let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
                return Err(format!("cannot put it in place: {e}"));
            }
            return Ok(Step::Placed(action, dir_path));
        }
        Node::File { exec, .. } => (node, *exec),
    };
    let bytes = store
        .content(target)
        .map_err(|e| format!("its content is no longer stored ({e})"))?;
    let mode = if exec { 0o755 } else { 0o644 };
    let (mut file, named) = match open_unnamed(dir, mode) {
        Some(file) => (file, false),
        None => {
            let fd = openat(
                dir,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )
            .map_err(|e| format!("cannot write beside it: {e}"))?;
            (std::fs::File::from(fd), true)
        }
    };
    let written = file
        .write_all(&bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)));
    if let Err(e) = written {
        if named {
            let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
        }
        return Err(format!("cannot write it: {e}"));
    }
    sync::start_writeback(&file);
    let dir = match chain.into_iter().last() {
        Some(fd) => fd,
        None => rustix::io::dup(root_fd).map_err(|e| format!("cannot hold its directory: {e}"))?,
    };
    Ok(Step::Written(Written {
        file,
        named,
        dir,
        tmp,
        name: (*name).to_owned(),
        dir_path,
        action,
    }))
}

/// A new file in `dir` that has no name yet (`O_TMPFILE`): one a `kill -9`
/// leaves behind vanishes with the process instead of littering the
/// workspace. `None` where the file system or `/proc` cannot do it (the
/// caller then writes a named temporary).
fn open_unnamed(dir: BorrowedFd<'_>, mode: u32) -> Option<std::fs::File> {
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )
    .ok()
    .map(std::fs::File::from)
}

/// Gives a file from [`open_unnamed`] the name `tmp` in `dir` (just before
/// it is renamed over its path).
fn name_unnamed(file: &std::fs::File, dir: BorrowedFd<'_>, tmp: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    linkat(
        rustix::fs::CWD,
        proc.as_str(),
        dir,
        tmp,
        AtFlags::SYMLINK_FOLLOW,
    )
    .map_err(std::io::Error::from)
}

/// Removes the directories a deletion left empty, up to the root, each
/// from the descriptor of its parent as walked; the first one still
/// holding anything stops it.
fn remove_empty_parents(root: BorrowedFd<'_>, parents: &[&str], chain: &[OwnedFd]) {
    for depth in (0..parents.len()).rev() {
        let at = if depth == 0 {
            root
        } else {
            chain[depth - 1].as_fd()
        };
        if unlinkat(at, parents[depth], AtFlags::REMOVEDIR).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    type Hook = Box<dyn Fn(&str)>;

    thread_local! {
        static AFTER_WALK: RefCell<Option<Hook>> = RefCell::new(None);
    }

    /// Called between walking a path's directories and writing it: where
    /// a test does what a tool's daemon may do at any moment.
    pub(super) fn after_walk(path: &str) {
        AFTER_WALK.with(|hook| {
            if let Some(hook) = &*hook.borrow() {
                hook(path);
            }
        });
    }

    /// Issue 35 item 5: a daemon swaps the directory being restored for a
    /// symlink to a directory outside (`renameat2(RENAME_EXCHANGE)`) after
    /// the walk checked it: nothing is written where the link points, and
    /// the path is reported not restored.
    #[test]
    fn a_directory_swapped_for_a_symlink_mid_restore_gets_nothing_written_through_it() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/notes.txt"), "as it was\n").unwrap();
        let store = Checkpoints::open(data.path(), &root, 1 << 20, 1 << 30).unwrap();
        let target = store.take().unwrap();
        std::fs::write(root.join("sub/notes.txt"), "changed\n").unwrap();
        let now = store.take().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        let swapped = root.clone();
        AFTER_WALK.with(|hook| {
            *hook.borrow_mut() = Some(Box::new(move |_| {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    swapped.join("sub"),
                    rustix::fs::CWD,
                    swapped.join("link"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }))
        });
        let outcome = restore(
            &store,
            &target.manifest,
            &now.manifest,
            &["sub/notes.txt".to_owned()],
        );
        AFTER_WALK.with(|hook| *hook.borrow_mut() = None);
        let written_outside: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(written_outside.is_empty(), "{written_outside:?}");
        assert!(outcome.restored.is_empty(), "{:?}", outcome.restored);
        let [refused] = outcome.not_restored.as_slice() else {
            panic!("{:?}", outcome.not_restored)
        };
        assert_eq!(refused.path, "sub/notes.txt");
        assert_eq!(refused.reason, "its parent sub is now a symlink");
        // The directory, now at `link`, keeps its file and no leftover.
        let left: Vec<_> = std::fs::read_dir(root.join("link"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["notes.txt"]);
    }

    /// Found by the re-try of issue 35 item 5: undoing a turn that deleted
    /// a directory's last file and wrote another there deleted the new
    /// file, removed the emptied directory, and then could not put the old
    /// file back ("its directory was moved or replaced").
    #[test]
    fn a_directory_emptied_by_a_deletion_still_takes_the_file_restored_into_it() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/a"), "a\n").unwrap();
        let store = Checkpoints::open(data.path(), &root, 1 << 20, 1 << 30).unwrap();
        let target = store.take().unwrap();
        std::fs::remove_file(root.join("d/a")).unwrap();
        std::fs::write(root.join("d/b"), "n\n").unwrap();
        let now = store.take().unwrap();
        let outcome = restore(
            &store,
            &target.manifest,
            &now.manifest,
            &["d/a".to_owned(), "d/b".to_owned()],
        );
        assert!(
            outcome.not_restored.is_empty(),
            "{:?}",
            outcome.not_restored
        );
        assert_eq!(std::fs::read_to_string(root.join("d/a")).unwrap(), "a\n");
        assert!(!root.join("d/b").exists());
        // A deletion that does leave its directory empty still removes it.
        let outcome = restore(&store, &now.manifest, &target.manifest, &["d/a".to_owned()]);
        assert!(
            outcome.not_restored.is_empty(),
            "{:?}",
            outcome.not_restored
        );
        assert!(!root.join("d").exists());
    }

    #[test]
    fn a_parent_that_is_a_symlink_is_refused_and_a_deletion_leaves_its_target() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a"), "a\n").unwrap();
        let store = Checkpoints::open(data.path(), &root, 1 << 20, 1 << 30).unwrap();
        let target = store.take().unwrap();
        std::fs::remove_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("sub")).unwrap();
        std::fs::write(outside.path().join("a"), "theirs\n").unwrap();
        let now = store.take().unwrap();
        let outcome = restore(
            &store,
            &target.manifest,
            &now.manifest,
            &["sub/a".to_owned()],
        );
        let [refused] = outcome.not_restored.as_slice() else {
            panic!("{:?}", outcome.not_restored)
        };
        assert_eq!(refused.reason, "its parent sub is now a symlink");
        assert_eq!(
            std::fs::read_to_string(outside.path().join("a")).unwrap(),
            "theirs\n"
        );
    }
}
