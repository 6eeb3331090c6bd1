//! Any OpenAI-compatible Chat Completions server (OpenAI, Ollama, llama.cpp,
//! vLLM, LM Studio, ...), streamed over server-sent events.

use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{join, parse_data, Endpoint, SseDecoder};
use super::retry::{AttemptError, RetryPolicy};
use super::wire::{write_messages, State, WireFormat};
use super::{BuildError, ChatMessage, ModelEvent, ModelRequest, ModelStream, Provider, ToolSpec};
use crate::protocol::{AssistantItem, Usage};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4o";
const NAME: &str = "openai";
const KEY_ENV: &str = "OPENAI_API_KEY";

pub struct OpenAi {
    model: String,
    endpoint: Endpoint,
}

impl OpenAi {
    /// `base_url` ends with the API version (`.../v1`), as in OpenAI's SDKs.
    /// The key is optional because local servers take none.
    pub fn new(
        model: String,
        base_url: &str,
        api_key: Option<&str>,
        retry: RetryPolicy,
    ) -> Result<Self, BuildError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| BuildError::BadKey { env: KEY_ENV })?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = join(base_url, "chat/completions");
        let endpoint = Endpoint::new(NAME, url, KEY_ENV, headers, retry)?;
        Ok(Self { model, endpoint })
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn stream(&self, request: &ModelRequest<'_>) -> ModelStream {
        let model = request.model.as_deref().unwrap_or(&self.model);
        self.endpoint
            .stream(|out| write_body(model, request, out), Decoder::default)
    }
}

/// Writes the Chat Completions request body straight from the borrowed
/// conversation, its messages as far as they are unchanged from the cache
/// (no intermediate JSON tree: see `docs/performance.md`):
/// `{"model","messages","stream","stream_options","tools"}`, `tools` left
/// out when there are none.
pub(super) fn write_body(
    model: &str,
    request: &ModelRequest<'_>,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut *out, model)?;
    out.extend_from_slice(b",\"messages\":[");
    if !request.system.is_empty() {
        put(
            &Message::System {
                content: &request.system,
            },
            out,
        )?;
    }
    write_messages::<Chat>(request, out)?;
    // Every message ends with a comma (see `put`); the last one's goes.
    if out.last() == Some(&b',') {
        out.pop();
    }
    out.extend_from_slice(b"],\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    if !request.tools.is_empty() {
        out.extend_from_slice(b",\"tools\":");
        let tools: Vec<WireTool> = request.tools.iter().map(WireTool::of).collect();
        serde_json::to_writer(&mut *out, &tools)?;
    }
    out.push(b'}');
    Ok(())
}

/// Writes one API message and a comma: a message's bytes then stand on
/// their own, whatever follows, so they can be kept (see [`WireFormat`]).
fn put(message: &Message<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, message)?;
    out.push(b',');
    Ok(())
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireTool<'a> {
    fn of(tool: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

/// The Chat Completions wire format: one API message per user message and
/// per tool result, one per assistant message with text or calls.
struct Chat;

impl WireFormat for Chat {
    const NAME: &'static str = NAME;

    fn write(
        message: &ChatMessage<'_>,
        state: State,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<State> {
        match message {
            ChatMessage::User { text } => {
                put(&Message::User { content: text }, out)?;
                Ok(Some("user"))
            }
            ChatMessage::Assistant { items } => match assistant_message(items) {
                Some(message) => {
                    put(&message, out)?;
                    Ok(Some("assistant"))
                }
                None => Ok(state),
            },
            ChatMessage::ToolResults { results } => {
                for r in results {
                    let message = Message::Tool {
                        tool_call_id: &r.call_id,
                        content: &r.output,
                    };
                    put(&message, out)?;
                }
                Ok(if results.is_empty() {
                    state
                } else {
                    Some("tool")
                })
            }
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    /// The arguments as a JSON string (the API's format).
    arguments: String,
}

/// One assistant message: texts joined, tool calls with their arguments as a
/// JSON string (the API's format). Reasoning is not sent back: the API has no
/// field for it. `None` when nothing is left, since the API rejects an
/// assistant message with neither content nor tool calls.
fn assistant_message<'a>(items: &'a [Cow<'a, AssistantItem>]) -> Option<Message<'a>> {
    let mut texts: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for item in items {
        match item.as_ref() {
            AssistantItem::Text { text } => texts.push(text),
            AssistantItem::Reasoning { .. } => {}
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            } => tool_calls.push(WireCall {
                id: call_id,
                kind: "function",
                function: WireCallFunction {
                    name,
                    arguments: arguments.to_string(),
                },
            }),
        }
    }
    let content = match texts.as_slice() {
        [] if tool_calls.is_empty() => return None,
        [] => None,
        [one] => Some(Cow::Borrowed(*one)),
        many => Some(Cow::Owned(many.join("\n\n"))),
    };
    Some(Message::Assistant {
        content,
        tool_calls,
    })
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    /// Servers that expose a model's reasoning use one of these two names
    /// (vLLM, llama.cpp, DeepSeek: `reasoning_content`; Ollama: `reasoning`).
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// The block currently streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Reasoning,
    /// Index into `Decoder::calls`.
    Call(usize),
}

/// A tool call being assembled from deltas that refer to it by `index`.
struct Call {
    index: Option<u64>,
    id: String,
    name: String,
    /// `ToolCallStart` went out; until then (no name seen yet) arguments wait
    /// in `pending`.
    started: bool,
    pending: String,
}

#[derive(Default)]
pub(super) struct Decoder {
    open: Option<Open>,
    calls: Vec<Call>,
    done: bool,
}

impl Decoder {
    /// Ends the open block unless it is `next`, and makes `next` the open one.
    fn switch_to(&mut self, next: Open, out: &mut Vec<ModelEvent>) {
        if self.open != Some(next) {
            self.close(out);
            self.open = Some(next);
        }
    }

    fn close(&mut self, out: &mut Vec<ModelEvent>) {
        if self.open.take().is_some() {
            out.push(ModelEvent::BlockEnd);
        }
    }

    /// Finds the call a delta belongs to: by `index`, else (servers that omit
    /// it) by `id`, else the latest call; a delta matching none starts a call.
    fn call_for(&mut self, delta: &ToolCallDelta) -> usize {
        let found = match (delta.index, &delta.id) {
            (Some(index), _) => self.calls.iter().position(|c| c.index == Some(index)),
            (None, Some(id)) => self.calls.iter().position(|c| &c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        found.unwrap_or_else(|| {
            self.calls.push(Call {
                index: delta.index,
                id: delta
                    .id
                    .clone()
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple())),
                name: String::new(),
                started: false,
                pending: String::new(),
            });
            self.calls.len() - 1
        })
    }

    fn tool_call(&mut self, delta: &ToolCallDelta, out: &mut Vec<ModelEvent>) {
        let at = self.call_for(delta);
        let function = delta.function.as_ref();
        let call = &mut self.calls[at];
        if let Some(name) = function.and_then(|f| f.name.as_deref()) {
            if !call.started {
                call.name.push_str(name);
            }
        }
        if let Some(args) = function.and_then(|f| f.arguments.as_deref()) {
            call.pending.push_str(args);
        }
        if !call.started && call.name.is_empty() {
            return;
        }
        if !call.started {
            self.switch_to(Open::Call(at), out);
        }
        let call = &mut self.calls[at];
        if !call.started {
            call.started = true;
            out.push(ModelEvent::ToolCallStart {
                call_id: call.id.clone(),
                name: call.name.clone(),
            });
        }
        if !call.pending.is_empty() {
            out.push(ModelEvent::ToolCallArgsDelta {
                call_id: call.id.clone(),
                delta: std::mem::take(&mut call.pending),
            });
        }
    }
}

impl SseDecoder for Decoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, AttemptError> {
        let mut out = Vec::new();
        if event.data.trim() == "[DONE]" {
            self.close(&mut out);
            self.done = true;
            return Ok(out);
        }
        let chunk: Chunk = parse_data(NAME, event)?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(AttemptError::fatal(format!(
                "{NAME}: the server reported an error during the reply: {message}"
            )));
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                let reasoning = delta.reasoning_content.or(delta.reasoning);
                if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                    self.switch_to(Open::Reasoning, &mut out);
                    out.push(ModelEvent::ReasoningDelta(text));
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.switch_to(Open::Text, &mut out);
                    out.push(ModelEvent::TextDelta(text));
                }
                for call in delta.tool_calls.iter().flatten() {
                    self.tool_call(call, &mut out);
                }
            }
            if choice.finish_reason.is_some() {
                self.close(&mut out);
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(ModelEvent::Usage(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            }));
        }
        Ok(out)
    }

    fn is_complete(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(decoder: &mut Decoder, datas: &[&str]) -> Vec<ModelEvent> {
        datas
            .iter()
            .flat_map(|d| {
                let event = Event {
                    data: (*d).to_owned(),
                    ..Event::default()
                };
                decoder.decode(&event).unwrap()
            })
            .collect()
    }

    #[test]
    fn tool_call_without_index_or_id_is_still_assembled() {
        let mut decoder = Decoder::default();
        let events = decode_all(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":":1}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let ModelEvent::ToolCallStart { call_id, name } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(name, "f");
        assert!(call_id.starts_with("call_"));
        assert_eq!(
            events[1..],
            [
                ModelEvent::ToolCallArgsDelta {
                    call_id: call_id.clone(),
                    delta: "{\"a\":1}".into()
                },
                ModelEvent::BlockEnd
            ]
        );
    }

    #[test]
    fn reasoning_then_text_are_two_blocks() {
        let mut decoder = Decoder::default();
        let events = decode_all(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#,
                r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(
            events,
            [
                ModelEvent::ReasoningDelta("hmm".into()),
                ModelEvent::BlockEnd,
                ModelEvent::TextDelta("hi".into()),
                ModelEvent::BlockEnd
            ]
        );
        assert!(decoder.is_complete());
    }

    #[test]
    fn reasoning_only_assistant_message_is_dropped() {
        let reasoning = [Cow::Owned(AssistantItem::Reasoning { text: "x".into() })];
        assert!(assistant_message(&reasoning).is_none());
    }

    #[test]
    fn the_body_has_the_api_shape() {
        let items = [
            Cow::Owned(AssistantItem::Text { text: "a".into() }),
            Cow::Owned(AssistantItem::Text { text: "b".into() }),
            Cow::Owned(AssistantItem::ToolCall {
                call_id: "c1".into(),
                name: "f".into(),
                arguments: serde_json::json!({"x": 1}),
            }),
        ];
        let request = ModelRequest {
            model: None,
            system: "sys".into(),
            messages: vec![
                ChatMessage::User { text: "hi".into() },
                ChatMessage::Assistant {
                    items: items.to_vec(),
                },
                ChatMessage::ToolResults {
                    results: vec![Cow::Owned(crate::protocol::ToolResult {
                        call_id: "c1".into(),
                        output: "out".into(),
                        is_error: false,
                    })],
                },
            ],
            tools: Cow::Owned(vec![ToolSpec {
                name: "f".into(),
                description: "does f".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]),
            cache: None,
        };
        let mut body = Vec::new();
        write_body("m", &request, &mut body).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            serde_json::json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "a\n\nb", "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "out"},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type": "function", "function": {
                    "name": "f", "description": "does f", "parameters": {"type": "object"}}}],
            })
        );
    }
}
