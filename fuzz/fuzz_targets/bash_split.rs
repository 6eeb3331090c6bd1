//! A `bash` command line through the splitter that guards every allow rule,
//! and through the policy as a `session` answer and `bash:*` see it.
//!
//! Input: the command line (lossy UTF-8).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pod::approval::fuzzing::split;
use pod::approval::{session_rule, Call, Policy, Rule, SandboxGate, Verdict};
use pod::protocol::ApprovalMode;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let read = split(&line);
    let policy = Policy {
        mode: ApprovalMode::Ask,
        allow: Vec::new(),
        deny: Vec::new(),
        sandbox: SandboxGate::Enforced,
        workspace_root: "/ws".into(),
        protected: Vec::new(),
    };
    let arguments = serde_json::json!({ "command": line });
    let call = Call {
        tool: "bash",
        arguments: &arguments,
    };
    // What a person approved for the session runs unasked, and the rule
    // reads back as itself (it is replayed from the log after a restart).
    if let Some(rule) = session_rule(&call, std::path::Path::new("/ws")) {
        let text = rule.to_string();
        if !text.chars().any(char::is_control) {
            let again: Rule = text.parse().expect("a session rule parses back");
            assert_eq!(again.to_string(), text);
        }
        assert_eq!(policy.decide(&call, [&rule]), Verdict::Run, "{line:?} under {text}");
    }
    // Not even `bash:*` covers a substitution or a line the splitter
    // cannot vouch for.
    let everything: Rule = "bash:*".parse().expect("bash:*");
    if read.substitution || read.uncertain {
        assert_ne!(policy.decide(&call, [&everything]), Verdict::Run, "{line:?}");
    }
});
