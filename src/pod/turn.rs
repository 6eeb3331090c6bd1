//! The turn loop: what one `run` does, step by step, and the commit rules it
//! keeps.
//!
//! Everything is committed per item, as soon as it is final: the user input
//! when the turn starts, each assistant block when the model finishes it, each
//! tool call before it runs, each result as soon as it is known, `turn_end`
//! last. Before committing a block the hints for it have already been sent,
//! and the next block's hints wait for that commit: that is what lets the
//! broadcaster promise "a block's hints never arrive after its entry".

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use actix::Addr;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::broadcaster::{Broadcaster, Published};
use super::compactor::{self, Compactor};
use super::session_log::{self, GetSession, SessionLog, StorageError};
use super::worker::{QueuedRun, Shared, WorkerConfig};
use crate::context::{missing_results, Conversation};
use crate::input::Resolvers;
use crate::protocol::{
    AssistantItem, ErrorCode, Event, InjectedItem, Level, LogEntry, LogLine, ToolResult,
    TurnEndReason, Usage,
};
use crate::provider::{ModelEvent, ModelRequest, ModelStream, Provider, ToolSpec};
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// Everything a job needs, shared by the worker and its jobs.
pub struct TurnEnv {
    pub session_log: Addr<SessionLog>,
    pub broadcaster: Addr<Broadcaster>,
    pub compactor: Addr<Compactor>,
    pub provider: Arc<dyn Provider>,
    pub toolbox: Arc<Toolbox>,
    /// The toolbox's specs, built once: every model request carries them.
    pub tool_specs: Vec<ToolSpec>,
    pub resolvers: Resolvers,
    pub workspace: Workspace,
    pub config: WorkerConfig,
    pub shared: Rc<RefCell<Shared>>,
    pub paused: watch::Receiver<bool>,
}

impl TurnEnv {
    /// The model request for `conversation` as it stands.
    pub fn request(&self, conversation: &mut Conversation) -> ModelRequest {
        conversation.project(
            &self.config.system_prompt,
            self.tool_specs.clone(),
            &self.workspace,
            &self.resolvers,
        )
    }

    pub fn publish(&self, event: Event) {
        self.broadcaster.do_send(Published::Event(Box::new(event)));
    }

    pub fn publish_status(&self) {
        let status = self.shared.borrow().status();
        self.broadcaster.do_send(Published::Status(status));
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
}

/// Commits an entry; only once it is durable does the conversation grow.
/// A storage failure is told to every client and returned.
pub async fn commit(
    env: &TurnEnv,
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

pub async fn commit_notifies(env: &TurnEnv, conversation: &mut Conversation, notes: Vec<String>) {
    let items = notes
        .into_iter()
        .map(|text| InjectedItem {
            source: "notify".into(),
            text,
        })
        .collect();
    let _ = commit(env, conversation, LogEntry::HookInjectedItems { items }).await;
}

/// Closes a turn a crashed pod left open: results for its unanswered tool
/// calls, then `turn_end` `interrupted`.
pub async fn close_interrupted(env: &TurnEnv, conversation: &mut Conversation) {
    if !conversation.has_open_turn() && !carried_open_turn(env, conversation).await {
        return;
    }
    let _ = finish_turn(
        env,
        conversation,
        TurnEndReason::Interrupted,
        None,
        "the pod stopped before this tool call finished",
    )
    .await;
}

/// Whether this session began with a mid-turn compaction whose turn the
/// crash cut short before it committed anything here. That turn's
/// `turn_end` belongs here (the old log is never written again), just as it
/// would have been had the turn finished. The old log is read from disk;
/// if it cannot be, the turn is left as it is rather than guessed closed.
async fn carried_open_turn(env: &TurnEnv, conversation: &Conversation) -> bool {
    let Some(from) = conversation.carried_from() else {
        return false;
    };
    let entries = match env.session_log.send(GetSession(from.to_string())).await {
        Ok(Ok((_, entries))) => entries,
        Ok(Err(e)) => {
            tracing::warn!("cannot read session {from} this one was compacted from: {e}");
            return false;
        }
        Err(_) => return false,
    };
    match serde_json::from_slice::<Vec<LogLine>>(&entries) {
        Ok(lines) => {
            Conversation::new(from, lines.into_iter().map(|l| l.entry).collect()).has_open_turn()
        }
        Err(e) => {
            tracing::warn!("cannot parse session {from} this one was compacted from: {e}");
            false
        }
    }
}

/// Answers every open tool call, then commits `turn_end`.
async fn finish_turn(
    env: &TurnEnv,
    conversation: &mut Conversation,
    reason: TurnEndReason,
    usage: Option<Usage>,
    why: &str,
) -> Result<(), StorageError> {
    let open = conversation.unanswered_calls();
    if !open.is_empty() {
        let results = missing_results(open, why);
        commit(env, conversation, LogEntry::ToolResults { results }).await?;
    }
    let end = LogEntry::TurnEnd {
        reason,
        turn_id: None,
        request_id: None,
        usage,
        error: None,
    };
    commit(env, conversation, end).await?;
    Ok(())
}

/// Runs one turn to its `turn_end`.
pub async fn run_turn(
    env: &TurnEnv,
    conversation: &mut Conversation,
    run: QueuedRun,
    turn_id: String,
    cancel: CancellationToken,
) {
    env.publish(Event::TurnStart {
        turn_id,
        request_id: run.request_id,
    });
    let input = LogEntry::UserInput {
        segments: run.segments,
        at: LogEntry::now(),
    };
    let early = match commit_input(env, conversation, input).await {
        Ok(early) => early,
        Err(()) => return,
    };
    let (reason, usage) = steps(env, conversation, &cancel, early).await;
    let why = match reason {
        TurnEndReason::Cancelled => "cancelled before this tool call ran",
        TurnEndReason::MaxSteps => "the turn reached its step limit before this tool call ran",
        _ => "the turn ended with an error before this tool call ran",
    };
    let _ = finish_turn(env, conversation, reason, usage, why).await;
}

/// Commits the turn's user input. When nothing has to happen before the
/// first model call (no pause, no pending notify, no compaction that could be
/// due), that call is started at the same time, so the model's time to first
/// byte hides the sync; its stream is returned, and not one of its events is
/// looked at before the input is durable. `Err` when the input could not be
/// committed (the turn is over: there is nothing to end).
async fn commit_input(
    env: &TurnEnv,
    conversation: &mut Conversation,
    input: LogEntry,
) -> Result<Option<ModelStream>, ()> {
    let overlap = {
        let shared = env.shared.borrow();
        !shared.paused && shared.notifies.is_empty()
    };
    if !overlap {
        return commit(env, conversation, input)
            .await
            .map(|_| None)
            .map_err(drop);
    }
    let request = conversation.project_with_pending(
        &input,
        &env.config.system_prompt,
        env.tool_specs.clone(),
        &env.workspace,
        &env.resolvers,
    );
    if compactor::might_compact(env, conversation, &request) {
        return commit(env, conversation, input)
            .await
            .map(|_| None)
            .map_err(drop);
    }
    let mut stream = env.provider.stream(request).peekable();
    let mut durable = std::pin::pin!(commit(env, conversation, input));
    // Drive the request until its first event is buffered, alongside the
    // sync. The commit is awaited to its end even if the turn is cancelled
    // meanwhile (the conversation must match the log); the stream reader
    // then sees the cancel at once.
    let mut first_buffered = false;
    let committed = loop {
        tokio::select! {
            result = &mut durable => break result,
            _ = std::pin::Pin::new(&mut stream).peek(), if !first_buffered => {
                first_buffered = true;
            }
        }
    };
    committed.map(|_| Some(stream.boxed())).map_err(drop)
}

/// The model ↔ tools loop; returns how the turn ended and its usage.
/// `early` is the first model call, already started by [`commit_input`].
async fn steps(
    env: &TurnEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    mut early: Option<ModelStream>,
) -> (TurnEndReason, Option<Usage>) {
    let mut usage: Option<Usage> = None;
    for _ in 0..env.config.max_steps {
        let stream = match early.take() {
            Some(stream) => stream,
            None => {
                if !wait_while_paused(env, cancel).await {
                    return (TurnEndReason::Cancelled, usage);
                }
                let notes = std::mem::take(&mut env.shared.borrow_mut().notifies);
                if !notes.is_empty() {
                    commit_notifies(env, conversation, notes).await;
                }
                compactor::before_model_call(env, conversation).await;
                if cancel.is_cancelled() {
                    return (TurnEndReason::Cancelled, usage);
                }
                env.provider.stream(env.request(conversation))
            }
        };
        let reply = stream_reply(env, conversation, cancel, stream).await;
        if let Some(u) = reply.usage {
            let total = usage.get_or_insert_with(Usage::default);
            total.input_tokens += u.input_tokens;
            total.output_tokens += u.output_tokens;
            conversation.reported_tokens = Some(u.input_tokens + u.output_tokens);
        }
        match reply.end {
            ReplyEnd::Done => {}
            ReplyEnd::Cancelled => return (TurnEndReason::Cancelled, usage),
            ReplyEnd::Failed => return (TurnEndReason::Error, usage),
        }
        if reply.tool_calls.is_empty() {
            return (TurnEndReason::Completed, usage);
        }
        for (call_id, name, arguments) in reply.tool_calls {
            if !wait_while_paused(env, cancel).await {
                return (TurnEndReason::Cancelled, usage);
            }
            let outcome = tokio::select! {
                outcome = env.toolbox.call(&name, &arguments, cancel.clone()) => outcome,
                _ = cancel.cancelled() => return (TurnEndReason::Cancelled, usage),
            };
            if cancel.is_cancelled() {
                return (TurnEndReason::Cancelled, usage);
            }
            let result = ToolResult {
                call_id,
                output: outcome.output,
                is_error: outcome.is_error,
            };
            let entry = LogEntry::ToolResults {
                results: vec![result],
            };
            if commit(env, conversation, entry).await.is_err() {
                return (TurnEndReason::Error, usage);
            }
        }
    }
    (TurnEndReason::MaxSteps, usage)
}

/// Holds the turn while the pod is paused. False if cancelled meanwhile.
async fn wait_while_paused(env: &TurnEnv, cancel: &CancellationToken) -> bool {
    let mut paused = env.paused.clone();
    tokio::select! {
        result = paused.wait_for(|p| !*p) => result.is_ok() && !cancel.is_cancelled(),
        _ = cancel.cancelled() => false,
    }
}

struct Reply {
    tool_calls: Vec<(String, String, Value)>,
    usage: Option<Usage>,
    end: ReplyEnd,
}

enum ReplyEnd {
    Done,
    Cancelled,
    Failed,
}

/// The block being streamed.
enum Block {
    Text(String),
    Reasoning(String),
    ToolCall {
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// Streams one model reply, committing each block as it completes.
async fn stream_reply(
    env: &TurnEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    mut stream: ModelStream,
) -> Reply {
    let mut reply = Reply {
        tool_calls: Vec::new(),
        usage: None,
        end: ReplyEnd::Done,
    };
    let mut block: Option<Block> = None;
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            _ = cancel.cancelled() => {
                reply.end = ReplyEnd::Cancelled;
                break;
            }
        };
        let event = match event {
            None => break,
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                env.publish_error(
                    ErrorCode::ModelError,
                    format!("{} model call failed: {e}", env.provider.name()),
                );
                reply.end = ReplyEnd::Failed;
                break;
            }
        };
        let ok = match event {
            ModelEvent::TextDelta(text) => {
                let ok = extend_text(
                    env,
                    conversation,
                    &mut block,
                    &mut reply,
                    TextKind::Text,
                    &text,
                )
                .await;
                env.publish(Event::TextDelta { text });
                ok
            }
            ModelEvent::ReasoningDelta(text) => {
                let ok = extend_text(
                    env,
                    conversation,
                    &mut block,
                    &mut reply,
                    TextKind::Reasoning,
                    &text,
                )
                .await;
                env.publish(Event::ReasoningDelta { text });
                ok
            }
            ModelEvent::ToolCallStart { call_id, name } => {
                let ok = finish_block(env, conversation, block.take(), &mut reply).await;
                env.publish(Event::ToolCallStart {
                    call_id: call_id.clone(),
                    name: name.clone(),
                });
                block = Some(Block::ToolCall {
                    call_id,
                    name,
                    arguments: String::new(),
                });
                ok
            }
            ModelEvent::ToolCallArgsDelta { call_id, delta } => {
                if let Some(Block::ToolCall {
                    call_id: current,
                    arguments,
                    ..
                }) = &mut block
                {
                    if *current == call_id {
                        arguments.push_str(&delta);
                        env.publish(Event::ToolCallArgsDelta { call_id, delta });
                    }
                }
                true
            }
            ModelEvent::BlockEnd => finish_block(env, conversation, block.take(), &mut reply).await,
            ModelEvent::Retry { .. } => true,
            ModelEvent::Usage(usage) => {
                reply.usage = Some(usage);
                env.broadcaster.do_send(Published::Usage(usage));
                true
            }
        };
        if !ok {
            reply.end = ReplyEnd::Failed;
            return reply;
        }
        // The broadcaster runs on this thread: when a burst of events is
        // already buffered, let each hint go out as it is made instead of
        // after the whole burst is parsed.
        tokio::task::yield_now().await;
    }
    // A half-streamed tool call is dropped; text and reasoning are kept as
    // far as they got.
    if !matches!(reply.end, ReplyEnd::Done) {
        if let Some(Block::ToolCall { .. }) = block {
            block = None;
        }
    }
    if !finish_block(env, conversation, block, &mut reply).await {
        reply.end = ReplyEnd::Failed;
    }
    reply
}

/// Which kind of streamed text a delta extends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Text,
    Reasoning,
}

/// Adds streamed text to the current block when it is of the same kind;
/// otherwise commits the current block and starts a new one. False if that
/// commit failed.
async fn extend_text(
    env: &TurnEnv,
    conversation: &mut Conversation,
    block: &mut Option<Block>,
    reply: &mut Reply,
    kind: TextKind,
    text: &str,
) -> bool {
    match (block.as_mut(), kind) {
        (Some(Block::Text(so_far)), TextKind::Text)
        | (Some(Block::Reasoning(so_far)), TextKind::Reasoning) => {
            so_far.push_str(text);
            true
        }
        _ => {
            let ok = finish_block(env, conversation, block.take(), reply).await;
            *block = Some(match kind {
                TextKind::Text => Block::Text(text.to_owned()),
                TextKind::Reasoning => Block::Reasoning(text.to_owned()),
            });
            ok
        }
    }
}

/// Commits a finished block. False if the commit failed.
async fn finish_block(
    env: &TurnEnv,
    conversation: &mut Conversation,
    block: Option<Block>,
    reply: &mut Reply,
) -> bool {
    let item = match block {
        None => return true,
        Some(Block::Text(text)) if text.is_empty() => return true,
        Some(Block::Reasoning(text)) if text.is_empty() => return true,
        Some(Block::Text(text)) => AssistantItem::Text { text },
        Some(Block::Reasoning(text)) => AssistantItem::Reasoning { text },
        Some(Block::ToolCall {
            call_id,
            name,
            arguments,
        }) => {
            env.publish(Event::ToolCallDone {
                call_id: call_id.clone(),
            });
            let arguments = parse_arguments(&arguments);
            reply
                .tool_calls
                .push((call_id.clone(), name.clone(), arguments.clone()));
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            }
        }
    };
    let entry = LogEntry::AssistantItems { items: vec![item] };
    commit(env, conversation, entry).await.is_ok()
}

/// Tool arguments as a JSON object. Empty means no arguments; anything that
/// is not a JSON object is kept under `invalid_arguments` so the log still
/// shows what the model sent, and the tool reports the problem to the model.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => serde_json::json!({ "invalid_arguments": raw }),
    }
}
