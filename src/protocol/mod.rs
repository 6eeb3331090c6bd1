//! The wire protocol, version 1: every type that crosses the socket or lands
//! in a session log. `docs/protocol.md` is the prose version of this module.

mod entry;
mod event;
mod method;
mod segment;

pub use entry::{AssistantItem, InjectedItem, LogEntry, LogLine, ToolResult, TurnEndReason, Usage};
pub use event::{
    CompactReason, CompletionItem, ErrorCode, Event, Greeting, InFlight, Level, PodState, Response,
    Snapshot, Status, PROTOCOL_VERSION,
};
pub use method::{CompletionKind, FrameError, Method, Request};
pub use segment::{Segment, SegmentView};
