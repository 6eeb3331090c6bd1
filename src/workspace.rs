//! The workspace: the directory tools and `@` file refs may touch.
//!
//! Every path a model or a client names is resolved here, and nowhere else,
//! so the "stays inside the workspace" rule has exactly one implementation.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// A path that resolves outside the workspace, or cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("{path:?} is outside the workspace {root}")]
    Outside { path: String, root: String },
    #[error("{path:?}: {reason}")]
    Invalid { path: String, reason: String },
}

impl Workspace {
    /// Canonicalises `root` so that later prefix checks compare real paths.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a workspace-relative path. Absolute paths, `..` that climbs
    /// out, and symlinks whose target lies outside are all refused. The path
    /// need not exist (a file about to be written); its deepest existing
    /// ancestor is canonicalised and checked.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ScopeError> {
        let outside = || ScopeError::Outside {
            path: path.to_owned(),
            root: self.root.display().to_string(),
        };
        let rel = Path::new(path);
        if path.is_empty() {
            return Err(ScopeError::Invalid {
                path: path.to_owned(),
                reason: "empty path".into(),
            });
        }
        if rel.is_absolute() {
            return Err(outside());
        }
        let mut joined = self.root.clone();
        for component in rel.components() {
            match component {
                Component::Normal(c) => joined.push(c),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !joined.pop() || !joined.starts_with(&self.root) {
                        return Err(outside());
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        if !joined.starts_with(&self.root) {
            return Err(outside());
        }
        // Follow symlinks on the longest existing prefix.
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => return Err(outside()),
            }
        }
        let mut real = existing.canonicalize().map_err(|e| ScopeError::Invalid {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        if !real.starts_with(&self.root) {
            return Err(outside());
        }
        for name in rest.into_iter().rev() {
            real.push(name);
        }
        Ok(real)
    }

    /// Workspace paths starting with `prefix` (stub until the tools land).
    pub fn completions(&self, _prefix: &str, _limit: usize) -> Vec<String> {
        Vec::new()
    }
}
