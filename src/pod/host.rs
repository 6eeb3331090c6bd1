//! Starting one pod's actors inside a running actix System — the top pod
//! that `pod serve` runs, and each child pod (subagent) its parent starts —
//! and the socket each one listens on.
//!
//! What every pod of the process shares is made once, by `server.rs`, and
//! kept in [`Shared`]: the provider (its HTTP client), the MCP servers, the
//! sandbox as measured, the content stores, the hooks, the workspace, the
//! probe. What a pod never shares is made here, per pod: its session log and
//! lock, its socket and connections, its broadcaster, compactor and worker,
//! its queue, approvals, policy and background jobs. A child is therefore
//! one more call of [`start_pod`], not a copy of the code and not a process.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use actix::prelude::*;
use anyhow::{bail, Context as _};
use std::cell::RefCell;
use std::rc::Rc;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use super::access::Access;
use super::agents::{self, ChildLink, FromChild, Launch, ParentLink, Registry, Spawn};
use super::broadcaster::Broadcaster;
use super::compactor::Compactor;
use super::connection::{Connection, ConnectionLimits, Hub};
use super::descendants;
use super::fault::Faults;
use super::job::{JobEnv, JobState, Thresholds, WorkerConfig};
use super::session_log::{Dirs, SessionLog};
use super::worker::{Exit, JobChanged, Worker};
use super::worktree::{self, Worktree};
use crate::approval::Policy;
use crate::context::Conversation;
use crate::input::Resolvers;
use crate::protocol::{Greeting, LogEntry, LogLine, ParentRef};
use crate::provider::Provider;
use crate::store::{pod_socket, pointer, LogFile, PodLock, StagedSession};
use crate::tools::jobs::{JobEvent, Jobs};
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// What every pod of the process shares, made once at start.
pub(super) struct Shared {
    pub provider: Arc<dyn Provider>,
    /// The top pod's toolbox: children get one like it with jobs of their own.
    pub toolbox: Arc<Toolbox>,
    pub workspace: Workspace,
    pub data_dir: PathBuf,
    pub sessions_dir: PathBuf,
    pub pods_dir: PathBuf,
    /// Where children's sockets go: the top pod's socket directory.
    pub socket_dir: PathBuf,
    pub blobs: Option<crate::blobs::Blobs>,
    pub checkpoints: crate::checkpoint::serve::Handle,
    pub hooks: Arc<crate::hooks::Hooks>,
    pub limits: ConnectionLimits,
    pub tokens: Arc<crate::store::device_tokens::Tokens>,
    /// Where the network server finds each running pod's clients.
    pub doors: Doors,
    pub probe: Rc<super::probe::Probe>,
    pub max_steps: usize,
    pub thresholds: Thresholds,
    pub configured_rules: Vec<crate::protocol::RuleInfo>,
    pub config_path: Option<PathBuf>,
    pub allow_remote_always: bool,
    pub max_context_images: usize,
    pub agents: agents::Limits,
    pub warnings: Vec<String>,
}

impl Shared {
    fn worker_config(&self) -> WorkerConfig {
        WorkerConfig {
            max_steps: self.max_steps,
            system_prompt: crate::prompt::render(self.toolbox.limits(), self.agents.max_agents > 0),
            compaction: self.thresholds,
            configured_rules: self.configured_rules.clone(),
            config_path: self.config_path.clone(),
            allow_remote_always: self.allow_remote_always,
        }
    }
}

/// Where a pod works: the top pod's workspace, or a child's git worktree
/// (`spawn_agent` with `worktree: true`). A child without a worktree of
/// its own works where its parent does, under the same sandbox.
#[derive(Clone)]
pub(super) struct Place {
    pub workspace: Workspace,
    /// The toolbox whose workspace and sandbox these are; a child's has
    /// jobs of its own, made from this one.
    pub toolbox: Arc<Toolbox>,
    pub checkpoints: crate::checkpoint::serve::Handle,
    pub probe: Rc<super::probe::Probe>,
}

/// One pod to start: what is its own.
pub(super) struct PodSpec {
    pub name: String,
    pub place: Place,
    /// The shared provider, or a child's view of it (`Provider::for_agent`).
    pub provider: Arc<dyn Provider>,
    pub socket: PathBuf,
    pub listener: UnixListener,
    pub session: (LogFile, Uuid, crate::store::Recovered),
    pub policy: Policy,
    pub model_typed: bool,
    pub job_events: mpsc::UnboundedReceiver<JobEvent>,
    /// Notes of jobs a dead pod left running, for the worker's first job.
    pub orphaned_jobs: Vec<String>,
    /// 0 for the top pod.
    pub depth: usize,
    /// A child's way to its parent, its parent ref and budget.
    pub parent: Option<(ParentLink, u64)>,
    /// A child started on another model of the provider.
    pub model: Option<String>,
    pub listening: Option<super::listening::Listening>,
    pub faults: Faults,
    pub exit: Exit,
}

/// A started pod: its worker (to stop it) and the hub its connections use.
pub(super) struct Started {
    pub worker: Addr<Worker>,
    pub hub: Hub,
    /// Runs the accept loop; aborted when a child stops.
    pub accept: tokio::task::JoinHandle<()>,
    pub log_arbiter: actix_rt::Arbiter,
}

/// Starts one pod's actors on the running System and its accept loop.
pub(super) fn start_pod(shared: &Rc<Shared>, spec: PodSpec) -> Started {
    let (file, session_id, recovered) = spec.session;
    let place = spec.place;
    let toolbox = place.toolbox.clone();
    let workspace = place.workspace.clone();
    let greeting = Greeting {
        pod: spec.name.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        session_id,
        provider: spec.provider.name().into(),
        model: spec
            .model
            .clone()
            .unwrap_or_else(|| spec.provider.model().into()),
        workspace: workspace.root().display().to_string(),
        pid: std::process::id(),
        approval: spec.policy.mode,
        sandbox: toolbox.sandbox().info(),
        mcp_servers: toolbox.mcp_servers(),
        access: Default::default(),
        access_reason: None,
        listen: spec
            .listening
            .as_ref()
            .map(super::listening::Listening::info),
        allow_remote_always: shared.allow_remote_always,
        warnings: shared
            .warnings
            .iter()
            .cloned()
            .chain(toolbox.sandbox().unavailable_reason().map(|reason| {
                format!("{reason}: bash commands are not confined as --sandbox asks")
            }))
            .collect(),
    };
    let broadcaster = Broadcaster::new(greeting).start();
    let log_arbiter = actix_rt::Arbiter::new();
    let parent_ref = spec.parent.as_ref().map(|(link, _)| link.parent.clone());
    let dirs = Dirs {
        sessions: shared.sessions_dir.clone(),
        pointer: pointer::path(&shared.pods_dir, &spec.name),
        workspace: workspace.root().to_path_buf(),
        parent: parent_ref,
    };
    let mirror = recovered.lines;
    let log_broadcaster = broadcaster.clone();
    let faults = spec.faults;
    let session_log = SessionLog::start_in_arbiter(&log_arbiter.handle(), move |_| {
        SessionLog::new(file, session_id, mirror, log_broadcaster, dirs, faults)
    });
    let compactor = Compactor::new(spec.provider.clone()).start();
    let (paused_tx, paused) = Worker::pause_channel();
    let policy = spec.policy.clone();
    let mut state = JobState::new(spec.policy, spec.provider.model().to_owned())
        .with_model_typed(spec.model_typed);
    state.session_id = session_id;
    state.spent = spent_in(&recovered.entries);
    state.model_request = spec.model;
    let (from_children, children_news) = mpsc::unbounded_channel();
    let launcher =
        (shared.agents.max_agents > 0 && spec.depth < shared.agents.max_depth).then(|| {
            Rc::new(Launcher {
                shared: shared.clone(),
                place: place.clone(),
                depth: spec.depth + 1,
                news: from_children,
            }) as Rc<dyn Launch>
        });
    let mut registry = Registry::new(spec.name.clone(), shared.agents, launcher);
    registry.socket_dir = shared.socket_dir.clone();
    registry.pods_dir = shared.pods_dir.clone();
    registry.socket = spec.socket.clone();
    let (parent, budget) = match spec.parent {
        Some((link, budget)) => (Some(link), Some(budget)),
        None => (None, None),
    };
    registry.data_dir = shared.data_dir.clone();
    registry.home = shared.workspace.root().to_path_buf();
    // A child's name is its top pod's and one `.slug` per level.
    registry.tree = spec
        .name
        .rsplitn(spec.depth + 1, '.')
        .last()
        .unwrap_or(&spec.name)
        .to_owned();
    let env = JobEnv {
        probe: place.probe.clone(),
        checkpoints: place.checkpoints.clone(),
        session_log: session_log.clone(),
        broadcaster: broadcaster.clone(),
        compactor,
        provider: spec.provider.clone(),
        resolvers: Arc::new(
            Resolvers::for_workspace(&workspace)
                .with_blobs(shared.blobs.clone(), shared.max_context_images),
        ),
        toolbox,
        hooks: shared.hooks.clone(),
        workspace: workspace.clone(),
        config: shared.worker_config(),
        state: Rc::new(RefCell::new(state)),
        paused,
        agents: Rc::new(RefCell::new(registry)),
        parent,
        budget,
    };
    let agents = env.agents.clone();
    let children = children_to_start(shared, &spec.name, &recovered.entries);
    let conversation = Conversation::new(session_id, recovered.entries);
    // A client may attach before the worker settles the session: its
    // first status must already name the model in force.
    env.state.borrow_mut().model = super::recovery::reconcile_model(&env, &conversation).0;
    // And the broadcaster must have it before it registers any client:
    // its own status starts empty, and the worker publishes one only
    // once the session is settled.
    env.publish_status();
    let launcher = agents.borrow().launcher.clone();
    let worker = Worker::new(env, paused_tx, conversation)
        .with_exit(spec.exit)
        .start();
    for note in spec.orphaned_jobs {
        worker.do_send(JobChanged(JobEvent::Ended(note)));
    }
    actix_rt::spawn(forward_job_events(spec.job_events, worker.clone()));
    actix_rt::spawn(forward(children_news, worker.clone()));
    // The children its log names, started again as any pod resumes.
    if let Some(launcher) = launcher {
        restart_children(&launcher, &agents, &spec.name, children, &policy);
    }
    let hub = Hub {
        session_log,
        broadcaster,
        worker: worker.clone(),
        workspace,
        config: shared.limits,
        checkpoints: place.checkpoints.clone(),
        tokens: shared.tokens.clone(),
        listening: spec.listening,
        blobs: shared.blobs.clone(),
    };
    let accept = actix_rt::spawn(accept_loop(spec.listener, hub.clone()));
    Started {
        worker,
        hub,
        accept,
        log_arbiter,
    }
}

/// What a pod's sessions used so far, from the turns its log records.
fn spent_in(entries: &[LogEntry]) -> crate::protocol::Usage {
    let mut spent = crate::protocol::Usage::default();
    for entry in entries {
        if let LogEntry::TurnEnd {
            usage: Some(usage), ..
        } = entry
        {
            spent.add(usage);
        }
    }
    spent
}

/// A child to start again: its name, session, task and spawning call.
struct Restart {
    name: String,
    session_id: Uuid,
    task: String,
    parent: ParentRef,
    /// Where its state file says it works: a worktree of its own or not.
    workspace: Option<PathBuf>,
}

/// The children of `name` that were not removed: those its log's
/// `agent_started` entries name, in start order, then any other whose
/// state file names it as parent (started in a session compacted since).
fn children_to_start(shared: &Shared, name: &str, entries: &[LogEntry]) -> Vec<Restart> {
    let session_id = entries.first().and_then(|e| match e {
        LogEntry::SessionStart { session_id, .. } => Some(*session_id),
        _ => None,
    });
    let live = |child: &str| {
        pointer::read(&pointer::path(&shared.pods_dir, child))
            .ok()
            .flatten()
            .filter(|p| !p.removed && p.parent.as_deref() == Some(name))
    };
    let mut children: Vec<Restart> = entries
        .iter()
        .filter_map(|e| match e {
            LogEntry::AgentStarted {
                name: child,
                call_id,
                task,
                ..
            } => Some((child, call_id, task)),
            _ => None,
        })
        .filter_map(|(child, call_id, task)| {
            let current = live(child)?;
            Some(Restart {
                name: child.clone(),
                session_id: current.session_id,
                workspace: current.workspace,
                task: task.clone(),
                parent: ParentRef {
                    pod: name.to_owned(),
                    session_id: session_id.unwrap_or(current.session_id),
                    call_id: call_id.clone(),
                },
            })
        })
        .collect();
    let prefix = format!("{name}.");
    let mut others: Vec<String> = std::fs::read_dir(&shared.pods_dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let child = file.strip_suffix(".json")?;
            let direct = child
                .strip_prefix(&prefix)
                .is_some_and(|slug| !slug.contains('.'));
            direct.then(|| child.to_owned())
        })
        .filter(|child| !children.iter().any(|c| &c.name == child))
        .collect();
    others.sort();
    for child in others {
        let Some(current) = live(&child) else {
            continue;
        };
        children.push(Restart {
            task: task_in_logs(&shared.sessions_dir, current.session_id),
            name: child,
            session_id: current.session_id,
            workspace: current.workspace,
            parent: ParentRef {
                pod: name.to_owned(),
                session_id: session_id.unwrap_or(current.session_id),
                call_id: String::new(),
            },
        });
    }
    children
}

/// A child's task as its own logs record it, for a child its parent's
/// current log does not name: the first `user_input` of its first
/// session, found by following each compacted session to the one it came
/// from (as far as those logs are still there).
fn task_in_logs(sessions_dir: &Path, session_id: Uuid) -> String {
    let mut task = String::new();
    let mut next = Some(session_id);
    // A chain of compactions is short; the bound only stops a loop a
    // corrupted log could make.
    for _ in 0..1000 {
        let Some(session_id) = next.take() else { break };
        let Ok(recovered) =
            crate::store::log_file::read_lines(&LogFile::path_for(sessions_dir, session_id))
        else {
            break;
        };
        let first_input = recovered.entries.iter().find_map(|e| match e {
            LogEntry::UserInput { segments, .. } => Some(segments),
            _ => None,
        });
        if let Some(segments) = first_input {
            task = segments
                .iter()
                .filter_map(|s| match s.view() {
                    crate::protocol::SegmentView::Text { text }
                    | crate::protocol::SegmentView::Paste { text, .. } => Some(text),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("");
        }
        next = match recovered.entries.first() {
            Some(LogEntry::SessionStart { compacted_from, .. }) => *compacted_from,
            _ => None,
        };
    }
    task
}

fn restart_children(
    launcher: &Rc<dyn Launch>,
    agents: &Rc<RefCell<Registry>>,
    parent: &str,
    children: Vec<Restart>,
    policy: &Policy,
) {
    let (max_tokens, data_dir) = {
        let registry = agents.borrow();
        (registry.limits.max_tokens, registry.data_dir.clone())
    };
    for child in children {
        // A child that worked in its own worktree comes back in it, or
        // not at all: never in its parent's workspace.
        let worktree = match child
            .workspace
            .as_deref()
            .and_then(|w| worktree::open(&data_dir, &child.name, w))
        {
            Some(Ok(worktree)) => Some(worktree),
            Some(Err(e)) => {
                tracing::warn!("cannot start child pod {} again: {e}", child.name);
                eprintln!("warning: cannot start child pod {} again: {e}", child.name);
                continue;
            }
            None => None,
        };
        let spawn = Spawn {
            worktree: worktree.clone(),
            name: child.name.clone(),
            session_id: child.session_id,
            resume: true,
            parent: child.parent,
            model: None,
            max_tokens,
            policy: policy.clone(),
            staged: None,
        };
        match launcher.launch(spawn) {
            Ok(link) => {
                let slug = child
                    .name
                    .strip_prefix(&format!("{parent}."))
                    .unwrap_or(&child.name)
                    .to_owned();
                let mut registry = agents.borrow_mut();
                let mut started =
                    agents::Child::new(&child.name, &slug, &child.task, child.session_id, link, 0);
                started.worktree = worktree;
                registry.children.push(started);
                registry.touch();
            }
            Err(e) => tracing::warn!("cannot start child pod {} again: {e}", child.name),
        }
    }
}

/// Starts children in this process, as [`start_pod`] starts the top pod.
struct Launcher {
    shared: Rc<Shared>,
    /// Where the parent works: where its children work unless they get a
    /// worktree of their own.
    place: Place,
    /// The depth of the children it starts.
    depth: usize,
    /// Where its children's news go: the parent's worker.
    news: mpsc::UnboundedSender<FromChild>,
}

impl Launch for Launcher {
    fn stage(&self, spawn: &Spawn) -> Result<Option<StagedSession>, String> {
        stage_child_session(&self.shared, &self.place, spawn).map_err(|e| format!("{e:#}"))
    }

    fn launch(&self, spawn: Spawn) -> Result<ChildLink, String> {
        launch_child(
            &self.shared,
            &self.place,
            self.depth,
            self.news.clone(),
            spawn,
        )
        .map_err(|e| format!("{e:#}"))
    }
}

/// A child's place: its worktree's, made from its parent's (the toolbox's
/// jobs are the child's own either way).
fn child_place(
    shared: &Shared,
    parent: &Place,
    worktree: Option<&Worktree>,
    jobs: Jobs,
) -> anyhow::Result<Place> {
    let toolbox = parent.toolbox.for_child(jobs);
    let Some(worktree) = worktree else {
        return Ok(Place {
            toolbox: Arc::new(toolbox),
            ..parent.clone()
        });
    };
    let workspace = Workspace::new(&worktree.workspace).with_context(|| {
        format!(
            "the agent's worktree {} is not a usable directory",
            worktree.workspace.display()
        )
    })?;
    let sandbox = toolbox
        .sandbox()
        .confined_to(&worktree.writable, &worktree.tmp);
    let toolbox = Arc::new(toolbox.placed(workspace.clone(), sandbox));
    let probe = super::probe::Probe::new(workspace.root().to_path_buf(), toolbox.clone());
    probe.start();
    Ok(Place {
        checkpoints: parent
            .checkpoints
            .for_root(&shared.data_dir, workspace.root()),
        workspace,
        toolbox,
        probe,
    })
}

/// How a child's session starts: a new one with the id its parent chose, or
/// the one its state file names.
fn child_start(shared: &Shared, workspace: &Path, spawn: &Spawn) -> Start {
    Start {
        new_session: !spawn.resume,
        session: None,
        force: false,
        provider: shared.provider.name().into(),
        // The configured model: another one given to `spawn_agent` is a
        // `model_change` the child commits before its first call.
        model: shared.provider.model().into(),
        workspace: workspace.to_path_buf(),
        parent: Some(spawn.parent.clone()),
        fresh_id: Some(spawn.session_id),
        replay_of: None,
    }
}

fn stage_child_session(
    shared: &Shared,
    parent_place: &Place,
    spawn: &Spawn,
) -> anyhow::Result<Option<StagedSession>> {
    if spawn.resume || spawn.worktree.is_some() {
        return Ok(None);
    }
    let start = child_start(shared, parent_place.workspace.root(), spawn);
    let path = LogFile::path_for(&shared.sessions_dir, spawn.session_id);
    let pointer_path = pointer::path(&shared.pods_dir, &spawn.name);
    let (mut line, entry) = session_start_line(spawn.session_id, &start)?;
    // Both files are written before either is synced: the first sync then
    // commits both, and the second finds little left to do.
    let staged_pointer = pointer::stage(&pointer_path, start.pointer(spawn.session_id))
        .with_context(|| format!("cannot write {}", pointer_path.display()))?;
    let mut file = LogFile::create_staged(&path)?;
    let written = file
        .write_line(&mut line)
        .and_then(|()| file.sync())
        .and_then(|()| staged_pointer.sync());
    if let Err(e) = written {
        file.discard();
        return Err(e).with_context(|| format!("cannot write the state of {}", spawn.name));
    }
    Ok(Some(StagedSession {
        file,
        path,
        session_id: spawn.session_id,
        recovered: crate::store::Recovered {
            lines: vec![line.into()],
            entries: vec![entry],
            truncated_tail: None,
        },
        pointer: staged_pointer,
    }))
}

fn launch_child(
    shared: &Rc<Shared>,
    parent_place: &Place,
    depth: usize,
    news: mpsc::UnboundedSender<FromChild>,
    mut spawn: Spawn,
) -> anyhow::Result<ChildLink> {
    let staged = spawn.staged.take();
    let lock = match PodLock::acquire(&shared.data_dir, &shared.pods_dir, &spawn.name) {
        Ok(lock) => lock,
        Err(e) => {
            if let Some(staged) = staged {
                staged.discard();
            }
            return Err(e.into());
        }
    };
    // A staged session goes in place first, so that nothing below can
    // leave its hidden files behind.
    let staged = staged
        .map(|staged| staged.publish(&shared.sessions_dir, &shared.pods_dir))
        .transpose()?;
    let (job_events, job_events_rx) = mpsc::unbounded_channel();
    let jobs = Jobs::new(
        Some(shared.pods_dir.join(format!("{}.jobs", spawn.name))),
        shared.toolbox.limits().max_jobs,
        Some(job_events),
    );
    let place = child_place(shared, parent_place, spawn.worktree.as_ref(), jobs)?;
    // Cloned, not moved: a child without a staged session starts from `spawn`.
    let mut policy = spawn.policy.clone();
    if spawn.worktree.is_some() {
        // Its own workspace is what its edits are judged against; the data
        // directory stays protected but for the worktree inside it (a
        // path in the workspace can name nothing else of it).
        let root = place.workspace.root();
        policy.workspace_root = root.to_path_buf();
        policy.protected.retain(|p| !root.starts_with(p));
    }
    let socket = shared.socket_dir.join(format!("{}.sock", spawn.name));
    prepare_socket_path(&socket, false)?;
    let session = match staged {
        Some(staged) => staged,
        None => {
            let start = child_start(shared, place.workspace.root(), &spawn);
            let pointer_path = pointer::path(&shared.pods_dir, &spawn.name);
            open_session(&shared.sessions_dir, &pointer_path, &start)?
        }
    };
    let (listener, identity) = bind(&socket)?;
    if let Err(e) = pod_socket::record(&shared.pods_dir, &spawn.name, &socket) {
        tracing::warn!("cannot record the socket path for `pod list`: {e}");
    }
    let orphaned_jobs = place.toolbox.jobs().recover();
    let (worker_stopped, mut worker_done) = watch::channel(false);
    let link = ParentLink {
        name: spawn.name.clone(),
        sender: news,
        parent: spawn.parent,
    };
    let parent = link.clone();
    let started = start_pod(
        shared,
        PodSpec {
            provider: shared
                .provider
                .for_agent(spawn.name.rsplit('.').next().unwrap_or(&spawn.name))
                .unwrap_or_else(|| shared.provider.clone()),
            name: spawn.name.clone(),
            place,
            socket: socket.clone(),
            listener,
            session,
            policy,
            model_typed: false,
            job_events: job_events_rx,
            orphaned_jobs,
            depth,
            parent: Some((link, spawn.max_tokens)),
            model: spawn.model,
            listening: None,
            faults: Faults::default(),
            exit: Exit::Child(worker_stopped),
        },
    );
    let (to_child, from_parent) = mpsc::unbounded_channel();
    actix_rt::spawn(forward(from_parent, started.worker.clone()));
    let (stopped_tx, stopped) = watch::channel(false);
    let Started {
        accept,
        log_arbiter,
        hub,
        ..
    } = started;
    // Its door for the network server (`/v1/ws?agent=NAME`), open while it runs.
    let (door, remote_clients) = mpsc::unbounded_channel();
    actix_rt::spawn(accept_remote(remote_clients, hub.clone()));
    shared.doors.open(&spawn.name, door);
    let doors = shared.doors.clone();
    let name = spawn.name.clone();
    actix_rt::spawn(async move {
        let _ = worker_done.wait_for(|s| *s).await;
        doors.close(&name);
        accept.abort();
        drop(hub);
        remove_own_socket(&socket, identity);
        log_arbiter.stop();
        drop(lock);
        let _ = stopped_tx.send(true);
        parent.tell(agents::News::Stopped);
    });
    Ok(ChildLink {
        sender: to_child,
        stopped,
    })
}

/// Hands each message of a channel to an actor.
async fn forward<M, A>(mut messages: mpsc::UnboundedReceiver<M>, to: Addr<A>)
where
    M: Message<Result = ()> + Send + 'static,
    A: Actor<Context = Context<A>> + Handler<M>,
{
    while let Some(message) = messages.recv().await {
        to.do_send(message);
    }
}

/// Tells the worker of each background job's start and end.
async fn forward_job_events(mut events: mpsc::UnboundedReceiver<JobEvent>, worker: Addr<Worker>) {
    while let Some(event) = events.recv().await {
        worker.do_send(JobChanged(event));
    }
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

/// The clients the network server hands over.
pub(super) async fn accept_remote(mut clients: mpsc::UnboundedReceiver<RemoteClient>, hub: Hub) {
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

/// Where the network server takes a client of each pod this process runs:
/// a pod's full name (the top pod's, or a child's such as `calc.tests`) →
/// the channel its [`accept_remote`] reads. A child's door opens when it
/// starts and closes when it stops, so `GET /v1/ws?agent=NAME` reaches a
/// running pod or is refused before the upgrade. The HTTP worker runs on
/// its own thread, hence the lock.
#[derive(Clone, Default)]
pub struct Doors(Arc<RwLock<HashMap<String, mpsc::UnboundedSender<RemoteClient>>>>);

impl Doors {
    /// The door of the pod named `name`, while it runs.
    pub fn door(&self, name: &str) -> Option<mpsc::UnboundedSender<RemoteClient>> {
        let doors = self.0.read().unwrap_or_else(PoisonError::into_inner);
        doors.get(name).cloned()
    }

    pub(super) fn open(&self, name: &str, door: mpsc::UnboundedSender<RemoteClient>) {
        let mut doors = self.0.write().unwrap_or_else(PoisonError::into_inner);
        doors.insert(name.to_owned(), door);
    }

    /// Closes a stopped pod's door: its [`accept_remote`] then ends.
    pub(super) fn close(&self, name: &str) {
        let mut doors = self.0.write().unwrap_or_else(PoisonError::into_inner);
        doors.remove(name);
    }
}

/// Which session a pod starts on, and what a new one records.
pub(super) struct Start {
    pub new_session: bool,
    pub session: Option<String>,
    /// `--force`: `session` may be another workspace's.
    pub force: bool,
    pub provider: String,
    pub model: String,
    pub workspace: PathBuf,
    /// A child pod's parent: recorded in its `session_start` and pointer.
    pub parent: Option<ParentRef>,
    /// The id a new session takes (a child's, chosen by its parent so that
    /// `agent_started` can name it before the child's log exists).
    pub fresh_id: Option<Uuid>,
    /// `pod replay`: the session the new one re-runs.
    pub replay_of: Option<Uuid>,
}

impl Start {
    /// The pod's state file pointing at `session_id`.
    fn pointer(&self, session_id: Uuid) -> pointer::Pointer {
        pointer::Pointer {
            session_id,
            workspace: Some(self.workspace.clone()),
            parent: self.parent.as_ref().map(|p| p.pod.clone()),
            removed: false,
        }
    }
}

/// Starts on the session `--session` names, or resumes the pod's current
/// session, or starts a new one.
pub(super) fn open_session(
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
    let session_id = start.fresh_id.unwrap_or_else(Uuid::new_v4);
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
    let (mut line, entry) = session_start_line(session_id, start)?;
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

/// A new session's `session_start` entry, and its log line.
fn session_start_line(session_id: Uuid, start: &Start) -> anyhow::Result<(Vec<u8>, LogEntry)> {
    let entry = LogEntry::SessionStart {
        session_id,
        created_at: LogEntry::now(),
        compacted_from: None,
        forked_from: None,
        provider: Some(start.provider.clone()),
        model: Some(start.model.clone()),
        workspace: Some(start.workspace.display().to_string()),
        parent: start.parent.clone(),
        replay_of: start
            .replay_of
            .map(|session_id| crate::protocol::ReplayRef { session_id }),
    };
    let line = serde_json::to_vec(&LogLine {
        seq: 0,
        entry: entry.clone(),
    })?;
    Ok((line, entry))
}

/// Creates the socket's directory (mode 0700) and clears a stale socket; a
/// live one means another pod is serving there. Only a socket is ever
/// removed: `--socket` naming any other file is refused.
pub(super) fn prepare_socket_path(socket: &Path, in_default_dir: bool) -> anyhow::Result<()> {
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
pub(super) type FileIdentity = (u64, u64);

/// Listens on `socket` (mode 0600) and says which file the socket is, so
/// that only this socket is removed at exit.
pub(super) fn bind(socket: &Path) -> anyhow::Result<(UnixListener, FileIdentity)> {
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
pub(super) fn remove_own_socket(socket: &Path, identity: FileIdentity) {
    match std::fs::symlink_metadata(socket) {
        Ok(meta) if (meta.dev(), meta.ino()) == identity => {
            if let Err(e) = std::fs::remove_file(socket) {
                tracing::warn!("cannot remove {}: {e}", socket.display());
            }
        }
        _ => {}
    }
}

/// Connection ids, shared by local and remote clients of every pod.
pub(super) static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

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
