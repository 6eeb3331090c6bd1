//! A checkpoint's manifest: every path it keeps, with its type, executable
//! bit and content (a digest in the object store) or link target.
//!
//! The manifest is itself an object of the store, so a checkpoint's id is
//! the digest of its manifest: two checkpoints of the same tree are one
//! object, and an id can never name a state that was not fully written
//! (the manifest is stored only after every content it names is durable).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::content::Digest;

/// At most this many skipped paths are listed; the rest are counted.
pub const MAX_SKIPPED_LISTED: usize = 100;

/// One kept path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Node {
    File {
        /// The content's digest, lowercase hex.
        digest: String,
        #[serde(default)]
        exec: bool,
    },
    Symlink {
        target: String,
    },
}

impl Node {
    /// The content's digest, for a file.
    pub fn digest(&self) -> Option<Digest> {
        match self {
            Node::File { digest, .. } => Digest::from_hex(digest),
            Node::Symlink { .. } => None,
        }
    }

    /// Git's mode for the node: `100644`, `100755` or `120000`.
    pub fn git_mode(&self) -> &'static str {
        match self {
            Node::File { exec: false, .. } => "100644",
            Node::File { exec: true, .. } => "100755",
            Node::Symlink { .. } => "120000",
        }
    }

    pub fn is_symlink(&self) -> bool {
        matches!(self, Node::Symlink { .. })
    }
}

/// The state of a workspace's files at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Workspace-relative paths (`/`-separated), sorted.
    pub files: BTreeMap<String, Node>,
    /// Paths not stored (too large, FIFOs, sockets, devices, names that are
    /// not UTF-8), sorted.
    #[serde(default)]
    pub skipped: Vec<String>,
}

impl Manifest {
    /// The manifest's bytes, as stored.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A map of strings cannot fail to serialise.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Whether `path` is listed in `skipped`.
    pub fn skips(&self, path: &str) -> bool {
        self.skipped
            .binary_search_by(|p| p.as_str().cmp(path))
            .is_ok()
    }

    /// The skipped paths as an entry lists them: at most
    /// [`MAX_SKIPPED_LISTED`], and how many more.
    pub fn skipped_for_entry(&self) -> (Vec<String>, Option<u64>) {
        let listed = self
            .skipped
            .iter()
            .take(MAX_SKIPPED_LISTED)
            .cloned()
            .collect();
        let more = self.skipped.len().saturating_sub(MAX_SKIPPED_LISTED);
        (listed, (more > 0).then_some(more as u64))
    }
}
