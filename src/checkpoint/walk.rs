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
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
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
    fn of(st: &rustix::fs::Stat) -> Self {
        Self {
            // Never negative; a nonsense size is too large to keep.
            size: u64::try_from(st.st_size).unwrap_or(u64::MAX),
            mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
            ino: st.st_ino,
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

    /// Applies what a look found (once the contents it gave its sink are
    /// kept): entries of files that changed or went are dropped, those of
    /// files read are added. Returns whether an entry was added or
    /// replaced, i.e. whether the saved cache is worth rewriting: one that
    /// still holds a dropped entry does no harm, as that entry's stat no
    /// longer matches its file, while rewriting 10,000 entries (about
    /// 1 MB) because one file is being edited is work for nothing.
    pub fn apply(&mut self, update: CacheUpdate, manifest: &Manifest) -> bool {
        for path in &update.dropped {
            self.entries.remove(path);
        }
        let added = update.added.len();
        let mut changed = false;
        for (path, stat, digest) in update.added {
            changed |= self.entries.insert(path, (stat, digest)) != Some((stat, digest));
        }
        // Paths the look did not find at all (deleted, or now ignored).
        if self.entries.len() > update.kept + added {
            self.entries
                .retain(|path, _| matches!(manifest.files.get(path), Some(Node::File { .. })));
        }
        changed
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
    kind: rustix::fs::FileType,
    mode: u32,
    stat: Stat,
    /// Whether the stat cache has an entry for the path.
    had_entry: bool,
    /// The entry's digest, when its stat is this one. Looked up by the
    /// walking threads, in parallel, rather than after the walk.
    cached: Option<Digest>,
}

/// How a look changes the stat cache ([`StatCache::apply`]): as a list of
/// changes rather than a new cache, since most looks change few entries
/// and building and comparing a 10,000-entry cache each time was a
/// twentieth of a turn-start checkpoint.
#[derive(Default)]
pub struct CacheUpdate {
    /// Files read whose times are settled.
    added: Vec<(String, Stat, Digest)>,
    /// Cached paths whose entry no longer holds (changed, racy, no longer
    /// a regular file within the size limit).
    dropped: Vec<String>,
    /// How many cached entries were found to hold.
    kept: usize,
}

/// What a look found: the manifest, and how the stat cache should change
/// once the contents the sink was given are kept.
pub struct Scanned {
    pub manifest: Manifest,
    pub cache: CacheUpdate,
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
    let (mut found, mut skipped) = walk(scope, cache)?;
    // Each walking thread sorted its own: this merges their runs.
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    let mut files = Vec::with_capacity(found.len());
    let mut update = CacheUpdate::default();
    for Found {
        rel,
        kind,
        mode,
        stat,
        had_entry,
        cached,
    } in found
    {
        let kept = if kind == rustix::fs::FileType::Symlink {
            std::fs::read_link(scope.root.join(&rel))
                .ok()
                .and_then(|t| t.into_os_string().into_string().ok())
                .map(|target| Node::Symlink { target })
        } else if kind != rustix::fs::FileType::RegularFile || stat.size > scope.max_file_bytes {
            None
        } else {
            let cached = cached.filter(|d| !verify || sink.has(d));
            let digest = match cached {
                Some(digest) => Some(digest),
                None => match read_regular(&scope.root.join(&rel), scope.max_file_bytes)? {
                    Some(bytes) => {
                        let digest = Digest::of(&bytes);
                        if !sink.has(&digest) {
                            sink.keep(digest, &bytes)?;
                        }
                        Some(digest)
                    }
                    // It changed under the look into something not kept.
                    None => None,
                },
            };
            digest.map(|digest| {
                if !stat.settled(started) {
                    if had_entry {
                        update.dropped.push(rel.clone());
                    }
                } else if cached.is_some() {
                    update.kept += 1;
                } else {
                    update.added.push((rel.clone(), stat, digest));
                }
                Node::File {
                    digest: digest.hex(),
                    exec: mode & 0o111 != 0,
                }
            })
        };
        if had_entry && !matches!(kept, Some(Node::File { .. })) {
            update.dropped.push(rel.clone());
        }
        match kept {
            Some(node) => files.push((rel, node)),
            None => skipped.push(rel),
        }
    }
    skipped.sort();
    skipped.dedup();
    Ok(Scanned {
        manifest: Manifest {
            // In order already: built in one pass.
            files: files.into_iter().collect(),
            skipped,
        },
        cache: update,
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
fn walk(scope: &Scope<'_>, cache: &StatCache) -> std::io::Result<(Vec<Found>, Vec<String>)> {
    let root = scope.root.to_path_buf();
    let exclude: Vec<PathBuf> = scope.exclude.to_vec();
    let shared = Mutex::new((Vec::new(), Vec::new()));
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
            let root = root.as_os_str().as_bytes();
            let failure = &failure;
            let mut local = Local {
                found: Vec::new(),
                odd: Vec::new(),
                shared: &shared,
                dir: None,
            };
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
                // As bytes: `Path`'s component-wise operations were a
                // twentieth of the walk.
                let path = entry.path().as_os_str().as_bytes();
                let Some(rel) = path.strip_prefix(root) else {
                    return ignore::WalkState::Continue;
                };
                let rel = rel.strip_prefix(b"/").unwrap_or(rel);
                let Ok(rel) = std::str::from_utf8(rel) else {
                    local.odd.push(String::from_utf8_lossy(rel).into_owned());
                    return ignore::WalkState::Continue;
                };
                match local.lstat(path) {
                    Ok(st) => {
                        let stat = Stat::of(&st);
                        let entry = cache.entries.get(rel);
                        local.found.push(Found {
                            rel: rel.to_owned(),
                            kind: rustix::fs::FileType::from_raw_mode(st.st_mode),
                            mode: st.st_mode,
                            stat,
                            had_entry: entry.is_some(),
                            cached: entry.filter(|(s, _)| *s == stat).map(|(_, d)| *d),
                        });
                    }
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
    Ok(shared.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// One walking thread's findings, handed over when the thread ends: a
/// shared lock taken per path had the threads waiting on each other.
struct Local<'a> {
    found: Vec<Found>,
    odd: Vec<String>,
    shared: &'a Mutex<(Vec<Found>, Vec<String>)>,
    /// The directory of the last path looked at, open. The walk hands over
    /// a directory's paths one after another, so each is `lstat`ed by its
    /// name in the open directory: looking up every component of a long
    /// absolute path again was a fifth of the walk.
    dir: Option<(Vec<u8>, OwnedFd)>,
}

impl Local<'_> {
    /// `lstat(path)`: the same answer, a symlink never followed.
    fn lstat(&mut self, path: &[u8]) -> std::io::Result<rustix::fs::Stat> {
        let Some(slash) = path.iter().rposition(|&b| b == b'/') else {
            return Ok(rustix::fs::lstat(OsStr::from_bytes(path))?);
        };
        let parent = if slash == 0 { b"/" } else { &path[..slash] };
        let name = OsStr::from_bytes(&path[slash + 1..]);
        if !matches!(&self.dir, Some((open, _)) if open == parent) {
            self.dir = None;
            let flags = rustix::fs::OFlags::PATH
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC;
            let fd = rustix::fs::open(OsStr::from_bytes(parent), flags, rustix::fs::Mode::empty())?;
            self.dir = Some((parent.to_vec(), fd));
        }
        match &self.dir {
            Some((_, fd)) => Ok(rustix::fs::statat(
                fd,
                name,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )?),
            None => Ok(rustix::fs::lstat(OsStr::from_bytes(path))?),
        }
    }
}

impl Drop for Local<'_> {
    /// Sorted here, on the walking thread: what is left after the walk is
    /// merging the threads' runs.
    fn drop(&mut self) {
        self.found.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.0.append(&mut self.found);
        shared.1.append(&mut self.odd);
    }
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

    #[test]
    fn a_cache_update_drops_what_changed_or_went_and_reports_only_additions() {
        let stat = |n: u64| Stat {
            size: n,
            mtime_ns: 1,
            ctime_ns: 1,
            ino: n,
        };
        let mut cache = StatCache::default();
        for i in 0..4u8 {
            cache
                .entries
                .insert(format!("f{i}"), (stat(u64::from(i)), Digest::of(&[i])));
        }
        let mut manifest = Manifest::default();
        for path in ["f0", "f1", "f2"] {
            manifest.files.insert(
                path.into(),
                Node::File {
                    digest: String::new(),
                    exec: false,
                },
            );
        }
        // f0 and f2 still hold, f1 is being edited (racy), f3 was deleted.
        let racy = CacheUpdate {
            added: Vec::new(),
            dropped: vec!["f1".into()],
            kept: 2,
        };
        assert!(
            !cache.apply(racy, &manifest),
            "nothing to save for a removal"
        );
        assert_eq!(cache.len(), 2);
        assert!(cache.entries.contains_key("f0") && cache.entries.contains_key("f2"));

        let settled = CacheUpdate {
            added: vec![("f1".into(), stat(9), Digest::of(b"new"))],
            dropped: Vec::new(),
            kept: 2,
        };
        assert!(cache.apply(settled, &manifest));
        assert_eq!(cache.entries["f1"], (stat(9), Digest::of(b"new")));
        let again = CacheUpdate {
            added: vec![("f1".into(), stat(9), Digest::of(b"new"))],
            dropped: Vec::new(),
            kept: 2,
        };
        assert!(!cache.apply(again, &manifest), "the same entry again");
    }
}
