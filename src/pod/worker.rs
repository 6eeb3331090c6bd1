//! The `Worker` actor: owns the run queue and the conversation, and runs one
//! job at a time — a turn, a batch of idle `notify`s, or a compaction.
//!
//! Jobs run as futures spawned in the worker's context, so the worker keeps
//! answering messages (queueing runs, cancel, pause) while a turn streams.
//! The conversation is moved into the job and handed back when it ends:
//! exactly one piece of code can change it at a time, without locks.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::broadcaster::{Broadcaster, Published, Shutdown};
use super::compactor::{self, Compactor};
use super::outbox::Outbox;
use super::session_log::SessionLog;
use super::turn::{self, TurnEnv};
use crate::context::Conversation;
use crate::input::{self, Resolvers};
use crate::protocol::{CompactReason, ErrorCode, Event, PodState, Response, Segment, Status};
use crate::provider::Provider;
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// The client a method came from, so answers reach it alone.
pub struct Client {
    pub outbox: Outbox,
    pub request_id: Option<String>,
}

impl Client {
    fn respond(&self, response: Response) {
        self.outbox.push_event(&Event::Response(Response {
            request_id: self.request_id.clone(),
            ..response
        }));
    }

    /// Acknowledges a method that has no result of its own; only clients that
    /// asked (sent a `request_id`) get one.
    fn ack(&self) {
        if self.request_id.is_some() {
            self.respond(Response::default());
        }
    }

    fn error(&self, code: ErrorCode, message: impl Into<String>) {
        self.outbox
            .push_event(&Event::error(code, message, self.request_id.clone()));
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Run {
    pub segments: Vec<Segment>,
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
    Cancel(Client),
    Pause(Client),
    Resume(Client),
    Compact(Client),
    Shutdown(Client),
}

/// Stop the pod (a signal, or `shutdown`): cancel the turn, flush, say
/// goodbye to every client, stop the system.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop {
    pub reason: String,
}

/// A run waiting for its turn.
pub struct QueuedRun {
    pub segments: Vec<Segment>,
    pub request_id: Option<String>,
}

/// State the worker shares with the job it is running.
#[derive(Default)]
pub struct Shared {
    /// `notify` messages to commit at the next step boundary.
    pub notifies: Vec<String>,
    pub compact_requested: bool,
    pub compacting: bool,
    pub paused: bool,
    pub running_turn: bool,
    pub queued: usize,
    pub breaker: compactor::Breaker,
    /// The pod is shutting down: finish the current job, start nothing new
    /// (not even a post-turn compaction, which would call the model).
    pub stopping: bool,
}

impl Shared {
    pub fn status(&self) -> Status {
        let state = if self.compacting {
            PodState::Compacting
        } else if self.paused {
            PodState::Paused
        } else if self.running_turn {
            PodState::Running
        } else {
            PodState::Idle
        };
        Status {
            state,
            queued: self.queued,
            ..Status::default()
        }
    }
}

pub struct WorkerConfig {
    pub max_steps: usize,
    pub system_prompt: String,
    pub compaction: compactor::Thresholds,
}

pub struct Worker {
    env: Rc<TurnEnv>,
    queue: VecDeque<QueuedRun>,
    /// `None` while a job holds it.
    conversation: Option<Conversation>,
    /// Cancels the running job.
    running: Option<CancellationToken>,
    paused: watch::Sender<bool>,
    stopping: Option<String>,
    next_turn: u64,
}

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        session_log: Addr<SessionLog>,
        broadcaster: Addr<Broadcaster>,
        compactor: Addr<Compactor>,
        provider: Arc<dyn Provider>,
        toolbox: Arc<Toolbox>,
        workspace: Workspace,
        config: WorkerConfig,
        conversation: Conversation,
    ) -> Self {
        let (paused, paused_rx) = watch::channel(false);
        let resolvers = Resolvers::for_workspace(&workspace);
        Self {
            env: Rc::new(TurnEnv {
                session_log,
                broadcaster,
                compactor,
                provider,
                tool_specs: toolbox.specs(),
                toolbox,
                resolvers,
                workspace,
                config,
                shared: Rc::new(RefCell::new(Shared::default())),
                paused: paused_rx,
            }),
            queue: VecDeque::new(),
            conversation: Some(conversation),
            running: None,
            paused,
            stopping: None,
            next_turn: 0,
        }
    }

    fn publish_status(&self) {
        let status = {
            let mut shared = self.env.shared.borrow_mut();
            shared.queued = self.queue.len();
            shared.status()
        };
        self.env.broadcaster.do_send(Published::Status(status));
    }

    /// Starts the next job if the worker is free.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.running.is_some() {
            return;
        }
        let Some(mut conversation) = self.conversation.take() else {
            return;
        };
        if let Some(reason) = self.stopping.clone() {
            self.conversation = Some(conversation);
            let broadcaster = self.env.broadcaster.clone();
            async move {
                let _ = broadcaster.send(Shutdown { reason }).await;
                System::current().stop();
            }
            .into_actor(self)
            .wait(ctx);
            return;
        }
        let env = self.env.clone();
        let cancel = CancellationToken::new();
        self.running = Some(cancel.clone());
        // One job at a time: a compaction request waits for the notifies
        // ahead of it instead of being taken (and dropped) with them.
        let (notifies, compact_now) = {
            let mut shared = env.shared.borrow_mut();
            let notifies = std::mem::take(&mut shared.notifies);
            let compact = notifies.is_empty() && std::mem::take(&mut shared.compact_requested);
            (notifies, compact)
        };
        let job: std::pin::Pin<Box<dyn std::future::Future<Output = Conversation>>> =
            if !notifies.is_empty() {
                Box::pin(async move {
                    turn::commit_notifies(&env, &mut conversation, notifies).await;
                    conversation
                })
            } else if compact_now {
                Box::pin(async move {
                    compactor::compact(&env, &mut conversation, CompactReason::Manual).await;
                    conversation
                })
            } else if let Some(run) = self.queue.pop_front() {
                self.next_turn += 1;
                let turn_id = format!("t{}", self.next_turn);
                env.shared.borrow_mut().running_turn = true;
                self.publish_status();
                Box::pin(async move {
                    turn::run_turn(&env, &mut conversation, run, turn_id, cancel).await;
                    env.shared.borrow_mut().running_turn = false;
                    compactor::after_turn(&env, &mut conversation).await;
                    conversation
                })
            } else {
                self.running = None;
                self.conversation = Some(conversation);
                self.publish_status();
                return;
            };
        job.into_actor(self)
            .map(|conversation, worker, ctx| {
                worker.conversation = Some(conversation);
                worker.running = None;
                worker.pump(ctx);
            })
            .spawn(ctx);
    }
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // A turn the previous pod never finished is closed before anything
        // else runs, so the log projects to a valid context again.
        if let Some(mut conversation) = self.conversation.take() {
            let env = self.env.clone();
            self.running = Some(CancellationToken::new());
            async move {
                turn::close_interrupted(&env, &mut conversation).await;
                conversation
            }
            .into_actor(self)
            .map(|conversation, worker, ctx| {
                worker.conversation = Some(conversation);
                worker.running = None;
                worker.pump(ctx);
            })
            .spawn(ctx);
        }
    }
}

impl Handler<Run> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Run, ctx: &mut Context<Self>) {
        if self.stopping.is_some() {
            return msg
                .client
                .error(ErrorCode::ShuttingDown, "the pod is shutting down");
        }
        if let Err(e) = input::check(&msg.segments, &self.env.workspace) {
            return msg.client.error(e.code, e.message);
        }
        let ahead = self.queue.len() + usize::from(self.running.is_some());
        msg.client.respond(Response {
            queued: Some(ahead),
            ..Response::default()
        });
        self.queue.push_back(QueuedRun {
            segments: msg.segments,
            request_id: msg.client.request_id,
        });
        self.publish_status();
        self.pump(ctx);
    }
}

impl Handler<Notify> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Notify, ctx: &mut Context<Self>) {
        self.env.shared.borrow_mut().notifies.push(msg.message);
        msg.client.ack();
        self.pump(ctx);
    }
}

impl Handler<Control> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Control, ctx: &mut Context<Self>) {
        match msg {
            Control::Cancel(client) => {
                if self.env.shared.borrow().running_turn {
                    if let Some(cancel) = &self.running {
                        cancel.cancel();
                    }
                }
                client.ack();
            }
            Control::Pause(client) => {
                self.env.shared.borrow_mut().paused = true;
                let _ = self.paused.send(true);
                self.publish_status();
                client.ack();
            }
            Control::Resume(client) => {
                self.env.shared.borrow_mut().paused = false;
                let _ = self.paused.send(false);
                self.publish_status();
                client.ack();
            }
            Control::Compact(client) => {
                {
                    let mut shared = self.env.shared.borrow_mut();
                    shared.compact_requested = true;
                    shared.breaker.reset();
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
        }
    }
}

impl Handler<Stop> for Worker {
    type Result = ();

    fn handle(&mut self, msg: Stop, ctx: &mut Context<Self>) {
        if self.stopping.is_some() {
            return;
        }
        self.stopping = Some(msg.reason);
        self.env.shared.borrow_mut().stopping = true;
        self.queue.clear();
        if let Some(cancel) = &self.running {
            cancel.cancel();
        }
        let _ = self.paused.send(false);
        self.pump(ctx);
    }
}
