//! `pod serve`, and `pod` / `pod attach`, which start one when needed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::args::ServeArgs;
use super::{ConfigFile, Paths};
use crate::pod::{ConnectionLimits, ServeConfig, Thresholds};
use crate::provider::{self, ProviderConfig, ProviderKind};
use crate::tools::{SandboxPolicy, Switch, ToolLimits};

pub fn run(
    paths: &Paths,
    args: ServeArgs,
    config: ConfigFile,
    model_typed: bool,
) -> anyhow::Result<ExitCode> {
    let serve_config = match serve_config(paths, args, config, model_typed)? {
        Ok(serve_config) => serve_config,
        Err(code) => return Ok(code),
    };
    started(crate::pod::serve(serve_config))
}

/// How a pod that ran (or failed to start) exits: a claim refused (the
/// name or the session is another workspace's) is bad usage.
pub(super) fn started(served: anyhow::Result<()>) -> anyhow::Result<ExitCode> {
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e)
            if matches!(
                e.downcast_ref(),
                Some(
                    crate::store::claim::ClaimError::OtherWorkspace { .. }
                        | crate::store::claim::ClaimError::SessionOfOtherWorkspace { .. }
                )
            ) =>
        {
            eprintln!("pod: {e}");
            Ok(ExitCode::from(super::connect::exit::USAGE))
        }
        Err(e) => Err(e),
    }
}

/// The pod `pod serve` runs with these flags at `paths` (`pod exec`
/// builds its private pod from the same flags); `Err` with the exit code
/// when the flags cannot work, said on stderr.
pub(super) fn serve_config(
    paths: &Paths,
    args: ServeArgs,
    config: ConfigFile,
    model_typed: bool,
) -> anyhow::Result<Result<ServeConfig, ExitCode>> {
    if let Some(code) = missing_script(&args) {
        return Ok(Err(code));
    }
    let provider_config = ProviderConfig {
        kind: args.provider,
        model: args.model,
        base_url: args.base_url,
        script: args.script,
        openai_api_key: std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty()),
        anthropic_api_key: std::env::var("ANTHROPIC_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty()),
        retry: provider::RetryPolicy {
            idle_timeout: Duration::from_secs(args.model_idle_timeout),
            ..provider::RetryPolicy::default()
        },
        output: provider::OutputOptions {
            max_output_tokens: args.max_output_tokens,
            tool_choice: args.tool_choice,
        },
        pod_name: paths.name_given.then(|| paths.name.clone()),
    };
    if provider_config.kind.is_none() {
        eprintln!("pod: no --provider given: {}", why_chosen(&provider_config));
    }
    let workspace_root = std::fs::canonicalize(&paths.workspace).unwrap_or(paths.workspace.clone());
    if let Some(why) = data_dir_inside(&paths.data_dir, &workspace_root) {
        eprintln!("pod: {why}");
        return Ok(Err(ExitCode::from(super::connect::exit::USAGE)));
    }
    if let Err(e) = config.hooks.check_unsandboxed(&workspace_root) {
        eprintln!("pod: {e}");
        return Ok(Err(ExitCode::from(2)));
    }
    let permissions = config.permissions_for(&workspace_root);
    let remote = match args.listen {
        Some(listen) => {
            let tls = args.tls_cert.zip(args.tls_key);
            // Where the sandbox lets tools write (it is built later).
            let tool_writable: Vec<PathBuf> = [Some(workspace_root.clone()), Some("/tmp".into())]
                .into_iter()
                .chain([std::env::var_os("TMPDIR").map(PathBuf::from)])
                .flatten()
                .filter_map(|dir| std::fs::canonicalize(dir).ok())
                .collect();
            if let Err(why) = crate::remote::check_listen(
                &listen,
                tls.is_some(),
                args.allow_plaintext,
                &tool_writable,
            ) {
                eprintln!("pod: {why}");
                return Ok(Err(ExitCode::from(super::connect::exit::USAGE)));
            }
            let remote = crate::remote::RemoteConfig {
                listen,
                tls,
                allow_hosts: args.allow_host,
                allow_origins: args.allow_origin,
                max_remote_clients: args.max_remote_clients,
            };
            let start: crate::pod::StartListener =
                Box::new(move |parts| crate::remote::start(remote, parts));
            Some(start)
        }
        None => None,
    };
    let provider = provider::build(&provider_config)?;
    crate::tools::process::keep_env(args.pass_env);
    Ok(Ok(ServeConfig {
        listener: remote,
        name: paths.name.clone(),
        name_derived: !paths.name_given,
        model_typed,
        warnings: config.warnings.clone(),
        data_dir: paths.data_dir.clone(),
        socket: paths.socket.clone(),
        socket_in_default_dir: paths.socket_in_default_dir,
        workspace: paths.workspace.clone(),
        provider,
        new_session: args.new_session,
        session: args.session,
        force_session: args.force,
        max_steps: args.max_steps.max(1),
        thresholds: Thresholds {
            context_window: args.context_window,
            compact_at: args.compact_at,
        },
        limits: ConnectionLimits {
            // A frame must carry the largest image in base64: the default
            // frame limit does for the default image limit, and a larger
            // image limit raises it. A smaller --max-frame-bytes alone is
            // kept, so a pod can be run with small frames.
            max_frame_bytes: match args.max_blob_bytes {
                Some(blob) => args.max_frame_bytes.max(
                    usize::try_from(blob.saturating_mul(4).div_ceil(3))
                        .unwrap_or(usize::MAX)
                        .saturating_add(64 * 1024),
                ),
                None => args.max_frame_bytes,
            },
            max_client_lag_bytes: args.max_client_lag_bytes,
        },
        tools: ToolLimits {
            bash_timeout: Duration::from_secs(args.bash_timeout),
            max_jobs: args.max_jobs,
            fetch_private: args.fetch_private,
            sandbox: SandboxPolicy {
                mode: args.sandbox,
                network: args.sandbox_network == Switch::On,
                unix_sockets: args.sandbox_unix_sockets == Switch::On,
            },
            ..ToolLimits::default()
        },
        mcp_servers: config.mcp_servers,
        checkpoint_max_file_bytes: args.checkpoint_max_file_bytes,
        checkpoint_store_bytes: args.checkpoint_store_bytes,
        blobs: crate::blobs::BlobLimits {
            max_blob_bytes: args
                .max_blob_bytes
                .unwrap_or(crate::blobs::DEFAULT_MAX_BLOB_BYTES),
            max_store_bytes: args.max_blob_store_bytes,
        },
        max_context_images: args.max_context_images,
        approval: args.approval,
        configured_rules: listed(&permissions, &args.allow, &args.deny),
        // The rules of every source are combined.
        allow: permissions.allow.into_iter().chain(args.allow).collect(),
        deny: permissions.deny.into_iter().chain(args.deny).collect(),
        hooks: config.hooks,
        config_path: config.write_path,
        allow_remote_always: args.allow_remote_always,
        agents: crate::pod::AgentLimits {
            max_agents: args.max_agents,
            max_depth: args.max_agent_depth,
            max_tokens: args.agent_max_tokens,
        },
        never_ask: false,
        host_clients: None,
        replay_of: None,
    }))
}

/// A `--script` that names no file is bad usage (exit 2), said before
/// anything starts: found later it would be a failed start with the reason
/// in a log file.
pub(super) fn missing_script(args: &ServeArgs) -> Option<ExitCode> {
    let script = args.script.as_ref()?;
    if script.is_file() {
        return None;
    }
    eprintln!(
        "pod: --script {}: no such file; give the path of a script file (docs/providers.md \
         describes the format)",
        script.display()
    );
    Some(ExitCode::from(super::connect::exit::USAGE))
}

/// Why the pod must not start with `data_dir` inside the workspace, if it
/// is: tools may write the workspace, and the data directory holds the
/// session log and its approvals — a tool could forge an
/// `approval_decision` (`bash:*`) and have it believed after a restart.
/// The directory need not exist yet: its deepest existing ancestor decides.
///
/// A workspace that is the home directory (or above it) holds the default
/// data directory and the config file anyway, and refusing it would make
/// `pod` in `~` a dead end: there the pod starts and warns.
fn data_dir_inside(data_dir: &Path, workspace_root: &Path) -> Option<String> {
    let mut existing = data_dir;
    let mut rest = Vec::new();
    let real = loop {
        if let Ok(real) = existing.canonicalize() {
            break real;
        }
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    };
    let real = rest.iter().rev().fold(real, |path, name| path.join(name));
    if !real.starts_with(workspace_root) {
        return None;
    }
    let home = dirs::home_dir().and_then(|h| h.canonicalize().ok());
    if home.is_some_and(|home| home.starts_with(workspace_root)) {
        eprintln!(
            "pod: warning: the workspace {} holds the data directory {}: tools that may write \
             the workspace may write the session log too (see docs/sandbox.md)",
            workspace_root.display(),
            real.display()
        );
        return None;
    }
    Some(format!(
        "the data directory {} is inside the workspace {}: a tool could then rewrite the \
         session log and its approvals. Choose a data directory outside it (--data-dir or \
         POD_DATA_DIR) or another workspace (--workspace)",
        real.display(),
        workspace_root.display()
    ))
}

/// The configured rules as `list_rules` shows them: deny rules first, each
/// with where it came from.
fn listed(
    file: &super::config::Permissions,
    allow: &[crate::approval::Rule],
    deny: &[crate::approval::Rule],
) -> Vec<crate::protocol::RuleInfo> {
    let info = |rule: &crate::approval::Rule, kind: &str, source: &str| crate::protocol::RuleInfo {
        rule: rule.to_string(),
        kind: kind.into(),
        source: source.into(),
        session_id: None,
        seq: None,
    };
    let deny = file
        .deny
        .iter()
        .map(|r| info(r, "deny", "config"))
        .chain(deny.iter().map(|r| info(r, "deny", "flag")));
    let allow = file
        .allow
        .iter()
        .map(|r| info(r, "allow", "config"))
        .chain(allow.iter().map(|r| info(r, "allow", "flag")));
    deny.chain(allow).collect()
}

/// Which provider the pod picks without `--provider`, and why — the
/// contract has the choice printed at start, and a user who expected
/// another one needs to know what decided it.
fn why_chosen(config: &ProviderConfig) -> String {
    match config.resolve_kind() {
        ProviderKind::Script => "--script is given, so `script` replays it".into(),
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY is set, so `anthropic`".into(),
        ProviderKind::Openai if config.openai_api_key.is_some() => {
            "OPENAI_API_KEY is set, so `openai`".into()
        }
        ProviderKind::Openai => {
            "--base-url is set, so `openai` (an OpenAI-compatible server)".into()
        }
        ProviderKind::Offline => "neither ANTHROPIC_API_KEY, OPENAI_API_KEY nor --base-url is \
                                  set, so the built-in `offline` model (docs/providers.md \
                                  says how to use a real one)"
            .into(),
    }
}

/// Attaches the TUI to the pod at `paths.endpoint`.
pub fn attach(
    paths: &Paths,
    notify: crate::tui::notify::NotifyMode,
    inline: bool,
) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(crate::tui::run(crate::tui::AttachOptions {
        endpoint: paths.endpoint.clone(),
        pod_name: paths.name.clone(),
        pod_command: paths.command(""),
        notify,
        inline,
    }))?;
    // The TUI is gone and the pod is not: say so, and how to stop it or
    // come back, so that nobody leaves a daemon behind unknowingly.
    let pod = paths.command("");
    match &paths.endpoint {
        crate::client::Endpoint::Remote(_) => {
            eprintln!("pod: detached; the pod at {} keeps running", paths.endpoint)
        }
        crate::client::Endpoint::Socket(socket) if super::connect::nobody_listens(socket) => {
            eprintln!(
                "pod: detached; the pod {:?} is not running (it stopped): `{pod}` starts it \
                 again",
                paths.name
            )
        }
        crate::client::Endpoint::Socket(_) => eprintln!(
            "pod: detached; the pod {:?} keeps running: `{pod} stop` stops it, `{pod}` \
             comes back",
            paths.name
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts `pod serve` detached from this terminal, its output in
/// `<data-dir>/pods/NAME.log`, and waits until it listens. `config` is the
/// `--config` file, `given` the `serve` flags typed on plain `pod`.
pub(super) fn start_background(
    paths: &Paths,
    config: Option<&Path>,
    given: &[OsString],
) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let log_dir = paths.data_dir.join("pods");
    crate::private::create_dir(&paths.data_dir, false)
        .and_then(|()| crate::private::create_dir(&log_dir, true))
        .with_context(|| format!("cannot create {}", log_dir.display()))?;
    let name = &paths.name;
    let log_path = log_dir.join(format!("{name}.log"));
    let log = crate::private::file_options()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let start_of_run = log.metadata().map_or(0, |m| m.len());
    let exe = std::env::current_exe().context("cannot find the pod executable")?;
    let mut command = std::process::Command::new(exe);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    // A derived name is derived again by the pod (from the same workspace),
    // which then knows it may adopt a legacy pod's session.
    if paths.name_given {
        command.arg("--name").arg(name);
    } else {
        command.env_remove("POD_NAME");
    }
    let mut child = command
        .arg("serve")
        .arg("--data-dir")
        .arg(&paths.data_dir)
        .arg("--socket")
        .arg(&paths.socket)
        .arg("--workspace")
        .arg(&paths.workspace)
        .args(given)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("cannot start `pod serve`")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lost_the_race = false;
    while Instant::now() < deadline {
        if std::os::unix::net::UnixStream::connect(&paths.socket).is_ok() {
            return Ok(());
        }
        if lost_the_race {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if let Some(status) = child.try_wait()? {
            // Another command started this pod at the same moment and holds
            // its lock: wait for that one to listen.
            if said(&log_path, start_of_run).contains("is already running") {
                lost_the_race = true;
                continue;
            }
            anyhow::bail!(
                "`pod serve` exited ({status}) before listening{}; see {}",
                said(&log_path, start_of_run),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::bail!(
        "`pod serve` did not start listening on {} within 10 s; see {}",
        paths.socket.display(),
        log_path.display()
    )
}

/// The error a pod that failed to start wrote to its log from `offset` on,
/// as `: pod: REASON`: the reason (a missing API key, a bad flag) belongs in
/// front of the user, not only in a file.
fn said(log_path: &Path, offset: u64) -> String {
    let Ok(text) = std::fs::read(log_path) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(text.get(offset as usize..).unwrap_or_default());
    text.lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with("pod: ") || line.starts_with("error: "))
        .map(|line| format!(": {line}"))
        .unwrap_or_default()
}
