//! What a person is shown before deciding a call: a one-line `summary` and a
//! `preview` of what will happen — the command for `bash`, a unified diff of
//! the file as it is now against what the call would make it for
//! `write_file`/`edit_file`, the arguments otherwise.
//!
//! This reads files, so callers run it on a blocking task. It never fails:
//! what it cannot show (an unreadable file, an edit that would not apply)
//! becomes the preview's text, which is itself what the person needs to know.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use super::{workspace_relative, Call};
use crate::tools::looks_binary;
use crate::tools::registry::{self, Effect};
use crate::workspace::Workspace;

/// A summary is one line of a panel or a `pod pending` listing.
const SUMMARY_CHARS: usize = 100;
/// Previews are committed to the log in `approval_request`; a 10 MB file
/// rewrite must not put 10 MB there.
const PREVIEW_BYTES: usize = 64 * 1024;
/// Files larger than this are not diffed: reading and diffing them would
/// stall the step, and no person reads such a diff.
const DIFF_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Past this, `similar` returns a coarser (still correct) diff.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub summary: String,
    pub preview: String,
}

/// Describes `call` for a person; `workspace` is the workspace root.
pub fn describe(call: &Call, workspace: &Path) -> Description {
    match registry::effect(call.tool) {
        Effect::RunsCommands => {
            describe_bash(&registry::summary(call.tool, call.arguments).unwrap_or_default())
        }
        Effect::WritesFile => match call.arg("path") {
            Some(path) => describe_change(call, path, workspace),
            None => describe_other(call),
        },
        Effect::Network => describe_fetch(call),
        _ => describe_other(call),
    }
}

/// `text` cut to `max` characters, with `…` where it was cut.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn cap_preview(mut text: String) -> String {
    if text.len() <= PREVIEW_BYTES {
        return text;
    }
    let mut end = PREVIEW_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let rest = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("\n[… preview cut: {rest} more bytes]"));
    text
}

/// A command (the argument every client shows for the call,
/// [`registry::summary`]): its first line is the summary, the whole line
/// the preview.
fn describe_bash(command: &str) -> Description {
    Description {
        summary: registry::one_line(command, SUMMARY_CHARS),
        preview: cap_preview(command.to_owned()),
    }
}

fn describe_other(call: &Call) -> Description {
    let compact = call.arguments.to_string();
    let pretty = serde_json::to_string_pretty(call.arguments).unwrap_or_else(|_| compact.clone());
    Description {
        summary: cut_chars(&format!("{} {compact}", call.tool), SUMMARY_CHARS),
        preview: cap_preview(pretty),
    }
}

/// A fetch as the pod will make it ([`crate::tools::fetch::as_requested`]:
/// the host it connects to, an all-digit host as dotted IPv4, a non-ASCII
/// one in punycode), and the URL as written beside it when that differs.
fn describe_fetch(call: &Call) -> Description {
    let Some(raw) = call.arg("url") else {
        return describe_other(call);
    };
    let Ok(url) = crate::tools::fetch::as_requested(raw) else {
        return describe_other(call);
    };
    let shown = url.as_str();
    let mut preview = format!("GET {shown}\n");
    if let Some(host) = url.host_str() {
        preview.push_str(&format!("host: {host}\n"));
    }
    if raw != shown {
        preview.push_str(&format!("as written: {raw}\n"));
    }
    if let Some(max) = call.arguments.get("max_bytes") {
        preview.push_str(&format!("max_bytes: {max}\n"));
    }
    Description {
        summary: cut_chars(&format!("web_fetch {shown}"), SUMMARY_CHARS),
        preview: cap_preview(preview),
    }
}

/// The file as it is now.
enum Current {
    Missing,
    Text(String),
    /// Binary or not UTF-8: not diffable as lines.
    Opaque(u64),
}

fn read_current(real: &Path, path: &str) -> Result<Current, String> {
    let size = match fs::metadata(real) {
        Ok(m) if m.is_dir() => return Err(format!("{path} is a directory")),
        Ok(m) => m.len(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Current::Missing),
        Err(e) => return Err(format!("cannot read {path}: {e}")),
    };
    if size > DIFF_FILE_BYTES {
        return Ok(Current::Opaque(size));
    }
    let bytes = fs::read(real).map_err(|e| format!("cannot read {path}: {e}"))?;
    if looks_binary(&bytes) {
        return Ok(Current::Opaque(size));
    }
    Ok(String::from_utf8(bytes).map_or(Current::Opaque(size), Current::Text))
}

/// Start offsets of `needle` in `hay`, overlapping ones included — the
/// same count `edit_file` makes, so the preview fails where the tool would.
fn occurrences(hay: &str, needle: &str) -> usize {
    let mut found = 0;
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let at = from + i;
        found += 1;
        from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

/// What `edit_file` would make of `current`, or why it would refuse.
fn apply_edit(current: &Current, path: &str, old: &str, new: &str) -> Result<String, String> {
    if old.is_empty() {
        return Err("old_string is empty; to create a file use write_file".into());
    }
    let text = match current {
        Current::Missing => return Err(format!("cannot read {path}: no such file")),
        Current::Opaque(_) => return Err(format!("{path} is a binary, huge or non-UTF-8 file")),
        Current::Text(text) => text,
    };
    match occurrences(text, old) {
        1 => Ok(text.replacen(old, new, 1)),
        n => Err(format!(
            "old_string was found {n} times in {path} (it must be found exactly once)"
        )),
    }
}

fn describe_change(call: &Call, raw_path: &str, workspace: &Path) -> Description {
    let path = workspace_relative(workspace, raw_path).unwrap_or_else(|| raw_path.to_owned());
    let fail = |summary: String, why: String| Description {
        summary,
        preview: cap_preview(why),
    };
    let real = match Workspace::new(workspace).map(|ws| ws.resolve(raw_path)) {
        Ok(Ok(real)) => real,
        Ok(Err(e)) => return fail(format!("{} {path}", call.tool), e.to_string()),
        Err(e) => {
            return fail(
                format!("{} {path}", call.tool),
                format!("cannot open the workspace: {e}"),
            )
        }
    };
    let current = match read_current(&real, &path) {
        Ok(current) => current,
        Err(why) => {
            return fail(
                format!("{} {path}", call.tool),
                format!("{} would fail: {why}", call.tool),
            )
        }
    };
    let after = if call.tool == crate::tools::EDIT_FILE {
        let old = call.arg("old_string").unwrap_or("");
        let new = call.arg("new_string").unwrap_or("");
        match apply_edit(&current, &path, old, new) {
            Ok(after) => after,
            Err(why) => {
                return fail(
                    format!("edit {path} (would fail)"),
                    format!("edit_file would fail: {why}"),
                )
            }
        }
    } else {
        call.arg("content").unwrap_or("").to_owned()
    };
    let before = match current {
        Current::Opaque(size) => {
            return Description {
                summary: format!("edit {path} (replaces a {size}-byte file)"),
                preview: format!(
                    "{path} is binary, not UTF-8 or too large to diff ({size} bytes); \
                     write_file replaces it with {} lines of text",
                    after.lines().count()
                ),
            }
        }
        Current::Missing => None,
        Current::Text(text) => Some(text),
    };
    let old_text = before.as_deref().unwrap_or("");
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old_text, after.as_str());
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let old_header = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &format!("b/{path}"))
        .to_string();
    let summary = match before {
        None => format!("write_file new {path} (+{added})"),
        Some(_) if added + removed == 0 => format!("edit {path} (no change)"),
        Some(_) => format!("edit {path} (+{added} \u{2212}{removed})"),
    };
    let preview = if unified.is_empty() {
        format!("{path} already has this content; nothing would change")
    } else {
        unified
    };
    Description {
        summary,
        preview: cap_preview(preview),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(tool: &str, arguments: serde_json::Value, root: &Path) -> Description {
        describe(
            &Call {
                tool,
                arguments: &arguments,
            },
            root,
        )
    }

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir(dir.path().join("src")).expect("mkdir");
        fs::write(
            dir.path().join("src/main.rs"),
            "fn main() {\n    println!(\"hi\");\n}\n",
        )
        .expect("write");
        dir
    }

    fn root(dir: &tempfile::TempDir) -> std::path::PathBuf {
        dir.path().canonicalize().expect("canonical root")
    }

    #[test]
    fn edit_shows_a_unified_diff_of_the_file_as_it_is() {
        let dir = workspace();
        let d = run(
            "edit_file",
            json!({"path": "src/main.rs", "old_string": "    println!(\"hi\");\n", "new_string": "    let x = 1;\n    println!(\"{x}\");\n"}),
            &root(&dir),
        );
        assert_eq!(d.summary, "edit src/main.rs (+2 −1)");
        assert_eq!(
            d.preview,
            "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n-    println!(\"hi\");\n+    let x = 1;\n+    println!(\"{x}\");\n }\n"
        );
        let unchanged = fs::read_to_string(dir.path().join("src/main.rs")).expect("read");
        assert!(unchanged.contains("\"hi\""), "describing must not edit");
    }

    #[test]
    fn absolute_paths_inside_show_relative() {
        let dir = workspace();
        let root = root(&dir);
        let abs = root.join("src/main.rs");
        let d = run(
            "write_file",
            json!({"path": abs.to_str().expect("utf-8 path"), "content": "fn main() {}\n"}),
            &root,
        );
        assert_eq!(d.summary, "edit src/main.rs (+1 −3)");
        assert!(
            d.preview
                .starts_with("--- a/src/main.rs\n+++ b/src/main.rs\n"),
            "{}",
            d.preview
        );
    }

    #[test]
    fn a_new_file_counts_its_lines() {
        let dir = workspace();
        let d = run(
            "write_file",
            json!({"path": "docs/x.md", "content": "# X\n\ntext\n"}),
            &root(&dir),
        );
        assert_eq!(d.summary, "write_file new docs/x.md (+3)");
        assert!(
            d.preview.starts_with("--- /dev/null\n+++ b/docs/x.md\n"),
            "{}",
            d.preview
        );
        assert!(d.preview.contains("+# X\n"));
    }

    #[test]
    fn an_edit_that_would_fail_says_why() {
        let dir = workspace();
        let root = root(&dir);
        let absent = run(
            "edit_file",
            json!({"path": "src/main.rs", "old_string": "nope", "new_string": "x"}),
            &root,
        );
        assert_eq!(absent.summary, "edit src/main.rs (would fail)");
        assert!(
            absent.preview.contains("found 0 times"),
            "{}",
            absent.preview
        );
        let twice = run(
            "edit_file",
            json!({"path": "src/main.rs", "old_string": "n", "new_string": "x"}),
            &root,
        );
        assert!(twice.preview.contains("found 4 times"), "{}", twice.preview);
        let missing = run(
            "edit_file",
            json!({"path": "nope.rs", "old_string": "a", "new_string": "b"}),
            &root,
        );
        assert!(
            missing.preview.contains("no such file"),
            "{}",
            missing.preview
        );
        let dir_write = run("write_file", json!({"path": "src", "content": "x"}), &root);
        assert!(
            dir_write.preview.contains("src is a directory"),
            "{}",
            dir_write.preview
        );
    }

    #[test]
    fn same_content_is_no_change() {
        let dir = workspace();
        let root = root(&dir);
        let current = fs::read_to_string(root.join("src/main.rs")).expect("read");
        let d = run(
            "write_file",
            json!({"path": "src/main.rs", "content": current}),
            &root,
        );
        assert_eq!(d.summary, "edit src/main.rs (no change)");
        assert!(d.preview.contains("nothing would change"));
    }

    #[test]
    fn binary_files_are_not_diffed() {
        let dir = workspace();
        let root = root(&dir);
        fs::write(root.join("logo.png"), b"\x89PNG\0\0data").expect("write");
        let d = run(
            "write_file",
            json!({"path": "logo.png", "content": "text\n"}),
            &root,
        );
        assert_eq!(d.summary, "edit logo.png (replaces a 10-byte file)");
        assert!(d.preview.contains("binary"), "{}", d.preview);
    }

    #[test]
    fn bash_summary_is_the_first_line_cut() {
        let d = describe_bash("cargo test\ncargo clippy");
        assert_eq!(d.summary, "cargo test …");
        assert_eq!(d.preview, "cargo test\ncargo clippy");
        let long = "echo ".to_owned() + &"é".repeat(200);
        let d = describe_bash(&long);
        assert_eq!(d.summary.chars().count(), SUMMARY_CHARS + 1);
        assert!(d.summary.ends_with('…'));
        assert_eq!(describe_bash("ls").summary, "ls");
    }

    #[test]
    fn other_tools_show_their_arguments() {
        let dir = workspace();
        let d = run("mcp__git__log", json!({"max": 3}), &root(&dir));
        assert_eq!(d.summary, "mcp__git__log {\"max\":3}");
        assert_eq!(d.preview, "{\n  \"max\": 3\n}");
    }

    /// Issue 35 item 13: the host shown is the one connected to.
    #[test]
    fn a_fetch_shows_the_host_it_will_reach() {
        let dir = workspace();
        let d = run("web_fetch", json!({"url": "http://16843009/"}), &root(&dir));
        assert_eq!(d.summary, "web_fetch http://1.1.1.1/");
        assert_eq!(
            d.preview,
            "GET http://1.1.1.1/\nhost: 1.1.1.1\nas written: http://16843009/\n"
        );
        // `аррӏе.com` in Cyrillic letters.
        let d = run(
            "web_fetch",
            json!({"url": "https://\u{430}\u{440}\u{440}\u{4cf}\u{435}.com/login", "max_bytes": 10}),
            &root(&dir),
        );
        assert_eq!(d.summary, "web_fetch https://xn--80ak6aa92e.com/login");
        assert!(
            d.preview.contains("host: xn--80ak6aa92e.com\n")
                && d.preview.ends_with("max_bytes: 10\n"),
            "{}",
            d.preview
        );
        let d = run("web_fetch", json!({"url": "not a url"}), &root(&dir));
        assert_eq!(d.summary, "web_fetch {\"url\":\"not a url\"}");
    }

    #[test]
    fn previews_are_capped() {
        let dir = workspace();
        let content = "line\n".repeat(40_000);
        let d = run(
            "write_file",
            json!({"path": "big.txt", "content": content}),
            &root(&dir),
        );
        assert_eq!(d.summary, "write_file new big.txt (+40000)");
        assert!(d.preview.len() < PREVIEW_BYTES + 100);
        assert!(
            d.preview.ends_with("more bytes]"),
            "{}",
            &d.preview[d.preview.len() - 80..]
        );
    }
}
