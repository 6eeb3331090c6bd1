//! The user's hooks: the config file's `[[hooks]]` tables, which commands
//! run at which point of a turn, and what their answers mean
//! (`docs/hooks.md`).
//!
//! This module knows nothing of the log or the clients: it parses the
//! tables, picks the hooks an event runs, runs one ([`process`]) and reads
//! its answer ([`Answer`]). `pod/hooks.rs` puts that into the turn.

pub mod process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::approval::{self, Rule};

/// The points of a turn a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    ApprovalRequest,
    TurnEnd,
}

impl HookEvent {
    const ALL: [HookEvent; 6] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::ApprovalRequest,
        HookEvent::TurnEnd,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::ApprovalRequest => "approval_request",
            HookEvent::TurnEnd => "turn_end",
        }
    }

    /// Events about one tool call: the only ones a matcher applies to.
    fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::ApprovalRequest
        )
    }

    /// Whether exit 0 with a `context` adds it to the conversation.
    pub fn injects_context(self) -> bool {
        matches!(
            self,
            HookEvent::SessionStart | HookEvent::UserPromptSubmit | HookEvent::PostToolUse
        )
    }

    /// Whether exit 2 blocks what the event is about.
    pub fn can_block(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::UserPromptSubmit)
    }
}

/// How long a hook may run unless its table says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[[hooks]]` table.
#[derive(Debug, Clone)]
pub struct Hook {
    pub event: HookEvent,
    /// A rule pattern with deny-rule semantics; `None` matches every call.
    pub matcher: Option<Rule>,
    /// Run with `bash -c` in the workspace.
    pub command: String,
    pub timeout: Duration,
    /// Whether it runs in the bash sandbox (the default).
    pub sandbox: bool,
    /// Its place among the file's `[[hooks]]` tables, from 1.
    pub position: usize,
}

impl Hook {
    /// How the log and the warnings name it: `hook:<event>#<n>`.
    pub fn label(&self) -> String {
        format!("hook:{}#{}", self.event.as_str(), self.position)
    }
}

/// A `[[hooks]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    event: String,
    #[serde(default)]
    matcher: Option<String>,
    command: String,
    #[serde(default)]
    timeout_s: Option<u64>,
    #[serde(default)]
    sandbox: Option<bool>,
}

/// The configured hooks, in file order.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    list: Vec<Hook>,
}

impl Hooks {
    /// Checks the tables: a known event, a matcher only on tool events and
    /// one that parses as a rule, a command, a timeout of at least 1 s.
    pub fn parse(raw: Vec<RawHook>) -> Result<Hooks, String> {
        let mut list = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let position = index + 1;
            let error = |reason: String| format!("[[hooks]] #{position}: {reason}");
            let event = HookEvent::ALL
                .into_iter()
                .find(|e| e.as_str() == raw.event)
                .ok_or_else(|| {
                    error(format!(
                        "unknown event {:?}; the events are {}",
                        raw.event,
                        HookEvent::ALL.map(HookEvent::as_str).join(", ")
                    ))
                })?;
            let matcher = match raw.matcher {
                None => None,
                Some(_) if !event.is_tool_event() => {
                    return Err(error(format!(
                        "`matcher` applies to tool events only (pre_tool_use, post_tool_use, \
                         approval_request), not {}",
                        event.as_str()
                    )))
                }
                Some(text) => Some(
                    text.parse::<Rule>()
                        .map_err(|e| error(format!("matcher: {e}")))?,
                ),
            };
            if raw.command.trim().is_empty() {
                return Err(error("`command` is empty".into()));
            }
            let timeout = match raw.timeout_s {
                Some(0) => return Err(error("`timeout_s` must be at least 1".into())),
                Some(seconds) => Duration::from_secs(seconds),
                None => DEFAULT_TIMEOUT,
            };
            list.push(Hook {
                event,
                matcher,
                command: raw.command,
                timeout,
                sandbox: raw.sandbox.unwrap_or(true),
                position,
            });
        }
        Ok(Hooks { list })
    }

    /// Whether any hook runs at `event` (for any call).
    pub fn has(&self, event: HookEvent) -> bool {
        self.list.iter().any(|h| h.event == event)
    }

    /// The hooks `event` runs, in file order; for tool events, those whose
    /// matcher matches `call` as a deny rule would (any simple command,
    /// those inside substitutions included).
    pub fn matching<'a>(
        &'a self,
        event: HookEvent,
        call: Option<&'a approval::Call<'a>>,
        workspace_root: &'a Path,
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.list.iter().filter(move |hook| {
            hook.event == event
                && match (&hook.matcher, call) {
                    (None, _) => true,
                    (Some(rule), Some(call)) => {
                        approval::matches_as_deny(rule, call, workspace_root)
                    }
                    (Some(_), None) => false,
                }
        })
    }

    /// Refuses a `sandbox = false` hook whose program a tool could rewrite:
    /// a relative path, or one inside the workspace or a temp directory (a
    /// command found on `PATH` is judged where it is found).
    pub fn check_unsandboxed(&self, workspace_root: &Path) -> Result<(), String> {
        for hook in self.list.iter().filter(|h| !h.sandbox) {
            let program = first_word(&hook.command);
            let refuse = |why: String| {
                format!(
                    "[[hooks]] #{} ({}) has `sandbox = false`, but {why}: a tool could rewrite \
                     it and run unconfined. Give the program's absolute path outside the \
                     workspace and the temp directories, or drop `sandbox = false`",
                    hook.position,
                    hook.label()
                )
            };
            let path = if program.contains('/') {
                if !program.starts_with('/') {
                    return Err(refuse(format!(
                        "its program {program:?} is a relative path"
                    )));
                }
                PathBuf::from(&program)
            } else {
                match on_path(&program) {
                    Some(found) => found,
                    None => {
                        return Err(refuse(format!(
                            "its program {program:?} is not found on PATH as an absolute path"
                        )))
                    }
                }
            };
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            let mut risky: Vec<PathBuf> = vec![workspace_root.to_owned()];
            risky.extend(temp_dirs());
            if let Some(dir) = risky.iter().find(|dir| real.starts_with(dir)) {
                return Err(refuse(format!(
                    "its program {} lies inside {}",
                    real.display(),
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

/// The first shell word of a command line, with simple quotes removed and
/// a leading `~/` expanded as bash would.
fn first_word(command: &str) -> String {
    let word = command.split_whitespace().next().unwrap_or("");
    let word = word.trim_matches(|c| c == '\'' || c == '"');
    match (word.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) if !home.is_empty() => format!("{home}/{rest}"),
        _ => word.to_owned(),
    }
}

/// Where `bash` would find `program` on `PATH`: the first directory, given
/// as an absolute path, holding a file of that name. A relative `PATH`
/// entry (`.`) names wherever the hook runs: the workspace.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return dir.is_absolute().then_some(candidate);
        }
    }
    None
}

/// The directories anyone (or any tool) may write to.
fn temp_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .map(PathBuf::from)
        .collect();
    dirs.push(std::env::temp_dir());
    dirs.into_iter()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect()
}

/// What a hook that exited 0 said on stdout.
#[derive(Debug, Default, PartialEq)]
pub struct Answer {
    /// A string `context`, for events that inject it.
    pub context: Option<String>,
    /// For `approval_request`: `allow` or `deny`, and the message.
    pub decision: Option<(crate::protocol::Decision, Option<String>)>,
}

impl Answer {
    /// Reads a hook's stdout: a JSON object, else nothing (plain text on
    /// stdout is fine and means nothing).
    pub fn read(stdout: &[u8]) -> Answer {
        let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(stdout) else {
            return Answer::default();
        };
        let context = object
            .get("context")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let message = object
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let decision = match object.get("decision").and_then(Value::as_str) {
            Some("allow") => Some((crate::protocol::Decision::Allow, message)),
            Some("deny") => Some((crate::protocol::Decision::Deny, message)),
            _ => None,
        };
        Answer { context, decision }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hooks(toml: &str) -> Result<Hooks, String> {
        #[derive(Deserialize)]
        struct File {
            hooks: Vec<RawHook>,
        }
        let file: File = toml::from_str(toml).map_err(|e| e.to_string())?;
        Hooks::parse(file.hooks)
    }

    #[test]
    fn tables_parse_with_defaults_and_positions() {
        let parsed = hooks(
            "[[hooks]]\nevent = \"turn_end\"\ncommand = \"true\"\n\
             [[hooks]]\nevent = \"pre_tool_use\"\nmatcher = \"bash:git push*\"\n\
             command = \"/bin/check\"\ntimeout_s = 5\nsandbox = false\n",
        )
        .unwrap();
        let [first, second] = parsed.list.as_slice() else {
            panic!("two hooks")
        };
        assert_eq!(first.timeout, DEFAULT_TIMEOUT);
        assert!(first.sandbox);
        assert_eq!(second.label(), "hook:pre_tool_use#2");
        assert_eq!(second.timeout, Duration::from_secs(5));
        assert!(!second.sandbox);
    }

    #[test]
    fn bad_tables_say_which_and_why() {
        for (toml, reason) in [
            (
                "event = \"pre_tool\"\ncommand = \"x\"",
                "unknown event \"pre_tool\"",
            ),
            (
                "event = \"turn_end\"\nmatcher = \"bash:*\"\ncommand = \"x\"",
                "tool events only",
            ),
            (
                "event = \"pre_tool_use\"\nmatcher = \"bash rm\"\ncommand = \"x\"",
                "matcher: invalid rule",
            ),
            (
                "event = \"turn_end\"\ncommand = \" \"",
                "`command` is empty",
            ),
            (
                "event = \"turn_end\"\ncommand = \"x\"\ntimeout_s = 0",
                "at least 1",
            ),
        ] {
            let error = hooks(&format!("[[hooks]]\n{toml}\n")).unwrap_err();
            assert!(error.contains("[[hooks]] #1"), "{error}");
            assert!(error.contains(reason), "{error}");
        }
        let error =
            hooks("[[hooks]]\nevent = \"turn_end\"\ncommand = \"x\"\ncmd = 1\n").unwrap_err();
        assert!(error.contains("unknown field `cmd`"), "{error}");
    }

    #[test]
    fn matchers_match_as_deny_rules_do() {
        let parsed = hooks(
            "[[hooks]]\nevent = \"pre_tool_use\"\nmatcher = \"bash:git push*\"\ncommand = \"x\"\n\
             [[hooks]]\nevent = \"pre_tool_use\"\ncommand = \"y\"\n\
             [[hooks]]\nevent = \"post_tool_use\"\nmatcher = \"write:src/**\"\ncommand = \"z\"\n",
        )
        .unwrap();
        let root = Path::new("/w");
        let pick = |event, tool: &str, arguments: Value| {
            let call = approval::Call {
                tool,
                arguments: &arguments,
            };
            parsed
                .matching(event, Some(&call), root)
                .map(|h| h.position)
                .collect::<Vec<_>>()
        };
        let bash = |command: &str| json!({ "command": command });
        assert_eq!(
            pick(HookEvent::PreToolUse, "bash", bash("git push")),
            [1, 2]
        );
        // Any simple command, substitutions included, as a deny rule.
        assert_eq!(
            pick(
                HookEvent::PreToolUse,
                "bash",
                bash("cd x && git push origin main")
            ),
            [1, 2]
        );
        assert_eq!(
            pick(HookEvent::PreToolUse, "bash", bash("echo $(git push)")),
            [1, 2]
        );
        assert_eq!(pick(HookEvent::PreToolUse, "bash", bash("git status")), [2]);
        assert_eq!(
            pick(
                HookEvent::PostToolUse,
                "write_file",
                json!({"path": "src/a.rs"})
            ),
            [3]
        );
        assert!(pick(
            HookEvent::PostToolUse,
            "write_file",
            json!({"path": "docs/a.md"})
        )
        .is_empty());
        assert!(pick(HookEvent::TurnEnd, "bash", bash("x")).is_empty());
    }

    #[test]
    fn unsandboxed_programs_a_tool_could_rewrite_are_refused() {
        let workspace = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(workspace.path()).unwrap();
        let one = |command: &str| {
            hooks(&format!(
                "[[hooks]]\nevent = \"turn_end\"\ncommand = {command:?}\nsandbox = false\n"
            ))
            .unwrap()
            .check_unsandboxed(&root)
        };
        assert!(one("/bin/true").is_ok());
        assert!(
            one("true --flag").is_ok(),
            "found on PATH outside the workspace"
        );
        let relative = one("./check.sh").unwrap_err();
        assert!(relative.contains("hook:turn_end#1"), "{relative}");
        assert!(relative.contains("relative path"), "{relative}");
        let inside = root.join("check.sh");
        std::fs::write(&inside, "#!/bin/sh\n").unwrap();
        let error = one(&format!("{} arg", inside.display())).unwrap_err();
        assert!(error.contains("lies inside"), "{error}");
        let error = one("/tmp/x.sh").unwrap_err();
        assert!(error.contains("lies inside /tmp"), "{error}");
        // Sandboxed hooks may run anything.
        let sandboxed = hooks("[[hooks]]\nevent = \"turn_end\"\ncommand = \"./x\"\n").unwrap();
        assert!(sandboxed.check_unsandboxed(&root).is_ok());
    }

    #[test]
    fn answers_are_read_from_a_json_object_only() {
        assert_eq!(Answer::read(b"plain text"), Answer::default());
        assert_eq!(Answer::read(b"[1]"), Answer::default());
        assert_eq!(
            Answer::read(br#"{"context": "tests failing: a, b"}"#)
                .context
                .as_deref(),
            Some("tests failing: a, b")
        );
        assert_eq!(Answer::read(br#"{"context": 3}"#).context, None);
        assert_eq!(
            Answer::read(br#"{"decision": "deny", "message": "no"}"#).decision,
            Some((crate::protocol::Decision::Deny, Some("no".into())))
        );
        assert_eq!(Answer::read(br#"{"decision": "maybe"}"#).decision, None);
    }
}
