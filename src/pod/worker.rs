//! The `Worker` actor: owns the run queue and the conversation, and runs one
//! job at a time — a turn, a batch of idle `notify`s, a model change, a
//! compaction.
//!
//! Jobs run as futures spawned in the worker's context, so the worker keeps
//! answering messages (queueing runs, cancel, pause, approvals) while a turn
//! streams. The conversation is moved into the job and handed back when it
//! ends: exactly one piece of code can change it at a time, without locks.
//! The one-job rule is also what serialises compactions.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use actix::prelude::*;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::agent_tools;
use super::agents::{FromChild, ToChild};
use super::broadcaster::Shutdown;
use super::checkpoint;
pub use super::checkpoint::RewindRequest;
use super::compaction;
use super::hooks;
use super::job::{take_pending, Answer, JobEnv, JobState, QueuedRun};
use super::outbox::Client;
use super::recovery;
use super::rules;
use super::session_log::{Switch, SwitchTo};
use super::turn;
use crate::context::Conversation;
use crate::protocol::{
    answer, ApprovalMode, CompactReason, DecidedBy, Decision, ErrorCode, Scope, Segment, TurnRef,
};

/// A run whose segments were checked (file refs resolve and are readable).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Run {
    pub segments: Vec<Segment>,
    /// The blobs stored from `file_ref`s to images, by segment index.
    pub resolved: std::collections::BTreeMap<String, String>,
    pub client: Client,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Notify {
    pub message: String,
    pub client: Client,
}

#[derive(Message)]
#[rtype(result = "()")]
pub enum Control {
    /// Without a run: the running turn. With one: that run, queued or running.
    Cancel(Client, Option<String>),
    Pause(Client),
    Resume(Client),
    Compact(Client),
    Shutdown(Client),
    SetApproval(Client, ApprovalMode),
    SetModel(Client, String),
    /// `new_session`, `fork`, `resume_session`: idle only.
    Switch(Client, SwitchTo),
    /// `list_rules`.
    ListRules(Client),
    /// `revoke_rule`: the rule, and who revoked it.
    RevokeRule {
        client: Client,
        rule: String,
        label: Option<String>,
        remote: Option<std::net::IpAddr>,
    },
    /// `rewind`: idle only.
    Rewind(Client, RewindRequest),
    /// `list_jobs`.
    ListJobs(Client),
    /// `kill_job`.
    KillJob(Client, u64),
    /// `get_job_output`.
    GetJobOutput(Client, u64),
    /// `list_agents`.
    ListAgents(Client),
    /// `remove_agent`: the child's full name.
    RemoveAgent(Client, String),
}

/// A background job started or ended ([`crate::tools::jobs`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct JobChanged(pub crate::tools::jobs::JobEvent);

/// A person's answer to an approval request.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Approve {
    pub call_id: String,
    pub decision: Decision,
    pub scope: Scope,
    pub message: Option<String>,
    /// The deciding connection's `hello` label.
    pub label: Option<String>,
    /// The client's address when it answers over the network, else `None`.
    /// `scope: "always"` from there needs `--allow-remote-always`.
    pub remote: Option<std::net::IpAddr>,
    pub client: Client,
}

/// Stop the pod (a signal, or `shutdown`): cancel the turn, flush, say
/// goodbye to every client, stop the system.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop {
    pub reason: String,
}

type Job = Pin<Box<dyn Future<Output = Conversation>>>;

/// What the worker does once the pod has stopped.
pub enum Exit {
    /// The top pod: the process's event loop stops.
    System,
    /// A child pod: says so (its host then closes its socket and log);
    /// the process goes on.
    Child(watch::Sender<bool>),
}

pub struct Worker {
    env: Rc<JobEnv>,
    queue: VecDeque<QueuedRun>,
    /// `None` while a job holds it.
    conversation: Option<Conversation>,
    /// Cancels the running job.
    running: Option<CancellationToken>,
    paused: watch::Sender<bool>,
    /// A session switch asked for while a quiet job (the check after a
    /// turn, a notify) finished: it runs next.
    switch_next: Option<(Client, SwitchTo)>,
    /// A `rewind` waiting, like a switch, for a quiet job to finish.
    rewind_next: Option<(Client, RewindRequest)>,
    exit: Option<Exit>,
}

impl Worker {
    /// A worker for `env` (whose `paused` receiver belongs to `paused`).
    pub fn new(env: JobEnv, paused: watch::Sender<bool>, conversation: Conversation) -> Self {
        Self {
            env: Rc::new(env),
            queue: VecDeque::new(),
            conversation: Some(conversation),
            running: None,
            paused,
            switch_next: None,
            rewind_next: None,
            exit: Some(Exit::System),
        }
    }

    /// What to do once stopped (the top pod's default: stop the process).
    pub fn with_exit(mut self, exit: Exit) -> Self {
        self.exit = Some(exit);
        self
    }

    /// A pause channel for [`JobEnv::paused`] and [`Worker::new`].
    pub fn pause_channel() -> (watch::Sender<bool>, watch::Receiver<bool>) {
        watch::channel(false)
    }

    fn publish_status(&self) {
        self.env.state.borrow_mut().queued = self.queue.len();
        self.env.publish_status();
    }

    fn state(&self) -> std::cell::RefMut<'_, JobState> {
        self.env.state.borrow_mut()
    }

    /// Starts `job` on the conversation, then the next one.
    fn spawn(&mut self, ctx: &mut Context<Self>, job: impl FnOnce(Conversation) -> Job) {
        let Some(conversation) = self.conversation.take() else {
            return;
        };
        job(conversation)
            .into_actor(self)
            .map(|conversation, worker, ctx| {
                worker.conversation = Some(conversation);
                worker.running = None;
                worker.pump(ctx);
            })
            .spawn(ctx);
    }

    /// Starts the next job if the worker is free.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.running.is_some() || self.conversation.is_none() {
            return;
        }
        let stopping = self.state().stopping.clone();
        if stopping.is_some() {
            let notes = self.env.toolbox.jobs().stop_all();
            if !notes.is_empty() {
                let env = self.env.clone();
                self.running = Some(CancellationToken::new());
                self.spawn(ctx, move |mut conversation| {
                    Box::pin(async move {
                        let _ = turn::commit_job_notes(&env, &mut conversation, notes).await;
                        conversation
                    })
                });
                return;
            }
        }
        if let Some(reason) = stopping {
            let broadcaster = self.env.broadcaster.clone();
            self.running = Some(CancellationToken::new());
            // Children stop first, each as a pod stops.
            let children: Vec<watch::Receiver<bool>> = self
                .env
                .agents
                .borrow()
                .children
                .iter()
                .map(|c| c.link.stopped.clone())
                .collect();
            let exit = self.exit.take();
            async move {
                for mut stopped in children {
                    let _ = stopped.wait_for(|s| *s).await;
                }
                let _ = broadcaster.send(Shutdown { reason }).await;
                exit
            }
            .into_actor(self)
            .map(|exit, _, ctx| match exit {
                Some(Exit::System) => System::current().stop(),
                Some(Exit::Child(stopped)) => {
                    let _ = stopped.send(true);
                    ctx.stop();
                }
                None => {}
            })
            .wait(ctx);
            return;
        }
        if let Some((client, to)) = self.switch_next.take() {
            return self.switch(ctx, client, to);
        }
        if let Some((client, request)) = self.rewind_next.take() {
            return self.rewind(ctx, client, request);
        }
        let env = self.env.clone();
        let cancel = CancellationToken::new();
        // One job at a time: a compaction request waits for the notifies
        // ahead of it instead of being taken (and dropped) with them.
        let (notifies, model, injected, compact_now) = {
            let mut state = self.state();
            let notifies = std::mem::take(&mut state.notifies);
            let model = state.model_request.take();
            let injected = !state.hook_context.is_empty()
                || !state.revocations.is_empty()
                || !state.job_notes.is_empty()
                || !self.env.agents.borrow().entries.is_empty();
            let compact = notifies.is_empty()
                && model.is_none()
                && !injected
                && std::mem::take(&mut state.compact_requested);
            (notifies, model, injected, compact)
        };
        if !notifies.is_empty() || model.is_some() || injected {
            self.running = Some(cancel);
            self.spawn(ctx, move |mut conversation| {
                Box::pin(async move {
                    if turn::close_unfinished(&env, &mut conversation)
                        .await
                        .is_err()
                    {
                        return conversation;
                    }
                    if !notifies.is_empty() {
                        let _ = turn::commit_notifies(&env, &mut conversation, notifies).await;
                    }
                    if let Some(model) = model {
                        let _ = turn::commit_model_change(&env, &mut conversation, model).await;
                    }
                    let notes = std::mem::take(&mut env.state.borrow_mut().job_notes);
                    let _ = turn::commit_job_notes(&env, &mut conversation, notes).await;
                    let _ = hooks::commit_context(&env, &mut conversation).await;
                    let _ = rules::commit_revocations(&env, &mut conversation).await;
                    let _ = agent_tools::commit_entries(&env, &mut conversation).await;
                    conversation
                })
            });
        } else if compact_now {
            self.running = Some(cancel);
            self.spawn(ctx, move |mut conversation| {
                Box::pin(async move {
                    if turn::close_unfinished(&env, &mut conversation)
                        .await
                        .is_ok()
                    {
                        compaction::compact(&env, &mut conversation, CompactReason::Manual).await;
                    }
                    conversation
                })
            });
        } else if let Some(run) = self.queue.pop_front() {
            let turn = TurnRef {
                turn_id: turn::new_turn_id(),
                request_id: run.request_id.clone(),
            };
            self.state().turn = Some(turn.clone());
            self.running = Some(cancel.clone());
            self.publish_status();
            self.spawn(ctx, move |mut conversation| {
                Box::pin(async move {
                    turn::run_turn(&env, &mut conversation, run, turn, cancel).await;
                    env.state.borrow_mut().turn = None;
                    // A turn whose end failed to commit is closed first, by
                    // the next job, not summarised away open.
                    if !conversation.has_open_turn() {
                        compaction::after_turn(&env, &mut conversation).await;
                    }
                    conversation
                })
            });
        } else {
            self.publish_status();
        }
    }

    /// Whether the pod is idle as a method that switches sessions needs it
    /// — no turn running or queued, no compaction, not stopping, no other
    /// switch waiting; tells `client` `busy` otherwise. A quiet job still
    /// finishing (the check after a turn) is not busy: the switch waits
    /// for it.
    fn idle_for(&mut self, client: &Client) -> bool {
        let idle = {
            let state = self.env.state.borrow();
            state.turn.is_none() && !state.compacting && state.stopping.is_none()
        } && self.queue.is_empty()
            && self.switch_next.is_none()
            && self.rewind_next.is_none();
        if !idle {
            client.error(
                ErrorCode::Busy,
                "the pod is busy (a turn runs or is queued); try again when it is idle",
            );
        }
        idle
    }

    /// Makes another session current: the session log switches (new log
    /// durable, pointer moved, every client told), then the conversation
    /// is settled — rules rebuilt, the model reconciled, an open turn
    /// closed — before anything else runs.
    fn switch(&mut self, ctx: &mut Context<Self>, client: Client, to: SwitchTo) {
        let env = self.env.clone();
        self.running = Some(CancellationToken::new());
        self.spawn(ctx, move |mut conversation| {
            Box::pin(async move {
                let configured = (
                    env.provider.name().to_owned(),
                    env.provider.model().to_owned(),
                );
                let (provider, model) = match &to {
                    // No `model_change` in it says otherwise, so an empty
                    // session runs on the pod's configured model; recording
                    // that one keeps it empty (no `model_change` right
                    // after its `session_start`).
                    SwitchTo::New => configured,
                    // The copies were produced by the model in effect at the
                    // fork point; settling records any change from there.
                    SwitchTo::Fork { at_seq } => conversation
                        .recorded_model_at(*at_seq)
                        .unwrap_or(configured),
                    SwitchTo::Resume { .. }
                    | SwitchTo::Compacted { .. }
                    | SwitchTo::Rewind { .. } => (configured.0, env.state.borrow().model.clone()),
                };
                // The snapshot that follows `session_switched` carries the
                // status as the broadcaster last heard it: the turn before
                // may have ended unannounced (its quiet post-turn check
                // held the worker), and a new session is known to run on
                // `model`. Say so first, so that snapshot is not stale.
                let before = env.state.borrow().model.clone();
                if matches!(to, SwitchTo::New) {
                    env.state.borrow_mut().model = model.clone();
                }
                env.publish_status();
                let switched = env
                    .session_log
                    .send(Switch {
                        to,
                        provider,
                        model,
                    })
                    .await;
                if !matches!(switched, Ok(Ok(_))) {
                    env.state.borrow_mut().model = before;
                    env.publish_status();
                }
                match switched {
                    Ok(Ok(new)) => {
                        conversation = Conversation::new(new.session_id, new.entries);
                        // Through the broadcaster's mailbox, like every
                        // frame: after the `session_switched` and snapshot
                        // `SessionLog` published before it answered.
                        if client.request_id.is_some() {
                            client.respond(answer::Switched {
                                session_id: new.session_id,
                            });
                        }
                        recovery::settle(&env, &mut conversation).await;
                        recovery::close_open_turn(&env, &mut conversation).await;
                        hooks::session_start(&env, &conversation).await;
                    }
                    Ok(Err(e)) => client.error(e.code, e.message),
                    Err(e) => client.error(
                        ErrorCode::ShuttingDown,
                        format!("the session log stopped: {e}"),
                    ),
                }
                conversation
            })
        });
    }
}

impl Worker {
    /// Runs a `rewind` as the next job: files restored and the entries
    /// committed (into a fork when the conversation is rewound too), then
    /// the client answered; a fork is settled like any switch.
    fn rewind(&mut self, ctx: &mut Context<Self>, client: Client, request: RewindRequest) {
        let env = self.env.clone();
        self.running = Some(CancellationToken::new());
        self.spawn(ctx, move |mut conversation| {
            Box::pin(async move {
                match checkpoint::rewind(&env, &mut conversation, request).await {
                    Ok(done) => {
                        let switched = done.switched.is_some();
                        if let Some(new) = done.switched {
                            conversation = Conversation::new(new.session_id, new.entries);
                        }
                        client.respond(answer::Rewound {
                            session_id: done.session_id,
                            files_restored: done.files_restored,
                            conflicts: done.conflicts,
                            not_restored: done.not_restored,
                            processes_stopped: done.processes_stopped,
                        });
                        if switched {
                            recovery::settle(&env, &mut conversation).await;
                        }
                    }
                    Err(refused) => client.error(refused.code, refused.message),
                }
                conversation
            })
        });
    }
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Before anything else: settle the conversation the pod starts on —
        // resume a turn that waits for approvals, close any other open one.
        let env = self.env.clone();
        let cancel = CancellationToken::new();
        self.running = Some(cancel.clone());
        let waiting = self
            .conversation
            .as_ref()
            .is_some_and(Conversation::waiting_for_approval);
        let mut answers = None;
        if waiting {
            if let Some(conversation) = &self.conversation {
                self.state().turn = Some(conversation.open_turn());
                answers = Some(turn::reopen_answers(&env, conversation));
            }
        }
        self.spawn(ctx, move |mut conversation| {
            Box::pin(async move {
                recovery::settle(&env, &mut conversation).await;
                // Its context is queued for the next step boundary: that of
                // a resumed turn, or the next turn's.
                hooks::session_start(&env, &conversation).await;
                checkpoint::settle_interrupted_rewind(&env, &mut conversation).await;
                if let Some(answers) = answers {
                    let turn = conversation.open_turn();
                    turn::resume_turn(&env, &mut conversation, turn, cancel, answers).await;
                    env.state.borrow_mut().turn = None;
                } else {
                    recovery::close_open_turn(&env, &mut conversation).await;
                }
                conversation
            })
        });
    }
}

impl Handler<Run> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Run, ctx: &mut Context<Self>) {
        if self.state().stopping.is_some() {
            return msg
                .client
                .error(ErrorCode::ShuttingDown, "the pod is shutting down");
        }
        // Runs ahead: those queued and a turn that runs. A quiet job (a
        // switch settling, the check after a turn) is no run: one sent
        // meanwhile starts as soon as it ends, and is not queued behind it.
        let turn_running = self.state().turn.is_some();
        let ahead = self.queue.len() + usize::from(turn_running);
        msg.client.respond(answer::Queued { queued: ahead });
        self.queue.push_back(QueuedRun {
            segments: msg.segments,
            resolved: msg.resolved,
            request_id: msg.client.request_id.clone(),
            client: Some(msg.client),
        });
        // A run that starts at once — or once a quiet job ends — never
        // shows as queued: the status goes out when it starts.
        if turn_running {
            self.publish_status();
        }
        self.pump(ctx);
    }
}

impl Handler<JobChanged> for Worker {
    type Result = ();

    /// A start changes `status.jobs`; an end also leaves a note, committed
    /// at the next step boundary or at once when idle.
    fn handle(&mut self, msg: JobChanged, ctx: &mut Context<Self>) {
        if let crate::tools::jobs::JobEvent::Ended(note) = msg.0 {
            self.state().job_notes.push(note);
            self.pump(ctx);
        }
        self.env.publish_status();
    }
}

impl Handler<Notify> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Notify, ctx: &mut Context<Self>) {
        self.state().notifies.push(msg.message);
        msg.client.ack();
        self.pump(ctx);
    }
}

impl Handler<Approve> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Approve, _: &mut Context<Self>) {
        if msg.scope == Scope::Always
            && msg.remote.is_some()
            && !self.env.config.allow_remote_always
        {
            return msg.client.error(
                ErrorCode::Forbidden,
                "`always` changes the policy of every future session, so it is refused over \
                 the network unless the pod was started with --allow-remote-always; answer \
                 `session` instead",
            );
        }
        // The first answer takes the call out of `pending`; any later one,
        // like an answer to nothing, is `not_pending`.
        let sender = take_pending(&mut self.state(), &msg.call_id);
        let answer = Answer {
            call_id: msg.call_id.clone(),
            decision: msg.decision,
            scope: msg.scope,
            message: msg.message,
            label: msg.label,
            by: DecidedBy::User,
            remote: msg.remote.map(|ip| ip.to_string()),
            client: Some(msg.client.clone()),
        };
        match sender {
            Some(sender) => {
                if sender.send(answer).is_err() {
                    msg.client.error(
                        ErrorCode::NotPending,
                        format!("{} is no longer waiting for an answer", msg.call_id),
                    );
                }
            }
            None => {
                // A child's request: the child answers it, and commits the
                // decision in its own log with this client's label.
                if let Some(child) = self.env.agents.borrow().waiting_on(&msg.call_id) {
                    return child.link.tell(ToChild::Approve {
                        call_id: msg.call_id,
                        decision: msg.decision,
                        scope: msg.scope,
                        message: answer.message,
                        label: answer.label,
                        remote: msg.remote,
                        client: msg.client,
                    });
                }
                msg.client.error(
                    ErrorCode::NotPending,
                    format!(
                        "no approval request {:?} is waiting (unknown, already decided, or not \
                         waiting)",
                        msg.call_id
                    ),
                )
            }
        }
    }
}

impl Handler<FromChild> for Worker {
    type Result = ();

    /// A child's status or turn end: kept, shown in this pod's status, and
    /// a turn end committed as `agent_turn_end` (at once when idle).
    fn handle(&mut self, msg: FromChild, ctx: &mut Context<Self>) {
        if self.env.agents.borrow_mut().hear(msg) {
            self.env.publish_status();
            self.pump(ctx);
        }
    }
}

impl Handler<ToChild> for Worker {
    type Result = ();

    /// What this pod's parent asks, taken as the same method from a client.
    fn handle(&mut self, msg: ToChild, ctx: &mut Context<Self>) {
        match msg {
            ToChild::Run(segments) => {
                if self.state().stopping.is_some() {
                    return;
                }
                let turn_running = self.state().turn.is_some();
                self.queue.push_back(QueuedRun {
                    segments,
                    resolved: Default::default(),
                    request_id: None,
                    client: None,
                });
                if turn_running {
                    self.publish_status();
                }
                self.pump(ctx);
            }
            ToChild::Approve {
                call_id,
                decision,
                scope,
                message,
                label,
                remote,
                client,
            } => self.handle(
                Approve {
                    call_id,
                    decision,
                    scope,
                    message,
                    label,
                    remote,
                    client,
                },
                ctx,
            ),
            ToChild::Cancel => {
                if self.state().turn.is_some() {
                    if let Some(cancel) = &self.running {
                        cancel.cancel();
                    }
                }
            }
            ToChild::Stop => self.handle(
                Stop {
                    reason: "its parent pod stopped".into(),
                },
                ctx,
            ),
        }
    }
}

impl Handler<Control> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Control, ctx: &mut Context<Self>) {
        match msg {
            Control::Cancel(client, None) => {
                if self.state().turn.is_some() {
                    if let Some(cancel) = &self.running {
                        cancel.cancel();
                    }
                }
                client.ack();
            }
            Control::Cancel(client, Some(run)) => {
                let queued = self
                    .queue
                    .iter()
                    .position(|r| r.request_id.as_deref() == Some(run.as_str()));
                let running = self
                    .state()
                    .turn
                    .as_ref()
                    .is_some_and(|t| t.request_id.as_deref() == Some(run.as_str()));
                if let Some(index) = queued {
                    self.queue.remove(index);
                    client.respond(answer::Cancelled { removed: true });
                    self.publish_status();
                } else if running {
                    if let Some(cancel) = &self.running {
                        cancel.cancel();
                    }
                    client.respond(answer::Cancelled { removed: false });
                } else {
                    client.error(
                        ErrorCode::NotRunning,
                        format!("run {run:?} is neither queued nor running"),
                    );
                }
            }
            Control::Pause(client) => {
                let _ = self.paused.send(true);
                self.publish_status();
                client.ack();
            }
            Control::Resume(client) => {
                let _ = self.paused.send(false);
                self.publish_status();
                client.ack();
            }
            Control::Compact(client) => {
                {
                    let mut state = self.state();
                    state.compact_requested = true;
                    state.breaker.reset();
                }
                client.ack();
                self.pump(ctx);
            }
            Control::Shutdown(client) => {
                client.ack();
                self.handle(
                    Stop {
                        reason: "requested by a client".into(),
                    },
                    ctx,
                );
            }
            Control::SetApproval(client, mode) => {
                if mode == ApprovalMode::Unknown {
                    return client.error(
                        ErrorCode::InvalidParams,
                        "unknown approval mode; use ask, edits, auto or read-only",
                    );
                }
                self.state().policy.mode = mode;
                self.publish_status();
                client.respond(answer::Ack);
            }
            Control::Switch(client, to) => {
                if self.idle_for(&client) {
                    self.switch_next = Some((client, to));
                    self.pump(ctx);
                }
            }
            Control::ListRules(client) => client.respond(answer::Rules {
                rules: rules::list(&self.env),
            }),
            Control::ListJobs(client) => client.respond(answer::Jobs {
                jobs: self.env.toolbox.jobs().list(),
            }),
            Control::GetJobOutput(client, job) => match self.env.toolbox.jobs().peek(job) {
                Some((info, output)) => client.respond(answer::JobOutput {
                    jobs: vec![info],
                    output,
                }),
                None => client.error(
                    crate::protocol::ErrorCode::JobNotFound,
                    format!("no background job {job}: `pod jobs` lists them"),
                ),
            },
            Control::ListAgents(client) => client.respond(answer::Agents {
                agents: self.env.agents.borrow().infos(),
            }),
            Control::RemoveAgent(client, name) => self.remove_agent(ctx, client, &name),
            Control::KillJob(client, job) => match self.env.toolbox.jobs().kill(job) {
                Ok(()) => client.ack(),
                Err(message) => client.error(crate::protocol::ErrorCode::JobNotFound, message),
            },
            Control::RevokeRule {
                client,
                rule,
                label,
                remote,
            } => {
                let remote = remote.map(|ip| ip.to_string());
                match rules::revoke(&self.env, &rule, label, remote, client.clone()) {
                    // Committed at the next step boundary, or at once when idle.
                    Ok(()) => self.pump(ctx),
                    Err((code, message)) => client.error(code, message),
                }
            }
            Control::Rewind(client, request) => {
                if self.idle_for(&client) {
                    self.rewind_next = Some((client, request));
                    self.pump(ctx);
                }
            }
            Control::SetModel(client, model) => {
                let model = model.trim().to_owned();
                if model.is_empty() {
                    return client.error(ErrorCode::InvalidParams, "`model` is empty");
                }
                // Committed at the next step boundary, or at once when idle.
                self.state().model_request = Some(model);
                client.respond(answer::Ack);
                self.pump(ctx);
            }
        }
    }
}

impl Handler<Stop> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Stop, ctx: &mut Context<Self>) {
        {
            let mut state = self.state();
            if state.stopping.is_some() {
                return;
            }
            state.stopping = Some(msg.reason);
        }
        self.queue.clear();
        if let Some(cancel) = &self.running {
            cancel.cancel();
        }
        for child in &self.env.agents.borrow().children {
            child.link.tell(ToChild::Stop);
        }
        let _ = self.paused.send(false);
        self.pump(ctx);
    }
}

impl Worker {
    /// `remove_agent`: an idle child is stopped and forgotten; its log
    /// stays, and its pointer says it was removed, so a restarted parent
    /// does not start it again. Its worktree, if it has one, goes when
    /// clean and stays otherwise; its branch always stays.
    fn remove_agent(&mut self, ctx: &mut Context<Self>, client: Client, name: &str) {
        let mut agents = self.env.agents.borrow_mut();
        let Some(index) = agents.children.iter().position(|c| c.name == name) else {
            return client.error(
                ErrorCode::NotFound,
                format!("this pod has no child pod {name:?}: `pod agents` lists them"),
            );
        };
        if agents.children[index].busy() {
            return client.error(
                ErrorCode::Busy,
                format!(
                    "{name} is running a turn; cancel it (`pod send --name {name}` … or `cancel` \
                     at its socket) or wait until it is idle"
                ),
            );
        }
        let child = agents.children.remove(index);
        agents.touch();
        let pointer = crate::store::pointer::path(&agents.pods_dir, name);
        drop(agents);
        child.link.tell(ToChild::Stop);
        let mut stopped = child.link.stopped.clone();
        let env = self.env.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
            let marked = tokio::task::spawn_blocking(move || mark_removed(&pointer)).await;
            let worktree = match &child.worktree {
                Some(worktree) => Some(removed_worktree(worktree).await),
                None => None,
            };
            match marked {
                Ok(Ok(())) => client.respond(answer::AgentRemoved { worktree }),
                Ok(Err(e)) => client.error(ErrorCode::StorageError, e),
                Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
            }
            env.publish_status();
        }
        .into_actor(self)
        .spawn(ctx);
    }
}

/// Removes a removed child's worktree if it is clean, and says what
/// became of it.
async fn removed_worktree(worktree: &super::worktree::Worktree) -> crate::protocol::AgentWorktree {
    let (removed, note) = match super::worktree::remove(worktree).await {
        super::worktree::Removal::Removed => (true, None),
        super::worktree::Removal::Kept(why) => (false, Some(why)),
    };
    crate::protocol::AgentWorktree {
        path: worktree.root.display().to_string(),
        branch: worktree.branch.clone(),
        removed: Some(removed),
        note,
    }
}

/// Marks a child's pointer removed (its log and session stay).
fn mark_removed(path: &std::path::Path) -> Result<(), String> {
    let pointer = crate::store::pointer::read(path).map_err(|e| e.to_string())?;
    let Some(mut pointer) = pointer else {
        return Ok(());
    };
    pointer.removed = true;
    crate::store::pointer::write(path, pointer)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
