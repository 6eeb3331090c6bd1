//! Compaction policy: *when* to compact (before every model call of a turn,
//! after every turn, on `compact`), the breaker, and carrying a summary into
//! a new session through `SessionLog`. The summarising call itself is the
//! `Compactor` actor's (`compactor.rs`).
//!
//! Three rules from systems that got this wrong:
//! - compaction must help: an empty summary, or a new context that is not
//!   smaller than the old one and under the threshold, is a failure, not a
//!   success;
//! - failures are counted: after [`MAX_FAILURES`] in a row automatic
//!   compaction stops until a manual one (or a restart), so a pod never loops;
//! - the summariser's own input is trimmed to fit the context window.

use super::compactor::Summarise;
use super::instructions;
use super::job::{commit, JobEnv, MAX_FAILURES};
use super::session_log::{Switch, SwitchTo};
use crate::context::Conversation;
use crate::protocol::{CompactReason, Event, InjectedItem, Level, LogEntry};
use crate::provider::{estimate, ModelRequest};

/// The context size the thresholds are compared with: the size of the next
/// request. Where a call reported usage, that is its count (input and
/// output) plus the estimate of what was added since; else the estimate.
/// The status's `context_tokens` is the same count at the last call.
pub fn context_tokens(env: &JobEnv, conversation: &mut Conversation) -> u64 {
    let estimate = estimate::estimate_request_for(env.provider.name(), &env.request(conversation));
    size(conversation, estimate)
}

/// The request's size, given its estimate (see [`context_tokens`]).
fn size(conversation: &Conversation, estimate: u64) -> u64 {
    conversation
        .reported_tokens
        .map_or(estimate, |reported| reported.size_at(estimate))
}

/// Whether an automatic compaction is due now.
fn auto_due(env: &JobEnv, conversation: &mut Conversation) -> bool {
    {
        let mut shared = env.state.borrow_mut();
        if std::mem::take(&mut shared.breaker.skip_next_auto) || shared.breaker.open() {
            return false;
        }
    }
    context_tokens(env, conversation) >= env.thresholds().limit()
}

/// Whether the check before a model call with `request` could compact —
/// for a turn deciding whether it may start its first call before that
/// check (see `turn::commit_input`). Errs on the side of yes. A "no" *is*
/// that call's check (nothing was due), so it counts as the one check a
/// manual compaction skips.
pub fn might_compact(
    env: &JobEnv,
    conversation: &Conversation,
    request: &ModelRequest<'_>,
) -> bool {
    let size = size(
        conversation,
        estimate::estimate_request_for(env.provider.name(), request),
    );
    let limit = env.thresholds().limit();
    let mut shared = env.state.borrow_mut();
    if shared.compact_requested || size >= limit {
        return true;
    }
    shared.breaker.skip_next_auto = false;
    false
}

/// The mid-turn check, before every model call of a turn.
pub async fn before_model_call(env: &JobEnv, conversation: &mut Conversation) {
    // The check and the call after it build the request.
    env.read_logged_inputs(conversation).await;
    let manual = std::mem::take(&mut env.state.borrow_mut().compact_requested);
    if manual {
        compact(env, conversation, CompactReason::Manual).await;
    } else if auto_due(env, conversation) {
        compact(env, conversation, CompactReason::AutoMidTurn).await;
    }
}

/// The post-turn check, after `turn_end`.
pub async fn after_turn(env: &JobEnv, conversation: &mut Conversation) {
    {
        let shared = env.state.borrow();
        if shared.compact_requested || shared.stopping.is_some() {
            return; // the worker runs the manual one next, or nothing at all
        }
    }
    env.read_logged_inputs(conversation).await;
    if auto_due(env, conversation) {
        compact(env, conversation, CompactReason::AutoPostTurn).await;
    }
}

/// Compacts now. On success `conversation` is the new session; on failure it
/// is unchanged and the pod goes on in the old session.
pub async fn compact(env: &JobEnv, conversation: &mut Conversation, reason: CompactReason) {
    // `compact_start` first, then the `compacting` status: the order the
    // protocol documents.
    env.publish(Event::CompactStart { reason });
    env.state.borrow_mut().compacting = true;
    env.publish_status();
    let result = try_compact(env, conversation).await;
    let tripped = {
        let mut shared = env.state.borrow_mut();
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

async fn try_compact(env: &JobEnv, conversation: &mut Conversation) -> Result<(), String> {
    env.read_logged_inputs(conversation).await;
    let tokens_before = context_tokens(env, conversation);
    // The new session has no count of the server's yet, only an estimate:
    // the summary must make the context smaller than the count it was
    // compacted on, or at least than the old estimate (a server that counts
    // half the estimate would otherwise fail every compaction).
    let estimate_before =
        estimate::estimate_request_for(env.provider.name(), &env.request(conversation));
    let summarise = Summarise::of(&env.request(conversation), env.thresholds().context_window);
    let summary = env
        .compactor
        .send(summarise)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let summary = summary.trim().to_owned();
    if summary.is_empty() {
        return Err("the model returned an empty summary".into());
    }
    let mut first_entries = vec![LogEntry::HookInjectedItems {
        items: vec![InjectedItem {
            source: "compact_summary".into(),
            text: summary,
        }],
    }];
    first_entries.extend(conversation.unanswered_input().cloned());
    // The project's instructions go on in the new session too, durable
    // before anyone hears of it.
    if let Some(entry) = instructions::current(&env.workspace).await.into_entry() {
        first_entries.push(entry);
    }
    first_entries.push(super::environment::current(env).await.into_entry());
    let mut candidate = Conversation::new(conversation.session_id, first_entries.clone());
    let tokens_after = context_tokens(env, &mut candidate);
    if tokens_after >= tokens_before && tokens_after >= estimate_before {
        return Err(format!(
            "the summary would not make the context smaller ({tokens_after} tokens, was \
             {tokens_before})"
        ));
    }
    // Smaller is not enough: a context still over the threshold would be
    // compacted again before the next call, and a summary that does not
    // fit the window makes every later call fail.
    let limit = env.thresholds().limit();
    if tokens_after >= limit {
        return Err(format!(
            "the summary leaves the context at {tokens_after} tokens, not under the compaction \
             threshold of {limit} (was {tokens_before})"
        ));
    }
    let model = env.state.borrow().model.clone();
    let new = env
        .session_log
        .send(Switch {
            to: SwitchTo::Compacted {
                first_entries,
                tokens_before,
                tokens_after,
            },
            provider: env.provider.name().into(),
            model: model.clone(),
        })
        .await
        .map_err(|e| format!("the session log is gone: {e}"))?
        .map_err(|e| e.to_string())?;
    *conversation = Conversation::new(new.session_id, new.entries);
    env.state.borrow_mut().session_id = new.session_id;
    // Sent with the status that ends `compacting`.
    env.refresh_context_estimate(conversation);
    // A model chosen by `set_model` runs because the session's latest
    // `model_change` says so; the new session must say so too, or a
    // restart would fall back to the configured model. Committed after
    // `compact_done` (the new session's first entries are fixed), at this
    // step boundary. A failed commit was told to every client; the
    // compaction itself succeeded.
    if model != env.provider.model() {
        let entry = LogEntry::ModelChange {
            provider: env.provider.name().into(),
            model,
            at: LogEntry::now(),
        };
        let _ = commit(env, conversation, entry).await;
    }
    Ok(())
}
