//! The `Supervisor` actor: keeps one MCP server running.
//!
//! `starting` → `ready` (tools listed) or `failed` (the error and the tail
//! of the server's stderr). A server that exits is started again after a
//! backoff that doubles from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`] and starts
//! over once a server has stayed up for [`STABLE_AFTER`]; a server that
//! failed keeps being retried on the same schedule, quietly, so one that
//! needed a network or a login comes up once it can. Every state is
//! published on the server's `watch` channel, and each change a user should
//! hear of is sent as an [`McpChange`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rmcp::service::{QuitReason, RunningServiceCancellationToken};
use tokio::sync::{mpsc, watch};

use super::connect::{self, ProcessSlot, Started, StderrTail};
use super::state::{McpChange, McpTool, ServerState};
use super::{McpServerConfig, McpServerInfo, McpState};
use crate::protocol::Level;
use crate::provider::ToolSpec;

pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(500);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server up this long has recovered: its next restart is quick again.
const STABLE_AFTER: Duration = Duration::from_secs(30);

pub(super) struct Supervisor {
    pub name: String,
    pub config: McpServerConfig,
    pub workspace: PathBuf,
    pub state: watch::Sender<ServerState>,
    pub changes: mpsc::UnboundedSender<McpChange>,
    pub process: ProcessSlot,
    pub stderr_tail: StderrTail,
    backoff: Duration,
    /// Bumped on every start, so news from an earlier process is ignored.
    generation: u64,
    /// The running service's stop switch and when it became ready.
    running: Option<(RunningServiceCancellationToken, Instant)>,
}

/// `tools/list_changed` from the server of this generation.
#[derive(Message)]
#[rtype(result = "()")]
struct ToolsChanged(u64);

impl Supervisor {
    pub fn new(
        name: String,
        config: McpServerConfig,
        workspace: PathBuf,
        state: watch::Sender<ServerState>,
        changes: mpsc::UnboundedSender<McpChange>,
        process: ProcessSlot,
    ) -> Self {
        Self {
            name,
            config,
            workspace,
            state,
            changes,
            process,
            stderr_tail: StderrTail::default(),
            backoff: FIRST_BACKOFF,
            generation: 0,
            running: None,
        }
    }

    fn attempt(&mut self, ctx: &mut Context<Self>) {
        self.generation += 1;
        let generation = self.generation;
        let (tools_changed, changed) = mpsc::unbounded_channel();
        let config = self.config.clone();
        let workspace = self.workspace.clone();
        let process = self.process.clone();
        let tail = self.stderr_tail.clone();
        async move { connect::start(&config, &workspace, &process, &tail, tools_changed).await }
            .into_actor(self)
            .map(move |result, act, ctx| match result {
                Ok(started) => act.came_up(generation, started, changed, ctx),
                Err(error) => act.failed(error, ctx),
            })
            .spawn(ctx);
    }

    fn came_up(
        &mut self,
        generation: u64,
        started: Started,
        mut changed: mpsc::UnboundedReceiver<()>,
        ctx: &mut Context<Self>,
    ) {
        let Started {
            service,
            child,
            pid,
            tools,
            oversized,
        } = started;
        let peer = service.peer().clone();
        self.running = Some((service.cancellation_token(), Instant::now()));
        let tools = self.tools(tools);
        let count = tools.len();
        self.publish(
            ServerState {
                state: McpState::Ready,
                error: None,
                tools: Arc::new(tools),
                peer: Some(peer),
                oversized: Some(oversized),
            },
            Level::Info,
            Some(format!("MCP server {} is ready ({count} tools)", self.name)),
        );
        // Dropping the service (when the process is seen to exit first)
        // closes the connection.
        async move {
            // The process lives as long as its connection (it is killed
            // when this is dropped).
            let _child = child;
            tokio::select! {
                quit = service.waiting() => Some(quit),
                () = connect::process_exit(pid) => None,
            }
        }
        .into_actor(self)
        .map(move |quit, act, ctx| act.exited(generation, quit, ctx))
        .spawn(ctx);
        let me = ctx.address();
        actix::spawn(async move {
            while changed.recv().await.is_some() {
                me.do_send(ToolsChanged(generation));
            }
        });
    }

    fn failed(&mut self, error: String, ctx: &mut Context<Self>) {
        let was_failed = self.state.borrow().state == McpState::Failed;
        let delay = self.next_backoff();
        let message = (!was_failed).then(|| {
            format!(
                "MCP server {} failed: {error} (retrying every {} s at most)",
                self.name,
                MAX_BACKOFF.as_secs()
            )
        });
        self.publish(ServerState::failed(error), Level::Error, message);
        ctx.run_later(delay, |act, ctx| act.attempt(ctx));
    }

    /// The server's process exited (`quit` is `None`) or its connection
    /// ended: clean up what is left of it and start it again after the
    /// backoff.
    fn exited(
        &mut self,
        generation: u64,
        quit: Option<Result<QuitReason, tokio::task::JoinError>>,
        ctx: &mut Context<Self>,
    ) {
        if generation != self.generation {
            return;
        }
        self.process.kill();
        if let Some((_, since)) = self.running.take() {
            if since.elapsed() >= STABLE_AFTER {
                self.backoff = FIRST_BACKOFF;
            }
        }
        let delay = self.next_backoff();
        let why = match quit {
            None | Some(Ok(QuitReason::Closed)) => "exited".to_owned(),
            Some(Ok(reason)) => format!("stopped ({reason:?})"),
            Some(Err(e)) => format!("stopped: {e}"),
        };
        let message = connect::with_stderr(
            format!(
                "MCP server {} {why}; restarting in {:.1} s",
                self.name,
                delay.as_secs_f64()
            ),
            &self.stderr_tail,
        );
        self.publish(ServerState::starting(), Level::Warn, Some(message));
        ctx.run_later(delay, |act, ctx| act.attempt(ctx));
    }

    /// The delay before the next start, doubling the one after it.
    fn next_backoff(&mut self) -> Duration {
        let delay = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        delay
    }

    /// The server's tools under their `mcp__SERVER__TOOL` names. Two tools
    /// whose names differ only in characters a model cannot take would
    /// share one: the first keeps it and the other is left out, with a
    /// warning.
    fn tools(&self, tools: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
        let mut out: Vec<McpTool> = Vec::with_capacity(tools.len());
        for tool in tools {
            let name = super::tool_name(&self.name, &tool.name);
            if out.iter().any(|t| t.spec.name == name) {
                tracing::warn!(
                    "MCP server {}: tool {:?} is left out: its name {name} is taken",
                    self.name,
                    tool.name
                );
                continue;
            }
            out.push(McpTool {
                server_tool: tool.name.to_string(),
                spec: ToolSpec {
                    name,
                    description: tool.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: serde_json::Value::Object((*tool.input_schema).clone()),
                },
            });
        }
        out
    }

    /// Publishes the new state, and tells the pod (greeting and, with a
    /// message, a notification).
    fn publish(&self, state: ServerState, level: Level, message: Option<String>) {
        let info = McpServerInfo {
            name: self.name.clone(),
            state: state.state,
            tools: state.tools.len(),
            error: state.error.clone(),
        };
        self.state.send_replace(state);
        let _ = self.changes.send(McpChange {
            server: info,
            level,
            message,
        });
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.attempt(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some((cancel, _)) = self.running.take() {
            cancel.cancel();
        }
        self.process.kill();
    }
}

impl Handler<ToolsChanged> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ToolsChanged, ctx: &mut Context<Self>) {
        let Some(peer) = self.state.borrow().peer.clone() else {
            return;
        };
        if msg.0 != self.generation {
            return;
        }
        let generation = msg.0;
        async move { peer.list_all_tools().await }
            .into_actor(self)
            .map(move |listed, act, _| {
                if generation != act.generation || act.state.borrow().state != McpState::Ready {
                    return;
                }
                match listed {
                    Ok(tools) => {
                        let tools = act.tools(tools);
                        let mut state = act.state.borrow().clone();
                        state.tools = Arc::new(tools);
                        act.publish(state, Level::Info, None);
                    }
                    Err(e) => tracing::warn!(
                        "MCP server {}: cannot list its changed tools: {e}",
                        act.name
                    ),
                }
            })
            .spawn(ctx);
    }
}
