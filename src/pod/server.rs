//! `pod serve`: recover the session, start the actors, accept clients.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix::prelude::*;
use anyhow::Context as _;
use tokio::sync::mpsc;

use super::access::Access;
use super::agents;
use super::broadcaster::{Broadcaster, McpServerChanged, Published};
use super::connection::{Connection, ConnectionLimits, Hub};
use super::descendants;
use super::fault::Faults;
use super::host::{
    accept_remote, bind, open_session, prepare_socket_path, remove_own_socket, start_pod, Doors,
    Place, PodSpec, Shared, Start, NEXT_CONN_ID,
};
use super::job::Thresholds;
use super::listening::Listening;
use super::worker::{Exit, Stop, Worker};
use crate::approval::{Policy, Rule};
use crate::mcp::{McpChange, McpRegistry, McpServerConfig};
use crate::protocol::ApprovalMode;
use crate::protocol::{Event, Level};
use crate::provider::Provider;
use crate::store::device_tokens::Tokens;
use crate::store::{pod_socket, pointer, PodLock};
use crate::tools::{ToolLimits, Toolbox};
use crate::workspace::Workspace;

/// Starts the network server of `--listen` once the pod's doors exist,
/// and says where it listens. The composition root (`cli/serve.rs`) makes
/// it from the `remote` module, so the pod, which the server sits above, never
/// names the server.
pub type StartListener = Box<dyn FnOnce(ListenerParts) -> anyhow::Result<Listening> + Send>;

/// What the network server takes from the pod it serves.
pub struct ListenerParts {
    /// The device tokens a remote client must show.
    pub tokens: Arc<Tokens>,
    /// Where it hands each authenticated WebSocket: the pod or a child.
    pub doors: Doors,
    /// The pod's name, the door a client reaches without `?agent=`.
    pub pod: String,
    /// `--max-frame-bytes`.
    pub max_frame_bytes: usize,
    /// The blob store images are fetched from, when it opened.
    pub blobs: Option<crate::blobs::Blobs>,
}

pub struct ServeConfig {
    pub name: String,
    /// `name` was derived from the workspace, not given: a `default` pod of
    /// earlier versions in this workspace may be adopted under it.
    pub name_derived: bool,
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    /// The socket is in the shared default directory (`$XDG_RUNTIME_DIR/pod`, …),
    /// whose name anyone can take first: it must be the user's own.
    pub socket_in_default_dir: bool,
    pub workspace: PathBuf,
    /// `--model` was typed on the command line (not the config file's).
    pub model_typed: bool,
    /// Warnings already printed at start (the config file's), repeated
    /// to clients in the greeting.
    pub warnings: Vec<String>,
    pub provider: Arc<dyn Provider>,
    pub new_session: bool,
    /// Start on this session (full id or unique prefix) and make it current.
    pub session: Option<String>,
    /// `--force`: `session` may be another workspace's.
    pub force_session: bool,
    pub max_steps: usize,
    pub thresholds: Thresholds,
    pub limits: ConnectionLimits,
    pub tools: ToolLimits,
    pub approval: ApprovalMode,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
    /// `--checkpoint-max-file-bytes`, `--checkpoint-store-bytes`.
    pub checkpoint_max_file_bytes: u64,
    pub checkpoint_store_bytes: u64,
    /// `--max-blob-bytes`, `--max-blob-store-bytes`.
    pub blobs: crate::blobs::BlobLimits,
    /// `--max-context-images`.
    pub max_context_images: usize,
    /// The config file's `[mcp_servers.NAME]`: started with the pod.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The config file's `[[hooks]]`.
    pub hooks: crate::hooks::Hooks,
    /// `allow` and `deny` with where each rule came from, for `list_rules`.
    pub configured_rules: Vec<crate::protocol::RuleInfo>,
    /// Where `scope: "always"` writes (the config file read, else the default).
    pub config_path: Option<PathBuf>,
    /// `--allow-remote-always`.
    pub allow_remote_always: bool,
    /// `--listen`: the protocol over a WebSocket, started by this.
    pub listener: Option<StartListener>,
    /// `--max-agents`, `--max-agent-depth`, `--agent-max-tokens`.
    pub agents: agents::Limits,
    /// Nobody will answer approval requests (`pod exec`): see
    /// [`Policy::never_ask`].
    pub never_ask: bool,
    /// Clients of the process that hosts the pod (`pod exec`, `pod replay`), each
    /// one end of a socket pair: they get full access, which the socket
    /// would refuse them (their pid is the pod's own).
    pub host_clients: Option<mpsc::UnboundedReceiver<std::os::unix::net::UnixStream>>,
    /// The new session re-runs this recorded one (`pod replay`): its
    /// `session_start` says so.
    pub replay_of: Option<uuid::Uuid>,
}

/// Runs the pod until it is told to stop. Blocks the calling thread.
pub fn serve(config: ServeConfig) -> anyhow::Result<()> {
    let faults = Faults::from_env()?;
    let workspace = Workspace::new(&config.workspace).with_context(|| {
        format!(
            "workspace {} is not a usable directory",
            config.workspace.display()
        )
    })?;
    let system = actix_rt::System::new();
    system.block_on(async { catch_file_size_signal() })?;
    let sessions_dir = config.data_dir.join("sessions");
    let pods_dir = config.data_dir.join("pods");
    crate::private::create_dir(&config.data_dir, false)
        .and_then(|()| crate::private::create_dir(&sessions_dir, true))
        .and_then(|()| crate::private::create_dir(&pods_dir, true))
        .with_context(|| {
            format!(
                "cannot create the data directory {}",
                config.data_dir.display()
            )
        })?;
    // Before anything else is created: a second pod of this name stops here.
    let _lock = PodLock::acquire(&config.data_dir, &pods_dir, &config.name)?;
    crate::store::claim::claim(
        &config.data_dir,
        &config.name,
        config.name_derived,
        workspace.root(),
    )?;
    prepare_socket_path(&config.socket, config.socket_in_default_dir)?;
    // Passes over `/proc` for what a dead pod's tools left, with pauses
    // between them (a fork chain's links can slip through one pass): tens
    // of milliseconds that need not hold up the start. They run beside the
    // session's recovery and the socket's binding, and are awaited before
    // the pod's actors start, so nothing a tool runs meets a leftover.
    let leftovers = std::thread::spawn({
        let root = workspace.root().to_path_buf();
        move || descendants::stop_leftovers(&root)
    });
    let tokens = Arc::new(Tokens::open(&pods_dir, &config.name)?);
    let pointer_path = pointer::path(&pods_dir, &config.name);
    let start = Start {
        new_session: config.new_session,
        session: config.session.clone(),
        force: config.force_session,
        provider: config.provider.name().into(),
        model: config.provider.model().into(),
        workspace: workspace.root().to_path_buf(),
        parent: None,
        fresh_id: None,
        replay_of: config.replay_of,
    };
    let (file, session_id, recovered) = open_session(&sessions_dir, &pointer_path, &start)?;
    let (mcp, mcp_supervisors) = McpRegistry::new(&config.mcp_servers, workspace.root());
    let (job_events, job_events_rx) = mpsc::unbounded_channel();
    let jobs = crate::tools::jobs::Jobs::new(
        Some(pods_dir.join(format!("{}.jobs", config.name))),
        config.tools.max_jobs,
        Some(job_events),
    );
    // What a pod that died left running is killed before anything starts.
    let orphaned_jobs = jobs.recover();
    let toolbox = Arc::new(
        Toolbox::new(workspace.clone(), config.tools.clone())
            .with_mcp(mcp.clone())
            .with_jobs(jobs),
    );
    // The model the session goes on with (a `/model` it recorded), as
    // `pod status` will say, not only the one configured.
    let (model, _) = super::recovery::model_to_run(
        config.provider.name(),
        config.provider.model(),
        config.model_typed,
        &recovered.entries,
    );
    eprintln!(
        "pod {:?}: session {session_id} ({}), provider {} (model {model}), {}, socket {}",
        config.name,
        match recovered.lines.len() {
            1 => "1 entry".to_owned(),
            n => format!("{n} entries"),
        },
        config.provider.name(),
        toolbox.sandbox().summary(),
        config.socket.display()
    );
    if let Some(reason) = toolbox.sandbox().unavailable_reason() {
        tracing::warn!("{reason}");
        eprintln!(
            "warning: {reason}. bash commands are not confined as --sandbox asks; see \
             docs/sandbox.md"
        );
    }

    descendants::become_subreaper();
    let socket = config.socket.clone();
    let bound = system.block_on(async move {
        // Before the socket takes a client: from then on a SIGTERM must
        // stop the pod cleanly, not kill it while the rest starts.
        let signals = StopSignals::install();
        let (listener, identity) = bind(&config.socket)?;
        if let Err(e) = pod_socket::record(&pods_dir, &config.name, &config.socket) {
            tracing::warn!("cannot record the socket path for `pod list`: {e}");
        }
        // Once listening and recorded (a process to spawn is time a client
        // waits for), and before the worker exists to run any command.
        crate::tools::reaper::start();
        let mcp_changes = mcp_supervisors.start();
        let (remote_tx, remote_rx) = mpsc::unbounded_channel();
        let doors = Doors::default();
        doors.open(&config.name, remote_tx);
        let blobs = match crate::blobs::Blobs::open(&config.data_dir, config.blobs) {
            Ok(blobs) => {
                actix_rt::spawn(collect_blobs(
                    blobs.clone(),
                    config.data_dir.join("sessions"),
                ));
                Some(blobs)
            }
            Err(e) => {
                tracing::warn!("images are off: the blob store could not be opened: {e}");
                None
            }
        };
        let listening = match config.listener {
            Some(start) => {
                let listening = start(ListenerParts {
                    tokens: tokens.clone(),
                    doors: doors.clone(),
                    pod: config.name.clone(),
                    max_frame_bytes: config.limits.max_frame_bytes,
                    blobs: blobs.clone(),
                })?;
                eprintln!(
                    "pod {:?}: listening on {}; `pod url` prints a link for a browser or \
                     phone, `pod token create` a device token",
                    config.name,
                    listening.describe()
                );
                Some(listening)
            }
            None => None,
        };
        let policy = Policy {
            mode: config.approval,
            allow: config.allow,
            deny: config.deny,
            sandbox: toolbox.sandbox().gate(),
            workspace_root: workspace.root().to_path_buf(),
            protected: [Some(&config.data_dir), config.config_path.as_ref()]
                .into_iter()
                .flatten()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            never_ask: config.never_ask,
        };
        let checkpoints =
            crate::checkpoint::serve::Handle::new(crate::checkpoint::Checkpoints::open(
                &config.data_dir,
                workspace.root(),
                config.checkpoint_max_file_bytes,
                config.checkpoint_store_bytes,
            ));
        if let Err(e) = checkpoints.store() {
            tracing::warn!("checkpoints are off: the store could not be opened: {e}");
        }
        let probe = super::probe::Probe::new(workspace.root().to_path_buf(), toolbox.clone());
        probe.start();
        let socket_dir = config
            .socket
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        // Started before the recovery (above); a sweep that panicked is a
        // bug, not a reason to refuse to start: say so and go on.
        let leftovers = leftovers.join().unwrap_or_else(|_| {
            vec![
                "the search for processes a dead pod's tools left running failed; \
                  docs/sandbox.md shows how to look for them"
                    .to_owned(),
            ]
        });
        for warning in &leftovers {
            eprintln!("warning: {warning}");
        }
        let shared = Rc::new(Shared {
            provider: config.provider.clone(),
            toolbox: toolbox.clone(),
            workspace: workspace.clone(),
            data_dir: config.data_dir.clone(),
            sessions_dir,
            pods_dir,
            socket_dir,
            blobs,
            checkpoints,
            hooks: Arc::new(config.hooks.clone()),
            limits: config.limits,
            tokens,
            doors,
            probe,
            max_steps: config.max_steps,
            thresholds: config.thresholds,
            configured_rules: config.configured_rules.clone(),
            config_path: config.config_path.clone(),
            allow_remote_always: config.allow_remote_always,
            max_context_images: config.max_context_images,
            agents: config.agents,
            warnings: config.warnings.iter().cloned().chain(leftovers).collect(),
        });
        let started = start_pod(
            &shared,
            PodSpec {
                provider: config.provider.clone(),
                name: config.name.clone(),
                place: Place {
                    workspace: shared.workspace.clone(),
                    toolbox: toolbox.clone(),
                    checkpoints: shared.checkpoints.clone(),
                    probe: shared.probe.clone(),
                },
                socket: config.socket.clone(),
                listener,
                session: (file, session_id, recovered),
                policy,
                model_typed: config.model_typed,
                job_events: job_events_rx,
                orphaned_jobs,
                depth: 0,
                parent: None,
                model: None,
                listening,
                faults,
                exit: Exit::System,
            },
        );
        actix_rt::spawn(announce_mcp(mcp_changes, started.hub.broadcaster.clone()));
        if let Some(reason) = toolbox.sandbox().unavailable_reason() {
            started
                .hub
                .broadcaster
                .do_send(Published::Event(Box::new(Event::Notification {
                    level: Level::Warn,
                    source: "sandbox".into(),
                    message: format!(
                        "{reason}: bash commands are not confined as --sandbox asks, so mode \
                         auto asks before each one (see docs/sandbox.md)"
                    ),
                })));
        }
        actix_rt::spawn(accept_remote(remote_rx, started.hub.clone()));
        if let Some(clients) = config.host_clients {
            actix_rt::spawn(accept_host_clients(clients, started.hub.clone()));
        }
        actix_rt::spawn(descendants::reap_orphans());
        actix_rt::spawn(signals.stop(started.worker));
        anyhow::Ok(identity)
    })?;
    let run = system.run().context("the pod's event loop failed");
    mcp.shutdown();
    remove_own_socket(&socket, bound);
    run
}

/// Deletes, now and then every hour, the blobs no session log names that
/// are over an hour old (uploaded and never sent, or whose sessions were
/// deleted), so the store holds what the logs need.
async fn collect_blobs(blobs: crate::blobs::Blobs, sessions_dir: PathBuf) {
    loop {
        let (store, dir) = (blobs.clone(), sessions_dir.clone());
        match tokio::task::spawn_blocking(move || store.collect_unnamed(&dir)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!("collected {n} images no session names"),
            Ok(Err(e)) => tracing::warn!("collecting unused images failed: {e}"),
            Err(e) => tracing::warn!("collecting unused images failed: {e}"),
        }
        tokio::time::sleep(crate::blobs::UNNAMED_BLOB_TTL).await;
    }
}

/// A write past the file-size limit (`RLIMIT_FSIZE`) raises `SIGXFSZ`,
/// whose default action kills the process without a word. Caught, the write
/// fails with `EFBIG` instead, and the append that hit the limit becomes a
/// `storage_error` like a full disk. (A caught signal, unlike an ignored
/// one, is back to its default in the commands the tools run.)
fn catch_file_size_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let xfsz = rustix::process::Signal::Xfsz as i32;
    let mut hits = signal(SignalKind::from_raw(xfsz))
        .context("cannot install a handler for SIGXFSZ (file size limit)")?;
    actix_rt::spawn(async move {
        while hits.recv().await.is_some() {
            tracing::warn!("a write reached the file size limit (RLIMIT_FSIZE)");
        }
    });
    Ok(())
}

/// The hosting process's own clients ([`ServeConfig::host_clients`]).
async fn accept_host_clients(
    mut clients: mpsc::UnboundedReceiver<std::os::unix::net::UnixStream>,
    hub: Hub,
) {
    while let Some(stream) = clients.recv().await {
        let id = NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed);
        let started = stream
            .set_nonblocking(true)
            .and_then(|()| Connection::start(id, stream, hub.clone(), Access::local(false)));
        if let Err(e) = started {
            tracing::warn!("cannot set up the host's connection: {e}");
        }
    }
}

/// SIGINT and SIGTERM, caught from the moment they are installed (a
/// signal that comes before [`StopSignals::stop`] waits for it).
struct StopSignals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl StopSignals {
    fn install() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Self(Some((int, term))),
            _ => {
                tracing::warn!("cannot install signal handlers; stop the pod with `pod stop`");
                Self(None)
            }
        }
    }

    /// Stops the worker at the first signal.
    async fn stop(self, worker: Addr<Worker>) {
        let Some((mut int, mut term)) = self.0 else {
            return;
        };
        let reason = tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        };
        worker.do_send(Stop {
            reason: format!("{reason} received"),
        });
    }
}

/// Keeps the greeting's `mcp_servers` current and tells every client when
/// an MCP server comes up, fails or exits.
async fn announce_mcp(
    mut changes: mpsc::UnboundedReceiver<McpChange>,
    broadcaster: Addr<Broadcaster>,
) {
    while let Some(change) = changes.recv().await {
        broadcaster.do_send(McpServerChanged(change));
    }
}
