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

mod assembly;
pub mod bench;
mod broadcaster;
mod compaction;
mod compactor;
mod connection;
mod descendants;
mod fault;
mod frames;
mod instructions;
mod job;
mod outbox;
mod recovery;
mod server;
mod session_log;
mod tool_step;
mod turn;
mod worker;

pub use compaction::Thresholds;
/// For the fuzz targets in `fuzz/`: the frame decoder every connection reads with.
#[doc(hidden)]
pub use connection::{FrameDecoder, Inbound};
pub use server::{serve, ServeConfig};
pub use turn::new_turn_id;

use actix::Addr;

use crate::protocol::{ErrorCode, Event, Response};
use crate::workspace::Workspace;
use outbox::Outbox;

/// The client a method came from, so answers reach it alone.
pub struct Client {
    pub outbox: Outbox,
    pub request_id: Option<String>,
}

impl Client {
    pub fn respond(&self, response: Response) {
        self.outbox.push_event(&Event::Response(Response {
            request_id: self.request_id.clone(),
            ..response
        }));
    }

    /// Acknowledges a method that has no result of its own; only clients that
    /// asked (sent a `request_id`) get one.
    pub fn ack(&self) {
        if self.request_id.is_some() {
            self.respond(Response {
                ok: Some(true),
                ..Response::default()
            });
        }
    }

    pub fn error(&self, code: ErrorCode, message: impl Into<String>) {
        self.outbox
            .push_event(&Event::error(code, message, self.request_id.clone()));
    }
}

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
