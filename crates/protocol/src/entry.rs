//! Session log entries: the kinds a session log line can hold.
//!
//! One line of `<data-dir>/sessions/<id>.jsonl` is a [`LogLine`]. The log is
//! the single source of truth: the model's context and every client's view are
//! projections of these entries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::Segment;

/// One line of a session log: `{"seq":N,"entry":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LogLine {
    pub seq: u64,
    pub entry: LogEntry,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogEntry {
    SessionStart {
        session_id: Uuid,
        created_at: String,
        #[serde(default)]
        compacted_from: Option<Uuid>,
        /// Logs written before forks existed held a bare uuid here; it reads
        /// as a fork point with no `seq`.
        #[serde(default, deserialize_with = "fork_point_compat")]
        #[schemars(schema_with = "super::schema::legacy_fork_point")]
        forked_from: Option<ForkPoint>,
        /// The provider and model the session started with (null in logs
        /// written before these fields existed).
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
        /// The workspace's absolute path (absent in logs written before it
        /// was recorded): `pod sessions` lists a project's own sessions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
        /// A child pod's session: the parent pod, its session and the
        /// `spawn_agent` call that started the child (absent for a top pod).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<ParentRef>,
        /// A session `pod replay` made: the recorded session it re-ran
        /// (absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_of: Option<ReplayRef>,
    },
    UserInput {
        segments: Vec<Segment>,
        at: String,
        /// The turn this input started, and the `request_id` of the `run`
        /// that asked for it: the log says whose turn is whose even after a
        /// restart (null in logs written before these fields existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// For `file_ref`s to image files: segment index → the blob the pod
        /// stored from the file when the run was accepted (what the model
        /// was sent).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        resolved: std::collections::BTreeMap<String, String>,
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
    /// The pod asks a person before a tool call runs.
    ApprovalRequest {
        call_id: String,
        tool: String,
        /// One line a person reads: the command, or `edit src/main.rs (+3 −1)`.
        summary: String,
        /// What will happen: the full command, a unified diff, the arguments.
        preview: String,
        /// Why it asks: the mode or the rule.
        reason: String,
        /// The allow rule a `session` answer would add, computed by the pod
        /// when it asks, so every client shows the same rule and none needs
        /// the policy code; `None` where no rule can be derived, and in logs
        /// written before the field existed.
        #[serde(default)]
        session_rule: Option<String>,
    },
    /// How a tool call was decided, when a person, a deny rule or a cancel
    /// decided it (calls that a rule or the mode simply allows have none).
    ApprovalDecision {
        call_id: String,
        decision: Decision,
        scope: Scope,
        #[serde(default)]
        rule: Option<String>,
        by: DecidedBy,
        #[serde(default)]
        client: Option<String>,
        /// The IP address of a client that answered over the network.
        #[serde(default)]
        remote: Option<String>,
        #[serde(default)]
        message: Option<String>,
    },
    /// An allow rule a decision of this conversation added is revoked: the
    /// rules rebuilt from decisions leave it out from here on.
    RuleRevoked {
        rule: String,
        by: DecidedBy,
        #[serde(default)]
        client: Option<String>,
        /// The address of a client that revoked it over the network.
        #[serde(default)]
        remote: Option<String>,
        at: String,
    },
    /// From here on the conversation runs on this model.
    ModelChange {
        provider: String,
        model: String,
        at: String,
    },
    /// The state of the workspace's files at a moment of the turn (see
    /// "Checkpoints and rewind" in docs/protocol.md).
    Checkpoint {
        /// The checkpoint's id, or null when it could not be taken.
        checkpoint: Option<String>,
        /// Why it could not be taken.
        #[serde(default)]
        error: Option<String>,
        reason: CheckpointReason,
        /// What differs from the conversation's previous checkpoint.
        #[serde(default)]
        changes: Vec<FileChange>,
        /// Paths not stored (at most 100 listed).
        #[serde(default)]
        skipped: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped_more: Option<u64>,
        at: String,
    },
    /// Files (and perhaps the conversation) were put back.
    Rewind {
        before_seq: Option<u64>,
        session_id: Option<Uuid>,
        /// The state the files were restored to.
        checkpoint: Option<String>,
        /// The state just before, so the rewind can be undone.
        checkpoint_before: Option<String>,
        files_restored: Vec<RestoredFile>,
        conflicts: Vec<String>,
        not_restored: Vec<NotRestored>,
        conversation: bool,
    },
    /// In the parent's log: a `spawn_agent` call started a child pod,
    /// committed before the child's first entry.
    AgentStarted {
        /// The child's full name (`<parent>.<slug>`).
        name: String,
        /// The child's session.
        session_id: Uuid,
        call_id: String,
        task: String,
        at: String,
    },
    /// In the parent's log: one of the child's turns ended.
    AgentTurnEnd {
        name: String,
        session_id: Uuid,
        reason: TurnEndReason,
        usage: Option<Usage>,
        /// The turn's final assistant text, capped at 4 KiB.
        text: String,
        at: String,
    },
    TurnEnd {
        reason: TurnEndReason,
        /// Those of the turn's `turn_start` (null in logs written before).
        #[serde(default)]
        turn_id: Option<String>,
        #[serde(default)]
        request_id: Option<String>,
        usage: Option<Usage>,
        /// Why the turn ended, for `error` and `interrupted`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<TurnError>,
    },
    /// An entry kind this build does not know. Only clients ever see it (a
    /// newer pod may add kinds); the pod refuses to load a log holding one.
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// When a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointReason {
    TurnStart,
    TurnEnd,
    Rewind,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// How one path differs between two checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileChange {
    pub path: String,
    pub change: ChangeKind,
    /// Lines added and removed; null for binary content.
    pub added: Option<u64>,
    pub removed: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    /// Only the executable bit changed.
    Mode,
    /// A file became a symlink or the other way round.
    Type,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// One path a rewind put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RestoredFile {
    pub path: String,
    pub action: RestoreAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestoreAction {
    Written,
    Created,
    Deleted,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// A path a rewind could not put back, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NotRestored {
    pub path: String,
    pub reason: String,
}

/// One confirmed block of model output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    pub call_id: String,
    pub output: String,
    pub is_error: bool,
}

/// Text the pod itself puts into the conversation (a `notify`, a compaction
/// summary, a system notice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InjectedItem {
    pub source: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnEndReason {
    Completed,
    Cancelled,
    Error,
    MaxSteps,
    Interrupted,
    /// A reason this build does not know (clients treat it generically).
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// The recorded session a replayed one re-ran (`pod replay`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReplayRef {
    pub session_id: Uuid,
}

/// Who started a child pod's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ParentRef {
    /// The parent pod's name.
    pub pod: String,
    pub session_id: Uuid,
    /// The parent's `spawn_agent` call.
    pub call_id: String,
}

/// Where a forked session branched off: that session, up to that entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkPoint {
    pub session_id: Uuid,
    pub seq: Option<u64>,
}

fn fork_point_compat<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<ForkPoint>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Point(ForkPoint),
        Bare(Uuid),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        None => None,
        Some(Either::Point(p)) => Some(p),
        Some(Either::Bare(session_id)) => Some(ForkPoint {
            session_id,
            seq: None,
        }),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Once,
    Session,
    /// `session`, and the rule is also written to the config file.
    Always,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// Who decided a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    User,
    Policy,
    Cancel,
    /// An `approval_request` or `pre_tool_use` hook of the config file.
    Hook,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// Why a turn ended with `error` or `interrupted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnError {
    pub code: TurnErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnErrorCode {
    /// The provider answered with an HTTP error; the message names the
    /// status and quotes the provider's own message.
    ProviderHttp,
    /// The provider could not be reached (DNS, connect, TLS, timeout).
    ProviderUnreachable,
    /// The stream broke off or could not be parsed.
    ProviderStream,
    /// The model stopped at the output limit (`finish_reason: "length"`,
    /// `stop_reason: "max_tokens"`): the cut block is committed as far as
    /// it got, and the message names the limit and how to raise it.
    OutputLimit,
    /// The request did not fit the model's context, even after compacting.
    ContextOverflow,
    /// A durable write failed.
    Storage,
    /// The pod died mid-turn (`interrupted`).
    Crashed,
    /// A token budget was reached (`pod exec --max-tokens`; a child pod's
    /// `max_tokens`): the message names the limit.
    Budget,
    /// A time limit was reached (`pod exec --timeout`): the message names it.
    Timeout,
    #[serde(other)]
    #[schemars(skip)]
    Other,
}

/// Token usage as reported by a provider (or estimated by the pod).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Everything the model read, cached parts included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache
    /// (Anthropic's `cache_read_input_tokens`, OpenAI's
    /// `prompt_tokens_details.cached_tokens`): billed at a fraction.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds another call's usage (a turn's is the sum of its calls').
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

impl TurnEndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Cancelled => "cancelled",
            TurnEndReason::Error => "error",
            TurnEndReason::MaxSteps => "max_steps",
            TurnEndReason::Interrupted => "interrupted",
            TurnEndReason::Unknown => "unknown",
        }
    }
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
            LogEntry::ApprovalRequest { .. } => "approval_request",
            LogEntry::ApprovalDecision { .. } => "approval_decision",
            LogEntry::RuleRevoked { .. } => "rule_revoked",
            LogEntry::ModelChange { .. } => "model_change",
            LogEntry::Checkpoint { .. } => "checkpoint",
            LogEntry::Rewind { .. } => "rewind",
            LogEntry::AgentStarted { .. } => "agent_started",
            LogEntry::AgentTurnEnd { .. } => "agent_turn_end",
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
            "created_at":"2026-11-30T00:00:00.000Z","compacted_from":null,"forked_from":null,"provider":"openai","model":"gpt-4o"}}),
        );
        round_trip(
            json!({"seq":0,"entry":{"kind":"session_start","session_id":id,
            "created_at":"2026-11-30T00:00:00.000Z","compacted_from":Uuid::new_v4(),"forked_from":{"session_id":id,"seq":4},
            "provider":null,"model":null}}),
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
            round_trip(json!({"seq":6,"entry":{"kind":"turn_end","reason":reason,
                "turn_id":"t1","request_id":null,"usage":null}}));
        }
        round_trip(
            json!({"seq":6,"entry":{"kind":"turn_end","reason":"completed","turn_id":"t2",
            "request_id":"r1","usage":{"input_tokens":10,"output_tokens":3}}}),
        );
        round_trip(
            json!({"seq":6,"entry":{"kind":"turn_end","reason":"error","turn_id":"t2",
            "request_id":null,"usage":null,
            "error":{"code":"provider_http","message":"HTTP 401: invalid api key"}}}),
        );
        round_trip(
            json!({"seq":7,"entry":{"kind":"approval_request","call_id":"c1",
            "tool":"bash","summary":"cargo test","preview":"cargo test","reason":"mode:ask",
            "session_rule":"bash:cargo test *"}}),
        );
        round_trip(
            json!({"seq":7,"entry":{"kind":"approval_request","call_id":"c1",
            "tool":"x:y","summary":"x:y","preview":"{}","reason":"mode:ask","session_rule":null}}),
        );
        // A log written before `session_rule` existed still loads: no rule.
        let old: LogLine = serde_json::from_value(
            json!({"seq":7,"entry":{"kind":"approval_request","call_id":"c1",
            "tool":"bash","summary":"cargo test","preview":"cargo test","reason":"mode:ask"}}),
        )
        .unwrap();
        assert!(
            matches!(
                old.entry,
                LogEntry::ApprovalRequest {
                    session_rule: None,
                    ..
                }
            ),
            "{old:?}"
        );
        round_trip(
            json!({"seq":8,"entry":{"kind":"approval_decision","call_id":"c1",
            "decision":"allow","scope":"session","rule":"bash:cargo *","by":"user",
            "client":"tui@host","remote":"192.0.2.7","message":null}}),
        );
        round_trip(
            json!({"seq":9,"entry":{"kind":"model_change","provider":"openai",
            "model":"gpt-4o-mini","at":"2026-11-30T00:00:00.000Z"}}),
        );
        round_trip(
            json!({"seq":10,"entry":{"kind":"checkpoint","checkpoint":"ab","error":null,
            "reason":"turn_start","changes":[{"path":"a","change":"modified","added":1,"removed":0},
            {"path":"b.png","change":"added","added":null,"removed":null}],
            "skipped":["big.bin"],"skipped_more":3,"at":"2026-11-30T00:00:00.000Z"}}),
        );
        round_trip(
            json!({"seq":11,"entry":{"kind":"rewind","before_seq":3,"session_id":id,
            "checkpoint":"ab","checkpoint_before":"cd",
            "files_restored":[{"path":"a","action":"written"},{"path":"n","action":"deleted"}],
            "conflicts":["c"],"not_restored":[{"path":"d","reason":"its parent d is now a symlink"}],
            "conversation":true}}),
        );
    }

    #[test]
    fn logs_written_before_a_field_existed_still_load() {
        let id = Uuid::new_v4();
        let line: LogLine = serde_json::from_value(json!({"seq":0,"entry":{
            "kind":"session_start","session_id":id,"created_at":"2026-11-30T00:00:00.000Z",
            "forked_from":id}}))
        .unwrap();
        let LogEntry::SessionStart {
            compacted_from,
            forked_from,
            provider,
            ..
        } = line.entry
        else {
            panic!("not a session_start")
        };
        assert_eq!(compacted_from, None);
        assert_eq!(provider, None);
        assert_eq!(
            forked_from,
            Some(ForkPoint {
                session_id: id,
                seq: None
            })
        );
        let line: LogLine = serde_json::from_value(
            json!({"seq":3,"entry":{"kind":"turn_end","reason":"completed","usage":null}}),
        )
        .unwrap();
        assert!(matches!(
            line.entry,
            LogEntry::TurnEnd {
                turn_id: None,
                error: None,
                ..
            }
        ));
    }

    #[test]
    fn unknown_entry_kind_parses_as_unknown() {
        let line: LogLine =
            serde_json::from_value(json!({"seq":9,"entry":{"kind":"fork_marker","x":1}})).unwrap();
        assert_eq!(line.entry, LogEntry::Unknown);
    }
}
