//! The command line, as `shared/spec/cli.md` fixes it.
//!
//! Every flag also reads an environment variable (`--data-dir` ↔
//! `POD_DATA_DIR`, …) and the config file (`--config FILE`, else
//! `$XDG_CONFIG_HOME/pod/config.toml`; see [`super::config`]);
//! precedence is flag, then environment, then file, then default. The file's
//! values are installed as clap defaults (see [`with_config_file`]), so clap
//! itself applies that precedence.
//!
//! A switch's variable takes what people write in shells and CI files
//! (`1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`), not only clap's
//! `true`/`false`. A repeatable flag's variable holds one value per line
//! (`POD_ALLOW=$'bash:ls*\nread:**'`): rules and paths may contain commas
//! and spaces, never a newline. The one name that breaks the pattern is
//! `pod approve --session`'s `POD_APPROVE_SESSION`: `POD_SESSION` is
//! `pod serve --session ID`, and an id set for the pod must not turn every
//! approval into a session-wide rule.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::protocol::SandboxMode;
use crate::tools::Switch;

#[derive(Debug, Parser)]
#[command(name = "pod", version, propagate_version = true, about = "A single-binary LLM agent pod.", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(flatten)]
    pub tui: TuiArgs,
    /// Plain `pod`'s flags for the pod it starts: those of `pod serve`.
    #[command(
        flatten,
        next_help_heading = "Without a subcommand: the pod it starts (as `pod serve`)"
    )]
    pub serve: ServeArgs,
    /// Which of `serve`'s flags were typed; filled by [`parse`].
    #[arg(skip)]
    pub given: Given,
    /// Without a subcommand: attach to the pod, starting it when none runs.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The `serve` flags typed on plain `pod`'s command line. Only these are
/// handed to the pod it starts: that pod reads the environment and the
/// config file itself, and clap's defaults must not pass for wishes when
/// plain `pod` compares them with a running pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Given {
    /// Their clap ids (`model`, `base_url`, …), in the order clap lists them.
    pub ids: Vec<String>,
    /// As `pod serve` takes them: `--model=gpt-4o`, `--new-session`, …
    pub argv: Vec<OsString>,
}

impl Given {
    pub fn has(&self, id: &str) -> bool {
        self.ids.iter().any(|given| given == id)
    }
}

/// Parses the command line with the config file's values (`table`) as
/// defaults, and records which `serve` flags plain `pod` was given.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    table: &toml::Table,
) -> Result<Cli, clap::Error> {
    let mut cmd = with_config_file(Cli::command(), table);
    let matches = cmd.try_get_matches_from_mut(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    cli.given = given(&matches);
    // `pod send` starts a pod when none runs, with these flags.
    let starts_one = matches!(matches.subcommand_name(), Some("send" | "acp"));
    if let (Some(id), Some(sub), false) =
        (cli.given.ids.first(), matches.subcommand_name(), starts_one)
    {
        let flag = format!("--{}", id.replace('_', "-"));
        return Err(cmd.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "{flag} belongs to `pod serve` and plain `pod`, not to `pod {sub}`; \
                 to start a pod with it, write `pod serve {flag} …`, `pod {flag} …` or \
                 `pod {flag} … send TEXT`"
            ),
        ));
    }
    // `pod serve`'s own flags typed, for the pod to know which were chosen
    // for this start (a typed `--model` wins over the session's).
    if let Some(("serve", sub)) = matches.subcommand() {
        cli.given = given(sub);
    }
    // `pod acp` takes them after its name too (`pod acp --model …`, as an
    // editor's `args` list reads best): both places are handed on.
    if let Some(("acp", sub)) = matches.subcommand() {
        let after = given(sub);
        cli.given.ids.extend(after.ids);
        cli.given.argv.extend(after.argv);
    }
    Ok(cli)
}

/// The `serve` flags that came from the command line itself.
fn given(matches: &ArgMatches) -> Given {
    let mut given = Given::default();
    for arg in ServeArgs::augment_args(clap::Command::new("serve")).get_arguments() {
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        given.ids.push(id.to_owned());
        if !arg.get_action().takes_values() {
            given.argv.push(format!("--{long}").into());
            continue;
        }
        // `--flag=value`, so that a value starting with `-` stays a value.
        for value in matches
            .get_raw_occurrences(id)
            .into_iter()
            .flatten()
            .flatten()
        {
            let mut flag = OsString::from(format!("--{long}="));
            flag.push(value);
            given.argv.push(flag);
        }
    }
    given
}

/// The TUI's own flags: on plain `pod` and `pod attach` only, the two
/// commands that draw it, so no other subcommand's help offers them.
#[derive(Debug, Clone, Args)]
pub struct TuiArgs {
    /// How the TUI tells you, while its terminal is not focused, that an approval waits or a
    /// turn ended: off, bell, or desktop (a bell and an OSC 9 / OSC 777 notification)
    /// [default: desktop].
    #[arg(long, env = "POD_NOTIFY", value_enum, value_name = "MODE")]
    pub notify: Option<crate::tui::notify::NotifyMode>,
}

impl TuiArgs {
    /// The mode in force: given after `attach`, else before it, else desktop.
    pub fn notify_or(&self, outer: &TuiArgs) -> crate::tui::notify::NotifyMode {
        self.notify.or(outer.notify).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The pod's name: one pod, one socket, one current session per name
    /// [default: derived from the workspace, e.g. `calc-3f2a9c`].
    #[arg(long, global = true, env = "POD_NAME", value_name = "NAME", value_parser = parse_name)]
    pub name: Option<String>,
    /// Where session logs and pod state live [default: $XDG_DATA_HOME/pod].
    #[arg(long, global = true, env = "POD_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The pod's socket [default: $XDG_RUNTIME_DIR/pod/NAME.sock, else
    /// $XDG_STATE_HOME/pod/run/NAME.sock].
    #[arg(long, global = true, env = "POD_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The directory tools and @ file refs work in [default: the current directory].
    #[arg(long, global = true, env = "POD_WORKSPACE", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Read this config file instead of $XDG_CONFIG_HOME/pod/config.toml.
    #[arg(long, global = true, env = "POD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Reach the pod over the network instead of its socket (ws://, wss://, http://,
    /// https://; /v1/ws is added when there is no path). The token comes from
    /// --token-file or the environment variable POD_TOKEN, never from a flag.
    #[arg(long, global = true, env = "POD_URL", value_name = "URL")]
    pub url: Option<String>,
    /// The file holding the device token for --url (`pod token create` makes one).
    #[arg(long, global = true, env = "POD_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Trust this certificate authority (PEM) for --url, besides the system's:
    /// a pod's self-signed certificate.
    #[arg(long, global = true, env = "POD_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

// `Serve` is the big one; a command line is parsed once, so it stays unboxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the pod in the foreground until `shutdown`, SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// The terminal UI. Ctrl+D or /quit detaches; the pod keeps running.
    Attach {
        /// Draw without the alternate screen, so the transcript stays in the
        /// terminal's scrollback.
        #[arg(long, env = "POD_INLINE", value_parser = BoolishValueParser::new())]
        inline: bool,
        #[command(flatten)]
        tui: TuiArgs,
    },
    /// Speak the Agent Client Protocol on stdin/stdout for an editor, as a client of
    /// the workspace's pod (started with the `serve` flags given, before or after
    /// `acp`, when none runs). Logs go to stderr only.
    Acp(Box<ServeArgs>),
    /// Send one message and print the reply as it streams.
    ///
    /// Exit codes: 0 completed; 1 error, max_steps, interrupted or refused;
    /// 2 bad usage; 3 no pod is listening; 4 cancelled; 5 stopped waiting.
    Send(SendArgs),
    /// Run one task to its end in a private pod and exit: for scripts, CI and
    /// benchmark harnesses (docs/headless.md).
    ///
    /// Nothing waits for a person: a call that would ask for approval is denied
    /// (`--approval auto` lets calls run). Exit codes: 0 completed; 1 error,
    /// max_steps, interrupted or refused; 2 bad usage; 3 the private pod could
    /// not start; 4 cancelled; 5 the pod stopped before the run ended;
    /// 6 --timeout or --max-tokens ended it.
    Exec(Box<ExecArgs>),
    /// Re-run a recorded session in a scratch copy of its workspace — the model's replies
    /// from the log, every tool for real — and report drift: tool results that differ.
    ///
    /// The scratch copy is restored from the session's first checkpoint into --workspace DIR
    /// (empty or new), else a temporary directory. Exit codes: 0 no drift; 1 drift;
    /// 2 bad usage, or a session with no checkpoint.
    Replay(Box<ReplayArgs>),
    /// Allow a tool call the pod waits for (the only one when CALL_ID is left out).
    Approve(ApproveArgs),
    /// Deny a tool call the pod waits for (the only one when CALL_ID is left out).
    Deny(DenyArgs),
    /// List the tool calls waiting for approval.
    Pending,
    /// Is the pod up; its state, session and model.
    Status {
        /// Print the pod's greeting and status as JSON.
        #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
        json: bool,
    },
    /// Print a session log readably (the pod's current session by default).
    Log(LogArgs),
    /// List this workspace's sessions (`*` marks the pod's current one; `--all`: every workspace's).
    Sessions {
        /// Print one JSON array of the `list_sessions` objects.
        #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
        json: bool,
        /// Every workspace's sessions, with a workspace column (default: this workspace's).
        #[arg(long, env = "POD_ALL", value_parser = BoolishValueParser::new())]
        all: bool,
    },
    /// Rewind the last turn: its files and the conversation.
    Undo(ForceArgs),
    /// Rewind to just before the user message at SEQ, or files to a checkpoint.
    Rewind(RewindArgs),
    /// Print the unified diff a turn made (default: the last turn that changed files).
    Diff(DiffArgs),
    /// Print each line of FILE with the turn that last changed it.
    Blame {
        /// The file (relative to this directory).
        file: PathBuf,
    },
    /// Stop the pod cleanly.
    Stop,
    /// Hold the turn before its next model call or tool run (`pod resume` goes on).
    Pause,
    /// Let a paused turn go on.
    Resume,
    /// List pods with a live socket.
    List,
    /// List the conversation's allow and deny rules and where each came from;
    /// `pod rules revoke RULE` revokes one a decision added.
    Rules {
        #[command(subcommand)]
        action: Option<RulesAction>,
    },
    /// List the pod's background jobs; `pod jobs kill JOB` kills one.
    Jobs {
        #[command(subcommand)]
        action: Option<JobsAction>,
    },
    /// List this pod's child pods (subagents): name, state, pending approvals, task;
    /// `pod agents rm NAME` removes an idle one (its log stays).
    Agents {
        /// Print the `list_agents` objects as one JSON array.
        #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
        json: bool,
        #[command(subcommand)]
        action: Option<AgentsAction>,
    },
    /// Device tokens for remote clients (over the local socket only).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print a one-time link (valid 10 minutes) that pairs a browser or phone with the pod.
    Url(UrlArgs),
}

#[derive(Debug, Subcommand)]
pub enum RulesAction {
    /// Revoke an allow rule a decision of this conversation added.
    Revoke {
        /// The rule, as `pod rules` prints it (e.g. `bash:git status *`).
        rule: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentsAction {
    /// Stop an idle child pod and forget it; its session log stays (`pod log --name NAME`).
    #[command(alias = "remove")]
    Rm {
        /// The child's full name (`calc-3f2a9c.tests`) or its slug (`tests`), as
        /// `pod agents` lists it.
        #[arg(value_name = "NAME")]
        agent: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// Kill a background job (its whole process group).
    Kill {
        /// The job's id, as `pod jobs` prints it.
        job: u64,
    },
    /// Print what a background job has printed so far, running or ended.
    Output {
        /// The job's id, as `pod jobs` prints it.
        job: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a device token and print it alone on stdout (it is shown only this once).
    Create {
        /// The token may only read: no runs, approvals or other changes.
        #[arg(long, env = "POD_READ_ONLY", value_parser = BoolishValueParser::new())]
        read_only: bool,
        /// A name to tell it by in `pod token list`.
        #[arg(long, env = "POD_LABEL", value_name = "LABEL")]
        label: Option<String>,
    },
    /// List the device tokens (never the tokens themselves).
    List {
        /// Print the `list_tokens` objects as one JSON array.
        #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
        json: bool,
    },
    /// Revoke a device token; its connections are closed.
    Revoke {
        /// The token's id, as `pod token list` shows it.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The task; `-` reads it from stdin (as does giving none when stdin is not a terminal).
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    /// Print JSON lines: the frames of the run's turn as `pod send --json` prints them,
    /// then one `result` line.
    #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
    pub json: bool,
    /// Write every change the run made to the workspace to FILE, as a unified diff
    /// `git apply` takes.
    #[arg(long, env = "POD_EMIT_PATCH", value_name = "FILE")]
    pub emit_patch: Option<PathBuf>,
    /// End the run after SECS seconds: the turn is cancelled (a running tool is killed),
    /// the result says `error`, code `timeout`, and the exit code is 6.
    #[arg(long, env = "POD_TIMEOUT", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// End the run once its model calls have used N tokens (input + output, child pods
    /// included): code `budget`, exit code 6.
    #[arg(long, env = "POD_MAX_TOKENS", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,
    /// The private pod's flags: those of `pod serve`.
    #[command(flatten, next_help_heading = "The private pod (as `pod serve`)")]
    pub serve: ServeArgs,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The recorded session: its id, or a unique prefix of at least 4 characters.
    #[arg(id = "recorded", value_name = "SESSION")]
    pub recorded: String,
    /// Replay the log up to this entry only.
    #[arg(long, env = "POD_UNTIL_SEQ", value_name = "N")]
    pub until_seq: Option<u64>,
    /// Leave the replayed session as the current session of the scratch workspace's pod
    /// (and keep the scratch directory), to go on from it with a live model.
    #[arg(long, env = "POD_FORK", value_parser = BoolishValueParser::new())]
    pub fork: bool,
    /// The replay's pod's flags: those of `pod serve` that shape tools (--sandbox,
    /// --approval, --allow, …); the model is always the recorded replies.
    #[command(flatten, next_help_heading = "The replay's pod (as `pod serve`)")]
    pub serve: ServeArgs,
}

#[derive(Debug, Args)]
pub struct UrlArgs {
    /// The device the link pairs may only read.
    #[arg(long, env = "POD_READ_ONLY", value_parser = BoolishValueParser::new())]
    pub read_only: bool,
    /// Also draw the link as a QR code, for a phone.
    #[arg(long, env = "POD_QR", value_parser = BoolishValueParser::new())]
    pub qr: bool,
    /// The host name the link uses [default: the certificate's first name, else this
    /// machine's name when listening on a wildcard address, else the listen address].
    #[arg(long, env = "POD_HOST", value_name = "NAME")]
    pub host: Option<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// offline | script | openai | anthropic [default: anthropic if ANTHROPIC_API_KEY is set,
    /// else openai if OPENAI_API_KEY or --base-url is set, else offline].
    #[arg(long, env = "POD_PROVIDER")]
    pub provider: Option<crate::provider::ProviderKind>,
    /// The model name [default: the provider's].
    #[arg(long, env = "POD_MODEL")]
    pub model: Option<String>,
    /// The API's base URL (openai: ends with the version, e.g. http://localhost:11434/v1;
    /// anthropic: stops before it).
    #[arg(long, env = "POD_BASE_URL", value_name = "URL", value_parser = parse_base_url)]
    pub base_url: Option<String>,
    /// The script the `script` provider replays (see docs/providers.md).
    #[arg(
        long,
        env = "POD_SCRIPT",
        value_name = "FILE",
        required_if_eq("provider", "script")
    )]
    pub script: Option<PathBuf>,
    /// Start a new session instead of resuming the current one.
    #[arg(long, env = "POD_NEW_SESSION", conflicts_with = "session", value_parser = BoolishValueParser::new())]
    pub new_session: bool,
    /// Start on this session (full id or a unique prefix of at least 4
    /// characters); it becomes the pod's current session.
    #[arg(long, env = "POD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Resume a `--session` that another workspace's pod started, over this workspace.
    #[arg(long, env = "POD_FORCE_SESSION", value_parser = BoolishValueParser::new())]
    pub force: bool,
    /// The model's context window, in tokens.
    #[arg(
        long,
        env = "POD_CONTEXT_WINDOW",
        default_value_t = 128_000,
        value_name = "TOKENS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub context_window: u64,
    /// Compact when the context passes this fraction of the window.
    #[arg(long, env = "POD_COMPACT_AT", default_value_t = 0.8, value_name = "FRACTION",
          value_parser = parse_fraction)]
    pub compact_at: f64,
    /// The output limit of every model call, in tokens (default: the model's
    /// own where known, else 8192). A reply that reaches it ends the turn
    /// with `output_limit`.
    #[arg(long, env = "POD_MAX_OUTPUT_TOKENS", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_output_tokens: Option<u32>,
    /// Seconds a model server may stay silent — before the response headers, or between
    /// two events of a stream — before the call is given up. Raise it for a local model
    /// on a slow machine, which sends nothing while it reads a long prompt.
    #[arg(long, env = "POD_MODEL_IDLE_TIMEOUT", default_value_t = 300, value_name = "SECS",
          value_parser = parse_idle_timeout)]
    pub model_idle_timeout: u64,
    /// Send this `tool_choice` with every call that offers tools: auto |
    /// required | none (not sent unless given; llama-cpp-python needs it).
    #[arg(long, env = "POD_TOOL_CHOICE", value_name = "CHOICE")]
    pub tool_choice: Option<crate::provider::ToolChoice>,
    /// Model calls per turn before it ends with `max_steps`.
    #[arg(long, env = "POD_MAX_STEPS", default_value_t = 50, value_parser = at_least_one())]
    pub max_steps: usize,
    /// The longest frame a client may send.
    #[arg(long, env = "POD_MAX_FRAME_BYTES", default_value_t = 8 * 1024 * 1024,
          value_parser = at_least_one())]
    pub max_frame_bytes: usize,
    /// Bytes that may queue for a slow client before it is disconnected as lagged.
    #[arg(long, env = "POD_MAX_CLIENT_LAG_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_client_lag_bytes: usize,
    /// Seconds a `bash` tool call may run.
    #[arg(
        long,
        env = "POD_BASH_TIMEOUT",
        default_value_t = 120,
        value_name = "SECONDS"
    )]
    pub bash_timeout: u64,
    /// Let web_fetch reach this machine's addresses and private networks (127.0.0.1,
    /// 10.0.0.0/8, 192.168.0.0/16, …), which it refuses by default.
    #[arg(long, env = "POD_FETCH_PRIVATE", value_parser = BoolishValueParser::new())]
    pub fetch_private: bool,
    /// Background jobs (`bash` with `background: true`) that may run at once.
    #[arg(long, env = "POD_MAX_JOBS", default_value_t = 8, value_name = "N")]
    pub max_jobs: usize,
    /// Child pods (subagents) that may run turns at once; 0 offers no agent tools.
    #[arg(long, env = "POD_MAX_AGENTS", default_value_t = 4, value_name = "N")]
    pub max_agents: usize,
    /// How deep child pods may nest: children spawn children only below this depth.
    #[arg(
        long,
        env = "POD_MAX_AGENT_DEPTH",
        default_value_t = 1,
        value_name = "N"
    )]
    pub max_agent_depth: usize,
    /// A child pod's token budget (input + output over its model calls) unless
    /// spawn_agent gives max_tokens.
    #[arg(long, env = "POD_AGENT_MAX_TOKENS", default_value_t = 200_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub agent_max_tokens: u64,
    /// When to ask before a tool call runs: ask | edits | auto | read-only.
    #[arg(long, env = "POD_APPROVAL", default_value = "ask", value_parser = parse_approval)]
    pub approval: crate::protocol::ApprovalMode,
    /// Run calls matching RULE unasked (TOOL:PATTERN, e.g. `bash:cargo test*`,
    /// `write:docs/**`); repeatable.
    #[arg(long, env = "POD_ALLOW", value_name = "RULE", value_parser = parse_rule,
          value_delimiter = '\n')]
    pub allow: Vec<crate::approval::Rule>,
    /// Deny calls matching RULE in every mode; repeatable.
    #[arg(long, env = "POD_DENY", value_name = "RULE", value_parser = parse_rule,
          value_delimiter = '\n')]
    pub deny: Vec<crate::approval::Rule>,
    /// What `bash` commands may write: the workspace and temp dirs, nothing, or anything
    /// (docs/sandbox.md).
    #[arg(long, env = "POD_SANDBOX", value_enum, default_value_t = SandboxMode::WorkspaceWrite,
          value_name = "MODE")]
    pub sandbox: SandboxMode,
    /// Files larger than this are not kept in checkpoints (listed as skipped).
    #[arg(long, env = "POD_CHECKPOINT_MAX_FILE_BYTES", value_name = "BYTES",
          default_value_t = crate::checkpoint::DEFAULT_MAX_FILE_BYTES)]
    pub checkpoint_max_file_bytes: u64,
    /// How large the checkpoint store may grow before the oldest contents no
    /// checkpoint of the current conversation needs are pruned.
    #[arg(long, env = "POD_CHECKPOINT_STORE_BYTES", value_name = "BYTES",
          default_value_t = crate::checkpoint::DEFAULT_STORE_BYTES)]
    pub checkpoint_store_bytes: u64,
    /// The largest image a client may store (`put_blob`, `POST /v1/blobs`) [default: 5 MiB];
    /// given, it raises the frame limit if needed to carry such an image in base64.
    #[arg(long, env = "POD_MAX_BLOB_BYTES", value_name = "BYTES")]
    pub max_blob_bytes: Option<u64>,
    /// How large the image store may grow (`blob_store_full` past it).
    #[arg(long, env = "POD_MAX_BLOB_STORE_BYTES", value_name = "BYTES",
          default_value_t = crate::blobs::DEFAULT_MAX_STORE_BYTES)]
    pub max_blob_store_bytes: u64,
    /// Images sent to the model: the last N of the conversation, older ones as placeholders.
    #[arg(long, env = "POD_MAX_CONTEXT_IMAGES", value_name = "N",
          default_value_t = crate::blobs::DEFAULT_MAX_CONTEXT_IMAGES)]
    pub max_context_images: usize,
    /// Whether `bash` commands may open network (TCP) connections.
    #[arg(long, env = "POD_SANDBOX_NETWORK", value_enum, default_value_t = Switch::On,
          value_name = "on|off")]
    pub sandbox_network: Switch,
    /// Whether tool processes may create Unix-domain sockets while the sandbox is on: `on`
    /// opens every local server that listens on one (another pod, tmux, D-Bus, ssh-agent,
    /// docker) to the model's commands (docs/sandbox.md).
    #[arg(long, env = "POD_SANDBOX_UNIX_SOCKETS", value_enum, default_value_t = Switch::Off,
          value_name = "on|off")]
    pub sandbox_unix_sockets: Switch,
    /// Keep this variable in tool processes' environment although the pod withholds it
    /// (OPENAI_API_KEY, ANTHROPIC_API_KEY, POD_TOKEN, POD_URL); repeatable.
    #[arg(
        long,
        env = "POD_PASS_ENV",
        value_name = "NAME",
        value_delimiter = '\n'
    )]
    pub pass_env: Vec<String>,
    /// Also serve the protocol over a WebSocket and the web client on ADDR
    /// (e.g. 127.0.0.1:7878, [::]:7878), or on a Unix socket for a reverse proxy on this
    /// machine (unix:PATH, mode 0600); see docs/remote.md.
    #[arg(long, env = "POD_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// The TLS certificate (PEM) for --listen: serve https:// and wss://.
    #[arg(long, env = "POD_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, env = "POD_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Listen without TLS on an address other machines can reach (for a network that is
    /// already encrypted, such as a VPN).
    #[arg(long, env = "POD_ALLOW_PLAINTEXT", value_parser = BoolishValueParser::new())]
    pub allow_plaintext: bool,
    /// Also accept requests from pages of this origin (e.g. https://pod.example.org);
    /// repeatable.
    #[arg(
        long,
        env = "POD_ALLOW_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = '\n'
    )]
    pub allow_origin: Vec<String>,
    /// Also answer requests whose Host header names NAME (a reverse proxy's name);
    /// repeatable.
    #[arg(
        long,
        env = "POD_ALLOW_HOST",
        value_name = "NAME",
        value_delimiter = '\n'
    )]
    pub allow_host: Vec<String>,
    /// Authenticated remote connections at most; more are answered 503.
    #[arg(
        long,
        env = "POD_MAX_REMOTE_CLIENTS",
        default_value_t = 64,
        value_name = "N"
    )]
    pub max_remote_clients: usize,
    /// Let network clients approve with scope `always` (which edits the config file).
    #[arg(long, env = "POD_ALLOW_REMOTE_ALWAYS", value_parser = BoolishValueParser::new())]
    pub allow_remote_always: bool,
}

fn parse_approval(s: &str) -> Result<crate::protocol::ApprovalMode, String> {
    use crate::protocol::ApprovalMode;
    match s {
        "ask" => Ok(ApprovalMode::Ask),
        "edits" => Ok(ApprovalMode::Edits),
        "auto" => Ok(ApprovalMode::Auto),
        "read-only" => Ok(ApprovalMode::ReadOnly),
        _ => Err(format!(
            "{s:?} is not an approval mode: use ask, edits, auto or read-only"
        )),
    }
}

fn parse_rule(s: &str) -> Result<crate::approval::Rule, String> {
    s.parse::<crate::approval::Rule>()
        .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The message; `-` reads it from stdin (as does giving none, with
    /// no --file or --image, when stdin is not a terminal: `echo hi | pod send`).
    #[arg(
        long,
        env = "POD_TEXT",
        value_name = "TEXT",
        conflicts_with = "message"
    )]
    pub text: Option<String>,
    /// The message, as `--text` takes it (`pod send "fix the tests"`).
    #[arg(value_name = "TEXT")]
    pub message: Option<String>,
    /// Never start a pod: with none running, exit 3 (by default one is
    /// started for the workspace, as plain `pod` does).
    #[arg(long, env = "POD_NO_START", value_parser = BoolishValueParser::new())]
    pub no_start: bool,
    /// Attach a file as a file_ref segment (relative to this directory when it
    /// exists here, else to the pod's workspace); repeatable.
    #[arg(long, env = "POD_FILE", value_name = "PATH", value_delimiter = '\n')]
    pub file: Vec<String>,
    /// Attach an image (PNG, JPEG, GIF or WebP): stored on the pod with put_blob, sent as an
    /// image segment; repeatable.
    #[arg(long, env = "POD_IMAGE", value_name = "FILE", value_delimiter = '\n')]
    pub image: Vec<String>,
    /// Print JSON lines instead: the response to the run, then every frame
    /// of its turn, from turn_start to the turn_end entry.
    #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
    pub json: bool,
    /// Return once the run is accepted.
    #[arg(long, env = "POD_NO_WAIT", value_parser = BoolishValueParser::new())]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The call id, or a unique prefix of it [default: the only pending call].
    pub call_id: Option<String>,
    /// Also allow calls like it for the rest of the session (`bash:cargo *`, the file, the tool).
    /// Its variable is not `POD_SESSION`, which names `pod serve`'s session.
    #[arg(long, env = "POD_APPROVE_SESSION", value_parser = BoolishValueParser::new(),
          conflicts_with = "always")]
    pub session: bool,
    /// Also keep its rule in the config file, for every future session (`[permissions]
    /// allow`; path rules under the workspace's own table).
    #[arg(long, env = "POD_APPROVE_ALWAYS", value_parser = BoolishValueParser::new())]
    pub always: bool,
    /// A note for the model, appended to the tool's result.
    #[arg(long, env = "POD_MESSAGE", value_name = "TEXT")]
    pub message: Option<String>,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The call id, or a unique prefix of it [default: the only pending call].
    pub call_id: Option<String>,
    /// Tell the model why, or what to do instead.
    #[arg(long, env = "POD_MESSAGE", value_name = "TEXT")]
    pub message: Option<String>,
}

#[derive(Debug, Args, Clone, Copy)]
pub struct ForceArgs {
    /// Restore paths that were also changed outside a turn (conflicts) too.
    #[arg(long, env = "POD_FORCE", value_parser = BoolishValueParser::new())]
    pub force: bool,
    /// Kill running background jobs instead of refusing.
    #[arg(long, env = "POD_KILL_JOBS", value_parser = BoolishValueParser::new())]
    pub kill_jobs: bool,
}

#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The seq of a user_input of the current session.
    #[arg(required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
    pub seq: Option<u64>,
    /// Restore the files to this checkpoint (e.g. a rewind's checkpoint_before, to undo it).
    #[arg(long, env = "POD_CHECKPOINT", value_name = "ID")]
    pub checkpoint: Option<String>,
    /// Rewind the files only, not the conversation.
    #[arg(long, conflicts_with_all = ["conversation_only", "checkpoint"],
          value_parser = BoolishValueParser::new())]
    pub files_only: bool,
    /// Rewind the conversation only, not the files.
    #[arg(long, conflicts_with = "checkpoint", value_parser = BoolishValueParser::new())]
    pub conversation_only: bool,
    #[command(flatten)]
    pub forcing: ForceArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A turn id, or a unique prefix of at least 4 hex digits after its `t-`.
    #[arg(conflicts_with = "since")]
    pub turn: Option<String>,
    /// Everything since that turn began, up to the workspace now.
    #[arg(long, value_name = "TURN")]
    pub since: Option<String>,
    #[command(flatten)]
    pub forcing: ForceArgs,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The session: full id or a unique prefix of at least 4 characters
    /// [default: the pod's current session].
    pub session: Option<String>,
    /// Print the raw JSON lines.
    #[arg(long, env = "POD_JSON", value_parser = BoolishValueParser::new())]
    pub json: bool,
    /// Also print the sessions this one was compacted from, oldest first.
    #[arg(long, env = "POD_CHAIN", value_parser = BoolishValueParser::new())]
    pub chain: bool,
}

/// A `--name`: it names files (`NAME.sock`, `pods/NAME.json`), so only
/// characters that are safe in a file name, and not too many. A child pod's
/// name is its parent's, a dot and its slug (`calc-3f2a9c.tests`,
/// protocol.md "Child pods"): the slug may take it past 64 characters, so
/// each `.SLUG` a child adds is allowed on top; a name that starts or ends
/// with a dot is neither a pod's nor a child's (a hidden file, an empty slug).
fn parse_name(s: &str) -> Result<String, String> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if s.is_empty() || !s.chars().all(fine) || !within_length(s) {
        return Err(format!(
            "{s:?} is not a pod name: use 1 to 64 of the characters A-Z a-z 0-9 . _ - \
             (e.g. `--name calc`; a child pod adds `.SLUG`, e.g. `--name calc.tests`), or \
             leave --name out to use the workspace's own name"
        ));
    }
    if s.starts_with('.') {
        return Err(format!(
            "{s:?} is not a pod name: it may not start with `.` (e.g. `--name calc`)"
        ));
    }
    if let Some(parent) = s.strip_suffix('.') {
        return Err(format!(
            "{s:?} is not a pod name: a child pod's name is its parent's, a dot and its slug \
             (e.g. `{parent}.tests`); `pod agents --name {parent}` lists that pod's children"
        ));
    }
    Ok(s.to_owned())
}

/// At most 64 characters, plus the `.SLUG` (`[a-z0-9-]{1,24}`) of each
/// generation of child pods.
fn within_length(name: &str) -> bool {
    const MAX: usize = 64;
    if name.len() <= MAX {
        return true;
    }
    let is_slug = |slug: &str| {
        (1..=24).contains(&slug.len())
            && slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    match name.rsplit_once('.') {
        Some((parent, slug)) if is_slug(slug) && !parent.is_empty() => within_length(parent),
        _ => false,
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not a fraction in (0, 1]"))
    }
}

/// The longest `--model-idle-timeout`: a day. Longer is a typo (milliseconds
/// meant), and a call that waits longer would look like a hung pod.
const MAX_MODEL_IDLE_TIMEOUT: u64 = 24 * 60 * 60;

/// A `--model-idle-timeout`: whole seconds from 1 to a day. Zero would give
/// up on every call before the server could answer.
fn parse_idle_timeout(s: &str) -> Result<u64, String> {
    let secs: u64 = s.trim().parse().map_err(|_| {
        format!("{s:?} is not a whole number of seconds; give e.g. 900 for 15 minutes")
    })?;
    match secs {
        0 => Err(
            "0 s would give up on every model call before the server answers; \
                  give at least 1 (the default is 300)"
                .to_owned(),
        ),
        s if s > MAX_MODEL_IDLE_TIMEOUT => Err(format!(
            "{s} s is more than a day ({MAX_MODEL_IDLE_TIMEOUT} s); give seconds, e.g. 900"
        )),
        s => Ok(s),
    }
}

/// A `--base-url` the providers can use: `http` or `https`, with a host.
/// Checked when the pod starts, because a typo found at the first model
/// call costs a user a turn and several retries; clap names the flag and
/// exits with code 2.
pub fn parse_base_url(s: &str) -> Result<String, String> {
    let example = "e.g. http://localhost:11434/v1 or https://api.openai.com/v1";
    let url = reqwest::Url::parse(s.trim())
        .map_err(|e| format!("not a URL ({e}); give a full URL, {example}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "no http:// or https:// scheme; give a full URL, {example}"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("no host; give a full URL, {example}"));
    }
    Ok(s.trim().to_owned())
}

/// A count where zero would make the pod useless (no model call per turn,
/// no frame a client could send): refused as bad usage instead.
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// Checks the config file's settings against the flags they stand for:
/// `Err` names a value its flag's parser refuses (as the file's, not as a
/// flag the user never typed); `Ok` lists warnings for keys that set
/// nothing (see [`unknown_settings`]).
pub fn check_settings(table: &toml::Table) -> Result<Vec<String>, String> {
    let cmd = Cli::command();
    bad_value(&cmd, table)?;
    Ok(unknown_settings(&cmd, table))
}

/// Every flag of the command and of its subcommands.
fn flags(cmd: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments()
        .chain(cmd.get_subcommands().flat_map(|sub| sub.get_arguments()))
}

/// The config file's keys that set nothing — no flag is called that and
/// no table is read under it — each with the setting probably meant. A
/// typo (`aproval`, `sandbox_netwrok`) would otherwise leave the default in
/// force without a word. Warned about, not refused: a file written for a
/// newer pod still starts this one.
fn unknown_settings(cmd: &clap::Command, table: &toml::Table) -> Vec<String> {
    let mut known: Vec<String> = flags(cmd)
        .filter_map(|arg| arg.get_long())
        .map(|long| long.replace('-', "_"))
        .collect();
    known.extend(["mcp_servers", "permissions", "hooks", "workspaces"].map(String::from));
    table
        .keys()
        .filter(|key| !known.contains(key))
        .map(|key| {
            let closest = known
                .iter()
                .map(|k| (strsim::jaro_winkler(key, k), k))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .filter(|(score, _)| *score > 0.8);
            match closest {
                Some((_, meant)) => format!("`{key}` sets nothing (did you mean `{meant}`?)"),
                None => format!("`{key}` sets nothing"),
            }
        })
        .collect()
}

/// A config value as the text a flag would be given; tables and arrays are
/// not flag values.
fn as_flag_value(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Checks each config value with its flag's own parser, so that a bad one
/// is reported as the file's (`approval = "yolo"`), not as a `--approval`
/// the user never typed.
fn bad_value(cmd: &clap::Command, table: &toml::Table) -> Result<(), String> {
    for (key, value) in table {
        let Some(text) = as_flag_value(value) else {
            continue;
        };
        let long = key.replace('_', "-");
        for arg in flags(cmd).filter(|arg| arg.get_long() == Some(long.as_str())) {
            // Installed as the default of a command holding that flag
            // alone, as `with_config_file` installs it: parsing nothing
            // checks exactly that value.
            let alone = clap::Command::new("pod").arg(
                clap::Arg::new(arg.get_id().clone())
                    .long(long.clone())
                    .value_names(arg.get_value_names().unwrap_or_default().to_vec())
                    .action(arg.get_action().clone())
                    .value_parser(arg.get_value_parser().clone())
                    .default_value(text.clone()),
            );
            if let Err(e) = alone.try_get_matches_from(["pod"]) {
                let why = e.to_string();
                let why: Vec<&str> = why
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
                    .collect();
                let why = why.join(" ");
                let why = why.strip_prefix("error: ").unwrap_or(&why);
                return Err(format!("`{key} = {value}`: {why}"));
            }
        }
    }
    Ok(())
}

/// The command with the config file's values installed as defaults.
pub fn with_config_file(mut cmd: clap::Command, table: &toml::Table) -> clap::Command {
    for (key, value) in table {
        let long = key.replace('_', "-");
        let Some(value) = as_flag_value(value) else {
            continue;
        };
        let set = |arg: clap::Arg| {
            if arg.get_long() == Some(long.as_str()) {
                arg.default_value(value.clone())
            } else {
                arg
            }
        };
        cmd = cmd.mut_args(set).mut_subcommands(|sub| sub.mut_args(set));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str], config: &str) -> Result<Cli, clap::Error> {
        parse(args.iter().map(OsString::from), &config.parse().unwrap())
    }

    /// `--notify` is the TUI's: plain `pod` and `pod attach` take it (before
    /// or after `attach`), other subcommands neither take nor list it.
    #[test]
    fn notify_belongs_to_the_tui_commands_only() {
        use crate::tui::notify::NotifyMode;
        let cli = parse_args(&["pod", "--notify", "bell"], "").unwrap();
        assert_eq!(cli.tui.notify, Some(NotifyMode::Bell));
        let mode = |args: &[&str]| match parse_args(args, "").unwrap() {
            Cli {
                tui: outer,
                command: Some(Command::Attach { tui, .. }),
                ..
            } => tui.notify_or(&outer),
            _ => panic!("not attach"),
        };
        assert_eq!(mode(&["pod", "attach", "--notify", "off"]), NotifyMode::Off);
        assert_eq!(mode(&["pod", "--notify", "off", "attach"]), NotifyMode::Off);
        assert_eq!(mode(&["pod", "attach"]), NotifyMode::Desktop);
        assert!(parse_args(&["pod", "send", "--notify", "bell", "hi"], "").is_err());
        let mut status = Cli::command();
        let help = status
            .find_subcommand_mut("status")
            .map(|sub| sub.render_long_help().to_string());
        assert!(!help.unwrap_or_default().contains("--notify"));
    }

    #[test]
    fn a_bad_setting_is_named_as_the_file_wrote_it() {
        let check = |text: &str| check_settings(&text.parse().unwrap());
        assert_eq!(
            check("new_session = true\ncontext_window = 5000\napproval = \"auto\"\n"),
            Ok(Vec::new())
        );
        let error = check("max_steps = 3\napproval = \"yolo\"\n").unwrap_err();
        assert!(
            error.starts_with("`approval = \"yolo\"`: ") && error.contains("ask, edits"),
            "{error}"
        );
        let error = check("sandbox = \"bogus\"\n").unwrap_err();
        assert!(error.contains("workspace-write"), "{error}");
    }

    /// `--model-idle-timeout`: 300 s unless given, by flag or config key;
    /// zero, a non-number and more than a day are refused saying what to give.
    #[test]
    fn the_model_idle_timeout_is_a_flag_and_a_setting_with_a_sane_range() {
        let idle = |args: &[&str], config: &str| match parse_args(args, config) {
            Ok(Cli {
                command: Some(Command::Serve(serve)),
                ..
            }) => Ok(serve.model_idle_timeout),
            Ok(_) => panic!("not serve"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(idle(&["pod", "serve"], ""), Ok(300));
        assert_eq!(
            idle(&["pod", "serve", "--model-idle-timeout", "900"], ""),
            Ok(900)
        );
        assert_eq!(
            idle(&["pod", "serve"], "model_idle_timeout = 900\n"),
            Ok(900)
        );
        let zero = idle(&["pod", "serve", "--model-idle-timeout", "0"], "").unwrap_err();
        assert!(
            zero.contains("--model-idle-timeout") && zero.contains("give at least 1"),
            "{zero}"
        );
        let words = idle(&["pod", "serve", "--model-idle-timeout", "5m"], "").unwrap_err();
        assert!(words.contains("not a whole number of seconds"), "{words}");
        let huge = idle(&["pod", "serve", "--model-idle-timeout", "300000"], "").unwrap_err();
        assert!(huge.contains("more than a day"), "{huge}");
        let error = check_settings(&"model_idle_timeout = 0\n".parse().unwrap()).unwrap_err();
        assert!(error.contains("give at least 1"), "{error}");
    }

    #[test]
    fn settings_that_set_nothing_are_named_with_the_one_meant() {
        let table = "aproval = \"auto\"\nmax_steps = 3\nsandbox_netwrok = \"off\"\n\
                     zzz = 1\n[permissions]\nallow = []\n"
            .parse()
            .unwrap();
        assert_eq!(
            check_settings(&table).unwrap(),
            [
                "`aproval` sets nothing (did you mean `approval`?)",
                "`sandbox_netwrok` sets nothing (did you mean `sandbox_network`?)",
                "`zzz` sets nothing",
            ]
        );
    }

    #[test]
    fn plain_pod_records_only_the_serve_flags_typed() {
        let cli = parse_args(
            &[
                "pod",
                "--provider",
                "script",
                "--script=s.jsonl",
                "--name=x",
                "--model=-odd",
                "--allow",
                "bash:ls*",
                "--allow=read:*",
                "--new-session",
            ],
            "max_steps = 3\napproval = \"auto\"\n",
        )
        .unwrap();
        assert!(cli.command.is_none());
        assert_eq!(
            cli.serve.max_steps, 3,
            "the config file still sets defaults"
        );
        assert_eq!(
            cli.given.ids,
            ["provider", "model", "script", "new_session", "allow"],
            "neither the config file's max_steps nor clap's defaults count as given"
        );
        let argv: Vec<_> = cli.given.argv.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            argv,
            [
                "--provider=script",
                "--model=-odd",
                "--script=s.jsonl",
                "--new-session",
                "--allow=bash:ls*",
                "--allow=read:*"
            ]
        );
    }

    #[test]
    fn serve_flags_before_another_subcommand_are_refused() {
        let error = parse_args(&["pod", "--model", "m", "status"], "").unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(error.to_string().contains("`pod status`"), "{error}");
        let cli = parse_args(&["pod", "--name", "x", "serve", "--model", "m"], "").unwrap();
        assert_eq!(cli.given.ids, ["model"], "`serve`'s own flags, typed");
        assert!(
            matches!(cli.command, Some(Command::Serve(ref a)) if a.model.as_deref() == Some("m"))
        );
    }

    #[test]
    fn a_child_pods_full_name_is_a_name_and_a_malformed_one_is_refused_saying_why() {
        let parent = format!("{}-3f2a9c", "a".repeat(40));
        let child = format!("{parent}.{}", "t".repeat(24));
        assert!(child.len() > 64);
        for good in [
            "calc-3f2a9c.tests",
            "my.app-123456",
            &child,
            &format!("{child}.x-2"),
        ] {
            assert_eq!(parse_name(good).as_deref(), Ok(good), "{good}");
        }
        for (bad, says) in [
            ("calc-3f2a9c.", "`pod agents --name calc-3f2a9c` lists"),
            (".hidden", "may not start with `.`"),
            ("..", "may not start with `.`"),
            ("a/b", "A-Z a-z 0-9 . _ -"),
            ("", "1 to 64"),
            (&"a".repeat(65), "1 to 64"),
            (&format!("{parent}.Tests{}", "x".repeat(20)), "1 to 64"),
            (&format!("{parent}.{}", "t".repeat(25)), "1 to 64"),
        ] {
            let error = parse_name(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn base_urls_need_a_scheme_and_a_host() {
        for good in [
            "http://localhost:11434/v1",
            "https://api.anthropic.com",
            "http://127.0.0.1:8080/anthropic/",
        ] {
            assert_eq!(parse_base_url(good).as_deref(), Ok(good));
        }
        for (bad, says) in [
            ("not a url", "not a URL"),
            ("localhost:11434", "no http:// or https:// scheme"),
            ("localhost:11434/v1", "no http:// or https:// scheme"),
            ("ftp://example.com", "no http:// or https:// scheme"),
            ("http://", "not a URL"),
        ] {
            let error = parse_base_url(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
