//! Tools the toolbox offers but does not implement: the MCP servers'
//! (`mcp__SERVER__TOOL`). The toolbox lists them and routes a call to them
//! by name through [`ExternalTools`], so this module never names `mcp`,
//! which sits above it and builds on its tool processes and outcomes (the
//! layer table in `tests/module_graph.rs`); `pod` hands the MCP registry
//! in as one.

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::ToolOutcome;
use crate::protocol::McpServerInfo;
use crate::provider::ToolSpec;

/// A source of tools beside the built-in ones.
pub trait ExternalTools: Send + Sync {
    /// Every server, in name order, for the greeting.
    fn servers(&self) -> Vec<McpServerInfo>;
    /// The tools that can be called now.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Checks a call before anyone is asked about it.
    fn precheck(&self, name: &str, arguments: &Value) -> Result<(), ToolOutcome>;
    /// Runs a call; never fails (a failure is an `is_error` outcome).
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutcome>;
    /// The pids of the processes serving them, which a rewind spares.
    fn pids(&self) -> Vec<u32>;
}
