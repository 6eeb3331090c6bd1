//! What must be settled before a conversation takes its next turn — when the
//! pod starts, and when another session becomes current: an open turn is
//! closed (or, if it waits for approvals, resumed by the worker), the
//! conversation's session rules are rebuilt from the log, and the model the
//! session records is reconciled with the pod's.

use super::checkpoint;
use super::job::{JobEnv, SessionRule};
use super::rules;
use super::session_log::GetSession;
use super::turn;
use crate::context::Conversation;
use crate::protocol::{LogEntry, LogLine};

/// How many sessions back a compaction chain is followed for session rules.
const MAX_CHAIN: usize = 256;

/// Closes a turn a crashed pod left open — in this session, or carried
/// into it by a mid-turn compaction and cut short before it committed
/// anything here — with `turn_end` `interrupted`.
pub async fn close_open_turn(env: &JobEnv, conversation: &mut Conversation) {
    if conversation.has_open_turn() {
        let turn = conversation.open_turn();
        turn::close_interrupted(env, conversation, turn).await;
        return;
    }
    if let Some(lines) = carried_from(env, conversation).await {
        let from = Conversation::new(conversation.session_id, lines);
        if from.has_open_turn() {
            turn::close_interrupted(env, conversation, from.open_turn()).await;
        }
    }
}

/// The entries of the session this one was compacted from, as long as no
/// turn entry has been committed here: a turn open there when the pod
/// compacted mid-turn goes on here, and until it commits something only the
/// old log shows it open. If the old log cannot be read, the turn is left as
/// it is rather than guessed closed.
async fn carried_from(env: &JobEnv, conversation: &Conversation) -> Option<Vec<LogEntry>> {
    let from = conversation.carried_from()?;
    read_session(env, from).await
}

async fn read_session(env: &JobEnv, id: uuid::Uuid) -> Option<Vec<LogEntry>> {
    let bytes = match env.session_log.send(GetSession(id.to_string())).await {
        Ok(Ok((_, bytes))) => bytes,
        Ok(Err(e)) => {
            tracing::warn!("cannot read session {id}: {e}");
            return None;
        }
        Err(_) => return None,
    };
    match serde_json::from_slice::<Vec<LogLine>>(&bytes) {
        Ok(lines) => Some(lines.into_iter().map(|l| l.entry).collect()),
        Err(e) => {
            tracing::warn!("cannot parse session {id}: {e}");
            None
        }
    }
}

/// The conversation's session rules: those `scope: "session"` and
/// `"always"` decisions added in this session and in the sessions it was
/// compacted from, less those a `rule_revoked` took out since — so an
/// approval for the session survives restarts and compactions, and a
/// revocation does too.
pub async fn session_rules(env: &JobEnv, conversation: &Conversation) -> Vec<SessionRule> {
    let mut chain = Vec::new();
    let mut from = compacted_from(conversation.entries());
    for _ in 0..MAX_CHAIN {
        let Some(id) = from else { break };
        let Some(entries) = read_session(env, id).await else {
            break;
        };
        from = compacted_from(&entries);
        chain.push((id, entries));
    }
    let mut rules = Vec::new();
    for (id, entries) in chain.iter().rev() {
        rules::replay(*id, entries, &mut rules);
    }
    rules::replay(conversation.session_id, conversation.entries(), &mut rules);
    rules
}

/// The checkpoints a client may name from now on: those of this session
/// and of the sessions it was compacted from.
async fn checkpoint_ids(env: &JobEnv, conversation: &Conversation) {
    let mut ids: Vec<String> = checkpoint::ids(conversation.entries()).collect();
    let mut shown: Vec<String> = checkpoint::shown_paths(conversation.entries()).collect();
    let mut from = compacted_from(conversation.entries());
    for _ in 0..MAX_CHAIN {
        let Some(id) = from else { break };
        let Some(entries) = read_session(env, id).await else {
            break;
        };
        ids.extend(checkpoint::ids(&entries));
        shown.extend(checkpoint::shown_paths(&entries));
        from = compacted_from(&entries);
    }
    env.checkpoints.reset(ids, shown);
}

fn compacted_from(entries: &[LogEntry]) -> Option<uuid::Uuid> {
    match entries.first() {
        Some(LogEntry::SessionStart { compacted_from, .. }) => *compacted_from,
        _ => None,
    }
}

/// The model the conversation runs on, and whether a `model_change` must
/// say so first: a session's latest `model_change` for this provider wins;
/// a session recorded with another provider or model (resumed, or the pod
/// restarted with another `--model`) gets a `model_change` to the pod's, so
/// the log always says which model produced what. A `--model` typed for
/// this start wins over the session's latest choice (once, for the
/// conversation the pod starts on).
pub fn reconcile_model(env: &JobEnv, conversation: &Conversation) -> (String, bool) {
    // Until the first settle (which clears it): a later resume keeps that
    // session's own choice.
    let typed = env.state.borrow().model_typed;
    model_to_run(
        env.provider.name(),
        env.provider.model(),
        typed,
        conversation.entries(),
    )
}

/// [`reconcile_model`] for a session's `entries`, the pod running
/// `provider` configured with model `configured` (`typed`: given as
/// `--model` for this start) — also what the start line names, so that it
/// and `pod status` say the same model.
pub fn model_to_run(
    provider: &str,
    configured: &str,
    typed: bool,
    entries: &[LogEntry],
) -> (String, bool) {
    let configured = configured.to_owned();
    let latest_change = entries.iter().rev().find_map(|e| match e {
        LogEntry::ModelChange {
            provider, model, ..
        } => Some((provider.as_str(), model.clone())),
        _ => None,
    });
    let started_with = entries.iter().find_map(|e| match e {
        LogEntry::SessionStart {
            provider: Some(provider),
            model: Some(model),
            ..
        } => Some((provider.as_str(), model.as_str())),
        _ => None,
    });
    match latest_change {
        Some((p, model)) if typed && p == provider && model != configured => (configured, true),
        Some((p, model)) if p == provider => (model, false),
        Some(_) => (configured, true),
        None => match started_with {
            Some((p, m)) if p != provider || m != configured => (configured, true),
            _ => (configured, false),
        },
    }
}

/// Everything to settle when `conversation` becomes current: rules rebuilt,
/// the model reconciled (committing a `model_change` if needed).
pub async fn settle(env: &JobEnv, conversation: &mut Conversation) {
    env.state.borrow_mut().session_id = conversation.session_id;
    checkpoint_ids(env, conversation).await;
    let rules = session_rules(env, conversation).await;
    env.state.borrow_mut().session_rules = rules;
    env.refresh_context_estimate(conversation);
    let (model, record) = reconcile_model(env, conversation);
    env.state.borrow_mut().model_typed = false;
    if record {
        let _ = turn::commit_model_change(env, conversation, model).await;
    } else {
        env.state.borrow_mut().model = model;
        env.publish_status();
    }
}
