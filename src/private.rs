//! Files and directories only the user may use: session logs hold
//! everything said to the model, and the socket directory decides who a
//! client talks to.
//!
//! Modes are set explicitly (`0700` directories, `0600` files) rather than
//! left to the umask, and a directory someone else could have prepared —
//! `/tmp/pod-$UID` is a name anyone can create first — is checked to be the
//! user's own before anything is put in it or read from it.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of a private directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a private file.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) as a private directory. An existing
/// `dir` is made private too when `tighten` (for directories that are the
/// pod's own, such as `sessions/`); a directory the user handed in is left
/// as it is.
pub fn create_dir(dir: &Path, tighten: bool) -> std::io::Result<()> {
    let existed = dir.is_dir();
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    if !existed || tighten {
        std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Options that create a file `0600` (the umask can only remove bits).
pub fn file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(FILE_MODE);
    options
}

/// Refuses a directory that is not the user's own or that others may write
/// to: whoever can write there can put their own socket in the pod's place.
pub fn check_own_dir(dir: &Path) -> anyhow::Result<()> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| anyhow::anyhow!("cannot inspect {}: {e}", dir.display()))?;
    let me = rustix::process::geteuid().as_raw();
    let fix = "remove it (no pod of yours is using it) or point XDG_RUNTIME_DIR or --socket at \
               a directory only you can write to";
    if meta.file_type().is_symlink() {
        anyhow::bail!(
            "the socket directory {} is a symbolic link, which someone else may control; {fix}",
            dir.display()
        );
    }
    if !meta.is_dir() {
        anyhow::bail!(
            "the socket directory {} is not a directory; {fix}",
            dir.display()
        );
    }
    if meta.uid() != me {
        anyhow::bail!(
            "the socket directory {} is owned by uid {}, not by you (uid {me}): someone else \
             may be waiting for your pod's clients there; {fix}",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        anyhow::bail!(
            "the socket directory {} can be written by other users (mode {:o}): they could \
             replace your pod's socket; make it private with `chmod 700 {}`, or {fix}",
            dir.display(),
            meta.mode() & 0o777,
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_others_can_write_is_refused_and_a_private_one_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let sockets = dir.path().join("pod");
        create_dir(&sockets, false).unwrap();
        check_own_dir(&sockets).unwrap();
        std::fs::set_permissions(&sockets, Permissions::from_mode(0o777)).unwrap();
        let err = check_own_dir(&sockets).unwrap_err().to_string();
        assert!(err.contains("written by other users"), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&sockets, &link).unwrap();
        assert!(check_own_dir(&link).is_err());
    }
}
