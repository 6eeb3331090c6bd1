//! The TUI's own `/` commands: their names, what they take and the line of
//! help each shows. None of them ever reaches the model; what they do is in
//! [`super::app`].

/// One built-in command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    pub name: &'static str,
    /// What follows the name, as the help shows it (`""`: nothing).
    pub args: &'static str,
    pub help: &'static str,
}

impl Builtin {
    /// Whether choosing it in the menu with Enter runs it at once: it
    /// needs nothing more (its arguments, if any, are optional). Tab only
    /// completes, so that arguments can follow.
    pub fn runs_on_accept(&self) -> bool {
        self.args.is_empty() || self.args.starts_with('[')
    }
}

/// The built-in commands, in the order the menu and the help list them.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "help",
        args: "",
        help: "keys, commands and input tokens",
    },
    Builtin {
        name: "status",
        args: "",
        help: "the pod's state, session, model, approvals, sandbox and MCP servers",
    },
    Builtin {
        name: "compact",
        args: "",
        help: "summarise the conversation into a new session now",
    },
    Builtin {
        name: "new",
        args: "",
        help: "start an empty session",
    },
    Builtin {
        name: "sessions",
        args: "",
        help: "pick an earlier session to resume or fork",
    },
    Builtin {
        name: "fork",
        args: "",
        help: "continue in a copy of this session",
    },
    Builtin {
        name: "undo",
        args: "",
        help: "rewind the last turn: its files and the conversation",
    },
    Builtin {
        name: "diff",
        args: "",
        help: "the diff the last turn that changed files made",
    },
    Builtin {
        name: "model",
        args: "[NAME]",
        help: "show the model, or switch to another of the provider's",
    },
    Builtin {
        name: "approval",
        args: "[ask|edits|auto|read-only]",
        help: "next approval mode (as Shift+Tab), or set one: when the pod asks before a tool runs",
    },
    Builtin {
        name: "permissions",
        args: "[revoke RULE]",
        help: "the conversation's rules and where each came from, or revoke one an answer added",
    },
    Builtin {
        name: "jobs",
        args: "[JOB]",
        help: "the background jobs, or the last lines one has printed so far",
    },
    Builtin {
        name: "agents",
        args: "[NAME]",
        help: "the child pods: open one (typing there goes to it), and come back",
    },
    Builtin {
        name: "pause",
        args: "",
        help: "hold the turn before its next model call or tool run (Ctrl+P)",
    },
    Builtin {
        name: "resume",
        args: "",
        help: "go on with a paused turn (Ctrl+P)",
    },
    Builtin {
        name: "clear",
        args: "",
        help: "clear this screen only (the model keeps its context)",
    },
    Builtin {
        name: "quit",
        args: "",
        help: "detach; the pod keeps running",
    },
];

/// The built-in command called `name`.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// The built-ins whose name starts with `prefix`.
pub fn matching(prefix: &str) -> impl Iterator<Item = &'static Builtin> + '_ {
    BUILTINS.iter().filter(move |b| b.name.starts_with(prefix))
}

/// A character that may appear in a command, workflow or knowledge name;
/// a `/` or `#` followed by anything else is plain text.
pub fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '_' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_matchable() {
        for (i, b) in BUILTINS.iter().enumerate() {
            assert!(b.name.chars().all(is_name_char), "{}", b.name);
            assert_eq!(builtin(b.name), Some(&BUILTINS[i]));
        }
        let names: Vec<_> = matching("s").map(|b| b.name).collect();
        assert_eq!(names, ["status", "sessions"]);
        assert!(builtin("nope").is_none());
    }
}
