//! The facts of the `environment` entry that cost a process to learn — the
//! bash the tools run and the repository's changed-file count — learned off
//! the turn's critical path and kept between turns.
//!
//! A turn used to start a confined `bash` running `git status` before its
//! model request, tens of milliseconds every turn. Now:
//! - the bash version is asked once per pod, as the pod starts;
//! - the branch is read from `HEAD` (a linked worktree's `.git` file
//!   followed), a few small reads, so a branch switch is seen at the very
//!   next step boundary;
//! - the count comes from `git status` (run directly, no shell, as confined
//!   as a `bash` command: a repository's config can name programs git
//!   runs), counted as the pod starts and again only when `HEAD`, the index
//!   or the repository's config has changed since (their inodes, sizes and
//!   mtimes, and `HEAD`'s text, are the stamp). The count alone never
//!   makes the entry committed, so it is only asked for when another line
//!   changed.
//!
//! What the stamp cannot see: edits to tracked files that nothing has
//! staged leave the index as it was, so the count the model is told can lag
//! them until the next `git add`, commit, checkout or restart. A branch
//! switch, the usual reason for a new entry, rewrites `HEAD` and the index
//! and so is always counted afresh.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::AsyncReadExt;

use crate::tools::Toolbox;

/// How long `bash` or `git status` may take before the line says so.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The most of `HEAD` or a `.git` file read: one short line is expected.
const SMALL_FILE: u64 = 4096;

/// What the pod keeps between turns; one per pod, shared by its turns.
pub struct Probe {
    root: PathBuf,
    toolbox: Arc<Toolbox>,
    shell: tokio::sync::OnceCell<String>,
    /// The last count, with the stamp it was counted under. A mutex so that
    /// a turn asking while the count runs waits for it instead of starting
    /// a second `git status`.
    count: tokio::sync::Mutex<Option<(Stamp, String)>>,
}

/// A repository the workspace is in, as found from the workspace up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `.git`, or the linked worktree's directory under the main one's.
    git_dir: PathBuf,
    /// Where the config is: the main repository's git directory.
    common_dir: PathBuf,
    head: String,
}

/// What a count is valid for: while none of it changes, neither can the
/// count (see the module's note on unstaged edits).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    git_dir: PathBuf,
    head: String,
    files: [Option<FileStamp>; 3],
}

/// One file of a [`Stamp`]. git replaces `HEAD`, the index and the config
/// by renaming a new file over them, so the inode changes with every write
/// even within one tick of the kernel's coarse file clock, where the mtime
/// alone could not tell two writes apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    size: u64,
    modified: Option<SystemTime>,
}

impl Probe {
    pub fn new(root: PathBuf, toolbox: Arc<Toolbox>) -> Rc<Self> {
        Rc::new(Self {
            root,
            toolbox,
            shell: tokio::sync::OnceCell::new(),
            count: tokio::sync::Mutex::new(None),
        })
    }

    /// Learns the bash version and the count now, beside the pod's start,
    /// so that a first turn finds them ready. Call it on the actix main
    /// thread: the processes' death signal follows the thread that forks
    /// them (see [`crate::tools::tool_command`]).
    pub fn start(self: &Rc<Self>) {
        let probe = self.clone();
        actix_rt::spawn(async move {
            let repo = probe.repo();
            let count = async {
                if let Some(repo) = &repo {
                    probe.changed(repo).await;
                }
            };
            tokio::join!(probe.shell(), count);
        });
    }

    /// The `shell` line: `bash` and its version, asked once per pod.
    pub async fn shell(&self) -> String {
        self.shell
            .get_or_init(|| async {
                let out = self.run("bash", &["-c", r#"printf 'bash %s' "$BASH_VERSION""#]);
                match out.await {
                    Ok((out, _)) if out.len() > "bash ".len() => {
                        crate::safe_text::line(&out).into_owned()
                    }
                    _ => "bash".to_owned(),
                }
            })
            .await
            .clone()
    }

    /// The repository the workspace is in, if any: no process, a few reads.
    pub fn repo(&self) -> Option<Repo> {
        let git_dir = find_git_dir(&self.root)?;
        let head = read_small(&git_dir.join("HEAD"))?;
        let common_dir = read_small(&git_dir.join("commondir"))
            .map(|common| git_dir.join(common.trim()))
            .unwrap_or_else(|| git_dir.clone());
        Some(Repo {
            git_dir,
            common_dir,
            head,
        })
    }

    /// `N changed files` for `repo`: counted again only when its stamp
    /// changed; `changed files unknown (why)` when git could not say.
    pub async fn changed(&self, repo: &Repo) -> String {
        let mut count = self.count.lock().await;
        let stamp = repo.stamp();
        if let Some((counted, line)) = count.as_ref() {
            if *counted == stamp {
                return line.clone();
            }
        }
        let line = match self.count_changes().await {
            Ok(n) => format!("{n} changed {}", if n == 1 { "file" } else { "files" }),
            Err(why) => format!("changed files unknown ({why})"),
        };
        *count = Some((stamp, line.clone()));
        line
    }

    /// `git status`'s entries, counted as they stream, never held.
    async fn count_changes(&self) -> Result<u64, String> {
        let args = [
            "-c",
            "core.fsmonitor=false",
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
        ];
        match self.run_counting("git", &args).await {
            Ok((lines, Some(0))) => Ok(lines),
            Ok(_) => Err("git status failed".to_owned()),
            Err(why) => Err(why),
        }
    }

    /// Runs `program` confined and reads at most [`SMALL_FILE`] of its output.
    async fn run(&self, program: &str, args: &[&str]) -> Result<(String, Option<i32>), String> {
        let (out, code) = self
            .spawn(program, args, |stdout| async move {
                let mut out = Vec::new();
                let _ = stdout.take(SMALL_FILE).read_to_end(&mut out).await;
                out
            })
            .await?;
        Ok((String::from_utf8_lossy(&out).into_owned(), code))
    }

    /// Runs `program` confined and counts its output's lines.
    async fn run_counting(
        &self,
        program: &str,
        args: &[&str],
    ) -> Result<(u64, Option<i32>), String> {
        self.spawn(program, args, |mut stdout| async move {
            let mut buf = vec![0; 64 * 1024];
            let mut lines = 0u64;
            while let Ok(n @ 1..) = stdout.read(&mut buf).await {
                lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            }
            lines
        })
        .await
    }

    /// Spawns `program` in the workspace, confined as a `bash` command is,
    /// lets `read` take its output, and waits for it, all within
    /// [`TIMEOUT`]; its process group is killed whatever happens.
    async fn spawn<T, F>(
        &self,
        program: &str,
        args: &[&str],
        read: impl FnOnce(tokio::process::ChildStdout) -> F,
    ) -> Result<(T, Option<i32>), String>
    where
        F: std::future::Future<Output = T>,
    {
        let mut cmd =
            crate::tools::confined_command(program, &self.root, Some(self.toolbox.sandbox()))
                .map_err(|e| e.to_string())?;
        cmd.args(args)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let mut group = crate::tools::ProcessGroup::new(
            child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(id as i32)),
        );
        let stdout = child.stdout.take().ok_or("no output")?;
        let run = async {
            let out = read(stdout).await;
            let status = child.wait().await;
            (out, status.ok().and_then(|s| s.code()))
        };
        let outcome = tokio::time::timeout(TIMEOUT, run)
            .await
            .map_err(|_| format!("{program} did not answer in {}s", TIMEOUT.as_secs()));
        group.kill();
        outcome
    }
}

impl Repo {
    /// The branch as `git status -b` names it: the branch `HEAD` points
    /// at, born or not, or `detached HEAD`.
    pub fn branch(&self) -> String {
        let head = self.head.lines().next().unwrap_or_default().trim();
        let name = match head.strip_prefix("ref:") {
            Some(target) => {
                let target = target.trim();
                target.strip_prefix("refs/heads/").unwrap_or(target)
            }
            None => "detached HEAD",
        };
        crate::safe_text::line(name).into_owned()
    }

    fn stamp(&self) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let file = |path: PathBuf| {
            std::fs::metadata(path).ok().map(|m| FileStamp {
                inode: m.ino(),
                size: m.size(),
                modified: m.modified().ok(),
            })
        };
        Stamp {
            git_dir: self.git_dir.clone(),
            head: self.head.clone(),
            files: [
                file(self.git_dir.join("HEAD")),
                file(self.git_dir.join("index")),
                file(self.common_dir.join("config")),
            ],
        }
    }
}

/// The git directory of the repository `root` is in, as git finds it: the
/// nearest `.git` from `root` up, a directory or a `gitdir: <path>` file (a
/// linked worktree or a submodule; the path relative to the file's
/// directory).
fn find_git_dir(root: &Path) -> Option<PathBuf> {
    for dir in root.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dot_git);
        }
        let text = read_small(&dot_git)?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        return Some(dir.join(target));
    }
    None
}

/// The start of a small file, or `None` when it cannot be read.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(SMALL_FILE)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(head: &str) -> Repo {
        Repo {
            git_dir: PathBuf::from("/r/.git"),
            common_dir: PathBuf::from("/r/.git"),
            head: head.into(),
        }
    }

    #[test]
    fn the_branch_is_what_head_points_at_or_a_detached_head() {
        assert_eq!(repo("ref: refs/heads/main\n").branch(), "main");
        assert_eq!(repo("ref: refs/heads/fix/a-b\n").branch(), "fix/a-b");
        assert_eq!(
            repo("0123456789abcdef0123456789abcdef01234567\n").branch(),
            "detached HEAD"
        );
    }

    #[test]
    fn a_linked_worktree_is_found_through_its_git_file() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&main).unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", main.display())).unwrap();
        assert_eq!(find_git_dir(&wt.join("src")), Some(main.clone()));
        std::fs::write(wt.join(".git"), "gitdir: ../main/.git/worktrees/wt\n").unwrap();
        assert_eq!(
            find_git_dir(&wt),
            Some(wt.join("../main/.git/worktrees/wt"))
        );
        assert_eq!(find_git_dir(&dir.path().join("nowhere")), None);
    }
}
