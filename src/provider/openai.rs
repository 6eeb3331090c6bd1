//! Any OpenAI-compatible Chat Completions server (OpenAI, Ollama, llama.cpp,
//! vLLM, LM Studio, ...), streamed over server-sent events.

use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{join, parse_data, Endpoint, Refusable, SseDecoder, ENDED_EMPTY};
use super::retry::{AttemptError, RetryPolicy};
use super::wire::{write_messages, State, WireFormat};
use super::{images, ImageSlot};
use super::{
    BuildError, ChatMessage, ModelEvent, ModelRequest, ModelStream, OutputOptions, Provider,
    ToolChoice, ToolSpec, UserPart, DEFAULT_MAX_OUTPUT_TOKENS,
};
use crate::protocol::{AssistantItem, Usage};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4o";
const NAME: &str = "openai";
const KEY_ENV: &str = "OPENAI_API_KEY";
const BASE_URL_FORM: &str =
    "for openai it ends with the API version, e.g. http://localhost:11434/v1";
/// Asks for the usage chunk at the end of a stream: OpenAI reports token
/// usage only then. Some compatible servers refuse the field (see
/// [`Refusable`]); those are called without it.
const USAGE_OPTION: &[u8] = b",\"stream_options\":{\"include_usage\":true}";

pub struct OpenAi {
    model: String,
    endpoint: Endpoint,
    /// A server refused [`USAGE_OPTION`].
    usage_refused: Arc<AtomicBool>,
    /// The output limit of every call that names none of its own.
    max_output_tokens: u32,
    tool_choice: Option<ToolChoice>,
    /// A server refused `max_tokens` and asked for `max_completion_tokens`
    /// (OpenAI's reasoning models): later requests name it so at once.
    completion_tokens: Arc<AtomicBool>,
    /// A server answered a streamed request with tools with an empty stream
    /// (see [`Unstreamed`]): later requests with tools ask for the reply
    /// whole at once rather than wait for another empty stream.
    tools_unstreamed: Arc<AtomicBool>,
}

const STREAM: &[u8] = b"\"stream\":true";
const NO_STREAM: &[u8] = b"\"stream\":false";
const TOOLS: &[u8] = b",\"tools\":[";

/// Turns a streamed request that offered tools into the same request for a
/// whole reply. llama-cpp-python (0.3, `--chat_format
/// chatml-function-calling`) cannot stream a tool call the model chose and
/// ends such a stream without a single event, though it answers the same
/// request unstreamed with the call. Later requests with tools are asked
/// whole at once — but not after a reply that ended properly with nothing
/// in it ([`ENDED_EMPTY`]), which a model may also mean. The field bytes
/// cannot occur unescaped inside a JSON string, so the first match is the
/// field.
struct Unstreamed(Arc<AtomicBool>);

impl super::http::Repair for Unstreamed {
    fn repair(&self, body: &[u8], answer: &str) -> Option<Vec<u8>> {
        super::http::find(body, TOOLS)?;
        let at = super::http::find(body, STREAM)?;
        if answer != ENDED_EMPTY {
            self.0.store(true, Ordering::Relaxed);
        }
        let mut whole = Vec::with_capacity(body.len());
        whole.extend_from_slice(&body[..at]);
        whole.extend_from_slice(NO_STREAM);
        let rest = &body[at + STREAM.len()..];
        let rest = rest.strip_prefix(USAGE_OPTION).unwrap_or(rest);
        whole.extend_from_slice(rest);
        Some(whole)
    }
}

/// The output limit's field as most compatible servers (llama.cpp, vLLM,
/// Ollama, LiteLLM) and OpenAI's older models take it.
const MAX_TOKENS: &[u8] = b"\"max_tokens\":";
/// The same limit as OpenAI's reasoning models want it.
const MAX_COMPLETION_TOKENS: &[u8] = b"\"max_completion_tokens\":";

/// Renames `max_tokens` to `max_completion_tokens` for a server that
/// refused the first and named the second: "Unsupported parameter:
/// 'max_tokens' is not supported with this model. Use
/// 'max_completion_tokens' instead."
struct CompletionTokens(Arc<AtomicBool>);

impl super::http::Repair for CompletionTokens {
    fn repair(&self, body: &[u8], answer: &str) -> Option<Vec<u8>> {
        if !answer.contains("max_completion_tokens") {
            return None;
        }
        let at = super::http::find(body, MAX_TOKENS)?;
        self.0.store(true, Ordering::Relaxed);
        let mut renamed = Vec::with_capacity(body.len() + 12);
        renamed.extend_from_slice(&body[..at]);
        renamed.extend_from_slice(MAX_COMPLETION_TOKENS);
        renamed.extend_from_slice(&body[at + MAX_TOKENS.len()..]);
        Some(renamed)
    }
}

impl OpenAi {
    /// `base_url` ends with the API version (`.../v1`), as in OpenAI's SDKs.
    /// The key is optional because local servers take none.
    pub fn new(
        model: String,
        base_url: &str,
        api_key: Option<&str>,
        retry: RetryPolicy,
        output: &OutputOptions,
    ) -> Result<Self, BuildError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| BuildError::BadKey { env: KEY_ENV })?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = join(base_url, "chat/completions");
        let usage_refused = Arc::new(AtomicBool::new(false));
        let completion_tokens = Arc::new(AtomicBool::new(false));
        let tools_unstreamed = Arc::new(AtomicBool::new(false));
        let endpoint = Endpoint::new(NAME, url, KEY_ENV, BASE_URL_FORM, headers, retry)?
            .with_repair(Refusable {
                bytes: USAGE_OPTION,
                names: &["stream_options", "include_usage"],
                refused: Arc::clone(&usage_refused),
            })
            .with_repair(CompletionTokens(Arc::clone(&completion_tokens)))
            .with_unstreamed(Unstreamed(Arc::clone(&tools_unstreamed)));
        Ok(Self {
            model,
            endpoint,
            usage_refused,
            max_output_tokens: output
                .max_output_tokens
                .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
            tool_choice: output.tool_choice,
            completion_tokens,
            tools_unstreamed,
        })
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
        let limit = request.max_output_tokens.unwrap_or(self.max_output_tokens);
        let stream = request.tools.is_empty() || !self.tools_unstreamed.load(Ordering::Relaxed);
        let options = BodyOptions {
            stream,
            usage: stream && !self.usage_refused.load(Ordering::Relaxed),
            limit_field: if self.completion_tokens.load(Ordering::Relaxed) {
                MAX_COMPLETION_TOKENS
            } else {
                MAX_TOKENS
            },
            limit,
            tool_choice: self.tool_choice,
        };
        self.endpoint.stream(
            request.images.iter().any(|slot| slot.send),
            move |out| write_body_with(model, request, &options, out),
            move || Decoder {
                limit,
                ..Decoder::default()
            },
        )
    }
}

/// Writes the Chat Completions request body straight from the borrowed
/// conversation, its messages as far as they are unchanged from the cache
/// (no intermediate JSON tree: see `docs/performance.md`):
/// `{"model","messages","stream","stream_options","max_tokens","tools"}`,
/// `tools` left out when there are none (some servers reject an empty
/// array), `tool_choice` only when `--tool-choice` asks for one (servers
/// differ in what they accept; llama-cpp-python needs it to use tools at
/// all). Every call carries an output limit: without one a looping model
/// generates until the server's own limit, minutes and money later. No
/// `parallel_tool_calls`: its default is what pod wants. These are a first
/// call's options, which the body tests (compared across formats), the
/// fuzz targets and the bench use.
pub(super) fn write_body(
    model: &str,
    request: &ModelRequest<'_>,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    let options = BodyOptions {
        stream: true,
        usage: true,
        limit_field: MAX_TOKENS,
        limit: request
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        tool_choice: None,
    };
    write_body_with(model, request, &options, out)
}

/// What a call's body says besides the conversation.
struct BodyOptions {
    /// Ask for a stream rather than a whole reply (see [`Unstreamed`]).
    stream: bool,
    /// Ask for [`USAGE_OPTION`].
    usage: bool,
    /// [`MAX_TOKENS`] or [`MAX_COMPLETION_TOKENS`].
    limit_field: &'static [u8],
    limit: u32,
    tool_choice: Option<ToolChoice>,
}

/// [`write_body`], as `options` say.
fn write_body_with(
    model: &str,
    request: &ModelRequest<'_>,
    options: &BodyOptions,
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
    let state = write_messages::<Chat>(request, out)?;
    if state == Some(USER) {
        out.extend_from_slice(USER_END);
    } else if state == Some(USER_PARTS) {
        out.extend_from_slice(USER_PARTS_END);
    } else if out.last() == Some(&b',') {
        // Every other message ends with a comma (see `put`); the last
        // one's goes.
        out.pop();
    }
    out.extend_from_slice(b"],");
    out.extend_from_slice(if options.stream { STREAM } else { NO_STREAM });
    if options.usage {
        out.extend_from_slice(USAGE_OPTION);
    }
    out.push(b',');
    out.extend_from_slice(options.limit_field);
    out.extend_from_slice(options.limit.to_string().as_bytes());
    if !request.tools.is_empty() {
        out.extend_from_slice(b",\"tools\":");
        let tools: Vec<WireTool> = request.tools.iter().map(WireTool::of).collect();
        serde_json::to_writer(&mut *out, &tools)?;
        if let Some(choice) = options.tool_choice {
            out.extend_from_slice(b",\"tool_choice\":\"");
            out.extend_from_slice(choice.as_str().as_bytes());
            out.push(b'"');
        }
    }
    out.push(b'}');
    if !request.images.is_empty() {
        *out = images::splice::<Chat>(std::mem::take(out), &request.images)?;
    }
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

/// The Chat Completions wire format: one API message per tool result, one
/// per assistant message with text or calls, and one per run of user
/// messages. Consecutive user messages (an input after a turn that failed
/// before the model said anything, a notice after an input) are joined
/// with a blank line: many local models' chat templates (Gemma, Mistral, …
/// as llama.cpp, vLLM and Ollama render them) refuse a conversation whose
/// roles do not alternate, and would refuse every later call too. So a user
/// message is left open — `{"role":"user","content":"text` — and the next
/// message either adds its text or closes it first ([`USER_END`]).
struct Chat;

/// The state after an open user message.
const USER: &str = "user";
/// Closes an open user message.
const USER_END: &[u8] = b"\"}";
/// The state after an open user message of content parts (one with
/// images): `{"role":"user","content":[…parts`.
const USER_PARTS: &str = "user_parts";
/// Closes an open user message of parts.
const USER_PARTS_END: &[u8] = b"]}";

/// Images as Chat Completions takes them: an `image_url` part with a
/// data URL.
impl images::ImagePart for Chat {
    fn around(slot: &ImageSlot) -> (Vec<u8>, &'static [u8]) {
        (
            format!(
                "{{\"type\":\"image_url\",\"image_url\":{{\"url\":\"data:{};base64,",
                slot.media_type
            )
            .into_bytes(),
            b"\"}}",
        )
    }

    fn text(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
        text_part(text, out)
    }
}

/// `{"type":"text","text":…}`.
fn text_part(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
    serde_json::to_writer(&mut *out, text)?;
    out.push(b'}');
    Ok(())
}

/// Appends `text` JSON-escaped, without the quotes around it.
fn put_text(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let start = out.len();
    serde_json::to_writer(&mut *out, text)?;
    out.pop();
    out.remove(start);
    Ok(())
}

impl WireFormat for Chat {
    const NAME: &'static str = NAME;

    fn write(
        message: &ChatMessage<'_>,
        state: State,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<State> {
        match message {
            ChatMessage::User { text, .. } if state == Some(USER_PARTS) => {
                out.push(b',');
                text_part(text, out)?;
                Ok(Some(USER_PARTS))
            }
            ChatMessage::User { text, .. } => {
                if state == Some(USER) {
                    out.extend_from_slice(b"\\n\\n");
                } else {
                    out.extend_from_slice(b"{\"role\":\"user\",\"content\":\"");
                }
                put_text(text, out)?;
                Ok(Some(USER))
            }
            // A message with images needs content parts; an open text
            // message before it is closed (two user messages in a row, the
            // price of images on servers that want roles to alternate).
            ChatMessage::UserParts { parts } => {
                if state == Some(USER_PARTS) {
                    out.push(b',');
                } else {
                    close_user(state, out);
                    out.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
                }
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match part {
                        UserPart::Text(text) => text_part(text, out)?,
                        UserPart::Image(slot) => images::mark(*slot, out),
                    }
                }
                Ok(Some(USER_PARTS))
            }
            ChatMessage::Assistant { items } => match assistant_message(items) {
                Some(message) => {
                    close_user(state, out);
                    put(&message, out)?;
                    Ok(Some("assistant"))
                }
                None => Ok(state),
            },
            ChatMessage::ToolResults { results } if results.is_empty() => Ok(state),
            ChatMessage::ToolResults { results } => {
                close_user(state, out);
                for r in results {
                    let message = Message::Tool {
                        tool_call_id: &r.call_id,
                        content: &r.output,
                    };
                    put(&message, out)?;
                }
                Ok(Some("tool"))
            }
        }
    }
}

/// Closes the user message `state` says is open, if it is; a message
/// follows.
fn close_user(state: State, out: &mut Vec<u8>) {
    if state == Some(USER) {
        out.extend_from_slice(USER_END);
        out.push(b',');
    } else if state == Some(USER_PARTS) {
        out.extend_from_slice(USER_PARTS_END);
        out.push(b',');
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    Assistant {
        content: Cow<'a, str>,
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
/// assistant message with neither content nor tool calls. A message of tool
/// calls alone has the content `""`, not `null`: OpenAI, vLLM and
/// llama.cpp take either, but Ollama refuses `null` ("invalid message
/// content type: <nil>").
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
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(*one),
        many => Cow::Owned(many.join("\n\n")),
    };
    Some(Message::Assistant {
        content,
        tool_calls,
    })
}

/// One streamed chunk, or (with `message` for `delta`) a whole reply. Every
/// field a server fills in its own way is read loosely (see [`text`]): a
/// chunk a server shaped unusually must not end the reply.
#[derive(Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(alias = "message")]
    delta: Option<Delta>,
    finish_reason: Option<Value>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<Value>,
    /// Servers that expose a model's reasoning use one of these two names
    /// (vLLM, llama.cpp, DeepSeek: `reasoning_content`; Ollama, OpenRouter:
    /// `reasoning`); some send both with the same text.
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<u64>,
    id: Option<Value>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<Value>,
    /// A JSON string per the API; a few servers send the arguments as a
    /// JSON object instead.
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<Value>,
    completion_tokens: Option<Value>,
    /// `{"cached_tokens": N}`: the part of the prompt OpenAI (and servers
    /// that copy it) read from their prefix cache.
    prompt_tokens_details: Option<Value>,
}

/// The text of a field that should be a string: a string as is; an array
/// of content parts (`[{"type":"text","text":...}]`, as Mistral streams
/// content) as its texts joined; anything else (`null`, a number) as none.
fn text(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(text) => Some(text),
        Value::Array(parts) => {
            let joined: String = parts
                .iter()
                .filter_map(|part| part.as_str().or_else(|| part.get("text")?.as_str()))
                .collect();
            Some(joined)
        }
        _ => None,
    }
    .filter(|text| !text.is_empty())
}

/// An id as text: a string, or a number some servers send.
fn id(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(id) if !id.is_empty() => Some(id.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Arguments as the JSON text they are streamed as: a string fragment as
/// is, an object sent whole as its JSON.
fn arguments(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(text) => Some(text),
        Value::Null => None,
        whole => Some(whole.to_string()),
    }
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
    /// `id` is the server's (not made up because it sent none).
    server_id: bool,
    name: String,
    /// `ToolCallStart` went out; until then (no name seen yet) arguments wait
    /// in `pending`.
    started: bool,
    /// Its block was ended: another block started after it.
    closed: bool,
    pending: String,
}

#[derive(Default)]
pub(super) struct Decoder {
    open: Option<Open>,
    calls: Vec<Call>,
    /// A choice gave its `finish_reason`.
    finished: bool,
    done: bool,
    /// The output limit the call asked for, named when the reply hits it.
    limit: u32,
    /// The reply stopped at the output limit; taken by `cut_off`.
    cut: Option<AttemptError>,
    /// The usage reported so far: a server that reports it more than once
    /// (on every chunk, or the cache details apart) leaves out fields it
    /// gave before, which must not vanish from the turn.
    usage: Usage,
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
        match self.open.take() {
            Some(Open::Call(at)) => {
                self.calls[at].closed = true;
                out.push(ModelEvent::BlockEnd);
            }
            Some(_) => out.push(ModelEvent::BlockEnd),
            None => {}
        }
    }

    /// Ends the reply: the open block, and any call that never got a name
    /// (which cannot be run, nor silently dropped).
    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), AttemptError> {
        self.close(out);
        match self
            .calls
            .iter()
            .find(|c| !c.started && !c.pending.is_empty())
        {
            Some(call) => Err(AttemptError::fatal(format!(
                "{NAME}: the server streamed arguments for a tool call without ever naming \
                 the tool: {}",
                super::http::truncate(&call.pending)
            ))),
            None => Ok(()),
        }
    }

    /// Finds the call a delta belongs to: by `index`, else (servers that omit
    /// it) by `id`, else the latest call; a delta matching none starts a call.
    /// A delta that names a tool under another id than the call of its
    /// index is a new call: Ollama numbers every parallel call 0. A new
    /// call whose id another call of the reply has (servers that number
    /// ids per reply, or send one id for all) gets one of its own: the
    /// worker and the next request tell calls apart by id.
    fn call_for(&mut self, index: Option<u64>, id: Option<String>, named: bool) -> usize {
        let found = match (index, &id) {
            (Some(index), _) => self.calls.iter().rposition(|c| c.index == Some(index)),
            (None, Some(id)) => self.calls.iter().position(|c| &c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let found = found.filter(|&at| {
            let call = &self.calls[at];
            !(named && call.server_id && id.as_ref().is_some_and(|id| *id != call.id))
        });
        found.unwrap_or_else(|| {
            let id = id.filter(|id| !self.calls.iter().any(|c| c.id == *id));
            self.calls.push(Call {
                index,
                server_id: id.is_some(),
                id: id.unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple())),
                name: String::new(),
                started: false,
                closed: false,
                pending: String::new(),
            });
            self.calls.len() - 1
        })
    }

    fn tool_call(
        &mut self,
        delta: ToolCallDelta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), AttemptError> {
        let (name, args) = match delta.function {
            Some(FunctionDelta { name, arguments: a }) => (text(name), arguments(a)),
            None => (None, None),
        };
        let at = self.call_for(delta.index, id(delta.id.as_ref()), name.is_some());
        let call = &mut self.calls[at];
        if call.closed {
            // Its block was committed when the next one started: what
            // arrives now cannot be added, and dropping it would run the
            // call with arguments the model did not give.
            return Err(AttemptError::fatal(format!(
                "{NAME}: the server streamed more of tool call {} after the next block \
                 had started",
                call.id
            )));
        }
        if let (Some(name), false) = (name, call.started) {
            call.name.push_str(&name);
        }
        if let Some(args) = args {
            call.pending.push_str(&args);
        }
        if !call.started && call.name.is_empty() {
            return Ok(());
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
        Ok(())
    }

    fn chunk(&mut self, chunk: Chunk) -> Result<Vec<ModelEvent>, AttemptError> {
        let mut out = Vec::new();
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(stream_error(&error));
        }
        // After a cut only the usage is read: the reply is over.
        let choices = chunk.choices.filter(|_| self.cut.is_none());
        for choice in choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                let reasoning = text(delta.reasoning_content).or(text(delta.reasoning));
                if let Some(text) = reasoning {
                    self.switch_to(Open::Reasoning, &mut out);
                    out.push(ModelEvent::ReasoningDelta(text));
                }
                if let Some(text) = text(delta.content) {
                    self.switch_to(Open::Text, &mut out);
                    out.push(ModelEvent::TextDelta(text));
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_call(call, &mut out)?;
                }
            }
            match choice.finish_reason {
                // Some servers say "" rather than null until the end.
                None | Some(Value::Null) => {}
                Some(Value::String(reason)) if reason.is_empty() => {}
                // OpenRouter ends a reply its upstream failed this way, with
                // the error (read above) or without.
                Some(Value::String(reason)) if reason == "error" => {
                    return Err(AttemptError::fatal(format!(
                        "{NAME}: the server ended the reply with finish_reason \"error\""
                    )))
                }
                // Cut off: the open block is not finished (a half-written
                // tool call must not run), and the call fails after what
                // it streamed is delivered.
                Some(Value::String(reason)) if reason == "length" => {
                    self.finished = true;
                    self.cut = Some(super::output_limit(NAME, self.limit));
                }
                Some(_) => {
                    self.finished = true;
                    self.finish(&mut out)?;
                }
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.get("cached_tokens"));
            let merge = |field: &mut u64, value: Option<&Value>| {
                if let Some(n) = value.and_then(Value::as_u64) {
                    *field = n;
                }
            };
            merge(&mut self.usage.input_tokens, usage.prompt_tokens.as_ref());
            merge(
                &mut self.usage.output_tokens,
                usage.completion_tokens.as_ref(),
            );
            merge(&mut self.usage.cache_read_tokens, cached);
            out.push(ModelEvent::Usage(self.usage));
        }
        Ok(out)
    }
}

/// An error a server sent in place of a chunk (OpenRouter, LiteLLM, vLLM do
/// when the model fails mid-reply): `{"message":...}`, or a bare string.
/// One whose `code` is an HTTP status worth another try (OpenRouter's 429
/// or 502 from the model's host) is retryable — while nothing of the reply
/// was shown, like its HTTP twin.
fn stream_error(error: &Value) -> AttemptError {
    let message = error
        .get("message")
        .unwrap_or(error)
        .as_str()
        .map_or_else(|| error.to_string(), str::to_owned);
    let message = format!(
        "{NAME}: the server reported an error during the reply: {}",
        super::http::truncate(&message)
    );
    let status = error.get("code").and_then(|code| match code {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    match status.and_then(|s| u16::try_from(s).ok()) {
        Some(408 | 409 | 429 | 500..=599) => AttemptError::retryable(message),
        _ => AttemptError::fatal(message),
    }
}

impl SseDecoder for Decoder {
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, AttemptError> {
        if event.data.trim() == "[DONE]" {
            let mut out = Vec::new();
            // After a cut the open block stays unfinished (see `chunk`).
            if self.cut.is_none() {
                self.finish(&mut out)?;
            }
            self.done = true;
            return Ok(out);
        }
        if event.event == "error" {
            // llama.cpp's `error:` line (see `http::Lines`).
            let error = serde_json::from_str(&event.data)
                .unwrap_or_else(|_| Value::String(event.data.clone()));
            return Err(stream_error(&error));
        }
        let chunk: Chunk = parse_data(NAME, event)?;
        self.chunk(chunk)
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn has_ended(&self) -> bool {
        self.finished
    }

    fn cut_off(&mut self) -> Option<AttemptError> {
        self.cut.take()
    }

    fn decode_whole(&mut self, body: &Value) -> Option<Result<Vec<ModelEvent>, AttemptError>> {
        body.get("choices")?;
        let chunk = serde_json::from_value::<Chunk>(body.clone()).ok()?;
        Some(self.chunk(chunk).and_then(|mut out| {
            if self.cut.is_none() {
                self.finish(&mut out)?;
            }
            self.done = true;
            Ok(out)
        }))
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
    fn calls_sharing_an_id_get_ids_of_their_own() {
        let mut decoder = Decoder::default();
        let events = decode_all(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_0","function":{"name":"f","arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_0","function":{"name":"g","arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let ids: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCallStart { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0], "call_0");
        assert_ne!(ids[1], "call_0");
    }

    #[test]
    fn a_continuation_under_another_id_but_the_same_index_stays_in_its_call() {
        // Poolside and others send another id after the first fragment.
        let mut decoder = Decoder::default();
        let events = decode_all(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"arguments":":1}"}}]}}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(
            events,
            [
                ModelEvent::ToolCallStart {
                    call_id: "a".into(),
                    name: "f".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    call_id: "a".into(),
                    delta: "{\"x\"".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    call_id: "a".into(),
                    delta: ":1}".into()
                },
                ModelEvent::BlockEnd
            ]
        );
    }

    /// Decodes until an error; returns it.
    fn first_error(datas: &[&str]) -> String {
        let mut decoder = Decoder::default();
        datas
            .iter()
            .find_map(|d| {
                let event = Event {
                    data: (*d).to_owned(),
                    ..Event::default()
                };
                decoder.decode(&event).err()
            })
            .map(|e| e.error.message)
            .unwrap_or_default()
    }

    #[test]
    fn arguments_that_cannot_be_placed_end_the_reply_rather_than_run_wrong() {
        let interleaved = first_error(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}"#,
        ]);
        assert!(
            interleaved.contains("more of tool call a after the next block"),
            "{interleaved}"
        );
        let unnamed = first_error(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert!(
            unnamed.contains("without ever naming the tool"),
            "{unnamed}"
        );
    }

    #[test]
    fn an_empty_finish_reason_is_no_finish() {
        let mut decoder = Decoder::default();
        let events = decode_all(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"content":"a"},"finish_reason":""}]}"#,
                r#"{"choices":[{"delta":{"content":"b"},"finish_reason":""}]}"#,
            ],
        );
        assert_eq!(
            events,
            [
                ModelEvent::TextDelta("a".into()),
                ModelEvent::TextDelta("b".into())
            ]
        );
        assert!(!decoder.has_ended());
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
    fn consecutive_user_messages_are_one_and_it_is_closed_before_the_next() {
        let call = [Cow::Owned(AssistantItem::ToolCall {
            call_id: "c1".into(),
            name: "f".into(),
            arguments: serde_json::json!({}),
        })];
        let result = Cow::Owned(crate::protocol::ToolResult {
            call_id: "c1".into(),
            output: "out".into(),
            is_error: false,
        });
        let request = ModelRequest {
            model: None,
            system: "".into(),
            messages: vec![
                ChatMessage::User {
                    text: "a \"q\"".into(),
                    injected: false,
                },
                ChatMessage::User {
                    text: "b\n".into(),
                    injected: false,
                },
                ChatMessage::Assistant {
                    items: call.to_vec(),
                },
                ChatMessage::ToolResults {
                    results: vec![result],
                },
                ChatMessage::User {
                    text: "c".into(),
                    injected: false,
                },
                ChatMessage::ToolResults { results: vec![] },
                ChatMessage::User {
                    text: "d".into(),
                    injected: false,
                },
            ],
            tools: Cow::Owned(vec![]),
            cache: None,
            max_output_tokens: None,
            images: Vec::new(),
        };
        let mut body = Vec::new();
        write_body("m", &request, &mut body).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body["messages"],
            serde_json::json!([
                {"role": "user", "content": "a \"q\"\n\nb\n"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "out"},
                {"role": "user", "content": "c\n\nd"},
            ])
        );
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
                ChatMessage::User {
                    text: "hi".into(),
                    injected: false,
                },
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
            max_output_tokens: None,
            images: Vec::new(),
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
                "max_tokens": 8192,
                "tools": [{"type": "function", "function": {
                    "name": "f", "description": "does f", "parameters": {"type": "object"}}}],
            })
        );
    }
}
