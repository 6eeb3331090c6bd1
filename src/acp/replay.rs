//! A `session/load`'s replay: its `session/update`s serialised here, once
//! each, and handed to the ordered output ([`super::stdio::Output`]) in
//! large pieces, ahead of the load's response.
//!
//! Why not the SDK: `agent-client-protocol` 5.2 sends a notification by
//! turning the typed `SessionNotification` into a `serde_json::Value`
//! (`to_untyped_message`), passing it through two actor queues as a
//! `RawJsonRpcMessage`, and serialising that to a `String` — a tree, a
//! string and two queue hops per update. Replaying a 10,000-entry session
//! that way took 145 ms in release against an 8.3 ms attach to the same
//! session (17.5×, issue #40's bar is 2×; docs/performance.md §17). Here
//! each update is the SDK's own `SessionNotification`, written with one
//! `serde_json::to_writer` inside the envelope the SDK writes
//! (`{"jsonrpc":"2.0","method":"session/update","params":…}`): the same
//! bytes (the tests compare them with the SDK's), no tree.
//!
//! Only notifications go this way. Anything with an id — the load's
//! response, a permission request — stays the SDK's; the response is sent
//! after [`Replay::finish`] has queued every line, so it follows them.

use std::cell::RefCell;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{SessionId, SessionNotification, SessionUpdate};

use super::stdio::Output;
use super::Notifier;

/// What the SDK writes before a `session/update`'s params, and after.
const HEAD: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":"#;
const TAIL: &[u8] = b"}\n";

/// How much is serialised before it is handed to the writer: big enough
/// that a replay is a few hand-overs, small enough that writing starts
/// while the rest is still being serialised.
const PIECE: usize = 256 << 10;

/// The updates of one replay, in the order they are given.
pub struct Replay {
    out: Output,
    lines: RefCell<Lines>,
}

struct Lines {
    buffer: Vec<u8>,
    /// The last session id written, reused while it is the same.
    session: Option<SessionId>,
}

impl Replay {
    pub fn new(out: Output) -> Self {
        Self {
            out,
            lines: RefCell::new(Lines {
                buffer: Vec::with_capacity(PIECE + PIECE / 4),
                session: None,
            }),
        }
    }

    /// Queues whatever is left: every update given is then ahead of
    /// anything the SDK sends after this.
    pub fn finish(self) {
        let lines = self.lines.into_inner();
        send(&self.out, lines.buffer);
    }
}

impl Notifier for Replay {
    fn update(&self, session: &str, update: SessionUpdate) {
        let mut lines = self.lines.borrow_mut();
        let Lines {
            buffer,
            session: last,
        } = &mut *lines;
        let id = match last {
            Some(id) if &*id.0 == session => id.clone(),
            _ => last
                .insert(SessionId::new(Arc::<str>::from(session)))
                .clone(),
        };
        let start = buffer.len();
        if let Err(e) = write(buffer, SessionNotification::new(id, update)) {
            buffer.truncate(start);
            eprintln!("pod acp: could not send an update to the editor: {e}");
            return;
        }
        if buffer.len() >= PIECE {
            let full = std::mem::replace(buffer, Vec::with_capacity(PIECE + PIECE / 4));
            send(&self.out, full);
        }
    }
}

/// One `session/update` line, as the SDK writes it.
pub fn write(buffer: &mut Vec<u8>, notification: SessionNotification) -> serde_json::Result<()> {
    buffer.extend_from_slice(HEAD);
    serde_json::to_writer(&mut *buffer, &notification)?;
    buffer.extend_from_slice(TAIL);
    Ok(())
}

fn send(out: &Output, lines: Vec<u8>) {
    if lines.is_empty() {
        return;
    }
    if let Err(e) = out.lines(lines) {
        eprintln!("pod acp: could not send the session's history to the editor: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use agent_client_protocol::{JsonRpcMessage, RawJsonRpcMessage};
    use serde_json::json;

    use super::*;
    use crate::acp::stdio::captured;
    use crate::acp::updates::Updates;
    use crate::protocol::LogEntry;

    /// An entry of every kind a replay shows, and some it does not; texts
    /// with quotes, escapes, control characters and non-ASCII, and one long
    /// enough that a replay spans several pieces.
    fn every_kind(i: usize) -> Vec<LogEntry> {
        let long = "lorem \"ipsum\"\n\tdolor\u{1} sït — ámet ✓ ".repeat(2_000);
        [
            json!({"kind": "user_input", "at": "", "segments": [
                {"type": "text", "text": format!("say \"{i}\"\n\\ ✓")},
                {"type": "paste", "id": 1, "text": "a\r\nb"},
                {"type": "file_ref", "path": "src/a b.rs"},
                {"type": "knowledge_ref", "slug": "style"},
                {"type": "workflow_invoke", "slug": "review", "args": "--all"},
                {"type": "image", "blob": "0123", "media_type": "image/png", "name": "shot.png"},
            ]}),
            json!({"kind": "assistant_items", "items": [
                {"type": "reasoning", "text": format!("think {i}\u{0}")},
                {"type": "text", "text": long},
                {"type": "tool_call", "call_id": format!("e{i}"), "name": "edit_file",
                 "arguments": {"path": "a.txt", "old_string": "x\n", "new_string": "y\t"}},
                {"type": "tool_call", "call_id": format!("w{i}"), "name": "write_file",
                 "arguments": {"path": "b.txt", "content": "new\u{7f}"}},
                {"type": "tool_call", "call_id": format!("b{i}"), "name": "bash",
                 "arguments": {"command": "echo \"hi\" | wc -c", "timeout": 1.5}},
                {"type": "tool_call", "call_id": format!("p{i}"), "name": "update_plan",
                 "arguments": {"items": [{"text": "read", "status": "done"},
                                         {"text": "fix", "status": "in_progress"}]}},
                {"type": "tool_call", "call_id": "again", "name": "grep",
                 "arguments": {"pattern": "fn main", "n": [1, 2.25, null, true]}},
            ]}),
            json!({"kind": "approval_decision", "call_id": format!("w{i}"), "decision": "deny",
                   "scope": "once", "by": "user"}),
            json!({"kind": "tool_results", "results": [
                {"call_id": format!("e{i}"), "output": "edited\n", "is_error": false},
                {"call_id": format!("b{i}"), "output": "exit 1: \u{1b}[31mno\u{1b}[0m", "is_error": true},
            ]}),
            json!({"kind": "turn_end", "reason": "completed"}),
        ]
        .into_iter()
        .map(|entry| serde_json::from_value(entry).unwrap())
        .collect()
    }

    /// A `session/update` as the SDK writes it: the typed notification
    /// made a `Value`, wrapped as a raw JSON-RPC message and serialised.
    fn sdk_line(session: &str, update: SessionUpdate) -> String {
        let untyped = SessionNotification::new(session.to_owned(), update)
            .to_untyped_message()
            .unwrap();
        let raw = RawJsonRpcMessage::notification(untyped.method, untyped.params).unwrap();
        serde_json::to_string(&raw).unwrap() + "\n"
    }

    #[test]
    fn a_replay_writes_the_sdks_own_lines_in_order_and_all_of_them() {
        let sessions = ["3f0c6a59-70f6-4a43-9f32-5a9d0b8a4c11", "child-ß"];
        let none = HashSet::new();
        let (out, take) = captured();
        let replay = Replay::new(out);
        let (mut ours, mut sdks) = (Updates::default(), Updates::default());
        let mut expected = String::new();
        let mut count = 0;
        for i in 0..40 {
            // Two sessions in turn: the cached id must follow.
            let session = sessions[i % 2];
            for entry in every_kind(i) {
                for update in ours.entry(&entry, false, &none) {
                    replay.update(session, update);
                }
                for update in sdks.entry(&entry, false, &none) {
                    expected.push_str(&sdk_line(session, update));
                    count += 1;
                }
            }
        }
        replay.finish();
        let written = String::from_utf8(take()).unwrap();
        assert!(
            written.len() > 3 * PIECE,
            "the replay fits one piece: it tests nothing"
        );
        assert_eq!(written.lines().count(), count);
        // Line by line first, for a readable failure.
        for (n, (ours, sdks)) in written.lines().zip(expected.lines()).enumerate() {
            assert_eq!(ours, sdks, "line {n} differs from the SDK's");
        }
        assert_eq!(written, expected);
    }
}
