//! Entries the storage tests write, made in one place.

use uuid::Uuid;

use crate::protocol::{LogEntry, Segment};

/// The first entry of session `id`.
pub fn start(id: Uuid) -> LogEntry {
    LogEntry::SessionStart {
        session_id: id,
        created_at: LogEntry::now(),
        compacted_from: None,
        forked_from: None,
        provider: None,
        model: None,
        workspace: None,
        parent: None,
        replay_of: None,
    }
}

/// A user's plain-text input.
pub fn input(text: &str) -> LogEntry {
    LogEntry::UserInput {
        segments: vec![Segment::text(text)],
        at: LogEntry::now(),
        turn_id: None,
        request_id: None,
        resolved: Default::default(),
    }
}
