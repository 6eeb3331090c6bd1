//! The read methods over checkpoints, `get_diff` and `get_file`, and the
//! handle the pod's actors share: the store (if it could be opened) and
//! the ids of the current conversation's checkpoints, which are all a
//! client may name, and the paths its checkpoint entries name, which are
//! all a read-only link may read.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::{diff, Checkpoints, Manifest, Node};
use crate::protocol::{ErrorCode, FileChange};

/// The store and the conversation's checkpoint ids, shared by the worker's
/// jobs and every connection.
#[derive(Clone)]
pub struct Handle {
    store: Result<Arc<Checkpoints>, String>,
    known: Arc<Mutex<HashSet<String>>>,
    /// Paths the conversation's checkpoint entries list as changed: the
    /// files it showed.
    shown: Arc<Mutex<HashSet<String>>>,
}

/// Why a method was refused.
#[derive(Debug)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl Handle {
    /// A handle on `store`, or one whose every checkpoint fails with why the
    /// store could not be opened.
    pub fn new(store: std::io::Result<Checkpoints>) -> Self {
        Self {
            store: store.map(Arc::new).map_err(|e| e.to_string()),
            known: Arc::default(),
            shown: Arc::default(),
        }
    }

    /// A handle for a child pod working in its own git worktree at
    /// `root`: the same store, that workspace's files, its own
    /// conversation's checkpoints.
    pub fn for_root(&self, data_dir: &std::path::Path, root: &std::path::Path) -> Self {
        Self {
            store: self
                .store
                .as_ref()
                .map(|store| Arc::new(store.for_root(data_dir, root)))
                .map_err(Clone::clone),
            known: Arc::default(),
            shown: Arc::default(),
        }
    }

    pub fn store(&self) -> Result<Arc<Checkpoints>, String> {
        self.store.clone()
    }

    /// Records that `id` is a checkpoint of the current conversation.
    pub fn know(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned());
    }

    /// Records that the conversation showed these paths (a checkpoint
    /// entry lists them).
    pub fn show(&self, paths: impl IntoIterator<Item = String>) {
        self.shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(paths);
    }

    /// Whether the conversation showed `path`.
    pub fn shown(&self, path: &str) -> bool {
        self.shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(path.trim_start_matches("./"))
    }

    /// The conversation changed: these are its checkpoints, and the paths
    /// it showed, now.
    pub fn reset(
        &self,
        ids: impl IntoIterator<Item = String>,
        shown: impl IntoIterator<Item = String>,
    ) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.clear();
        known.extend(ids);
        let mut paths = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        paths.clear();
        paths.extend(shown);
    }

    pub fn knows(&self, id: &str) -> bool {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(id)
    }

    /// Every known id (what pruning must spare).
    pub fn known(&self) -> Vec<String> {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    fn manifest(&self, store: &Checkpoints, id: &str) -> Result<Manifest, Refusal> {
        if !self.knows(id) {
            return Err(Refusal::new(
                ErrorCode::CheckpointNotFound,
                format!("{id:?} is not a checkpoint of this conversation"),
            ));
        }
        store.manifest(id).map_err(|e| {
            Refusal::new(
                ErrorCode::CheckpointNotFound,
                format!("checkpoint {id} can no longer be read: {e}"),
            )
        })
    }

    fn opened(&self) -> Result<Arc<Checkpoints>, Refusal> {
        self.store.clone().map_err(|e| {
            Refusal::new(
                ErrorCode::StorageError,
                format!("the checkpoint store could not be opened: {e}"),
            )
        })
    }

    /// `get_diff`: from a checkpoint to another, or to the workspace now.
    pub fn get_diff(
        &self,
        from: &str,
        to: Option<&str>,
        path: Option<&str>,
        binary: diff::Binary,
    ) -> Result<(String, Vec<FileChange>, bool), Refusal> {
        let store = self.opened()?;
        if let Some(p) = path {
            check_path(&store, p)?;
        }
        let old = self.manifest(&store, from)?;
        let stored = |_: &str, n: &Node| store.content(n);
        let current = |p: &str, n: &Node| store.current_content(p, n);
        let result = match to {
            Some(to) => {
                let new = self.manifest(&store, to)?;
                diff::unified(&old, &new, &stored, &stored, path, binary)
            }
            None => {
                let new = store.look().map_err(|e| {
                    Refusal::new(
                        ErrorCode::StorageError,
                        format!("cannot read the workspace: {e}"),
                    )
                })?;
                diff::unified(&old, &new, &stored, &current, path, binary)
            }
        };
        Ok(result)
    }

    /// `get_file`: one path's bytes in a checkpoint, and its type.
    pub fn get_file(
        &self,
        checkpoint: &str,
        path: &str,
    ) -> Result<(Vec<u8>, &'static str), Refusal> {
        let store = self.opened()?;
        let manifest = self.manifest(&store, checkpoint)?;
        let Some(node) = manifest.files.get(path.trim_start_matches("./")) else {
            return Err(Refusal::new(
                ErrorCode::NotFound,
                format!("{path:?} is not in checkpoint {checkpoint}"),
            ));
        };
        let bytes = store.content(node).map_err(|e| {
            Refusal::new(
                ErrorCode::NotFound,
                format!("the content of {path:?} is no longer stored: {e}"),
            )
        })?;
        let kind = if node.is_symlink() { "symlink" } else { "file" };
        Ok((bytes, kind))
    }
}

/// A `path` a client names: workspace-relative, without `..`, and not
/// through a symlink of the workspace.
fn check_path(store: &Checkpoints, path: &str) -> Result<(), Refusal> {
    let bad = |why: &str| Refusal::new(ErrorCode::InvalidParams, format!("`path` {path:?} {why}"));
    if path.starts_with('/') {
        return Err(bad("must be relative to the workspace"));
    }
    let mut at = store.root().to_path_buf();
    for part in path.trim_end_matches('/').split('/') {
        if part == ".." {
            return Err(bad("must not contain `..`"));
        }
        if part.is_empty() || part == "." {
            continue;
        }
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(bad("goes through a symlink"));
        }
    }
    Ok(())
}
