//! The conversation's rules as clients see them: `list_rules` (where each
//! came from) and `revoke_rule` (a `rule_revoked` entry, so the log stays
//! the truth about which rules are in force).
//!
//! Allow rules added by decisions are rebuilt from the log whenever a
//! conversation becomes current ([`replay`]): every `session`/`always`
//! decision adds its rule, every `rule_revoked` takes it out again, in log
//! order across the sessions a conversation was compacted from. Rules from
//! flags and the config file are the user's own policy: they cannot be
//! revoked from a client.

use uuid::Uuid;

use super::job::{commit, JobEnv, Revocation, SessionRule};
use super::outbox::Client;
use super::session_log::StorageError;
use crate::approval::{self, Rule};
use crate::context::Conversation;
use crate::protocol::{DecidedBy, Decision, ErrorCode, Level, LogEntry, RuleInfo, Scope};

/// Applies one session's entries, in order, to the rules built so far.
pub fn replay(session_id: Uuid, entries: &[LogEntry], rules: &mut Vec<SessionRule>) {
    for (seq, entry) in entries.iter().enumerate() {
        match entry {
            LogEntry::ApprovalDecision {
                decision: Decision::Allow,
                scope: Scope::Session | Scope::Always,
                rule: Some(text),
                ..
            } => match text.parse::<Rule>() {
                Ok(rule) => rules.push(SessionRule {
                    rule,
                    session_id,
                    seq: seq as u64,
                }),
                Err(e) => tracing::warn!("ignoring session rule {text:?} from the log: {e}"),
            },
            LogEntry::RuleRevoked { rule, .. } => rules.retain(|r| r.rule.to_string() != *rule),
            _ => {}
        }
    }
}

/// `list_rules`: the deny rules, then the allow rules, each with its source.
pub fn list(env: &JobEnv) -> Vec<RuleInfo> {
    let mut rules = env.config.configured_rules.clone();
    rules.extend(env.state.borrow().session_rules.iter().map(|r| RuleInfo {
        rule: r.rule.to_string(),
        kind: "allow".into(),
        source: "decision".into(),
        session_id: Some(r.session_id),
        seq: Some(r.seq),
    }));
    rules
}

/// `revoke_rule`: takes the rule out of force at once and queues its entry;
/// `Err` (`invalid_params`, `not_found`) when there is nothing to revoke.
pub fn revoke(
    env: &JobEnv,
    text: &str,
    label: Option<String>,
    remote: Option<String>,
    client: Client,
) -> Result<(), (ErrorCode, String)> {
    let rule: Rule = text
        .parse()
        .map_err(|e: crate::approval::RuleError| (ErrorCode::InvalidParams, e.to_string()))?;
    let mut state = env.state.borrow_mut();
    let (removed, kept) = std::mem::take(&mut state.session_rules)
        .into_iter()
        .partition(|r| r.rule == rule);
    state.session_rules = kept;
    let removed: Vec<SessionRule> = removed;
    if removed.is_empty() {
        let configured = env
            .config
            .configured_rules
            .iter()
            .find(|r| r.rule == rule.to_string());
        let why = match configured {
            Some(r) if r.source == "flag" => format!(
                "{rule} comes from a --{} flag; only rules a decision added can be revoked",
                r.kind
            ),
            Some(_) => format!(
                "{rule} comes from the config file; remove it there (only rules a decision \
                 added can be revoked)"
            ),
            None => format!("no decision of this conversation added the rule {rule}"),
        };
        return Err((ErrorCode::NotFound, why));
    }
    state.revocations.push(Revocation {
        rule: rule.to_string(),
        label,
        remote,
        client,
        removed,
    });
    Ok(())
}

/// Commits the queued revocations and tells each client it counted.
pub async fn commit_revocations(
    env: &JobEnv,
    conversation: &mut Conversation,
) -> Result<(), StorageError> {
    let queued = std::mem::take(&mut env.state.borrow_mut().revocations);
    let mut queued = queued.into_iter();
    while let Some(revocation) = queued.next() {
        let entry = LogEntry::RuleRevoked {
            rule: revocation.rule.clone(),
            by: DecidedBy::User,
            client: revocation.label.clone(),
            remote: revocation.remote.clone(),
            at: LogEntry::now(),
        };
        if let Err(e) = commit(env, conversation, entry).await {
            // Not revoked after all: the log is what a restart believes.
            let mut state = env.state.borrow_mut();
            for unsaved in std::iter::once(revocation).chain(queued) {
                unsaved.client.error(ErrorCode::StorageError, e.to_string());
                state.session_rules.extend(unsaved.removed);
            }
            return Err(e);
        }
        revocation.client.respond(crate::protocol::answer::Ack);
    }
    Ok(())
}

/// `scope: "always"`: writes the rule an answer to `call` adds to the
/// config file. `Ok(Scope::Always)` once it is durable there;
/// `Ok(Scope::Session)` when it could not be written (every client is
/// warned why: the rule still holds for this conversation); `Err` with why
/// the answer is refused (`invalid_params`): the call adds no rule, the
/// rule may not be kept ([`approval::Policy::why_not_always`]), or it
/// holds a control character.
pub async fn persist_always(
    env: &JobEnv,
    call: &approval::Call<'_>,
    rule: Option<&Rule>,
) -> Result<Scope, String> {
    let Some(rule) = rule else {
        return Err("this call adds no rule that could be kept (`always` needs one)".into());
    };
    let refusal = env.state.borrow().policy.why_not_always(call);
    if let Some(why) = refusal {
        return Err(format!(
            "{why} (`{rule}`); answer `session` for this conversation instead"
        ));
    }
    let text = rule.to_string();
    if text.chars().any(char::is_control) {
        return Err(
            "the rule holds a control character, which is never written to the config file".into(),
        );
    }
    let Some(path) = env.config.config_path.clone() else {
        env.notify_all(
            Level::Warn,
            "approval",
            format!("{text} holds for this conversation only: there is no config directory to keep it in"),
        );
        return Ok(Scope::Session);
    };
    let root = env.workspace.root().to_path_buf();
    let line = text.clone();
    let target = path.clone();
    let written =
        tokio::task::spawn_blocking(move || approval::persist::append_allow(&target, &root, &line))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
    match written {
        Ok(()) => Ok(Scope::Always),
        Err(e) => {
            env.notify_all(
                Level::Warn,
                "approval",
                format!(
                    "{text} holds for this conversation only: it could not be written to {}: {e}",
                    path.display()
                ),
            );
            Ok(Scope::Session)
        }
    }
}
