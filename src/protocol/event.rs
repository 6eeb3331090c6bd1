//! Pod → client events.
//!
//! The server serialises every event through these types except `snapshot`
//! and `entry`, whose log lines it splices in as the bytes already on disk
//! (see `pod::frames`); clients deserialise all of them through [`Event`].

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{LogEntry, LogLine, Usage};

pub const PROTOCOL_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Snapshot(Snapshot),
    Entry {
        session_id: Uuid,
        seq: u64,
        entry: LogEntry,
    },
    TurnStart {
        turn_id: String,
        #[serde(default)]
        request_id: Option<String>,
    },
    TextDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    ToolCallStart {
        call_id: String,
        name: String,
    },
    ToolCallArgsDelta {
        call_id: String,
        delta: String,
    },
    ToolCallDone {
        call_id: String,
    },
    Usage(Usage),
    Status(Status),
    Notification {
        level: Level,
        source: String,
        message: String,
    },
    Error {
        code: ErrorCode,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    CompactStart {
        reason: CompactReason,
    },
    CompactDone {
        new_session_id: Uuid,
        #[serde(default)]
        tokens_before: u64,
        #[serde(default)]
        tokens_after: u64,
    },
    CompactFailed {
        error: String,
    },
    Response(Response),
    Shutdown {
        reason: String,
    },
    /// A frame type this build does not know; clients ignore it.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub protocol_version: u32,
    pub greeting: Greeting,
    pub status: Status,
    pub session_id: Uuid,
    pub entries: Vec<LogLine>,
    pub in_flight: Option<InFlight>,
}

/// Who the client is talking to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Greeting {
    pub pod: String,
    pub version: String,
    pub session_id: Uuid,
    pub provider: String,
    pub model: String,
    pub workspace: String,
    pub pid: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub state: PodState,
    pub queued: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodState {
    Idle,
    Running,
    Paused,
    Compacting,
}

/// The block the model is streaming right now, not yet an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InFlight {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments_so_far: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactReason {
    AutoMidTurn,
    AutoPostTurn,
    Manual,
}

/// Error codes. The first seven are fixed by the contract; the rest are the
/// pod's own and documented in `docs/protocol.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadFrame,
    UnknownMethod,
    InvalidParams,
    FrameTooLarge,
    Lagged,
    FileRefOutOfScope,
    /// A `file_ref` inside the workspace that cannot be used (missing, binary, too large).
    FileRefUnreadable,
    /// The model call failed (HTTP error, stream cut, bad reply).
    ModelError,
    /// A durable write failed; the entry was neither mirrored nor published.
    StorageError,
    /// `get_session` named a session this pod has no log for.
    SessionNotFound,
    /// The pod is shutting down and takes no new work.
    ShuttingDown,
    #[serde(other)]
    Other,
}

/// The answer to one client's method, sent to that client only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    #[serde(default)]
    pub request_id: Option<String>,
    /// `run`: how many runs are ahead of this one (0: it started at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<usize>,
    /// `list_completions`: matching workspace paths, directories ending in `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<Vec<String>>,
    /// `get_session`: the session asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    /// `get_session`: that session's log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<LogLine>>,
    /// `list_completions`: the completions with their kind and description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<CompletionItem>>,
}

/// One completion with what a menu shows beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionItem {
    pub value: String,
    pub kind: String,
    pub detail: Option<String>,
}

impl Event {
    /// The event as one newline-terminated frame.
    pub fn to_frame(&self) -> bytes::Bytes {
        let mut buf = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        buf.push(b'\n');
        buf.into()
    }

    pub fn error(code: ErrorCode, message: impl Into<String>, request_id: Option<String>) -> Self {
        Event::Error {
            code,
            message: message.into(),
            request_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn round_trip(v: Value) -> Event {
        let e: Event = serde_json::from_value(v.clone()).unwrap();
        assert_ne!(e, Event::Unknown, "{v}");
        assert_eq!(serde_json::to_value(&e).unwrap(), v);
        e
    }

    #[test]
    fn every_event_round_trips() {
        let id = Uuid::new_v4();
        round_trip(json!({"type":"snapshot","protocol_version":1,
            "greeting":{"pod":"default","version":"0.1.0","session_id":id,"provider":"offline",
                        "model":"offline","workspace":"/w","pid":7},
            "status":{"state":"idle","queued":0},"session_id":id,
            "entries":[{"seq":0,"entry":{"kind":"session_start","session_id":id,
                "created_at":"2026-11-30T00:00:00.000Z","compacted_from":null,"forked_from":null}}],
            "in_flight":{"type":"text","text":"so far"}}));
        round_trip(json!({"type":"entry","session_id":id,"seq":1,
            "entry":{"kind":"assistant_items","items":[{"type":"text","text":"x"}]}}));
        round_trip(json!({"type":"turn_start","turn_id":"t1","request_id":"r"}));
        round_trip(json!({"type":"text_delta","text":"x"}));
        round_trip(json!({"type":"reasoning_delta","text":"x"}));
        round_trip(json!({"type":"tool_call_start","call_id":"c","name":"bash"}));
        round_trip(json!({"type":"tool_call_args_delta","call_id":"c","delta":"{"}));
        round_trip(json!({"type":"tool_call_done","call_id":"c"}));
        round_trip(json!({"type":"usage","input_tokens":1,"output_tokens":2}));
        round_trip(json!({"type":"status","state":"compacting","queued":2}));
        round_trip(
            json!({"type":"notification","level":"warn","source":"compactor","message":"m"}),
        );
        round_trip(json!({"type":"error","code":"lagged","message":"m"}));
        round_trip(json!({"type":"error","code":"bad_frame","message":"m","request_id":"r"}));
        for reason in ["auto_mid_turn", "auto_post_turn", "manual"] {
            round_trip(json!({"type":"compact_start","reason":reason}));
        }
        round_trip(json!({"type":"compact_failed","error":"summary was empty"}));
        round_trip(json!({"type":"response","request_id":"r","queued":0}));
        round_trip(json!({"type":"response","request_id":"r","completions":["src/"]}));
        round_trip(json!({"type":"shutdown","reason":"requested"}));
    }

    #[test]
    fn compact_done_carries_a_uuid() {
        let id = Uuid::new_v4();
        let e = round_trip(json!({"type":"compact_done","new_session_id":id,
            "tokens_before":9000,"tokens_after":800}));
        let Event::CompactDone { new_session_id, .. } = e else {
            panic!("not compact_done")
        };
        assert_eq!(new_session_id, id);
        let shape = new_session_id.to_string();
        assert_eq!(shape.len(), 36);
        assert_eq!(shape.matches('-').count(), 4);
        let bad = json!({"type":"compact_done","new_session_id":"not-a-uuid"});
        assert!(serde_json::from_value::<Event>(bad).is_err());
    }

    #[test]
    fn clients_tolerate_unknown_frames_and_fields() {
        let e: Event = serde_json::from_value(json!({"type":"hologram","x":1})).unwrap();
        assert_eq!(e, Event::Unknown);
        let e: Event =
            serde_json::from_value(json!({"type":"text_delta","text":"a","extra":[1]})).unwrap();
        assert_eq!(e, Event::TextDelta { text: "a".into() });
        let e: Event =
            serde_json::from_value(json!({"type":"error","code":"new_code","message":"m"}))
                .unwrap();
        assert!(matches!(
            e,
            Event::Error {
                code: ErrorCode::Other,
                ..
            }
        ));
    }
}
