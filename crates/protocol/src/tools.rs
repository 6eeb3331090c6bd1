//! What a client may know of the built-in tools: each one's name, what a
//! call of it does to the user's world ([`Effect`]) and the argument a
//! person recognises a call by ([`Summary`]). Pure data, so that a client
//! shows a call — its summary line, an edit's diff, a command's output —
//! without the server's code; the server's tool registry
//! (`tools/registry.rs`) is built on this table, each tool's definition
//! naming its [`ToolFacts`] here, and a test there keeps the two lists
//! equal. A name that is not here — an MCP server's tool, or a name the
//! model made up — gets [`Effect::Unknown`].

use serde_json::Value;

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
    /// This string argument, a URL: shown as the fetch requests it
    /// ([`shown_url`]), as its approval shows it; as written when it does
    /// not parse.
    Url(&'static str),
    /// A search: its `pattern`, then ` in PATH` when it names a directory
    /// other than the root.
    Search,
    /// The arguments as JSON: no one of them says what the call does.
    Arguments,
}

/// What a client may know of one built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFacts {
    pub name: &'static str,
    pub effect: Effect,
    pub summary: Summary,
}

const fn facts(name: &'static str, effect: Effect, summary: Summary) -> ToolFacts {
    ToolFacts {
        name,
        effect,
        summary,
    }
}

const PATH: Summary = Summary::Arg("path");
const READS: Effect = Effect::ReadsFiles {
    path_required: false,
};

pub const READ_FILE: ToolFacts = facts(
    "read_file",
    Effect::ReadsFiles {
        path_required: true,
    },
    PATH,
);
pub const LIST_DIR: ToolFacts = facts("list_dir", READS, PATH);
pub const GLOB: ToolFacts = facts("glob", READS, Summary::Search);
pub const GREP: ToolFacts = facts("grep", READS, Summary::Search);
pub const WRITE_FILE: ToolFacts = facts("write_file", Effect::WritesFile, PATH);
pub const EDIT_FILE: ToolFacts = facts("edit_file", Effect::WritesFile, PATH);
pub const BASH: ToolFacts = facts("bash", Effect::RunsCommands, Summary::Arg("command"));
pub const JOB_OUTPUT: ToolFacts = facts("job_output", Effect::Internal, Summary::Arguments);
pub const JOB_KILL: ToolFacts = facts("job_kill", Effect::Internal, Summary::Arguments);
pub const UPDATE_PLAN: ToolFacts = facts("update_plan", Effect::Internal, Summary::Arguments);
pub const WEB_FETCH: ToolFacts = facts("web_fetch", Effect::Network, Summary::Url("url"));
pub const SPAWN_AGENT: ToolFacts = facts("spawn_agent", Effect::Internal, Summary::Arg("task"));
pub const WAIT_AGENTS: ToolFacts = facts("wait_agents", Effect::Internal, Summary::Arguments);
pub const MESSAGE_AGENT: ToolFacts = facts("message_agent", Effect::Internal, Summary::Arg("name"));
pub const READ_AGENT: ToolFacts = facts("read_agent", Effect::Internal, Summary::Arg("name"));

/// Every built-in tool, in the order the model is offered them.
pub const BUILTIN: &[ToolFacts] = &[
    READ_FILE,
    LIST_DIR,
    GLOB,
    GREP,
    WRITE_FILE,
    EDIT_FILE,
    BASH,
    JOB_OUTPUT,
    JOB_KILL,
    UPDATE_PLAN,
    WEB_FETCH,
    SPAWN_AGENT,
    WAIT_AGENTS,
    MESSAGE_AGENT,
    READ_AGENT,
];

/// The built-in tool called `name`, if there is one.
pub fn lookup(name: &str) -> Option<&'static ToolFacts> {
    BUILTIN.iter().find(|facts| facts.name == name)
}

/// What a call of `name` may do: [`Effect::Unknown`] for anything that is
/// not a built-in tool.
pub fn effect(name: &str) -> Effect {
    lookup(name).map_or(Effect::Unknown, |facts| facts.effect)
}

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
    match lookup(name).map(|facts| facts.summary) {
        Some(Summary::Arg(key)) => field(key).map(str::to_owned),
        Some(Summary::Url(key)) => field(key).map(shown_url),
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

/// The URL a `web_fetch` of `raw` requests: the one parse that the fetch,
/// its approval and every client's line use, so that what a person
/// approves is what is fetched (a model can write a URL many ways).
pub fn requested_url(raw: &str) -> Result<url::Url, url::ParseError> {
    url::Url::parse(raw)
}

/// [`requested_url`] as text, or `raw` as written when it does not parse.
pub fn shown_url(raw: &str) -> String {
    requested_url(raw).map_or_else(|_| raw.to_owned(), String::from)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_call_is_summarised_by_its_defining_argument() {
        let cases = [
            (
                "bash",
                json!({"command": "cargo test\necho done"}),
                Some("cargo test\necho done"),
            ),
            (
                "read_file",
                json!({"path": "src/main.rs", "limit": 3}),
                Some("src/main.rs"),
            ),
            (
                "grep",
                json!({"pattern": "TODO", "path": "src"}),
                Some("TODO in src"),
            ),
            (
                "glob",
                json!({"pattern": "*.rs", "path": "."}),
                Some("*.rs"),
            ),
            (
                "web_fetch",
                json!({"url": "https://docs.rs/"}),
                Some("https://docs.rs/"),
            ),
            (
                "spawn_agent",
                json!({"task": "run the tests", "name": "t"}),
                Some("run the tests"),
            ),
            ("update_plan", json!({"items": []}), None),
            // Another tool's arguments are guessed at by name, then the first string.
            (
                "mcp__git__log",
                json!({"limit": 3, "branch": "main"}),
                Some("main"),
            ),
            (
                "mcp__db__q",
                json!({"query": "select 1", "db": "x"}),
                Some("select 1"),
            ),
            ("mcp__x__y", json!({"n": 1}), None),
        ];
        for (name, arguments, want) in cases {
            assert_eq!(summary(name, &arguments).as_deref(), want, "{name}");
        }
        assert_eq!(
            or_arguments("update_plan", &json!({"items": []})),
            r#"{"items":[]}"#
        );
        assert_eq!(or_arguments("list_dir", &json!({})), "");
        assert_eq!(or_arguments("list_dir", &Value::Null), "");
    }

    #[test]
    fn one_line_cuts_and_says_what_it_left_out() {
        assert_eq!(one_line("  ls -la  ", 10), "ls -la");
        assert_eq!(one_line("echo a\necho b", 10), "echo a …");
        assert_eq!(one_line("abcdefghijkl", 5), "abcde…");
        assert_eq!(one_line("abcdefghijkl\nmore", 5), "abcde…");
    }
}
