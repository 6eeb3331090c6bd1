//! The job context: everything the worker shares with the job it runs (a
//! turn, a batch of idle `notify`s, a compaction, a session switch), and the
//! commit/publish helpers every job uses.
//!
//! The worker and its job run on one thread, so their shared state is a
//! `RefCell` with one owner: [`JobState`] holds every flag both sides read
//! (pause excepted, which is a `watch` channel because a turn waits on it).
//! Nothing in here decides anything: `turn.rs` decides what a turn does,
//! `compaction.rs` when to compact, `worker.rs` which job runs next.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use actix::Addr;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::agents::{self, ParentLink, Registry};
use super::broadcaster::{Broadcaster, Published};
use super::compactor::Compactor;
use super::outbox::Client;
use super::session_log::{self, SessionLog, StorageError};
use crate::approval::{Policy, Rule};
use crate::context::{Conversation, Prepared};
use crate::hooks::Hooks;
use crate::input::{self, Resolvers};
use crate::protocol::{
    ContextSource, DecidedBy, Decision, ErrorCode, Event, Level, LogEntry, PodState, RuleInfo,
    Scope, Segment, Status, TurnRef, Usage,
};
use crate::provider::{ModelRequest, Provider};
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// Failed compactions in a row after which automatic compaction stops.
pub const MAX_FAILURES: u32 = 3;

/// When to compact: at `compact_at` × `context_window` tokens (the policy
/// that reads these is `compaction.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub context_window: u64,
    pub compact_at: f64,
}

impl Thresholds {
    pub fn limit(&self) -> u64 {
        (self.context_window as f64 * self.compact_at) as u64
    }
}

/// Counts failed compactions in a row (see `compaction.rs`).
#[derive(Debug, Default)]
pub struct Breaker {
    pub failures: u32,
    /// Set by a manual compaction so the check right after it does not
    /// compact again automatically.
    pub skip_next_auto: bool,
}

impl Breaker {
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    pub fn open(&self) -> bool {
        self.failures >= MAX_FAILURES
    }
}

pub struct WorkerConfig {
    pub max_steps: usize,
    pub system_prompt: String,
    pub compaction: Thresholds,
    /// The rules from flags and the config file, as `list_rules` shows them.
    pub configured_rules: Vec<RuleInfo>,
    /// Where `scope: "always"` writes its rule: the config file the pod
    /// read, else the default one; `None` when there is no config directory.
    pub config_path: Option<std::path::PathBuf>,
    /// `--allow-remote-always`: a client over the network may answer `always`.
    pub allow_remote_always: bool,
}

/// A run waiting for its turn.
pub struct QueuedRun {
    pub segments: Vec<Segment>,
    /// The blobs stored from `file_ref`s to images (`user_input.resolved`).
    pub resolved: std::collections::BTreeMap<String, String>,
    pub request_id: Option<String>,
    /// Who sent it, to hear that a hook refused it.
    pub client: Option<Client>,
}

/// An answer to an approval request — a person's, or an `approval_request`
/// hook's — with the client to tell once it is committed.
pub struct Answer {
    pub call_id: String,
    pub decision: Decision,
    pub scope: Scope,
    pub message: Option<String>,
    /// The deciding connection's `hello` label, or the hook's `hook:<event>#<n>`.
    pub label: Option<String>,
    pub by: DecidedBy,
    /// The deciding client's IP address when it came over the network.
    pub remote: Option<String>,
    /// The client to answer; `None` for a hook.
    pub client: Option<Client>,
}

/// The first answer to `call_id` takes it out of the pending requests and
/// gets the channel to the running step; any later one gets `None` (the
/// call is decided, or was never pending).
pub fn take_pending(state: &mut JobState, call_id: &str) -> Option<mpsc::UnboundedSender<Answer>> {
    let position = state.pending.iter().position(|id| id == call_id)?;
    state.pending.remove(position);
    state.answers.clone()
}

/// An allow rule a decision of this conversation added.
#[derive(Debug, Clone)]
pub struct SessionRule {
    pub rule: Rule,
    /// The session and seq of that `approval_decision`.
    pub session_id: uuid::Uuid,
    pub seq: u64,
}

/// A `revoke_rule` whose entry waits for the next step boundary (or is
/// committed at once when idle); its rule is already out of force.
pub struct Revocation {
    pub rule: String,
    pub label: Option<String>,
    pub remote: Option<String>,
    pub client: Client,
    /// What was taken out, put back if the entry cannot be committed.
    pub removed: Vec<SessionRule>,
}

/// State the worker and its running job both read and change.
pub struct JobState {
    /// `notify` messages to commit at the next step boundary.
    pub notifies: Vec<String>,
    /// Notes of background jobs that ended, for the next step boundary.
    pub job_notes: Vec<String>,
    /// A `set_model` to commit at the next step boundary (or at once when idle).
    pub model_request: Option<String>,
    pub compact_requested: bool,
    pub compacting: bool,
    /// The running turn.
    pub turn: Option<TurnRef>,
    pub queued: usize,
    pub breaker: Breaker,
    /// The pod is shutting down, and why: finish the current job, start
    /// nothing new (not even a post-turn compaction, which would call the
    /// model).
    pub stopping: Option<String>,
    /// The approval policy; its mode changes at run time (`set_approval`).
    pub policy: Policy,
    /// Call ids of the running step's approval requests that wait for an
    /// answer, in call order. The first answer takes its id out of here.
    pub pending: Vec<String>,
    /// Where answers go to the running step.
    pub answers: Option<mpsc::UnboundedSender<Answer>>,
    /// Allow rules added by `scope: "session"`/`"always"` decisions of this
    /// conversation (this session and those it was compacted from), less
    /// those revoked.
    pub session_rules: Vec<SessionRule>,
    /// Hooks' `context`s to commit at the next step boundary.
    pub hook_context: Vec<String>,
    /// `revoke_rule`s to commit at the next step boundary.
    pub revocations: Vec<Revocation>,
    /// The model requests go to now.
    pub model: String,
    /// `--model` was typed and the first conversation has not been settled
    /// yet: there, the typed model wins over the session's own choice.
    pub model_typed: bool,
    /// The size of the last model request, in tokens, and whether the
    /// server said so or the pod estimated it.
    pub context_tokens: u64,
    pub context_source: ContextSource,
    /// The context window a server stated when a request overflowed it,
    /// when smaller than `--context-window`: compaction then follows it.
    pub learned_window: Option<u64>,
    /// What this pod's model calls used so far (its sessions' turns, the
    /// running one included): its share of `tree_usage`, and what a
    /// child's budget is checked against.
    pub spent: Usage,
    /// The current session (kept as sessions switch), for what a child
    /// tells its parent.
    pub session_id: uuid::Uuid,
}

impl JobState {
    pub fn new(policy: Policy, model: String) -> Self {
        Self {
            notifies: Vec::new(),
            job_notes: Vec::new(),
            model_request: None,
            compact_requested: false,
            compacting: false,
            turn: None,
            queued: 0,
            breaker: Breaker::default(),
            stopping: None,
            policy,
            pending: Vec::new(),
            answers: None,
            session_rules: Vec::new(),
            hook_context: Vec::new(),
            revocations: Vec::new(),
            model,
            model_typed: false,
            context_tokens: 0,
            context_source: ContextSource::Estimate,
            learned_window: None,
            spent: Usage::default(),
            session_id: uuid::Uuid::nil(),
        }
    }

    /// `--model` was typed: the conversation the pod starts on switches to
    /// it, whatever `/model` chose in it before.
    pub fn with_model_typed(mut self, typed: bool) -> Self {
        self.model_typed = typed;
        self
    }

    /// The status clients see. States rank `compacting` > `waiting` >
    /// `paused` > `running` > `idle`; a pause shows only while it holds a
    /// turn (a pause sent while idle holds the next one).
    pub fn status(&self, paused: bool, context_window: u64, jobs: usize) -> Status {
        let state = if self.compacting {
            PodState::Compacting
        } else if !self.pending.is_empty() {
            PodState::Waiting
        } else if self.turn.is_some() && paused {
            PodState::Paused
        } else if self.turn.is_some() {
            PodState::Running
        } else {
            PodState::Idle
        };
        Status {
            state,
            queued: self.queued,
            pending_approvals: self.pending.clone(),
            approval: self.policy.mode,
            model: self.model.clone(),
            context_tokens: self.context_tokens,
            context_source: self.context_source,
            context_window,
            turn: self.turn.clone(),
            jobs,
            agents: Vec::new(),
            tree_usage: Usage::default(),
        }
    }
}

/// Everything a job needs, shared by the worker and its jobs.
pub struct JobEnv {
    pub session_log: Addr<SessionLog>,
    pub broadcaster: Addr<Broadcaster>,
    pub compactor: Addr<Compactor>,
    pub provider: Arc<dyn Provider>,
    pub toolbox: Arc<Toolbox>,
    /// The config file's `[[hooks]]`.
    pub hooks: Arc<Hooks>,
    pub resolvers: Arc<Resolvers>,
    pub workspace: Workspace,
    pub config: WorkerConfig,
    pub state: Rc<RefCell<JobState>>,
    pub paused: watch::Receiver<bool>,
    /// The checkpoint store and the conversation's checkpoint ids.
    pub checkpoints: crate::checkpoint::serve::Handle,
    /// What the `environment` entry needs a process to learn, kept between
    /// turns.
    pub probe: Rc<super::probe::Probe>,
    /// This pod's children (subagents) and what delegation may do here.
    pub agents: Rc<RefCell<Registry>>,
    /// A child pod's way to its parent; `None` for a top pod.
    pub parent: Option<ParentLink>,
    /// A child pod's token budget: its turn ends (`budget`) once its usage
    /// reaches it.
    pub budget: Option<u64>,
}

impl JobEnv {
    /// Sets the context gauge to an estimate of `conversation`'s next
    /// request: the figure the last model call reported belongs to the
    /// conversation before a switch or a compaction, and a client showing
    /// it would mislead.
    pub fn refresh_context_estimate(&self, conversation: &mut Conversation) {
        let estimate = crate::provider::estimate::estimate_request(&self.request(conversation));
        let mut state = self.state.borrow_mut();
        state.context_tokens = estimate;
        state.context_source = ContextSource::Estimate;
    }

    /// Reads, on the blocking pool, the files that the user inputs of
    /// `conversation` (and of `pending`, not committed yet) name and that
    /// are not flattened yet. A request is built on the actor thread the
    /// clients' fan-out runs on, and a slow disk, a large file or a FIFO
    /// there would stall every client.
    pub async fn read_inputs(
        &self,
        conversation: &Conversation,
        pending: &[LogEntry],
    ) -> Vec<(usize, input::Flattened)> {
        let todo = conversation.inputs_to_read(pending);
        if todo.is_empty() {
            return Vec::new();
        }
        let workspace = self.workspace.clone();
        let resolvers = Arc::clone(&self.resolvers);
        tokio::task::spawn_blocking(move || {
            todo.into_iter()
                .map(|(index, segments, resolved)| {
                    let flat = input::flatten(&segments, &resolved, &workspace, &resolvers);
                    (index, flat)
                })
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// [`JobEnv::read_inputs`] for the committed entries, kept in
    /// `conversation`: what a caller does before building a request.
    pub async fn read_logged_inputs(&self, conversation: &mut Conversation) {
        let read = self.read_inputs(conversation, &[]).await;
        conversation.insert_read(read);
    }

    /// The model request for `conversation` as it stands, borrowed from it.
    pub fn request<'a>(&'a self, conversation: &'a mut Conversation) -> ModelRequest<'a> {
        let prepared = conversation.prepare(&self.workspace, &self.resolvers);
        self.request_from(prepared)
    }

    /// The model request for a prepared conversation.
    pub fn request_from<'a>(&'a self, prepared: Prepared<'a>) -> ModelRequest<'a> {
        let mut specs = self.toolbox.specs();
        specs.extend(agents::specs(&self.agents.borrow(), self.toolbox.limits()));
        prepared.request(&self.config.system_prompt, Cow::Owned(specs))
    }

    /// Sends an event to every client.
    pub fn publish(&self, event: Event) {
        self.broadcaster.do_send(Published::Event(Box::new(event)));
    }

    pub fn publish_usage(&self, usage: Usage) {
        self.broadcaster.do_send(Published::Usage(usage));
    }

    /// The status clients see, children included: the pod is `waiting`
    /// while any child waits, and its `pending_approvals` list theirs too,
    /// so one place shows everything that waits for a person.
    pub fn status(&self) -> Status {
        let paused = *self.paused.borrow();
        let window = self.thresholds().context_window;
        let mut status = self
            .state
            .borrow()
            .status(paused, window, self.toolbox.jobs().running());
        status.tree_usage = self.state.borrow().spent;
        let agents = self.agents.borrow();
        for child in &agents.children {
            status.tree_usage.add(&child.status.usage);
            status
                .pending_approvals
                .extend(child.status.pending_approvals.iter().cloned());
        }
        let child_waits = agents
            .children
            .iter()
            .any(|c| !c.status.pending_approvals.is_empty());
        if child_waits && status.state != PodState::Compacting {
            status.state = PodState::Waiting;
        }
        status.agents = agents.statuses();
        status
    }

    /// When to compact: `--context-window` and `--compact-at`, with the
    /// window a server stated in an overflow error when it is smaller.
    pub fn thresholds(&self) -> Thresholds {
        let mut thresholds = self.config.compaction;
        if let Some(window) = self.state.borrow().learned_window {
            thresholds.context_window = thresholds.context_window.min(window);
        }
        thresholds
    }

    pub fn publish_status(&self) {
        let status = self.status();
        if let Some(parent) = &self.parent {
            parent.tell(agents::News::Status {
                state: status.state,
                pending: status.pending_approvals.clone(),
                usage: status.tree_usage,
                session_id: self.session_id(),
            });
        }
        self.broadcaster.do_send(Published::Status(status));
    }

    /// The current session, as the last settled conversation names it.
    pub fn session_id(&self) -> uuid::Uuid {
        self.state.borrow().session_id
    }

    /// An error of the pod itself: every client hears it.
    pub fn publish_error(&self, code: ErrorCode, message: impl Into<String>) {
        self.publish(Event::error(code, message, None));
    }

    pub fn notify_all(&self, level: Level, source: &str, message: impl Into<String>) {
        self.publish(Event::Notification {
            level,
            source: source.into(),
            message: message.into(),
        });
    }

    pub fn stopping(&self) -> bool {
        self.state.borrow().stopping.is_some()
    }

    /// Holds the job while the pod is paused. False if cancelled meanwhile.
    pub async fn wait_while_paused(&self, cancel: &CancellationToken) -> bool {
        let mut paused = self.paused.clone();
        tokio::select! {
            result = paused.wait_for(|p| !*p) => result.is_ok() && !cancel.is_cancelled(),
            _ = cancel.cancelled() => false,
        }
    }
}

/// Commits an entry; only once it is durable does the conversation grow.
/// A storage failure is told to every client and returned.
pub async fn commit(
    env: &JobEnv,
    conversation: &mut Conversation,
    entry: LogEntry,
) -> Result<u64, StorageError> {
    let result = session_log::append(&env.session_log, entry.clone()).await;
    match &result {
        Ok(_) => conversation.push(entry),
        Err(e) => env.publish_error(ErrorCode::StorageError, e.to_string()),
    }
    result
}
