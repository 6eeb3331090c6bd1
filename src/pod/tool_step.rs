//! One step's tool calls: decided, asked about, answered and run.
//!
//! The calls of a model step are decided first — a deny rule, an allow rule,
//! the mode — and every policy decision and approval request is committed,
//! in call order, before any call runs, so a person sees all of a step's
//! requests at once. Then the calls run in order, each once it and every
//! call before it is decided. Answers are committed the moment they arrive,
//! even while an earlier call is still running, so whoever answered hears
//! at once that their answer counted.
//!
//! Everything here is in the log: a pod that stops while requests are
//! pending leaves them pending, and the next start resumes the step with
//! [`resume`] from exactly where it stopped, without running a tool twice.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::assembly::Call;
use super::broadcaster::Published;
use super::checkpoint;
use super::job::{commit, Answer, JobEnv};
use crate::approval::{self, Verdict};
use crate::context::{Conversation, StepCall, STOPPED_MARK as STOPPED};
use crate::protocol::{DecidedBy, Decision, Event, LogEntry, Scope, ToolResult};
use crate::tools::registry::{self, Effect};
use crate::tools::{ToolOutcome, KILLED};

/// How a step ended.
pub enum StepOutcome {
    /// Every call has its result: the turn goes on.
    Done,
    Cancelled,
    /// The pod is stopping with requests pending: they stay pending.
    Suspended,
    Storage(String),
}

/// How long a cancelled tool may take to give up before the turn stops
/// waiting for it.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What is to become of one call.
enum Plan {
    /// Refused before anyone was asked (unknown tool, bad arguments, a path
    /// outside the workspace): this is its result.
    Invalid(ToolOutcome),
    /// Allowed; the message, if any, is what the person told the model.
    Run(Option<String>),
    /// Denied: this is its result.
    Denied(String),
    /// Waiting for a person.
    Pending,
    /// Found without a result on restart where it may have been running.
    Interrupted,
    /// Has its result already.
    Finished,
}

/// Decides, asks about and runs the calls of one model step.
pub async fn run(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    calls: Vec<Call>,
) -> StepOutcome {
    let session_id = conversation.session_id;
    let mut plans = Vec::with_capacity(calls.len());
    let mut entries = Vec::new();
    let mut requests = Vec::new();
    for call in &calls {
        let (plan, entry) = decide(env, session_id, call).await;
        if let (Plan::Pending, Some(request)) = (&plan, &entry) {
            requests.push((call.clone(), request.clone()));
        }
        plans.push(plan);
        entries.extend(entry);
    }
    // Answers are taken from the moment a request can be seen: a client
    // that approves as soon as the entry reaches it must find it pending.
    let answers = open_answers(env, &calls, &plans);
    for entry in entries {
        if let Err(e) = commit(env, conversation, entry).await {
            close_answers(env);
            return StepOutcome::Storage(e.to_string());
        }
    }
    let _deciding = super::hooks::approval_requests(env, session_id, requests);
    execute(env, conversation, cancel, calls, plans, answers).await
}

/// Goes on with the open turn's last step after a restart: calls with a
/// result are done, decided ones run (or get their denial), pending ones
/// are waited for again. The first call without a result may have been
/// running when the pod died — unless the call before it was the one the
/// stop interrupted — so it gets a result saying so instead of running
/// twice.
pub async fn resume(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    answers: Answers,
) -> StepOutcome {
    let step = conversation.open_step();
    let mut calls = Vec::with_capacity(step.calls.len());
    let mut plans = Vec::with_capacity(step.calls.len());
    let mut first_unfinished = true;
    for StepCall {
        call_id,
        name,
        arguments,
        finished,
        decision,
        requested,
        ..
    } in step.calls
    {
        let plan = if finished {
            Plan::Finished
        } else {
            let plan = match decision {
                Some((Decision::Allow, message)) => Plan::Run(message),
                Some((_, message)) => Plan::Denied(denied_by_user(message.as_deref())),
                None if requested => Plan::Pending,
                None => Plan::Run(None),
            };
            let may_have_run =
                first_unfinished && matches!(plan, Plan::Run(_)) && !step.previous_stopped;
            first_unfinished = false;
            if may_have_run {
                Plan::Interrupted
            } else {
                plan
            }
        };
        calls.push(Call {
            call_id,
            name,
            arguments,
        });
        plans.push(plan);
    }
    execute(env, conversation, cancel, calls, plans, answers).await
}

/// The answers to a step's pending calls, as the step reads them.
pub type Answers = mpsc::UnboundedReceiver<Answer>;

/// Makes the calls a restarted pod finds waiting answerable at once, before
/// anything else of the start runs: a client that connects (or answers)
/// while the pod still settles sees the pod `waiting` on them, and an answer
/// that arrives meanwhile waits in the channel `resume` then reads.
pub fn reopen_answers(env: &JobEnv, conversation: &Conversation) -> Answers {
    let (sender, answers) = mpsc::unbounded_channel();
    {
        let mut state = env.state.borrow_mut();
        state.pending = conversation
            .open_step()
            .calls
            .into_iter()
            .filter(|c| !c.finished && c.requested && c.decision.is_none())
            .map(|c| c.call_id)
            .collect();
        state.answers = Some(sender);
    }
    env.publish_status();
    answers
}

/// The policy's verdict on one call, and the entry it commits (a policy
/// denial or an approval request; a call simply allowed commits none).
async fn decide(env: &JobEnv, session_id: uuid::Uuid, call: &Call) -> (Plan, Option<LogEntry>) {
    let checked = if super::agent_tools::is_offered(env, &call.name) {
        super::agent_tools::precheck(&call.name, &call.arguments)
    } else {
        env.toolbox.precheck(&call.name, &call.arguments)
    };
    if let Err(outcome) = checked {
        return (Plan::Invalid(outcome), None);
    }
    let subject = approval::Call {
        tool: &call.name,
        arguments: &call.arguments,
    };
    // A deny rule first; then the `pre_tool_use` hooks, which can only deny.
    if env.state.borrow().policy.deny_rule(&subject).is_none() {
        if let Some((result, entry)) = super::hooks::pre_tool_use(env, session_id, call).await {
            return (Plan::Denied(result), Some(entry));
        }
    }
    let verdict = {
        let state = env.state.borrow();
        state
            .policy
            .decide(&subject, state.session_rules.iter().map(|r| &r.rule))
    };
    match verdict {
        Verdict::Run => (Plan::Run(None), None),
        Verdict::Deny { rule } => {
            let result =
                format!("[denied by the pod's policy ({rule}): this tool call was not run]");
            let entry = LogEntry::ApprovalDecision {
                call_id: call.call_id.clone(),
                decision: Decision::Deny,
                scope: Scope::Once,
                rule: Some(rule),
                by: DecidedBy::Policy,
                client: None,
                remote: None,
                message: None,
            };
            (Plan::Denied(result), Some(entry))
        }
        Verdict::Ask { reason } => {
            let description = describe(env, call).await;
            let session_rule = env.state.borrow().policy.session_rule(&subject);
            let entry = LogEntry::ApprovalRequest {
                call_id: call.call_id.clone(),
                tool: call.name.clone(),
                summary: description.summary,
                preview: description.preview,
                reason,
                session_rule: session_rule.map(|rule| rule.to_string()),
            };
            (Plan::Pending, Some(entry))
        }
    }
}

/// The summary and preview a person decides on; reading the file to diff
/// against is blocking I/O, so it runs on the blocking pool.
async fn describe(env: &JobEnv, call: &Call) -> approval::Description {
    let root = env.workspace.root().to_path_buf();
    let (name, arguments) = (call.name.clone(), call.arguments.clone());
    tokio::task::spawn_blocking(move || {
        approval::describe(
            &approval::Call {
                tool: &name,
                arguments: &arguments,
            },
            &root,
        )
    })
    .await
    .unwrap_or_else(|e| approval::Description {
        summary: call.name.clone(),
        preview: format!("(no preview: {e})"),
    })
}

/// Why an approved file change must not run, if it must not: the file
/// changed between the preview a person approved and now (someone created
/// the file that was new, or edited it), so the change they saw is not the
/// one that would be made. The preview is recomputed and compared with the
/// one the log's `approval_request` holds, so this holds across a restart.
async fn changed_since_shown(
    env: &JobEnv,
    conversation: &Conversation,
    call: &Call,
) -> Option<String> {
    if registry::effect(&call.name) != Effect::WritesFile {
        return None;
    }
    let shown = conversation
        .open_step()
        .calls
        .into_iter()
        .find(|c| c.call_id == call.call_id)?
        .shown?;
    let now = describe(env, call).await.preview;
    (now != shown).then(|| {
        format!(
            "[not run: {} changed after the user approved this change, so the diff they saw is \
             not what it would do now; read the file again and make the change anew]",
            call.arguments
                .get("path")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("the file")
        )
    })
}

fn denied_by_user(message: Option<&str>) -> String {
    match message {
        Some(m) => format!("[denied by the user: this tool call was not run] The user said: {m}"),
        None => "[denied by the user: this tool call was not run]".into(),
    }
}

/// Runs the planned calls in order, waiting for answers where needed.
async fn execute(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    calls: Vec<Call>,
    mut plans: Vec<Plan>,
    mut answers: mpsc::UnboundedReceiver<Answer>,
) -> StepOutcome {
    env.publish_status();
    let outcome =
        execute_in_order(env, conversation, cancel, &calls, &mut plans, &mut answers).await;
    close_answers(env);
    outcome
}

/// Makes the step's pending calls answerable: their ids go into the state
/// the worker checks `approve` against, with the channel answers take.
fn open_answers(env: &JobEnv, calls: &[Call], plans: &[Plan]) -> mpsc::UnboundedReceiver<Answer> {
    let (sender, answers) = mpsc::unbounded_channel();
    let mut state = env.state.borrow_mut();
    state.pending = calls
        .iter()
        .zip(plans)
        .filter(|(_, plan)| matches!(plan, Plan::Pending))
        .map(|(call, _)| call.call_id.clone())
        .collect();
    state.answers = Some(sender);
    answers
}

/// Nothing of the step is answerable any more.
fn close_answers(env: &JobEnv) {
    {
        let mut state = env.state.borrow_mut();
        state.pending.clear();
        state.answers = None;
    }
    env.publish_status();
}

async fn execute_in_order(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    calls: &[Call],
    plans: &mut [Plan],
    answers: &mut mpsc::UnboundedReceiver<Answer>,
) -> StepOutcome {
    for i in 0..calls.len() {
        while matches!(plans[i], Plan::Pending) {
            tokio::select! {
                Some(answer) = answers.recv() => {
                    if let Err(e) = record(env, conversation, calls, plans, answer).await {
                        return StepOutcome::Storage(e);
                    }
                }
                _ = cancel.cancelled() => return abandon(env, conversation, calls, plans).await,
            }
        }
        let outcome = match std::mem::replace(&mut plans[i], Plan::Finished) {
            Plan::Finished => continue,
            Plan::Pending => unreachable!("waited above until decided"),
            Plan::Invalid(outcome) => outcome,
            Plan::Denied(text) => ToolOutcome::error(text),
            Plan::Interrupted => ToolOutcome::error(
                "[interrupted: the pod stopped while this tool call was due to run; it may have \
                 run in part]",
            ),
            Plan::Run(message) => {
                if !env.wait_while_paused(cancel).await {
                    plans[i] = Plan::Run(message);
                    return abandon(env, conversation, calls, plans).await;
                }
                if let Some(why) = changed_since_shown(env, conversation, &calls[i]).await {
                    ToolOutcome::error(why)
                } else {
                    if let Err(e) = checkpoint::before_call(env, conversation, &calls[i].name).await
                    {
                        return StepOutcome::Storage(e.to_string());
                    }
                    let ran =
                        run_tool(env, conversation, cancel, &calls[i], calls, plans, answers).await;
                    let mut outcome = match ran {
                        Ok(outcome) => outcome,
                        Err(e) => return StepOutcome::Storage(e),
                    };
                    if let Some(message) = message {
                        outcome.output.push_str(&format!(
                            "\n[the user approved this call and said: {message}]"
                        ));
                    }
                    outcome
                }
            }
        };
        let observed =
            super::hooks::wants_results(env).then(|| (outcome.output.clone(), outcome.is_error));
        let result = LogEntry::ToolResults {
            results: vec![ToolResult {
                call_id: calls[i].call_id.clone(),
                output: outcome.output,
                is_error: outcome.is_error,
            }],
        };
        if let Err(e) = commit(env, conversation, result).await {
            return StepOutcome::Storage(e.to_string());
        }
        if let Some((output, is_error)) = observed {
            let session_id = conversation.session_id;
            super::hooks::post_tool_use(env, session_id, &calls[i], &output, is_error).await;
        }
        if cancel.is_cancelled() {
            return abandon(env, conversation, calls, plans).await;
        }
    }
    StepOutcome::Done
}

/// Runs one allowed call, committing answers to later calls while it runs.
/// A cancelled tool returns what it did so far; when the cancel is the pod
/// stopping with requests pending, its last line says so.
async fn run_tool(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    call: &Call,
    calls: &[Call],
    plans: &mut [Plan],
    answers: &mut mpsc::UnboundedReceiver<Answer>,
) -> Result<ToolOutcome, String> {
    if super::agent_tools::is_offered(env, &call.name) {
        // It commits entries of its own (`agent_started`, children's
        // `agent_turn_end`), so it holds the conversation; answers to the
        // step's later calls wait in their channel meanwhile.
        let outcome = super::agent_tools::call(env, conversation, cancel, call).await;
        return Ok(ToolOutcome {
            output: crate::tools::cap(&outcome.output, env.toolbox.limits().output_cap_bytes),
            is_error: outcome.is_error,
        });
    }
    let broadcaster = env.broadcaster.clone();
    let call_id = call.call_id.clone();
    let sink = Arc::new(move |text: &str| {
        broadcaster.do_send(Published::Event(Box::new(Event::ToolOutputDelta {
            call_id: call_id.clone(),
            text: text.to_owned(),
        })));
    });
    let tool = env
        .toolbox
        .call(&call.name, &call.arguments, cancel.clone(), sink);
    let mut tool = std::pin::pin!(tool);
    let grace = tokio::time::sleep(Duration::MAX);
    let mut grace = std::pin::pin!(grace);
    let mut cancel_seen = false;
    let mut outcome = loop {
        tokio::select! {
            outcome = &mut tool => break outcome,
            Some(answer) = answers.recv() => record(env, conversation, calls, plans, answer).await?,
            _ = cancel.cancelled(), if !cancel_seen => {
                cancel_seen = true;
                grace.as_mut().reset(tokio::time::Instant::now() + CANCEL_GRACE);
            }
            _ = &mut grace => break ToolOutcome::error(format!(
                "[cancelled: {} did not stop within {}s of the cancel; it may still be running]",
                call.name,
                CANCEL_GRACE.as_secs()
            )),
        }
    };
    let suspending =
        cancel.is_cancelled() && env.stopping() && !env.state.borrow().pending.is_empty();
    if suspending {
        if let Some(before) = outcome.output.strip_suffix(KILLED) {
            outcome.output = format!("{before}{STOPPED}");
        } else {
            outcome.output.push_str(&format!("\n{STOPPED}"));
        }
    }
    Ok(outcome)
}

/// Commits a person's answer to one of the step's pending calls, tells them
/// it counted, and plans the call accordingly.
async fn record(
    env: &JobEnv,
    conversation: &mut Conversation,
    calls: &[Call],
    plans: &mut [Plan],
    answer: Answer,
) -> Result<(), String> {
    let Some(index) = calls.iter().position(|c| c.call_id == answer.call_id) else {
        return Ok(());
    };
    if !matches!(plans[index], Plan::Pending) {
        return Ok(());
    }
    let call = &calls[index];
    let subject = approval::Call {
        tool: &call.name,
        arguments: &call.arguments,
    };
    let adds_rule = answer.decision == Decision::Allow
        && matches!(answer.scope, Scope::Session | Scope::Always);
    let rule = if adds_rule {
        env.state.borrow().policy.session_rule(&subject)
    } else {
        None
    };
    let mut scope = answer.scope;
    if scope == Scope::Always {
        match super::rules::persist_always(env, &subject, rule.as_ref()).await {
            Ok(written) => scope = written,
            Err(why) => {
                // Refused: the call is still waiting for a usable answer.
                env.state.borrow_mut().pending.push(call.call_id.clone());
                if let Some(client) = &answer.client {
                    client.error(crate::protocol::ErrorCode::InvalidParams, why);
                }
                return Ok(());
            }
        }
    }
    let entry = LogEntry::ApprovalDecision {
        call_id: call.call_id.clone(),
        decision: answer.decision,
        scope,
        rule: rule.as_ref().map(ToString::to_string),
        by: answer.by,
        client: answer.label,
        remote: answer.remote,
        message: answer.message.clone(),
    };
    let seq = match commit(env, conversation, entry).await {
        Ok(seq) => seq,
        Err(e) => {
            if let Some(client) = &answer.client {
                client.error(crate::protocol::ErrorCode::StorageError, e.to_string());
            }
            return Err(e.to_string());
        }
    };
    if let Some(rule) = rule {
        env.state
            .borrow_mut()
            .session_rules
            .push(super::job::SessionRule {
                rule,
                session_id: conversation.session_id,
                seq,
            });
    }
    plans[index] = match answer.decision {
        Decision::Allow => Plan::Run(answer.message),
        _ => Plan::Denied(denied_by_user(answer.message.as_deref())),
    };
    if let Some(client) = &answer.client {
        client.respond(crate::protocol::answer::Ack);
    }
    env.publish_status();
    Ok(())
}

/// The step was cancelled (or the pod is stopping). A stop with requests
/// pending leaves them pending for the next start; otherwise every pending
/// call is recorded as denied by the cancel.
async fn abandon(
    env: &JobEnv,
    conversation: &mut Conversation,
    calls: &[Call],
    plans: &[Plan],
) -> StepOutcome {
    let pending: Vec<&Call> = calls
        .iter()
        .zip(plans)
        .filter(|(_, plan)| matches!(plan, Plan::Pending))
        .map(|(call, _)| call)
        .collect();
    if env.stopping() && !pending.is_empty() {
        return StepOutcome::Suspended;
    }
    for call in pending {
        let entry = LogEntry::ApprovalDecision {
            call_id: call.call_id.clone(),
            decision: Decision::Deny,
            scope: Scope::Once,
            rule: None,
            by: DecidedBy::Cancel,
            client: None,
            remote: None,
            message: None,
        };
        if let Err(e) = commit(env, conversation, entry).await {
            return StepOutcome::Storage(e.to_string());
        }
    }
    StepOutcome::Cancelled
}
