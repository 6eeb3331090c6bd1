//! Answers to `list_completions`: workspace paths, knowledge files and
//! workflows, each with a one-line description a client can show next to it.
//!
//! Knowledge and workflow values are bare slugs (`review`, not `/review`):
//! which sigil a client types before them is the client's business.

use std::fs;
use std::io::Read;

use crate::input::{is_valid_slug, KNOWLEDGE_DIR, WORKFLOW_DIRS};
use crate::protocol::{CompletionItem, CompletionKind};
use crate::workspace::Workspace;

/// How much of a knowledge or workflow file is read to find its description:
/// the first non-empty line is near the top, and a listing must stay cheap.
const HEAD_BYTES: u64 = 4096;
/// Longest description sent; a client shows it on one row.
const MAX_DETAIL_CHARS: usize = 120;

/// The candidates for `prefix` of `kind`, sorted, at most `limit`.
pub fn completions(
    workspace: &Workspace,
    kind: CompletionKind,
    prefix: &str,
    limit: usize,
) -> Vec<CompletionItem> {
    match kind {
        CompletionKind::File => workspace
            .completions(prefix, limit)
            .into_iter()
            .map(|value| {
                let detail = if value.ends_with('/') {
                    "directory"
                } else {
                    "file"
                };
                CompletionItem {
                    value,
                    kind: kind_name(kind).to_owned(),
                    detail: Some(detail.to_owned()),
                }
            })
            .collect(),
        CompletionKind::Knowledge => slugs(workspace, &[KNOWLEDGE_DIR], kind, prefix, limit),
        CompletionKind::Workflow => slugs(workspace, &WORKFLOW_DIRS, kind, prefix, limit),
    }
}

/// The item `kind`: the kind that was asked for, as on the wire.
fn kind_name(kind: CompletionKind) -> &'static str {
    match kind {
        CompletionKind::File => "file",
        CompletionKind::Knowledge => "knowledge",
        CompletionKind::Workflow => "workflow",
    }
}

/// The `<slug>.md` files of `dirs` whose slug starts with `prefix`, each
/// slug once (from the first directory that has it, as resolving takes
/// it). Every path goes through [`Workspace::resolve`], so a `.pod`
/// directory or file symlinked out of the workspace lists nothing, as it
/// resolves nothing.
fn slugs(
    workspace: &Workspace,
    dirs: &[&str],
    kind: CompletionKind,
    prefix: &str,
    limit: usize,
) -> Vec<CompletionItem> {
    let mut found: std::collections::BTreeMap<String, &str> = Default::default();
    for dir in dirs {
        let Ok(real_dir) = workspace.resolve(dir) else {
            continue;
        };
        let Ok(entries) = fs::read_dir(real_dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(slug) = name.strip_suffix(".md") else {
                continue;
            };
            if slug.starts_with(prefix) && is_valid_slug(slug) {
                found.entry(slug.to_owned()).or_insert(dir);
            }
        }
    }
    found
        .into_iter()
        .filter_map(|(slug, dir)| {
            let real = workspace.resolve(&format!("{dir}/{slug}.md")).ok()?;
            if !real.is_file() {
                return None;
            }
            Some(CompletionItem {
                detail: description(&real),
                value: slug,
                kind: kind_name(kind).to_owned(),
            })
        })
        .take(limit)
        .collect()
}

/// A file's `description:` from its YAML front matter (as Claude Code's
/// commands have), else its first non-empty line after any front matter
/// without its heading marks; cut to one row.
fn description(path: &std::path::Path) -> Option<String> {
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(HEAD_BYTES).read_to_end(&mut head))
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.lines().peekable();
    let mut described = None;
    if lines.peek().map(|l| l.trim_end()) == Some("---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                break;
            }
            if let Some(value) = line.strip_prefix("description:") {
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                if !value.is_empty() {
                    described = Some(value.to_owned());
                }
            }
        }
    }
    let line = match described {
        Some(line) => line,
        None => lines
            .map(|l| l.trim_start_matches('#').trim())
            .find(|l| !l.is_empty())?
            .to_owned(),
    };
    let mut detail: String = line.chars().take(MAX_DETAIL_CHARS).collect();
    if line.chars().count() > MAX_DETAIL_CHARS {
        detail.push('…');
    }
    Some(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let write = |path: &str, text: &str| {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write(
            ".pod/workflows/review.md",
            "\n\n## Review a change  \n\nSteps…",
        );
        write(".pod/workflows/release.md", "Cut a release");
        write(".pod/workflows/empty.md", "");
        write(".pod/workflows/notes.txt", "not markdown");
        write(".pod/workflows/.hidden.md", "hidden");
        write(".pod/knowledge/style.md", "# House style\nUse tabs.");
        write("src/main.rs", "fn main() {}");
        (dir, ws)
    }

    fn values(items: &[CompletionItem]) -> Vec<(&str, Option<&str>)> {
        items
            .iter()
            .map(|i| (i.value.as_str(), i.detail.as_deref()))
            .collect()
    }

    #[test]
    fn workflows_are_bare_slugs_with_their_first_line() {
        let (_d, ws) = workspace();
        let all = completions(&ws, CompletionKind::Workflow, "", 10);
        assert_eq!(
            values(&all),
            [
                ("empty", None),
                ("release", Some("Cut a release")),
                ("review", Some("Review a change")),
            ]
        );
        assert!(all.iter().all(|i| i.kind == "workflow"));
        let re = completions(&ws, CompletionKind::Workflow, "rev", 10);
        assert_eq!(values(&re), [("review", Some("Review a change"))]);
        assert_eq!(completions(&ws, CompletionKind::Workflow, "", 1).len(), 1);
    }

    /// Claude Code's commands are workflows too (a `.pod` one of the same
    /// name wins), and front matter gives the description, not `---`.
    #[test]
    fn claude_commands_are_workflows_described_by_their_front_matter() {
        let (dir, ws) = workspace();
        let write = |path: &str, text: &str| {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write(
            ".claude/commands/fix-issue.md",
            "---\nallowed-tools: Bash(git:*)\ndescription: \"Fix a GitHub issue\"\n---\n\nFix $ARGUMENTS.",
        );
        write(
            ".claude/commands/plain.md",
            "---\nmodel: x\n---\n# Plain steps\n",
        );
        write(".claude/commands/release.md", "the other one");
        let all = completions(&ws, CompletionKind::Workflow, "", 10);
        assert_eq!(
            values(&all),
            [
                ("empty", None),
                ("fix-issue", Some("Fix a GitHub issue")),
                ("plain", Some("Plain steps")),
                ("release", Some("Cut a release")),
                ("review", Some("Review a change")),
            ]
        );
        let resolvers = crate::input::Resolvers::for_workspace(&ws);
        assert!(resolvers
            .workflows
            .resolve("fix-issue")
            .unwrap()
            .contains("Fix $ARGUMENTS."));
        assert_eq!(
            resolvers.workflows.resolve("release").unwrap(),
            "Cut a release"
        );
    }

    #[test]
    fn knowledge_and_files() {
        let (_d, ws) = workspace();
        let k = completions(&ws, CompletionKind::Knowledge, "st", 10);
        assert_eq!(values(&k), [("style", Some("House style"))]);
        let f = completions(&ws, CompletionKind::File, "s", 10);
        assert_eq!(values(&f), [("src/", Some("directory"))]);
        let f = completions(&ws, CompletionKind::File, "src/", 10);
        assert_eq!(values(&f), [("src/main.rs", Some("file"))]);
    }

    #[test]
    fn a_missing_or_escaping_directory_lists_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(completions(&ws, CompletionKind::Knowledge, "", 10).is_empty());
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.md"), "secret").unwrap();
        fs::create_dir_all(dir.path().join(".pod")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".pod/knowledge")).unwrap();
        assert!(completions(&ws, CompletionKind::Knowledge, "", 10).is_empty());
    }

    #[test]
    fn long_descriptions_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        fs::create_dir_all(dir.path().join(".pod/knowledge")).unwrap();
        fs::write(dir.path().join(".pod/knowledge/long.md"), "x".repeat(500)).unwrap();
        let items = completions(&ws, CompletionKind::Knowledge, "", 10);
        let detail = items[0].detail.as_deref().unwrap();
        assert_eq!(detail.chars().count(), MAX_DETAIL_CHARS + 1);
        assert!(detail.ends_with('…'));
    }
}
