//! The policy as a table: every mode × tool kind × rule combination, and
//! the sandbox gate's states, one row each.

use serde_json::{json, Value};

use super::*;
use ApprovalMode::{Ask, Auto, Edits, ReadOnly, Unknown};
use SandboxGate::{Enforced, Off, Unavailable};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Runs,
    Asks(&'static str),
    Denied(&'static str),
}
use Want::{Asks, Denied, Runs};

const ROOT: &str = "/ws";

// Calls, one per tool kind: (tool, arguments as JSON).
const READ: (&str, &str) = ("read_file", r#"{"path":"src/a.rs"}"#);
const LIST: (&str, &str) = ("list_dir", r#"{}"#);
const GREP: (&str, &str) = ("grep", r#"{"pattern":"x","path":"/ws/src"}"#);
const LIST_SECRETS: (&str, &str) = ("list_dir", r#"{"path":"secrets"}"#);
const GLOB: (&str, &str) = ("glob", r#"{"pattern":"*.rs"}"#);
const WRITE: (&str, &str) = ("write_file", r#"{"path":"src/a.rs","content":"x"}"#);
const WRITE_ABS: (&str, &str) = (
    "write_file",
    r#"{"path":"/ws/./src/../src/a.rs","content":"x"}"#,
);
const WRITE_OUT: (&str, &str) = (
    "write_file",
    r#"{"path":"../elsewhere/a.rs","content":"x"}"#,
);
const EDIT: (&str, &str) = (
    "edit_file",
    r#"{"path":"src/a.rs","old_string":"a","new_string":"b"}"#,
);
const BASH: (&str, &str) = ("bash", r#"{"command":"cargo test"}"#);
const MCP: (&str, &str) = ("mcp__git__status", r#"{}"#);
const UNKNOWN: (&str, &str) = ("mcp__x__frobnicate", r#"{"x":1}"#);

// Bash lines that try to get more past a rule than it names.
const CHAINED: (&str, &str) = ("bash", r#"{"command":"git status; touch x"}"#);
const AND_RM: (&str, &str) = ("bash", r#"{"command":"git status && rm -rf ~"}"#);
const SUBST: (&str, &str) = ("bash", r#"{"command":"git status $(rm x)"}"#);
const BACKTICK: (&str, &str) = ("bash", r#"{"command":"git status `rm x`"}"#);
const QUOTED: (&str, &str) = ("bash", r#"{"command":"git status \"a;b\""}"#);
const STATUS: (&str, &str) = ("bash", r#"{"command":"git  status -s"}"#);
const REDIRECT: (&str, &str) = ("bash", r#"{"command":"cat a > ~/.bashrc"}"#);
const TO_NULL: (&str, &str) = ("bash", r#"{"command":"cargo test 2>&1 >/dev/null"}"#);
const MAKE: (&str, &str) = ("bash", r#"{"command":"cd src && make"}"#);
const MAKE_MORE: (&str, &str) = ("bash", r#"{"command":"cd src && make install"}"#);
const HIDDEN_RM: (&str, &str) = ("bash", r#"{"command":"echo $(rm -rf x)"}"#);
const QUOTED_RM: (&str, &str) = ("bash", r#"{"command":"ls; \"rm\" -rf x"}"#);
const PATH_RM: (&str, &str) = ("bash", r#"{"command":"/bin/r\\m -rf x"}"#);
const ESCAPED_HASH: (&str, &str) = ("bash", r#"{"command":"git status\\ #; rm -rf ~"}"#);
const ESCAPED_GT: (&str, &str) = ("bash", r#"{"command":"git status \\>& rm -rf ~"}"#);
const ARITH: (&str, &str) = ("bash", r#"{"command":"((x<<2))\nrm -rf ~\n2"}"#);
const CARGO_BARE: (&str, &str) = ("bash", r#"{"command":"cargo"}"#);

const NONE: &[&str] = &[];

type Row = (
    ApprovalMode,
    (&'static str, &'static str),
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    SandboxGate,
    Want,
);

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // mode, call, allow, deny, session, gate => expected
    // --- ask: read-only tools run, everything else asks ---
    (Ask, READ, NONE, NONE, NONE, Enforced, Runs),
    (Ask, READ, &["read:src/**"], NONE, NONE, Enforced, Runs),
    (Ask, READ, NONE, &["read:src/**"], NONE, Enforced, Denied("read:src/**")),
    (Ask, READ, &["read:src/**"], &["read:src/**"], NONE, Enforced, Denied("read:src/**")),
    (Ask, READ, NONE, NONE, &["read_file:*"], Enforced, Runs),
    (Ask, LIST, NONE, &["list_dir"], NONE, Enforced, Denied("list_dir:*")),
    (Ask, LIST, NONE, &["read:src/**"], NONE, Enforced, Runs),
    (Ask, GREP, NONE, &["read:src"], NONE, Enforced, Denied("read:src")),
    (Ask, LIST_SECRETS, NONE, &["read:secrets/**"], NONE, Enforced, Denied("read:secrets/**")),
    (Auto, LIST_SECRETS, NONE, &["read:secrets/*"], NONE, Enforced, Denied("read:secrets/*")),
    (ReadOnly, LIST_SECRETS, NONE, &["read:src/**"], NONE, Enforced, Runs),
    (Ask, GLOB, NONE, NONE, NONE, Unavailable, Runs),
    (Ask, WRITE, NONE, NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, WRITE, &["write:src/**"], NONE, NONE, Enforced, Runs),
    (Ask, WRITE, &["write:docs/**"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, WRITE, NONE, &["write:src/*"], NONE, Enforced, Denied("write:src/*")),
    (Ask, WRITE, &["write:src/**"], &["write:**/*.rs"], NONE, Enforced, Denied("write:**/*.rs")),
    (Ask, WRITE, NONE, NONE, &["write:src/a.rs"], Enforced, Runs),
    (Ask, WRITE_ABS, NONE, NONE, &["write:src/a.rs"], Enforced, Runs),
    (Ask, WRITE, NONE, NONE, &["write:src/b.rs"], Enforced, Asks("mode:ask")),
    (Ask, WRITE, &["read:src/**"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, EDIT, NONE, NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, EDIT, &["write:src/**"], NONE, NONE, Enforced, Runs),
    (Ask, EDIT, &["edit_file"], NONE, NONE, Enforced, Runs),
    (Ask, EDIT, NONE, &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (Ask, EDIT, &["write:src/**"], &["edit_file"], NONE, Enforced, Denied("edit_file:*")),
    (Ask, EDIT, NONE, NONE, &["write:src/a.rs"], Enforced, Runs),
    (Ask, BASH, NONE, NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, BASH, &["bash:cargo *"], NONE, NONE, Enforced, Runs),
    (Ask, BASH, &["bash:cargo build*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, BASH, NONE, &["bash:cargo *"], NONE, Enforced, Denied("bash:cargo *")),
    (Ask, BASH, &["bash:cargo *"], &["bash:cargo test*"], NONE, Enforced, Denied("bash:cargo test*")),
    (Ask, BASH, NONE, NONE, &["bash:cargo *"], Enforced, Runs),
    (Ask, BASH, NONE, NONE, NONE, Unavailable, Asks("mode:ask")),
    (Ask, BASH, NONE, NONE, NONE, Off, Asks("mode:ask")),
    (Ask, BASH, &["bash"], NONE, NONE, Unavailable, Runs),
    (Ask, MCP, NONE, NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, MCP, &["mcp__git__*"], NONE, NONE, Enforced, Runs),
    (Ask, MCP, &["mcp__github__*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, MCP, NONE, &["mcp__git__*:*"], NONE, Enforced, Denied("mcp__git__*:*")),
    (Ask, MCP, &["mcp__git__*"], &["mcp__*"], NONE, Enforced, Denied("mcp__*:*")),
    (Ask, MCP, NONE, NONE, &["mcp__git__status:*"], Enforced, Runs),
    (Ask, UNKNOWN, NONE, NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, UNKNOWN, &["mcp__x__frobnicate"], NONE, NONE, Enforced, Runs),
    (Ask, UNKNOWN, NONE, &["*"], NONE, Enforced, Denied("*:*")),
    // --- bash allow rules cover a line only if they cover every command ---
    (Ask, CHAINED, &["bash:git status*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, CHAINED, &["bash:git status*", "bash:touch *"], NONE, NONE, Enforced, Runs),
    (Ask, AND_RM, &["bash:git status*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, SUBST, &["bash:git status*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, SUBST, &["bash:git status*", "bash:rm *"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, SUBST, &["*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, BACKTICK, &["bash:*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, QUOTED, &["bash:git status*"], NONE, NONE, Enforced, Runs),
    (Ask, STATUS, &["bash:git status*"], NONE, NONE, Enforced, Runs),
    (Ask, CARGO_BARE, &["bash:cargo *"], NONE, NONE, Enforced, Runs),
    (Ask, REDIRECT, &["bash:cat *"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, REDIRECT, &["bash:cat * > *"], NONE, NONE, Enforced, Runs),
    (Ask, REDIRECT, &["bash"], NONE, NONE, Enforced, Runs),
    (Ask, REDIRECT, &["*"], NONE, NONE, Enforced, Runs),
    (Ask, ESCAPED_HASH, &["bash:git status*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, ESCAPED_GT, &["bash:git status*"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Ask, ARITH, &["bash:x*", "bash:2"], NONE, NONE, Enforced, Asks("mode:ask")),
    (Auto, QUOTED_RM, NONE, &["bash:rm *"], NONE, Enforced, Denied("bash:rm *")),
    (Auto, PATH_RM, NONE, &["bash:rm *"], NONE, Enforced, Denied("bash:rm *")),
    (Ask, TO_NULL, &["bash:cargo *"], NONE, NONE, Enforced, Runs),
    (Ask, MAKE, NONE, NONE, &["bash:cd src && make"], Enforced, Runs),
    (Ask, MAKE_MORE, NONE, NONE, &["bash:cd src && make"], Enforced, Asks("mode:ask")),
    (Ask, SUBST, NONE, NONE, &["bash:git status $(rm x)"], Enforced, Runs),
    (Auto, AND_RM, NONE, &["bash:rm *"], NONE, Enforced, Denied("bash:rm *")),
    (Auto, HIDDEN_RM, NONE, &["bash:rm *"], NONE, Enforced, Denied("bash:rm *")),
    (Auto, CHAINED, &["bash:git status*"], &["bash:touch *"], NONE, Enforced, Denied("bash:touch *")),
    // --- edits: writes inside the workspace run too ---
    (Edits, READ, NONE, NONE, NONE, Enforced, Runs),
    (Edits, READ, NONE, &["read:**"], NONE, Enforced, Denied("read:**")),
    (Edits, WRITE, NONE, NONE, NONE, Enforced, Runs),
    (Edits, WRITE, &["write:src/**"], NONE, NONE, Enforced, Runs),
    (Edits, WRITE, NONE, &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (Edits, WRITE, &["write:src/**"], &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (Edits, WRITE_ABS, NONE, &["write:src/a.rs"], NONE, Enforced, Denied("write:src/a.rs")),
    (Edits, WRITE_OUT, NONE, NONE, NONE, Enforced, Asks("mode:edits")),
    (Edits, WRITE_OUT, &["write:**"], NONE, NONE, Enforced, Asks("mode:edits")),
    (Edits, EDIT, NONE, NONE, NONE, Unavailable, Runs),
    (Edits, EDIT, NONE, &["edit_file"], NONE, Enforced, Denied("edit_file:*")),
    (Edits, BASH, NONE, NONE, NONE, Enforced, Asks("mode:edits")),
    (Edits, BASH, &["bash:cargo *"], NONE, NONE, Enforced, Runs),
    (Edits, BASH, NONE, &["bash:cargo *"], NONE, Enforced, Denied("bash:cargo *")),
    (Edits, BASH, &["bash:cargo *"], &["bash"], NONE, Enforced, Denied("bash:*")),
    (Edits, BASH, NONE, NONE, &["bash:cargo *"], Enforced, Runs),
    (Edits, BASH, NONE, NONE, NONE, Unavailable, Asks("mode:edits")),
    (Edits, BASH, NONE, NONE, NONE, Off, Asks("mode:edits")),
    (Edits, MCP, NONE, NONE, NONE, Enforced, Asks("mode:edits")),
    (Edits, MCP, &["mcp__git__*"], NONE, NONE, Enforced, Runs),
    (Edits, MCP, NONE, &["mcp__git__*"], NONE, Enforced, Denied("mcp__git__*:*")),
    (Edits, MCP, NONE, NONE, &["mcp__git__status:*"], Enforced, Runs),
    (Edits, UNKNOWN, NONE, NONE, NONE, Enforced, Asks("mode:edits")),
    // --- auto: everything runs, deny rules still deny ---
    (Auto, READ, NONE, NONE, NONE, Enforced, Runs),
    (Auto, READ, NONE, &["read:src/a.rs"], NONE, Enforced, Denied("read:src/a.rs")),
    (Auto, WRITE, NONE, NONE, NONE, Enforced, Runs),
    (Auto, WRITE, &["write:**"], &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (Auto, WRITE_OUT, NONE, NONE, NONE, Enforced, Runs),
    (Auto, EDIT, NONE, &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (Auto, BASH, NONE, NONE, NONE, Enforced, Runs),
    (Auto, BASH, NONE, NONE, NONE, Off, Runs),
    (Auto, BASH, NONE, NONE, NONE, Unavailable, Asks("mode:auto (sandbox unavailable)")),
    (Auto, BASH, &["bash:cargo *"], NONE, NONE, Unavailable, Runs),
    (Auto, BASH, NONE, NONE, &["bash:cargo *"], Unavailable, Runs),
    (Auto, BASH, NONE, &["bash:cargo *"], NONE, Enforced, Denied("bash:cargo *")),
    (Auto, BASH, &["bash:cargo *"], &["bash:cargo *"], NONE, Unavailable, Denied("bash:cargo *")),
    (Auto, SUBST, NONE, NONE, NONE, Enforced, Runs),
    (Auto, MCP, NONE, NONE, NONE, Unavailable, Runs),
    (Auto, MCP, &["mcp__git__*"], &["mcp__git__status"], NONE, Enforced, Denied("mcp__git__status:*")),
    (Auto, UNKNOWN, NONE, NONE, NONE, Enforced, Runs),
    (Auto, UNKNOWN, NONE, &["mcp__x__frob*"], NONE, Enforced, Denied("mcp__x__frob*:*")),
    // --- read-only: only the read-only tools run, unless a rule allows ---
    (ReadOnly, READ, NONE, NONE, NONE, Enforced, Runs),
    (ReadOnly, LIST, NONE, NONE, NONE, Enforced, Runs),
    (ReadOnly, GREP, NONE, NONE, NONE, Enforced, Runs),
    (ReadOnly, GLOB, NONE, &["glob"], NONE, Enforced, Denied("glob:*")),
    (ReadOnly, WRITE, NONE, NONE, NONE, Enforced, Denied("mode:read-only")),
    (ReadOnly, WRITE, &["write:src/**"], NONE, NONE, Enforced, Runs),
    (ReadOnly, WRITE, NONE, &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (ReadOnly, WRITE, &["write:src/**"], &["write:src/**"], NONE, Enforced, Denied("write:src/**")),
    (ReadOnly, WRITE, NONE, NONE, &["write:src/a.rs"], Enforced, Runs),
    (ReadOnly, EDIT, NONE, NONE, NONE, Enforced, Denied("mode:read-only")),
    (ReadOnly, BASH, NONE, NONE, NONE, Enforced, Denied("mode:read-only")),
    (ReadOnly, BASH, NONE, NONE, NONE, Unavailable, Denied("mode:read-only")),
    (ReadOnly, BASH, NONE, NONE, NONE, Off, Denied("mode:read-only")),
    (ReadOnly, BASH, &["bash:cargo *"], NONE, NONE, Enforced, Runs),
    (ReadOnly, BASH, NONE, &["bash:cargo *"], NONE, Enforced, Denied("bash:cargo *")),
    (ReadOnly, BASH, NONE, NONE, &["bash:cargo *"], Enforced, Runs),
    (ReadOnly, MCP, NONE, NONE, NONE, Enforced, Denied("mode:read-only")),
    (ReadOnly, MCP, &["mcp__git__*"], NONE, NONE, Enforced, Runs),
    (ReadOnly, MCP, NONE, &["mcp__git__*"], NONE, Enforced, Denied("mcp__git__*:*")),
    (ReadOnly, UNKNOWN, NONE, NONE, NONE, Enforced, Denied("mode:read-only")),
    // --- a mode this build does not know asks ---
    (Unknown, READ, NONE, NONE, NONE, Enforced, Runs),
    (Unknown, WRITE, NONE, NONE, NONE, Enforced, Asks("mode:unknown")),
    (Unknown, BASH, NONE, NONE, NONE, Off, Asks("mode:unknown")),
];

fn rules(texts: &[&str]) -> Vec<Rule> {
    texts
        .iter()
        .map(|t| t.parse().unwrap_or_else(|e| panic!("{t}: {e}")))
        .collect()
}

fn args(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// What a policy built from one table row decides for the row's call.
fn decide(row: &Row, never_ask: bool) -> Verdict {
    let &(mode, (tool, json), allow, deny, session, sandbox, _) = row;
    let policy = Policy {
        mode,
        allow: rules(allow),
        deny: rules(deny),
        sandbox,
        workspace_root: ROOT.into(),
        protected: Vec::new(),
        never_ask,
    };
    let arguments = args(json);
    policy.decide(
        &Call {
            tool,
            arguments: &arguments,
        },
        &rules(session),
    )
}

#[test]
fn policy_table() {
    let mut failures = Vec::new();
    for (i, row @ &(mode, (tool, json), allow, deny, session, sandbox, want)) in
        TABLE.iter().enumerate()
    {
        let got = decide(row, false);
        let expected = match want {
            Runs => Verdict::Run,
            Asks(reason) => Verdict::Ask {
                reason: reason.into(),
            },
            Denied(rule) => Verdict::Deny { rule: rule.into() },
        };
        if got != expected {
            failures.push(format!(
                "row {i}: {mode:?} {tool} {json} allow={allow:?} deny={deny:?} session={session:?} \
                 {sandbox:?}: expected {expected:?}, got {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `pod exec`'s policy changes exactly one thing: every call the table
/// has asking is denied by `mode:exec`; what runs still runs, what is
/// denied is still denied by the same rule.
#[test]
fn never_ask_denies_exactly_what_would_ask() {
    for (i, row @ &(mode, (tool, json), .., want)) in TABLE.iter().enumerate() {
        let got = decide(row, true);
        let expected = match want {
            Runs => Verdict::Run,
            Asks(_) => Verdict::Deny {
                rule: super::NEVER_ASK_RULE.into(),
            },
            Denied(rule) => Verdict::Deny { rule: rule.into() },
        };
        assert_eq!(got, expected, "row {i}: {mode:?} {tool} {json}");
    }
}

#[test]
fn session_rules_name_what_was_approved() {
    let policy = Policy {
        mode: Ask,
        allow: Vec::new(),
        deny: Vec::new(),
        sandbox: Enforced,
        workspace_root: ROOT.into(),
        protected: Vec::new(),
        never_ask: false,
    };
    for (tool, arguments, expected) in [
        (
            "bash",
            json!({"command": "cargo test --lib"}),
            Some("bash:cargo test *"),
        ),
        (
            "bash",
            json!({"command": "  cargo   build  "}),
            Some("bash:cargo build *"),
        ),
        (
            "bash",
            json!({"command": "! grep -q x f"}),
            Some("bash:grep *"),
        ),
        (
            "bash",
            json!({"command": "git status # why"}),
            Some("bash:git status *"),
        ),
        (
            "bash",
            json!({"command": "cd src && make"}),
            Some("bash:cd src && make"),
        ),
        ("bash", json!({"command": "ls\npwd"}), Some("bash:ls\npwd")),
        (
            "bash",
            json!({"command": "echo $(date)"}),
            Some("bash:echo $(date)"),
        ),
        (
            "bash",
            json!({"command": "echo hi > marker"}),
            Some("bash:echo hi > marker"),
        ),
        (
            "bash",
            json!({"command": "cargo test 2>&1"}),
            Some("bash:cargo test *"),
        ),
        ("bash", json!({"command": "ls*x y"}), Some(r"bash:ls\*x *")),
        ("bash", json!({"command": "*"}), Some(r"bash:\* *")),
        ("bash", json!({"command": "   "}), None),
        ("bash", json!({}), None),
        (
            "write_file",
            json!({"path": "src/main.rs", "content": ""}),
            Some("write:src/main.rs"),
        ),
        (
            "edit_file",
            json!({"path": "/ws/./src/lib.rs"}),
            Some("write:src/lib.rs"),
        ),
        (
            "write_file",
            json!({"path": "src/[id].tsx"}),
            Some("write:src/[[]id[]].tsx"),
        ),
        ("write_file", json!({"path": "../out.rs"}), None),
        ("write_file", json!({}), None),
        ("mcp__git__status", json!({}), Some("mcp__git__status:*")),
        ("read_file", json!({"path": "a"}), Some("read_file:*")),
        ("weird*tool", json!({}), Some("weird[*]tool:*")),
    ] {
        let call = Call {
            tool,
            arguments: &arguments,
        };
        let rule = policy.session_rule(&call);
        assert_eq!(
            rule.as_ref().map(Rule::to_string).as_deref(),
            expected,
            "{tool} {arguments}"
        );
        if let Some(rule) = rule {
            // What was approved for the session now runs unasked.
            let rebuilt: Rule = rule.to_string().parse().expect("session rules parse back");
            assert_eq!(
                policy.decide(&call, &[rebuilt]),
                Verdict::Run,
                "{tool} {arguments}"
            );
        }
    }
}

#[test]
fn a_session_rule_for_a_file_does_not_cover_its_neighbours() {
    let policy = Policy {
        mode: Ask,
        allow: Vec::new(),
        deny: Vec::new(),
        sandbox: Enforced,
        workspace_root: ROOT.into(),
        protected: Vec::new(),
        never_ask: false,
    };
    let approved = json!({"path": "src/[id].tsx", "content": ""});
    let rule = policy
        .session_rule(&Call {
            tool: "write_file",
            arguments: &approved,
        })
        .expect("a rule");
    let neighbour = json!({"path": "src/i.tsx", "content": ""});
    assert_eq!(
        policy.decide(
            &Call {
                tool: "write_file",
                arguments: &neighbour
            },
            &[rule]
        ),
        Verdict::Ask {
            reason: "mode:ask".into()
        }
    );
}

#[test]
fn workspace_relative_paths() {
    let root = std::path::Path::new("/ws");
    for (raw, expected) in [
        ("src/a.rs", Some("src/a.rs")),
        ("./src//a.rs", Some("src/a.rs")),
        ("src/../b.rs", Some("b.rs")),
        ("/ws/src/a.rs", Some("src/a.rs")),
        ("/ws", Some(".")),
        (".", Some(".")),
        ("../x", None),
        ("src/../../x", None),
        ("/etc/passwd", None),
        ("/wsx/a", None),
    ] {
        assert_eq!(workspace_relative(root, raw).as_deref(), expected, "{raw}");
    }
}

/// A policy over a real directory, for the rows that depend on what is on
/// disk (symlinks, the protected paths).
fn on_disk(mode: ApprovalMode, allow: &[&str], root: &Path, protected: Vec<PathBuf>) -> Policy {
    Policy {
        mode,
        allow: rules(allow),
        deny: Vec::new(),
        sandbox: Enforced,
        workspace_root: root.to_path_buf(),
        protected,
        never_ask: false,
    }
}

fn write_to(policy: &Policy, path: &str) -> Verdict {
    let arguments = json!({"path": path, "content": "x"});
    policy.decide(
        &Call {
            tool: "write_file",
            arguments: &arguments,
        },
        &[],
    )
}

/// Trust item 8: `edits` mode and a broad allow rule let a file tool write
/// `.git/config` (whose `core.fsmonitor` an allowed `git status` then
/// runs), or the pod's own data and config: those always ask, but in `auto`.
#[test]
fn writes_into_git_and_the_pods_own_files_ask_in_every_mode_but_auto() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let config = root.join("pod.toml");
    for (mode, allow) in [(Edits, &[][..]), (Ask, &["write:**"][..])] {
        let policy = on_disk(mode, allow, &root, vec![config.clone()]);
        for path in [
            ".git/config",
            "vendor/lib/.git/hooks/pre-commit",
            "pod.toml",
        ] {
            match write_to(&policy, path) {
                Verdict::Ask { reason } => assert!(reason.contains("protected path"), "{reason}"),
                other => panic!("{mode:?} {allow:?} {path}: {other:?}"),
            }
        }
        assert_eq!(write_to(&policy, "src/main.rs"), Verdict::Run, "{mode:?}");
    }
    let auto = on_disk(Auto, &[], &root, vec![config]);
    assert_eq!(write_to(&auto, ".git/config"), Verdict::Run);
}

/// Trust item 9: a `write:` rule judges the path a symlink leads to, not
/// the path as written: `docs/link -> ../src` does not make `src/main.rs`
/// writable under `write:docs/**`, and a link out of the workspace matches
/// no rule at all.
#[test]
fn rules_judge_the_path_a_symlink_leads_to() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::os::unix::fs::symlink("../src", root.join("docs/link")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("docs/out")).unwrap();
    let policy = on_disk(Ask, &["write:docs/**"], &root, Vec::new());
    assert_eq!(write_to(&policy, "docs/guide.md"), Verdict::Run);
    for path in ["docs/link/main.rs", "docs/out/passwd"] {
        assert!(
            matches!(write_to(&policy, path), Verdict::Ask { .. }),
            "{path} ran under write:docs/**"
        );
    }
    let src = on_disk(Ask, &["write:src/**"], &root, Vec::new());
    assert_eq!(write_to(&src, "docs/link/main.rs"), Verdict::Run);
}

#[test]
fn web_fetch_rules_match_the_serialised_url_and_a_session_answer_adds_the_origin() {
    let root = std::path::Path::new("/w");
    let args = |url: &str| json!({ "url": url });
    fn fetch<'a>(root: &Path, arguments: &'a Value) -> (Option<Rule>, Subject<'a>) {
        let call = Call {
            tool: "web_fetch",
            arguments,
        };
        (session_rule(&call, root), subject_of(root, &[], &call))
    }
    let fetch = |arguments| fetch(root, arguments);
    let (docs, local, tokio, evil) = (
        args("HTTPS://Docs.RS:443/serde/latest/?x=1"),
        args("http://127.0.0.1:8080/a"),
        args("https://DOCS.rs/tokio"),
        args("https://docs.rs.evil.example/"),
    );
    let rule = fetch(&docs).0.unwrap();
    assert_eq!(rule.to_string(), "web_fetch:https://docs.rs/*");
    let other = fetch(&local).0.unwrap();
    assert_eq!(other.to_string(), "web_fetch:http://127.0.0.1:8080/*");
    assert!(matches_non_bash(&rule, "web_fetch", &fetch(&tokio).1));
    assert!(!matches_non_bash(&rule, "web_fetch", &fetch(&evil).1));
}

/// Issue 35 item 12: a host the model chose may hold a `*`; its session rule
/// covers that host only, and `always` refuses to keep it.
#[test]
fn a_wildcard_in_a_fetched_host_is_escaped_and_never_kept_always() {
    let root = std::path::Path::new("/w");
    let policy = Policy {
        mode: Ask,
        allow: Vec::new(),
        deny: Vec::new(),
        sandbox: Enforced,
        workspace_root: root.into(),
        protected: Vec::new(),
        never_ask: false,
    };
    let asked = json!({"url": "https://*/readme"});
    let asked = Call {
        tool: "web_fetch",
        arguments: &asked,
    };
    let rule = policy.session_rule(&asked).expect("a rule");
    assert_eq!(rule.to_string(), r"web_fetch:https://\*/*");
    assert_eq!(policy.decide(&asked, [&rule]), Verdict::Run);
    let attacker = json!({"url": "https://attacker.example/readme"});
    let attacker = Call {
        tool: "web_fetch",
        arguments: &attacker,
    };
    assert_eq!(
        policy.decide(&attacker, [&rule]),
        Verdict::Ask {
            reason: "mode:ask".into()
        }
    );
    let why = policy.why_not_always(&asked).expect("always refused");
    assert!(why.contains("the host `*`"), "{why}");
    let plain = json!({"url": "https://docs.rs/serde"});
    let plain = Call {
        tool: "web_fetch",
        arguments: &plain,
    };
    assert_eq!(policy.why_not_always(&plain), None);
}

/// Issue 35 item 13: `LC_ALL=C ls` approved for the session allows `ls`
/// with that assignment, not every command after `LC_ALL=C`; nor does a
/// rule whose `*` stands where the program is.
#[test]
fn an_assignment_before_a_command_is_not_its_program() {
    let policy = Policy {
        mode: Ask,
        allow: vec!["bash:LC_ALL=C *".parse().unwrap()],
        deny: Vec::new(),
        sandbox: Enforced,
        workspace_root: ROOT.into(),
        protected: Vec::new(),
        never_ask: false,
    };
    let bash = |line: &str| json!({ "command": line });
    fn call(arguments: &Value) -> Call<'_> {
        Call {
            tool: "bash",
            arguments,
        }
    }
    let asked = bash("LC_ALL=C ls");
    let rule = policy.session_rule(&call(&asked)).expect("a rule");
    assert_eq!(rule.to_string(), "bash:LC_ALL=C ls *");
    let ask = Verdict::Ask {
        reason: "mode:ask".into(),
    };
    for (line, verdict) in [
        ("LC_ALL=C ls", Verdict::Run),
        ("LC_ALL=C ls -la src", Verdict::Run),
        ("LC_ALL=C rm -rf ~", ask.clone()),
        ("LC_ALL=C lsblk", ask.clone()),
        ("LC_ALL=C X=1 ls", ask.clone()),
        ("ls", ask.clone()),
    ] {
        let arguments = bash(line);
        assert_eq!(policy.decide(&call(&arguments), [&rule]), verdict, "{line}");
    }
    let everything: Rule = "bash:*".parse().unwrap();
    let rm = bash("LC_ALL=C rm -rf ~");
    assert_eq!(
        policy.decide(&call(&rm), [&everything]),
        Verdict::Run,
        "`bash:*` is all of bash"
    );
}
