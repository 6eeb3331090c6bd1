//! The words checkpoints and rewinds are shown in: the one-line summary of
//! what a turn changed, the note the model gets about hand edits, the note
//! it gets about a rewind. Each is read from a `checkpoint` or `rewind`
//! entry alone, and the model's context, the TUI and `pod log` say the same
//! words, so they live beside the entry types: a client needs no server
//! code to show them.

use super::{ChangeKind, FileChange, NotRestored, RestoreAction, RestoredFile};

/// At most this many paths are named in a note; the rest are counted.
const NAMED: usize = 20;

/// `3 files changed, +12 −4` (line counts of binary files left out).
pub fn summary(changes: &[FileChange]) -> String {
    let added: u64 = changes.iter().filter_map(|c| c.added).sum();
    let removed: u64 = changes.iter().filter_map(|c| c.removed).sum();
    let n = changes.len();
    let files = if n == 1 { "file" } else { "files" };
    format!("{n} {files} changed, +{added} \u{2212}{removed}")
}

fn change_word(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Mode => "mode changed",
        ChangeKind::Type => "type changed",
        ChangeKind::Unknown => "changed",
    }
}

fn named<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut parts: Vec<String> = items.iter().take(NAMED).map(show).collect();
    if items.len() > NAMED {
        parts.push(format!("and {} more", items.len() - NAMED));
    }
    parts.join(", ")
}

/// What the model is told about files changed outside the pod between
/// turns: one line naming them.
pub fn hand_edits(changes: &[FileChange]) -> String {
    format!(
        "Since the last turn, files were changed outside the pod: {}.",
        named(changes, |c| format!(
            "{} ({})",
            c.path,
            change_word(c.change)
        ))
    )
}

/// What the model is told about a rewind.
pub fn rewind(
    restored: &[RestoredFile],
    conflicts: &[String],
    not_restored: &[NotRestored],
    conversation: bool,
) -> String {
    let mut text = if conversation {
        "The user rewound the conversation to this point".to_owned()
    } else {
        "The user rewound the workspace's files".to_owned()
    };
    if restored.is_empty() {
        text.push_str("; no file was changed");
    } else {
        text.push_str("; files restored: ");
        text.push_str(&named(restored, |r| {
            let action = match r.action {
                RestoreAction::Written => "rewritten",
                RestoreAction::Created => "recreated",
                RestoreAction::Deleted => "deleted",
                RestoreAction::Unknown => "restored",
            };
            format!("{} ({action})", r.path)
        }));
    }
    if !conflicts.is_empty() {
        text.push_str("; left as they are (also changed by hand): ");
        text.push_str(&named(conflicts, Clone::clone));
    }
    if !not_restored.is_empty() {
        text.push_str("; not restored: ");
        text.push_str(&named(not_restored, |n| {
            format!("{} ({})", n.path, n.reason)
        }));
    }
    text.push_str(". Files may differ from what earlier messages say: read them again before relying on them.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_files_and_lines() {
        let change = |added, removed| FileChange {
            path: "a".into(),
            change: ChangeKind::Modified,
            added,
            removed,
        };
        assert_eq!(
            summary(&[
                change(Some(10), Some(4)),
                change(Some(2), None),
                change(None, None)
            ]),
            "3 files changed, +12 \u{2212}4"
        );
        assert_eq!(
            summary(&[change(Some(1), Some(0))]),
            "1 file changed, +1 \u{2212}0"
        );
    }
}
