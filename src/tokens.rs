//! Token estimates for when a provider reports no usage.
//!
//! Four bytes per token is the usual rule of thumb for English and code with
//! BPE tokenizers; it errs high for prose, which is the safe side for deciding
//! when to compact.

use crate::protocol::AssistantItem;
use crate::provider::{ChatMessage, ModelRequest};

pub fn estimate(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

pub fn estimate_request(request: &ModelRequest) -> u64 {
    let mut total = estimate(&request.system);
    for tool in &request.tools {
        total += estimate(&tool.description) + estimate(&tool.parameters.to_string());
    }
    for message in &request.messages {
        total += 4 + match message {
            ChatMessage::User { text } => estimate(text),
            ChatMessage::Assistant { items } => items
                .iter()
                .map(|item| match item {
                    AssistantItem::Text { text } | AssistantItem::Reasoning { text } => {
                        estimate(text)
                    }
                    AssistantItem::ToolCall {
                        name, arguments, ..
                    } => estimate(name) + estimate(&arguments.to_string()),
                })
                .sum(),
            ChatMessage::ToolResults { results } => {
                results.iter().map(|r| estimate(&r.output) + 4).sum()
            }
        };
    }
    total
}
