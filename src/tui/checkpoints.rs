//! What the TUI shows of checkpoints: each turn that changed files gets a
//! one-line summary (`3 files changed, +12 −4`) whose expansion lists the
//! files.

use crate::checkpoint::notes;
use crate::protocol::{FileChange, Method, Response};

/// `/undo`: files and conversation back to before the message at `seq`.
pub fn undo(seq: u64) -> Method {
    rewind(seq, true, true)
}

/// Back to just before the message at `seq`: its files, its conversation,
/// or both (the rewind picker's choice).
pub fn rewind(seq: u64, files: bool, conversation: bool) -> Method {
    Method::Rewind {
        before_seq: Some(seq),
        session_id: None,
        checkpoint: None,
        files: Some(files),
        conversation: Some(conversation),
        force: None,
        kill_jobs: None,
    }
}

/// What the transcript shows for the answer to `/diff` or `/undo`; `None`
/// for other responses.
pub fn response_text(response: &Response) -> Option<String> {
    if let Some(diff) = &response.diff {
        let mut text = format!("[diff]\n{diff}");
        if response.truncated == Some(true) {
            text.push_str("\n(cut at 4 MiB)");
        }
        return Some(text);
    }
    let restored = response.files_restored.as_ref()?;
    Some(format!(
        "[rewind] {}",
        notes::rewind(
            restored,
            response.conflicts.as_deref().unwrap_or_default(),
            response.not_restored.as_deref().unwrap_or_default(),
            false,
        )
    ))
}

/// The block text for a turn's changes: the summary line, then one line per
/// file (shown when the block is expanded).
pub fn turn_summary(changes: &[FileChange]) -> String {
    let mut text = notes::summary(changes);
    for change in changes {
        let counts = match (change.added, change.removed) {
            (Some(a), Some(r)) => format!("+{a} \u{2212}{r}"),
            _ => "binary".into(),
        };
        let kind = serde_json::to_string(&change.change).unwrap_or_default();
        text.push_str(&format!(
            "\n  {} {} ({counts})",
            kind.trim_matches('"'),
            change.path
        ));
    }
    text
}
