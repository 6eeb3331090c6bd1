//! Hooks in the turn: where each event runs, and how what a hook said
//! becomes entries (`docs/hooks.md`). Running one hook and reading its
//! answer is `crate::hooks`; this file decides what the pod does with it.
//!
//! - `session_start`, `user_prompt_submit`, `post_tool_use`: a `context`
//!   is queued and committed as one `hook_injected_items` entry (source
//!   `hook`) at the next step boundary, or at once when idle.
//! - `pre_tool_use` (after the deny rules, before the allow rules): exit 2
//!   denies the call, `approval_decision` `by: "hook"`.
//! - `approval_request`: run beside the person who may answer; the first
//!   answer wins, so a hook's decision goes through the same door as an
//!   `approve` ([`take_pending`]).
//! - `turn_end`: observes, in a task of its own, holding nothing.
//!
//! A hook that misbehaves costs a `notification` (level `warn`, source
//! `hook`), never a stuck turn: every run ends by its timeout.

use std::rc::Rc;
use std::sync::Arc;

use actix::Addr;
use serde_json::{json, Value};
use uuid::Uuid;

use super::assembly::Call;
use super::broadcaster::{Broadcaster, Published};
use super::job::{commit, take_pending, Answer, JobEnv};
use super::outbox::Client;
use super::session_log::StorageError;
use crate::approval;
use crate::context::Conversation;
use crate::hooks::process::{self, End};
use crate::hooks::{HookEvent, Hooks};
use crate::protocol::{
    DecidedBy, Decision, ErrorCode, Event, InjectedItem, Level, LogEntry, Scope, Segment,
    TurnEndReason,
};
use crate::tools::Toolbox;
use crate::workspace::Workspace;

/// What the hooks of one event came to.
enum Said {
    /// Nothing that changes the course; the contexts to inject, if any.
    GoOn(Vec<String>),
    /// Exit 2 from a hook of an event that can block: its stderr.
    Blocked { label: String, stderr: String },
    /// An `approval_request` hook decided.
    Decided {
        label: String,
        decision: Decision,
        message: Option<String>,
    },
}

/// What running hooks needs, owned, so a task of its own can hold it.
#[derive(Clone)]
struct Runner {
    hooks: Arc<Hooks>,
    toolbox: Arc<Toolbox>,
    workspace: Workspace,
    broadcaster: Addr<Broadcaster>,
}

impl Runner {
    fn new(env: &JobEnv) -> Self {
        Self {
            hooks: Arc::clone(&env.hooks),
            toolbox: Arc::clone(&env.toolbox),
            workspace: env.workspace.clone(),
            broadcaster: env.broadcaster.clone(),
        }
    }

    /// Runs `event`'s hooks (those matching `call`, for tool events) in
    /// file order, until one blocks or decides.
    async fn run(&self, event: HookEvent, call: Option<&Call>, payload: Value) -> Said {
        let root = self.workspace.root();
        let approval_call = call.map(|c| approval::Call {
            tool: &c.name,
            arguments: &c.arguments,
        });
        let input = serde_json::to_vec(&payload).unwrap_or_default();
        let mut contexts = Vec::new();
        for hook in self.hooks.matching(event, approval_call.as_ref(), root) {
            let ran = process::run(hook, root, self.toolbox.sandbox(), &input).await;
            let problem = match &ran.end {
                End::Exited(0) => {
                    let answer = crate::hooks::Answer::read(&ran.stdout);
                    if event == HookEvent::ApprovalRequest {
                        if let Some((decision, message)) = answer.decision {
                            return Said::Decided {
                                label: hook.label(),
                                decision,
                                message,
                            };
                        }
                    }
                    if event.injects_context() {
                        contexts.extend(answer.context);
                    }
                    continue;
                }
                End::Exited(2) if event.can_block() => {
                    return Said::Blocked {
                        label: hook.label(),
                        stderr: String::from_utf8_lossy(&ran.stderr).trim_end().to_owned(),
                    };
                }
                End::Exited(2) => format!(
                    "exited 2, which blocks only on pre_tool_use and user_prompt_submit; \
                     ignored on {}",
                    event.as_str()
                ),
                End::Exited(code) => format!("exited {code}"),
                End::Signalled(signal) => format!("was killed by signal {signal}"),
                End::TimedOut(after) => format!(
                    "did not finish within {} s and was killed",
                    after.as_secs_f64()
                ),
                End::Failed(why) => format!("could not run: {why}"),
            };
            let stderr = ran
                .last_stderr_line()
                .map(|line| format!(": {line}"))
                .unwrap_or_default();
            self.broadcaster
                .do_send(Published::Event(Box::new(Event::Notification {
                    level: Level::Warn,
                    source: "hook".into(),
                    message: format!(
                        "{} ({}) {problem}{stderr}; the pod goes on as if it had said nothing",
                        hook.label(),
                        hook.command
                    ),
                })));
        }
        Said::GoOn(contexts)
    }
}

/// The fields every event carries.
fn payload(event: HookEvent, session_id: Uuid, turn_id: Option<&str>) -> Value {
    json!({
        "event": event.as_str(),
        "session_id": session_id,
        "turn_id": turn_id,
    })
}

fn call_json(call: &Call) -> Value {
    json!({"call_id": call.call_id, "name": call.name, "arguments": call.arguments})
}

fn turn_id(env: &JobEnv) -> Option<String> {
    env.state.borrow().turn.as_ref().map(|t| t.turn_id.clone())
}

fn queue_contexts(env: &JobEnv, contexts: Vec<String>) {
    env.state.borrow_mut().hook_context.extend(contexts);
}

/// `session_start`: `conversation` has just become current.
pub async fn session_start(env: &JobEnv, conversation: &Conversation) {
    if !env.hooks.has(HookEvent::SessionStart) {
        return;
    }
    let event = payload(HookEvent::SessionStart, conversation.session_id, None);
    if let Said::GoOn(contexts) = Runner::new(env)
        .run(HookEvent::SessionStart, None, event)
        .await
    {
        queue_contexts(env, contexts);
    }
}

/// `user_prompt_submit`, as the run leaves the queue: `Err(())` when a hook
/// blocked it (its client has been told; nothing is to be committed), else
/// the contexts to commit after the user input.
pub async fn user_prompt_submit(
    env: &JobEnv,
    session_id: Uuid,
    turn_id: &str,
    segments: &[Segment],
    client: Option<&Client>,
) -> Result<Vec<String>, ()> {
    if !env.hooks.has(HookEvent::UserPromptSubmit) {
        return Ok(Vec::new());
    }
    let mut event = payload(HookEvent::UserPromptSubmit, session_id, Some(turn_id));
    event["segments"] = json!(segments);
    match Runner::new(env)
        .run(HookEvent::UserPromptSubmit, None, event)
        .await
    {
        Said::GoOn(contexts) => Ok(contexts),
        Said::Blocked { label, stderr } => {
            let why = if stderr.is_empty() {
                "(it said nothing on stderr)".to_owned()
            } else {
                stderr
            };
            if let Some(client) = client {
                client.error(
                    ErrorCode::BlockedByHook,
                    format!("{label} blocked this message: {why}"),
                );
            }
            Err(())
        }
        Said::Decided { .. } => Ok(Vec::new()),
    }
}

/// `pre_tool_use`, for a call no deny rule denied: when a hook blocks it,
/// the call's result and its `approval_decision`.
pub async fn pre_tool_use(
    env: &JobEnv,
    session_id: Uuid,
    call: &Call,
) -> Option<(String, LogEntry)> {
    if !env.hooks.has(HookEvent::PreToolUse) {
        return None;
    }
    let mut event = payload(HookEvent::PreToolUse, session_id, turn_id(env).as_deref());
    event["call"] = call_json(call);
    let Said::Blocked { label, stderr } = Runner::new(env)
        .run(HookEvent::PreToolUse, Some(call), event)
        .await
    else {
        return None;
    };
    let result = if stderr.is_empty() {
        format!("[denied by a hook ({label}): this tool call was not run]")
    } else {
        format!("[denied by a hook ({label}): this tool call was not run] The hook said: {stderr}")
    };
    let entry = LogEntry::ApprovalDecision {
        call_id: call.call_id.clone(),
        decision: Decision::Deny,
        scope: Scope::Once,
        rule: None,
        by: DecidedBy::Hook,
        client: Some(label),
        remote: None,
        message: (!stderr.is_empty()).then_some(stderr),
    };
    Some((result, entry))
}

/// The `approval_request` hooks of a step's requests, running until they
/// decide or the step ends (dropping this kills them).
pub struct Deciding(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Deciding {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts the `approval_request` hooks of each request (`calls[i]` with
/// its committed `requests[i]`), each in a task on this thread: a decision
/// is an answer like a person's, and the first answer wins.
pub fn approval_requests(
    env: &JobEnv,
    session_id: Uuid,
    requests: Vec<(Call, LogEntry)>,
) -> Deciding {
    if !env.hooks.has(HookEvent::ApprovalRequest) {
        return Deciding(Vec::new());
    }
    let turn = turn_id(env);
    let tasks = requests
        .into_iter()
        .map(|(call, request)| {
            let runner = Runner::new(env);
            let state = Rc::clone(&env.state);
            let mut event = payload(HookEvent::ApprovalRequest, session_id, turn.as_deref());
            event["call"] = call_json(&call);
            event["approval"] = serde_json::to_value(&request).unwrap_or(Value::Null);
            tokio::task::spawn_local(async move {
                let said = runner
                    .run(HookEvent::ApprovalRequest, Some(&call), event)
                    .await;
                let Said::Decided {
                    label,
                    decision,
                    message,
                } = said
                else {
                    return;
                };
                let Some(answers) = take_pending(&mut state.borrow_mut(), &call.call_id) else {
                    return;
                };
                let _ = answers.send(Answer {
                    call_id: call.call_id,
                    decision,
                    scope: Scope::Once,
                    message,
                    label: Some(label),
                    by: DecidedBy::Hook,
                    remote: None,
                    client: None,
                });
            })
        })
        .collect();
    Deciding(tasks)
}

/// `post_tool_use`, once the call's result is committed.
pub async fn post_tool_use(
    env: &JobEnv,
    session_id: Uuid,
    call: &Call,
    output: &str,
    is_error: bool,
) {
    let mut event = payload(HookEvent::PostToolUse, session_id, turn_id(env).as_deref());
    event["call"] = call_json(call);
    event["result"] = json!({"output": output, "is_error": is_error});
    if let Said::GoOn(contexts) = Runner::new(env)
        .run(HookEvent::PostToolUse, Some(call), event)
        .await
    {
        queue_contexts(env, contexts);
    }
}

/// Whether `post_tool_use` hooks would run for anything: the caller keeps
/// a copy of the result only then.
pub fn wants_results(env: &JobEnv) -> bool {
    env.hooks.has(HookEvent::PostToolUse)
}

/// `turn_end`, once the entry is committed: the hooks run in a task of
/// their own and hold neither this turn nor the next.
pub fn turn_end(env: &JobEnv, session_id: Uuid, turn_id: &str, reason: TurnEndReason) {
    if !env.hooks.has(HookEvent::TurnEnd) {
        return;
    }
    let mut event = payload(HookEvent::TurnEnd, session_id, Some(turn_id));
    event["reason"] = serde_json::to_value(reason).unwrap_or(Value::Null);
    let runner = Runner::new(env);
    tokio::task::spawn_local(async move {
        runner.run(HookEvent::TurnEnd, None, event).await;
    });
}

/// Commits the queued hook contexts as one `hook_injected_items` entry.
pub async fn commit_context(
    env: &JobEnv,
    conversation: &mut Conversation,
) -> Result<(), StorageError> {
    let Some(entry) = context_entry(env) else {
        return Ok(());
    };
    commit(env, conversation, entry).await.map(drop)
}

/// The queued hook contexts as an entry, taking them; `None` when there are none.
pub fn context_entry(env: &JobEnv) -> Option<LogEntry> {
    let texts = std::mem::take(&mut env.state.borrow_mut().hook_context);
    if texts.is_empty() {
        return None;
    }
    Some(LogEntry::HookInjectedItems {
        items: texts
            .into_iter()
            .map(|text| InjectedItem {
                source: "hook".into(),
                text,
            })
            .collect(),
    })
}
