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

mod binary_patch;
pub mod diff;
pub mod manifest;
pub mod restore;
pub mod serve;
pub mod sync;
pub mod walk;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use manifest::{Manifest, Node};

use crate::store::content::{ContentStore, Digest};
use walk::{Scope, Sink, StatCache};

/// Default for `--checkpoint-max-file-bytes`.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Default for `--checkpoint-store-bytes`.
pub const DEFAULT_STORE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// How many manifests read or taken are kept in memory: a turn's
/// checkpoint is diffed against the one before, and a rewind reads the
/// ones it goes between, so re-reading them from the store is spared.
const RECENT_MANIFESTS: usize = 4;

/// The stat cache, and the store generation its digests were last checked
/// against.
struct Cache {
    stat: StatCache,
    /// The store's [`Checkpoints::generation`] when every digest in `stat`
    /// was last known stored; `None` until the first checkpoint checked.
    verified: Option<String>,
    /// Whether `stat` has entries the file that keeps it lacks.
    dirty: bool,
    /// The last checkpoint taken and its trees by directory, for the next
    /// to reuse (see [`Manifest::to_trees_after`]); trusted only while the
    /// store generation is `verified`, as the cached digests are.
    trees: Option<(Arc<Manifest>, BTreeMap<String, Digest>)>,
}

/// The checkpoint store of one pod's workspace.
pub struct Checkpoints {
    objects: ContentStore,
    root: PathBuf,
    cache_path: PathBuf,
    journal_path: PathBuf,
    generation_path: PathBuf,
    cache: Mutex<Cache>,
    recent: Mutex<VecDeque<(String, Arc<Manifest>)>>,
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
    /// Shared with the store's memory of recent manifests: a 10,000-path
    /// manifest is not cloned on a turn's path.
    pub manifest: Arc<Manifest>,
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
        Ok(Self::on(
            objects,
            data_dir,
            root,
            max_file_bytes,
            store_bytes,
        ))
    }

    /// The same store (its objects shared) for another workspace: a child
    /// pod's git worktree. Opening the store again would sweep temporary
    /// files a `put` of this process may be writing.
    pub fn for_root(&self, data_dir: &Path, root: &Path) -> Self {
        Self::on(
            self.objects.clone(),
            data_dir,
            root,
            self.max_file_bytes,
            self.store_bytes,
        )
    }

    fn on(
        objects: ContentStore,
        data_dir: &Path,
        root: &Path,
        max_file_bytes: u64,
        store_bytes: u64,
    ) -> Self {
        let base = data_dir.join("checkpoints");
        let tag = &Digest::of(root.as_os_str().as_encoded_bytes()).hex()[..16];
        // The JSON cache of earlier versions is replaced by a binary one.
        let _ = std::fs::remove_file(base.join(format!("stat-{tag}.json")));
        let cache_path = base.join(format!("stat-{tag}.bin"));
        let journal_path = base.join(format!("rewind-{tag}.json"));
        let cache = Mutex::new(Cache {
            stat: StatCache::load(&cache_path),
            verified: None,
            dirty: false,
            trees: None,
        });
        let exclude = [data_dir.to_path_buf(), base.clone()]
            .into_iter()
            .filter_map(|d| d.canonicalize().ok())
            .filter(|d| d.starts_with(root) && d != root)
            .collect();
        Self {
            objects,
            root: root.to_path_buf(),
            cache_path,
            journal_path,
            generation_path: base.join("generation"),
            cache,
            recent: Mutex::new(VecDeque::new()),
            max_file_bytes,
            store_bytes,
            exclude,
            total: Mutex::new(None),
        }
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

    /// Takes a checkpoint: every new content and every tree object of its
    /// manifest is durable before the id is returned.
    ///
    /// What a checkpoint of a large, mostly unchanged workspace costs is
    /// kept near what `git status` costs: the stat cache spares reading
    /// unchanged files (and, once checked against this store generation,
    /// a `stat` of their objects), the trees of directories in which
    /// nothing changed are the previous checkpoint's, neither serialised
    /// nor looked up again (see [`Manifest::to_trees_after`]), and the few
    /// new objects are synced together rather than one journal commit each
    /// (see [`sync`]).
    pub fn take(&self) -> std::io::Result<Taken> {
        // Held throughout: two checkpoints at once would race on the cache.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let generation = self.generation();
        let verify = cache.verified.as_deref() != Some(generation.as_str());
        let mut batch = Batch::new(&self.objects);
        let scanned = walk::scan(&self.scope(), &cache.stat, verify, &mut batch)?;
        let manifest = Arc::new(scanned.manifest);
        let previous = match &cache.trees {
            Some((manifest, dirs)) if !verify => Some((&**manifest, dirs)),
            _ => None,
        };
        let trees = manifest.to_trees_after(previous);
        for (digest, bytes) in &trees.objects {
            if !batch.has(digest) {
                batch.keep(*digest, bytes)?;
            }
        }
        let added = batch.commit()?;
        crash_point("checkpoint_contents");
        // Only now does every digest the new cache names have its object.
        if cache.stat.apply(scanned.cache, &manifest) {
            cache.dirty = true;
        }
        cache.verified = Some(generation);
        cache.trees = Some((Arc::clone(&manifest), trees.dirs));
        if cache.dirty && cache.stat.save(&self.cache_path).is_ok() {
            cache.dirty = false;
        }
        drop(cache);
        self.count(added);
        let id = trees.root.hex();
        self.remember(&id, Arc::clone(&manifest));
        Ok(Taken { id, manifest })
    }

    /// The workspace as it is now, storing nothing. The stat cache is read,
    /// not updated: the digests of a look name contents nobody stored.
    pub fn look(&self) -> std::io::Result<Manifest> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        Ok(walk::scan(&self.scope(), &cache.stat, false, &mut walk::Discard)?.manifest)
    }

    /// The manifest of checkpoint `id`.
    pub fn manifest(&self, id: &str) -> std::io::Result<Manifest> {
        {
            let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, manifest)) = recent.iter().find(|(known, _)| known == id) {
                return Ok(Manifest::clone(manifest));
            }
        }
        let (manifest, _) = self.stored_manifest(id)?;
        self.remember(id, Arc::new(manifest.clone()));
        Ok(manifest)
    }

    /// Reads checkpoint `id` from the store: its manifest, and the digests
    /// of the tree objects besides the root that hold it.
    fn stored_manifest(&self, id: &str) -> std::io::Result<(Manifest, Vec<Digest>)> {
        let digest = Digest::from_hex(id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a checkpoint id")
        })?;
        let bytes = self.objects.get(&digest)?;
        Manifest::from_stored(&bytes, &mut |d| self.objects.get(d))
            .map_err(|e| std::io::Error::new(e.kind(), format!("checkpoint {id}: {e}")))
    }

    fn remember(&self, id: &str, manifest: Arc<Manifest>) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(known, _)| known != id);
        recent.push_front((id.to_owned(), manifest));
        recent.truncate(RECENT_MANIFESTS);
    }

    /// A token that changes whenever objects are deleted from the store (by
    /// this pod or another sharing the data directory): the stat cache's
    /// digests are trusted without a `stat` each only while it is the one
    /// they were checked against. Empty before any deletion.
    fn generation(&self) -> String {
        std::fs::read_to_string(&self.generation_path).unwrap_or_default()
    }

    /// Marks that objects are about to be deleted (before the first goes,
    /// so no checkpoint can trust a digest checked before it).
    fn next_generation(&self) -> std::io::Result<()> {
        let tmp = self
            .generation_path
            .with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, uuid::Uuid::new_v4().simple().to_string())?;
        std::fs::rename(&tmp, &self.generation_path)
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
            if let Ok((manifest, trees)) = self.stored_manifest(id) {
                keep.extend(trees);
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
            if removed == 0 {
                self.next_generation()?;
                self.recent
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
            self.objects.remove(&object.digest)?;
            total -= object.size;
            removed += 1;
        }
        *self.total.lock().unwrap_or_else(|e| e.into_inner()) = Some(total);
        // Cached digests that name what is gone are found by the next
        // checkpoint: the generation changed, so it checks each.
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
    /// A fan-out directory was created, so the store's root changed too.
    new_fan_out: bool,
}

impl<'a> Batch<'a> {
    fn new(objects: &'a ContentStore) -> Self {
        Self {
            objects,
            pending: Vec::new(),
            names: HashSet::new(),
            bytes: 0,
            new_fan_out: false,
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

    /// Every temporary's bytes are synced before any is renamed, and every
    /// directory renamed into is synced before this returns: only the
    /// files written are waited for, never the rest of the disk's writers
    /// (as `syncfs` did), and the syncs run together (see [`sync`]).
    fn name_all(&self) -> std::io::Result<()> {
        let tmps: Vec<PathBuf> = self.pending.iter().map(|(tmp, _)| tmp.clone()).collect();
        sync::sync_files(&tmps)?;
        let mut dirs: Vec<PathBuf> = Vec::new();
        for (tmp, path) in &self.pending {
            std::fs::rename(tmp, path)?;
            if let Some(dir) = path.parent() {
                dirs.push(dir.to_path_buf());
            }
        }
        if self.new_fan_out {
            dirs.push(self.objects.root().to_path_buf());
        }
        dirs.sort();
        dirs.dedup();
        sync::sync_dirs(&dirs)
    }
}

impl Sink for Batch<'_> {
    fn has(&self, digest: &Digest) -> bool {
        self.names.contains(digest) || self.objects.contains(digest)
    }

    fn keep(&mut self, digest: Digest, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.objects.path(&digest);
        let dir = path.parent().unwrap_or(self.objects.root()).to_path_buf();
        if !dir.is_dir() {
            crate::private::create_dir(&dir, false)?;
            self.new_fan_out = true;
        }
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let written = (|| {
            let mut file = crate::private::file_options()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            file.write_all(bytes)?;
            sync::start_writeback(&file);
            Ok::<_, std::io::Error>(())
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
