//! The delegation tools' definitions — `spawn_agent`, `wait_agents`,
//! `message_agent`, `read_agent` — and their arguments (`docs/agents.md`).
//!
//! Their work needs the pod (its children, its log), so it lives in
//! `pod/agent_tools.rs`; what a tool *is* lives here, beside the others,
//! because `tools/` must not depend on `pod/`. They are
//! [`Effect::Internal`]: they run unasked in every mode (a child's own
//! calls are decided under the same policy, and its budget caps its cost),
//! and a deny rule still turns each off.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::registry::{Args, Run, Runner, ToolDef};
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;

pub const SPAWN_AGENT: &str = builtin::SPAWN_AGENT.name;
pub const WAIT_AGENTS: &str = builtin::WAIT_AGENTS.name;
pub const MESSAGE_AGENT: &str = builtin::MESSAGE_AGENT.name;
pub const READ_AGENT: &str = builtin::READ_AGENT.name;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    pub task: String,
    pub name: Option<String>,
    pub model: Option<String>,
    pub wait: Option<bool>,
    pub max_tokens: Option<u64>,
    pub worktree: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    pub names: Vec<String>,
    pub timeout_s: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageArgs {
    pub name: String,
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    pub name: String,
    pub from_seq: Option<u64>,
    pub max_bytes: Option<usize>,
}

pub const SPAWN_AGENT_TOOL: ToolDef = ToolDef {
    facts: builtin::SPAWN_AGENT,
    spec: |_| spawn_spec(),
    args: Args::of::<SpawnArgs>(),
    runner: Runner::Delegation,
    run: Run::Own,
};

pub const WAIT_AGENTS_TOOL: ToolDef = ToolDef {
    facts: builtin::WAIT_AGENTS,
    spec: |_| wait_spec(),
    args: Args::of::<WaitArgs>(),
    runner: Runner::Delegation,
    run: Run::Own,
};

pub const MESSAGE_AGENT_TOOL: ToolDef = ToolDef {
    facts: builtin::MESSAGE_AGENT,
    spec: |_| message_spec(),
    args: Args::of::<MessageArgs>(),
    runner: Runner::Delegation,
    run: Run::Own,
};

pub const READ_AGENT_TOOL: ToolDef = ToolDef {
    facts: builtin::READ_AGENT,
    spec: |_| read_spec(),
    args: Args::of::<ReadArgs>(),
    runner: Runner::Delegation,
    run: Run::Own,
};

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

fn spawn_spec() -> ToolSpec {
    spec(
        SPAWN_AGENT,
        "Start a child agent (a whole pod with its own log, which the user can watch and \
         steer) on a task, in this workspace. With wait (default true) the call returns \
         when the child's turn ends, with its final answer; with wait false it returns at \
         once and the child works in the background (use wait_agents). Give each child a \
         self-contained task.",
        json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the child should do, on its own."},
                "name": {"type": "string", "description": "A short slug: a-z, 0-9, -."},
                "model": {"type": "string", "description": "A model of the current provider."},
                "wait": {"type": "boolean", "description": "Wait for the child's turn to end (default true)."},
                "max_tokens": {"type": "integer", "minimum": 1, "description": "The child's token budget."},
                "worktree": {"type": "boolean", "description": "Work in a git worktree of its own, on branch pod/<its name> (default false): it can write only there, and the result names the branch."}
            },
            "required": ["task"]
        }),
    )
}

fn wait_spec() -> ToolSpec {
    spec(
        WAIT_AGENTS,
        "Wait until every named child agent is idle; returns each one's last turn end and final \
         text.",
        json!({
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "integer", "minimum": 1, "description": "Default 600."}
            },
            "required": ["names"]
        }),
    )
}

fn message_spec() -> ToolSpec {
    spec(
        MESSAGE_AGENT,
        "Send a follow-up or a correction to one of your child agents, as a new run.",
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
            "required": ["name", "text"]
        }),
    )
}

fn read_spec() -> ToolSpec {
    spec(
        READ_AGENT,
        "Read what any pod of this workspace (a child, the parent, a sibling) has done: its \
         current session as a compact transcript, from from_seq on.",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "from_seq": {"type": "integer", "minimum": 0},
                "max_bytes": {"type": "integer", "minimum": 256, "description": "Default 16384."}
            },
            "required": ["name"]
        }),
    )
}
