//! Session log entries: the six kinds a session log line can hold.
//!
//! One line of `<data-dir>/sessions/<id>.jsonl` is a [`LogLine`]. The log is
//! the single source of truth: the model's context and every client's view are
//! projections of these entries.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::Segment;

/// One line of a session log: `{"seq":N,"entry":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub seq: u64,
    pub entry: LogEntry,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogEntry {
    SessionStart {
        session_id: Uuid,
        created_at: String,
        compacted_from: Option<Uuid>,
        forked_from: Option<Uuid>,
    },
    UserInput {
        segments: Vec<Segment>,
        at: String,
    },
    AssistantItems {
        items: Vec<AssistantItem>,
    },
    ToolResults {
        results: Vec<ToolResult>,
    },
    HookInjectedItems {
        items: Vec<InjectedItem>,
    },
    TurnEnd {
        reason: TurnEndReason,
        usage: Option<Usage>,
    },
    /// An entry kind this build does not know. Only clients ever see it (a
    /// newer pod may add kinds); the pod refuses to load a log holding one.
    #[serde(other)]
    Unknown,
}

/// One confirmed block of model output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantItem {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub output: String,
    pub is_error: bool,
}

/// Text the pod itself puts into the conversation (a `notify`, a compaction
/// summary, a system notice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectedItem {
    pub source: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEndReason {
    Completed,
    Cancelled,
    Error,
    MaxSteps,
    Interrupted,
}

/// Token usage as reported by a provider (or estimated by the pod).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl LogEntry {
    /// The wall-clock time as RFC 3339, the format every timestamp in the log uses.
    pub fn now() -> String {
        humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
    }

    pub fn kind(&self) -> &'static str {
        match self {
            LogEntry::SessionStart { .. } => "session_start",
            LogEntry::UserInput { .. } => "user_input",
            LogEntry::AssistantItems { .. } => "assistant_items",
            LogEntry::ToolResults { .. } => "tool_results",
            LogEntry::HookInjectedItems { .. } => "hook_injected_items",
            LogEntry::TurnEnd { .. } => "turn_end",
            LogEntry::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: Value) {
        let line: LogLine = serde_json::from_value(v.clone()).unwrap();
        assert_ne!(line.entry, LogEntry::Unknown);
        assert_eq!(serde_json::to_value(&line).unwrap(), v);
    }

    #[test]
    fn every_entry_kind_round_trips() {
        let id = Uuid::new_v4();
        round_trip(
            json!({"seq":0,"entry":{"kind":"session_start","session_id":id,
            "created_at":"2026-11-30T00:00:00.000Z","compacted_from":null,"forked_from":null}}),
        );
        round_trip(
            json!({"seq":0,"entry":{"kind":"session_start","session_id":id,
            "created_at":"2026-11-30T00:00:00.000Z","compacted_from":Uuid::new_v4(),"forked_from":null}}),
        );
        round_trip(
            json!({"seq":1,"entry":{"kind":"user_input","at":"2026-11-30T00:00:00.000Z",
            "segments":[{"type":"text","text":"hi"},{"type":"hologram","x":1}]}}),
        );
        round_trip(
            json!({"seq":2,"entry":{"kind":"assistant_items","items":[{"type":"text","text":"a"}]}}),
        );
        round_trip(
            json!({"seq":2,"entry":{"kind":"assistant_items","items":[{"type":"reasoning","text":"a"}]}}),
        );
        round_trip(json!({"seq":3,"entry":{"kind":"assistant_items","items":[
            {"type":"tool_call","call_id":"c1","name":"read_file","arguments":{"path":"a"}}]}}));
        round_trip(json!({"seq":4,"entry":{"kind":"tool_results","results":[
            {"call_id":"c1","output":"x","is_error":false}]}}));
        round_trip(
            json!({"seq":5,"entry":{"kind":"hook_injected_items","items":[
            {"source":"notify","text":"build finished"}]}}),
        );
        for reason in [
            "completed",
            "cancelled",
            "error",
            "max_steps",
            "interrupted",
        ] {
            round_trip(json!({"seq":6,"entry":{"kind":"turn_end","reason":reason,"usage":null}}));
        }
        round_trip(
            json!({"seq":6,"entry":{"kind":"turn_end","reason":"completed",
            "usage":{"input_tokens":10,"output_tokens":3}}}),
        );
    }

    #[test]
    fn unknown_entry_kind_parses_as_unknown() {
        let line: LogLine =
            serde_json::from_value(json!({"seq":9,"entry":{"kind":"fork_marker","x":1}})).unwrap();
        assert_eq!(line.entry, LogEntry::Unknown);
    }
}
