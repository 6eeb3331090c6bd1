use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;
use crate::approval::{Call, Policy, SandboxGate, Verdict};
use crate::protocol::ApprovalMode;

/// A tool that exists only in this test: its definition is all there is
/// of it, registered in [`EXTRA`], with no line anywhere else — the proof
/// that a tool saying [`Effect::WritesFile`] gets the checkpoint and the
/// approvals of a file write from its definition alone.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct TouchArgs {
    path: String,
}

const TOUCH_FILE: ToolDef = ToolDef {
    facts: ToolFacts {
        name: "touch_file",
        effect: Effect::WritesFile,
        summary: Summary::Arg("path"),
    },
    spec: |_| ToolSpec {
        name: "touch_file".into(),
        description: "Create an empty file.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    },
    args: Args::of::<TouchArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, _, _| {
        with_args("touch_file", arguments, |args: TouchArgs| {
            match ws.open(&args.path, crate::workspace::Access::Write) {
                Ok(_) => ToolOutcome::ok("touched"),
                Err(e) => ToolOutcome::error(e.to_string()),
            }
        })
    }),
};

/// The tools registered by unit tests only ([`super::EXTRA`]).
pub(super) const EXTRA: &[ToolDef] = &[TOUCH_FILE];

#[test]
fn a_tool_defined_as_writing_files_is_checkpointed_and_asked_like_a_write() {
    assert!(crate::pod::checkpoint::changes_files("touch_file"));
    let policy = |mode| Policy {
        mode,
        allow: Vec::new(),
        deny: Vec::new(),
        sandbox: SandboxGate::Enforced,
        workspace_root: PathBuf::from("/w"),
        protected: Vec::new(),
        never_ask: false,
    };
    let arguments = json!({"path": "notes.txt"});
    let call = Call {
        tool: "touch_file",
        arguments: &arguments,
    };
    assert!(matches!(
        policy(ApprovalMode::Ask).decide(&call, &[]),
        Verdict::Ask { .. }
    ));
    assert_eq!(policy(ApprovalMode::Edits).decide(&call, &[]), Verdict::Run);
    let rule = policy(ApprovalMode::Ask).session_rule(&call).unwrap();
    assert_eq!(rule.to_string(), "write:notes.txt");
    let allowed = Policy {
        allow: vec!["write:*.txt".parse().unwrap()],
        ..policy(ApprovalMode::Ask)
    };
    assert_eq!(allowed.decide(&call, &[]), Verdict::Run);
}

#[test]
fn unknown_and_mcp_tools_are_treated_as_changing_anything() {
    for name in ["mcp__git__commit", "frobnicate"] {
        assert_eq!(effect(name), Effect::Unknown);
        assert!(crate::pod::checkpoint::changes_files(name), "{name}");
    }
    for (name, changes) in [
        ("bash", true),
        ("write_file", true),
        ("edit_file", true),
        ("read_file", false),
        ("web_fetch", false),
        ("spawn_agent", false),
        ("update_plan", false),
    ] {
        assert_eq!(
            crate::pod::checkpoint::changes_files(name),
            changes,
            "{name}"
        );
    }
}

#[test]
fn names_are_unique_and_each_spec_says_its_name() {
    let limits = ToolLimits::default();
    let mut seen = BTreeSet::new();
    for def in TOOLS.iter().chain(EXTRA) {
        assert!(
            seen.insert(def.facts.name),
            "{} is defined twice",
            def.facts.name
        );
        assert_eq!((def.spec)(&limits).name, def.facts.name);
    }
}

/// The types a JSON Schema allows at `schema`, `null` left out: an
/// optional field's derived schema allows `null`, which the hand-written
/// one says by leaving the field out of `required`.
fn types(schema: &Value) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = match schema.get("type") {
        Some(Value::String(t)) => [t.clone()].into(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => BTreeSet::new(),
    };
    // A derived enum of strings, or a reference to one.
    if out.is_empty() && (schema.get("enum").is_some() || schema.get("$ref").is_some()) {
        out.insert("object-or-enum".into());
    }
    out.remove("null");
    out
}

fn keys(schema: &Value, field: &str) -> BTreeSet<String> {
    match schema.get(field) {
        Some(Value::Object(map)) => map.keys().cloned().collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => BTreeSet::new(),
    }
}

/// The schema the model is sent for each tool is written by hand (its
/// descriptions and limits are for the model); the struct the tool parses
/// its arguments into is the truth. They must name the same fields, the
/// same required ones, of the same types — else the model is told of an
/// argument the tool rejects, or not told of one it needs.
#[test]
fn each_hand_written_schema_agrees_with_its_argument_struct() {
    let limits = ToolLimits::default();
    let mut failures = Vec::new();
    for def in TOOLS.iter().chain(EXTRA) {
        let sent = (def.spec)(&limits).parameters;
        let derived = serde_json::to_value((def.args.schema)()).unwrap();
        let name = def.facts.name;
        if keys(&sent, "properties") != keys(&derived, "properties") {
            failures.push(format!(
                "{name}: properties {:?} sent, {:?} parsed",
                keys(&sent, "properties"),
                keys(&derived, "properties")
            ));
            continue;
        }
        if keys(&sent, "required") != keys(&derived, "required") {
            failures.push(format!(
                "{name}: required {:?} sent, {:?} parsed",
                keys(&sent, "required"),
                keys(&derived, "required")
            ));
        }
        for field in keys(&sent, "properties") {
            let (a, b) = (&sent["properties"][&field], &derived["properties"][&field]);
            let (ta, tb) = (types(a), types(b));
            let enum_of_strings = ta.contains("string") && tb.contains("object-or-enum");
            if ta != tb && !enum_of_strings {
                failures.push(format!("{name}.{field}: {ta:?} sent, {tb:?} parsed"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Clients know the tools from the protocol's table alone: the registry
/// offers exactly those tools, in that order, with those facts.
#[test]
fn the_registry_is_built_on_the_protocols_table() {
    let facts: Vec<ToolFacts> = TOOLS.iter().map(|def| def.facts).collect();
    assert_eq!(facts, crate::protocol::tools::BUILTIN);
}

/// The web page reads the summary table from `web/js/tools.js`; this keeps
/// that file what the registry says (`POD_REGENERATE=1` rewrites it).
#[test]
fn the_web_pages_table_is_the_registrys() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/js/tools.js");
    let want = web_table();
    if std::env::var_os("POD_REGENERATE").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "web/js/tools.js differs from the registry; regenerate it with \
         POD_REGENERATE=1 cargo test --lib tools::registry"
    );
}

/// The toolbox checks and runs the test tool from its definition alone.
#[tokio::test]
async fn the_toolbox_runs_a_tool_from_its_definition() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let toolbox = super::super::Toolbox::new(workspace, ToolLimits::default());
    let arguments = json!({"path": "notes.txt"});
    assert!(toolbox.precheck("touch_file", &arguments).is_ok());
    assert!(toolbox.precheck("touch_file", &json!({})).is_err());
    let sink: super::super::OutputSink = std::sync::Arc::new(|_: &str| {});
    let outcome = toolbox
        .call(
            "touch_file",
            &arguments,
            tokio_util::sync::CancellationToken::new(),
            sink,
        )
        .await;
    assert_eq!(outcome, ToolOutcome::ok("touched"));
    assert!(dir.path().join("notes.txt").exists());
}

#[test]
fn a_fetch_is_summarised_by_the_url_its_approval_shows() {
    let cases = [
        ("HTTP://Example.COM:80/a/../b c", "http://example.com/b%20c"),
        ("http://16843009/x", "http://1.1.1.1/x"),
        ("  https://docs.rs/\t", "https://docs.rs/"),
        ("http://a.b/\u{1b}[31mred", "http://a.b/%1B[31mred"),
        (
            "https://\u{430}\u{440}\u{440}\u{4cf}\u{435}.com/",
            "https://xn--80ak6aa92e.com/",
        ),
    ];
    let root = std::env::temp_dir();
    for (written, shown) in cases {
        let arguments = json!({ "url": written });
        assert_eq!(summary("web_fetch", &arguments).as_deref(), Some(shown));
        let call = Call {
            tool: "web_fetch",
            arguments: &arguments,
        };
        let approval = crate::approval::describe(&call, &root);
        assert_eq!(
            approval.summary,
            format!("web_fetch {shown}"),
            "{written:?}"
        );
    }
    let unparsed = json!({ "url": "http://ex\u{1b}ample.com/ x" });
    assert_eq!(
        summary("web_fetch", &unparsed).as_deref(),
        Some("http://ex\u{1b}ample.com/ x")
    );
}
