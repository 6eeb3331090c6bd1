//! Model providers: one trait, one module per wire format.
//!
//! A provider turns a [`ModelRequest`] (the conversation projected from the
//! session log) into a stream of [`ModelEvent`]s. It owns everything
//! vendor-specific: HTTP, SSE, retries before the first token, error messages.
//! The worker owns everything else: assembling blocks, committing them,
//! cancellation (it simply drops the stream).

mod anthropic;
mod config;
pub mod estimate;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod images;
pub mod offline;
mod openai;
pub mod overflow;
pub mod repetition;
mod retry;
mod script;
mod stream;
mod wire;

pub use anthropic::Anthropic;
pub use config::{build, ProviderConfig, ProviderKind};
pub use images::{estimate_tokens as image_tokens, ImageSlot};
pub use offline::Offline;
pub use openai::OpenAi;
pub use retry::RetryPolicy;
pub use script::Script;
pub use wire::{CacheRef, MessageSource, Span, WireCache};

use std::borrow::Cow;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::protocol::{AssistantItem, ToolResult, TurnErrorCode, Usage};

/// What the model is asked, borrowed from the conversation it was projected
/// from: building a request copies no text, and the provider serialises it
/// straight into the request body (see `docs/performance.md`, later turns).
#[derive(Debug, Clone)]
pub struct ModelRequest<'a> {
    /// The model to use; `None` is the provider's configured one.
    pub model: Option<Cow<'a, str>>,
    pub system: Cow<'a, str>,
    pub messages: Vec<ChatMessage<'a>>,
    pub tools: Cow<'a, [ToolSpec]>,
    /// Where the messages came from and where an HTTP provider keeps their
    /// bytes between calls (see [`WireCache`]); `None` for a request made
    /// up on the spot, whose messages are all written afresh.
    pub cache: Option<CacheRef<'a>>,
    /// This call's output limit; `None` is the provider's (`--max-output-tokens`).
    pub max_output_tokens: Option<u32>,
    /// The images [`UserPart::Image`] parts name, in conversation order:
    /// where their bytes are, read only while the body is written.
    pub images: Vec<ImageSlot>,
}

/// The output limit when `--max-output-tokens` names none and the model's
/// own is not known: enough for a long answer or a large file, small enough
/// that a model stuck in a loop stops within minutes.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// `--tool-choice`: sent only when given, as servers differ in what they
/// accept (llama-cpp-python uses tools only when it is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolChoice {
    Auto,
    Required,
    None,
}

impl ToolChoice {
    /// The Chat Completions spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
        }
    }
}

/// What every model call of an HTTP provider says about its output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputOptions {
    /// `--max-output-tokens`.
    pub max_output_tokens: Option<u32>,
    /// `--tool-choice`.
    pub tool_choice: Option<ToolChoice>,
}

/// The failure of a reply that stopped at the output limit.
pub(crate) fn output_limit(provider: &str, limit: u32) -> retry::AttemptError {
    retry::AttemptError::fatal_with(
        TurnErrorCode::OutputLimit,
        format!(
            "{provider}: the answer was cut off at the output limit of {limit} tokens; raise it \
             with --max-output-tokens N (or ask for a shorter answer)"
        ),
    )
}

/// One message of the projected conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage<'a> {
    /// User input flattened to text (segments resolved), or text the pod
    /// injected (notify, compaction summary).
    User {
        text: Cow<'a, str>,
        /// The pod wrote this text, not the user. Said here, where the
        /// request is built, because the labels injected text carries
        /// cannot tell it apart: a user may type `[note] hi` too.
        injected: bool,
    },
    /// User input holding images: its text around them, in order.
    UserParts { parts: Vec<UserPart<'a>> },
    /// Consecutive confirmed assistant blocks of one model reply.
    Assistant { items: Vec<Cow<'a, AssistantItem>> },
    /// The results answering the preceding assistant message's tool calls.
    ToolResults { results: Vec<Cow<'a, ToolResult>> },
}

/// A piece of a [`ChatMessage::UserParts`].
#[derive(Debug, Clone, PartialEq)]
pub enum UserPart<'a> {
    Text(Cow<'a, str>),
    /// The image in this slot of [`ModelRequest::images`].
    Image(usize),
}

/// A tool the model may call: name, description, JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One streamed piece of a model reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    TextDelta(String),
    ReasoningDelta(String),
    ToolCallStart {
        call_id: String,
        name: String,
    },
    ToolCallArgsDelta {
        call_id: String,
        delta: String,
    },
    /// The block being streamed is complete. Providers that cannot tell may
    /// omit it: a block also ends when a block of another kind starts or the
    /// stream ends.
    BlockEnd,
    Usage(Usage),
    /// The call failed before anything of it reached the user and is tried
    /// again after `delay_ms`: whatever this call streamed so far is void.
    Retry {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error: String,
    },
}

/// A failed model call, worded for the user, with the kind of failure a
/// `turn_end.error` records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub code: TurnErrorCode,
    pub message: String,
}

impl ModelError {
    /// A reply that broke off or could not be understood.
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_code(TurnErrorCode::ProviderStream, message)
    }

    pub fn with_code(code: TurnErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// Why the provider `pod serve` was asked for could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("--provider script needs --script FILE")]
    NoScript,
    /// The script file could not be read or parsed (the message says where).
    #[error("{0}")]
    Script(String),
    #[error(
        "openai needs OPENAI_API_KEY (or --base-url URL for a local OpenAI-compatible server \
         that takes no key)"
    )]
    NoOpenAiKey,
    #[error("anthropic needs ANTHROPIC_API_KEY (your key from console.anthropic.com)")]
    NoAnthropicKey,
    #[error("{env} contains characters not allowed in an HTTP header; check its value")]
    BadKey { env: &'static str },
    #[error("{provider}: cannot set up the HTTP client: {source}")]
    HttpClient {
        provider: &'static str,
        source: reqwest::Error,
    },
}

pub trait Provider: Send + Sync {
    /// `offline`, `script`, `openai` or `anthropic`.
    fn name(&self) -> &'static str;
    /// The configured model, used when a request names none.
    fn model(&self) -> &str;
    /// Whether replies come from a model, which can fall into a loop that
    /// the pod stops (see [`repetition`]); a scripted or built-in reply is
    /// what it was written to be, repeated text included.
    fn may_loop(&self) -> bool {
        true
    }
    /// Starts one model call. The request is read (serialised) before this
    /// returns; dropping the stream abandons the call.
    fn stream(&self, request: &ModelRequest<'_>) -> ModelStream;
    /// The provider a child pod (subagent) with this slug calls, when it
    /// must differ: the `script` provider serves each child its own lines.
    /// `None` (every real provider): the child shares this one, HTTP client
    /// and all.
    fn for_agent(&self, _slug: &str) -> Option<std::sync::Arc<dyn Provider>> {
        None
    }
}
