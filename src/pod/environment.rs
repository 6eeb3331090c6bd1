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
//! Deciding whether to commit costs no process: the branch is read from
//! `HEAD` and the rest is known in the pod. `shell` and the git count come
//! from [`super::probe`], which learns them as the pod starts and counts
//! again only when the repository changed, so a turn's model request no
//! longer waits for a `bash` and a `git status`.

use super::job::JobEnv;
use crate::context::Conversation;
use crate::protocol::{InjectedItem, LogEntry};

pub const SOURCE: &str = "environment";

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
    /// A child pod's parent pod: the line `parent: NAME`, absent for a top pod.
    pub parent: Option<String>,
}

impl Environment {
    /// The entry's text: one `key: value` line each, in the contract's order.
    pub fn text(&self) -> String {
        let mut text = format!(
            "os: {}\nshell: {}\ndate: {}\nworkspace: {}\ngit: {}\napproval: {}\nsandbox: {}",
            self.os, self.shell, self.date, self.workspace, self.git, self.approval, self.sandbox
        );
        if let Some(parent) = &self.parent {
            text.push_str(&format!("\nparent: {parent}"));
        }
        text
    }

    fn entry(&self) -> LogEntry {
        LogEntry::HookInjectedItems {
            items: vec![InjectedItem {
                source: SOURCE.into(),
                text: self.text(),
            }],
        }
    }

    /// Whether the session has no environment entry yet or its latest one
    /// differs from this in a line other than the git count.
    fn is_new_for(&self, conversation: &Conversation) -> bool {
        let latest = conversation.latest_injected(SOURCE);
        latest.is_none_or(|latest| without_count(latest) != without_count(&self.text()))
    }

    /// The entry, unconditionally (a compacted session's first entries).
    pub fn into_entry(self) -> LogEntry {
        self.entry()
    }
}

/// `text` with the git line's `, N changed files` (or `, changed files
/// unknown (why)`) left out: everything after the first `, `, which no
/// branch name can hold (git refuses spaces in them), while a reason can.
fn without_count(text: &str) -> String {
    text.lines()
        .map(|line| match line.strip_prefix("git: ") {
            Some(git) => git.split_once(", ").map_or(git, |(branch, _)| branch),
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The entry to commit now, if the session has none yet or a line other
/// than the git count differs from its latest one. The count is asked of
/// the probe only then: a turn whose environment is unchanged starts no
/// process and waits for none.
pub async fn update_for(env: &JobEnv, conversation: &Conversation) -> Option<LogEntry> {
    let repo = env.probe.repo();
    let git = repo
        .as_ref()
        .map_or_else(|| NOT_A_REPOSITORY.to_owned(), |repo| repo.branch());
    let mut now = known(env, env.probe.shell().await, git);
    if !now.is_new_for(conversation) {
        return None;
    }
    if let Some(repo) = &repo {
        now.git = format!("{}, {}", now.git, env.probe.changed(repo).await);
    }
    Some(now.entry())
}

/// What the environment is now, count included.
pub async fn current(env: &JobEnv) -> Environment {
    let repo = env.probe.repo();
    let git = match &repo {
        Some(repo) => format!("{}, {}", repo.branch(), env.probe.changed(repo).await),
        None => NOT_A_REPOSITORY.to_owned(),
    };
    known(env, env.probe.shell().await, git)
}

/// The `git` line of a workspace in no repository.
const NOT_A_REPOSITORY: &str = "not a repository";

/// The environment with `shell` and `git` as given.
fn known(env: &JobEnv, shell: String, git: String) -> Environment {
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
        parent: env.parent.as_ref().map(|link| link.parent.pod.clone()),
    }
}

/// Today's date (UTC), `YYYY-MM-DD`: a date, not a time, so the entry
/// changes once a day rather than at every step.
fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.get(..10).unwrap_or(&now).to_owned()
}

/// The OS, its release where `/etc/os-release` names it, and the kernel:
/// read once per pod.
fn os() -> String {
    static OS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OS.get_or_init(read_os).clone()
}

fn read_os() -> String {
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
            parent: None,
        }
    }

    #[test]
    fn committed_first_then_only_when_a_line_other_than_the_count_changes() {
        let mut c = Conversation::new(Uuid::new_v4(), Vec::new());
        let env = sample();
        assert!(env.is_new_for(&c), "a session's first");
        c.push(env.entry());
        assert!(!env.is_new_for(&c));
        let more_changes = Environment {
            git: "main, 9 changed files".into(),
            ..sample()
        };
        assert!(!more_changes.is_new_for(&c), "the count alone");
        let unknown = Environment {
            git: "main, changed files unknown (cannot start git: a, b)".into(),
            ..sample()
        };
        assert!(!unknown.is_new_for(&c), "a count git could not give");
        let other_branch = Environment {
            git: "fix, 9 changed files".into(),
            ..sample()
        };
        assert!(other_branch.is_new_for(&c));
        let auto = Environment {
            approval: "auto".into(),
            ..sample()
        };
        assert!(auto.is_new_for(&c));
    }
}
