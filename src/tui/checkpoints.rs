//! What the TUI shows of checkpoints: each turn that changed files gets a
//! one-line summary (`3 files changed, +12 −4`) whose expansion lists the
//! files.

use crate::protocol::notes;
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
        abort_on_conflict: None,
    }
}

/// What the transcript shows for the answer to `/diff`; `None` for other
/// responses. A rewind's answer shows nothing of its own: the `rewind`
/// entry it committed (durable before the answer) says what was restored,
/// live and after any reconnect alike — the answer too would say it twice.
pub fn response_text(response: &Response) -> Option<String> {
    let diff = response.diff.as_ref()?;
    let mut text = format!("[diff]\n{diff}");
    if response.truncated == Some(true) {
        text.push_str("\n(cut at 4 MiB)");
    }
    Some(text)
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
