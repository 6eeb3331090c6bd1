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

pub mod bench;
mod broadcaster;
mod compactor;
mod connection;
mod fault;
mod frames;
mod outbox;
mod server;
mod session_log;
mod turn;
mod worker;

pub use compactor::Thresholds;
pub use server::{serve, ServeConfig};

use actix::Addr;

use crate::workspace::Workspace;

/// Limits a connection obeys.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_frame_bytes: usize,
    /// Bytes that may wait for a client before it is disconnected as lagged.
    pub max_client_lag_bytes: usize,
}

/// What every connection needs to reach the rest of the pod.
#[derive(Clone)]
pub struct Hub {
    pub session_log: Addr<session_log::SessionLog>,
    pub broadcaster: Addr<broadcaster::Broadcaster>,
    pub worker: Addr<worker::Worker>,
    pub workspace: Workspace,
    pub config: ConnectionLimits,
}
