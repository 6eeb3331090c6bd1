//! What a server's supervisor publishes and the registry reads: its state
//! (on a `watch` channel), its tools, and the changes the pod tells
//! clients of. Beside both, so that the registry, which starts the
//! supervisors, and the supervisors, which fill these in, do not use each
//! other.

use std::sync::Arc;

use rmcp::{Peer, RoleClient};
use tokio::sync::Notify;

use super::{McpServerInfo, McpState};
use crate::protocol::Level;
use crate::provider::ToolSpec;

/// A server's state changed: the greeting's entry for it, and what to tell
/// connected clients (`notification`, source `mcp`) if anything.
#[derive(Debug, Clone, PartialEq)]
pub struct McpChange {
    pub server: McpServerInfo,
    pub level: Level,
    pub message: Option<String>,
}

/// One server's state as its supervisor last published it.
#[derive(Clone)]
pub(super) struct ServerState {
    pub state: McpState,
    pub error: Option<String>,
    /// Empty unless ready.
    pub tools: Arc<Vec<McpTool>>,
    /// The connection, while ready.
    pub peer: Option<Peer<RoleClient>>,
    /// Fires when the server sent a message too large to take.
    pub oversized: Option<Arc<Notify>>,
}

impl ServerState {
    pub fn starting() -> Self {
        Self {
            state: McpState::Starting,
            error: None,
            tools: Arc::default(),
            peer: None,
            oversized: None,
        }
    }

    pub fn failed(error: String) -> Self {
        Self {
            state: McpState::Failed,
            error: Some(error),
            ..Self::starting()
        }
    }
}

/// A tool as offered to the model, and its name on its server.
#[derive(Debug, Clone)]
pub(super) struct McpTool {
    pub spec: ToolSpec,
    pub server_tool: String,
}
