//! The agent's environment: what the model is told about the machine it
//! works on, as a `hook_injected_items` entry (source `environment`) of
//! fixed `key: value` lines — `os`, `shell`, `date`, `workspace`, `git`,
//! `approval`, `sandbox`.
//!
//! The entry is committed at a session's first turn (after the project
//! instructions), again at a step boundary whenever a line other than the
//! git count differs from the session's latest one (a new day, a branch
//! switch, `set_approval`), and after compaction. Being an entry, the
//! model's context derives from the log like everything else: a restarted
//! pod tells the model exactly what it was told.
//!
//! `shell` and `git` come from one `bash` run as a tool process (sandboxed,
//! the trust path of [`crate::tools::process`]) with a timeout, awaited off
//! the turn's critical state but never blocking the actor thread: `git
//! status` reads a repository the model's commands may have written, and a
//! repository's config can name programs git runs (`core.fsmonitor`,
//! filters), so git runs exactly as confined as `bash` does.

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::job::JobEnv;
use crate::context::Conversation;
use crate::protocol::{InjectedItem, LogEntry};

pub const SOURCE: &str = "environment";

/// How long `bash` + `git status` may take before the git line says so.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most probe output read: three short lines are expected.
const PROBE_MAX_BYTES: u64 = 4096;

/// Prints the bash version, git's branch header and the changed-file
/// count (the lines after the header, counted by `wc`, never held). Exit 3: not a
/// repository (or no git).
const PROBE: &str = r#"printf 'bash %s\n' "$BASH_VERSION"
git -c core.fsmonitor=false --no-optional-locks status --porcelain=v1 -b 2>/dev/null \
  | { IFS= read -r head || exit 3; printf '%s\n' "$head"; wc -l; }"#;

/// The environment as the model is told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    pub os: String,
    pub shell: String,
    pub date: String,
    pub workspace: String,
    pub git: String,
    pub approval: String,
    pub sandbox: String,
}

impl Environment {
    /// The entry's text: one `key: value` line each, in the contract's order.
    pub fn text(&self) -> String {
        format!(
            "os: {}\nshell: {}\ndate: {}\nworkspace: {}\ngit: {}\napproval: {}\nsandbox: {}",
            self.os, self.shell, self.date, self.workspace, self.git, self.approval, self.sandbox
        )
    }

    fn entry(&self) -> LogEntry {
        LogEntry::HookInjectedItems {
            items: vec![InjectedItem {
                source: SOURCE.into(),
                text: self.text(),
            }],
        }
    }

    /// The entry to commit now, if the session has none yet or a line other
    /// than the git count differs from its latest one.
    pub fn update_for(&self, conversation: &Conversation) -> Option<LogEntry> {
        let latest = conversation.latest_injected(SOURCE);
        let same =
            latest.is_some_and(|latest| without_count(latest) == without_count(&self.text()));
        (!same).then(|| self.entry())
    }

    /// The entry, unconditionally (a compacted session's first entries).
    pub fn into_entry(self) -> LogEntry {
        self.entry()
    }
}

/// `text` with the git line's `, N changed files` left out.
fn without_count(text: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix("git: ") {
            Some(git) => git.rsplit_once(", ").map_or(git, |(branch, _)| branch),
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the environment is now.
pub async fn current(env: &JobEnv) -> Environment {
    let (shell, git) = probe(env).await;
    let info = env.toolbox.sandbox().info();
    let mut sandbox = format!(
        "{}, network {}",
        info.mode.as_str(),
        if info.network { "on" } else { "off" }
    );
    if !info.available && info.mode != crate::protocol::SandboxMode::Off {
        sandbox.push_str(" (not fully enforced on this kernel)");
    }
    Environment {
        os: os(),
        shell,
        date: today(),
        workspace: env.workspace.root().display().to_string(),
        git,
        approval: env.state.borrow().policy.mode.as_str().to_owned(),
        sandbox,
    }
}

/// Today's date (UTC), `YYYY-MM-DD`: a date, not a time, so the entry
/// changes once a day rather than at every step.
fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.get(..10).unwrap_or(&now).to_owned()
}

/// The OS, its release where `/etc/os-release` names it, and the kernel.
fn os() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let release = read("/etc/os-release");
    let pretty = release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned());
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
    let mut os = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    let details: Vec<String> = pretty
        .into_iter()
        .chain((!kernel.is_empty()).then(|| format!("kernel {kernel}")))
        .collect();
    if !details.is_empty() {
        os.push_str(&format!(" ({})", details.join(", ")));
    }
    crate::safe_text::line(&os).into_owned()
}

/// The `shell` and `git` lines, from one confined `bash` run.
async fn probe(env: &JobEnv) -> (String, String) {
    let unknown = |why: &str| ("bash".to_owned(), format!("unknown ({why})"));
    let cmd = crate::tools::tool_command(env.workspace.root(), Some(env.toolbox.sandbox()), PROBE);
    let mut cmd = match cmd {
        Ok(cmd) => cmd,
        Err(e) => return unknown(&e.to_string()),
    };
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return unknown(&format!("cannot start bash: {e}")),
    };
    let mut group = crate::tools::ProcessGroup::new(
        child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32)),
    );
    let Some(stdout) = child.stdout.take() else {
        return unknown("no output");
    };
    let run = async {
        let mut out = String::new();
        let _ = stdout.take(PROBE_MAX_BYTES).read_to_string(&mut out).await;
        let status = child.wait().await;
        (out, status.ok().and_then(|s| s.code()))
    };
    let Ok((out, code)) = tokio::time::timeout(PROBE_TIMEOUT, run).await else {
        group.kill();
        return unknown(&format!(
            "git did not answer in {}s",
            PROBE_TIMEOUT.as_secs()
        ));
    };
    group.kill();
    parse_probe(&out, code)
}

fn parse_probe(out: &str, code: Option<i32>) -> (String, String) {
    let mut lines = out.lines();
    let shell = lines
        .next()
        .filter(|l| l.len() > "bash ".len())
        .map_or_else(
            || "bash".to_owned(),
            |l| crate::safe_text::line(l).into_owned(),
        );
    let git = match (code, lines.next(), lines.next()) {
        (Some(0), Some(head), Some(count)) => {
            let changed = count.trim().parse::<u64>().unwrap_or(0);
            let files = if changed == 1 { "file" } else { "files" };
            format!("{}, {changed} changed {files}", branch(head))
        }
        _ => "not a repository".to_owned(),
    };
    (shell, git)
}

/// The branch from `git status -b`'s header: `## main...origin/main [ahead
/// 1]`, `## No commits yet on main`, `## HEAD (no branch)`.
fn branch(head: &str) -> String {
    let head = head.strip_prefix("## ").unwrap_or(head);
    let name = if let Some(rest) = head.strip_prefix("No commits yet on ") {
        rest
    } else if head.starts_with("HEAD (no branch)") {
        "detached HEAD"
    } else {
        head.split("...").next().unwrap_or(head)
    };
    crate::safe_text::line(name.trim()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sample() -> Environment {
        Environment {
            os: "linux x86_64".into(),
            shell: "bash 5.2".into(),
            date: "2026-01-02".into(),
            workspace: "/home/me/calc".into(),
            git: "main, 2 changed files".into(),
            approval: "ask".into(),
            sandbox: "workspace-write, network on".into(),
        }
    }

    #[test]
    fn the_probe_says_branch_and_count_or_not_a_repository() {
        let (shell, git) = parse_probe(
            "bash 5.2.21(1)-release\n## main...origin/main\n2\n",
            Some(0),
        );
        assert_eq!(shell, "bash 5.2.21(1)-release");
        assert_eq!(git, "main, 2 changed files");
        let (_, git) = parse_probe("bash 5.2\n## No commits yet on trunk\n0\n", Some(0));
        assert_eq!(git, "trunk, 0 changed files");
        let (_, git) = parse_probe("bash 5.2\n## HEAD (no branch)\n1\n", Some(0));
        assert_eq!(git, "detached HEAD, 1 changed file");
        let (_, git) = parse_probe("bash 5.2\n", Some(3));
        assert_eq!(git, "not a repository");
    }

    #[test]
    fn committed_first_then_only_when_a_line_other_than_the_count_changes() {
        let mut c = Conversation::new(Uuid::new_v4(), Vec::new());
        let env = sample();
        let first = env.update_for(&c).expect("a session's first");
        c.push(first);
        assert_eq!(env.update_for(&c), None);
        let more_changes = Environment {
            git: "main, 9 changed files".into(),
            ..sample()
        };
        assert_eq!(more_changes.update_for(&c), None, "the count alone");
        let other_branch = Environment {
            git: "fix, 9 changed files".into(),
            ..sample()
        };
        assert!(other_branch.update_for(&c).is_some());
        let auto = Environment {
            approval: "auto".into(),
            ..sample()
        };
        assert!(auto.update_for(&c).is_some());
    }
}
