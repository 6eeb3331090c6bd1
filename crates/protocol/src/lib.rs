//! The wire protocol, version 1: every type that crosses the socket or lands
//! in a session log. `docs/protocol.md` is the prose version of this module.

pub mod answer;
pub mod blob;
mod entry;
mod event;
mod headless;
mod in_flight;
mod limits;
mod method;
pub mod notes;
pub mod offline;
mod schema;
mod segment;
mod session_tree;
pub mod tokens;
pub mod tools;

pub use entry::{
    AssistantItem, ChangeKind, CheckpointReason, DecidedBy, Decision, FileChange, ForkPoint,
    InjectedItem, LogEntry, LogLine, NotRestored, ParentRef, ReplayRef, RestoreAction,
    RestoredFile, Scope, ToolResult, TurnEndReason, TurnError, TurnErrorCode, Usage,
};
pub use event::{
    AccessLevel, AccessReason, AgentInfo, AgentStatus, AgentWorktree, ApprovalMode, CompactReason,
    CompletionItem, ContextSource, ErrorCode, Event, Greeting, JobInfo, Level, ListenInfo,
    McpServerInfo, McpState, PodState, Response, RuleInfo, SandboxInfo, SandboxMode, SessionInfo,
    Snapshot, Status, SwitchReason, TokenInfo, TurnRef, PROTOCOL_VERSION,
};
pub use headless::{ExecResult, ExecResultType};
pub use in_flight::InFlight;
pub use limits::{json_depth, MAX_JSON_DEPTH};
pub use method::{CompletionKind, FrameError, Method, Request, MAX_GET_ENTRIES};
pub use schema::document as schema_document;
pub use segment::{Segment, SegmentView};
pub use session_tree::{branch_kind, in_tree_order, repeats_title, session_tree, TreeRow};
