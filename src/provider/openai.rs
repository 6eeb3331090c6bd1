//! Any OpenAI-compatible Chat Completions server (OpenAI, Ollama, llama.cpp,
//! vLLM, LM Studio, ...), streamed over server-sent events.

use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{join, parse_data, Endpoint, SseDecoder};
use super::retry::{AttemptError, RetryPolicy};
use super::{ChatMessage, ModelEvent, ModelRequest, ModelStream, Provider};
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
    ) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| format!("{KEY_ENV} contains characters not allowed in a header"))?;
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

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let body = request_body(model, &request);
        self.endpoint.stream(&body, Decoder::default)
    }
}

/// The Chat Completions request for `request`.
fn request_body(model: &str, request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        match message {
            ChatMessage::User { text } => messages.push(json!({"role": "user", "content": text})),
            ChatMessage::Assistant { items } => messages.extend(assistant_message(items)),
            ChatMessage::ToolResults { results } => {
                messages.extend(results.iter().map(
                    |r| json!({"role": "tool", "tool_call_id": r.call_id, "content": r.output}),
                ));
            }
        }
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
    }
    body
}

/// One assistant message: texts joined, tool calls with their arguments as a
/// JSON string (the API's format). Reasoning is not sent back: the API has no
/// field for it. `None` when nothing is left, since the API rejects an
/// assistant message with neither content nor tool calls.
fn assistant_message(items: &[AssistantItem]) -> Option<Value> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for item in items {
        match item {
            AssistantItem::Text { text } => texts.push(text.as_str()),
            AssistantItem::Reasoning { .. } => {}
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            } => calls.push(json!({"id": call_id, "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}})),
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let content = if texts.is_empty() {
        Value::Null
    } else {
        Value::String(texts.join("\n\n"))
    };
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Some(message)
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
        assert_eq!(
            assistant_message(&[AssistantItem::Reasoning { text: "x".into() }]),
            None
        );
    }
}
