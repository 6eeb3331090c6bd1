//! One definition per tool: what the model is told (name, description,
//! argument schema), what a call does to the user's world (its
//! [`Effect`]), and which argument a person recognises a call by
//! ([`Summary`]). The last two, with the name, are the protocol's
//! [`ToolFacts`] (`protocol/tools.rs`): clients show calls from that table
//! alone, and a test here keeps [`TOOLS`] and it the same list.
//!
//! Each tool's [`ToolDef`] lives beside its code (`fs.rs`, `bash.rs`, …;
//! the delegation tools, whose work needs the pod, in `delegation.rs`),
//! and [`TOOLS`] is the one list of them. Everything that used to keep its
//! own list of tool names reads this instead: the toolbox's specs and
//! argument checks, the approval policy, the checkpoint before a call that
//! may change files, the approval summary, the TUI, `pod send`'s transcript
//! and the web page's table (`web/js/tools.js`, generated from here). A
//! name that is not here — an MCP server's tool, or a name the model made
//! up — gets [`Effect::Unknown`]: it may change anything, so it takes a
//! checkpoint and is asked about wherever a write would be.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use tokio_util::sync::CancellationToken;

use super::{ToolLimits, ToolOutcome};
use crate::provider::ToolSpec;
use crate::workspace::Workspace;

pub use crate::protocol::tools::{
    one_line, or_arguments, summary, Effect, Summary, ToolFacts, GUESSED_KEYS,
};

/// How a tool's arguments are checked and described: the serde struct its
/// code parses them into.
#[derive(Clone, Copy)]
pub struct Args {
    /// Whether `arguments` parse into the struct (an error the model reads
    /// if not).
    pub check: fn(&str, &Value) -> Result<(), ToolOutcome>,
    /// The struct's JSON Schema as `schemars` derives it: the hand-written
    /// schema the model is sent must agree with it (a test checks).
    pub schema: fn() -> schemars::Schema,
}

impl Args {
    /// The arguments are an `A`.
    pub const fn of<A: DeserializeOwned + JsonSchema>() -> Self {
        Self {
            check: fits::<A>,
            schema: schema_of::<A>,
        }
    }
}

fn schema_of<A: JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(A)
}

fn fits<A: DeserializeOwned>(tool: &str, arguments: &Value) -> Result<(), ToolOutcome> {
    super::parse_args::<A>(tool, arguments).map(drop)
}

/// Who runs a tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// The [`super::Toolbox`]: offered in every pod.
    Toolbox,
    /// The pod itself (`pod/agent_tools.rs`): offered when the pod may
    /// start child pods.
    Delegation,
}

/// A tool's work when it needs only the workspace, the limits and its
/// arguments: run on the blocking pool, so a large grep never stalls the
/// runtime thread driving the session.
pub type BlockingRun = fn(&Workspace, &Value, &ToolLimits, &CancellationToken) -> ToolOutcome;

/// How the [`super::Toolbox`] runs a call.
#[derive(Clone, Copy)]
pub enum Run {
    /// This function, on the blocking pool: such a tool needs no line
    /// anywhere but its definition and [`TOOLS`].
    Blocking(BlockingRun),
    /// Code that needs more (bash's sandbox and jobs, the network, the
    /// pod's children): an arm of `Toolbox::call`, or `pod/agent_tools.rs`
    /// for [`Runner::Delegation`].
    Own,
}

/// `arguments` parsed into the tool's struct and given to `run`, or the
/// error the model reads: how a [`Run::Blocking`] function starts.
pub fn with_args<A: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
    run: impl FnOnce(A) -> ToolOutcome,
) -> ToolOutcome {
    match super::parse_args(tool, arguments) {
        Ok(args) => run(args),
        Err(e) => e,
    }
}

/// Everything about one tool: what the model is told, what a call does to
/// the user's world, how a person recognises it and how it runs.
#[derive(Clone, Copy)]
pub struct ToolDef {
    /// Its name, effect and summarising argument: the protocol's entry for
    /// it ([`crate::protocol::tools`]), which clients read too.
    pub facts: ToolFacts,
    /// What the model is told: description and argument schema (some
    /// descriptions name a limit, such as `bash`'s timeout).
    pub spec: fn(&ToolLimits) -> ToolSpec,
    pub args: Args,
    pub runner: Runner,
    pub run: Run,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("facts", &self.facts)
            .field("runner", &self.runner)
            .finish_non_exhaustive()
    }
}

/// Every built-in tool, in the order the model is offered them.
pub const TOOLS: &[ToolDef] = &[
    super::fs::READ_FILE_TOOL,
    super::fs::LIST_DIR_TOOL,
    super::search::GLOB_TOOL,
    super::search::GREP_TOOL,
    super::fs::WRITE_FILE_TOOL,
    super::fs::EDIT_FILE_TOOL,
    super::bash::BASH_TOOL,
    super::jobs::JOB_OUTPUT_TOOL,
    super::jobs::JOB_KILL_TOOL,
    super::plan::UPDATE_PLAN_TOOL,
    super::fetch::WEB_FETCH_TOOL,
    super::delegation::SPAWN_AGENT_TOOL,
    super::delegation::WAIT_AGENTS_TOOL,
    super::delegation::MESSAGE_AGENT_TOOL,
    super::delegation::READ_AGENT_TOOL,
];

/// The built-in tool called `name`, if there is one.
pub fn lookup(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().chain(EXTRA).find(|def| def.facts.name == name)
}

/// Tools only unit tests define (`registry/tests.rs`): none in the binary.
#[cfg(not(test))]
const EXTRA: &[ToolDef] = &[];
#[cfg(test)]
use tests::EXTRA;

/// What a call of `name` may do: [`Effect::Unknown`] for anything that is
/// not a built-in tool.
pub fn effect(name: &str) -> Effect {
    lookup(name).map_or(Effect::Unknown, |def| def.facts.effect)
}

/// The names `bash:LINE` and `web_fetch:URL` rules start with: the tools
/// whose rules have patterns of their own (`docs/approvals.md`).
pub const BASH_RULE: &str = super::bash::BASH;
pub const FETCH_RULE: &str = super::fetch::WEB_FETCH;

/// The web page's copy of the summary table (`web/js/tools.js`): the page
/// cannot read Rust, so this module's test keeps that file equal to what
/// this renders.
pub fn web_table() -> String {
    let mut out = String::from(
        "// Generated from src/tools/registry.rs (`web_table`); a test there keeps it\n\
         // equal. Do not edit: change the tool's definition and regenerate with\n\
         //   POD_REGENERATE=1 cargo test --lib tools::registry\n\n\
         /** The argument a call of each built-in tool is recognised by. */\n\
         export const SUMMARY = {\n",
    );
    for def in TOOLS {
        let value = match def.facts.summary {
            Summary::Arg(key) => format!("{{ arg: '{key}' }}"),
            Summary::Url(key) => format!("{{ arg: '{key}', url: true }}"),
            Summary::Search => "{ search: true }".to_owned(),
            Summary::Arguments => "{ arguments: true }".to_owned(),
        };
        out.push_str(&format!("  {}: {value},\n", def.facts.name));
    }
    out.push_str(
        "};\n\n/** The arguments that name what another (MCP) tool acts on, most telling first. */\n\
         export const GUESSED_KEYS = [",
    );
    let keys: Vec<String> = GUESSED_KEYS.iter().map(|k| format!("'{k}'")).collect();
    out.push_str(&keys.join(", "));
    out.push_str("];\n");
    out
}

#[cfg(test)]
mod tests;
