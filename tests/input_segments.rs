//! Checking and flattening user input segments against a real workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::fs;
use std::os::unix::fs::symlink;

use pod::input::{check, flatten, Resolver, Resolvers, MAX_REF_BYTES};
use pod::protocol::{ErrorCode, Segment};
use pod::workspace::Workspace;
use serde_json::json;

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    (dir, ws)
}

fn write(ws: &Workspace, rel: &str, content: &[u8]) {
    let p = ws.root().join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn seg(v: serde_json::Value) -> Segment {
    serde_json::from_value(v).unwrap()
}

#[test]
fn check_accepts_text_and_readable_file_refs() {
    let (_d, ws) = workspace();
    write(&ws, "src/main.rs", b"fn main() {}\n");
    let segments = [
        Segment::text("look at "),
        Segment::file_ref("src/main.rs"),
        seg(json!({"type": "knowledge_ref", "slug": "missing"})),
        seg(json!({"type": "hologram", "x": 1})),
    ];
    assert_eq!(check(&segments, &ws, None), Ok(Default::default()));
}

#[test]
fn check_refuses_file_refs_outside_the_workspace() {
    let (_d, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "s").unwrap();
    symlink(outside.path().join("secret"), ws.root().join("link")).unwrap();
    symlink(outside.path(), ws.root().join("dir-link")).unwrap();
    let abs = outside.path().join("secret").display().to_string();
    for path in [
        "../secret",
        "a/../../secret",
        abs.as_str(),
        "link",
        "dir-link/secret",
    ] {
        let err = check(&[Segment::file_ref(path)], &ws, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::FileRefOutOfScope, "{path}");
        assert!(
            err.message.contains("outside the workspace"),
            "{}",
            err.message
        );
    }
}

#[test]
fn check_refuses_unreadable_file_refs() {
    let (_d, ws) = workspace();
    write(&ws, "bin", b"\x7fELF\0\0");
    write(&ws, "big", &vec![b'x'; MAX_REF_BYTES as usize + 1]);
    write(&ws, "latin1", b"caf\xe9");
    fs::create_dir(ws.root().join("dir")).unwrap();
    symlink(ws.root().join("nowhere"), ws.root().join("dangling")).unwrap();
    for (path, why) in [
        ("dangling", "symlink"),
        ("", "empty path"),
        ("missing.rs", "no such file"),
        ("dir", "not a regular file"),
        ("bin", "binary"),
        ("big", "limit"),
        ("latin1", "UTF-8"),
    ] {
        let err = check(&[Segment::file_ref(path)], &ws, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::FileRefUnreadable, "{path}");
        assert!(err.message.contains(why), "{path}: {}", err.message);
        assert!(err.message.contains(path), "{path}: {}", err.message);
    }
}

#[test]
fn flatten_text_and_paste_inline() {
    let (_d, ws) = workspace();
    let r = Resolvers::for_workspace(&ws);
    let segments = [
        Segment::text("fix this: "),
        Segment::paste(1, "error[E0308]\n  mismatched"),
        Segment::text(" please"),
    ];
    assert_eq!(
        flatten(&segments, &Default::default(), &ws, &r).text,
        "fix this: error[E0308]\n  mismatched please"
    );
}

#[test]
fn flatten_inlines_files_as_blocks() {
    let (_d, ws) = workspace();
    write(&ws, "src/main.rs", b"fn main() {}\n");
    let r = Resolvers::for_workspace(&ws);
    let segments = [
        Segment::text("explain"),
        Segment::file_ref("src/main.rs"),
        Segment::text("briefly"),
    ];
    assert_eq!(
        flatten(&segments, &Default::default(), &ws, &r).text,
        "explain\n<file path=\"src/main.rs\">\nfn main() {}\n</file>\nbriefly"
    );
}

#[test]
fn flatten_notes_files_that_became_unreadable() {
    let (_d, ws) = workspace();
    let r = Resolvers::for_workspace(&ws);
    let out = flatten(
        &[Segment::file_ref("gone.rs")],
        &Default::default(),
        &ws,
        &r,
    )
    .text;
    assert!(out.starts_with("[file not included"), "{out}");
    assert!(
        out.contains("gone.rs") && out.contains("no such file"),
        "{out}"
    );
    let out = flatten(&[Segment::file_ref("../x")], &Default::default(), &ws, &r).text;
    assert!(out.contains("outside the workspace"), "{out}");
}

/// A workflow not in `.pod/workflows` is looked for in Claude Code's
/// `.claude/commands` (issue 36); the `.pod` one wins a name both have.
#[test]
fn flatten_resolves_workflows_from_claude_commands_after_dot_pod() {
    let (_d, ws) = workspace();
    write(&ws, ".claude/commands/fix.md", b"Fix the bug.\n");
    write(&ws, ".claude/commands/review.md", b"Claude's review.\n");
    write(&ws, ".pod/workflows/review.md", b"Pod's review.\n");
    let r = Resolvers::for_workspace(&ws);
    let segments = [
        seg(json!({"type": "workflow_invoke", "slug": "fix"})),
        seg(json!({"type": "workflow_invoke", "slug": "review"})),
    ];
    assert_eq!(
        flatten(&segments, &Default::default(), &ws, &r).text,
        "<workflow slug=\"fix\">\nFix the bug.\n</workflow>\n\
         <workflow slug=\"review\">\nPod's review.\n</workflow>"
    );
}

#[test]
fn flatten_resolves_knowledge_and_workflows_from_dot_pod() {
    let (_d, ws) = workspace();
    write(&ws, ".pod/knowledge/style.md", b"Use four spaces.\n");
    write(
        &ws,
        ".pod/workflows/review.md",
        b"Review the code for bugs.\n",
    );
    let r = Resolvers::for_workspace(&ws);
    let segments = [
        seg(json!({"type": "knowledge_ref", "slug": "style"})),
        seg(json!({"type": "workflow_invoke", "slug": "review", "args": "src/lib.rs"})),
    ];
    assert_eq!(
        flatten(&segments, &Default::default(), &ws, &r).text,
        "<knowledge slug=\"style\">\nUse four spaces.\n</knowledge>\n\
         <workflow slug=\"review\">\nReview the code for bugs.\n\nArguments: src/lib.rs\n</workflow>"
    );
    let no_args = [seg(json!({"type": "workflow_invoke", "slug": "review"}))];
    assert_eq!(
        flatten(&no_args, &Default::default(), &ws, &r).text,
        "<workflow slug=\"review\">\nReview the code for bugs.\n</workflow>"
    );
}

#[test]
fn flatten_uses_placeholders_for_the_unresolvable() {
    let (_d, ws) = workspace();
    write(&ws, "secret.md", b"top secret");
    let r = Resolvers::for_workspace(&ws);
    let segments = [
        Segment::text("a"),
        seg(json!({"type": "knowledge_ref", "slug": "nope"})),
        seg(json!({"type": "knowledge_ref", "slug": "../../secret"})),
        seg(json!({"type": "workflow_invoke", "slug": "nope", "args": "x y"})),
        seg(json!({"type": "sticker", "url": "cat.png"})),
        Segment::text("b"),
    ];
    assert_eq!(
        flatten(&segments, &Default::default(), &ws, &r).text,
        "a\n[unknown knowledge: nope]\n[unknown knowledge: ../../secret]\n\
         [unknown workflow: nope] x y\n[unknown input: kind=sticker]\nb"
    );
}

#[test]
fn knowledge_dir_symlinked_outside_resolves_nothing() {
    let (_d, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("style.md"), "outside").unwrap();
    fs::create_dir(ws.root().join(".pod")).unwrap();
    symlink(outside.path(), ws.root().join(".pod/knowledge")).unwrap();
    let r = Resolvers::for_workspace(&ws);
    assert_eq!(r.knowledge.resolve("style"), None);
}

#[test]
fn custom_resolvers_are_used() {
    struct Fixed;
    impl Resolver for Fixed {
        fn resolve(&self, slug: &str) -> Option<String> {
            Some(format!("text of {slug}"))
        }
    }
    let (_d, ws) = workspace();
    let r = Resolvers {
        knowledge: Box::new(Fixed),
        workflows: Box::new(Fixed),
        blobs: None,
        max_context_images: 20,
    };
    let out = flatten(
        &[seg(json!({"type": "knowledge_ref", "slug": "k"}))],
        &Default::default(),
        &ws,
        &r,
    )
    .text;
    assert_eq!(out, "<knowledge slug=\"k\">\ntext of k\n</knowledge>");
}
