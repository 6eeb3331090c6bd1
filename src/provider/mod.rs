//! Model providers: one trait, one module per wire format.
//!
//! A provider turns a [`ModelRequest`] (the conversation projected from the
//! session log) into a stream of [`ModelEvent`]s. It owns everything
//! vendor-specific: HTTP, SSE, retries before the first token, error messages.
//! The worker owns everything else: assembling blocks, committing them,
//! cancellation (it simply drops the stream).

mod anthropic;
mod config;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod offline;
mod openai;
mod retry;
mod script;
mod stream;

pub use anthropic::Anthropic;
pub use config::{build, ProviderConfig, ProviderKind};
pub use offline::Offline;
pub use openai::OpenAi;
pub use retry::RetryPolicy;
pub use script::Script;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::protocol::{AssistantItem, ToolResult, TurnErrorCode, Usage};

/// What the model is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model to use; `None` is the provider's configured one.
    pub model: Option<String>,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
}

/// One message of the projected conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// User input flattened to text (segments resolved), or text the pod
    /// injected (notify, compaction summary).
    User { text: String },
    /// Consecutive confirmed assistant blocks of one model reply.
    Assistant { items: Vec<AssistantItem> },
    /// The results answering the preceding assistant message's tool calls.
    ToolResults { results: Vec<ToolResult> },
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

pub trait Provider: Send + Sync {
    /// `offline`, `script`, `openai` or `anthropic`.
    fn name(&self) -> &'static str;
    /// The configured model, used when a request names none.
    fn model(&self) -> &str;
    /// Starts one model call. Dropping the stream abandons the call.
    fn stream(&self, request: ModelRequest) -> ModelStream;
}
