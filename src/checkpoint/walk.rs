//! Reading the workspace into a manifest: every path `git status` would not
//! ignore, never following a symlink, never opening what is not a regular
//! file, and re-reading only what changed since the last look.
//!
//! The stat cache is git's index trick: a file whose size, modification
//! and change times and inode are those recorded with its digest is not
//! read again. A file changed within the same clock tick as the look that
//! recorded it could keep those numbers, so entries younger than
//! [`RACY`] at the time of the look are never recorded (git calls them
//! "racily clean").

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::manifest::{Manifest, Node};
use crate::store::content::Digest;

/// How old a file's times must be for its digest to be cached.
const RACY: Duration = Duration::from_secs(2);

/// What the cache keeps about one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }

    /// Whether both times are older than `before` (ns since the epoch).
    fn settled(&self, before: i128) -> bool {
        self.mtime_ns < before && self.ctime_ns < before
    }
}

/// Path → (stat, digest) for the files of one workspace.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StatCache {
    entries: HashMap<String, (Stat, Digest)>,
}

/// The first bytes of a stored cache; a file without them (an older
/// format, a torn write) is ignored.
const MAGIC: &[u8] = b"pod stat cache 2\n";

impl StatCache {
    /// Reads the cache at `path`; a missing or unreadable one is empty (it
    /// only saves work).
    pub fn load(path: &Path) -> Self {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| Self::decode(&bytes))
            .unwrap_or_default()
    }

    /// Writes the cache (temporary file, rename). Not synced: a cache lost
    /// in a crash is rebuilt by reading the files again. Binary rather than
    /// JSON: it is rewritten after most checkpoints, and 10,000 entries of
    /// JSON took longer to write than the walk took.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, self.encode())?;
        std::fs::rename(&tmp, path)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.entries.len() * 112);
        out.extend_from_slice(MAGIC);
        for (path, (stat, digest)) in &self.entries {
            out.extend_from_slice(&(path.len() as u32).to_le_bytes());
            out.extend_from_slice(path.as_bytes());
            out.extend_from_slice(&stat.size.to_le_bytes());
            out.extend_from_slice(&stat.mtime_ns.to_le_bytes());
            out.extend_from_slice(&stat.ctime_ns.to_le_bytes());
            out.extend_from_slice(&stat.ino.to_le_bytes());
            out.extend_from_slice(digest.as_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut entries = HashMap::new();
        while !rest.is_empty() {
            let len = u32::from_le_bytes(take(&mut rest)?) as usize;
            let path = rest.get(..len)?;
            rest = &rest[len..];
            let path = std::str::from_utf8(path).ok()?.to_owned();
            let stat = Stat {
                size: u64::from_le_bytes(take(&mut rest)?),
                mtime_ns: i128::from_le_bytes(take(&mut rest)?),
                ctime_ns: i128::from_le_bytes(take(&mut rest)?),
                ino: u64::from_le_bytes(take(&mut rest)?),
            };
            let digest = Digest::from_bytes(take(&mut rest)?);
            entries.insert(path, (stat, digest));
        }
        Some(Self { entries })
    }
}

/// The next `N` bytes of `rest`, if there are that many.
fn take<const N: usize>(rest: &mut &[u8]) -> Option<[u8; N]> {
    let head: [u8; N] = rest.get(..N)?.try_into().ok()?;
    *rest = &rest[N..];
    Some(head)
}

/// Where the contents a look finds go.
pub trait Sink {
    /// Whether the content named `digest` is already kept.
    fn has(&self, digest: &Digest) -> bool;
    /// Keeps `bytes` (whose digest is `digest`).
    fn keep(&mut self, digest: Digest, bytes: &[u8]) -> std::io::Result<()>;
}

/// A look that stores nothing (`get_diff` against the workspace now).
pub struct Discard;

impl Sink for Discard {
    fn has(&self, _: &Digest) -> bool {
        true
    }
    fn keep(&mut self, _: Digest, _: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
}

/// What to look at.
pub struct Scope<'a> {
    pub root: &'a Path,
    pub max_file_bytes: u64,
    /// Directories never walked (the data directory, when it is inside the
    /// workspace).
    pub exclude: &'a [PathBuf],
}

/// One path the walk found, before its content is read.
struct Found {
    rel: String,
    path: PathBuf,
    meta: std::fs::Metadata,
}

/// What a look found: the manifest, and the stat cache as it should be
/// once the contents the sink was given are kept.
pub struct Scanned {
    pub manifest: Manifest,
    pub cache: StatCache,
}

/// Reads the workspace into a manifest, giving `sink` every content it
/// does not have yet; `cache` spares reading the files that did not
/// change. When `verify`, a cached digest is used only if `sink` still has
/// its content (the store may have lost objects since the cache was made);
/// otherwise the cache is trusted, which spares a `stat` in the store per
/// file — the larger half of a look at an unchanged tree.
pub fn scan(
    scope: &Scope<'_>,
    cache: &StatCache,
    verify: bool,
    sink: &mut dyn Sink,
) -> std::io::Result<Scanned> {
    let started = SystemTime::now()
        .checked_sub(RACY)
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    let (found, mut skipped) = walk(scope)?;
    let mut manifest = Manifest::default();
    let mut fresh = HashMap::with_capacity(found.len());
    for Found { rel, path, meta } in found {
        let file_type = meta.file_type();
        if file_type.is_symlink() {
            match std::fs::read_link(&path)
                .ok()
                .and_then(|t| t.to_str().map(str::to_owned))
            {
                Some(target) => {
                    manifest.files.insert(rel, Node::Symlink { target });
                }
                None => skipped.push(rel),
            }
            continue;
        }
        if !file_type.is_file() || meta.len() > scope.max_file_bytes {
            skipped.push(rel);
            continue;
        }
        let stat = Stat::of(&meta);
        let exec = meta.permissions().mode() & 0o111 != 0;
        let cached = cache
            .entries
            .get(&rel)
            .filter(|(s, d)| *s == stat && (!verify || sink.has(d)))
            .map(|(_, d)| *d);
        let digest = match cached {
            Some(digest) => digest,
            None => match read_regular(&path, scope.max_file_bytes)? {
                Some(bytes) => {
                    let digest = Digest::of(&bytes);
                    if !sink.has(&digest) {
                        sink.keep(digest, &bytes)?;
                    }
                    digest
                }
                // It changed under the look into something not kept.
                None => {
                    skipped.push(rel);
                    continue;
                }
            },
        };
        if stat.settled(started) {
            fresh.insert(rel.clone(), (stat, digest));
        }
        manifest.files.insert(
            rel,
            Node::File {
                digest: digest.hex(),
                exec,
            },
        );
    }
    skipped.sort();
    skipped.dedup();
    manifest.skipped = skipped;
    Ok(Scanned {
        manifest,
        cache: StatCache { entries: fresh },
    })
}

/// Reads a file that was a regular file when walked: opened without
/// following a symlink and without blocking (it may have become a FIFO
/// since), checked again once open. `None` when it is no longer a regular
/// file within the size limit, or is gone.
fn read_regular(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc_flags())
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > max {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.by_ref().take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(None);
    }
    Ok(Some(bytes))
}

fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
}

/// Errors that mean the path changed under the look (deleted, replaced by
/// a symlink, a directory): the path is left out rather than the look failed.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::NOENT.raw_os_error()
            || code == rustix::io::Errno::LOOP.raw_os_error()
            || code == rustix::io::Errno::ISDIR.raw_os_error()
            || code == rustix::io::Errno::NOTDIR.raw_os_error()
            || code == rustix::io::Errno::NXIO.raw_os_error()
    )
}

/// Every path under the root that git would not ignore, and the names that
/// cannot be kept (not UTF-8). `.git` and submodules are never entered.
fn walk(scope: &Scope<'_>) -> std::io::Result<(Vec<Found>, Vec<String>)> {
    let root = scope.root.to_path_buf();
    let exclude: Vec<PathBuf> = scope.exclude.to_vec();
    let found = Mutex::new(Vec::new());
    let odd = Mutex::new(Vec::new());
    let failure: Mutex<Option<std::io::Error>> = Mutex::new(None);
    let filter_root = root.clone();
    ignore::WalkBuilder::new(&root)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            if entry.file_name() == ".git" {
                return false;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir && entry.depth() > 0 {
                let path = entry.path();
                if exclude.iter().any(|x| x == path) {
                    return false;
                }
                // A submodule (or a nested repository): not ours to keep.
                if path != filter_root && path.join(".git").symlink_metadata().is_ok() {
                    return false;
                }
            }
            true
        })
        .build_parallel()
        .run(|| {
            let root = &root;
            let found = &found;
            let odd = &odd;
            let failure = &failure;
            Box::new(move |entry| {
                let entry = match entry {
                    Ok(entry) => entry,
                    // An unreadable directory or ignore file: the rest goes on.
                    Err(e) => {
                        tracing::debug!("checkpoint walk: {e}");
                        return ignore::WalkState::Continue;
                    }
                };
                if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
                    return ignore::WalkState::Continue;
                }
                let path = entry.path().to_path_buf();
                let Ok(rel) = path.strip_prefix(root) else {
                    return ignore::WalkState::Continue;
                };
                let Some(rel) = rel.to_str().map(str::to_owned) else {
                    odd.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(rel.to_string_lossy().into_owned());
                    return ignore::WalkState::Continue;
                };
                match std::fs::symlink_metadata(&path) {
                    Ok(meta) => found.lock().unwrap_or_else(|e| e.into_inner()).push(Found {
                        rel,
                        path,
                        meta,
                    }),
                    Err(e) if gone(&e) => {}
                    Err(e) => {
                        *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        return ignore::WalkState::Quit;
                    }
                }
                ignore::WalkState::Continue
            })
        });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok((
        found.into_inner().unwrap_or_else(|e| e.into_inner()),
        odd.into_inner().unwrap_or_else(|e| e.into_inner()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_cache_reads_back_what_it_wrote_and_ignores_a_torn_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stat.bin");
        let mut cache = StatCache::default();
        for i in 0..3u8 {
            cache.entries.insert(
                format!("d/f{i}"),
                (
                    Stat {
                        size: u64::from(i),
                        mtime_ns: -1,
                        ctime_ns: i128::MAX,
                        ino: 7,
                    },
                    Digest::of(&[i]),
                ),
            );
        }
        cache.save(&path).unwrap();
        assert_eq!(StatCache::load(&path), cache);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(StatCache::load(&path).is_empty());
        std::fs::write(&path, b"{\"entries\":{}}").unwrap();
        assert!(StatCache::load(&path).is_empty());
    }
}
