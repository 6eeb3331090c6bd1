//! The `Compactor` actor: the summarising model call compaction makes.
//!
//! It is an actor so the call runs beside the worker's mailbox rather than
//! inside a job's borrow of it; its handler returns a future, so actix would
//! run two summaries at once if asked twice. Nothing asks twice: compaction
//! is a worker job, and the worker runs one job at a time — that rule, not
//! this actor, is what serialises summaries.

use std::borrow::Cow;
use std::sync::Arc;

use actix::prelude::*;
use futures::StreamExt;

use crate::protocol::AssistantItem;
use crate::provider::{
    estimate, ChatMessage, ModelError, ModelEvent, ModelRequest, Provider, UserPart,
};

pub struct Compactor {
    provider: Arc<dyn Provider>,
}

impl Compactor {
    pub fn new(provider: Arc<dyn Provider>) -> Self {
        Self { provider }
    }
}

impl Actor for Compactor {
    type Context = Context<Self>;
}

/// Why a summary could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SummariseError {
    #[error("the summarising model call failed: {0}")]
    Model(#[from] ModelError),
    #[error("the compactor is gone: {0}")]
    Gone(#[from] MailboxError),
}

/// Summarise a conversation, given as the transcript of what the model
/// would be sent next; the answer is the summary text.
#[derive(Message)]
#[rtype(result = "Result<String, SummariseError>")]
pub struct Summarise {
    /// The model the conversation runs on (`None`: the provider's).
    model: Option<String>,
    /// One rendered message each, long items shortened.
    transcript: Vec<String>,
    context_window: u64,
}

impl Summarise {
    /// The summarising job for `conversation` (its projection).
    pub fn of(conversation: &ModelRequest<'_>, context_window: u64) -> Self {
        Self {
            model: conversation.model.as_deref().map(str::to_owned),
            transcript: conversation
                .messages
                .iter()
                .map(|m| render(m, &conversation.images))
                .collect(),
            context_window,
        }
    }
}

impl Handler<Summarise> for Compactor {
    type Result = ResponseFuture<Result<String, SummariseError>>;

    fn handle(&mut self, msg: Summarise, _: &mut Context<Self>) -> Self::Result {
        let text = summary_text(msg.transcript, msg.context_window);
        let request = ModelRequest {
            model: msg.model.map(Cow::Owned),
            system: Cow::Borrowed(SUMMARY_INSTRUCTIONS),
            // The job the model is to do: what a user would have asked.
            messages: vec![ChatMessage::User {
                text: Cow::Owned(text),
                injected: false,
            }],
            tools: Cow::Borrowed(&[]),
            cache: None,
            max_output_tokens: Some(summary_limit(msg.context_window)),
            images: Vec::new(),
        };
        let mut stream = self.provider.stream(&request);
        Box::pin(async move {
            let mut summary = String::new();
            while let Some(event) = stream.next().await {
                match event? {
                    ModelEvent::TextDelta(text) => summary.push_str(&text),
                    // A retried call starts its answer again.
                    ModelEvent::Retry { .. } => summary.clear(),
                    _ => {}
                }
            }
            Ok(summary)
        })
    }
}

const SUMMARY_INSTRUCTIONS: &str = "You are compacting a coding agent's conversation so that it \
can continue in a fresh context. Write a summary that lets the next turns go on without the \
original messages: the user's goals and constraints, decisions made and why, files read or \
changed (with paths), commands run and their outcomes, what is done, what is in progress, and \
the open next steps. Be specific and concise. Output only the summary.";

/// Longest tool output or message kept verbatim in the summariser's input.
const SUMMARY_ITEM_CAP: usize = 4096;

/// The summary's output limit: an eighth of the context window (at least
/// 256 tokens, at most the usual 8192), so the summary alone can never
/// come near the compaction threshold, however verbose the model is.
fn summary_limit(context_window: u64) -> u32 {
    u32::try_from((context_window / 8).clamp(256, 8192)).unwrap_or(8192)
}

/// The summariser's input: the transcript, the oldest messages dropped
/// until it fits well inside the context window.
fn summary_text(mut transcript: Vec<String>, context_window: u64) -> String {
    let budget = (context_window as f64 * 0.6) as u64;
    let mut dropped = 0;
    while transcript.len() > 1
        && transcript
            .iter()
            .map(|t| estimate::estimate(t))
            .sum::<u64>()
            > budget
    {
        transcript.remove(0);
        dropped += 1;
    }
    let mut text = String::new();
    if dropped > 0 {
        text.push_str(&format!("[{dropped} earliest messages omitted]\n\n"));
    }
    text.push_str(&transcript.join("\n\n"));
    text.push_str("\n\nSummarise the conversation above.");
    text
}

/// The summariser gets placeholders for images, never the images: a
/// summary is text, and the bytes would only cost.
fn render(message: &ChatMessage<'_>, images: &[crate::provider::ImageSlot]) -> String {
    let cap = |s: &str| -> String {
        if s.len() <= SUMMARY_ITEM_CAP {
            return s.to_owned();
        }
        let mut end = SUMMARY_ITEM_CAP;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… [{} bytes cut]", &s[..end], s.len() - end)
    };
    match message {
        ChatMessage::User { text, .. } => format!("USER: {}", cap(text)),
        ChatMessage::UserParts { parts } => {
            let text: String = parts
                .iter()
                .map(|part| match part {
                    UserPart::Text(text) => text.to_string(),
                    UserPart::Image(slot) => images
                        .get(*slot)
                        .map(|s| s.placeholder())
                        .unwrap_or_default(),
                })
                .collect();
            format!("USER: {}", cap(&text))
        }
        ChatMessage::Assistant { items } => items
            .iter()
            .map(|item| match item.as_ref() {
                AssistantItem::Text { text } => {
                    format!("ASSISTANT: {}", cap(text))
                }
                AssistantItem::Reasoning { .. } => String::new(),
                AssistantItem::ToolCall {
                    name, arguments, ..
                } => format!("TOOL CALL {name}: {}", cap(&arguments.to_string())),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        ChatMessage::ToolResults { results } => results
            .iter()
            .map(|r| {
                let label = if r.is_error {
                    "TOOL ERROR"
                } else {
                    "TOOL RESULT"
                };
                format!("{label}: {}", cap(&r.output))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}
