//! MCP servers as tool sources, kept warm by the pod.
//!
//! The config file's `[mcp_servers.NAME]` tables name stdio servers. Each
//! gets a [`supervisor`] actor, started with the pod, which spawns the
//! server, initialises it over `rmcp` (the official SDK: no JSON-RPC is
//! written here), lists its tools, follows `tools/list_changed`, and
//! restarts it with backoff when it exits. What a supervisor learns it
//! publishes on a `watch` channel; the [`McpRegistry`] reads those, so the
//! toolbox can list the ready servers' tools and call them without a round
//! trip through any actor — a call goes straight to the server's `rmcp`
//! peer.
//!
//! ```text
//!   Toolbox ──specs / call──▶ McpRegistry ──peer.call_tool──▶ server process
//!                               ▲ watch                          ▲ spawn, restart, kill
//!                               └────────── Supervisor ──────────┘
//!                                              │ McpChange (ready / failed)
//!                                              ▼
//!                                     server.rs → Broadcaster
//! ```

mod connect;
mod content;
mod names;
mod registry;
mod state;
mod supervisor;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

pub use crate::protocol::{McpServerInfo, McpState};
pub use names::tool_name;
pub use registry::{McpRegistry, McpSupervisors};
pub use state::McpChange;

/// One `[mcp_servers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program, found on `PATH` like a shell would.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the pod's own environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Where the server runs; relative to the workspace [default: the workspace].
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Seconds a tool call (and start-up) may take.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
}

fn default_timeout_s() -> u64 {
    120
}

/// Refuses server names that are empty or whose tools would share a name
/// prefix with another server's (`a.b` and `a_b` both give `mcp__a_b__`).
pub fn check_names(servers: &BTreeMap<String, McpServerConfig>) -> Result<(), String> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for name in servers.keys() {
        if name.is_empty() {
            return Err("mcp_servers: a server name is empty".into());
        }
        let prefix = names::prefix(name);
        if !names::separates(name) {
            return Err(format!(
                "mcp_servers: the server name {name:?} would make its tools' names ({prefix}*) \
                 ambiguous: a name must not contain \"__\" or end with \"_\" once characters \
                 other than letters, digits, '_' and '-' are '_'; rename it"
            ));
        }
        if let Some(other) = seen.insert(prefix.clone(), name) {
            return Err(format!(
                "mcp_servers: {other:?} and {name:?} would both name their tools {prefix}*; \
                 rename one of them"
            ));
        }
    }
    Ok(())
}

/// `pod status`'s lines for the servers: name, state, tool count, error.
pub fn format_servers(servers: &[McpServerInfo]) -> String {
    let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for server in servers {
        let tools = match server.state {
            McpState::Ready => format!(" ({} tools)", server.tools),
            _ => String::new(),
        };
        let state = match server.state {
            McpState::Starting => "starting",
            McpState::Ready => "ready",
            McpState::Failed => "failed",
            McpState::Unknown => "unknown",
        };
        out.push_str(&format!("{:<width$}  {state}{tools}", server.name));
        if let Some(error) = &server.error {
            let first = error.lines().next().unwrap_or_default();
            out.push_str(&format!(": {first}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_listed_with_state_tools_and_the_first_line_of_their_error() {
        let servers = [
            McpServerInfo {
                name: "git".into(),
                state: McpState::Ready,
                tools: 12,
                error: None,
            },
            McpServerInfo {
                name: "browser".into(),
                state: McpState::Failed,
                tools: 0,
                error: Some("cannot start `chromium-mcp`: not found\nstderr: …".into()),
            },
        ];
        assert_eq!(
            format_servers(&servers),
            "git      ready (12 tools)\nbrowser  failed: cannot start `chromium-mcp`: not found\n"
        );
    }

    #[test]
    fn the_greeting_shape_matches_the_protocol() {
        let info = McpServerInfo {
            name: "x".into(),
            state: McpState::Starting,
            tools: 0,
            error: None,
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"name":"x","state":"starting","tools":0})
        );
    }
}
