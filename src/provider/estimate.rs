//! Token estimates for when a provider reports no usage: how full the
//! context is before a call, and the offline model's usage.
//!
//! Four bytes per token is the usual rule of thumb for English and code with
//! BPE tokenizers; it errs high for prose, which is the safe side for deciding
//! when to compact. The estimate is of a [`ModelRequest`], so it lives with
//! the request's types, below everything that decides by it.

use serde_json::Value;

use super::{image_tokens, ChatMessage, ModelRequest, UserPart};
use crate::protocol::AssistantItem;

pub fn estimate(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The part of every request that no conversation changes: the system
/// prompt and the tools' definitions. A window smaller than this fits no
/// input at all.
pub fn estimate_fixed(request: &ModelRequest<'_>) -> u64 {
    let mut total = estimate(&request.system);
    for tool in request.tools.iter() {
        total += estimate(&tool.description) + json_len(&tool.parameters).div_ceil(4);
    }
    total
}

/// [`estimate_request_for`] a provider whose image estimate is the
/// default one.
pub fn estimate_request(request: &ModelRequest<'_>) -> u64 {
    estimate_request_for("", request)
}

/// The request's tokens, its images by `provider`'s fixed estimate (see
/// [`image_tokens`]); images sent as placeholders count as their text.
pub fn estimate_request_for(provider: &str, request: &ModelRequest<'_>) -> u64 {
    let mut total = estimate_fixed(request);
    for message in &request.messages {
        total += 4 + match message {
            ChatMessage::User { text, .. } => estimate(text),
            ChatMessage::UserParts { parts } => parts
                .iter()
                .map(|part| match part {
                    UserPart::Text(text) => estimate(text),
                    UserPart::Image(slot) => match request.images.get(*slot) {
                        Some(slot) if slot.send => image_tokens(provider, slot.dims),
                        Some(slot) => estimate(&slot.placeholder()),
                        None => 0,
                    },
                })
                .sum(),
            ChatMessage::Assistant { items } => items
                .iter()
                .map(|item| match item.as_ref() {
                    AssistantItem::Text { text } | AssistantItem::Reasoning { text } => {
                        estimate(text)
                    }
                    AssistantItem::ToolCall {
                        name, arguments, ..
                    } => estimate(name) + json_len(arguments).div_ceil(4),
                })
                .sum(),
            ChatMessage::ToolResults { results } => {
                results.iter().map(|r| estimate(&r.output) + 4).sum()
            }
        };
    }
    total
}

/// About the length of `value` as compact JSON, without writing it out:
/// this runs before every model call, over every tool call of the context.
fn json_len(value: &Value) -> u64 {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 3,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_len(v) + 1).sum::<u64>(),
        Value::Object(fields) => {
            2 + fields
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_len(v))
                .sum::<u64>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_close_to_the_written_length() {
        let value = serde_json::json!({"path": "src/main.rs", "lines": [1, 20], "all": false});
        let written = value.to_string().len() as u64;
        let estimated = json_len(&value);
        assert!(
            estimated.abs_diff(written) * 5 <= written,
            "{estimated} vs {written}"
        );
    }
}
