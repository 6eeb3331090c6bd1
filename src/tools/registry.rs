//! One definition per tool: what the model is told (name, description,
//! argument schema), what a call does to the user's world (its
//! [`Effect`]), and which argument a person recognises a call by
//! ([`Summary`]).
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

/// What a call of a tool may do to the user's world. The approval policy
/// and the checkpoint code branch on this, never on a tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Only reads the workspace, at its `path` argument. Runs unasked in
    /// every mode; `read:` rules judge the path.
    ReadsFiles {
        /// The call must name a path (`read_file`); without one, the others
        /// read the workspace root.
        path_required: bool,
    },
    /// Writes the file its `path` argument names. `write:` rules judge the
    /// path; the turn takes a checkpoint before it runs.
    WritesFile,
    /// Runs a command line (its `command` argument): it may change any
    /// file. `bash:` rules judge the line; the turn takes a checkpoint.
    RunsCommands,
    /// Fetches its `url` argument from the network; `web_fetch:` rules
    /// judge the URL. Changes no file.
    Network,
    /// Changes nothing the user has (the plan the model keeps, its own
    /// background jobs, its child pods, which decide their own calls under
    /// the same policy): runs unasked in every mode.
    Internal,
    /// Not a built-in tool (an MCP server's, or an unknown name): it may do
    /// anything, so it is treated as the riskiest — asked in `ask` and
    /// `edits`, checkpointed before it runs.
    Unknown,
}

impl Effect {
    /// Whether a call may change files, so the turn checkpoints them before
    /// it runs (a rewind can then restore what it did).
    pub fn changes_files(self) -> bool {
        matches!(
            self,
            Effect::WritesFile | Effect::RunsCommands | Effect::Unknown
        )
    }
}

/// The argument a person recognises a call by, in the approval panel, the
/// TUI, `pod send`'s transcript and the web page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summary {
    /// This string argument (the command, the path, …).
    Arg(&'static str),
    /// This string argument, a URL: shown as the fetch would request it
    /// ([`super::fetch::shown_url`]), as its approval shows it; as written
    /// when it does not parse.
    Url(&'static str),
    /// A search: its `pattern`, then ` in PATH` when it names a directory
    /// other than the root.
    Search,
    /// The arguments as JSON: no one of them says what the call does.
    Arguments,
}

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
    pub name: &'static str,
    pub effect: Effect,
    pub summary: Summary,
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
            .field("name", &self.name)
            .field("effect", &self.effect)
            .field("summary", &self.summary)
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
    TOOLS.iter().chain(EXTRA).find(|def| def.name == name)
}

/// Tools only unit tests define (`registry/tests.rs`): none in the binary.
#[cfg(not(test))]
const EXTRA: &[ToolDef] = &[];
#[cfg(test)]
use tests::EXTRA;

/// What a call of `name` may do: [`Effect::Unknown`] for anything that is
/// not a built-in tool.
pub fn effect(name: &str) -> Effect {
    lookup(name).map_or(Effect::Unknown, |def| def.effect)
}

/// The names `bash:LINE` and `web_fetch:URL` rules start with: the tools
/// whose rules have patterns of their own (`docs/approvals.md`).
pub const BASH_RULE: &str = super::bash::BASH;
pub const FETCH_RULE: &str = super::fetch::WEB_FETCH;

/// Arguments that name what an unknown (MCP) tool acts on, most telling
/// first: its schema is not ours, so these are guesses by name.
pub const GUESSED_KEYS: [&str; 7] = ["command", "path", "pattern", "query", "url", "file", "name"];

/// The text a person recognises a call of `name` by — the command, the
/// path, `PATTERN in DIR`, … — whole (callers cut it to their line). For a
/// tool that is not built in: the first of [`GUESSED_KEYS`] it has, else
/// its first string argument. `None` when no argument says it: callers
/// then show the arguments as JSON ([`or_arguments`]).
pub fn summary(name: &str, arguments: &Value) -> Option<String> {
    let object = arguments.as_object()?;
    let field = |key: &str| object.get(key).and_then(Value::as_str);
    match lookup(name).map(|def| def.summary) {
        Some(Summary::Arg(key)) => field(key).map(str::to_owned),
        Some(Summary::Url(key)) => field(key).map(super::fetch::shown_url),
        Some(Summary::Search) => {
            let pattern = field("pattern")?;
            Some(match field("path").filter(|p| !p.is_empty() && *p != ".") {
                Some(path) => format!("{pattern} in {path}"),
                None => pattern.to_owned(),
            })
        }
        Some(Summary::Arguments) => None,
        None => GUESSED_KEYS
            .iter()
            .find_map(|key| field(key))
            .or_else(|| object.values().find_map(Value::as_str))
            .map(str::to_owned),
    }
}

/// [`summary`], or else the arguments as compact JSON (nothing for no
/// arguments at all: `null` or `{}`).
pub fn or_arguments(name: &str, arguments: &Value) -> String {
    if let Some(text) = summary(name, arguments) {
        return text;
    }
    match arguments {
        Value::Null => String::new(),
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    }
}

/// `text` as one line of at most `max` characters: its first line, with
/// `…` where it was cut and ` …` when lines were left out (unless it
/// already ends with `…`).
pub fn one_line(text: &str, max: usize) -> String {
    let trimmed = text.trim();
    let first = trimmed.lines().next().unwrap_or("");
    let mut line = match first.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None => first.to_owned(),
    };
    if first.len() < trimmed.len() && !line.ends_with('…') {
        line.push_str(" …");
    }
    line
}

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
        let value = match def.summary {
            Summary::Arg(key) => format!("{{ arg: '{key}' }}"),
            Summary::Url(key) => format!("{{ arg: '{key}', url: true }}"),
            Summary::Search => "{ search: true }".to_owned(),
            Summary::Arguments => "{ arguments: true }".to_owned(),
        };
        out.push_str(&format!("  {}: {value},\n", def.name));
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
