//! Making a batch of new files, and the directories that name them,
//! durable without `syncfs` and without paying one journal commit each.
//!
//! `syncfs` flushes every dirty page of the whole file system, so on a disk
//! shared with other writers (builds, other pods) it waits for their data
//! too. One `fsync` after another is exact but slow: on ext4 each forces its
//! own journal commit, a few milliseconds apiece, which is what made a
//! 100-file rewind cost a second. Syncs issued at the same time from
//! several threads are grouped by the file system into one commit, so the
//! batch is synced from a few threads at once; and each file's writeback
//! is started as soon as it is written ([`start_writeback`]), so the syncs
//! find most of their data already on its way, as git's
//! `core.fsyncMethod=batch` does.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// At most this many syncs run at once. Threads waiting on the disk cost
/// no CPU; beyond about this many the file system's grouping gains little.
const PARALLEL: usize = 16;

/// Starts writing `file`'s dirty pages to disk without waiting for them
/// (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`). Only a hint that
/// makes the later sync shorter: it guarantees nothing, so errors are
/// ignored and other systems do nothing.
pub fn start_writeback(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the whole call (borrowed from
        // `file`), and the call only reads its arguments.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// `fdatasync`s every file, opened by path (the contents and what is
/// needed to read them back; the names are made durable by [`sync_dirs`]
/// after the renames), several at once. The first error is returned,
/// after every sync ended.
pub fn sync_files(paths: &[PathBuf]) -> std::io::Result<()> {
    each(paths, |path| File::open(path)?.sync_data())
        .into_iter()
        .collect()
}

/// `fdatasync`s every open file, several at once; each file's result, in
/// order.
pub fn sync_open_files(files: &[&File]) -> Vec<std::io::Result<()>> {
    each(files, |file| file.sync_data())
}

/// `fsync`s every directory (so the entries renamed or removed in them
/// survive a crash), several at once. The first error is returned, after
/// every sync ended.
pub fn sync_dirs(dirs: &[PathBuf]) -> std::io::Result<()> {
    each(dirs, |dir| File::open(dir)?.sync_all())
        .into_iter()
        .collect()
}

/// Runs `f` on every item from up to [`PARALLEL`] threads and returns each
/// result, in order. A single item runs on the caller's thread.
fn each<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> std::io::Result<()> + Sync,
) -> Vec<std::io::Result<()>> {
    if items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<std::io::Result<()>>>> =
        Mutex::new(items.iter().map(|_| None).collect());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else {
            return;
        };
        let result = f(item);
        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
    };
    std::thread::scope(|scope| {
        for _ in 1..items.len().min(PARALLEL) {
            // A thread that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        work();
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(std::io::Error::other("not synced"))))
        .collect()
}
