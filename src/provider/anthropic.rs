//! Anthropic's Messages API, streamed over server-sent events.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{find, join, parse_data, Endpoint, Repair, SseDecoder};
use super::retry::{AttemptError, RetryPolicy};
use super::wire::{write_messages, State, WireFormat};
use super::{images, ImageSlot};
use super::{
    BuildError, ChatMessage, ModelEvent, ModelRequest, ModelStream, OutputOptions, Provider,
    UserPart,
};
use crate::protocol::{AssistantItem, Usage};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
const NAME: &str = "anthropic";
const KEY_ENV: &str = "ANTHROPIC_API_KEY";
const BASE_URL_FORM: &str =
    "for anthropic it stops before the API version, e.g. https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// The API requires a cap on the reply; this one fits every current model
/// (older ones that allow less say so, see [`OutputCaps`]).
const MAX_TOKENS: u32 = 8192;

pub struct Anthropic {
    model: String,
    endpoint: Endpoint,
    caps: OutputCaps,
    /// `--max-output-tokens`: the limit of every call that names none.
    max_output_tokens: Option<u32>,
}

/// The output caps models refused [`MAX_TOKENS`] with, by model. Older
/// models allow fewer output tokens (Claude 3 Haiku: 4096), and the API
/// answers a larger `max_tokens` with a 400 naming the model's cap:
/// `max_tokens: 8192 > 4096, which is the maximum allowed number of output
/// tokens for claude-3-haiku-20240307`. The request is sent again with that
/// cap, and later requests for the model use it.
#[derive(Clone, Default)]
struct OutputCaps(Arc<Mutex<HashMap<String, u32>>>);

impl OutputCaps {
    /// The cap `model` said it has, if it refused a larger one.
    fn for_model(&self, model: &str) -> Option<u32> {
        let caps = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        caps.get(model).copied()
    }
}

impl Repair for OutputCaps {
    fn repair(&self, body: &[u8], answer: &str) -> Option<Vec<u8>> {
        #[derive(Deserialize)]
        struct Model {
            model: String,
        }
        let (_, said) = answer.split_once("max_tokens: ")?;
        let (asked, rest) = said.split_once(" > ")?;
        let asked: u32 = asked.trim().parse().ok()?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let cap: u32 = rest[..digits]
            .parse()
            .ok()
            .filter(|&c| c > 0 && c < asked)?;
        let model = serde_json::from_slice::<Model>(body).ok()?.model;
        let field = format!("\"max_tokens\":{asked}");
        let at = find(body, field.as_bytes())?;
        let mut repaired = Vec::with_capacity(body.len());
        repaired.extend_from_slice(&body[..at]);
        repaired.extend_from_slice(format!("\"max_tokens\":{cap}").as_bytes());
        repaired.extend_from_slice(&body[at + field.len()..]);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(model, cap);
        Some(repaired)
    }
}

impl Anthropic {
    /// `base_url` stops before the API version (`https://api.anthropic.com`),
    /// as in Anthropic's SDKs; it may carry a path prefix.
    pub fn new(
        model: String,
        base_url: &str,
        api_key: &str,
        retry: RetryPolicy,
        output: &OutputOptions,
    ) -> Result<Self, BuildError> {
        let key =
            HeaderValue::from_str(api_key).map_err(|_| BuildError::BadKey { env: KEY_ENV })?;
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("x-api-key"), key);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let url = join(base_url, "v1/messages");
        let caps = OutputCaps::default();
        let endpoint = Endpoint::new(NAME, url, KEY_ENV, BASE_URL_FORM, headers, retry)?
            .with_repair(caps.clone());
        Ok(Self {
            model,
            endpoint,
            caps,
            max_output_tokens: output.max_output_tokens,
        })
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn stream(&self, request: &ModelRequest<'_>) -> ModelStream {
        let model = request.model.as_deref().unwrap_or(&self.model);
        let asked = request
            .max_output_tokens
            .or(self.max_output_tokens)
            .unwrap_or(MAX_TOKENS);
        let limit = self
            .caps
            .for_model(model)
            .map_or(asked, |cap| asked.min(cap));
        self.endpoint.stream(
            request.images.iter().any(|slot| slot.send),
            |out| write_body_with(model, request, limit, out),
            move || Decoder {
                limit,
                ..Decoder::default()
            },
        )
    }
}

/// Writes the Messages API request body straight from the borrowed
/// conversation, its messages as far as they are unchanged from the cache
/// (no intermediate JSON tree: see `docs/performance.md`):
/// `{"model","max_tokens","messages","stream","system","tools"}`, `system`
/// and `tools` left out when empty, with prompt-cache breakpoints on the
/// system prompt, the last tool and the last message (see
/// [`mark_cache_breakpoint`]). The body tests compare across formats.
#[cfg(test)]
pub(super) fn write_body(
    model: &str,
    request: &ModelRequest<'_>,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    write_body_with(model, request, MAX_TOKENS, out)
}

/// [`write_body_with`] at the default `max_tokens`, for the bench.
pub(super) fn write_body_for_bench(
    model: &str,
    request: &ModelRequest<'_>,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    write_body_with(model, request, MAX_TOKENS, out)
}

/// [`write_body`] with this `max_tokens`.
fn write_body_with(
    model: &str,
    request: &ModelRequest<'_>,
    max_tokens: u32,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut *out, model)?;
    out.extend_from_slice(format!(",\"max_tokens\":{max_tokens},\"messages\":[").as_bytes());
    if write_messages::<Messages>(request, out)?.is_some() {
        mark_cache_breakpoint(out);
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"],\"stream\":true");
    if !request.system.is_empty() {
        out.extend_from_slice(b",\"system\":[{\"type\":\"text\",\"text\":");
        serde_json::to_writer(&mut *out, &*request.system)?;
        out.extend_from_slice(CACHE_CONTROL);
        out.extend_from_slice(b"}]");
    }
    write_tools(request, out)?;
    out.push(b'}');
    if !request.images.is_empty() {
        *out = images::splice::<Messages>(std::mem::take(out), &request.images)?;
    }
    Ok(())
}

/// `,"tools":[…]`, the last one a cache breakpoint; nothing without tools.
fn write_tools(request: &ModelRequest<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
    if !request.tools.is_empty() {
        out.extend_from_slice(b",\"tools\":");
        let last = request.tools.len() - 1;
        let tools: Vec<WireTool> = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                cache_control: (i == last).then_some(Ephemeral::EPHEMERAL),
            })
            .collect();
        serde_json::to_writer(&mut *out, &tools)?;
    }
    Ok(())
}

/// Images as the Messages API takes them: an `image` block with base64
/// data.
impl images::ImagePart for Messages {
    fn around(slot: &ImageSlot) -> (Vec<u8>, &'static [u8]) {
        (
            format!(
                "{{\"type\":\"image\",\"source\":{{\"type\":\"base64\",\"media_type\":\"{}\",\"data\":\"",
                slot.media_type
            )
            .into_bytes(),
            b"\"}}",
        )
    }

    fn text(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, &OutBlock::Text { text })
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

/// A prompt-cache breakpoint: `{"type":"ephemeral"}`.
#[derive(Serialize, Clone, Copy)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl Ephemeral {
    const EPHEMERAL: Self = Self { kind: "ephemeral" };
}

/// The breakpoint as a block's last field.
const CACHE_CONTROL: &[u8] = b",\"cache_control\":{\"type\":\"ephemeral\"}";

/// Marks the conversation so far for Anthropic's prompt cache: the last
/// content block of the last message (still open in `out`, so its closing
/// brace is `out`'s last byte) gets a breakpoint. With the ones on the
/// system prompt and the last tool (three of the four the API allows), the
/// next call — the same conversation and a little more — reads everything
/// up to here from the cache, billed at a tenth, instead of sending it at
/// full price again. Prefixes under the model's minimum are simply not
/// cached; nothing fails.
fn mark_cache_breakpoint(out: &mut Vec<u8>) {
    if out.last() == Some(&b'}') {
        out.pop();
        out.extend_from_slice(CACHE_CONTROL);
        out.push(b'}');
    }
}

#[derive(Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: Cow<'a, Value>,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
        is_error: bool,
    },
    /// The image in this slot of the request, written as a marker (see
    /// `images.rs`), never serialised.
    #[serde(skip)]
    Image(usize),
}

/// The Messages API wire format: each message is content blocks of a role.
/// The API requires user and assistant turns to alternate, so consecutive
/// messages of one role (tool results followed by an injected notice, say)
/// are merged: a message of the role of the one before adds its blocks to
/// it, another closes it (`]}`) and opens its own; `write_body` closes the
/// last. Tool results come first in their user message, as the API also
/// requires. Reasoning is not sent back (replaying it would need its
/// signature, which pod does not keep), and empty text blocks are dropped
/// because the API rejects them; a message left without blocks is nothing.
struct Messages;

impl WireFormat for Messages {
    const NAME: &'static str = NAME;

    fn write(
        message: &ChatMessage<'_>,
        state: State,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<State> {
        let (role, blocks) = blocks(message);
        if blocks.is_empty() {
            return Ok(state);
        }
        match state {
            Some(open) if open == role => out.push(b','),
            open => {
                if open.is_some() {
                    out.extend_from_slice(b"]},");
                }
                out.extend_from_slice(b"{\"role\":");
                serde_json::to_writer(&mut *out, role)?;
                out.extend_from_slice(b",\"content\":[");
            }
        }
        for (i, block) in blocks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match block {
                OutBlock::Image(slot) => images::mark(*slot, out),
                block => serde_json::to_writer(&mut *out, block)?,
            }
        }
        Ok(Some(role))
    }
}

/// The role and content blocks of one message.
fn blocks<'a>(message: &'a ChatMessage<'a>) -> (&'static str, Vec<OutBlock<'a>>) {
    match message {
        ChatMessage::User { text, .. } => ("user", text_block(text).into_iter().collect()),
        ChatMessage::UserParts { parts } => (
            "user",
            parts
                .iter()
                .filter_map(|part| match part {
                    UserPart::Text(text) => text_block(text),
                    UserPart::Image(slot) => Some(OutBlock::Image(*slot)),
                })
                .collect(),
        ),
        ChatMessage::Assistant { items } => (
            "assistant",
            items
                .iter()
                .filter_map(|item| match item.as_ref() {
                    AssistantItem::Text { text } => text_block(text),
                    AssistantItem::Reasoning { .. } => None,
                    AssistantItem::ToolCall {
                        call_id,
                        name,
                        arguments,
                    } => Some(OutBlock::ToolUse {
                        id: tool_use_id(call_id),
                        name,
                        input: tool_input(arguments),
                    }),
                })
                .collect(),
        ),
        ChatMessage::ToolResults { results } => (
            "user",
            results
                .iter()
                .map(|r| OutBlock::ToolResult {
                    tool_use_id: tool_use_id(&r.call_id),
                    content: &r.output,
                    is_error: r.is_error,
                })
                .collect(),
        ),
    }
}

/// A call id as the API takes it (`^[a-zA-Z0-9_-]+$`): ids another
/// provider made earlier in the session may hold other characters (Kimi's
/// `functions.read_file:0`), which are replaced the same way in the call
/// and in its result.
fn tool_use_id(id: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(allowed) {
        Cow::Borrowed(id)
    } else if id.is_empty() {
        Cow::Borrowed("_")
    } else {
        Cow::Owned(
            id.chars()
                .map(|c| if allowed(c) { c } else { '_' })
                .collect(),
        )
    }
}

/// A tool call's arguments as the object the API requires for `input`.
/// Calls a model made are always objects (see `parse_arguments` in the
/// worker); anything else in a log — written by another version, say —
/// is kept as text under `invalid_arguments`, as there, rather than
/// failing every later request with a 400.
fn tool_input(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::Object(_) => Cow::Borrowed(arguments),
        other => Cow::Owned(serde_json::json!({ "invalid_arguments": other.to_string() })),
    }
}

fn text_block(text: &str) -> Option<OutBlock<'_>> {
    (!text.trim().is_empty()).then_some(OutBlock::Text { text })
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        content_block: WireBlock,
    },
    ContentBlockDelta {
        delta: WireDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: Option<WireMessageDelta>,
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Error {
        error: WireError,
    },
    /// `ping` and event types added to the API later, which its versioning
    /// policy says clients must tolerate.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireMessageDelta {
    stop_reason: Option<Value>,
}

/// A whole reply sent as one JSON document instead of a stream.
#[derive(Deserialize)]
struct WholeMessage {
    content: Vec<WholeBlock>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WholeBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        /// `{}` from Anthropic, whose arguments follow as deltas; some
        /// compatible servers put the whole input here instead.
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    /// `redacted_thinking`, server tool blocks and future kinds: nothing pod
    /// can show or replay.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    /// `signature_delta`, `citations_delta`, future kinds.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// This report over an earlier one of the same reply: each field given
    /// replaces the earlier value, each left out keeps it. `message_delta`
    /// usually gives only `output_tokens`, the cache fields being in
    /// `message_start`; a field dropped here would vanish from the turn.
    fn over(self, earlier: WireUsage) -> WireUsage {
        WireUsage {
            input_tokens: self.input_tokens.or(earlier.input_tokens),
            output_tokens: self.output_tokens.or(earlier.output_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .or(earlier.cache_creation_input_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .or(earlier.cache_read_input_tokens),
        }
    }

    /// Everything the model read: cached prompt parts are reported apart from
    /// `input_tokens` but fill the context window all the same.
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug, PartialEq, Eq)]
enum Block {
    /// A block pod shows: its end is reported with `BlockEnd`.
    Shown,
    /// A tool call; remembers whether any argument text went out, because an
    /// argument-less call streams no JSON at all and the worker needs `{}`
    /// — or the input its start gave, if a server gave it there.
    ToolUse {
        call_id: String,
        args_sent: bool,
        input: Option<Value>,
    },
    /// A block pod ignores.
    Hidden,
}

#[derive(Default)]
pub(super) struct Decoder {
    block: Option<Block>,
    /// Every usage field reported so far in this reply (see
    /// [`WireUsage::over`]).
    usage: WireUsage,
    /// `message_delta` gave the stop reason.
    stopped: bool,
    done: bool,
    /// The output limit the call asked for, named when the reply hits it.
    limit: u32,
    /// The reply stopped at the output limit; taken by `cut_off`.
    cut: Option<AttemptError>,
}

impl Decoder {
    /// The call's usage once `usage` is reported. Output tokens are
    /// cumulative and final in `message_delta`; input and cache tokens were
    /// given at `message_start` (newer API versions repeat them).
    fn usage(&mut self, usage: WireUsage) -> Usage {
        self.usage = usage.over(self.usage);
        Usage {
            input_tokens: self.usage.input().unwrap_or(0),
            output_tokens: self.usage.output_tokens.unwrap_or(0),
            cache_read_tokens: self.usage.cache_read_input_tokens.unwrap_or(0),
            cache_write_tokens: self.usage.cache_creation_input_tokens.unwrap_or(0),
        }
    }

    fn end_block(&mut self, out: &mut Vec<ModelEvent>) {
        match self.block.take() {
            Some(Block::ToolUse {
                call_id,
                args_sent: false,
                input,
            }) => {
                let delta = input
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map_or_else(|| "{}".to_owned(), |i| i.to_string());
                out.push(ModelEvent::ToolCallArgsDelta { call_id, delta });
                out.push(ModelEvent::BlockEnd);
            }
            Some(Block::Shown | Block::ToolUse { .. }) => out.push(ModelEvent::BlockEnd),
            Some(Block::Hidden) | None => {}
        }
    }

    fn start_block(&mut self, block: WireBlock, out: &mut Vec<ModelEvent>) {
        self.end_block(out);
        self.block = Some(match block {
            WireBlock::Text { text } => {
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text));
                }
                Block::Shown
            }
            WireBlock::Thinking { thinking } => {
                if !thinking.is_empty() {
                    out.push(ModelEvent::ReasoningDelta(thinking));
                }
                Block::Shown
            }
            WireBlock::ToolUse { id, name, input } => {
                out.push(ModelEvent::ToolCallStart {
                    call_id: id.clone(),
                    name,
                });
                Block::ToolUse {
                    call_id: id,
                    args_sent: false,
                    input,
                }
            }
            WireBlock::Other => Block::Hidden,
        });
    }

    fn delta(&mut self, delta: WireDelta, out: &mut Vec<ModelEvent>) {
        match delta {
            WireDelta::TextDelta { text } => out.push(ModelEvent::TextDelta(text)),
            WireDelta::ThinkingDelta { thinking } => out.push(ModelEvent::ReasoningDelta(thinking)),
            WireDelta::InputJsonDelta { partial_json } => {
                if let Some(Block::ToolUse {
                    call_id, args_sent, ..
                }) = &mut self.block
                {
                    if !partial_json.is_empty() {
                        *args_sent = true;
                        out.push(ModelEvent::ToolCallArgsDelta {
                            call_id: call_id.clone(),
                            delta: partial_json,
                        });
                    }
                }
            }
            WireDelta::Other => {}
        }
    }
}

impl SseDecoder for Decoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, AttemptError> {
        let mut out = Vec::new();
        let wire = match parse_data::<Wire>(NAME, event) {
            Ok(wire) => wire,
            // An error in another shape than Anthropic's (llama.cpp's
            // Messages endpoint: see `http::Lines`).
            Err(_) if event.event == "error" => {
                return Err(AttemptError::fatal(format!(
                    "{NAME}: the server reported an error during the reply: {}",
                    super::http::error_detail(&event.data)
                )))
            }
            Err(e) => return Err(e),
        };
        match wire {
            Wire::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    // Its `output_tokens` counts only what is generated by
                    // then; `message_delta` gives the final count.
                    self.usage = WireUsage {
                        output_tokens: None,
                        ..usage
                    };
                }
            }
            Wire::ContentBlockStart { content_block } => self.start_block(content_block, &mut out),
            Wire::ContentBlockDelta { delta } => self.delta(delta, &mut out),
            Wire::ContentBlockStop {} => self.end_block(&mut out),
            Wire::MessageDelta { delta, usage } => {
                let reason = delta.and_then(|d| d.stop_reason).filter(|r| !r.is_null());
                if let Some(reason) = reason {
                    self.end_block(&mut out);
                    self.stopped = true;
                    if reason == "max_tokens" {
                        self.cut = Some(super::output_limit(NAME, self.limit));
                    }
                }
                if let Some(usage) = usage {
                    out.push(ModelEvent::Usage(self.usage(usage)));
                }
            }
            Wire::Other => {}
            Wire::MessageStop {} => {
                self.end_block(&mut out);
                self.done = true;
            }
            Wire::Error { error } => {
                let message = format!("{NAME}: {}: {}", error.kind, error.message);
                // Overload and internal errors are the stream-borne twins of
                // HTTP 529/500: worth another try while nothing was shown.
                return Err(match error.kind.as_str() {
                    "overloaded_error" | "api_error" => AttemptError::retryable(message),
                    _ => AttemptError::fatal(message),
                });
            }
        }
        Ok(out)
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn has_ended(&self) -> bool {
        self.stopped
    }

    fn cut_off(&mut self) -> Option<AttemptError> {
        self.cut.take()
    }

    fn decode_whole(&mut self, body: &Value) -> Option<Result<Vec<ModelEvent>, AttemptError>> {
        let message = serde_json::from_value::<WholeMessage>(body.clone()).ok()?;
        let mut out = Vec::new();
        for block in message.content {
            match block {
                WholeBlock::Text { text } if !text.trim().is_empty() => {
                    out.push(ModelEvent::TextDelta(text));
                }
                WholeBlock::Thinking { thinking } if !thinking.is_empty() => {
                    out.push(ModelEvent::ReasoningDelta(thinking));
                }
                WholeBlock::ToolUse { id, name, input } => {
                    out.push(ModelEvent::ToolCallStart {
                        call_id: id.clone(),
                        name,
                    });
                    out.push(ModelEvent::ToolCallArgsDelta {
                        call_id: id,
                        delta: input.to_string(),
                    });
                }
                WholeBlock::Text { .. } | WholeBlock::Thinking { .. } | WholeBlock::Other => {
                    continue
                }
            }
            out.push(ModelEvent::BlockEnd);
        }
        if let Some(usage) = message.usage {
            out.push(ModelEvent::Usage(self.usage(usage)));
        }
        if message.stop_reason.as_deref() == Some("max_tokens") {
            self.cut = Some(super::output_limit(NAME, self.limit));
        }
        self.done = true;
        Some(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolResult;

    #[test]
    fn consecutive_same_role_messages_are_merged_and_reasoning_dropped() {
        use serde_json::json;
        use std::borrow::Cow;
        let conversation = vec![
            ChatMessage::User {
                text: "hi".into(),
                injected: false,
            },
            ChatMessage::Assistant {
                items: vec![
                    Cow::Owned(AssistantItem::Reasoning { text: "hm".into() }),
                    Cow::Owned(AssistantItem::ToolCall {
                        call_id: "c1".into(),
                        name: "f".into(),
                        arguments: json!({}),
                    }),
                ],
            },
            ChatMessage::ToolResults {
                results: vec![Cow::Owned(ToolResult {
                    call_id: "c1".into(),
                    output: "out".into(),
                    is_error: true,
                })],
            },
            ChatMessage::User {
                text: "notice".into(),
                injected: true,
            },
        ];
        let request = ModelRequest {
            model: None,
            system: "sys".into(),
            messages: conversation,
            tools: Cow::Borrowed(&[]),
            cache: None,
            max_output_tokens: None,
            images: Vec::new(),
        };
        let mut body = Vec::new();
        write_body("m", &request, &mut body).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body["system"],
            json!([{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                json!({"role":"user","content":[{"type":"text","text":"hi"}]}),
                json!({"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}}]}),
                json!({"role":"user","content":[
                    {"type":"tool_result","tool_use_id":"c1","content":"out","is_error":true},
                    {"type":"text","text":"notice","cache_control":{"type":"ephemeral"}}]}),
            ])
        );
    }

    #[test]
    fn argumentless_tool_call_gets_empty_object() {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for data in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ] {
            let event = Event {
                data: data.into(),
                ..Event::default()
            };
            out.extend(decoder.decode(&event).unwrap());
        }
        assert_eq!(
            out,
            [
                ModelEvent::ToolCallStart {
                    call_id: "t".into(),
                    name: "n".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    call_id: "t".into(),
                    delta: "{}".into()
                },
                ModelEvent::BlockEnd
            ]
        );
    }
}
