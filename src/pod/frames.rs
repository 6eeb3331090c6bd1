//! Building `snapshot` and `entry` frames from the log lines' own bytes.
//!
//! The mirror keeps every entry as the exact bytes written to disk. An
//! `entry` frame is that line with `"type"` and `"session_id"` spliced in
//! front, and a snapshot's `entries` array is the lines joined by commas: no
//! entry is re-serialised on attach, so attach cost is a memcpy of what is
//! sent (see `docs/performance.md`).
//!
//! Streaming deltas, the one frame sent per chunk of a reply, are written
//! here by hand too ([`put_delta`]): the same bytes serde_json writes for
//! them, without its generic path.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::protocol::{Event, Greeting, InFlight, Status, PROTOCOL_VERSION};

/// `{"seq":N,"entry":{...}}` → `{"type":"entry","session_id":"…","seq":N,"entry":{...}}\n`.
/// Lines always start with `{"seq":` (the store guarantees it).
pub fn entry_frame(session_id: Uuid, line: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(line.len() + 64);
    buf.put_slice(b"{\"type\":\"entry\",\"session_id\":\"");
    buf.put_slice(
        session_id
            .hyphenated()
            .encode_lower(&mut Uuid::encode_buffer())
            .as_bytes(),
    );
    buf.put_slice(b"\",");
    buf.put_slice(&line[1..]);
    buf.put_u8(b'\n');
    buf.freeze()
}

/// The lines as a JSON array.
pub fn entries_array(lines: &[Bytes]) -> Bytes {
    let len = lines.iter().map(|l| l.len() + 1).sum::<usize>() + 2;
    let mut buf = BytesMut::with_capacity(len);
    buf.put_u8(b'[');
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        buf.put_slice(line);
    }
    buf.put_u8(b']');
    buf.freeze()
}

/// The first frame of every connection, as the pieces to write: the log
/// lines are the mirror's own bytes, referenced rather than copied, so a
/// session is never held twice in memory however many clients attach.
/// `first_seq` is said only in a tail snapshot, whose `lines` start there.
pub fn snapshot_parts(
    greeting: &Greeting,
    status: &Status,
    session_id: Uuid,
    first_seq: Option<u64>,
    lines: &[Bytes],
    in_flight: Option<&InFlight>,
) -> Vec<Bytes> {
    let first = first_seq
        .map(|seq| format!("\"first_seq\":{seq},"))
        .unwrap_or_default();
    let head = format!(
        "{{\"type\":\"snapshot\",\"protocol_version\":{PROTOCOL_VERSION},\"greeting\":{},\
         \"status\":{},\"session_id\":\"{session_id}\",{first}\"entries\":[",
        json(greeting),
        json(&status),
    );
    let tail = format!("],\"in_flight\":{}}}\n", json(&in_flight));
    let mut parts = Vec::with_capacity(lines.len() * 2 + 2);
    parts.push(Bytes::from(head));
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            parts.push(Bytes::from_static(b","));
        }
        parts.push(line.clone());
    }
    parts.push(Bytes::from(tail));
    parts
}

/// The lines a snapshot carries: all of them, or with `tail` the last
/// `tail` and the seq of the first (a session's lines are seqs 0, 1, …).
/// Slicing is all it costs: the lines before are never touched.
pub fn tail_of(lines: &[Bytes], tail: Option<usize>) -> (Option<u64>, &[Bytes]) {
    match tail {
        None => (None, lines),
        Some(n) => {
            let first = lines.len().saturating_sub(n);
            (Some(first as u64), &lines[first..])
        }
    }
}

/// The `limit` lines just before `before_seq` (fewer at the start of the
/// session; none when `before_seq` is 0). A `before_seq` past the end
/// counts from the end.
pub fn lines_before(lines: &[Bytes], before_seq: u64, limit: u64) -> &[Bytes] {
    let end = usize::try_from(before_seq).map_or(lines.len(), |b| b.min(lines.len()));
    let start = usize::try_from(limit).map_or(0, |l| end.saturating_sub(l));
    &lines[start..end]
}

/// The `response` to `get_session` and `get_entries`, with the lines
/// spliced in.
pub fn session_response(request_id: Option<&str>, session_id: Uuid, entries_array: &[u8]) -> Bytes {
    // Like every response: `request_id` only when the method carried one.
    let echo = request_id
        .map(|id| format!("\"request_id\":{},", json(&id)))
        .unwrap_or_default();
    let head =
        format!("{{\"type\":\"response\",{echo}\"session_id\":\"{session_id}\",\"entries\":");
    let mut buf = BytesMut::with_capacity(head.len() + entries_array.len() + 2);
    buf.put_slice(head.as_bytes());
    buf.put_slice(entries_array);
    buf.put_slice(b"}\n");
    buf.freeze()
}

/// Appends a streaming delta's frame to `buf`, newline included, byte for
/// byte what `serde_json` writes for the [`Event`] (a proptest checks it
/// for any text); `false`, with nothing written, for any other event.
///
/// A frame per chunk of every reply: through serde's tagged-enum path it
/// took ~2.4 k instructions for a fifteen-byte delta, more than the rest of
/// the broadcaster's work on it; here it is a scan of the text and copies
/// of the runs between escapes, ~0.5 k (callgrind, `docs/performance.md`,
/// scenario 7).
pub fn put_delta(buf: &mut BytesMut, event: &Event) -> bool {
    let (kind, call_id, field, text) = match event {
        Event::TextDelta { text } => ("text_delta", None, "text", text),
        Event::ReasoningDelta { text } => ("reasoning_delta", None, "text", text),
        Event::ToolCallArgsDelta { call_id, delta } => {
            ("tool_call_args_delta", Some(call_id), "delta", delta)
        }
        Event::ToolOutputDelta { call_id, text } => {
            ("tool_output_delta", Some(call_id), "text", text)
        }
        _ => return false,
    };
    let id_len = call_id.map_or(0, |id| id.len() + 13);
    buf.reserve(kind.len() + id_len + field.len() + text.len() + 22);
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(kind.as_bytes());
    buf.put_u8(b'"');
    if let Some(id) = call_id {
        buf.put_slice(b",\"call_id\":");
        put_json_string(buf, id);
    }
    buf.put_slice(b",\"");
    buf.put_slice(field.as_bytes());
    buf.put_slice(b"\":");
    put_json_string(buf, text);
    buf.put_slice(b"}\n");
    true
}

/// `text` as a JSON string, escaped as `serde_json` escapes it: `"`, `\\`
/// and the control characters below U+0020 (the short forms where JSON has
/// them, else `\u00xx`); everything else, non-ASCII included, as it is.
fn put_json_string(buf: &mut BytesMut, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    buf.put_u8(b'"');
    let mut start = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let short = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x08 => b'b',
            0x0c => b'f',
            0..=0x1f => 0,
            _ => continue,
        };
        buf.put_slice(&bytes[start..at]);
        start = at + 1;
        if short == 0 {
            let hex = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
            buf.put_slice(b"\\u00");
            buf.put_slice(&hex);
        } else {
            buf.put_slice(&[b'\\', short]);
        }
    }
    buf.put_slice(&bytes[start..]);
    buf.put_u8(b'"');
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{LogEntry, LogLine, PodState};
    use proptest::prelude::*;

    /// Any text: control characters, quotes, backslashes, non-ASCII.
    fn any_text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            proptest::collection::vec(
                prop_oneof![
                    (0u8..0x20).prop_map(char::from),
                    Just('"'),
                    Just('\\'),
                    Just('\u{7f}'),
                    Just('é'),
                    Just('\u{2028}'),
                    Just('🦀'),
                    proptest::char::range('a', 'z'),
                ],
                0..40,
            )
            .prop_map(String::from_iter),
        ]
    }

    fn any_delta() -> impl Strategy<Value = Event> {
        prop_oneof![
            any_text().prop_map(|text| Event::TextDelta { text }),
            any_text().prop_map(|text| Event::ReasoningDelta { text }),
            (any_text(), any_text())
                .prop_map(|(call_id, delta)| Event::ToolCallArgsDelta { call_id, delta }),
            (any_text(), any_text())
                .prop_map(|(call_id, text)| Event::ToolOutputDelta { call_id, text }),
        ]
    }

    proptest! {
        #[test]
        fn a_delta_frame_is_what_serde_json_writes(
            event in any_delta(),
            before in "[a-z]{0,8}",
        ) {
            // Appended after what the buffer holds, touching nothing of it.
            let mut buf = BytesMut::from(before.as_bytes());
            prop_assert!(put_delta(&mut buf, &event));
            let mut expected = before.into_bytes();
            expected.extend_from_slice(&event.to_frame());
            prop_assert_eq!(&buf[..], &expected[..]);
        }
    }

    #[test]
    fn only_deltas_are_written_by_hand() {
        let mut buf = BytesMut::new();
        let turn = Event::TurnStart {
            turn_id: "t".into(),
            request_id: None,
        };
        assert!(!put_delta(&mut buf, &turn));
        assert!(buf.is_empty());
    }

    #[test]
    fn spliced_frames_parse_as_events() {
        let id = Uuid::new_v4();
        let line = serde_json::to_vec(&LogLine {
            seq: 0,
            entry: LogEntry::SessionStart {
                session_id: id,
                created_at: LogEntry::now(),
                compacted_from: None,
                forked_from: None,
                provider: None,
                model: None,
                workspace: None,
                parent: None,
                replay_of: None,
            },
        })
        .unwrap();
        let frame = entry_frame(id, &line);
        let event: Event = serde_json::from_slice(&frame).unwrap();
        assert!(matches!(event, Event::Entry { seq: 0, session_id, .. } if session_id == id));

        let greeting = Greeting {
            pod: "p".into(),
            version: "0".into(),
            session_id: id,
            provider: "offline".into(),
            model: "offline".into(),
            workspace: "/".into(),
            pid: 1,
            approval: Default::default(),
            sandbox: Default::default(),
            mcp_servers: Vec::new(),
            access: Default::default(),
            access_reason: None,
            listen: None,
            allow_remote_always: false,
            warnings: Vec::new(),
        };
        let status = Status {
            state: PodState::Idle,
            ..Status::default()
        };
        let lines = [Bytes::from(line.clone()), Bytes::from(line)];
        let in_flight = InFlight::Text {
            text: "so far".into(),
        };
        let frame = snapshot_parts(&greeting, &status, id, None, &lines, Some(&in_flight)).concat();
        let Event::Snapshot(snapshot) = serde_json::from_slice(&frame).unwrap() else {
            panic!("not a snapshot")
        };
        assert_eq!(snapshot.entries.len(), 2);
        assert_eq!(snapshot.first_seq, None);
        assert_eq!(snapshot.in_flight, Some(in_flight));
        let empty = snapshot_parts(&greeting, &status, id, None, &[], None).concat();
        assert!(serde_json::from_slice::<Event>(&empty).is_ok());
        let tail = snapshot_parts(&greeting, &status, id, Some(7), &lines[1..], None).concat();
        let Event::Snapshot(snapshot) = serde_json::from_slice(&tail).unwrap() else {
            panic!("not a snapshot")
        };
        assert_eq!((snapshot.first_seq, snapshot.entries.len()), (Some(7), 1));
    }

    #[test]
    fn a_session_response_echoes_the_request_id_only_when_there_is_one() {
        let id = Uuid::new_v4();
        for (request_id, echoed) in [
            (Some("g\"1"), serde_json::json!("g\"1")),
            (None, serde_json::Value::Null),
        ] {
            let frame: serde_json::Value =
                serde_json::from_slice(&session_response(request_id, id, b"[]")).unwrap();
            assert_eq!(frame["request_id"], echoed);
            assert_eq!(
                frame.get("request_id").is_some(),
                request_id.is_some(),
                "{frame}"
            );
            assert_eq!(frame["session_id"], id.to_string());
        }
    }

    proptest::proptest! {
        /// Splicing is byte surgery on JSON: whatever text an entry holds
        /// (quotes, escapes, newlines, any Unicode), the spliced frame must
        /// parse back to exactly that entry, and a snapshot of many lines to
        /// exactly those lines.
        #[test]
        fn spliced_frames_round_trip_any_text(texts in proptest::collection::vec(".*", 1..8)) {
            let id = Uuid::new_v4();
            let lines: Vec<LogLine> = texts
                .iter()
                .enumerate()
                .map(|(seq, text)| LogLine {
                    seq: seq as u64,
                    entry: LogEntry::AssistantItems {
                        items: vec![crate::protocol::AssistantItem::Text { text: text.clone() }],
                    },
                })
                .collect();
            let encoded: Vec<Bytes> = lines
                .iter()
                .map(|l| Bytes::from(serde_json::to_vec(l).unwrap()))
                .collect();
            for (line, bytes) in lines.iter().zip(&encoded) {
                let frame = entry_frame(id, bytes);
                let event: Event = serde_json::from_slice(&frame).unwrap();
                proptest::prop_assert_eq!(
                    event,
                    Event::Entry { session_id: id, seq: line.seq, entry: line.entry.clone() }
                );
            }
            let parsed: Vec<LogLine> = serde_json::from_slice(&entries_array(&encoded)).unwrap();
            proptest::prop_assert_eq!(parsed, lines);
        }
    }
}
