//! A checkpoint's manifest: every path it keeps, with its type, executable
//! bit and content (a digest in the object store) or link target.
//!
//! The manifest is itself an object of the store, so a checkpoint's id is
//! the digest of its manifest: two checkpoints of the same tree are one
//! object, and an id can never name a state that was not fully written
//! (the manifest is stored only after every content it names is durable).
//!
//! It is stored as git stores a tree: one object per directory, naming its
//! files and links and each subdirectory's object by digest (see
//! [`Manifest::to_trees`]), so a checkpoint that changed one file writes
//! the objects of that file's directories only.

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

/// One name in a stored tree: a file or link of the directory, or a
/// subdirectory by the digest of its own tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TreeEntry {
    File {
        digest: String,
        #[serde(default)]
        exec: bool,
    },
    Symlink {
        target: String,
    },
    Dir {
        tree: String,
    },
}

/// A stored object of a manifest: one directory's names (`tree`), and, in
/// the root only, the skipped paths. A manifest written before trees
/// existed is one flat object with `files` instead, and is still read.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tree: Option<BTreeMap<String, TreeEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files: Option<BTreeMap<String, Node>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<String>,
}

/// A manifest as the objects that store it.
pub struct Trees {
    /// The tree objects built, each directory's before its parent's. A
    /// directory whose tree was reused from the previous manifest (see
    /// [`Manifest::to_trees_after`]) has none here.
    pub objects: Vec<(Digest, Vec<u8>)>,
    /// The root's digest: the checkpoint's id.
    pub root: Digest,
    /// Every directory's tree digest, by its path (`""` for the root,
    /// `"a/b/"` below it): what the next manifest reuses.
    pub dirs: BTreeMap<String, Digest>,
}

impl Manifest {
    /// The manifest as a tree of objects, one per directory, as git stores
    /// a commit's tree: a checkpoint that changed one file of a large
    /// workspace stores only the trees on that file's path, the rest are
    /// the previous checkpoint's objects by digest.
    pub fn to_trees(&self) -> Trees {
        self.to_trees_after(None)
    }

    /// [`Manifest::to_trees`], reusing the trees of `previous` (a manifest
    /// and its [`Trees::dirs`]) for every directory none of whose entries
    /// changed, as git's cache-tree does: serialising and hashing the
    /// 100-odd trees of a 10,000-file workspace cost more than the walk's
    /// bookkeeping, and a turn usually changes a few of them. The caller
    /// vouches that every tree `previous` names is still stored.
    pub fn to_trees_after(
        &self,
        previous: Option<(&Manifest, &BTreeMap<String, Digest>)>,
    ) -> Trees {
        let entries: Vec<(&str, &Node)> = self.files.iter().map(|(p, n)| (p.as_str(), n)).collect();
        let before: Vec<(&str, &Node)> = previous
            .map(|(manifest, _)| {
                manifest
                    .files
                    .iter()
                    .map(|(p, n)| (p.as_str(), n))
                    .collect()
            })
            .unwrap_or_default();
        let mut build = Build {
            before: &before,
            before_dirs: previous.map(|(_, dirs)| dirs),
            objects: Vec::new(),
            dirs: BTreeMap::new(),
        };
        // The root holds the skipped paths too: with those changed it is
        // built again, though its subdirectories may still be reused.
        let reusable = previous.is_some_and(|(manifest, _)| manifest.skipped == self.skipped);
        let root = build.tree(&mut String::new(), &entries, self.skipped.clone(), reusable);
        build.done(root)
    }

    /// Reads a stored manifest whose root object is `root`, fetching each
    /// subtree with `get`; also returns the digests of its tree objects
    /// (the root's aside), which a collection must keep with it.
    pub fn from_stored(
        root: &[u8],
        get: &mut dyn FnMut(&Digest) -> std::io::Result<Vec<u8>>,
    ) -> std::io::Result<(Self, Vec<Digest>)> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
        let top: Stored =
            serde_json::from_slice(root).map_err(|e| invalid(format!("manifest: {e}")))?;
        let mut manifest = Manifest {
            files: BTreeMap::new(),
            skipped: top.skipped,
        };
        if let Some(files) = top.files {
            manifest.files = files;
            return Ok((manifest, Vec::new()));
        }
        let mut trees = Vec::new();
        // Directories still to read: (path prefix, names). Iterative, so a
        // deep tree cannot exhaust the stack.
        let mut pending = vec![(String::new(), top.tree.unwrap_or_default())];
        while let Some((prefix, names)) = pending.pop() {
            for (name, entry) in names {
                if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                    return Err(invalid(format!("manifest: bad name {name:?}")));
                }
                let path = format!("{prefix}{name}");
                match entry {
                    TreeEntry::File { digest, exec } => {
                        manifest.files.insert(path, Node::File { digest, exec });
                    }
                    TreeEntry::Symlink { target } => {
                        manifest.files.insert(path, Node::Symlink { target });
                    }
                    TreeEntry::Dir { tree } => {
                        let digest = Digest::from_hex(&tree)
                            .ok_or_else(|| invalid(format!("manifest: bad tree {tree:?}")))?;
                        let bytes = get(&digest)?;
                        if Digest::of(&bytes) != digest {
                            return Err(invalid(format!("tree {tree} is damaged")));
                        }
                        let sub: Stored = serde_json::from_slice(&bytes)
                            .map_err(|e| invalid(format!("tree {tree}: {e}")))?;
                        trees.push(digest);
                        pending.push((format!("{path}/"), sub.tree.unwrap_or_default()));
                    }
                }
            }
        }
        Ok((manifest, trees))
    }
}

/// The state of one [`Manifest::to_trees_after`].
struct Build<'a> {
    /// The previous manifest's entries (full paths, sorted).
    before: &'a [(&'a str, &'a Node)],
    /// The previous manifest's trees, when there is one to reuse.
    before_dirs: Option<&'a BTreeMap<String, Digest>>,
    objects: Vec<(Digest, Vec<u8>)>,
    dirs: BTreeMap<String, Digest>,
}

impl Build<'_> {
    fn done(self, root: Digest) -> Trees {
        Trees {
            objects: self.objects,
            root,
            dirs: self.dirs,
        }
    }

    /// The previous tree of the directory `dir` (its path with a trailing
    /// `/`, or `""` for the root), when its sorted entries (paths relative
    /// to it) were exactly `entries`; its subdirectories' digests are
    /// carried over with it.
    fn reuse(&mut self, dir: &str, entries: &[(&str, &Node)]) -> Option<Digest> {
        let dirs = self.before_dirs?;
        let digest = *dirs.get(dir)?;
        let start = self.before.partition_point(|(p, _)| *p < dir);
        let same = self.before[start..]
            .iter()
            .take_while(|(p, _)| p.starts_with(dir))
            .map(|(p, n)| (&p[dir.len()..], *n))
            .eq(entries.iter().copied());
        if !same {
            return None;
        }
        let from = (std::ops::Bound::Included(dir), std::ops::Bound::Unbounded);
        for (path, digest) in dirs.range::<str, _>(from) {
            if !path.starts_with(dir) {
                break;
            }
            self.dirs.insert(path.clone(), *digest);
        }
        Some(digest)
    }

    /// Stores the directory `dir` (as [`Build::reuse`] names it) whose
    /// sorted entries (paths relative to it) are `entries`, and every
    /// directory below it, children first; returns its digest. `dir` is
    /// used as a buffer and left as it was given.
    fn tree(
        &mut self,
        dir: &mut String,
        entries: &[(&str, &Node)],
        skipped: Vec<String>,
        reusable: bool,
    ) -> Digest {
        if reusable {
            if let Some(digest) = self.reuse(dir, entries) {
                return digest;
            }
        }
        let mut tree = BTreeMap::new();
        let mut i = 0;
        while i < entries.len() {
            let (path, node) = entries[i];
            let Some((name, _)) = path.split_once('/') else {
                let entry = match node {
                    Node::File { digest, exec } => TreeEntry::File {
                        digest: digest.clone(),
                        exec: *exec,
                    },
                    Node::Symlink { target } => TreeEntry::Symlink {
                        target: target.clone(),
                    },
                };
                tree.insert(path.to_owned(), entry);
                i += 1;
                continue;
            };
            // Paths sharing the prefix `name/` are next to each other in order.
            let prefix = name.len() + 1;
            let inside: Vec<(&str, &Node)> = entries[i..]
                .iter()
                .take_while(|(p, _)| {
                    p.len() > name.len() && p.starts_with(name) && p.as_bytes()[name.len()] == b'/'
                })
                .map(|(p, n)| (&p[prefix..], *n))
                .collect();
            i += inside.len();
            let outer = dir.len();
            dir.push_str(name);
            dir.push('/');
            let digest = self.tree(dir, &inside, Vec::new(), true);
            dir.truncate(outer);
            tree.insert(name.to_owned(), TreeEntry::Dir { tree: digest.hex() });
        }
        let stored = Stored {
            tree: Some(tree),
            files: None,
            skipped,
        };
        // A map of strings cannot fail to serialise.
        let bytes = serde_json::to_vec(&stored).unwrap_or_default();
        let digest = Digest::of(&bytes);
        self.objects.push((digest, bytes));
        self.dirs.insert(dir.clone(), digest);
        digest
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    fn file(n: u8) -> Node {
        Node::File {
            digest: Digest::of(&[n]).hex(),
            exec: n % 2 == 1,
        }
    }

    fn read_back(trees: &Trees) -> (Manifest, Vec<Digest>) {
        let objects: HashMap<Digest, Vec<u8>> = trees.objects.iter().cloned().collect();
        let root = trees.root;
        Manifest::from_stored(&objects[&root], &mut |d| {
            objects
                .get(d)
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        })
        .unwrap()
    }

    #[test]
    fn a_manifest_stored_as_trees_reads_back_the_same() {
        let mut manifest = Manifest::default();
        for (i, path) in ["a.txt", "a/b", "a/c/d", "a0", "b/x", "b/y/z/w", "top"]
            .iter()
            .enumerate()
        {
            manifest.files.insert((*path).into(), file(i as u8));
        }
        manifest.files.insert(
            "a/link".into(),
            Node::Symlink {
                target: "../top".into(),
            },
        );
        manifest.skipped = vec!["fifo".into()];
        let trees = manifest.to_trees();
        // The root and a, a/c, b, b/y, b/y/z.
        assert_eq!(trees.objects.len(), 6);
        let (back, subtrees) = read_back(&trees);
        assert_eq!(back, manifest);
        assert_eq!(subtrees.len(), 5);
    }

    #[test]
    fn one_changed_file_changes_only_the_trees_on_its_path() {
        let mut manifest = Manifest::default();
        for d in 0..10 {
            for f in 0..10 {
                manifest.files.insert(format!("d{d}/f{f}"), file(f));
            }
        }
        let before: HashSet<Digest> = manifest.to_trees().objects.iter().map(|o| o.0).collect();
        manifest.files.insert("d3/f3".into(), file(99));
        let after = manifest.to_trees();
        let new: Vec<_> = after
            .objects
            .iter()
            .filter(|o| !before.contains(&o.0))
            .collect();
        assert_eq!(new.len(), 2, "d3 and the root");
    }

    #[test]
    fn trees_reused_from_the_previous_manifest_are_the_ones_a_full_build_makes() {
        let mut manifest = Manifest::default();
        for d in 0..5 {
            for f in 0..5 {
                manifest.files.insert(format!("d{d}/s/f{f}"), file(f));
                manifest.files.insert(format!("d{d}/f{f}"), file(f));
            }
        }
        manifest.files.insert("top".into(), file(1));
        let first = manifest.to_trees();
        let previous = manifest.clone();
        let same = manifest.to_trees_after(Some((&previous, &first.dirs)));
        assert_eq!(same.root, first.root);
        assert!(same.objects.is_empty());
        assert_eq!(same.dirs, first.dirs);

        manifest.files.insert("d3/s/f3".into(), file(99));
        manifest.files.remove("d1/f0");
        manifest.skipped = vec!["fifo".into()];
        let full = manifest.to_trees();
        let reused = manifest.to_trees_after(Some((&previous, &first.dirs)));
        assert_eq!(reused.root, full.root);
        assert_eq!(reused.dirs, full.dirs);
        let built: HashSet<&str> = reused
            .dirs
            .iter()
            .filter(|(_, d)| reused.objects.iter().any(|(o, _)| o == *d))
            .map(|(p, _)| p.as_str())
            .collect();
        assert_eq!(built, HashSet::from(["", "d1/", "d3/", "d3/s/"]));
    }

    #[test]
    fn a_flat_manifest_of_an_earlier_version_is_still_read() {
        let old = br#"{"files":{"a/b":{"type":"file","digest":"00","exec":true},"l":{"type":"symlink","target":"a"}},"skipped":["s"]}"#;
        let (manifest, trees) =
            Manifest::from_stored(old, &mut |_| Err(std::io::ErrorKind::NotFound.into())).unwrap();
        assert_eq!(manifest.files.len(), 2);
        assert!(manifest.skips("s"));
        assert!(trees.is_empty());
    }
}
