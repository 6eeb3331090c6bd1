//! The pod's log entries and hints as ACP `session/update`s.
//!
//! Pure: [`Updates`] remembers only what it must to say each thing once —
//! which tool calls the editor has been told of, and whether a text block
//! already reached it as deltas — and returns the `update` objects (the
//! `params.update` of a `session/update`) for the caller to send.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::protocol::{AssistantItem, LogEntry, SegmentView};

/// The tool that sets the plan: its arguments are the plan.
const UPDATE_PLAN: &str = "update_plan";

/// How entries become updates: live (the text already streamed as
/// deltas) or replayed (`session/load`: every entry says it all).
#[derive(Debug, Default)]
pub struct Updates {
    /// Tool calls the editor has a `tool_call` for: later news is an update.
    announced: HashSet<String>,
}

impl Updates {
    /// A hint of the running turn: deltas become chunks, a tool call that
    /// starts streaming is announced at once (the editor shows it pending).
    pub fn hint(&mut self, event: &crate::protocol::Event) -> Vec<Value> {
        use crate::protocol::Event;
        match event {
            Event::TextDelta { text } if !text.is_empty() => {
                vec![chunk("agent_message_chunk", text)]
            }
            Event::ReasoningDelta { text } if !text.is_empty() => {
                vec![chunk("agent_thought_chunk", text)]
            }
            Event::ToolCallStart { call_id, name } => {
                self.announced.insert(call_id.clone());
                vec![json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": name,
                    "kind": kind(name),
                    "status": "pending",
                })]
            }
            _ => Vec::new(),
        }
    }

    /// One committed entry. `live`: its text came as deltas already, and a
    /// user input carrying one of `ours` (a run this editor sent) is not
    /// echoed back; replayed, everything is said.
    pub fn entry(&mut self, entry: &LogEntry, live: bool, ours: &HashSet<String>) -> Vec<Value> {
        match entry {
            LogEntry::UserInput {
                segments,
                request_id,
                ..
            } => {
                if live && request_id.as_ref().is_some_and(|id| ours.contains(id)) {
                    return Vec::new();
                }
                segments
                    .iter()
                    .filter_map(|segment| user_text(segment.view()))
                    .map(|text| chunk("user_message_chunk", &text))
                    .collect()
            }
            LogEntry::AssistantItems { items } => items
                .iter()
                .filter_map(|item| self.assistant_item(item, live))
                .collect(),
            LogEntry::ApprovalDecision {
                call_id,
                decision: crate::protocol::Decision::Deny,
                ..
            } => vec![status(call_id, "failed")],
            LogEntry::ToolResults { results } => results
                .iter()
                .map(|result| {
                    let state = if result.is_error {
                        "failed"
                    } else {
                        "completed"
                    };
                    json!({
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": result.call_id,
                        "status": state,
                        "content": [{"type": "content",
                                     "content": {"type": "text", "text": result.output}}],
                    })
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn assistant_item(&mut self, item: &AssistantItem, live: bool) -> Option<Value> {
        match item {
            AssistantItem::Text { text } if !live => Some(chunk("agent_message_chunk", text)),
            AssistantItem::Reasoning { text } if !live => Some(chunk("agent_thought_chunk", text)),
            AssistantItem::Text { .. } | AssistantItem::Reasoning { .. } => None,
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                if name == UPDATE_PLAN {
                    if let Some(plan) = plan(arguments) {
                        self.announced.insert(call_id.clone());
                        return Some(plan);
                    }
                }
                let mut update = json!({
                    "toolCallId": call_id,
                    "title": title(name, arguments),
                    "kind": kind(name),
                    "rawInput": arguments,
                });
                if let Some(path) = arguments.get("path").and_then(Value::as_str) {
                    update["locations"] = json!([{ "path": path }]);
                }
                if let Some(diff) = diff(name, arguments) {
                    update["content"] = json!([diff]);
                }
                let first = self.announced.insert(call_id.clone());
                update["sessionUpdate"] = if first {
                    update["status"] = json!("pending");
                    json!("tool_call")
                } else {
                    json!("tool_call_update")
                };
                Some(update)
            }
        }
    }
}

/// A text chunk of one of the three message kinds.
fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

fn status(call_id: &str, status: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status})
}

/// What a user's segment reads as in the editor: its text, a file as
/// `@path`, an image by its name.
fn user_text(segment: SegmentView<'_>) -> Option<String> {
    match segment {
        SegmentView::Text { text } | SegmentView::Paste { text, .. } => Some(text.to_owned()),
        SegmentView::FileRef { path } => Some(format!("@{path}")),
        SegmentView::KnowledgeRef { slug } => Some(format!("#{slug}")),
        SegmentView::WorkflowInvoke { slug, args } => Some(format!("/{slug} {args}")),
        SegmentView::Image { name, .. } => Some(format!("[image {}]", name.unwrap_or("pasted"))),
        SegmentView::Unknown { .. } => None,
    }
}

/// ACP's kind of a pod tool: the icon an editor shows.
pub(super) fn kind(tool: &str) -> &'static str {
    match tool {
        "read_file" | "list_dir" => "read",
        "write_file" | "edit_file" => "edit",
        "glob" | "grep" => "search",
        "bash" => "execute",
        "web_fetch" => "fetch",
        UPDATE_PLAN => "think",
        _ => "other",
    }
}

/// One line that says what the call does: the command, or the tool and
/// the path it touches.
fn title(tool: &str, arguments: &Value) -> String {
    let field = |name| arguments.get(name).and_then(Value::as_str);
    match (
        field("command"),
        field("path"),
        field("pattern"),
        field("url"),
    ) {
        (Some(command), ..) => command.to_owned(),
        (None, Some(path), ..) => format!("{tool} {path}"),
        (None, None, Some(pattern), _) => format!("{tool} {pattern}"),
        (None, None, None, Some(url)) => format!("{tool} {url}"),
        _ => tool.to_owned(),
    }
}

/// The change a file tool asks for, as ACP's diff: an edit's old and new
/// text, a write's whole new content.
fn diff(tool: &str, arguments: &Value) -> Option<Value> {
    let field = |name| arguments.get(name).and_then(Value::as_str);
    let path = field("path")?;
    match tool {
        "edit_file" => Some(json!({"type": "diff", "path": path,
            "oldText": field("old_string")?, "newText": field("new_string")?})),
        "write_file" => Some(json!({"type": "diff", "path": path,
            "oldText": null, "newText": field("content")?})),
        _ => None,
    }
}

/// `update_plan`'s arguments as ACP's plan, or `None` when they are not a
/// plan (the tool will refuse them, and say why in its result).
fn plan(arguments: &Value) -> Option<Value> {
    let items = arguments.get("items")?.as_array()?;
    let entries = items
        .iter()
        .map(|item| {
            let status = match item.get("status")?.as_str()? {
                "pending" => "pending",
                "in_progress" => "in_progress",
                "done" => "completed",
                _ => return None,
            };
            Some(
                json!({"content": item.get("text")?.as_str()?, "priority": "medium",
                        "status": status}),
            )
        })
        .collect::<Option<Vec<_>>>()?;
    Some(json!({"sessionUpdate": "plan", "entries": entries}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Event, Segment, ToolResult};

    fn ours() -> HashSet<String> {
        HashSet::from(["acp-1".to_owned()])
    }

    #[test]
    fn live_text_comes_from_deltas_and_replayed_text_from_entries() {
        let mut live = Updates::default();
        let delta = live.hint(&Event::TextDelta { text: "hi".into() });
        assert_eq!(delta[0]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(delta[0]["content"]["text"], "hi");
        let items = LogEntry::AssistantItems {
            items: vec![AssistantItem::Text { text: "hi".into() }],
        };
        assert!(live.entry(&items, true, &ours()).is_empty());
        let replayed = Updates::default().entry(&items, false, &ours());
        assert_eq!(replayed[0]["content"]["text"], "hi");
    }

    #[test]
    fn only_other_clients_input_is_echoed_live() {
        let input = |request_id: &str| LogEntry::UserInput {
            segments: vec![Segment::text("hello"), Segment::file_ref("src/a.rs")],
            at: String::new(),
            turn_id: None,
            request_id: Some(request_id.into()),
            resolved: Default::default(),
        };
        let mut updates = Updates::default();
        assert!(updates.entry(&input("acp-1"), true, &ours()).is_empty());
        let theirs = updates.entry(&input("send-1"), true, &ours());
        let texts: Vec<_> = theirs.iter().map(|u| &u["content"]["text"]).collect();
        assert_eq!(texts, ["hello", "@src/a.rs"]);
        assert_eq!(theirs[0]["sessionUpdate"], "user_message_chunk");
    }

    #[test]
    fn an_edit_is_announced_with_its_location_and_diff_then_settled() {
        let mut updates = Updates::default();
        let started = updates.hint(&Event::ToolCallStart {
            call_id: "c1".into(),
            name: "edit_file".into(),
        });
        assert_eq!(started[0]["sessionUpdate"], "tool_call");
        assert_eq!(started[0]["kind"], "edit");
        let call = LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: "c1".into(),
                name: "edit_file".into(),
                arguments: json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
            }],
        };
        let update = &updates.entry(&call, true, &ours())[0];
        assert_eq!(update["sessionUpdate"], "tool_call_update");
        assert_eq!(update["locations"], json!([{"path": "a.txt"}]));
        assert_eq!(
            update["content"][0],
            json!({"type": "diff", "path": "a.txt", "oldText": "x", "newText": "y"})
        );
        let failed = LogEntry::ToolResults {
            results: vec![ToolResult {
                call_id: "c1".into(),
                output: "denied".into(),
                is_error: true,
            }],
        };
        assert_eq!(updates.entry(&failed, true, &ours())[0]["status"], "failed");
    }

    #[test]
    fn a_plan_call_is_the_plan() {
        let mut updates = Updates::default();
        let call = LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: "p".into(),
                name: "update_plan".into(),
                arguments: json!({"items": [{"text": "read", "status": "done"},
                                            {"text": "fix", "status": "in_progress"}]}),
            }],
        };
        let plan = &updates.entry(&call, true, &ours())[0];
        assert_eq!(plan["sessionUpdate"], "plan");
        assert_eq!(plan["entries"][0]["status"], "completed");
        assert_eq!(plan["entries"][1]["content"], "fix");
    }
}
