//! The turn loop: what one `run` does, step by step, and the commit rules it
//! keeps.
//!
//! Everything is committed per item, as soon as it is final: the user input
//! when the turn starts (with the project's instructions and the
//! environment right after it when they changed), each assistant block when the model finishes it
//! (`assembly.rs`), each step's approval requests and policy decisions
//! before any of its calls runs, each tool result as soon as it is known
//! (`tool_step.rs`), `turn_end` last — with the error that ended it, so the
//! record says why after any restart.

use tokio_util::sync::CancellationToken;

use super::assembly::{self, ReplyEnd};
use super::checkpoint;
use super::compaction;
use super::environment;
use super::hooks;
use super::instructions;
use super::job::{commit, JobEnv, QueuedRun};
use super::rules;
pub use super::tool_step::reopen_answers;
use super::tool_step::{self, StepOutcome};
use crate::context::{missing_results, Conversation, Reported};
use crate::protocol::{
    CompactReason, ContextSource, Decision, InjectedItem, LogEntry, ToolResult, TurnEndReason,
    TurnError, TurnErrorCode, TurnRef, Usage,
};
use crate::provider::{estimate, ModelStream};

/// How a turn ended.
struct Ending {
    reason: TurnEndReason,
    error: Option<TurnError>,
}

impl Ending {
    fn plain(reason: TurnEndReason) -> Self {
        Self {
            reason,
            error: None,
        }
    }

    fn error(code: TurnErrorCode, message: impl Into<String>) -> Self {
        Self {
            reason: TurnEndReason::Error,
            error: Some(TurnError {
                code,
                message: message.into(),
            }),
        }
    }
}

/// What the step loop came to.
enum Outcome {
    End(Ending),
    /// The pod is stopping while approvals are pending: the turn stays open
    /// (no `turn_end`) and the next start resumes it.
    Suspended,
}

/// A new turn id: unique across restarts, short enough to read.
pub fn new_turn_id() -> String {
    format!("t-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// Runs one turn to its `turn_end`.
pub async fn run_turn(
    env: &JobEnv,
    conversation: &mut Conversation,
    run: QueuedRun,
    turn: TurnRef,
    cancel: CancellationToken,
) {
    // Before anything is said or committed: a hook may refuse the run.
    let Ok(contexts) = hooks::user_prompt_submit(
        env,
        conversation.session_id,
        &turn.turn_id,
        &run.segments,
        run.client.as_ref(),
    )
    .await
    else {
        return;
    };
    env.publish(crate::protocol::Event::TurnStart {
        turn_id: turn.turn_id.clone(),
        request_id: turn.request_id.clone(),
    });
    if close_unfinished(env, conversation).await.is_err() {
        return;
    }
    env.state.borrow_mut().hook_context.extend(contexts);
    let input = LogEntry::UserInput {
        segments: run.segments,
        at: LogEntry::now(),
        turn_id: Some(turn.turn_id.clone()),
        request_id: turn.request_id.clone(),
        resolved: run.resolved,
    };
    let (instructions, environment) = tokio::join!(
        instructions::current(&env.workspace),
        environment::update_for(env, conversation)
    );
    let instructions = instructions.update_for(conversation);
    let instructions: Vec<LogEntry> = instructions
        .into_iter()
        .chain(environment)
        .chain(hooks::context_entry(env))
        .collect();
    let early = match commit_input(env, conversation, input, instructions).await {
        Ok(early) => early,
        Err(()) => return,
    };
    let mut usage = None;
    let outcome = steps(env, conversation, &cancel, early, &mut usage).await;
    finish(env, conversation, &turn, outcome, usage).await;
}

/// Goes on with a turn that a previous pod left waiting for approvals: its
/// last step is decided and run from where it stopped, then the turn
/// continues to its end as if nothing had happened.
pub async fn resume_turn(
    env: &JobEnv,
    conversation: &mut Conversation,
    turn: TurnRef,
    cancel: CancellationToken,
    answers: tool_step::Answers,
) {
    let mut usage = None;
    let outcome = match tool_step::resume(env, conversation, &cancel, answers).await {
        StepOutcome::Done => steps(env, conversation, &cancel, None, &mut usage).await,
        other => {
            step_outcome(other).unwrap_or(Outcome::End(Ending::plain(TurnEndReason::Completed)))
        }
    };
    finish(env, conversation, &turn, outcome, usage).await;
}

/// Commits the turn's end, unless it is suspended for a restart.
async fn finish(
    env: &JobEnv,
    conversation: &mut Conversation,
    turn: &TurnRef,
    outcome: Outcome,
    usage: Option<Usage>,
) {
    let Outcome::End(ending) = outcome else {
        return;
    };
    let why = match (ending.reason, ending.error.as_ref().map(|e| e.code)) {
        (TurnEndReason::Cancelled, _) => "[cancelled before this tool call ran]",
        (TurnEndReason::MaxSteps, _) => {
            "[the turn reached its step limit before this tool call ran]"
        }
        // Calls run only once their reply is complete: those of a reply
        // that failed never ran, and saying "not saved" would read like a
        // crash.
        (_, Some(TurnErrorCode::OutputLimit)) => CUT_AT_THE_LIMIT,
        (_, Some(code)) if code != TurnErrorCode::Storage => REPLY_FAILED,
        // The call may have run and only its result failed to commit.
        _ => crate::context::NO_RESULT_RECORDED,
    };
    let _ = finish_turn(env, conversation, turn, ending, usage, why).await;
}

/// The result of a complete tool call in a reply cut at the output limit.
const CUT_AT_THE_LIMIT: &str = "[not run: the model's reply was cut at the output limit before \
     it was complete, so this tool call never ran]";
/// The result of a complete tool call in a reply that failed later.
const REPLY_FAILED: &str = "[not run: the model's reply failed before it was complete, so this \
     tool call never ran]";

/// Answers every open tool call, then commits `turn_end`.
async fn finish_turn(
    env: &JobEnv,
    conversation: &mut Conversation,
    turn: &TurnRef,
    ending: Ending,
    usage: Option<Usage>,
    why: &str,
) -> Result<(), super::session_log::StorageError> {
    let open = conversation.unanswered_calls();
    if !open.is_empty() {
        let results = missing_results(open, why);
        commit(env, conversation, LogEntry::ToolResults { results }).await?;
    }
    checkpoint::before_turn_end(env, conversation).await?;
    let end = LogEntry::TurnEnd {
        reason: ending.reason,
        turn_id: Some(turn.turn_id.clone()),
        request_id: turn.request_id.clone(),
        usage,
        error: ending.error,
    };
    // Whoever sees this `turn_end` may at once ask for what needs the pod
    // idle (a fork, say): the turn is over from here on.
    env.state.borrow_mut().turn = None;
    commit(env, conversation, end).await?;
    hooks::turn_end(env, conversation.session_id, &turn.turn_id, ending.reason);
    if let Some(parent) = &env.parent {
        parent.tell(super::agents::News::TurnEnded {
            reason: ending.reason,
            usage,
            text: final_text(conversation),
            session_id: conversation.session_id,
        });
    }
    Ok(())
}

/// The last turn's final assistant text: its text blocks after its last
/// tool call (what a child's parent reads as the child's answer).
fn final_text(conversation: &Conversation) -> String {
    let mut blocks = Vec::new();
    for entry in conversation.entries().iter().rev() {
        match entry {
            LogEntry::AssistantItems { items } => match items.first() {
                Some(crate::protocol::AssistantItem::Text { text }) => blocks.push(text.as_str()),
                Some(crate::protocol::AssistantItem::ToolCall { .. }) => break,
                _ => {}
            },
            LogEntry::UserInput { .. } | LogEntry::ToolResults { .. } => break,
            _ => {}
        }
    }
    blocks.reverse();
    blocks.join("\n\n")
}

/// Why a child's turn must end before another model call: its usage
/// reached its budget.
fn over_budget(env: &JobEnv) -> Option<String> {
    let budget = env.budget?;
    let spent = env.state.borrow().spent;
    let used = spent.input_tokens + spent.output_tokens;
    (used >= budget).then(|| {
        format!(
            "this agent used {used} tokens, reaching its budget of {budget} (spawn_agent's \
             max_tokens, default --agent-max-tokens); its parent may spawn a new agent with a \
             larger max_tokens"
        )
    })
}

/// Closes a turn whose end could not be committed (the disk was full when
/// the turn ended): results for its unanswered tool calls, then `turn_end`
/// `error`. Every job calls this before it commits anything, so such a turn
/// is closed as soon as the disk takes writes again, before the next entry
/// — the log never holds a call without its result followed by more
/// conversation. `Err` while the disk still refuses: the job must not go on.
pub async fn close_unfinished(
    env: &JobEnv,
    conversation: &mut Conversation,
) -> Result<(), super::session_log::StorageError> {
    if !conversation.has_open_turn() {
        return Ok(());
    }
    let turn = conversation.open_turn();
    let ending = Ending::error(
        TurnErrorCode::Storage,
        "the session log could not be written when this turn ended; it was closed once writes \
         succeeded again",
    );
    let why = crate::context::NO_RESULT_RECORDED;
    finish_turn(env, conversation, &turn, ending, None, why).await
}

/// Closes a turn a crashed pod left open: results for its unanswered tool
/// calls, then `turn_end` `interrupted` with what is known.
pub async fn close_interrupted(env: &JobEnv, conversation: &mut Conversation, turn: TurnRef) {
    let ending = Ending {
        reason: TurnEndReason::Interrupted,
        error: Some(TurnError {
            code: TurnErrorCode::Crashed,
            message: "the pod stopped before this turn ended (it crashed or was killed)".into(),
        }),
    };
    let why = "[interrupted: the pod stopped before this tool call finished; it may have run in \
               part]";
    // Calls run in order, so only the first without a result can have been
    // running, and only if it was allowed; the others get a result saying
    // they never ran — a call that was waiting for a person is not one that
    // "may have run in part".
    let step = conversation.open_step();
    let mut first = !step.previous_stopped;
    let results: Vec<ToolResult> = step
        .calls
        .into_iter()
        .filter(|c| !c.finished)
        .map(|c| {
            let allowed = match c.decision {
                Some((decision, _)) => decision == Decision::Allow,
                None => !c.requested,
            };
            let may_have_run = std::mem::replace(&mut first, false) && allowed;
            let output = if c.name == super::agents::SPAWN_AGENT {
                return ToolResult {
                    output: super::agent_tools::interrupted_spawn(env, conversation, &c.call_id),
                    call_id: c.call_id,
                    is_error: true,
                };
            } else if may_have_run {
                why
            } else if c.requested && c.decision.is_none() {
                "[not run: the pod stopped while this tool call waited for approval, and its turn \
                 was closed; it never ran]"
            } else {
                "[not run: the pod stopped before this tool call's turn reached it; it never ran]"
            };
            ToolResult {
                call_id: c.call_id,
                output: output.to_owned(),
                is_error: true,
            }
        })
        .collect();
    if !results.is_empty()
        && commit(env, conversation, LogEntry::ToolResults { results })
            .await
            .is_err()
    {
        return;
    }
    let _ = finish_turn(env, conversation, &turn, ending, None, why).await;
}

/// Commits the turn's user input and what goes with it (the project's
/// instructions, when they changed; hooks' context). When nothing has to happen before the first model call (no
/// pause, no pending notify or model change, no compaction that could be
/// due), that call is started at the same time, so the model's time to
/// first byte hides the sync; its stream is returned, and not one of its
/// events is looked at before the input is durable. `Err` when the input
/// could not be committed (the turn is over: there is nothing to end).
async fn commit_input(
    env: &JobEnv,
    conversation: &mut Conversation,
    input: LogEntry,
    instructions: Vec<LogEntry>,
) -> Result<Option<ModelStream>, ()> {
    let overlap = {
        let state = env.state.borrow();
        !*env.paused.borrow() && state.notifies.is_empty() && state.model_request.is_none()
    } && over_budget(env).is_none();
    let pending: Vec<LogEntry> = std::iter::once(input).chain(instructions).collect();
    let early = if overlap {
        let read = env.read_inputs(conversation, &pending).await;
        conversation.with_pending(&pending, read, &env.workspace, &env.resolvers, |prepared| {
            let request = env.request_from(prepared);
            let due = compaction::might_compact(env, prepared.conversation(), &request);
            (!due).then(|| env.provider.stream(&request))
        })
    } else {
        None
    };
    let Some(stream) = early else {
        for entry in pending {
            commit(env, conversation, entry).await.map_err(drop)?;
        }
        return Ok(None);
    };
    let mut stream = futures::StreamExt::peekable(stream);
    let durable = async {
        for entry in pending {
            commit(env, conversation, entry).await?;
        }
        Ok::<(), super::session_log::StorageError>(())
    };
    let mut durable = std::pin::pin!(durable);
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
    committed
        .map(|()| Some(Box::pin(stream) as ModelStream))
        .map_err(drop)
}

/// Commits what waits for a step boundary: `notify` messages and a model
/// change. Never between a tool call and its result.
async fn step_boundary(env: &JobEnv, conversation: &mut Conversation) -> Result<(), String> {
    let (notes, model) = {
        let mut state = env.state.borrow_mut();
        (
            std::mem::take(&mut state.notifies),
            state.model_request.take(),
        )
    };
    if !notes.is_empty() {
        commit_notifies(env, conversation, notes)
            .await
            .map_err(|e| e.to_string())?;
    }
    if let Some(model) = model {
        commit_model_change(env, conversation, model)
            .await
            .map_err(|e| e.to_string())?;
    }
    let job_notes = std::mem::take(&mut env.state.borrow_mut().job_notes);
    commit_job_notes(env, conversation, job_notes)
        .await
        .map_err(|e| e.to_string())?;
    hooks::commit_context(env, conversation)
        .await
        .map_err(|e| e.to_string())?;
    super::agent_tools::commit_entries(env, conversation)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(entry) = environment::update_for(env, conversation).await {
        commit(env, conversation, entry)
            .await
            .map_err(|e| e.to_string())?;
    }
    rules::commit_revocations(env, conversation)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

pub async fn commit_notifies(
    env: &JobEnv,
    conversation: &mut Conversation,
    notes: Vec<String>,
) -> Result<u64, super::session_log::StorageError> {
    let items = notes
        .into_iter()
        .map(|text| InjectedItem {
            source: "notify".into(),
            text,
        })
        .collect();
    commit(env, conversation, LogEntry::HookInjectedItems { items }).await
}

/// Commits the notes of background jobs that ended (source `job`), if any.
pub async fn commit_job_notes(
    env: &JobEnv,
    conversation: &mut Conversation,
    notes: Vec<String>,
) -> Result<(), super::session_log::StorageError> {
    if notes.is_empty() {
        return Ok(());
    }
    let items = notes
        .into_iter()
        .map(|text| InjectedItem {
            source: "job".into(),
            text,
        })
        .collect();
    commit(env, conversation, LogEntry::HookInjectedItems { items }).await?;
    Ok(())
}

/// Records that the conversation runs on `model` of the pod's provider from
/// here on; the status follows.
pub async fn commit_model_change(
    env: &JobEnv,
    conversation: &mut Conversation,
    model: String,
) -> Result<u64, super::session_log::StorageError> {
    let entry = LogEntry::ModelChange {
        provider: env.provider.name().into(),
        model: model.clone(),
        at: LogEntry::now(),
    };
    let seq = commit(env, conversation, entry).await?;
    env.state.borrow_mut().model = model;
    env.publish_status();
    Ok(seq)
}

/// The model ↔ tools loop. `early` is the first model call, already started
/// by [`commit_input`].
async fn steps(
    env: &JobEnv,
    conversation: &mut Conversation,
    cancel: &CancellationToken,
    mut early: Option<ModelStream>,
    usage: &mut Option<Usage>,
) -> Outcome {
    let cancelled = || Outcome::End(Ending::plain(TurnEndReason::Cancelled));
    let mut overflowed = false;
    for _ in 0..env.config.max_steps {
        if let Some(why) = over_budget(env) {
            return Outcome::End(Ending::error(TurnErrorCode::Budget, why));
        }
        let stream = match early.take() {
            Some(stream) => stream,
            None => {
                if !env.wait_while_paused(cancel).await {
                    return cancelled();
                }
                if let Err(e) = step_boundary(env, conversation).await {
                    return Outcome::End(Ending::error(TurnErrorCode::Storage, e));
                }
                compaction::before_model_call(env, conversation).await;
                if cancel.is_cancelled() {
                    return cancelled();
                }
                env.provider.stream(&env.request(conversation))
            }
        };
        let reply = assembly::stream_reply(env, conversation, cancel, stream).await;
        if let Some(u) = reply.usage {
            usage.get_or_insert_with(Usage::default).add(&u);
            env.state.borrow_mut().spent.add(&u);
            let estimate =
                estimate::estimate_request_for(env.provider.name(), &env.request(conversation));
            conversation.reported_tokens = Some(Reported {
                tokens: u.input_tokens + u.output_tokens,
                estimate,
            });
            let mut state = env.state.borrow_mut();
            state.context_tokens = u.input_tokens;
            state.context_source = ContextSource::Usage;
            drop(state);
            env.publish_status();
        } else {
            // A server that reports no usage (llama-cpp-python) would leave
            // the gauge at 0% while compaction sees the estimate.
            let estimate =
                estimate::estimate_request_for(env.provider.name(), &env.request(conversation));
            let mut state = env.state.borrow_mut();
            state.context_tokens = estimate;
            state.context_source = ContextSource::Estimate;
            drop(state);
            env.publish_status();
        }
        match reply.end {
            ReplyEnd::Done => {}
            ReplyEnd::Cancelled => return cancelled(),
            ReplyEnd::Failed(e) if e.code == TurnErrorCode::ContextOverflow => {
                if !std::mem::replace(&mut overflowed, true)
                    && recover_from_overflow(env, conversation, &e.message).await
                {
                    continue;
                }
                let window = env.thresholds().context_window;
                let fixed = estimate::estimate_fixed(&env.request(conversation));
                let advice = if fixed >= window {
                    format!(
                        "pod's system prompt and tool definitions alone take about {fixed} \
                         tokens, {} more than the model's context window of {window} tokens, \
                         so no input fits. Start the model's server with a larger context \
                         (llama-server -c, llama-cpp-python --n_ctx, Ollama's \
                         OLLAMA_CONTEXT_LENGTH; 8192 or more) and set --context-window to \
                         the same number",
                        fixed - window
                    )
                } else {
                    format!(
                        "the request does not fit the model's context window ({window} tokens) \
                         even after compacting. Send a shorter input or start a new session \
                         (/new in the TUI); if the model's window is larger, set \
                         --context-window"
                    )
                };
                return Outcome::End(Ending::error(
                    TurnErrorCode::ContextOverflow,
                    format!("{}: {advice}", e.message),
                ));
            }
            ReplyEnd::Failed(e) => return Outcome::End(Ending::error(e.code, e.message)),
            ReplyEnd::Storage(e) => return Outcome::End(Ending::error(TurnErrorCode::Storage, e)),
        }
        if reply.tool_calls.is_empty() {
            return Outcome::End(Ending::plain(TurnEndReason::Completed));
        }
        let step = tool_step::run(env, conversation, cancel, reply.tool_calls).await;
        if let Some(outcome) = step_outcome(step) {
            return outcome;
        }
    }
    Outcome::End(Ending::plain(TurnEndReason::MaxSteps))
}

/// After a model call the server refused as too long for its context:
/// takes the window its message states (when smaller than the one pod
/// assumed), so compaction follows it from now on, and compacts. `true`
/// when the conversation was compacted and the call is worth one more try.
async fn recover_from_overflow(
    env: &JobEnv,
    conversation: &mut Conversation,
    message: &str,
) -> bool {
    if let Some(window) = crate::provider::overflow::stated_window(message) {
        let mut state = env.state.borrow_mut();
        state.learned_window = Some(state.learned_window.map_or(window, |w| w.min(window)));
    }
    env.publish_status();
    let before = conversation.session_id;
    compaction::compact(env, conversation, CompactReason::AutoMidTurn).await;
    conversation.session_id != before
}

/// The turn's outcome when a step ended it; `None` to go on.
fn step_outcome(step: StepOutcome) -> Option<Outcome> {
    match step {
        StepOutcome::Done => None,
        StepOutcome::Cancelled => Some(Outcome::End(Ending::plain(TurnEndReason::Cancelled))),
        StepOutcome::Suspended => Some(Outcome::Suspended),
        StepOutcome::Storage(e) => Some(Outcome::End(Ending::error(TurnErrorCode::Storage, e))),
    }
}
