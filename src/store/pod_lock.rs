//! One pod per name and data directory: `<data-dir>/pods/<name>.lock`.
//!
//! A pod takes this lock before it creates anything — a session, the
//! pointer, the socket — and holds it until it exits (the kernel drops it
//! with the process, even after `kill -9`). Two pods started at once with one
//! name therefore never both create a session, race on the pointer, or
//! remove each other's socket: the second is refused before it touches
//! anything.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The held lock; released when dropped or when the process ends.
pub struct PodLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum PodLockError {
    #[error(
        "a pod named {name:?} is already running with the data directory {} (it holds {}); \
         stop it with `pod stop` in its workspace (or `pod stop --name {name}` anywhere), or choose another --name",
        data_dir.display(),
        path.display()
    )]
    Held {
        name: String,
        data_dir: PathBuf,
        path: PathBuf,
    },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl PodLock {
    pub fn path(pods_dir: &Path, name: &str) -> PathBuf {
        pods_dir.join(format!("{name}.lock"))
    }

    /// Takes the lock of pod `name`, or says which pod holds it.
    pub fn acquire(data_dir: &Path, pods_dir: &Path, name: &str) -> Result<PodLock, PodLockError> {
        let path = Self::path(pods_dir, name);
        let io = |source| PodLockError::Io {
            path: path.clone(),
            source,
        };
        let file = crate::private::file_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(PodLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(PodLockError::Held {
                name: name.to_owned(),
                data_dir: data_dir.to_owned(),
                path,
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(io(source)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = PodLock::acquire(dir.path(), dir.path(), "p").unwrap();
        let err = PodLock::acquire(dir.path(), dir.path(), "p").err().unwrap();
        assert!(err.to_string().contains("already running"), "{err}");
        assert!(PodLock::acquire(dir.path(), dir.path(), "other").is_ok());
        drop(first);
        assert!(PodLock::acquire(dir.path(), dir.path(), "p").is_ok());
    }
}
