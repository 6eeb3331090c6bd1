//! The registry the toolbox asks: which MCP tools are offered now, and how
//! to call one.
//!
//! It reads each server's latest state from its supervisor's `watch`
//! channel — a clone of an `Arc`, no actor round trip — so the tool list can
//! be fetched for every model call, and calls go straight to the server's
//! `rmcp` peer, many at once if the model asks.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Actor;
use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};
use rustix::process::{Signal, WaitOptions};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::connect::{signal_group, ProcessSlot};
use super::state::{McpChange, ServerState};
use super::supervisor::Supervisor;
use super::{content, names, McpServerConfig, McpServerInfo, McpState};
use crate::provider::ToolSpec;
use crate::tools::ToolOutcome;

/// What a cancelled call's result ends with: the server was told, but it
/// may have finished the work anyway.
pub const CANCELLED: &str = "[cancelled: abandoned; the server may have completed it]";

/// How long servers get to exit on SIGTERM when the pod stops.
const STOP_GRACE: Duration = Duration::from_secs(2);

struct Server {
    name: String,
    prefix: String,
    timeout: Duration,
    state: watch::Receiver<ServerState>,
    process: ProcessSlot,
}

/// The supervisors of a new registry, not yet started.
pub struct McpSupervisors {
    supervisors: Vec<Supervisor>,
    changes: mpsc::UnboundedReceiver<McpChange>,
}

impl McpSupervisors {
    /// Starts every server (in the current actix system). Each state change
    /// is sent on the returned channel, in order.
    pub fn start(self) -> mpsc::UnboundedReceiver<McpChange> {
        for supervisor in self.supervisors {
            supervisor.start();
        }
        self.changes
    }
}

/// The pod's MCP servers. Cheap to clone; an empty one has no servers.
#[derive(Clone, Default)]
pub struct McpRegistry {
    servers: Arc<Vec<Server>>,
}

impl McpRegistry {
    /// The registry of these servers, all `starting`, and their
    /// supervisors, to be started once the actix system runs.
    pub fn new(
        configs: &BTreeMap<String, McpServerConfig>,
        workspace: &Path,
    ) -> (McpRegistry, McpSupervisors) {
        let (changes, receiver) = mpsc::unbounded_channel();
        let mut supervisors = Vec::with_capacity(configs.len());
        let servers = configs
            .iter()
            .map(|(name, config)| {
                let (state, receiver) = watch::channel(ServerState::starting());
                let process = ProcessSlot::default();
                supervisors.push(Supervisor::new(
                    name.clone(),
                    config.clone(),
                    workspace.to_owned(),
                    state,
                    changes.clone(),
                    process.clone(),
                ));
                Server {
                    name: name.clone(),
                    prefix: names::prefix(name),
                    timeout: Duration::from_secs(config.timeout_s),
                    state: receiver,
                    process,
                }
            })
            .collect();
        let registry = McpRegistry {
            servers: Arc::new(servers),
        };
        let supervisors = McpSupervisors {
            supervisors,
            changes: receiver,
        };
        (registry, supervisors)
    }

    /// Every server, in name order, for the greeting.
    pub fn servers(&self) -> Vec<McpServerInfo> {
        self.servers
            .iter()
            .map(|server| {
                let state = server.state.borrow();
                McpServerInfo {
                    name: server.name.clone(),
                    state: state.state,
                    tools: state.tools.len(),
                    error: state.error.clone(),
                }
            })
            .collect()
    }

    /// The tools of the servers that are ready now.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.servers
            .iter()
            .flat_map(|server| {
                let tools = server.state.borrow().tools.clone();
                tools.iter().map(|t| t.spec.clone()).collect::<Vec<_>>()
            })
            .collect()
    }

    /// Checks a call before anyone is asked about it: the tool must belong
    /// to a ready server that offers it, and its arguments must be an object.
    pub fn precheck(&self, name: &str, arguments: &Value) -> Result<(), ToolOutcome> {
        self.prepare(name, arguments).map(drop)
    }

    /// Calls an `mcp__SERVER__TOOL` tool. Never fails: a server that is not
    /// ready, an unknown tool, a timeout, a broken connection are all
    /// `is_error` results saying so. On `cancel` the call is abandoned at
    /// once and the server is sent `notifications/cancelled` (by `rmcp`,
    /// when the request's future is dropped — which also happens if the
    /// caller drops this future).
    pub async fn call(
        &self,
        name: &str,
        arguments: &Value,
        cancel: CancellationToken,
    ) -> ToolOutcome {
        let (server, peer, params) = match self.prepare(name, arguments) {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        };
        let call = tokio::time::timeout(server.timeout, peer.call_tool(params));
        let oversized = server.state.borrow().oversized.clone();
        let oversized = async move {
            match oversized {
                Some(notify) => notify.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = call => match result {
                Ok(Ok(result)) => content::flatten(&result),
                Ok(Err(e)) => ToolOutcome::error(format!(
                    "MCP server {} did not answer the call: {e}",
                    server.name
                )),
                Err(_) => ToolOutcome::error(format!(
                    "MCP server {} did not answer within {} s (timeout_s); the call was cancelled",
                    server.name,
                    server.timeout.as_secs()
                )),
            },
            _ = cancel.cancelled() => ToolOutcome::error(CANCELLED),
            () = oversized => ToolOutcome::error(format!(
                "MCP server {} sent a reply larger than {} MiB, which the pod cannot take; the \
                 call was abandoned (the server may have completed it). Ask the tool for less \
                 at a time",
                server.name,
                super::connect::MAX_MESSAGE_BYTES >> 20
            )),
        }
    }

    /// The server, its connection and the request for a call, or the error
    /// result that answers it.
    fn prepare(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Result<(&Server, Peer<RoleClient>, CallToolRequestParams), ToolOutcome> {
        let Some(server) = self.server_of(name) else {
            return Err(ToolOutcome::error(format!(
                "unknown tool {name:?}: no configured MCP server offers it"
            )));
        };
        let state = server.state.borrow().clone();
        let peer = match (&state.peer, state.state) {
            (Some(peer), McpState::Ready) => peer.clone(),
            (_, McpState::Failed) => {
                return Err(ToolOutcome::error(format!(
                    "MCP server {} is failed: {}",
                    server.name,
                    state.error.as_deref().unwrap_or("no reason given")
                )))
            }
            _ => {
                return Err(ToolOutcome::error(format!(
                    "MCP server {} is starting; its tools can be called once it is ready",
                    server.name
                )))
            }
        };
        let Some(tool) = state.tools.iter().find(|t| t.spec.name == name) else {
            let known: Vec<&str> = state.tools.iter().map(|t| t.spec.name.as_str()).collect();
            return Err(ToolOutcome::error(format!(
                "MCP server {} has no tool {name:?}; its tools are: {}",
                server.name,
                known.join(", ")
            )));
        };
        let params = CallToolRequestParams::new(tool.server_tool.clone());
        let params = match arguments {
            Value::Object(map) => params.with_arguments(map.clone()),
            Value::Null => params,
            other => {
                return Err(ToolOutcome::error(format!(
                    "invalid arguments for {name}: expected a JSON object, got {other}"
                )))
            }
        };
        Ok((server, peer, params))
    }

    /// The server a tool name belongs to: the one offering it, else the one
    /// whose prefix it has (a server that is not ready offers nothing).
    fn server_of(&self, name: &str) -> Option<&Server> {
        let offering = self.servers.iter().find(|server| {
            let state = server.state.borrow();
            state.tools.iter().any(|t| t.spec.name == name)
        });
        offering.or_else(|| {
            self.servers
                .iter()
                .filter(|s| name.starts_with(&s.prefix))
                .max_by_key(|s| s.prefix.len())
        })
    }

    /// The pids of the server processes running now: tool processes the
    /// pod keeps on purpose, which a rewind's clean-up spares.
    pub fn pids(&self) -> Vec<u32> {
        self.servers
            .iter()
            .filter_map(|s| s.process.get())
            .collect()
    }

    /// Ends every server process the supervisors left, for when the pod
    /// stops (its actors are gone by then, their clean-up not guaranteed):
    /// SIGTERM to each process group, up to [`STOP_GRACE`] for them to exit,
    /// then SIGKILL to the groups (children a server left behind included).
    pub fn shutdown(&self) {
        let pids: Vec<u32> = self
            .servers
            .iter()
            .filter_map(|s| s.process.take())
            .collect();
        for pid in &pids {
            signal_group(*pid, Signal::Term);
        }
        let deadline = Instant::now() + STOP_GRACE;
        let mut waiting = pids.clone();
        while !waiting.is_empty() && Instant::now() < deadline {
            waiting.retain(|pid| !exited(*pid));
            if !waiting.is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for pid in &pids {
            signal_group(*pid, Signal::Kill);
        }
    }
}

/// Reaps the server process if it has exited; true if it is gone.
fn exited(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return true;
    };
    !matches!(
        rustix::process::waitpid(Some(pid), WaitOptions::NOHANG),
        Ok(None)
    )
}

/// How the toolbox reaches the MCP servers' tools (it does not name this
/// module: see `tools::ExternalTools`).
impl crate::tools::ExternalTools for McpRegistry {
    fn servers(&self) -> Vec<McpServerInfo> {
        McpRegistry::servers(self)
    }

    fn specs(&self) -> Vec<ToolSpec> {
        McpRegistry::specs(self)
    }

    fn precheck(&self, name: &str, arguments: &Value) -> Result<(), ToolOutcome> {
        McpRegistry::precheck(self, name, arguments)
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a Value,
        cancel: CancellationToken,
    ) -> futures::future::BoxFuture<'a, ToolOutcome> {
        Box::pin(McpRegistry::call(self, name, arguments, cancel))
    }

    fn pids(&self) -> Vec<u32> {
        McpRegistry::pids(self)
    }
}
