//! Whether a tool call runs, is denied, or waits for a person: the approval
//! policy of `docs/approvals.md`, as a pure function of the call, the mode,
//! the rules and whether `bash` is sandboxed.
//!
//! Nothing here touches the log or a client. The turn loop asks
//! [`Policy::decide`] for each call of a model step, commits what it says,
//! and uses [`describe`] to show a person what an asked call would do.

mod bash;
mod deny_forms;
mod describe;
pub mod fuzzing;
pub mod persist;
mod rules;
#[cfg(test)]
mod tests;

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

pub use describe::{describe, Description};
pub use rules::{Rule, RuleError};

use crate::protocol::ApprovalMode;
use crate::tools::registry::{self, Effect};
use rules::RuleKind;

/// What `bash:` rules are named after: the tool that runs command lines.
const BASH: &str = crate::tools::registry::BASH_RULE;
/// The rule a [`Policy::never_ask`] denial names.
pub const NEVER_ASK_RULE: &str = "mode:exec";

pub use crate::tools::SandboxGate;

/// What happens to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It runs now; no approval entry is committed.
    Run,
    /// It does not run; `rule` is the deny rule's text, or `mode:read-only`.
    Deny { rule: String },
    /// A person decides; `reason` says why it asks (`mode:ask`, `mode:edits`,
    /// `mode:auto (sandbox unavailable)`).
    Ask { reason: String },
}

/// A tool call as the model made it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
}

impl<'a> Call<'a> {
    /// A string argument, if present.
    fn arg(&self, name: &str) -> Option<&'a str> {
        self.arguments.get(name).and_then(Value::as_str)
    }
}

/// The approval policy in force: a mode, the configured rules, and the
/// sandbox's state. Its fields are public because the mode changes at run
/// time (`set_approval`).
#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: ApprovalMode,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub sandbox: SandboxGate,
    /// The canonical workspace root ([`crate::workspace::Workspace::root`]),
    /// to turn absolute paths inside it into the relative paths rules name.
    pub workspace_root: PathBuf,
    /// Absolute paths a file tool's write to always asks about, except in
    /// mode `auto`: the pod's data directory and config file, which hold
    /// its approvals and rules. Writes into any `.git` directory ask too
    /// (hooks, `core.fsmonitor` and `core.pager` there run commands).
    pub protected: Vec<PathBuf>,
    /// Nobody will answer (`pod exec`): a call that would ask is denied
    /// instead (`mode:exec`), so the run ends rather than waiting forever.
    /// Child pods copy the whole policy, so what a run spawns never waits
    /// either.
    pub never_ask: bool,
}

/// What the policy needs to know about a call.
enum Subject<'a> {
    /// A read-only tool and its workspace-relative path (`.` for the
    /// root), if it names one inside the workspace.
    Read(Option<String>),
    /// `write_file`/`edit_file` and its workspace-relative path.
    Write(Option<String>),
    /// A write to a path of [`Policy::protected`] or into a `.git`
    /// directory: no allow rule and no mode but `auto` lets it run unasked.
    ProtectedWrite(String),
    Bash(&'a str),
    /// `web_fetch` and its URL, serialised (`None`: not a URL).
    Fetch(Option<String>),
    Other,
}

/// `raw` as `web_fetch` rules see it: parsed and serialised, so that
/// `HTTPS://Docs.rs` and `https://docs.rs/` are one URL.
pub(crate) fn serialised_url(raw: &str) -> Option<String> {
    reqwest::Url::parse(raw).ok().map(String::from)
}

/// The workspace-relative form of `raw` — relative, or absolute inside
/// `root` — with `.` and `..` resolved lexically; `None` if it climbs out.
/// `.` stands for the root itself.
pub(crate) fn workspace_relative(root: &Path, raw: &str) -> Option<String> {
    let path = Path::new(raw);
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    let mut absolute = false;
    for component in path.components() {
        match component {
            Component::RootDir => absolute = true,
            Component::Prefix(_) => return None,
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part),
        }
    }
    let normal: PathBuf = parts.iter().collect();
    let relative = if absolute {
        Path::new("/")
            .join(normal)
            .strip_prefix(root)
            .ok()?
            .to_path_buf()
    } else {
        normal
    };
    let text = relative.to_str()?;
    Some(if text.is_empty() {
        ".".into()
    } else {
        text.into()
    })
}

/// `relative` (lexically normal, relative to `root`) as the file tools
/// will really reach it: each existing component that is a symlink is
/// followed, so `docs/link/main.rs` with `docs/link -> ../src` is
/// `src/main.rs`, the path the `read:`/`write:` rules must judge. The part
/// that does not exist yet stays as written. `None` when a link leads out of
/// the workspace or dangles: the tool refuses such a path, and no rule may
/// match it.
fn resolve_links(root: &Path, relative: &str) -> Option<String> {
    let mut real = root.to_path_buf();
    let mut components = Path::new(relative).components();
    for component in components.by_ref() {
        real.push(component);
        match std::fs::symlink_metadata(&real) {
            Ok(meta) if meta.file_type().is_symlink() => {
                real = real.canonicalize().ok()?;
                if !real.starts_with(root) {
                    return None;
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    real.extend(components);
    let text = real.strip_prefix(root).ok()?.to_str()?;
    Some(if text.is_empty() {
        ".".into()
    } else {
        text.into()
    })
}

/// What the policy needs to know about `call`, with paths made relative
/// to `root` and resolved through its symlinks ([`resolve_links`]).
fn subject_of<'a>(root: &Path, protected: &[PathBuf], call: &Call<'a>) -> Subject<'a> {
    let path = |default: Option<&str>| {
        call.arg("path")
            .or(default)
            .and_then(|raw| workspace_relative(root, raw))
            .and_then(|relative| resolve_links(root, &relative))
    };
    match registry::effect(call.tool) {
        // `read_file` needs a path; the others search the root without one.
        Effect::ReadsFiles {
            path_required: true,
        } => Subject::Read(path(None)),
        Effect::ReadsFiles {
            path_required: false,
        } => Subject::Read(path(Some("."))),
        Effect::WritesFile => match path(None) {
            Some(relative) if is_protected(root, protected, &relative) => {
                Subject::ProtectedWrite(relative)
            }
            relative => Subject::Write(relative),
        },
        Effect::Internal => Subject::Read(None),
        Effect::Network => Subject::Fetch(call.arg("url").and_then(serialised_url)),
        Effect::RunsCommands => Subject::Bash(call.arg("command").unwrap_or("")),
        Effect::Unknown => Subject::Other,
    }
}

/// Whether a write to `relative` (inside `root`) changes what decides
/// about the user's commands: a `.git` directory at any depth, or one of
/// `protected` (or a path beneath one).
fn is_protected(root: &Path, protected: &[PathBuf], relative: &str) -> bool {
    let path = Path::new(relative);
    path.components()
        .any(|c| c.as_os_str() == std::ffi::OsStr::new(".git"))
        || protected.iter().any(|p| root.join(path).starts_with(p))
}

/// Whether `rule` matches `call` as a deny rule would: for `bash`, when any
/// simple command of the line does, those inside substitutions included.
/// Hooks' matchers use these semantics, so a matcher cannot be slipped past
/// by wrapping the command in a compound line.
pub fn matches_as_deny(rule: &Rule, call: &Call, workspace_root: &Path) -> bool {
    denies(rule, call.tool, &subject_of(workspace_root, &[], call))
}

impl Policy {
    fn subject<'a>(&self, call: &Call<'a>) -> Subject<'a> {
        subject_of(&self.workspace_root, &self.protected, call)
    }

    /// The deny rule that denies `call`, if one does: the first step of
    /// the decision, before hooks are asked.
    pub fn deny_rule(&self, call: &Call) -> Option<String> {
        let subject = self.subject(call);
        self.deny
            .iter()
            .find(|r| denies(r, call.tool, &subject))
            .map(ToString::to_string)
    }

    /// Why the rule a `session` answer to `call` adds must not be kept in
    /// the config file by `always`, if it must not: the exact command line
    /// of a compound line, a substitution or a redirection into a file
    /// (it would outlive the one line it was meant for), or a `web_fetch`
    /// origin whose host holds a rule wildcard (`https://*/`, a name no
    /// site has, chosen by the model: its escaped rule is safe for this
    /// conversation, but one unescaping reader later it is every host).
    pub fn why_not_always(&self, call: &Call) -> Option<String> {
        match self.subject(call) {
            Subject::Bash(line) => {
                let parsed = bash::parse(&bash::collapse(line));
                let single = matches!(parsed.commands.as_slice(),
                    [only] if !parsed.substitution && !parsed.uncertain && !only.writes_file);
                (!single).then(|| {
                    "`always` would keep this exact line in the config file for every future \
                     session"
                        .to_owned()
                })
            }
            Subject::Fetch(_) => {
                let host = call
                    .arg("url")
                    .and_then(|raw| reqwest::Url::parse(raw).ok())?
                    .host_str()?
                    .to_owned();
                host.contains(bash::ESCAPED).then(|| {
                    format!(
                        "`always` would keep a rule for the host `{host}`, whose `*`, `?`, `[` \
                         or `\\` no real host name holds"
                    )
                })
            }
            _ => None,
        }
    }

    /// Decides a call, in the contract's order: a matching deny rule denies
    /// (in every mode), then a matching allow rule — configured, or one of
    /// `session_rules` added by earlier `session` approvals — runs it, then
    /// the mode decides.
    pub fn decide<'r>(
        &'r self,
        call: &Call,
        session_rules: impl IntoIterator<Item = &'r Rule>,
    ) -> Verdict {
        let subject = self.subject(call);
        if let Some(rule) = self.deny.iter().find(|r| denies(r, call.tool, &subject)) {
            return Verdict::Deny {
                rule: rule.to_string(),
            };
        }
        let mut allow = self.allow.iter().chain(session_rules);
        let allowed = match subject {
            Subject::Bash(line) => bash_allowed(line, allow.collect()),
            Subject::ProtectedWrite(_) => false,
            _ => allow.any(|r| matches_non_bash(r, call.tool, &subject)),
        };
        if allowed {
            return Verdict::Run;
        }
        match self.by_mode(&subject) {
            Verdict::Ask { .. } if self.never_ask => Verdict::Deny {
                rule: NEVER_ASK_RULE.into(),
            },
            verdict => verdict,
        }
    }

    fn by_mode(&self, subject: &Subject) -> Verdict {
        let ask = |reason: &str| Verdict::Ask {
            reason: reason.to_owned(),
        };
        match (self.mode, subject) {
            (_, Subject::Read(_)) => Verdict::Run,
            (ApprovalMode::ReadOnly, _) => Verdict::Deny {
                rule: "mode:read-only".into(),
            },
            (ApprovalMode::Auto, Subject::Bash(_)) if self.sandbox == SandboxGate::Unavailable => {
                ask("mode:auto (sandbox unavailable)")
            }
            (ApprovalMode::Auto, _) => Verdict::Run,
            (mode, Subject::ProtectedWrite(path)) => ask(&format!(
                "mode:{} (protected path {path}: a change there can run commands or change \
                 what the pod allows)",
                mode.as_str()
            )),
            (ApprovalMode::Edits, Subject::Write(Some(_))) => Verdict::Run,
            (mode, _) => ask(&format!("mode:{}", mode.as_str())),
        }
    }

    /// The allow rule a `scope: "session"` approval of `call` adds
    /// ([`session_rule`]).
    pub fn session_rule(&self, call: &Call) -> Option<Rule> {
        session_rule(call, &self.workspace_root)
    }
}

/// The allow rule a `scope: "session"` approval of `call` adds, for a
/// workspace at `workspace_root`: for `bash` the command's first word and
/// ` *`, or its first two when the first takes a subcommand (`bash:git
/// status *`), or the exact line when it is compound, contains a
/// substitution or writes a file through a redirection — the command's own
/// `*`, `?`, `[` and `\` escaped so they match only themselves
/// ([`bash::session_pattern`]); the file's path for writes
/// (`write:src/main.rs`); the origin for `web_fetch`, escaped likewise
/// (`web_fetch:https://docs.rs/*`); `TOOL:*` otherwise. The pod adds it, and every
/// client shows it before the user chooses, so this one function decides.
///
/// `None` when the call lacks what its rule must name — a `bash` call
/// with a blank or missing `command`, a write without a `path` inside
/// the workspace: such calls fail the tool's schema or its workspace
/// check and are refused before anyone is asked.
pub fn session_rule(call: &Call, workspace_root: &Path) -> Option<Rule> {
    let path = || {
        call.arg("path")
            .and_then(|raw| workspace_relative(workspace_root, raw))
    };
    let text = match registry::effect(call.tool) {
        Effect::RunsCommands => {
            let line = bash::collapse(call.arg("command").unwrap_or(""));
            if line.is_empty() {
                return None;
            }
            format!("{BASH}:{}", bash::session_pattern(&line))
        }
        Effect::WritesFile => format!("write:{}", globset::escape(&path()?)),
        // The origin, so a session answer covers that site, not the web;
        // escaped, since the host is the model's choice and may hold a `*`
        // (`https://*/readme` is a valid URL) that must not become a wildcard.
        Effect::Network => {
            let url = reqwest::Url::parse(call.arg("url")?).ok()?;
            let origin = url.origin();
            if !origin.is_tuple() {
                return None;
            }
            format!(
                "{}:{}/*",
                registry::FETCH_RULE,
                bash::escape_pattern(&origin.ascii_serialization())
            )
        }
        _ => {
            if call.tool.contains(':') {
                return None;
            }
            format!("{}:*", globset::escape(call.tool))
        }
    };
    text.parse().ok()
}

/// Whether a non-`bash` call matches `rule`.
fn matches_non_bash(rule: &Rule, tool: &str, subject: &Subject) -> bool {
    match (rule.kind(), subject) {
        (RuleKind::Tool(_), _) => rule.names_tool(tool),
        (RuleKind::Fetch, Subject::Fetch(Some(url))) => rule
            .fetch_pattern()
            .is_some_and(|pattern| bash::wildcard_match(pattern, url)),
        (RuleKind::Write(glob), Subject::Write(Some(path)) | Subject::ProtectedWrite(path)) => {
            glob.is_match(path)
        }
        // `list_dir`, `glob` and `grep` name a directory: `read:secrets/**`
        // must cover `secrets` itself, which `globset` matches only as `secrets/`.
        (RuleKind::Read(glob), Subject::Read(Some(path))) => {
            glob.is_match(path) || glob.is_match(format!("{path}/"))
        }
        _ => false,
    }
}

fn denies(rule: &Rule, tool: &str, subject: &Subject) -> bool {
    let Subject::Bash(line) = subject else {
        return matches_non_bash(rule, tool, subject);
    };
    if rule.names_tool(tool) {
        return true;
    }
    let Some(pattern) = rule.bash_pattern() else {
        return false;
    };
    bash::wildcard_match(pattern, &bash::collapse(line))
        || bash::parse(line).commands.iter().any(|command| {
            deny_forms::deny_forms(&command.text, pattern)
                .iter()
                .any(|text| bash::wildcard_match(pattern, text))
        })
}

/// A command line is allowed if a rule is exactly that line (what a
/// `session` approval of a compound line adds), or if it has no
/// substitution and each of its simple commands is covered by a rule. A
/// wildcard in a command pattern never stands for a redirection into a
/// file: a command writing one is covered only by a pattern that spells out
/// a `>` itself, or by `*` alone (all of `bash`); nor for the program after
/// leading assignments ([`bash::names_the_program`]).
fn bash_allowed(line: &str, rules: Vec<&Rule>) -> bool {
    // The exact line, as a session rule spells it (its wildcards escaped)
    // or as a person may have written it.
    let whole = bash::collapse(line);
    let escaped = bash::escape_pattern(&whole);
    if rules
        .iter()
        .any(|r| r.bash_pattern().is_some_and(|p| p == whole || p == escaped))
    {
        return true;
    }
    let parsed = bash::parse(line);
    if parsed.substitution || parsed.uncertain || parsed.commands.is_empty() {
        return false;
    }
    parsed.commands.iter().all(|command| {
        rules.iter().any(|rule| {
            let pattern = if rule.names_tool(BASH) {
                "*"
            } else if let Some(pattern) = rule.bash_pattern() {
                pattern
            } else {
                return false;
            };
            (!command.writes_file || pattern == "*" || pattern.contains('>'))
                && (pattern == "*" || bash::names_the_program(pattern, &command.text))
                && bash::wildcard_match(pattern, &command.text)
        })
    })
}
