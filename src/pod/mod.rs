//! The pod server: its actors and how `pod serve` wires them together.
//!
//! ```text
//!   client ──socket──▶ Connection ──Run/Notify/Control──▶ Worker ──▶ provider, tools
//!                         │   ▲                              │  │
//!               Subscribe │   │ frames (Outbox)      Append  │  │ hints, status
//!                         ▼   │                              ▼  ▼
//!                      SessionLog ──Entry/Register──▶ Broadcaster ──▶ every Outbox
//!                       (disk)           ▲
//!                                        └── Compactor (summaries) via Worker
//! ```
//!
//! `docs/architecture.md` explains the ordering argument in full.

mod access;
mod agent_tools;
mod agent_transcript;
mod agents;
mod assembly;
/// For `examples/bench` only: not part of the crate's API.
#[doc(hidden)]
pub mod bench;
mod broadcaster;
pub(crate) mod checkpoint;
mod compaction;
mod compactor;
mod connection;
pub(crate) mod descendants;
pub mod embedded;
mod environment;
mod fault;
mod frames;
mod hooks;
mod host;
mod instructions;
mod job;
pub mod listening;
mod outbox;
mod probe;
mod recovery;
mod rules;
mod server;
mod session_log;
mod tool_step;
mod turn;
mod worker;
mod worktree;

pub use access::Access;
pub use agents::Limits as AgentLimits;
pub use connection::ConnectionLimits;
/// For the fuzz targets in `fuzz/`: the frame decoder every connection reads with.
#[doc(hidden)]
pub use connection::{FrameDecoder, Inbound};
pub use host::{Doors, RemoteClient};
pub use job::Thresholds;
pub use outbox::{lagged_frame, Feed};
pub use server::{serve, ListenerParts, ServeConfig, StartListener};
pub use turn::new_turn_id;
