//! Child pods (subagents) as their parent holds them: the registry of a
//! pod's children, the two channels between a parent and each child, and
//! the names, limits and tool specs of delegation.
//!
//! A child is a whole pod run by the same process (`host.rs` starts it, as
//! it starts the top pod): its own log, socket, queue, approvals and
//! status. Parent and child never share a `JobState`; they talk by message
//! only — the parent sends [`ToChild`] (a run, an answer a person gave at
//! the parent, cancel, stop), the child sends [`FromChild`] (its status,
//! each turn's end, that it stopped) — so every rule that holds for a pod
//! holds for a child unchanged. What the tools do with this is
//! `agent_tools.rs`; this module decides nothing that needs the log.

use std::rc::Rc;

use actix::Message;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use super::outbox::Client;
use super::worktree::Worktree;
use crate::protocol::{
    AgentInfo, AgentStatus, AgentWorktree, Decision, LogEntry, ParentRef, PodState, Scope, Segment,
    TurnEndReason, Usage,
};
use crate::provider::ToolSpec;
use crate::store::StagedSession;
use crate::tools::registry::Runner;
use crate::tools::{self, ToolLimits};

pub use crate::tools::delegation::{MESSAGE_AGENT, SPAWN_AGENT, WAIT_AGENTS};

/// The text of an `agent_turn_end` entry is capped at this many bytes.
pub const TURN_END_TEXT_CAP: usize = 4 * 1024;

/// `--max-agents`, `--max-agent-depth`, `--agent-max-tokens`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Children that may run turns at once; 0 offers no agent tools.
    pub max_agents: usize,
    /// How deep the tree may grow: a pod at this depth spawns no children.
    pub max_depth: usize,
    /// A child's default token budget.
    pub max_tokens: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_agents: 4,
            max_depth: 1,
            max_tokens: 200_000,
        }
    }
}

/// What the parent tells one child. The child's worker takes each as it
/// would take the same method from a client.
#[derive(Message)]
#[rtype(result = "()")]
pub enum ToChild {
    /// `spawn_agent`'s task or `message_agent`'s text: a `run`.
    Run(Vec<Segment>),
    /// An `approve` a person sent to the parent for one of the child's
    /// calls: the child answers `client` as if it had come to it.
    Approve {
        call_id: String,
        decision: Decision,
        scope: Scope,
        message: Option<String>,
        label: Option<String>,
        remote: Option<std::net::IpAddr>,
        client: Client,
    },
    /// Cancel the running turn (the parent's turn that waited was cancelled).
    Cancel,
    /// Stop, as a pod stops (the parent stops first its children).
    Stop,
}

/// What a child tells its parent.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FromChild {
    /// The child's full name.
    pub name: String,
    pub news: News,
}

pub enum News {
    /// The child's status changed.
    Status {
        state: PodState,
        pending: Vec<String>,
        /// Its usage so far: every model call of its sessions.
        usage: Usage,
        session_id: Uuid,
    },
    /// One of the child's turns ended; `text` is its final assistant text.
    TurnEnded {
        reason: TurnEndReason,
        usage: Option<Usage>,
        text: String,
        session_id: Uuid,
    },
    /// The child stopped on its own (a `shutdown` sent to its socket): it
    /// runs nothing more until the parent starts again.
    Stopped,
}

/// A child's way to its parent, kept in the child's job context.
#[derive(Clone)]
pub struct ParentLink {
    /// The child's own full name, which every message carries.
    pub name: String,
    pub sender: mpsc::UnboundedSender<FromChild>,
    /// The parent's log and call that started this child.
    pub parent: ParentRef,
}

impl ParentLink {
    pub fn tell(&self, news: News) {
        let _ = self.sender.send(FromChild {
            name: self.name.clone(),
            news,
        });
    }
}

/// The parent's way to one child.
pub struct ChildLink {
    pub sender: mpsc::UnboundedSender<ToChild>,
    /// Becomes true once the child has stopped (its log flushed, its
    /// clients told, its socket removed).
    pub stopped: watch::Receiver<bool>,
}

impl ChildLink {
    pub fn tell(&self, message: ToChild) {
        let _ = self.sender.send(message);
    }
}

/// What a parent asks of [`Launch`]: one child to start (or start again).
pub struct Spawn {
    /// The child's full name, `<parent>.<slug>`.
    pub name: String,
    /// Its session: a new one with this id, or the one its pointer names
    /// when the child is started again.
    pub session_id: Uuid,
    pub resume: bool,
    pub parent: ParentRef,
    pub model: Option<String>,
    pub max_tokens: u64,
    /// The parent's approval policy as it is now: the child's ceiling.
    pub policy: crate::approval::Policy,
    /// Its own git worktree, made (or found again) by the parent; `None`:
    /// it works where the parent does.
    pub worktree: Option<Worktree>,
    /// A new child's log and state file, already written under hidden
    /// names ([`Launch::stage`]); `None`: [`Launch::launch`] writes them.
    pub staged: Option<StagedSession>,
}

/// Starts child pods in this process; `host.rs` implements it.
pub trait Launch {
    /// Writes a new child's log (its `session_start` durable) and state
    /// file under hidden names, for [`Launch::launch`] to put in place.
    /// Blocking: `spawn_agent` does it while the parent's `agent_started`
    /// is being synced, so the two syncs overlap. `None` where staging does
    /// not apply (a child started again, or in a worktree of its own).
    fn stage(&self, spawn: &Spawn) -> Result<Option<StagedSession>, String>;
    /// Starts the child's actors and socket. The child's log exists (its
    /// `session_start` durable) when this returns; it runs nothing yet.
    fn launch(&self, spawn: Spawn) -> Result<ChildLink, String>;
}

/// One child as its parent keeps it.
pub struct Child {
    pub name: String,
    pub slug: String,
    pub task: String,
    pub created_at: String,
    pub link: ChildLink,
    pub status: AgentStatus,
    /// Runs the parent sent that have not ended yet.
    pub outstanding: usize,
    /// Turns that ended since the child started, and the last one's end.
    pub ends: u64,
    pub last_end: Option<(TurnEndReason, String)>,
    /// It stopped (see [`News::Stopped`]): nothing waits for it any more.
    pub stopped: bool,
    /// The git worktree it works in, if it has its own.
    pub worktree: Option<Worktree>,
}

impl Child {
    /// A child just started, with `outstanding` runs sent to it.
    pub fn new(
        name: &str,
        slug: &str,
        task: &str,
        session_id: Uuid,
        link: ChildLink,
        outstanding: usize,
    ) -> Self {
        Self {
            name: name.to_owned(),
            slug: slug.to_owned(),
            task: task.to_owned(),
            created_at: LogEntry::now(),
            link,
            status: AgentStatus {
                name: name.to_owned(),
                state: if outstanding > 0 {
                    PodState::Running
                } else {
                    PodState::Idle
                },
                pending_approvals: Vec::new(),
                session_id,
                usage: Usage::default(),
            },
            outstanding,
            ends: 0,
            last_end: None,
            stopped: false,
            worktree: None,
        }
    }

    /// Whether the child runs (or will run) a turn.
    pub fn busy(&self) -> bool {
        !self.stopped && (self.outstanding > 0 || self.status.state != PodState::Idle)
    }
}

/// A pod's children, in start order, and what delegation may do here.
pub struct Registry {
    /// This pod's name (children are `<name>.<slug>`).
    pub name: String,
    pub limits: Limits,
    /// `None` at the depth limit: this pod spawns no children.
    pub launcher: Option<Rc<dyn Launch>>,
    pub children: Vec<Child>,
    /// `agent_turn_end` entries waiting to be committed (at once when
    /// idle, else at the next step boundary or by the tool that waits).
    pub entries: Vec<LogEntry>,
    /// Bumped on every change of a child: what the waiting tools watch.
    pub changed: watch::Sender<u64>,
    /// The socket directory: a child's socket is `<dir>/<child name>.sock`.
    pub socket_dir: std::path::PathBuf,
    /// `<data-dir>/pods`, where `read_agent` finds another pod's socket.
    pub pods_dir: std::path::PathBuf,
    /// This pod's own socket.
    pub socket: std::path::PathBuf,
    /// `<data-dir>`: children's worktrees go under its `worktrees/`.
    pub data_dir: std::path::PathBuf,
    /// The top pod's workspace: "this workspace" for `read_agent`, even
    /// for a pod that works in a worktree of its own.
    pub home: std::path::PathBuf,
    /// The top pod's name: its pods are all of this workspace.
    pub tree: String,
}

impl Registry {
    pub fn new(name: String, limits: Limits, launcher: Option<Rc<dyn Launch>>) -> Self {
        Self {
            name,
            limits,
            launcher,
            children: Vec::new(),
            entries: Vec::new(),
            changed: watch::channel(0).0,
            socket_dir: Default::default(),
            pods_dir: Default::default(),
            socket: Default::default(),
            data_dir: Default::default(),
            home: Default::default(),
            tree: Default::default(),
        }
    }

    /// Whether the agent tools are offered at all.
    pub fn offered(&self) -> bool {
        self.limits.max_agents > 0
    }

    pub fn child(&self, name: &str) -> Option<&Child> {
        self.children
            .iter()
            .find(|c| c.name == name || c.slug == name)
    }

    pub fn child_mut(&mut self, name: &str) -> Option<&mut Child> {
        self.children
            .iter_mut()
            .find(|c| c.name == name || c.slug == name)
    }

    /// Children that run turns now.
    pub fn running(&self) -> usize {
        self.children.iter().filter(|c| c.busy()).count()
    }

    pub fn touch(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// A child's news: its status kept, a turn's end recorded and queued
    /// for the parent's log. False for a name this pod does not know.
    pub fn hear(&mut self, message: FromChild) -> bool {
        let Some(child) = self.children.iter_mut().find(|c| c.name == message.name) else {
            return false;
        };
        match message.news {
            News::Status {
                state,
                pending,
                usage,
                session_id,
            } => {
                child.status.state = state;
                child.status.pending_approvals = pending;
                child.status.usage = usage;
                child.status.session_id = session_id;
            }
            News::TurnEnded {
                reason,
                usage,
                text,
                session_id,
            } => {
                child.outstanding = child.outstanding.saturating_sub(1);
                child.ends += 1;
                let capped = cap_text(&text, TURN_END_TEXT_CAP);
                child.last_end = Some((reason, text));
                self.entries.push(LogEntry::AgentTurnEnd {
                    name: message.name,
                    session_id,
                    reason,
                    usage,
                    text: capped,
                    at: LogEntry::now(),
                });
            }
            News::Stopped => {
                child.stopped = true;
                child.outstanding = 0;
                child.status.state = PodState::Idle;
                child.status.pending_approvals.clear();
            }
        }
        self.touch();
        true
    }

    /// The children as `status.agents` shows them.
    pub fn statuses(&self) -> Vec<AgentStatus> {
        self.children.iter().map(|c| c.status.clone()).collect()
    }

    /// The children as `list_agents` describes them.
    pub fn infos(&self) -> Vec<AgentInfo> {
        self.children
            .iter()
            .map(|c| AgentInfo {
                status: c.status.clone(),
                task: c.task.clone(),
                created_at: c.created_at.clone(),
                worktree: c.worktree.as_ref().map(|w| AgentWorktree {
                    path: w.root.display().to_string(),
                    branch: w.branch.clone(),
                    removed: None,
                    note: None,
                }),
            })
            .collect()
    }

    /// The child whose approval request `call_id` waits, if one does.
    pub fn waiting_on(&self, call_id: &str) -> Option<&Child> {
        self.children
            .iter()
            .find(|c| c.status.pending_approvals.iter().any(|id| id == call_id))
    }

    /// A unique slug for a child: the model's `name` checked, else
    /// `agent-N`; passing over its siblings' slugs and those
    /// `taken_elsewhere` refuses (a worktree's branch that exists already).
    pub fn slug_for(
        &self,
        wanted: Option<&str>,
        taken_elsewhere: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let base = match wanted {
            Some(name) => {
                let slug = name.trim().to_lowercase();
                let valid = (1..=24).contains(&slug.len())
                    && slug
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
                if !valid {
                    return Err(format!(
                        "{name:?} is not a usable agent name: use 1 to 24 of a-z, 0-9 and -"
                    ));
                }
                slug
            }
            None => format!("agent-{}", self.children.len() + 1),
        };
        let taken =
            |slug: &str| self.children.iter().any(|c| c.slug == slug) || taken_elsewhere(slug);
        if !taken(&base) {
            return Ok(base);
        }
        Ok((2..)
            .map(|n| format!("{base}-{n}"))
            .find(|s| !taken(s))
            .unwrap_or(base))
    }
}

/// Why another pod cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error(
        "read_agent: no pod {0:?} of this workspace is known (names are like `calc-3f2a9c` or \
         `calc-3f2a9c.tests`; `pod list` shows them)"
    )]
    NotInWorkspace(String),
    #[error("read_agent: pod {0:?} is not running (it has no socket); `pod log --name {0}` reads its log")]
    NotRunning(String),
}

/// `text` cut to at most `cap` bytes at a character boundary, with a note.
pub fn cap_text(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let cut = crate::tools::floor_char_boundary(text, cap);
    format!("{}\n[… {} more bytes]", &text[..cut], text.len() - cut)
}

/// The agent tools this pod offers, as the registry defines them: none
/// when `--max-agents` is 0, and no `spawn_agent` at the depth limit.
pub fn specs(registry: &Registry, limits: &ToolLimits) -> Vec<ToolSpec> {
    if !registry.offered() {
        return Vec::new();
    }
    tools::registry::TOOLS
        .iter()
        .filter(|def| def.runner == Runner::Delegation)
        .filter(|def| def.facts.name != SPAWN_AGENT || registry.launcher.is_some())
        .map(|def| (def.spec)(limits))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> ChildLink {
        ChildLink {
            sender: mpsc::unbounded_channel().0,
            stopped: watch::channel(false).1,
        }
    }

    #[test]
    fn slugs_are_checked_lowercased_and_made_unique() {
        let mut registry = Registry::new("calc".into(), Limits::default(), None);
        assert_eq!(
            registry.slug_for(Some("Tests"), |_| false).unwrap(),
            "tests"
        );
        assert_eq!(registry.slug_for(None, |_| false).unwrap(), "agent-1");
        for bad in ["", "a b", "x.y", "../up", &"a".repeat(25)] {
            let why = registry.slug_for(Some(bad), |_| false).unwrap_err();
            assert!(why.contains("not a usable agent name"), "{why}");
        }
        let id = Uuid::new_v4();
        registry
            .children
            .push(Child::new("calc.tests", "tests", "t", id, link(), 0));
        registry
            .children
            .push(Child::new("calc.tests-2", "tests-2", "t", id, link(), 0));
        assert_eq!(
            registry.slug_for(Some("tests"), |_| false).unwrap(),
            "tests-3"
        );
    }

    #[test]
    fn a_turn_end_is_kept_and_queued_with_its_text_capped() {
        let mut registry = Registry::new("calc".into(), Limits::default(), None);
        let id = Uuid::new_v4();
        registry
            .children
            .push(Child::new("calc.w", "w", "t", id, link(), 1));
        assert!(registry.children[0].busy());
        let heard = registry.hear(FromChild {
            name: "calc.w".into(),
            news: News::TurnEnded {
                reason: TurnEndReason::Completed,
                usage: None,
                text: "é".repeat(4000),
                session_id: id,
            },
        });
        assert!(heard);
        let child = &registry.children[0];
        assert_eq!((child.ends, child.outstanding), (1, 0));
        match &registry.entries[..] {
            [LogEntry::AgentTurnEnd { text, .. }] => {
                assert!(text.len() < TURN_END_TEXT_CAP + 64, "{}", text.len());
                assert!(text.ends_with("more bytes]"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!registry.hear(FromChild {
            name: "calc.other".into(),
            news: News::Stopped,
        }));
    }
}
