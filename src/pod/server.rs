//! `pod serve`: recover the session, start the actors, accept clients.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use anyhow::{bail, Context as _};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::access::Access;
use super::broadcaster::{Broadcaster, McpServerChanged, Published};
use super::compactor::Compactor;
use super::connection::Connection;
use super::connection::{ConnectionLimits, Hub};
use super::descendants;
use super::fault::Faults;
use super::job::{JobEnv, JobState, Thresholds, WorkerConfig};
use super::session_log::{Dirs, SessionLog};
use super::worker::{JobChanged, Stop, Worker};
use crate::approval::{Policy, Rule};
use crate::context::Conversation;
use crate::input::Resolvers;
use crate::mcp::{McpChange, McpRegistry, McpServerConfig};
use crate::protocol::ApprovalMode;
use crate::protocol::{Event, Greeting, Level, LogEntry, LogLine};
use crate::provider::Provider;
use crate::store::{pod_socket, pointer, LogFile, PodLock};
use crate::tools::jobs::JobEvent;
use crate::tools::{ToolLimits, Toolbox};
use crate::workspace::Workspace;
use std::cell::RefCell;
use std::rc::Rc;

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
    /// `--listen` and its flags: the protocol over a WebSocket.
    pub remote: Option<crate::remote::RemoteConfig>,
}

/// A client the network server accepted and authenticated, which becomes a
/// `Connection` like any other: its messages arrive on one end of a socket
/// pair (the bridge writes them to the other), its frames go to `feed`.
pub struct RemoteClient {
    pub socket: std::os::unix::net::UnixStream,
    pub feed: std::sync::Arc<super::outbox::Feed>,
    pub access: Access,
    /// `GET /v1/ws?tail=N`: a tail snapshot of the last N entries.
    pub tail: Option<usize>,
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
    let tokens = Arc::new(crate::remote::Tokens::open(&pods_dir, &config.name)?);
    let pointer_path = pointer::path(&pods_dir, &config.name);
    let start = Start {
        new_session: config.new_session,
        session: config.session.clone(),
        force: config.force_session,
        provider: config.provider.name().into(),
        model: config.provider.model().into(),
        workspace: workspace.root().to_path_buf(),
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

    let leftovers = descendants::leftovers_warning(workspace.root());
    if let Some(warning) = &leftovers {
        eprintln!("warning: {warning}");
    }
    descendants::become_subreaper();
    let socket = config.socket.clone();
    let mcp_servers_at_start = mcp.servers();
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
        let listening = match config.remote {
            Some(remote) => {
                let listening = crate::remote::start(
                    remote,
                    tokens.clone(),
                    remote_tx,
                    config.limits.max_frame_bytes,
                    blobs.clone(),
                )?;
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
        let greeting = Greeting {
            pod: config.name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            session_id,
            provider: config.provider.name().into(),
            model: config.provider.model().into(),
            workspace: workspace.root().display().to_string(),
            pid: std::process::id(),
            approval: config.approval,
            sandbox: toolbox.sandbox().info(),
            mcp_servers: mcp_servers_at_start,
            access: Default::default(),
            access_reason: None,
            listen: listening.as_ref().map(crate::remote::Listening::info),
            warnings: config
                .warnings
                .iter()
                .cloned()
                .chain(toolbox.sandbox().unavailable_reason().map(|reason| {
                    format!("{reason}: bash commands are not confined as --sandbox asks")
                }))
                .chain(leftovers)
                .collect(),
        };
        let broadcaster = Broadcaster::new(greeting).start();
        actix_rt::spawn(announce_mcp(mcp_changes, broadcaster.clone()));
        let log_arbiter = actix_rt::Arbiter::new();
        let dirs = Dirs {
            sessions: sessions_dir,
            pointer: pointer_path,
            workspace: workspace.root().to_path_buf(),
        };
        let mirror = recovered.lines;
        let log_broadcaster = broadcaster.clone();
        let session_log = SessionLog::start_in_arbiter(&log_arbiter.handle(), move |_| {
            SessionLog::new(file, session_id, mirror, log_broadcaster, dirs, faults)
        });
        let compactor = Compactor::new(config.provider.clone()).start();
        if let Some(reason) = toolbox.sandbox().unavailable_reason() {
            broadcaster.do_send(Published::Event(Box::new(Event::Notification {
                level: Level::Warn,
                source: "sandbox".into(),
                message: format!(
                    "{reason}: bash commands are not confined as --sandbox asks, so mode auto \
                     asks before each one (see docs/sandbox.md)"
                ),
            })));
        }
        let (paused_tx, paused) = Worker::pause_channel();
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
        };
        let state = JobState::new(policy, config.provider.model().to_owned())
            .with_model_typed(config.model_typed);
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
        let env = JobEnv {
            probe,
            checkpoints: checkpoints.clone(),
            session_log: session_log.clone(),
            broadcaster: broadcaster.clone(),
            compactor,
            provider: config.provider.clone(),
            resolvers: Arc::new(
                Resolvers::for_workspace(&workspace)
                    .with_blobs(blobs.clone(), config.max_context_images),
            ),
            toolbox,
            hooks: Arc::new(config.hooks.clone()),
            workspace: workspace.clone(),
            config: WorkerConfig {
                max_steps: config.max_steps,
                system_prompt: crate::prompt::render(&config.tools),
                compaction: config.thresholds,
                configured_rules: config.configured_rules.clone(),
                config_path: config.config_path.clone(),
                allow_remote_always: config.allow_remote_always,
            },
            state: Rc::new(RefCell::new(state)),
            paused,
        };
        let conversation = Conversation::new(session_id, recovered.entries);
        // A client may attach before the worker settles the session: its
        // first status must already name the model in force.
        env.state.borrow_mut().model = super::recovery::reconcile_model(&env, &conversation).0;
        // And the broadcaster must have it before it registers any client:
        // its own status starts empty, and the worker publishes one only
        // once the session is settled.
        env.publish_status();
        let worker = Worker::new(env, paused_tx, conversation).start();
        for note in orphaned_jobs {
            worker.do_send(JobChanged(JobEvent::Ended(note)));
        }
        actix_rt::spawn(forward_job_events(job_events_rx, worker.clone()));
        let hub = Hub {
            session_log,
            broadcaster,
            worker: worker.clone(),
            workspace,
            config: config.limits,
            checkpoints,
            tokens,
            listening,
            blobs,
        };
        actix_rt::spawn(accept_remote(remote_rx, hub.clone()));
        actix_rt::spawn(accept_loop(listener, hub));
        actix_rt::spawn(descendants::reap_orphans());
        actix_rt::spawn(signals.stop(worker));
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

/// Which session `pod serve` starts on, and what a new one records.
pub(super) struct Start {
    pub new_session: bool,
    pub session: Option<String>,
    /// `--force`: `session` may be another workspace's.
    pub force: bool,
    pub provider: String,
    pub model: String,
    pub workspace: PathBuf,
}

impl Start {
    /// The pod's state file pointing at `session_id`.
    fn pointer(&self, session_id: Uuid) -> pointer::Pointer {
        pointer::Pointer {
            session_id,
            workspace: Some(self.workspace.clone()),
        }
    }
}

/// Starts on the session `--session` names, or resumes the pod's current
/// session, or starts a new one.
fn open_session(
    sessions_dir: &Path,
    pointer_path: &Path,
    start: &Start,
) -> anyhow::Result<(LogFile, Uuid, crate::store::Recovered)> {
    if let Some(query) = &start.session {
        return open_named(sessions_dir, pointer_path, query, start);
    }
    if !start.new_session {
        if let Some(current) = pointer::read(pointer_path)? {
            let path = LogFile::path_for(sessions_dir, current.session_id);
            if !path.exists() {
                bail!(
                    "the pod's current session {} (named in {}) has no log at {}: was it deleted \
                     or moved? Restore the file to resume that session, or start a new one with \
                     `pod serve --new-session`",
                    current.session_id,
                    pointer_path.display(),
                    path.display()
                );
            }
            let (file, recovered) = LogFile::open(&path)?;
            if let Some(warning) = &recovered.truncated_tail {
                tracing::warn!("{warning}");
                eprintln!("warning: {warning}");
            }
            if !recovered.entries.is_empty() {
                if current.workspace.is_none() {
                    pointer::write(pointer_path, start.pointer(current.session_id))
                        .with_context(|| format!("cannot write {}", pointer_path.display()))?;
                }
                return Ok((file, current.session_id, recovered));
            }
            // An empty file: a crash right after creating it. Start it properly.
            return start_session(file, current.session_id, pointer_path, start);
        }
    }
    let session_id = Uuid::new_v4();
    let file = LogFile::create(&LogFile::path_for(sessions_dir, session_id))?;
    start_session(file, session_id, pointer_path, start)
}

/// `--session ID`: opens that session (refused when another pod holds its
/// lock) and makes it the pod's current one.
fn open_named(
    sessions_dir: &Path,
    pointer_path: &Path,
    query: &str,
    start: &Start,
) -> anyhow::Result<(LogFile, Uuid, crate::store::Recovered)> {
    let session_id = crate::store::sessions::resolve(sessions_dir, query)
        .map_err(|e| anyhow::anyhow!("--session: {e}"))?;
    let path = LogFile::path_for(sessions_dir, session_id);
    let (file, recovered) = LogFile::open(&path).map_err(|e| match e {
        crate::store::LogError::Locked { .. } => anyhow::anyhow!(
            "--session: session {session_id} is being written by another pod (its log {} is \
             locked); stop that pod first",
            path.display()
        ),
        e => anyhow::anyhow!("--session: {e}"),
    })?;
    if let Some(warning) = &recovered.truncated_tail {
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
    }
    if recovered.entries.is_empty() {
        return start_session(file, session_id, pointer_path, start);
    }
    if let Some(LogEntry::SessionStart {
        workspace: Some(theirs),
        ..
    }) = recovered.entries.first()
    {
        if Path::new(theirs) != start.workspace && !start.force {
            return Err(crate::store::claim::ClaimError::SessionOfOtherWorkspace {
                session_id,
                theirs: theirs.into(),
                workspace: start.workspace.clone(),
            }
            .into());
        }
    }
    pointer::write(pointer_path, start.pointer(session_id))
        .with_context(|| format!("cannot write {}", pointer_path.display()))?;
    Ok((file, session_id, recovered))
}

/// Writes a new session's `session_start` durably and points the pod at it.
pub(super) fn start_session(
    mut file: LogFile,
    session_id: Uuid,
    pointer_path: &Path,
    start: &Start,
) -> anyhow::Result<(LogFile, Uuid, crate::store::Recovered)> {
    let entry = LogEntry::SessionStart {
        session_id,
        created_at: LogEntry::now(),
        compacted_from: None,
        forked_from: None,
        provider: Some(start.provider.clone()),
        model: Some(start.model.clone()),
        workspace: Some(start.workspace.display().to_string()),
        parent: None,
    };
    let line = serde_json::to_vec(&LogLine {
        seq: 0,
        entry: entry.clone(),
    })?;
    let mut line = line;
    let write = file.write_line(&mut line).and_then(|()| file.sync());
    write.with_context(|| format!("cannot write {}", file.path().display()))?;
    pointer::write(pointer_path, start.pointer(session_id))
        .with_context(|| format!("cannot write {}", pointer_path.display()))?;
    let recovered = crate::store::Recovered {
        lines: vec![line.into()],
        entries: vec![entry],
        truncated_tail: None,
    };
    Ok((file, session_id, recovered))
}

/// Creates the socket's directory (mode 0700) and clears a stale socket; a
/// live one means another pod is serving there. Only a socket is ever
/// removed: `--socket` naming any other file is refused.
fn prepare_socket_path(socket: &Path, in_default_dir: bool) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        if !dir.exists() {
            crate::private::create_dir(dir, false)
                .with_context(|| format!("cannot create socket directory {}", dir.display()))?;
        }
        if in_default_dir {
            crate::private::check_own_dir(dir)?;
            // The pod's own directory, perhaps left 0755 by an older tool:
            // the contract puts the socket in a 0700 one, so make it so.
            crate::private::create_dir(dir, true)
                .with_context(|| format!("cannot make {} private", dir.display()))?;
        }
    }
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => bail!("cannot inspect {}: {e}", socket.display()),
    };
    if !meta.file_type().is_socket() {
        bail!(
            "{} exists and is not a socket; the pod will not replace it. Choose another \
             --socket, or move that file away",
            socket.display()
        );
    }
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        bail!(
            "a pod is already listening on {}; stop it with `pod stop` or choose another \
             --name or --socket",
            socket.display()
        );
    }
    std::fs::remove_file(socket)
        .with_context(|| format!("cannot remove stale socket {}", socket.display()))?;
    Ok(())
}

/// Which file a path names: device and inode.
type FileIdentity = (u64, u64);

/// Listens on `socket` (mode 0600) and says which file the socket is, so
/// that only this socket is removed at exit.
fn bind(socket: &Path) -> anyhow::Result<(UnixListener, FileIdentity)> {
    let listener = UnixListener::bind(socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", socket.display()))?;
    let meta = std::fs::symlink_metadata(socket)
        .with_context(|| format!("cannot inspect {}", socket.display()))?;
    Ok((listener, (meta.dev(), meta.ino())))
}

/// Removes the socket this pod bound, unless the path names another file
/// by now: a process removes only what it created.
fn remove_own_socket(socket: &Path, identity: FileIdentity) {
    match std::fs::symlink_metadata(socket) {
        Ok(meta) if (meta.dev(), meta.ino()) == identity => {
            if let Err(e) = std::fs::remove_file(socket) {
                tracing::warn!("cannot remove {}: {e}", socket.display());
            }
        }
        _ => {}
    }
}

/// Connection ids, shared by local and remote clients.
static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

async fn accept_loop(listener: UnixListener, hub: Hub) {
    let uid = rustix::process::geteuid().as_raw();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        if !same_user(&stream, uid) {
            continue;
        }
        let descendant = match stream.peer_cred().ok().and_then(|c| c.pid()) {
            Some(pid) => {
                let pid = pid as u32;
                tokio::task::spawn_blocking(move || descendants::is_tool_process(pid))
                    .await
                    .unwrap_or(true)
            }
            // No pid (the kernel does not say): it cannot be proven a stranger.
            None => true,
        };
        let id = NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed);
        let stream = stream.into_std();
        let started =
            stream.and_then(|s| Connection::start(id, s, hub.clone(), Access::local(descendant)));
        if let Err(e) = started {
            tracing::warn!("cannot set up a connection: {e}");
        }
    }
}

/// The clients the network server hands over (see `crate::remote`).
async fn accept_remote(mut clients: mpsc::UnboundedReceiver<RemoteClient>, hub: Hub) {
    while let Some(client) = clients.recv().await {
        let id = NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed);
        let started = Connection::start_remote(
            id,
            client.socket,
            client.feed,
            hub.clone(),
            client.access,
            client.tail,
        );
        if let Err(e) = started {
            tracing::warn!("cannot set up a remote connection: {e}");
        }
    }
}

/// Only the pod's own user may talk to it; anyone else is dropped unanswered.
fn same_user(stream: &UnixStream, uid: u32) -> bool {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == uid => true,
        Ok(cred) => {
            tracing::warn!("refused a client of uid {} (pod runs as {uid})", cred.uid());
            false
        }
        Err(e) => {
            tracing::warn!("refused a client whose credentials cannot be read: {e}");
            false
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

/// Tells the worker of each background job's start and end.
async fn forward_job_events(mut events: mpsc::UnboundedReceiver<JobEvent>, worker: Addr<Worker>) {
    while let Some(event) = events.recv().await {
        worker.do_send(JobChanged(event));
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
