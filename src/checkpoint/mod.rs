//! Checkpoints: the state of the workspace's files at the moments that
//! matter, so any change a turn made can be seen, blamed and undone.
//!
//! Contents live in a [`ContentStore`] of their own
//! (`<data-dir>/checkpoints/objects/`), each stored once by its SHA-256; a
//! checkpoint is a [`Manifest`] stored as an object of the same store, and
//! its id is that object's digest. Nothing is ever written inside the
//! workspace, and the user's `.git` is never read from or written to.
//!
//! Everything here is plain synchronous file code: the pod calls it on the
//! blocking pool (`pod/checkpoint.rs`), never on an actor's thread.

pub mod diff;
pub mod manifest;
pub mod notes;
pub mod restore;
pub mod serve;
pub mod walk;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use manifest::{Manifest, Node};

use crate::store::content::{ContentStore, Digest};
use walk::{Scope, Sink, StatCache};

/// Default for `--checkpoint-max-file-bytes`.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Default for `--checkpoint-store-bytes`.
pub const DEFAULT_STORE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// New objects up to this many are synced one by one; more are synced with
/// one `syncfs`, which is cheaper than thousands of `fsync`s.
const SYNC_EACH_UP_TO: usize = 64;

/// The checkpoint store of one pod's workspace.
pub struct Checkpoints {
    objects: ContentStore,
    root: PathBuf,
    cache_path: PathBuf,
    journal_path: PathBuf,
    cache: Mutex<StatCache>,
    max_file_bytes: u64,
    store_bytes: u64,
    /// Directories inside the workspace that are never kept (the data
    /// directory, when it lies there).
    exclude: Vec<PathBuf>,
    /// Bytes the objects take, once counted.
    total: Mutex<Option<u64>>,
}

/// A rewind under way, recorded durably before its first file is touched
/// and removed once its entries are committed: a pod killed in between
/// finds it at the next start and says what happened.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Journal {
    /// The state just before the rewind (a checkpoint already stored).
    pub before: String,
    /// The state it was restoring to.
    pub target: String,
}

/// A checkpoint just taken.
pub struct Taken {
    pub id: String,
    pub manifest: Manifest,
}

impl Checkpoints {
    /// Opens the store under `data_dir` for the workspace `root`.
    pub fn open(
        data_dir: &Path,
        root: &Path,
        max_file_bytes: u64,
        store_bytes: u64,
    ) -> std::io::Result<Self> {
        let base = data_dir.join("checkpoints");
        crate::private::create_dir(&base, true)?;
        let objects = ContentStore::open(base.join("objects"))?;
        objects.sweep_temporaries()?;
        let tag = &Digest::of(root.as_os_str().as_encoded_bytes()).hex()[..16];
        let cache_path = base.join(format!("stat-{tag}.json"));
        let journal_path = base.join(format!("rewind-{tag}.json"));
        let cache = Mutex::new(StatCache::load(&cache_path));
        let exclude = [data_dir.to_path_buf(), base.clone()]
            .into_iter()
            .filter_map(|d| d.canonicalize().ok())
            .filter(|d| d.starts_with(root) && d != root)
            .collect();
        Ok(Self {
            objects,
            root: root.to_path_buf(),
            cache_path,
            journal_path,
            cache,
            max_file_bytes,
            store_bytes,
            exclude,
            total: Mutex::new(None),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn objects(&self) -> &ContentStore {
        &self.objects
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            root: &self.root,
            max_file_bytes: self.max_file_bytes,
            exclude: &self.exclude,
        }
    }

    /// Takes a checkpoint: every new content is durable, then the manifest,
    /// and only then is the id returned.
    pub fn take(&self) -> std::io::Result<Taken> {
        let mut batch = Batch::new(&self.objects);
        let manifest = walk::scan(&self.scope(), &self.cache, &mut batch)?;
        let added = batch.commit()?;
        crash_point("checkpoint_contents");
        let bytes = manifest.to_bytes();
        let digest = self.objects.put(&bytes)?;
        let _ = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .save(&self.cache_path);
        self.count(added + bytes.len() as u64);
        Ok(Taken {
            id: digest.hex(),
            manifest,
        })
    }

    /// The workspace as it is now, storing nothing.
    pub fn look(&self) -> std::io::Result<Manifest> {
        walk::scan(&self.scope(), &self.cache, &mut walk::Discard)
    }

    /// The manifest of checkpoint `id`.
    pub fn manifest(&self, id: &str) -> std::io::Result<Manifest> {
        let digest = Digest::from_hex(id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a checkpoint id")
        })?;
        let bytes = self.objects.get(&digest)?;
        Manifest::from_bytes(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("manifest {id}: {e}"),
            )
        })
    }

    /// A node's bytes: the content of a file (checked against its digest,
    /// so a damaged object is never restored) or a link's target.
    pub fn content(&self, node: &Node) -> std::io::Result<Vec<u8>> {
        match node {
            Node::Symlink { target } => Ok(target.as_bytes().to_vec()),
            Node::File { .. } => {
                let digest = node.digest().ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "bad digest")
                })?;
                let bytes = self.objects.get(&digest)?;
                if Digest::of(&bytes) != digest {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("stored content {} is damaged", digest.hex()),
                    ));
                }
                Ok(bytes)
            }
        }
    }

    /// A node's bytes as the workspace holds them now (for a diff against
    /// it): read without following a symlink.
    pub fn current_content(&self, path: &str, node: &Node) -> std::io::Result<Vec<u8>> {
        let full = self.root.join(path);
        match node {
            Node::Symlink { .. } => Ok(std::fs::read_link(full)?
                .to_string_lossy()
                .into_owned()
                .into_bytes()),
            Node::File { .. } => restore::read_no_follow(&full),
        }
    }

    /// Records, durably, that a rewind is about to restore files.
    pub fn begin_rewind(&self, journal: &Journal) -> std::io::Result<()> {
        let tmp = self.journal_path.with_extension("tmp");
        let mut file = crate::private::file_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&serde_json::to_vec(journal).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.journal_path)?;
        let dir = self.journal_path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)?.sync_all()
    }

    /// The rewind is recorded in the log: its journal goes.
    pub fn end_rewind(&self) {
        let _ = std::fs::remove_file(&self.journal_path);
    }

    /// A rewind a killed pod left unfinished, if any.
    pub fn interrupted_rewind(&self) -> Option<Journal> {
        let bytes = std::fs::read(&self.journal_path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn count(&self, added: u64) {
        let mut total = self.total.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = total.as_mut() {
            *t += added;
        }
    }

    /// Keeps the store within `--checkpoint-store-bytes`: deletes the
    /// oldest objects that none of `needed` (checkpoint ids of the current
    /// conversation) names, until it fits. Returns how many were deleted.
    pub fn prune(&self, needed: &[String]) -> std::io::Result<usize> {
        {
            let mut total = self.total.lock().unwrap_or_else(|e| e.into_inner());
            let known = match *total {
                Some(t) => t,
                None => {
                    let t = self.objects.total_bytes()?;
                    *total = Some(t);
                    t
                }
            };
            if known <= self.store_bytes {
                return Ok(0);
            }
        }
        let mut keep: HashSet<Digest> = HashSet::new();
        for id in needed {
            let Some(digest) = Digest::from_hex(id) else {
                continue;
            };
            keep.insert(digest);
            if let Ok(manifest) = self.manifest(id) {
                keep.extend(manifest.files.values().filter_map(Node::digest));
            }
        }
        let mut objects = self.objects.list()?;
        let mut total: u64 = objects.iter().map(|o| o.size).sum();
        objects.sort_by_key(|o| o.modified);
        let mut removed = 0;
        for object in objects {
            if total <= self.store_bytes {
                break;
            }
            if keep.contains(&object.digest) {
                continue;
            }
            self.objects.remove(&object.digest)?;
            total -= object.size;
            removed += 1;
        }
        *self.total.lock().unwrap_or_else(|e| e.into_inner()) = Some(total);
        if removed > 0 {
            // Cached digests may name what is gone.
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        Ok(removed)
    }
}

/// New objects written as temporary files, made durable together, then
/// named: after [`Batch::commit`] every one survives a crash, and a crash
/// before leaves only temporaries (swept at the next open), never an object
/// under its name with torn bytes.
struct Batch<'a> {
    objects: &'a ContentStore,
    pending: Vec<(PathBuf, PathBuf)>,
    names: HashSet<Digest>,
    bytes: u64,
}

impl<'a> Batch<'a> {
    fn new(objects: &'a ContentStore) -> Self {
        Self {
            objects,
            pending: Vec::new(),
            names: HashSet::new(),
            bytes: 0,
        }
    }

    /// Syncs and names every pending object; returns the bytes added.
    fn commit(self) -> std::io::Result<u64> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        let result = self.name_all();
        if result.is_err() {
            for (tmp, _) in &self.pending {
                let _ = std::fs::remove_file(tmp);
            }
        }
        result.map(|()| self.bytes)
    }

    fn name_all(&self) -> std::io::Result<()> {
        let many = self.pending.len() > SYNC_EACH_UP_TO;
        if many {
            sync_fs(self.objects.root())?;
        } else {
            for (tmp, _) in &self.pending {
                std::fs::File::open(tmp)?.sync_all()?;
            }
        }
        let mut dirs: Vec<&Path> = Vec::new();
        for (tmp, path) in &self.pending {
            std::fs::rename(tmp, path)?;
            if let Some(dir) = path.parent() {
                dirs.push(dir);
            }
        }
        if many {
            return sync_fs(self.objects.root());
        }
        dirs.sort();
        dirs.dedup();
        dirs.push(self.objects.root());
        for dir in dirs {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Sink for Batch<'_> {
    fn has(&self, digest: &Digest) -> bool {
        self.names.contains(digest) || self.objects.contains(digest)
    }

    fn keep(&mut self, digest: Digest, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.objects.path(&digest);
        let dir = path.parent().unwrap_or(self.objects.root()).to_path_buf();
        crate::private::create_dir(&dir, false)?;
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let written = (|| {
            let mut file = crate::private::file_options()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            file.write_all(bytes)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        injected_failure()?;
        self.names.insert(digest);
        self.bytes += bytes.len() as u64;
        self.pending.push((tmp, path));
        Ok(())
    }
}

fn sync_fs(path: &Path) -> std::io::Result<()> {
    let dir = std::fs::File::open(path)?;
    rustix::fs::syncfs(&dir).map_err(std::io::Error::from)
}

/// `POD_FAULT=fail_checkpoint_writes_while=PATH` (see `pod/fault.rs`): every
/// content a checkpoint writes fails while PATH exists, as on a full disk.
fn injected_failure() -> std::io::Result<()> {
    static WHILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let path = WHILE.get_or_init(|| {
        let spec = std::env::var("POD_FAULT").ok()?;
        spec.split(',')
            .find_map(|item| item.strip_prefix("fail_checkpoint_writes_while="))
            .map(PathBuf::from)
    });
    match path {
        Some(p) if p.exists() => Err(std::io::Error::other(
            "injected write failure (POD_FAULT fail_checkpoint_writes_while)",
        )),
        _ => Ok(()),
    }
}

/// `POD_FAULT=crash_at=STEP` for a step of checkpointing or restoring: the
/// process kills itself there, as a `kill -9` at that instant would.
pub fn crash_point(step: &str) {
    let wanted = std::env::var("POD_FAULT").ok().is_some_and(|spec| {
        spec.split(',')
            .any(|item| item.strip_prefix("crash_at=") == Some(step))
    });
    if wanted {
        tracing::warn!("POD_FAULT: crashing at {step}");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::Kill);
    }
}
