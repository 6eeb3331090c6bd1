//! Pod → client events.
//!
//! The server serialises every event through these types except `snapshot`
//! and `entry`, whose log lines it splices in as the bytes already on disk
//! (see `pod::frames`); clients deserialise all of them through [`Event`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{ForkPoint, InFlight, LogEntry, LogLine, Usage};

pub const PROTOCOL_VERSION: u32 = 1;

// `Response` carries every method's answer fields; boxing it would touch every
// client that matches on it, for a frame type that is never queued in bulk.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Snapshot(Box<Snapshot>),
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
    /// Output of a running tool as it is produced (`bash` streams its
    /// stdout and stderr this way).
    ToolOutputDelta {
        call_id: String,
        text: String,
    },
    /// A model call failed before anything of it was committed and is tried
    /// again after `delay_ms`; the partial block its hints built is void.
    Retry {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error: String,
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
    /// The pod's current session changed (`new_session`, `fork`,
    /// `resume_session`); a `snapshot` of the new session follows at once.
    SessionSwitched {
        new_session_id: Uuid,
        reason: SwitchReason,
    },
    Response(Response),
    Shutdown {
        reason: String,
    },
    /// A frame type this build does not know; clients ignore it.
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Snapshot {
    pub protocol_version: u32,
    pub greeting: Greeting,
    pub status: Status,
    pub session_id: Uuid,
    /// A tail snapshot (`GET /v1/ws?tail=N`): the seq of its first entry;
    /// older entries are read with `get_entries`. Absent in a full one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    pub entries: Vec<LogLine>,
    pub in_flight: Option<InFlight>,
}

/// Who the client is talking to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Greeting {
    pub pod: String,
    pub version: String,
    pub session_id: Uuid,
    pub provider: String,
    /// The model the pod runs now (as `status.model`).
    pub model: String,
    pub workspace: String,
    pub pid: u32,
    /// The pod's approval mode now (as `status.approval`).
    #[serde(default)]
    pub approval: ApprovalMode,
    #[serde(default)]
    pub sandbox: SandboxInfo,
    #[serde(default)]
    pub mcp_servers: Vec<McpServerInfo>,
    /// What this connection may do: `full`, or `read` (the read methods only).
    #[serde(default)]
    pub access: AccessLevel,
    /// Why a connection may only read, or null.
    #[serde(default)]
    pub access_reason: Option<AccessReason>,
    /// Where the pod serves the protocol over a WebSocket (`--listen`), or null.
    #[serde(default)]
    pub listen: Option<ListenInfo>,
    /// pod's own: a client over the network may answer `approve` with
    /// `scope: "always"` (`--allow-remote-always`); absent when it may not,
    /// so a remote client does not offer what the pod would refuse.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_remote_always: bool,
    /// What the pod warned about when it started (a config key that sets
    /// nothing, a sandbox the kernel cannot enforce), so that a client can
    /// show what would otherwise be only in the pod's log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What a connection may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AccessLevel {
    #[default]
    Full,
    Read,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// Why a connection may only read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AccessReason {
    /// Its peer is a pod or a pod's descendant (a tool's process).
    Descendant,
    /// It showed a read-only device token.
    ReadToken,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// The pod's network listener, as the greeting tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListenInfo {
    /// `HOST:PORT` as bound (IPv6 in brackets), or `unix:PATH` for a Unix
    /// socket a reverse proxy on the pod's machine forwards to.
    pub address: String,
    pub tls: bool,
}

/// One device token as `list_tokens` shows it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenInfo {
    pub id: String,
    pub label: Option<String>,
    /// `full` or `read`.
    pub scope: AccessLevel,
    pub created_at: String,
    pub last_used: Option<String>,
}

/// How `bash` is confined, and whether the kernel enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SandboxInfo {
    pub mode: SandboxMode,
    /// True only when every restriction the mode asks for is enforced.
    pub available: bool,
    /// Whether `bash` may open network connections.
    pub network: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    #[default]
    WorkspaceWrite,
    ReadOnly,
    Off,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// One configured MCP server as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerInfo {
    pub name: String,
    pub state: McpState,
    pub tools: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpState {
    Starting,
    Ready,
    Failed,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// When the pod asks before a tool call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Read-only tools run; everything else is asked.
    #[default]
    Ask,
    /// Also file edits inside the workspace run unasked.
    Edits,
    /// Everything runs unasked (deny rules still apply).
    Auto,
    /// Only the read-only tools run; everything else is denied.
    ReadOnly,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Ask => "ask",
            ApprovalMode::Edits => "edits",
            ApprovalMode::Auto => "auto",
            ApprovalMode::ReadOnly => "read-only",
            ApprovalMode::Unknown => "unknown",
        }
    }
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
            SandboxMode::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    pub state: PodState,
    pub queued: usize,
    /// Call ids of the approval requests waiting for an answer.
    #[serde(default)]
    pub pending_approvals: Vec<String>,
    #[serde(default)]
    pub approval: ApprovalMode,
    #[serde(default)]
    pub model: String,
    /// The size of the last model request, in tokens: as the server
    /// reported it, else the pod's estimate (`context_source` says which).
    #[serde(default)]
    pub context_tokens: u64,
    #[serde(default)]
    pub context_source: ContextSource,
    #[serde(default)]
    pub context_window: u64,
    /// The running turn, so a client that reconnects knows whose it is.
    #[serde(default)]
    pub turn: Option<TurnRef>,
    /// How many background jobs run now.
    #[serde(default)]
    pub jobs: usize,
    /// This pod's child pods (subagents), in start order.
    #[serde(default)]
    pub agents: Vec<AgentStatus>,
    /// What the current session's model calls used, plus every child's:
    /// the whole tree's cost, so no client undercounts a turn.
    #[serde(default)]
    pub tree_usage: Usage,
}

/// One child pod as its parent's `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentStatus {
    /// The child's full name (`<parent>.<slug>`).
    pub name: String,
    pub state: PodState,
    /// Call ids of the child's approval requests waiting for an answer.
    #[serde(default)]
    pub pending_approvals: Vec<String>,
    pub session_id: Uuid,
    /// The child's usage so far (its model calls, summed).
    #[serde(default)]
    pub usage: Usage,
}

/// One child pod as `list_agents` describes it: its status, its task and
/// when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentInfo {
    #[serde(flatten)]
    pub status: AgentStatus,
    pub task: String,
    /// RFC 3339.
    pub created_at: String,
    /// The git worktree it works in (`spawn_agent` with `worktree: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<AgentWorktree>,
}

/// A child pod's own git worktree: in `list_agents`, and in the answer to
/// `remove_agent`, which says what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentWorktree {
    /// The worktree's directory, under `<data-dir>/worktrees/`.
    pub path: String,
    /// `pod/<child name>`: kept when the child is removed.
    pub branch: String,
    /// `remove_agent`: whether the worktree was removed (it was clean) or
    /// kept (it has changes or untracked files; `note` says what to do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where `status.context_tokens` comes from: the usage the server reported
/// for the last call, or — for servers that report none (llama-cpp-python)
/// and before the first call — the pod's own estimate of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextSource {
    Usage,
    #[default]
    Estimate,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnRef {
    pub turn_id: String,
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PodState {
    #[default]
    Idle,
    Running,
    Paused,
    Compacting,
    /// A tool call waits for a person's approval.
    Waiting,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

impl PodState {
    pub fn as_str(self) -> &'static str {
        match self {
            PodState::Idle => "idle",
            PodState::Running => "running",
            PodState::Paused => "paused",
            PodState::Compacting => "compacting",
            PodState::Waiting => "waiting",
            PodState::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SwitchReason {
    New,
    Fork,
    Resume,
    /// A `rewind` with `conversation`: the new session is a fork just
    /// before the user message rewound to.
    Rewind,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
    Error,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompactReason {
    AutoMidTurn,
    AutoPostTurn,
    Manual,
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// Error codes (`docs/protocol.md` has when each is sent and to whom).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    /// A session id (or prefix) that names no session.
    SessionNotFound,
    /// A session id prefix that matches several sessions.
    SessionAmbiguous,
    /// Another pod is writing that session.
    SessionLocked,
    /// The pod is shutting down and takes no new work.
    ShuttingDown,
    /// `approve` for a call that is not waiting (unknown, already decided).
    NotPending,
    /// `cancel` with a `run` that is neither queued nor running.
    NotRunning,
    /// A method that needs the pod idle, while a turn runs or is queued.
    Busy,
    /// A method this connection may not send: it may only read (a tool's
    /// own process, a read-only token), or the method is local-only.
    Forbidden,
    /// A `user_prompt_submit` hook refused the run (exit 2); nothing was committed.
    BlockedByHook,
    /// `kill_job` for a job this pod does not know.
    JobNotFound,
    /// `rewind`/`get_diff`/`get_file`: no such checkpoint in this conversation.
    CheckpointNotFound,
    /// `rewind` with files while background jobs run (and no `kill_jobs`).
    JobsRunning,
    /// The connection's device token was revoked (then it is closed).
    Unauthorized,
    /// `issue_pairing` on a pod that does not listen (`--listen`).
    NotListening,
    /// What the method names does not exist (a device token; `revoke_rule`: no rule a
    /// decision of this conversation added; `get_file`: the path is not in
    /// that checkpoint).
    NotFound,
    /// `put_blob`: the image is over `--max-blob-bytes`.
    BlobTooLarge,
    /// `put_blob`: the store would pass `--max-blob-store-bytes`.
    BlobStoreFull,
    /// `get_blob`, or a `run` whose `image` segment names a blob the pod does not have.
    BlobNotFound,
    #[serde(other)]
    #[schemars(skip)]
    Other,
}

/// The answer to one client's method, sent to that client only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    /// The method's `request_id`; absent when the method had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `run`: how many runs are ahead of this one (0: it started at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<usize>,
    /// `list_completions`: matching workspace paths, directories ending in `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<Vec<String>>,
    /// `get_session`, `get_entries`: the session asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    /// `get_session`: that session's log lines; `get_entries`: the ones
    /// asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<LogLine>>,
    /// `list_completions`: the completions with their kind and description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<CompletionItem>>,
    /// `list_sessions`: newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<SessionInfo>>,
    /// `list_rules`: the conversation's allow and deny rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleInfo>>,
    /// `cancel` with `run`: the run was still queued and is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<bool>,
    /// `approve`, `hello`, `set_approval`, …: the method took effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// `rewind`: the paths put back, those left alone as conflicts, and
    /// those that could not be put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_restored: Option<Vec<crate::RestoredFile>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_restored: Option<Vec<crate::NotRestored>>,
    /// `rewind`: the pids of processes tools left running (daemons the pod
    /// adopted) that it killed before putting files back, so that none
    /// writes over them. Absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_stopped: Option<Vec<u32>>,
    /// `get_diff`: the unified diff, the files it covers, whether it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<crate::FileChange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// `get_file`: the bytes (base64) and whether the path is a `file` or
    /// a `symlink` (`file_type`: the frame's own `type` is `response`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_type: Option<String>,
    /// `issue_token`: the new token, shown this once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `issue_token`: the token's id (for `revoke_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `issue_token`: `full` or `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<AccessLevel>,
    /// `issue_pairing`: the web client's URL with its one-time `#pair=` code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `put_blob`, `get_blob`: the blob's id, `sha256:<hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// `put_blob`: the blob's size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// `put_blob`, `get_blob`: the image's media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// `get_blob`: the bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// `list_tokens`: every token, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<TokenInfo>>,
    /// `list_jobs`: every background job of this pod, in start order;
    /// `get_job_output`: that one job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobInfo>>,
    /// `list_agents`: this pod's children, in start order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<AgentInfo>>,
    /// `remove_agent` of a child with a worktree: what became of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<AgentWorktree>,
    /// `get_job_output`: what the job printed so far, as kept (its first
    /// and last 512 KiB, with a note of the bytes left out between them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// One background job, as `list_jobs` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobInfo {
    /// Its id: unique per pod name across restarts, in start order.
    pub job: u64,
    pub command: String,
    /// RFC 3339.
    pub started_at: String,
    pub running: bool,
    /// How it ended: an exit code, or the signal that killed it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// One completion with what a menu shows beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompletionItem {
    pub value: String,
    pub kind: String,
    pub detail: Option<String>,
}

/// One rule in force, as `list_rules` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuleInfo {
    /// The rule's canonical text (`bash:git status *`).
    pub rule: String,
    /// `allow` or `deny`.
    pub kind: String,
    /// `flag`, `config` or `decision`.
    pub source: String,
    /// For `decision`: the session of the `approval_decision` that added it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<Uuid>,
    /// For `decision`: that entry's seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// One session of the data directory, as `list_sessions` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    pub session_id: Uuid,
    pub created_at: String,
    /// The time of the last append.
    pub updated_at: String,
    pub entries: u64,
    /// The first user text, newlines as spaces, cut to 80 characters.
    pub title: Option<String>,
    pub compacted_from: Option<Uuid>,
    pub forked_from: Option<ForkPoint>,
    pub current: bool,
    /// The workspace its `session_start` recorded (null for logs written
    /// before it was recorded).
    #[serde(default)]
    pub workspace: Option<String>,
    /// pod's own: a `rewind` of the conversation made this session (its
    /// `forked_from` is the session rewound); false for a `fork` and for
    /// every session not forked.
    #[serde(default)]
    pub rewound: bool,
}

impl SessionInfo {
    /// The title to show for this session among `all`: its own, else — for
    /// a session compacted from another, which starts with a summary and
    /// no user input — the title of the conversation it continues, marked
    /// `(compacted)`. `None` when neither has one.
    pub fn shown_title(&self, all: &[SessionInfo]) -> Option<String> {
        if let Some(title) = &self.title {
            return Some(title.clone());
        }
        let mut from = self.compacted_from;
        // A chain is at most as long as the list; a cycle (a hand-edited
        // log) must not loop.
        for _ in 0..all.len() {
            let earlier = all.iter().find(|s| Some(s.session_id) == from)?;
            if let Some(title) = &earlier.title {
                return Some(format!("(compacted) {title}"));
            }
            from = earlier.compacted_from;
        }
        None
    }
}

impl Event {
    /// The event as one newline-terminated frame.
    ///
    /// Serialising these types cannot fail (string keys, no fallible
    /// `Serialize` impls); were it ever to, the client gets an `error` frame
    /// saying so rather than an empty or torn one.
    pub fn to_frame(&self) -> bytes::Bytes {
        let mut buf = serde_json::to_vec(self).unwrap_or_else(|e| {
            let fallback = serde_json::json!({
                "type": "error",
                "code": "internal",
                "message": format!("the pod could not encode a frame: {e}"),
            });
            fallback.to_string().into_bytes()
        });
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

    /// Whether this is a streaming delta: a piece of text that a client
    /// appends to what the hints before it built.
    pub fn is_delta(&self) -> bool {
        matches!(
            self,
            Event::TextDelta { .. }
                | Event::ReasoningDelta { .. }
                | Event::ToolCallArgsDelta { .. }
                | Event::ToolOutputDelta { .. }
        )
    }

    /// Appends `next` to this delta when a client would append both to the
    /// same thing (two deltas of one kind, for the same call), so that
    /// deltas sent together cost one frame; otherwise gives `next` back.
    /// Appending the merged delta builds exactly what appending both did.
    pub fn absorb(&mut self, next: Event) -> Option<Event> {
        match (self, next) {
            (Event::TextDelta { text }, Event::TextDelta { text: more })
            | (Event::ReasoningDelta { text }, Event::ReasoningDelta { text: more }) => {
                text.push_str(&more);
                None
            }
            (
                Event::ToolCallArgsDelta { call_id, delta },
                Event::ToolCallArgsDelta {
                    call_id: next_id,
                    delta: more,
                },
            ) if *call_id == next_id => {
                delta.push_str(&more);
                None
            }
            (
                Event::ToolOutputDelta { call_id, text },
                Event::ToolOutputDelta {
                    call_id: next_id,
                    text: more,
                },
            ) if *call_id == next_id => {
                text.push_str(&more);
                None
            }
            (_, next) => Some(next),
        }
    }
}

#[cfg(feature = "clap")]
/// `pod --sandbox` parses into the wire type (the `clap` feature, which
/// only the `pod` binary asks for); `unknown` (a newer peer's value on
/// the wire) is not a choice on the command line.
impl clap::ValueEnum for SandboxMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            SandboxMode::WorkspaceWrite,
            SandboxMode::ReadOnly,
            SandboxMode::Off,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            SandboxMode::Unknown => None,
            mode => Some(clap::builder::PossibleValue::new(mode.as_str())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_merge_only_into_what_a_client_appends_them_to() {
        let mut text = Event::TextDelta { text: "a".into() };
        assert_eq!(text.absorb(Event::TextDelta { text: "b".into() }), None);
        assert_eq!(text, Event::TextDelta { text: "ab".into() });
        let reasoning = Event::ReasoningDelta { text: "r".into() };
        assert_eq!(text.absorb(reasoning.clone()), Some(reasoning));
        let args = |id: &str, d: &str| Event::ToolCallArgsDelta {
            call_id: id.into(),
            delta: d.into(),
        };
        let mut first = args("c1", "{");
        assert_eq!(first.absorb(args("c1", "}")), None);
        assert_eq!(first, args("c1", "{}"));
        assert_eq!(first.absorb(args("c2", "x")), Some(args("c2", "x")));
        let output = |id: &str, t: &str| Event::ToolOutputDelta {
            call_id: id.into(),
            text: t.into(),
        };
        let mut out = output("c1", "a");
        assert_eq!(out.absorb(output("c1", "b")), None);
        assert_eq!(out.absorb(output("c2", "c")), Some(output("c2", "c")));
        assert_eq!(out, output("c1", "ab"));
    }
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
                        "model":"offline","workspace":"/w","pid":7,"approval":"ask",
                        "sandbox":{"mode":"workspace-write","available":true,"network":true},
                        "mcp_servers":[{"name":"git","state":"failed","tools":0,"error":"x"}],
                        "access":"read","access_reason":"read_token",
                        "listen":{"address":"127.0.0.1:7878","tls":true}},
            "status":{"state":"waiting","queued":0,"pending_approvals":["c1"],"approval":"ask",
                      "model":"offline","context_tokens":1200,"context_source":"usage","context_window":128000,
                      "turn":{"turn_id":"t1","request_id":null},"jobs":2,"agents":[],"tree_usage":{"input_tokens":0,"output_tokens":0}},"session_id":id,
            "entries":[{"seq":0,"entry":{"kind":"session_start","session_id":id,
                "created_at":"2026-11-30T00:00:00.000Z","compacted_from":null,"forked_from":null,
                "provider":"offline","model":"offline"}}],
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
        round_trip(json!({"type":"status","state":"compacting","queued":2,
            "pending_approvals":[],"approval":"auto","model":"m","context_tokens":0,"context_source":"estimate",
            "context_window":0,"turn":null,"jobs":1,"agents":[],
            "tree_usage":{"input_tokens":0,"output_tokens":0}}));
        round_trip(json!({"type":"tool_output_delta","call_id":"c","text":"tick 1\n"}));
        round_trip(
            json!({"type":"retry","attempt":1,"max_attempts":4,"delay_ms":500,
            "error":"HTTP 429"}),
        );
        round_trip(json!({"type":"session_switched","new_session_id":id,"reason":"fork"}));
        round_trip(json!({"type":"response","request_id":"r","ok":true}));
        round_trip(json!({"type":"response","request_id":"r","removed":true}));
        round_trip(
            json!({"type":"response","request_id":"r","completions":["review"],
            "items":[{"value":"review","kind":"workflow","detail":"Review a change"}]}),
        );
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
        // A method without a request_id gets a response without one.
        round_trip(json!({"type":"response","queued":0}));
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
