//! Block assembly: one model reply streamed into blocks, each committed as
//! soon as the model finishes it.
//!
//! A block's hints are sent before its commit is asked for, and the next
//! block's first hint waits for that commit: that is what lets the
//! broadcaster promise "a block's hints never arrive after its entry".

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::job::{commit, JobEnv};
use crate::context::Conversation;
use crate::protocol::{
    AssistantItem, ErrorCode, Event, LogEntry, TurnErrorCode, Usage, MAX_JSON_DEPTH,
};
use crate::provider::{repetition, ModelError, ModelEvent, ModelStream};

/// A tool call the model made, committed, waiting to be decided and run.
#[derive(Debug, Clone)]
pub struct Call {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
}

/// How one model reply went.
pub struct Reply {
    pub tool_calls: Vec<Call>,
    pub usage: Option<Usage>,
    pub end: ReplyEnd,
}

pub enum ReplyEnd {
    Done,
    Cancelled,
    /// The model call failed.
    Failed(ModelError),
    /// A commit failed (the storage error was told to every client).
    Storage(String),
}

/// The block being streamed.
enum Block {
    Text(String),
    Reasoning(String),
    ToolCall {
        call_id: String,
        /// The id the provider streams the call's argument deltas under,
        /// which differs from `call_id` when that had to be made unique.
        provider_id: String,
        name: String,
        arguments: String,
    },
}

/// Which kind of streamed text a delta extends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Text,
    Reasoning,
}

/// Streams one model reply, committing each block as it completes.
pub async fn stream_reply(
    env: &JobEnv,
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
    // Made once, not per event: a fresh `cancelled()` takes the token's lock
    // to register and again to deregister, on every chunk of the stream.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        let event = tokio::select! {
            biased;
            _ = &mut cancelled => {
                reply.end = ReplyEnd::Cancelled;
                break;
            }
            event = stream.next() => event,
        };
        let event = match event {
            None => break,
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                env.publish_error(
                    ErrorCode::ModelError,
                    format!("{} model call failed: {e}", env.provider.name()),
                );
                reply.end = ReplyEnd::Failed(e);
                break;
            }
        };
        let committed = match event {
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
                let unique = unique_call_id(&call_id, &reply.tool_calls);
                env.publish(Event::ToolCallStart {
                    call_id: unique.clone(),
                    name: name.clone(),
                });
                block = Some(Block::ToolCall {
                    call_id: unique,
                    provider_id: call_id,
                    name,
                    arguments: String::new(),
                });
                ok
            }
            ModelEvent::ToolCallArgsDelta { call_id, delta } => {
                if let Some(Block::ToolCall {
                    call_id: current,
                    provider_id,
                    arguments,
                    ..
                }) = &mut block
                {
                    if *provider_id == call_id {
                        arguments.push_str(&delta);
                        env.publish(Event::ToolCallArgsDelta {
                            call_id: current.clone(),
                            delta,
                        });
                    }
                }
                Ok(())
            }
            ModelEvent::BlockEnd => finish_block(env, conversation, block.take(), &mut reply).await,
            ModelEvent::Usage(usage) => {
                reply.usage = Some(usage);
                env.publish_usage(usage);
                Ok(())
            }
            ModelEvent::Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            } => {
                // Providers retry only before anything of a call is
                // committed; whatever its hints built is void.
                block = None;
                env.publish(Event::Retry {
                    attempt,
                    max_attempts,
                    delay_ms,
                    error,
                });
                Ok(())
            }
        };
        if let Err(e) = committed {
            reply.end = ReplyEnd::Storage(e);
            return reply;
        }
        let found = env.provider.may_loop().then(|| looping(block.as_ref()));
        if let Some(found) = found.flatten() {
            // Dropping the stream closes the connection, which stops the
            // server generating (llama.cpp, vLLM, Ollama all do).
            reply.end = ReplyEnd::Failed(ModelError::with_code(
                TurnErrorCode::OutputLimit,
                format!(
                    "the model kept repeating itself (the same {} bytes of text {} times in a \
                     row), so pod stopped the reply: small models fall into loops like this; a \
                     larger model, or the server's repeat penalty, avoids it",
                    found.period, found.repeats
                ),
            ));
            break;
        }
    }
    // A half-streamed tool call is dropped; text and reasoning are kept as
    // far as they got.
    if !matches!(reply.end, ReplyEnd::Done) {
        if let Some(Block::ToolCall { .. }) = block {
            block = None;
        }
    }
    if let Err(e) = finish_block(env, conversation, block, &mut reply).await {
        if matches!(reply.end, ReplyEnd::Done | ReplyEnd::Cancelled) {
            reply.end = ReplyEnd::Storage(e);
        }
    }
    reply
}

/// Whether the text or reasoning being streamed ends in a loop (see
/// `provider::repetition`): such a reply would otherwise run to the output
/// limit, minutes on a CPU.
fn looping(block: Option<&Block>) -> Option<repetition::Loop> {
    match block? {
        Block::Text(text) | Block::Reasoning(text) => repetition::ending_loop(text),
        Block::ToolCall { .. } => None,
    }
}

/// The id a call is committed under: the provider's, unless it is blank or
/// an earlier call of the same reply already has it, then the first free
/// `<id>_2`, `<id>_3`, …. Approvals, results and `pod approve` name calls
/// by id, so two calls sharing one would let a person approve the one they
/// were shown and run the other (a model, or a hostile script, can send
/// that).
fn unique_call_id(id: &str, earlier: &[Call]) -> String {
    let taken = |candidate: &str| earlier.iter().any(|c| c.call_id == candidate);
    let base = if id.trim().is_empty() { "call" } else { id };
    if base == id && !taken(id) {
        return id.to_owned();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| base.to_owned())
}

/// Adds streamed text to the current block when it is of the same kind;
/// otherwise commits the current block and starts a new one.
async fn extend_text(
    env: &JobEnv,
    conversation: &mut Conversation,
    block: &mut Option<Block>,
    reply: &mut Reply,
    kind: TextKind,
    text: &str,
) -> Result<(), String> {
    match (block.as_mut(), kind) {
        (Some(Block::Text(so_far)), TextKind::Text)
        | (Some(Block::Reasoning(so_far)), TextKind::Reasoning) => {
            so_far.push_str(text);
            Ok(())
        }
        _ => {
            let committed = finish_block(env, conversation, block.take(), reply).await;
            *block = Some(match kind {
                TextKind::Text => Block::Text(text.to_owned()),
                TextKind::Reasoning => Block::Reasoning(text.to_owned()),
            });
            committed
        }
    }
}

/// Commits a finished block; the error is the storage failure's message.
async fn finish_block(
    env: &JobEnv,
    conversation: &mut Conversation,
    block: Option<Block>,
    reply: &mut Reply,
) -> Result<(), String> {
    let item = match block {
        None => return Ok(()),
        Some(Block::Text(text)) if text.is_empty() => return Ok(()),
        Some(Block::Reasoning(text)) if text.is_empty() => return Ok(()),
        Some(Block::Text(text)) => AssistantItem::Text { text },
        Some(Block::Reasoning(text)) => AssistantItem::Reasoning { text },
        Some(Block::ToolCall {
            call_id,
            name,
            arguments,
            ..
        }) => {
            env.publish(Event::ToolCallDone {
                call_id: call_id.clone(),
            });
            let arguments = parse_arguments(&arguments);
            reply.tool_calls.push(Call {
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            });
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            }
        }
    };
    let entry = LogEntry::AssistantItems { items: vec![item] };
    commit(env, conversation, entry)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Tool arguments as a JSON object. Empty means no arguments; anything that
/// is not a JSON object — or nests deeper than the log may hold — is kept as
/// text under `invalid_arguments`, so the log still shows what the model
/// sent and the tool reports the problem to the model.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    if crate::protocol::json_depth(raw.as_bytes()) > MAX_JSON_DEPTH {
        return serde_json::json!({ "invalid_arguments": raw });
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => serde_json::json!({ "invalid_arguments": raw }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_too_deep_for_the_log_are_kept_as_text() {
        let deep = format!(
            "{{\"a\":{}1{}}}",
            "[".repeat(MAX_JSON_DEPTH + 10),
            "]".repeat(MAX_JSON_DEPTH + 10)
        );
        let parsed = parse_arguments(&deep);
        assert_eq!(parsed["invalid_arguments"], deep.as_str());
        assert_eq!(parse_arguments(r#"{"path":"a"}"#)["path"], "a");
        assert_eq!(parse_arguments(" "), serde_json::json!({}));
        assert!(parse_arguments("[1]")["invalid_arguments"].is_string());
    }

    #[test]
    fn a_repeated_or_blank_call_id_gets_the_first_free_suffix() {
        let call = |id: &str| Call {
            call_id: id.into(),
            name: "bash".into(),
            arguments: serde_json::json!({}),
        };
        assert_eq!(unique_call_id("c1", &[]), "c1");
        assert_eq!(unique_call_id("c1", &[call("c1")]), "c1_2");
        assert_eq!(unique_call_id("c1", &[call("c1"), call("c1_2")]), "c1_3");
        assert_eq!(unique_call_id(" ", &[]), "call_2");
    }
}
