//! What the TUI shows of checkpoints: each turn that changed files gets a
//! one-line summary (`3 files changed, +12 −4`) whose expansion lists the
//! files.

use crate::checkpoint::notes;
use crate::protocol::FileChange;

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
