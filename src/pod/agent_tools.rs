//! The delegation tools — `spawn_agent`, `wait_agents`, `message_agent`,
//! `read_agent` — run inside the parent's turn, and the `agent_started` /
//! `agent_turn_end` entries they commit in the parent's log.
//!
//! They run unasked in every mode (their definitions, in `tools/delegation.rs`, say
//! [`Effect::Internal`](crate::tools::registry::Effect::Internal)); a deny rule
//! still turns each off. A child never gets an answer from here: a run is
//! input, and approvals belong to people (`worker.rs` forwards a person's
//! `approve` sent to the parent; nothing in this file can).

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::agents::{self, AgentsError, Child, Spawn, ToChild};
use super::assembly::Call;
use super::job::{commit, JobEnv};
use super::session_log::StorageError;
use super::worktree;
use crate::context::Conversation;
use crate::protocol::{LogEntry, ParentRef, Segment};
use crate::tools::delegation::{MessageArgs, ReadArgs, SpawnArgs, WaitArgs};
use crate::tools::registry::{self, Runner};
use crate::tools::{parse_args, ToolOutcome};

/// `wait_agents`' default time limit.
const DEFAULT_WAIT: Duration = Duration::from_secs(600);
/// `read_agent`'s default size.
const DEFAULT_READ_BYTES: usize = 16 * 1024;

/// Whether `name` is a delegation tool this pod offers.
pub fn is_offered(env: &JobEnv, name: &str) -> bool {
    let children = env.agents.borrow();
    children.offered()
        && registry::lookup(name).is_some_and(|def| def.runner == Runner::Delegation)
        && (name != agents::SPAWN_AGENT || children.launcher.is_some())
}

/// Checks a call's arguments before it is decided, like any tool's.
pub fn precheck(name: &str, arguments: &Value) -> Result<(), ToolOutcome> {
    match registry::lookup(name) {
        Some(def) => (def.args.check)(name, arguments),
        None => Err(ToolOutcome::error(format!("unknown tool {name:?}"))),
    }
}

/// Runs one delegation call. The output is capped by the caller's limit.
pub async fn call(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    call: &Call,
) -> ToolOutcome {
    let outcome = match call.name.as_str() {
        agents::SPAWN_AGENT => match parse_args::<SpawnArgs>(&call.name, &call.arguments) {
            Ok(args) => spawn(env, conversation, cancel, &call.call_id, args).await,
            Err(e) => e,
        },
        agents::WAIT_AGENTS => match parse_args::<WaitArgs>(&call.name, &call.arguments) {
            Ok(args) => wait(env, conversation, cancel, args).await,
            Err(e) => e,
        },
        agents::MESSAGE_AGENT => match parse_args::<MessageArgs>(&call.name, &call.arguments) {
            Ok(args) => message(env, args),
            Err(e) => e,
        },
        _ => match parse_args::<ReadArgs>(&call.name, &call.arguments) {
            Ok(args) => read(env, args).await,
            Err(e) => e,
        },
    };
    // What children reported meanwhile goes before this call's result.
    if let Err(e) = commit_entries(env, conversation).await {
        return ToolOutcome::error(format!("{}\n[{e}]", outcome.output));
    }
    outcome
}

/// Commits the `agent_turn_end` entries children reported.
pub async fn commit_entries(
    env: &JobEnv,
    conversation: &mut Conversation,
) -> Result<(), StorageError> {
    let entries = std::mem::take(&mut env.agents.borrow_mut().entries);
    let mut entries = entries.into_iter();
    while let Some(entry) = entries.next() {
        if let Err(e) = commit(env, conversation, entry).await {
            let mut registry = env.agents.borrow_mut();
            let rest: Vec<LogEntry> = entries.collect();
            registry.entries.splice(0..0, rest);
            return Err(e);
        }
    }
    Ok(())
}

async fn spawn(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    call_id: &str,
    args: SpawnArgs,
) -> ToolOutcome {
    if args.task.trim().is_empty() {
        return ToolOutcome::error("spawn_agent refused: `task` is empty");
    }
    let data_dir = env.agents.borrow().data_dir.clone();
    let repo = if args.worktree == Some(true) {
        match worktree::repo(env.workspace.root()).await {
            Ok(repo) => Some(repo),
            Err(why) => return ToolOutcome::error(format!("spawn_agent refused: {why}")),
        }
    } else {
        None
    };
    let (launcher, slug, name, parent_name) = {
        let registry = env.agents.borrow();
        let Some(launcher) = registry.launcher.clone() else {
            return ToolOutcome::error(
                "spawn_agent refused: this pod is at the agent depth limit (--max-agent-depth), \
                 so it cannot start agents of its own; do the work yourself",
            );
        };
        let running = registry.running();
        if running >= registry.limits.max_agents {
            return ToolOutcome::error(format!(
                "spawn_agent refused: {running} agents already run turns, the most this pod \
                 allows at once (--max-agents {}); wait for one with wait_agents first",
                registry.limits.max_agents
            ));
        }
        // A worktree's branch or directory left by an earlier child of
        // the same name (removing a child keeps its branch) makes the
        // name unique with a suffix, as a running sibling's does.
        let slug = registry.slug_for(args.name.as_deref(), |slug| {
            repo.as_ref().is_some_and(|repo| {
                worktree::taken(repo, &data_dir, &format!("{}.{slug}", registry.name))
            })
        });
        let slug = match slug {
            Ok(slug) => slug,
            Err(why) => return ToolOutcome::error(format!("spawn_agent refused: {why}")),
        };
        let name = format!("{}.{slug}", registry.name);
        (launcher, slug, name, registry.name.clone())
    };
    let worktree = match &repo {
        Some(repo) => match worktree::create(repo, &data_dir, &name).await {
            Ok(worktree) => Some(worktree),
            Err(why) => return ToolOutcome::error(format!("spawn_agent failed: {why}")),
        },
        None => None,
    };
    let session_id = uuid::Uuid::new_v4();
    let started = LogEntry::AgentStarted {
        name: name.clone(),
        session_id,
        call_id: call_id.to_owned(),
        task: args.task.clone(),
        at: LogEntry::now(),
    };
    let max_tokens = args
        .max_tokens
        .unwrap_or(env.agents.borrow().limits.max_tokens);
    let mut spawned = Spawn {
        name: name.clone(),
        session_id,
        resume: false,
        parent: ParentRef {
            pod: parent_name,
            session_id: conversation.session_id,
            call_id: call_id.to_owned(),
        },
        model: args.model,
        max_tokens,
        policy: env.state.borrow().policy.clone(),
        worktree: worktree.clone(),
        staged: None,
    };
    // The child's log and state file are written under hidden names while
    // `agent_started` is synced (the append is sent on the first poll, and
    // the log actor syncs on its own thread): the syncs overlap, and the
    // launch puts the files in place only once the entry is durable.
    let (committed, staged) = {
        let mut committing = std::pin::pin!(commit(env, conversation, started));
        let first = futures::poll!(committing.as_mut());
        let staged = launcher.stage(&spawned);
        let committed = match first {
            std::task::Poll::Ready(committed) => committed,
            std::task::Poll::Pending => committing.await,
        };
        (committed, staged)
    };
    if let Err(e) = committed {
        if let Ok(Some(staged)) = staged {
            staged.discard();
        }
        return ToolOutcome::error(format!("spawn_agent failed: {e}"));
    }
    spawned.staged = match staged {
        Ok(staged) => staged,
        Err(why) => return ToolOutcome::error(format!("spawn_agent failed: {why}")),
    };
    let link = match launcher.launch(spawned) {
        Ok(link) => link,
        Err(why) => return ToolOutcome::error(format!("spawn_agent failed: {why}")),
    };
    link.tell(ToChild::Run(vec![Segment::text(args.task.clone())]));
    let branch = worktree.as_ref().map(|w| w.branch.clone());
    {
        let mut registry = env.agents.borrow_mut();
        let mut child = Child::new(&name, &slug, &args.task, session_id, link, 1);
        child.worktree = worktree;
        registry.children.push(child);
        registry.touch();
    }
    env.publish_status();
    if args.wait == Some(false) {
        let mut started = json!({"name": name, "session_id": session_id, "state": "running"});
        if let Some(branch) = branch {
            started["branch"] = json!(branch);
        }
        return ToolOutcome::ok(started.to_string());
    }
    match wait_for_end(env, cancel, &name, 0).await {
        Waited::Ended => ended(env, &name),
        Waited::Cancelled => cancelled(&[name]),
        Waited::Stopped => stopped(&[name]),
        Waited::Gone => gone(&name),
    }
}

enum Waited {
    Ended,
    Cancelled,
    /// The pod is stopping: the child stops too, and goes on after a restart.
    Stopped,
    Gone,
}

/// Waits until `name` has ended more than `before` turns. A cancel of the
/// parent's turn cancels the child's turn too.
async fn wait_for_end(env: &JobEnv, cancel: &CancellationToken, name: &str, before: u64) -> Waited {
    let mut changed = env.agents.borrow().changed.subscribe();
    loop {
        match env.agents.borrow().child(name) {
            Some(child) if child.ends > before => return Waited::Ended,
            Some(child) if child.stopped => return Waited::Gone,
            Some(_) => {}
            None => return Waited::Gone,
        }
        tokio::select! {
            result = changed.changed() => if result.is_err() { return Waited::Gone },
            _ = cancel.cancelled() => {
                if env.stopping() {
                    return Waited::Stopped;
                }
                if let Some(child) = env.agents.borrow().child(name) {
                    child.link.tell(ToChild::Cancel);
                }
                return Waited::Cancelled;
            }
        }
    }
}

/// A child's last turn end, as a tool result.
fn ended(env: &JobEnv, name: &str) -> ToolOutcome {
    let cap = env.toolbox.limits().output_cap_bytes / 2;
    let registry = env.agents.borrow();
    let Some(child) = registry.child(name) else {
        return gone(name);
    };
    ToolOutcome::ok(describe_end(child, cap).to_string())
}

fn describe_end(child: &Child, cap: usize) -> Value {
    let (reason, text) = match &child.last_end {
        Some((reason, text)) => (Some(reason.as_str()), text.as_str()),
        None => (None, ""),
    };
    let mut value = json!({
        "name": child.name,
        "reason": reason,
        "text": agents::cap_text(text, cap),
    });
    if let Some(worktree) = &child.worktree {
        value["branch"] = json!(worktree.branch);
        value["worktree"] = json!(worktree.root);
    }
    if text.len() > cap {
        value["note"] = json!(format!(
            "the text was cut; read_agent {{\"name\": \"{}\"}} reads the whole transcript",
            child.name
        ));
    }
    value
}

fn cancelled(names: &[String]) -> ToolOutcome {
    ToolOutcome::error(format!(
        "[cancelled: this turn was cancelled, and so was the turn of {}]",
        names.join(", ")
    ))
}

fn stopped(names: &[String]) -> ToolOutcome {
    ToolOutcome::error(format!(
        "[interrupted: the pod stopped while this call waited; {} stopped with it and goes on \
         with its log when the pod starts again]",
        names.join(", ")
    ))
}

fn gone(name: &str) -> ToolOutcome {
    ToolOutcome::error(format!(
        "agent {name} stopped or was removed before its turn ended; read_agent reads its log"
    ))
}

fn unknown(env: &JobEnv, name: &str) -> ToolOutcome {
    let registry = env.agents.borrow();
    let known: Vec<&str> = registry.children.iter().map(|c| c.name.as_str()).collect();
    ToolOutcome::error(format!(
        "no agent {name:?} is a child of this pod; its children are: {}",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    ))
}

async fn wait(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    args: WaitArgs,
) -> ToolOutcome {
    let mut names = Vec::with_capacity(args.names.len());
    for wanted in &args.names {
        match env.agents.borrow().child(wanted) {
            Some(child) => names.push(child.name.clone()),
            None => return unknown(env, wanted),
        }
    }
    let limit = args.timeout_s.map_or(DEFAULT_WAIT, Duration::from_secs);
    let deadline = tokio::time::sleep(limit);
    let mut deadline = std::pin::pin!(deadline);
    let mut changed = env.agents.borrow().changed.subscribe();
    loop {
        let busy: Vec<String> = {
            let registry = env.agents.borrow();
            names
                .iter()
                .filter(|n| registry.child(n).is_some_and(Child::busy))
                .cloned()
                .collect()
        };
        if busy.is_empty() {
            break;
        }
        tokio::select! {
            result = changed.changed() => if result.is_err() { break },
            _ = &mut deadline => break,
            _ = cancel.cancelled() => {
                if env.stopping() {
                    return stopped(&busy);
                }
                for name in &busy {
                    if let Some(child) = env.agents.borrow().child(name) {
                        child.link.tell(ToChild::Cancel);
                    }
                }
                return cancelled(&busy);
            }
        }
    }
    let _ = commit_entries(env, conversation).await;
    let cap = env.toolbox.limits().output_cap_bytes / (2 * names.len().max(1));
    let registry = env.agents.borrow();
    let results: Vec<Value> = names
        .iter()
        .map(|name| match registry.child(name) {
            Some(child) if child.busy() => json!({
                "name": name,
                "state": child.status.state.as_str(),
                "note": "still running when the time was up",
            }),
            Some(child) => describe_end(child, cap),
            None => json!({"name": name, "note": "removed"}),
        })
        .collect();
    ToolOutcome::ok(Value::Array(results).to_string())
}

fn message(env: &JobEnv, args: MessageArgs) -> ToolOutcome {
    let mut registry = env.agents.borrow_mut();
    let running = registry.running();
    let max = registry.limits.max_agents;
    let Some(child) = registry.child_mut(&args.name) else {
        drop(registry);
        return unknown(env, &args.name);
    };
    if child.stopped {
        let name = child.name.clone();
        drop(registry);
        return gone(&name);
    }
    if !child.busy() && running >= max {
        return ToolOutcome::error(format!(
            "message_agent refused: {running} agents already run turns, the most this pod \
             allows at once (--max-agents {max}); wait for one with wait_agents first"
        ));
    }
    child.outstanding += 1;
    child
        .link
        .tell(ToChild::Run(vec![Segment::text(args.text)]));
    registry.touch();
    ToolOutcome::ok("queued")
}

/// The inter-pod query: that pod's snapshot, read over its socket like any
/// client's (the reader is a pod, so the connection may only read), as a
/// compact transcript.
async fn read(env: &JobEnv, args: ReadArgs) -> ToolOutcome {
    let socket = match socket_of(env, &args.name) {
        Ok(socket) => socket,
        Err(e) => return ToolOutcome::error(e.to_string()),
    };
    let max = args.max_bytes.unwrap_or(DEFAULT_READ_BYTES).max(256);
    let transcript = match read_snapshot(&socket).await {
        Ok(frame) => {
            super::agent_transcript::render(&args.name, &frame, args.from_seq.unwrap_or(0), max)
        }
        Err(why) => Err(why),
    };
    match transcript {
        Ok(transcript) => ToolOutcome::ok(transcript),
        Err(why) => ToolOutcome::error(format!(
            "read_agent: cannot read pod {:?} at {}: {why}",
            args.name,
            socket.display()
        )),
    }
}

/// The socket of a pod of this workspace: this pod, one of its children,
/// or any pod whose record names this workspace.
fn socket_of(env: &JobEnv, name: &str) -> Result<std::path::PathBuf, AgentsError> {
    let registry = env.agents.borrow();
    if name == registry.name {
        return Ok(registry.socket.clone());
    }
    if let Some(child) = registry.child(name) {
        return Ok(registry.socket_dir.join(format!("{}.sock", child.name)));
    }
    let pointer =
        crate::store::pointer::read(&crate::store::pointer::path(&registry.pods_dir, name))
            .ok()
            .flatten();
    // A pod of this tree is of this workspace wherever it works (a child
    // in a worktree of its own records that worktree).
    let same_tree = name
        .strip_prefix(registry.tree.as_str())
        .is_some_and(|rest| rest.starts_with('.'));
    let same_workspace = same_tree
        || pointer
            .and_then(|p| p.workspace)
            .is_some_and(|w| w == registry.home);
    if !same_workspace {
        return Err(AgentsError::NotInWorkspace(name.to_owned()));
    }
    crate::store::pod_socket::recorded(&registry.pods_dir)
        .into_iter()
        .find(|(pod, _)| pod == name)
        .map(|(_, socket)| socket)
        .ok_or_else(|| AgentsError::NotRunning(name.to_owned()))
}

/// How much of the snapshot one read takes: a long session's is megabytes.
const SNAPSHOT_READ: usize = 256 * 1024;

/// Connects, reads the first frame (the snapshot, parsed by the
/// transcript), and hangs up.
async fn read_snapshot(socket: &std::path::Path) -> Result<Vec<u8>, String> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| e.to_string())?;
    let mut reader = tokio::io::BufReader::with_capacity(SNAPSHOT_READ, stream);
    let mut line = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(30), reader.read_until(b'\n', &mut line)).await;
    match read {
        Ok(Ok(n)) if n > 0 => Ok(line),
        Ok(Ok(_)) => Err("the pod closed the connection".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no snapshot within 30 s".into()),
    }
}

/// The result of a `spawn_agent` call whose pod stopped before it had one:
/// what became of the child, truthfully.
pub fn interrupted_spawn(env: &JobEnv, conversation: &Conversation, call_id: &str) -> String {
    let started = conversation.entries().iter().find_map(|e| match e {
        LogEntry::AgentStarted {
            name, call_id: id, ..
        } if id == call_id => Some(name.clone()),
        _ => None,
    });
    let Some(name) = started else {
        return "[interrupted: the pod stopped before this agent was started; it never ran]".into();
    };
    let registry = env.agents.borrow();
    match registry.child(&name) {
        Some(_) => format!(
            "[interrupted: the pod stopped while this call waited for agent {name}; {name} was \
             started again and goes on with its log (a turn that waited for approval still \
             waits); wait_agents {{\"names\": [\"{name}\"]}} waits for it, read_agent reads \
             what it did]"
        ),
        None => format!(
            "[interrupted: the pod stopped while this call waited for agent {name}, which was \
             not started again (removed, or its state is gone); read_agent or `pod log --name \
             {name}` reads its log]"
        ),
    }
}
