//! Opening a path relative to a directory fd so that the kernel, not a
//! check made earlier, keeps the open inside that directory.
//!
//! The paths given here are the canonical, workspace-relative form
//! [`super::Workspace::resolve`] produced: plain names, no `..`, no
//! symlinks. So any symlink met while opening was swapped in after the
//! check, and the open fails instead of following it. Where the kernel has
//! `openat2` (Linux 5.6) one call does it (`RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`); elsewhere each component is opened in turn with
//! `O_NOFOLLOW`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{fstat, mkdirat, openat, openat2, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Set once `openat2` turned out to be missing (old kernel, or a seccomp
/// filter that does not know it), so the fallback is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens `rel` beneath `root` with `flags` (`O_CLOEXEC` is always added),
/// following no symlink and leaving `root` by no route.
pub fn open(root: BorrowedFd<'_>, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match openat2(root, rel, flags | OFlags::CLOEXEC, mode, resolve) {
            Err(Errno::NOSYS) | Err(Errno::PERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
            result => return result,
        }
    }
    open_by_components(root, rel, flags, mode)
}

/// The fallback: every directory on the way is opened `O_PATH | O_DIRECTORY
/// | O_NOFOLLOW` from the one before, so a symlink anywhere fails the open.
pub fn open_by_components(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let names = names(rel)?;
    let Some((last, dirs)) = names.split_last() else {
        return openat(root, ".", flags | OFlags::CLOEXEC, mode);
    };
    let mut dir: Option<OwnedFd> = None;
    for name in dirs {
        let parent = dir.as_ref().map_or(root, |d| d.as_fd());
        dir = Some(openat(
            parent,
            *name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?);
    }
    let parent = dir.as_ref().map_or(root, |d| d.as_fd());
    let fd = openat(
        parent,
        *last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )?;
    // `O_PATH | O_NOFOLLOW` opens a symlink itself rather than failing.
    if flags.contains(OFlags::PATH)
        && FileType::from_raw_mode(fstat(&fd)?.st_mode) == FileType::Symlink
    {
        return Err(Errno::LOOP);
    }
    Ok(fd)
}

/// Creates the directories of `rel` that do not exist yet, each one inside
/// a parent opened by [`open`], so none is created outside `root`.
pub fn create_dirs(root: BorrowedFd<'_>, rel: &Path) -> Result<(), Errno> {
    let names = names(rel)?;
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY;
    let mut prefix = std::path::PathBuf::new();
    let mut parent: Option<OwnedFd> = None;
    for name in names {
        prefix.push(name);
        let fd = match open(root, &prefix, dir_flags, Mode::empty()) {
            Err(Errno::NOENT) => {
                let at = parent.as_ref().map_or(root, |d| d.as_fd());
                match mkdirat(at, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e),
                }
                open(root, &prefix, dir_flags, Mode::empty())?
            }
            result => result?,
        };
        parent = Some(fd);
    }
    Ok(())
}

/// The plain names of a canonical relative path; anything else (`..`, a
/// root) cannot come from `resolve` and is refused as leaving the root.
fn names(rel: &Path) -> Result<Vec<&OsStr>, Errno> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(Errno::XDEV),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> Result<OwnedFd, Errno>;

    fn both() -> [(&'static str, Opener); 2] {
        [("openat2", open), ("components", open_by_components)]
    }

    fn root() -> (tempfile::TempDir, OwnedFd) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), "x").unwrap();
        symlink("/etc", dir.path().join("etc")).unwrap();
        symlink("sub", dir.path().join("alias")).unwrap();
        symlink("f", dir.path().join("sub/f-link")).unwrap();
        let fd = openat(
            rustix::fs::CWD,
            dir.path(),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        (dir, fd)
    }

    #[test]
    fn plain_paths_open_with_both_methods() {
        let (_d, fd) = root();
        for (how, opener) in both() {
            for rel in ["sub/f", "sub", ".", "./sub/./f"] {
                assert!(
                    opener(fd.as_fd(), Path::new(rel), OFlags::RDONLY, Mode::empty()).is_ok(),
                    "{how} {rel}"
                );
            }
        }
    }

    #[test]
    fn no_symlink_is_followed_and_nothing_escapes() {
        let (_d, fd) = root();
        for (how, opener) in both() {
            for rel in [
                "etc/passwd",
                "etc",
                "alias/f",
                "sub/f-link",
                "../x",
                "/etc/passwd",
            ] {
                for flags in [OFlags::RDONLY, OFlags::PATH] {
                    let result = opener(fd.as_fd(), Path::new(rel), flags, Mode::empty());
                    assert!(result.is_err(), "{how} {rel} {flags:?} opened");
                }
            }
        }
    }

    #[test]
    fn create_dirs_makes_missing_parents_but_not_through_symlinks() {
        let (d, fd) = root();
        create_dirs(fd.as_fd(), Path::new("sub/new/deeper")).unwrap();
        assert!(d.path().join("sub/new/deeper").is_dir());
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), d.path().join("out")).unwrap();
        assert!(create_dirs(fd.as_fd(), Path::new("out/x")).is_err());
        assert!(!outside.path().join("x").exists());
    }
}
