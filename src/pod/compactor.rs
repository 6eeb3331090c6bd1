//! Compaction: when the context grows too large, summarise it and go on in a
//! new session that starts from the summary.
//!
//! The `Compactor` actor does the summarising model call; the functions here
//! decide *when* (before every model call of a turn, after every turn, on
//! `compact`) and carry the result into a new session through `SessionLog`.
//! Three rules from systems that got this wrong:
//! - compaction must help: an empty summary, or a new context that is not
//!   smaller than the old one, is a failure, not a success;
//! - failures are counted: after [`MAX_FAILURES`] in a row automatic
//!   compaction stops until a manual one (or a restart), so a pod never loops;
//! - the summariser's own input is trimmed to fit the context window.

use std::sync::Arc;

use actix::prelude::*;
use futures::StreamExt;

use super::session_log::{Switch, SwitchTo};
use super::turn::TurnEnv;
use crate::context::Conversation;
use crate::protocol::{CompactReason, Event, InjectedItem, Level, LogEntry};
use crate::provider::{ChatMessage, ModelEvent, ModelRequest, Provider};
use crate::tokens;

pub const MAX_FAILURES: u32 = 3;

/// When to compact: at `compact_at` × `context_window` tokens.
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

/// Counts failed compactions in a row.
#[derive(Debug, Default)]
pub struct Breaker {
    failures: u32,
    /// Set by a manual compaction so the check right after it does not
    /// compact again automatically.
    skip_next_auto: bool,
}

impl Breaker {
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    fn open(&self) -> bool {
        self.failures >= MAX_FAILURES
    }
}

/// Runs summarising model calls, one at a time.
pub struct Compactor {
    provider: Arc<dyn Provider>,
}

impl Compactor {
    pub fn new(provider: Arc<dyn Provider>) -> Self {
        Self { provider }
    }
}

impl Actor for Compactor {
    type Context = Context<Self>;
}

/// Summarise the conversation in `request`; answers the summary text.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct Summarise(pub ModelRequest);

impl Handler<Summarise> for Compactor {
    type Result = ResponseFuture<Result<String, String>>;

    fn handle(&mut self, msg: Summarise, _: &mut Context<Self>) -> Self::Result {
        let mut stream = self.provider.stream(msg.0);
        Box::pin(async move {
            let mut summary = String::new();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(ModelEvent::TextDelta(text)) => summary.push_str(&text),
                    Ok(_) => {}
                    Err(e) => return Err(format!("the summarising model call failed: {e}")),
                }
            }
            Ok(summary)
        })
    }
}

/// The context size the thresholds are compared with: the provider's count
/// from the last call where there is one, never less than our estimate.
pub fn context_tokens(env: &TurnEnv, conversation: &mut Conversation) -> u64 {
    let estimate = tokens::estimate_request(&env.request(conversation));
    conversation.reported_tokens.unwrap_or(0).max(estimate)
}

/// Whether an automatic compaction is due now.
fn auto_due(env: &TurnEnv, conversation: &mut Conversation) -> bool {
    {
        let mut shared = env.shared.borrow_mut();
        if std::mem::take(&mut shared.breaker.skip_next_auto) || shared.breaker.open() {
            return false;
        }
    }
    context_tokens(env, conversation) >= env.config.compaction.limit()
}

/// Whether the check before a model call with `request` could compact —
/// for a turn deciding whether it may start its first call before that
/// check (see `turn::commit_input`). Errs on the side of yes. A "no" *is*
/// that call's check (nothing was due), so it counts as the one check a
/// manual compaction skips.
pub fn might_compact(env: &TurnEnv, conversation: &Conversation, request: &ModelRequest) -> bool {
    let size = tokens::estimate_request(request).max(conversation.reported_tokens.unwrap_or(0));
    let mut shared = env.shared.borrow_mut();
    if shared.compact_requested || size >= env.config.compaction.limit() {
        return true;
    }
    shared.breaker.skip_next_auto = false;
    false
}

/// The mid-turn check, before every model call of a turn.
pub async fn before_model_call(env: &TurnEnv, conversation: &mut Conversation) {
    let manual = std::mem::take(&mut env.shared.borrow_mut().compact_requested);
    if manual {
        compact(env, conversation, CompactReason::Manual).await;
    } else if auto_due(env, conversation) {
        compact(env, conversation, CompactReason::AutoMidTurn).await;
    }
}

/// The post-turn check, after `turn_end`.
pub async fn after_turn(env: &TurnEnv, conversation: &mut Conversation) {
    {
        let shared = env.shared.borrow();
        if shared.compact_requested || shared.stopping {
            return; // the worker runs the manual one next, or nothing at all
        }
    }
    if auto_due(env, conversation) {
        compact(env, conversation, CompactReason::AutoPostTurn).await;
    }
}

/// Compacts now. On success `conversation` is the new session; on failure it
/// is unchanged and the pod goes on in the old session.
pub async fn compact(env: &TurnEnv, conversation: &mut Conversation, reason: CompactReason) {
    env.shared.borrow_mut().compacting = true;
    env.publish_status();
    env.publish(Event::CompactStart { reason });
    let result = try_compact(env, conversation).await;
    let tripped = {
        let mut shared = env.shared.borrow_mut();
        shared.compacting = false;
        if reason == CompactReason::Manual {
            shared.breaker.skip_next_auto = true;
        }
        match &result {
            Ok(()) => {
                shared.breaker.failures = 0;
                false
            }
            Err(_) => {
                shared.breaker.failures += 1;
                shared.breaker.failures == MAX_FAILURES
            }
        }
    };
    if let Err(error) = result {
        tracing::warn!("compaction failed: {error}");
        env.publish(Event::CompactFailed { error });
        if tripped {
            env.notify_all(
                Level::Warn,
                "compactor",
                format!(
                    "automatic compaction failed {MAX_FAILURES} times in a row and is off until \
                     a manual /compact or a restart"
                ),
            );
        }
    }
    env.publish_status();
}

async fn try_compact(env: &TurnEnv, conversation: &mut Conversation) -> Result<(), String> {
    let tokens_before = context_tokens(env, conversation);
    let request = summary_request(env, conversation);
    let summary = env
        .compactor
        .send(Summarise(request))
        .await
        .map_err(|e| format!("the compactor is gone: {e}"))??;
    let summary = summary.trim().to_owned();
    if summary.is_empty() {
        return Err("the model returned an empty summary".into());
    }
    let first = LogEntry::HookInjectedItems {
        items: vec![InjectedItem {
            source: "compact_summary".into(),
            text: summary,
        }],
    };
    let mut candidate = Conversation::new(conversation.session_id, vec![first.clone()]);
    let tokens_after = context_tokens(env, &mut candidate);
    if tokens_after >= tokens_before {
        return Err(format!(
            "the summary would not make the context smaller ({tokens_after} tokens, was \
             {tokens_before})"
        ));
    }
    let new = env
        .session_log
        .send(Switch {
            to: SwitchTo::Compacted {
                first_entries: vec![first],
                tokens_before,
                tokens_after,
            },
            provider: env.provider.name().into(),
            model: env.provider.model().into(),
        })
        .await
        .map_err(|e| format!("the session log is gone: {e}"))?
        .map_err(|e| e.to_string())?;
    *conversation = Conversation::new(new.session_id, new.entries);
    Ok(())
}

const SUMMARY_INSTRUCTIONS: &str = "You are compacting a coding agent's conversation so that it \
can continue in a fresh context. Write a summary that lets the next turns go on without the \
original messages: the user's goals and constraints, decisions made and why, files read or \
changed (with paths), commands run and their outcomes, what is done, what is in progress, and \
the open next steps. Be specific and concise. Output only the summary.";

/// Longest tool output or message kept verbatim in the summariser's input.
const SUMMARY_ITEM_CAP: usize = 4096;

/// The summarising request: the conversation, each long item shortened, the
/// oldest messages dropped until it fits well inside the context window.
fn summary_request(env: &TurnEnv, conversation: &mut Conversation) -> ModelRequest {
    let mut request = conversation.project(
        SUMMARY_INSTRUCTIONS,
        Vec::new(),
        &env.workspace,
        &env.resolvers,
    );
    let mut transcript: Vec<String> = request.messages.iter().map(render).collect();
    let budget = (env.config.compaction.context_window as f64 * 0.6) as u64;
    let mut dropped = 0;
    while transcript.len() > 1
        && transcript.iter().map(|t| tokens::estimate(t)).sum::<u64>() > budget
    {
        transcript.remove(0);
        dropped += 1;
    }
    let mut text = String::new();
    if dropped > 0 {
        text.push_str(&format!("[{dropped} earliest messages omitted]\n\n"));
    }
    text.push_str(&transcript.join("\n\n"));
    text.push_str("\n\nSummarise the conversation above.");
    request.messages = vec![ChatMessage::User { text }];
    request
}

fn render(message: &ChatMessage) -> String {
    let cap = |s: &str| -> String {
        if s.len() <= SUMMARY_ITEM_CAP {
            return s.to_owned();
        }
        let mut end = SUMMARY_ITEM_CAP;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… [{} bytes cut]", &s[..end], s.len() - end)
    };
    match message {
        ChatMessage::User { text } => format!("USER: {}", cap(text)),
        ChatMessage::Assistant { items } => items
            .iter()
            .map(|item| match item {
                crate::protocol::AssistantItem::Text { text } => {
                    format!("ASSISTANT: {}", cap(text))
                }
                crate::protocol::AssistantItem::Reasoning { .. } => String::new(),
                crate::protocol::AssistantItem::ToolCall {
                    name, arguments, ..
                } => format!("TOOL CALL {name}: {}", cap(&arguments.to_string())),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        ChatMessage::ToolResults { results } => results
            .iter()
            .map(|r| {
                let label = if r.is_error {
                    "TOOL ERROR"
                } else {
                    "TOOL RESULT"
                };
                format!("{label}: {}", cap(&r.output))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}
