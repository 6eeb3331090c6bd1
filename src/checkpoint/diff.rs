//! What differs between two manifests: the `changes` a checkpoint entry
//! lists, and the unified diff `get_diff` answers, with git's headers.

use std::fmt::Write as _;
use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use super::manifest::{Manifest, Node};
use crate::protocol::{ChangeKind, FileChange};

/// Where a diff cuts off.
pub const MAX_DIFF_BYTES: usize = 4 * 1024 * 1024;

/// How long line matching may take per file before it settles for a
/// coarser (still correct) diff.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

/// Reads a node's bytes on one side of a diff.
pub type Reader<'a> = dyn Fn(&str, &Node) -> std::io::Result<Vec<u8>> + 'a;

/// The paths that differ, in path order, each with how.
pub fn changed_paths<'m>(
    old: &'m Manifest,
    new: &'m Manifest,
) -> Vec<(&'m str, Option<&'m Node>, Option<&'m Node>)> {
    let mut out = Vec::new();
    let mut a = old.files.iter().peekable();
    let mut b = new.files.iter().peekable();
    // A merge of two sorted lists: the smaller path goes first; a path in
    // both goes once, when its nodes differ.
    loop {
        if let Some((p, n)) = a.next_if(|(pa, _)| b.peek().is_none_or(|(pb, _)| pa < pb)) {
            out.push((p.as_str(), Some(n), None));
        } else if let Some((p, n)) = b.next_if(|(pb, _)| a.peek().is_none_or(|(pa, _)| pb < pa)) {
            out.push((p.as_str(), None, Some(n)));
        } else if let (Some((p, na)), Some((_, nb))) = (a.next(), b.next()) {
            if na != nb {
                out.push((p.as_str(), Some(na), Some(nb)));
            }
        } else {
            break;
        }
    }
    out
}

/// How one path changed.
fn kind(old: Option<&Node>, new: Option<&Node>) -> ChangeKind {
    match (old, new) {
        (None, _) => ChangeKind::Added,
        (_, None) => ChangeKind::Deleted,
        (Some(a), Some(b)) if a.is_symlink() != b.is_symlink() => ChangeKind::Type,
        (Some(Node::File { digest: da, .. }), Some(Node::File { digest: db, .. })) if da == db => {
            ChangeKind::Mode
        }
        _ => ChangeKind::Modified,
    }
}

/// Text a line diff can be made of: UTF-8 without a NUL in its first
/// 8000 bytes (git's test for binary).
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(8000)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn text_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    similar::TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(old, new)
}

/// Added and removed line counts, `None` for binary content.
fn line_counts(old: &[u8], new: &[u8]) -> (Option<u64>, Option<u64>) {
    let (Some(old), Some(new)) = (as_text(old), as_text(new)) else {
        return (None, None);
    };
    let diff = text_diff(old, new);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                ChangeTag::Insert => added += 1,
                ChangeTag::Delete => removed += 1,
                ChangeTag::Equal => {}
            }
        }
    }
    (Some(added), Some(removed))
}

/// Whether `path` is `prefix` or lies beneath it.
pub fn under(path: &str, prefix: Option<&str>) -> bool {
    match prefix.map(|p| p.trim_end_matches('/')) {
        None | Some("") => true,
        Some(p) => path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')),
    }
}

/// The changes from `old` to `new`, with line counts. A content that cannot
/// be read counts as binary (no line counts) rather than failing the list.
pub fn changes(
    old: &Manifest,
    new: &Manifest,
    read_old: &Reader<'_>,
    read_new: &Reader<'_>,
) -> Vec<FileChange> {
    changed_paths(old, new)
        .into_iter()
        .map(|(path, a, b)| {
            let kind = kind(a, b);
            let (added, removed) = if kind == ChangeKind::Mode {
                (Some(0), Some(0))
            } else {
                let bytes = |node: Option<&Node>, read: &Reader<'_>| match node {
                    None => Some(Vec::new()),
                    Some(n) => read(path, n).ok(),
                };
                match (bytes(a, read_old), bytes(b, read_new)) {
                    (Some(x), Some(y)) => line_counts(&x, &y),
                    _ => (None, None),
                }
            };
            FileChange {
                path: path.to_owned(),
                change: kind,
                added,
                removed,
            }
        })
        .collect()
}

/// How binary files show in a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Binary {
    /// `Binary files a/… and b/… differ`, as `git diff` writes it: for
    /// people, whose screens a patch of base85 would only fill.
    #[default]
    Mention,
    /// Git's binary patch, as `git diff --binary` writes it: for `git
    /// apply` (`pod exec --emit-patch`).
    Patch,
}

/// A unified diff as `git diff` writes it (no `index` lines but those of
/// binary patches), of the paths under `prefix`; cut at [`MAX_DIFF_BYTES`]
/// (the bool says so).
pub fn unified(
    old: &Manifest,
    new: &Manifest,
    read_old: &Reader<'_>,
    read_new: &Reader<'_>,
    prefix: Option<&str>,
    binary: Binary,
) -> (String, Vec<FileChange>, bool) {
    let mut out = String::new();
    let mut files = Vec::new();
    let mut truncated = false;
    for (path, a, b) in changed_paths(old, new) {
        if !under(path, prefix) {
            continue;
        }
        let kind = kind(a, b);
        let read = |node: Option<&Node>, reader: &Reader<'_>| match node {
            None => Ok(Vec::new()),
            Some(n) => reader(path, n),
        };
        let (old_bytes, new_bytes) = match (read(a, read_old), read(b, read_new)) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(e), _) | (_, Err(e)) => {
                let _ = writeln!(out, "diff --git a/{path} b/{path}");
                let _ = writeln!(out, "# could not read this file: {e}");
                files.push(FileChange {
                    path: path.to_owned(),
                    change: kind,
                    added: None,
                    removed: None,
                });
                continue;
            }
        };
        let mut piece = String::new();
        let counts = if kind == ChangeKind::Type {
            // Git shows a type change as a deletion and an addition.
            let gone = file_diff(path, a, None, &old_bytes, &[], binary);
            let came = file_diff(path, None, b, &[], &new_bytes, binary);
            piece.push_str(&gone.0);
            piece.push_str(&came.0);
            match (gone.1, came.1) {
                ((Some(_), Some(r)), (Some(ad), Some(_))) => (Some(ad), Some(r)),
                _ => (None, None),
            }
        } else {
            let (text, counts) = file_diff(path, a, b, &old_bytes, &new_bytes, binary);
            piece = text;
            counts
        };
        files.push(FileChange {
            path: path.to_owned(),
            change: kind,
            added: counts.0,
            removed: counts.1,
        });
        if truncated {
            continue;
        }
        if out.len() + piece.len() > MAX_DIFF_BYTES {
            truncated = true;
            let mut cut = MAX_DIFF_BYTES - out.len();
            while !piece.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&piece[..cut]);
            continue;
        }
        out.push_str(&piece);
    }
    (out, files, truncated)
}

/// One path's diff (`old`/`new` absent for an addition/deletion), and its
/// line counts.
fn file_diff(
    path: &str,
    old: Option<&Node>,
    new: Option<&Node>,
    old_bytes: &[u8],
    new_bytes: &[u8],
    binary: Binary,
) -> (String, (Option<u64>, Option<u64>)) {
    let mut out = format!("diff --git a/{path} b/{path}\n");
    match (old, new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", n.git_mode());
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", o.git_mode());
        }
        (Some(o), Some(n)) if o.git_mode() != n.git_mode() => {
            let _ = writeln!(out, "old mode {}", o.git_mode());
            let _ = writeln!(out, "new mode {}", n.git_mode());
        }
        _ => {}
    }
    let same_content = old.is_some() && new.is_some() && old_bytes == new_bytes;
    if same_content || (old_bytes.is_empty() && new_bytes.is_empty()) {
        return (out, (Some(0), Some(0)));
    }
    let a_name = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".into()
    };
    let b_name = if new.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".into()
    };
    let (Some(a), Some(b)) = (as_text(old_bytes), as_text(new_bytes)) else {
        match binary {
            Binary::Mention => {
                let _ = writeln!(out, "Binary files {a_name} and {b_name} differ");
            }
            Binary::Patch => {
                let same_mode = match (old, new) {
                    (Some(o), Some(n)) if o.git_mode() == n.git_mode() => Some(o.git_mode()),
                    _ => None,
                };
                super::binary_patch::write(
                    &mut out,
                    old.map(|_| old_bytes),
                    new.map(|_| new_bytes),
                    same_mode,
                );
            }
        }
        return (out, (None, None));
    };
    let diff = text_diff(a, b);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                ChangeTag::Insert => added += 1,
                ChangeTag::Delete => removed += 1,
                ChangeTag::Equal => {}
            }
        }
    }
    let _ = writeln!(out, "--- {a_name}");
    let _ = writeln!(out, "+++ {b_name}");
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let _ = write!(out, "{hunk}");
    }
    (out, (Some(added), Some(removed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &str, exec: bool) -> (Node, Vec<u8>) {
        let d = crate::store::content::Digest::of(content.as_bytes()).hex();
        (Node::File { digest: d, exec }, content.as_bytes().to_vec())
    }

    #[test]
    fn diffs_read_as_git_writes_them() {
        let mut old = Manifest::default();
        let mut new = Manifest::default();
        let mut contents = std::collections::HashMap::new();
        let mut add = |m: &mut Manifest, path: &str, content: &str, exec: bool| {
            let (node, bytes) = file(content, exec);
            contents.insert(node.digest().unwrap(), bytes);
            m.files.insert(path.into(), node);
        };
        add(&mut old, "a.txt", "one\ntwo\nthree\n", false);
        add(&mut new, "a.txt", "one\n2\nthree\n", false);
        add(&mut old, "gone.txt", "bye\n", false);
        add(&mut new, "new.sh", "echo hi", true);
        add(&mut old, "run", "x\n", false);
        add(&mut new, "run", "x\n", true);
        let read = move |_: &str, n: &Node| -> std::io::Result<Vec<u8>> {
            Ok(contents[&n.digest().unwrap()].clone())
        };
        let (diff, files, truncated) = unified(&old, &new, &read, &read, None, Binary::Mention);
        assert!(!truncated);
        assert_eq!(
            diff,
            "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n\
             diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n\
             diff --git a/new.sh b/new.sh\nnew file mode 100755\n--- /dev/null\n+++ b/new.sh\n@@ -0,0 +1 @@\n+echo hi\n\\ No newline at end of file\n\
             diff --git a/run b/run\nold mode 100644\nnew mode 100755\n"
        );
        let kinds: Vec<_> = files
            .iter()
            .map(|f| (f.change, f.added, f.removed))
            .collect();
        assert_eq!(
            kinds,
            [
                (ChangeKind::Modified, Some(1), Some(1)),
                (ChangeKind::Deleted, Some(0), Some(1)),
                (ChangeKind::Added, Some(1), Some(0)),
                (ChangeKind::Mode, Some(0), Some(0)),
            ]
        );
    }

    #[test]
    fn a_prefix_selects_a_directory_not_a_name_that_starts_alike() {
        assert!(under("src/a.rs", Some("src")));
        assert!(under("src", Some("src/")));
        assert!(!under("srcx/a.rs", Some("src")));
        assert!(under("anything", None));
    }
}
