//! A child pod's own git worktree (`spawn_agent` with `worktree: true`):
//! made from the parent's `HEAD` on branch `pod/<child name>` under
//! `<data-dir>/worktrees/`, found again when the parent restarts, removed
//! (when clean) with the child.
//!
//! What the child's commands may write is decided here too, because it
//! follows from how git lays a linked worktree out. The worktree's `.git`
//! is a file naming `<common dir>/worktrees/<id>/`, the worktree's own git
//! directory, where git keeps its `HEAD`, index and their reflog. A commit
//! also writes its objects into `<common dir>/objects/` and moves its
//! branch: a loose ref `refs/heads/pod/<child name>`, written as a `.lock`
//! file renamed over it, with its reflog in `logs/refs/heads/pod/`. So
//! the child may write: the worktree, its own git directory, the objects
//! directory, and the two `pod/` directories of refs and reflogs (Landlock
//! grants a directory, not one file, so the other `pod/` branches share
//! that grant). Nothing else of the repository: not its config, hooks,
//! `HEAD`, index or other branches, and not the parent's work tree. Objects
//! are named by their content, so adding one changes no existing commit.

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A child's worktree, as its parent made it or found it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// `<data-dir>/worktrees/<child name>`.
    pub root: PathBuf,
    /// Where the child works: the root, or the subdirectory of it that
    /// the parent's workspace is of its repository.
    pub workspace: PathBuf,
    /// `pod/<child name>`.
    pub branch: String,
    /// The repository's git directory (shared by all its worktrees).
    pub common: PathBuf,
    /// What the child's commands may write (see the module's note), the
    /// worktree's root first.
    pub writable: Vec<PathBuf>,
    /// The child's own temporary directory (its commands' `$TMPDIR`),
    /// `<data-dir>/worktrees/<child name>.tmp`: outside the worktree, so
    /// that it never shows as an untracked file.
    pub tmp: PathBuf,
}

/// The branch of the child called `name`.
pub fn branch_of(name: &str) -> String {
    format!("pod/{name}")
}

/// Where the worktree of the child called `name` goes.
pub fn root_of(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("worktrees").join(name)
}

/// What a new worktree needs from the parent's workspace: its repository.
pub struct Repo {
    /// The work tree's top directory.
    pub top: PathBuf,
    /// The workspace's path inside it (`""` at the top).
    pub prefix: PathBuf,
    /// The branches under `refs/heads/pod/`, as `pod/…`: names a new
    /// child must not take.
    pub pod_branches: Vec<String>,
}

/// The repository the workspace at `root` is in, or why `worktree: true`
/// cannot be had there.
pub async fn repo(root: &Path) -> Result<Repo, String> {
    let out = git(root, &["rev-parse", "--show-toplevel", "--show-prefix"])
        .await
        .map_err(|e| {
            format!(
                "the workspace {} is not in a git repository ({e}); a worktree needs one: \
                 spawn the agent without `worktree`, or ask the user to run `git init` and commit",
                root.display()
            )
        })?;
    let mut lines = out.lines();
    let top = PathBuf::from(lines.next().unwrap_or_default());
    let prefix = PathBuf::from(lines.next().unwrap_or_default());
    let branches = git(
        &top,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/pod/",
        ],
    )
    .await?;
    Ok(Repo {
        top,
        prefix,
        pod_branches: branches.lines().map(str::to_owned).collect(),
    })
}

/// Whether a child called `name` would find its branch or its worktree
/// directory already there (a removed child's, kept).
pub fn taken(repo: &Repo, data_dir: &Path, name: &str) -> bool {
    let branch = branch_of(name);
    repo.pod_branches.contains(&branch) || root_of(data_dir, name).exists()
}

/// Makes the child's worktree: `git worktree add -b pod/<name>` of `HEAD`.
pub async fn create(repo: &Repo, data_dir: &Path, name: &str) -> Result<Worktree, String> {
    let root = root_of(data_dir, name);
    let dir = data_dir.join("worktrees");
    crate::private::create_dir(&dir, false)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let branch = branch_of(name);
    let path = root.to_string_lossy().into_owned();
    git(
        &repo.top,
        &["worktree", "add", "--quiet", "-b", &branch, &path, "HEAD"],
    )
    .await
    .map_err(|e| format!("cannot make a git worktree at {path}: {e}"))?;
    let workspace = root.join(&repo.prefix);
    // The workspace may be a directory git does not track (empty, or all
    // ignored): the child still works there.
    std::fs::create_dir_all(&workspace)
        .map_err(|e| format!("cannot create {}: {e}", workspace.display()))?;
    found(data_dir, name, &workspace)
}

/// The worktree of the child called `name` whose workspace is
/// `workspace`, found again from the files git keeps (no process): `None`
/// when that workspace is not under the child's worktree directory.
pub fn open(data_dir: &Path, name: &str, workspace: &Path) -> Option<Result<Worktree, String>> {
    let root = root_of(data_dir, name);
    let canonical = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
    (workspace.starts_with(&root) || workspace.starts_with(&canonical))
        .then(|| found(data_dir, name, workspace))
}

fn found(data_dir: &Path, name: &str, workspace: &Path) -> Result<Worktree, String> {
    let root = root_of(data_dir, name);
    let dot_git = root.join(".git");
    let gone = |why: String| {
        format!(
            "the git worktree {} of agent {name} is not usable ({why}); its work is on branch \
             {}: `git worktree prune` forgets the worktree, and the branch keeps its commits",
            root.display(),
            branch_of(name)
        )
    };
    let text = std::fs::read_to_string(&dot_git)
        .map_err(|e| gone(format!("{}: {e}", dot_git.display())))?;
    let git_dir = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir:"))
        .map(|d| root.join(d.trim()))
        .ok_or_else(|| gone(format!("{} names no git directory", dot_git.display())))?;
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim()))
        .map_err(|e| gone(format!("{}: {e}", git_dir.join("commondir").display())))?;
    let common = std::fs::canonicalize(&common).unwrap_or(common);
    let writable = vec![
        root.clone(),
        git_dir,
        common.join("objects"),
        common.join("refs/heads/pod"),
        common.join("logs/refs/heads/pod"),
    ];
    // A commit's ref and reflog go into these: were they gone (packed by a
    // `git gc` meanwhile), the child could not make them again.
    for dir in &writable[3..] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let tmp = data_dir.join("worktrees").join(format!("{name}.tmp"));
    crate::private::create_dir(&tmp, false)
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    Ok(Worktree {
        root,
        workspace: workspace.to_path_buf(),
        branch: branch_of(name),
        common,
        writable,
        tmp,
    })
}

/// What removing a child did to its worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    Removed,
    /// Kept, and why (git refuses to remove changed or untracked files).
    Kept(String),
}

/// `git worktree remove` (never forced: a worktree with changes or
/// untracked files stays), and the child's temporary directory. The
/// branch always stays.
pub async fn remove(worktree: &Worktree) -> Removal {
    let _ = std::fs::remove_dir_all(&worktree.tmp);
    let path = worktree.root.to_string_lossy().into_owned();
    // From the repository, not from the worktree being removed.
    match git(&worktree.common, &["worktree", "remove", &path]).await {
        Ok(_) => Removal::Removed,
        Err(e) => Removal::Kept(format!(
            "the worktree {path} was kept ({e}); its branch {} stays either way. Commit or \
             discard its changes, then `git worktree remove {path}`",
            worktree.branch
        )),
    }
}

/// Runs git in `dir` and returns its standard output, or what it said on
/// standard error. The pod's own run, never confined: it makes the
/// worktree the child is confined to.
async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.trim();
    Err(if said.is_empty() {
        format!("git {} failed ({})", args.join(" "), out.status)
    } else {
        format!("git said: {said}")
    })
}
