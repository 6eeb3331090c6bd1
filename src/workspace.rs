//! The workspace: the directory tools and `@` file refs may touch.
//!
//! Every path a model or a client names is resolved here, and nowhere else,
//! so the "stays inside the workspace" rule has exactly one implementation.
//! Files are opened only through [`Workspace::open`]: the path is first
//! resolved ([`Workspace::resolve`], which gives the friendly errors and
//! turns symlinks that stay inside into their targets), then opened relative
//! to a descriptor of the workspace root with the kernel refusing any
//! symlink and any way out ([`beneath`]). A symlink swapped in between the
//! two steps therefore makes the open fail; it can never redirect it.
//!
//! What is opened must be what the caller expects: a regular file for
//! reading and writing (a FIFO or a device would block a thread or never
//! end; every open is non-blocking and checked with `fstat` afterwards), a
//! directory for listing; and a file written or edited in place must have
//! no other hard link, since a link can make a file outside the workspace
//! look like one inside (see `docs/tools.md`).

mod beneath;

use std::fs::{self, File, Metadata};
use std::io::ErrorKind;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// The root, opened once: every file open is relative to it.
    root_fd: Arc<OwnedFd>,
}

/// A path that resolves outside the workspace, or cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("{path:?} is outside the workspace {root}")]
    Outside { path: String, root: String },
    #[error("{path:?}: {reason}")]
    Invalid { path: String, reason: String },
}

/// What a file is opened for: it decides the open flags and what the file
/// must turn out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read a regular file.
    Read,
    /// Replace a regular file's content, creating it and its parent
    /// directories when missing. The caller truncates: opening never does,
    /// so a file refused after the open is left untouched.
    Write,
    /// Read and rewrite an existing regular file.
    Edit,
    /// List a directory.
    Directory,
}

/// An open file and what `fstat` said about it right after the open.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub metadata: Metadata,
    /// Whether [`Access::Write`] created the file.
    pub created: bool,
}

/// Why [`Workspace::open`] refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Scope(#[from] ScopeError),
    #[error("no such file or directory")]
    NotFound,
    #[error("is a directory")]
    IsDirectory,
    #[error("is not a directory")]
    NotDirectory,
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error(
        "has {0} hard links; editing it in place would change the other links too, which \
         may be outside the workspace. To change only this name, give it its own copy first \
         (cp f f.new && mv f.new f)"
    )]
    HardLinked(u64),
    #[error("changed while being opened (a symlink appeared in its path); nothing was done")]
    Changed,
    #[error("permission denied")]
    PermissionDenied,
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<Errno> for OpenError {
    fn from(e: Errno) -> Self {
        match e {
            Errno::NOENT => OpenError::NotFound,
            Errno::ISDIR => OpenError::IsDirectory,
            Errno::NOTDIR => OpenError::NotDirectory,
            // `O_NONBLOCK` write-open of a FIFO nobody reads, or a device.
            Errno::NXIO | Errno::NODEV => OpenError::NotRegular("a FIFO, socket or device"),
            Errno::LOOP | Errno::XDEV => OpenError::Changed,
            Errno::ACCESS | Errno::PERM => OpenError::PermissionDenied,
            e => OpenError::Io(e.into()),
        }
    }
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(raw) => Errno::from_raw_os_error(raw).into(),
            None => OpenError::Io(e),
        }
    }
}

/// What a file type is called in an error.
fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symlink"
    } else {
        "not a plain file"
    }
}

impl Workspace {
    /// Canonicalises `root` so that later prefix checks compare real paths.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let root_fd = rustix::fs::openat(
            rustix::fs::CWD,
            &root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            root,
            root_fd: Arc::new(root_fd),
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

    /// Opens `path` for `access`: the one way any tool or file ref opens a
    /// file in the workspace (see the module doc for what it guarantees).
    pub fn open(&self, path: &str, access: Access) -> Result<Opened, OpenError> {
        let rel = self.relative(&self.resolve(path)?, path)?;
        let root = self.root_fd.as_fd();
        let base = OFlags::NONBLOCK | OFlags::NOCTTY;
        let (fd, created) = match access {
            Access::Read => (
                beneath::open(root, &rel, base | OFlags::RDONLY, Mode::empty())?,
                false,
            ),
            Access::Edit => (
                beneath::open(root, &rel, base | OFlags::RDWR, Mode::empty())?,
                false,
            ),
            Access::Directory => (
                beneath::open(
                    root,
                    &rel,
                    OFlags::RDONLY | OFlags::DIRECTORY,
                    Mode::empty(),
                )?,
                false,
            ),
            Access::Write => {
                match beneath::open(root, &rel, base | OFlags::WRONLY, Mode::empty()) {
                    Err(Errno::NOENT) => {
                        if let Some(parent) = rel.parent() {
                            beneath::create_dirs(root, parent)?;
                        }
                        let flags = base | OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
                        (
                            beneath::open(root, &rel, flags, Mode::from_raw_mode(0o666))?,
                            true,
                        )
                    }
                    result => (result?, false),
                }
            }
        };
        let file = File::from(fd);
        let metadata = file.metadata()?;
        let kind = metadata.file_type();
        match access {
            Access::Directory if !kind.is_dir() => return Err(OpenError::NotDirectory),
            Access::Directory => {}
            _ if kind.is_dir() => return Err(OpenError::IsDirectory),
            _ if !kind.is_file() => return Err(OpenError::NotRegular(describe(kind))),
            Access::Write | Access::Edit if metadata.nlink() > 1 => {
                return Err(OpenError::HardLinked(metadata.nlink()))
            }
            _ => {}
        }
        Ok(Opened {
            file,
            metadata,
            created,
        })
    }

    /// Whether `real` (a path under the root, as a walk produced it) can
    /// still be reached from the root without a symlink: false when a
    /// directory on the way was swapped for a link since it was listed.
    pub fn still_inside(&self, real: &Path) -> bool {
        real.strip_prefix(&self.root).is_ok_and(|rel| {
            beneath::open(self.root_fd.as_fd(), rel, OFlags::PATH, Mode::empty()).is_ok()
        })
    }

    /// `real`, a path [`Self::resolve`] returned, relative to the root.
    fn relative(&self, real: &Path, path: &str) -> Result<PathBuf, ScopeError> {
        match real.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => Ok(PathBuf::from(".")),
            Ok(rel) => Ok(rel.to_owned()),
            Err(_) => Err(ScopeError::Outside {
                path: path.to_owned(),
                root: self.root.display().to_string(),
            }),
        }
    }

    /// Whether the `ignore` crate may walk from `start` (a directory, or a
    /// file whose directory is walked): see [`ignore_files_are_plain`].
    /// The crate reads the ignore files of every directory above the start
    /// too; those inside the workspace are checked here, the ones above it
    /// are the user's own.
    pub fn check_walk(&self, start: &Path) -> Result<(), String> {
        let dir = if start.is_dir() {
            start
        } else {
            start.parent().unwrap_or(start)
        };
        for dir in dir.ancestors().take_while(|d| d.starts_with(&self.root)) {
            ignore_files_are_plain(dir)?;
        }
        Ok(())
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
        if self.check_walk(&dir).is_err() {
            return Vec::new();
        }
        let show_hidden = name_part.starts_with('.');
        let mut found = self.list_matching(&dir, dir_part, name_part, show_hidden, true);
        if found.is_empty() && !name_part.is_empty() {
            found = self.list_matching(&dir, dir_part, name_part, show_hidden, false);
        }
        if found.is_empty() && !name_part.is_empty() {
            return self.fuzzy(prefix, limit);
        }
        found.sort();
        found.truncate(limit);
        found
    }

    /// When no path starts with `prefix`: the workspace's files whose path
    /// matches it fuzzily (`ops` finds `calc/ops.py`), best first — among
    /// the first [`FUZZY_WALK_LIMIT`] files the walk lists, not ignored,
    /// not hidden.
    fn fuzzy(&self, prefix: &str, limit: usize) -> Vec<String> {
        use fuzzy_matcher::skim::SkimMatcherV2;
        use fuzzy_matcher::FuzzyMatcher;
        if self.check_walk(&self.root).is_err() {
            return Vec::new();
        }
        let matcher = SkimMatcherV2::default();
        let walker = ignore::WalkBuilder::new(&self.root)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| {
                !e.file_type().is_some_and(|t| t.is_dir())
                    || ignore_files_are_plain(e.path()).is_ok()
            })
            .build();
        let mut scored: Vec<(i64, String)> = walker
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .take(FUZZY_WALK_LIMIT)
            .filter_map(|e| {
                let relative = e.path().strip_prefix(&self.root).ok()?.to_str()?.to_owned();
                let score = matcher.fuzzy_match(&relative, prefix)?;
                Some((score, relative))
            })
            .collect();
        scored.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.len().cmp(&b.1.len()))
                .then(a.1.cmp(&b.1))
        });
        scored
            .into_iter()
            .map(|(_, path)| path)
            .filter(|path| self.resolve(path).is_ok())
            .take(limit)
            .collect()
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

/// How many files a fuzzy completion looks at: a completion answers while
/// the user types, so a huge tree is cut rather than walked whole.
const FUZZY_WALK_LIMIT: usize = 20_000;

/// What the `ignore` crate opens in a directory it walks.
const IGNORE_FILES: &[&str] = &[".gitignore", ".ignore", ".git", ".git/info/exclude"];

/// Whether the ignore files in `dir` are safe to open: none is a FIFO,
/// socket or device. The `ignore` crate opens them with a plain blocking
/// `open`, and a FIFO named `.gitignore` would block a walk (`grep`, `glob`,
/// completions) forever — past cancellation, holding up shutdown. `stat`
/// of such a file does not block.
pub fn ignore_files_are_plain(dir: &Path) -> Result<(), String> {
    for name in IGNORE_FILES {
        let path = dir.join(name);
        if let Ok(meta) = fs::metadata(&path) {
            let kind = meta.file_type();
            if !kind.is_file() && !kind.is_dir() {
                return Err(format!(
                    "{} is {}, not a file: walking there would block on opening it",
                    path.display(),
                    describe(kind)
                ));
            }
        }
    }
    Ok(())
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
        assert_eq!(
            ws.completions(&format!("{root}/src/ma"), 10),
            vec!["src/main.rs"]
        );
        assert_eq!(
            ws.completions(&format!("{root}/"), 10),
            vec!["README.md", "src/"]
        );
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

    /// First hour, item 9: `@ops` finds `calc/ops.py`.
    #[test]
    fn a_prefix_nothing_starts_with_completes_fuzzily() {
        let (_d, ws) = setup();
        touch(&ws, "calc/ops.py");
        touch(&ws, "calc/main.py");
        touch(&ws, "docs/operations.md");
        touch(&ws, "target/ops.o");
        fs::write(ws.root().join(".gitignore"), "target/\n").unwrap();
        let found = ws.completions("ops", 10);
        assert_eq!(
            found.first().map(String::as_str),
            Some("calc/ops.py"),
            "{found:?}"
        );
        assert!(!found.iter().any(|f| f.starts_with("target/")), "{found:?}");
        assert!(ws.completions("zzzq", 10).is_empty());
        // A prefix that matches keeps its plain answer.
        assert_eq!(ws.completions("calc/m", 10), vec!["calc/main.py"]);
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
