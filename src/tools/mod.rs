//! The tools the model can call, all confined to the workspace.
//!
//! Each family lives in its own module ([`fs`], [`search`], [`bash`], …)
//! and exposes, per tool, its definition (a [`registry::ToolDef`]: name,
//! spec, effect, summary, argument struct) and a function taking typed
//! arguments; [`registry::TOOLS`] lists the definitions. This module owns
//! what the tools share: argument parsing, mapping workspace escapes to
//! errors the model reads, and the output cap, which is applied here to
//! every outcome so no tool can forget it.

mod bash;
mod cap;
pub mod delegation;
mod external;
pub mod fetch;
mod fs;
pub mod jobs;
pub mod plan;
pub mod process;
pub mod reaper;
pub mod registry;
mod sandbox;
mod search;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::provider::ToolSpec;
use crate::workspace::{Access, OpenError, Opened, Workspace};

pub(crate) use bash::{confined_command, tool_command, ProcessGroup};
pub(crate) use cap::floor_char_boundary;
pub use cap::{cap, CapBuffer};
pub use external::ExternalTools;
pub(crate) use fs::looks_binary;
pub use fs::{EDIT_FILE, MAX_EDIT_BYTES};
pub use sandbox::{Rules, Sandbox, SandboxGate, SandboxPolicy, Switch};

/// Names of MCP tools start with this; no built-in tool's does.
const MCP_PREFIX: &str = "mcp__";

/// Limits every tool call obeys.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    pub bash_timeout: Duration,
    /// Output longer than this is cut to its head and tail, with a marker.
    pub output_cap_bytes: usize,
    /// How `bash` commands are confined (and whether file edits are allowed).
    pub sandbox: SandboxPolicy,
    /// Background jobs that may run at once (`--max-jobs`).
    pub max_jobs: usize,
    /// `--fetch-private`: `web_fetch` may reach this machine and private networks.
    pub fetch_private: bool,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            bash_timeout: Duration::from_secs(120),
            output_cap_bytes: 32 * 1024,
            sandbox: SandboxPolicy::default(),
            max_jobs: 8,
            fetch_private: false,
        }
    }
}

/// Where a running tool's output goes as it is produced.
pub type OutputSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// The last line of a command killed because its turn was cancelled.
pub const KILLED: &str = "[cancelled: the command was killed]";

/// What a tool call produced, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub output: String,
    pub is_error: bool,
}

impl ToolOutcome {
    pub fn ok(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            is_error: false,
        }
    }

    pub fn error(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            is_error: true,
        }
    }
}

pub struct Toolbox {
    workspace: Workspace,
    limits: ToolLimits,
    sandbox: Sandbox,
    /// The MCP servers' tools (`mcp__SERVER__TOOL`), if any are configured.
    mcp: Option<Arc<dyn ExternalTools>>,
    /// Background jobs (`bash` with `background: true`).
    jobs: jobs::Jobs,
}

impl Toolbox {
    /// Also measures what this kernel enforces of the sandbox policy, once.
    pub fn new(workspace: Workspace, limits: ToolLimits) -> Self {
        let sandbox = Sandbox::new(limits.sandbox, workspace.root());
        let jobs = jobs::Jobs::new(None, limits.max_jobs, None);
        Self {
            workspace,
            limits,
            sandbox,
            mcp: None,
            jobs,
        }
    }

    /// Uses this job registry (recorded in the pod's `.jobs` file, telling
    /// the worker of each start and end) instead of an unrecorded one.
    pub fn with_jobs(mut self, jobs: jobs::Jobs) -> Self {
        self.jobs = jobs;
        self
    }

    /// The limits every call obeys.
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// A toolbox for a child pod: the same workspace, limits, sandbox (as
    /// measured once) and MCP servers, with the child's own job registry.
    pub fn for_child(&self, jobs: jobs::Jobs) -> Self {
        Self {
            workspace: self.workspace.clone(),
            limits: self.limits.clone(),
            sandbox: self.sandbox.clone(),
            mcp: self.mcp.clone(),
            jobs,
        }
    }

    /// This toolbox working elsewhere: a child pod's git worktree, with
    /// the sandbox confined to it ([`Sandbox::confined_to`]).
    pub fn placed(mut self, workspace: Workspace, sandbox: Sandbox) -> Self {
        self.workspace = workspace;
        self.sandbox = sandbox;
        self
    }

    /// The MCP servers and their state now (none when none are configured).
    pub fn mcp_servers(&self) -> Vec<crate::protocol::McpServerInfo> {
        self.mcp
            .as_ref()
            .map(|mcp| mcp.servers())
            .unwrap_or_default()
    }

    /// The background jobs.
    pub fn jobs(&self) -> &jobs::Jobs {
        &self.jobs
    }

    /// Also offers the tools of these MCP servers.
    pub fn with_mcp(mut self, registry: impl ExternalTools + 'static) -> Self {
        self.mcp = Some(Arc::new(registry));
        self
    }

    /// The pids of the MCP servers running now.
    pub fn mcp_server_pids(&self) -> Vec<u32> {
        self.mcp.as_ref().map(|mcp| mcp.pids()).unwrap_or_default()
    }

    /// The MCP registry, for a name that is an MCP tool's.
    fn mcp_for(&self, name: &str) -> Option<&dyn ExternalTools> {
        self.mcp.as_deref().filter(|_| name.starts_with(MCP_PREFIX))
    }

    /// The `bash` sandbox: what was asked for and what is enforced.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The tools offered to the model, with JSON Schemas of their arguments:
    /// the built-in ones, then those of the MCP servers ready now. MCP
    /// servers come and go, so ask for every model call (it is cheap: no
    /// I/O, no actor round trip).
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = registry::TOOLS
            .iter()
            .filter(|def| def.runner == registry::Runner::Toolbox)
            .map(|def| (def.spec)(&self.limits))
            .collect();
        if let Some(mcp) = &self.mcp {
            specs.extend(mcp.specs());
        }
        specs
    }

    /// Checks a call before anyone is asked about it: an unknown tool,
    /// arguments that do not fit the tool's schema, or a path outside the
    /// workspace get an error result without asking.
    pub fn precheck(&self, name: &str, arguments: &Value) -> Result<(), ToolOutcome> {
        if let Some(mcp) = self.mcp_for(name) {
            return mcp.precheck(name, arguments);
        }
        let def = registry::lookup(name).filter(|def| def.runner == registry::Runner::Toolbox);
        match def {
            None => Err(self.unknown(name)),
            Some(def) if def.facts.name == fetch::WEB_FETCH => {
                let args = parse_args::<fetch::FetchArgs>(name, arguments)?;
                if !self.sandbox.info().network {
                    return Err(ToolOutcome::error(
                        "web_fetch is off: the pod runs with --sandbox-network off, which \
                         allows no network access. Tell the user; they can restart the pod \
                         with --sandbox-network on.",
                    ));
                }
                fetch::check_url(&args.url)
                    .map(drop)
                    .map_err(|why| ToolOutcome::error(format!("web_fetch refused: {why}")))
            }
            Some(def) => (def.args.check)(name, arguments),
        }?;
        match arguments.get("path").and_then(Value::as_str) {
            Some(path) => resolve(&self.workspace, path).map(drop),
            None => Ok(()),
        }
    }

    fn unknown(&self, name: &str) -> ToolOutcome {
        ToolOutcome::error(format!(
            "unknown tool {name:?}; the available tools are: {}",
            self.specs()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Runs one tool call. Never panics on what the model sends: unknown
    /// tools, bad arguments and refused paths are all `is_error` outcomes.
    /// Output a tool produces while it runs (`bash`'s) goes to `output` as
    /// it comes. A cancelled call returns what it did so far, ending with
    /// [`KILLED`] when a command was killed. The output is capped to
    /// [`ToolLimits::output_cap_bytes`].
    pub async fn call(
        &self,
        name: &str,
        arguments: &Value,
        cancel: CancellationToken,
        output: OutputSink,
    ) -> ToolOutcome {
        if let Some(mcp) = self.mcp_for(name) {
            let outcome = mcp.call(name, arguments, cancel).await;
            return self.capped(outcome);
        }
        let def = registry::lookup(name).filter(|def| def.runner == registry::Runner::Toolbox);
        let outcome = match def.map(|def| (def.facts.effect, def.run)) {
            Some((registry::Effect::WritesFile, _))
                if !self.sandbox.policy().allows_file_edits() =>
            {
                ToolOutcome::error(format!(
                    "{name} refused: the pod runs with --sandbox read-only, which allows no file \
                     changes. Tell the user; they can restart the pod with --sandbox \
                     workspace-write to allow edits in the workspace."
                ))
            }
            Some((_, registry::Run::Blocking(run))) => {
                self.blocking(name, arguments, cancel, run).await
            }
            _ => self.call_own(name, arguments, cancel, output).await,
        };
        self.capped(outcome)
    }

    /// A call of a tool that runs by code of its own ([`registry::Run::Own`]).
    async fn call_own(
        &self,
        name: &str,
        arguments: &Value,
        cancel: CancellationToken,
        output: OutputSink,
    ) -> ToolOutcome {
        match name {
            bash::BASH => match parse_args::<bash::BashArgs>(name, arguments) {
                Ok(args) if args.background => {
                    self.jobs
                        .start(&self.workspace, &self.sandbox, &args.command)
                }
                Ok(args) => {
                    let sandbox = &self.sandbox;
                    bash::run(&self.workspace, &self.limits, sandbox, args, cancel, output).await
                }
                Err(e) => e,
            },
            jobs::JOB_OUTPUT => match parse_args::<jobs::JobArgs>(name, arguments) {
                Ok(args) => self.jobs.output(args.job),
                Err(e) => e,
            },
            jobs::JOB_KILL => match parse_args::<jobs::JobArgs>(name, arguments) {
                Ok(args) => self.jobs.kill_tool(args.job),
                Err(e) => e,
            },
            plan::UPDATE_PLAN => match parse_args::<plan::PlanArgs>(name, arguments) {
                Ok(args) => plan::update(&args),
                Err(e) => e,
            },
            fetch::WEB_FETCH => match parse_args::<fetch::FetchArgs>(name, arguments) {
                Ok(args) => {
                    let policy = fetch::FetchPolicy {
                        allow_private: self.limits.fetch_private,
                    };
                    fetch::run(args, policy, cancel).await
                }
                Err(e) => e,
            },
            _ => self.unknown(name),
        }
    }

    fn capped(&self, outcome: ToolOutcome) -> ToolOutcome {
        ToolOutcome {
            output: cap(&outcome.output, self.limits.output_cap_bytes),
            is_error: outcome.is_error,
        }
    }

    async fn blocking(
        &self,
        name: &str,
        arguments: &Value,
        cancel: CancellationToken,
        run: registry::BlockingRun,
    ) -> ToolOutcome {
        let arguments = arguments.clone();
        let workspace = self.workspace.clone();
        let limits = self.limits.clone();
        tokio::task::spawn_blocking(move || run(&workspace, &arguments, &limits, &cancel))
            .await
            .unwrap_or_else(|e| ToolOutcome::error(format!("{name} failed: {e}")))
    }
}

/// Parses a tool's arguments; a call with no arguments at all counts as `{}`
/// so tools whose arguments are all optional accept it.
pub(crate) fn parse_args<A: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
) -> Result<A, ToolOutcome> {
    let parsed = if arguments.is_null() {
        serde_json::from_value(Value::Object(Default::default()))
    } else {
        A::deserialize(arguments)
    };
    parsed.map_err(|e| ToolOutcome::error(format!("invalid arguments for {tool}: {e}")))
}

/// [`Workspace::resolve`], worded for the model.
fn resolve(workspace: &Workspace, path: &str) -> Result<PathBuf, ToolOutcome> {
    workspace.resolve(path).map_err(|e| scope_refusal(&e))
}

fn scope_refusal(e: &crate::workspace::ScopeError) -> ToolOutcome {
    ToolOutcome::error(format!(
        "path refused: {e}. Paths are relative to the workspace root and must stay inside it."
    ))
}

/// [`Workspace::open`], worded for the model: `cannot {action} {path}: …`.
fn open(
    workspace: &Workspace,
    path: &str,
    access: Access,
    action: &str,
) -> Result<Opened, ToolOutcome> {
    workspace
        .open(path, access)
        .map_err(|e| open_refusal(path, action, e))
}

fn open_refusal(path: &str, action: &str, e: OpenError) -> ToolOutcome {
    match e {
        OpenError::Scope(e) => scope_refusal(&e),
        e => ToolOutcome::error(format!("cannot {action} {path}: {e}")),
    }
}
