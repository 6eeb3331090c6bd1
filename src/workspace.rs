//! The workspace: the directory tools and `@` file refs may touch.
//!
//! Every path a model or a client names is resolved here, and nowhere else,
//! so the "stays inside the workspace" rule has exactly one implementation.
//! Callers then operate on the path [`Workspace::resolve`] returned, never on
//! the string they were given.
//!
//! The check is made when the path is resolved; a symlink swapped in between
//! the check and the use (a race only a process already running inside the
//! workspace could win) is not defended against.

use std::fs;
use std::io::ErrorKind;
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

    /// Resolves a path relative to the workspace root, or an absolute one
    /// that lies inside it (what a user pastes from their shell). Paths that
    /// escape — absolute ones elsewhere, `..` that climbs out, symlinks whose
    /// target lies outside — are all refused. The path
    /// need not exist (a file about to be written); its deepest existing
    /// ancestor is canonicalised and checked, so the returned path is real up
    /// to that ancestor and lexical below it.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ScopeError> {
        let outside = || ScopeError::Outside {
            path: path.to_owned(),
            root: self.root.display().to_string(),
        };
        let invalid = |reason: &str| ScopeError::Invalid {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        if path.is_empty() {
            return Err(invalid("empty path"));
        }
        if path.contains('\0') {
            return Err(invalid("path contains a NUL byte"));
        }
        let rel = Path::new(path);
        let mut joined = if rel.is_absolute() {
            PathBuf::from("/")
        } else {
            self.root.clone()
        };
        for component in rel.components() {
            match component {
                Component::Normal(c) => joined.push(c),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !joined.pop() || !joined.starts_with(&self.root) {
                        return Err(outside());
                    }
                }
                Component::RootDir => {}
                Component::Prefix(_) => return Err(outside()),
            }
        }
        // Find the deepest ancestor that exists *as a directory entry*:
        // `symlink_metadata` sees a dangling symlink, which `exists()` would
        // skip — and writing through it would create its target, wherever
        // that is.
        let mut existing = joined.as_path();
        let mut rest = Vec::new();
        loop {
            match fs::symlink_metadata(existing) {
                Ok(_) => break,
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    match (existing.parent(), existing.file_name()) {
                        (Some(parent), Some(name)) => {
                            rest.push(name.to_owned());
                            existing = parent;
                        }
                        _ => return Err(outside()),
                    }
                }
                Err(e) => return Err(invalid(&e.to_string())),
            }
        }
        let mut real = existing.canonicalize().map_err(|e| {
            if e.kind() == ErrorKind::NotFound {
                invalid("is or passes through a symlink whose target does not exist")
            } else {
                invalid(&e.to_string())
            }
        })?;
        if !real.starts_with(&self.root) {
            return Err(outside());
        }
        for name in rest.into_iter().rev() {
            real.push(name);
        }
        Ok(real)
    }

    /// Completions for a `list_completions` request of kind `file`: the
    /// workspace-relative paths that start with `prefix`, directories ending
    /// in `/`, sorted, at most `limit`.
    ///
    /// The prefix may name directories (`src/ma` lists `src/` and keeps the
    /// entries starting with `ma`). Hidden entries appear only when the typed
    /// name starts with `.`; ignored ones (`.gitignore`, `.ignore`) only when
    /// nothing else matches, i.e. when the prefix can only mean them. A
    /// prefix that resolves outside the workspace completes to nothing.
    ///
    /// An absolute prefix inside the workspace (pasted from a shell)
    /// completes to workspace-relative paths like any other: every value a
    /// client gets is a path it can send back in a `file_ref`.
    pub fn completions(&self, prefix: &str, limit: usize) -> Vec<String> {
        let (dir_part, name_part) = match prefix.rfind('/') {
            Some(i) => prefix.split_at(i + 1),
            None => ("", prefix),
        };
        let relative;
        let dir_part = if Path::new(dir_part).is_absolute() {
            let Some(rel) = self.relative_dir(dir_part) else {
                return Vec::new();
            };
            relative = rel;
            relative.as_str()
        } else {
            dir_part
        };
        let dir = match self.resolve(if dir_part.is_empty() { "." } else { dir_part }) {
            Ok(dir) if dir.is_dir() => dir,
            _ => return Vec::new(),
        };
        let show_hidden = name_part.starts_with('.');
        let mut found = self.list_matching(&dir, dir_part, name_part, show_hidden, true);
        if found.is_empty() && !name_part.is_empty() {
            found = self.list_matching(&dir, dir_part, name_part, show_hidden, false);
        }
        found.sort();
        found.truncate(limit);
        found
    }

    /// The workspace-relative form of an absolute directory inside the
    /// workspace: `""` for the root, else ending in `/`.
    fn relative_dir(&self, absolute: &str) -> Option<String> {
        let real = self.resolve(absolute).ok()?;
        let rel = real.strip_prefix(&self.root).ok()?.to_str()?;
        Some(if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        })
    }

    /// One directory level of candidates for [`Self::completions`]. Each is
    /// checked with [`Self::resolve`] so that a symlink pointing out of the
    /// workspace is never offered.
    fn list_matching(
        &self,
        dir: &Path,
        dir_part: &str,
        name_part: &str,
        show_hidden: bool,
        respect_ignores: bool,
    ) -> Vec<String> {
        let walker = ignore::WalkBuilder::new(dir)
            .max_depth(Some(1))
            .standard_filters(respect_ignores)
            .hidden(!show_hidden)
            .require_git(false)
            .build();
        let mut out = Vec::new();
        for entry in walker.flatten() {
            if entry.depth() == 0 {
                continue;
            }
            let Some(name) = entry.file_name().to_str() else {
                continue;
            };
            if !name.starts_with(name_part) {
                continue;
            }
            let candidate = format!("{dir_part}{name}");
            let Ok(real) = self.resolve(&candidate) else {
                continue;
            };
            if real.is_dir() {
                out.push(format!("{candidate}/"));
            } else {
                out.push(candidate);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    fn is_outside(r: Result<PathBuf, ScopeError>) -> bool {
        matches!(r, Err(ScopeError::Outside { .. }))
    }

    #[test]
    fn plain_and_dot_paths_resolve_inside() {
        let (_d, ws) = setup();
        fs::create_dir(ws.root().join("src")).unwrap();
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
        assert_eq!(ws.resolve("./src").unwrap(), ws.root().join("src"));
        assert_eq!(ws.resolve("src/../src/.").unwrap(), ws.root().join("src"));
    }

    #[test]
    fn empty_and_nul_are_invalid() {
        let (_d, ws) = setup();
        assert!(matches!(ws.resolve(""), Err(ScopeError::Invalid { .. })));
        assert!(matches!(
            ws.resolve("a\0b"),
            Err(ScopeError::Invalid { .. })
        ));
    }

    #[test]
    fn absolute_and_climbing_paths_are_outside() {
        let (_d, ws) = setup();
        assert!(is_outside(ws.resolve("/etc/passwd")));
        assert!(is_outside(ws.resolve("..")));
        assert!(is_outside(ws.resolve("../x")));
        assert!(is_outside(ws.resolve("a/../../x")));
        assert!(is_outside(ws.resolve("a/b/../../../x")));
        let parent = ws.root().parent().unwrap().display().to_string();
        assert!(is_outside(ws.resolve(&parent)));
        let sibling = format!("{}-sibling/x", ws.root().display());
        assert!(is_outside(ws.resolve(&sibling)));
    }

    #[test]
    fn absolute_paths_inside_the_workspace_resolve() {
        let (_d, ws) = setup();
        let root = ws.root().display().to_string();
        assert_eq!(ws.resolve(&root).unwrap(), ws.root());
        assert_eq!(
            ws.resolve(&format!("{root}/src/new.rs")).unwrap(),
            ws.root().join("src/new.rs")
        );
        assert!(is_outside(ws.resolve(&format!("{root}/../x"))));
    }

    #[test]
    fn nonexistent_nested_paths_resolve_inside() {
        let (_d, ws) = setup();
        assert_eq!(
            ws.resolve("new/deep/file.txt").unwrap(),
            ws.root().join("new/deep/file.txt")
        );
        assert_eq!(ws.resolve("new/../x").unwrap(), ws.root().join("x"));
    }

    #[test]
    fn symlinks_leading_outside_are_refused() {
        let (_d, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        symlink("/etc", ws.root().join("etc")).unwrap();
        symlink("/etc/passwd", ws.root().join("passwd")).unwrap();
        symlink(outside.path(), ws.root().join("out")).unwrap();
        assert!(is_outside(ws.resolve("etc")));
        assert!(is_outside(ws.resolve("etc/passwd")));
        assert!(is_outside(ws.resolve("passwd")));
        assert!(is_outside(ws.resolve("out/new-file")));
        assert!(is_outside(ws.resolve("out/new/nested")));
    }

    #[test]
    fn dangling_symlinks_are_refused() {
        let (_d, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path().join("nope"), ws.root().join("dangling")).unwrap();
        assert!(ws.resolve("dangling").is_err());
        assert!(ws.resolve("dangling/x").is_err());
    }

    #[test]
    fn symlinks_inside_resolve_to_their_target() {
        let (_d, ws) = setup();
        fs::create_dir(ws.root().join("real")).unwrap();
        symlink(ws.root().join("real"), ws.root().join("alias")).unwrap();
        assert_eq!(ws.resolve("alias/f").unwrap(), ws.root().join("real/f"));
    }

    fn touch(ws: &Workspace, rel: &str) {
        let p = ws.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "x").unwrap();
    }

    #[test]
    fn completions_follow_directories_and_mark_them() {
        let (_d, ws) = setup();
        touch(&ws, "src/main.rs");
        touch(&ws, "src/mod/x.rs");
        touch(&ws, "src/lib.rs");
        touch(&ws, "README.md");
        assert_eq!(ws.completions("src/ma", 10), vec!["src/main.rs"]);
        assert_eq!(ws.completions("src/m", 10), vec!["src/main.rs", "src/mod/"]);
        assert_eq!(ws.completions("", 10), vec!["README.md", "src/"]);
        assert_eq!(ws.completions("src/", 2), vec!["src/lib.rs", "src/main.rs"]);
        assert!(ws.completions("nope/", 10).is_empty());
        assert!(ws.completions("src/main.rs/", 10).is_empty());
    }

    #[test]
    fn absolute_prefixes_complete_to_workspace_relative_paths() {
        let (_d, ws) = setup();
        touch(&ws, "src/main.rs");
        touch(&ws, "README.md");
        let root = ws.root().display().to_string();
        assert_eq!(ws.completions(&format!("{root}/src/ma"), 10), vec!["src/main.rs"]);
        assert_eq!(ws.completions(&format!("{root}/"), 10), vec!["README.md", "src/"]);
        assert_eq!(ws.completions(&format!("{root}/R"), 10), vec!["README.md"]);
        assert!(ws.completions("/etc/pass", 10).is_empty());
        assert!(ws.completions(&format!("{root}/../"), 10).is_empty());
    }

    #[test]
    fn completions_hide_hidden_and_ignored_unless_named() {
        let (_d, ws) = setup();
        touch(&ws, ".env");
        touch(&ws, "target/debug/pod");
        touch(&ws, "tests/a.rs");
        fs::write(ws.root().join(".gitignore"), "target/\n").unwrap();
        assert_eq!(ws.completions("", 10), vec!["tests/"]);
        assert_eq!(ws.completions("t", 10), vec!["tests/"]);
        assert_eq!(ws.completions("tar", 10), vec!["target/"]);
        assert_eq!(ws.completions("target/", 10), vec!["target/debug/"]);
        assert_eq!(ws.completions(".e", 10), vec![".env"]);
        assert_eq!(ws.completions(".", 10), vec![".env", ".gitignore"]);
        touch(&ws, ".pod/knowledge/style.md");
        assert_eq!(ws.completions(".pod/kn", 10), vec![".pod/knowledge/"]);
        assert_eq!(
            ws.completions(".pod/knowledge/", 10),
            vec![".pod/knowledge/style.md"]
        );
    }

    #[test]
    fn completions_never_escape() {
        let (_d, ws) = setup();
        symlink("/etc", ws.root().join("etc")).unwrap();
        assert!(ws.completions("../", 10).is_empty());
        assert!(ws.completions("/et", 10).is_empty());
        assert!(ws.completions("etc/", 10).is_empty());
        assert!(ws.completions("et", 10).is_empty());
    }
}
