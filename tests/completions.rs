//! `list_completions` through a real pod: knowledge and workflow names with
//! their descriptions, files with their kind, and `items` matching
//! `completions` one for one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use harness::Pod;
use serde_json::{json, Value};

fn ask(pod: &Pod, kind: &str, prefix: &str) -> Value {
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"list_completions","request_id":"q","kind":kind,"prefix":prefix}));
    let response = c.until_type("response");
    assert_eq!(response["request_id"], "q");
    let values: Vec<&Value> = response["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["value"])
        .collect();
    let completions: Vec<&Value> = response["completions"].as_array().unwrap().iter().collect();
    assert_eq!(values, completions, "items[i].value == completions[i]");
    response["items"].clone()
}

#[test]
fn knowledge_workflows_and_files_are_listed_with_details() {
    let pod = Pod::start();
    let write = |path: &str, text: &str| {
        let path = pod.workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".pod/workflows/review.md", "# Review a change\n\nSteps.");
    write(".pod/workflows/release.md", "Cut a release\n");
    write(".pod/workflows/README.txt", "not a workflow");
    write(".pod/knowledge/style.md", "\n## House style\n");
    write("src/main.rs", "fn main() {}\n");

    assert_eq!(
        ask(&pod, "workflow", ""),
        json!([{"value":"release","kind":"workflow","detail":"Cut a release"},
               {"value":"review","kind":"workflow","detail":"Review a change"}])
    );
    assert_eq!(
        ask(&pod, "workflow", "rev"),
        json!([{"value":"review","kind":"workflow","detail":"Review a change"}])
    );
    assert_eq!(
        ask(&pod, "knowledge", "s"),
        json!([{"value":"style","kind":"knowledge","detail":"House style"}])
    );
    assert_eq!(
        ask(&pod, "file", "s"),
        json!([{"value":"src/","kind":"file","detail":"directory"}])
    );
    assert_eq!(ask(&pod, "knowledge", "nothing"), json!([]));
}

/// Claude Code's `.claude/commands/*.md` are workflows too (issue 36),
/// listed with the `description:` of their front matter (not `---`).
#[test]
fn claude_commands_are_workflows_with_their_front_matter_description() {
    let pod = Pod::start();
    let write = |path: &str, text: &str| {
        let path = pod.workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".claude/commands/fix-issue.md",
        "---\ndescription: Fix a GitHub issue\n---\n\nFind the bug and fix it.\n",
    );
    write(
        ".pod/workflows/review.md",
        "---\nmodel: x\n---\n# Review a change\n",
    );
    assert_eq!(
        ask(&pod, "workflow", ""),
        json!([{"value":"fix-issue","kind":"workflow","detail":"Fix a GitHub issue"},
               {"value":"review","kind":"workflow","detail":"Review a change"}])
    );
}
