//! The conversation as the worker holds it, and its projection into the
//! model's context.
//!
//! A [`Conversation`] only ever grows by entries that `SessionLog` confirmed
//! durable, so the model never sees anything a client could not. The
//! projection is a pure function of those entries (plus the flattened text of
//! user inputs, cached because resolving a `file_ref` reads the disk).

use std::collections::HashMap;

use uuid::Uuid;

use crate::input::{self, Resolvers};
use crate::protocol::{AssistantItem, InjectedItem, LogEntry, ToolResult};
use crate::provider::{ChatMessage, ModelRequest, ToolSpec};
use crate::workspace::Workspace;

pub struct Conversation {
    pub session_id: Uuid,
    entries: Vec<LogEntry>,
    /// Flattened model text of each `user_input`, by index into `entries`.
    flattened: HashMap<usize, String>,
    /// Tokens of the context at the last model call, as the provider counted
    /// them (input + output); `None` until a call reported usage.
    pub reported_tokens: Option<u64>,
}

impl Conversation {
    pub fn new(session_id: Uuid, entries: Vec<LogEntry>) -> Self {
        Self {
            session_id,
            entries,
            flattened: HashMap::new(),
            reported_tokens: None,
        }
    }

    pub fn entries(&self) -> &[LogEntry] {
        &self.entries
    }

    /// Records an entry that is now durable.
    pub fn push(&mut self, entry: LogEntry) {
        self.entries.push(entry);
    }

    /// Tool calls of the current turn that have no result yet, in order.
    /// (A turn that went on in a compacted session starts at its beginning.)
    pub fn unanswered_calls(&self) -> Vec<String> {
        let turn_start = self
            .entries
            .iter()
            .rposition(|e| matches!(e, LogEntry::UserInput { .. }))
            .unwrap_or(0);
        let mut open: Vec<String> = Vec::new();
        for entry in &self.entries[turn_start..] {
            match entry {
                LogEntry::AssistantItems { items } => {
                    for item in items {
                        if let AssistantItem::ToolCall { call_id, .. } = item {
                            open.push(call_id.clone());
                        }
                    }
                }
                LogEntry::ToolResults { results } => {
                    open.retain(|id| !results.iter().any(|r| &r.call_id == id));
                }
                _ => {}
            }
        }
        open
    }

    /// True when the last turn began and never ended (the pod died
    /// mid-turn). A turn that went on in a compacted session shows as model
    /// or tool entries after the summary.
    pub fn has_open_turn(&self) -> bool {
        for entry in self.entries.iter().rev() {
            match entry {
                LogEntry::TurnEnd { .. } | LogEntry::SessionStart { .. } => return false,
                LogEntry::UserInput { .. }
                | LogEntry::AssistantItems { .. }
                | LogEntry::ToolResults { .. } => return true,
                LogEntry::HookInjectedItems { .. } | LogEntry::Unknown => {}
            }
        }
        false
    }

    /// The model request for the conversation so far.
    pub fn project(
        &mut self,
        system: &str,
        tools: Vec<ToolSpec>,
        workspace: &Workspace,
        resolvers: &Resolvers,
    ) -> ModelRequest {
        let mut messages: Vec<ChatMessage> = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            match entry {
                LogEntry::UserInput { segments, .. } => {
                    let text = self
                        .flattened
                        .entry(index)
                        .or_insert_with(|| input::flatten(segments, workspace, resolvers));
                    messages.push(ChatMessage::User { text: text.clone() });
                }
                LogEntry::AssistantItems { items } => match messages.last_mut() {
                    Some(ChatMessage::Assistant { items: so_far }) => {
                        so_far.extend(items.iter().cloned())
                    }
                    _ => messages.push(ChatMessage::Assistant {
                        items: items.clone(),
                    }),
                },
                LogEntry::ToolResults { results } => match messages.last_mut() {
                    Some(ChatMessage::ToolResults { results: so_far }) => {
                        so_far.extend(results.iter().cloned())
                    }
                    _ => messages.push(ChatMessage::ToolResults {
                        results: results.clone(),
                    }),
                },
                LogEntry::HookInjectedItems { items } => {
                    for item in items {
                        messages.push(ChatMessage::User {
                            text: injected_text(item),
                        });
                    }
                }
                LogEntry::SessionStart { .. } | LogEntry::TurnEnd { .. } | LogEntry::Unknown => {}
            }
        }
        ModelRequest {
            system: system.to_owned(),
            messages,
            tools,
        }
    }
}

/// How pod-injected text reads to the model: labelled, so it is never
/// mistaken for something the user typed.
fn injected_text(item: &InjectedItem) -> String {
    match item.source.as_str() {
        "compact_summary" => format!(
            "[Summary of the conversation so far, written when it was compacted]\n{}",
            item.text
        ),
        source => format!("[{source}] {}", item.text),
    }
}

/// Results for tool calls that will never run, so the log always projects to
/// a valid model context.
pub fn missing_results(call_ids: Vec<String>, why: &str) -> Vec<ToolResult> {
    call_ids
        .into_iter()
        .map(|call_id| ToolResult {
            call_id,
            output: why.to_owned(),
            is_error: true,
        })
        .collect()
}
